//! A virtual user's Socket.IO connection (sessions layer): Socket.IO's packets over Engine.IO
//! (protocol 4) over the user's WebSocket, the transport socket.io-client uses once it has
//! upgraded. Namespaces joined on first use, events emitted, their answers awaited (an event
//! on a channel, or the server's acknowledgement) and compared as Artillery compares them, the
//! server's pings answered whenever the user reads.
//!
//! Written by hand: the Rust Socket.IO clients bring their own HTTP and WebSocket stacks and
//! runtimes, where this rides the engine's connections, recorder and TLS; the protocol's text
//! framing is small (one digit of Engine.IO, one of Socket.IO, a namespace, an ack id, JSON).

use std::collections::HashMap;

use futures_util::{SinkExt, StreamExt};
use loadlab_run::users::{SioEmit, WsConnect};
use loadlab_run::ErrorKind;
use loadlab_script::Render;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::conn::exchange::Answer;
use crate::record::Pending;
use crate::session::checks::check;
use crate::session::state::Users;
use crate::session::websocket::{self, Socket, WsFailed};

/// A user's Socket.IO connection.
pub struct Sio {
    /// The WebSocket it rides.
    pub socket: Socket,
    /// Namespaces joined so far.
    joined: Vec<String>,
    /// The next acknowledgement id.
    next_ack: u64,
}

/// One Socket.IO packet: its type digit, namespace, acknowledgement id and JSON data.
struct Packet<'a> {
    kind: u8,
    namespace: &'a str,
    id: Option<u64>,
    data: &'a str,
}

/// Parses a Socket.IO packet (`2/chat,12["event",1]`); `None` for binary packets, which
/// loadlab does not read.
fn parse(p: &str) -> Option<Packet<'_>> {
    let kind = *p.as_bytes().first()?;
    if !kind.is_ascii_digit() || matches!(kind, b'5' | b'6') {
        return None;
    }
    let mut rest = &p[1..];
    let mut namespace = "/";
    if rest.starts_with('/') {
        let end = rest.find(',').unwrap_or(rest.len());
        namespace = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or("");
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let id = rest[..digits].parse().ok();
    Some(Packet {
        kind: kind - b'0',
        namespace,
        id,
        data: &rest[digits..],
    })
}

/// The namespace as packets write it: nothing for `/`, else `/chat,`.
fn prefix(namespace: &str) -> String {
    if namespace == "/" {
        String::new()
    } else {
        format!("{namespace},")
    }
}

/// True when the arguments `got` are what `expected` asks, by Artillery's rule: a list equals
/// them all, an object equals the last one, a string is contained in the last one.
fn valid(got: &[serde_json::Value], expected: &serde_json::Value) -> bool {
    use serde_json::Value;
    match expected {
        Value::Array(all) => got == all.as_slice(),
        Value::Object(o) => {
            let mut o = o.clone();
            o.remove("json");
            got.last() == Some(&Value::Object(o))
        }
        Value::String(s) => got
            .last()
            .and_then(Value::as_str)
            .is_some_and(|last| last.contains(s.as_str())),
        _ => false,
    }
}

impl Sio {
    /// Opens the user's socket to the Engine.IO path, reads the server's open packet and
    /// joins the default namespace, within the request timeout.
    pub async fn open(
        users: &Users,
        connect: &WsConnect,
        path: &str,
        headers: &[(String, String)],
        intended: Option<Instant>,
    ) -> Result<Sio, WsFailed> {
        let socket = websocket::open(users, connect, path, headers, intended).await?;
        let mut sio = Sio {
            socket,
            joined: Vec::new(),
            next_ack: 0,
        };
        let name = &users.plan.requests[connect.request].name;
        let deadline = Instant::now() + users.wire.timeout;
        // Engine.IO's open packet comes first.
        loop {
            match sio.next(deadline).await {
                Ok(Frame::Open) => break,
                Ok(_) => {}
                Err(kind) => return Err(failed(kind, name)),
            }
        }
        sio.join("/", deadline, name).await?;
        Ok(sio)
    }

