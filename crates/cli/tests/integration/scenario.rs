//! `loadlab run SCENARIO.yaml` with Artillery-format scripts against a real server.

use crate::support::{loadlab, loadlab_json, next_ticket, run_scenario};
use loadlab_service::TestServer;

fn example_scenarios() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn an_artillery_script_runs_its_phases_and_weights() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("load.yml");
    std::fs::write(
        &file,
        format!(
            "config:\n  target: \"{}\"\n  http:\n    timeout: 5\n  phases:\n    - duration: 2\n      arrivalRate: 100\n      name: steady\n    - pause: 1\n    - duration: 1\n      arrivalCount: 50\n      name: burst\nscenarios:\n  - name: often\n    weight: 3\n    flow:\n      - get:\n          url: \"/turno/a\"\n  - name: seldom\n    weight: 1\n    flow:\n      - get:\n          url: \"/turno/b\"\n",
            server.url("")
        ),
    )
    .unwrap();
    let (s, _) = loadlab_json(&["run", file.to_str().unwrap()]);
    assert_eq!(s["model"], "open");
    assert_eq!(
        s["requests"]["sent"], 250,
        "100/s × 2 s + a pause + 50 in 1 s"
    );
    let names: Vec<&str> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["steady", "phase 2", "burst"]);
    assert!(
        s["phases"][1]["offered_rps"]
            .as_f64()
            .is_some_and(|r| r < 1.0),
        "the pause offers nothing: {}",
        s["phases"]
    );
    let a = next_ticket(&server, "a") - 1;
    let b = next_ticket(&server, "b") - 1;
    assert_eq!(a + b, 250);
    // Each arrival is a user of its own (as Artillery's), its request named by method and URL.
    let by_name = &s["requests_by_name"];
    let completed = |n: &str| by_name[n]["completed"].as_u64().unwrap();
    let (often, seldom) = ("GET /turno/a", "GET /turno/b");
    assert_eq!(s["users"]["completed"], 250, "{}", s["users"]);
    assert_eq!(
        completed(often) + completed(seldom),
        s["requests"]["completed"].as_u64().unwrap()
    );
    assert!(
        completed(often).abs_diff(a) <= 1 && completed(seldom).abs_diff(b) <= 1,
        "{by_name}"
    );
    assert!(by_name[often]["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert!(a.abs_diff(3 * b) <= 4, "weights 3:1 gave {a}:{b}");
}

#[test]
fn a_misspelled_key_is_a_warning_at_its_line_and_column_and_strict_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("think.yaml");
    std::fs::write(
        &file,
        "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 1\n      arrivalRate: 1\n      arivalCount: 10\nscenarios:\n  - flow:\n      - get:\n          url: \"/\"\n",
    )
    .unwrap();
    // Artillery runs the file and ignores the key; so does loadlab, saying where it is and
    // what was likely meant.
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "think.yaml:6:7: config.phases[0].arivalCount: not a key of a phase; Artillery \
             ignores it, and so does loadlab — did you mean `arrivalCount`?"
        ),
        "{stderr}"
    );
    let out = loadlab(&["validate", "--strict", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("think.yaml:6:7") && stderr.contains("arivalCount"),
        "{stderr}"
    );
}

#[test]
fn every_example_scenario_validates() {
    let files = example_scenarios();
    assert!(files.len() >= 8, "{files:?}");
    for f in files {
        let out = loadlab(&["validate", f.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("valid") && stdout.contains("total:"),
            "{stdout}"
        );
    }
}

#[test]
fn every_short_example_scenario_runs_its_exact_arrivals() {
    let server = TestServer::start(1).unwrap();
    // (file, arrivals, requests each): seed 004's users send 20 requests each; seed 002's two
    // user models walk a chain (the plain one in users.rs, the busy one the lab's short seed
    // 002 in stores.rs); the autoscale spike's 30 s run in the system tier (autoscale.rs), its
    // arrivals counted there.
    let expected = [
        ("seed-000-endurance.short.yml", 200, 1),
        ("seed-000-ramp.short.yml", 300, 1),
        ("seed-000-spike.short.yml", 260, 1),
        ("seed-001-phases.short.yml", 1100, 1),
        ("seed-004-info.short.yml", 10, 20),
    ];
    let shorts: Vec<_> = example_scenarios()
        .into_iter()
        .filter(|p| p.to_str().unwrap().ends_with(".short.yml"))
        .collect();
    assert_eq!(shorts.len(), expected.len() + 3, "{shorts:?}");
    let dir = tempfile::tempdir().unwrap();
    for (name, arrivals, each) in expected {
        let file = shorts.iter().find(|p| p.ends_with(name)).unwrap();
        let copy = dir.path().join(name);
        std::fs::copy(file, &copy).unwrap();
        let s = run_scenario(&copy, &server, &[]);
        // Every arrival of the schedule is accounted for: sent, or dropped when a starved
        // generator had not released it by the schedule's end (on a machine running six busy
        // loops, 1 run in 8 of seed 001's phases dropped one of its 1,100).
        let r = &s["requests"];
        let (sent, dropped) = (r["sent"].as_u64().unwrap(), r["dropped"].as_u64().unwrap());
        assert_eq!(sent + dropped * each, arrivals * each, "{name}: {r}");
        assert!(
            dropped * 100 <= arrivals,
            "{name}: more than 1 % dropped: {r}"
        );
        assert_eq!(s["requests"]["errors"], 0, "{name}");
    }
}
