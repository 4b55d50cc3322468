//! HTTP/2 (connections layer, beside `http1`, used by `conn`): a thread's shared HTTP/2
//! connections, each carrying up to `--streams` requests at once, and the exchange of one
//! request on a stream, on the `h2` crate.
//!
//! Everything above `conn` holds one "connection" per request in flight (a pooled connection's
//! task, a virtual user), as over HTTP/1.1. Over HTTP/2 each of those is a [`StreamSlot`]: a
//! handle on a connection that [`Http2Connections`] shares among up to `streams` slots, so
//! `-c 4 --streams 10` keeps 40 requests in flight on 4 connections without the schedulers
//! knowing.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Uri};
use loadlab_run::grpc_code::is_grpc_content_type;
use loadlab_run::ErrorKind;
use loadlab_run::{GrpcCode, GrpcStream};
use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::Instant;

use crate::grpc_stream::{AnswerCount, CallStream, StreamTimes};
use crate::tls::Stream;

/// Flow-control window of each stream and of each connection: large enough that a response
/// is never held back by the client's credit (the engine reads every byte at once), as
/// h2load's and browsers' large windows do.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 64 << 20;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or carries as pseudo-headers (`Host` becomes
/// `:authority`); dropped when a request written for HTTP/1.1 is sent over HTTP/2.
const HTTP1_ONLY: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// A request ready to send on a stream: the pieces `h2` takes, cloned for each send.
#[derive(Clone)]
pub struct Http2Request {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    /// A gRPC call (`content-type: application/grpc…`): its answer ends with `grpc-status`.
    grpc: bool,
    /// A streaming gRPC call: its messages' pace, and its answer's messages counted.
    stream: Option<CallStream>,
}

/// A request written for HTTP/1.1 that cannot be sent over HTTP/2.
#[derive(Debug, thiserror::Error)]
#[error("cannot send this request over HTTP/2: {0}")]
pub struct RequestError(String);

impl Http2Request {
    /// The HTTP/2 form of `bytes`, a whole HTTP/1.1 request as the engine writes it (request
    /// line, headers, body), to `scheme://authority`. Parsing the HTTP/1.1 bytes keeps one
    /// encoder for both protocols: templates and virtual users' rendered requests alike.
    pub fn from_http1(bytes: &[u8], scheme: &str, authority: &str) -> Result<Self, RequestError> {
        let bad = |why: &dyn std::fmt::Display| RequestError(why.to_string());
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut fields);
        let head = match parsed.parse(bytes).map_err(|e| bad(&e))? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Err(bad(&"the request's head is incomplete")),
        };
        let method =
            Method::from_bytes(parsed.method.unwrap_or("GET").as_bytes()).map_err(|e| bad(&e))?;
        let path = parsed.path.unwrap_or("/");
        let mut authority = authority;
        let mut headers = HeaderMap::with_capacity(parsed.headers.len());
        for h in parsed.headers.iter() {
            if h.name.eq_ignore_ascii_case("host") {
                authority = std::str::from_utf8(h.value).unwrap_or(authority);
            }
            if HTTP1_ONLY.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
                continue;
            }
            // HTTP/2 header names are lower case; `HeaderName` makes them so.
            let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|e| bad(&e))?;
            let value = HeaderValue::from_bytes(h.value).map_err(|e| bad(&e))?;
            headers.append(name, value);
        }
        let uri = Uri::builder()
            .scheme(scheme)
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(|e| bad(&e))?;
        let grpc = headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| is_grpc_content_type(v.as_bytes()));
        Ok(Http2Request {
            method,
            uri,
            headers,
            body: Bytes::copy_from_slice(&bytes[head..]),
            grpc,
            stream: None,
        })
    }

    /// The request as a streaming gRPC call that goes as `spec` says, when given.
    pub fn with_stream(mut self, spec: Option<GrpcStream>) -> Self {
        self.stream = spec
            .filter(|_| self.grpc)
            .map(|spec| CallStream::new(spec, &self.body));
        if self.stream.as_ref().is_some_and(CallStream::paced) {
            // A paced stream's length is not its template body's, nor known ahead.
            self.headers.remove(http::header::CONTENT_LENGTH);
        }
        self
    }
}

/// A connection shared by stream slots.
struct Shared {
    /// Slots attached to it.
    slots: Cell<usize>,
    /// Streams the server lets it open at once (its SETTINGS_MAX_CONCURRENT_STREAMS), as the
    /// connection last read it; unlimited until the server says.
    server_max: Cell<usize>,
    state: RefCell<State>,
    /// Wakes the slots waiting while it opens.
    opened: Notify,
}

