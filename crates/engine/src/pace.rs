//! The open model's pacer (above the recorder, called by the thread loop): the task that
//! releases one thread's share of the arrival schedule at its times, on the precise timer,
//! counting each arrival as offered with its lag behind schedule.

use std::cell::RefCell;

use tokio::time::{sleep_until, Instant};

use crate::precise_timer::PreciseTimer;
use crate::record::{micros, Recorder};
use crate::schedule::open::ArrivalClock;

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
        let offset = now.saturating_duration_since(rec.origin);
        let next = {
            let mut clock = clock.borrow_mut();
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
            clock.peek()
        };
        after(now);
        let Some(t) = next else { break };
        let next = rec.origin + t;
        match &timer {
            Some(timer) if timer.sleep_until(next).await.is_ok() => {}
            _ => sleep_until(next).await,
        }
    }
}
