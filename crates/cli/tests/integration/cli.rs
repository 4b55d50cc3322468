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

/// What a command that reads `file` must do with it when it is broken: exit non-zero with one
/// line that starts with `error`, and never panic.
fn refused_in_one_line(args: &[&str], what: &str) {
    let out = loadlab(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: {args:?} succeeded");
    assert_ne!(
        out.status.code(),
        Some(101),
        "{what}: {args:?} panicked: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "{what}: {args:?} panicked: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{what}: {args:?} printed more than one line: {stderr}"
    );
    assert!(stderr.starts_with("error"), "{what}: {args:?}: {stderr}");
    // The message names the problem, not the file's content: a huge file is not echoed.
    assert!(
        stderr.len() < 2_000,
        "{what}: {args:?}: {} bytes",
        stderr.len()
    );
}

#[test]
fn truncated_binary_and_huge_files_get_a_one_line_error_from_every_command_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = std::fs::read(root.join("examples/scenarios/seed-001-phases.short.yml")).unwrap();
    let experiment = std::fs::read(root.join("examples/seed-001-replicas.short.yaml")).unwrap();
    let server = TestServer::start(1).unwrap();
    let summary = {
        let run = dir.path().join("good");
        crate::support::loadlab_ok(&[
            "run",
            &server.url("/ping"),
            "-n",
            "3",
            "-q",
            "--out",
            run.to_str().unwrap(),
        ]);
        std::fs::read(run.join("summary.json")).unwrap()
    };
    let plan = std::fs::read(dir.path().join("good/plan.json")).unwrap();
    let mut rng = fastrand::Rng::with_seed(53);
    let binary: Vec<u8> = (0..4096).map(|_| rng.u8(..)).collect();
    // Text a parser must read to its end: random ASCII, punctuation and control bytes.
    let alphabet = b"{}[]:,-'\"#&*!|>%@` \n\t\x01\x1bazAZ09.";
    let garbage: Vec<u8> = (0..4096)
        .map(|_| alphabet[rng.usize(..alphabet.len())])
        .collect();
    // 8 MiB of UTF-8 the parsers read through: many lines of a valid start, then brackets
    // that do not close.
    let mut huge = b"config:\n  target: http://127.0.0.1:9\n".to_vec();
    while huge.len() < 8 << 20 {
        huge.extend_from_slice(b"  # a comment line that says nothing at all, repeated\n");
    }
    huge.extend_from_slice(b"  phases: [ {\n ]] }");
    let broken = |kind: &str, good: &[u8]| match kind {
        "truncated" => good[..good.len() / 2].to_vec(),
        "garbage" => garbage.clone(),
        "binary" => binary.clone(),
        _ => huge.clone(),
    };
    for kind in ["truncated", "garbage", "binary", "huge"] {
        let at = |name: &str| dir.path().join(kind).join(name);
        std::fs::create_dir_all(at("run")).unwrap();
        std::fs::create_dir_all(at("lab")).unwrap();
        std::fs::write(at("s.yml"), broken(kind, &script)).unwrap();
        std::fs::write(at("s.json"), broken(kind, &script)).unwrap();
        std::fs::write(at("e.yaml"), broken(kind, &experiment)).unwrap();
        std::fs::write(at("run/summary.json"), broken(kind, &summary)).unwrap();
        std::fs::write(at("lab/experiment.json"), broken(kind, &summary)).unwrap();
        // A run that stopped before its end: its plan, and seconds that are not a run's.
        std::fs::create_dir_all(at("stopped")).unwrap();
        std::fs::write(at("stopped/plan.json"), &plan).unwrap();
        std::fs::write(at("stopped/seconds.jsonl"), broken(kind, &summary)).unwrap();
        let s = at("s.yml").to_string_lossy().into_owned();
        let j = at("s.json").to_string_lossy().into_owned();
        let e = at("e.yaml").to_string_lossy().into_owned();
        let run = at("run").to_string_lossy().into_owned();
        let lab = at("lab").to_string_lossy().into_owned();
        let stopped = at("stopped").to_string_lossy().into_owned();
        let good = dir.path().join("good").to_string_lossy().into_owned();
        let merged = at("merged").to_string_lossy().into_owned();
        let cases: Vec<Vec<&str>> = vec![
            vec!["run", &s],
            vec!["run", &j],
            vec!["validate", &s],
            vec!["capacity", &s, "--slo", "p99<1s"],
            vec!["k8s", "job", &s, "--shards", "2"],
            vec!["lab", &e, "--check"],
            vec!["lab", &e],
            vec!["report", &run],
            vec!["report", &lab],
            vec!["compare", &good, &run],
            vec!["merge", &good, &run, "--out", &merged],
            vec!["report", &stopped],
            vec!["compare", &good, &stopped],
            vec!["merge", &good, &stopped, "--out", &merged],
        ];
        for args in &cases {
            refused_in_one_line(args, kind);
        }
    }
}

