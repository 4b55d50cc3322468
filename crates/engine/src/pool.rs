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
use crate::growth::Growth;
use crate::pace::Wait;
use crate::record::{micros, Pending};
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
    /// When the pacer last spun or slept until an arrival after the thread's other tasks had
    /// had their turn: the thread had read every answer there was and had time left.
    thread_idle_at: Cell<Option<Instant>>,
}

/// How long requests may go without a connection to take them, while the thread has no
/// time to spare, before the pool opens another — and only if the thread idled meanwhile and
/// the pool's [`Growth`] allows. A busy thread reads answers late and so finds its
/// connections busy; more connections would not send its requests sooner, and each connect
/// would put it further behind: at 150,000 req/s on one thread, the old rule (a new
/// connection for every request that found none idle) opened 950 connections in the first
/// 7 ms of the run, while the first answers were still cold, and the thread, slower per
/// request on 1,000 connections than on 50, never caught up (lag p99 6–7 ms). A service that
/// holds the connections makes its requests wait this long while the thread, with nothing to
/// read, spins between arrivals.
const STARVED_BEFORE_OPENING: Duration = Duration::from_millis(1);

/// While the thread is busy, at most one connection opens per this much time: growth of up
/// to 10,000 connections a second, a few percent of the thread's time.
const OPENING_INTERVAL: Duration = Duration::from_micros(100);

/// The rotation an open-model connection is given when it is opened or woken for a queued
/// request, which tells [`Queues::next`] that the connection was counted as coming (the queue
/// has no other use for rotations).
const COMING: usize = usize::MAX;

/// One endpoint's queue and its connections.
struct Queue {
    /// Requests released by the scheduler, waiting for a connection, with when they were.
    queue: RefCell<VecDeque<(Pending, Instant)>>,
    /// Wakes idle connections when work arrives.
    work: Notify,
    /// Connections waiting for work and not yet woken.
    idle: Cell<usize>,
    /// Connections woken for work, or new, that have not yet taken a request: each takes one
    /// of the queue's as soon as the thread runs it.
    coming: Cell<usize>,
    /// Connections open or opening.
    connections: Cell<usize>,
    /// Most connections this thread may hold to this endpoint.
    max_connections: usize,
    /// Since when some queued request has had no connection coming for it, if one has.
    starved_since: Cell<Option<Instant>>,
    /// When the pool last opened a connection because requests were starved.
    last_opened: Cell<Option<Instant>>,
    /// Whether a busy thread may open more: the pool's load, and what its growth bought.
    growth: Growth,
}

