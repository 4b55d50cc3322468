//! A generator thread (thread-loop layer, below `run`): its own single-threaded event loop
//! running its mode's tasks from the run's origin, and the one once-a-second loop that hands
//! its record to the collector until the run ends.

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::Plan;
use tokio::sync::watch;
use tokio::task::LocalSet;
use tokio::time::{sleep_until, Instant};

use crate::mode::{Load, Mode};
use crate::record::{Msg, Recorder, ThreadEnd};
use crate::usage::thread_cpu;

/// Everything one thread needs to run its share of the plan.
pub struct ThreadSetup {
    /// This thread's index.
    pub index: usize,
    /// The number of threads.
    pub threads: usize,
    /// The plan.
    pub plan: Arc<Plan>,
    /// What the plan's model asks of the thread.
    pub load: Load,
    /// The run's origin.
    pub origin: Instant,
    /// When to stop, if the run has a duration.
    pub deadline: Option<Instant>,
    /// Initial connections: (endpoint, rotation) pairs.
    pub connections: Vec<(usize, usize)>,
    /// This thread's share of the run's count.
    pub expected: Option<u64>,
    /// Connection cap per endpoint.
    pub max_connections_per_endpoint: usize,
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
    let mut end = local.block_on(&rt, run_loop(setup));
    drop(local);
    drop(rt);
    end.cpu = thread_cpu();
    let _ = tx.send(Msg::End(index, end));
}

/// Runs the thread's mode from the origin to the end of the run; the CPU time of the end it
/// returns is left for the caller to measure once the event loop is gone.
async fn run_loop(setup: ThreadSetup) -> ThreadEnd {
    let ThreadSetup {
        index,
        threads,
        plan,
        load,
        origin,
        deadline,
        connections,
        expected,
        max_connections_per_endpoint,
        mut stop,
        tx,
    } = setup;
    let rec = Recorder::new(&plan, origin, expected, (index, tx));
    let mode = Mode::new(
        &plan,
        load,
        rec,
        (index, threads),
        expected,
        max_connections_per_endpoint,
    );
    let rec = &mode.wire().rec;
    sleep_until(origin).await;
    mode.start(connections, (index, threads));
    if expected == Some(0) {
        rec.all_done.notify_one();
    }
    let mut second = 0u64;
    let ended = seconds(
        rec,
        &mut second,
        deadline,
        rec.all_done.notified(),
        &mut stop,
    )
    .await;
    let schedule_end = Instant::now();
    mode.end_schedule(schedule_end);
    if let Some(arrivals) = mode.arrivals() {
        if ended != Ended::Stopped {
            // As Artillery does, users who arrived let their sessions finish; for at most the
            // request timeout, so a session that loops forever cannot hold the run.
            let grace = schedule_end + arrivals.users.wire.timeout;
            seconds(rec, &mut second, Some(grace), arrivals.drained(), &mut stop).await;
        }
    }
    let end = Instant::now();
    mode.drop_queued();
    let unfinished = rec.in_flight.get();
    rec.flush(end);
    ThreadEnd {
        cpu: Duration::ZERO,
        elapsed: end.saturating_duration_since(origin),
        unfinished,
        by_name: rec.take_by_name(),
        users: mode.take_user_record(),
    }
}

/// How a stretch of seconds ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Its end time came.
    Due,
    /// What it waited for happened.
    Done,
    /// The run was stopped.
    Stopped,
}

/// The thread's once-a-second loop: from `*second` on, sends each second's record to the
/// collector at the second's boundary, until `end` passes, `done` resolves or the run is
/// stopped.
async fn seconds(
    rec: &Recorder,
    second: &mut u64,
    end: Option<Instant>,
    done: impl Future<Output = ()>,
    stop: &mut watch::Receiver<bool>,
) -> Ended {
    let mut done = pin!(done);
    loop {
        let boundary = rec.origin + Duration::from_secs(*second + 1);
        let wake = end.map_or(boundary, |d| d.min(boundary));
        tokio::select! {
            _ = sleep_until(wake) => {}
            _ = &mut done => return Ended::Done,
            _ = stop.changed() => return Ended::Stopped,
        }
        if end.is_some_and(|d| Instant::now() >= d) {
            return Ended::Due;
        }
        rec.rotate(Instant::now());
        *second += 1;
    }
}
