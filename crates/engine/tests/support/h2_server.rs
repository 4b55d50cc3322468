//! An HTTP/2 server in-process on 127.0.0.1 that counts its connections and the streams in
//! flight on each, and that can reset streams or shut a connection down with an error.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use http::Response;
use loadlab_run::Protocol;

use super::plan;

/// What the server does with each request.
#[derive(Clone, Copy)]
pub enum H2Behaviour {
    /// Answers 200 after this long.
    AnswerAfter(Duration),
    /// Resets every stream (RST_STREAM) with this reason.
    Reset(Reason),
    /// Answers the connection's first request, then shuts the connection down with
    /// INTERNAL_ERROR (GOAWAY) while the others are in flight.
    GoAwayAfterOne,
    /// Answers as a gRPC server: 200 with `content-type: application/grpc`, then an empty
    /// message and trailers with `grpc-status` (none when `None`); or, `trailers_only`, the
    /// status in the response's headers and no body.
    Grpc {
        status: Option<u8>,
        trailers_only: bool,
    },
    /// A bidirectional gRPC method: sends each message of the request back `after` it
    /// arrived, and ends OK once the request ended and every echo went.
    GrpcEcho { after: Duration },
    /// A server-streaming gRPC method: once the request ended, sends `count` messages one
    /// every `every`, then ends OK.
    GrpcTicks { count: u32, every: Duration },
}

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub connections: AtomicUsize,
    /// Most streams in flight at once on any one connection.
    pub most_in_flight: AtomicUsize,
}

/// An HTTP/2 server on its own runtime thread; the runtime (and its listener) ends with the
/// test process.
pub struct H2Server {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
}

impl H2Server {
    pub fn start(behaviour: H2Behaviour) -> H2Server {
        H2Server::start_limited(behaviour, None)
    }

    /// A server that allows `max_streams` concurrent streams a connection
    /// (SETTINGS_MAX_CONCURRENT_STREAMS), or any number with `None`.
    pub fn start_limited(behaviour: H2Behaviour, max_streams: Option<u32>) -> H2Server {
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
                    tokio::spawn(serve(tcp, behaviour, max_streams, server_seen.clone()));
                }
            });
        });
        H2Server { addr, seen }
    }
}

/// Serves one connection, allowing `max_streams` at once when given.
pub async fn serve(
    tcp: tokio::net::TcpStream,
    behaviour: H2Behaviour,
    max_streams: Option<u32>,
    seen: Arc<Seen>,
) {
    // As gRPC's servers do: small frames go out at once, not after the peer's delayed ACK.
    let _ = tcp.set_nodelay(true);
    let mut builder = h2::server::Builder::new();
    if let Some(n) = max_streams {
        builder.max_concurrent_streams(n);
    }
    let Ok(mut conn) = builder.handshake(tcp).await else {
        return;
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut answered = 0;
    while let Some(Ok((request, mut respond))) = conn.accept().await {
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
            H2Behaviour::Grpc {
                status,
                trailers_only,
            } => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let mut head = Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc");
                if trailers_only {
                    let code = status.unwrap_or(0).to_string();
                    head = head.header("grpc-status", code);
                    let _ = respond.send_response(head.body(()).unwrap(), true);
                    continue;
                }
                if let Ok(mut body) = respond.send_response(head.body(()).unwrap(), false) {
                    let _ = body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                    let mut trailers = http::HeaderMap::new();
                    if let Some(code) = status {
                        trailers.insert("grpc-status", code.to_string().parse().unwrap());
                    }
                    let _ = body.send_trailers(trailers);
                }
            }
            H2Behaviour::GrpcEcho { after } => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                tokio::spawn(echo(request.into_body(), respond, after));
            }
            H2Behaviour::GrpcTicks { count, every } => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                tokio::spawn(ticks(request.into_body(), respond, count, every));
            }
            H2Behaviour::Reset(reason) => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                respond.send_reset(reason);
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

/// Starts a gRPC answer: 200 with gRPC's content type.
fn grpc_answer(respond: &mut h2::server::SendResponse<Bytes>) -> Option<h2::SendStream<Bytes>> {
    let head = Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    respond.send_response(head, false).ok()
}

/// Ends a gRPC answer OK.
fn end_ok(out: &mut h2::SendStream<Bytes>) {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let _ = out.send_trailers(trailers);
}

/// Whole messages (with their prefixes) at the front of `buffered`, taken off it.
fn take_messages(buffered: &mut Vec<u8>) -> Vec<Bytes> {
    let mut out = Vec::new();
    while buffered.len() >= 5 {
        let len = u32::from_be_bytes([buffered[1], buffered[2], buffered[3], buffered[4]]);
        let end = 5 + len as usize;
        if buffered.len() < end {
            break;
        }
        out.push(Bytes::from(buffered.drain(..end).collect::<Vec<u8>>()));
    }
    out
}

/// Echoes each message of `body` `after` it arrived, in order, then ends OK.
async fn echo(
    mut body: h2::RecvStream,
    mut respond: h2::server::SendResponse<Bytes>,
    after: Duration,
) {
    let Some(mut out) = grpc_answer(&mut respond) else {
        return;
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Bytes)>();
    let sender = tokio::spawn(async move {
        while let Some((arrived, message)) = rx.recv().await {
            tokio::time::sleep_until(arrived + after).await;
            if out.send_data(message, false).is_err() {
                return;
            }
        }
        end_ok(&mut out);
    });
    let mut buffered = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        let now = tokio::time::Instant::now();
        buffered.extend_from_slice(&chunk);
        for m in take_messages(&mut buffered) {
            let _ = tx.send((now, m));
        }
    }
    drop(tx);
    let _ = sender.await;
}

/// Once `body` ended, sends `count` empty messages one every `every`, then ends OK.
async fn ticks(
    mut body: h2::RecvStream,
    mut respond: h2::server::SendResponse<Bytes>,
    count: u32,
    every: Duration,
) {
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let Some(mut out) = grpc_answer(&mut respond) else {
        return;
    };
    for _ in 0..count {
        tokio::time::sleep(every).await;
        if out
            .send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false)
            .is_err()
        {
            return;
        }
    }
    end_ok(&mut out);
}

/// A cleartext HTTP/2 plan to `server` with `streams` per connection, on one thread.
pub fn h2_plan(
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

/// Makes `plan`'s request a unary gRPC call: a POST of one empty message with gRPC's headers.
pub fn grpc_call(plan: &mut loadlab_run::Plan) {
    let r = &mut plan.requests[0];
    r.method = "POST".into();
    r.headers
        .push(("content-type".into(), "application/grpc".into()));
    r.headers.push(("te".into(), "trailers".into()));
    r.body = vec![0, 0, 0, 0, 0];
}

/// Makes `plan`'s request a streaming gRPC call as `stream` says, whose request holds
/// `messages` messages of one byte each.
pub fn grpc_stream_call(
    plan: &mut loadlab_run::Plan,
    stream: loadlab_run::GrpcStream,
    messages: usize,
) {
    grpc_call(plan);
    let r = &mut plan.requests[0];
    r.body = [0, 0, 0, 0, 1, 7].repeat(messages);
    r.grpc_stream = Some(stream);
}
