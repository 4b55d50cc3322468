//! The probe's logic, as pure functions of the steps run so far: which concurrency to try
//! next (or why to stop), and what the steps say about the service — asynchronous, synchronous
//! with K workers, or CPU-bound — as seed 000 found by hand with `ab -c 1..4`.
//!
//! The reasoning: in a closed loop with c clients and no think time, throughput is
//! `X = c / R` (Little's law). A service that takes S per request on K workers answers with
//! `R ≈ S` while `c ≤ K` (X grows as c/S) and queues past that: X stays at K/S and R grows as
//! cS/K. That holds whatever the spread of the service times (nobody waits while c ≤ K, all K
//! are busy past it), so the probe finds K as the knee of the steps' mean latency, stepping
//! back to measure K and K + 1 when the climb skipped them. When the times do not vary, the
//! K+1st request waits a whole S and p99 doubles right at c = K+1: then K is also observed. An
//! asynchronous service keeps R ≈ S and X ≈ c/S as far as the probe goes.

use std::time::Duration;

use crate::compare::median;
use crate::usl::Usl;

/// The concurrencies the probe climbs: every count up to 12 (worker counts are small and must
/// be exact), then about 1.3× a step.
pub const LADDER: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24, 32, 40, 48, 64,
];

pub use loadlab_run::lab::probe::{Binding, Kind, ProbeStep, ProbeVerdict as Verdict, UslFit};

/// Limits of a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeLimits {
    /// Highest concurrency tried.
    pub max_concurrency: usize,
    /// Time the whole probe may take.
    pub max_time: Duration,
    /// Time it may take when the service's times vary widely (one connection's coefficient
    /// of variation [`WIDE_SPREAD`] or more): a worker count exact to one then needs thousands
    /// of requests on either side of the knee (see [`requests_for_exact_workers`]).
    pub max_time_varied: Duration,
    /// Stop when a step's median latency passes this.
    pub max_latency_ms: f64,
    /// Stop when a step's errors pass this percentage.
    pub max_error_pct: f64,
}

impl Default for ProbeLimits {
    fn default() -> Self {
        ProbeLimits {
            max_concurrency: 64,
            max_time: Duration::from_secs(60),
            max_time_varied: Duration::from_secs(300),
            max_latency_ms: 10_000.0,
            max_error_pct: 1.0,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Run this concurrency until this many requests have completed — every request of a step
    /// completes, so its latencies are not cut short at its end — or for at most `max_duration`.
    Run {
        /// Connections.
        concurrency: usize,
        /// Requests the step sends, each to completion; `None` for the first step, which runs
        /// for `duration` (one connection queues nothing, so a request cut at its end biases
        /// nothing).
        requests: Option<u64>,
        /// The step's expected length, as the probe's time budget counts it.
        duration: Duration,
        /// The most the step may take (a safety bound: a step cut by it loses its last
        /// requests' latencies).
        max_duration: Duration,
    },
    /// Stop, and why.
    Stop(String),
}

/// The length of a step once the service refuses requests: whole seconds after the first
/// (where a limiter's burst goes) to read the rate it answers at.
const RATE_STEP: Duration = Duration::from_secs(4);

/// Shortest and longest step.
const MIN_STEP: Duration = Duration::from_millis(1000);
const MAX_STEP: Duration = Duration::from_secs(8);
/// Latency cycles a step should hold, so each client sends several requests.
pub(crate) const CYCLES: f64 = 5.0;
/// Throughput gain under which a step counts as no gain.
const FLAT: f64 = 1.10;

/// The next step, given the steps so far (in the order they ran) and the time they took.
///
/// The probe measures one connection (again, when its first second held too few requests),
/// climbs the [`LADDER`] until throughput stops growing, the errors, the latency, the
/// concurrency bound or the time says stop; then it steps back to measure the concurrencies
/// on either side of the worker count the steps suggest (K and K + 1, see [`knee`]) that it has
/// not run yet, until both are measured.
pub fn next_step(steps: &[ProbeStep], elapsed: Duration, limits: &ProbeLimits) -> Next {
    if let Some(again) = measure_alone_again(steps, elapsed, limits) {
        return again;
    }
    let climb = climb(steps);
    let went_back = stepped_back(steps);
    let stopped = match climb_next(&climb, elapsed, limits) {
        // Still climbing: no step has gone back down yet.
        run @ Next::Run { .. } if !went_back => return run,
        Next::Run { .. } => String::from("throughput stopped growing for two steps"),
        Next::Stop(why) => why,
    };
    if let Some(last) = steps.last().filter(|_| went_back) {
        if let Some(why) = failed(last, limits) {
            return Next::Stop(why);
        }
    }
    // A rate limit has no worker count to measure on either side of, nor has contention.
    let climbed: Vec<&ProbeStep> = climb.iter().filter(|s| s.requests > 0).collect();
    if climb.iter().any(refusing) || contention(&climbed).is_some() {
        return Next::Stop(stopped);
    }
    if climb.first().is_none_or(|s| s.requests == 0) {
        return Next::Stop(stopped);
    }
    let merged = by_concurrency(steps);
    let sorted: Vec<&ProbeStep> = merged.iter().filter(|s| s.requests > 0).collect();
    let k = knee(&sorted);
    let top = sorted.last().map_or(1, |s| s.concurrency);
    let budget = budget(steps, limits);
    let Some(concurrency) = [k, k + 1]
        .into_iter()
        .find(|c| *c <= top && sorted.iter().all(|s| s.concurrency != *c))
    else {
        return refine(&sorted, elapsed, budget).unwrap_or(Next::Stop(stopped));
    };
    // The step above it bounds its latency.
    let expected_ms = sorted
        .iter()
        .find(|s| s.concurrency > concurrency)
        .or(sorted.last())
        .map_or(1.0, |s| s.mean_ms);
    let run = step_of(concurrency, expected_ms, cycles(&climb).max(CYCLES * 2.0));
    match run {
        Next::Run { duration, .. } if elapsed + duration > budget => Next::Stop(format!(
            "{stopped}; no time left to measure {concurrency} connections, next to the {k} \
             workers the steps suggest"
        )),
        run => run,
    }
}

/// One connection's coefficient of variation from which the service's times count as widely
/// spread (exponential times have 1), and the probe may take [`ProbeLimits::max_time_varied`].
pub const WIDE_SPREAD: f64 = 0.5;

/// The spread of one connection's latencies (stdev over mean) at its last measure, once
/// measured.
fn spread<'a>(steps: impl IntoIterator<Item = &'a ProbeStep>) -> Option<f64> {
    steps
        .into_iter()
        .filter(|s| s.concurrency == 1 && s.requests >= 2 && s.stdev_ms > 0.0)
        .last()
        .map(|s| s.stdev_ms / s.mean_ms.max(1e-3))
}

/// The time the probe may take, given what it has measured: longer for a service whose times
/// vary widely.
fn budget(steps: &[ProbeStep], limits: &ProbeLimits) -> Duration {
    if spread(steps).is_some_and(|cv| cv >= WIDE_SPREAD) {
        limits.max_time_varied.max(limits.max_time)
    } else {
        limits.max_time
    }
}

/// Requests needed on each side of the knee for a worker count `k` exact to one with 90 %
/// confidence, when one request's time has coefficient of variation `cv`. The count is X·S:
/// the plateau's throughput (K/S, read from requests past the knee) times the service time
/// (read from requests before it), each a mean with relative error cv/√n; K̂ rounds to K when
/// it is within ½, so cv·√(2/n) ≤ ½ / (1.645 K): n = 2 (1.645 cv K / ½)². For exponential
/// times and K = 12, 3,117 requests a side.
pub fn requests_for_exact_workers(k: usize, cv: f64) -> u64 {
    (2.0 * (1.645 * cv * k as f64 / 0.5).powi(2)).ceil() as u64
}

/// Longest step measuring more requests on one side of the knee.
const MAX_REFINE_STEP: Duration = Duration::from_secs(30);

/// A step that adds requests on the side of the knee that has fewer than
/// [`requests_for_exact_workers`] needs, for a service whose times vary widely and whose
/// plateau the climb reached: below the knee band (all connections served at once, so their
/// latencies are the service time) or at twice its top (all workers busy, so the throughput is
/// K/S). `None` when both sides have enough, or the time left cannot hold a step.
fn refine(sorted: &[&ProbeStep], elapsed: Duration, budget: Duration) -> Option<Next> {
    let cv = spread(sorted.iter().copied()).filter(|cv| *cv >= WIDE_SPREAD)?;
    let k = knee(sorted);
    let top = sorted.last()?.concurrency;
    if k >= top {
        return None;
    }
    let (lo, hi) = knee_band(sorted);
    let needed = requests_for_exact_workers(hi, cv);
    let (s_ms, _) = pool_model(sorted, k as f64);
    // One connection is below any knee: nobody waits with a single request in flight, so
    // when the band starts at 1 the service time is measured there.
    let below_c = lo.saturating_sub(1).max(1);
    let below: u64 = sorted
        .iter()
        .filter(|s| s.concurrency <= below_c)
        .map(|s| s.requests)
        .sum();
    let above: u64 = sorted
        .iter()
        .filter(|s| s.concurrency >= 2 * hi)
        .map(|s| s.requests)
        .sum();
    // Below: the most connections sure to be served at once; above: twice the band's top.
    let (concurrency, missing, per_s) = if below < needed {
        let c = below_c;
        (c, needed - below, c as f64 * 1000.0 / s_ms)
    } else if above < needed {
        (2 * hi, needed - above, k as f64 * 1000.0 / s_ms)
    } else {
        return None;
    };
    let left = budget.saturating_sub(elapsed);
    let duration = Duration::from_secs_f64(missing as f64 / per_s.max(1e-9))
        .clamp(MIN_STEP, MAX_REFINE_STEP)
        .min(left);
    if duration < MIN_STEP {
        return None;
    }
    Some(Next::Run {
        concurrency,
        requests: Some((per_s * duration.as_secs_f64()).ceil().max(1.0) as u64),
        duration,
        max_duration: duration * 2 + MIN_STEP,
    })
}

/// Requests the service time is measured on, at one connection: the median and mean of a
/// service whose times vary need this many (a 1 s step of a 300 ms service holds 3).
const MIN_ALONE: u64 = 20;

/// One connection measured again, counted to [`MIN_ALONE`] requests (at most [`MAX_STEP`]),
/// when the first step completed fewer and the time allows; only right after the first step.
/// A first step that completed none (a service slower than the step: seed 000's black box
/// takes a second) is measured again for the longest step, not read as a failure.
fn measure_alone_again(
    steps: &[ProbeStep],
    elapsed: Duration,
    limits: &ProbeLimits,
) -> Option<Next> {
    let [first] = steps else {
        return None;
    };
    if first.concurrency != 1
        || first.requests >= MIN_ALONE
        || first.error_pct > limits.max_error_pct
        || (first.requests > 0 && failed(first, limits).is_some())
    {
        return None;
    }
    let expected = if first.requests == 0 {
        MAX_STEP
    } else {
        Duration::from_secs_f64(MIN_ALONE as f64 * first.mean_ms / 1000.0)
    };
    let duration = expected.clamp(MIN_STEP, MAX_STEP);
    (elapsed + duration <= budget(steps, limits)).then_some(Next::Run {
        concurrency: 1,
        requests: Some(MIN_ALONE),
        duration,
        max_duration: duration,
    })
}

/// The steps that went higher than every step before them: the climb, without the steps back
/// (a second measure of one connection replaces the first).
fn climb(steps: &[ProbeStep]) -> Vec<ProbeStep> {
    let mut climb: Vec<ProbeStep> = Vec::new();
    for s in steps {
        match climb.last_mut() {
            Some(top) if s.concurrency == 1 && top.concurrency == 1 => *top = s.clone(),
            Some(top) if s.concurrency <= top.concurrency => {}
            _ => climb.push(s.clone()),
        }
    }
    climb
}

/// True once a step ran fewer connections than a step before it: the climb is over.
fn stepped_back(steps: &[ProbeStep]) -> bool {
    let mut top = 0;
    steps.iter().any(|s| {
        let lower = s.concurrency < top;
        top = top.max(s.concurrency);
        lower
    })
}

/// The steps sorted by concurrency, the measures of a concurrency tried more than once merged
/// into one (see [`merge`]).
fn by_concurrency(steps: &[ProbeStep]) -> Vec<ProbeStep> {
    let mut sorted: Vec<&ProbeStep> = steps.iter().collect();
    sorted.sort_by_key(|s| s.concurrency);
    let mut out: Vec<ProbeStep> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some(last) if last.concurrency == s.concurrency => *last = merge(last, s),
            _ => out.push(s.clone()),
        }
    }
    out
}

