//! What the probe and the capacity search share: one quiet engine run per step, and waiting
//! between steps for the service to drain what the last step left queued.

use std::time::{Duration, Instant};

use loadlab_analyze::probe::{OpenStep, ProbeStep};
use loadlab_engine::StopSignal;
use loadlab_input::{UrlTarget, Work};
use loadlab_run::{Model, RatePhase, RunData, Stop, Summary, ValidPlan};

use crate::Result;

/// Longest wait for a service to drain between steps.
const MAX_DRAIN: Duration = Duration::from_secs(15);

/// Runs one step's plan without a progress line, watching what `watch` names.
pub fn run_step(
    plan: &ValidPlan,
    stop: &StopSignal,
    watch: &crate::Watch,
) -> Result<(RunData, Summary)> {
    crate::execute(
        plan,
        stop,
        crate::execute::Progress::Off,
        watch,
        &crate::LiveOutputs::default(),
    )
}

/// One closed-model step of `concurrency` connections and no think time: `requests` requests
/// (each to completion) or, without a count, until `duration`; at most `duration` either way.
/// What the step measured, with its run and summary.
pub fn closed_step(
    target: &UrlTarget,
    concurrency: usize,
    (requests, duration): (Option<u64>, Duration),
    stop: &StopSignal,
    watch: &crate::Watch,
) -> Result<(ProbeStep, RunData, Summary)> {
    let plan = loadlab_input::lower::url(
        target,
        Model::closed(concurrency, 1),
        Stop {
            duration: Some(duration),
            count: requests,
        },
        1,
    )?;
    let (run, s) = run_step(&plan, stop, watch)?;
    let refused = s.requests.refused;
    let (throughput, refused_rps, latency) = match &s.answered_latency_ms {
        // A service that refuses some requests (a rate limit's 429): what it answered, per
        // second of the step, and the latency of those alone; the refusals are neither.
        Some(answered) if refused > 0 => {
            let secs = s.duration_s.max(1e-9);
            let answered_n = s.requests.completed.saturating_sub(refused);
            let rate = steady_ok_rps(&run).unwrap_or(answered_n as f64 / secs);
            (rate, refused as f64 / secs, answered.clone())
        }
        // Little's law in a closed loop without think time: X = c / R, exact even when a
        // slow service completes only a few requests in the step, because every request of a
        // counted step completes: none of the longest (queued) ones is cut off at its end.
        _ if s.latency_ms.mean > 0.0 => (
            concurrency as f64 * 1000.0 / s.latency_ms.mean,
            0.0,
            s.latency_ms.clone(),
        ),
        _ => (s.throughput.rps, 0.0, s.latency_ms.clone()),
    };
    let step = ProbeStep {
        concurrency,
        throughput_rps: throughput,
        refused_rps,
        p50_ms: latency.p50,
        p99_ms: latency.p99,
        mean_ms: latency.mean,
        stdev_ms: latency.stdev,
        requests: s.requests.completed.saturating_sub(refused),
        error_pct: error_pct(&s),
        server_cpu_pct: server_cpu(&s),
        server_cpu_wait_pct: s
            .server
            .as_ref()
            .map(|sv| sv.processes.iter().map(|p| p.cpu_wait_pct_avg).sum()),
    };
    Ok((step, run, s))
}

/// One open-model run of `work` at `rate` arrivals a second: a warm-up and a measured part
/// (`phases`, in that order), on `connections` (opened at the start, most; for a script's users,
/// most sessions at once) and `threads` generator threads, watching `watch`. The capacity
/// search's steps and the probe's open steps alike.
pub fn warmed_rate_step(
    work: &Work,
    rate: f64,
    (warmup, measured): (Duration, Duration),
    connections: (usize, usize),
    threads: usize,
    stop: &StopSignal,
    watch: &crate::Watch,
) -> Result<(RunData, Summary)> {
    let plan = work.open(
        vec![
            RatePhase::constant("warm-up", rate, Some(warmup)),
            RatePhase::constant("measured", rate, Some(measured)),
        ],
        connections,
        threads,
    )?;
    run_step(&plan, stop, watch)
}

/// Warm-up of a probe's open-model step: the limiter's burst (its bucket full after the drain)
/// is spent in it.
const OPEN_WARMUP: Duration = Duration::from_secs(1);

/// Measured part of a probe's open-model step: a rate limit of 100 req/s refuses past it 300
/// times in 3 s.
const OPEN_MEASURED: Duration = Duration::from_secs(3);

