//! One conformance suite for every runtime of the reference service: the same checks run
//! against `loadlab serve --runtime rust|node|python` (and gunicorn's gevent workers), each a
//! real process on 127.0.0.1, so the Node and Python services answer DESIGN §4.3 as the Rust
//! one does, with the costs their runtime really pays.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::Served;
use serde_json::Value;

/// `/bbox/*`'s delay in the suite.
const BBOX_DELAY_MS: u64 = 400;
/// `/bbox/sync`'s workers in the suite.
const BBOX_WORKERS: usize = 2;
/// Slack on lower bounds: timers may fire a millisecond early, and the client's threads start
/// a little apart.
const EARLY_MS: u64 = 20;

/// Tests that time the service run without a lab or another timing test beside them.
fn timing() -> crate::support::Claim {
    crate::support::alone()
}

/// A runtime as the suite starts it, and how its workers behave.
struct Case {
    /// `--runtime` value.
    runtime: &'static str,
    /// Extra `loadlab serve` flags.
    flags: &'static [&'static str],
    /// Requests served at once when every request holds its worker (gunicorn sync workers:
    /// /delay and the black boxes hold one too); `None` when waiting holds nothing.
    sync_workers: Option<usize>,
}

/// `loadlab serve --port 0` with its stdout read to the end (the lines after the first kept),
/// interrupted by its PID when dropped.
struct Service {
    child: Child,
    port: u16,
    stdout: Arc<Mutex<Vec<String>>>,
}

impl Service {
    fn start(flags: &[&str]) -> Service {
        let mut child = Command::new(env!("CARGO_BIN_EXE_loadlab"))
            .args(["serve", "--port", "0"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let port = first
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{flags:?}: no port in {first:?}"));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let keep = stdout.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep.lock().unwrap().push(line);
            }
        });
        Service {
            child,
            port,
            stdout,
        }
    }

    /// The lines printed after the first, waiting up to 5 s for one containing `needle`.
    fn printed(&self, needle: &str) -> Vec<String> {
        let start = Instant::now();
        loop {
            let lines = self.stdout.lock().unwrap().clone();
            if lines.iter().any(|l| l.contains(needle)) || start.elapsed() > Duration::from_secs(5)
            {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // SAFETY: signals the child we spawned, by its PID.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response read whole from a `Connection: close` request.
struct Reply {
    status: u16,
    /// Header lines, names lowercased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: not JSON: {:?}", self.text()))
    }
}

/// One HTTP/1.1 request on a new connection, read until the server closes it (10 s at most).
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the service accepts");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += &format!("Content-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {path}: no header end in {raw:?}"));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: bad status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    assert!(
        !headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")),
        "{method} {path}: the suite reads sized bodies only"
    );
    Reply {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

fn get(port: u16, path: &str) -> Reply {
    request(port, "GET", path, &[], b"")
}

/// `GET path`, and how long it took.
fn timed(port: u16, path: &str) -> (Reply, Duration) {
    let start = Instant::now();
    let r = get(port, path);
    (r, start.elapsed())
}

/// `n` concurrent `GET path`s; each one's time, fastest first.
fn concurrent(port: u16, path: &'static str, n: usize) -> Vec<Duration> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let (r, took) = timed(port, path);
                assert_eq!(r.status, 200, "{path}: {}", r.text());
                took
            })
        })
        .collect();
    let mut times: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    times.sort();
    times
}

