//! HTTP/2 in cleartext (prior knowledge) against an in-process `h2` server on 127.0.0.1 that
//! counts its connections and the streams in flight on each, and that can reset streams or
//! shut a connection down with an error: slots pack onto connections exactly, and failures
//! count as their own kinds.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use http::Response;
use loadlab_run::{Protocol, Summary};
use support::*;

/// What the server does with each request.
#[derive(Clone, Copy)]
enum H2Behaviour {
    /// Answers 200 after this long.
    AnswerAfter(Duration),
    /// Resets every stream (RST_STREAM, REFUSED_STREAM).
    Reset,
    /// Answers the connection's first request, then shuts the connection down with
    /// INTERNAL_ERROR (GOAWAY) while the others are in flight.
    GoAwayAfterOne,
}

/// What the server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    /// Most streams in flight at once on any one connection.
    most_in_flight: AtomicUsize,
}

/// An HTTP/2 server on its own runtime thread; the runtime (and its listener) ends with the
/// test process.
struct H2Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl H2Server {
    fn start(behaviour: H2Behaviour) -> H2Server {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let server_seen = seen.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    server_seen.connections.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(tcp, behaviour, server_seen.clone()));
                }
            });
        });
        H2Server { addr, seen }
    }
}

/// Serves one connection.
async fn serve(tcp: tokio::net::TcpStream, behaviour: H2Behaviour, seen: Arc<Seen>) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut answered = 0;
    while let Some(Ok((_request, mut respond))) = conn.accept().await {
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most_in_flight.fetch_max(now, Ordering::SeqCst);
        match behaviour {
            H2Behaviour::AnswerAfter(delay) => {
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let head = Response::builder().status(200).body(()).unwrap();
                    if let Ok(mut body) = respond.send_response(head, false) {
                        let _ = body.send_data(Bytes::from_static(b"ok"), true);
                    }
                });
            }
            H2Behaviour::Reset => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                respond.send_reset(Reason::REFUSED_STREAM);
            }
            H2Behaviour::GoAwayAfterOne => {
                if answered == 0 {
                    answered += 1;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let head = Response::builder().status(200).body(()).unwrap();
                    let _ = respond.send_response(head, true);
                } else {
                    conn.abrupt_shutdown(Reason::INTERNAL_ERROR);
                    // Drives the GOAWAY out, then ends the connection.
                    while let Some(next) = conn.accept().await {
                        drop(next);
                    }
                    return;
                }
            }
        }
    }
}

/// A cleartext HTTP/2 plan to `server` with `streams` per connection, on one thread.
fn h2_plan(
    server: &H2Server,
    model: loadlab_run::Model,
    stop: loadlab_run::Stop,
    streams: usize,
) -> loadlab_run::Plan {
    let mut p = plan(server.addr, "/", model, stop);
    p.threads = 1;
    p.protocol = Protocol::Http2 { streams };
    p
}

#[test]
fn closed_model_slots_pack_onto_connections_streams_at_a_time() {
    let _serial = serial();
    let server = H2Server::start(H2Behaviour::AnswerAfter(Duration::from_millis(20)));
    let (_, s) = run_plan(&h2_plan(&server, closed(2, 1), for_secs(1.0), 5));
    assert_eq!(s.requests.errors, 0, "{:?}", s.errors);
    assert_eq!(server.seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(server.seen.most_in_flight.load(Ordering::SeqCst), 5);
    // 10 requests of 20 ms in flight: about 500 req/s, five times what 2 connections of
    // HTTP/1.1 could do.
    assert!(s.throughput.rps > 250.0, "{} req/s", s.throughput.rps);
    let h2 = s.http2.as_ref().expect("an http2 section");
    assert_eq!((h2.streams, h2.connections, h2.cleartext), (5, 2, true));
}

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
    let server = H2Server::start(H2Behaviour::Reset);
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
