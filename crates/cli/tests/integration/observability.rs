//! A run's series where teams look: Prometheus (the real server, its remote-write receiver)
//! asked through its query API for what loadlab wrote, against the run's `summary.json`, and
//! the Grafana dashboard's queries run against what landed.

use crate::support::loadlab_json;
use loadlab_service::TestServer;
use std::net::TcpListener;

#[test]
fn a_backend_that_is_down_costs_a_warning_and_a_count_never_the_run() {
    let server = TestServer::start(1).expect("test server");
    let url = format!("http://{}/ping", server.addr);
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (summary, out) = loadlab_json(&[
        "run",
        &url,
        "-c",
        "1",
        "-d",
        "2s",
        "--remote-write",
        &format!("http://127.0.0.1:{port}/api/v1/write"),
    ]);
    assert!(
        summary["requests"]["ok"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("cannot export metrics").count(),
        1,
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("0 snapshot(s) sent") && stdout.contains("not sent"),
        "{stdout}"
    );
}