/// How long a `/ping` takes while `path` is being served: whether `path` holds the worker.
fn ping_during(port: u16, path: &'static str) -> Duration {
    let busy = std::thread::spawn(move || get(port, path));
    std::thread::sleep(Duration::from_millis(100));
    let (pong, took) = timed(port, "/ping");
    assert_eq!(pong.text(), "pong");
    assert_eq!(busy.join().unwrap().status, 200, "{path}");
    took
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Every check of the contract against one runtime.
fn conforms(case: &Case) {
    let _timing = timing();
    let mut flags = vec![
        "--runtime",
        case.runtime,
        "--bbox-delay",
        "400ms",
        "--bbox-workers",
        "2",
    ];
    flags.extend_from_slice(case.flags);
    let served = Service::start(&flags);
    let port = served.port;
    let name = format!("{} {}", case.runtime, case.flags.join(" "));

    // ping, health, and the runtime that answers.
    let pong = get(port, "/ping");
    assert_eq!((pong.status, pong.text().as_str()), (200, "pong"), "{name}");
    assert_eq!(get(port, "/health").status, 200, "{name}");
    let info = get(port, "/info");
    assert_eq!(
        info.header("content-type"),
        Some("application/json"),
        "{name}"
    );
    let info = info.json();
    let keys: BTreeSet<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "arch",
            "argv",
            "cpus",
            "cwd",
            "exec_path",
            "hostname",
            "loadavg",
            "os",
            "pid",
            "rss_kb",
            "runtime",
            "uptime_s",
            "version"
        ]),
        "{name}"
    );
    assert_eq!(info["runtime"], case.runtime, "{name}");
    assert_eq!(info["os"], std::env::consts::OS, "{name}");
    assert_eq!(info["arch"], std::env::consts::ARCH, "{name}");
    assert!(
        info["pid"].as_u64().is_some_and(|p| p > 1),
        "{name}: {info}"
    );
    assert!(
        info["cpus"].as_u64().is_some_and(|c| c >= 1),
        "{name}: {info}"
    );
    assert!(
        info["uptime_s"].as_f64().is_some_and(|u| u >= 0.0),
        "{name}"
    );
    assert!(info["rss_kb"].as_u64().is_some_and(|r| r > 0), "{name}");
    let loadavg = info["loadavg"].as_array();
    assert!(
        loadavg.is_some_and(|l| l.len() == 3 && l.iter().all(|x| x.as_f64().is_some())),
        "{name}: {info}"
    );
    assert!(
        info["argv"].as_array().is_some_and(|a| !a.is_empty()),
        "{name}: {info}"
    );
    for key in ["exec_path", "cwd", "version", "hostname"] {
        assert!(
            info[key].as_str().is_some_and(|v| !v.is_empty()),
            "{name}: {key} in {info}"
        );
    }
    // log=1 also prints the body to stdout in the runtime's own way of printing a value
    // (console.log of the object on node, print of the dict on python, pretty JSON on rust):
    // a line names the pid, and the runtime is printed with it.
    let logged = get(port, "/info?log=1").json();
    let pid = logged["pid"].to_string();
    let names_pid = |l: &String| l.contains("pid") && l.contains(&pid);
    let lines = served.printed(&pid);
    assert!(
        lines.iter().any(names_pid),
        "{name}: /info?log=1 printed nothing: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("runtime") && l.contains(case.runtime)),
        "{name}: /info?log=1 printed no runtime: {lines:?}"
    );

    // delay waits its time; block holds the worker (the event loop, for node); delay does
    // not, except under gunicorn's sync workers, where every request holds one.
    let (done, took) = timed(port, "/delay?ms=300");
    assert_eq!(done.text(), "done", "{name}");
    assert!(
        ms(took) + EARLY_MS >= 300,
        "{name}: /delay?ms=300 took {took:?}"
    );
    let during_block = ping_during(port, "/block?ms=600");
    assert!(
        ms(during_block) >= 350,
        "{name}: /ping took {during_block:?} during /block?ms=600: block did not hold the worker"
    );
    let during_delay = ping_during(port, "/delay?ms=600");
    if case.sync_workers.is_some() {
        assert!(
            ms(during_delay) >= 350,
            "{name}: a sync worker serves one request at a time"
        );
    } else {
        assert!(
            ms(during_delay) < 350,
            "{name}: /ping took {during_delay:?} during /delay?ms=600: delay held the worker"
        );
    }
    let during_heavy = ping_during(port, "/heavy?ms=600");
    assert!(
        ms(during_heavy) >= 350,
        "{name}: heavy must hold the worker"
    );

    // calc: the sum of sin(i) for i < n.
    let calc: f64 = get(port, "/calc?n=1000").text().trim().parse().unwrap();
    let expected: f64 = (0..1000).map(|i| (i as f64).sin()).sum();
    assert!(
        (calc - expected).abs() < 1e-9,
        "{name}: calc {calc} vs {expected}"
    );
    assert_eq!(get(port, "/calc?n=0").text(), "0", "{name}");
    // ... over n values from `from`: seed 001 summed over 5 to 6 million.
    let from: f64 = get(port, "/calc?n=1000&from=5000000")
        .text()
        .trim()
        .parse()
        .unwrap();
    let expected: f64 = (5_000_000..5_001_000).map(|i| (i as f64).sin()).sum();
    assert!(
        (from - expected).abs() < 1e-9,
        "{name}: calc from 5M {from} vs {expected}"
    );

    // The black boxes: async serves all at once; sync serves BBOX_WORKERS at once.
    let at_once = case.sync_workers.unwrap_or(usize::MAX);
    let times = concurrent(port, "/bbox/async", 3);
    let rounds = 3usize.div_ceil(at_once.min(3)) as u64;
    assert!(
        ms(times[2]) + EARLY_MS >= BBOX_DELAY_MS * rounds
            && ms(times[2]) < BBOX_DELAY_MS * (rounds + 1),
        "{name}: 3 × /bbox/async took {times:?}"
    );
    let times = concurrent(port, "/bbox/sync", BBOX_WORKERS + 1);
    let slots = BBOX_WORKERS.min(at_once);
    let rounds = (BBOX_WORKERS + 1).div_ceil(slots) as u64;
    assert!(
        ms(times[0]) < BBOX_DELAY_MS * 2 - 100,
        "{name}: the first /bbox/sync waited: {times:?}"
    );
    assert!(
        ms(times[BBOX_WORKERS]) + EARLY_MS >= BBOX_DELAY_MS * rounds
            && ms(times[BBOX_WORKERS]) < BBOX_DELAY_MS * (rounds + 1),
        "{name}: {} × /bbox/sync with {BBOX_WORKERS} workers took {times:?}",
        BBOX_WORKERS + 1
    );

    // turno: every ticket handed out once, under concurrent requests.
    let queue = format!("q-{}", case.runtime);
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let path = format!("/turno/{queue}");
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| get(port, &path).json()["turno"].as_u64().unwrap())
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut tickets: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    tickets.sort();
    assert_eq!(tickets, (1..=30).collect::<Vec<u64>>(), "{name}");
    assert_eq!(
        get(port, "/turno/other").json(),
        serde_json::json!({ "turno": 1 }),
        "{name}"
    );

    // Bad parameters: a 400 with the same one line everywhere.
    let long_queue = format!("/turno/{}", "a".repeat(129));
    let bad: BTreeMap<&str, &str> = BTreeMap::from([
        ("/delay", "missing query parameter ms"),
        (
            "/delay?ms=abc",
            "ms must be a whole number from 0 to 600000, got \"abc\"",
        ),
        (
            "/block?ms=-1",
            "ms must be a whole number from 0 to 600000, got \"-1\"",
        ),
        (
            "/heavy?ms=600001",
            "ms must be a whole number from 0 to 600000, got \"600001\"",
        ),
        (
            "/calc?n=1.5",
            "n must be a whole number from 0 to 2000000000, got \"1.5\"",
        ),
        ("/calc", "missing query parameter n"),
        ("/leak", "missing query parameter kb"),
        (
            "/leak?kb=1048577",
            "kb must be a whole number from 0 to 1048576, got \"1048577\"",
        ),
        ("/info?log=2", "log must be 0 or 1, got \"2\""),
        ("/stall?every_ms=0", "every_ms must be at least 1"),
        (
            "/stall?every_ms=10&for_ms=20",
            "for_ms must not exceed every_ms",
        ),
        (
            "/site/home?work_ms=x",
            "work_ms must be a whole number from 0 to 600000, got \"x\"",
        ),
        (
            long_queue.as_str(),
            "the queue name must have 1 to 128 characters",
        ),
    ]);
    for (path, reason) in bad {
        let r = get(port, path);
        assert_eq!(
            (r.status, r.text()),
            (400, format!("{reason}\n")),
            "{name}: {path}"
        );
    }

    // A repeated parameter is refused before the handler, in axum's words (no newline).
    for (path, field) in [
        ("/delay?ms=1&ms=2", "ms"),
        ("/site/home?work_ms=1&work_ms=2", "work_ms"),
    ] {
        let r = get(port, path);
        assert_eq!(
            (r.status, r.text()),
            (
                400,
                format!("Failed to deserialize query string: duplicate field `{field}`")
            ),
            "{name}: {path}"
        );
    }

    // Unknown paths and methods.
    for path in ["/nope", "/ping/", "/turno/", "/bbox"] {
        let r = get(port, path);
        assert_eq!(r.status, 404, "{name}: {path}");
        assert!(
            r.text()
                .starts_with(&format!("no endpoint {path}; try /ping, ")),
            "{name}: {path}: {}",
            r.text()
        );
    }
    let r = get(port, "/site/Home");
    assert_eq!(
        (r.status, r.text()),
        (
            404,
            "no page \"Home\"; a page name is 1 to 32 of a-z, 0-9 and -\n".to_string()
        ),
        "{name}"
    );
    let r = get(port, "/static/app.exe");
    assert_eq!(r.status, 404, "{name}");
    assert_eq!(
        request(port, "POST", "/ping", &[], b"").status,
        405,
        "{name}"
    );

    // What /leak keeps stays resident: 8 MB more in /info's rss_kb after it, in any runtime.
    let rss = || get(port, "/info").json()["rss_kb"].as_u64().unwrap();
    let before = rss();
    let r = get(port, "/leak?kb=8192");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "kept 8192 KB; 8192 KB held\n"),
        "{name}"
    );
    let r = get(port, "/leak?kb=1");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "kept 1 KB; 8193 KB held\n"),
        "{name}"
    );
    let grew = rss() - before;
    assert!(
        (7_500..12_000).contains(&grew),
        "{name}: rss grew {grew} KB"
    );

    // A page's sleep holds its worker without the CPU: the page takes the sleep's time.
    let (r, took) = timed(port, "/site/home?work_ms=0&wait_ms=150");
    assert_eq!(r.status, 200, "{name}");
    assert!(
        (150..1000).contains(&ms(took)),
        "{name}: /site with wait_ms=150 took {took:?}"
    );

    // stall answers at once outside its freeze.
    let (r, _) = timed(port, "/stall?every_ms=600000&for_ms=0");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{name}");

    // The site, its static files, and a login whose token /account accepts.
    let page = get(port, "/site/news?work_ms=5");
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{name}"
    );
    let html = page.text();
    for link in [
        "/static/site.css",
        "/static/app.js",
        "/static/logo.png",
        "/static/news.png",
    ] {
        assert!(html.contains(link), "{name}: {link}");
    }
    let png = get(port, "/static/logo.png");
    assert_eq!(png.header("content-type"), Some("image/png"), "{name}");
    assert_eq!(png.header("cache-control"), Some("max-age=3600"), "{name}");
    assert!(png.body.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}");
    assert!(
        get(port, "/static/site.css").text().contains("body {"),
        "{name}"
    );
    let login = request(
        port,
        "POST",
        "/login",
        &[],
        br#"{"user": "ana", "password": "x"}"#,
    );
    let token = login.json()["token"].as_str().unwrap().to_string();
    assert_eq!(login.json()["user"], "ana", "{name}");
    assert!(
        token.len() == 32
            && token
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{name}: {token}"
    );
    let bearer = format!("Bearer {token}");
    let account = request(port, "GET", "/account", &[("Authorization", &bearer)], b"");
    assert_eq!(
        account.json(),
        serde_json::json!({ "user": "ana" }),
        "{name}"
    );
    let denied = request(
        port,
        "GET",
        "/account",
        &[("Authorization", "Bearer nope")],
        b"",
    );
    assert_eq!(
        (denied.status, denied.text()),
        (401, "unknown token; log in with POST /login\n".to_string()),
        "{name}"
    );
    assert_eq!(denied.header("www-authenticate"), Some("Bearer"), "{name}");
    let r = request(port, "POST", "/login", &[], b"{}");
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            "missing \"user\"; send {\"user\": \"NAME\", \"password\": \"...\"}\n".to_string()
        ),
        "{name}"
    );
}

