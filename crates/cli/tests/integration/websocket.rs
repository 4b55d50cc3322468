//! Artillery's `engine: ws` scenarios: each user opens its own WebSocket (headers and
//! subprotocols from `config.ws`), sends text and JSON, awaits replies to capture from and
//! match, and closes it at its end — checked on what a WebSocket server on 127.0.0.1 saw, and
//! on the summary (the handshake and each round trip as requests, Artillery's message counters).

use crate::support::{loadlab, loadlab_json, write_file};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use tungstenite::handshake::server::{Request, Response};
use tungstenite::Message;

/// What the server saw of one connection: the upgrade's path, `x-token` header and offered
/// subprotocols, then each message in order.
#[derive(Debug, Clone, Default)]
struct Connection {
    path: String,
    token: Option<String>,
    protocols: Option<String>,
    messages: Vec<String>,
}

/// A WebSocket server that records every connection and answers each text message: JSON
/// `{"op": "echo", …}` with `{"ok": true, "echo": THE MESSAGE}`, `{"op": "bad"}` with
/// `{"ok": false}`, `"ping"` with `"pong <n>"` (n counting the connection's pings), other text
/// not at all.
struct WsServer {
    port: u16,
    seen: Arc<Mutex<Vec<Arc<Mutex<Connection>>>>>,
}

impl WsServer {
    fn start() -> WsServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Arc<Mutex<Connection>>>>> = Arc::default();
        let all = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let conn = Arc::new(Mutex::new(Connection::default()));
                all.lock().unwrap().push(conn.clone());
                std::thread::spawn(move || serve(stream, &conn));
            }
        });
        WsServer { port, seen }
    }

    fn seen(&self) -> Vec<Connection> {
        let all = self.seen.lock().unwrap();
        all.iter().map(|c| c.lock().unwrap().clone()).collect()
    }
}

// The handshake callback's error type is tungstenite's own response, large by its design.
#[allow(clippy::result_large_err)]
fn serve(stream: TcpStream, conn: &Mutex<Connection>) {
    let record = |req: &Request, mut res: Response| {
        let mut c = conn.lock().unwrap();
        c.path = req.uri().to_string();
        let header = |k: &str| {
            req.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        c.token = header("x-token");
        c.protocols = header("sec-websocket-protocol");
        if let Some(first) = c.protocols.as_deref().and_then(|p| p.split(',').next()) {
            res.headers_mut()
                .insert("sec-websocket-protocol", first.trim().parse().unwrap());
        }
        Ok(res)
    };
    let Ok(mut ws) = tungstenite::accept_hdr(stream, record) else {
        return;
    };
    let mut pings = 0;
    while let Ok(msg) = ws.read() {
        let Message::Text(text) = msg else {
            continue;
        };
        let text = text.to_string();
        conn.lock().unwrap().messages.push(text.clone());
        let reply = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) if v["op"] == "echo" => {
                Some(serde_json::json!({"ok": true, "echo": v}).to_string())
            }
            Ok(v) if v["op"] == "bad" => Some(r#"{"ok": false}"#.to_string()),
            _ if text == "ping" => {
                pings += 1;
                Some(format!("pong {pings}"))
            }
            _ => None,
        };
        if let Some(r) = reply {
            if ws.send(Message::Text(r.into())).is_err() {
                return;
            }
        }
    }
}

const FLOW: &str = "
scenarios:
  - name: chat
    engine: ws
    flow:
      - send: 'hello {{ team }}'
      - send:
          payload: { op: echo, user: '{{ team }}', n: 3 }
          capture: { json: $.echo.user, as: who }
          match: { json: $.ok, value: 'true' }
      - think: 0.05
      - loop:
          - send:
              payload: ping
              capture: { regexp: 'pong (\\d+)', group: 1, as: pongs }
        count: 2
      - send: 'who={{ who }} pongs={{ pongs }}'
";

