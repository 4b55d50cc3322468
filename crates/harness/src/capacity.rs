//! The capacity search as a job: a closed-loop climb to the service's plateau (for a URL), then
//! one open-model run per rate (a warm-up, discarded, then the measured part), each rate chosen
//! by the analysis from the steps so far, with the service drained between steps. The rate
//! counts requests to a URL, or users' sessions of a scenario file.

use std::time::{Duration, Instant};

use loadlab_analyze::capacity::{
    best_step, bracket, done_because, first_rate, hold_to_overloads, judge, levelled, next_rate,
    only_confirms, plateau_rps, plateau_step, step_seconds, RateStep, Search, Window,
};
use loadlab_analyze::probe::{Next, ProbeStep};
use loadlab_analyze::Slo;
use loadlab_engine::StopSignal;
use loadlab_input::{CapacityFlags, UrlTarget, Work};
use loadlab_run::lab::WorkUnit;
use loadlab_run::{RunData, Summary};

use crate::steps::{closed_step, drain, usual_alone_ms, warmed_rate_step, Alone};
use crate::Result;

/// What the search looks for and its bounds.
#[derive(Debug, Clone)]
pub struct CapacitySearch {
    /// The objective a rate's steady state must meet.
    pub slo: Slo,
    /// First rate tried; `None` climbs to the plateau for it.
    pub start_rps: Option<f64>,
    /// Highest rate tried.
    pub max_rate_rps: f64,
    /// Stop when the failing rate is within this fraction of the passing one.
    pub tolerance: f64,
    /// Each rate's warm-up, discarded (whole seconds).
    pub warmup: Duration,
    /// Each rate's shortest measured part (whole seconds); a step lasts longer when the
    /// objective's percentile needs more requests for its 95 % bound.
    pub measured: Duration,
    /// Longest the whole search may take; the climb takes at most a third of it.
    pub max_time: Duration,
    /// Most connections: the climb's last step, and each rate's cap.
    pub max_connections: usize,
    /// Generator threads of each rate's run.
    pub threads: usize,
    /// What is watched during each rate's run (a lab cell's topology's processes and
    /// budgets), so each step's summary says what the service used.
    pub watch: crate::Watch,
}

impl CapacitySearch {
    /// The search `flags` describe, aiming at `slo`.
    pub fn new(slo: Slo, flags: &CapacityFlags) -> CapacitySearch {
        CapacitySearch {
            slo,
            start_rps: flags.start,
            max_rate_rps: flags.max_rate,
            tolerance: flags.tolerance,
            warmup: flags.warmup,
            measured: flags.step,
            max_time: flags.max_time,
            max_connections: flags.max_connections,
            threads: flags.threads.unwrap_or_else(loadlab_run::defaults::threads),
            watch: crate::Watch::default(),
        }
    }
}

/// What the closed-loop climb found.
#[derive(Debug, Clone, PartialEq)]
pub struct Plateau {
    /// The plateau's throughput, req/s; the first rate tried is a little under it.
    pub rps: f64,
    /// Connections of the climb's last step.
    pub connections: usize,
    /// Mean latency of the climb's one-connection step, ms: a request's time alone, over
    /// many requests.
    pub alone_ms: f64,
    /// What a request alone usually takes at most, ms (the one-connection step's mean plus
    /// one standard deviation): what the drains between steps wait for.
    pub usual_ms: f64,
    /// Whether throughput stopped growing (or a step failed) before the climb ended; when
    /// false the climb's time or connections ran out first and `rps` is only a lower bound.
    pub levelled: bool,
    /// How long the climb took, seconds.
    pub seconds: f64,
}

