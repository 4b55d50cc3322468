//! `loadlab run grpc://…` against the reference service's gRPC methods (on its own port, over
//! h2c): calls counted by their status in every output, thresholds on a status, and a server
//! that stalls seen in the open model's latency.

use crate::support::{
    exit_code, loadlab, loadlab_json, read_json, reference_proto, stdout_of, unknown_method_proto,
    EXIT_THRESHOLDS,
};
use loadlab_service::TestServer;

/// `grpc://` URL of `method` on `server`.
fn call(server: &TestServer, method: &str) -> String {
    let http = server.url("");
    let authority = http.trim_start_matches("http://");
    format!("grpc://{authority}/loadlab.reference.v1.Reference/{method}")
}

#[test]
fn every_call_is_counted_by_its_status_and_a_threshold_can_name_one() {
    let server = TestServer::start(2).unwrap();
    let proto = reference_proto();
    let proto = proto.to_str().unwrap();
    // Known answer: each call waits 20 ms in the service, so none is faster.
    let (s, out) = loadlab_json(&[
        "run",
        &call(&server, "Delay"),
        "--proto",
        proto,
        "-b",
        r#"{"ms": 20}"#,
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "200",
        "--timeout",
        "5s",
    ]);
    let text = stdout_of(&out);
    assert_eq!(s["requests"]["completed"], 200, "{text}");
    assert_eq!(s["requests"]["ok"], 200, "{text}");
    assert_eq!(s["grpc"], serde_json::json!({"OK": 200}), "{text}");
    assert_eq!(s["status"]["200"], 200);
    assert_eq!(s["http2"]["streams"], 4);
    assert!(s["latency_ms"]["min"].as_f64().unwrap() >= 20.0, "{text}");
    assert!(text.contains("  grpc         OK × 200"), "{text}");
    assert_eq!(
        s["targets"][0].as_str(),
        Some(call(&server, "Delay").as_str()),
        "reports name the call by its grpc:// URL"
    );

    // A method the server does not have: every call ends UNIMPLEMENTED (answered 200, its
    // status in the headers alone), a failure the status classes do not show.
    let dir = tempfile::tempdir().unwrap();
    let other = unknown_method_proto(dir.path());
    let run_dir = dir.path().join("run");
    let out = loadlab(&[
        "run",
        &call(&server, "Nope"),
        "--proto",
        other.to_str().unwrap(),
        "-n",
        "30",
        "-c",
        "1",
        "--slo",
        "status:UNIMPLEMENTED<1%,errors<=100%",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let text = stdout_of(&out);
    assert_eq!(exit_code(&out), EXIT_THRESHOLDS, "{text}");
    assert!(
        text.contains("FAIL  status:UNIMPLEMENTED<1%  100.00 %"),
        "{text}"
    );
    assert!(text.contains("30 gRPC UNIMPLEMENTED"), "{text}");
    let s = read_json(&run_dir.join("summary.json"));
    assert_eq!(s["grpc"], serde_json::json!({"UNIMPLEMENTED": 30}));
    assert_eq!(
        (
            s["requests"]["ok"].as_u64(),
            s["requests"]["errors"].as_u64()
        ),
        (Some(0), Some(30))
    );
    let timeline = std::fs::read_to_string(run_dir.join("timeline.csv")).unwrap();
    let header: Vec<&str> = timeline.lines().next().unwrap().split(',').collect();
    let at = header.iter().position(|c| *c == "grpc_failed").unwrap();
    let hidden: u64 = timeline
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(at).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(hidden, 30, "{timeline}");
    loadlab(&["report", run_dir.to_str().unwrap()]);
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        html.contains("gRPC statuses: UNIMPLEMENTED × 30"),
        "report.html"
    );
}

#[test]
fn a_grpc_server_that_stalls_shows_it_in_the_open_models_p99() {
    let server = TestServer::start(1).unwrap();
    let proto = reference_proto();
    // Half of every second frozen: a call arriving then waits for the freeze's end, up to
    // 500 ms, which the open model counts from each call's intended start.
    let (s, out) = loadlab_json(&[
        "run",
        &call(&server, "Stall"),
        "--proto",
        proto.to_str().unwrap(),
        "-b",
        r#"{"every_ms": 1000, "for_ms": 500}"#,
        "-R",
        "40",
        "-d",
        "2s",
    ]);
    let text = stdout_of(&out);
    assert_eq!(s["grpc"]["OK"], s["requests"]["completed"], "{text}");
    assert_eq!(s["grpc"].as_object().unwrap().len(), 1, "{text}");
    let p99 = s["latency_ms"]["p99"].as_f64().unwrap();
    let p50 = s["latency_ms"]["p50"].as_f64().unwrap();
    assert!(p99 >= 400.0, "p99 {p99} ms: {text}");
    assert!(
        p50 <= 300.0,
        "p50 {p50} ms: half the calls arrive outside the freeze: {text}"
    );
}

#[test]
fn grpc_flags_that_cannot_apply_are_refused_in_one_line() {
    let proto = reference_proto();
    let proto = proto.to_str().unwrap();
    let url = "grpc://127.0.0.1:1/loadlab.reference.v1.Reference/Ping";
    for (args, says) in [
        (vec!["run", url], "add --proto FILE"),
        (vec!["run", url, "--proto", proto, "-m", "POST"], "drop -m"),
        (
            vec!["run", url, "--proto", proto, "--no-keepalive"],
            "gRPC calls go over HTTP/2",
        ),
        (
            vec!["run", url, "http://127.0.0.1:1/", "--proto", proto],
            "cannot share a run",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--proto", proto],
            "apply to grpc:// targets",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--streams", "4"],
            "add --http2",
        ),
        (
            vec!["run", "grpc://127.0.0.1:1/Ping", "--proto", proto],
            "package.Service/Method",
        ),
        (vec!["probe", url], "called by `loadlab run`"),
    ] {
        let out = loadlab(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(exit_code(&out), 1, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn without_a_proto_file_the_types_come_from_server_reflection() {
    let server = TestServer::start(2).unwrap();
    // A server stream, by reflection: each call lasts until its last message, 3 ticks 10 ms
    // apart.
    let (s, out) = loadlab_json(&[
        "run",
        &call(&server, "Ticks"),
        "-b",
        r#"{"count": 3, "intervalMs": 10}"#,
        "-c",
        "2",
        "-n",
        "20",
    ]);
    let text = stdout_of(&out);
    assert_eq!(s["grpc"], serde_json::json!({"OK": 20}), "{text}");
    assert!(s["latency_ms"]["min"].as_f64().unwrap() >= 20.0, "{text}");
    // A method the server's reflection does not know is refused before anything is sent.
    let out = loadlab(&["run", &call(&server, "Pong"), "-n", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(&out), 1, "{err}");
    assert!(err.contains("has no method Pong"), "{err}");
    assert!(err.contains("server reflection at 127.0.0.1:"), "{err}");
}

#[test]
fn a_call_past_its_deadline_ends_deadline_exceeded() {
    let server = TestServer::start(1).unwrap();
    let proto = reference_proto();
    // Each call waits 2 s in the service; --timeout gives it 100 ms (sent as grpc-timeout,
    // which this service does not enforce: the client's deadline ends the call).
    let (s, out) = loadlab_json(&[
        "run",
        &call(&server, "Delay"),
        "--proto",
        proto.to_str().unwrap(),
        "-b",
        r#"{"ms": 2000}"#,
        "-c",
        "4",
        "-n",
        "8",
        "--timeout",
        "100ms",
    ]);
    let text = stdout_of(&out);
    assert_eq!(
        s["grpc"],
        serde_json::json!({"DEADLINE_EXCEEDED": 8}),
        "{text}"
    );
    assert_eq!(s["errors"]["timeout"], 8, "{text}");
    assert!(text.contains("8 gRPC DEADLINE_EXCEEDED"), "{text}");
}

/// A scenario file's `grpc:` steps (loadlab's extension) against the reference service: a
/// capture from one call's answer fills the next call's request and an HTTP request's URL, a
/// server stream's first message is captured, `expect: {code}` passes on the status asked for
/// and fails the user on another, and every call is counted by its status. The types come from
/// `config.grpc.proto`, then from the server's reflection.
#[test]
fn a_scenarios_grpc_steps_call_capture_and_expect_their_status() {
    let server = TestServer::start(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let proto = reference_proto();
    let flow = r#"
scenarios:
  - flow:
      - grpc:
          method: loadlab.reference.v1.Reference/Ping
          capture: { json: "$.message", as: reply }
          expect: { code: OK }
      - grpc:
          method: loadlab.reference.v1.Reference/Delay
          name: delay
          data: { ms: "{{ wait }}" }
          metadata: { x-user: "{{ reply }}" }
          capture: { json: "$.ms", as: waited }
      - get:
          url: "/ping?said={{ reply }}&waited={{ waited }}"
          name: echo
      - grpc:
          method: /loadlab.reference.v1.Reference/Ticks
          data: { count: 3, interval_ms: 1 }
          capture: { json: "$.index", as: first_tick }
      - grpc:
          method: loadlab.reference.v1.Reference/Delay
          name: refused
          data: { ms: 999999999 }
          expect: { code: [INVALID_ARGUMENT, 9] }
      - grpc:
          method: loadlab.reference.v1.Reference/Delay
          name: wrong
          data: { ms: 1 }
          expect: { code: NOT_FOUND }
"#;
    for types in [format!("  grpc: {{ proto: {:?} }}\n", proto), String::new()] {
        let file = dir.path().join("grpc.yml");
        std::fs::write(
            &file,
            format!(
                "config:\n  target: \"{}\"\n  phases:\n    - duration: 1\n      arrivalCount: 6\n  variables:\n    wait: 15\n{types}{flow}",
                server.url("")
            ),
        )
        .unwrap();
        let how = if types.is_empty() {
            "reflection"
        } else {
            "proto"
        };
        let (s, out) = loadlab_json(&["run", file.to_str().unwrap()]);
        let said = format!("{how}: {}", stdout_of(&out));
        let by_name = &s["requests_by_name"];
        // Six users, each through five calls and a GET; each fails at the last expectation.
        assert_eq!(s["users"]["failed"], 6, "{said}");
        assert_eq!(
            s["grpc"],
            serde_json::json!({"OK": 24, "INVALID_ARGUMENT": 6}),
            "{said}"
        );
        assert_eq!(by_name["echo"]["status"]["200"], 6, "{said}");
        assert!(
            by_name["delay"]["latency_ms"]["min"].as_f64().unwrap() >= 14.9,
            "the captured and templated wait was sent: {said}"
        );
        let failures = s["users"]["failures"].to_string();
        assert!(
            failures.contains("gRPC status OK, expected NOT_FOUND on wrong"),
            "{failures}"
        );
        assert_eq!(s["grpc_streams"]["messages_received"], 6 * 3, "{said}");
    }
}

/// A `grpc:` step that cannot call its method is refused before anything is sent, at its line:
/// a method its types lack, a request that is not its input, a status that is not one.
#[test]
fn a_grpc_step_that_cannot_be_called_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let proto = reference_proto();
    for (step, says) in [
        (
            "method: loadlab.reference.v1.Reference/Pong",
            "has no method Pong",
        ),
        (
            "method: loadlab.reference.v1.Reference/Delay\n          data: { ms: \"soon\" }",
            "not a loadlab.reference.v1.DelayRequest",
        ),
        (
            "method: loadlab.reference.v1.Reference/Ping\n          expect: { code: FINE }",
            "expect code \"FINE\"",
        ),
        ("method: Ping", "is not package.Service/Method"),
    ] {
        let file = dir.path().join("bad.yml");
        std::fs::write(
            &file,
            format!(
                "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalCount: 1\n  grpc: {{ proto: {proto:?} }}\nscenarios:\n  - flow:\n      - grpc:\n          {step}\n"
            ),
        )
        .unwrap();
        let out = loadlab(&["run", file.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(exit_code(&out), 1, "{step}: {err}");
        assert!(err.contains(says), "{step}: {err}");
        assert!(err.contains("bad.yml:10"), "placed at its step: {err}");
    }
}
