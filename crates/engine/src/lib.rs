//! The load engine: executes a [`Plan`] with one event loop per generator thread and turns
//! what happened into [`RunData`] (plan → engine → records → run). This file is its top
//! layer: [`run`] starts the threads, and the collector merges what they record.
//!
//! Threads record into their own per-second [`Interval`]s and hand them over once a second;
//! the collector merges them in order, so no request ever takes a lock.
//!
//! The layers, each using only those below it:
//! - scheduling, pure or leaves: `schedule`, `http1`'s encoding and parsing, `precise_timer`,
//!   `usage`, `limits`;
//! - recording: `record`, the per-thread recorder and the messages to the collector;
//! - connections, bottom up: `tls`, the run's TLS client and the plain-or-TLS stream;
//!   `http2`, shared HTTP/2 connections and the exchange on a stream; `conn`, a connection of
//!   either protocol and the one send step, with inside it `conn::dialer` (opening a
//!   connection), `conn::exchange` (what an exchange carries whatever the protocol: the
//!   thread's wire, the answer, why it failed) and `conn::http1` (an HTTP/1.1 connection and
//!   its exchange of pipelined requests); `connect`, the paced opening of the initial
//!   connections before the load;
//! - work: `pool` (pooled connections of the closed and open models), `session` (virtual
//!   users) and `pace` (the open model's arrivals), none using another;
//! - the thread: `mode` (its state by the plan's model), then `worker` (its event loop and
//!   once-a-second loop);
//! - `run` and the collector, here.

#![deny(missing_docs)]

mod conn;
mod connect;
mod growth;
mod grpc_stream;
mod locust;

/// A locustfile's Python helpers: what they need on this machine, and what a file holds.
pub mod locustfile {
    pub use crate::locust::{
        describe, discard, package, python, read_message, start_first, ClassTask, First,
        RequestParts, Settings, UserClass, GEVENT,
    };
}
pub mod http1;
mod http2;
pub mod limits;
mod mode;
mod pace;
mod pool;
mod precise_timer;
mod record;
pub mod schedule;
mod session;
mod tls;
mod trace;
mod usage;
mod worker;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use loadlab_run::hlog::SecondsLog;
use loadlab_run::{
    Arrivals, ConnectStats, GeneratorStats, Interval, Model, PacingStats, PhaseRecord, Plan,
    RunData, TimelineRow, Timings, TraceRecord, UserRecord, ValidPlan,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::limits::LimitError;
use crate::mode::Load;
use crate::record::{Msg, ThreadEnd};
use crate::schedule::share_of;
pub use crate::session::hooks::ProcessorError;
use crate::tls::TlsClient;
pub use crate::tls::TlsSetupError;
use crate::worker::{run_thread, ThreadSetup};

/// Time between the threads' having connected and the run's origin, so every thread is ready
/// for it.
const STARTUP: Duration = Duration::from_millis(20);

/// The engine could not run the plan.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A generator thread or its event loop could not start.
    #[error("cannot start a generator thread: {0}")]
    Thread(std::io::Error),
    /// The system would not let the plan run (open files, local ports, source addresses).
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// The plan's TLS settings cannot be used (a CA file, a host name).
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The script's processor did not load (Artillery exits 11 on it).
    #[error(transparent)]
    Processor(#[from] ProcessorError),
}

/// A generator thread's failure to start as the run's error: a processor that did not load
/// keeps its own type (its exit code is Artillery's), anything else is the thread's.
fn thread_failure(e: std::io::Error) -> EngineError {
    if !e.get_ref().is_some_and(|r| r.is::<ProcessorError>()) {
        return EngineError::Thread(e);
    }
    match e.into_inner().map(|r| r.downcast::<ProcessorError>()) {
        Some(Ok(p)) => EngineError::Processor(*p),
        // The type was checked just above; this arm only keeps the match total.
        _ => EngineError::Thread(std::io::Error::other("the processor failed to load")),
    }
}

/// Stops a run early (Ctrl-C); the run still returns what it recorded, marked incomplete.
#[derive(Debug, Clone)]
pub struct StopSignal(Arc<watch::Sender<bool>>);

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal(Arc::new(watch::channel(false).0))
    }
}

impl StopSignal {
    /// Asks the run to stop.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// True once [`StopSignal::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }
}

