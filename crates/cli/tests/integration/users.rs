//! Virtual users from scenario files (flows with payload, captures, templates, expectations
//! and loops; Markov user models with static resources; users phases) against the real
//! reference service on 127.0.0.1.

use crate::support::{loadlab, loadlab_json, next_ticket, run_scenario};
use loadlab_service::TestServer;
use serde_json::Value;
use std::path::Path;

/// Runs a scenario file against `server` and returns its summary.
fn run(file: &Path, server: &TestServer) -> Value {
    run_scenario(file, server, &[])
}

fn completed(s: &Value, name: &str) -> u64 {
    s["requests_by_name"][name]["completed"]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name:?} in {}", s["requests_by_name"]))
}

/// A server that answers one request per connection and then closes it quietly after 50 ms,
/// as servers with a short keep-alive timeout do; it stops when dropped.
struct ClosingServer {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ClosingServer {
    fn start() -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                };
                std::thread::spawn(move || {
                    conn.set_nonblocking(false).unwrap();
                    let mut buf = [0u8; 4096];
                    if conn.read(&mut buf).unwrap_or(0) > 0 {
                        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                });
            }
        });
        ClosingServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ClosingServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn flows_log_in_with_payload_rows_and_use_every_captured_token() {
    let server = TestServer::start(1).unwrap();
    // 60 users over 2 s: 45 log in (weight 3), take a token and use it three times on
    // /account and on a counter named after their payload row; 15 only ping.
    let (dir, file) = crate::support::scenario_file(
        r#"config:
  target: "http://127.0.0.1:9"
  phases:
    - duration: 2
      arrivalRate: 30
  payload:
    path: users.csv
    fields: [username, password]
    skipHeader: true
    order: sequence
scenarios:
  - name: member
    weight: 3
    flow:
      - post:
          url: "/login"
          json: { user: "{{ username }}", password: "{{ password }}" }
          capture:
            json: "$.token"
            as: token
          expect:
            - statusCode: 200
            - contentType: json
      - think: 0.05
      - loop:
          - get:
              url: "/account"
              headers:
                Authorization: "Bearer {{ token }}"
              expect:
                - statusCode: 200
          - get:
              url: "/turno/u-{{ username }}"
              qs: { note: "a b&c" }
        count: 3
  - name: visitor
    flow:
      - get:
          url: "/ping"
          name: ping
"#,
    );
    std::fs::write(
        dir.path().join("users.csv"),
        "name,pw\nana,1\nbob,2\ncid,3\n",
    )
    .unwrap();
    let s = run(&file, &server);
    let users = &s["users"];
    assert_eq!(users["started"], 60, "{users}");
    assert_eq!(users["completed"], 60, "{users}");
    assert_eq!(users["failed"], 0, "{users}");
    assert_eq!(completed(&s, "POST /login"), 45);
    assert_eq!(
        s["requests_by_name"]["GET /account"]["status"]["200"], 135,
        "every captured token was accepted"
    );
    assert_eq!(completed(&s, "ping"), 15, "weights 3:1");
    // Users 0..59 take rows in order; the members among them are the users k with k % 4 != 3.
    let mut expected = [0u64; 3];
    for k in (0..60u64).filter(|k| k % 4 != 3) {
        expected[(k % 3) as usize] += 3;
    }
    for (row, name) in ["ana", "bob", "cid"].iter().enumerate() {
        assert_eq!(
            next_ticket(&server, &format!("u-{name}")) - 1,
            expected[row],
            "{name}'s counter"
        );
    }
    assert_eq!(s["errors"]["reset"], 0);
    assert_eq!(s["requests"]["errors"], 0);
}

#[test]
fn failed_captures_and_connections_end_sessions_with_their_reason_and_failed_expects_are_counted() {
    let server = TestServer::start(1).unwrap();
    // 10 users each of three kinds: a 404 fails its expectation (counted; the user goes on),
    // a missing JSON field fails its capture, and a closed port fails to connect (neither
    // reaches its second step).
    let (_dir, file) = crate::support::scenario_file(
        r#"config:
  target: "http://127.0.0.1:9"
  phases:
    - duration: 1
      arrivalCount: 30
scenarios:
  - name: missing
    flow:
      - get:
          url: "/nowhere"
          expect:
            statusCode: [200, 201]
      - get: { url: "/ping", name: after missing }
  - name: nocapture
    flow:
      - get:
          url: "/info"
          capture:
            - json: "$.no_such_field"
              as: x
      - get: { url: "/ping?x={{ x }}", name: after capture }
  - name: refused
    flow:
      - get:
          url: "http://127.0.0.1:1/ping"
      - get: { url: "/ping", name: after refused }
"#,
    );
    let s = run(&file, &server);
    let users = &s["users"];
    assert_eq!(users["started"], 30, "{users}");
    // A failed expect is counted and its user goes on (Artillery's expect plugin); a failed
    // capture and a refused connection end theirs.
    assert_eq!(users["failed"], 20, "{users}");
    assert_eq!(
        users["checks_failed"]["expect statusCode on GET /nowhere"], 10,
        "{users}"
    );
    assert_eq!(s["requests_by_name"]["after missing"]["completed"], 10);
    let failures = &users["failures"];
    assert_eq!(failures["capture x on GET /info"], 10, "{failures}");
    assert_eq!(
        failures["connect_refused on GET http://127.0.0.1:1/ping"], 10,
        "{failures}"
    );
    assert_eq!(s["errors"]["connect_refused"], 10);
    for name in ["after capture", "after refused"] {
        assert!(s["requests_by_name"]
            .get(name)
            .is_none_or(|v| v["completed"] == 0));
    }
    assert_eq!(s["status"]["404"], 10);
}