impl Queue {
    /// Queued requests with no connection coming for them.
    fn unserved(&self) -> usize {
        self.queue.borrow().len().saturating_sub(self.coming.get())
    }
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
                coming: Cell::new(0),
                connections: Cell::new(0),
                max_connections,
                starved_since: Cell::new(None),
                last_opened: Cell::new(None),
                growth: Growth::default(),
            })
            .collect();
        Queues {
            endpoints,
            thread_idle_at: Cell::new(None),
        }
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
        rotation: &mut usize,
    ) -> bool {
        let endpoint = &self.endpoints[ep];
        // A connection opened, or woken, for a queued request was counted as coming for it.
        let mut coming = std::mem::replace(rotation, 0) == COMING;
        loop {
            let next = endpoint.queue.borrow_mut().pop_front();
            if std::mem::take(&mut coming) {
                endpoint.coming.set(endpoint.coming.get() - 1);
            }
            match next {
                Some((p, released)) => {
                    let now = Instant::now();
                    if p.intended.is_some_and(|t| t + wire.timeout < now) {
                        wire.rec.record_dropped(1);
                        continue;
                    }
                    wire.rec
                        .record_queued(micros(now.saturating_duration_since(released)));
                    endpoint.growth.taken();
                    batch.push(p);
                    return true;
                }
                None => {
                    // Every request has been taken: none is starved. The scheduler decrements
                    // `idle`, and counts us coming, when it wakes us.
                    endpoint.starved_since.set(None);
                    endpoint.idle.set(endpoint.idle.get() + 1);
                    endpoint.work.notified().await;
                    coming = true;
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
        e.coming.set(e.coming.get() + 1);
        spawn_local(drive(self.clone(), ep, COMING, conn));
    }

    /// Releases arrival `index` (counted across threads), due at `intended`, at `released`: a
    /// request of the
    /// round robin, queued for its endpoint and taken by an idle connection if there is one;
    /// otherwise it is starved, and [`Pool::tend`], at the end of the pacer's turn, decides
    /// whether a new connection opens for it.
    pub fn release(self: &Rc<Self>, intended: Instant, released: Instant, index: usize) {
        let template = index % self.wire.requests.len();
        let ep = self.wire.requests[template].endpoint;
        let e = &self.work.endpoints[ep];
        e.growth.arrived();
        e.queue.borrow_mut().push_back((
            Pending {
                intended: Some(intended),
                template,
            },
            released,
        ));
        if e.idle.get() > 0 {
            e.idle.set(e.idle.get() - 1);
            e.coming.set(e.coming.get() + 1);
            // The connection idle the shortest time: a few hot connections take the load
            // while the rest stay untouched, so their kernel and tokio state stays out of
            // the caches (waking the longest idle one would cycle through the whole pool).
            e.work.notify_last();
        } else if e.starved_since.get().is_none() {
            e.starved_since.set(Some(Instant::now()));
        }
    }

    /// After each of the pacer's turns (at `now`, followed by the pacer's wait `how`): drops
    /// stale queued requests, and gives starved ones connections, up to the cap. When the
    /// pacer sleeps the thread has time to spare and the connections are held by the service:
    /// every starved request gets one at once. Otherwise one opens per [`OPENING_INTERVAL`]
    /// once requests have been starved for [`STARVED_BEFORE_OPENING`], if the pacer has spun
    /// since they were (the thread read every answer there was and the connections were
    /// still all busy) and the endpoint's [`Growth`] allows (its connections busy on the
    /// whole, each doubling of them buying throughput): a thread that never idles is the
    /// limit, a pool mostly idle is waiting out a stall, a service at its limit answers no
    /// more on more connections, and a connect would help none of them.
    pub fn tend(self: &Rc<Self>, now: Instant, how: Wait) {
        if how != Wait::Yields {
            self.work.thread_idle_at.set(Some(now));
        }
        for (ep, e) in self.work.endpoints.iter().enumerate() {
            self.drop_stale(e, now);
            let busy = e.connections.get().saturating_sub(e.idle.get());
            e.growth.tick(now, busy);
            let unserved = e.unserved();
            if unserved == 0 {
                e.starved_since.set(None);
                continue;
            }
            let room = e.max_connections.saturating_sub(e.connections.get());
            if how == Wait::Sleeps {
                for _ in 0..unserved.min(room) {
                    self.open(ep, None);
                }
                continue;
            }
            let Some(since) = e.starved_since.get() else {
                continue;
            };
            let starved = now.saturating_duration_since(since) >= STARVED_BEFORE_OPENING;
            let idled = self.work.thread_idle_at.get().is_some_and(|t| {
                t >= since && now.saturating_duration_since(t) <= STARVED_BEFORE_OPENING
            });
            let paced = e
                .last_opened
                .get()
                .is_none_or(|t| now.saturating_duration_since(t) >= OPENING_INTERVAL);
            if starved && idled && paced && room > 0 && e.growth.may_open(now, e.connections.get())
            {
                e.last_opened.set(Some(now));
                self.open(ep, None);
            }
        }
    }

    /// Drops the requests queued for `e` whose timeout passed before any connection took them.
    fn drop_stale(&self, e: &Queue, now: Instant) {
        let mut q = e.queue.borrow_mut();
        let before = q.len();
        while q
            .front()
            .and_then(|(p, _)| p.intended)
            .is_some_and(|t| t + self.wire.timeout < now)
        {
            q.pop_front();
        }
        let n = (before - q.len()) as u64;
        drop(q);
        self.wire.rec.record_dropped(n);
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

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::mpsc;

    use loadlab_run::{Model, Stop};
    use tokio::task::LocalSet;

    use super::*;
    use crate::conn::dialer::Dialer;
    use crate::record::Recorder;

    /// A thread's open-model pool to a listener that accepts and never answers, so every
    /// connection stays busy with the request it took; `max` connections at most.
    fn silent_pool(listener: &TcpListener, max: usize) -> Rc<Pool<Queues>> {
        let addr = listener.local_addr().unwrap();
        let stop = Stop {
            duration: Some(Duration::from_secs(60)),
            count: None,
        };
        let plan = Plan::get(addr, "/", Model::open(1000.0, 1, max), stop);
        let (tx, _rx) = mpsc::channel();
        let rec = Recorder::new(&plan, Instant::now(), None, (0, tx));
        let dialer = Rc::new(Dialer::new(&plan, 0, None));
        Rc::new(Pool {
            wire: Wire::new(&plan, rec, dialer),
            work: Queues::new(&plan, max),
        })
    }

    fn connections(pool: &Pool<Queues>) -> usize {
        pool.work.endpoints[0].connections.get()
    }

    /// Runs `check` on a generator thread's event loop with a pool of `max` connections to a
    /// listener that never answers.
    fn with_silent_pool(max: usize, check: impl AsyncFnOnce(Rc<Pool<Queues>>)) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        LocalSet::new().block_on(&rt, check(silent_pool(&listener, max)));
    }

    /// Tends the pool every [`OPENING_INTERVAL`] for `ticks` turns from `from`, the pacer
    /// waiting `how`; returns the connections after each turn.
    fn tend_for(pool: &Rc<Pool<Queues>>, from: Instant, ticks: u32, how: Wait) -> Vec<usize> {
        (0..ticks)
            .map(|k| {
                pool.tend(from + OPENING_INTERVAL * k, how);
                connections(pool)
            })
            .collect()
    }

    /// Opens `n` connections and lets them wait for work.
    async fn opened(pool: &Rc<Pool<Queues>>, n: usize) {
        for _ in 0..n {
            pool.open(0, None);
        }
        tokio::task::yield_now().await;
    }

    /// Releases 20 arrivals at `at` and lets the connections take what they can: ten open
    /// connections take one each and hold it, and ten wait.
    async fn starved(pool: &Rc<Pool<Queues>>, at: Instant) {
        for i in 0..20 {
            pool.release(at, at, i);
        }
        tokio::task::yield_now().await;
    }

    #[test]
    fn a_starved_pool_of_a_service_that_answers_no_more_doubles_once_at_its_pace() {
        with_silent_pool(100, async |pool| {
            opened(&pool, 10).await;
            // Every connection takes a request and holds it; ten more wait. The thread, with
            // nothing to read, spins between arrivals.
            let start = Instant::now();
            starved(&pool, start).await;
            let counts = tend_for(&pool, start, 10_000, Wait::Spins);
            // A doubling, one connection per interval, after which the service answered no
            // more than before: it stops there.
            assert_eq!(counts.last(), Some(&20), "{counts:?}");
            assert!(counts.windows(2).all(|w| w[1] <= w[0] + 1));
            let first = counts.iter().position(|&c| c > 10).unwrap();
            assert!(
                OPENING_INTERVAL * first as u32 >= STARVED_BEFORE_OPENING,
                "the first after {first} turns"
            );
        });
    }

    #[test]
    fn a_thread_that_never_idles_opens_nothing_however_long_its_requests_starve() {
        with_silent_pool(100, async |pool| {
            opened(&pool, 10).await;
            let start = Instant::now();
            starved(&pool, start).await;
            let counts = tend_for(&pool, start, 10_000, Wait::Yields);
            assert_eq!(counts.last(), Some(&10));
        });
    }

    #[test]
    fn a_pool_mostly_idle_waits_out_a_short_stall() {
        with_silent_pool(100, async |pool| {
            opened(&pool, 10).await;
            // A second of arrivals each answered at once: no connection busy at the turns.
            let t0 = Instant::now();
            tend_for(&pool, t0, 10_000, Wait::Spins);
            // Then the service stalls: the ten take a request each and hold it, ten more
            // arrivals wait, and the thread, with nothing to read, spins.
            let stall = t0 + OPENING_INTERVAL * 10_000;
            starved(&pool, stall).await;
            let counts = tend_for(&pool, stall, 100, Wait::Spins);
            assert_eq!(counts.last(), Some(&10), "none in a 10 ms stall");
        });
    }

    #[test]
    fn with_time_to_spare_every_starved_request_gets_a_connection_at_once() {
        with_silent_pool(100, async |pool| {
            opened(&pool, 1).await;
            let now = Instant::now();
            for i in 0..10 {
                pool.release(now, now, i);
            }
            pool.tend(now, Wait::Sleeps);
            assert_eq!(connections(&pool), 10, "the first was woken for one");
        });
    }

    #[test]
    fn the_pool_never_opens_past_its_cap() {
        with_silent_pool(4, async |pool| {
            let now = Instant::now();
            pool.tend(now, Wait::Sleeps);
            for i in 0..20 {
                pool.release(now, now, i);
            }
            pool.tend(now, Wait::Sleeps);
            pool.tend(now + Duration::from_secs(1), Wait::Spins);
            assert_eq!(connections(&pool), 4);
        });
    }
}
