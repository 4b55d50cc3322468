//! Thresholds gating CI: `--slo` on `run`, a scenario's `ensure`, `report --slo` on a saved
//! run, their exit codes, and the JUnit file, against a real server.

use crate::support::{exit_code, loadlab, read_json, stdout_of, EXIT_THRESHOLDS};
use loadlab_service::TestServer;

#[test]
fn slo_thresholds_set_the_exit_code_and_are_written_to_the_summary_and_junit() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, junit) = (dir.path().join("run"), dir.path().join("junit.xml"));
    let url = server.url("/delay?ms=20");
    let out = loadlab(&[
        "run",
        &url,
        "-c",
        "2",
        "-n",
        "60",
        "--slo",
        "p50<5ms,errors<1%",
        "--slo",
        "rps>1,p99<10s",
        "--out",
        run_dir.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let text = stdout_of(&out);
    assert_eq!(exit_code(&out), EXIT_THRESHOLDS, "{text}");
    assert!(text.contains("thresholds   3 of 4 met"), "{text}");
    assert!(text.contains("FAIL  p50<5ms"), "{text}");
    assert!(text.contains("ok    errors<1%"), "{text}");

    let s = read_json(&run_dir.join("summary.json"));
    let t = s["thresholds"].as_array().unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t[0]["threshold"], "p50<5ms");
    assert_eq!(t[0]["pass"], false);
    let p50 = t[0]["measured"].as_f64().unwrap();
    assert!(p50 >= 20.0, "a 20 ms delay measured {p50} ms");
    assert_eq!(p50, s["latency_ms"]["p50"].as_f64().unwrap());
    assert_eq!(t[1]["pass"], true);
    assert_eq!(t[1]["measured"], 0.0);
    assert_eq!(t[2]["unit"], "req/s");
    assert_eq!(t[2]["comparison"], ">");

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("4"));
    assert_eq!(root.attribute("failures"), Some("1"));
    let cases: Vec<_> = root
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 4);
    assert_eq!(cases[0].attribute("name"), Some("p50<5ms"));
    let failure = cases[0]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("the failed threshold is a failure");
    assert!(failure.attribute("message").unwrap().contains("ms"));
    assert!(cases[1..]
        .iter()
        .all(|c| !c.children().any(|n| n.has_tag_name("failure"))));

    // The saved run is judged again: by what it was run with, or by new thresholds.
    let saved = run_dir.to_str().unwrap();
    let again = loadlab(&[
        "report",
        saved,
        &format!("--html={}", dir.path().join("r.html").display()),
    ]);
    assert_eq!(exit_code(&again), EXIT_THRESHOLDS, "{}", stdout_of(&again));
    let lenient = loadlab(&[
        "report",
        saved,
        "--slo",
        "p50<10s",
        &format!("--html={}", dir.path().join("r2.html").display()),
    ]);
    assert_eq!(exit_code(&lenient), 0, "{}", stdout_of(&lenient));
    assert!(stdout_of(&lenient).contains("1 of 1 met"));

    let met = loadlab(&[
        "run",
        &url,
        "-c",
        "2",
        "-n",
        "20",
        "--slo",
        "p50<10s,errors<=0%",
    ]);
    assert_eq!(exit_code(&met), 0, "{}", stdout_of(&met));
}

#[test]
fn a_threshold_that_cannot_be_checked_is_refused_before_the_run() {
    let server = TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let bad = loadlab(&["run", &url, "-n", "1", "--slo", "p99<fast"]);
    assert_eq!(exit_code(&bad), 2);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("not a duration such as 300ms"), "{err}");
    let unknown = loadlab(&["run", &url, "-n", "1", "--slo", "p99{/pong}<1s"]);
    assert_eq!(exit_code(&unknown), 1);
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.contains("the requests are named"), "{err}");
}

