//! Budgets in a lab: replicas with CPU quotas and memory limits enforced by control groups, the
//! generator on a core of its own, what each budget did read from the kernel, and the budgets
//! that do not fit refused before anything starts. They need root (or a delegated cgroup), as
//! this project's test machines give.

use crate::support::read_json;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The folders a loadlab process `pid` keeps its control groups in, in every tree, that exist.
fn groups_of(pid: u32) -> Vec<PathBuf> {
    let name = format!("loadlab-{pid}");
    [
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/cpu,cpuacct",
        "/sys/fs/cgroup/cpuacct",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup",
    ]
    .iter()
    .map(|root| Path::new(root).join(&name))
    .filter(|g| g.exists())
    .collect()
}

fn cell<'a>(lab: &'a Value, topology: &str, workload: &str) -> Vec<&'a Value> {
    lab["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["topology"] == topology && c["workload"] == workload)
        .collect()
}

#[test]
fn a_leaking_replica_under_a_memory_limit_is_named_as_killed_by_the_oom_killer_and_the_lab_goes_on()
{
    let _alone = crate::support::alone();
    let dir = tempfile::tempdir().unwrap();
    // 1 MB kept per request at 20 req/s fills 64 MB in about 3 s; the cell lasts 8 s.
    let (code, stdout, stderr, pid) = crate::support::lab_exit(
        dir.path(),
        "name: leak\ntopologies:\n  - { name: small, memory: 64M }\nworkloads:\n  \
         - { name: leak, run: \"/leak?kb=1024 -R 20 -d 8s --timeout 2s\" }\n  \
         - { name: ping, run: \"/ping -R 20 -d 2s\" }\n",
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let json = read_json(&dir.path().join("out").join("lab.json"));
    let leak = cell(&json, "small", "leak")[0];
    let why = leak["excluded"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("service (pid ")
            && why.contains("was killed by the kernel's OOM killer at its 64 MB limit, ")
            && why.ends_with(" s into the cell"),
        "{why}\n{stdout}"
    );
    let summary = read_json(&dir.path().join("out/small/leak/summary.json"));
    let budget = &summary["server"]["budgets"][0];
    assert_eq!(budget["name"], "service", "{budget}");
    assert_eq!(budget["memory_limit_mb"], 64.0, "{budget}");
    assert!(budget["oom_kills"].as_u64().unwrap() >= 1, "{budget}");
    assert!(
        budget["memory_peak_mb"].as_f64().unwrap() > 48.0,
        "{budget}"
    );
    // The topology started again: the next cell served every request on a fresh replica.
    let ping = cell(&json, "small", "ping")[0];
    assert!(ping["excluded"].is_null(), "{ping}");
    let ping = read_json(&dir.path().join("out/small/ping/summary.json"));
    assert_eq!(ping["requests"]["ok"], 40, "{}", ping["requests"]);
    assert!(
        stdout.contains("killed by the kernel's OOM killer"),
        "{stdout}"
    );
    assert!(groups_of(pid).is_empty(), "{:?} left", groups_of(pid));
}

#[test]
fn four_replicas_of_a_sixth_of_a_cpu_serve_four_times_what_one_does_with_the_generator_on_its_own_core(
) {
    let _alone = crate::support::alone();
    let dir = tempfile::tempdir().unwrap();
    // /calc?n=50000 is about 1.3 ms of CPU in the tests' debug build: 0.15 of a core serves
    // about 115 req/s. Sixteen connections keep one replica's queue full, and four replicas'
    // queues four deep each (nginx takes turns), so each serves what its quota allows: the
    // kernel's quota, not a search near a knee, sets the answer. Both topologies sit behind
    // nginx, so they differ only in replicas, and four quotas take 0.6 of the service's core,
    // leaving room for nginx and for the quotas' 100 ms periods to interleave. Four fifths of a
    // CPU did not: beside nginx the replicas got 57-86 % of the core between them, under 70 in
    // six rounds of eleven. Breaking points searched near the knee moved ×1.3 from round to
    // round on one replica (101.6 to 133.6 req/s), and the CI run that failed read ×2.98.
    let (code, stdout, stderr, pid) = crate::support::lab_exit(
        dir.path(),
        "name: quotas\nrounds: 2\ntopologies:\n  - { name: one, cpus: 0.15, lb: nginx }\n  \
         - { name: four, replicas: 4, cpus: 0.15, lb: nginx }\nworkloads:\n  \
         - { name: calc, run: \"/calc?n=50000 -c 16 -d 6s\" }\n",
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("the generator runs on core") && stdout.contains("one's processes on"),
        "{stdout}"
    );
    let json = read_json(&dir.path().join("out").join("lab.json"));
    let served = |topology: &str, round: u32| -> f64 {
        let s = read_json(
            &dir.path()
                .join(format!("out/{topology}/calc/round-{round}/summary.json")),
        );
        s["requests"]["ok"].as_f64().unwrap() / s["duration_s"].as_f64().unwrap()
    };
    // The ideal ×4 within ×1.6 either way: what a CPU must win still moves on a shared virtual
    // machine, where the quota is CPU time and a request's CPU is not fixed. One replica's
    // 6 s served 113 to 139 req/s from round to round, four's 453 to 537 (two labs on a quiet
    // machine: rounds of ×3.97, ×4.01, ×4.49 and ×3.30), so a ratio of two such figures
    // lands within ×1.6 of the ideal. A quota the four replicas shared would read ×1; missing
    // quotas fail the budgets below.
    // A cell the lab left out (a process of its topology died during it) is not a measurement,
    // as the lab's verdicts say: judge the rounds it kept, at least one. In one full suite nginx
    // exited (status 1) at the end of round 1's `four` cell, which served ×1.07 of `one`.
    let kept = |topology: &str, round: u32| {
        json["cells"].as_array().unwrap().iter().any(|c| {
            c["topology"] == topology
                && c["round"].as_u64() == Some(u64::from(round - 1))
                && c.get("excluded").is_none_or(serde_json::Value::is_null)
        })
    };
    let rounds: Vec<u32> = (1..=2)
        .filter(|&r| kept("one", r) && kept("four", r))
        .collect();
    assert!(!rounds.is_empty(), "no round kept both cells\n{stdout}");
    for round in rounds {
        let ratio = served("four", round) / served("one", round);
        assert!(
            (2.5..=6.4).contains(&ratio),
            "round {round}: ×{ratio}\n{stdout}"
        );
    }
    let v: Vec<&Value> = json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["measure"] == "throughput")
        .collect();
    assert_eq!(v.len(), 1, "{json}");
    let ratio = v[0]["ratio"].as_f64().unwrap();
    assert!((2.5..=6.4).contains(&ratio), "×{ratio}\n{stdout}");
    let why = v[0]["why"].as_str().unwrap();
    assert!(why.contains("0.15 → 0.6 CPUs of quota"), "{why}");
    assert!(!why.contains("the host"), "{why}");
    assert!(why.contains("CPU quota (throttled in"), "{why}");
    // Each replica of each round's cell ran at its quota on one core, the generator on the
    // others, and was throttled in most periods.
    for topology in ["one", "four"] {
        let mut throttled: f64 = 0.0;
        for round in 1..=2 {
            let s = read_json(
                &dir.path()
                    .join(format!("out/{topology}/calc/round-{round}/summary.json")),
            );
            let server = &s["server"];
            let cores = |side: &str| -> Vec<u64> {
                server["cores"][side]
                    .as_array()
                    .unwrap_or_else(|| panic!("{topology}: {server}"))
                    .iter()
                    .map(|c| c.as_u64().unwrap())
                    .collect()
            };
            let (service, generator) = (cores("service"), cores("generator"));
            assert_eq!(service.len(), 1, "0.6 CPUs take one core: {server}");
            assert!(
                !generator.is_empty() && generator.iter().all(|c| !service.contains(c)),
                "{server}"
            );
            for b in server["budgets"].as_array().unwrap() {
                let used = b["quota_used_pct"].as_f64().unwrap();
                assert!((75.0..=105.0).contains(&used), "{topology}: {b}");
                throttled = throttled.max(b["throttled_pct"].as_f64().unwrap());
            }
        }
        assert!(
            throttled > 20.0,
            "{topology}: throttled in {throttled} % of periods at most"
        );
    }
    assert!(groups_of(pid).is_empty(), "{:?} left", groups_of(pid));
}