/// Generator threads the plan can use: no more than connections allow (each thread gets at
/// least one connection per endpoint) and no more than requests to send.
fn effective_threads(plan: &Plan) -> usize {
    let endpoints = plan.endpoints.len().max(1);
    let (_, most) = plan.model.connection_bounds();
    let per_connections = match &plan.model {
        Model::Open {
            arrivals: Arrivals::Requests { .. },
            ..
        }
        | Model::Closed { .. } => most / endpoints,
        // Sessions and users open their own connections.
        _ => most,
    };
    let mut t = plan.threads.min(per_connections.max(1));
    // Users sharing `config.http.pool` hold no more connections than it has: each thread
    // holds a share of at least one.
    if let Some(pool) = plan.model.users().and_then(|u| u.pool) {
        t = t.min(pool.max(1));
    }
    if let Some(n) = plan.stop.count {
        t = t.min(n.clamp(1, usize::MAX as u64) as usize);
    }
    t.max(1)
}

/// Sleeps until shortly before the plan's start time (`--start-at`), leaving the time its
/// initial connections take to open at the plan's connect rate, and a second more; returns at
/// once without a start time, or when `stop` is asked.
fn wait_for_start(plan: &Plan, stop: &StopSignal) {
    let Some(at) = plan.start_at else { return };
    let (initial, _) = plan.model.connection_bounds();
    let lead = Duration::from_secs_f64(initial as f64 / plan.connect_rate + 1.0);
    let wake = at.checked_sub(lead).unwrap_or(at);
    while let Ok(left) = wake.duration_since(SystemTime::now()) {
        if stop.is_stopped() || left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Runs `plan` to its end (or until `stop`), calling `on_second` with each second's row and
/// merged interval as soon as every thread has reported it. The threads first open their
/// initial connections at the plan's connect rate; the run's origin (the start of its duration
/// and of every latency) is set once they all have, or at the plan's start time if that is
/// later.
pub fn run(
    plan: &ValidPlan,
    stop: &StopSignal,
    mut on_second: impl FnMut(&TimelineRow, &Interval),
) -> Result<RunData, EngineError> {
    let plan: &Plan = plan;
    wait_for_start(plan, stop);
    let threads = effective_threads(plan);
    // At least one, for the shares below: users whose functions send all the traffic have no
    // endpoint, and open no connection.
    let endpoints = plan.endpoints.len().max(1);
    let plan_arc = Arc::new(plan.clone());
    let tls = TlsClient::for_plan(plan)?;
    let limits = limits::prepare(plan, threads)?;
    let load = Load::of(plan);
    let mut cpu_before = usage::process_cpu();
    let (tx, rx) = mpsc::channel();
    let (origin_tx, origin_rx) = watch::channel(None);

    let (initial, max_total) = plan.model.connection_bounds();
    // Over HTTP/2 each connection carries `streams` requests at once: the pooled model runs
    // that many slots per connection, and each thread's dialer packs its slots onto shared
    // connections (consecutive slots of an endpoint share one).
    let streams = plan.protocol.streams();
    let max_per_endpoint = max_total.div_ceil(threads * endpoints).max(1) * streams;
    let mut connections: Vec<Vec<(usize, usize)>> = vec![Vec::new(); threads];
    for c in 0..initial {
        for s in 0..streams {
            let rotation = c / endpoints * streams + s;
            connections[(c / endpoints) % threads].push((c % endpoints, rotation));
        }
    }

    let mut handles = Vec::with_capacity(threads);
    let mut spares = Vec::with_capacity(threads);
    for (index, conns) in connections.into_iter().enumerate() {
        // One emptied second waits for each thread from the start, allocated here before the
        // load: the thread's first second ends before the collector can send one back.
        let (spare_tx, spare_rx) = mpsc::channel();
        let _ = spare_tx.send(Box::new(Interval::new(0)));
        spares.push(spare_tx);
        let expected = plan.stop.count.map(|n| share_of(n, index, threads));
        let setup = ThreadSetup {
            index,
            threads,
            plan: plan_arc.clone(),
            load: load.clone(),
            origin: origin_rx.clone(),
            connections: conns,
            expected,
            max_connections_per_endpoint: max_per_endpoint,
            stop: stop.0.subscribe(),
            tx: tx.clone(),
            spares: spare_rx,
            tls: tls.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("loadlab-gen-{index}"))
            .spawn(move || run_thread(setup))
            .map_err(EngineError::Thread)?;
        handles.push(handle);
    }
    drop(tx);

    let mut collector = Collector::new(plan, spares);
    let mut failure = None;
    let mut connect = ConnectStats {
        rate_per_s: plan.connect_rate,
        file_limit: limits.file_limit,
        ..ConnectStats::default()
    };
    // Threads still opening their connections; the origin is sent when none is left.
    let mut connecting = Some(threads);
    let mut started_at = SystemTime::now();
    // A run its users ended (a locustfile's `runner.quit()`, its shape's end) is complete.
    let mut ended_by_users = false;
    for msg in rx {
        match msg {
            Msg::Finish => {
                // Each helper's users may end it: the first one's end counts, a later one
                // (after the stop it raised) must not read as an interruption.
                ended_by_users |= !stop.is_stopped();
                stop.stop();
            }
            Msg::Connected(mine) => {
                connect.merge(&mine);
                connecting = connecting.map(|n| n - 1);
            }
            Msg::Interval(t, iv) => collector.add(t, iv),
            Msg::End(t, end) => collector.end(t, *end),
            Msg::Failed(t, e) => {
                stop.stop();
                collector.done[t] = true;
                failure = Some(e);
                connecting = connecting.map(|n| n - 1);
            }
        }
        if connecting == Some(0) {
            connecting = None;
            cpu_before = usage::process_cpu();
            let (now_wall, now) = (SystemTime::now(), Instant::now());
            let lead = plan
                .start_at
                .and_then(|at| at.duration_since(now_wall).ok())
                .unwrap_or_default()
                .max(STARTUP);
            started_at = now_wall + lead;
            origin_tx.send_replace(Some(now + lead));
        }
        collector.finalize_ready(&mut on_second);
    }
    for h in handles {
        let _ = h.join();
    }
    if let Some(e) = failure {
        return Err(thread_failure(e));
    }
    let generator = GeneratorStats {
        cpu_s: (usage::process_cpu().saturating_sub(cpu_before)).as_secs_f64(),
        max_rss_mb: usage::max_rss_mb(),
        busiest_thread_utilization: collector.busiest,
        threads,
        connect,
        pacing: collector.pacing,
    };
    Ok(RunData {
        plan: plan.clone(),
        started_at,
        elapsed: collector.elapsed,
        complete: !stop.is_stopped() || ended_by_users,
        totals: collector.totals,
        phases: collector.phases,
        by_name: collector.by_name,
        users: plan
            .model
            .users()
            .map(|_| collector.users.unwrap_or_default()),
        timeline: collector.timeline,
        hlog_lines: collector.hlog.into_lines(),
        unfinished: collector.unfinished,
        generator,
        server: None,
        timings: collector.timings,
        profile: None,
        traces: collector.traces,
        scaling: None,
    })
}

/// Merges the threads' per-second intervals in order.
struct Collector {
    /// Seconds not yet final: the threads' intervals merged into the first one's, with the
    /// thread it came from.
    pending: BTreeMap<u64, (usize, Box<Interval>)>,
    /// Where each thread gets its merged seconds back, emptied, to fill again.
    spares: Vec<mpsc::Sender<Box<Interval>>>,
    last_second: Vec<Option<u64>>,
    done: Vec<bool>,
    totals: Interval,
    phases: Vec<PhaseRecord>,
    by_name: Vec<(String, Interval)>,
    timeline: Vec<TimelineRow>,
    hlog: SecondsLog,
    unfinished: u64,
    elapsed: Duration,
    busiest: f64,
    users: Option<UserRecord>,
    timings: Timings,
    pacing: PacingStats,
    /// The sampled requests' count and slowest spans.
    traces: TraceRecord,
}

impl Collector {
    fn new(plan: &Plan, spares: Vec<mpsc::Sender<Box<Interval>>>) -> Self {
        let threads = spares.len();
        Collector {
            spares,
            phases: PhaseRecord::for_plan(plan),
            by_name: Vec::new(),
            pending: BTreeMap::new(),
            last_second: vec![None; threads],
            done: vec![false; threads],
            totals: Interval::new(0),
            timeline: Vec::new(),
            hlog: SecondsLog::new(),
            unfinished: 0,
            elapsed: Duration::ZERO,
            busiest: 0.0,
            users: None,
            timings: Timings::new(),
            pacing: PacingStats::default(),
            traces: TraceRecord::default(),
        }
    }

    fn add(&mut self, thread: usize, iv: Box<Interval>) {
        self.last_second[thread] = Some(iv.second);
        match self.pending.get_mut(&iv.second) {
            Some((_, merged)) => {
                merged.merge(&iv);
                self.recycle(thread, iv);
            }
            None => {
                self.pending.insert(iv.second, (thread, iv));
            }
        }
    }

    /// Empties a merged second and sends it back to `thread` to fill again (the thread may
    /// have ended: then it is freed).
    fn recycle(&self, thread: usize, mut iv: Box<Interval>) {
        iv.reset(0);
        let _ = self.spares[thread].send(iv);
    }

    fn end(&mut self, thread: usize, end: ThreadEnd) {
        self.done[thread] = true;
        self.unfinished += end.unfinished;
        // By name: the plan's names are every thread's, a locustfile's come as its users
        // make them.
        for (name, mine) in end.by_name {
            match self.by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, all)) => all.merge(&mine),
                None => self.by_name.push((name, mine)),
            }
        }
        self.timings.merge(&end.timings);
        self.pacing.merge(&end.pacing);
        if let Some(mine) = &end.users {
            self.users.get_or_insert_with(UserRecord::new).merge(mine);
        }
        self.elapsed = self.elapsed.max(end.elapsed);
        let wall = end.elapsed.as_secs_f64().max(1e-3);
        self.busiest = self.busiest.max(end.cpu.as_secs_f64() / wall);
    }

    /// A second is final once every thread has reported it or stopped.
    fn ready(&self, second: u64) -> bool {
        self.done
            .iter()
            .zip(&self.last_second)
            .all(|(done, last)| *done || last.is_some_and(|l| l >= second))
    }

    fn finalize_ready(&mut self, on_second: &mut impl FnMut(&TimelineRow, &Interval)) {
        while let Some((&second, _)) = self.pending.first_key_value() {
            if !self.ready(second) {
                break;
            }
            let (thread, mut iv) = self.pending.remove(&second).expect("key exists");
            let row = TimelineRow::from_interval(&iv);
            on_second(&row, &iv);
            // The second's spans went out with it; the run keeps only the slowest.
            self.traces.add(&iv.spans);
            iv.spans.clear();
            self.hlog.write(iv.second, &iv.latency, &iv.service);
            self.totals.merge(&iv);
            let phase = PhaseRecord::index_of(&self.phases, iv.second);
            self.phases[phase].totals.merge(&iv);
            self.timeline.push(row);
            self.recycle(thread, iv);
        }
    }
}

