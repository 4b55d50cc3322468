//! A virtual user's WebSocket (sessions layer): opened with the upgrade handshake over a
//! connection from the thread's dialer (TLS included), its messages sent and its replies
//! awaited; the handshake and each round trip are recorded as requests, the messages counted
//! as Artillery counts them (`websocket.messages_sent`, `websocket.messages_received`).

use std::collections::HashMap;

use futures_util::{SinkExt, StreamExt};
use loadlab_run::users::{WsConnect, WsMessage};
use loadlab_run::ErrorKind;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::conn::exchange::Answer;
use crate::record::Pending;
use crate::session::checks::check;
use crate::session::state::Users;
use crate::tls::Stream;

/// An open WebSocket.
pub type Socket = WebSocketStream<Stream>;

/// Why a WebSocket step failed: the reason for the report, and whether the connection broke.
pub struct WsFailed {
    /// What failed, on which name.
    pub reason: String,
    /// True when the connection failed (not a check).
    pub transport: bool,
}

impl WsFailed {
    fn transport(kind: ErrorKind, name: &str) -> Self {
        WsFailed {
            reason: format!("{} on {name}", kind.as_str()),
            transport: true,
        }
    }
}

/// The kind a WebSocket failure counts as.
pub(crate) fn kind_of(e: &tungstenite::Error) -> ErrorKind {
    match e {
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            ErrorKind::Closed
        }
        tungstenite::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
            std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
            _ => ErrorKind::Reset,
        },
        _ => ErrorKind::Protocol,
    }
}

/// Opens `connect`'s socket, its path and headers rendered as given; the handshake is recorded
/// under the upgrade request from `intended` (the open model's schedule) or its start.
pub async fn open(
    users: &Users,
    connect: &WsConnect,
    path: &str,
    headers: &[(String, String)],
    intended: Option<Instant>,
) -> Result<Socket, WsFailed> {
    let rec = &users.wire.rec;
    let t = &users.plan.requests[connect.request];
    let endpoint = &users.plan.endpoints[t.endpoint];
    let pending = Pending {
        intended,
        template: connect.request,
    };
    let sent_at = Instant::now();
    rec.mark_sent(1, sent_at);
    let (stream, opened) = match users.wire.dialer.open(t.endpoint).await {
        Ok(s) => s,
        Err(e) => {
            rec.record_errors(e.kind, &[pending]);
            if let Some(cause) = e.tls {
                rec.record_tls_failure(cause);
            }
            return Err(WsFailed::transport(e.kind, &t.name));
        }
    };
    rec.record_opened(opened.connect_us, opened.tls_us);
    let scheme = if endpoint.tls.is_some() { "wss" } else { "ws" };
    let url = format!("{scheme}://{}{path}", endpoint.authority);
    let refused = |what: String| WsFailed {
        reason: format!("{what} on {}", t.name),
        transport: false,
    };
    let mut req = match url.as_str().into_client_request() {
        Ok(r) => r,
        Err(e) => {
            rec.record_errors(ErrorKind::Protocol, &[pending]);
            return Err(refused(format!("url {url:?}: {e}")));
        }
    };
    let mut add = |k: &str, v: &str| match (
        HeaderName::from_bytes(k.as_bytes()),
        HeaderValue::from_str(v),
    ) {
        (Ok(k), Ok(v)) => {
            req.headers_mut().insert(k, v);
            Ok(())
        }
        _ => Err(format!("header {k:?} cannot be sent")),
    };
    let mut added = Ok(());
    for (k, v) in headers {
        added = added.and(add(k, v));
    }
    if !connect.subprotocols.is_empty() {
        added = added.and(add(
            "Sec-WebSocket-Protocol",
            &connect.subprotocols.join(", "),
        ));
    }
    if let Err(what) = added {
        rec.record_errors(ErrorKind::Protocol, &[pending]);
        return Err(refused(what));
    }
    let start = Instant::now();
    let handshake = timeout(
        users.wire.timeout,
        tokio_tungstenite::client_async(req, stream),
    )
    .await;
    let now = Instant::now();
    match handshake {
        Ok(Ok((socket, response))) => {
            rec.record_response(
                &pending,
                (sent_at, start, now),
                now,
                (response.status().as_u16(), false, None),
            );
            Ok(socket)
        }
        // The server answered without upgrading: its status counts as any response's.
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            rec.record_response(
                &pending,
                (sent_at, start, now),
                now,
                (status, status == 429, None),
            );
            Err(refused(format!("upgrade answered {status}")))
        }
        Ok(Err(e)) => {
            let kind = kind_of(&e);
            rec.record_errors(kind, &[pending]);
            Err(WsFailed::transport(kind, &t.name))
        }
        Err(_) => {
            rec.record_errors(ErrorKind::Timeout, &[pending]);
            Err(WsFailed::transport(ErrorKind::Timeout, &t.name))
        }
    }
}

/// Sends `text` (when the step sends) on `socket`, and when the step awaits a reply, waits for
/// the next message (within the request timeout), records the round trip from `intended` or
/// the send, and checks and captures from it into `vars`.
pub async fn exchange(
    users: &Users,
    socket: &mut Socket,
    m: &WsMessage,
    (text, intended): (Option<String>, Option<Instant>),
    (vars, rng): (&mut HashMap<String, String>, &mut fastrand::Rng),
) -> Result<(), WsFailed> {
    let rec = &users.wire.rec;
    let name = &users.plan.requests[m.request].name;
    let sent_at = Instant::now();
    if m.reply {
        rec.mark_sent(1, sent_at);
    }
    let pending = Pending {
        intended,
        template: m.request,
    };
    let failed = |kind: ErrorKind| {
        if m.reply {
            rec.record_errors(kind, &[pending]);
        }
        WsFailed::transport(kind, name)
    };
    if let Some(text) = text {
        socket
            .send(Message::Text(text.into()))
            .await
            .map_err(|e| failed(kind_of(&e)))?;
        count(users, "websocket.messages_sent");
    }
    if !m.reply {
        return Ok(());
    }
    let deadline = sent_at + users.wire.timeout;
    let body = loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => return Err(failed(ErrorKind::Timeout)),
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => return Err(failed(ErrorKind::Closed)),
            Ok(Some(Err(e))) => return Err(failed(kind_of(&e))),
            Ok(Some(Ok(Message::Text(t)))) => break t.as_bytes().to_vec(),
            Ok(Some(Ok(Message::Binary(b)))) => break b.to_vec(),
            // Pings are answered by the library; they are not the reply.
            Ok(Some(Ok(_))) => {}
        }
    };
    let now = Instant::now();
    let status = 101;
    rec.add_bytes(body.len(), now);
    rec.record_response(
        &pending,
        (sent_at, sent_at, now),
        now,
        (status, false, None),
    );
    count(users, "websocket.messages_received");
    let answer = Answer {
        status,
        headers: Vec::new(),
        body,
        grpc: None,
    };
    check(
        (&m.expects, &m.captures),
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

/// Counts one message under Artillery's counter `name`.
fn count(users: &Users, name: &str) {
    users.record.borrow_mut().custom.add("counter", name, 1.0);
}

/// Closes `socket` as Artillery's users do at the end of their scenario: a close frame sent,
/// not waited on.
pub async fn close(mut socket: Socket) {
    let _ = timeout(std::time::Duration::from_secs(1), socket.close(None)).await;
}
