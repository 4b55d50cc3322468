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
