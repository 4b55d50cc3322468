//! A generator thread: its own single-threaded event loop running its connections and, in
//! the open model, its share of the arrival schedule; it hands one [`Interval`] per second
//! to the collector.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::{Interval, Plan, UserRecord};
use tokio::sync::watch;
use tokio::task::{spawn_local, LocalSet};
use tokio::time::{sleep_until, Instant};

use crate::conn::drive;
use crate::context::{micros, Ctx, Pending, Source, ThreadCtx};
use crate::msg::{Msg, ThreadEnd};
use crate::precise_timer::PreciseTimer;
use crate::schedule::open::ArrivalClock;
use crate::schedule::users::UserCurve;
use crate::usage::thread_cpu;
use crate::user;
use crate::user_state::UsersState;

/// Everything one thread needs to run its share of the plan.
pub struct ThreadSetup {
    /// This thread's index.
    pub index: usize,
    /// The plan.
    pub plan: Arc<Plan>,
    /// The run's origin.
    pub origin: Instant,
    /// When to stop, if the run has a duration.
    pub deadline: Option<Instant>,
    /// Initial connections: (endpoint, rotation) pairs.
    pub connections: Vec<(usize, usize)>,
    /// Work source.
    pub source: Source,
    /// Open model: this thread's arrivals, and the stride of global arrival indices.
    pub clock: Option<(ArrivalClock, usize)>,
    /// This thread's share of the run's count.
    pub expected: Option<u64>,
    /// Connection cap per endpoint.
    pub max_connections_per_endpoint: usize,
    /// User phases: the user count over time, and the number of threads sharing it.
    pub user_curve: Option<(UserCurve, usize)>,
    /// Becomes true when the run must stop early.
    pub stop: watch::Receiver<bool>,
    /// Where records go.
    pub tx: Sender<Msg>,
}

/// Runs a thread's share of the plan to its end.
pub fn run_thread(setup: ThreadSetup) {
    let index = setup.index;
    let tx = setup.tx.clone();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Msg::Failed(index, e));
            return;
        }
    };
    let local = LocalSet::new();
    let (elapsed, unfinished, by_name, users) = local.block_on(&rt, run_loop(setup));
    drop(local);
    drop(rt);
    let _ = tx.send(Msg::End(
        index,
        ThreadEnd {
            cpu: thread_cpu(),
            elapsed,
            unfinished,
            by_name,
            users,
        },
    ));
}

