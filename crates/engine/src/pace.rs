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

/// Releases this thread's arrivals at their times until the schedule ends: each one is
/// counted as offered, then handed to `arrive` with its intended start and its index across
/// threads (`first_index`, then every `stride`-th, so indices interleave across threads for
/// round-robin over the requests); `after` runs after each batch of releases.
pub async fn pace(
    rec: &Recorder,
    clock: &RefCell<ArrivalClock>,
    (first_index, stride): (usize, usize),
    mut arrive: impl FnMut(Instant, usize),
    mut after: impl FnMut(Instant),
) {
    let mut index = first_index;
    let timer = PreciseTimer::new().ok();
    loop {
        let now = Instant::now();
        let next = {
            let mut clock = clock.borrow_mut();
            // Before the origin nothing is due, not even the arrival at offset zero.
            if let Some(offset) = now.checked_duration_since(rec.origin) {
                clock.release_due(offset, |t| {
                    let intended = rec.origin + t;
                    {
                        let mut r = rec.rec_at(now);
                        r.counts.offered += 1;
                        r.lag
                            .saturating_record(micros(now.saturating_duration_since(intended)));
                    }
                    arrive(intended, index);
                    index = index.wrapping_add(stride);
                });
            }
            clock.peek()
        };
        after(now);
        let Some(t) = next else { break };
        let next = rec.origin + t;
        if next.saturating_duration_since(Instant::now()) < YIELD_BELOW {
            yield_now().await;
            continue;
        }
        match &timer {
            Some(timer) if timer.sleep_until(next).await.is_ok() => {}
            _ => sleep_until(next).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use loadlab_run::{Arrival, Model, Plan, Stop};

    use super::*;
    use crate::schedule::open::RateCurve;

    /// Paces `secs` seconds of arrivals at `rate` from an origin 2 ms ahead, checking the
    /// clock at each release; returns how many were released and how many came early.
    fn pace_for(rate: f64, secs: f64) -> (u64, u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = "127.0.0.1:9".parse().unwrap();
        let stop = Stop {
            duration: Some(Duration::from_secs_f64(secs)),
            count: None,
        };
        let plan = Plan::get(addr, "/", Model::open(rate, 1, 1), stop);
        let (tx, _rx) = mpsc::channel();
        let origin = Instant::now() + Duration::from_millis(2);
        let rec = Recorder::new(&plan, origin, None, (0, tx));
        let curve = RateCurve::new(rate, rate, secs);
        let clock = RefCell::new(ArrivalClock::new(curve, Arrival::Uniform, 0, 1, 0, None));
        let (mut released, mut early) = (0, 0);
        let arrive = |intended: Instant, _| {
            released += 1;
            early += u64::from(Instant::now() < intended);
        };
        rt.block_on(pace(&rec, &clock, (0, 1), arrive, |_| {}));
        (released, early)
    }

    #[test]
    fn the_pacer_never_releases_an_arrival_before_its_time() {
        // 2,000/s sleeps on the timer between arrivals; 200,000/s yields between them.
        for (rate, secs) in [(2_000.0, 0.25), (200_000.0, 0.05)] {
            let (released, early) = pace_for(rate, secs);
            assert_eq!(released as f64, rate * secs, "{rate}/s: the whole schedule");
            assert_eq!(early, 0, "{rate}/s: {early} arrivals released early");
        }
    }
}
