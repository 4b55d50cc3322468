//! The per-thread recorder (recording layer, above scheduling and below connections): the
//! current second's [`Interval`], its rotation to the collector, the in-flight, finished and
//! active-user counters, and whole-run results per request name. It lives on one thread
//! (`Cell`, `RefCell`), so recording takes no lock.

use std::cell::{Cell, RefCell, RefMut};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use loadlab_run::{
    count_outcome, ConnectStats, ErrorKind, GrpcCode, Interval, PacingStats, Plan, Timings,
    TlsFailure, UserRecord,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::grpc_stream::StreamTimes;

/// A request waiting for, or on, a connection.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// When it should have started (the open model's schedule); `None` in the closed model,
    /// where a request's intended start is its actual send. A request sent before this time
    /// (within the pacing slack) counts its latency from its send.
    pub intended: Option<Instant>,
    /// Index into the plan's requests.
    pub template: usize,
}

/// What a thread reports when it stops.
#[derive(Debug, Clone)]
pub struct ThreadEnd {
    /// CPU time the thread used from the origin to the end of its loop (its connects before
    /// it, and closing them after, not counted), the span `elapsed` measures.
    pub cpu: Duration,
    /// Time from the origin to the thread's stop.
    pub elapsed: Duration,
    /// Requests in flight when it stopped.
    pub unfinished: u64,
    /// Whole-run results per request name (empty when the plan has one name).
    pub by_name: Vec<(String, Interval)>,
    /// The sessions of the thread's virtual users, when the plan has a user model.
    pub users: Option<UserRecord>,
    /// Whole-run timings (connect, handshake, waiting, receiving) and TLS failures.
    pub timings: Timings,
    /// How evenly the thread's scheduled requests went out.
    pub pacing: PacingStats,
}

/// Messages from generator threads to the collector.
pub enum Msg {
    /// A thread opened its initial connections and waits for the origin.
    Connected(ConnectStats),
    /// A second's record from thread `.0`.
    Interval(usize, Box<Interval>),
    /// Thread `.0` stopped.
    End(usize, Box<ThreadEnd>),
    /// Thread `.0` could not start its event loop.
    Failed(usize, std::io::Error),
    /// A thread's users ended the run (a locustfile's `runner.quit()` or shape).
    Finish,
}

/// One generator thread's record of what happened, second by second.
pub struct Recorder {
    /// The run's origin, shared by every thread.
    pub origin: Instant,
    /// The current second's record; use [`Recorder::rec_at`] to write to it.
    current: RefCell<Interval>,
    /// When the current second ends.
    next_boundary: Cell<Instant>,
    /// This thread's index, for its messages.
    index: usize,
    /// Where finished seconds go.
    tx: Sender<Msg>,
    /// Seconds the collector has merged and emptied, sent back to be filled again.
    spares: Option<Receiver<Box<Interval>>>,
    /// Requests sent and not ended.
    pub in_flight: Cell<u64>,
    /// Requests ended or dropped so far.
    finished: Cell<u64>,
    /// This thread's share of the run's count, if the run has one.
    expected: Option<u64>,
    /// Signalled when the requests ended or dropped reach `expected`.
    pub all_done: Notify,
    /// Virtual users now: sessions running (open model), or user slots running (user phases).
    pub users_active: Cell<u64>,
    /// Each request's index among the plan's request names.
    name_of: Vec<usize>,
    /// Whether each request template is a gRPC call.
    grpc: Vec<bool>,
    /// Whole-run results per request name, kept only when the plan has several names.
    by_name: Option<RefCell<Vec<Interval>>>,
    /// Whole-run timings: kept for the run, not per second, so the seconds stay cheap to merge.
    timings: RefCell<Timings>,
    /// The gaps between the scheduled requests' sends against their schedule.
    pacing: Cell<PacingStats>,
    /// The last scheduled request's send and intended start.
    last_scheduled: Cell<Option<(Instant, Instant)>>,
    /// Whether the plan traces sampled requests: then each response's first byte, end and
    /// status are kept in `last_answer` for the sampled request's span.
    tracing: bool,
    /// The last response's first byte, end and status (only while tracing).
    last_answer: Cell<Option<(Instant, Instant, u16)>>,
}

