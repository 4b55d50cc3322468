//! A client of a Kubernetes API server, for `loadlab k8s run`: the cluster and credentials a
//! kubeconfig names (a token, a client certificate, an exec plugin), objects created and
//! deleted, and pods, Jobs and logs read.
//!
//! Written on ureq rather than on kube-rs: these few REST calls do not need kube-rs and
//! k8s-openapi, whose build would take longer than the rest of loadlab's command line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

mod exec;

/// Longest any one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A call to the cluster failed, or its kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig cannot be read or lacks what is needed.
    #[error("kubeconfig {0}: {1}")]
    Config(PathBuf, String),
    /// The API server could not be reached.
    #[error("{what}: cannot reach the API server at {server}: {error}")]
    Unreachable {
        /// What was asked.
        what: String,
        /// The server's URL.
        server: String,
        /// Why.
        error: String,
    },
    /// The kubeconfig's exec plugin gave no credential when one was due again.
    #[error("{0}")]
    Credentials(String),
    /// The API server refused the call.
    #[error("{what}: the API server answered {status}: {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The `message` of its `Status`, or its body.
        message: String,
    },
}

impl KubeError {
    /// The HTTP status the API server answered, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            KubeError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A connection to one cluster's API server, in one namespace.
pub struct Kube {
    server: String,
    auth: Auth,
    namespace: String,
    /// What every agent's TLS is made of, a client certificate of an exec plugin's aside.
    tls: TlsSettings,
    /// The agent the calls go through, with the exec plugin's client certificate and key (PEM)
    /// it presents: made again when the plugin gives another (or none).
    connection: Mutex<(ureq::Agent, Option<(String, String)>)>,
}

/// How the calls say who they are, besides a client certificate.
enum Auth {
    /// No bearer token.
    None,
    /// The kubeconfig's token.
    Token(String),
    /// The token in a file, read at each call (a projected service account token is rotated
    /// in place).
    TokenFile(PathBuf),
    /// An exec plugin's credential, asked for again as it expires or when the server refuses it
    /// (for a user with no token and no client certificate of its own).
    Exec(Box<exec::ExecPlugin>),
}

/// The TLS settings of a kubeconfig's cluster and user.
struct TlsSettings {
    /// The cluster's certificate authority, if the kubeconfig names one.
    roots: Option<Arc<Vec<ureq::tls::Certificate<'static>>>>,
    /// `insecure-skip-tls-verify`.
    insecure: bool,
    /// The user's own client certificate and key (PEM): its exec plugin is then not run.
    own_pair: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    /// An agent with these settings, presenting the user's own client certificate, else
    /// `plugin_pair` (PEM), else none.
    fn agent(&self, plugin_pair: Option<&(String, String)>) -> Result<ureq::Agent, String> {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(roots) = &self.roots {
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(roots.clone()));
        }
        if self.insecure {
            tls = tls.disable_verification(true);
        }
        let pair = match (&self.own_pair, plugin_pair) {
            (Some((cert, key)), _) => Some((&cert[..], &key[..])),
            (None, Some((cert, key))) => Some((cert.as_bytes(), key.as_bytes())),
            (None, None) => None,
        };
        if let Some((cert, key)) = pair {
            let chain = pem_certificates(cert).map_err(|e| format!("client-certificate: {e}"))?;
            let key =
                ureq::tls::PrivateKey::from_pem(key).map_err(|e| format!("client-key: {e}"))?;
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        Ok(ureq::Agent::config_builder()
            .timeout_global(Some(CALL_TIMEOUT))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .user_agent(concat!("loadlab/", env!("CARGO_PKG_VERSION")))
            .build()
            .into())
    }
}

/// The kubeconfig fields used here.
#[derive(Debug, Deserialize)]
struct KubeConfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Deserialize)]
struct Cluster {
    server: String,
    #[serde(rename = "certificate-authority")]
    certificate_authority: Option<PathBuf>,
    #[serde(rename = "certificate-authority-data")]
    certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Debug, Default, Deserialize)]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    #[serde(rename = "client-certificate")]
    client_certificate: Option<PathBuf>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<PathBuf>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
    exec: Option<exec::ExecConfig>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Debug, Deserialize)]
