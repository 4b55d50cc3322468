//! Opening connections: paced before the load and outside every latency, bound to the plan's
//! source addresses, and refused up front when the system cannot hold them.

use crate::support::*;
use loadlab_engine::{run, StopSignal};
use loadlab_service::TestServer;
use std::time::Instant;

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