impl Recorder {
    /// The recorder of thread `index`, which sends its finished seconds to `tx`; `expected`
    /// is the thread's share of the run's count.
    pub fn new(
        plan: &Plan,
        origin: Instant,
        expected: Option<u64>,
        (index, tx): (usize, Sender<Msg>),
    ) -> Self {
        let (names, name_of) = plan.request_names();
        Recorder {
            origin,
            current: RefCell::new(Interval::new(0)),
            next_boundary: Cell::new(origin + Duration::from_secs(1)),
            index,
            tx,
            spares: None,
            in_flight: Cell::new(0),
            finished: Cell::new(0),
            expected,
            all_done: Notify::new(),
            users_active: Cell::new(0),
            by_name: (names.len() > 1)
                .then(|| RefCell::new(names.iter().map(|_| Interval::new(0)).collect())),
            name_of,
            grpc: plan.requests.iter().map(|r| r.is_grpc()).collect(),
            timings: RefCell::new(Timings::new()),
            pacing: Cell::new(PacingStats::default()),
            last_scheduled: Cell::new(None),
            tracing: plan.trace.is_some(),
            last_answer: Cell::new(None),
        }
    }

    /// Index of template `template`'s request name among the plan's names.
    pub fn name_index(&self, template: usize) -> usize {
        self.name_of[template]
    }

    /// The last response's first byte, end and status, taken (recorded only while tracing).
    pub fn take_last_answer(&self) -> Option<(Instant, Instant, u16)> {
        self.last_answer.take()
    }

    /// Records a sampled request's client span in the second it ended in (`at`).
    pub fn record_span(&self, span: loadlab_run::ClientSpan, at: Instant) {
        self.rec_at(at).spans.push(span);
    }