/// The steps below the knee band merged into one (see [`merge`]), for a service whose times
/// vary widely; `None` otherwise.
fn below_knee(sorted: &[&ProbeStep]) -> Option<ProbeStep> {
    spread(sorted.iter().copied()).filter(|cv| *cv >= WIDE_SPREAD)?;
    let limit = knee_band(sorted).0.saturating_sub(1).max(1);
    sorted
        .iter()
        .filter(|s| s.concurrency <= limit)
        .fold(None, |acc: Option<ProbeStep>, s| {
            Some(acc.map_or_else(|| (*s).clone(), |a| merge(&a, s)))
        })
}

/// Two measures of one concurrency as one: requests summed; means, spreads and error shares
/// weighted by requests; rates over both steps' time; percentiles and CPU of the measure with
/// more requests (a step that completed none adds nothing).
fn merge(a: &ProbeStep, b: &ProbeStep) -> ProbeStep {
    let (na, nb) = (a.requests as f64, b.requests as f64);
    if na == 0.0 || nb == 0.0 {
        return if nb > na { b.clone() } else { a.clone() };
    }
    let n = na + nb;
    let mean = (na * a.mean_ms + nb * b.mean_ms) / n;
    // The pooled variance: each step's around its own mean, plus their means' spread.
    let var = (na * (a.stdev_ms.powi(2) + (a.mean_ms - mean).powi(2))
        + nb * (b.stdev_ms.powi(2) + (b.mean_ms - mean).powi(2)))
        / n;
    let secs = |s: &ProbeStep, n: f64| n / s.throughput_rps.max(1e-9);
    let time = secs(a, na) + secs(b, nb);
    let more = if nb > na { b } else { a };
    ProbeStep {
        concurrency: a.concurrency,
        throughput_rps: n / time,
        refused_rps: (a.refused_rps * secs(a, na) + b.refused_rps * secs(b, nb)) / time,
        p50_ms: more.p50_ms,
        p99_ms: more.p99_ms,
        mean_ms: mean,
        stdev_ms: if a.stdev_ms > 0.0 && b.stdev_ms > 0.0 {
            var.sqrt()
        } else {
            more.stdev_ms
        },
        requests: a.requests + b.requests,
        error_pct: (na * a.error_pct + nb * b.error_pct) / n,
        server_cpu_pct: more.server_cpu_pct,
        server_cpu_wait_pct: more.server_cpu_wait_pct,
    }
}

/// Why a step ends the probe: too many errors, nothing completed, or the median over its bound.
fn failed(step: &ProbeStep, limits: &ProbeLimits) -> Option<String> {
    if step.error_pct > limits.max_error_pct {
        return Some(format!(
            "{:.1} % of the requests failed at concurrency {}",
            step.error_pct, step.concurrency
        ));
    }
    if step.requests == 0 {
        return Some(format!(
            "no request completed at concurrency {} within its step",
            step.concurrency
        ));
    }
    if step.p50_ms > limits.max_latency_ms {
        return Some(format!(
            "the median latency passed {:.0} ms at concurrency {}",
            limits.max_latency_ms, step.concurrency
        ));
    }
    None
}

/// The climb's next step: the ladder's next concurrency, or why the climb ends.
fn climb_next(climb: &[ProbeStep], elapsed: Duration, limits: &ProbeLimits) -> Next {
    let Some(last) = climb.last() else {
        return first_step();
    };
    if let Some(why) = failed(last, limits) {
        return Next::Stop(why);
    }
    if plateaued(climb) && past_the_knee(climb) && !before_the_fall(climb) {
        let sorted: Vec<&ProbeStep> = climb.iter().filter(|s| s.requests > 0).collect();
        return Next::Stop(if contention(&sorted).is_some() {
            "throughput peaked and fell".into()
        } else {
            "throughput stopped growing for two steps".into()
        });
    }
    let refused = climb.iter().rev().take_while(|s| refusing(s)).count();
    if refused >= 3 {
        return Next::Stop(format!(
            "the service refused requests (429) at the last {refused} steps: a rate limit"
        ));
    }
    // Past the ladder's end, about 1.3× a step.
    let next = LADDER
        .iter()
        .copied()
        .find(|c| *c > last.concurrency)
        .unwrap_or_else(|| (last.concurrency as f64 * 1.3).ceil() as usize);
    if next > limits.max_concurrency {
        return Next::Stop(format!(
            "reached the probe's bound of {} connections",
            limits.max_concurrency
        ));
    }
    // Expect latency to grow with concurrency at worst in proportion; a service that
    // refuses answers its refusals at once, so a step is a fixed time instead of a count (the
    // rate it answers at is read over that time, its burst left out).
    let run = if refusing(last) {
        Next::Run {
            concurrency: next,
            requests: None,
            duration: RATE_STEP,
            max_duration: RATE_STEP,
        }
    } else {
        step_of(
            next,
            last.mean_ms * next as f64 / last.concurrency as f64,
            cycles(climb),
        )
    };
    match run {
        Next::Run { duration, .. } if elapsed + duration > budget(climb, limits) => {
            Next::Stop(format!(
                "the probe's time ({:.0} s) is up",
                budget(climb, limits).as_secs_f64()
            ))
        }
        run => run,
    }
}

/// The first step: one connection for [`MIN_STEP`].
pub(crate) fn first_step() -> Next {
    Next::Run {
        concurrency: 1,
        requests: None,
        duration: MIN_STEP,
        max_duration: MIN_STEP,
    }
}

/// Latencies per connection a step should hold: [`CYCLES`], twice that once requests queue
/// (past the first p99 jump), four times for a service whose times vary. A counted step's last
/// requests end with fewer than all its connections busy, which a queued service answers
/// faster; more cycles dilute that end. Varying times make a short step's mean noisy: with
/// exponential times, 5 requests a connection read a 4-connection step's throughput ±22 %,
/// and two such steps can look like a plateau long before the workers are busy.
fn cycles(climb: &[ProbeStep]) -> f64 {
    let sorted: Vec<&ProbeStep> = climb.iter().collect();
    // The spread of one connection's times sets how many a step needs: a mean's relative
    // error is cv/√n, so the cycles grow with cv² (4× for exponential times, cv = 1; up to 8×
    // for a lognormal's longer tail).
    if let Some(cv) = spread(climb).filter(|_| times_vary(climb)) {
        CYCLES * (1.0 + 3.0 * cv * cv).clamp(4.0, 8.0)
    } else if times_vary(climb) {
        CYCLES * 4.0
    } else if jump(&sorted).is_some() {
        CYCLES * 2.0
    } else {
        CYCLES
    }
}

/// A step of `concurrency` connections whose requests are expected to take `expected_ms`:
/// enough requests for `cycles` latencies per connection, and for at least [`MIN_STEP`] and at
/// most [`MAX_STEP`] of them.
pub(crate) fn step_of(concurrency: usize, expected_ms: f64, cycles: f64) -> Next {
    let expected_s = (expected_ms / 1000.0).max(1e-6);
    let duration = Duration::from_secs_f64(cycles * expected_s).clamp(MIN_STEP, MAX_STEP);
    let cycles = (duration.as_secs_f64() / expected_s).max(1.0);
    Next::Run {
        concurrency,
        requests: Some((concurrency as f64 * cycles).ceil() as u64),
        duration,
        max_duration: duration * 3 + MIN_STEP,
    }
}

/// Concurrency over the mean latency's knee that a service whose times vary must reach before
/// its throughput may count as flat.
const PAST_KNEE: f64 = 1.25;

/// True unless the service's times vary and the climb is not yet [`PAST_KNEE`] × the knee of
/// its mean latency: two noisy steps then look flat long before the workers are all busy (32
/// exponential workers of 80 ms read flat from 10 to 12 connections), while the latency's rise
/// past the knee is the workers' own evidence.
fn past_the_knee(climb: &[ProbeStep]) -> bool {
    let sorted: Vec<&ProbeStep> = climb.iter().filter(|s| s.requests > 0).collect();
    let Some(last) = sorted.last() else {
        return true;
    };
    !times_vary(sorted.iter().copied())
        || last.concurrency as f64 >= PAST_KNEE * knee(&sorted) as f64
}

/// True when the last two steps gained less than 10 % throughput over the best before them.
fn plateaued(steps: &[ProbeStep]) -> bool {
    if steps.len() < 3 {
        return false;
    }
    let (before, last_two) = steps.split_at(steps.len() - 2);
    let best = before.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    last_two.iter().all(|s| s.throughput_rps < FLAT * best)
}

/// Server CPU over which a plateau counts as CPU-bound, percent of one core per worker.
const CPU_SATURATED_PCT: f64 = 80.0;
/// Share of perfect scaling (c/S) under which a step is no longer scaling.
const SCALING: f64 = 0.8;
/// R² from which the USL counts as explaining the steps.
const USL_EXPLAINS: f64 = 0.95;
/// Spread around the plateau within which it counts as flat (a hard limit).
const FLAT_PLATEAU: f64 = 0.05;

/// Share of a step's requests refused from which the step counts as rate-limited: a few
/// refusals in a burst are the limiter's edge, not its rate.
const REFUSING: f64 = 0.05;

/// True when at least [`REFUSING`] of the step's requests were refused.
fn refusing(step: &ProbeStep) -> bool {
    step.refused_rps > REFUSING * (step.throughput_rps + step.refused_rps)
}