#[test]
fn static_resources_are_fetched_once_per_user_per_page() {
    let server = TestServer::start(1).unwrap();
    // Each of 12 users loads home three times and news once: 4 resources per page, fetched on
    // the first visit of each page only.
    let (_dir, file) = crate::support::scenario_file(
        r#"config:
  target: "http://127.0.0.1:9"
  phases:
    - duration: 1
      arrivalCount: 12
scenarios:
  - flow:
      - loop:
          - get: { url: "/site/home", static: true }
        count: 3
      - get: { url: "/site/news", static: true }
"#,
    );
    let s = run(&file, &server);
    assert_eq!(completed(&s, "GET /site/home"), 36);
    assert_eq!(completed(&s, "GET /site/home static"), 48);
    assert_eq!(completed(&s, "GET /site/news static"), 48);
    assert_eq!(s["users"]["static_fetched"], 96);
    assert_eq!(s["users"]["static_skipped"], 0);
    assert_eq!(s["requests"]["errors"], 0);
}

#[test]
fn seed_002s_user_model_walks_its_chain_with_static_resources() {
    let server = TestServer::start(1).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/scenarios/seed-002-site.short.yml");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("site.yml");
    std::fs::copy(&file, &copy).unwrap();
    let s = run(&copy, &server);
    let users = &s["users"];
    assert!(users["started"].as_u64().unwrap() >= 10, "{users}");
    assert_eq!(users["failed"], 0, "{users}");
    assert_eq!(users["max_active"], 4, "{users}");
    assert_eq!(s["requests"]["errors"], 0);
    // Every session starts at home, so home's resources come once per session (4 each).
    let started = users["started"].as_u64().unwrap();
    let home_static = completed(&s, "GET /site/home static");
    assert!(
        home_static.abs_diff(4 * started) <= 4 * 4,
        "{home_static} for {started} sessions"
    );
    // Home is the most visited page, as the chain's stationary distribution says (35 %).
    let home = completed(&s, "GET /site/home");
    for page in ["news", "events", "institution", "contact"] {
        assert!(home > completed(&s, &format!("GET /site/{page}")), "{page}");
    }
}

