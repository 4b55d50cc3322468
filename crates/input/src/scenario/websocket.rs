//! Artillery's `engine: ws` scenarios lowered into the plan: the WebSocket each user opens
//! (`config.ws`, the flow's first `connect` step, else the target) and its `send` and `wait`
//! steps, as Artillery's ws engine reads them.

use std::collections::BTreeMap;

use loadlab_run::users::{Capture, Expect, WsConnect, WsMessage, WsPayload};
use loadlab_run::Template;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::{FlowError, Refusal, Traced};
use super::flows::{CaptureSpec, Lowering};
use crate::yaml::OneOrMany;

/// `config.ws`: what every user's WebSocket sends when it opens.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsSettings {
    /// Headers of the upgrade request.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Subprotocols offered.
    #[serde(default)]
    subprotocols: Vec<String>,
}

/// The WebSocket of the scenario being lowered: the path its messages' results are named by,
/// and the request a reply's round trip is recorded under, once a step awaits one.
#[derive(Debug, Clone)]
pub struct Socket {
    upgrade: usize,
    endpoint: usize,
    url: String,
    path: String,
    reply: Option<usize>,
}

/// A ws step's object form, when it captures or checks: the message sent (if any) and what is
/// taken from the reply. Without `capture` or `match`, Artillery sends the whole object as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplySpec {
    #[serde(default)]
    payload: Option<serde_json::Value>,
    #[serde(default)]
    capture: Option<OneOrMany<CaptureSpec>>,
    #[serde(default, rename = "match")]
    matches: Option<serde_json::Value>,
}

/// A `connect` step's object form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectSpec {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    subprotocols: Option<Vec<String>>,
}

fn refuse(key: &str, what: impl Into<String>) -> Refusal {
    Refusal::Key {
        key: key.into(),
        what: what.into(),
    }
}

/// `ws://` and `wss://` as the HTTP origins the upgrade goes to (`http://`, `https://`).
fn http_url(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else {
        url.to_string()
    }
}

