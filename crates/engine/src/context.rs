//! One generator thread's shared state: its endpoints, work queues and the current second's
//! record. Everything here lives on one thread (`Rc`, `Cell`), so recording takes no lock.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use loadlab_run::{ErrorKind, Interval, Plan};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::http1::{encode_request, MAX_HEAD_BYTES};
use crate::msg::Msg;
use crate::schedule::closed::Budget;
use crate::user_state::UsersState;

/// Size of a thread's read buffer: room for a connection's leftover partial head plus a
/// large read.
const SCRATCH_BYTES: usize = MAX_HEAD_BYTES + 64 * 1024;

/// A request waiting for, or on, a connection.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// When it should have started (the open model's schedule); `None` in the closed model,
    /// where a request's intended start is its actual send.
    pub intended: Option<Instant>,
    /// Index into the plan's requests.
    pub template: usize,
}

/// A pre-encoded request.
pub struct Encoded {
    /// The bytes written for each send.
    pub bytes: Vec<u8>,
    /// HEAD requests get responses without bodies.
    pub head: bool,
    /// Index of the endpoint it goes to.
    pub endpoint: usize,
}

/// Per-endpoint state of one thread.
pub struct EndpointState {
    /// Where to connect.
    pub addr: std::net::SocketAddr,
    /// Indices of the plan's requests that go to this endpoint.
    pub templates: Vec<usize>,
    /// Open model: requests released by the scheduler, waiting for a connection.
    pub queue: RefCell<VecDeque<Pending>>,
    /// Wakes idle connections when work arrives.
    pub work: Notify,
    /// Connections waiting for work and not yet woken.
    pub idle: Cell<usize>,
    /// Connections open or opening.
    pub connections: Cell<usize>,
    /// Most connections this thread may hold to this endpoint.
    pub max_connections: usize,
}

/// What a connection task gets its work from.
pub enum Source {
    /// Closed model: as many requests as the budget allows, `depth` at a time.
    Closed {
        /// Pipeline depth.
        depth: usize,
        /// The thread's share of the run's request count.
        budget: Budget,
    },
    /// Open model: requests released by the scheduler into the endpoint's queue.
    Open,
}

/// One generator thread's state.
pub struct ThreadCtx {
    /// The run's origin, shared by every thread.
    pub origin: Instant,
    /// Encoded requests, indexed like the plan's.
    pub requests: Vec<Encoded>,
    /// Per-endpoint state.
    pub endpoints: Vec<EndpointState>,
    /// Where work comes from.
    pub source: Source,
    /// Request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// The current second's record; use [`ThreadCtx::rec_at`] to write to it.
    pub rec: RefCell<Interval>,
    /// When the current second ends.
    next_boundary: Cell<Instant>,
    /// This thread's index, for its messages.
    index: usize,
    /// Where finished seconds go.
    tx: Sender<Msg>,
    /// Requests sent and not ended.
    pub in_flight: Cell<u64>,
    /// Requests ended or dropped so far.
    pub finished: Cell<u64>,
    /// This thread's share of the run's count, if the run has one.
    pub expected: Option<u64>,
    /// Signalled when `finished` reaches `expected`.
    pub all_done: Notify,
    /// Each request's index among the plan's request names.
    name_of: Vec<usize>,
    /// Whole-run results per request name, kept only when the plan has several names.
    pub by_name: Option<RefCell<Vec<Interval>>>,
    /// The thread's read buffer, shared by its connections: a connection borrows it only
    /// between a readiness event and the end of parsing, never across an await.
    pub scratch: RefCell<Vec<u8>>,
    /// The thread's virtual users, when the plan has a user model.
    pub users: Option<UsersState>,
}

