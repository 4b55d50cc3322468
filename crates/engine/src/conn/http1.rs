//! An HTTP/1.1 connection (connections layer, driven by `conn`'s send step): it writes a
//! batch of pipelined requests and reads and records their responses through the thread's
//! shared read buffer.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use loadlab_run::ErrorKind;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{sleep_until, Instant, Sleep};

use super::exchange::{Answer, Broken, Rendered, Times, Wire};
use crate::http1::ResponseParser;
use crate::record::Pending;
use crate::tls::Stream;

/// An open HTTP/1.1 connection with its response parser. It owns no read buffer: reads go into the
/// thread's scratch buffer, and only the bytes of an incomplete response are kept here, so an
/// idle connection costs a few hundred bytes.
pub struct Http1Conn {
    stream: Stream,
    /// Received bytes of a response not yet complete (usually empty).
    leftover: Vec<u8>,
    /// The response parser; virtual users ask it to keep headers and bodies.
    parser: ResponseParser,
    /// Status of the last response recorded.
    last_status: u16,
    /// When the first byte of the response being read arrived (`None` before it did).
    first_byte: Option<Instant>,
    wbuf: Vec<u8>,
    /// Fires no later than the oldest outstanding request's timeout; it is only re-armed when
    /// it fires early, so most requests cost no timer operation.
    timer: Pin<Box<Sleep>>,
}

/// Outcome of an exchange: keep the connection (`true`), close it (`false`), or a transport
/// error with the number of requests answered before it.
type Exchange = Result<bool, (ErrorKind, usize)>;

/// What one read and parse pass achieved.
enum Pass {
    /// Every request of the batch was answered; keep the connection or not.
    Done(bool),
    /// More bytes are needed.
    More,
}

impl Http1Conn {
    /// Wraps an open stream.
    pub(crate) fn new(stream: Stream) -> Self {
        Http1Conn {
            stream,
            leftover: Vec::new(),
            parser: ResponseParser::default(),
            last_status: 0,
            first_byte: None,
            wbuf: Vec::new(),
            timer: Box::pin(sleep_until(Instant::now())),
        }
    }

    /// Exchanges a batch (or a virtual user's rendered request) and answers with the last
    /// response, keeping its headers and body when the rendered request asked; true when the
    /// connection stays open. `bytes`, when given, are written in place of the request's own
    /// (a sampled request's, with its trace headers).
    pub(crate) async fn send(
        &mut self,
        wire: &Wire,
        batch: &[Pending],
        times: Times,
        rendered: Option<Rendered<'_>>,
        bytes: Option<&[u8]>,
    ) -> Result<(Answer, bool), Broken> {
        if let Some(r) = rendered {
            self.parser.keep(true, r.keep);
        }
        let written = bytes.or(rendered.map(|r| r.bytes));
        match self.exchange(wire, batch, times, written).await {
            Ok(alive) => {
                let (headers, body) = match rendered {
                    Some(_) => self.parser.take_kept(),
                    None => Default::default(),
                };
                let answer = Answer {
                    status: self.last_status,
                    headers,
                    body,
                    grpc: None,
                };
                Ok((answer, alive))
            }
            Err((kind, answered)) => Err(Broken::fatal(kind, answered)),
        }
    }

    /// Writes the batch's requests back to back, then reads and records their responses.
    /// `bytes`, when given, is what to write for a batch of one (a request rendered for a
    /// virtual user) instead of the template's pre-encoded bytes. `sent_at` is when the batch
    /// was sent (before any connect), `start` when its writes began.
    async fn exchange(
        &mut self,
        wire: &Wire,
        batch: &[Pending],
        times: Times,
        bytes: Option<&[u8]>,
    ) -> Exchange {
        let written = if let [one] = batch {
            let bytes = bytes.unwrap_or(&wire.requests[one.template].bytes);
            self.stream.write_all(bytes).await
        } else {
            self.wbuf.clear();
            for p in batch {
                self.wbuf
                    .extend_from_slice(&wire.requests[p.template].bytes);
            }
            self.stream.write_all(&self.wbuf).await
        };
        if let Err(e) = written {
            return Err((classify(&e), 0));
        }
        let deadline = times.sent_at + wire.timeout;
        let mut answered = 0;
        self.first_byte = None;
        self.parser.expect(wire.requests[batch[0].template].head);
        loop {
            let pass =
                poll_fn(|cx| self.poll_pass(cx, wire, batch, times, deadline, &mut answered))
                    .await?;
            if let Pass::Done(keep) = pass {
                return Ok(keep);
            }
        }
    }