/// The search's progress, reported as it happens.
pub enum Progress<'a> {
    /// The climb is over (or skipped, with a first rate given): its plateau when it found one.
    /// The rate steps follow.
    Climbed(Option<&'a Plateau>),
    /// A rate was measured.
    Step(&'a RateStep),
}

/// What a capacity search found: the climb's plateau, every rate step, and why it stopped.
#[derive(Debug, Clone)]
pub struct Capacity {
    /// The climb's plateau; `None` with a first rate given or when no climb step completed.
    pub plateau: Option<Plateau>,
    /// Every rate step, in order.
    pub steps: Vec<RateStep>,
    /// Each rate step's run and its summary (warm-up and measured part), in the same order.
    pub runs: Vec<(RunData, Summary)>,
    /// What each rate counts: requests, or users' sessions.
    pub unit: WorkUnit,
    /// Why the search stopped.
    pub stopped_because: String,
}

impl Capacity {
    /// The highest rate that met the objective and the lowest that broke it.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        bracket(&self.steps)
    }

    /// The step at the highest rate that met the objective.
    pub fn best(&self) -> Option<&RateStep> {
        best_step(&self.steps).map(|i| &self.steps[i])
    }

    /// What the search found against `url` (or the scenario file) and the objective `slo` (as
    /// written), as `capacity --json` and a lab cell's `capacity.json` hold it.
    pub fn result(&self, url: &str, slo: &str) -> loadlab_run::lab::CapacityResult {
        let (lo, hi) = self.bracket();
        let best = self.best();
        loadlab_run::lab::CapacityResult {
            url: url.to_string(),
            unit: self.unit,
            max_rate_rps: lo,
            plateau_rps: self.plateau.as_ref().map(|p| p.rps),
            slo: slo.to_string(),
            broke_at_rps: hi,
            p50_ms: best.map(|s| s.p50_ms),
            p99_ms: best.map(|s| s.p99_ms),
            stopped_because: self.stopped_because.clone(),
            steps: self.steps.clone(),
        }
    }

    /// The index of the step (and run) at the highest rate that met the objective, or, when
    /// none did, at the lowest rate tried; `None` without steps.
    pub fn best_index(&self) -> Option<usize> {
        best_step(&self.steps).or_else(|| {
            (0..self.steps.len())
                .min_by(|a, b| self.steps[*a].rate_rps.total_cmp(&self.steps[*b].rate_rps))
        })
    }
}

/// Searches the capacity of `work` (a URL's requests, or a scenario file's users' sessions) as
/// `search` asks, reporting each stage to `on_progress` as it ends. `alone` is one unit run
/// alone (its requests' time is the queue-free time the drains wait for); the search's time
/// (`max_time`) counts from `started`. A URL's search climbs to its plateau first; a script's
/// users think between requests, so connections in a closed loop say little of the rate of
/// sessions it serves, and its search starts from the rate its requests' time alone allows.
pub fn capacity(
    work: &Work,
    alone: Alone,
    started: Instant,
    search: &CapacitySearch,
    stop: &StopSignal,
    mut on_progress: impl FnMut(Progress),
) -> Result<Capacity> {
    let climbed = search.start_rps.is_none() && work.url().is_some();
    let plateau = match (search.start_rps, work.url()) {
        (None, Some(url)) => climb(url, alone.ms, search, stop)?,
        _ => None,
    };
    on_progress(Progress::Climbed(plateau.as_ref()));
    // A request's time alone: the one-connection step's mean when the climb ran (one
    // request's latency is a single draw, far off the mean when times vary).
    let drain_ms = plateau.as_ref().map_or(alone.ms, |p| p.usual_ms);
    let base_ms = plateau.as_ref().map_or(alone.ms, |p| p.alone_ms);
    let unit = Unit {
        kind: work.unit(),
        // What one unit keeps in flight: a request's time, or a session's whole length.
        ms: match work.unit() {
            WorkUnit::Request => base_ms,
            WorkUnit::Session => alone.unit_ms,
        },
        requests: alone.requests.max(1) as f64,
    };
    let needed = search.slo.requests_for_a_bound().map(|(_, n)| n);
    // Without a plateau (the climb failed at once, or a script's sessions), the rate one
    // connection serves its requests at: any service serves that much.
    let bounds = Search {
        start_rps: search
            .start_rps
            .or(plateau.as_ref().map(|p| first_rate(p.rps)))
            .unwrap_or(1000.0 / (base_ms * unit.requests).max(0.01))
            .min(search.max_rate_rps),
        // A climb cut short while throughput grew gives no plateau to stop just past.
        plateau_rps: plateau.as_ref().filter(|p| p.levelled).map(|p| p.rps),
        min_rps: 0.1,
        max_rps: search.max_rate_rps,
        tolerance: search.tolerance,
        unit: unit.kind,
    };
    let mut steps: Vec<RateStep> = Vec::new();
    let mut runs: Vec<(RunData, Summary)> = Vec::new();
    let reason = loop {
        let Some(rate) = next_rate(&steps, &bounds) else {
            break done_because(&steps, &search.slo, &bounds);
        };
        let left = search
            .max_time
            .saturating_sub(started.elapsed() + search.warmup);
        if left < search.measured {
            break format!(
                "the search's time ({:.0} s) is up",
                search.max_time.as_secs_f64()
            );
        }
        // Long enough for the objective's percentile (over requests), within the time left.
        let measured = Duration::from_secs(
            step_seconds(search.measured.as_secs(), rate * unit.requests, needed)
                .min(left.as_secs()),
        );
        // The climb's last step, many connections deep, leaves a queue as any step does.
        if climbed || !steps.is_empty() {
            drain(work, drain_ms, stop)?;
        }
        let Some((step, run)) = rate_step(work, rate, &unit, measured, search, stop)? else {
            break "interrupted".to_string();
        };
        steps.push(step);
        hold_to_overloads(&mut steps, unit.kind);
        on_progress(Progress::Step(steps.last().expect("pushed above")));
        runs.push(run);
    };
    Ok(Capacity {
        plateau,
        steps,
        runs,
        unit: work.unit(),
        stopped_because: reason,
    })
}