macro_rules! conformance {
    ($($test:ident: $runtime:literal $flags:expr, sync_workers $sync:expr;)*) => {$(
        #[test]
        fn $test() {
            conforms(&Case { runtime: $runtime, flags: $flags, sync_workers: $sync });
        }
    )*};
}

conformance! {
    rust_service_meets_the_contract: "rust" &[], sync_workers None;
    node_service_meets_the_contract: "node" &[], sync_workers None;
    python_sync_workers_meet_the_contract: "python" &[], sync_workers Some(1);
    python_gevent_workers_meet_the_contract: "python" &["--async"], sync_workers None;
}

/// The pids answering `/info` over `n` new connections, and the runtimes they named.
fn answering(port: u16, n: usize) -> (BTreeSet<u64>, BTreeSet<String>) {
    let mut pids = BTreeSet::new();
    let mut runtimes = BTreeSet::new();
    for _ in 0..n {
        let info = get(port, "/info").json();
        pids.insert(info["pid"].as_u64().unwrap());
        runtimes.insert(info["runtime"].as_str().unwrap().to_string());
    }
    (pids, runtimes)
}

#[test]
fn node_and_python_replicas_with_workers_run_behind_nginx() {
    let _timing = timing();
    for runtime in ["node", "python"] {
        let mut served =
            Served::start(&["--runtime", runtime, "--replicas", "2", "--workers", "2"]);
        assert_eq!(
            served.pids.len(),
            3,
            "{runtime}: 2 replicas and nginx: {:?}",
            served.pids
        );
        let (pids, runtimes) = answering(served.port, 40);
        assert_eq!(runtimes, BTreeSet::from([runtime.to_string()]));
        // 2 replicas × 2 workers, none of them the replica's own (supervising) process.
        assert!(pids.len() >= 3, "{runtime}: answered by {pids:?}");
        for pid in &served.pids {
            assert!(!pids.contains(&(*pid as u64)), "{runtime}: {pid} answered");
        }
        assert_eq!(served.interrupt(), Some(0), "{runtime}");
    }
}

