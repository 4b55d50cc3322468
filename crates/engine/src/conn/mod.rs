//! Connections of either protocol (above the recorder, below the pooled connection loop and
//! the virtual users): a [`Conn`] over HTTP/1.1 (`http1` here, on the codec of `crate::http1`)
//! or on an HTTP/2 stream, opened by [`dial`] with the thread's `dialer`, and the one [`send`]
//! step every caller uses: connect if needed, exchange, record transport errors and timings,
//! drop a closed connection.

pub(crate) mod dialer;
pub(crate) mod exchange;
mod http1;

use std::future::Future;
use std::time::Duration;

use loadlab_run::{ErrorKind, GrpcCode, TlsFailure};
use tokio::time::{sleep, Instant};

use crate::http1::MAX_KEPT_BODY;
use crate::http2::{Attach, StreamSlot};
use crate::record::Pending;
use crate::trace::{self, Outcome, SpanIds};
use dialer::{DialError, Dialer, Opened};
use exchange::{Answer, Broken, Failed, Rendered, Times, Wire};
use http1::Http1Conn;

/// First pause after a failure to connect, doubled after each further failure.
const MIN_BACKOFF: Duration = Duration::from_millis(10);

/// Longest pause between attempts to connect: closed-model connections between reconnects,
/// user slots between sessions that fail.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// An open connection: HTTP/1.1, or a stream slot on a shared HTTP/2 connection.
pub enum Conn {
    /// An HTTP/1.1 connection of its own.
    Http1(Http1Conn),
    /// A slot on an HTTP/2 connection shared with other slots.
    Http2(StreamSlot),
}

