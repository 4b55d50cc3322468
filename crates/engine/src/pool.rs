//! Pooled connections of the closed model and of the open model's plain requests (above the
//! connections, beside the virtual users): one task per connection takes work, sends it with
//! [`conn::send`] and goes on until the work runs out or the run stops. One loop serves both
//! models; where the work comes from is its parameter ([`Work`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use loadlab_run::Plan;
use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::Instant;

use crate::conn::exchange::{Failed, Wire};
use crate::conn::{self, Backoff, Conn};
use crate::record::Pending;
use crate::schedule::closed::Budget;

/// One thread's pooled connections: what they share, and where their work comes from.
pub struct Pool<W> {
    /// The thread's connection state and recorder.
    pub wire: Wire,
    /// The work source.
    pub work: W,
}

/// Where a pooled connection gets its requests.
pub trait Work: 'static {
    /// A connection that fails to connect pauses before trying again (the closed model; the
    /// open model is paced by its schedule).
    const BACKOFF: bool;

    /// Requests a connection writes back to back before reading.
    fn depth(&self) -> usize;

    /// Fills `batch` with the next requests for endpoint `ep`; false when there is no more
    /// work. `rotation` is the connection's place in the endpoint's requests.
    async fn next(
        &self,
        wire: &Wire,
        ep: usize,
        batch: &mut Vec<Pending>,
        rotation: &mut usize,
    ) -> bool;

    /// A connection of endpoint `ep` ended.
    fn ended(&self, ep: usize);

    /// Whether [`Work::exchanged`] wants the exchanges timed (two clock reads a request).
    const TIMED: bool = false;

    /// A connection of endpoint `ep` exchanged a batch in `took`, on a connection it had
    /// (`opened` false) or opened for it.
    fn exchanged(&self, _ep: usize, _took: Duration, _opened: bool) {}
}

/// Closed model: as many requests as the budget allows, `depth` at a time, each connection
/// going round its endpoint's requests.
pub struct Budgeted {
    /// The thread's share of the run's request count.
    budget: Budget,
    /// Pipeline depth.
    depth: usize,
    /// Indices of the plan's requests that go to each endpoint.
    templates: Vec<Vec<usize>>,
}

impl Budgeted {
    /// The work of a thread allowed `budget` requests (unlimited without one), `depth` at a
    /// time.
    pub fn new(plan: &Plan, budget: Option<u64>, depth: usize) -> Self {
        let templates = (0..plan.endpoints.len())
            .map(|i| {
                (0..plan.requests.len())
                    .filter(|&r| plan.requests[r].endpoint == i)
                    .collect()
            })
            .collect();
        Budgeted {
            budget: Budget::new(budget),
            depth,
            templates,
        }
    }
}

impl Work for Budgeted {
    const BACKOFF: bool = true;

    fn depth(&self) -> usize {
        self.depth
    }

    async fn next(
        &self,
        _wire: &Wire,
        ep: usize,
        batch: &mut Vec<Pending>,
        rotation: &mut usize,
    ) -> bool {
        let n = self.budget.take(self.depth);
        let templates = &self.templates[ep];
        for _ in 0..n {
            batch.push(Pending {
                intended: None,
                template: templates[*rotation % templates.len()],
            });
            *rotation = rotation.wrapping_add(1);
        }
        n > 0
    }

    fn ended(&self, _ep: usize) {}
}

/// Open model, plain requests: one queue per endpoint that the scheduler fills.
pub struct Queues {
    endpoints: Vec<Queue>,
}

/// The rotation a connection opened by [`Pool::grow`] starts with, which tells the open
/// model's queue it is still opening (the queue has no other use for rotations).
const OPENING: usize = usize::MAX;

