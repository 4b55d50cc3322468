//! `loadlab lab` answers an experiment's question on the reference service, whose answers are
//! known: breaking points per topology, latency (not throughput) under capacity, and a paired
//! workload factor, each verdict with its interval over the rounds, in `lab.json`.

use crate::support::{lab_ok, loadlab_ok, read_json};
use serde_json::Value;

/// Runs an experiment and returns what it printed and its `lab.json`, after checking that the
/// lab directory judged again without it (`loadlab report LAB_DIR`) gives the same cells and
/// verdicts. The caller claims the machine as its figures need.
fn lab(experiment: &str) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, out) = lab_ok(dir.path(), experiment);
    let json = read_json(&out.join("lab.json"));
    assert_eq!(json["schema"], "loadlab.lab/v1");
    std::fs::remove_file(out.join("lab.json")).unwrap();
    std::fs::remove_file(out.join("comparison.csv")).unwrap();
    let again = loadlab_ok(&["report", out.to_str().unwrap()]);
    let printed = String::from_utf8_lossy(&again.stdout);
    let rejudged = read_json(&out.join("lab.json"));
    assert_eq!(rejudged["cells"], json["cells"], "{printed}");
    assert_eq!(rejudged["verdicts"], json["verdicts"], "{printed}");
    assert!(out.join("comparison.csv").is_file() && out.join("report.html").is_file());
    // The verdicts the terminal showed after the run, it shows again.
    let verdicts = |text: &str| {
        let from = text.find("  verdicts (").unwrap_or(text.len());
        let to = text.find("  results in").unwrap_or(text.len());
        text[from..to.max(from)].to_string()
    };
    assert!(!verdicts(&stdout).is_empty(), "{stdout}");
    assert_eq!(verdicts(&printed), verdicts(&stdout), "{printed}");
    (stdout, json)
}

fn verdicts<'a>(json: &'a Value, measure: &str) -> Vec<&'a Value> {
    json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["measure"] == measure)
        .collect()
}

fn breaking_points(json: &Value, topology: &str) -> Vec<f64> {
    json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["topology"] == topology)
        .map(|c| c["measured"]["breaking_point_rps"].as_f64().unwrap())
        .collect()
}