    /// The record of the second that `now` falls in: seconds that ended before `now` are
    /// sent to the collector first, so every event counts in the second it happened in.
    #[inline]
    pub fn rec_at(&self, now: Instant) -> RefMut<'_, Interval> {
        if now >= self.next_boundary.get() {
            self.rotate(now);
        }
        self.current.borrow_mut()
    }

    /// Sends every second that ended by `now` (empty ones too, so the collector sees each
    /// second of each thread exactly once).
    pub fn rotate(&self, now: Instant) {
        while now >= self.next_boundary.get() {
            let next = self.current.borrow().second + 1;
            self.send_current(next);
            self.next_boundary
                .set(self.next_boundary.get() + Duration::from_secs(1));
        }
    }

    /// Fills the seconds the collector sends back on `spares` rather than new ones.
    pub fn recycling(mut self, spares: Receiver<Box<Interval>>) -> Self {
        self.spares = Some(spares);
        self
    }

    /// Sends the current (possibly partial) second and starts `next_second`, in an emptied
    /// second from the collector when one is back: a new one is three 188 KB histograms to
    /// allocate and zero, which took this thread 1.0-1.1 ms at some seconds' boundaries at
    /// 210,000 req/s (timed around the allocation), a stall of its schedule; a spare takes
    /// 2-4 µs.
    fn send_current(&self, next_second: u64) {
        let fresh = match self.spares.as_ref().and_then(|r| r.try_recv().ok()) {
            Some(mut spare) => {
                spare.second = next_second;
                *spare
            }
            None => Interval::new(next_second),
        };
        let mut iv = self.current.replace(fresh);
        iv.in_flight = self.in_flight.get();
        iv.users_active = self.users_active.get();
        let _ = self.tx.send(Msg::Interval(self.index, Box::new(iv)));
    }

    /// Sends every second up to `end`, then the last, partial one; the partial second is
    /// skipped when nothing happened in it (a run that ends on a second's boundary would
    /// otherwise get an empty trailing row).
    pub fn flush(&self, end: Instant) {
        self.rotate(end);
        let (last, idle) = {
            let rec = self.current.borrow();
            let c = &rec.counts;
            (
                rec.second,
                // Sessions that end after the last request (a function that failed, a think)
                // count too.
                c.sent
                    + c.completed
                    + c.offered
                    + c.dropped
                    + c.users_started
                    + c.users_completed
                    + c.users_failed
                    == 0,
            )
        };
        if !idle || last == 0 {
            self.send_current(last + 1);
        }
    }

    /// Asks the run to end, as its users' code did: a normal end, not an interruption.
    pub fn ask_finish(&self) {
        let _ = self.tx.send(Msg::Finish);
    }

    /// Takes the whole-run results per request name (empty when the plan has one name).
    pub fn take_by_name(&self) -> Vec<Interval> {
        self.by_name
            .as_ref()
            .map(|b| b.replace(Vec::new()))
            .unwrap_or_default()
    }

    /// Counts `n` requests as sent at `now`.
    pub fn mark_sent(&self, n: usize, now: Instant) {
        self.rec_at(now).counts.sent += n as u64;
        self.in_flight.set(self.in_flight.get() + n as u64);
    }

    /// Counts `batch` as sent at `now`, measuring the gap since the last scheduled request's
    /// send against their gap in the schedule.
    pub fn mark_batch_sent(&self, batch: &[Pending], now: Instant) {
        self.mark_sent(batch.len(), now);
        for intended in batch.iter().filter_map(|p| p.intended) {
            if let Some((sent, scheduled)) = self.last_scheduled.get() {
                let mut pacing = self.pacing.get();
                pacing.add_gap(
                    now.saturating_duration_since(sent).as_secs_f64(),
                    signed_secs(intended, scheduled),
                );
                self.pacing.set(pacing);
            }
            self.last_scheduled.set(Some((now, intended)));
        }
    }

    /// Takes the pacing measured so far.
    pub fn take_pacing(&self) -> PacingStats {
        self.pacing.take()
    }

    fn finish(&self, n: u64) {
        let f = self.finished.get() + n;
        self.finished.set(f);
        if self.expected == Some(f) {
            self.all_done.notify_one();
        }
    }

    /// Takes the whole-run timings.
    pub fn take_timings(&self) -> Timings {
        self.timings.replace(Timings::new())
    }

    /// Records a connection opened for a request: its TCP connect and TLS handshake (0 for
    /// plain HTTP), µs.
    pub fn record_opened(&self, connect_us: u64, tls_us: u64) {
        let mut t = self.timings.borrow_mut();
        t.connect.saturating_record(connect_us);
        if tls_us > 0 {
            t.tls.saturating_record(tls_us);
        }
    }

    /// Records an open-model request taken by a connection `queued_us` after its release.
    pub fn record_queued(&self, queued_us: u64) {
        self.timings
            .borrow_mut()
            .queued
            .saturating_record(queued_us);
    }

    /// Counts a failed TLS handshake by its cause.
    pub fn record_tls_failure(&self, cause: TlsFailure) {
        self.timings.borrow_mut().tls_failures[cause.index()] += 1;
    }

    /// Records a response that ended at `now`; `(sent_at, start, first_byte)` are when its
    /// batch was sent, when the writes began (after any connect) and when its first byte came;
    /// `(status, refused, grpc)` its status, whether it refused the request, and a gRPC call's
    /// status.
    #[inline]
    pub fn record_response(
        &self,
        p: &Pending,
        (sent_at, start, first_byte): (Instant, Instant, Instant),
        now: Instant,
        (status, refused, grpc): (u16, bool, Option<GrpcCode>),
    ) {
        // A request sent early (within the pacing slack) started at its send.
        let intended = p.intended.map_or(sent_at, |t| t.min(sent_at));
        let mut rec = self.rec_at(now);
        record_outcome(&mut rec.counts, status, grpc);
        rec.counts.refused += u64::from(refused);
        // Each second's outcomes per name, for one name too: a gRPC call's class is not its
        // HTTP status's, so the dashboard cannot rebuild it from the counts.
        let class = usize::from(outcome_status(status, grpc) / 100).saturating_sub(1);
        count_outcome(&mut rec.by_name, self.name_of[p.template], class);
        let latency = micros(now.saturating_duration_since(intended));
        let service = micros(now.saturating_duration_since(sent_at));
        rec.latency.saturating_record(latency);
        rec.service.saturating_record(service);
        drop(rec);
        {
            let mut t = self.timings.borrow_mut();
            t.waiting
                .saturating_record(micros(first_byte.saturating_duration_since(start)));
            t.receiving
                .saturating_record(micros(now.saturating_duration_since(first_byte)));
            if refused {
                t.refused.saturating_record(latency);
            }
        }
        if let Some(by_name) = &self.by_name {
            let mut by_name = by_name.borrow_mut();
            let r = &mut by_name[self.name_of[p.template]];
            record_outcome(&mut r.counts, status, grpc);
            r.counts.refused += u64::from(refused);
            r.latency.saturating_record(latency);
            r.service.saturating_record(service);
        }
        if self.tracing {
            self.last_answer.set(Some((first_byte, now, status)));
        }
        self.in_flight.set(self.in_flight.get() - 1);
        self.finish(1);
    }

    /// Records what a streaming gRPC call's messages did: its first answer's time from the
    /// call's intended start, a bidirectional call's replies, and the messages each way.
    pub fn record_stream(&self, p: &Pending, sent_at: Instant, stream: &StreamTimes) {
        let intended = p.intended.map_or(sent_at, |t| t.min(sent_at));
        let mut t = self.timings.borrow_mut();
        let s = &mut t.streams;
        s.calls += 1;
        s.messages_sent += stream.sent;
        s.messages_received += stream.received;
        if let Some(first) = stream.first_message {
            s.first_message
                .saturating_record(micros(first.saturating_duration_since(intended)));
        }
        for reply in &stream.replies {
            s.replies.saturating_record(micros(*reply));
        }
    }

    /// Counts response bytes read at `now`.
    #[inline]
    pub fn add_bytes(&self, n: usize, now: Instant) {
        self.rec_at(now).counts.bytes += n as u64;
    }

    /// Records sent requests that ended in a transport error.
    pub fn record_errors(&self, kind: ErrorKind, failed: &[Pending]) {
        self.record_errors_as(kind, None, failed);
    }

    /// Records sent requests that ended in transport error `kind`; a gRPC call among them counts
    /// under `grpc` when given (a stream reset's reason says it), else under the status a gRPC
    /// client gives `kind`.
    pub fn record_errors_as(&self, kind: ErrorKind, grpc: Option<GrpcCode>, failed: &[Pending]) {
        let n = failed.len();
        if n == 0 {
            return;
        }
        let mut rec = self.rec_at(Instant::now());
        let code = grpc.unwrap_or_else(|| GrpcCode::of_transport_error(kind));
        let call = |p: &Pending| self.grpc[p.template].then_some(code);
        for p in failed {
            record_failure(&mut rec.counts, kind, call(p));
            count_outcome(&mut rec.by_name, self.name_of[p.template], 5);
        }
        drop(rec);
        if let Some(by_name) = &self.by_name {
            let mut by_name = by_name.borrow_mut();
            for p in failed {
                let counts = &mut by_name[self.name_of[p.template]].counts;
                record_failure(counts, kind, call(p));
            }
        }
        self.in_flight.set(self.in_flight.get() - n as u64);
        self.finish(n as u64);
    }

    /// Records `n` requests dropped before they were sent.
    pub fn record_dropped(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.rec_at(Instant::now()).counts.dropped += n;
        self.finish(n);
    }
}

