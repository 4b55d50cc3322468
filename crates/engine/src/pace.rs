//! The open model's pacer (above the recorder, called by the thread loop): the task that
//! releases one thread's share of the arrival schedule at its times, on the precise timer,
//! counting each arrival as offered with its lag behind schedule.
//!
//! Each wake-up releases every arrival whose time has come, never one whose time has not.
//! Between arrivals the pacer sleeps on the precise timer when the wait is long, and when it
//! is shorter than a sleep costs it yields to the thread's event loop instead: at high rates
//! the thread then never sleeps, so it pays no timer syscalls and no wake-ups, and the
//! responses that come in meanwhile are read as they arrive.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use tokio::task::yield_now;
use tokio::time::{sleep_until, Instant};

use crate::precise_timer::PreciseTimer;
use crate::record::{micros, Recorder};
use crate::schedule::open::ArrivalClock;

/// Waits shorter than this are spent yielding to the event loop rather than asleep. A
/// sleep on the timer costs a `timerfd_settime`, a blocking `epoll_wait` and a context switch
/// each way: about 15 µs of CPU on a virtual machine (measured with `perf stat` at 5,000
/// req/s: 1.9 context switches and ~35 µs above the closed model per request), a few µs on
/// bare metal. Yielding costs one non-blocking `epoll_wait` per turn and does useful work in
/// between, but a thread that yields instead of sleeping looks fully busy: at 10 µs that only
/// happens above 100,000 arrivals/s per thread, where the thread is busy anyway (a request
/// costs ~9 µs even in the closed model), so the generator's busy figure stays honest below.
const YIELD_BELOW: Duration = Duration::from_micros(10);

/// Where the pacer reads the time and how it waits: the machine's clock ([`MachineClock`]),
/// or in the tests a clock that moves only when the pacer waits, so that they check the
/// pacer's decisions, which no busy machine can blur.
pub trait PaceClock {
    /// The time now.
    fn now(&self) -> Instant;
    /// Sleeps until `deadline`, or returns at once when it has passed.
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()>;
    /// Spins until `deadline`: too close to sleep for.
    fn spin_until(&self, deadline: Instant);
}

/// The machine's monotonic clock, sleeping on the precise timer (on tokio's where there is
/// no timerfd).
pub struct MachineClock {
    timer: Option<PreciseTimer>,
}

impl Default for MachineClock {
    /// The clock, with its timer when the system gives one.
    fn default() -> MachineClock {
        MachineClock {
            timer: PreciseTimer::new().ok(),
        }
    }
}

impl PaceClock for MachineClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    async fn sleep_until(&self, deadline: Instant) {
        match &self.timer {
            Some(timer) if timer.sleep_until(deadline).await.is_ok() => {}
            _ => sleep_until(deadline).await,
        }
    }

    fn spin_until(&self, deadline: Instant) {
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    }
}

/// How the pacer waits after a turn, which says how busy the thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// It sleeps on the timer until the next arrival: the thread has time to spare.
    Sleeps,
    /// It spins until the next arrival, too close to sleep for, after the thread's other
    /// tasks have had their turn: the thread keeps up, with a little time to spare.
    Spins,
    /// It yields to the thread's other tasks, or the next arrival is already due: whether the
    /// thread keeps up is not known from this turn.
    Yields,
}