#[cfg(test)]
mod tests {
    use loadlab_run::Stop;

    use super::*;

    /// A second of one request answered in `us` µs.
    fn second(n: u64, us: u64) -> Box<Interval> {
        let mut iv = Box::new(Interval::new(n));
        iv.counts.completed = 1;
        iv.latency.record(us).unwrap();
        iv.service.record(us).unwrap();
        iv
    }

    #[test]
    fn merged_seconds_go_back_to_their_threads_empty_and_count_once() {
        let addr = "127.0.0.1:9".parse().unwrap();
        let plan = Plan::get(addr, "/", Model::open(10.0, 1, 1), Stop::default());
        let (to_0, spares_0) = mpsc::channel();
        let (to_1, spares_1) = mpsc::channel();
        let mut c = Collector::new(&plan, vec![to_0, to_1]);
        for n in 0..3 {
            c.add(1, second(n, 100));
            c.add(0, second(n, 200));
        }
        c.finalize_ready(&mut |_, _| {});
        // Every thread has reported every second: all three are final.
        assert_eq!(c.timeline.len(), 3);
        assert_eq!(c.totals.counts.completed, 6);
        assert_eq!(c.totals.latency.len(), 6);
        assert_eq!(c.totals.latency.max(), 200);
        // Thread 1's seconds came first and took thread 0's in: each thread gets its own back.
        let back_0: Vec<Box<Interval>> = spares_0.try_iter().collect();
        let back_1: Vec<Box<Interval>> = spares_1.try_iter().collect();
        assert_eq!((back_0.len(), back_1.len()), (3, 3));
        for iv in back_0.iter().chain(&back_1) {
            assert_eq!(iv.counts.completed, 0);
            assert!(iv.latency.is_empty() && iv.service.is_empty() && iv.lag.is_empty());
        }
    }
}
