//! gRPC calls against a server nobody here wrote: the Python reference service's gRPC face on
//! grpcio's asyncio server, whose reflection is grpcio-reflection's (`v1alpha` only, so loadlab
//! falls back to it). Counts and statuses must be exact, by reflection and by `.proto` alike.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::{loadlab, loadlab_json, reference_proto, stdout_of, unknown_method_proto};

/// grpcio serving the reference service, stopped by its process id when dropped.
struct GrpcioServer {
    child: Child,
    port: u16,
}

impl GrpcioServer {
    fn start() -> GrpcioServer {
        let python_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../targets/python");
        let python = python_dir.join(".venv/bin/python");
        assert!(
            python.is_file(),
            "run scripts/install-runtimes.sh first (scripts/test.sh does): {} is missing",
            python.display()
        );
        let port = crate::support::closed_port();
        let mut child = Command::new(python)
            .arg(python_dir.join("grpc_server.py"))
            .arg("--proto")
            .arg(reference_proto())
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the venv's python runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening on 127.0.0.1:"), "{line:?}");
        GrpcioServer { child, port }
    }

    fn url(&self, method: &str) -> String {
        format!(
            "grpc://127.0.0.1:{}/loadlab.reference.v1.Reference/{method}",
            self.port
        )
    }
}

impl Drop for GrpcioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn grpcio_calls_are_counted_exactly_by_reflection_and_by_proto() {
    let _shared = crate::support::shared();
    let server = GrpcioServer::start();
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
    let text = stdout_of(&out);
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
        "{s}"
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
    assert_eq!(s["grpc"], serde_json::json!({"UNIMPLEMENTED": 25}), "{s}");
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
        "{s}"
    );
    assert_eq!(s["requests"]["errors"], 10);
    // Reflection names what the server has when the method is not there.
    let out = loadlab(&["run", &server.url("Pong"), "-n", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has no method Pong"), "{err}");
}

#[test]
fn the_rest_against_grpc_lab_runs_both_and_judges_the_difference() {
    let _alone = crate::support::alone();
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
    assert_eq!(rows.len(), 4, "{csv}");
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
    assert!(
        verdicts
            .iter()
            .any(|v| v["measure"] == "latency_p50" && v["variant"] == "grpc calc"),
        "{stdout}"
    );
}
