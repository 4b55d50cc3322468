//! HTTP/2 in cleartext (prior knowledge) against an in-process `h2` server on 127.0.0.1 that
//! counts its connections and the streams in flight on each, and that can reset streams or
//! shut a connection down with an error: slots pack onto connections exactly, and failures
//! count as their own kinds.

mod support;

use loadlab_run::Summary;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::h2_server::{grpc_call, h2_plan, H2Behaviour, H2Server};
use support::*;

#[test]
fn open_model_connections_grow_only_when_every_stream_is_busy() {
    let _serial = serial();
    let server = H2Server::start(H2Behaviour::AnswerAfter(Duration::from_millis(50)));
    // 400 req/s × 50 ms = 20 in flight: 2 connections of 10 streams, under a cap of 8.
    let (_, s) = run_plan(&h2_plan(&server, open(400.0, 1, 8), for_secs(1.5), 10));
    assert_eq!(s.requests.errors, 0, "{:?}", s.errors);
    assert_eq!(s.requests.dropped, 0);
    let connections = server.seen.connections.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&connections),
        "20 in flight on 10-stream connections: {connections} connections"
    );
    assert!(server.seen.most_in_flight.load(Ordering::SeqCst) <= 10);
}

#[test]
fn reset_streams_and_an_erroring_goaway_count_as_their_own_kinds() {
    let _serial = serial();
    let server = H2Server::start(H2Behaviour::Reset(h2::Reason::REFUSED_STREAM));
    let (_, s) = run_plan(&h2_plan(&server, closed(1, 1), count(40), 4));
    assert_eq!(s.errors.stream_reset, 40, "{:?}", s.errors);
    assert_eq!(
        server.seen.connections.load(Ordering::SeqCst),
        1,
        "a reset keeps the connection"
    );

    let server = H2Server::start(H2Behaviour::GoAwayAfterOne);
    let (_, s): (_, Summary) = run_plan(&h2_plan(&server, closed(1, 1), count(40), 4));
    assert!(s.requests.ok >= 1, "{:?}", s.requests);
    // The streams a GOAWAY cut off count as `goaway` (3 a connection here), not only those it
    // refused. When the client writes a request just as the server closes, the write fails
    // (EPIPE) before the GOAWAY waiting in the receive buffer is read, and h2 reads no more:
    // that connection's streams are `closed`. So only a floor (≥ 11 seen in 30 runs).
    assert!(s.errors.goaway >= 3, "{:?}", s.errors);
    assert_eq!(
        s.requests.ok + s.errors.goaway + s.errors.closed + s.errors.reset,
        40,
        "{:?} {:?}",
        s.requests,
        s.errors
    );
    assert!(
        server.seen.connections.load(Ordering::SeqCst) >= 2,
        "it reconnected"
    );
}

#[test]
fn grpc_calls_count_by_the_status_their_trailers_or_headers_carry() {
    let _serial = serial();
    // (what the server answers, the status counted): in trailers, in the headers alone, and
    // none at all (a server that broke off: INTERNAL).
    for (status, trailers_only, counted) in [
        (Some(0), false, 0),
        (Some(14), false, 14),
        (Some(5), true, 5),
        (Some(0), true, 0),
        (None, false, 13),
    ] {
        let server = H2Server::start(H2Behaviour::Grpc {
            status,
            trailers_only,
        });
        let mut p = h2_plan(&server, closed(1, 1), count(20), 4);
        grpc_call(&mut p);
        let (run, s) = run_plan(&p);
        let c = &run.totals.counts;
        assert_eq!(
            c.grpc[counted], 20,
            "{status:?} {trailers_only}: {:?}",
            c.grpc
        );
        assert_eq!(c.grpc.iter().sum::<u64>(), 20);
        assert_eq!(c.status[200], 20);
        let ok = if counted == 0 { 20 } else { 0 };
        assert_eq!((s.requests.ok, s.requests.errors), (ok, 20 - ok));
        // The seconds show the failures their 200s hide, and the summary names the status.
        let hidden: u64 = run.timeline.iter().map(|r| r.grpc_failed).sum();
        assert_eq!(hidden, 20 - ok);
        let name = loadlab_run::GrpcCode::from_number(counted as u32).name();
        assert_eq!(s.grpc.get(name), Some(&20), "{:?}", s.grpc);
    }
    // The same server's answers to a request that is not a gRPC call count by HTTP alone.
    let server = H2Server::start(H2Behaviour::Grpc {
        status: Some(14),
        trailers_only: false,
    });
    let (run, s) = run_plan(&h2_plan(&server, closed(1, 1), count(20), 4));
    assert_eq!(run.totals.counts.grpc, [0; 17]);
    assert_eq!(s.requests.ok, 20);
}

#[test]
fn a_grpc_call_whose_stream_the_server_resets_ends_as_its_reason_says() {
    let _serial = serial();
    // (the reset's reason, the status a gRPC client gives the call), as grpc-go reads them.
    for (reason, status) in [
        (h2::Reason::CANCEL, "CANCELLED"),
        (h2::Reason::REFUSED_STREAM, "UNAVAILABLE"),
        (h2::Reason::ENHANCE_YOUR_CALM, "RESOURCE_EXHAUSTED"),
        (h2::Reason::INTERNAL_ERROR, "INTERNAL"),
    ] {
        let server = H2Server::start(H2Behaviour::Reset(reason));
        let mut p = h2_plan(&server, closed(1, 1), count(20), 4);
        grpc_call(&mut p);
        let (run, s) = run_plan(&p);
        assert_eq!(s.errors.stream_reset, 20, "{reason:?}: {:?}", s.errors);
        assert_eq!(s.grpc.get(status), Some(&20), "{reason:?}: {:?}", s.grpc);
        assert_eq!(run.totals.counts.grpc.iter().sum::<u64>(), 20);
    }
}
