//! The connection driver: one task per connection that takes work, writes requests, reads
//! and records responses, and reconnects after failures. One loop serves both models; the
//! work source and the pipeline depth are its parameters.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use loadlab_run::ErrorKind;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{sleep, sleep_until, Instant, Sleep};

use crate::context::{Ctx, EndpointState, Pending, Source, ThreadCtx};
use crate::http1::ResponseParser;

/// Longest pause between reconnect attempts in the closed model.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Runs one connection of endpoint `ep` until the run stops or the work runs out.
/// `rotation` staggers which of the endpoint's requests each closed-model connection starts
/// with; `preconnect` opens the connection before the first request arrives.
pub async fn drive(ctx: Ctx, ep: usize, rotation: usize, preconnect: bool) {
    let endpoint = &ctx.endpoints[ep];
    let depth = match &ctx.source {
        Source::Closed { depth, .. } => *depth,
        Source::Open => 1,
    };
    let mut batch: Vec<Pending> = Vec::with_capacity(depth);
    let mut rotation = rotation;
    let mut conn: Option<Conn> = None;
    let mut backoff = Duration::ZERO;
    if preconnect {
        conn = connect(endpoint, ctx.connect_timeout)
            .await
            .ok()
            .map(Conn::new);
    }
    loop {
        batch.clear();
        if !next_work(&ctx, endpoint, &mut batch, depth, &mut rotation).await {
            break;
        }
        let sent_at = Instant::now();
        ctx.mark_sent(batch.len(), sent_at);
        if conn.is_none() {
            match connect(endpoint, ctx.connect_timeout).await {
                Ok(stream) => {
                    conn = Some(Conn::new(stream));
                    backoff = Duration::ZERO;
                }
                Err(kind) => {
                    ctx.record_errors(kind, &batch);
                    // A closed-model connection would otherwise retry in a tight loop; the
                    // open model is already paced by its schedule.
                    if matches!(ctx.source, Source::Closed { .. }) {
                        backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
                        sleep(backoff).await;
                    }
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        match c.exchange(&ctx, &batch, sent_at, None).await {
            Ok(true) => {}
            Ok(false) => conn = None,
            Err((kind, answered)) => {
                ctx.record_errors(kind, &batch[answered..]);
                conn = None;
            }
        }
    }
    endpoint
        .connections
        .set(endpoint.connections.get().saturating_sub(1));
}

/// Fills `batch` with the next requests to send; false when there is no more work.
async fn next_work(
    ctx: &ThreadCtx,
    endpoint: &EndpointState,
    batch: &mut Vec<Pending>,
    depth: usize,
    rotation: &mut usize,
) -> bool {
    match &ctx.source {
        Source::Closed { budget, .. } => {
            let n = budget.take(depth);
            let templates = &endpoint.templates;
            for _ in 0..n {
                batch.push(Pending {
                    intended: None,
                    template: templates[*rotation % templates.len()],
                });
                *rotation = rotation.wrapping_add(1);
            }
            n > 0
        }
        Source::Open => loop {
            let next = endpoint.queue.borrow_mut().pop_front();
            match next {
                Some(p) => {
                    if p.intended.is_some_and(|t| t + ctx.timeout < Instant::now()) {
                        ctx.record_dropped(1);
                        continue;
                    }
                    batch.push(p);
                    return true;
                }
                None => {
                    // The scheduler decrements `idle` when it wakes us.
                    endpoint.idle.set(endpoint.idle.get() + 1);
                    endpoint.work.notified().await;
                }
            }
        },
    }
}

/// Opens a connection to `endpoint` with Nagle's algorithm off.
pub async fn connect(endpoint: &EndpointState, timeout: Duration) -> Result<TcpStream, ErrorKind> {
    match tokio::time::timeout(timeout, TcpStream::connect(endpoint.addr)).await {
        Err(_) => Err(ErrorKind::ConnectTimeout),
        Ok(Err(e)) if e.kind() == io::ErrorKind::TimedOut => Err(ErrorKind::ConnectTimeout),
        Ok(Err(_)) => Err(ErrorKind::ConnectRefused),
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
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

/// An open connection with its response parser. It owns no read buffer: reads go into the
/// thread's scratch buffer, and only the bytes of an incomplete response are kept here, so an
/// idle connection costs a few hundred bytes.
pub struct Conn {
    stream: TcpStream,
    /// Received bytes of a response not yet complete (usually empty).
    leftover: Vec<u8>,
    /// The response parser; virtual users ask it to keep headers and bodies.
    pub parser: ResponseParser,
    /// Status of the last response recorded.
    pub last_status: u16,
    wbuf: Vec<u8>,
    /// Fires no later than the oldest outstanding request's timeout; it is only re-armed when
    /// it fires early, so most requests cost no timer operation.
    timer: Pin<Box<Sleep>>,
}

/// Outcome of an exchange: keep the connection (`true`), close it (`false`), or a transport
/// error with the number of requests answered before it.
pub type Exchange = Result<bool, (ErrorKind, usize)>;

/// What one read and parse pass achieved.
enum Pass {
    /// Every request of the batch was answered; keep the connection or not.
    Done(bool),
    /// More bytes are needed.
    More,
}

impl Conn {
    /// Wraps an open stream.
    pub fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            leftover: Vec::new(),
            parser: ResponseParser::default(),
            last_status: 0,
            wbuf: Vec::new(),
            timer: Box::pin(sleep_until(Instant::now())),
        }
    }

    /// Writes the batch's requests back to back, then reads and records their responses.
    /// `bytes`, when given, is what to write for a batch of one (a request rendered for a
    /// virtual user) instead of the template's pre-encoded bytes.
    pub async fn exchange(
        &mut self,
        ctx: &ThreadCtx,
        batch: &[Pending],
        sent_at: Instant,
        bytes: Option<&[u8]>,
    ) -> Exchange {
        let written = if let [one] = batch {
            let bytes = bytes.unwrap_or(&ctx.requests[one.template].bytes);
            self.stream.write_all(bytes).await
        } else {
            self.wbuf.clear();
            for p in batch {
                self.wbuf.extend_from_slice(&ctx.requests[p.template].bytes);
            }
            self.stream.write_all(&self.wbuf).await
        };
        if let Err(e) = written {
            return Err((classify(&e), 0));
        }
        let deadline = sent_at + ctx.timeout;
        let mut answered = 0;
        self.parser.expect(ctx.requests[batch[0].template].head);
        loop {
            let pass =
                poll_fn(|cx| self.poll_pass(cx, ctx, batch, sent_at, deadline, &mut answered))
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
        ctx: &ThreadCtx,
        batch: &[Pending],
        sent_at: Instant,
        deadline: Instant,
        answered: &mut usize,
    ) -> Poll<Result<Pass, (ErrorKind, usize)>> {
        let mut scratch = ctx.scratch.borrow_mut();
        let kept = self.leftover.len();
        scratch[..kept].copy_from_slice(&self.leftover);
        let mut buf = ReadBuf::new(&mut scratch[kept..]);
        match Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                Poll::Ready(self.parse(ctx, &scratch[..kept + n], n, batch, sent_at, answered))
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
        ctx: &ThreadCtx,
        data: &[u8],
        n: usize,
        batch: &[Pending],
        sent_at: Instant,
        answered: &mut usize,
    ) -> Result<Pass, (ErrorKind, usize)> {
        let now = Instant::now();
        if n == 0 {
            if let Some(resp) = self.parser.finish_at_eof() {
                ctx.record_response(&batch[*answered], sent_at, now, resp.status);
                self.last_status = resp.status;
                *answered += 1;
                if *answered == batch.len() {
                    return Ok(Pass::Done(false));
                }
            }
            return Err((ErrorKind::Closed, *answered));
        }
        ctx.add_bytes(n, now);
        let mut pos = 0;
        while pos < data.len() {
            let progress = self
                .parser
                .advance(&data[pos..])
                .map_err(|_| (ErrorKind::Protocol, *answered))?;
            pos += progress.consumed;
            let Some(resp) = progress.done else { break };
            ctx.record_response(&batch[*answered], sent_at, now, resp.status);
            self.last_status = resp.status;
            *answered += 1;
            if *answered == batch.len() {
                self.leftover.clear();
                return Ok(Pass::Done(!resp.close));
            }
            if resp.close {
                return Err((ErrorKind::Closed, *answered));
            }
            self.parser
                .expect(ctx.requests[batch[*answered].template].head);
        }
        self.leftover.clear();
        self.leftover.extend_from_slice(&data[pos..]);
        Ok(Pass::More)
    }
}