#[test]
fn scenario_mistakes_are_one_line_errors_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      users: 2\n    - duration: 1\n      arrivalRate: 3\nscenarios:\n  - flow:\n      - get: { url: \"/\" }\n",
            "mix users",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\nscenarios:\n  - markov:\n      start: a\n      states:\n        a: { get: { url: \"/\" }, next: { b: 1 } }\n",
            "no state named \"b\"",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\nscenarios:\n  - flow:\n      - get:\n          url: \"/\"\n          capture: { json: \"$[\", as: a }\n",
            "not a JSONPath query",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\n  payload: { path: missing.csv, fields: [a] }\nscenarios:\n  - flow:\n      - get: { url: \"/{{ a }}\" }\n",
            "cannot read the payload file",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      users: 1\nscenarios:\n  - flow:\n      - get: { url: \"/\" }\n  - name: idle\n    flow:\n      - think: 1\n",
            "scenario \"idle\": sends no request",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      users: 1\nscenarios:\n  - flow:\n      - get: { url: \"/\" }\n      - loop:\n          - think: 0\n",
            "needs a request in it",
        ),
        (
            "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      users: 1\nscenarios:\n  - markov:\n      start: a\n      states:\n        a: { next: { b: 1 } }\n        b: { next: { a: 0.5, c: 0.5 } }\n        c: { get: { url: \"/\" } }\n",
            "come back to itself",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.yml"));
        std::fs::write(&file, text).unwrap();
        let out = loadlab(&["validate", file.to_str().unwrap()]);
        assert!(!out.status.success(), "case {i}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "case {i}: {stderr}");
        assert!(stderr.contains(needle), "case {i}: {stderr}");
        assert!(
            stderr.contains(&format!("bad{i}.yml")),
            "case {i}: {stderr}"
        );
    }
    // A misspelled key of a request is what Artillery makes of it, a key it ignores: a
    // warning at its place naming the key meant; --strict refuses the file on it, in one line.
    let file = dir.path().join("typo.yml");
    std::fs::write(
        &file,
        "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\nscenarios:\n  - flow:\n      - get:\n          url: \"/\"\n          captur: { json: \"$.a\", as: a }\n",
    )
    .unwrap();
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("typo.yml:10:11: scenarios[0].flow[0].get.captur: not a key of a request")
            && stderr.contains("did you mean `capture`?"),
        "{stderr}"
    );
    let out = loadlab(&["validate", "--strict", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("typo.yml:10:11"), "{stderr}");
    // So is a variable that nothing in the file sets: it may come with -v when it runs.
    let file = dir.path().join("unset.yml");
    std::fs::write(
        &file,
        "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\nscenarios:\n  - flow:\n      - get:\n          url: \"/\"\n          capture: { json: \"$.a\", as: a }\n      - get:\n          url: \"/x/{{ token }}\"\n",
    )
    .unwrap();
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("{{ token }} is set by none of this file's sources"),
        "{stderr}"
    );
    let out = loadlab(&["validate", "--strict", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("{{ token }} is not defined"), "{stderr}");
}

#[test]
fn durations_past_a_year_are_refused_before_they_reach_a_clock() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "    - duration: 1e19\n      users: 1\n",
            "      - get: { url: \"/\" }\n",
            "longer than a year",
        ),
        (
            "    - duration: 1e19\n      arrivalRate: 1\n",
            "      - get: { url: \"/\" }\n",
            "longer than a year",
        ),
        (
            "    - duration: 1\n      arrivalRate: 1\n",
            "      - get: { url: \"/\" }\n      - think: 1e18\n",
            "at most a year",
        ),
        (
            "    - duration: 1\n      users: 1\n",
            "      - think: 1\n",
            "sends no request",
        ),
    ];
    let more = [
        (
            "    - duration: 1\n      users: 1\n      spawnRate: 1e-20\n",
            "      - get: { url: \"/\" }\n",
            "at least one user a year",
        ),
        (
            "    - duration: 1\n      arrivalRate: 1\n  http:\n    timeout: 1e20\n",
            "      - get: { url: \"/\" }\n",
            "too long",
        ),
    ];
    for (i, (phase, flow, needle)) in cases.iter().chain(more.iter()).enumerate() {
        let file = dir.path().join(format!("long{i}.yml"));
        std::fs::write(
            &file,
            format!("config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n{phase}scenarios:\n  - flow:\n{flow}"),
        )
        .unwrap();
        let out = loadlab(&["run", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i}");
        assert!(!stderr.contains("panicked"), "case {i}: {stderr}");
        assert!(stderr.contains(needle), "case {i}: {stderr}");
    }
}

#[test]
fn a_markov_state_may_use_a_capture_of_a_state_named_after_it() {
    // `account` sorts before `login`, which captures its token: valid, whatever the order.
    let (_dir, file) = crate::support::scenario_file(
        "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\nscenarios:\n  - markov:\n      start: login\n      states:\n        login:\n          post: { url: \"/login\", json: { user: u }, capture: { json: \"$.token\", as: token } }\n          next: { account: 1 }\n        account:\n          get: { url: \"/account\", headers: { Authorization: \"Bearer {{ token }}\" } }\n",
    );
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn users_phases_keep_the_scenario_mix_on_several_threads() {
    let server = TestServer::start(1).unwrap();
    // Weights 1:1 with 3 users on 2 threads: each slot alternates from its own offset.
    let (_dir, file) = crate::support::scenario_file(
        r#"config:
  target: "http://127.0.0.1:9"
  phases:
    - { duration: 3, users: 3 }
scenarios:
  - name: a
    flow:
      - get: { url: "/delay?ms=10", name: a }
  - name: b
    flow:
      - get: { url: "/delay?ms=10", name: b }
"#,
    );
    let s = run_scenario(&file, &server, &["-t", "2"]);
    let (a, b) = (completed(&s, "a") as f64, completed(&s, "b") as f64);
    assert!(a > 50.0 && b > 50.0, "{a} {b}");
    assert!((a / b - 1.0).abs() < 0.15, "a {a} b {b}: a 1:1 mix");
}

#[test]
fn a_kept_alive_connection_closed_during_a_think_is_replaced_not_failed() {
    let server = ClosingServer::start();
    let (_dir, file) = crate::support::scenario_file(&format!(
        "config:\n  target: \"http://{}\"\n  phases:\n    - duration: 1\n      arrivalCount: 5\nscenarios:\n  - flow:\n      - get: {{ url: \"/a\" }}\n      - think: 0.2\n      - get: {{ url: \"/b\" }}\n",
        server.addr
    ));
    let (s, _) = loadlab_json(&["run", file.to_str().unwrap()]);
    assert_eq!(s["users"]["completed"], 5, "{}", s["users"]);
    assert_eq!(s["requests"]["ok"], 10);
    assert_eq!(s["requests"]["errors"], 0, "{}", s["errors"]);
}
