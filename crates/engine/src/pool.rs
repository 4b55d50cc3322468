//! Pooled connections of the closed model and of the open model's plain requests (above the
//! connections, beside the virtual users): one task per connection takes work, sends it with
//! [`conn::send`] and goes on until the work runs out or the run stops. One loop serves both
//! models; where the work comes from is its parameter ([`Work`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

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

/// One endpoint's queue and its connections.
struct Queue {
    /// Requests released by the scheduler, waiting for a connection.
    queue: RefCell<VecDeque<Pending>>,
    /// Wakes idle connections when work arrives.
    work: Notify,
    /// Connections waiting for work and not yet woken.
    idle: Cell<usize>,
    /// Connections open or opening.
    connections: Cell<usize>,
    /// Most connections this thread may hold to this endpoint.
    max_connections: usize,
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
                max_connections,
            })
            .collect();
        Queues { endpoints }
    }
}

impl Work for Queues {
    const BACKOFF: bool = false;

    fn depth(&self) -> usize {
        1
    }

    async fn next(
        &self,
        wire: &Wire,
        ep: usize,
        batch: &mut Vec<Pending>,
        _rotation: &mut usize,
    ) -> bool {
        let endpoint = &self.endpoints[ep];
        loop {
            let next = endpoint.queue.borrow_mut().pop_front();
            match next {
                Some(p) => {
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
            let connect_failed = matches!(
                conn::send(wire, &mut conn, ep, &batch, None).await,
                Err(Failed::Connect(_))
            );
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

    /// Releases arrival `index` (counted across threads), due at `intended`: a request of the
    /// round robin, queued for its endpoint, and a connection is made sure to take it — an
    /// idle one if any, else a new one while under the cap; past the cap it waits in the
    /// queue.
    pub fn release(self: &Rc<Self>, intended: Instant, index: usize) {
        let template = index % self.wire.requests.len();
        let ep = self.wire.requests[template].endpoint;
        let e = &self.work.endpoints[ep];
        e.queue.borrow_mut().push_back(Pending {
            intended: Some(intended),
            template,
        });
        if e.idle.get() > 0 {
            e.idle.set(e.idle.get() - 1);
            // The connection idle the shortest time: a few hot connections take the load
            // while the rest stay untouched, so their kernel and tokio state stays out of
            // the caches (waking the longest idle one would cycle through the whole pool).
            e.work.notify_last();
        } else if e.connections.get() < e.max_connections {
            e.connections.set(e.connections.get() + 1);
            spawn_local(drive(self.clone(), ep, 0, None));
        }
    }

    /// Drops queued requests whose timeout passed before any connection took them.
    pub fn drop_stale(&self, now: Instant) {
        for ep in &self.work.endpoints {
            let mut q = ep.queue.borrow_mut();
            let before = q.len();
            while q
                .front()
                .and_then(|p| p.intended)
                .is_some_and(|t| t + self.wire.timeout < now)
            {
                q.pop_front();
            }
            let n = (before - q.len()) as u64;
            drop(q);
            self.wire.rec.record_dropped(n);
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