/// The verdict on a service that refuses requests past a rate: the rate it answered at while
/// refusing (the median over those steps), and where the refusals began.
fn rate_limited(sorted: &[&ProbeStep], alone: &ProbeStep) -> Option<Verdict> {
    let s_ms = alone.mean_ms.max(1e-3);
    let limited: Vec<&ProbeStep> = sorted.iter().copied().filter(|s| refusing(s)).collect();
    let onset = limited.first()?;
    // The first refusing step was a count of requests, its rate inflated by the limiter's
    // burst; the steps after it ran for a fixed time, their rate read past its first second.
    let measured = if limited.len() > 1 {
        &limited[1..]
    } else {
        &limited[..]
    };
    let answered: Vec<f64> = measured.iter().map(|s| s.throughput_rps).collect();
    let rate = median(&answered);
    let last = limited.last()?;
    let share = 100.0 * last.refused_rps / (last.throughput_rps + last.refused_rps);
    Some(Verdict {
        kind: Kind::RateLimited,
        workers: None,
        workers_observed: false,
        workers_range: None,
        service_time_ms: s_ms,
        service_time_ci_ms: mean_interval(alone),
        max_throughput_rps: rate,
        hard_limit: true,
        explanation: format!(
            "rate-limited at about {rate:.1} req/s: from {} connections on the service refused \
             what went past it (429, or 503 with Retry-After; {share:.0} % of the requests at {} \
             connections, {:.1} refused/s) instead of queueing it; the requests it answered \
             took {:.1} ms (median at {} connections, S = {s_ms:.1} ms alone)",
            onset.concurrency, last.concurrency, last.refused_rps, last.p50_ms, last.concurrency
        ),
        pool_error_pct: None,
        binding: None,
        usl: None,
    })
}

/// The verdict on a contended service: its peak (the USL's, which the steps explain), how far
/// throughput fell past it, and how much better the law explains the latency than a pool.
fn contended(sorted: &[&ProbeStep], alone: &ProbeStep) -> Option<Verdict> {
    let s_ms = alone.mean_ms.max(1e-3);
    let (fit, ratio) = contention(sorted)?;
    let peak = fit.peak_concurrency?;
    let last = sorted.last()?;
    let best = sorted
        .iter()
        .copied()
        .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))?;
    let fell = if last.concurrency > best.concurrency {
        format!(
            "; at {} connections it is down to {:.1} req/s ({:.0} % under its best)",
            last.concurrency,
            last.throughput_rps,
            100.0 * (1.0 - last.throughput_rps / best.throughput_rps)
        )
    } else {
        format!(
            " (beyond the {} connections tried: an extrapolation)",
            last.concurrency
        )
    };
    let second = sorted.iter().find(|s| s.concurrency == 2);
    let growth = second.map_or(String::new(), |s| {
        format!(
            "; latency grows from the first extra connection ({:.1} ms at 2 against {s_ms:.1} \
             alone)",
            s.mean_ms
        )
    });
    Some(Verdict {
        kind: Kind::Contended,
        workers: None,
        workers_observed: false,
        workers_range: None,
        service_time_ms: s_ms,
        service_time_ci_ms: mean_interval(alone),
        max_throughput_rps: fit.peak_throughput_rps,
        hard_limit: false,
        explanation: format!(
            "contended: throughput peaks at about {:.1} req/s near {peak:.1} connections{fell}\
             {growth}: requests slow each other down (a lock, a shared resource, cache \
             lines), no pool of workers; the USL explains the steps (R² = {:.3}) and their \
             latency {ratio:.0}× better than a worker pool does — look for what the requests \
             share",
            fit.peak_throughput_rps, fit.r_squared
        ),
        pool_error_pct: None,
        binding: None,
        usl: Some(fit),
    })
}

/// The 95 % interval of a step's mean latency, from its spread and count (normal, as a mean
/// of many is); `None` without a spread or with fewer than two requests.
fn mean_interval(step: &ProbeStep) -> Option<[f64; 2]> {
    (step.stdev_ms > 0.0 && step.requests >= 2).then(|| {
        let half = 1.96 * step.stdev_ms / (step.requests as f64).sqrt();
        [(step.mean_ms - half).max(0.0), step.mean_ms + half]
    })
}

/// What the steps say. `None` without a step at concurrency 1.
pub fn verdict(steps: &[ProbeStep]) -> Option<Verdict> {
    let merged = by_concurrency(steps);
    let sorted: Vec<&ProbeStep> = merged.iter().filter(|s| s.requests > 0).collect();
    let first = sorted.iter().find(|s| s.concurrency == 1)?;
    if let Some(v) = rate_limited(&sorted, first) {
        return Some(v);
    }
    // A CPU saturated at a number of cores from one connection on, and never beyond it, is
    // what bounds the service; throughput that kept rising under it was its code warming up,
    // which the USL fits as a concave climb. Contention is named there only where throughput
    // fell past its best within the steps (Node /calc read "contended, peak at 21.9
    // connections" from 4 steps rising 20 → 25 req/s at 98 % of one core).
    let flat_cores = cpu_flat_from_the_start(&sorted);
    if let Some(v) = contended(&sorted, first) {
        if flat_cores.is_none() || fell_past_best(&sorted) {
            return Some(v);
        }
    }
    // Where times vary widely, the service time is every request below the knee band (none
    // of them waited, so each latency is a service time), not one connection's few: a
    // lognormal pool of 16 × 300 ms read S = 231 ms (175–287) from one connection alone.
    let below = below_knee(&sorted);
    let first: &ProbeStep = below.as_ref().unwrap_or(first);
    // The mean, not the median: throughput is K over the mean service time whatever its
    // spread, and the two agree when it has none.
    let s_ms = first.mean_ms.max(1e-3);
    let ideal = |c: usize| c as f64 * 1000.0 / s_ms;
    let x_max = sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    let last = sorted.last()?;
    let points: Vec<(f64, f64)> = sorted
        .iter()
        .map(|s| (s.concurrency as f64, s.throughput_rps))
        .collect();
    let scaling = last.throughput_rps / ideal(last.concurrency);
    // Still growing at the end: the last step gained at least half of what its extra
    // connections would give a service with no limit, over the climb's step before it (steps
    // back and refinements are not the climb: a refinement far past the knee next to another
    // would compare two plateau readings' noise).
    let climbed = climb(steps);
    let before_last = climbed
        .iter()
        .rev()
        .find(|s| s.requests > 0 && s.concurrency < last.concurrency);
    // Two steps' throughputs differ by noise of about cv·√(1/n₁ + 1/n₂) (relative) when times
    // vary: a gain must pass twice that too, or two readings of one plateau look like growth
    // (2 exponential workers read "no limit" on 7 → 8 connections, +9 %).
    let cv = spread(sorted.iter().copied()).unwrap_or(0.0);
    let apart = |a: &ProbeStep, b: &ProbeStep| {
        let n = |s: &ProbeStep| 1.0 / s.requests.max(1) as f64;
        2.0 * cv * (n(a) + n(b)).sqrt()
    };
    let growing = match before_last {
        Some(prev) => {
            let more = last.concurrency as f64 / prev.concurrency as f64;
            let gain = (0.5 * (more - 1.0)).max(apart(last, prev));
            last.throughput_rps >= prev.throughput_rps * (1.0 + gain)
        }
        None => true,
    };
    let no_limit = |explanation: String| Verdict {
        kind: Kind::Async,
        workers: None,
        workers_observed: false,
        workers_range: None,
        service_time_ms: s_ms,
        service_time_ci_ms: mean_interval(first),
        max_throughput_rps: x_max,
        hard_limit: false,
        explanation,
        pool_error_pct: None,
        binding: None,
        usl: usl_fit(&points, false),
    };
    if growing && scaling >= SCALING && last.mean_ms <= 1.5 * s_ms {
        return Some(no_limit(format!(
            "asynchronous: at {} connections the median latency is still {:.1} ms (S = \
             {s_ms:.1} ms alone) and throughput {:.0} req/s is {:.0} % of {} × 1/S; no worker \
             limit up to {} connections",
            last.concurrency,
            last.p50_ms,
            last.throughput_rps,
            100.0 * scaling,
            last.concurrency,
            last.concurrency
        )));
    }
    // Still gaining at the last step, and 10 % over the step at the mean latency's knee: no
    // plateau was seen (the climb's time ran out first); naming a worker count would be a
    // guess.
    let at_knee = knee(&sorted);
    let knee_step = sorted.iter().rev().find(|s| s.concurrency <= at_knee);
    let knee_x = knee_step.map_or(0.0, |s| s.throughput_rps);
    let noise = knee_step.map_or(0.0, |k| apart(last, k));
    let unplateaued =
        at_knee >= last.concurrency || last.throughput_rps > FLAT * (1.0 + noise) * knee_x;
    if growing && unplateaued && !refusing(last) {
        return Some(no_limit(format!(
            "no worker limit found up to {} connections: throughput still grew at the last \
             step ({:.1} req/s, past the knee of the mean latency at {at_knee}), so no plateau \
             was seen and a limit, if any, is above it; a longer --max-time climbs further",
            last.concurrency, last.throughput_rps
        )));
    }
    let (mut k, mut observed) = workers(&sorted);
    // A service whose CPU is already saturated at one step's worth of cores from the first
    // step (one connection) is CPU-bound on that many cores, whatever the latency jump says:
    // throughput that still rose while its CPU stayed flat was its code warming up (a JIT
    // compiling a hot loop), which makes each request cheaper, not more workers.
    let busiest_cpu = sorted
        .iter()
        .filter_map(|s| s.server_cpu_demand_pct())
        .fold(0.0, f64::max);
    let warmed = flat_cores.is_some_and(|cores| cores < k);
    if let Some(cores) = flat_cores.filter(|_| warmed) {
        (k, observed) = (cores, true);
    }
    // The plateau: the steps from K connections on, by their median (the highest step's noise
    // would read high).
    let plateau_steps: Vec<f64> = sorted
        .iter()
        .filter(|s| s.concurrency >= k)
        .map(|s| s.throughput_rps)
        .collect();
    let plateau = if plateau_steps.is_empty() {
        x_max
    } else {
        median(&plateau_steps)
    };
    let hard_limit = plateau_steps.len() >= 2
        && plateau_steps
            .iter()
            .all(|x| (x - plateau).abs() <= FLAT_PLATEAU * plateau);
    let plateau_cpu = sorted
        .iter()
        .filter(|s| s.concurrency > k)
        .filter_map(|s| s.server_cpu_demand_pct())
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    let cpu = warmed || plateau_cpu.is_some_and(|c| c >= CPU_SATURATED_PCT * k as f64);
    // A worker pool is named only where its latency model explains the steps: with K workers
    // (or the plateau's fraction of one, as an inner tier's share makes it) it is within what
    // their noise allows. A CPU-bound plateau is named by the CPU it saturated instead.
    let k_eff = plateau * s_ms / 1000.0;
    let pool_error = pool_error_pct(&sorted, k as f64).min(pool_error_pct(&sorted, k_eff));
    let allowance = pool_allowance_pct(&sorted);
    let mut usl = usl_fit(&points, hard_limit);
    if !cpu && pool_error > allowance {
        let (best_c, best_x) = sorted
            .iter()
            .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))
            .map_or((0, 0.0), |s| (s.concurrency, s.throughput_rps));
        let usl_words = match &usl {
            Some(u) if u.r_squared >= USL_EXPLAINS => format!(
                "fits their throughput (R² = {:.3}) but not their latency as contention's does",
                u.r_squared
            ),
            Some(u) => format!(
                "does not explain their throughput (R² = {:.2})",
                u.r_squared
            ),
            None => "could not be fitted to them".to_string(),
        };
        return Some(Verdict {
            kind: Kind::Unclassified,
            workers: None,
            workers_observed: false,
            workers_range: None,
            service_time_ms: s_ms,
            service_time_ci_ms: mean_interval(first),
            max_throughput_rps: best_x,
            hard_limit: false,
            explanation: format!(
                "unclassified: no model the probe knows explains these steps — a pool of {k} \
                 worker(s) is {pool_error:.0} % off their mean latency (RMS; their noise allows \
                 {allowance:.0} %), the USL {usl_words}, and the service refused nothing; the \
                 most was {best_x:.1} req/s at {best_c} connections: read the steps above"
            ),
            pool_error_pct: Some(pool_error),
            binding: None,
            usl,
        });
    }
    let binding = (!cpu)
        .then(|| binding(&sorted, first, plateau, k_eff))
        .flatten();
    if let Some(u) = usl.as_mut() {
        let inside = u.peak_concurrency.filter(|n| *n <= last.concurrency as f64);
        if let (true, Some(n)) = (u.explains, inside) {
            u.explains = false;
            u.set_aside = Some(format!(
                "a pool of {k} worker(s) explains the steps' mean latency within \
                 {pool_error:.1} % (RMS), so the law's peak at {n:.1} connections is not read as \
                 retrograde scaling"
            ));
        }
    }
    let after = sorted.iter().find(|s| s.concurrency == k + 1);
    let doubling = after.map_or(String::new(), |a| {
        format!(
            "; at {} connections p99 is {:.1} ms ({:.1}× S)",
            a.concurrency,
            a.p99_ms,
            a.p99_ms / s_ms
        )
    });
    let top = last.concurrency;
    // A climb that was still gaining when it stopped (its time ran out) bounds K from below
    // only.
    let range = (!observed && !warmed)
        .then(|| {
            let (lo, hi) = knee_band(&sorted);
            (lo, if growing { top } else { hi })
        })
        .filter(|(lo, hi)| lo < hi);
    let count = match range {
        _ if observed => format!("{k}"),
        // The steps did not go far enough past the knee to bound it from above.
        Some((lo, hi)) if hi >= top => format!("about {k} ({lo} or more)"),
        Some((lo, hi)) => format!("about {k} ({lo}–{hi})"),
        None => format!("about {k}"),
    };
    let (kind, what) = if cpu {
        (
            Kind::Cpu,
            format!(
                "CPU-bound{}: the server's CPU reached {:.0} % while throughput stayed at",
                if warmed {
                    " (its CPU saturated from one connection on; throughput still rose as its \
                     code warmed up)"
                } else {
                    ""
                },
                plateau_cpu.unwrap_or(busiest_cpu)
            ),
        )
    } else {
        (
            Kind::Sync,
            format!("synchronous with {count} worker(s): throughput plateaus at"),
        )
    };
    Some(Verdict {
        kind,
        workers: Some(k),
        workers_observed: observed,
        workers_range: range.map(|(lo, hi)| [lo, hi]),
        service_time_ms: s_ms,
        service_time_ci_ms: mean_interval(first),
        max_throughput_rps: plateau,
        hard_limit,
        explanation: format!(
            "{what} {plateau:.1} req/s ≈ {k} / S (S = {s_ms:.1} ms{}), and latency grows \
             with each connection past {k}{doubling}; a pool of {k} explains the steps' mean \
             latency within {pool_error:.1} % (RMS){}",
            mean_interval(first).map_or(String::new(), |[lo, hi]| format!(
                ", 95 % within {lo:.1}–{hi:.1}"
            )),
            binding_words(binding.as_ref(), s_ms)
        ),
        pool_error_pct: Some(pool_error),
        binding,
        usl,
    })
}