/// Where a shared connection is in its life.
enum State {
    /// The first slot is connecting; the others wait.
    Opening,
    /// Streams can be opened on it.
    Open(SendRequest<Bytes>),
    /// Opening failed, with the kind the waiting slots record.
    Failed(ErrorKind),
    /// It ended (GOAWAY, an error, or the server closed it): new slots go elsewhere.
    Dead,
}

/// A thread's HTTP/2 connections, per endpoint, each shared by up to `streams` slots.
pub struct Http2Connections {
    streams: usize,
    /// Indexed like the plan's endpoints.
    endpoints: Vec<RefCell<Vec<Rc<Shared>>>>,
}

/// What a slot got when it asked for a connection.
pub enum Attach {
    /// A connection to open: the slot connects, then calls [`Opening::open`] or
    /// [`Opening::fail`].
    Open(Opening),
    /// A connection already open or opening; [`Joined::ready`] waits for it.
    Join(Joined),
}

/// A connection this slot is opening.
pub struct Opening(Rc<Shared>);

/// A connection another slot opened or is opening.
pub struct Joined(Rc<Shared>);

impl Http2Connections {
    /// No connections yet, to `endpoints` endpoints, `streams` slots a connection.
    pub fn new(endpoints: usize, streams: usize) -> Self {
        Http2Connections {
            streams: streams.max(1),
            endpoints: (0..endpoints).map(|_| RefCell::new(Vec::new())).collect(),
        }
    }

    /// Slots a connection carries.
    pub fn streams(&self) -> usize {
        self.streams
    }

    /// Attaches a slot to endpoint `ep`: to the first live connection with a free stream, or
    /// to a new one. Dead and failed connections are forgotten here.
    pub fn attach(&self, ep: usize) -> Attach {
        let mut list = self.endpoints[ep].borrow_mut();
        list.retain(|c| !matches!(*c.state.borrow(), State::Dead | State::Failed(_)));
        // A server that allows fewer streams than --streams gets more connections, not slots
        // that wait inside one for a stream the server has not freed.
        if let Some(c) = list
            .iter()
            .find(|c| c.slots.get() < self.streams.min(c.server_max.get()))
        {
            c.slots.set(c.slots.get() + 1);
            return Attach::Join(Joined(c.clone()));
        }
        let c = Rc::new(Shared {
            slots: Cell::new(1),
            server_max: Cell::new(usize::MAX),
            state: RefCell::new(State::Opening),
            opened: Notify::new(),
        });
        list.push(c.clone());
        Attach::Open(Opening(c))
    }
}

impl Opening {
    /// Runs the HTTP/2 handshake on `io` (the connection preface and settings), starts the
    /// task that drives the connection, and hands the slot its stream handle.
    pub async fn open(self, io: Stream) -> Result<StreamSlot, ErrorKind> {
        let mut builder = h2::client::Builder::new();
        builder
            .enable_push(false)
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW);
        let (send, connection) = match builder.handshake::<_, Bytes>(io).await {
            Ok(pair) => pair,
            Err(e) => return Err(self.fail(classify(&e))),
        };
        let watch: Weak<Shared> = Rc::downgrade(&self.0);
        spawn_local(async move {
            let mut connection = connection;
            // Each time the connection is driven it may have read the server's settings: its
            // limit on concurrent streams is kept for the slots that attach next.
            let _ = poll_fn(|cx| {
                let polled = Pin::new(&mut connection).poll(cx);
                if let Some(c) = watch.upgrade() {
                    c.server_max.set(connection.max_concurrent_send_streams());
                }
                polled
            })
            .await;
            if let Some(c) = watch.upgrade() {
                *c.state.borrow_mut() = State::Dead;
            }
        });
        *self.0.state.borrow_mut() = State::Open(send.clone());
        Ok(StreamSlot {
            shared: self.0.clone(),
            send,
        })
    }

    /// Opening failed (connect, TLS or the preface): the slots waiting for it fail as `kind`
    /// too. Returns `kind`.
    pub fn fail(self, kind: ErrorKind) -> ErrorKind {
        *self.0.state.borrow_mut() = State::Failed(kind);
        kind
    }
}