#[test]
fn each_user_opens_its_own_socket_sends_awaits_replies_and_captures() {
    let server = WsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(
        dir.path(),
        "ws.yml",
        &format!(
            "config:\n  target: ws://127.0.0.1:{}/chat\n  phases: [{{ duration: 1, arrivalRate: 4 }}]\n  variables: {{ team: blue }}\n  ws:\n    headers: {{ x-token: 't-{{{{ team }}}}' }}\n    subprotocols: [chat.v1, chat.v2]\n{FLOW}",
            server.port
        ),
    );
    let path = script.to_str().unwrap();
    let validated = loadlab(&["validate", path]);
    let text = String::from_utf8_lossy(&validated.stdout);
    assert!(
        validated.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&validated.stderr)
    );
    assert!(
        text.contains("WebSocket ws://127.0.0.1:")
            && text.contains("(subprotocols chat.v1, chat.v2)"),
        "{text}"
    );
    assert!(text.contains("send \"hello {{ team }}\""), "{text}");
    assert!(
        text.contains("[awaits the reply; captures who; match × 1]"),
        "{text}"
    );
    let (summary, out) = loadlab_json(&["run", path]);
    let seen = server.seen();
    assert_eq!(seen.len(), 4, "one socket per user: {seen:?}");
    for c in &seen {
        assert_eq!(c.path, "/chat");
        assert_eq!(c.token.as_deref(), Some("t-blue"));
        assert_eq!(c.protocols.as_deref(), Some("chat.v1, chat.v2"));
        assert_eq!(c.messages.len(), 5, "{c:?}");
        assert_eq!(c.messages[0], "hello blue");
        let json: serde_json::Value = serde_json::from_str(&c.messages[1]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"op": "echo", "user": "blue", "n": 3})
        );
        assert_eq!(&c.messages[2..4], ["ping", "ping"]);
        // The captures flowed into the last message: the reply's user, the second pong.
        assert_eq!(c.messages[4], "who=blue pongs=2");
    }
    let users = &summary["users"];
    assert_eq!(
        (users["started"].as_u64(), users["completed"].as_u64()),
        (Some(4), Some(4)),
        "{users}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let by_name = &summary["requests_by_name"];
    assert_eq!(by_name["WS /chat"]["ok"], 4, "{by_name}");
    assert_eq!(by_name["WS /chat"]["status"]["101"], 4, "{by_name}");
    assert_eq!(
        by_name["WS /chat reply"]["ok"], 12,
        "three round trips each: {by_name}"
    );
    let p50 = by_name["WS /chat reply"]["latency_ms"]["p50"]
        .as_f64()
        .unwrap();
    assert!(p50 > 0.0 && p50 < 1000.0, "{p50}");
    let counters = &users["metrics"]["counters"];
    assert_eq!(counters["websocket.messages_sent"], 20.0, "{counters}");
    assert_eq!(counters["websocket.messages_received"], 12.0, "{counters}");
}

#[test]
fn a_failed_match_a_silent_server_and_a_refused_upgrade_fail_the_user_with_their_reason() {
    let server = WsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let run = |target: &str, flow: &str, extra: &[&str]| {
        let script = write_file(
            dir.path(),
            "fail.yml",
            &format!(
                "config:\n  target: {target}\n  phases: [{{ duration: 1, arrivalRate: 2 }}]\nscenarios:\n  - engine: ws\n    flow:\n{flow}"
            ),
        );
        let mut args = vec!["run", script.to_str().unwrap()];
        args.extend(extra);
        loadlab_json(&args).0
    };
    let target = format!("ws://127.0.0.1:{}/", server.port);
    let bad = run(
        &target,
        "      - send: { payload: { op: bad }, match: { json: $.ok, value: 'true' } }\n      - send: never\n",
        &[],
    );
    assert_eq!(bad["users"]["failed"], 2, "{}", bad["users"]);
    assert_eq!(
        bad["users"]["failures"]["expect match on WS / reply"], 2,
        "{}",
        bad["users"]
    );
    // The session ended at the failed match: nothing after it was sent.
    assert!(server.seen().iter().all(|c| c.messages.len() == 1));
    // A server that never answers: the wait ends at the request timeout.
    let silent = run(
        &target,
        "      - send: { payload: quiet, capture: { regexp: '.+', as: x } }\n",
        &["--timeout", "300ms"],
    );
    assert_eq!(
        silent["users"]["failures"]["timeout on WS / reply"], 2,
        "{}",
        silent["users"]
    );
    assert_eq!(silent["errors"]["timeout"], 2, "{}", silent["errors"]);
    // An HTTP server that does not upgrade: its status counts, and the user fails.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in http.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let refused = run(
        &format!("ws://127.0.0.1:{port}/x"),
        "      - send: hi\n",
        &[],
    );
    assert_eq!(refused["status"]["404"], 2, "{refused}");
    assert_eq!(
        refused["users"]["failures"]["upgrade answered 404 on WS /x"], 2,
        "{}",
        refused["users"]
    );
}

#[test]
fn ws_steps_and_http_steps_stay_in_their_own_engines() {
    let dir = tempfile::tempdir().unwrap();
    let check = |scenario: &str| {
        let script = write_file(
            dir.path(),
            "mixed.yml",
            &format!("config:\n  target: ws://127.0.0.1:9/\n  phases: [{{ duration: 1, arrivalRate: 1 }}]\nscenarios:\n{scenario}"),
        );
        let out = loadlab(&["validate", script.to_str().unwrap()]);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = check("  - engine: ws\n    flow:\n      - get: { url: / }\n");
    assert!(
        e.contains("mixed.yml:7:9")
            && e.contains("Artillery's ws engine does not run HTTP requests"),
        "{e}"
    );
    let e = check("  - flow:\n      - send: hi\n");
    assert!(e.contains("send: is a step of engine: ws scenarios"), "{e}");
    let e = check("  - engine: ws\n    flow:\n      - wait: { payload: x }\n");
    assert!(e.contains("wait: takes capture or match"), "{e}");
    let e = check(
        "  - engine: ws\n    flow:\n      - send: { payload: x, capture: { header: h, as: h } }\n",
    );
    assert!(e.contains("a WebSocket message has no headers"), "{e}");
    let e = check("  - engine: grpc\n    flow:\n      - emit: { channel: x }\n");
    assert!(
        e.contains("engine: grpc: loadlab runs HTTP, WebSocket (ws), Socket.IO (socketio) and browser (playwright) scenarios only"),
        "{e}"
    );
}
