//! Whether a busy thread's open-model pool may grow (below the pooled connections, fed by
//! their counts at each of the pacer's turns): only while its connections are busy on the
//! whole, and only while each doubling of them buys throughput.
//!
//! Requests that find every connection busy say the pool is short, or that the service
//! stalled, or that it is at its limit. Only the first is mended by connecting: in the others
//! a connection more only waits too, and then adds to what the service must poll (nginx at
//! 91 % of its core, offered 210,000 req/s on 50 connections, kept 3–5 of them busy and
//! stalled about once a second for milliseconds; a pool that grew on each stall reached its
//! cap of 1,000 in 2 of 3 five-second runs, and in all 5 ten-second rounds of a bench with a
//! 10 ms threshold, once with 7,000 requests queued behind it, and then did not hold the
//! rate). Little's law tells the first apart on average (λ·W busy connections of N), and a
//! doubling of the pool tells it for sure: the service then answers more.

use std::cell::Cell;
use std::time::Duration;

use tokio::time::Instant;

/// Share of the connections that must have been busy on average, over about [`WINDOW`], for
/// the pool to grow: a pool that serves λ requests a second each holding a connection W
/// seconds keeps λ·W of them busy; when that is a small share of the pool, requests that find
/// every connection busy are waiting out a stall.
const BUSY_SHARE: f64 = 0.5;

/// Time constant of the averages (busy connections, arrivals per second): from a pool 10 %
/// busy, all of it must stay busy for about 14 ms to lift the average to [`BUSY_SHARE`]. A
/// longer stall costs one doubling, which buys nothing and stops the growth.
const WINDOW: Duration = Duration::from_millis(20);

/// Shortest time the pool's throughput is measured before and after a doubling, and the new
/// connections are given to show in it; a service whose requests hold a connection longer
/// gets twice that (Little's law: W = connections busy / throughput). A doubling from 20
/// connections to a 2 ms service then takes about 22 ms, and each next one 20 ms more than
/// the connections take to open.
const MEASURE: Duration = Duration::from_millis(10);

/// Longest time a doubling waits for its connections to show.
const MAX_MEASURE: Duration = Duration::from_secs(1);

/// Throughput a doubling of the connections must buy for the pool to go on growing: a service
/// limited by its concurrency answers about twice as much, one at its limit about as much.
const GAIN: f64 = 1.25;

/// Growth of the arrival rate after which a pool whose growth stopped paying may try again.
const RENEWED_DEMAND: f64 = 1.25;

/// Where the pool is in a doubling of its connections; `served` is the throughput (requests
/// taken a second) before it, `hold` how long a measure lasts.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Measuring the throughput of `from` connections since `since`, when `taken` requests had
    /// been taken.
    Before {
        from: usize,
        since: Instant,
        taken: u64,
    },
    /// Opening connections up to twice `from`.
    Opening {
        from: usize,
        served: f64,
        hold: Duration,
    },
    /// Letting the new connections show in the throughput, since `since`.
    Settling {
        served: f64,
        hold: Duration,
        since: Instant,
    },
    /// Measuring the throughput after the doubling since `since`, when `taken` requests had
    /// been taken and `arrived` had arrived.
    After {
        served: f64,
        hold: Duration,
        since: Instant,
        taken: u64,
        arrived: u64,
    },
}

/// How long to measure a pool of `connections`, all busy, that serves `served` requests a
/// second: twice the time a request holds a connection, within [`MEASURE`] and
/// [`MAX_MEASURE`].
fn hold_for(connections: usize, served: f64) -> Duration {
    let held = if served > 0.0 {
        connections as f64 / served
    } else {
        f64::INFINITY
    };
    Duration::from_secs_f64((2.0 * held).clamp(MEASURE.as_secs_f64(), MAX_MEASURE.as_secs_f64()))
}

/// One endpoint's pool growth: its averages, and the doubling under way.
#[derive(Debug, Default)]
pub struct Growth {
    /// Connections busy (neither idle nor closed), on average.
    busy: Cell<f64>,
    /// Arrivals per second, on average.
    arrived: Cell<f64>,
    /// Arrivals from the start.
    arrivals: Cell<u64>,
    /// Arrivals when the averages were last brought up to date.
    averaged: Cell<u64>,
    /// Requests taken by connections, from the start.
    taken: Cell<u64>,
    /// When the averages were last brought up to date.
    at: Cell<Option<Instant>>,
    /// The doubling under way, and when growth was last asked for.
    step: Cell<Option<(Step, Instant)>>,
    /// The arrival rate at which a doubling bought nothing: growth waits for more demand.
    stopped_at: Cell<Option<f64>>,
}

impl Growth {
    /// A connection took a queued request.
    pub fn taken(&self) {
        self.taken.set(self.taken.get() + 1);
    }

    /// A request arrived.
    pub fn arrived(&self) {
        self.arrivals.set(self.arrivals.get() + 1);
    }

    /// Brings the averages up to `now`, with `busy` of the connections busy.
    pub fn tick(&self, now: Instant, busy: usize) {
        let arrivals = self.arrivals.get() - self.averaged.replace(self.arrivals.get());
        let Some(at) = self.at.replace(Some(now)) else {
            self.busy.set(busy as f64);
            return;
        };
        let dt = now.saturating_duration_since(at).as_secs_f64();
        let window = WINDOW.as_secs_f64();
        let k = (dt / window).min(1.0);
        self.busy
            .set(self.busy.get() + (busy as f64 - self.busy.get()) * k);
        // A count over `dt` as a rate: r += (n / dt − r) · dt / τ, the count's own when dt ≥ τ.
        let r = self.arrived.get();
        self.arrived.set(if dt >= window {
            arrivals as f64 / dt
        } else {
            r + (arrivals as f64 - r * dt) / window
        });
    }