/// Releases this thread's arrivals at their times on `time` until the schedule ends: each one
/// is counted as offered, then handed to `arrive` with its intended start, the time it was
/// released (the turn's start) and its index across
/// threads (`first_index`, then every `stride`-th, so indices interleave across threads for
/// round-robin over the requests); `after` runs after each turn, with the time the turn
/// began and how the pacer waits for the next arrival.
///
/// With a `slack`, a wake-up also releases the arrivals due within the slack after it, early,
/// so that arrivals closer together than a wake-up costs share one: fewer wake-ups and system
/// calls per request, at the price of sends bunched by up to the slack. Nothing is ever sent
/// late on purpose, and a request sent early counts its latency from its send.
pub async fn pace(
    time: &impl PaceClock,
    rec: &Recorder,
    clock: &RefCell<ArrivalClock>,
    (first_index, stride): (usize, usize),
    slack: Duration,
    mut arrive: impl FnMut(Instant, Instant, usize),
    mut after: impl FnMut(Instant, Wait),
) {
    let mut index = first_index;
    // Whether the thread's tasks have had a turn since the last release.
    let mut yielded = false;
    loop {
        let now = time.now();
        let next = {
            let mut clock = clock.borrow_mut();
            // Before the origin nothing is due, not even the arrival at offset zero.
            if let Some(offset) = now.checked_duration_since(rec.origin) {
                clock.release_due(offset + slack, |t| {
                    let intended = rec.origin + t;
                    {
                        let mut r = rec.rec_at(now);
                        r.counts.offered += 1;
                        r.lag
                            .saturating_record(micros(now.saturating_duration_since(intended)));
                    }
                    arrive(intended, now, index);
                    index = index.wrapping_add(stride);
                    yielded = false;
                });
            }
            clock.peek()
        };
        let Some(t) = next else {
            after(now, Wait::Sleeps);
            break;
        };
        let next = rec.origin + t;
        let wait = next.saturating_duration_since(time.now());
        let how = if wait >= YIELD_BELOW {
            Wait::Sleeps
        } else if yielded && !wait.is_zero() {
            Wait::Spins
        } else {
            Wait::Yields
        };
        after(now, how);
        if how != Wait::Sleeps {
            // One turn for the thread's connections per release (a yield makes the event
            // loop poll for I/O); what is left of a wait this short after it is spun, not
            // yielded again: at 100,000 req/s the pacer yielded 3.7 times per arrival, each
            // an `epoll_wait`, where the closed model makes 0.18 per request.
            if yielded {
                time.spin_until(next);
            } else {
                yielded = true;
                yield_now().await;
            }
            continue;
        }
        time.sleep_until(next).await;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::mpsc;

    use loadlab_run::{Arrival, Model, Plan, Stop};

    use super::*;
    use crate::schedule::open::RateCurve;

    /// A clock that moves only when the pacer waits: a spin ends at its deadline, and a sleep
    /// at its deadline or, every `late_every`-th sleep, `late` after it (a thread the machine
    /// gave its core back to late).
    struct VirtualClock {
        now: Cell<Instant>,
        sleeps: Cell<u64>,
        late_every: u64,
        late: Duration,
    }

    impl VirtualClock {
        fn new(late_every: u64, late: Duration) -> VirtualClock {
            VirtualClock {
                now: Cell::new(Instant::now()),
                sleeps: Cell::new(0),
                late_every,
                late,
            }
        }
    }

    impl PaceClock for VirtualClock {
        fn now(&self) -> Instant {
            self.now.get()
        }

        async fn sleep_until(&self, deadline: Instant) {
            let n = self.sleeps.get() + 1;
            self.sleeps.set(n);
            let late = if self.late_every > 0 && n.is_multiple_of(self.late_every) {
                self.late
            } else {
                Duration::ZERO
            };
            self.now.set(self.now.get().max(deadline) + late);
        }

        fn spin_until(&self, deadline: Instant) {
            self.now.set(self.now.get().max(deadline));
        }
    }

    /// What a paced schedule did: arrivals released, released before their time, the most
    /// any was early or late, the wake-ups that released something, and the turns after which
    /// the pacer said it had time to spare.
    #[derive(Debug, Default)]
    struct Paced {
        released: u64,
        early: u64,
        earliest: Duration,
        latest: Duration,
        wakes: u64,
        spare_wakes: u64,
    }

    /// Paces `secs` seconds of arrivals at `rate` on the clock `clock` makes (within the
    /// runtime, as the timer needs) from an origin 2 ms ahead with `slack`, comparing each
    /// release with its arrival's time.
    fn pace_for<C: PaceClock>(
        clock: impl FnOnce() -> C,
        rate: f64,
        secs: f64,
        slack: Duration,
    ) -> Paced {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let time = &clock();
        let addr = "127.0.0.1:9".parse().unwrap();
        let stop = Stop {
            duration: Some(Duration::from_secs_f64(secs)),
            count: None,
        };
        let plan = Plan::get(addr, "/", Model::open(rate, 1, 1), stop);
        let (tx, _rx) = mpsc::channel();
        let origin = time.now() + Duration::from_millis(2);
        let rec = Recorder::new(&plan, origin, None, (0, tx));
        let curve = RateCurve::new(rate, rate, secs);
        let clock = RefCell::new(ArrivalClock::new(curve, Arrival::Uniform, 0, 1, 0, None));
        let paced = RefCell::new(Paced::default());
        let arrive = |intended: Instant, released: Instant, _| {
            let mut p = paced.borrow_mut();
            p.released += 1;
            let ahead = intended.saturating_duration_since(released);
            p.early += u64::from(!ahead.is_zero());
            p.earliest = p.earliest.max(ahead);
            p.latest = p.latest.max(released.saturating_duration_since(intended));
        };
        let (mut last, mut wakes, mut spare_wakes) = (0, 0, 0);
        let after = |_, how: Wait| {
            let released = paced.borrow().released;
            wakes += u64::from(released > last);
            spare_wakes += u64::from(released > last && how == Wait::Sleeps);
            last = released;
        };
        rt.block_on(pace(time, &rec, &clock, (0, 1), slack, arrive, after));
        Paced {
            wakes,
            spare_wakes,
            ..paced.into_inner()
        }
    }

    /// A clock that is never late.
    fn punctual() -> VirtualClock {
        VirtualClock::new(0, Duration::ZERO)
    }

    #[test]
    fn on_the_machines_clock_the_pacer_never_releases_an_arrival_before_its_time() {
        // 2,000/s sleeps on the timer between arrivals; 200,000/s yields between them. A
        // busy machine only makes releases late, never early.
        for (rate, secs) in [(2_000.0, 0.25), (200_000.0, 0.05)] {
            let p = pace_for(MachineClock::default, rate, secs, Duration::ZERO);
            assert_eq!(
                p.released as f64,
                rate * secs,
                "{rate}/s: the whole schedule"
            );
            assert_eq!(p.early, 0, "{rate}/s: {} arrivals released early", p.early);
        }
    }

    #[test]
    fn the_pacer_sleeps_between_sparse_arrivals_and_spins_or_yields_between_dense_ones() {
        // The pool opens a connection for every request that found none idle only when the
        // pacer says it will sleep: at 2,000/s (500 µs apart) it sleeps after every release,
        // at 200,000/s (5 µs, under a sleep's cost) only after the last, which ends the
        // schedule.
        let sparse = pace_for(punctual, 2_000.0, 0.25, Duration::ZERO);
        assert_eq!(sparse.released, 500, "{sparse:?}");
        assert_eq!((sparse.wakes, sparse.spare_wakes), (500, 500), "{sparse:?}");
        assert_eq!((sparse.early, sparse.latest), (0, Duration::ZERO));
        let dense = pace_for(punctual, 200_000.0, 0.05, Duration::ZERO);
        assert_eq!(dense.released, 10_000, "{dense:?}");
        assert_eq!((dense.wakes, dense.spare_wakes), (10_000, 1), "{dense:?}");
        assert_eq!((dense.early, dense.latest), (0, Duration::ZERO));
    }

    #[test]
    fn a_wake_up_that_comes_late_releases_every_arrival_it_owes_at_once_and_none_early() {
        // Every 10th sleep ends 2 ms late: the 4 arrivals due meanwhile (500 µs apart) go out
        // with the one it slept for, late by what they waited, and the schedule goes on at
        // its times, not shifted by the delay. Ten sleeps release 9 + 5 arrivals: 35 tens
        // release 490, and the last ten the other 10 (its late sleep owes only the last):
        // 360 wake-ups.
        let late = || VirtualClock::new(10, Duration::from_millis(2));
        let p = pace_for(late, 2_000.0, 0.25, Duration::ZERO);
        assert_eq!(p.released, 500, "the whole schedule: {p:?}");
        assert_eq!(p.early, 0, "{p:?}");
        assert_eq!(p.latest, Duration::from_millis(2), "{p:?}");
        assert_eq!(p.wakes, 360, "{p:?}");
    }

    #[test]
    fn with_a_slack_arrivals_share_wake_ups_and_none_goes_out_earlier_than_the_slack() {
        // 5,000/s with 1 ms of slack: a wake-up at one arrival's time also takes the five
        // due within the next millisecond, so one wake-up in six releases the thousand.
        let slack = Duration::from_millis(1);
        let p = pace_for(punctual, 5_000.0, 0.2, slack);
        assert_eq!(p.released, 1_000, "the whole schedule: {p:?}");
        assert_eq!(p.earliest, slack, "{p:?}");
        assert_eq!(p.wakes, 167, "{p:?}");
        assert_eq!(p.early, 1_000 - 167, "{p:?}");
        let exact = pace_for(punctual, 5_000.0, 0.2, Duration::ZERO);
        assert_eq!((exact.wakes, exact.early), (1_000, 0), "{exact:?}");
    }
}
