//! A client of a Kubernetes API server, for `loadlab k8s run`: the cluster and credentials a
//! kubeconfig names (a token, a client certificate, an exec plugin), objects created and
//! deleted, and pods, Jobs and logs read.
//!
//! Written on ureq rather than on kube-rs: these few REST calls do not need kube-rs and
//! k8s-openapi, whose build would take longer than the rest of loadlab's command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
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
    agent: ureq::Agent,
    server: String,
    auth: Auth,
    namespace: String,
}

/// How the calls say who they are, besides a client certificate.
enum Auth {
    /// No bearer token.
    None,
    /// A token of the kubeconfig's, or of its token file.
    Token(String),
    /// An exec plugin's token, asked for again as it expires.
    Exec(Box<exec::ExecPlugin>),
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
    /// plugins (run once here, and again as their tokens expire).
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
        let mut tls = ureq::tls::TlsConfig::builder();
        let ca = read(
            &cluster.certificate_authority,
            &cluster.certificate_authority_data,
            "certificate-authority",
        )?;
        if let Some(pem) = &ca {
            let certs = pem_certificates(pem).map_err(&bad)?;
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)));
        }
        if cluster.insecure_skip_tls_verify {
            tls = tls.disable_verification(true);
        }
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
        let plugin = match &user.exec {
            Some(config) => {
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
                Some((plugin, given))
            }
            None => None,
        };
        // A client certificate of the kubeconfig's, else of its exec plugin's.
        let from_plugin = plugin
            .as_ref()
            .and_then(|(_, c)| c.client_pem.clone())
            .map(|(c, k)| (c.into_bytes(), k.into_bytes()));
        let pair = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => from_plugin,
        };
        if let Some((cert, key)) = pair {
            let chain = pem_certificates(&cert).map_err(&bad)?;
            let key = ureq::tls::PrivateKey::from_pem(&key)
                .map_err(|e| bad(format!("client-key: {e}")))?;
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        let auth = match (&user.token, &user.token_file, plugin) {
            (Some(t), _, _) => Auth::Token(t.clone()),
            (None, Some(f), _) => Auth::Token(
                std::fs::read_to_string(base.join(f))
                    .map_err(|e| bad(format!("tokenFile {}: {e}", f.display())))?
                    .trim()
                    .to_string(),
            ),
            (None, None, Some((plugin, _))) => Auth::Exec(Box::new(plugin)),
            (None, None, None) => Auth::None,
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(CALL_TIMEOUT))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .user_agent(concat!("loadlab/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Kube {
            agent,
            server: cluster.server.trim_end_matches('/').to_string(),
            auth,
            namespace: namespace
                .map(str::to_string)
                .or_else(|| context.namespace.clone())
                .unwrap_or_else(|| "default".into()),
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
        let req = self.with_auth(self.agent.post(&url))?;
        let resp = req
            .header("Content-Type", "application/json")
            .send(&body[..]);
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
        let resp = self.with_auth(self.agent.delete(&url))?.call();
        match self.answer(&what, resp) {
            Err(e) if e.status() == Some(404) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// `GET path` (from the server's root), as JSON.
    pub fn get(&self, path: &str) -> Result<Value, KubeError> {
        let what = format!("reading {path}");
        let resp = self
            .with_auth(self.agent.get(format!("{}{path}", self.server)))?
            .call();
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
        let resp = self.with_auth(self.agent.get(&url))?.call();
        match resp {
            Ok(mut r) if r.status().is_success() => r
                .body_mut()
                .with_config()
                .limit(256 << 20)
                .read_to_string()
                .map_err(|e| KubeError::Unreachable {
                    what,
                    server: self.server.clone(),
                    error: e.to_string(),
                }),
            other => self.answer(&what, other).map(|_| String::new()),
        }
    }

    /// The bearer token the next call carries, if any (an exec plugin's, asked for again when
    /// it is about to expire).
    fn bearer(&self) -> Result<Option<String>, KubeError> {
        match &self.auth {
            Auth::None => Ok(None),
            Auth::Token(t) => Ok(Some(t.clone())),
            Auth::Exec(plugin) => plugin
                .credential()
                .map(|c| c.token)
                .map_err(|why| KubeError::Credentials(format!("the kubeconfig's user: {why}"))),
        }
    }

    fn with_auth<B>(
        &self,
        req: ureq::RequestBuilder<B>,
    ) -> Result<ureq::RequestBuilder<B>, KubeError> {
        Ok(match self.bearer()? {
            Some(t) => req.header("Authorization", format!("Bearer {t}")),
            None => req,
        })
    }

    /// The JSON of a successful answer, or why the call failed.
    fn answer(
        &self,
        what: &str,
        resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, KubeError> {
        let mut resp = resp.map_err(|e| KubeError::Unreachable {
            what: what.to_string(),
            server: self.server.clone(),
            error: e.to_string(),
        })?;
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
        assert_eq!(kube.bearer().unwrap().as_deref(), Some("abc"));
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
        let config = dir.join("config");
        std::fs::write(
            &config,
            format!(
                "clusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./plugin.sh\n      args: {args}\n      env:\n      - name: WHO\n        value: tester\n      provideClusterInfo: true\n      interactiveMode: Never\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        config
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
        let answered = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .unwrap();
            String::from_utf8_lossy(&head).to_lowercase()
        });
        kube.get("/api").unwrap();
        let head = answered.join().unwrap();
        assert!(head.contains("authorization: bearer tok-3600"), "{head}");
        assert_eq!(runs(), 1, "an unexpired token is not asked for again");
        // Good for 5 s, within the 10 s kept in hand: asked for again at each call.
        std::fs::remove_file(dir.path().join("runs")).unwrap();
        let config = exec_kubeconfig(dir.path(), &server, plugin, "[\"5\"]");
        let kube = Kube::from_kubeconfig(&config, None).unwrap();
        assert_eq!(kube.bearer().unwrap().as_deref(), Some("tok-5"));
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