/// One endpoint's queue and its connections.
struct Queue {
    /// Requests released by the scheduler, waiting for a connection, with when each was queued.
    queue: RefCell<VecDeque<(Pending, Instant)>>,
    /// Wakes idle connections when work arrives.
    work: Notify,
    /// Connections waiting for work and not yet woken.
    idle: Cell<usize>,
    /// Connections open or opening.
    connections: Cell<usize>,
    /// Connections started for the queue that have not yet taken their first request.
    opening: Cell<usize>,
    /// Most connections this thread may hold to this endpoint.
    max_connections: usize,
    /// Moving average of an exchange on an open connection (`ZERO` before the first).
    exchange: Cell<Duration>,
}

impl Queue {
    /// Whether a new connection may be opened for the queued requests: while under the cap.
    /// (A rule that waited to open until waiting cost more than a connect, and not while the
    /// thread was pressed, held the 85 % ceiling better but left multi-worker servers under-
    /// loaded when the generator's machine was busy; see bench/RESULTS.md, 2026-11-25.)
    fn should_open(&self, _now: Instant) -> bool {
        self.connections.get() < self.max_connections
    }
}

/// Moves a moving average an eighth of the way towards `sample` (`ZERO` means none yet).
fn average(cell: &Cell<Duration>, sample: Duration) {
    let old = cell.get();
    cell.set(if old.is_zero() {
        sample
    } else {
        old.mul_f64(0.875) + sample.mul_f64(0.125)
    });
}

impl Queues {
    /// Empty queues for the plan's endpoints, each allowed `max_connections` connections.
    pub fn new(plan: &Plan, max_connections: usize) -> Self {
        let endpoints = plan
            .endpoints
            .iter()
            .map(|_| Queue {
                queue: RefCell::new(VecDeque::new()),
                work: Notify::new(),
                idle: Cell::new(0),
                connections: Cell::new(0),
                opening: Cell::new(0),
                max_connections,
                exchange: Cell::new(Duration::ZERO),
            })
            .collect();
        Queues { endpoints }
    }
}

impl Work for Queues {
    const BACKOFF: bool = false;
    const TIMED: bool = true;

    fn depth(&self) -> usize {
        1
    }

