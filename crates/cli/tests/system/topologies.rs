//! `loadlab serve` topologies as real processes: workers sharing a port, replicas behind
//! nginx and behind the built-in proxy, a user command that fails, and clean-up on Ctrl-C.

use crate::support::{assert_all_gone, Served};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The raw answer (head and body) to `GET path` on `port`.
fn raw_get(port: u16, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn replicas_behind_nginx_take_turns() {
    let _shared = crate::support::shared();
    let mut t = Served::start(&["--replicas", "3", "--lb", "nginx"]);
    assert_eq!(t.pids.len(), 4, "3 replicas and nginx");
    let by_pid = crate::support::answers(t.port, 30);
    assert_eq!(by_pid.len(), 3, "answers by pid: {by_pid:?}");
    // Each nginx worker keeps its own round-robin position, so turns are even only roughly.
    assert!(by_pid.values().all(|n| *n >= 5), "round robin: {by_pid:?}");
    let all = t.pids.clone();
    assert_eq!(t.interrupt(), Some(0));
    assert_all_gone(&all);
}

#[test]
fn a_command_that_exits_at_once_gives_a_clear_error_with_its_stderr() {
    let _shared = crate::support::shared();
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "serve",
            "--port",
            "0",
            "--cmd",
            "echo cannot open app.js >&2; exit 3",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("error: service exited while starting"),
        "{stderr}"
    );
    assert!(last.contains("cannot open app.js"), "{stderr}");
}

#[test]
fn a_lab_experiment_runs_every_cell_and_writes_one_comparison() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exp.yaml");
    std::fs::write(
        &file,
        "name: smoke\n\
         topologies:\n  - { name: one }\n  - { name: two behind proxy, replicas: 2, lb: builtin }\n\
         workloads:\n  - { name: ping, run: \"/ping -R 100 -d 1s\" }\n  - { name: heavy, run: \"/heavy?ms=2 -c 2 -d 1s\" }\n\
         rounds: 1\n",
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "lab",
            file.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.join("comparison.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[0].starts_with("topology,workload,ok/s,min ms,median ms,p95 ms,p99 ms"));
    let cpu_col = lines[0]
        .split(',')
        .position(|h| h == "server cpu %")
        .unwrap();
    for row in &lines[1..] {
        let cpu: f64 = row.split(',').nth(cpu_col).unwrap().parse().unwrap();
        assert!(cpu >= 0.0, "{row}");
    }
    for cell in [
        "one/ping",
        "one/heavy",
        "two-behind-proxy/ping",
        "two-behind-proxy/heavy",
    ] {
        assert!(out_dir.join(cell).join("summary.json").is_file(), "{cell}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("two behind proxy") && stdout.contains("p99 ms"),
        "{stdout}"
    );
    // The verdict on a closed-model cell compares throughput, and against the ideal only
    // because the one-process side saturated (its CPU-bound worker).
    assert!(
        stdout.contains("heavy, against one")
            && stdout.contains("two behind proxy: throughput ×")
            && stdout.contains("% of the ideal ×2"),
        "{stdout}"
    );
}

#[test]
fn nginx_serves_the_static_files_itself_with_static_at_lb() {
    let _shared = crate::support::shared();
    let t = Served::start(&["--replicas", "2", "--static-at-lb"]);
    let head_and_body = |path: &str| {
        let out = raw_get(t.port, path);
        let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&out[..end]).to_lowercase(),
            out[end + 4..].to_vec(),
        )
    };
    let (head, css) = head_and_body("/static/home.css");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    // nginx's own file answers carry an ETag; the service's never do.
    assert!(
        head.contains("etag:") && head.contains("content-type: text/css"),
        "{head}"
    );
    assert!(
        head.contains("cache-control: public, max-age=3600"),
        "{head}"
    );
    let (head, png) = head_and_body("/static/logo.png");
    assert!(
        head.contains("etag:") && head.contains("image/png"),
        "{head}"
    );
    assert!(png.starts_with(b"\x89PNG"), "a PNG body");
    assert!(!css.is_empty());
    let (head, _) = head_and_body("/static/NOPE.css");
    assert!(head.starts_with("http/1.1 404"), "{head}");
    // Pages still go to the replicas.
    assert_eq!(crate::support::answers(t.port, 4).len(), 2);
}

#[test]
fn a_services_stdout_goes_to_null_a_drained_pipe_a_file_or_a_terminal_and_never_blocks_it() {
    let _shared = crate::support::shared();
    // 2,000 logged /info bodies are ~400 KB: far more than a pipe holds (64 KB), so a pipe
    // nobody read would stop the service at its first few hundred requests.
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = crate::support::lab_ok(
        dir.path(),
        "name: stdout\n\
         topologies:\n  - { name: discarded, stdout: null }\n  - { name: piped }\n  - { name: in a file, stdout: file }\n  - { name: on a terminal, stdout: tty }\n\
         workloads:\n  - { name: info, run: \"/info?log=1 -c 4 -n 2000 --timeout 5s\" }\n\
         rounds: 1\n",
    );
    for topology in ["discarded", "piped", "in-a-file", "on-a-terminal"] {
        let s = crate::support::read_json(&out.join(topology).join("info").join("summary.json"));
        assert_eq!(s["requests"]["ok"], 2000, "{topology}: {}", s["requests"]);
    }
}

