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