    /// Joins `namespace` (Socket.IO's CONNECT) unless it has, waiting for the server's answer
    /// until `deadline`.
    async fn join(
        &mut self,
        namespace: &str,
        deadline: Instant,
        name: &str,
    ) -> Result<(), WsFailed> {
        if self.joined.iter().any(|n| n == namespace) {
            return Ok(());
        }
        self.send(format!("0{}", prefix(namespace)))
            .await
            .map_err(|k| failed(k, name))?;
        loop {
            let text = match self.next(deadline).await.map_err(|k| failed(k, name))? {
                Frame::Message(text) => text,
                _ => continue,
            };
            let Some(p) = parse(&text) else { continue };
            if p.namespace != namespace {
                continue;
            }
            match p.kind {
                0 => break,
                4 => {
                    return Err(WsFailed {
                        reason: format!("namespace {namespace} refused: {} on {name}", p.data),
                        transport: false,
                    })
                }
                _ => {}
            }
        }
        self.joined.push(namespace.to_string());
        Ok(())
    }

    /// Sends one Engine.IO message packet's text.
    async fn send(&mut self, packet: String) -> Result<(), ErrorKind> {
        self.socket
            .send(Message::Text(format!("4{packet}").into()))
            .await
            .map_err(|e| websocket::kind_of(&e))
    }

    /// The next Engine.IO frame before `deadline`, the server's pings answered on the way.
    async fn next(&mut self, deadline: Instant) -> Result<Frame, ErrorKind> {
        loop {
            let msg = match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => return Err(ErrorKind::Timeout),
                Ok(None) | Ok(Some(Ok(Message::Close(_)))) => return Err(ErrorKind::Closed),
                Ok(Some(Err(e))) => return Err(websocket::kind_of(&e)),
                Ok(Some(Ok(Message::Text(t)))) => t.to_string(),
                Ok(Some(Ok(_))) => continue,
            };
            match msg.as_bytes().first() {
                Some(b'0') => return Ok(Frame::Open),
                Some(b'1') => return Err(ErrorKind::Closed),
                Some(b'2') => {
                    self.socket
                        .send(Message::Text("3".into()))
                        .await
                        .map_err(|e| websocket::kind_of(&e))?;
                }
                Some(b'4') => return Ok(Frame::Message(msg[1..].to_string())),
                _ => {}
            }
        }
    }

    /// Reads (and drops) what the server sends until `until`, answering its pings, so a long
    /// think does not let the connection time out.
    pub async fn idle_until(&mut self, until: Instant) {
        while Instant::now() < until {
            if matches!(
                self.next(until).await,
                Err(ErrorKind::Closed | ErrorKind::Reset | ErrorKind::Protocol)
            ) {
                return;
            }
        }
    }

    /// Emits `e`'s event (`channel` and `args` rendered) and, when it awaits an answer, waits
    /// for it until the request timeout, records its round trip from `intended` or the emit,
    /// compares it with what is expected (`expected`, rendered) and takes the step's
    /// captures and checks into `vars`.
    pub async fn emit(
        &mut self,
        users: &Users,
        e: &SioEmit,
        (channel, args, expected): (String, Vec<serde_json::Value>, Option<serde_json::Value>),
        intended: Option<Instant>,
        (vars, rng): (&mut HashMap<String, String>, &mut fastrand::Rng),
    ) -> Result<(), WsFailed> {
        let rec = &users.wire.rec;
        let name = &users.plan.requests[e.request].name;
        let sent_at = Instant::now();
        let deadline = sent_at + users.wire.timeout;
        self.join(&e.namespace, deadline, name).await?;
        let ack = e.wait.as_ref().filter(|w| w.channel.is_none()).map(|_| {
            self.next_ack += 1;
            self.next_ack - 1
        });
        let mut event = vec![serde_json::Value::String(channel)];
        event.extend(args);
        let id = ack.map(|i| i.to_string()).unwrap_or_default();
        let packet = format!(
            "2{}{id}{}",
            prefix(&e.namespace),
            serde_json::Value::Array(event)
        );
        let Some(wait) = &e.wait else {
            self.send(packet).await.map_err(|k| failed(k, name))?;
            users
                .record
                .borrow_mut()
                .custom
                .add("counter", "socketio.emit", 1.0);
            return Ok(());
        };
        rec.mark_sent(1, sent_at);
        let pending = Pending {
            intended,
            template: e.request,
        };
        let broke = |kind: ErrorKind| {
            rec.record_errors(kind, &[pending]);
            failed(kind, name)
        };
        self.send(packet).await.map_err(broke)?;
        users
            .record
            .borrow_mut()
            .custom
            .add("counter", "socketio.emit", 1.0);
        let awaited = wait.channel.as_ref().map(|c| {
            let mut out = String::new();
            let lookup = |k: &str| vars.get(k).map(String::as_str);
            c.render(lookup, &mut fastrand::Rng::with_seed(0), &mut out);
            out
        });
        let mut got: Vec<serde_json::Value> = Vec::new();
        loop {
            let text = match self.next(deadline).await {
                Ok(Frame::Message(text)) => text,
                Ok(Frame::Open) => continue,
                // Artillery judges what came by the timeout.
                Err(ErrorKind::Timeout) if !got.is_empty() => break,
                Err(kind) => return Err(broke(kind)),
            };
            let Some(p) = parse(&text) else { continue };
            if p.namespace != e.namespace {
                continue;
            }
            let Ok(serde_json::Value::Array(items)) = serde_json::from_str(p.data) else {
                continue;
            };
            match (&awaited, p.kind) {
                (None, 3) if p.id == ack => {
                    got = items;
                    break;
                }
                (Some(channel), 2) if items.first().and_then(|c| c.as_str()) == Some(channel) => {
                    got.extend(items.into_iter().skip(1));
                    if expected.as_ref().is_none_or(|x| valid(&got, x)) {
                        break;
                    }
                }
                _ => {}
            }
        }
        let now = Instant::now();
        rec.record_response(&pending, (sent_at, sent_at, now), now, (101, false, None));
        if let Some(x) = &expected {
            if !valid(&got, x) {
                return Err(WsFailed {
                    reason: format!("data is not valid on {name}"),
                    transport: false,
                });
            }
        }
        let answer = Answer {
            status: 101,
            headers: Vec::new(),
            body: serde_json::Value::Array(got).to_string().into_bytes(),
            grpc: None,
        };
        check(
            (&wait.expects, &wait.captures),
            name,
            &answer,
            vars,
            rng,
            &users.queries,
        )
        .map_err(|reason| WsFailed {
            reason,
            transport: false,
        })
    }

    /// Leaves as socket.io-client's `disconnect()` does: a DISCONNECT per namespace joined,
    /// then the WebSocket closed.
    pub async fn close(mut self) {
        for ns in std::mem::take(&mut self.joined) {
            if self.send(format!("1{}", prefix(&ns))).await.is_err() {
                break;
            }
        }
        websocket::close(self.socket).await;
    }
}

