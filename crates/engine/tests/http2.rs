//! HTTP/2 in cleartext (prior knowledge) against an in-process `h2` server on 127.0.0.1 that
//! counts its connections and the streams in flight on each, and that can reset streams or
//! shut a connection down with an error: slots pack onto connections exactly, and failures
//! count as their own kinds.

mod support;

use loadlab_run::Summary;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::h2_server::{grpc_call, grpc_stream_call, h2_plan, H2Behaviour, H2Server};
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

/// The streaming calls' account of a run.
fn streams(s: &Summary) -> loadlab_run::GrpcStreams {
    s.grpc_streams
        .clone()
        .expect("the run made streaming calls")
}

#[test]
fn a_bidirectional_calls_paced_messages_are_each_timed_to_their_answer() {
    let _serial = serial();
    let ms = Duration::from_millis;
    // Each message is answered 10 ms after it arrives; the client sends 5 of them 20 ms apart
    // (the request's 2 in turn), so each call lasts 80 + 10 ms and each reply 10 ms.
    let server = H2Server::start(H2Behaviour::GrpcEcho { after: ms(10) });
    let mut p = h2_plan(&server, closed(1, 1), count(6), 4);
    let paced = loadlab_run::GrpcStream {
        client: true,
        server: true,
        interval: Some(ms(20)),
        count: Some(5),
        duration: None,
    };
    grpc_stream_call(&mut p, paced, 2);
    let (_, s) = run_plan(&p);
    assert_eq!(s.requests.ok, 6, "{:?} {:?}", s.errors, s.grpc);
    let st = streams(&s);
    assert_eq!(
        (st.calls, st.messages_sent, st.messages_received),
        (6, 30, 30)
    );
    let reply = st.reply_ms.expect("replies were timed");
    assert!(
        reply.min >= 9.9,
        "a reply comes 10 ms after its message: {reply:?}"
    );
    assert!(reply.p50 < 40.0, "{reply:?}");
    let first = st.first_message_ms.expect("first answers were timed");
    assert!(first.min >= 9.9 && first.p50 < 40.0, "{first:?}");
    assert!(s.latency_ms.min >= 89.9, "{:?}", s.latency_ms);

    // Sent at once (no pace), the request's 3 messages are still each timed to its echo.
    let mut p = h2_plan(&server, closed(1, 1), count(4), 4);
    let at_once = loadlab_run::GrpcStream {
        client: true,
        server: true,
        ..Default::default()
    };
    grpc_stream_call(&mut p, at_once, 3);
    let (_, s) = run_plan(&p);
    let st = streams(&s);
    assert_eq!((st.messages_sent, st.messages_received), (12, 12));
    let reply = st.reply_ms.expect("replies were timed");
    assert!(reply.min >= 9.9 && reply.p50 < 40.0, "{reply:?}");
}

#[test]
fn a_stream_sent_for_a_duration_sends_what_its_interval_has_room_for() {
    let _serial = serial();
    let ms = Duration::from_millis;
    let server = H2Server::start(H2Behaviour::GrpcEcho { after: ms(0) });
    let mut p = h2_plan(&server, closed(2, 1), count(6), 4);
    let timed = loadlab_run::GrpcStream {
        client: true,
        server: true,
        interval: Some(ms(10)),
        count: None,
        duration: Some(ms(100)),
    };
    grpc_stream_call(&mut p, timed, 1);
    let (_, s) = run_plan(&p);
    assert_eq!(s.requests.ok, 6, "{:?} {:?}", s.errors, s.grpc);
    let st = streams(&s);
    // Messages at 0, 10, … 90 ms: ten a call, and the half-close at 100 ms.
    assert_eq!((st.messages_sent, st.messages_received), (60, 60));
    assert!(s.latency_ms.min >= 99.9, "{:?}", s.latency_ms);
}

#[test]
fn a_server_streams_first_message_and_its_messages_are_counted() {
    let _serial = serial();
    let ms = Duration::from_millis;
    let server = H2Server::start(H2Behaviour::GrpcTicks {
        count: 4,
        every: ms(25),
    });
    let mut p = h2_plan(&server, closed(2, 1), count(8), 4);
    let server_stream = loadlab_run::GrpcStream {
        server: true,
        ..Default::default()
    };
    grpc_stream_call(&mut p, server_stream, 1);
    let (run, s) = run_plan(&p);
    assert_eq!(s.requests.ok, 8, "{:?} {:?}", s.errors, s.grpc);
    let st = streams(&s);
    assert_eq!(
        (st.calls, st.messages_sent, st.messages_received),
        (8, 8, 32)
    );
    assert!(st.reply_ms.is_none(), "a server stream pairs no replies");
    let first = st.first_message_ms.expect("first messages were timed");
    assert!(first.min >= 24.9 && first.p50 < 60.0, "{first:?}");
    assert!(s.latency_ms.min >= 99.9, "{:?}", s.latency_ms);
    let per_s = 32.0 / run.secs();
    assert!((st.messages_received_per_s - per_s).abs() < 1e-6);
}
