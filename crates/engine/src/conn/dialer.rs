//! Opening a thread's connections (below the exchanges): the [`Dialer`] connects to an
//! endpoint from the plan's source addresses round-robin, runs the TLS handshake for
//! `https://` endpoints, and holds the thread's shared HTTP/2 connections.

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::{ErrorKind, Plan, Protocol, TlsFailure};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use crate::http2::Http2Connections;
use crate::record::micros;
use crate::tls::{Stream, TlsClient};

/// Opens a thread's connections: where to, from which local address, within which timeout.
pub struct Dialer {
    /// Each endpoint's address, indexed like the plan's endpoints; `None` for one whose host
    /// did not resolve: nothing is dialled (its placeholder address would reach this machine),
    /// every connection fails as `unresolved`.
    addrs: Vec<Option<SocketAddr>>,
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

impl Dialer {
    /// The dialer of thread `index`: threads start at different sources so that the round
    /// robin spreads over all of them whatever the number of threads.
    pub fn new(plan: &Plan, index: usize, tls: Option<Arc<TlsClient>>) -> Self {
        Dialer {
            addrs: plan
                .endpoints
                .iter()
                .map(|e| e.unresolved.is_none().then_some(e.addr))
                .collect(),
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

    /// True when endpoint `ep` is `https://`.
    pub(crate) fn is_tls(&self, ep: usize) -> bool {
        self.tls.as_ref().is_some_and(|t| t.is_tls(ep))
    }

    /// Opens a byte stream to endpoint `ep`, from the next source address if the plan has
    /// any, and runs the TLS handshake when the endpoint is `https://`; says how long each
    /// took.
    pub(crate) async fn open(&self, ep: usize) -> Result<(Stream, Opened), DialError> {
        let Some(addr) = self.addrs[ep] else {
            return Err(DialError {
                kind: ErrorKind::Unresolved,
                tls: None,
            });
        };
        let source = match self.sources.len() {
            0 => None,
            n => {
                let i = self.next_source.get();
                self.next_source.set(i.wrapping_add(1));
                Some(self.sources[i % n])
            }
        };
        let start = Instant::now();
        let tcp = connect(addr, source, self.timeout)
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

    /// The thread's shared HTTP/2 connections, when the plan speaks HTTP/2.
    pub(crate) fn http2(&self) -> Option<&Http2Connections> {
        self.http2.as_ref()
    }

    /// The connect (and handshake) timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
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