    async fn next(
        &self,
        wire: &Wire,
        ep: usize,
        batch: &mut Vec<Pending>,
        rotation: &mut usize,
    ) -> bool {
        let endpoint = &self.endpoints[ep];
        // A connection the queue opened stops counting as opening with its first request.
        if std::mem::take(rotation) == OPENING {
            endpoint
                .opening
                .set(endpoint.opening.get().saturating_sub(1));
        }
        loop {
            let next = endpoint.queue.borrow_mut().pop_front();
            match next {
                Some((p, _)) => {
                    if p.intended
                        .is_some_and(|t| t + wire.timeout < Instant::now())
                    {
                        wire.rec.record_dropped(1);
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
        }
    }

    fn ended(&self, ep: usize) {
        let endpoint = &self.endpoints[ep];
        endpoint
            .connections
            .set(endpoint.connections.get().saturating_sub(1));
    }

    fn exchanged(&self, ep: usize, took: Duration, opened: bool) {
        if !opened {
            average(&self.endpoints[ep].exchange, took);
        }
    }
}

/// Runs one connection of endpoint `ep` until the run stops or the work runs out, starting
/// on `conn` when it was opened before the load (otherwise the first send opens it).
/// `rotation` staggers which of the endpoint's requests each closed-model connection starts
/// with.
///
/// A function returning an `async move` block rather than an `async fn`, so that `conn` is
/// kept once in the task's state and not twice (see [`conn::send`]).
#[allow(clippy::manual_async_fn)]
pub fn drive<W: Work>(
    pool: Rc<Pool<W>>,
    ep: usize,
    mut rotation: usize,
    mut conn: Option<Conn>,
) -> impl std::future::Future<Output = ()> {
    async move {
        let wire = &pool.wire;
        let depth = pool.work.depth();
        let mut batch: Vec<Pending> = Vec::with_capacity(depth);
        let mut backoff = Backoff::default();
        loop {
            batch.clear();
            if !pool.work.next(wire, ep, &mut batch, &mut rotation).await {
                break;
            }
            let (started, opened) = (W::TIMED.then(Instant::now), conn.is_none());
            let outcome = conn::send(wire, &mut conn, ep, &batch, None).await;
            if let (Some(started), true) = (started, outcome.is_ok()) {
                pool.work.exchanged(ep, started.elapsed(), opened);
            }
            let connect_failed = matches!(outcome, Err(Failed::Connect(_)));
            if W::BACKOFF {
                // A closed-model connection would otherwise retry in a tight loop.
                if connect_failed {
                    backoff.pause().await;
                } else {
                    backoff.reset();
                }
            }
        }
        pool.work.ended(ep);
    }
}

impl Pool<Queues> {
    /// Adds a connection to endpoint `ep` for the queue to use, opened before the load
    /// (`conn`) or, when that failed, at its first request.
    pub fn open(self: &Rc<Self>, ep: usize, conn: Option<Conn>) {
        let e = &self.work.endpoints[ep];
        e.connections.set(e.connections.get() + 1);
        spawn_local(drive(self.clone(), ep, 0, conn));
    }

    /// Opens a connection to endpoint `ep` for its queued requests when
    /// [`Queue::should_open`] says so; it counts as opening until it takes its first request,
    /// which it sends as it connects.
    fn grow(self: &Rc<Self>, ep: usize, now: Instant) {
        let e = &self.work.endpoints[ep];
        if !e.should_open(now) {
            return;
        }
        e.connections.set(e.connections.get() + 1);
        e.opening.set(e.opening.get() + 1);
        spawn_local(drive(self.clone(), ep, OPENING, None));
    }

    /// Releases arrival `index` (counted across threads), due at `intended`: a request of the
    /// round robin, queued for its endpoint, and a connection is made sure to take it — an
    /// idle one if any, else a new one while under the cap; past the cap it waits in the
    /// queue.
    pub fn release(self: &Rc<Self>, intended: Instant, index: usize) {
        let template = index % self.wire.requests.len();
        let ep = self.wire.requests[template].endpoint;
        let e = &self.work.endpoints[ep];
        let now = Instant::now();
        let pending = Pending {
            intended: Some(intended),
            template,
        };
        e.queue.borrow_mut().push_back((pending, now));
        if e.idle.get() > 0 {
            e.idle.set(e.idle.get() - 1);
            // The connection idle the shortest time: a few hot connections take the load
            // while the rest stay untouched, so their kernel and tokio state stays out of
            // the caches (waking the longest idle one would cycle through the whole pool).
            e.work.notify_last();
        } else {
            self.grow(ep, now);
        }
    }

    /// After the pacer's wake-up at `now`: drops queued requests whose timeout passed before
    /// any connection took them, and opens a connection for an endpoint whose queue has
    /// waited longer than opening one takes.
    pub fn tend(self: &Rc<Self>, now: Instant) {
        for (i, ep) in self.work.endpoints.iter().enumerate() {
            let mut q = ep.queue.borrow_mut();
            let before = q.len();
            while q
                .front()
                .and_then(|(p, _)| p.intended)
                .is_some_and(|t| t + self.wire.timeout < now)
            {
                q.pop_front();
            }
            let n = (before - q.len()) as u64;
            let waiting = !q.is_empty();
            drop(q);
            self.wire.rec.record_dropped(n);
            if waiting && ep.idle.get() == 0 {
                self.grow(i, now);
            }
        }
    }

    /// Requests still queued when the run stops; they count as dropped.
    pub fn drop_queued(&self) {
        for ep in &self.work.endpoints {
            let n = {
                let mut q = ep.queue.borrow_mut();
                let n = q.len() as u64;
                q.clear();
                n
            };
            self.wire.rec.record_dropped(n);
        }
    }
}
