//! Artillery's `engine: ws` and `engine: socketio` scenarios lowered into the plan: the WebSocket each user opens
//! (`config.ws`, the flow's first `connect` step, else the target) and its `send` and `wait`
//! steps, as Artillery's ws engine reads them.

use std::collections::BTreeMap;

use loadlab_run::users::{Capture, Expect, SioEmit, SioWait, WsConnect, WsMessage, WsPayload};
use loadlab_run::Template;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::{FlowError, Refusal, Traced};
use super::flows::{CaptureSpec, Lowering};
use super::sockets::{SioSettings, Socket, WsSettings};
use crate::yaml::OneOrMany;

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
        let located = |e: FlowError| match connect {
            Some(c) => Traced::at(e, &c.referenced),
            None => e.into(),
        };
        self.open_socket(&url, &headers, subprotocols, false)
            .map_err(located)
    }

    /// A socketio scenario's socket: WebSocket to the target's Engine.IO path (`/socket.io/`,
    /// or `config.socketio.path`), with `config.socketio`'s query and headers.
    pub(super) fn connect_socketio(
        &mut self,
        settings: &SioSettings,
    ) -> Result<(Socket, WsConnect), Traced> {
        if let Some(t) = &settings.transports {
            if !t.iter().any(|t| t == "websocket") {
                return Err(refuse(
                    "config.socketio.transports",
                    "loadlab speaks Socket.IO over WebSocket only; add websocket",
                )
                .into());
            }
        }
        let base = self.target.trim_end_matches('/');
        let path = settings.path.as_deref().unwrap_or("/socket.io");
        let path = format!("/{}/", path.trim_matches('/'));
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("EIO", "4")
            .append_pair("transport", "websocket");
        for (k, v) in &settings.query {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            query.append_pair(k, &v);
        }
        let url = format!("{base}{path}?{}", query.finish());
        Ok(self.open_socket(&url, &settings.extra_headers, Vec::new(), true)?)
    }

    /// Registers a socket to `url` (`ws://`, `wss://`, `http://` or `https://`, templates after
    /// the host) with its upgrade headers: its endpoint and the request its handshake is
    /// recorded under.
    fn open_socket(
        &mut self,
        url: &str,
        headers: &BTreeMap<String, String>,
        subprotocols: Vec<String>,
        socketio: bool,
    ) -> Result<(Socket, WsConnect), FlowError> {
        let url = &super::flows::with_target(url, self.target);
        let http = http_url(url);
        if !(http.starts_with("http://") || http.starts_with("https://")) {
            return Err(FlowError::NotUrl(url.to_string()));
        }
        let (origin, path) = super::flows::split_url(&http, &http)?;
        let endpoint = self.endpoint(&origin)?;
        let path_t = Template::parse(&path)?;
        let mut header_ts = Vec::new();
        for (k, v) in headers {
            let v = crate::config_templates::render_request(v);
            header_ts.push((k.clone(), Template::parse(&v)?));
        }
        let uses = path_t
            .variables()
            .chain(header_ts.iter().flat_map(|(_, t)| t.variables()));
        if let Some(v) = uses.into_iter().find(|v| !self.is_defined(v)) {
            return Err(FlowError::Undefined(v.to_string()));
        }
        let shown = path.split('?').next().unwrap_or(&path);
        let name = if socketio {
            format!("Socket.IO {shown}")
        } else {
            format!("WS {shown}")
        };
        let request = self.push_request(&name, &http, endpoint, "GET", &path, &[], &[]);
        let socket = Socket {
            upgrade: request,
            endpoint,
            url: http.clone(),
            path: shown.to_string(),
            reply: None,
            socketio,
        };
        Ok((
            socket,
            WsConnect {
                request,
                path: path_t,
                headers: header_ts,
                subprotocols,
                socketio,
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

/// A request named `name` on the socket's URL (a reply's or an emit's, recorded under it).
fn request_on(l: &mut Lowering, socket: &Socket, name: &str) -> usize {
    l.push_request(
        name,
        &socket.url,
        socket.endpoint,
        "GET",
        &socket.path,
        &[],
        &[],
    )
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
    let r = request_on(l, socket, &format!("WS {} reply", socket.path));
    if let Some(s) = l.websocket.as_mut() {
        s.reply = Some(r);
    }
    r
}

/// Artillery's JSONPath (jsonpath-plus) reads `$.0.name` as the first item's `name`; RFC 9535,
/// which loadlab follows, writes it `$[0].name`.
fn rfc_json_path(query: &str) -> String {
    let mut out = String::with_capacity(query.len() + 4);
    let mut rest = query;
    while let Some(i) = rest.find('.') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let ends = after[digits..].is_empty() || after[digits..].starts_with(['.', '[']);
        if digits > 0 && ends {
            out.push('[');
            out.push_str(&after[..digits]);
            out.push(']');
            rest = &after[digits..];
        } else {
            out.push('.');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `capture` and `match` items with their JSONPath written as RFC 9535 does, and a `json`
/// query of `$.0` (the first argument) where an item gives none, as Artillery defaults it.
fn with_rfc_paths(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(with_rfc_paths).collect())
        }
        serde_json::Value::Object(o) => {
            let mut o = o.clone();
            let keyed = o.contains_key("regexp") || o.contains_key("header");
            match o.get("json").and_then(|j| j.as_str()) {
                Some(q) => {
                    let q = rfc_json_path(q);
                    o.insert("json".into(), q.into());
                }
                None if !keyed => {
                    o.insert("json".into(), "$[0]".into());
                }
                None => {}
            }
            serde_json::Value::Object(o)
        }
        other => other.clone(),
    }
}

impl Lowering<'_> {
    /// An `emit` step of a socketio scenario, with its `namespace` and the `response` or
    /// `acknowledge` it awaits.
    pub(super) fn sio_emit(
        &mut self,
        emit: &Spanned<serde_json::Value>,
        step: &super::flows::StepSpec,
    ) -> Result<SioEmit, Traced> {
        let Some(socket) = self.websocket.clone().filter(|s| s.socketio) else {
            return Err(Traced::at(
                refuse(
                    "emit",
                    "is a step of engine: socketio scenarios (add engine: socketio to the scenario)",
                ),
                &emit.referenced,
            ));
        };
        let at = |e: FlowError, s: &Spanned<serde_json::Value>| Traced::at(e, &s.referenced);
        let (channel, args) = self.emit_channel_and_args(emit)?;
        let channel = Template::parse(&channel).map_err(|e| at(e.into(), emit))?;
        let mut uses: Vec<String> = channel.variables().map(str::to_string).collect();
        for a in &args {
            super::flows::json_variables(a, &mut uses).map_err(|e| at(e, emit))?;
        }
        if let Some(v) = uses.iter().find(|v| !self.is_defined(v)) {
            return Err(at(FlowError::Undefined(v.clone()), emit));
        }
        let namespace = sio_namespace(step)?;
        let wait = self.sio_wait(step)?;
        let shown = channel.to_string();
        let name = if namespace == "/" {
            format!("emit {shown}")
        } else {
            format!("emit {shown} on {namespace}")
        };
        let request = request_on(self, &socket, &name);
        Ok(SioEmit {
            request,
            namespace,
            channel,
            args,
            wait,
        })
    }

    /// The event's name and arguments an `emit` gives: `{channel, data}` (one argument, null
    /// without data, as Artillery 2 emits it; other keys inside emit it ignores, and so does
    /// this, with a warning, or refuses them when strict) or a list, the name first.
    fn emit_channel_and_args(
        &mut self,
        emit: &Spanned<serde_json::Value>,
    ) -> Result<(String, Vec<serde_json::Value>), Traced> {
        let bad_emit = || {
            Traced::at(
                refuse(
                    "emit",
                    "takes {channel, data} or a list: the event's name, then its arguments",
                ),
                &emit.referenced,
            )
        };
        match &emit.value {
            serde_json::Value::Object(o) => {
                // Artillery 2 reads only channel and data inside emit: a namespace, response or
                // acknowledge written there (Artillery 1's docs) it ignores, and so does this.
                for k in o.keys().filter(|k| *k != "channel" && *k != "data") {
                    // The step's keys for what Artillery 2 awaits after an emit.
                    let instead = match k.as_str() {
                        "response" => "; write response beside emit, in the step",
                        "acknowledge" | "ack" => "; write acknowledge beside emit, in the step",
                        _ => "",
                    };
                    let why = format!(
                        "emit.{k}: Artillery reads only channel and data inside emit, and \
                         ignores this{instead}"
                    );
                    if self.strict {
                        return Err(Traced::at(refuse("emit", &why), &emit.referenced));
                    }
                    self.warnings.push(why);
                }
                let channel = o
                    .get("channel")
                    .and_then(|c| c.as_str())
                    .ok_or_else(bad_emit)?;
                // Always one argument, null without `data`: Artillery emits `data` even when
                // it is undefined, and servers take their acknowledgement callback second.
                let data = o.get("data").cloned().unwrap_or(serde_json::Value::Null);
                Ok((channel.to_string(), vec![data]))
            }
            serde_json::Value::Array(items) => {
                let (first, rest) = items.split_first().ok_or_else(bad_emit)?;
                let channel = first.as_str().ok_or_else(bad_emit)?;
                Ok((channel.to_string(), rest.to_vec()))
            }
            _ => Err(bad_emit()),
        }
    }

    /// What an `emit` step awaits: the `response` on a channel or the `acknowledge`ment (not
    /// both), with the captures and matches over its arguments; `None` when it awaits nothing.
    fn sio_wait(&mut self, step: &super::flows::StepSpec) -> Result<Option<SioWait>, Traced> {
        let (spec, is_ack) = match (&step.response, &step.acknowledge) {
            (Some(_), Some(a)) => {
                return Err(Traced::at(
                    refuse(
                        "acknowledge",
                        "an emit awaits a response or an acknowledgement, not both",
                    ),
                    &a.referenced,
                ))
            }
            (Some(r), None) => (Some(r), false),
            (None, Some(a)) => (Some(a), true),
            (None, None) => (None, false),
        };
        let Some(given) = spec else {
            return Ok(None);
        };
        let a = &given.value;
        let at = |e: FlowError| Traced::at(e, &given.referenced);
        let channel = match (is_ack, a.channel.as_ref().or(a.on.as_ref())) {
            (false, Some(c)) => Some(Template::parse(c).map_err(|e| at(e.into()))?),
            (false, None) => {
                return Err(Traced::at(
                    refuse("response", "names the event awaited: channel: NAME"),
                    &given.referenced,
                ))
            }
            (true, _) => None,
        };
        // Artillery's queries over the arguments, as RFC 9535 writes them; `$.0`
        // (the first argument) where a capture gives none.
        let specs: Vec<CaptureSpec> = a
            .capture
            .iter()
            .flat_map(OneOrMany::as_slice)
            .map(|c| {
                let mut c = c.clone();
                if c.header.is_none() && c.regexp_given().is_none() {
                    c.json = Some(rfc_json_path(c.json.as_deref().unwrap_or("$.0")));
                }
                c
            })
            .collect();
        let captures = self.captures(specs.iter()).map_err(at)?;
        let expects = match &a.matches {
            Some(m) => self.matches(&with_rfc_paths(m)).map_err(at)?,
            None => Vec::new(),
        };
        Ok(Some(SioWait {
            channel,
            data: a.data.clone().or(a.args.clone()),
            captures,
            expects,
        }))
    }
}

/// The namespace of an `emit` step: a path such as `/chat`, `/` without one.
fn sio_namespace(step: &super::flows::StepSpec) -> Result<String, Traced> {
    match &step.namespace {
        None => Ok("/".to_string()),
        Some(n) if n.value.is_empty() || n.value == "/" => Ok("/".to_string()),
        Some(n) if n.value.starts_with('/') && !n.value.contains(['{', ',']) => Ok(n.value.clone()),
        Some(n) => Err(Traced::at(
            refuse(
                "namespace",
                "is a path such as /chat (templates are not read)",
            ),
            &n.referenced,
        )),
    }
}