#[test]
fn the_next_cell_waits_for_a_replica_to_finish_what_the_last_one_left_in_progress() {
    let _alone = crate::support::alone();
    let dir = tempfile::tempdir().unwrap();
    // A request of /heavy?ms=100 takes 0.1 s of CPU on any machine (/calc's sums take 0.09 s
    // in a release build and 0.23 s in the tests' debug build on a slow VM, where the backlog
    // then outlasted the settle's 10 s), 0.5 s alone on 0.2 CPU. The first
    // cell offers 4 a second, twice what the quota serves: when it ends, about ten are in
    // progress, arrived at different times, and the replica needs about 3 s more to finish
    // them. Its slots are not all full, so it answers the settle's probe at once; only its CPU
    // says it is still busy. The second cell's requests alone take 0.5 s each.
    let (code, stdout, stderr, _) = crate::support::lab_exit(dir.path(),
        "name: backlog\nrounds: 1\ntopologies:\n  - { name: small, cpus: 0.2, serve: \"--threads 16 --max-in-flight 12\" }\n\
         workloads:\n  - { name: flood, run: \"/heavy?ms=100 -R 4 -d 3s --timeout 20s\" }\n  \
         - { name: alone, run: \"/heavy?ms=100 -c 1 -n 3 --timeout 20s\" }\n",
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("for the target to finish the previous cell's requests"),
        "{stdout}"
    );
    let alone = read_json(&dir.path().join("out/small/alone/summary.json"));
    assert_eq!(alone["requests"]["ok"], 3, "{}", alone["requests"]);
    // Sharing the quota with the backlog, the first would take 2 s or more.
    let max = alone["latency_ms"]["max"].as_f64().unwrap();
    assert!(max < 1500.0, "max {max} ms\n{stdout}");
}
