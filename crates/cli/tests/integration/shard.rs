//! Sharded runs end to end: real `loadlab run --shard I/N --start-at T` processes against one
//! reference service on loopback, merged by `loadlab merge`, checked against the plan's totals
//! and against HdrHistogram's own (Python) reader over the union of the shards' logs.

use crate::support::{loadlab, loadlab_ok, read_json};
use loadlab_service::TestServer;
use std::path::PathBuf;

/// Runs shard `shard` of `-c 2 -n N` at `url` into `out`, with `extra` flags.
fn run_shard(url: &str, n: &str, shard: &str, out: &std::path::Path, extra: &[&str]) {
    let mut args = vec![
        "run",
        url,
        "-c",
        "2",
        "-n",
        n,
        "--shard",
        shard,
        "-q",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    loadlab_ok(&args);
}

#[test]
fn merge_refuses_another_plan_and_a_shard_given_twice() {
    let server = TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let dir = tempfile::tempdir().unwrap();
    let run = |n: &str, shard: &str, name: &str| {
        let out = dir.path().join(name);
        run_shard(&url, n, shard, &out, &["--slo", "errors<1%"]);
        out
    };
    let a0 = run("40", "0/2", "a0");
    let a1 = run("40", "1/2", "a1");
    let b1 = run("60", "1/2", "b1");
    let merge = |dirs: &[&PathBuf]| {
        let out = dir.path().join("m");
        let mut args = vec!["merge".to_string()];
        args.extend(dirs.iter().map(|d| d.display().to_string()));
        args.extend(["--out".into(), out.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        loadlab(&args)
    };
    let one_line_error = |o: &std::process::Output, needle: &str| {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    };
    one_line_error(&merge(&[&a0, &b1]), "ran another plan");
    one_line_error(&merge(&[&a0, &a1, &a1]), "are the same shard (1/2)");
    let ok = merge(&[&a0, &a1]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let merged = read_json(&dir.path().join("m/summary.json"));
    assert_eq!(merged["requests"]["completed"], 40, "-n 40 split 20 + 20");
    let thresholds = merged["thresholds"].as_array().unwrap();
    assert_eq!(
        thresholds.len(),
        1,
        "the plan's thresholds, checked on the merged run"
    );
    assert_eq!(thresholds[0]["threshold"], "errors<1%");
    assert_eq!(thresholds[0]["pass"], true);
}

#[test]
fn merge_waits_for_the_shards_and_merges_those_that_ended_naming_the_missing_one() {
    let server = TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let dir = tempfile::tempdir().unwrap();
    let ended = dir.path().join("shard-0");
    run_shard(&url, "40", "0/2", &ended, &[]);
    // Shard 1's pod never wrote its directory: the merge waits its 2 s, then goes on.
    let never = dir.path().join("shard-1");
    let out = dir.path().join("merged");
    let started = std::time::Instant::now();
    let o = loadlab(&[
        "merge",
        ended.to_str().unwrap(),
        never.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--wait",
        "2s",
        "--print-archive",
    ]);
    let waited = started.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(waited >= std::time::Duration::from_secs(2), "{waited:?}");
    assert!(
        err.contains("shard-1 did not end within 2s: merged without it"),
        "{err}"
    );
    let merged = read_json(&out.join("summary.json"));
    assert_eq!(merged["merged"]["count"], 2, "{merged}");
    assert_eq!(
        merged["merged"]["missing"],
        serde_json::json!([1]),
        "{merged}"
    );
    assert_eq!(merged["requests"]["completed"], 20);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains(loadlab_run::archive::BEGIN), "{stdout}");
    // No shard at all ended: one line.
    let o = loadlab(&[
        "merge",
        never.to_str().unwrap(),
        "--out",
        dir.path().join("none").to_str().unwrap(),
        "--wait",
        "1s",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no shard's run ended within 1s"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn k8s_run_takes_its_flags_after_the_runs_and_says_in_one_line_what_its_kubeconfig_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::write(&config, "apiVersion: v1\nkind: Config\nclusters: []\n").unwrap();
    let o = loadlab(&[
        "k8s",
        "run",
        "http://127.0.0.1:9/ping",
        "-R",
        "10",
        "-d",
        "2s",
        "--shards",
        "2",
        "--keep",
        "--kubeconfig",
        config.to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("it has no current-context"), "{err}");
    let missing = dir.path().join("missing");
    let o = loadlab(&[
        "k8s",
        "run",
        "--kubeconfig",
        missing.to_str().unwrap(),
        "http://127.0.0.1:9/ping",
        "-n",
        "10",
        "--shards",
        "2",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("kubeconfig") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn a_bad_shard_or_a_start_time_in_the_past_is_refused_in_one_line() {
    for (flags, needle) in [
        (&["--shard", "2/2"][..], "is not a shard"),
        (&["--start-at", "2001-01-01T00:00:00Z"][..], "in the past"),
        (&["--start-at", "soon"][..], "is not a time"),
        (
            &["-c", "1", "--shard", "0/2"][..],
            "cannot be split over 2 shards",
        ),
    ] {
        let mut args = vec!["run", "http://127.0.0.1:9/", "-d", "1s"];
        args.extend_from_slice(flags);
        let o = loadlab(&args);
        assert!(!o.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
}

#[test]
fn k8s_job_refuses_a_plan_it_cannot_split_or_flags_it_sets_itself_in_one_line() {
    for (args, needle) in [
        (
            &["http://web/ping", "-R", "10"][..],
            "--shards N is required",
        ),
        (
            &["http://web/ping", "-c", "2", "--shards", "3"][..],
            "connections (-c) (2) cannot be split over 3 shards",
        ),
        (
            &["http://web/a", "http://api/b", "-c", "2", "--shards", "2"][..],
            "1 connection(s) cannot reach 2 distinct hosts",
        ),
        (
            &[
                "http://web/ping",
                "-R",
                "10",
                "--shards",
                "2",
                "--shard",
                "0/2",
            ][..],
            "drop them",
        ),
        (
            &["http://web/ping", "-R", "10", "--shards", "0"][..],
            "at least 1",
        ),
    ] {
        let mut all = vec!["k8s", "job"];
        all.extend_from_slice(args);
        let o = loadlab(&all);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn k8s_job_refuses_a_scenario_with_fewer_users_than_shards_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("few.yml");
    std::fs::write(
        &file,
        "config:\n  target: \"http://web:8080\"\n  phases:\n    - { duration: 5, users: 1 }\n    - { duration: 5, users: 2 }\nscenarios:\n  - flow:\n      - get: { url: \"/ping\" }\n      - think: 1\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = loadlab(&["k8s", "job", f, "--shards", "3"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("users (2) cannot be split over 3 shards"),
        "{err}"
    );
    // Two shards take one user each: the Job is printed, its merge deadline from the phases.
    let o = loadlab(&["k8s", "job", f, "--shards", "2", "--start-in", "30s"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let yaml = String::from_utf8_lossy(&o.stdout);
    assert!(yaml.contains("activeDeadlineSeconds: 640"), "{yaml}");
}