/// The PIDs of `parent`'s children whose command line holds `word`.
fn children_with(parent: u32, word: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent's PID is the second field after the command's closing parenthesis.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(word) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn three_workers_of_a_blocking_endpoint_have_three_times_the_breaking_point() {
    let _alone = crate::support::alone();
    // /block?ms=10 holds a worker 10 ms: 100 req/s a worker, whatever else the machine runs.
    // The objective is on p90, whose 95 % bound needs 29 requests: a 1 s step holds them at
    // these rates, so each search ends within its 20 s (the lab took 64 s, reading 95.1 and
    // 93.8 req/s for one worker and 288.7 and 290.2 for three; on p99, 299 requests a step,
    // /block?ms=20's searches of 40 s made the test take 150 s).
    let (stdout, json) = lab("name: block\n\
         topologies:\n  - { name: 1 worker }\n  - { name: 3 workers, workers: 3 }\n\
         workloads:\n  - { name: block, capacity: \"/block?ms=10 --slo 'p90<100ms,errors<1%' \
         --max-time 20s --warmup 1s --step 1s\" }\n\
         rounds: 2\n");
    for (topology, expected) in [("1 worker", 100.0), ("3 workers", 300.0)] {
        for found in breaking_points(&json, topology) {
            assert!(
                (found / expected - 1.0).abs() <= 0.15,
                "{topology}: breaking point {found} req/s, expected {expected} ± 15 %\n{stdout}"
            );
        }
    }
    let v = verdicts(&json, "breaking_point");
    assert_eq!(v.len(), 1, "{json}");
    let ratio = v[0]["ratio"].as_f64().unwrap();
    assert!((2.55..=3.45).contains(&ratio), "{}", v[0]);
    assert_eq!(v[0]["differs"], true, "{}", v[0]);
    assert!(v[0]["ci_low"].as_f64().unwrap() > 1.0, "{}", v[0]);
    // The workers sleep: the limit is their number, not the CPU.
    assert!(
        v[0]["why"].as_str().unwrap().contains("not the CPU"),
        "{}",
        v[0]
    );
    assert!(
        stdout.contains("block, against 1 worker")
            && stdout.contains("≠ 3 workers: breaking point ×"),
        "{stdout}"
    );
}

#[test]
fn an_open_load_under_capacity_is_judged_on_latency_and_a_paired_workload_on_throughput() {
    let _quiet = crate::support::quiet();
    // 500 req/s of /ping is far under either topology's capacity: the offered rate is the
    // throughput, so only latency can differ. /block for twice as long on one worker serves
    // half as many requests, however busy the machine's CPUs are (a /calc pair's CPU-bound
    // cells read ×0.72 [0.26, 2.04] beside other work on a 2-core machine: no known answer).
    let (stdout, json) = lab("name: models\n\
         topologies:\n  - { name: 1 worker }\n  - { name: 3 workers, workers: 3 }\n\
         workloads:\n  - { name: ping, run: \"/ping -R 500 -d 2s\" }\n\
         rounds: 2\n");
    assert!(verdicts(&json, "throughput").is_empty(), "{json}");
    assert_eq!(verdicts(&json, "latency_p50").len(), 1, "{json}");
    assert_eq!(verdicts(&json, "latency_p99").len(), 1, "{json}");
    for v in json["verdicts"].as_array().unwrap() {
        let why = v["why"].as_str().unwrap();
        assert!(
            !why.contains("ideal") && !why.contains("CPU-bound"),
            "{why}"
        );
    }
    assert!(!stdout.contains("saturat"), "{stdout}");

    let (_, json) = lab("name: pair\n\
         topologies:\n  - { name: 1 worker }\n\
         workloads:\n  - { name: block 10ms, run: \"/block?ms=10 -c 2 -d 2s\" }\n\
         \x20 - { name: block 20ms, run: \"/block?ms=20 -c 2 -d 2s\" }\n\
         compare: [block 10ms, block 20ms]\n");
    assert_eq!(json["rounds"], 3, "a comparison runs 3 rounds unless told");
    let t = verdicts(&json, "throughput");
    assert_eq!(t.len(), 1, "{json}");
    let t = t[0];
    assert_eq!(t["factor"], "workload");
    assert_eq!(t["baseline"], "block 10ms");
    let ratio = t["ratio"].as_f64().unwrap();
    assert!((0.4..=0.6).contains(&ratio), "{t}");
    assert!(
        t["differs"] == true && t["ci_high"].as_f64().unwrap() < 1.0,
        "{t}"
    );
}

#[test]
fn a_replica_killed_mid_cell_is_named_its_cell_left_out_and_the_lab_goes_on() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exp.yaml");
    std::fs::write(
        &file,
        "name: crash\n\
         topologies:\n  - { name: two, replicas: 2, lb: builtin }\n\
         workloads:\n  - { name: first, run: \"/ping -R 200 -d 4s --timeout 2s\" }\n\
         \x20 - { name: second, run: \"/ping -R 100 -d 1s\" }\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "lab",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(lab.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("running first") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let replicas = children_with(lab.id(), "serve");
    assert_eq!(replicas.len(), 2, "{replicas:?}\n{printed}");
    // SAFETY: a replica this test's lab started, by its PID.
    unsafe {
        libc::kill(replicas[0] as libc::pid_t, libc::SIGKILL);
    }
    let started = Instant::now();
    for line in lines {
        printed.push_str(&line.unwrap());
        printed.push('\n');
        assert!(started.elapsed() < Duration::from_secs(60), "{printed}");
    }
    assert!(lab.wait().unwrap().success(), "{printed}");
    assert!(
        printed.contains(&format!("(pid {}) exited during the cell", replicas[0])),
        "{printed}"
    );
    assert!(printed.contains("left out of the comparisons"), "{printed}");
    assert!(
        !printed.contains("still serving the previous cell"),
        "{printed}"
    );
    let json = read_json(&out.join("lab.json"));
    let cells = json["cells"].as_array().unwrap();
    let reason = cells[0]["excluded"].as_str().unwrap_or_default();
    assert!(reason.contains("signal: 9"), "{}", cells[0]);
    assert!(cells[1]["excluded"].is_null(), "{}", cells[1]);
    let second = read_json(&out.join("two").join("second").join("summary.json"));
    assert_eq!(
        second["requests"]["errors"], 0,
        "the restarted topology served: {second}"
    );
}

#[test]
fn a_probe_workload_counts_each_topologys_workers_and_says_why_in_the_verdict() {
    let _quiet = crate::support::quiet_long();
    // /bbox/sync serves --bbox-workers requests at once, 50 ms each; /bbox/async has no limit.
    // (One process each: SO_REUSEPORT spreads connections over processes by a hash, unevenly,
    // so three processes of three read anywhere from 4 to 9 by luck.)
    let (stdout, json) = lab("name: probe\n\
         topologies:\n  - { name: 1 process, serve: \"--bbox-delay 50ms\" }\n  \
         - { name: 9 workers, serve: \"--bbox-delay 50ms --bbox-workers 9\" }\n\
         workloads:\n  - { name: sync, probe: \"/bbox/sync --max-time 25s\" }\n  \
         - { name: async, probe: \"/bbox/async --max-time 10s --max-concurrency 12\" }\n\
         rounds: 1\n");
    let measured = |topology: &str, workload: &str| {
        json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["topology"] == topology && c["workload"] == workload)
            .map(|c| c["measured"].clone())
            .unwrap_or_else(|| panic!("no {topology}/{workload} cell\n{stdout}"))
    };
    let one = measured("1 process", "sync");
    assert_eq!(one["kind"], "probe", "{one}");
    assert_eq!(one["behaviour"], "sync", "{one}");
    assert_eq!(one["workers"], 3, "{one}\n{stdout}");
    let s = one["service_time_ms"].as_f64().unwrap();
    assert!((45.0..=80.0).contains(&s), "{one}");
    let nine = measured("9 workers", "sync");
    assert_eq!(nine["workers"], 9, "{nine}\n{stdout}");
    assert_eq!(measured("1 process", "async")["behaviour"], "async");
    // The sync probe's top throughput is compared, and the verdict says what the probe read;
    // the async one has no limit, so only its service time is.
    let top = verdicts(&json, "max_throughput");
    assert_eq!(top.len(), 1, "{}", json["verdicts"]);
    assert_eq!(top[0]["workload"], "sync");
    assert!(top[0]["ratio"].as_f64().unwrap() > 1.8, "{}", top[0]);
    let why = top[0]["why"].as_str().unwrap();
    assert!(why.contains("the probe read 3 worker(s)"), "{why}");
    assert!(why.contains("the probe read 9 worker(s)"), "{why}");
    assert!(verdicts(&json, "service_time")
        .iter()
        .any(|v| v["workload"] == "async"));
    assert!(stdout.contains("sync 3 workers S "), "{stdout}");
}

