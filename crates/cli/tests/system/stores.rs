//! `/turno` on a real Redis: `loadlab serve --store redis` (its own redis-server, shared by
//! replicas behind nginx) and `--redis-url` (a server that may refuse).

use crate::support::{
    assert_all_gone, lab_ok, loadlab_json, loadlab_ok, read_json, ticket_at, Served,
};
use std::net::SocketAddr;

/// The URL of the redis-server a `loadlab serve` first line names.
fn redis_url(t: &Served) -> String {
    t.line
        .split("redis-server ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no redis URL in {:?}", t.line))
        .to_string()
}

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

/// The pid of the deployment's `loadlab consume` process.
fn consumer_pid(t: &Served) -> Option<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| {
            parent(pid) == Some(t.child.id())
                && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split('\0').any(|a| a == "consume"))
        })
}

/// `/visits/PAGE` of the service at `port`.
fn visits(port: u16, page: &str) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /visits/{page} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str::<serde_json::Value>(body).map_or(0, |v| v["visits"].as_u64().unwrap_or(0))
}

#[test]
fn tickets_stay_unique_and_gap_free_across_three_replicas_sharing_redis() {
    let _shared = crate::support::shared();
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

    let url = format!("http://127.0.0.1:{}/turno/q", t.port);
    let (s, _) = loadlab_json(&["run", &url, "-c", "20", "-n", "2000"]);
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
    let _shared = crate::support::shared();
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
    let _shared = crate::support::shared();
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
    let _shared = crate::support::shared();
    let t = Served::start(&["--store", "redis"]);
    let line_url = format!("http://127.0.0.1:{}/turno/w", t.port);
    // The service's first line names its redis-server; the run watches it by URL.
    let redis_url = redis_url(&t);
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
    // Read back from the run directory, the store has its chart in the report.
    loadlab_ok(&["report", dir.path().to_str().unwrap()]);
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("store-commands"),
        "no store chart in the report"
    );
}

#[test]
fn every_page_view_is_counted_once_even_when_the_consumer_is_killed_mid_run() {
    let _shared = crate::support::shared();
    let t = Served::start(&["--visits", "--replicas", "2", "--shards", "10"]);
    let first = consumer_pid(&t).expect("a consumer process");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let url = format!("http://127.0.0.1:{}/site/home", t.port);
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "run",
            &url,
            "-R",
            "300",
            "-d",
            "4s",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kills the consumer this test's service started, by its PID.
    unsafe {
        libc::kill(first as libc::pid_t, libc::SIGKILL);
    }
    assert!(run.wait().unwrap().success());
    let summary = read_json(&json);
    let served = summary["status"]["200"].as_u64().unwrap();
    // Requests still in flight when the run stopped reached the service, which counts their
    // views, but their 200s never reached the run (a suite run counted 1,200 of 1,199).
    let unfinished = summary["requests"]["unfinished"].as_u64().unwrap();
    assert!(served >= 1100, "{served} views served");
    // The supervisor starts the consumer again; it takes back what it had not acknowledged.
    let start = std::time::Instant::now();
    let mut counted = visits(t.port, "home");
    while counted < served && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        counted = visits(t.port, "home");
    }
    assert!(
        (served..=served + unfinished).contains(&counted),
        "every 200 counted once: {counted} counted, {served} served, {unfinished} unfinished"
    );
    let second = consumer_pid(&t).expect("the consumer started again");
    assert_ne!(first, second);
    // Stopped, the topology leaves no web, nginx, consumer or redis process behind.
    let mut all = t.pids.clone();
    all.push(second);
    let mut t = t;
    t.interrupt();
    assert_all_gone(&all);
}