/// What a search's rate counts, and what one of it takes alone.
struct Unit {
    /// Requests, or users' sessions.
    kind: WorkUnit,
    /// What one keeps in flight alone, ms: a request's time, or a session's length.
    ms: f64,
    /// Requests one sends.
    requests: f64,
}

/// The closed-loop climb to the service's plateau: connections doubled until throughput stops
/// growing, within `max_connections` and a third of `max_time`; `None` when no step completed.
fn climb(
    target: &UrlTarget,
    base_ms: f64,
    search: &CapacitySearch,
    stop: &StopSignal,
) -> Result<Option<Plateau>> {
    let started = Instant::now();
    let work = Work::Request(target.clone());
    let budget = search.max_time / 3;
    let mut steps: Vec<ProbeStep> = Vec::new();
    while let Some(Next::Run {
        concurrency,
        requests,
        duration,
        max_duration,
    }) = plateau_step(&steps, search.max_connections)
    {
        if started.elapsed() + duration > budget || stop.is_stopped() {
            break;
        }
        // A step that would only confirm a flat one is worth its time only while the search
        // keeps room for its rate steps (a 12 s search of 3 s steps lost its third to it).
        let steps_time = (search.warmup + search.measured) * RATE_STEPS_KEPT;
        if only_confirms(&steps) && started.elapsed() + duration + steps_time > search.max_time {
            break;
        }
        // Drained to what the one-connection step's answers usually took: a single answer
        // (`base_ms`) is one draw, far under most answers when times vary.
        if let Some(first) = steps.first() {
            drain(&work, usual_alone_ms(first), stop)?;
        }
        let (step, _, _) = closed_step(
            target,
            concurrency,
            (requests, max_duration),
            stop,
            &crate::Watch::default(),
        )?;
        steps.push(step);
    }
    let alone_ms = steps.first().map_or(base_ms, |s| s.mean_ms);
    let usual_ms = steps.first().map_or(base_ms, usual_alone_ms);
    Ok(plateau_rps(&steps).map(|rps| Plateau {
        rps,
        connections: steps.last().map_or(0, |s| s.concurrency),
        alone_ms,
        usual_ms,
        levelled: levelled(&steps),
        seconds: started.elapsed().as_secs_f64(),
    }))
}

/// Rate steps the search keeps time for when the climb would take a step that only confirms.
const RATE_STEPS_KEPT: u32 = 3;

/// Connections a rate step opens at its start. A service of several processes on one port
/// (`SO_REUSEPORT`) gets each connection on one process, chosen by the kernel's hash: with the
/// two or three connections a moderate rate needs, two often land on one process and the step
/// reads that process's limit (a 3-worker service broke at 98 req/s of its 150). Idle
/// connections take work in turn and a busy one is skipped, so with
/// [`SPREAD_CONNECTIONS`](loadlab_analyze::capacity::SPREAD_CONNECTIONS) every process almost
/// surely has some, as wrk's fixed connections give.
const STEP_CONNECTIONS: usize = loadlab_analyze::capacity::SPREAD_CONNECTIONS;