#[test]
fn progress_lines_come_every_period_and_at_the_runs_last_second_and_add_up() {
    let server = TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let (s, out) =
        crate::support::loadlab_json(&["run", &url, "-R", "40", "-d", "3s", "--progress", "2s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<loadlab_report::LoggedProgress> = stderr
        .lines()
        .filter_map(loadlab_report::LoggedProgress::parse)
        .collect();
    let seconds: Vec<u64> = lines.iter().map(|p| p.elapsed_s).collect();
    assert_eq!(seconds, [2, 3], "{stderr}");
    // No terminal's redrawing in a log.
    assert!(!stderr.contains('\r'), "{stderr:?}");
    // The last line counts what the summary counts.
    assert_eq!(
        Some(lines[1].completed),
        s["requests"]["completed"].as_u64(),
        "{stderr}"
    );
    assert_eq!(lines[1].errors, 0);
    assert!(lines[0].completed <= lines[1].completed);
    // A period of part of a second, and a progress line asked for beside --quiet, are refused.
    for (args, says) in [
        (["--progress", "1500ms"].as_slice(), "whole seconds"),
        (["--progress", "5s", "-q"].as_slice(), "cannot be used with"),
    ] {
        let mut all = vec!["run", &url, "-n", "1"];
        all.extend(args);
        let out = crate::support::loadlab(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
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

/// A run killed with SIGKILL keeps the seconds it wrote: `report` rebuilds its summary from
/// them, counting exactly what its `timeline.csv` rows count, and `compare` reads it too.
#[test]
fn a_killed_run_keeps_its_seconds_and_report_reads_them() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("killed");
    let run_arg = run.to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["run", &server.url("/ping"), "-R", "100", "-d", "60s", "-q"])
        .args(["--out", run_arg])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rows = |run: &std::path::Path| {
        std::fs::read_to_string(run.join("timeline.csv")).map_or(0, |t| t.lines().count())
    };
    let waited = std::time::Instant::now();
    // A header and 3 seconds, within 20 s.
    while rows(&run) < 4 && waited.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(rows(&run) >= 4, "timeline.csv had {} lines", rows(&run));
    assert!(run.join("plan.json").is_file());
    assert!(!run.join("summary.json").exists());

    let out = crate::support::loadlab_ok(&["report", run_arg]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the run stopped after"), "{stdout}");
    assert!(
        stdout.contains("(interrupted: partial results)"),
        "{stdout}"
    );
    assert!(stdout.contains("CPU and memory not recorded"), "{stdout}");
    assert!(run.join("report.html").is_file());
    // The summary counts what the timeline's rows count: the seconds written before the kill.
    let timeline = std::fs::read_to_string(run.join("timeline.csv")).unwrap();
    let mut lines = timeline.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|c| *c == "completed").unwrap();
    let completed: u64 = lines
        .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(completed >= 200, "{completed} requests in 3 s at 100/s");
    let run = loadlab_run::read_stopped_run(&run).unwrap();
    assert_eq!(run.totals.counts.completed, completed);
    assert_eq!(run.totals.counts.status[200], completed);
    assert!(!run.complete);

    let out = crate::support::loadlab_ok(&["compare", run_arg, run_arg]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the run stopped after"), "{stdout}");
}

#[test]
fn the_system_tiers_claims_run_four_quiet_or_three_shared_tests_alone_tests_first_then_quiet_ones_long_ones_first(
) {
    // The fast tier claims nothing, so here the claims are this test's alone.
    use crate::support::{alone, quiet, quiet_long, shared, shared_long, Claim};
    use std::sync::mpsc;
    use std::time::Duration;
    // Whether `take` gets its claim within 200 ms, on a thread of its own; the claim is
    // handed back so the caller decides when it ends.
    let within = |take: fn() -> Claim| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let held = take();
            let _ = tx.send(held);
        });
        rx
    };
    let soon = Duration::from_millis(200);
    let a = quiet();
    let b = within(quiet)
        .recv_timeout(soon)
        .expect("two quiet tests at once");
    let b2 = within(quiet)
        .recv_timeout(soon)
        .expect("three quiet tests at once");
    let b3 = within(quiet)
        .recv_timeout(soon)
        .expect("four quiet tests at once");
    let third = within(quiet);
    let busy = within(shared);
    assert!(
        third.recv_timeout(soon).is_err(),
        "a fifth quiet test waits"
    );
    assert!(
        busy.recv_timeout(soon).is_err(),
        "a shared test waits for quiet ones"
    );
    drop(a);
    let c = third
        .recv_timeout(soon)
        .expect("a quiet test in the freed place");
    let lone = within(alone);
    assert!(
        lone.recv_timeout(soon).is_err(),
        "a test alone waits for quiet ones"
    );
    // Waiting, it goes before the shared test that waited longer.
    drop((b, b2, b3, c));
    let lone = lone
        .recv_timeout(soon)
        .expect("alone once the quiet ones ended");
    // The shared test that waited all along still waits: a test alone has the machine.
    assert!(
        busy.recv_timeout(soon).is_err(),
        "nothing beside a test alone"
    );
    drop(lone);
    let s = busy
        .recv_timeout(soon)
        .expect("shared once the test alone ended");
    let s2 = within(shared)
        .recv_timeout(soon)
        .expect("shared beside shared");
    let s3 = within(shared)
        .recv_timeout(soon)
        .expect("three shared at once");
    let fourth = within(shared);
    assert!(
        fourth.recv_timeout(soon).is_err(),
        "a fourth shared test waits"
    );
    drop(s);
    let s4 = fourth
        .recv_timeout(soon)
        .expect("a shared test in the freed place");
    // A quiet test waiting goes before the shared tests that come after it: the running ones
    // end, and no new one starts while it waits.
    let q = within(quiet);
    assert!(
        q.recv_timeout(soon).is_err(),
        "a quiet test waits for shared ones"
    );
    let late = within(shared);
    drop(s2);
    assert!(
        late.recv_timeout(soon).is_err(),
        "a shared test waits behind a quiet one"
    );
    drop((s3, s4));
    let q = q
        .recv_timeout(soon)
        .expect("quiet once the shared ones ended");
    assert!(
        late.recv_timeout(soon).is_err(),
        "nothing shared beside a quiet test"
    );
    drop(q);
    let last = late
        .recv_timeout(soon)
        .expect("shared once the quiet test ended");
    drop(last);
    // Within a kind, a long test goes before the short ones that asked first.
    for (short, long, at_once) in [
        (quiet as fn() -> Claim, quiet_long as fn() -> Claim, 4),
        (shared, shared_long, 3),
    ] {
        let held: Vec<Claim> = (1..at_once).map(|_| short()).collect();
        let last = short();
        let waiting = within(short);
        let first = within(long);
        assert!(waiting.recv_timeout(soon).is_err(), "{at_once} at once");
        assert!(
            first.recv_timeout(soon).is_err(),
            "{at_once} at once, long or not"
        );
        drop(last);
        let first = first
            .recv_timeout(soon)
            .expect("the long test in the freed place");
        assert!(
            waiting.recv_timeout(soon).is_err(),
            "the short test waits behind the long one"
        );
        drop(first);
        drop(waiting.recv_timeout(soon).expect("then the short one"));
        drop(held);
    }
}