/// However the opening ended (open, failed, or abandoned when the run stopped), the waiting
/// slots are woken; a slot that did not get its handle gives its place back.
impl Drop for Opening {
    fn drop(&mut self) {
        let mut state = self.0.state.borrow_mut();
        if let State::Opening = *state {
            *state = State::Failed(ErrorKind::Closed);
        }
        if !matches!(*state, State::Open(_)) {
            self.0.slots.set(self.0.slots.get() - 1);
        }
        drop(state);
        self.0.opened.notify_waiters();
    }
}

impl Joined {
    /// Waits until the connection is open and returns the slot's handle, or the kind its
    /// opening failed as.
    pub async fn ready(self) -> Result<StreamSlot, ErrorKind> {
        loop {
            let opened = self.0.opened.notified();
            let send = match &*self.0.state.borrow() {
                State::Opening => None,
                State::Open(send) => Some(Ok(send.clone())),
                State::Failed(kind) => Some(Err(*kind)),
                State::Dead => Some(Err(ErrorKind::Closed)),
            };
            match send {
                None => opened.await,
                Some(Ok(send)) => {
                    return Ok(StreamSlot {
                        shared: self.0.clone(),
                        send,
                    })
                }
                Some(Err(kind)) => {
                    self.0.slots.set(self.0.slots.get() - 1);
                    return Err(kind);
                }
            }
        }
    }
}

/// A slot's handle on a shared HTTP/2 connection: it sends one request at a time, on a
/// stream of its own.
pub struct StreamSlot {
    shared: Rc<Shared>,
    send: SendRequest<Bytes>,
}

impl StreamSlot {
    /// The connection failed under this slot (or refused a request before sending it): no new
    /// slot joins it; those still on it finish what they have in flight.
    fn retire(&self) {
        *self.shared.state.borrow_mut() = State::Dead;
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.shared.slots.set(self.shared.slots.get() - 1);
    }
}

/// How a request on a stream ended without an answer.
#[derive(Debug, Clone, Copy)]
pub struct StreamFailure {
    /// The kind it counts as.
    pub kind: ErrorKind,
    /// The connection is still usable (a reset stream or a timeout ends only the stream).
    pub connection_alive: bool,
    /// The server never processed the request: it was refused by a graceful GOAWAY before or
    /// after being written, so sending it again on a new connection is safe.
    pub unprocessed: bool,
    /// The HTTP/2 error code of the RST_STREAM the server ended the stream with, if it did.
    pub reset: Option<u32>,
}

/// A response read off a stream.
pub struct Http2Response {
    /// Status code.
    pub status: u16,
    /// When its headers came.
    pub first_byte: Instant,
    /// Headers, when kept.
    pub headers: Vec<(String, String)>,
    /// Body (at most the kept limit), when kept.
    pub body: Vec<u8>,
    /// The service refused the request: 429, or 503 with `Retry-After`.
    pub refused: bool,
    /// A gRPC call's status (`grpc-status`), from its trailers, or its headers when it had no
    /// body; `None` for a request that is not a gRPC call.
    pub grpc: Option<GrpcCode>,
    /// A streaming gRPC call's messages, sent and answered.
    pub stream: Option<StreamTimes>,
}

impl StreamSlot {
    /// Sends `request` on a new stream and reads its whole response, counting its bytes with
    /// `on_bytes`; with `keep` (a body limit), keeps the headers and up to that many bytes of
    /// body. The
    /// caller bounds the time it may take.
    /// A failure that ends the connection (or refused the request unsent) retires it, so no
    /// slot joins it again while its driver task winds down.
    pub async fn exchange(
        &mut self,
        request: &Http2Request,
        keep: Option<usize>,
        on_bytes: impl FnMut(usize, Instant),
    ) -> Result<Http2Response, StreamFailure> {
        let answered = self
            .round_trip(request, keep, on_bytes)
            .await
            .map_err(|f| self.blame_goaway(f));
        if answered.as_ref().is_err_and(|f| !f.connection_alive) {
            self.retire();
        }
        answered
    }

    /// A stream the connection's end cut off counts as `goaway` when the server had sent a
    /// GOAWAY with an error code first: `h2` hands such streams (those the GOAWAY said were
    /// being processed) only the end of the connection, and keeps the GOAWAY as the
    /// connection's error, which a send handle reports without waiting.
    fn blame_goaway(&mut self, f: StreamFailure) -> StreamFailure {
        if !matches!(f.kind, ErrorKind::Closed | ErrorKind::Reset) {
            return f;
        }
        let mut cx = Context::from_waker(Waker::noop());
        match self.send.poll_ready(&mut cx) {
            Poll::Ready(Err(e))
                if e.is_go_away() && e.is_remote() && e.reason() != Some(h2::Reason::NO_ERROR) =>
            {
                StreamFailure {
                    kind: ErrorKind::GoAway,
                    ..f
                }
            }
            _ => f,
        }
    }