impl ThreadCtx {
    /// Builds the state of thread `index`, which sends its finished seconds to `tx`.
    pub fn new(
        plan: &Plan,
        origin: Instant,
        source: Source,
        expected: Option<u64>,
        max_connections_per_endpoint: usize,
        users: Option<UsersState>,
        (index, tx): (usize, Sender<Msg>),
    ) -> Self {
        let (names, name_of) = plan.request_names();
        let requests = plan
            .requests
            .iter()
            .map(|r| Encoded {
                bytes: encode_request(r, &plan.endpoints[r.endpoint].authority),
                head: r.method == "HEAD",
                endpoint: r.endpoint,
            })
            .collect();
        let endpoints = plan
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| EndpointState {
                addr: e.addr,
                templates: (0..plan.requests.len())
                    .filter(|&r| plan.requests[r].endpoint == i)
                    .collect(),
                queue: RefCell::new(VecDeque::new()),
                work: Notify::new(),
                idle: Cell::new(0),
                connections: Cell::new(0),
                max_connections: max_connections_per_endpoint,
            })
            .collect();
        ThreadCtx {
            origin,
            requests,
            endpoints,
            source,
            timeout: plan.timeout,
            connect_timeout: plan.connect_timeout,
            rec: RefCell::new(Interval::new(0)),
            next_boundary: Cell::new(origin + Duration::from_secs(1)),
            index,
            tx,
            in_flight: Cell::new(0),
            finished: Cell::new(0),
            expected,
            all_done: Notify::new(),
            scratch: RefCell::new(vec![0; SCRATCH_BYTES]),
            by_name: (names.len() > 1)
                .then(|| RefCell::new(names.iter().map(|_| Interval::new(0)).collect())),
            name_of,
            users,
        }
    }

    /// The record of the second that `now` falls in: seconds that ended before `now` are
    /// sent to the collector first, so every event counts in the second it happened in.
    #[inline]
    pub fn rec_at(&self, now: Instant) -> RefMut<'_, Interval> {
        if now >= self.next_boundary.get() {
            self.rotate(now);
        }
        self.rec.borrow_mut()
    }

    /// Sends every second that ended by `now` (empty ones too, so the collector sees each
    /// second of each thread exactly once).
    pub fn rotate(&self, now: Instant) {
        while now >= self.next_boundary.get() {
            let next = self.rec.borrow().second + 1;
            self.send_current(next);
            self.next_boundary
                .set(self.next_boundary.get() + Duration::from_secs(1));
        }
    }

    /// Sends the current (possibly partial) second and starts `next_second`.
    pub fn send_current(&self, next_second: u64) {
        let mut iv = self.rec.replace(Interval::new(next_second));
        iv.in_flight = self.in_flight.get();
        iv.users_active = self.users.as_ref().map_or(0, |u| u.active.get());
        let _ = self.tx.send(Msg::Interval(self.index, Box::new(iv)));
    }

    /// Counts `n` requests as sent at `now`.
    pub fn mark_sent(&self, n: usize, now: Instant) {
        self.rec_at(now).counts.sent += n as u64;
        self.in_flight.set(self.in_flight.get() + n as u64);
    }

    fn finish(&self, n: u64) {
        let f = self.finished.get() + n;
        self.finished.set(f);
        if self.expected == Some(f) {
            self.all_done.notify_one();
        }
    }

    /// Records a response that ended at `now`.
    #[inline]
    pub fn record_response(&self, p: &Pending, sent_at: Instant, now: Instant, status: u16) {
        let intended = p.intended.unwrap_or(sent_at);
        let mut rec = self.rec_at(now);
        rec.counts.record_status(status);
        let latency = micros(now.saturating_duration_since(intended));
        let service = micros(now.saturating_duration_since(sent_at));
        rec.latency.saturating_record(latency);
        rec.service.saturating_record(service);
        drop(rec);
        if let Some(by_name) = &self.by_name {
            let mut by_name = by_name.borrow_mut();
            let r = &mut by_name[self.name_of[p.template]];
            r.counts.record_status(status);
            r.latency.saturating_record(latency);
            r.service.saturating_record(service);
        }
        self.in_flight.set(self.in_flight.get() - 1);
        self.finish(1);
    }

    /// Counts response bytes read at `now`.
    #[inline]
    pub fn add_bytes(&self, n: usize, now: Instant) {
        self.rec_at(now).counts.bytes += n as u64;
    }

    /// Records sent requests that ended in a transport error.
    pub fn record_errors(&self, kind: ErrorKind, failed: &[Pending]) {
        let n = failed.len();
        if n == 0 {
            return;
        }
        let mut rec = self.rec_at(Instant::now());
        for _ in 0..n {
            rec.counts.record_error(kind);
        }
        drop(rec);
        if let Some(by_name) = &self.by_name {
            let mut by_name = by_name.borrow_mut();
            for p in failed {
                by_name[self.name_of[p.template]].counts.record_error(kind);
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

    /// Open model: drops queued requests whose timeout passed before any connection took them.
    pub fn drop_stale(&self, now: Instant) {
        for ep in &self.endpoints {
            let mut q = ep.queue.borrow_mut();
            let before = q.len();
            while q
                .front()
                .and_then(|p| p.intended)
                .is_some_and(|t| t + self.timeout < now)
            {
                q.pop_front();
            }
            let n = (before - q.len()) as u64;
            drop(q);
            self.record_dropped(n);
        }
    }

    /// Open model: requests (or users' arrivals) still queued when the run stops; they count
    /// as dropped.
    pub fn drop_all_queued(&self) {
        if let Some(users) = &self.users {
            self.record_dropped(users.take_queued());
        }
        for ep in &self.endpoints {
            let n = {
                let mut q = ep.queue.borrow_mut();
                let n = q.len() as u64;
                q.clear();
                n
            };
            self.record_dropped(n);
        }
    }
}

/// A duration in whole microseconds, at least 1 (the histograms' lowest value).
#[inline]
pub fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

/// Shared handle on a thread's state.
pub type Ctx = Rc<ThreadCtx>;
