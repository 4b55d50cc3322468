//! `loadlab probe`, `loadlab capacity`, `loadlab compare` and the findings of a run, against
//! the reference service's black boxes on 127.0.0.1.

use crate::support::{loadlab, read_json};

#[test]
fn a_run_whose_connections_were_all_refused_says_only_that() {
    let port = crate::support::closed_port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = loadlab(&[
        "run",
        &format!("http://127.0.0.1:{port}/"),
        // Each refused connection waits before it tries again (10 ms, doubling up to 1 s): 50
        // requests took 18 s, 10 take a third of a second.
        "-n",
        "10",
        "-c",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = read_json(&json);
    let kinds = crate::support::finding_kinds(&s);
    assert_eq!(kinds, ["errors"], "{s}");
    let next = s["findings"][0]["next"].as_str().unwrap();
    assert!(next.contains(&format!("127.0.0.1:{port}")), "{next}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("Little"), "{stdout}");
    assert_eq!(out.status.code(), Some(4), "{stdout}");
}

#[test]
fn capacity_counts_a_scripts_sessions_and_their_flow_bounds_the_rate() {
    // One worker thread that sleeps 20 ms a request: a session of two such requests holds it
    // 40 ms, so at most 25 sessions a second can be served, whatever the machine's load
    // (a busy machine only lowers that).
    let server = loadlab_service::TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("flow.yml");
    std::fs::write(
        &script,
        format!(
            "config:\n  target: {}\n  phases:\n    - {{ duration: 600, arrivalRate: 1000 }}\n\
             scenarios:\n  - flow:\n      - get:\n          url: /block?ms=20\n      \
             - get:\n          url: /block?ms=20\n",
            server.url("")
        ),
    )
    .unwrap();
    let json = dir.path().join("capacity.json");
    let out = loadlab(&[
        "capacity",
        script.to_str().unwrap(),
        // p95's bound needs 59 requests: a 2 s step near 25 sessions a second holds about 100
        // requests but only 50 sessions, so the step must count requests for it.
        "--slo",
        "p95<100ms,errors<1%",
        "--warmup",
        "1s",
        "--step",
        "2s",
        "--max-time",
        "30s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = read_json(&json);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{v}");
    assert_eq!(v["unit"], "session", "{v}");
    assert_eq!(v["url"], script.to_str().unwrap(), "{v}");
    // The script's own phases (1,000 a second) were not run: the steps are the search's.
    let rate = v["max_rate_rps"].as_f64().unwrap();
    assert!(rate > 0.0 && rate <= 25.0 * 1.05, "{v}");
    assert!(stdout.contains("sessions/s meet p95<100ms"), "{stdout}");
    assert!(!stdout.contains("cannot bound"), "{stdout}");
    assert!(stdout.contains("one alone"), "{stdout}");
    // Each session sent its two requests: a met step's requests are twice its sessions.
    for step in v["steps"].as_array().unwrap() {
        if step["meets"] == true {
            let sessions =
                step["achieved_rps"].as_f64().unwrap() * step["measured_s"].as_f64().unwrap();
            let requests = step["requests"].as_f64().unwrap();
            assert!((requests / sessions - 2.0).abs() < 0.15, "{step}");
        }
    }
}

#[test]
fn capacity_measures_a_post_and_a_request_with_a_bearer_token() {
    let server = loadlab_service::TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let search = |url: &str, request: &[&str], json: &std::path::Path| {
        let mut args = vec!["capacity", url];
        args.extend_from_slice(request);
        args.extend([
            "--slo",
            "errors<1%",
            "--max-rate",
            "100",
            "--warmup",
            "1s",
            "--step",
            "1s",
            "--max-time",
            "20s",
            "--json",
            json.to_str().unwrap(),
        ]);
        loadlab(&args)
    };
    // /account answers 401 without the token: only the header lets a rate meet.
    let account = server.url("/account");
    let bearer = format!(
        "Authorization: Bearer {}",
        crate::support::login_token(server.addr, "ana")
    );
    let json = dir.path().join("account.json");
    let out = search(&account, &["-H", &bearer], &json);
    let v = read_json(&json);
    // Some rate met it: the requests were answered (its highest rate is --max-rate's, unless
    // a busy machine broke a step on its median).
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(v["max_rate_rps"].as_f64().unwrap() > 0.0, "{v}");
    // Without it, not one request succeeds, and the search says so before it starts.
    let none = search(&account, &[], &dir.path().join("none.json"));
    assert_eq!(none.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(
        stderr.contains("did not answer one request with a success"),
        "{stderr}"
    );
    // A POST with a JSON body: /login answers nothing else.
    let json = dir.path().join("login.json");
    let out = search(
        &server.url("/login"),
        &[
            "-m",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-b",
            r#"{"user": "bo", "password": "x"}"#,
        ],
        &json,
    );
    let v = read_json(&json);
    // Some rate met it: the requests were answered (its highest rate is --max-rate's, unless
    // a busy machine broke a step on its median).
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(v["max_rate_rps"].as_f64().unwrap() > 0.0, "{v}");
}