/// One open-model step: requests arriving at `rate` a second, evenly, for a warm-up and a
/// measured part, on up to `max_connections`; what the measured part answered, refused and
/// failed per second, with its run and summary.
pub fn open_step(
    target: &UrlTarget,
    rate: f64,
    max_connections: usize,
    stop: &StopSignal,
    watch: &crate::Watch,
) -> Result<(OpenStep, RunData, Summary)> {
    let (run, summary) = warmed_rate_step(
        &Work::Request(target.clone()),
        rate,
        (OPEN_WARMUP, OPEN_MEASURED),
        (max_connections.min(16), max_connections),
        1,
        stop,
        watch,
    )?;
    let secs = OPEN_MEASURED.as_secs_f64();
    let step = match run.phases.get(1) {
        Some(measured) => {
            let c = &measured.totals.counts;
            let h = &measured.totals.latency;
            OpenStep {
                offered_rps: rate,
                answered_rps: c.ok as f64 / secs,
                refused_rps: c.refused as f64 / secs,
                failed_rps: c.completed.saturating_sub(c.ok + c.refused) as f64 / secs,
                p50_ms: if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(0.5) as f64 / 1000.0
                },
                measured_s: secs,
            }
        }
        None => OpenStep {
            offered_rps: rate,
            ..OpenStep::default()
        },
    };
    Ok((step, run, summary))
}

/// The latency of one request alone, ms (`None` when it failed).
pub fn one_request_ms(target: &UrlTarget, stop: &StopSignal) -> Result<Option<f64>> {
    Ok(one_alone(&Work::Request(target.clone()), stop)?.map(|a| a.ms))
}

/// One unit of work run alone: what its requests took, and how long it lasted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alone {
    /// The time of its requests, ms: a request's latency, or the mean of a session's
    /// requests (its think times left out).
    pub ms: f64,
    /// Its whole length, ms: the request's, or the session's with its think times.
    pub unit_ms: f64,
    /// Requests it sent: one, or the session's.
    pub requests: u64,
}

/// One unit of `work` alone (one request, or one user's session): `None` when a request of it
/// failed or the session did not run to its end.
pub fn one_alone(work: &Work, stop: &StopSignal) -> Result<Option<Alone>> {
    let plan = work.one()?;
    let (_, s) = run_step(&plan, stop, &crate::Watch::default())?;
    let answered = s.requests.completed > 0 && s.requests.ok == s.requests.completed;
    Ok(match &s.users {
        // A session's requests are its time; its length holds its think times too.
        Some(u) => (answered && u.completed == 1 && u.failed == 0).then_some(Alone {
            ms: s.latency_ms.mean,
            unit_ms: u.session_ms.max,
            requests: s.requests.completed,
        }),
        None => (answered && s.requests.completed == 1).then_some(Alone {
            ms: s.latency_ms.max,
            unit_ms: s.latency_ms.max,
            requests: 1,
        }),
    })
}

