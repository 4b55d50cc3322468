//! gRPC calls against servers nobody here wrote: the Python reference service's gRPC face on
//! grpcio's asyncio server, whose reflection is grpcio-reflection's (`v1alpha` only, so loadlab
//! falls back to it), the Node one's on @grpc/grpc-js with @grpc/reflection (`v1`), and
//! grpc-go's interop server. Counts and statuses must be exact, by reflection and by `.proto`
//! alike.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::{loadlab, loadlab_json, reference_proto, stdout_of, unknown_method_proto};

/// The reference service's gRPC face on a runtime's own gRPC library (grpcio on Python,
/// @grpc/grpc-js on Node), stopped by its process id when dropped.
struct RuntimeGrpcServer {
    child: Child,
    port: u16,
}

impl RuntimeGrpcServer {
    /// `runtime` is `python` or `node`.
    fn start(runtime: &str) -> RuntimeGrpcServer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../targets")
            .join(runtime);
        let (program, script, installed) = match runtime {
            "python" => (
                dir.join(".venv/bin/python"),
                dir.join("grpc_server.py"),
                dir.join(".venv/bin/python"),
            ),
            _ => (
                "node".into(),
                dir.join("grpc_server.js"),
                dir.join("node_modules/@grpc/grpc-js"),
            ),
        };
        assert!(
            installed.exists(),
            "run scripts/install-runtimes.sh first (scripts/test.sh does): {} is missing",
            installed.display()
        );
        let port = crate::support::closed_port();
        let mut child = Command::new(program)
            .arg(script)
            .arg("--proto")
            .arg(reference_proto())
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the runtime runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening on 127.0.0.1:"), "{line:?}");
        RuntimeGrpcServer { child, port }
    }

    fn url(&self, method: &str) -> String {
        format!(
            "grpc://127.0.0.1:{}/loadlab.reference.v1.Reference/{method}",
            self.port
        )
    }
}

impl Drop for RuntimeGrpcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn grpcio_and_grpc_js_calls_are_counted_exactly_by_reflection_and_by_proto() {
    let _shared = crate::support::shared();
    for runtime in ["python", "node"] {
        calls_are_counted_exactly(runtime);
    }
}

