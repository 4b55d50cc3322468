//! Opening connections: paced before the load and outside every latency, bound to the plan's
//! source addresses, and refused up front when the system cannot hold them.

mod support;

use loadlab_engine::limits::LimitError;
use loadlab_engine::{run, EngineError, StopSignal};
use std::collections::BTreeSet;
use std::net::IpAddr;
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
