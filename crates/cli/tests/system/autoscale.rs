//! Autoscaled topologies under a spike (issue 55): both autoscalers start at one instance of
//! 0.2 CPU, scale out while 30 requests a second of 20 ms of CPU arrive, and give the instances
//! back once their windows have passed, with what the scale-up cost counted.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs the short spike example with `loadlab lab` into `out`; its stdout.
fn spike_lab(out: &Path) -> String {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/autoscale-spike.short.yaml");
    let run = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", example.to_str().unwrap(), "--out"])
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    stdout
}

/// The summary of `topology`'s one cell.
fn cell(out: &Path, topology: &str) -> Value {
    crate::support::read_json(&out.join(topology).join("spike").join("summary.json"))
}

#[test]
fn both_autoscalers_scale_out_through_a_spike_and_back_and_count_what_it_cost() {
    // Alone: the HPA scales on the instances' CPU within their budgets, and the spike's
    // instances take up to a core (22 CPU-s over its 61 s alone, by `/usr/bin/time`); as a
    // quiet test it stretched a Python box's service times beside it (a probe read 13 workers
    // for 12 in CI).
    let _alone = crate::support::alone();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let stdout = spike_lab(&out);
    assert!(
        stdout.contains("scaled by Kubernetes' HPA on cpu"),
        "{stdout}"
    );
    assert!(
        stdout.contains("scaled by Knative's KPA on concurrency"),
        "{stdout}"
    );
    for topology in ["hpa", "kpa"] {
        let s = cell(&out, topology);
        let a = &s["autoscale"];
        let said = format!("{topology}: {a}");
        assert_eq!(a["policy"], topology, "{said}");
        assert_eq!(a["ready_first"], 1, "{said}");
        assert!(a["ready_most"].as_u64().unwrap() >= 3, "{said}");
        // Back down after the spike, as the windows say (6 s of lower recommendations for the
        // HPA, a 6 s stable window for the KPA, 14 s of calm).
        assert!(
            a["ready_last"].as_u64().unwrap() < a["ready_most"].as_u64().unwrap(),
            "{said}"
        );
        let decisions = a["decisions"].as_array().unwrap();
        assert!(
            decisions
                .iter()
                .any(|d| d["to"].as_u64() > d["from"].as_u64()),
            "{said}"
        );
        assert!(
            decisions
                .iter()
                .any(|d| d["to"].as_u64() < d["from"].as_u64()),
            "{said}"
        );
        // Every request of the 30 s was counted; the scale-up's cost is said.
        let sent = s["requests"]["sent"].as_u64().unwrap();
        assert_eq!(sent, 4 * 4 + 12 * 30 + 14 * 4, "{said}");
        let kinds = crate::support::finding_kinds(&s);
        assert!(kinds.contains(&"autoscale_up"), "{topology}: {kinds:?}");
        assert!(a["instance_seconds"].as_f64().unwrap() > 30.0, "{said}");
        // The timeline says how many instances were ready each second.
        let timeline =
            std::fs::read_to_string(out.join(topology).join("spike").join("timeline.csv")).unwrap();
        let header: Vec<&str> = timeline.lines().next().unwrap().split(',').collect();
        let col = header.iter().position(|h| *h == "replicas").unwrap();
        let most = timeline
            .lines()
            .skip(1)
            .filter_map(|l| l.split(',').nth(col)?.parse::<u64>().ok())
            .max();
        assert_eq!(most, a["ready_most"].as_u64(), "{timeline}");
        // … and how many requests its balancer held, every second.
        let col = header.iter().position(|h| *h == "held").unwrap();
        assert!(
            timeline.lines().skip(1).all(|l| l
                .split(',')
                .nth(col)
                .is_some_and(|v| v.parse::<u64>().is_ok())),
            "{timeline}"
        );
        // The lab watched the instances as they came and went: each one's control group and
        // processes, so the run has the service's CPU (and its demand per request).
        let server = &s["server"];
        let budgets = server["budgets"].as_array().unwrap();
        assert!(
            budgets.len() as u64 >= a["ready_most"].as_u64().unwrap(),
            "{topology}: {budgets:?}"
        );
        let watched: Vec<&Value> = server["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["pid"])
            .collect();
        for b in budgets {
            assert!(b["name"].as_str().unwrap().starts_with("instance "), "{b}");
            let pids = b["pids"].as_array().unwrap();
            assert!(!pids.is_empty(), "{b}");
            assert!(
                pids.iter().all(|p| watched.contains(&p)),
                "{b}: {watched:?}"
            );
        }
        assert!(kinds.contains(&"service_demand"), "{topology}: {kinds:?}");
    }
    // The KPA's instances take 4 requests at most: past them requests waited at the balancer
    // while instances started.
    let kpa = cell(&out, "kpa");
    let held = kpa["autoscale"]["requests_waited"].as_u64().unwrap()
        + kpa["autoscale"]["requests_refused"].as_u64().unwrap();
    assert!(held > 0, "{}", kpa["autoscale"]);
}
