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

#[test]
fn serve_autoscale_scales_out_under_held_requests_says_so_and_stops_every_instance() {
    use std::io::{BufRead, Read, Write};
    // Knative's KPA, one request at a time per instance, 6 s and 2 s windows: four requests of
    // 2 s at once hold three at the balancer, and the panic window asks for every instance
    // allowed (4 in flight over 0.7 each).
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["serve", "--port", "0", "--threads", "2", "--autoscale"])
        .arg("kpa,min=1,max=4,container_concurrency=1,stable_window=6s,panic_window=2s")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let wait = std::time::Duration::from_secs(15);
    let first = lines.recv_timeout(wait).expect("serve's first line");
    assert!(
        first.contains("1 to 4 instances") && first.contains("Knative's KPA"),
        "{first}"
    );
    let port: u16 = first
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first}"));
    let answers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(std::time::Duration::from_secs(15)))
                    .unwrap();
                write!(
                    s,
                    "GET /delay?ms=2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
                let mut text = String::new();
                let _ = s.read_to_string(&mut text);
                text
            })
        })
        .collect();
    let decision = loop {
        let line = lines.recv_timeout(wait).expect("a decision within 15 s");
        if line.contains("→") {
            break line;
        }
    };
    assert!(
        decision.contains("1 → 4 instance(s) (panicking), reading")
            && decision.contains("requests in flight in all"),
        "{decision}"
    );
    for a in answers {
        let text = a.join().unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    }
    // The instances are its children; Ctrl-C stops every one.
    let children: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().nth(1))
                    == Some(&child.id().to_string())
            })
        })
        .collect();
    assert!(children.len() >= 2, "instances: {children:?}");
    // SAFETY: signals the child this test spawned, by its PID.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < wait, "serve did not stop after SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_all_gone(&children);
}
