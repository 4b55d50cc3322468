//! Each endpoint's contract, against the service on 127.0.0.1: answers, costs (timing within
//! tolerance), what blocks a worker and what does not, and atomic tickets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use loadlab_target::{ServiceConfig, TestServer};

/// A minimal `GET` with `Connection: close`; returns (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Runs `n` requests at once and returns how long the last took to finish.
fn concurrently(addr: SocketAddr, path: &str, n: usize) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let path = path.to_string();
            std::thread::spawn(move || assert_eq!(get(addr, &path).0, 200))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[test]
fn ping_health_and_unknown_paths() {
    let s = TestServer::start(1).unwrap();
    assert_eq!(get(s.addr, "/ping"), (200, "pong".into()));
    assert_eq!(get(s.addr, "/health").0, 200);
    let (status, body) = get(s.addr, "/nope");
    assert_eq!(status, 404);
    assert!(body.starts_with("no endpoint /nope"), "{body}");
}

#[test]
fn a_bad_parameter_is_a_400_with_a_one_line_reason() {
    let s = TestServer::start(1).unwrap();
    for path in [
        "/delay?ms=abc",
        "/delay",
        "/block?ms=-1",
        "/calc?n=x",
        "/heavy?ms=99999999",
        "/info?log=maybe",
    ] {
        let (status, body) = get(s.addr, path);
        assert_eq!(status, 400, "{path}");
        assert_eq!(body.trim_end().lines().count(), 1, "{path}: {body}");
    }
}

#[test]
fn delay_block_and_heavy_take_their_time() {
    let s = TestServer::start(1).unwrap();
    for path in ["/delay?ms=100", "/block?ms=100", "/heavy?ms=100"] {
        let start = Instant::now();
        assert_eq!(get(s.addr, path).0, 200);
        let took = ms(start.elapsed());
        assert!((100..180).contains(&took), "{path} took {took} ms");
    }
}

#[test]
fn blocking_endpoints_hold_the_worker_and_delay_does_not() {
    let s = TestServer::start(1).unwrap();
    let delay = ms(concurrently(s.addr, "/delay?ms=200", 4));
    assert!(delay < 350, "4 × /delay?ms=200 at once took {delay} ms");
    let block = ms(concurrently(s.addr, "/block?ms=200", 3));
    assert!(
        block >= 590,
        "3 × /block?ms=200 on one worker took {block} ms"
    );
    let heavy = ms(concurrently(s.addr, "/heavy?ms=150", 3));
    assert!(
        heavy >= 440,
        "3 × /heavy?ms=150 on one worker took {heavy} ms"
    );
}

#[test]
fn the_sync_black_box_queues_past_its_workers_and_the_async_one_does_not() {
    let config = ServiceConfig {
        bbox_delay: Duration::from_millis(200),
        bbox_workers: 2,
    };
    let s = TestServer::start_with(1, config).unwrap();
    let sync2 = ms(concurrently(s.addr, "/bbox/sync", 2));
    assert!(
        (200..350).contains(&sync2),
        "2 at once on 2 workers took {sync2} ms"
    );
    let sync4 = ms(concurrently(s.addr, "/bbox/sync", 4));
    assert!(
        (400..550).contains(&sync4),
        "4 at once on 2 workers took {sync4} ms"
    );
    let async4 = ms(concurrently(s.addr, "/bbox/async", 4));
    assert!(
        (200..350).contains(&async4),
        "4 at once, async, took {async4} ms"
    );
}

#[test]
fn calc_returns_the_sum_of_sines() {
    let s = TestServer::start(1).unwrap();
    let (status, body) = get(s.addr, "/calc?n=1000");
    assert_eq!(status, 200);
    let expected: f64 = (0..1000).map(|i| (i as f64).sin()).sum();
    assert!((body.parse::<f64>().unwrap() - expected).abs() < 1e-9);
}

#[test]
fn info_reports_the_answering_process() {
    let s = TestServer::start(1).unwrap();
    let (status, body) = get(s.addr, "/info");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["pid"], std::process::id());
    assert!(v["cpus"].as_u64().unwrap() >= 1);
}

#[test]
fn tickets_increase_atomically_under_concurrency() {
    let s = TestServer::start(2).unwrap();
    let addr = s.addr;
    let handles: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                (0..25)
                    .map(|_| {
                        let (status, body) = get(addr, "/turno/store-1");
                        assert_eq!(status, 200);
                        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                        v["turno"].as_u64().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(
        all,
        (1..=200).collect::<Vec<_>>(),
        "every ticket exactly once"
    );
    assert_eq!(get(addr, "/turno/other").1, "{\"turno\":1}");
}

#[test]
fn pipelined_requests_are_answered_without_nagle_delays() {
    let s = TestServer::start(1).unwrap();
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.set_nodelay(true).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // 50 batches, so the connection is past TCP's quick-ACK start, where Nagle would hide.
    let start = Instant::now();
    let batch = "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n".repeat(10);
    let mut buf = [0u8; 4096];
    for _ in 0..50 {
        conn.write_all(batch.as_bytes()).unwrap();
        let mut got = Vec::new();
        while got.windows(4).filter(|w| w == b"pong").count() < 10 {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "the connection closed");
            got.extend_from_slice(&buf[..n]);
        }
    }
    // With Nagle's algorithm on, most batches wait ~40 ms for a delayed ACK (about 2 s here).
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "50 batches of 10 pipelined pings took {took:?}"
    );
}