/// Runs `rate` for the warm-up and then the `measured` part, and judges the measured part;
/// `None` when Ctrl-C stopped it.
fn rate_step(
    work: &Work,
    rate: f64,
    unit: &Unit,
    measured: Duration,
    search: &CapacitySearch,
    stop: &StopSignal,
) -> Result<Option<(RateStep, (RunData, Summary))>> {
    let (run, summary) = warmed_rate_step(
        work,
        rate,
        (search.warmup, measured),
        (
            STEP_CONNECTIONS.min(search.max_connections),
            search.max_connections,
        ),
        search.threads,
        stop,
        &search.watch,
    )?;
    if stop.is_stopped() {
        return Ok(None);
    }
    let step = judged(&run, rate, unit, measured, search);
    Ok(Some((step, (run, summary))))
}

/// The measured part (the run's second phase, `measured` long) of a rate's run, judged against
/// the objective: its latency, errors, the arrivals it served and whether its median kept
/// rising. Latency is the requests'; arrivals and what was served count the unit (requests, or
/// sessions: one served when it ends, and an error when it fails).
fn judged(
    run: &RunData,
    rate: f64,
    unit: &Unit,
    measured_for: Duration,
    search: &CapacitySearch,
) -> RateStep {
    let measured = &run.phases[1];
    let h = &measured.totals.latency;
    let at = |p: f64| {
        if h.is_empty() {
            f64::INFINITY
        } else {
            h.value_at_quantile(p / 100.0) as f64 / 1000.0
        }
    };
    let c = &measured.totals.counts;
    let secs = measured_for.as_secs_f64();
    let share = |part: u64, of: u64| {
        if of == 0 {
            100.0
        } else {
            100.0 * part as f64 / of as f64
        }
    };
    let warm = search.warmup.as_secs_f64();
    let in_window = |second: u64| second as f64 >= warm && (second as f64) < warm + secs;
    let window_rows = || run.timeline.iter().filter(|r| in_window(r.second));
    let request_errors = share(c.errors(), c.completed);
    let (ended, errors) = match unit.kind {
        WorkUnit::Request => (c.completed, request_errors),
        // Sessions that ended in the window's seconds: the run goes on after its schedule until
        // the users who arrived finish, and the measured phase holds those seconds too.
        WorkUnit::Session => {
            let failed: u64 = window_rows().map(|r| r.users_failed).sum();
            let ended = failed + window_rows().map(|r| r.users_completed).sum::<u64>();
            // A flow fails on a transport error or a failed check while its requests may all
            // have had answers, and an answer of 500 fails no session: both count.
            (ended, request_errors.max(share(failed, ended)))
        }
    };
    let window = Window {
        arrivals: window_rows().map(|r| r.offered).sum(),
        completed: ended,
        seconds: secs,
        in_flight: rate * unit.ms / 1000.0,
        unit: unit.kind,
        requests: c.completed,
    };
    let per_second: Vec<f64> = run
        .timeline
        .iter()
        .filter(|r| r.second as f64 >= warm && r.completed > 0)
        .map(|r| r.p50_ms)
        .collect();
    let refused_pct = if c.completed == 0 {
        0.0
    } else {
        100.0 * c.refused as f64 / c.completed as f64
    };
    let mut verdict = judge(&search.slo, &window, at, errors, &per_second);
    if refused_pct >= 5.0 {
        let answered = c.completed.saturating_sub(c.refused) as f64 / secs;
        verdict.broken.insert(
            0,
            format!(
                "the service refused {refused_pct:.0} % (429, or 503 with Retry-After): a rate \
                 limit, answering {answered:.1} req/s"
            ),
        );
    }
    // Too few requests to bound a percentile leaves the step undecided only when nothing
    // else broke it: a step that left arrivals unserved, or whose latency kept rising, is
    // broken however few requests it held (seed 000's 3-worker box at 4.0 req/s served 3.4,
    // 27 requests where p90 needs 29, and ended the search as undecided).
    let undersampled = verdict.only_undersampled();
    let broken = verdict.broken;
    RateStep {
        rate_rps: rate,
        achieved_rps: ended as f64 / secs,
        arrived_rps: window.arrived_rps(),
        served_rps: window.served_rps(),
        p50_ms: at(50.0),
        p99_ms: at(99.0),
        error_pct: errors,
        refused_pct,
        warmup_s: warm,
        measured_s: secs,
        requests: c.completed,
        meets: broken.is_empty(),
        undersampled,
        broken,
    }
}