#[test]
fn a_lab_kept_before_its_directory_had_a_contract_is_judged_again_to_its_own_verdicts() {
    let _shared = crate::support::shared();
    // Seed 000's full lab of 2026-11-26 (87 cells: fixed loads, breaking points, probes) kept
    // only lab.json and each cell's summary.json; judged again by today's rules, its verdicts
    // are the ones it printed then.
    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/runs/seeds-2026-11-26/000-full");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("lab");
    let status = std::process::Command::new("cp")
        .args(["-r", kept.to_str().unwrap(), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let then = read_json(&copy.join("lab.json"));
    let out = loadlab_ok(&["report", copy.to_str().unwrap()]);
    let printed = String::from_utf8_lossy(&out.stdout);
    let now = read_json(&copy.join("lab.json"));
    let keys = [
        "measure", "baseline", "variant", "workload", "ratio", "ci_low", "ci_high",
    ];
    let then_v = then["verdicts"].as_array().unwrap();
    let now_v = now["verdicts"].as_array().unwrap();
    assert_eq!(then_v.len(), now_v.len(), "{printed}");
    for (a, b) in then_v.iter().zip(now_v) {
        for k in keys.iter().chain(&["differs", "why"]) {
            assert_eq!(a[k], b[k], "{k}: {a}\n{b}");
        }
    }
    assert!(printed.contains("recorded no core count"), "{printed}");
    assert!(copy.join("report.html").is_file());
}
