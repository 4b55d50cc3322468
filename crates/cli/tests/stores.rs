//! `/turno` on a real Redis: `loadlab serve --store redis` (its own redis-server, shared by
//! replicas behind nginx) and `--redis-url` (a server that may refuse).

mod support;

use std::net::SocketAddr;

use support::{assert_all_gone, loadlab_ok, read_json, ticket_at, Served};

/// The command name of a running process.
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The parent of a running process.
fn parent(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

#[test]
fn tickets_stay_unique_and_gap_free_across_three_replicas_sharing_redis() {
    let mut t = Served::start(&["--replicas", "3", "--store", "redis"]);
    let redis: Vec<u32> = t
        .pids
        .iter()
        .copied()
        .filter(|p| comm(*p) == "redis-server")
        .collect();
    assert_eq!(redis.len(), 1, "pids {:?}", t.pids);
    let front: SocketAddr = ([127, 0, 0, 1], t.port).into();
    // Ten clients at once, through nginx to the three replicas.
    let mut tickets: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|_| s.spawn(move || (0..30).map(|_| ticket_at(front, "q")).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    tickets.sort_unstable();
    assert_eq!(
        tickets,
        (1..=300).collect::<Vec<u64>>(),
        "unique and gap-free"
    );

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let url = format!("http://127.0.0.1:{}/turno/q", t.port);
    loadlab_ok(&[
        "run",
        &url,
        "-c",
        "20",
        "-n",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = read_json(&json);
    assert_eq!(s["status"]["200"], 2000, "{}", s["status"]);
    assert_eq!(
        ticket_at(front, "q"),
        2301,
        "every 200 took one ticket, none twice"
    );

    let all = t.pids.clone();
    t.interrupt();
    assert_all_gone(&all);
}

#[test]
fn one_process_starts_its_own_redis_and_leaves_nothing_behind() {
    let mut t = Served::start(&["--store", "redis"]);
    let addr: SocketAddr = ([127, 0, 0, 1], t.port).into();
    assert_eq!((ticket_at(addr, "a"), ticket_at(addr, "a")), (1, 2));
    let service = t.child.id();
    let redis: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent(pid) == Some(service) && comm(pid) == "redis-server")
        .collect();
    assert_eq!(redis.len(), 1, "one redis-server child of the service");
    t.interrupt();
    assert_all_gone(&redis);
}

#[test]
fn a_redis_that_refuses_connections_gives_503s_without_a_hang() {
    // Port 1 on loopback: nothing listens there, so every connect is refused at once.
    let t = Served::start(&["--redis-url", "redis://127.0.0.1:1/"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let url = format!("http://127.0.0.1:{}/turno/q", t.port);
    let started = std::time::Instant::now();
    loadlab_ok(&[
        "run",
        &url,
        "-c",
        "4",
        "-n",
        "40",
        "--timeout",
        "5s",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );
    let s = read_json(&json);
    assert_eq!(s["status"]["503"], 40, "{}", s["status"]);
    assert_eq!(s["requests"]["errors"], 40);
}

#[test]
fn a_run_watching_redis_reports_its_commands_beside_the_latency() {
    let t = Served::start(&["--store", "redis"]);
    let line_url = format!("http://127.0.0.1:{}/turno/w", t.port);
    // The service's first line names its redis-server; the run watches it by URL.
    let redis_url = t
        .line
        .split("redis-server ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no redis URL in {:?}", t.line))
        .to_string();
    let redis_port = redis_url
        .trim_start_matches("redis://127.0.0.1:")
        .trim_end_matches('/')
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = loadlab_ok(&[
        "run",
        &line_url,
        "-R",
        "200",
        "-d",
        "3s",
        "--watch-redis",
        &redis_url,
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let s = read_json(&dir.path().join("summary.json"));
    let store = &s["server"]["stores"][0];
    assert_eq!(store["name"], format!("redis 127.0.0.1:{redis_port}"));
    // 200 INCRs a second: the readings count the service's commands, not their own.
    let avg = store["commands_per_s_avg"].as_f64().unwrap();
    assert!((150.0..=260.0).contains(&avg), "{store}");
    assert!(store["clients_max"].as_u64().unwrap() >= 1, "{store}");
    let csv = std::fs::read_to_string(dir.path().join("stores.csv")).unwrap();
    assert!(csv.starts_with("second,store,commands_per_s"), "{csv}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("commands/s on average"));
}