/// The cores a service's CPU was saturated on from the first step (one connection) and never
/// went beyond: extra connections could only share them. `None` without CPU readings.
fn cpu_flat_from_the_start(sorted: &[&ProbeStep]) -> Option<usize> {
    let first = sorted.first()?.server_cpu_demand_pct()?;
    let busiest = sorted
        .iter()
        .filter_map(|s| s.server_cpu_demand_pct())
        .fold(0.0, f64::max);
    let cores = ((busiest / 100.0).round() as usize).max(1);
    (first >= CPU_SATURATED_PCT * cores as f64 && busiest < CPU_SATURATED_PCT * (cores + 1) as f64)
        .then_some(cores)
}

/// True when the steps' last throughput is 10 % or more under their best: a fall seen, not
/// extrapolated.
fn fell_past_best(sorted: &[&ProbeStep]) -> bool {
    let best = sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    sorted
        .last()
        .is_some_and(|last| last.throughput_rps <= best / FLAT)
}

/// What [`binding`] found, as the end of a verdict's sentence.
fn binding_words(binding: Option<&Binding>, s_ms: f64) -> String {
    match binding {
        Some(Binding::Outer { turn_ms }) => format!(
            "; queued requests waited most of a request's time ({turn_ms:.1} ms of {s_ms:.1} \
             at the first queued step): the binding pool holds a worker for the whole request"
        ),
        Some(Binding::Inner {
            requests_in_service,
            rate_rps,
        }) => format!(
            "; {requests_in_service:.2} requests in service at the plateau (X · S) is no whole \
             number of workers, which a pool holding its worker for the whole request would \
             give: an inner tier binds (a backend, a database pool a request holds for part of \
             its time), serving {rate_rps:.1} req/s (its workers over its time per request); \
             the pool in front has at least {} workers",
            requests_in_service.ceil()
        ),
        None => String::new(),
    }
}

/// The USL fitted to the steps' (concurrency, throughput), with its R²; it `explains` them only
/// when it fits well and the service has no hard limit.
fn usl_fit(points: &[(f64, f64)], hard_limit: bool) -> Option<UslFit> {
    let law = crate::usl::fit(points)?;
    let peak = law.peak_concurrency();
    let peak_x = match peak {
        Some(n) => law.throughput(n),
        None if law.sigma > 0.0 => law.lambda / law.sigma,
        None => f64::INFINITY,
    };
    let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.1 - law.throughput(p.0)).powi(2))
        .sum();
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        0.0
    };
    Some(UslFit {
        law,
        peak_concurrency: peak,
        peak_throughput_rps: peak_x,
        r_squared,
        explains: !hard_limit && r_squared >= USL_EXPLAINS,
        set_aside: None,
    })
}

/// p99 over the service time alone (the median at one connection) that marks the first
/// queued request: it waits a whole service time, so it takes about twice as long.
const P99_JUMP: f64 = 1.6;

/// p99 over the median at one connection past which a service's times vary too much for a
/// queued request to show as a p99 jump.
const VARIABLE: f64 = 1.5;

/// True when the service's own times vary (p99 alone over [`VARIABLE`] × its median): its
/// workers show in the steps' mean latency, not in a p99 jump.
fn variable(alone: &ProbeStep) -> bool {
    alone.p99_ms > VARIABLE * alone.p50_ms
}

/// True when the steps' one-connection step says the service's times vary.
fn times_vary<'a>(steps: impl IntoIterator<Item = &'a ProbeStep>) -> bool {
    steps
        .into_iter()
        .find(|s| s.concurrency == 1)
        .is_some_and(variable)
}

/// The two neighbouring steps (by concurrency) between which p99 first jumps, once throughput
/// is near its plateau (earlier p99 noise is no queue): the workers are at least the lower
/// step's concurrency and fewer than the upper's. None for a service whose times vary.
fn jump<'a>(sorted: &[&'a ProbeStep]) -> Option<(&'a ProbeStep, &'a ProbeStep)> {
    let alone = sorted
        .iter()
        .find(|s| s.concurrency == 1)
        .filter(|s| !variable(s))?;
    let x_max = sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    sorted
        .windows(2)
        .find(|w| w[1].p99_ms >= P99_JUMP * alone.p50_ms && w[0].throughput_rps >= 0.8 * x_max)
        .map(|w| (w[0], w[1]))
}

/// The worker count (the mean latency's [`knee`]), and whether it was observed: p99 also jumps
/// right after it, between K and K + 1 connections, as it does for a service whose times do
/// not vary.
fn workers(sorted: &[&ProbeStep]) -> (usize, bool) {
    let k = knee(sorted);
    let observed = jump(sorted)
        .is_some_and(|(below, above)| below.concurrency == k && above.concurrency == k + 1);
    (k, observed)
}

/// The worker count the steps' mean latencies fit best. With K workers and c connections
/// without think time, nobody waits while c ≤ K and all K are busy past it, whatever the
/// spread of the service times, so the mean latency is `S · max(1, c / K)`: for each K the
/// best S follows by least squares (each step weighted by its requests over its latency
/// squared, as its mean's relative error shrinks with its count), and the K with the least
/// residual wins — every step counts, not one noisy p99.
fn knee(sorted: &[&ProbeStep]) -> usize {
    knee_fit(sorted).0
}

/// Each step's weight in a fit of its mean latency: its requests over its latency squared, as
/// its mean's relative error shrinks with its count.
fn weight(s: &ProbeStep) -> f64 {
    s.requests as f64 / s.mean_ms.max(1e-3).powi(2)
}

/// The [`knee`] and the weighted residual of its pool model, `S · max(1, c/K)`.
fn knee_fit(sorted: &[&ProbeStep]) -> (usize, f64) {
    let top = sorted.last().map_or(1, |s| s.concurrency);
    pool_residuals(sorted)
        .into_iter()
        .fold(
            (top, f64::INFINITY),
            |best, (k, r)| if r < best.1 { (k, r) } else { best },
        )
}

/// The worker counts the steps cannot tell from the [`knee`]: each K whose pool model's
/// residual is within 3.84 σ² of the best one's (a 95 % band for one parameter), as the lowest
/// and highest. σ² is what one step's term of the residual is worth in noise: a step's mean
/// of n latencies is off by cv/√n relative, and its weight is n over its latency squared, so
/// each term is about cv² (the one-connection step's, doubled for queued steps) or what the
/// best fit leaves per degree of freedom when that is more.
fn knee_band(sorted: &[&ProbeStep]) -> (usize, usize) {
    let (k, best) = knee_fit(sorted);
    let dof = sorted.len().saturating_sub(2).max(1) as f64;
    let cv2 = spread(sorted.iter().copied()).map_or(0.0, |cv| cv * cv);
    // Queued latencies share their waits, so a queued step's mean is noisier than cv/√n:
    // twice that variance is an allowance, not a calibration.
    let within = 3.84 * (best / dof).max(2.0 * cv2);
    let band: Vec<usize> = pool_residuals(sorted)
        .into_iter()
        .filter(|(_, r)| r - best <= within)
        .map(|(k, _)| k)
        .collect();
    let lo = band.iter().copied().min().unwrap_or(k);
    let hi = band.iter().copied().max().unwrap_or(k);
    (lo.min(k), hi.max(k))
}

/// The weighted residual of the pool model with K workers, for each K up to the last step's
/// concurrency.
fn pool_residuals(sorted: &[&ProbeStep]) -> Vec<(usize, f64)> {
    let top = sorted.last().map_or(1, |s| s.concurrency);
    (1..=top)
        .map(|k| (k, pool_residual(sorted, k as f64)))
        .collect()
}

/// The weighted residual of the pool model with `k` workers (see [`pool_model`]).
fn pool_residual(sorted: &[&ProbeStep], k: f64) -> f64 {
    let (s_hat, g) = pool_model(sorted, k);
    sorted
        .iter()
        .map(|s| weight(s) * (s.mean_ms - s_hat * g(s)).powi(2))
        .sum()
}

