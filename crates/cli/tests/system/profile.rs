//! `--profile`: the service's CPU sampled with perf while the load is on, folded, drawn as a
//! flame graph, summarized as top functions, and diffed between two runs; node's JavaScript
//! frames named through V8's perf map.

use crate::support::{lab_ok, loadlab, loadlab_ok, read_json, Served};

/// Share of a run directory's profile samples whose stack holds a frame containing `name`.
fn share_with(dir: &std::path::Path, name: &str) -> f64 {
    let text = std::fs::read_to_string(dir.join("profile.folded")).unwrap();
    let (mut all, mut with) = (0u64, 0u64);
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        all += n;
        if stack.contains(name) {
            with += n;
        }
    }
    with as f64 / all.max(1) as f64
}

/// Runs `path` against the service with its process profiled; the run directory.
fn profiled(t: &Served, path: &str, dir: &std::path::Path) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{}{path}", t.port);
    let pid = t.child.id().to_string();
    loadlab_ok(&[
        "run",
        &url,
        "-c",
        "2",
        "-d",
        "4s",
        "-q",
        "--watch-pid",
        &pid,
        "--profile",
        "--html",
        "--out",
        dir.to_str().unwrap(),
    ]);
    read_json(&dir.join("summary.json"))
}

/// Samples of a run directory's profile whose stack holds a frame containing `name`.
fn samples_with(dir: &std::path::Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join("profile.folded")).unwrap();
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.contains(name))
        .map(|(_, n)| n.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn the_service_busy_in_calc_profiles_as_calc_and_two_runs_diff() {
    let _shared = crate::support::shared();
    let t = Served::start(&[]);
    let dirs = tempfile::tempdir().unwrap();
    let (calc, heavy) = (dirs.path().join("calc"), dirs.path().join("heavy"));
    let s = profiled(&t, "/calc?n=200000", &calc);
    let p = &s["profile"];
    if let Some(why) = p["error"].as_str() {
        // This machine forbids perf: the run went on and says which backend failed and what to do.
        assert!(
            why.contains("perf") && why.contains("install") || why.contains("sysctl"),
            "{why}"
        );
        println!("perf cannot run here; checked its message instead: {why}");
        return;
    }
    assert_eq!(p["backend"], "perf");
    assert!(p["samples"].as_u64().unwrap() > 200, "{p}");
    let share = share_with(&calc, "endpoints::calc");
    assert!(share > 0.5, "calc held {share:.2} of the samples");
    assert!(!p["top"].as_array().unwrap().is_empty());
    let svg = std::fs::read_to_string(calc.join("flame.svg")).unwrap();
    assert!(
        svg.contains("endpoints::calc"),
        "the flame graph names calc"
    );
    let html = std::fs::read_to_string(calc.join("report.html")).unwrap();
    assert!(html.contains("class=\"flame\"") && html.contains("top-functions"));

    profiled(&t, "/heavy?ms=5", &heavy);
    assert!(share_with(&heavy, "endpoints::heavy") > 0.5);
    let both = dirs.path().join("both.html");
    loadlab_ok(&[
        "report",
        calc.to_str().unwrap(),
        heavy.to_str().unwrap(),
        &format!("--html={}", both.display()),
    ]);
    let html = std::fs::read_to_string(&both).unwrap();
    assert!(
        html.contains("Where the CPU moved"),
        "no differential flame graph"
    );
}

#[test]
fn profiling_needs_processes_to_watch() {
    let _shared = crate::support::shared();
    let out = loadlab(&["run", "http://127.0.0.1:9/", "-n", "1", "--profile"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--watch-pid"));
}

#[test]
fn a_lab_topology_with_profile_true_draws_each_cells_flame_graph() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = lab_ok(
        dir.path(),
        "name: profiled\n\
         topologies:\n  - { name: one, profile: true }\n\
         workloads:\n  - { name: calc, run: \"/calc?n=100000 -c 2 -d 3s\" }\n",
    );
    let cell = out.join("one").join("calc");
    let s = read_json(&cell.join("summary.json"));
    match s["profile"]["error"].as_str() {
        Some(why) => println!("perf cannot run here; checked its message instead: {why}"),
        None => {
            assert!(
                s["profile"]["samples"].as_u64().unwrap() > 100,
                "{}",
                s["profile"]
            );
            assert!(cell.join("flame.svg").is_file() && cell.join("profile.folded").is_file());
        }
    }
}

#[test]
fn node_info_with_log_1_profiles_console_and_stream_writes_that_are_absent_without_it() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = lab_ok(
        dir.path(),
        "name: seed 004 profiled\n\
         topologies:\n  - { name: node, runtime: node, profile: true }\n\
         workloads:\n  - { name: info, run: \"/info -c 10 -d 4s\" }\n  \
         - { name: info log, run: \"/info?log=1 -c 10 -d 4s\" }\n",
    );
    let (quiet, logged) = (
        out.join("node").join("info"),
        out.join("node").join("info-log"),
    );
    // V8's own profiler, asked for by signal: nothing outside the process to forbid it.
    let s = read_json(&logged.join("summary.json"));
    assert_eq!(s["profile"]["backend"], "v8", "{}", s["profile"]);
    let all = s["profile"]["samples"].as_u64().unwrap();
    assert!(all > 200, "{}", s["profile"]);
    // JavaScript frames are named, the handler's file among them.
    assert!(
        samples_with(&logged, "server.js") > all / 2,
        "few frames of server.js"
    );
    // console.log, and under it the write of the stream to stdout (/dev/null in the lab).
    let console = samples_with(&logged, "node:internal/console");
    assert!(
        console * 100 > all,
        "{console} of {all} samples in console.log"
    );
    let text = std::fs::read_to_string(logged.join("profile.folded")).unwrap();
    let writes: u64 = text
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| {
            stack
                .split_once("node:internal/console")
                .is_some_and(|(_, below)| below.to_lowercase().contains("write"))
        })
        .map(|(_, n)| n.parse::<u64>().unwrap())
        .sum();
    assert!(writes > 0, "no stream write under console.log");
    let q = read_json(&quiet.join("summary.json"));
    assert!(
        q["profile"]["samples"].as_u64().unwrap() > 200,
        "{}",
        q["profile"]
    );
    assert_eq!(
        samples_with(&quiet, "node:internal/console"),
        0,
        "console frames without log=1"
    );
    // compare names console.log among the frames that appeared, and draws the difference.
    let cmp = loadlab_ok(&["compare", quiet.to_str().unwrap(), logged.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&cmp.stdout);
    let moved = text
        .split("where the CPU moved")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(moved.contains("new") && moved.contains("console"), "{text}");
    let svg = std::fs::read_to_string(logged.join("flame-diff.svg")).unwrap();
    assert!(
        svg.contains("node:internal/console"),
        "the diff draws console.log"
    );
    // The profiles node wrote were read and removed.
    for pid in s["profile"]["pids"].as_array().unwrap() {
        let file = std::env::temp_dir().join(format!("loadlab-v8-{}.cpuprofile", pid));
        assert!(!file.exists(), "{} left behind", file.display());
    }
}