async fn run_loop(setup: ThreadSetup) -> (Duration, u64, Vec<Interval>, Option<UserRecord>) {
    let ThreadSetup {
        index,
        plan,
        origin,
        deadline,
        connections,
        source,
        clock,
        expected,
        max_connections_per_endpoint,
        user_curve,
        mut stop,
        tx,
    } = setup;
    let open = matches!(source, Source::Open);
    let users = plan.model.users().map(|_| {
        let cap = max_connections_per_endpoint * plan.endpoints.len();
        UsersState::new(plan.clone(), cap)
    });
    let ctx: Ctx = Rc::new(ThreadCtx::new(
        &plan,
        origin,
        source,
        expected,
        max_connections_per_endpoint,
        users,
        (index, tx),
    ));
    sleep_until(origin).await;
    for (ep, rotation) in connections {
        let e = &ctx.endpoints[ep];
        e.connections.set(e.connections.get() + 1);
        spawn_local(drive(ctx.clone(), ep, rotation, open));
    }
    let clock = clock.map(|(clock, stride)| {
        let clock = Rc::new(RefCell::new(clock));
        spawn_local(schedule(ctx.clone(), clock.clone(), index, stride));
        clock
    });
    if let Some((curve, threads)) = user_curve {
        spawn_local(user::control(ctx.clone(), curve, index, threads));
    }
    if expected == Some(0) {
        ctx.all_done.notify_one();
    }
    let mut second = 0u64;
    let mut interrupted = false;
    loop {
        let boundary = origin + Duration::from_secs(second + 1);
        let wake = deadline.map_or(boundary, |d| d.min(boundary));
        tokio::select! {
            _ = sleep_until(wake) => {}
            _ = ctx.all_done.notified() => break,
            _ = stop.changed() => {
                interrupted = true;
                break;
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        ctx.rotate(Instant::now());
        second += 1;
    }
    let schedule_end = Instant::now();
    let open_users = clock.is_some() && ctx.users.is_some();
    if let Some(clock) = clock {
        // Arrivals due before the end that a late scheduler never released were offered all
        // the same; they count as offered and dropped, so the schedule's count stays exact.
        let mut overdue = 0;
        let end_offset = schedule_end.saturating_duration_since(origin);
        clock.borrow_mut().release_due(end_offset, |_| overdue += 1);
        ctx.rec_at(schedule_end).counts.offered += overdue;
        ctx.record_dropped(overdue);
    }
    if open_users && !interrupted {
        // As Artillery does, users who arrived let their sessions finish; for at most the
        // request timeout, so a session that loops forever cannot hold the run.
        let grace = schedule_end + ctx.timeout;
        let users = ctx.users.as_ref().expect("checked above");
        loop {
            let boundary = origin + Duration::from_secs(second + 1);
            tokio::select! {
                _ = sleep_until(boundary.min(grace)) => {}
                _ = users.drained() => break,
                _ = stop.changed() => break,
            }
            if Instant::now() >= grace {
                break;
            }
            ctx.rotate(Instant::now());
            second += 1;
        }
    }
    let end = Instant::now();
    ctx.drop_all_queued();
    let unfinished = ctx.in_flight.get();
    ctx.rotate(end);
    // The last, partial second; skipped when nothing happened in it (a run that ends on a
    // second's boundary would otherwise get an empty trailing row).
    let (last, idle) = {
        let rec = ctx.rec.borrow();
        let c = &rec.counts;
        (
            rec.second,
            c.sent + c.completed + c.offered + c.dropped == 0,
        )
    };
    if !idle || last == 0 {
        ctx.send_current(last + 1);
    }
    let by_name = ctx
        .by_name
        .as_ref()
        .map(|b| b.replace(Vec::new()))
        .unwrap_or_default();
    let users = ctx.users.as_ref().map(|u| u.record.take());
    (
        end.saturating_duration_since(origin),
        unfinished,
        by_name,
        users,
    )
}

/// Open model: releases this thread's arrivals at their times; `stride` is the number of
/// threads, so arrival indices interleave across threads for round-robin over the requests.
async fn schedule(ctx: Ctx, clock: Rc<RefCell<ArrivalClock>>, first_index: usize, stride: usize) {
    let mut index = first_index;
    let timer = PreciseTimer::new().ok();
    loop {
        let now = Instant::now();
        let offset = now.saturating_duration_since(ctx.origin);
        let next = {
            let mut clock = clock.borrow_mut();
            clock.release_due(offset, |t| {
                release(&ctx, ctx.origin + t, now, index);
                index = index.wrapping_add(stride);
            });
            clock.peek()
        };
        ctx.drop_stale(now);
        let Some(t) = next else { break };
        let next = ctx.origin + t;
        match &timer {
            Some(timer) if timer.sleep_until(next).await.is_ok() => {}
            _ => sleep_until(next).await,
        }
    }
}

/// Releases arrival `index` (counted across threads): with a user model it is a user starting
/// a session; otherwise a request of the round robin, queued for its endpoint, and a
/// connection is made sure to take it — an idle one if any, else a new one while under the
/// cap; past the cap it waits in the queue.
fn release(ctx: &Ctx, intended: Instant, now: Instant, index: usize) {
    {
        let mut rec = ctx.rec_at(now);
        rec.counts.offered += 1;
        rec.lag
            .saturating_record(micros(now.saturating_duration_since(intended)));
    }
    if ctx.users.is_some() {
        user::arrive(ctx, intended, index as u64);
        return;
    }
    let template = index % ctx.requests.len();
    let ep = ctx.requests[template].endpoint;
    let e = &ctx.endpoints[ep];
    e.queue.borrow_mut().push_back(Pending {
        intended: Some(intended),
        template,
    });
    if e.idle.get() > 0 {
        e.idle.set(e.idle.get() - 1);
        e.work.notify_one();
    } else if e.connections.get() < e.max_connections {
        e.connections.set(e.connections.get() + 1);
        spawn_local(drive(ctx.clone(), ep, 0, false));
    }
}