    /// [`StreamSlot::exchange`]'s request and response, on one stream. A streaming call whose
    /// client paces its messages sends them while its answer is read.
    async fn round_trip(
        &mut self,
        request: &Http2Request,
        keep: Option<usize>,
        on_bytes: impl FnMut(usize, Instant),
    ) -> Result<Http2Response, StreamFailure> {
        let unsent = |e: h2::Error| StreamFailure {
            unprocessed: true,
            ..failure(&e)
        };
        poll_fn(|cx| self.send.poll_ready(cx))
            .await
            .map_err(unsent)?;
        let mut head = Request::new(());
        *head.method_mut() = request.method.clone();
        *head.uri_mut() = request.uri.clone();
        *head.headers_mut() = request.headers.clone();
        let paced = request.stream.as_ref().filter(|s| s.paced());
        let no_body = request.body.is_empty() && paced.is_none();
        let (response, mut body_out) = self.send.send_request(head, no_body).map_err(unsent)?;
        // When each of the client's messages went, for a bidirectional call's replies.
        let sent = RefCell::new(Vec::new());
        let answer = read_answer(request, response, keep, on_bytes, &sent);
        let Some(stream) = paced else {
            if !no_body {
                body_out
                    .send_data(request.body.clone(), true)
                    .map_err(|e| failure(&e))?;
                if let Some(s) = &request.stream {
                    sent.borrow_mut().resize(s.messages.len(), Instant::now());
                }
            }
            return answer.await;
        };
        let sending = stream.send(&mut body_out, &sent);
        let mut answer = std::pin::pin!(answer);
        let mut sending = std::pin::pin!(sending);
        let mut sending_done = false;
        loop {
            tokio::select! {
                biased;
                done = &mut answer => return done,
                // A send that fails (the server reset the stream, the connection ended) leaves
                // the answer to say how the call ended.
                _ = &mut sending, if !sending_done => sending_done = true,
            }
        }
    }
}

/// Reads the answer to `request` off its stream: its headers, its body (counting its bytes with
/// `on_bytes`, and a streaming call's messages against the sends in `sent`) and, for a gRPC
/// call, its status.
async fn read_answer(
    request: &Http2Request,
    response: h2::client::ResponseFuture,
    keep: Option<usize>,
    mut on_bytes: impl FnMut(usize, Instant),
    sent: &RefCell<Vec<Instant>>,
) -> Result<Http2Response, StreamFailure> {
    let response = response.await.map_err(|e| failure(&e))?;
    let first_byte = Instant::now();
    let status = response.status().as_u16();
    let refused = status == 429
        || (status == 503 && response.headers().contains_key(http::header::RETRY_AFTER));
    let header_bytes: usize = response
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    on_bytes(header_bytes, first_byte);
    let keep_body = keep.unwrap_or(0);
    let headers = if keep.is_some() {
        response
            .headers()
            .iter()
            .filter(|(k, _)| keep_body > 0 || crate::http1::session_header(k.as_str()))
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (k.as_str().to_string(), v)
            })
            .collect()
    } else {
        Vec::new()
    };
    // A call answered with its status alone ("trailers-only") has it in its headers.
    let mut grpc = request
        .grpc
        .then(|| response.headers().get("grpc-status"))
        .flatten()
        .map(|v| GrpcCode::from_header(v.as_bytes()));
    let mut count = request.stream.as_ref().map(|s| AnswerCount::new(&s.spec));
    let mut recv = response.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.map_err(|e| failure(&e))?;
        let n = chunk.len();
        let now = Instant::now();
        on_bytes(n, now);
        if let Some(count) = count.as_mut() {
            count.feed(&chunk, now, &sent.borrow());
        }
        if body.len() < keep_body {
            let take = n.min(keep_body - body.len());
            body.extend_from_slice(&chunk[..take]);
        }
        // The engine consumed it: the server may send as much again.
        let _ = recv.flow_control().release_capacity(n);
    }
    if request.grpc && grpc.is_none() {
        let trailers = recv.trailers().await.map_err(|e| failure(&e))?;
        grpc = Some(match trailers.as_ref().and_then(|t| t.get("grpc-status")) {
            Some(v) => GrpcCode::from_header(v.as_bytes()),
            None => GrpcCode::from_http_status(status),
        });
    }
    Ok(Http2Response {
        status,
        first_byte,
        headers,
        body,
        refused,
        grpc,
        stream: count.map(|c| c.finish(sent.borrow().len() as u64)),
    })
}

