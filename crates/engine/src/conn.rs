//! Connections of either protocol (above the recorder, below the pooled connection loop and
//! the virtual users): what a thread's connections share ([`Wire`]), opening a connection
//! ([`Dialer`], bound to the plan's source addresses round-robin, with a TLS handshake for
//! `https://` endpoints), and the one [`send`] step every caller uses: connect if needed,
//! exchange over HTTP/1.1 (`http1`) or on an HTTP/2 stream, record transport errors and
//! timings, drop a closed connection.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::{ErrorKind, Plan, Protocol, TlsFailure};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{sleep, Instant};

use crate::http1::{encode_request, Http1Conn, MAX_HEAD_BYTES, MAX_KEPT_BODY};
use crate::http2::{Attach, Http2Connections, Http2Request, StreamSlot};
use crate::record::{micros, Pending, Recorder};
use crate::tls::{Stream, TlsClient};

/// Size of a thread's read buffer: room for a connection's leftover partial head plus a
/// large read.
const SCRATCH_BYTES: usize = MAX_HEAD_BYTES + 64 * 1024;

/// First pause after a failure to connect, doubled after each further failure.
const MIN_BACKOFF: Duration = Duration::from_millis(10);

/// Longest pause between attempts to connect: closed-model connections between reconnects,
/// user slots between sessions that fail.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A pre-encoded request.
pub struct Encoded {
    /// The bytes written for each send.
    pub bytes: Vec<u8>,
    /// HEAD requests get responses without bodies.
    pub head: bool,
    /// Index of the endpoint it goes to.
    pub endpoint: usize,
}

/// Opens a thread's connections: where to, from which local address, within which timeout.
pub struct Dialer {
    /// Each endpoint's address, indexed like the plan's endpoints.
    addrs: Vec<SocketAddr>,
    /// Local addresses to bind to, round-robin; empty for the system's choice.
    sources: Vec<IpAddr>,
    /// The source the next connection binds to.
    next_source: Cell<usize>,
    /// Connect timeout (and, separately, handshake timeout).
    timeout: Duration,
    /// The run's TLS client, when it has `https://` endpoints.
    tls: Option<Arc<TlsClient>>,
    /// The thread's shared HTTP/2 connections, when the plan speaks HTTP/2.
    http2: Option<Http2Connections>,
}

/// Why a connection could not be opened: its kind, and for a failed handshake its cause.
#[derive(Debug, Clone, Copy)]
pub struct DialError {
    /// The kind it is counted as.
    pub kind: ErrorKind,
    /// Why the TLS handshake failed, when it did.
    pub tls: Option<TlsFailure>,
}

/// How long opening a connection took, µs: the TCP connect and the TLS handshake (0 for plain
/// HTTP).
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    /// TCP connect.
    pub connect_us: u64,
    /// TLS handshake.
    pub tls_us: u64,
}

/// An open connection: HTTP/1.1, or a stream slot on a shared HTTP/2 connection.
pub enum Conn {
    /// An HTTP/1.1 connection of its own.
    Http1(Http1Conn),
    /// A slot on an HTTP/2 connection shared with other slots.
    Http2(StreamSlot),
}

impl Dialer {
    /// The dialer of thread `index`: threads start at different sources so that the round
    /// robin spreads over all of them whatever the number of threads.
    pub fn new(plan: &Plan, index: usize, tls: Option<Arc<TlsClient>>) -> Self {
        Dialer {
            addrs: plan.endpoints.iter().map(|e| e.addr).collect(),
            sources: plan.source_addrs.clone(),
            next_source: Cell::new(index),
            timeout: plan.connect_timeout,
            tls,
            http2: match plan.protocol {
                Protocol::Http1 => None,
                Protocol::Http2 { streams } => {
                    Some(Http2Connections::new(plan.endpoints.len(), streams))
                }
            },
        }
    }

    /// Requests a connection carries at once: HTTP/2's streams, or one.
    pub fn streams(&self) -> usize {
        self.http2.as_ref().map_or(1, Http2Connections::streams)
    }

    /// The number of endpoints.
    pub fn endpoints(&self) -> usize {
        self.addrs.len()
    }