/// An Engine.IO frame the user reads: the open packet, or a message carrying a Socket.IO
/// packet.
enum Frame {
    Open,
    Message(String),
}

/// A failure of kind `kind` on the request named `name`.
fn failed(kind: ErrorKind, name: &str) -> WsFailed {
    WsFailed {
        reason: format!("{} on {name}", kind.as_str()),
        transport: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_split_into_kind_namespace_id_and_data() {
        let p = parse("2/chat,12[\"echo\",1]").unwrap();
        assert_eq!(
            (p.kind, p.namespace, p.id, p.data),
            (2, "/chat", Some(12), "[\"echo\",1]")
        );
        let p = parse("3[{\"name\":\"a\"}]").unwrap();
        assert_eq!((p.kind, p.namespace, p.id), (3, "/", None));
        let p = parse("0/personalised,{\"sid\":\"x\"}").unwrap();
        assert_eq!(
            (p.kind, p.namespace, p.data),
            (0, "/personalised", "{\"sid\":\"x\"}")
        );
        assert!(
            parse("51-[\"x\",{}]").is_none(),
            "binary events are not read"
        );
    }

    #[test]
    fn answers_are_compared_as_artillery_compares_them() {
        use serde_json::json;
        let got = [json!("Hello from Artillery, twice"), json!(3)];
        assert!(
            !valid(&got, &json!("Hello")),
            "a string is sought in the last argument"
        );
        assert!(valid(&got[..1], &json!("from Artillery")));
        assert!(valid(&got, &json!(["Hello from Artillery, twice", 3])));
        assert!(valid(&[json!({"a": 1})], &json!({"a": 1, "json": "$.0"})));
        assert!(
            !valid(&got, &json!(3)),
            "a number is never valid, as in Artillery"
        );
    }
}