/// A connection to endpoint `ep` for one request at a time, opened by `dialer`: over HTTP/1.1 a new one; over
/// HTTP/2 a stream slot on a shared connection, opened when none has a free stream. Says
/// how long opening took when it opened one.
pub async fn dial(dialer: &Dialer, ep: usize) -> Result<(Conn, Option<Opened>), DialError> {
    let Some(http2) = dialer.http2() else {
        let (stream, opened) = dialer.open(ep).await?;
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
    let (stream, opened) = match dialer.open(ep).await {
        Ok(pair) => pair,
        Err(e) => {
            opening.fail(e.kind);
            return Err(e);
        }
    };
    if dialer.is_tls(ep) && !stream.is_h2() {
        return Err(DialError {
            kind: opening.fail(ErrorKind::Tls),
            tls: Some(TlsFailure::NoHttp2),
        });
    }
    let slot = match tokio::time::timeout(dialer.timeout(), opening.open(stream)).await {
        Ok(slot) => slot.map_err(plain)?,
        Err(_) => return Err(plain(ErrorKind::ConnectTimeout)),
    };
    Ok((Conn::Http2(slot), Some(opened)))
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
        wire.rec.mark_batch_sent(batch, sent_at);
        // A sampled request (a batch of one) goes with its trace headers in a copy of its
        // bytes; a user's rendered request keeps what it asked to keep.
        let traced = match (&wire.tracer, batch) {
            (Some(tracer), [one]) => tracer.sample().and_then(|ids| {
                let bytes = rendered.map_or(&wire.requests[one.template].bytes[..], |r| r.bytes);
                tracer.with_headers(bytes, &ids).map(|b| (ids, b))
            }),
            _ => None,
        };
        let written = traced.as_ref().map(|(_, b)| &b[..]);
        let mut retried = false;
        loop {
            let reused = conn.is_some();
            // When the writes begin: at once on an open connection, after the connect (and
            // handshake) on a new one.
            let mut start = sent_at;
            if !reused {
                match dial(&wire.dialer, ep).await {
                    Ok((c, opened)) => {
                        *conn = Some(c);
                        if let Some(o) = opened {
                            wire.rec.record_opened(o.connect_us, o.tls_us);
                        }
                        start = Instant::now();
                    }
                    Err(e) => {
                        if let Some((ids, _)) = traced {
                            record_failed_span(wire, &batch[0], ids, sent_at, sent_at, e.kind);
                        }
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
                    let outcome = c.send(wire, batch, times, rendered, written).await;
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
                    Box::pin(send_stream(slot, wire, ep, batch, times, rendered, written)).await
                }
            };
            match outcome {
                Ok((answer, alive)) => {
                    if !alive {
                        *conn = None;
                    }
                    if let Some((ids, _)) = traced {
                        record_answered_span(wire, &batch[0], ids, times);
                    }
                    return Ok(answer);
                }
                Err(b) if b.unprocessed && !retried => {
                    *conn = None;
                    retried = true;
                }
                Err(b) => {
                    if let Some((ids, _)) = traced.filter(|_| b.answered == 0) {
                        record_failed_span(wire, &batch[0], ids, sent_at, start, b.kind);
                    }
                    wire.rec
                        .record_errors_as(b.kind, b.grpc, &batch[b.answered..]);
                    if !b.keep {
                        *conn = None;
                    }
                    return Err(Failed::Exchange(b.kind));
                }
            }
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
    written: Option<&[u8]>,
) -> Result<(Answer, bool), Broken> {
    let [p] = batch else {
        // Plans refuse pipelining with HTTP/2, so every batch is one request.
        return Err(Broken::fatal(ErrorKind::Protocol, 0));
    };
    let forms = wire
        .http2
        .as_ref()
        .expect("an HTTP/2 slot has HTTP/2 forms");
    let Some(request) = forms.request(p, ep, written.or(rendered.map(|r| r.bytes))) else {
        return Err(Broken {
            keep: true,
            ..Broken::fatal(ErrorKind::Protocol, 0)
        });
    };
    // A user's request keeps its headers (cookies, redirects); its body when asked.
    let keep = rendered.map(|r| if r.keep { MAX_KEPT_BODY } else { 0 });
    let deadline = times.sent_at + wire.timeout;
    let exchange = slot.exchange(&request, keep, |n, at| wire.rec.add_bytes(n, at));
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(Ok(resp)) => {
            let now = Instant::now();
            let at = (times.sent_at, times.start, resp.first_byte);
            wire.rec
                .record_response(p, at, now, (resp.status, resp.refused, resp.grpc));
            if let Some(stream) = &resp.stream {
                wire.rec.record_stream(p, times.sent_at, stream);
            }
            let answer = Answer {
                status: resp.status,
                headers: resp.headers,
                body: resp.body,
                grpc: resp.grpc,
            };
            Ok((answer, true))
        }
        // A stream the server reset once the request's time was up ended by that time: a gRPC
        // server resets a call at its grpc-timeout, which it starts counting when the call
        // arrives, so its reset lands after the deadline and before this timer (which rounds up
        // to the millisecond) fires, and the call is DEADLINE_EXCEEDED to a gRPC client.
        Ok(Err(f)) if f.kind == ErrorKind::StreamReset && Instant::now() >= deadline => {
            Err(Broken {
                keep: true,
                ..Broken::fatal(ErrorKind::Timeout, 0)
            })
        }
        Ok(Err(f)) => Err(Broken {
            kind: f.kind,
            answered: 0,
            keep: f.connection_alive,
            unprocessed: f.unprocessed,
            grpc: f.reset.map(GrpcCode::of_stream_reset),
        }),
        // Dropping the stream resets it (CANCEL); the connection goes on.
        Err(_) => Err(Broken {
            keep: true,
            ..Broken::fatal(ErrorKind::Timeout, 0)
        }),
    }
}

/// Records the client span of a sampled request that was answered, from the times its
/// response was recorded with.
fn record_answered_span(wire: &Wire, p: &Pending, ids: SpanIds, times: Times) {
    let Some((first_byte, end, status)) = wire.rec.take_last_answer() else {
        return;
    };
    let outcome = Outcome {
        intended: p.intended.map_or(times.sent_at, |t| t.min(times.sent_at)),
        sent: times.sent_at,
        write: times.start,
        first_byte: Some(first_byte),
        end,
        status: Some(status),
        error: None,
    };
    let name = wire.rec.name_index(p.template);
    wire.rec.record_span(trace::span(ids, name, &outcome), end);
}

/// Records the client span of a sampled request that failed with `kind`.
fn record_failed_span(
    wire: &Wire,
    p: &Pending,
    ids: SpanIds,
    sent_at: Instant,
    write: Instant,
    kind: ErrorKind,
) {
    let end = Instant::now();
    let outcome = Outcome {
        intended: p.intended.map_or(sent_at, |t| t.min(sent_at)),
        sent: sent_at,
        write,
        first_byte: None,
        end,
        status: None,
        error: Some(kind.as_str()),
    };
    let name = wire.rec.name_index(p.template);
    wire.rec.record_span(trace::span(ids, name, &outcome), end);
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
