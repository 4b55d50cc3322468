//! Artillery's `engine: ws` scenarios: each user opens its own WebSocket (headers and
//! subprotocols from `config.ws`), sends text and JSON, awaits replies to capture from and
//! match, and closes it at its end — checked on what a WebSocket server on 127.0.0.1 saw, and
//! on the summary (the handshake and each round trip as requests, Artillery's message counters).

use crate::support::{loadlab, write_file};

#[test]
fn ws_steps_and_http_steps_stay_in_their_own_engines() {
    let _shared = crate::support::shared();
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
