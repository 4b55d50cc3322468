//! Artillery's `engine: socketio` scenarios against a real Socket.IO server (socket.io 4, run
//! by Node.js on 127.0.0.1): namespaces joined, events emitted, responses and
//! acknowledgements awaited and compared as Artillery compares them, captures flowing into
//! later steps, HTTP steps between, the server's pings answered through a think.

use crate::support::{loadlab, loadlab_json, write_file};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The fixture's Socket.IO server, stopped by its process id when dropped.
struct SioServer {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<Value>>>,
}

impl SioServer {
    fn start(env: &[(&str, &str)]) -> SioServer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/socketio-server");
        assert!(
            dir.join("node_modules/socket.io").is_dir(),
            "run scripts/install-runtimes.sh first (scripts/test.sh does)"
        );
        let mut child = Command::new("node")
            .arg("server.js")
            .current_dir(&dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server prints its port");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&l) {
                    lines.lock().unwrap().push(v);
                }
            }
        });
        SioServer { child, port, log }
    }

    /// The log lines that have `key` equal to `value`.
    fn count(&self, key: &str, value: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l[key] == value)
            .count()
    }
}

impl Drop for SioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 2 s) until the server has logged `n` lines with `key` equal to `value`.
fn wait_for(server: &SioServer, key: &str, value: &str, n: usize) -> usize {
    for _ in 0..40 {
        if server.count(key, value) >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server.count(key, value)
}

#[test]
fn artillerys_socketio_example_runs_responses_and_acknowledgements_on_a_namespace() {
    let _shared = crate::support::shared();
    // Artillery's examples/socket-io/socket-io.yml, its phases shortened.
    let server = SioServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(
        dir.path(),
        "socket-io.yml",
        &format!(
            "config:\n  target: \"http://127.0.0.1:{}\"\n  phases:\n    - duration: 1\n      arrivalRate: 4\n\nscenarios:\n  - name: \"emit_and_validate_response\"\n    engine: socketio\n    flow:\n      - namespace: /personalised\n        emit:\n          channel: \"echo\"\n          data: \"Hello from Artillery\"\n        response:\n          channel: \"echoResponse\"\n          data: \"Hello from Artillery\"\n\n  - name: \"emit_and_validate_acknowledgment\"\n    engine: socketio\n    flow:\n      - namespace: /personalised\n        emit:\n          channel: \"userDetails\"\n        acknowledge:\n          match:\n            json: \"$.0.name\"\n            value: \"Artillery\"\n",
            server.port
        ),
    );
    let path = script.to_str().unwrap();
    let out = loadlab(&["validate", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Socket.IO over WebSocket ws://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("emit echo(\"Hello from Artillery\") on /personalised  [awaits echoResponse; data checked]"),
        "{text}"
    );
    assert!(
        text.contains(
            "emit userDetails(null) on /personalised  [awaits the acknowledgement; match × 1]"
        ),
        "{text}"
    );
    let (s, out) = loadlab_json(&["run", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s["users"]["completed"], 4, "{}\n{stdout}", s["users"]);
    let by = &s["requests_by_name"];
    assert_eq!(by["emit echo on /personalised"]["ok"], 2, "{by}");
    assert_eq!(by["emit userDetails on /personalised"]["ok"], 2, "{by}");
    assert_eq!(by["Socket.IO /socket.io/"]["status"]["101"], 4, "{by}");
    assert_eq!(s["users"]["metrics"]["counters"]["socketio.emit"], 4.0);
    // Each user joined the default namespace and its own, and left both.
    assert_eq!(wait_for(&server, "connect", "/", 4), 4);
    assert_eq!(wait_for(&server, "connect", "/personalised", 4), 4);
    assert_eq!(wait_for(&server, "disconnect", "/personalised", 4), 4);
}

#[test]
fn http_steps_captures_and_query_go_with_the_events() {
    let _shared = crate::support::shared();
    // As Artillery's http-socketio-server example: an HTTP request's capture sent as an event
    // and checked in the response; a think longer than the server's ping interval and
    // timeout, through which the user answers its pings.
    let server = SioServer::start(&[("PING_MS", "200"), ("PING_TIMEOUT_MS", "300")]);
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(
        dir.path(),
        "mixed.yml",
        &format!(
            "config:\n  target: http://127.0.0.1:{}\n  phases: [{{ duration: 1, arrivalRate: 2 }}]\n  socketio:\n    query: {{ token: abc }}\nscenarios:\n  - engine: socketio\n    flow:\n      - get:\n          url: /movies/{{{{ $randomNumber(1, 9) }}}}\n          capture: {{ json: $.title, as: title }}\n      - emit: {{ channel: echo, data: '{{{{ title }}}}' }}\n        response:\n          channel: echoResponse\n          data: '{{{{ title }}}}'\n          capture: {{ json: $.0, as: back }}\n      - think: 1.2\n      - emit: [count]\n        response: {{ channel: counted, capture: {{ json: '$[0]', as: count }} }}\n      - emit: {{ channel: echo, data: {{ said: '{{{{ back }}}}', n: '{{{{ count }}}}' }} }}\n      - emit: [count]\n        response: {{ channel: counted, data: [4] }}\n",
            server.port
        ),
    );
    let (s, out) = loadlab_json(&["run", script.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s["users"]["completed"], 2, "{}\n{stdout}", s["users"]);
    assert_eq!(s["requests_by_name"]["emit count"]["ok"], 4);
    assert_eq!(
        wait_for(&server, "token", "abc", 2),
        2,
        "the query reached the handshake"
    );
    // The third event carried the captures: the movie's title echoed, and 2 events counted
    // on the connection (the echo, then the count) across the think; the fourth was counted
    // (a server drops events that arrive with the disconnect, as it does Artillery's).
    let log = server.log.lock().unwrap().clone();
    let last: Vec<&Value> = log
        .iter()
        .filter(|l| l["event"] == "echo" && l["data"].is_object())
        .collect();
    assert_eq!(last.len(), 2, "{log:?}");
    for l in last {
        assert!(
            l["data"]["said"].as_str().unwrap().starts_with("Movie "),
            "{l}"
        );
        assert_eq!(l["data"]["n"], "2", "{l}");
    }
    assert_eq!(server.count("reason", "ping timeout"), 0, "{log:?}");
}

#[test]
fn a_wrong_answer_and_a_missing_one_fail_the_user_with_their_reason() {
    let _shared = crate::support::shared();
    let server = SioServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let run = |flow: &str| {
        let script = write_file(
            dir.path(),
            "bad.yml",
            &format!(
                "config:\n  target: http://127.0.0.1:{}\n  phases: [{{ duration: 1, arrivalRate: 2 }}]\nscenarios:\n  - engine: socketio\n    flow:\n{flow}",
                server.port
            ),
        );
        loadlab_json(&["run", script.to_str().unwrap(), "--timeout", "400ms"]).0
    };
    let s = run("      - emit: { channel: echo, data: hi }\n        response: { channel: echoResponse, data: bye }\n");
    assert_eq!(
        s["users"]["failures"]["data is not valid on emit echo"], 2,
        "{}",
        s["users"]
    );
    let s =
        run("      - emit: { channel: echo, data: hi }\n        response: { channel: never }\n");
    assert_eq!(
        s["users"]["failures"]["timeout on emit echo"], 2,
        "{}",
        s["users"]
    );
    let s = run("      - emit: { channel: userDetails }\n        acknowledge: { match: { json: $.0.name, value: Bob } }\n");
    assert_eq!(
        s["users"]["failures"]["expect match on emit userDetails"], 2,
        "{}",
        s["users"]
    );
}
