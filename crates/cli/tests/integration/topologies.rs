//! `loadlab serve` topologies as real processes: workers sharing a port, replicas behind
//! nginx and behind the built-in proxy, a user command that fails, and clean-up on Ctrl-C.

use crate::support::{assert_all_gone, Served};
use std::process::{Command, Stdio};

#[test]
fn workers_share_one_port_and_every_one_answers() {
    let mut t = Served::start(&["--workers", "3"]);
    assert_eq!(t.pids.len(), 3);
    let by_pid = crate::support::answers(t.port, 60);
    assert_eq!(by_pid.len(), 3, "answers by pid: {by_pid:?}");
    for pid in by_pid.keys() {
        assert!(t.pids.contains(pid));
    }
    assert_eq!(t.interrupt(), Some(0));
    assert_all_gone(&t.pids);
}

#[test]
fn replicas_behind_the_builtin_proxy_take_turns_by_connection() {
    let mut t = Served::start(&["--replicas", "2", "--lb", "builtin"]);
    let by_pid = crate::support::answers(t.port, 10);
    assert_eq!(by_pid.len(), 2, "answers by pid: {by_pid:?}");
    assert!(by_pid.values().all(|n| *n == 5), "round robin: {by_pid:?}");
    let all = t.pids.clone();
    t.interrupt();
    assert_all_gone(&all);
}

#[test]
fn a_user_command_runs_in_the_same_topologies() {
    // Two replicas of a user command: here loadlab's own service, started through $PORT.
    let cmd = format!("exec {} serve --port $PORT", env!("CARGO_BIN_EXE_loadlab"));
    let mut t = Served::start(&["--cmd", &cmd, "--replicas", "2", "--lb", "builtin"]);
    let by_pid = crate::support::answers(t.port, 4);
    assert_eq!(by_pid.len(), 2, "answers by pid: {by_pid:?}");
    let all = t.pids.clone();
    t.interrupt();
    assert_all_gone(&all);
}

#[test]
fn a_bad_experiment_file_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "name: x\ntopologies: []\nworkloads: []\nextra: 1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", file.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("extra"),
        "{stderr}"
    );
}

#[test]
fn a_lab_whose_later_workload_is_broken_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    // An Artillery script with a step key Artillery does not have, on line 6.
    std::fs::write(
        dir.path().join("broken.yml"),
        "config:\n  phases:\n    - { duration: 1, arrivalRate: 1 }\nscenarios:\n  - flow:\n      - gett: /ping\n",
    )
    .unwrap();
    let file = dir.path().join("lab.yaml");
    std::fs::write(
        &file,
        "name: x\ntopologies: [{ name: one }]\nworkloads:\n  - { name: fine, run: \"/ping -d 2s\" }\n  - { name: later, run: broken.yml }\n",
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", file.to_str().unwrap(), "--out"])
        .arg(&out_dir)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("workload \"later\""), "{stderr}");
    assert!(stderr.contains("broken.yml:6"), "{stderr}");
    // Nothing ran: no cell of the first workload, no directory, no topology started.
    assert!(!stdout.contains("running"), "{stdout}");
    assert!(!out_dir.exists());
    // A capacity search's scenario file is checked as well, found beside the lab's file.
    std::fs::write(
        &file,
        "name: x\ntopologies: [{ name: one }]\nworkloads:\n  - { name: fine, run: \"/ping -d 2s\" }\n  - { name: search, capacity: \"broken.yml --slo p99<1s\" }\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", file.to_str().unwrap(), "--out"])
        .arg(&out_dir)
        .current_dir(elsewhere.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("workload \"search\""), "{stderr}");
    assert!(stderr.contains("broken.yml:6"), "{stderr}");
    assert!(!out_dir.exists());
}

#[test]
fn a_checked_lab_lists_its_cells_and_its_length_and_runs_nothing() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/seed-001-replicas.short.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", example.to_str().unwrap(), "--check", "--out"])
        .arg(&out_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("4 topologies × 12 workloads × 1 round(s) = 48 cells"),
        "{stdout}"
    );
    // 12 workloads of 3 s on 4 topologies, and up to 10 s after each of the 48 cells.
    assert!(
        stdout.contains("at most 2 min 24 s of load, plus up to 8 min"),
        "{stdout}"
    );
    assert!(stdout.contains("about 10 min 24 s in all"), "{stdout}");
    assert!(!stdout.contains("running"), "{stdout}");
    assert!(!out_dir.exists());
}