    /// A connection to endpoint `ep` for one request at a time: over HTTP/1.1 a new one; over
    /// HTTP/2 a stream slot on a shared connection, opened when none has a free stream. Says
    /// how long opening took when it opened one.
    pub async fn dial(&self, ep: usize) -> Result<(Conn, Option<Opened>), DialError> {
        let Some(http2) = &self.http2 else {
            let (stream, opened) = self.open(ep).await?;
            return Ok((Conn::Http1(Http1Conn::new(stream)), Some(opened)));
        };
        let plain = |kind| DialError { kind, tls: None };
        let opening = match http2.attach(ep) {
            Attach::Join(joined) => {
                let slot = joined.ready().await.map_err(plain)?;
                return Ok((Conn::Http2(slot), None));
            }
            Attach::Open(opening) => opening,
        };
        let (stream, opened) = match self.open(ep).await {
            Ok(pair) => pair,
            Err(e) => {
                opening.fail(e.kind);
                return Err(e);
            }
        };
        if self.is_tls(ep) && !stream.is_h2() {
            return Err(DialError {
                kind: opening.fail(ErrorKind::Tls),
                tls: Some(TlsFailure::NoHttp2),
            });
        }
        let slot = match tokio::time::timeout(self.timeout, opening.open(stream)).await {
            Ok(slot) => slot.map_err(plain)?,
            Err(_) => return Err(plain(ErrorKind::ConnectTimeout)),
        };
        Ok((Conn::Http2(slot), Some(opened)))
    }

    /// True when endpoint `ep` is `https://`.
    fn is_tls(&self, ep: usize) -> bool {
        self.tls.as_ref().is_some_and(|t| t.is_tls(ep))
    }

    /// Opens a byte stream to endpoint `ep`, from the next source address if the plan has
    /// any, and runs the TLS handshake when the endpoint is `https://`; says how long each
    /// took.
    async fn open(&self, ep: usize) -> Result<(Stream, Opened), DialError> {
        let source = match self.sources.len() {
            0 => None,
            n => {
                let i = self.next_source.get();
                self.next_source.set(i.wrapping_add(1));
                Some(self.sources[i % n])
            }
        };
        let start = Instant::now();
        let tcp = connect(self.addrs[ep], source, self.timeout)
            .await
            .map_err(|kind| DialError { kind, tls: None })?;
        let connected = Instant::now();
        let connect_us = micros(connected - start);
        let Some(tls) = self.tls.as_ref().filter(|t| t.is_tls(ep)) else {
            let opened = Opened {
                connect_us,
                tls_us: 0,
            };
            return Ok((Stream::Plain(tcp), opened));
        };
        // Boxed: the handshake's state is large, and inline it would grow every pooled
        // connection's task, plain HTTP ones too, by a kilobyte.
        let stream = Box::pin(tls.handshake(ep, tcp, self.timeout))
            .await
            .map_err(|cause| DialError {
                kind: ErrorKind::Tls,
                tls: Some(cause),
            })?;
        let opened = Opened {
            connect_us,
            tls_us: micros(connected.elapsed()),
        };
        Ok((stream, opened))
    }
}

/// What one thread's connections share: its recorder, the plan's requests encoded once, how
/// to connect, the request timeout, and one read buffer.
pub struct Wire {
    /// The thread's recorder.
    pub rec: Recorder,
    /// Encoded requests, indexed like the plan's.
    pub requests: Vec<Encoded>,
    /// Opens the connections.
    pub dialer: Rc<Dialer>,
    /// Request timeout.
    pub timeout: Duration,
    /// Over HTTP/2, each request's HTTP/2 form (indexed like `requests`; `None` for one that
    /// cannot be sent over HTTP/2, which then fails as a protocol error), and each endpoint's
    /// scheme and authority for the requests virtual users render.
    http2: Option<Http2Forms>,
    /// The thread's read buffer, shared by its connections: a connection borrows it only
    /// between a readiness event and the end of parsing, never across an await.
    pub(crate) scratch: RefCell<Vec<u8>>,
}

impl Wire {
    /// The connection state of a thread that records with `rec` and connects with `dialer`.
    pub fn new(plan: &Plan, rec: Recorder, dialer: Rc<Dialer>) -> Self {
        let requests = plan
            .requests
            .iter()
            .map(|r| Encoded {
                bytes: encode_request(r, &plan.endpoints[r.endpoint].authority),
                head: r.method == "HEAD",
                endpoint: r.endpoint,
            })
            .collect();
        let http2 = matches!(plan.protocol, Protocol::Http2 { .. }).then(|| Http2Forms::new(plan));
        Wire {
            rec,
            requests,
            dialer,
            timeout: plan.timeout,
            http2,
            scratch: RefCell::new(vec![0; SCRATCH_BYTES]),
        }
    }

    /// The number of endpoints.
    pub fn endpoints(&self) -> usize {
        self.dialer.endpoints()
    }
}