struct Context {
    cluster: String,
    user: Option<String>,
    namespace: Option<String>,
}

/// The kubeconfig `kubectl` would use: `$KUBECONFIG` (its first file), else `~/.kube/config`.
pub fn default_kubeconfig() -> PathBuf {
    if let Some(list) = std::env::var_os("KUBECONFIG") {
        if let Some(first) = std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty()) {
            return first;
        }
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".kube").join("config")
}

impl Kube {
    /// Connects (lazily) to the cluster of `path`'s current context, in `namespace` or the
    /// context's (else `default`). Supports tokens, token files, client certificates and exec
    /// plugins (run once here, and again as their credentials expire or are refused).
    pub fn from_kubeconfig(path: &Path, namespace: Option<&str>) -> Result<Kube, KubeError> {
        let bad = |why: String| KubeError::Config(path.to_path_buf(), why);
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let config: KubeConfig = serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let context_name = config
            .current_context
            .clone()
            .ok_or_else(|| bad("it has no current-context".into()))?;
        let context = &config
            .contexts
            .iter()
            .find(|c| c.name == context_name)
            .ok_or_else(|| bad(format!("no context named {context_name:?}")))?
            .context;
        let cluster = &config
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .ok_or_else(|| bad(format!("no cluster named {:?}", context.cluster)))?
            .cluster;
        let user = match &context.user {
            Some(name) => {
                &config
                    .users
                    .iter()
                    .find(|u| &u.name == name)
                    .ok_or_else(|| bad(format!("no user named {name:?}")))?
                    .user
            }
            None => &User::default(),
        };
        if !cluster.server.starts_with("https://") && !cluster.server.starts_with("http://") {
            return Err(bad(format!(
                "the cluster's server {:?} is not an http(s) URL",
                cluster.server
            )));
        }
        // Files named relative to the kubeconfig, and base64 data, as kubectl reads them.
        let read = |file: &Option<PathBuf>, data: &Option<String>, what: &str| {
            if let Some(d) = data {
                use base64::Engine;
                let clean: String = d.chars().filter(|c| !c.is_whitespace()).collect();
                return base64::engine::general_purpose::STANDARD
                    .decode(clean)
                    .map(Some)
                    .map_err(|e| bad(format!("{what}-data is not base64: {e}")));
            }
            match file {
                Some(f) => std::fs::read(base.join(f))
                    .map(Some)
                    .map_err(|e| bad(format!("{what} {}: {e}", f.display()))),
                None => Ok(None),
            }
        };
        let ca = read(
            &cluster.certificate_authority,
            &cluster.certificate_authority_data,
            "certificate-authority",
        )?;
        let roots = match &ca {
            Some(pem) => Some(Arc::new(pem_certificates(pem).map_err(&bad)?)),
            None => None,
        };
        let cert = read(
            &user.client_certificate,
            &user.client_certificate_data,
            "client-certificate",
        )?;
        let key = read(&user.client_key, &user.client_key_data, "client-key")?;
        if let Some(provider) = &user.auth_provider {
            return Err(bad(format!(
                "its user's auth-provider ({}) is not read: give the user an exec plugin instead \
                 (as kubectl asks since 1.26), or a token",
                provider["name"].as_str().unwrap_or("unnamed")
            )));
        }
        let tls = TlsSettings {
            roots,
            insecure: cluster.insecure_skip_tls_verify,
            own_pair: cert.zip(key),
        };
        let (auth, plugin_pair) = match (&user.token, &user.token_file, &user.exec) {
            (Some(t), _, _) => (Auth::Token(t.clone()), None),
            (None, Some(f), _) => {
                let file = base.join(f);
                std::fs::read_to_string(&file)
                    .map_err(|e| bad(format!("tokenFile {}: {e}", f.display())))?;
                (Auth::TokenFile(file), None)
            }
            // As kubectl (client-go's exec authenticator): a user with a token or a client
            // certificate of its own authenticates with it, and its exec plugin is not run.
            (None, None, Some(config)) if tls.own_pair.is_none() => {
                use base64::Engine;
                let mut about = serde_json::json!({
                    "server": cluster.server,
                    "insecure-skip-tls-verify": cluster.insecure_skip_tls_verify,
                });
                if let Some(pem) = &ca {
                    about["certificate-authority-data"] =
                        base64::engine::general_purpose::STANDARD.encode(pem).into();
                }
                let plugin = exec::ExecPlugin::new(config.clone(), base, about).map_err(&bad)?;
                let given = plugin.credential().map_err(&bad)?;
                (Auth::Exec(Box::new(plugin)), given.client_pem)
            }
            (None, None, _) => (Auth::None, None),
        };
        let agent = tls.agent(plugin_pair.as_ref()).map_err(&bad)?;
        Ok(Kube {
            server: cluster.server.trim_end_matches('/').to_string(),
            auth,
            namespace: namespace
                .map(str::to_string)
                .or_else(|| context.namespace.clone())
                .unwrap_or_else(|| "default".into()),
            tls,
            connection: Mutex::new((agent, plugin_pair)),
        })
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The namespace the objects go to.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The collection path of `object`'s kind in the namespace (`/apis/batch/v1/…/jobs`).
    fn collection(&self, object: &Value) -> String {
        let api = object["apiVersion"].as_str().unwrap_or("v1");
        let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
        let group = match api {
            "v1" => "/api/v1".to_string(),
            other => format!("/apis/{other}"),
        };
        format!("{group}/namespaces/{}/{kind}s", self.namespace)
    }

    /// What `object` is, in words (`Job loadlab`).
    fn what(object: &Value) -> String {
        format!(
            "{} {}",
            object["kind"].as_str().unwrap_or("object"),
            object["metadata"]["name"].as_str().unwrap_or("?")
        )
    }

    /// Creates `object` in the namespace.
    pub fn create(&self, object: &Value) -> Result<Value, KubeError> {
        let what = format!("creating {}", Kube::what(object));
        let url = format!("{}{}", self.server, self.collection(object));
        let body = serde_json::to_vec(object).expect("a JSON value serializes");
        let resp = self.send(&what, |agent, token| {
            authorized(agent.post(&url), token)
                .header("Content-Type", "application/json")
                .send(&body[..])
        })?;
        self.answer(&what, resp)
    }

    /// Deletes `object` and what it owns (a Job's pods); one already gone is no error.
    pub fn delete(&self, object: &Value) -> Result<(), KubeError> {
        let what = format!("deleting {}", Kube::what(object));
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let url = format!(
            "{}{}/{name}?propagationPolicy=Background",
            self.server,
            self.collection(object)
        );
        let resp = self.send(&what, |agent, token| {
            authorized(agent.delete(&url), token).call()
        })?;
        match self.answer(&what, resp) {
            Err(e) if e.status() == Some(404) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// `GET path` (from the server's root), as JSON.
    pub fn get(&self, path: &str) -> Result<Value, KubeError> {
        let what = format!("reading {path}");
        let url = format!("{}{path}", self.server);
        let resp = self.send(&what, |agent, token| {
            authorized(agent.get(&url), token).call()
        })?;
        self.answer(&what, resp)
    }

    /// The pods of the namespace that carry `selector` (`key=value`).
    pub fn pods(&self, selector: &str) -> Result<Vec<Value>, KubeError> {
        let list = self.get(&format!(
            "/api/v1/namespaces/{}/pods?labelSelector={}",
            self.namespace,
            encode(selector)
        ))?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// Job `name` of the namespace.
    pub fn job(&self, name: &str) -> Result<Value, KubeError> {
        self.get(&format!(
            "/apis/batch/v1/namespaces/{}/jobs/{name}",
            self.namespace
        ))
    }

    /// The log of pod `pod`'s container, or its last `tail` lines.
    pub fn log(&self, pod: &str, tail: Option<u32>) -> Result<String, KubeError> {
        let mut path = format!("/api/v1/namespaces/{}/pods/{pod}/log", self.namespace);
        if let Some(n) = tail {
            path.push_str(&format!("?tailLines={n}"));
        }
        let what = format!("reading pod {pod}'s log");
        let url = format!("{}{path}", self.server);
        let mut resp = self.send(&what, |agent, token| {
            authorized(agent.get(&url), token).call()
        })?;
        if !resp.status().is_success() {
            return self.answer(&what, resp).map(|_| String::new());
        }
        resp.body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_string()
            .map_err(|e| self.unreachable(&what, e))
    }

    /// The agent for the next call and the bearer token it carries, if any: an exec plugin's
    /// credential is asked for again when it is about to expire, and the client certificate it
    /// gives (a new one, or none) is presented from then on.
    fn credentials(&self) -> Result<(ureq::Agent, Option<String>), KubeError> {
        let refused = |why: String| KubeError::Credentials(format!("the kubeconfig's user: {why}"));
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let token = match &self.auth {
            Auth::None => None,
            Auth::Token(t) => Some(t.clone()),
            Auth::TokenFile(file) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| refused(format!("tokenFile {}: {e}", file.display())))?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(refused(format!("tokenFile {} is empty", file.display())));
                }
                Some(token.to_string())
            }
            Auth::Exec(plugin) => {
                let given = plugin.credential().map_err(refused)?;
                if given.client_pem != connection.1 {
                    connection.0 = self
                        .tls
                        .agent(given.client_pem.as_ref())
                        .map_err(|e| refused(format!("its exec plugin's {e}")))?;
                    connection.1 = given.client_pem;
                }
                given.token
            }
        };
        Ok((connection.0.clone(), token))
    }

    /// Makes a call with `request` (given the agent and the bearer token) and returns the
    /// answer. A call whose exec plugin credential was refused (401) is made once more with a
    /// credential asked for anew: kubectl asks for one on a 401 too, but leaves the call failed.
    /// Sending it again is safe, a create included: the API server refuses a credential before
    /// it authorizes or stores anything.
    fn send(
        &self,
        what: &str,
        request: impl Fn(
            &ureq::Agent,
            Option<&str>,
        ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, KubeError> {
        let mut again = matches!(self.auth, Auth::Exec(_));
        loop {
            let (agent, token) = self.credentials()?;
            let resp = request(&agent, token.as_deref()).map_err(|e| self.unreachable(what, e))?;
            match &self.auth {
                Auth::Exec(plugin) if again && resp.status() == 401 => {
                    plugin.forget();
                    again = false;
                }
                _ => return Ok(resp),
            }
        }
    }

    /// A call that got no answer.
    fn unreachable(&self, what: &str, error: ureq::Error) -> KubeError {
        KubeError::Unreachable {
            what: what.to_string(),
            server: self.server.clone(),
            error: error.to_string(),
        }
    }

    /// The JSON of a successful answer, or why the call failed.
    fn answer(
        &self,
        what: &str,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> Result<Value, KubeError> {
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(json);
        }
        let message = json["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| text.trim().chars().take(300).collect());
        Err(KubeError::Refused {
            what: what.to_string(),
            status,
            message,
        })
    }
}

/// `req` with the bearer token `token`, if any.
fn authorized<B>(req: ureq::RequestBuilder<B>, token: Option<&str>) -> ureq::RequestBuilder<B> {
    match token {
        Some(t) => req.header("Authorization", format!("Bearer {t}")),
        None => req,
    }
}

/// The certificates of a PEM file.
fn pem_certificates(pem: &[u8]) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err("no certificate in its PEM".into());
    }
    Ok(certs)
}

/// `s` percent-encoded for a query string (everything but letters, digits and `-_.~`).
fn encode(s: &str) -> String {
    const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, QUERY).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_with_a_token_and_a_relative_ca_names_its_server_and_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let ca = "-----BEGIN CERTIFICATE-----\nMIIBiTCCAS+gAwIBAgIUY6iDRZoYLCbkPbofY2J5GXxEtwowCgYIKoZIzj0EAwIw\nGjEYMBYGA1UEAwwPbG9hZGxhYiB0ZXN0IGNhMB4XDTI2MTEzMDIxMzIzOVoXDTM2\nMTEyNzIxMzIzOVowGjEYMBYGA1UEAwwPbG9hZGxhYiB0ZXN0IGNhMFkwEwYHKoZI\nzj0CAQYIKoZIzj0DAQcDQgAE3wKeZxn78gamvh6+HGo41NoRxQAwnj5LzA96YQgs\n+jGep4krVVq/980/Mb1jW6PcJYSEpPrL8wdRZgtl7wYOGqNTMFEwHQYDVR0OBBYE\nFMhtDkWNb0WX9md2Pwxr7GLuvIuYMB8GA1UdIwQYMBaAFMhtDkWNb0WX9md2Pwxr\n7GLuvIuYMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAIQw8uc+\nhF1ApAN6omdhUCrKZ1UQ/xwp5uacnEu9kleoAiA6kpTHM1eQizCIByUCLxALyi0t\nGTg2ClOb8uCPBVSqcQ==\n-----END CERTIFICATE-----\n";
        std::fs::write(dir.path().join("ca.crt"), ca).unwrap();
        let config = dir.path().join("config");
        std::fs::write(
            &config,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443/\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    token: abc\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: load\ncurrent-context: x\n",
        )
        .unwrap();
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        assert_eq!(kube.server(), "https://127.0.0.1:6443");
        assert_eq!(kube.namespace(), "load");
        assert_eq!(kube.credentials().unwrap().1.as_deref(), Some("abc"));
        let job = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job"});
        assert_eq!(kube.collection(&job), "/apis/batch/v1/namespaces/load/jobs");
        let pvc = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"});
        assert_eq!(
            kube.collection(&pvc),
            "/api/v1/namespaces/load/persistentvolumeclaims"
        );
        let other = Kube::from_kubeconfig(&config, Some("elsewhere")).unwrap();
        assert_eq!(other.namespace(), "elsewhere");
        assert_eq!(encode("loadlab/run=x y"), "loadlab%2Frun%3Dx%20y");
    }