#[test]
fn a_scenarios_ensure_gates_the_run_per_request_name() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("load.yml");
    let write = |ensure: &str| {
        std::fs::write(
            &file,
            format!(
                "config:\n  target: \"{}\"\n  phases:\n    - duration: 1\n      arrivalRate: 40\n  \
                 ensure:\n{ensure}\
                 scenarios:\n  - flow:\n      - get:\n          url: \"/ping\"\n          name: fast\n  \
                 - flow:\n      - get:\n          url: \"/delay?ms=30\"\n          name: slow\n",
                server.url("")
            ),
        )
        .unwrap();
    };
    let json = dir.path().join("s.json");
    let run = || {
        loadlab(&[
            "run",
            file.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
    };
    // The slow requests break their own bound; the whole run's median and a non-strict
    // condition do not fail it.
    write(
        "    maxErrorRate: 0\n    thresholds:\n      - plugins.metrics-by-endpoint.response_time.fast.p99: 1000\n    \
         conditions:\n      - expression: http.response_time.max < 1\n        strict: false\n    \
         slo: 'p50{slow}<10ms'\n",
    );
    let out = run();
    // An Artillery script's failed ensure exits as Artillery exits: 1, not k6's 99.
    assert_eq!(exit_code(&out), 1, "{}", stdout_of(&out));
    let s = read_json(&json);
    let t = s["thresholds"].as_array().unwrap();
    let by = |text: &str| t.iter().find(|r| r["threshold"] == text).unwrap();
    assert_eq!(by("p99{fast}<1s")["pass"], true);
    let slow = by("p50{slow}<10ms");
    assert_eq!(slow["pass"], false);
    assert!(slow["measured"].as_f64().unwrap() >= 30.0);
    let max = by("max<1ms");
    assert_eq!(
        (&max["pass"], &max["strict"]),
        (&false.into(), &false.into())
    );
    assert!(stdout_of(&out).contains("reported only"));

    write("    maxErrorRate: 0\n    slo: 'p50{slow}<5s'\n");
    let out = run();
    assert_eq!(exit_code(&out), 0, "{}", stdout_of(&out));
}

#[test]
fn a_lab_judged_against_a_baseline_lab_exits_6_when_a_verdict_changed_its_answer() {
    // Seed 001's short lab of 2026-11-29, judged again from its cells (nothing runs).
    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/runs/seeds-2026-11-29c/001-short");
    let dir = tempfile::tempdir().unwrap();
    let (now, old) = (dir.path().join("now"), dir.path().join("old"));
    let copied = std::process::Command::new("cp")
        .args(["-r", kept.to_str().unwrap(), now.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copied.success());
    let first = loadlab(&["report", now.to_str().unwrap()]);
    assert_eq!(exit_code(&first), 0, "{}", stdout_of(&first));
    std::fs::create_dir(&old).unwrap();
    let mut baseline = read_json(&now.join("lab.json"));
    let verdicts = baseline["verdicts"].as_array().unwrap().len();
    assert!(verdicts > 0);
    std::fs::write(old.join("lab.json"), baseline.to_string()).unwrap();
    let args = [
        "report",
        now.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ];

    // The same lab: every answer as it was.
    let same = loadlab(&args);
    let text = stdout_of(&same);
    assert_eq!(exit_code(&same), 0, "{text}");
    assert!(
        text.contains(&format!("none of {verdicts} verdicts changed")),
        "{text}"
    );

    // The baseline answered the first comparison the other way.
    let first = &mut baseline["verdicts"][0];
    let differed = first["differs"].as_bool().unwrap();
    first["differs"] = (!differed).into();
    std::fs::write(old.join("lab.json"), baseline.to_string()).unwrap();
    let changed = loadlab(&args);
    let text = stdout_of(&changed);
    assert_eq!(exit_code(&changed), 6, "{text}");
    assert!(
        text.contains(&format!("1 of {verdicts} verdicts changed")),
        "{text}"
    );
    assert!(text.contains(" → "), "{text}");

    // A baseline that is no finished lab is refused before anything is judged.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let refused = loadlab(&[
        "report",
        now.to_str().unwrap(),
        "--baseline",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(exit_code(&refused), 1);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("has no lab.json"), "{err}");
}