/// The first unit of `work` that succeeds alone, tried again every 200 ms for up to 15 s: a
/// service still serving what an earlier load left queued may refuse the first ones (a pool at
/// its in-flight cap answers 429). `None` when none succeeded.
pub fn first_success(work: &Work, stop: &StopSignal) -> Result<Option<Alone>> {
    let started = Instant::now();
    loop {
        if let Some(alone) = one_alone(work, stop)? {
            return Ok(Some(alone));
        }
        if started.elapsed() >= MAX_DRAIN || stop.is_stopped() {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Share of the previous answer's time under which an answer means the service was still
/// finishing a backlog.
const STILL_DRAINING: f64 = 0.8;

/// A unit of `work` alone, from a first that took `first`: run again while each comes more
/// than a fifth faster than the one before (the service was still finishing an earlier load's
/// backlog), for up to 15 s; the faster of the last two. A single request's time while a
/// backlog drains is the backlog's: seed 002's web instance answered its first page in
/// 1,454 ms after a users' cell and its pages alone in about 85 ms, and the capacity search
/// that took the first for a request's time started at 0.7 req/s.
pub fn settled(work: &Work, first: Alone, stop: &StopSignal) -> Result<Alone> {
    let started = Instant::now();
    let mut last = first;
    while started.elapsed() < MAX_DRAIN && !stop.is_stopped() {
        match one_alone(work, stop)? {
            Some(a) if a.ms < STILL_DRAINING * last.ms => last = a,
            // Settled: two within a fifth; a slower one is a spike, not the time.
            Some(a) => return Ok(if a.ms < last.ms { a } else { last }),
            // Refused or failed while busy: ask again shortly.
            None => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    Ok(last)
}

/// [`settled`] for a URL: the latency of one request alone, ms, from a first that took
/// `first_ms`.
pub fn settled_ms(target: &UrlTarget, first_ms: f64, stop: &StopSignal) -> Result<f64> {
    let first = Alone {
        ms: first_ms,
        unit_ms: first_ms,
        requests: 1,
    };
    Ok(settled(&Work::Request(target.clone()), first, stop)?.ms)
}

/// Answers in a row within the drain's bound that say the queue is gone. Behind a balancer each
/// request goes to the next replica, and on a port several processes share each connection
/// goes to one the kernel picks: one quick answer says one of them is idle, while another may
/// still work through what the last step left.
const DRAIN_ANSWERS: f64 = 4.0;

/// Time the drain's answers in a row may take together, ms: a slow service gets fewer of them.
const DRAIN_ANSWERS_MS: f64 = 500.0;

/// The time a request alone usually takes at most, ms, from a one-connection step: its mean
/// plus one standard deviation, what [`drain`] waits for. Where times vary, one answer over the
/// mean says nothing of a queue: 12 workers of exponential 40 ms times answered under 1.5 × a
/// single lucky draw four times in a row so rarely that each drain of a capacity climb ran its
/// whole 15 s, and the climb's time was up at 4 connections of the 16 it needed.
pub fn usual_alone_ms(step: &ProbeStep) -> f64 {
    step.mean_ms + step.stdev_ms
}

/// Waits until units of `work` alone (requests, or a script's sessions) are answered within
/// 1.5 × `usual_ms` (+1 ms) a request again, several in a row ([`DRAIN_ANSWERS`], fewer when a
/// unit is slow) — the queue the last step left has drained — or for at most 15 s. `usual_ms`
/// is what a request alone usually takes at most ([`usual_alone_ms`] once a one-connection
/// step ran). Returns how long it waited.
pub fn drain(work: &Work, usual_ms: f64, stop: &StopSignal) -> Result<Duration> {
    let started = Instant::now();
    let needed = (DRAIN_ANSWERS_MS / usual_ms.max(0.001)).clamp(1.0, DRAIN_ANSWERS) as usize;
    let mut in_a_row = 0;
    while started.elapsed() < MAX_DRAIN && !stop.is_stopped() {
        match one_alone(work, stop)? {
            Some(a) if a.ms <= 1.5 * usual_ms + 1.0 => {
                in_a_row += a.requests as usize;
                if in_a_row >= needed {
                    break;
                }
            }
            _ => {
                in_a_row = 0;
                std::thread::sleep(Duration::from_millis(usual_ms.clamp(10.0, 1000.0) as u64));
            }
        }
    }
    Ok(started.elapsed())
}

/// Responses below 400 per second over a step's whole seconds after its first, when it has
/// two or more of them: a rate limiter's burst (its bucket full when the step starts) lands in
/// the first second and would read as rate.
fn steady_ok_rps(run: &RunData) -> Option<f64> {
    let whole = run.secs().floor() as u64;
    let rows: Vec<_> = run
        .timeline
        .iter()
        .filter(|r| r.second >= 1 && r.second < whole)
        .collect();
    if rows.len() < 2 {
        return None;
    }
    let ok: u64 = rows
        .iter()
        .map(|r| r.status_classes[..3].iter().sum::<u64>())
        .sum();
    Some(ok as f64 / rows.len() as f64)
}

/// Summed CPU of the watched processes over a step, percent of one core.
pub fn server_cpu(s: &Summary) -> Option<f64> {
    s.server
        .as_ref()
        .map(|sv| sv.processes.iter().map(|p| p.cpu_pct_avg).sum())
}

/// Percent of completed requests that failed; a refusal (429, 503 with Retry-After) is the
/// service saying no, counted apart (`refused_rps`), not a failure.
pub fn error_pct(s: &Summary) -> f64 {
    if s.requests.completed == 0 {
        0.0
    } else {
        let errors = s.requests.errors.saturating_sub(s.requests.refused);
        100.0 * errors as f64 / s.requests.completed as f64
    }
}
