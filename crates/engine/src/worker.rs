//! A generator thread (thread-loop layer, below `run`): its own single-threaded event loop,
//! which opens the thread's initial connections, waits for the run's origin (set once every
//! thread has connected), runs its mode's tasks from there, and hands its record to the
//! collector once a second until the run ends.

use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::users::UserModel;
use loadlab_run::{Interval, Plan};
use tokio::sync::watch;
use tokio::task::LocalSet;
use tokio::time::{sleep_until, Instant};

use crate::conn::dialer::Dialer;
use crate::connect::open_paced;
use crate::mode::{Load, Mode};
use crate::precise_timer::PreciseTimer;
use crate::record::{Msg, Recorder, ThreadEnd};
use crate::session::Hooks;
use crate::tls::TlsClient;
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
    /// The run's origin, sent once every thread has opened its initial connections.
    pub origin: watch::Receiver<Option<Instant>>,
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
    /// Where the collector sends back the seconds it emptied, for reuse.
    pub spares: Receiver<Box<Interval>>,
    /// The run's TLS client, shared by every thread, when the plan has `https://` endpoints.
    pub tls: Option<Arc<TlsClient>>,
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
    let end = local.block_on(&rt, run_loop(setup));
    drop(local);
    drop(rt);
    match end {
        Ok(end) => {
            let _ = tx.send(Msg::End(index, Box::new(end)));
        }
        Err(e) => {
            let _ = tx.send(Msg::Failed(index, e));
        }
    }
}

/// Opens the thread's initial connections, then runs its mode from the origin to the end of
/// the run. The CPU time of the end it returns is the thread's at the origin: the caller
/// subtracts it from the thread's total once the event loop is gone, so the connects are not
/// counted in the load's CPU. The error is a processor whose Node.js helper did not start.
async fn run_loop(setup: ThreadSetup) -> std::io::Result<ThreadEnd> {
    let ThreadSetup {
        index,
        threads,
        plan,
        load,
        mut origin,
        connections,
        expected,
        max_connections_per_endpoint,
        mut stop,
        tx,
        spares,
        tls,
    } = setup;
    // The processor's helper loads before the origin, so Node.js's start is in no latency.
    let hooks = match load.user_model().and_then(|m| m.processor.as_ref()) {
        Some(p) => match Hooks::start(p).await {
            Ok(h) => {
                if index == 0 {
                    warn_missing_functions(load.user_model(), &h.functions);
                }
                Some(Rc::new(h))
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let helper = hooks.clone();
    // A locustfile's helper imports the file before the origin too.
    let python = match (&load, load.user_model().and_then(|m| m.locust.as_ref())) {
        (Load::Locust(..), Some(spec)) => {
            let seed = load.user_model().map_or(0, |m| m.seed);
            Some(crate::locust::start_helper(spec, (index, threads), seed).await?)
        }
        _ => None,
    };
    let dialer = Rc::new(Dialer::new(&plan, index, tls));
    let rate = plan.connect_rate / threads as f64;
    let (initial, connected) = tokio::select! {
        opened = open_paced(&dialer, &connections, rate) => opened,
        _ = stop.changed() => (Vec::new(), Default::default()),
    };
    let _ = tx.send(Msg::Connected(connected));
    let origin = match origin.wait_for(Option::is_some).await {
        Ok(at) => (*at).unwrap_or_else(Instant::now),
        Err(_) => Instant::now(),
    };
    let deadline = plan.scheduled_duration().map(|d| origin + d);
    let rec = Recorder::new(&plan, origin, expected, (index, tx)).recycling(spares);
    let mode = Mode::new(
        &plan,
        load,
        (rec, dialer),
        (index, threads),
        expected,
        max_connections_per_endpoint,
        (hooks, python),
    );
    let rec = &mode.wire().rec;
    // On the precise timer: tokio's wakes up to a millisecond late, and the open model's
    // pacer would start with that millisecond's arrivals due at once.
    match PreciseTimer::new() {
        Ok(timer) if timer.sleep_until(origin).await.is_ok() => {}
        _ => sleep_until(origin).await,
    }
    // The thread's CPU counts from here, as `elapsed` does: making the recorder and the mode
    // before the origin (milliseconds in a debug build) read as 240 % busy on a 3 ms run.
    let cpu_at_origin = thread_cpu();
    mode.start(initial, (index, threads));
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
    if let Some(locust) = mode.locust() {
        // Locust's --stop-timeout: the users finish their task within it; then their on_stop,
        // test_stop and quitting run (the helper gives those 10 s).
        // After Ctrl-C too, as Locust: a second Ctrl-C ends the process (the handler's), so
        // this wait listens to no stop signal, and its limit bounds it.
        locust.stop();
        let limit = Some(schedule_end + locust.stop_timeout() + Duration::from_secs(11));
        let (_kept, mut no_stop) = watch::channel(false);
        seconds(
            rec,
            &mut second,
            limit,
            locust.until_stopped(),
            &mut no_stop,
        )
        .await;
    }
    if let Some(arrivals) = mode.arrivals() {
        if ended != Ended::Stopped {
            // As Artillery does, users who arrived finish their sessions, however long that
            // takes (Ctrl-C stops them); where a session loops until the run ends, for the
            // request timeout.
            let grace = arrivals
                .users
                .model
                .has_endless_loop()
                .then(|| schedule_end + arrivals.users.wire.timeout);
            seconds(rec, &mut second, grace, arrivals.drained(), &mut stop).await;
        }
    }
    let end = Instant::now();
    mode.drop_queued();
    let unfinished = rec.in_flight.get();
    rec.flush(end);
    let end = ThreadEnd {
        cpu: thread_cpu().saturating_sub(cpu_at_origin),
        elapsed: end.saturating_duration_since(origin),
        unfinished,
        by_name: match mode.locust() {
            Some(locust) => locust.take_names(),
            None => plan
                .request_names()
                .0
                .into_iter()
                .zip(rec.take_by_name())
                .collect(),
        },
        users: mode.take_user_record(),
        timings: rec.take_timings(),
        pacing: rec.take_pacing(),
    };
    if let Some(h) = helper {
        h.stop().await;
    }
    if let Some(locust) = mode.locust() {
        locust.kill().await;
    }
    Ok(end)
}

/// Warns once about functions the script names that its processor does not export (Artillery
/// skips such a hook with a warning at each call).
fn warn_missing_functions(model: Option<&UserModel>, exported: &[String]) {
    let Some(model) = model else { return };
    for name in model.function_names() {
        if !exported.iter().any(|e| e == name) {
            eprintln!(
                "warning: config.processor does not export {name}; each call of it is skipped"
            );
        }
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
        // A stop seen earlier (while connecting) does not show as a change any more.
        if *stop.borrow() {
            return Ended::Stopped;
        }
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
