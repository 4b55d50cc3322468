//! The connection driver: one task per connection that takes work, writes requests, reads
//! and records responses, and reconnects after failures. One loop serves both models; the
//! work source and the pipeline depth are its parameters.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use loadlab_run::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep, sleep_until, Instant, Sleep};

use crate::context::{Ctx, EndpointState, Pending, Source, ThreadCtx};
use crate::http1::{ResponseParser, MAX_HEAD_BYTES};

/// Initial read buffer per connection; small so thousands of idle connections stay cheap.
const READ_BUFFER: usize = 8 * 1024;
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
        ctx.mark_sent(batch.len());
        if conn.is_none() {
            match connect(endpoint, ctx.connect_timeout).await {
                Ok(stream) => {
                    conn = Some(Conn::new(stream));
                    backoff = Duration::ZERO;
                }
                Err(kind) => {
                    ctx.record_errors(kind, batch.len());
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
        match c.exchange(&ctx, &batch, sent_at).await {
            Ok(true) => {}
            Ok(false) => conn = None,
            Err((kind, answered)) => {
                ctx.record_errors(kind, batch.len() - answered);
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

async fn connect(endpoint: &EndpointState, timeout: Duration) -> Result<TcpStream, ErrorKind> {
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

/// An open connection with its read buffer and response parser.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    parser: ResponseParser,
    wbuf: Vec<u8>,
    /// Fires no later than the oldest outstanding request's timeout; it is only re-armed when
    /// it fires early, so most requests cost no timer operation.
    timer: Pin<Box<Sleep>>,
}

/// Outcome of an exchange: keep the connection (`true`), close it (`false`), or a transport
/// error with the number of requests answered before it.
type Exchange = Result<bool, (ErrorKind, usize)>;

impl Conn {
    fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buf: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
            parser: ResponseParser::default(),
            wbuf: Vec::new(),
            timer: Box::pin(sleep_until(Instant::now())),
        }
    }

    /// Writes the batch's requests back to back, then reads and records their responses.
    async fn exchange(&mut self, ctx: &ThreadCtx, batch: &[Pending], sent_at: Instant) -> Exchange {
        let written = if let [one] = batch {
            self.stream
                .write_all(&ctx.requests[one.template].bytes)
                .await
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
        let mut now = sent_at;
        loop {
            while self.start < self.end {
                let progress = self
                    .parser
                    .advance(&self.buf[self.start..self.end])
                    .map_err(|_| (ErrorKind::Protocol, answered))?;
                self.start += progress.consumed;
                let Some(resp) = progress.done else { break };
                ctx.record_response(&batch[answered], sent_at, now, resp.status);
                answered += 1;
                if answered == batch.len() {
                    return Ok(!resp.close);
                }
                if resp.close {
                    return Err((ErrorKind::Closed, answered));
                }
                self.parser
                    .expect(ctx.requests[batch[answered].template].head);
            }
            self.make_room();
            let read = tokio::select! {
                biased;
                r = self.stream.read(&mut self.buf[self.end..]) => r,
                _ = &mut self.timer => {
                    if Instant::now() >= deadline {
                        return Err((ErrorKind::Timeout, answered));
                    }
                    self.timer.as_mut().reset(deadline);
                    continue;
                }
            };
            match read {
                Ok(0) => {
                    if let Some(resp) = self.parser.finish_at_eof() {
                        ctx.record_response(&batch[answered], sent_at, Instant::now(), resp.status);
                        answered += 1;
                        if answered == batch.len() {
                            return Ok(false);
                        }
                    }
                    return Err((ErrorKind::Closed, answered));
                }
                Ok(n) => {
                    now = Instant::now();
                    self.end += n;
                    ctx.add_bytes(n);
                }
                Err(e) => return Err((classify(&e), answered)),
            }
        }
    }

    /// Makes space at the end of the buffer: drops consumed bytes, grows up to the head limit.
    fn make_room(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_HEAD_BYTES + READ_BUFFER {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
    }
}