#[test]
fn node_cluster_workers_share_the_port_and_keep_their_own_tickets() {
    let _timing = timing();
    let served = Service::start(&["--runtime", "node", "--workers", "2"]);
    let (pids, _) = answering(served.port, 10);
    assert_eq!(
        pids.len(),
        2,
        "cluster round-robin reaches both workers: {pids:?}"
    );
    let tickets: BTreeSet<u64> = (0..4)
        .map(|_| {
            get(served.port, "/turno/w").json()["turno"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        tickets,
        BTreeSet::from([1, 2]),
        "each worker counts its own queue"
    );
}

#[test]
fn async_workers_are_refused_outside_python() {
    let _shared = crate::support::shared();
    let out = crate::support::loadlab(&["serve", "--runtime", "node", "--async", "--port", "0"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("applies to --runtime python only"),
        "{stderr}"
    );
}

#[test]
fn flags_only_the_rust_service_implements_are_refused_in_one_line_elsewhere() {
    let _shared = crate::support::shared();
    for runtime in ["node", "python"] {
        for (flags, named) in [
            (&["--redis-url", "redis://127.0.0.1:1"][..], "--redis-url"),
            (&["--store", "redis"], "--store redis"),
            (&["--visits"], "--visits"),
            (&["--max-in-flight", "3"], "--max-in-flight"),
        ] {
            let mut args = vec!["serve", "--runtime", runtime, "--port", "0"];
            args.extend(flags);
            let out = crate::support::loadlab(&args);
            assert!(!out.status.success(), "{args:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains(&format!("{named} is served by the Rust service only"))
                    && stderr.contains("--runtime rust"),
                "{args:?}: {stderr}"
            );
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        }
    }
    // An experiment's topology says it before starting anything.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.yaml");
    std::fs::write(
        &file,
        "name: x\ntopologies:\n  - { name: n, runtime: node, store: redis }\nworkloads:\n  - { name: p, run: \"/ping -n 1\" }\n",
    )
    .unwrap();
    let out = crate::support::loadlab(&[
        "lab",
        file.to_str().unwrap(),
        "--out",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the node service has no Redis store"),
        "{stderr}"
    );
}

/// `loadlab probe URL` with `extra` flags; its JSON verdict.
fn probe(url: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("probe.json");
    let mut args = vec![
        "probe",
        url,
        "--json",
        json.to_str().unwrap(),
        "--max-time",
        "30s",
    ];
    args.extend_from_slice(extra);
    crate::support::loadlab_ok(&args);
    crate::support::read_json(&json)
}

#[test]
fn the_probe_finds_each_runtimes_workers() {
    let _timing = timing();
    // (runtime flags, path, watch the CPU, verdict, workers)
    let cases: [(&[&str], &str, bool, &str, u64); 4] = [
        (
            &[
                "--runtime",
                "node",
                "--bbox-workers",
                "2",
                "--bbox-delay",
                "100ms",
            ],
            "/bbox/sync",
            false,
            "sync",
            2,
        ),
        (&["--runtime", "node"], "/calc?n=2000000", true, "cpu", 1),
        (
            &["--runtime", "python", "--workers", "2"],
            "/block?ms=60",
            false,
            "sync",
            2,
        ),
        (
            &[
                "--runtime",
                "python",
                "--async",
                "--bbox-workers",
                "3",
                "--bbox-delay",
                "100ms",
            ],
            "/bbox/sync",
            false,
            "sync",
            3,
        ),
    ];
    for (flags, path, watch, kind, workers) in cases {
        let served = Service::start(flags);
        let url = format!("http://127.0.0.1:{}{path}", served.port);
        let pid = served.child.id().to_string();
        // Warm up first (Node compiles a hot loop only after it has run a while).
        for _ in 0..5 {
            assert_eq!(get(served.port, path).status, 200, "{flags:?} {path}");
        }
        let extra: &[&str] = if watch { &["--watch-pid", &pid] } else { &[] };
        let v = probe(&url, extra);
        // CPU-bound needs the watched process to get a whole core. On a machine shared with
        // other work it may not: then the one event loop reads as synchronous, and the
        // client's own gaps between requests, no longer small next to a stretched service
        // time, can make it look a worker or two wider.
        let starved = watch
            && v["steps"][0]["server_cpu_pct"]
                .as_f64()
                .is_some_and(|cpu| cpu < 80.0);
        if starved {
            assert!(
                ["cpu", "sync"].contains(&v["kind"].as_str().unwrap_or(""))
                    && v["workers"].as_u64().is_some_and(|w| w <= workers + 2),
                "{flags:?} {path}: {v}"
            );
        } else {
            assert_eq!(
                (v["kind"].as_str(), v["workers"].as_u64()),
                (Some(kind), Some(workers)),
                "{flags:?} {path}: {v}"
            );
        }
    }
}

#[test]
fn node_instances_call_the_shared_black_box_and_its_async_delay_is_its_own() {
    let _timing = timing();
    // The shared box: 2 workers of 100 ms, 300 ms async; a node instance's own box would be
    // 3 workers of 1 s. Its answers come from time the box waits.
    let dir = tempfile::tempdir().unwrap();
    let (stdout, out) = crate::support::lab_ok(
        dir.path(),
        "name: node shared box\nrounds: 1\n\
         topologies:\n\
         \x20 - { name: node, runtime: node, shared_bbox: \"--bbox-workers 2 --bbox-delay 100ms --bbox-async-delay 300ms\" }\n\
         workloads:\n\
         \x20 - { name: sync c6, run: \"/bbox/sync -c 6 -d 3s\" }\n\
         \x20 - { name: async c2, run: \"/bbox/async -c 2 -d 2s\" }\n",
    );
    assert!(stdout.contains("calling one shared black box"), "{stdout}");
    let summary =
        |w: &str| crate::support::read_json(&out.join("node").join(w).join("summary.json"));
    let sync = summary("sync-c6");
    let rate = sync["requests"]["ok"].as_f64().unwrap() / sync["duration_s"].as_f64().unwrap();
    assert!(
        (15.0..=21.0).contains(&rate),
        "sync through the shared box: {rate} ok/s"
    );
    let p50 = summary("async-c2")["latency_ms"]["p50"].as_f64().unwrap();
    assert!(
        (295.0..400.0).contains(&p50),
        "async through the shared box: p50 {p50} ms"
    );
}