/// The HTTP/2 forms of a plan's requests.
struct Http2Forms {
    /// Each template's form, indexed like the plan's requests.
    templates: Vec<Option<Http2Request>>,
    /// Each endpoint's scheme and authority.
    origins: Vec<(&'static str, String)>,
}

impl Http2Forms {
    /// The HTTP/2 forms of `plan`'s requests, converted once from their HTTP/1.1 encoding.
    fn new(plan: &Plan) -> Self {
        let origins: Vec<(&'static str, String)> = plan
            .endpoints
            .iter()
            .map(|e| {
                let scheme = if e.tls.is_some() { "https" } else { "http" };
                (scheme, e.authority.clone())
            })
            .collect();
        let templates = plan
            .requests
            .iter()
            .map(|r| {
                let (scheme, authority) = &origins[r.endpoint];
                let bytes = encode_request(r, authority);
                Http2Request::from_http1(&bytes, scheme, authority).ok()
            })
            .collect();
        Http2Forms { templates, origins }
    }

    /// The HTTP/2 form of `p`'s request, or of `rendered` bytes in its place.
    fn request(
        &self,
        p: &Pending,
        ep: usize,
        rendered: Option<&[u8]>,
    ) -> Option<Cow<'_, Http2Request>> {
        match rendered {
            None => self.templates[p.template].as_ref().map(Cow::Borrowed),
            Some(bytes) => {
                let (scheme, authority) = &self.origins[ep];
                Http2Request::from_http1(bytes, scheme, authority)
                    .ok()
                    .map(Cow::Owned)
            }
        }
    }
}

/// A request rendered for one send by a virtual user, instead of a template's pre-encoded
/// bytes.
#[derive(Clone, Copy)]
pub struct Rendered<'a> {
    /// What to write.
    pub bytes: &'a [u8],
    /// Keep the response's headers and body (for expectations, captures, static resources).
    pub keep: bool,
}

/// The last response of a batch: its status and, for a [`Rendered`] request that asked to
/// keep them, its headers (names as sent) and body.
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, when kept.
    pub headers: Vec<(String, String)>,
    /// Body (at most [`crate::http1::MAX_KEPT_BODY`] bytes), when kept.
    pub body: Vec<u8>,
}

/// Why a batch did not get all its answers; the requests left unanswered are already recorded.
#[derive(Debug, Clone, Copy)]
pub enum Failed {
    /// No connection could be opened.
    Connect(ErrorKind),
    /// The connection failed during the exchange.
    Exchange(ErrorKind),
}

impl Failed {
    /// The kind of the failure.
    pub fn kind(self) -> ErrorKind {
        match self {
            Failed::Connect(kind) | Failed::Exchange(kind) => kind,
        }
    }
}

/// Sends `batch` to endpoint `ep` on `conn`, opening it first when there is none: counts the
/// batch as sent, exchanges it, records the requests a failure left unanswered, and drops the
/// connection when it failed or the server closed it. A request the server surely did not
/// process goes once more on a new connection: a [`Rendered`] request (a batch of one) on a
/// kept-alive HTTP/1.1 connection found closed before any byte of its answer, as a browser
/// does, and any request an HTTP/2 connection refused before sending it or by a graceful
/// GOAWAY.
///
/// Written as a function returning an `async move` block rather than an `async fn`: an
/// `async fn` keeps a second copy of its arguments in its state, which would make every pooled
/// connection's task outgrow the size class it had before this step was shared.
#[allow(clippy::manual_async_fn)]
pub fn send<'a>(
    wire: &'a Wire,
    conn: &'a mut Option<Conn>,
    ep: usize,
    batch: &'a [Pending],
    rendered: Option<Rendered<'a>>,
) -> impl Future<Output = Result<Answer, Failed>> + 'a {
    async move {
        let sent_at = Instant::now();
        wire.rec.mark_sent(batch.len(), sent_at);
        let mut retried = false;
        loop {
            let reused = conn.is_some();
            // When the writes begin: at once on an open connection, after the connect (and
            // handshake) on a new one.
            let mut start = sent_at;
            if !reused {
                match wire.dialer.dial(ep).await {
                    Ok((c, opened)) => {
                        *conn = Some(c);
                        if let Some(o) = opened {
                            wire.rec.record_opened(o.connect_us, o.tls_us);
                        }
                        start = Instant::now();
                    }
                    Err(e) => {
                        wire.rec.record_errors(e.kind, batch);
                        if let Some(cause) = e.tls {
                            wire.rec.record_tls_failure(cause);
                        }
                        return Err(Failed::Connect(e.kind));
                    }
                }
            }
            let times = Times { sent_at, start };
            let outcome = match conn.as_mut().expect("connected above") {
                Conn::Http1(c) => {
                    let outcome = c.send(wire, batch, times, rendered).await;
                    // A browser's retry: the server closed the kept-alive connection while
                    // the user thought.
                    outcome.map_err(|b| Broken {
                        unprocessed: rendered.is_some()
                            && reused
                            && b.answered == 0
                            && matches!(b.kind, ErrorKind::Closed | ErrorKind::Reset),
                        ..b
                    })
                }
                // Boxed: an HTTP/2 exchange's state would otherwise grow every pooled
                // connection's task, HTTP/1.1 ones too.
                Conn::Http2(slot) => {
                    Box::pin(send_stream(slot, wire, ep, batch, times, rendered)).await
                }
            };
            match outcome {
                Ok((answer, alive)) => {
                    if !alive {
                        *conn = None;
                    }
                    return Ok(answer);
                }
                Err(b) if b.unprocessed && !retried => {
                    *conn = None;
                    retried = true;
                }
                Err(b) => {
                    wire.rec.record_errors(b.kind, &batch[b.answered..]);
                    if !b.keep {
                        *conn = None;
                    }
                    return Err(Failed::Exchange(b.kind));
                }
            }
        }
    }
}