    /// A kubeconfig in `dir` whose user runs `plugin` (a shell script written there) with
    /// `args`, against the server at `server`.
    fn exec_kubeconfig(dir: &Path, server: &str, plugin: &str, args: &str) -> PathBuf {
        let script = dir.join("plugin.sh");
        std::fs::write(&script, plugin).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        kubeconfig(
            dir,
            server,
            &format!(
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./plugin.sh\n      args: {args}\n      env:\n      - name: WHO\n        value: tester\n      provideClusterInfo: true\n      interactiveMode: Never\n"
            ),
        )
    }

    /// A kubeconfig `dir/config` whose one context is the cluster at `server` and a user of
    /// the fields `user` (YAML, indented under `user:`).
    fn kubeconfig(dir: &Path, server: &str, user: &str) -> PathBuf {
        let config = dir.join("config");
        std::fs::write(
            &config,
            format!(
                "clusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        config
    }

    /// Reads one request's head from `conn` (lowercase) and answers `status` with `{}`, closing
    /// the connection.
    fn answer_one(
        conn: &mut (impl std::io::Read + std::io::Write),
        status: impl Fn(&str) -> u16,
    ) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_lowercase();
        let code = status(&head);
        write!(
            conn,
            "HTTP/1.1 {code} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        conn.flush().unwrap();
        head
    }

    /// Answers `n` plain HTTP requests on `listener`, each with the status `status` gives its
    /// head; the heads, in order. Fails when a request has not come within 10 s.
    fn serve(
        listener: std::net::TcpListener,
        n: usize,
        status: impl Fn(&str) -> u16 + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<String>> {
        std::thread::spawn(move || {
            (0..n)
                .map(|i| answer_one(&mut accept_within(&listener, i), &status))
                .collect()
        })
    }

    /// The next connection to `listener`, which must come within 10 s (request `i`, 0-based).
    fn accept_within(listener: &std::net::TcpListener, i: usize) -> std::net::TcpStream {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match listener.accept() {
                Ok((conn, _)) => {
                    conn.set_nonblocking(false).unwrap();
                    return conn;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "request {} never came",
                        i + 1
                    );
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    #[test]
    fn an_exec_plugins_token_is_sent_and_asked_for_again_only_as_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        // The plugin counts its runs, checks what kubectl would give it, and answers a token
        // good for `$1` from now.
        let plugin = r#"#!/bin/sh
echo run >> "$(dirname "$0")/runs"
for want in '"kind":"ExecCredential"' '"interactive":false' '"server":"http://127.0.0.1:'; do
  case "$KUBERNETES_EXEC_INFO" in
    *"$want"*) ;;
    *) echo "no $want in $KUBERNETES_EXEC_INFO" >&2; exit 3 ;;
  esac
done
[ "$WHO" = tester ] || { echo "no WHO" >&2; exit 4; }
at=$(date -u -d "@$(( $(date +%s) + $1 ))" +%Y-%m-%dT%H:%M:%SZ)
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"%s"}}' "$1" "$at"
"#;
        let runs = || {
            std::fs::read_to_string(dir.path().join("runs"))
                .unwrap_or_default()
                .lines()
                .count()
        };
        // Good for an hour: run once, when the kubeconfig is read.
        let config = exec_kubeconfig(dir.path(), &server, plugin, "[\"3600\"]");
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        assert_eq!(runs(), 1);
        let answered = serve(listener, 1, |_| 200);
        kube.get("/api").unwrap();
        let heads = answered.join().unwrap();
        assert!(
            heads[0].contains("authorization: bearer tok-3600"),
            "{heads:?}"
        );
        assert_eq!(runs(), 1, "an unexpired token is not asked for again");
        // Good for 5 s, within the 10 s kept in hand: asked for again at each call.
        std::fs::remove_file(dir.path().join("runs")).unwrap();
        let config = exec_kubeconfig(dir.path(), &server, plugin, "[\"5\"]");
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        assert_eq!(kube.credentials().unwrap().1.as_deref(), Some("tok-5"));
        assert_eq!(runs(), 2);
        // A plugin that fails, or is missing, is a one-line error naming it.
        let config = exec_kubeconfig(
            dir.path(),
            &server,
            "#!/bin/sh\necho 'not logged in' >&2\nexit 1\n",
            "[]",
        );
        let e = Kube::from_kubeconfig(&config, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("./plugin.sh failed") && e.contains("not logged in"),
            "{e}"
        );
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("./plugin.sh", "no-such-plugin-here");
        std::fs::write(&config, text).unwrap();
        let e = Kube::from_kubeconfig(&config, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no-such-plugin-here could not start"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_refused_exec_token_is_asked_for_again_once_and_a_static_token_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        // A token without an expiry, numbered by the plugin's runs.
        let plugin = r#"#!/bin/sh
echo run >> "$(dirname "$0")/runs"
n=$(wc -l < "$(dirname "$0")/runs")
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok-%s"}}' $n
"#;
        let config = exec_kubeconfig(dir.path(), &server, plugin, "[]");
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        // The first token is refused: the plugin runs again and the call goes through.
        let answered = serve(listener.try_clone().unwrap(), 2, |head| {
            if head.contains("bearer tok-1\r\n") {
                401
            } else {
                200
            }
        });
        kube.get("/api").unwrap();
        let heads = answered.join().unwrap();
        assert!(heads[1].contains("bearer tok-2\r\n"), "{heads:?}");
        let runs = || {
            std::fs::read_to_string(dir.path().join("runs"))
                .unwrap()
                .lines()
                .count()
        };
        assert_eq!(runs(), 2);
        // A server that refuses every token: one more run and one more try, then the 401.
        let answered = serve(listener.try_clone().unwrap(), 2, |_| 401);
        let e = kube.get("/api").unwrap_err();
        assert_eq!(e.status(), Some(401), "{e}");
        let heads = answered.join().unwrap();
        assert!(heads[0].contains("bearer tok-2\r\n"), "{heads:?}");
        assert!(heads[1].contains("bearer tok-3\r\n"), "{heads:?}");
        assert_eq!(runs(), 3);
        // The kubeconfig's own token is refused once and for all.
        let text = std::fs::read_to_string(&config).unwrap();
        let start = text.find("    exec:").unwrap();
        let end = text.find("contexts:").unwrap();
        std::fs::write(
            &config,
            format!("{}    token: mine\n{}", &text[..start], &text[end..]),
        )
        .unwrap();
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        let answered = serve(listener, 1, |_| 401);
        assert_eq!(kube.get("/api").unwrap_err().status(), Some(401));
        assert!(answered.join().unwrap()[0].contains("bearer mine\r\n"));
    }

    #[test]
    fn a_user_with_its_own_token_or_certificate_does_not_run_its_exec_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let plugin = "#!/bin/sh\necho run >> \"$(dirname \"$0\")/runs\"\nexit 1\n";
        let config = exec_kubeconfig(dir.path(), "https://127.0.0.1:6443", plugin, "[]");
        let text = std::fs::read_to_string(&config).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["me".to_string()]).unwrap();
        use base64::Engine;
        let data = |pem: String| base64::engine::general_purpose::STANDARD.encode(pem);
        for own in [
            "    token: mine\n".to_string(),
            format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                data(made.cert.pem()),
                data(made.signing_key.serialize_pem())
            ),
        ] {
            std::fs::write(
                &config,
                text.replace("    exec:\n", &format!("{own}    exec:\n")),
            )
            .unwrap();
            let kube = Kube::from_kubeconfig(&config, None).unwrap();
            assert!(
                !matches!(kube.auth, Auth::Exec(_)),
                "the plugin is the user's way in beside {own}"
            );
        }
        assert!(!dir.path().join("runs").exists(), "the plugin ran");
    }

    #[test]
    fn a_token_file_is_read_again_at_each_call() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        std::fs::write(dir.path().join("token"), "first\n").unwrap();
        let config = kubeconfig(dir.path(), &server, "    tokenFile: token\n");
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        let answered = serve(listener, 2, |_| 200);
        kube.get("/api").unwrap();
        // Rotated in place, as the kubelet rotates a projected service account token.
        std::fs::write(dir.path().join("token"), "second\n").unwrap();
        kube.get("/api").unwrap();
        let heads = answered.join().unwrap();
        assert!(heads[0].contains("bearer first\r\n"), "{heads:?}");
        assert!(heads[1].contains("bearer second\r\n"), "{heads:?}");
        std::fs::write(dir.path().join("token"), "\n").unwrap();
        let e = kube.get("/api").unwrap_err().to_string();
        assert!(e.contains("tokenFile") && e.contains("is empty"), "{e}");
        std::fs::remove_file(dir.path().join("token")).unwrap();
        let e = kube.get("/api").unwrap_err().to_string();
        assert!(e.contains("tokenFile"), "{e}");
    }

    #[test]
    fn an_exec_plugins_client_certificate_is_presented_and_replaced_when_refused() {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        // A CA, the server's certificate for 127.0.0.1, and two client certificates.
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "test cluster CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let params = CertificateParams::new(vec![name.to_string()]).unwrap();
            (params.signed_by(&key, &issuer).unwrap(), key)
        };
        let (server_cert, server_key) = leaf("127.0.0.1");
        let clients = [leaf("first"), leaf("second")];
        // The plugin's answers: the first certificate, then the second.
        for (i, (cert, key)) in clients.iter().enumerate() {
            let answer = serde_json::json!({
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {"clientCertificateData": cert.pem(), "clientKeyData": key.serialize_pem()},
            });
            std::fs::write(
                dir.path().join(format!("answer-{}", i + 1)),
                answer.to_string(),
            )
            .unwrap();
        }
        let plugin = "#!/bin/sh\nd=\"$(dirname \"$0\")\"\necho run >> \"$d/runs\"\ncat \"$d/answer-$(wc -l < \"$d/runs\")\"\n";
        // A TLS server that asks for a client certificate of the CA's and refuses the first.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .build()
        .unwrap();
        let tls = std::sync::Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_client_cert_verifier(verifier)
                .with_single_cert(
                    vec![server_cert.der().clone()],
                    rustls::pki_types::PrivatePkcs8KeyDer::from(server_key.serialize_der()).into(),
                )
                .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = format!("https://{}", listener.local_addr().unwrap());
        let first = clients[0].0.der().clone();
        // Each connection: which client certificate it presented.
        let answered = std::thread::spawn(move || {
            (0..2)
                .map(|i| {
                    let tcp = accept_within(&listener, i);
                    let conn = rustls::ServerConnection::new(tls.clone()).unwrap();
                    let mut stream = rustls::StreamOwned::new(conn, tcp);
                    while stream.conn.is_handshaking() {
                        stream.conn.complete_io(&mut stream.sock).unwrap();
                    }
                    let peer = stream.conn.peer_certificates().unwrap()[0].clone();
                    let is_first = peer == first;
                    answer_one(&mut stream, |_| if is_first { 401 } else { 200 });
                    is_first
                })
                .collect::<Vec<bool>>()
        });
        let config = exec_kubeconfig(dir.path(), &server, plugin, "[]");
        let text = std::fs::read_to_string(&config).unwrap();
        let with_ca = text.replace("\nusers:", "\n    certificate-authority: ca.crt\nusers:");
        std::fs::write(&config, with_ca).unwrap();
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        kube.get("/api").unwrap();
        assert_eq!(answered.join().unwrap(), [true, false]);
        let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
        assert_eq!(runs.lines().count(), 2);
    }

    #[test]
    fn a_kubeconfig_without_what_it_needs_is_a_one_line_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        for (text, says) in [
            ("clusters: []\n", "no current-context"),
            ("current-context: x\n", "no context named \"x\""),
            (
                "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n",
                "no cluster named \"c\"",
            ),
            (
                "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\nclusters:\n- name: c\n  cluster:\n    server: https://h\n    certificate-authority: missing.crt\n",
                "missing.crt",
            ),
            (
                "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\nclusters:\n- name: c\n  cluster:\n    server: https://h\nusers:\n- name: u\n  user:\n    auth-provider:\n      name: gcp\n",
                "auth-provider (gcp) is not read",
            ),
            (
                "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\nclusters:\n- name: c\n  cluster:\n    server: https://h\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: login\n      interactiveMode: Always\n",
                "asks for a terminal",
            ),
        ] {
            std::fs::write(&config, text).unwrap();
            let e = Kube::from_kubeconfig(&config, None).err().unwrap().to_string();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