impl Lowering<'_> {
    /// The socket a ws scenario's users open: to `connect`'s URL (a string, or an object with
    /// `target`, `headers`, `subprotocols` over `config.ws`'s), else to the target.
    pub(super) fn connect(
        &mut self,
        settings: &WsSettings,
        connect: Option<&Spanned<serde_json::Value>>,
    ) -> Result<(Socket, WsConnect), Traced> {
        let at = |e: Refusal, c: &Spanned<serde_json::Value>| Traced::at(e, &c.referenced);
        let (mut url, mut headers, mut subprotocols) = (
            self.target.to_string(),
            settings.headers.clone(),
            settings.subprotocols.clone(),
        );
        if let Some(c) = connect {
            match &c.value {
                serde_json::Value::String(s) => url = s.clone(),
                serde_json::Value::Object(o) if o.contains_key("function") => {
                    return Err(at(
                        refuse(
                            "connect.function",
                            "a function choosing the socket's URL is not run; give the URL \
                             (connect: ws://host/path, templates allowed after the host)",
                        ),
                        c,
                    ))
                }
                other => {
                    let spec: ConnectSpec = serde_json::from_value(other.clone()).map_err(|e| {
                        at(
                            refuse(
                                "connect",
                                format!("takes a URL or target/headers/subprotocols: {e}"),
                            ),
                            c,
                        )
                    })?;
                    url = spec.target.unwrap_or(url);
                    headers = spec.headers.unwrap_or(headers);
                    subprotocols = spec.subprotocols.unwrap_or(subprotocols);
                }
            }
        }
        let origin_and_path = |url: &str| -> Result<(String, String), FlowError> {
            let http = http_url(url);
            if !(http.starts_with("http://") || http.starts_with("https://")) {
                return Err(FlowError::NotUrl(url.to_string()));
            }
            let after = http.find("://").map_or(0, |i| i + 3);
            let at = http[after..]
                .find(['/', '?'])
                .map_or(http.len(), |i| after + i);
            let (origin, path) = http.split_at(at);
            if origin.contains("{{") {
                return Err(FlowError::TemplatedOrigin(url.to_string()));
            }
            let path = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            };
            Ok((origin.to_string(), path))
        };
        let located = |e: FlowError| match connect {
            Some(c) => Traced::at(e, &c.referenced),
            None => e.into(),
        };
        let (origin, path) = origin_and_path(&url).map_err(located)?;
        let endpoint = self.endpoint(&origin).map_err(|e| located(e.into()))?;
        let path_t = Template::parse(&path).map_err(|e| located(e.into()))?;
        let mut header_ts = Vec::new();
        for (k, v) in &headers {
            let v = crate::values::expand_env(v).map_err(|e| located(FlowError::Env(e)))?;
            header_ts.push((
                k.clone(),
                Template::parse(&v).map_err(|e| located(e.into()))?,
            ));
        }
        let uses = path_t
            .variables()
            .chain(header_ts.iter().flat_map(|(_, t)| t.variables()));
        if let Some(v) = uses.into_iter().find(|v| !self.is_defined(v)) {
            return Err(located(FlowError::Undefined(v.to_string())));
        }
        let name = format!("WS {path}");
        let request = self.push_request(&name, &http_url(&url), endpoint, "GET", &path, &[], &[]);
        let socket = Socket {
            upgrade: request,
            endpoint,
            url: http_url(&url),
            path,
            reply: None,
        };
        Ok((
            socket,
            WsConnect {
                request,
                path: path_t,
                headers: header_ts,
                subprotocols,
            },
        ))
    }

    /// A `send` or `wait` step: what it sends, and whether it awaits the next message to
    /// capture from and check.
    pub(super) fn ws_message(
        &mut self,
        send: Option<&Spanned<serde_json::Value>>,
        wait: Option<&Spanned<serde_json::Value>>,
    ) -> Result<WsMessage, Traced> {
        let Some(socket) = self.websocket.clone() else {
            let key = if send.is_some() { "send" } else { "wait" };
            return Err(refuse(
                key,
                "is a step of engine: ws scenarios (add engine: ws to the scenario)",
            )
            .into());
        };
        let (key, given) = match (send, wait) {
            (Some(s), _) => ("send", s),
            (None, Some(w)) => ("wait", w),
            (None, None) => return Err(FlowError::StepKind.into()),
        };
        let at = |e: FlowError| Traced::at(e, &given.referenced);
        let awaits = given
            .value
            .as_object()
            .is_some_and(|o| o.contains_key("capture") || o.contains_key("match"));
        if !awaits {
            if key == "wait" {
                return Err(Traced::at(
                    refuse(
                        "wait",
                        "takes capture or match: what to take from the next message",
                    ),
                    &given.referenced,
                ));
            }
            let payload = self.payload(&given.value).map_err(at)?;
            return Ok(WsMessage {
                request: socket_request(self, &socket, false),
                send: Some(payload),
                reply: false,
                captures: Vec::new(),
                expects: Vec::new(),
            });
        }
        let spec: ReplySpec = serde_json::from_value(given.value.clone()).map_err(|e| {
            Traced::at(
                refuse(key, format!("takes payload, capture and match: {e}")),
                &given.referenced,
            )
        })?;
        let payload = match &spec.payload {
            Some(p) => Some(self.payload(p).map_err(at)?),
            None => None,
        };
        let specs = spec.capture.as_ref().map_or(&[][..], OneOrMany::as_slice);
        if let Some(c) = specs.iter().find(|c| c.header.is_some()) {
            return Err(Traced::at(
                refuse(
                    &format!("capture {}", c.var),
                    "a WebSocket message has no headers; capture with json or regexp",
                ),
                &given.referenced,
            ));
        }
        let captures: Vec<Capture> = self.captures(specs.iter()).map_err(at)?;
        let expects: Vec<Expect> = match &spec.matches {
            Some(m) => self.matches(m).map_err(at)?,
            None => Vec::new(),
        };
        Ok(WsMessage {
            request: socket_request(self, &socket, true),
            send: payload,
            reply: true,
            captures,
            expects,
        })
    }

    /// A message as Artillery sends it: text as written (numbers and booleans as their text),
    /// objects and lists as JSON; its templates must read defined variables.
    fn payload(&self, v: &serde_json::Value) -> Result<WsPayload, FlowError> {
        let payload = match v {
            serde_json::Value::String(s) => WsPayload::Text(Template::parse(s)?),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
                WsPayload::Text(Template::literal(&v.to_string()))
            }
            serde_json::Value::Null => return Err(FlowError::StepKind),
            other => {
                let mut uses = Vec::new();
                super::flows::json_variables(other, &mut uses)?;
                if let Some(v) = uses.iter().find(|v| !self.is_defined(v)) {
                    return Err(FlowError::Undefined(v.clone()));
                }
                return Ok(WsPayload::Json(other.clone()));
            }
        };
        if let WsPayload::Text(t) = &payload {
            if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
                return Err(FlowError::Undefined(v.to_string()));
            }
        }
        Ok(payload)
    }
}

/// The request a socket's messages are recorded under: its upgrade's for messages sent
/// without a reply (never recorded as requests), a `reply` request of its own for round trips.
fn socket_request(l: &mut Lowering, socket: &Socket, reply: bool) -> usize {
    if !reply {
        return socket.upgrade;
    }
    if let Some(r) = l.websocket.as_ref().and_then(|s| s.reply) {
        return r;
    }
    let name = format!("WS {} reply", socket.path);
    let r = l.push_request(
        &name,
        &socket.url,
        socket.endpoint,
        "GET",
        &socket.path,
        &[],
        &[],
    );
    if let Some(s) = l.websocket.as_mut() {
        s.reply = Some(r);
    }
    r
}