/// The pool model with `k` workers (a fraction allowed: an inner tier's share of the request
/// makes the knee fall between two counts): the S that fits the steps' mean latencies best,
/// by weighted least squares, and each step's factor, `max(1, c / k)`.
fn pool_model(sorted: &[&ProbeStep], k: f64) -> (f64, impl Fn(&ProbeStep) -> f64) {
    let g = move |s: &ProbeStep| (s.concurrency as f64 / k.max(1e-9)).max(1.0);
    let num: f64 = sorted.iter().map(|s| weight(s) * s.mean_ms * g(s)).sum();
    let den: f64 = sorted.iter().map(|s| weight(s) * g(s) * g(s)).sum();
    (num / den.max(1e-12), g)
}

/// How far the pool model with `k` workers is from the steps' mean latencies: the root mean
/// square of each step's relative error, percent.
fn pool_error_pct(sorted: &[&ProbeStep], k: f64) -> f64 {
    let (s_hat, g) = pool_model(sorted, k);
    let squares: f64 = sorted
        .iter()
        .map(|s| {
            let model = (s_hat * g(s)).max(1e-9);
            ((s.mean_ms - model) / model).powi(2)
        })
        .sum();
    100.0 * (squares / sorted.len().max(1) as f64).sqrt()
}

/// The pool model's error the steps' own noise allows, percent: three times the RMS relative
/// error of their means (cv/√n each, cv the one-connection step's spread, its variance doubled
/// for queued steps as in [`knee_band`]), and at least [`POOL_EXPLAINS_PCT`].
fn pool_allowance_pct(sorted: &[&ProbeStep]) -> f64 {
    let cv2 = spread(sorted.iter().copied()).map_or(0.0, |cv| cv * cv);
    let noise: f64 = sorted
        .iter()
        .map(|s| 2.0 * cv2 / s.requests.max(1) as f64)
        .sum::<f64>()
        / sorted.len().max(1) as f64;
    (300.0 * noise.sqrt()).max(POOL_EXPLAINS_PCT)
}

/// The pool model's RMS error under which it explains the steps whatever their noise, percent.
const POOL_EXPLAINS_PCT: f64 = 10.0;

/// Which tier binds, where the steps can tell. A pool that holds its worker for the whole
/// request serves `X = K / S`, so the requests in service at the plateau, `X · S` (`k_eff`), are
/// a whole number; a tier the request holds for a part `D` of its time serves `K₂ / D`, and
/// `X · S = K₂ · S / D` falls between whole numbers. So a fraction (more than the noise of X
/// and S allows: 0.2, or 3 % of `k_eff`) names an inner tier. A whole number is a pool holding
/// the whole request only when the queue's turn says so too: the slowest queued requests at
/// the first step past the knee waited most of a request's time (p99 over S by the jump that
/// marks a queue, [`P99_JUMP`]); an inner tier's waits are a part of it. Larger pools' workers
/// fall out of step and their queued requests wait less, so a whole number with a short turn
/// names nothing. `None` too where the service's times vary (X · S is then too noisy).
fn binding(sorted: &[&ProbeStep], alone: &ProbeStep, plateau: f64, k_eff: f64) -> Option<Binding> {
    if variable(alone) {
        return None;
    }
    let s_ms = alone.p50_ms.max(1e-3);
    let fraction = (k_eff - k_eff.round()).abs();
    if fraction > (0.2_f64).max(0.03 * k_eff) {
        return Some(Binding::Inner {
            requests_in_service: k_eff,
            rate_rps: plateau,
        });
    }
    let queued = sorted
        .iter()
        .find(|s| s.concurrency as f64 >= k_eff + 0.5 && s.p99_ms > alone.p99_ms + 0.1 * s_ms)?;
    let turn_ms = queued.p99_ms - s_ms;
    (fraction <= 0.1_f64.max(0.015 * k_eff) && turn_ms >= (P99_JUMP - 1.0) * s_ms)
        .then_some(Binding::Outer { turn_ms })
}

/// The weighted residual of the steps' mean latency against what `law` implies for a closed
/// loop, `R(c) = c / X(c)`.
fn usl_latency_residual(sorted: &[&ProbeStep], law: &Usl) -> f64 {
    sorted
        .iter()
        .map(|s| {
            let c = s.concurrency as f64;
            let r = 1000.0 * c / law.throughput(c).max(1e-9);
            weight(s) * (s.mean_ms - r).powi(2)
        })
        .sum()
}

/// How much better the USL explains the steps' latency than a worker pool does, when it
/// explains their throughput (R² ≥ 0.95) with coherency (κ > 0, a peak): a service whose
/// latency grows from the first extra connection, smoothly, as requests that slow each other
/// down (a lock, a shared cache line) make it. The fit and the two residuals, pool over USL.
fn contention(sorted: &[&ProbeStep]) -> Option<(UslFit, f64)> {
    if sorted.len() < 4 {
        return None;
    }
    let points: Vec<(f64, f64)> = sorted
        .iter()
        .map(|s| (s.concurrency as f64, s.throughput_rps))
        .collect();
    let fit = usl_fit(&points, false)?;
    if !fit.explains || fit.peak_concurrency.is_none() {
        return None;
    }
    // The pool with a whole number of workers, or with the requests in service its best step
    // had (X · S): an inner tier's knee falls between two counts, and a smooth law would fit
    // it better than a whole count does.
    let alone_ms = sorted
        .iter()
        .find(|s| s.concurrency == 1)
        .map_or(1.0, |s| s.mean_ms);
    let x_max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let pool = knee_fit(sorted)
        .1
        .min(pool_residual(sorted, x_max * alone_ms / 1000.0));
    let usl = usl_latency_residual(sorted, &fit.law);
    let ratio = pool / usl.max(1e-12);
    (ratio >= CONTENDED).then_some((fit, ratio))
}

/// How many times the USL's residual a worker pool's must be for the steps to read as
/// contention rather than a pool.
const CONTENDED: f64 = 3.0;