#[test]
fn a_consumer_restarted_under_its_name_counts_what_it_had_taken_and_not_acknowledged() {
    let _shared = crate::support::shared();
    let t = Served::start(&["--store", "redis"]);
    let url = redis_url(&t);
    let mut c = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: String = redis::cmd("XGROUP")
        .arg(&["CREATE", "visits", "counters", "0", "MKSTREAM"][..])
        .query(&mut c)
        .unwrap();
    for _ in 0..50 {
        let _: String = redis::cmd("XADD")
            .arg(&["visits", "*", "page", "news"][..])
            .query(&mut c)
            .unwrap();
    }
    // A consumer named counter-1 took 20 views and died before acknowledging them.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(
            &[
                "GROUP",
                "counters",
                "counter-1",
                "COUNT",
                "20",
                "STREAMS",
                "visits",
                ">",
            ][..],
        )
        .query(&mut c)
        .unwrap();
    let mut consumer = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "consume",
            "--redis-url",
            &url,
            "--name",
            "counter-1",
            "--shards",
            "5",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let counted = |c: &mut redis::Connection| -> u64 {
        let keys: Vec<String> = (0..5).map(|s| format!("visits:news:{s}")).collect();
        let n: Vec<Option<u64>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
        n.into_iter().flatten().sum()
    };
    let start = std::time::Instant::now();
    while counted(&mut c) < 50 && start.elapsed() < std::time::Duration::from_secs(15) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SAFETY: stops the consumer this test started, by its PID.
    unsafe {
        libc::kill(consumer.id() as libc::pid_t, libc::SIGINT);
    }
    let _ = consumer.wait();
    assert_eq!(
        counted(&mut c),
        50,
        "the 20 taken before and the 30 never delivered"
    );
    let pending: redis::Value = redis::cmd("XPENDING")
        .arg(&["visits", "counters"][..])
        .query(&mut c)
        .unwrap();
    match pending {
        redis::Value::Array(v) => assert_eq!(v.first(), Some(&redis::Value::Int(0)), "{v:?}"),
        other => panic!("XPENDING answered {other:?}"),
    }
}

#[test]
fn a_lab_topology_balanced_by_the_client_sends_to_every_replica_sharing_one_redis() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (text, out_dir) = lab_ok(
        dir.path(),
        "name: turnomatic\n\
         topologies:\n  - { name: two, replicas: 2, lb: client, store: redis }\n\
         workloads:\n  - { name: tickets, run: \"/turno/q -c 4 -n 400\" }\n",
    );
    assert!(
        text.contains("balanced by the client over http://127.0.0.1:"),
        "{text}"
    );
    let s = read_json(&out_dir.join("two").join("tickets").join("summary.json"));
    assert_eq!(
        s["targets"].as_array().unwrap().len(),
        2,
        "{}",
        s["targets"]
    );
    assert_eq!(s["status"]["200"], 400);
    // The lab watched the topology's redis-server with its processes.
    let store = &s["server"]["stores"][0];
    assert!(
        store["name"]
            .as_str()
            .unwrap()
            .starts_with("redis 127.0.0.1:"),
        "{store}"
    );
}

#[test]
fn the_live_metrics_carry_the_watched_stores_readings() {
    let _shared = crate::support::shared();
    let t = Served::start(&["--store", "redis"]);
    let redis_url = redis_url(&t);
    let port = crate::support::closed_port();
    let url = format!("http://127.0.0.1:{}/turno/m", t.port);
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "run",
            &url,
            "-R",
            "100",
            "-d",
            "3s",
            "-q",
            "--watch-redis",
            &redis_url,
        ])
        .arg(format!("--dashboard=127.0.0.1:{port}"))
        .args(["--dashboard-keep", "4s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let metrics = || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    };
    let start = std::time::Instant::now();
    let mut seen = String::new();
    while start.elapsed() < std::time::Duration::from_secs(6) {
        if let Some(m) = metrics() {
            if m.contains("loadlab_store_commands_per_second{store=") {
                seen = m;
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = run.wait();
    assert!(
        seen.contains("loadlab_store_clients{store=\"redis 127.0.0.1:"),
        "{seen}"
    );
}