#[test]
fn a_replica_on_a_quarter_cpu_uses_a_quarter_of_a_core_and_its_control_group_goes_with_it() {
    use std::path::{Path, PathBuf};
    let _alone = crate::support::alone();
    let mut t = Served::start(&["--cpus", "0.25", "--memory", "256M"]);
    let replica = t.pids[0];
    // Its group is `loadlab-<serve's pid>/service`, in v1's cpu tree or v2's one tree.
    let parent = format!("loadlab-{}", t.child.id());
    let groups: Vec<PathBuf> = [
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/cpu,cpuacct",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup",
    ]
    .iter()
    .map(|root| Path::new(root).join(&parent).join("service"))
    .filter(|g| g.is_dir())
    .collect();
    assert!(
        !groups.is_empty(),
        "no group {parent}/service under /sys/fs/cgroup"
    );
    for g in &groups {
        let procs = std::fs::read_to_string(g.join("cgroup.procs")).unwrap();
        assert!(
            procs.split_whitespace().any(|p| p == replica.to_string()),
            "{} holds {procs:?}, not the replica {replica}",
            g.display()
        );
    }
    // /calc is CPU work: four connections keep more than a core busy without a budget.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    crate::support::loadlab_ok(&[
        "run",
        &format!("http://127.0.0.1:{}/calc?n=200000", t.port),
        "-c",
        "4",
        "-d",
        "3s",
        "--watch-pid",
        &replica.to_string(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let s = crate::support::read_json(&run_dir.join("summary.json"));
    assert!(
        s["requests"]["ok"].as_u64().unwrap() > 0,
        "{}",
        s["requests"]
    );
    let cpu = s["server"]["processes"][0]["cpu_pct_avg"].as_f64().unwrap();
    assert!(
        (15.0..=30.0).contains(&cpu),
        "a replica of 0.25 CPU used {cpu} % of a core"
    );
    t.interrupt();
    for g in &groups {
        assert!(!g.exists(), "{} is left", g.display());
        assert!(!g.parent().unwrap().exists(), "{parent} is left");
    }
    // A loadlab killed outright leaves its groups behind; the next one to set a budget
    // removes them before it starts.
    let mut killed = Served::start(&["--cpus", "0.25"]);
    let left: Vec<PathBuf> = groups
        .iter()
        .map(|g| {
            g.parent()
                .and_then(Path::parent)
                .unwrap()
                .join(format!("loadlab-{}", killed.child.id()))
        })
        .collect();
    assert!(left.iter().all(|g| g.is_dir()), "{left:?}");
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let mut next = Served::start(&["--cpus", "0.25"]);
    for g in &left {
        assert!(!g.exists(), "{} was left by a killed loadlab", g.display());
    }
    next.interrupt();
}

#[test]
fn replicas_sharing_one_black_box_serve_its_workers_not_theirs() {
    let _shared = crate::support::shared();
    // Each box: 2 workers of 200 ms. Two replicas with boxes of their own serve 4 at once
    // (~20/s); two calling one shared box serve its 2 (~10/s), as seed 000's topologies all
    // called the course's one box. The known answer comes from time the box waits.
    let dir = tempfile::tempdir().unwrap();
    let (stdout, out) = crate::support::lab_ok(
        dir.path(),
        "name: shared box\nrounds: 1\n\
         topologies:\n\
         \x20 - { name: own boxes, replicas: 2, lb: builtin, serve: \"--bbox-workers 2 --bbox-delay 200ms\" }\n\
         \x20 - { name: one shared box, replicas: 2, lb: builtin, shared_bbox: \"--bbox-workers 2 --bbox-delay 200ms\" }\n\
         \x20 - { name: one behind the proxy, lb: builtin }\n\
         workloads:\n  - { name: sync c8, run: \"/bbox/sync -c 8 -d 3s\" }\n",
    );
    assert!(
        stdout.contains("calling one shared black box on http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("one behind the proxy: 1 replica of loadlab serve behind the built-in proxy"),
        "{stdout}"
    );
    let ok_rps = |cell: &str| {
        let s = crate::support::read_json(&out.join(cell).join("sync-c8/summary.json"));
        s["requests"]["ok"].as_f64().unwrap() / s["duration_s"].as_f64().unwrap()
    };
    let (own, shared) = (ok_rps("own-boxes"), ok_rps("one-shared-box"));
    assert!((15.0..=21.0).contains(&own), "own boxes: {own} ok/s");
    assert!(
        (7.5..=10.5).contains(&shared),
        "one shared box: {shared} ok/s"
    );
}
