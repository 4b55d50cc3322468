//! Opening connections: paced before the load and outside every latency, bound to the plan's
//! source addresses, and refused up front when the system cannot hold them.

mod support;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Instant;

use loadlab_engine::limits::LimitError;
use loadlab_engine::{run, EngineError, StopSignal};
use loadlab_target::TestServer;
use support::*;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn connections_bound_to_two_source_addresses_reach_the_server_from_both() {
    let _serial = serial();
    let server = RawServer::start(Behaviour::Answer(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ));
    let mut p = plan(server.addr, "/", closed(6, 1), count(300));
    p.source_addrs = ips(&["127.0.0.2", "127.0.0.3"]);
    let (_, s) = run_plan(&p);
    assert_eq!(s.requests.ok, 300, "{:?}", s.errors);
    assert_eq!(s.generator.connect.source_addrs, ["127.0.0.2", "127.0.0.3"]);
    let peers = server.peers.lock().unwrap().clone();
    let distinct: BTreeSet<IpAddr> = peers.iter().copied().collect();
    assert_eq!(
        distinct,
        ips(&["127.0.0.2", "127.0.0.3"]).into_iter().collect()
    );
    let from_first = peers
        .iter()
        .filter(|p| p.to_string() == "127.0.0.2")
        .count();
    assert_eq!(from_first * 2, peers.len(), "round-robin: half from each");
}

#[test]
fn five_hundred_connections_at_1000_a_second_take_half_a_second_outside_the_run_and_its_latency() {
    let _serial = serial();
    let server = TestServer::start(1).unwrap();
    let mut p = plan(server.addr, "/ping", closed(500, 1), for_secs(1.0));
    p.connect_rate = 1000.0;
    let started = Instant::now();
    let (_, s) = run_plan(&p);
    let wall = started.elapsed().as_secs_f64();
    let c = &s.generator.connect;
    assert_eq!((c.connections, c.opened, c.failed), (500, 500, 0));
    assert!(
        (0.45..1.5).contains(&c.duration_s),
        "500 at 1000/s open in ~0.5 s, took {:.3} s",
        c.duration_s
    );
    assert_eq!(c.rate_per_s, 1000.0);
    assert!(
        wall >= 1.0 + c.duration_s,
        "the connects come before the 1 s run"
    );
    assert!(
        s.duration_s < 1.3,
        "the run's duration holds no connect: {}",
        s.duration_s
    );
    assert_eq!(s.errors.connect_refused + s.errors.connect_timeout, 0);
    assert!(s.requests.ok > 0);
    assert!(
        s.latency_ms.max < 1000.0 * c.duration_s,
        "no request waited for the connects: max {} ms",
        s.latency_ms.max
    );
}

#[test]
fn an_open_model_opens_its_initial_connections_before_its_first_arrival() {
    let _serial = serial();
    let server = TestServer::start(1).unwrap();
    let mut p = plan(server.addr, "/ping", open(200.0, 100, 200), for_secs(0.5));
    p.connect_rate = 500.0;
    let (_, s) = run_plan(&p);
    let c = &s.generator.connect;
    assert_eq!((c.connections, c.opened), (100, 100));
    assert!(c.duration_s >= 0.18, "100 at 500/s: {:.3} s", c.duration_s);
    assert!(
        s.latency_ms.max < 1000.0 * c.duration_s,
        "{}",
        s.latency_ms.max
    );
    assert_eq!(s.requests.dropped, 0);
}

#[test]
fn a_plan_past_the_hard_file_limit_is_refused_before_any_connect() {
    let _serial = serial();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let hard = lim.rlim_max;
    if hard >= loadlab_run::plan::MAX_CONNECTIONS as u64 {
        return; // this machine lets a process open more files than a plan may ask
    }
    let mut p = plan(dead_addr(), "/", closed(hard as usize + 1, 1), count(1));
    p.source_addrs = (2..=250)
        .map(|i| format!("127.0.0.{i}").parse().unwrap())
        .collect();
    let p = p.check().unwrap();
    match run(&p, &StopSignal::default(), |_, _| {}) {
        Err(EngineError::Limit(LimitError::Files { hard: h, .. })) => assert_eq!(h, hard),
        other => panic!("expected the file limit's refusal, got {:?}", other.err()),
    }
}

#[test]
fn more_connections_to_one_target_than_one_source_has_ports_are_refused() {
    let _serial = serial();
    let Ok(range) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range") else {
        return;
    };
    let bounds: Vec<usize> = range
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let ports = bounds[1] - bounds[0] + 1;
    let p = plan(dead_addr(), "/", closed(ports + 1, 1), count(1))
        .check()
        .unwrap();
    let e = run(&p, &StopSignal::default(), |_, _| {}).err();
    assert!(
        matches!(e, Some(EngineError::Limit(LimitError::Ports { .. }))),
        "{e:?}"
    );
    assert!(e.unwrap().to_string().contains("--source-addr"));
}

#[test]
fn a_stop_while_connecting_ends_the_run_without_its_load() {
    let _serial = serial();
    let server = TestServer::start(1).unwrap();
    let mut p = plan(server.addr, "/ping", closed(400, 1), for_secs(5.0));
    p.connect_rate = 200.0;
    let p = p.check().unwrap();
    let stop = StopSignal::default();
    let trigger = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        trigger.stop();
    });
    let started = Instant::now();
    let data = run(&p, &stop, |_, _| {}).unwrap();
    stopper.join().unwrap();
    let took = started.elapsed().as_secs_f64();
    assert!(
        took < 1.5,
        "400 connects at 200/s and 5 s of load were cut short: {took:.2} s"
    );
    assert!(!data.complete);
    assert!(data.generator.connect.opened < 400);
}
