//! A kubeconfig user's `exec` credential plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`,
//! `kubelogin`…), run as kubectl runs it: the command with its arguments and environment, the
//! request in `KUBERNETES_EXEC_INFO`, an `ExecCredential` read from its standard output, and the
//! plugin run again when what it gave is about to expire or was refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::{json, Value};

/// A user's `exec` section.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ExecConfig {
    command: String,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<ExecEnv>>,
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    #[serde(rename = "installHint")]
    install_hint: Option<String>,
    #[serde(rename = "provideClusterInfo", default)]
    provide_cluster_info: bool,
    #[serde(rename = "interactiveMode")]
    interactive_mode: Option<String>,
}

/// One variable of a plugin's environment.
#[derive(Debug, Clone, Deserialize)]
struct ExecEnv {
    name: String,
    value: String,
}

/// What a plugin gave: a bearer token, or a client certificate and key (PEM), and when it
/// expires.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Credential {
    /// The bearer token.
    pub token: Option<String>,
    /// The client certificate and its key, PEM.
    pub client_pem: Option<(String, String)>,
    /// When it stops being good.
    pub expires: Option<SystemTime>,
}

/// Time before a credential's expiry when the plugin is asked for a new one.
const EARLY: Duration = Duration::from_secs(10);

/// A plugin ready to run.
#[derive(Debug)]
pub(super) struct ExecPlugin {
    config: ExecConfig,
    api_version: String,
    /// The kubeconfig's directory: a command with a `/` in it is relative to it.
    base: PathBuf,
    /// `spec.cluster` for a plugin that asks for it (`provideClusterInfo`).
    cluster: Value,
    /// The credential last given, while it holds.
    given: Mutex<Option<Credential>>,
}

impl ExecPlugin {
    /// The plugin of `config`, for a kubeconfig in `base` whose cluster is `cluster` (as
    /// `spec.cluster` gives it: `server`, `certificate-authority-data`…).
    pub(super) fn new(
        config: ExecConfig,
        base: &Path,
        cluster: Value,
    ) -> Result<ExecPlugin, String> {
        if config.interactive_mode.as_deref() == Some("Always") {
            return Err(format!(
                "its exec plugin {} asks for a terminal (interactiveMode: Always), and loadlab \
                 runs it without one: log in first, or set interactiveMode: IfAvailable",
                config.command
            ));
        }
        let api_version = config
            .api_version
            .clone()
            .ok_or_else(|| format!("its exec plugin {} has no apiVersion", config.command))?;
        Ok(ExecPlugin {
            config,
            api_version,
            base: base.to_path_buf(),
            cluster,
            given: Mutex::new(None),
        })
    }

    /// A credential: the last one given while it holds, else a new one from the plugin.
    pub(super) fn credential(&self) -> Result<Credential, String> {
        let mut given = self.given.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = given.as_ref() {
            if c.expires.is_none_or(|at| SystemTime::now() + EARLY < at) {
                return Ok(c.clone());
            }
        }
        let fresh = self.run()?;
        *given = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drops the credential given, so that the next call runs the plugin again (the API server
    /// refused it).
    pub(super) fn forget(&self) {
        *self.given.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Runs the plugin once: the credential it printed, or why there is none.
    fn run(&self) -> Result<Credential, String> {
        let name = &self.config.command;
        let mut spec = json!({ "interactive": false });
        if self.config.provide_cluster_info {
            spec["cluster"] = self.cluster.clone();
        }
        let request = json!({
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        });
        let program = if name.contains('/') {
            self.base.join(name)
        } else {
            PathBuf::from(name)
        };
        let mut command = Command::new(program);
        command
            .args(self.config.args.iter().flatten())
            .env("KUBERNETES_EXEC_INFO", request.to_string())
            .stdin(Stdio::null());
        for var in self.config.env.iter().flatten() {
            command.env(&var.name, &var.value);
        }
        let out = command.output().map_err(|e| {
            let hint = self
                .config
                .install_hint
                .as_deref()
                .map(|h| format!(" ({})", h.split_whitespace().collect::<Vec<_>>().join(" ")))
                .unwrap_or_default();
            format!("its exec plugin {name} could not start: {e}{hint}")
        })?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(format!(
                "its exec plugin {name} failed ({}): {}",
                out.status,
                last.trim()
            ));
        }
        credential_of(&out.stdout, &self.api_version)
            .map_err(|why| format!("its exec plugin {name} {why}"))
    }
}

/// The credential in a plugin's answer, an `ExecCredential` of `api_version` in JSON.
fn credential_of(stdout: &[u8], api_version: &str) -> Result<Credential, String> {
    let answer: Value = serde_json::from_slice(stdout)
        .map_err(|e| format!("printed no ExecCredential in JSON: {e}"))?;
    if answer["kind"] != "ExecCredential" {
        return Err("printed no ExecCredential (its kind differs)".into());
    }
    if answer["apiVersion"] != api_version {
        return Err(format!(
            "answered apiVersion {}, where the kubeconfig asks {api_version}",
            answer["apiVersion"]
        ));
    }
    let status = &answer["status"];
    let text = |key: &str| status[key].as_str().map(str::to_string);
    let token = text("token").filter(|t| !t.is_empty());
    let client_pem = text("clientCertificateData").zip(text("clientKeyData"));
    if token.is_none() && client_pem.is_none() {
        return Err("gave neither a token nor a client certificate and key".into());
    }
    let expires = match status["expirationTimestamp"].as_str() {
        Some(at) => Some(
            humantime::parse_rfc3339_weak(at)
                .map_err(|e| format!("gave an expirationTimestamp {at:?} that is no time: {e}"))?,
        ),
        None => None,
    };
    Ok(Credential {
        token,
        client_pem,
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_gives_a_token_or_a_certificate_with_its_expiry_or_says_what_is_wrong() {
        let api = "client.authentication.k8s.io/v1";
        let c = credential_of(
            br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2030-01-02T03:04:05Z"}}"#,
            api,
        )
        .unwrap();
        assert_eq!(c.token.as_deref(), Some("t"));
        assert_eq!(
            c.expires,
            Some(humantime::parse_rfc3339("2030-01-02T03:04:05Z").unwrap())
        );
        let c = credential_of(
            br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"C","clientKeyData":"K"}}"#,
            api,
        )
        .unwrap();
        assert_eq!(c.client_pem, Some(("C".into(), "K".into())));
        assert_eq!((c.token, c.expires), (None, None));
        for (answer, says) in [
            (&b"not json"[..], "no ExecCredential in JSON"),
            (br#"{"kind":"Status"}"#, "its kind differs"),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}"#,
                "where the kubeconfig asks",
            ),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
                "neither a token",
            ),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"soon"}}"#,
                "no time",
            ),
        ] {
            let e = credential_of(answer, api).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