    /// One poll: reads what the socket has into the thread's scratch buffer (after any
    /// leftover bytes) and records every response it completes, or arms the timeout. The
    /// scratch buffer is borrowed only within this synchronous poll. Reading through
    /// `poll_read` lets tokio mark the socket drained after a short read, which saves the
    /// `EAGAIN` read that `try_read` would cost on nearly every response.
    fn poll_pass(
        &mut self,
        cx: &mut Context<'_>,
        wire: &Wire,
        batch: &[Pending],
        times: Times,
        deadline: Instant,
        answered: &mut usize,
    ) -> Poll<Result<Pass, (ErrorKind, usize)>> {
        let mut scratch = wire.scratch.borrow_mut();
        let kept = self.leftover.len();
        scratch[..kept].copy_from_slice(&self.leftover);
        let mut buf = ReadBuf::new(&mut scratch[kept..]);
        match Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                Poll::Ready(self.parse(wire, &scratch[..kept + n], n, batch, times, answered))
            }
            // A TLS peer that closes without close_notify: an end of stream like TCP's (a plain
            // TCP read never reports it).
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Poll::Ready(self.parse(wire, &scratch[..kept], 0, batch, times, answered))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err((classify(&e), *answered))),
            Poll::Pending => {
                while self.timer.as_mut().poll(cx).is_ready() {
                    if Instant::now() >= deadline {
                        return Poll::Ready(Err((ErrorKind::Timeout, *answered)));
                    }
                    self.timer.as_mut().reset(deadline);
                }
                Poll::Pending
            }
        }
    }

    /// Records the responses completed by `data` (leftover bytes plus `n` new ones; `n == 0`
    /// means the peer closed) and keeps the bytes of an incomplete one.
    fn parse(
        &mut self,
        wire: &Wire,
        data: &[u8],
        n: usize,
        batch: &[Pending],
        times: Times,
        answered: &mut usize,
    ) -> Result<Pass, (ErrorKind, usize)> {
        let now = Instant::now();
        self.first_byte.get_or_insert(now);
        if n == 0 {
            if let Some(resp) = self.parser.finish_at_eof() {
                if self.record_answer(wire, batch, times, answered, now, resp) {
                    return Ok(Pass::Done(false));
                }
            }
            return Err((ErrorKind::Closed, *answered));
        }
        wire.rec.add_bytes(n, now);
        let mut pos = 0;
        while pos < data.len() {
            let progress = self
                .parser
                .advance(&data[pos..])
                .map_err(|_| (ErrorKind::Protocol, *answered))?;
            pos += progress.consumed;
            let Some(resp) = progress.done else { break };
            if self.record_answer(wire, batch, times, answered, now, resp) {
                self.leftover.clear();
                return Ok(Pass::Done(!resp.close));
            }
            // The next pipelined response began in this read, or begins in a later one.
            self.first_byte = (pos < data.len()).then_some(now);
            if resp.close {
                return Err((ErrorKind::Closed, *answered));
            }
            self.parser
                .expect(wire.requests[batch[*answered].template].head);
        }
        self.leftover.clear();
        self.leftover.extend_from_slice(&data[pos..]);
        Ok(Pass::More)
    }

    /// Records response `resp`, complete at `now`, as the answer to the batch's
    /// first unanswered request (its first byte came at `self.first_byte`, or now), and
    /// counts it answered; true when it answered the batch's last request.
    fn record_answer(
        &mut self,
        wire: &Wire,
        batch: &[Pending],
        times: Times,
        answered: &mut usize,
        now: Instant,
        resp: crate::http1::Response,
    ) -> bool {
        let first_byte = self.first_byte.unwrap_or(now);
        wire.rec.record_response(
            &batch[*answered],
            (times.sent_at, times.start, first_byte),
            now,
            (resp.status, resp.refused, None),
        );
        self.last_status = resp.status;
        *answered += 1;
        *answered == batch.len()
    }
}

/// Maps an I/O failure on an established connection to its kind.
fn classify(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        _ => ErrorKind::Reset,
    }
}