/// The kind of an `h2` failure, and whether the connection survives it.
fn failure(e: &h2::Error) -> StreamFailure {
    let kind = classify(e);
    StreamFailure {
        kind,
        connection_alive: kind == ErrorKind::StreamReset,
        // A graceful GOAWAY (NO_ERROR) refuses only streams the server never processed.
        unprocessed: e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR),
        reset: (kind == ErrorKind::StreamReset)
            .then(|| e.reason().map(u32::from))
            .flatten(),
    }
}

/// Maps an `h2` error to its kind: a stream reset and a GOAWAY the server sent are HTTP/2's
/// own; an I/O error is a reset or close of the connection; the rest, GOAWAYs this client sent
/// on the server's bad frames included, broke the protocol.
fn classify(e: &h2::Error) -> ErrorKind {
    if e.is_reset() && e.is_remote() {
        ErrorKind::StreamReset
    } else if e.is_go_away() && e.is_remote() {
        ErrorKind::GoAway
    } else if let Some(io) = e.get_io() {
        io_kind(io)
    } else {
        ErrorKind::Protocol
    }
}

/// The kind of an I/O failure under an HTTP/2 connection.
fn io_kind(io: &std::io::Error) -> ErrorKind {
    match io.kind() {
        std::io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        // `h2`'s own word for a connection the server closed under open streams; a write that
        // hit a reset connection carries the system's EPIPE instead.
        std::io::ErrorKind::BrokenPipe if io.raw_os_error().is_none() => ErrorKind::Closed,
        std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_h2_saw_close_is_closed_and_a_system_broken_pipe_is_a_reset() {
        let closed = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stream closed");
        assert_eq!(io_kind(&closed), ErrorKind::Closed);
        let epipe = std::io::Error::from_raw_os_error(32);
        assert_eq!(epipe.kind(), std::io::ErrorKind::BrokenPipe);
        assert_eq!(io_kind(&epipe), ErrorKind::Reset);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(io_kind(&reset), ErrorKind::Reset);
    }

    #[test]
    fn an_http1_request_becomes_its_http2_form() {
        let bytes = b"POST /orders?x=1 HTTP/1.1\r\nHost: shop.test:8443\r\nUser-Agent: loadlab\r\n\
            Connection: keep-alive\r\nX-Trace: a b\r\nContent-Length: 5\r\n\r\nhello";
        let r = Http2Request::from_http1(bytes, "https", "127.0.0.1:8443").unwrap();
        assert_eq!(r.method, Method::POST);
        assert_eq!(r.uri.to_string(), "https://shop.test:8443/orders?x=1");
        assert_eq!(r.headers.get("x-trace").unwrap(), "a b");
        assert_eq!(r.headers.get("content-length").unwrap(), "5");
        assert!(r.headers.get("connection").is_none());
        assert!(r.headers.get("host").is_none());
        assert_eq!(&r.body[..], b"hello");
    }

    #[test]
    fn a_request_that_is_not_http1_is_refused_in_words() {
        let e = Http2Request::from_http1(b"\x00\x01garbage", "http", "a:1")
            .err()
            .unwrap();
        assert!(e
            .to_string()
            .starts_with("cannot send this request over HTTP/2"));
    }

    #[test]
    fn slots_share_a_connection_up_to_its_streams() {
        let conns = Http2Connections::new(1, 2);
        let opens = |a: &Attach| matches!(a, Attach::Open(_));
        let first = conns.attach(0);
        assert!(opens(&first), "the first slot opens");
        let second = conns.attach(0);
        assert!(!opens(&second), "the second joins it");
        let third = conns.attach(0);
        assert!(
            opens(&third),
            "the first being full, the third opens another"
        );
        // A failed opening is forgotten and gives its slots back: the next slot joins the
        // second connection, and the one after it (that one being full) opens a third.
        let Attach::Open(first) = first else {
            unreachable!()
        };
        first.fail(ErrorKind::ConnectRefused);
        let fourth = conns.attach(0);
        assert!(!opens(&fourth));
        assert_eq!(conns.endpoints[0].borrow().len(), 1);
        let fifth = conns.attach(0);
        assert!(opens(&fifth));
        assert_eq!(conns.endpoints[0].borrow().len(), 2);
        // An opening abandoned (the run stopped) fails too.
        drop(fifth);
        assert!(opens(&conns.attach(0)));
        drop((second, third, fourth));
    }
}