    /// Whether the pool, starved with the thread idle, may open one more of its `connections`
    /// at `now`: its connections have been busy on the whole, and the doubling under way has
    /// measured what it started from, or is under way, or the last one bought throughput.
    /// A pool not starved for a window starts its next doubling afresh.
    pub fn may_open(&self, now: Instant, connections: usize) -> bool {
        if self.busy.get() < BUSY_SHARE * connections as f64 {
            return false;
        }
        if let Some(rate) = self.stopped_at.get() {
            if self.arrived.get() < RENEWED_DEMAND * rate {
                return false;
            }
            self.stopped_at.set(None);
            self.step.set(None);
        }
        let taken = self.taken.get();
        let rate = |since: Instant, from: u64| {
            (taken - from) as f64 / now.saturating_duration_since(since).as_secs_f64()
        };
        let fresh = Step::Before {
            from: connections,
            since: now,
            taken,
        };
        let step = match self.step.get() {
            Some((step, asked)) if now.saturating_duration_since(asked) < WINDOW => step,
            _ => fresh,
        };
        let waited = |since: Instant, hold| now.saturating_duration_since(since) >= hold;
        let (next, open) = match step {
            Step::Before { from, since, taken } if waited(since, MEASURE) => {
                let served = rate(since, taken);
                let hold = hold_for(from, served);
                (Step::Opening { from, served, hold }, true)
            }
            Step::Opening { from, served, hold } if connections >= 2 * from => (
                Step::Settling {
                    served,
                    hold,
                    since: now,
                },
                false,
            ),
            Step::Opening { .. } => (step, true),
            Step::Settling {
                served,
                hold,
                since,
            } if waited(since, hold) => {
                let after = Step::After {
                    served,
                    hold,
                    since: now,
                    taken,
                    arrived: self.arrivals.get(),
                };
                (after, false)
            }
            Step::After {
                served,
                hold,
                since,
                taken: from,
                arrived,
            } if waited(since, hold) => {
                let now_served = rate(since, from);
                if now_served > GAIN * served {
                    let next = Step::Opening {
                        from: connections,
                        served: now_served,
                        hold: hold_for(connections, now_served),
                    };
                    (next, true)
                } else {
                    // The arrival rate of the same window: the average may still be rising
                    // from the start.
                    let demand = (self.arrivals.get() - arrived) as f64
                        / now.saturating_duration_since(since).as_secs_f64();
                    self.stopped_at.set(Some(demand));
                    (fresh, false)
                }
            }
            _ => (step, false),
        };
        self.step.set(Some((next, now)));
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of `connections` ticked every 100 µs for `for_ms`, all busy, offered `offered`
    /// requests a second and taking `served(connections)`; opens one whenever allowed.
    /// Returns the connections after.
    fn run(
        g: &Growth,
        from: Instant,
        for_ms: u32,
        mut connections: usize,
        (offered, served): (f64, impl Fn(usize) -> f64),
    ) -> usize {
        let tick = Duration::from_micros(100);
        let (mut owed_taken, mut owed_arrived) = (0.0, 0.0);
        for k in 0..for_ms * 10 {
            let now = from + tick * k;
            owed_taken += served(connections) * tick.as_secs_f64();
            owed_arrived += offered * tick.as_secs_f64();
            while owed_taken >= 1.0 {
                g.taken();
                owed_taken -= 1.0;
            }
            while owed_arrived >= 1.0 {
                g.arrived();
                owed_arrived -= 1.0;
            }
            g.tick(now, connections);
            if g.may_open(now, connections) {
                connections += 1;
            }
        }
        connections
    }

    #[test]
    fn a_pool_grows_while_its_doublings_buy_throughput_and_stops_when_one_does_not() {
        // A service of 2 ms a request that answers up to 90,000 req/s, offered 100,000: each
        // connection serves 500 req/s until 180 serve all it can.
        let g = Growth::default();
        let t0 = Instant::now();
        let served = |c: usize| (c as f64 * 500.0).min(90_000.0);
        let n = run(&g, t0, 1000, 20, (100_000.0, served));
        assert!((200..=400).contains(&n), "{n} connections");
        // It stopped: another second adds none.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(run(&g, later, 1000, n, (100_000.0, served)), n);
    }

    #[test]
    fn a_service_at_its_limit_gets_one_doubling_and_no_more() {
        // Whatever the connections, 230,000 answers a second.
        let g = Growth::default();
        let n = run(&g, Instant::now(), 2000, 74, (250_000.0, |_| 230_000.0));
        assert_eq!(n, 148);
    }

    #[test]
    fn a_short_stall_of_a_pool_mostly_idle_opens_nothing() {
        let g = Growth::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        for k in 0..1000 {
            g.tick(t0 + ms * k, 5);
        }
        // All 50 busy for 20 ms.
        let stall = t0 + ms * 1000;
        for k in 0..200 {
            let now = stall + Duration::from_micros(100) * k;
            g.tick(now, 50);
            assert!(!g.may_open(now, 50), "at {k} ticks");
        }
    }

    #[test]
    fn a_pool_stopped_for_want_of_gain_grows_again_when_the_demand_does() {
        let g = Growth::default();
        let t0 = Instant::now();
        let n = run(&g, t0, 1000, 10, (10_000.0, |_| 10_000.0));
        assert_eq!(n, 20);
        // The rate goes from 10,000 to 20,000 req/s, and the service answers 500 a second a
        // connection: the pool grows to the 40 that serve them.
        let later = t0 + Duration::from_secs(1);
        let served = |c: usize| (c as f64 * 500.0).min(20_000.0);
        let n = run(&g, later, 1000, n, (20_000.0, served));
        assert!((40..=80).contains(&n), "{n} connections");
    }
}
