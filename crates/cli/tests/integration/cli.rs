//! The `loadlab` binary as a user meets it: bad input, the files it writes, Ctrl-C.

use std::process::{Command, Stdio};

use crate::support::{loadlab, loadlab_json};
use loadlab_service::TestServer;

#[test]
fn bad_input_gets_a_one_line_error_and_a_nonzero_exit() {
    let url = "http://127.0.0.1:9/";
    let cases: &[&[&str]] = &[
        &["run", "not a url"],
        &[
            "run",
            "--cacert",
            "/nonexistent/ca.pem",
            "https://127.0.0.1:9/",
        ],
        &["run", "--cacert", "Cargo.toml", "https://127.0.0.1:9/"],
        &["run", "ftp://127.0.0.1/"],
        &["run", "--bogus", url],
        &["run", "-c", "0", url],
        &["run", "-c", "-3", url],
        &["run", "-n", "0", url],
        &["run", "-n", "-10", url],
        &["run", "-d", "soon", url],
        &["run", "-d", "0s", url],
        &["run", "-R", "fast", url],
        &["run", "-R", "-5", url],
        &["run", "-R", "1e300", url],
        &["run", "-d", "1e300", url],
        &["run", "--timeout", "1e300", url],
        &["run", "-d", "1e19", url],
        &["run", "-R", "10", "-d", "1e19", url],
        &["run", "--timeout", "1e19", "-d", "1s", url],
        &["run", "-t", "100000", url],
        &["run", "-c", "100000000", url],
        &["run", "-R", "100", "-p", "4", url],
        &["run", "--pacing-slack", "1ms", url],
        &["run", "-R", "100", "--pacing-slack", "1s", url],
        &["run", "-R", "100", "--pacing-slack", "-1ms", url],
        &["run", "-H", "no colon", url],
        &["run", "--body-file", "/nonexistent/body", url],
        &["run"],
        &["frobnicate"],
    ];
    for args in cases {
        let out = loadlab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?} printed more than one line: {stderr}"
        );
        assert!(stderr.starts_with("error"), "{args:?}: {stderr}");
    }
}

#[test]
fn the_json_summary_has_every_field_of_the_contract() {
    let server = TestServer::start(1).unwrap();
    let (s, out) = loadlab_json(&["run", &server.url("/ping"), "-n", "300", "-c", "5"]);
    for key in loadlab_run::summary_schema()["required"]
        .as_array()
        .unwrap()
    {
        let key = key.as_str().unwrap();
        assert!(s.get(key).is_some(), "summary lacks {key}");
    }
    assert_eq!(s["schema"], "loadlab.summary/v1");
    assert_eq!(s["model"], "closed");
    assert_eq!(s["complete"], true);
    for key in ["sent", "completed", "ok", "errors", "dropped"] {
        assert!(s["requests"][key].is_u64(), "requests.{key}");
    }
    assert_eq!(s["requests"]["completed"], 300);
    for key in [
        "min", "mean", "stdev", "p50", "p90", "p95", "p99", "p99_9", "max",
    ] {
        assert!(s["latency_ms"][key].is_f64(), "latency_ms.{key}");
        assert!(
            s["service_latency_ms"][key].is_f64(),
            "service_latency_ms.{key}"
        );
    }
    for key in [
        "connect_refused",
        "connect_timeout",
        "reset",
        "timeout",
        "protocol",
        "closed",
    ] {
        assert!(s["errors"][key].is_u64(), "errors.{key}");
    }
    for key in [
        "cpu_s",
        "max_rss_mb",
        "schedule_lag_ms_p99",
        "saturated",
        "warnings",
    ] {
        assert!(s["generator"].get(key).is_some(), "generator.{key}");
    }
    assert!(s["throughput"]["rps"].as_f64().unwrap() > 0.0);
    assert_eq!(s["status"]["200"], 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("p97.5") && stdout.contains("200 × 300"),
        "{stdout}"
    );
}

#[test]
fn a_ca_file_that_is_not_usable_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("none.pem", "no certificate here\n"),
        (
            "bad-der.pem",
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
        ),
        (
            "bad-base64.pem",
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        ),
    ];
    for (name, text) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        // Nothing listens on port 9: the file is refused before any connection.
        let out = loadlab(&[
            "run",
            "-n",
            "1",
            "--cacert",
            path.to_str().unwrap(),
            "https://127.0.0.1:9/",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was accepted");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with("error") && stderr.contains(name),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn a_missing_node_is_one_line_naming_the_debian_package() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["serve", "--runtime", "node", "--port", "0"])
        .env("PATH", empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("node is not installed; install it with: apt-get install nodejs"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn completions_and_manual_pages_come_from_the_command_line_itself() {
    let bash = crate::support::loadlab_ok(&["completions", "bash"]);
    let script = String::from_utf8_lossy(&bash.stdout);
    // Every subcommand and a flag of run's.
    for word in ["capacity", "locust", "completions", "--rate", "--html"] {
        assert!(script.contains(word), "{word}");
    }
    let page = crate::support::loadlab_ok(&["man"]);
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH loadlab"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    crate::support::loadlab_ok(&["man", "--out", dir.path().to_str().unwrap()]);
    for page in ["loadlab.1", "loadlab-run.1", "loadlab-capacity.1"] {
        assert!(dir.path().join(page).exists(), "{page}");
    }
    assert_eq!(
        crate::support::loadlab(&["completions", "tcsh"])
            .status
            .code(),
        Some(2)
    );
}