/// When a batch was sent (its latency's start when it has no intended one) and when its
/// writes began (after any connect: where its waiting starts).
#[derive(Clone, Copy)]
pub(crate) struct Times {
    /// When the batch was sent, before any connect.
    pub(crate) sent_at: Instant,
    /// When its writes began.
    pub(crate) start: Instant,
}

/// How an exchange ended without all its answers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Broken {
    /// The kind the unanswered requests count as.
    kind: ErrorKind,
    /// Requests answered before it.
    answered: usize,
    /// The connection is still usable (an HTTP/2 stream's failure).
    keep: bool,
    /// The server surely did not process the request: it may go again.
    unprocessed: bool,
}

impl Broken {
    /// A failure that ends the connection, after `answered` answers.
    pub(crate) fn fatal(kind: ErrorKind, answered: usize) -> Self {
        Broken {
            kind,
            answered,
            keep: false,
            unprocessed: false,
        }
    }
}

/// Sends a batch of one on an HTTP/2 stream slot and records its response, within the
/// request timeout.
async fn send_stream(
    slot: &mut StreamSlot,
    wire: &Wire,
    ep: usize,
    batch: &[Pending],
    times: Times,
    rendered: Option<Rendered<'_>>,
) -> Result<(Answer, bool), Broken> {
    let [p] = batch else {
        // Plans refuse pipelining with HTTP/2, so every batch is one request.
        return Err(Broken::fatal(ErrorKind::Protocol, 0));
    };
    let forms = wire
        .http2
        .as_ref()
        .expect("an HTTP/2 slot has HTTP/2 forms");
    let Some(request) = forms.request(p, ep, rendered.map(|r| r.bytes)) else {
        return Err(Broken {
            keep: true,
            ..Broken::fatal(ErrorKind::Protocol, 0)
        });
    };
    let keep_body = match rendered {
        Some(r) if r.keep => MAX_KEPT_BODY,
        _ => 0,
    };
    let deadline = times.sent_at + wire.timeout;
    let exchange = slot.exchange(&request, keep_body, |n, at| wire.rec.add_bytes(n, at));
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(Ok(resp)) => {
            let now = Instant::now();
            let at = (times.sent_at, times.start, resp.first_byte);
            wire.rec.record_response(p, at, now, resp.status);
            let answer = Answer {
                status: resp.status,
                headers: resp.headers,
                body: resp.body,
            };
            Ok((answer, true))
        }
        Ok(Err(f)) => Err(Broken {
            kind: f.kind,
            answered: 0,
            keep: f.connection_alive,
            unprocessed: f.unprocessed,
        }),
        // Dropping the stream resets it (CANCEL); the connection goes on.
        Err(_) => Err(Broken {
            keep: true,
            ..Broken::fatal(ErrorKind::Timeout, 0)
        }),
    }
}

/// The pause before trying again after failures to connect: 10 ms, doubling up to one second.
#[derive(Debug, Default)]
pub struct Backoff(Duration);

impl Backoff {
    /// Waits the next, longer pause.
    pub async fn pause(&mut self) {
        self.0 = (self.0 * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
        sleep(self.0).await;
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.0 = Duration::ZERO;
    }
}

/// Opens a connection to `addr`, bound to `source` when given, with Nagle's algorithm off.
async fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    timeout: Duration,
) -> Result<TcpStream, ErrorKind> {
    let attempt = async {
        let Some(source) = source else {
            return TcpStream::connect(addr).await;
        };
        let socket = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        bind_address_no_port(&socket);
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(addr).await
    };
    match tokio::time::timeout(timeout, attempt).await {
        Err(_) => Err(ErrorKind::ConnectTimeout),
        Ok(Err(e)) if e.kind() == io::ErrorKind::TimedOut => Err(ErrorKind::ConnectTimeout),
        Ok(Err(_)) => Err(ErrorKind::ConnectRefused),
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
    }
}

/// Asks the kernel to pick the local port of a bound socket at connect time rather than at
/// bind time (`IP_BIND_ADDRESS_NO_PORT`), so a source address's ports are shared across
/// destinations as they are without a bind. Failing to set it only costs that sharing.
fn bind_address_no_port(socket: &TcpSocket) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on a socket we own, with a correctly sized int option.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}