/// The reference service's gRPC face on `runtime`, called by reflection and by `.proto`: every
/// call's count and status exact, the server's own refusals and a deadline included.
fn calls_are_counted_exactly(runtime: &str) {
    let server = RuntimeGrpcServer::start(runtime);
    let proto = reference_proto();
    let proto = proto.to_str().unwrap();
    // By reflection (grpcio-reflection serves v1alpha alone), 20 ms each, 10 in flight.
    let (s, out) = loadlab_json(&[
        "run",
        &server.url("Delay"),
        "-b",
        r#"{"ms": 20}"#,
        "-c",
        "2",
        "--streams",
        "5",
        "-n",
        "200",
    ]);
    let text = format!("{runtime}: {}", stdout_of(&out));
    assert_eq!(s["requests"]["completed"], 200, "{text}");
    assert_eq!(s["grpc"], serde_json::json!({"OK": 200}), "{text}");
    assert!(s["latency_ms"]["min"].as_f64().unwrap() >= 20.0, "{text}");
    // By .proto: a server stream of 3 messages 10 ms apart, each call timed to its end.
    let (s, out) = loadlab_json(&[
        "run",
        &server.url("Ticks"),
        "--proto",
        proto,
        "-b",
        r#"{"count": 3, "interval_ms": 10}"#,
        "-n",
        "30",
    ]);
    assert_eq!(
        s["grpc"],
        serde_json::json!({"OK": 30}),
        "{}",
        stdout_of(&out)
    );
    assert!(s["latency_ms"]["min"].as_f64().unwrap() >= 20.0);
    // The server's own refusals: an argument out of range, and a method it does not serve
    // (declared in a .proto of our own).
    let (s, _) = loadlab_json(&[
        "run",
        &server.url("Delay"),
        "-b",
        r#"{"ms": 700000}"#,
        "-n",
        "25",
    ]);
    assert_eq!(
        s["grpc"],
        serde_json::json!({"INVALID_ARGUMENT": 25}),
        "{runtime}: {s}"
    );
    assert_eq!(s["requests"]["errors"], 25);
    let dir = tempfile::tempdir().unwrap();
    let other = unknown_method_proto(dir.path());
    let (s, _) = loadlab_json(&[
        "run",
        &server.url("Nope"),
        "--proto",
        other.to_str().unwrap(),
        "-n",
        "25",
    ]);
    assert_eq!(
        s["grpc"],
        serde_json::json!({"UNIMPLEMENTED": 25}),
        "{runtime}: {s}"
    );
    // timeout_on_sleeping_server: a deadline shorter than the call; grpcio enforces the
    // grpc-timeout it was sent, and loadlab's own timer is the same, so whichever ends the
    // call, it ends DEADLINE_EXCEEDED.
    let (s, _) = loadlab_json(&[
        "run",
        &server.url("Delay"),
        "-b",
        r#"{"ms": 2000}"#,
        "-c",
        "5",
        "-n",
        "10",
        "--timeout",
        "200ms",
    ]);
    assert_eq!(
        s["grpc"],
        serde_json::json!({"DEADLINE_EXCEEDED": 10}),
        "{runtime}: {s}"
    );
    assert_eq!(s["requests"]["errors"], 10);
    // Reflection names what the server has when the method is not there.
    let out = loadlab(&["run", &server.url("Pong"), "-n", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has no method Pong"), "{runtime}: {err}");
}

/// The REST-against-gRPC lab on each runtime: Rust answers both on one port, Node and Python
/// from a gRPC server of their own beside each replica (started because the lab calls gRPC).
/// Every call is counted once, and each runtime gets its verdict with an interval. Counts and
/// verdicts' presence are asserted, not their answers, so the machine may be shared quietly.
#[test]
fn the_rest_against_grpc_lab_runs_both_and_judges_the_difference() {
    let _quiet = crate::support::quiet();
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rest-vs-grpc.short.yaml");
    let dir = tempfile::tempdir().unwrap();
    let (stdout, out) =
        crate::support::lab_ok(dir.path(), &std::fs::read_to_string(example).unwrap());
    let csv = std::fs::read_to_string(out.join("comparison.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 12, "3 runtimes × 2 workloads × 2 rounds: {csv}");
    for row in &rows {
        let grpc = row[col("workload")] == "grpc calc";
        // Every call answered OK: 2 s at 100 a second, each of the 200 counted once.
        assert_eq!(
            row[col("grpc not ok")],
            if grpc { "0" } else { "-" },
            "{csv}"
        );
        assert_eq!(row[col("2xx")], "200", "{csv}");
    }
    let lab = crate::support::read_json(&out.join("lab.json"));
    let verdicts = lab["verdicts"].as_array().unwrap();
    for runtime in ["rust", "node", "python"] {
        let verdict = verdicts.iter().find(|v| {
            v["measure"] == "latency_p50"
                && v["factor"] == "workload"
                && v["variant"] == "grpc calc"
                && v["topology"] == runtime
        });
        let v = verdict.unwrap_or_else(|| panic!("no verdict on {runtime}: {stdout}"));
        let (low, high) = (
            v["ci_low"].as_f64().unwrap(),
            v["ci_high"].as_f64().unwrap(),
        );
        assert!(low > 0.0 && low <= high, "{runtime}: {v}");
    }
    // Node's and Python's gRPC servers ran beside their HTTP ones.
    assert!(stdout.contains("its gRPC server on 127.0.0.1:"), "{stdout}");
}

/// Where `scripts/install-grpc-interop.sh` builds grpc-go's interop servers:
/// `LOADLAB_GRPC_INTEROP`, or its place in the cache.
fn interop_dir() -> std::path::PathBuf {
    crate::support::built_once(
        "LOADLAB_GRPC_INTEROP",
        "grpc-interop-v1.85.0",
        "scripts/install-grpc-interop.sh",
    )
}

/// One of grpc-go's interop servers on 127.0.0.1, stopped by its process id when dropped.
struct InteropServer {
    child: Child,
    port: u16,
}

impl InteropServer {
    /// `google.golang.org/grpc/interop/server` itself: no reflection.
    fn official() -> InteropServer {
        let port = crate::support::closed_port();
        let child = Command::new(interop_dir().join("interop-server"))
            .args(["-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the interop server runs");
        let server = InteropServer { child, port };
        let up = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                up.elapsed().as_secs() < 10,
                "the interop server never listened"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        server
    }

    /// The same TestService implementation with grpc-go's server reflection, given `args`
    /// (`-tls_cert FILE -tls_key FILE` serve it over TLS).
    fn with_reflection(args: &[&str]) -> InteropServer {
        let mut child = Command::new(interop_dir().join("interop-reflect"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the interop server runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("its port");
        InteropServer { child, port }
    }

    fn url(&self, method: &str) -> String {
        format!(
            "grpc://127.0.0.1:{}/grpc.testing.TestService/{method}",
            self.port
        )
    }
}

impl Drop for InteropServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One interop case as a run of loadlab's: the method, the request (messages of a client stream
/// as a JSON array), metadata, a deadline, and the status every call must end with and the
/// bytes each must at least bring back.
struct Case {
    name: &'static str,
    method: &'static str,
    request: String,
    metadata: &'static [&'static str],
    timeout: Option<&'static str>,
    status: &'static str,
    answer_bytes: u64,
}

/// gRPC's interop cases (grpc/doc/interop-test-descriptions.md) that a load of calls can make:
/// each call sends its messages together, so ping_pong's four requests go before its answers
/// come back, which the server allows.
fn interop_cases() -> Vec<Case> {
    // `size` zero bytes in base64 (as JSON carries bytes): "AAAA" a group of three, the last
    // group padded.
    let payload = |size: usize| {
        let tail = ["", "AA==", "AAA="][size % 3];
        let body = "AAAA".repeat(size / 3) + tail;
        format!(r#""payload": {{"body": "{body}"}}"#)
    };
    let large = format!(r#"{{"responseSize": 314159, {}}}"#, payload(271828));
    let ping_pong = [(31415, 27182), (9, 8), (2653, 1828), (58979, 45904)]
        .map(|(answer, sent)| {
            format!(
                r#"{{"responseParameters": [{{"size": {answer}}}], {}}}"#,
                payload(sent)
            )
        })
        .join(", ");
    let status = r#"{"responseStatus": {"code": 2, "message": "test status message"}}"#;
    vec![
        Case {
            name: "empty_unary",
            method: "EmptyCall",
            request: "{}".into(),
            metadata: &[],
            timeout: None,
            status: "OK",
            answer_bytes: 0,
        },
        Case {
            name: "large_unary",
            method: "UnaryCall",
            request: large.clone(),
            metadata: &[],
            timeout: None,
            status: "OK",
            answer_bytes: 314159,
        },
        Case {
            name: "client_streaming",
            method: "StreamingInputCall",
            request: format!(
                "[{}]",
                [27182, 8, 1828, 45904]
                    .map(|n| format!("{{{}}}", payload(n)))
                    .join(", ")
            ),
            metadata: &[],
            timeout: None,
            status: "OK",
            answer_bytes: 0,
        },
        Case {
            name: "server_streaming",
            method: "StreamingOutputCall",
            request: r#"{"responseParameters": [{"size": 31415}, {"size": 9}, {"size": 2653}, {"size": 58979}]}"#.into(),
            metadata: &[],
            timeout: None,
            status: "OK",
            answer_bytes: 31415 + 9 + 2653 + 58979,
        },
        Case {
            name: "ping_pong",
            method: "FullDuplexCall",
            request: format!("[{ping_pong}]"),
            metadata: &[],
            timeout: None,
            status: "OK",
            answer_bytes: 31415 + 9 + 2653 + 58979,
        },
        Case {
            name: "status_code_and_message (unary)",
            method: "UnaryCall",
            request: status.into(),
            metadata: &[],
            timeout: None,
            status: "UNKNOWN",
            answer_bytes: 0,
        },
        Case {
            name: "status_code_and_message (full duplex)",
            method: "FullDuplexCall",
            request: format!("[{status}]"),
            metadata: &[],
            timeout: None,
            status: "UNKNOWN",
            answer_bytes: 0,
        },
        Case {
            name: "custom_metadata",
            method: "UnaryCall",
            request: large,
            // 0xababab, base64 as a -bin key's value is.
            metadata: &[
                "x-grpc-test-echo-initial: test_initial_metadata_value",
                "x-grpc-test-echo-trailing-bin: q6ur",
            ],
            timeout: None,
            status: "OK",
            answer_bytes: 314159,
        },
        // The case leaves its stream open so that the server waits past the deadline; a call of
        // loadlab's half-closes after its messages, so the server is asked to sleep 100 ms
        // before its answer instead (interval_us), far past the 1 ms deadline.
        Case {
            name: "timeout_on_sleeping_server",
            method: "FullDuplexCall",
            request: format!(
                r#"{{"responseParameters": [{{"size": 1, "intervalUs": 100000}}], {}}}"#,
                payload(27182)
            ),
            metadata: &[],
            timeout: Some("1ms"),
            status: "DEADLINE_EXCEEDED",
            answer_bytes: 0,
        },
    ]
}

#[test]
fn grpc_gos_interop_cases_are_counted_exactly_under_load_by_protoset_and_by_reflection() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let protoset = dir.path().join("interop.protoset");
    let wrote = Command::new(interop_dir().join("interop-reflect"))
        .arg("-protoset")
        .arg(&protoset)
        .status()
        .unwrap();
    assert!(wrote.success());
    let protoset = protoset.to_str().unwrap().to_string();
    let official = InteropServer::official();
    let reflecting = InteropServer::with_reflection(&[]);
    let calls: u64 = 40;
    for case in interop_cases() {
        let body = dir.path().join("request.json");
        std::fs::write(&body, &case.request).unwrap();
        for (server, types) in [
            (&official, vec!["--protoset", protoset.as_str()]),
            (&reflecting, vec![]),
        ] {
            let url = server.url(case.method);
            let mut args = vec![
                "run",
                &url,
                "--body-file",
                body.to_str().unwrap(),
                "-R",
                "100",
                "-d",
                "1s",
                // Calls share one connection, as a gRPC client's channel does.
                "--streams",
                "20",
                "-n",
            ];
            let n = calls.to_string();
            args.push(&n);
            args.extend(types.iter().copied());
            for m in case.metadata {
                args.extend(["-H", m]);
            }
            if let Some(t) = case.timeout {
                args.extend(["--timeout", t]);
            }
            let (s, out) = loadlab_json(&args);
            let how = if types.is_empty() {
                "reflection"
            } else {
                "protoset"
            };
            let said = format!("{} by {how}:\n{}", case.name, stdout_of(&out));
            // Every call ends, by the status the case asks for. Under a 1 ms deadline a call
            // the client could not send within it is dropped, never sent, and counted apart.
            let completed = s["requests"]["completed"].as_u64().unwrap();
            let dropped = s["requests"]["dropped"].as_u64().unwrap();
            assert_eq!(completed + dropped, calls, "{said}");
            if case.timeout.is_none() {
                assert_eq!(dropped, 0, "{said}");
            }
            assert_eq!(
                s["grpc"],
                serde_json::json!({ case.status: completed }),
                "{said}"
            );
            let bytes = s["throughput"]["bytes_per_s"].as_f64().unwrap()
                * s["duration_s"].as_f64().unwrap();
            assert!(
                bytes + 1.0 >= (calls * case.answer_bytes) as f64,
                "{bytes} bytes: {said}"
            );
        }
    }
}

/// grpc-go's interop server's streaming methods, their messages paced as the flags say and each
/// timed: a full-duplex call's five messages 20 ms apart, each answered 5 ms after it arrives
/// (its `interval_us`), pair each reply with its message; a client stream sent every 10 ms for
/// 100 ms sends ten messages and gets one answer; a server stream of three messages 20 ms apart
/// brings its first no sooner than 20 ms. The counts are exact; the times come from the waits
/// the server was asked for.
#[test]
fn grpc_gos_streaming_calls_send_at_their_pace_and_time_each_message() {
    let _quiet = crate::support::quiet();
    let server = InteropServer::with_reflection(&[]);
    let dir = tempfile::tempdir().unwrap();
    let run = |method: &str, request: &str, extra: &[&str]| {
        let body = dir.path().join("request.json");
        std::fs::write(&body, request).unwrap();
        let url = server.url(method);
        let mut args = vec![
            "run",
            &url,
            "--body-file",
            body.to_str().unwrap(),
            "-R",
            "20",
            "-n",
            "20",
            "--streams",
            "20",
        ];
        args.extend(extra);
        let (s, out) = loadlab_json(&args);
        let said = format!("{method}:\n{}", stdout_of(&out));
        assert_eq!(s["grpc"], serde_json::json!({ "OK": 20 }), "{said}");
        (s, said)
    };
    let ms = |v: &serde_json::Value| v.as_f64().unwrap();
    // Messages sent and received, over the run's streaming calls.
    let messages = |st: &serde_json::Value| {
        let n = |k: &str| st[k].as_u64().unwrap_or_default();
        (n("messages_sent"), n("messages_received"))
    };

    let (s, said) = run(
        "FullDuplexCall",
        r#"[{"responseParameters": [{"size": 10, "intervalUs": 5000}]}]"#,
        &["--stream-interval", "20ms", "--stream-call-count", "5"],
    );
    let st = &s["grpc_streams"];
    assert_eq!(st["calls"], 20, "{said}");
    assert_eq!(messages(st), (100, 100), "{said}");
    assert!(
        ms(&st["reply_ms"]["min"]) >= 4.9,
        "a reply waits 5 ms: {said}"
    );
    assert!(ms(&st["reply_ms"]["p50"]) < 25.0, "{said}");
    // Four gaps of 20 ms, then the last answer's 5 ms.
    assert!(ms(&s["latency_ms"]["min"]) >= 84.9, "{said}");

    let (s, said) = run(
        "StreamingInputCall",
        r#"[{"payload": {"body": "AAAA"}}]"#,
        &[
            "--stream-interval",
            "10ms",
            "--stream-call-duration",
            "100ms",
        ],
    );
    let st = &s["grpc_streams"];
    assert_eq!(messages(st), (200, 20), "{said}");
    assert!(
        st.get("reply_ms").is_none(),
        "a client stream pairs no replies: {said}"
    );
    assert!(ms(&s["latency_ms"]["min"]) >= 99.9, "{said}");

    let (s, said) = run(
        "StreamingOutputCall",
        r#"{"responseParameters": [{"size": 1, "intervalUs": 20000}, {"size": 1, "intervalUs": 20000}, {"size": 1, "intervalUs": 20000}]}"#,
        &[],
    );
    let st = &s["grpc_streams"];
    assert_eq!(messages(st), (20, 60), "{said}");
    assert!(ms(&st["first_message_ms"]["min"]) >= 19.9, "{said}");
    assert!(ms(&s["latency_ms"]["min"]) >= 59.9, "{said}");

    // Pacing a method whose client sends one message is refused in one line, as bad input
    // (its types are the server's to say).
    let out = crate::support::loadlab(&[
        "run",
        &server.url("StreamingOutputCall"),
        "--stream-interval",
        "10ms",
        "-n",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server-streaming: drop them"), "{err}");
}

/// `grpcs://` against grpc-go's interop server over TLS, on a certificate of the test's own CA:
/// with `--cacert` or `-k`, the method's types are asked of the server by reflection over TLS
/// and every call ends OK, as they do from a protoset over the run's own TLS connections;
/// without either, asking the server fails in one line that names the unknown issuer and what
/// to pass, and calls made from a protoset fail their handshakes, counted as TLS failures and
/// as `UNAVAILABLE` (what a gRPC client reports), with the exit code of a run that reached
/// nothing.
#[test]
fn grpcs_calls_grpc_gos_server_over_tls_by_reflection_and_by_protoset_and_an_unknown_ca_is_named() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    crate::tls::make_certificates(dir.path());
    let file = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (cert, key, ca) = (file("good.pem"), file("good.key"), file("ca.pem"));
    let protoset = file("interop.protoset");
    let wrote = Command::new(interop_dir().join("interop-reflect"))
        .args(["-protoset", &protoset])
        .status()
        .unwrap();
    assert!(wrote.success());
    let server = InteropServer::with_reflection(&["-tls_cert", &cert, "-tls_key", &key]);
    let url = format!(
        "grpcs://127.0.0.1:{}/grpc.testing.TestService/UnaryCall",
        server.port
    );
    let body = r#"{"responseSize": 64, "payload": {"body": "AAAA"}}"#;
    let load = [
        "run",
        url.as_str(),
        "-b",
        body,
        "-n",
        "30",
        "-c",
        "2",
        "--streams",
        "5",
    ];
    for trust in [
        vec!["--cacert", ca.as_str()],
        vec!["-k"],
        vec!["--cacert", ca.as_str(), "--protoset", protoset.as_str()],
    ] {
        let args: Vec<&str> = load.iter().copied().chain(trust.iter().copied()).collect();
        let (s, out) = loadlab_json(&args);
        let said = format!("{trust:?}:\n{}", stdout_of(&out));
        assert_eq!(s["grpc"], serde_json::json!({ "OK": 30 }), "{said}");
        assert_eq!(s["requests"]["ok"], 30, "{said}");
        assert_eq!(s["tls"]["verify"], trust != ["-k"], "{said}");
    }
    // Nobody vouches for the server's certificate: reflection cannot ask it.
    let out = crate::support::loadlab(&load);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("failed the TLS handshake")
            && stderr.contains("UnknownIssuer")
            && stderr.contains("--cacert FILE"),
        "{stderr}"
    );
    // From a protoset the calls are made, and each fails its handshake.
    let args: Vec<&str> = load
        .iter()
        .copied()
        .chain(["--protoset", protoset.as_str()])
        .collect();
    let out = crate::support::loadlab(&args);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    // A failed handshake fails every call waiting for its connection: each call is counted,
    // the handshakes apart.
    assert!(stdout.contains("tls × 30"), "{stdout}");
    assert!(stdout.contains("unknown_issuer ×"), "{stdout}");
    assert!(stdout.contains("UNAVAILABLE × 30"), "{stdout}");
    assert!(!stdout.contains("OK ×"), "{stdout}");
}