/// True while a contended service's climb has not gone past its peak far enough to see the
/// fall: the USL's peak not yet 1.3× behind the last step, and throughput not yet 10 % under
/// its best.
fn before_the_fall(climb: &[ProbeStep]) -> bool {
    let sorted: Vec<&ProbeStep> = climb.iter().filter(|s| s.requests > 0).collect();
    let Some((fit, _)) = contention(&sorted) else {
        return false;
    };
    let (Some(last), Some(peak)) = (sorted.last(), fit.peak_concurrency) else {
        return false;
    };
    let best = sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    (last.concurrency as f64) < 1.3 * peak && last.throughput_rps > 0.9 * best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a step at `c` connections measures on a service with `workers` workers (None:
    /// unlimited) of `s_ms`, with a CPU figure per busy worker.
    fn step_at(workers: Option<usize>, s_ms: f64, cpu_per_worker: f64, c: usize) -> ProbeStep {
        let k = workers.unwrap_or(usize::MAX).min(c) as f64;
        let x = k * 1000.0 / s_ms;
        let mean = c as f64 * 1000.0 / x;
        let queued = c as f64 > k;
        ProbeStep {
            concurrency: c,
            throughput_rps: x,
            p50_ms: if queued { mean.max(s_ms) } else { s_ms },
            p99_ms: if queued {
                2.0 * s_ms * (c as f64 / k).ceil()
            } else {
                s_ms * 1.05
            },
            mean_ms: mean,
            requests: 100,
            error_pct: 0.0,
            server_cpu_pct: Some(cpu_per_worker * k),
            server_cpu_wait_pct: None,
            refused_rps: 0.0,
            stdev_ms: 0.0,
        }
    }

    /// What a step at `c` connections measures on a token bucket of `rate` req/s whose
    /// answered requests take `s_ms`: what goes past the rate is refused at once; a counted
    /// step's answered rate reads `burst_gain` high (the bucket's burst in a short step).
    fn bucket_step(rate: f64, s_ms: f64, c: usize, burst_gain: f64) -> ProbeStep {
        let offered = c as f64 * 1000.0 / s_ms;
        let answered = offered.min(rate * burst_gain);
        ProbeStep {
            refused_rps: if offered > rate { 50.0 * c as f64 } else { 0.0 },
            throughput_rps: answered,
            ..step_at(None, s_ms, 0.0, c)
        }
    }

    #[test]
    fn a_service_that_refuses_past_a_rate_is_rate_limited_at_the_rate_its_timed_steps_read() {
        // 150 req/s, 20 ms: 1-3 connections are under the rate; the first refusing step (a
        // count of requests) reads the burst, 180; the timed ones after it read 150 and 151.
        let mut steps: Vec<ProbeStep> = (1..=3).map(|c| bucket_step(150.0, 20.0, c, 1.0)).collect();
        steps.push(bucket_step(150.0, 20.0, 4, 1.2));
        steps.push(bucket_step(150.0, 20.0, 5, 1.0));
        steps.push(bucket_step(151.0, 20.0, 6, 1.0));
        let limits = ProbeLimits::default();
        // Once it refuses, a step is a fixed time, not a count.
        match next_step(&steps[..4], Duration::from_secs(5), &limits) {
            Next::Run { requests, .. } => assert_eq!(requests, None),
            other => panic!("{other:?}"),
        }
        // Three refusing steps end the climb, and there is no worker count to step back to.
        assert!(matches!(
            next_step(&steps, Duration::from_secs(10), &limits),
            Next::Stop(_)
        ));
        let v = verdict(&steps).unwrap();
        assert_eq!(v.kind, Kind::RateLimited);
        assert!((v.max_throughput_rps - 150.5).abs() < 0.01, "{v:?}");
        assert!(v.workers.is_none() && v.usl.is_none());
        assert!(
            v.explanation.contains("from 4 connections on"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn throughput_that_peaks_and_falls_with_latency_rising_from_the_start_is_contention() {
        // The USL's own shape: 20 ms alone, σ = 0.02, κ = 0.01 (peak at 9.9 connections).
        let law = Usl {
            lambda: 50.0,
            sigma: 0.02,
            kappa: 0.01,
        };
        let steps = usl_steps(&law, 14, 1.02);
        // The climb goes on past the plateau until the fall shows.
        assert!(matches!(
            next_step(&steps[..9], Duration::from_secs(9), &ProbeLimits::default()),
            Next::Run {
                concurrency: 10,
                ..
            }
        ));
        let v = verdict(&steps).unwrap();
        assert_eq!(v.kind, Kind::Contended, "{}", v.explanation);
        let peak = v.usl.as_ref().and_then(|u| u.peak_concurrency).unwrap();
        assert!((peak - 9.9).abs() < 0.2, "{peak}");
        assert!(v.workers.is_none());
        // A pool's steps are no contention, whatever the USL makes of them.
        let pool = synthetic(Some(6), 20.0, 0.0, 14);
        assert_eq!(verdict(&pool).unwrap().kind, Kind::Sync);
    }

    /// The steps of the ladder up to `upto` on a service that follows `law` exactly: each
    /// step's latency is what the law implies for a closed loop, p99 `p99_over` its mean.
    fn usl_steps(law: &Usl, upto: usize, p99_over: f64) -> Vec<ProbeStep> {
        LADDER
            .iter()
            .take_while(|c| **c <= upto)
            .map(|&c| {
                let x = law.throughput(c as f64);
                let mean = c as f64 * 1000.0 / x;
                ProbeStep {
                    throughput_rps: x,
                    p50_ms: mean,
                    p99_ms: mean * p99_over,
                    mean_ms: mean,
                    ..step_at(None, 1000.0 / law.lambda, 0.0, c)
                }
            })
            .collect()
    }

    /// The steps of the ladder up to `upto`, as [`step_at`] measures them.
    fn synthetic(
        workers: Option<usize>,
        s_ms: f64,
        cpu_per_worker: f64,
        upto: usize,
    ) -> Vec<ProbeStep> {
        LADDER
            .iter()
            .take_while(|c| **c <= upto)
            .map(|&c| step_at(workers, s_ms, cpu_per_worker, c))
            .collect()
    }

    /// Runs the probe's logic against `service`, each step taking its expected duration; the
    /// steps in the order they ran and why the probe stopped.
    fn drive(
        mut service: impl FnMut(usize) -> ProbeStep,
        limits: &ProbeLimits,
    ) -> (Vec<ProbeStep>, String) {
        let mut steps = Vec::new();
        let mut elapsed = Duration::ZERO;
        loop {
            match next_step(&steps, elapsed, limits) {
                Next::Run {
                    concurrency,
                    duration,
                    requests,
                    max_duration,
                } => {
                    assert!(duration >= MIN_STEP && duration <= MAX_REFINE_STEP);
                    assert!(max_duration >= duration);
                    assert!(requests.is_none_or(|n| n >= concurrency as u64));
                    elapsed += duration;
                    steps.push(service(concurrency));
                    assert!(steps.len() < 60, "the probe must end");
                }
                Next::Stop(why) => return (steps, why),
            }
        }
    }

    fn ran(steps: &[ProbeStep]) -> Vec<usize> {
        steps.iter().map(|s| s.concurrency).collect()
    }

    #[test]
    fn a_jump_between_two_steps_is_narrowed_until_the_workers_are_observed() {
        // The box: 12 workers of 314 ms, its queued steps reading 4 % high, so that
        // X·S at 14 connections is 12.5 and rounding said 13.
        let limits = ProbeLimits::default();
        let service = |c: usize| {
            let mut s = step_at(Some(12), 314.0, 1.0, c);
            if c > 12 {
                s.throughput_rps *= 1.04;
            }
            s
        };
        let (steps, why) = drive(service, &limits);
        assert!(why.contains("stopped growing"), "{why}");
        let order = ran(&steps);
        assert_eq!(&order[order.len() - 3..], &[14, 16, 13], "{order:?}");
        let v = verdict(&steps).unwrap();
        assert_eq!(
            (v.kind, v.workers, v.workers_observed),
            (Kind::Sync, Some(12), true)
        );
        // The plateau is the median of the steps from 12 on, not the highest one's noise.
        assert!(
            (v.max_throughput_rps - 12.0 * 1000.0 / 314.0 * 1.04).abs() < 0.5,
            "{v:?}"
        );
        // Past the ladder's consecutive counts, every worker count is observed exactly.
        for k in [13, 15, 17, 18, 22, 27, 35, 45] {
            let wide = ProbeLimits {
                max_concurrency: 100,
                max_time: Duration::from_secs(300),
                ..ProbeLimits::default()
            };
            let (steps, _) = drive(|c| step_at(Some(k), 50.0, 1.0, c), &wide);
            let v = verdict(&steps).unwrap();
            assert_eq!(
                (v.workers, v.workers_observed),
                (Some(k), true),
                "{:?}",
                ran(&steps)
            );
            assert!(steps.len() <= LADDER.len() + 6, "{:?}", ran(&steps));
        }
    }

    #[test]
    fn without_time_to_step_back_the_worker_count_is_an_estimate_and_says_so() {
        let service = |c: usize| step_at(Some(12), 314.0, 1.0, c);
        // The time the climb takes, from the durations the probe asks for.
        let mut climbed = Vec::new();
        let mut elapsed = Duration::ZERO;
        let limits = ProbeLimits::default();
        while let Next::Run {
            concurrency,
            duration,
            ..
        } = next_step(&climbed, elapsed, &limits)
        {
            if climbed
                .iter()
                .any(|s: &ProbeStep| s.concurrency > concurrency)
            {
                break;
            }
            elapsed += duration;
            climbed.push(service(concurrency));
        }
        let tight = ProbeLimits {
            max_time: elapsed + Duration::from_millis(100),
            ..ProbeLimits::default()
        };
        let (steps, why) = drive(service, &tight);
        assert!(
            why.contains("no time left to measure 13 connections, next to the 12 workers"),
            "{why}"
        );
        assert!(!ran(&steps).contains(&13));
        let v = verdict(&steps).unwrap();
        assert_eq!((v.workers, v.workers_observed), (Some(12), false), "{v:?}");
        assert!(v.explanation.contains("about 12"), "{}", v.explanation);
    }

    #[test]
    fn a_hard_limit_is_said_as_such_and_the_usl_only_when_it_explains_the_steps() {
        let v = verdict(&synthetic(Some(12), 314.0, 1.0, 20)).unwrap();
        assert!(v.hard_limit, "{v:?}");
        let usl = v.usl.unwrap();
        assert!(!usl.explains, "{usl:?}");
        // A service that degrades as the USL says: contention and coherency, no hard cap.
        let law = Usl {
            lambda: 100.0,
            sigma: 0.05,
            kappa: 0.002,
        };
        let steps = usl_steps(&law, 48, 1.2);
        let v = verdict(&steps).unwrap();
        assert!(!v.hard_limit, "{v:?}");
        let usl = v.usl.unwrap();
        assert!(usl.explains && usl.r_squared > 0.99, "{usl:?}");
        assert!(
            (usl.peak_concurrency.unwrap() - 21.8).abs() < 1.0,
            "{usl:?}"
        );
    }

    #[test]
    fn a_synchronous_service_gives_its_workers_and_service_time() {
        for (k, s) in [(1, 200.0), (3, 905.0), (4, 50.0), (8, 20.0)] {
            let steps = synthetic(Some(k), s, 1.0, k + 2);
            let v = verdict(&steps).unwrap();
            assert_eq!(v.kind, Kind::Sync, "{v:?}");
            assert_eq!(v.workers, Some(k), "{v:?}");
            assert!((v.service_time_ms - s).abs() < 1e-6);
            assert!((v.max_throughput_rps - k as f64 * 1000.0 / s).abs() < 1e-6);
        }
    }

    #[test]
    fn the_p99_jump_corrects_a_throughput_that_short_steps_overestimate() {
        // Short steps leave out the queue's build-up: throughput reads 8 % high, X·S = 8.6.
        let mut steps = synthetic(Some(8), 20.0, 1.0, 12);
        for s in &mut steps {
            s.throughput_rps *= 1.08;
        }
        let v = verdict(&steps).unwrap();
        assert_eq!(v.workers, Some(8), "{v:?}");
        // A p99 outlier at 2 connections, far from the plateau, is noise.
        steps[1].p99_ms *= 3.0;
        assert_eq!(verdict(&steps).unwrap().workers, Some(8));
    }

    /// A step at `c` connections on a service with `workers` workers (None: unlimited) whose
    /// times are exponential with mean `s_ms`: its mean latency off by `noise` (relative), its
    /// median and p99 those of the exponential, five requests per connection.
    fn exponential_step(workers: Option<usize>, s_ms: f64, c: usize, noise: f64) -> ProbeStep {
        let k = workers.unwrap_or(usize::MAX).min(c) as f64;
        let mean = s_ms * (c as f64 / k) * (1.0 + noise);
        ProbeStep {
            concurrency: c,
            throughput_rps: c as f64 * 1000.0 / mean,
            p50_ms: 0.69 * mean,
            p99_ms: 4.6 * mean,
            mean_ms: mean,
            requests: 5 * c as u64,
            error_pct: 0.0,
            server_cpu_pct: None,
            server_cpu_wait_pct: None,
            refused_rps: 0.0,
            stdev_ms: 0.0,
        }
    }

    /// Noise in ±`spread`, the same for the same `i`.
    fn noise(i: usize, spread: f64) -> f64 {
        let x = (i as u64)
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        spread * ((x >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0)
    }

    #[test]
    fn a_climb_still_gaining_when_its_time_ran_out_names_no_worker_count() {
        // 16 workers of 300 ms, the time up at 8 connections, and one connection's mean read
        // low (217 ms: a lognormal's few draws): throughput is only 72 % of 8 / S, yet every
        // step gained and the knee is the last step — not "about 8 workers".
        let mut steps = synthetic(Some(16), 300.0, 0.0, 8);
        steps[0].mean_ms = 217.5;
        let v = verdict(&steps).unwrap();
        assert_eq!(v.kind, Kind::Async, "{v:?}");
        assert!(v.workers.is_none());
        assert!(
            v.explanation
                .contains("no worker limit found up to 8 connections"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn the_service_times_interval_comes_from_the_spread_and_count_of_one_connection() {
        let alone = ProbeStep {
            stdev_ms: 100.0,
            requests: 400,
            ..step_at(Some(4), 100.0, 0.0, 1)
        };
        // 1.96 × 100 / √400 = 9.8 ms either side of the mean.
        let [lo, hi] = mean_interval(&alone).unwrap();
        assert!(
            (lo - 90.2).abs() < 1e-9 && (hi - 109.8).abs() < 1e-9,
            "{lo}–{hi}"
        );
        assert_eq!(mean_interval(&step_at(Some(4), 100.0, 0.0, 1)), None);
    }

    #[test]
    fn the_workers_of_a_service_whose_times_vary_come_from_every_steps_mean_latency() {
        // Exponential times: p99 is 6.7× the median from one connection on, so no p99 jump can
        // mark the first queued request; the mean latency's knee does, through 5 % noise.
        for (k, s) in [(3, 40.0), (10, 150.0), (16, 20.0)] {
            let steps: Vec<ProbeStep> = LADDER
                .iter()
                .take_while(|c| **c <= 2 * k)
                .enumerate()
                .map(|(i, &c)| exponential_step(Some(k), s, c, noise(i, 0.05)))
                .collect();
            let v = verdict(&steps).unwrap();
            assert_eq!((v.kind, v.workers_observed), (Kind::Sync, false), "{v:?}");
            let found = v.workers.unwrap();
            assert!(
                found.abs_diff(k) <= k / 10,
                "{found} workers for {k}: {v:?}"
            );
            assert!((v.service_time_ms - s).abs() <= 0.05 * s, "{v:?}");
            // The count's band holds the true one: "about K (lo–hi)", never a narrower wrong.
            let [lo, hi] = v.workers_range.unwrap_or([found, found]);
            assert!(lo <= k && k <= hi, "{k} outside {lo}–{hi}: {v:?}");
            assert!(jump(&steps.iter().collect::<Vec<_>>()).is_none());
            // Their noisy means get four times the latencies a step, and the climb goes on
            // until a quarter past the knee.
            assert_eq!(cycles(&steps), 4.0 * CYCLES);
            assert!(past_the_knee(&steps));
            let before: Vec<ProbeStep> = steps
                .iter()
                .filter(|s| s.concurrency <= k)
                .cloned()
                .collect();
            assert!(!past_the_knee(&before));
        }
        // Unlimited, with the same noise: asynchronous.
        let steps: Vec<ProbeStep> = LADDER
            .iter()
            .take_while(|c| **c <= 24)
            .enumerate()
            .map(|(i, &c)| exponential_step(None, 80.0, c, noise(i, 0.05)))
            .collect();
        assert_eq!(verdict(&steps).unwrap().kind, Kind::Async);
    }

    #[test]
    fn one_connection_is_measured_again_when_its_first_step_held_too_few_requests() {
        let limits = ProbeLimits::default();
        // 300 ms requests: 3 in the first second.
        let mut first = step_at(Some(4), 300.0, 1.0, 1);
        first.requests = 3;
        match next_step(
            std::slice::from_ref(&first),
            Duration::from_secs(1),
            &limits,
        ) {
            Next::Run {
                concurrency: 1,
                requests: Some(n),
                duration,
                ..
            } => {
                assert_eq!(n, MIN_ALONE);
                assert_eq!(duration, Duration::from_secs(6));
            }
            other => panic!("{other:?}"),
        }
        // Once only, and then the climb goes on from the second measure.
        let again = step_at(Some(4), 300.0, 1.0, 1);
        let steps = [first, again];
        assert!(matches!(
            next_step(&steps, Duration::from_secs(7), &limits),
            Next::Run { concurrency: 2, .. }
        ));
        assert_eq!(climb(&steps).len(), 1);
        assert!(!stepped_back(&steps));
    }

    #[test]
    fn a_service_slower_than_the_first_step_is_measured_again_for_the_longest_step() {
        let limits = ProbeLimits::default();
        // Seed 000's black box: a second a request, so the first 1 s step completes none.
        let mut first = step_at(Some(3), 1000.0, 1.0, 1);
        first.requests = 0;
        first.mean_ms = 0.0;
        first.p50_ms = 0.0;
        match next_step(
            std::slice::from_ref(&first),
            Duration::from_secs(1),
            &limits,
        ) {
            Next::Run {
                concurrency: 1,
                requests: Some(n),
                duration,
                max_duration,
            } => {
                assert_eq!(n, MIN_ALONE);
                assert_eq!((duration, max_duration), (MAX_STEP, MAX_STEP));
            }
            other => panic!("{other:?}"),
        }
        // Measured again, the probe climbs from there and finds the three workers.
        let again = step_at(Some(3), 1000.0, 1.0, 1);
        assert!(matches!(
            next_step(&[first.clone(), again], Duration::from_secs(9), &limits),
            Next::Run { concurrency: 2, .. }
        ));
        let wide = ProbeLimits {
            max_time: Duration::from_secs(90),
            ..ProbeLimits::default()
        };
        let mut calls = 0;
        let (steps, why) = drive(
            |c| {
                calls += 1;
                let mut s = step_at(Some(3), 1000.0, 1.0, c);
                if calls == 1 {
                    s.requests = 0;
                }
                s
            },
            &wide,
        );
        let v = verdict(&steps).unwrap_or_else(|| panic!("{why}: {:?}", ran(&steps)));
        assert_eq!((v.kind, v.workers), (Kind::Sync, Some(3)), "{why}");
        // Still a failure when the second measure completes nothing either.
        let none = ProbeStep {
            requests: 0,
            ..first.clone()
        };
        assert!(matches!(
            next_step(&[first, none], Duration::from_secs(9), &limits),
            Next::Stop(why) if why.contains("no request completed")
        ));
    }

    #[test]
    fn an_asynchronous_service_has_no_worker_limit() {
        let v = verdict(&synthetic(None, 1100.0, 0.0, 16)).unwrap();
        assert_eq!(v.kind, Kind::Async);
        assert_eq!(v.workers, None);
        assert!(v.explanation.contains("no worker limit up to 16"));
    }

    #[test]
    fn a_single_event_loop_warming_up_is_cpu_bound_on_one_core_not_three_workers() {
        // Node /calc as the runtimes suite saw it: CPU ~100 % from one connection on, while
        // the JIT made each request cheaper (10.6 → 15.1 req/s) and latency jumped past 3.
        let step = |c: usize, p50: f64, p99: f64, x: f64, cpu: f64| ProbeStep {
            concurrency: c,
            requests: 20,
            throughput_rps: x,
            p50_ms: p50,
            p99_ms: p99,
            mean_ms: p50,
            error_pct: 0.0,
            server_cpu_pct: Some(cpu),
            server_cpu_wait_pct: None,
            refused_rps: 0.0,
            stdev_ms: 0.0,
        };
        let steps = [
            step(1, 92.7, 98.3, 10.6, 98.0),
            step(2, 184.1, 292.4, 11.8, 96.4),
            step(3, 200.8, 365.6, 15.1, 98.6),
            step(4, 266.8, 476.2, 15.3, 97.2),
            step(5, 414.0, 829.4, 12.4, 100.2),
        ];
        let v = one_core(&steps);
        // The mean latency doubles from 2 connections on: one worker, whatever p99 did.
        assert!(v.explanation.contains("CPU-bound"), "{}", v.explanation);
        // Warming faster, so that the mean latency alone suggests 2 workers: the CPU, flat at
        // one core from the first step, says one.
        let steps = [
            step(1, 92.7, 98.3, 10.8, 98.0),
            step(2, 100.0, 120.0, 20.0, 97.0),
            step(3, 140.0, 200.0, 21.4, 99.0),
            step(4, 190.0, 260.0, 21.0, 99.5),
            step(5, 240.0, 330.0, 20.8, 100.0),
        ];
        let v = one_core(&steps);
        assert!(v.explanation.contains("warmed up"), "{}", v.explanation);
    }

    /// The verdict on `steps`, checked to be CPU-bound on one core.
    fn one_core(steps: &[ProbeStep]) -> Verdict {
        let v = verdict(steps).unwrap();
        assert_eq!(
            (v.kind, v.workers),
            (Kind::Cpu, Some(1)),
            "{}",
            v.explanation
        );
        v
    }

    #[test]
    fn a_warming_event_loop_that_the_usl_fits_is_cpu_bound_unless_throughput_falls() {
        // Node /calc?n=2000000 as CI saw it: 98 % of one core from one connection on while
        // throughput rose 20 → 25 req/s; the USL fits that climb (R² 0.99, peak beyond the
        // steps) and its latency far better than one worker does.
        let step = |c: usize, mean: f64, stdev: f64, x: f64| ProbeStep {
            concurrency: c,
            requests: 20 * c as u64,
            throughput_rps: x,
            p50_ms: mean,
            p99_ms: 1.3 * mean,
            mean_ms: mean,
            error_pct: 0.0,
            server_cpu_pct: Some(98.0),
            server_cpu_wait_pct: Some(0.02),
            refused_rps: 0.0,
            stdev_ms: stdev,
        };
        let steps = [
            step(1, 52.7, 5.4, 18.9),
            step(2, 86.6, 11.1, 23.1),
            step(3, 125.1, 43.2, 24.0),
            step(4, 158.6, 57.8, 25.2),
        ];
        one_core(&steps);
        // Without the CPU reading, the same steps are contention.
        let unwatched: Vec<ProbeStep> = steps
            .iter()
            .map(|s| ProbeStep {
                server_cpu_pct: None,
                server_cpu_wait_pct: None,
                ..s.clone()
            })
            .collect();
        assert_eq!(verdict(&unwatched).unwrap().kind, Kind::Contended);
        // On one saturated core, throughput seen falling past its best is contention still
        // (the USL's own steps, peak at 4.5 connections and 14 % down at 14, one core busy
        // throughout: what the requests share is that core).
        let law = Usl {
            lambda: 19.0,
            sigma: 0.6,
            kappa: 0.02,
        };
        let falling: Vec<ProbeStep> = usl_steps(&law, 14, 1.02)
            .into_iter()
            .map(|s| ProbeStep {
                server_cpu_pct: Some(98.0),
                ..s
            })
            .collect();
        let v = verdict(&falling).unwrap();
        assert_eq!(v.kind, Kind::Contended, "{}", v.explanation);
    }

    #[test]
    fn a_saturated_cpu_makes_a_plateau_cpu_bound() {
        let v = verdict(&synthetic(Some(1), 100.0, 99.0, 4)).unwrap();
        assert_eq!((v.kind, v.workers), (Kind::Cpu, Some(1)));
        let v = verdict(&synthetic(Some(2), 100.0, 3.0, 4)).unwrap();
        assert_eq!((v.kind, v.workers), (Kind::Sync, Some(2)));
    }

    #[test]
    fn a_busy_worker_starved_of_cpu_by_other_work_is_still_cpu_bound() {
        // One busy worker on a machine shared with other work: it gets 60 % of a core and
        // waits for the CPU the other 40 %.
        let starved: Vec<ProbeStep> = synthetic(Some(1), 100.0, 60.0, 4)
            .into_iter()
            .map(|s| ProbeStep {
                server_cpu_wait_pct: Some(40.0),
                refused_rps: 0.0,
                stdev_ms: 0.0,
                ..s
            })
            .collect();
        let v = verdict(&starved).unwrap();
        assert_eq!((v.kind, v.workers), (Kind::Cpu, Some(1)));
        // Without the wait, 60 % of a core is a worker that sleeps: synchronous.
        let v = verdict(&synthetic(Some(1), 100.0, 60.0, 4)).unwrap();
        assert_eq!(v.kind, Kind::Sync);
    }

    #[test]
    fn the_probe_climbs_until_throughput_stops_growing() {
        let limits = ProbeLimits::default();
        let all = synthetic(Some(3), 100.0, 1.0, 64);
        let mut steps: Vec<ProbeStep> = Vec::new();
        let mut ran = Vec::new();
        loop {
            match next_step(&steps, Duration::ZERO, &limits) {
                Next::Run {
                    concurrency,
                    duration,
                    ..
                } => {
                    assert!(duration >= MIN_STEP && duration <= MAX_REFINE_STEP);
                    ran.push(concurrency);
                    steps.push(
                        all.iter()
                            .find(|s| s.concurrency == concurrency)
                            .unwrap()
                            .clone(),
                    );
                }
                Next::Stop(why) => {
                    assert!(why.contains("stopped growing"), "{why}");
                    break;
                }
            }
        }
        assert_eq!(ran, vec![1, 2, 3, 4, 5]);
        assert_eq!(
            LADDER.windows(2).take_while(|w| w[1] == w[0] + 1).count(),
            11
        );
    }

    #[test]
    fn errors_latency_and_time_stop_the_probe() {
        let limits = ProbeLimits {
            max_time: Duration::from_secs(10),
            ..ProbeLimits::default()
        };
        let mut steps = synthetic(None, 100.0, 0.0, 2);
        steps[1].error_pct = 5.0;
        assert!(
            matches!(next_step(&steps, Duration::ZERO, &limits), Next::Stop(w) if w.contains("failed"))
        );
        steps[1].error_pct = 0.0;
        steps[1].p50_ms = 20_000.0;
        assert!(
            matches!(next_step(&steps, Duration::ZERO, &limits), Next::Stop(w) if w.contains("median"))
        );
        steps[1].p50_ms = 100.0;
        assert!(matches!(
            next_step(&steps, Duration::from_millis(9500), &limits),
            Next::Stop(w) if w.contains("time")
        ));
        let async_steps = synthetic(None, 1.0, 0.0, 64);
        assert!(matches!(
            next_step(&async_steps, Duration::ZERO, &limits),
            Next::Stop(w) if w.contains("bound of 64")
        ));
        let wider = ProbeLimits {
            max_concurrency: 100,
            ..limits.clone()
        };
        assert!(matches!(
            next_step(&async_steps, Duration::ZERO, &wider),
            Next::Run {
                concurrency: 84,
                ..
            }
        ));
    }

    /// A step at `c` connections of a closed loop that measured throughput `x` (its mean
    /// latency follows, c / X) and p99 `p99`, with no spread.
    fn measured(c: usize, x: f64, p99: f64) -> ProbeStep {
        let mean = c as f64 * 1000.0 / x;
        ProbeStep {
            throughput_rps: x,
            p50_ms: mean,
            p99_ms: p99,
            mean_ms: mean,
            server_cpu_pct: None,
            ..step_at(None, 100.0, 0.0, c)
        }
    }

    /// The steps at 1, 2, 3 … connections that measured the throughputs `x`, each p99
    /// `p99_over` times its mean latency.
    fn closed_loop(x: &[f64], p99_over: f64) -> Vec<ProbeStep> {
        x.iter()
            .enumerate()
            .map(|(i, &x)| measured(i + 1, x, p99_over * (i + 1) as f64 * 1000.0 / x))
            .collect()
    }

    #[test]
    fn steps_no_model_explains_are_unclassified_with_the_error_that_decided() {
        // Throughput climbs to 40 req/s at 4 connections, stays there to 8, climbs again to
        // 60 at 10 and stays: two plateaus, which no one pool (nor the USL) gives.
        let x = [
            10.0, 20.0, 30.0, 40.0, 40.0, 40.0, 40.0, 40.0, 50.0, 60.0, 60.0, 60.0,
        ];
        let steps = closed_loop(&x, 1.02);
        let v = verdict(&steps).unwrap();
        assert_eq!(v.kind, Kind::Unclassified, "{}", v.explanation);
        assert!(v.workers.is_none(), "{v:?}");
        let error = v.pool_error_pct.unwrap();
        assert!(error > POOL_EXPLAINS_PCT, "{error}");
        assert!(
            v.explanation
                .contains(&format!("{error:.0} % off their mean latency")),
            "{}",
            v.explanation
        );
        // A clean pool's model is exact, and its verdict says by how much.
        let v = verdict(&synthetic(Some(3), 100.0, 1.0, 8)).unwrap();
        assert_eq!(v.kind, Kind::Sync);
        assert!(v.pool_error_pct.unwrap() < 1.0, "{v:?}");
        assert!(v.explanation.contains("% (RMS)"), "{}", v.explanation);
    }

    #[test]
    fn requests_in_service_between_whole_numbers_name_an_inner_tier() {
        // A front of 8 workers holding each request 150 ms, 100 of them waiting on a back
        // tier of 3 (30 req/s): 4.5 requests in service at the plateau. The steps as a
        // simulation of that box measured them.
        let inner = [
            (1, 6.7, 156.4),
            (2, 13.3, 156.6),
            (3, 20.0, 156.4),
            (4, 26.6, 159.9),
            (5, 29.9, 198.9),
            (6, 30.0, 208.5),
            (7, 30.0, 290.1),
            (8, 30.0, 302.2),
        ];
        let steps: Vec<ProbeStep> = inner
            .iter()
            .map(|&(c, x, p99)| ProbeStep {
                p50_ms: 150.0_f64.max(c as f64 * 1000.0 / x),
                ..measured(c, x, p99)
            })
            .collect();
        let v = verdict(&steps).unwrap();
        assert_eq!(v.kind, Kind::Sync, "{}", v.explanation);
        match v.binding {
            Some(Binding::Inner {
                requests_in_service,
                rate_rps,
            }) => {
                assert!((requests_in_service - 4.5).abs() < 0.1, "{v:?}");
                assert!((rate_rps - 30.0).abs() < 0.5, "{v:?}");
            }
            other => panic!("{other:?}: {}", v.explanation),
        }
        assert!(
            v.explanation.contains("an inner tier binds"),
            "{}",
            v.explanation
        );
        // A pool that holds its worker for the whole request: 3 in service, and the queued
        // requests wait whole service times.
        let v = verdict(&synthetic(Some(3), 100.0, 1.0, 8)).unwrap();
        assert!(
            matches!(v.binding, Some(Binding::Outer { turn_ms }) if turn_ms >= 60.0),
            "{v:?}"
        );
        // Where the times vary, the steps cannot tell.
        let mut varied = synthetic(Some(3), 100.0, 1.0, 8);
        varied[0].p99_ms = 300.0;
        assert_eq!(verdict(&varied).unwrap().binding, None);
    }

    #[test]
    fn a_usl_peak_inside_a_pools_plateau_is_set_aside_not_shown_as_a_prediction() {
        // 100 ms alone; a soft knee near 5 connections and a plateau that sags 8 % by 12: the
        // USL fits the throughput (R² 0.98) with a peak at 8.8, but a pool explains the
        // latency within 4 %, and the verdict is the pool's.
        let x = [
            10.0, 20.0, 29.0, 37.0, 43.0, 47.0, 48.0, 47.5, 47.0, 46.0, 45.0, 44.0,
        ];
        let steps = closed_loop(&x, 1.3);
        let v = verdict(&steps).unwrap();
        assert_eq!(
            (v.kind, v.workers),
            (Kind::Sync, Some(5)),
            "{}",
            v.explanation
        );
        let usl = v.usl.unwrap();
        assert!(usl.r_squared >= USL_EXPLAINS, "{usl:?}");
        assert!(usl.peak_concurrency.is_some_and(|n| n < 12.0), "{usl:?}");
        assert!(!usl.explains, "{usl:?}");
        let why = usl.set_aside.unwrap();
        assert!(why.contains("a pool of 5"), "{why}");
        // Where the law's peak is beyond the steps, it is an extrapolation, not set aside.
        let v = verdict(&synthetic(Some(3), 100.0, 1.0, 8)).unwrap();
        assert!(v.usl.is_none_or(|u| u.set_aside.is_none()));
    }

    /// A closed-loop step on a simulated pool of `k` workers whose times are exponential with
    /// mean `s_ms`: `c` connections issue at once and again as each answer comes, until
    /// `requests` are answered or `duration` passes (simulated time, so the test is fast).
    fn simulated_step(
        k: usize,
        s_ms: f64,
        c: usize,
        (requests, duration): (Option<u64>, Duration),
        rng: &mut fastrand::Rng,
    ) -> ProbeStep {
        use std::cmp::Reverse;
        use std::collections::{BinaryHeap, VecDeque};
        let draw = |rng: &mut fastrand::Rng| -s_ms * (1.0 - rng.f64()).ln();
        let ns = |ms: f64| (ms * 1e6) as u64;
        // (time it ends, time it was sent), in ns.
        let mut serving: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut queue: VecDeque<u64> = VecDeque::new();
        for _ in 0..c {
            if serving.len() < k {
                serving.push(Reverse((ns(draw(rng)), 0)));
            } else {
                queue.push_back(0);
            }
        }
        let end = duration.as_nanos() as u64;
        let mut latencies = Vec::new();
        let mut now = 0;
        while let Some(Reverse((done, sent))) = serving.pop() {
            if done > end || requests.is_some_and(|n| latencies.len() as u64 >= n) {
                break;
            }
            now = done;
            latencies.push((done - sent) as f64 / 1e6);
            // The answered connection sends again: served at once if the worker it freed
            // is not taken by one queued before it.
            queue.push_back(now);
            let next = queue.pop_front().unwrap();
            serving.push(Reverse((now + ns(draw(rng)), next)));
        }
        let n = latencies.len().max(1) as f64;
        let mean = latencies.iter().sum::<f64>() / n;
        let var = latencies.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n;
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| latencies[((q * n) as usize).min(latencies.len() - 1)];
        ProbeStep {
            concurrency: c,
            throughput_rps: latencies.len() as f64 / (now.max(1) as f64 / 1e9),
            refused_rps: 0.0,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            mean_ms: mean,
            stdev_ms: var.sqrt(),
            requests: latencies.len() as u64,
            error_pct: 0.0,
            server_cpu_pct: None,
            server_cpu_wait_pct: None,
        }
    }

    /// The probe's verdict on a simulated exponential pool, and the time it took.
    fn probe_simulated(k: usize, s_ms: f64, seed: u64) -> (Verdict, Duration, Vec<ProbeStep>) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let limits = ProbeLimits::default();
        let mut steps = Vec::new();
        let mut elapsed = Duration::ZERO;
        while let Next::Run {
            concurrency,
            requests,
            duration,
            max_duration,
        } = next_step(&steps, elapsed, &limits)
        {
            let step = simulated_step(k, s_ms, concurrency, (requests, max_duration), &mut rng);
            // The step took its requests' time (at most its bound); the budget counts what
            // the probe planned, as the harness's does.
            let took = Duration::from_secs_f64(step.requests as f64 / step.throughput_rps);
            elapsed += took.min(max_duration).max(duration.min(took));
            steps.push(step);
            assert!(steps.len() < 80, "the probe must end");
        }
        (verdict(&steps).unwrap(), elapsed, steps)
    }

    #[test]
    fn exponential_pools_read_their_exact_worker_count_within_the_budget() {
        // The three pools (they read 9, 8 and "hard limit at 6"), ten draws each: the
        // worker count exact in at least 9 of 10 and never off by more than one, within the
        // 5 minutes a widely varying service may take.
        // And a pool of 2 × 150 ms, whose knee band started at 1 (the sweep read it as 1 when
        // only one connection's 23 requests gave S).
        for (k, s_ms) in [(12, 269.0), (9, 102.0), (16, 243.0), (2, 150.0)] {
            let mut exact = 0;
            for seed in 0..10 {
                let (v, elapsed, steps) = probe_simulated(k, s_ms, seed);
                let got = v.workers.unwrap_or(0);
                assert!(
                    got.abs_diff(k) <= 1,
                    "K = {k}, seed {seed}: read {got}: {v:?} {:?}",
                    ran(&steps)
                );
                exact += usize::from(got == k);
                assert!(
                    elapsed <= Duration::from_secs(300) + MAX_REFINE_STEP,
                    "{elapsed:?}"
                );
            }
            assert!(exact >= 9, "K = {k}: exact in {exact} of 10");
        }
    }

    #[test]
    fn two_measures_of_one_concurrency_merge_into_one() {
        let a = ProbeStep {
            mean_ms: 100.0,
            stdev_ms: 10.0,
            requests: 100,
            throughput_rps: 10.0,
            ..step_at(Some(4), 100.0, 1.0, 1)
        };
        let b = ProbeStep {
            mean_ms: 120.0,
            stdev_ms: 10.0,
            requests: 300,
            throughput_rps: 8.0,
            ..a.clone()
        };
        let m = merge(&a, &b);
        assert_eq!(m.requests, 400);
        assert!((m.mean_ms - 115.0).abs() < 1e-9);
        // 400 requests over 10 s + 37.5 s.
        assert!((m.throughput_rps - 400.0 / 47.5).abs() < 1e-9);
        // Variance: 100 within each, plus the means' spread (15² and 5², weighted).
        let var = (100.0 * (100.0 + 225.0) + 300.0 * (100.0 + 25.0)) / 400.0;
        assert!((m.stdev_ms - f64::sqrt(var)).abs() < 1e-9);
        assert_eq!(requests_for_exact_workers(12, 1.0), 3_118);
    }
}