/// Seconds from `b` to `a`, negative when `a` is earlier.
fn signed_secs(a: Instant, b: Instant) -> f64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_secs_f64(),
        None => -b.duration_since(a).as_secs_f64(),
    }
}

/// A duration in whole microseconds, at least 1 (the histograms' lowest value).
#[inline]
pub fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

/// Counts one answer: a gRPC call by its status as well as its HTTP status, any other response
/// by its status.
#[inline]
fn record_outcome(counts: &mut loadlab_run::Counts, status: u16, grpc: Option<GrpcCode>) {
    match grpc {
        Some(code) => counts.record_grpc(status, code),
        None => counts.record_status(status),
    }
}

/// Counts one request that ended in transport error `kind`; a gRPC call under its status too.
#[inline]
fn record_failure(counts: &mut loadlab_run::Counts, kind: ErrorKind, grpc: Option<GrpcCode>) {
    match grpc {
        Some(code) => counts.record_grpc_error(kind, code),
        None => counts.record_error(kind),
    }
}

/// The status an answer is classed by among a name's outcomes: a gRPC call answered with HTTP
/// 200 by the HTTP status its gRPC status means (an `UNAVAILABLE` is a 5xx, not a 2xx).
#[inline]
fn outcome_status(status: u16, grpc: Option<GrpcCode>) -> u16 {
    match grpc {
        Some(code) if status == 200 => code.http_equivalent(),
        _ => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grpc_call_is_classed_by_the_http_status_its_grpc_status_means() {
        let unavailable = GrpcCode::from_name("UNAVAILABLE");
        let invalid = GrpcCode::from_name("INVALID_ARGUMENT");
        assert_eq!(outcome_status(200, unavailable), 503);
        assert_eq!(outcome_status(200, invalid), 400);
        assert_eq!(outcome_status(200, Some(GrpcCode::OK)), 200);
        assert_eq!(
            outcome_status(404, unavailable),
            404,
            "an HTTP error stays itself"
        );
        assert_eq!(outcome_status(500, None), 500);
    }
}
