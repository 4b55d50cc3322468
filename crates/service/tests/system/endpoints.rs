//! Each endpoint's contract, against the service on 127.0.0.1: answers, costs (timing within
//! tolerance), what blocks a worker and what does not, and atomic tickets.

use crate::support::get;
use loadlab_service::{ServiceConfig, TestServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

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
        ..Default::default()
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

#[test]
fn a_site_page_busy_waits_work_ms() {
    let s = TestServer::start(1).unwrap();
    // The server runs in this process: its CPU is this process's.
    let cpu_ms = || {
        // SAFETY: getrusage fills the zeroed struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let tv = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    let (start, cpu) = (Instant::now(), cpu_ms());
    assert_eq!(get(s.addr, "/site/home?work_ms=100").0, 200);
    let (took, used) = (ms(start.elapsed()), cpu_ms() - cpu);
    // 100 ms of the server thread's CPU: at least that long, and that much CPU, whatever
    // else shares the core (it then takes longer, as CPU work does).
    assert!(took >= 100, "took {took} ms");
    assert!(
        (99.0..180.0).contains(&used),
        "used {used:.1} ms of CPU in {took} ms"
    );
    let (status, body) = get(s.addr, "/site/home?work_ms=abc");
    assert_eq!(status, 400);
    assert_eq!(body.trim_end().lines().count(), 1, "{body}");
}

#[test]
fn past_its_in_flight_cap_the_service_answers_429() {
    let config = ServiceConfig {
        max_in_flight: Some(2),
        ..Default::default()
    };
    let s = TestServer::start_with(2, config).unwrap();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| get(s.addr, "/delay?ms=400").0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = statuses.iter().filter(|&&c| c == 200).count();
    let shed = statuses.iter().filter(|&&c| c == 429).count();
    assert_eq!((ok, shed), (2, 4), "{statuses:?}");
    assert_eq!(get(s.addr, "/ping").0, 200, "the cap frees as requests end");
}
