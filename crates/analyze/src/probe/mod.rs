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

mod open;
pub use open::{next_open_rate, open_refusing, with_open_steps, OPEN_STEPS};

use crate::compare::median;
use crate::usl::Usl;

/// The concurrencies the probe climbs: every count up to 12 (worker counts are small and must
/// be exact), then about 1.3× a step.
pub const LADDER: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24, 32, 40, 48, 64,
];

pub use loadlab_run::lab::probe::{
    Binding, Kind, OpenStep, ProbeStep, ProbeVerdict as Verdict, RateLimit, UslFit,
};

/// Limits of a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeLimits {
    /// Highest concurrency tried.
    pub max_concurrency: usize,
    /// Time the closed loop's steps may take; a service that refused gets up to 30 s of
    /// open-model steps on top, to read its rate.
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
/// not run yet, until both are measured, or, where throughput fell from a peak on a CPU
/// saturated from one connection on, to read that peak again (see [`confirm_peak`]).
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
    // A rate limit has no worker count to measure on either side of, nor has contention; a
    // peak on a saturated CPU is read again before the fall from it counts as contention.
    let climbed: Vec<&ProbeStep> = climb.iter().filter(|s| s.requests > 0).collect();
    if climb.iter().any(refusing) {
        return Next::Stop(stopped);
    }
    if contention(&climbed).is_some() {
        return confirm_peak(steps, elapsed, limits).unwrap_or_else(|| {
            Next::Stop(match peak_read_again(steps) {
                Some(c) => format!("{stopped}; its peak at {c} connections read again"),
                None => stopped,
            })
        });
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

/// A second reading of the peak, when the fall from it would be read as contention on a CPU
/// saturated from one connection on. On such a CPU throughput rises only as requests get
/// cheaper (code warming up, or a machine that ran the core faster for a while), so a peak read
/// once may be the machine's: Node /calc, alone on one saturated core, read 16.0 and 16.4
/// req/s at one connection, 20.3 at two, then 18.3 and 15.8 (a CPU time per request of 62,
/// 48, 54 and 63 ms). Read again, a fluke is not there twice, and the two readings' difference
/// ([`repeat_drift`]) is the noise the fall must pass. The peak is the climb's (what the
/// contention was judged on), read again once: `None` when a peak was read again already, the
/// fall is within the noise, or the time left cannot hold the step.
fn confirm_peak(steps: &[ProbeStep], elapsed: Duration, limits: &ProbeLimits) -> Option<Next> {
    if peak_read_again(steps).is_some() {
        return None;
    }
    let merged = by_concurrency(steps);
    let sorted: Vec<&ProbeStep> = merged.iter().filter(|s| s.requests > 0).collect();
    cpu_flat_from_the_start(&sorted)?;
    if !fell_past_best(&sorted, repeat_drift(steps)) {
        return None;
    }
    let best = climb(steps)
        .into_iter()
        .filter(|s| s.requests > 0)
        .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))?;
    // One connection's second reading is the probe's start (see `measure_alone_again`).
    if best.concurrency == 1 {
        return None;
    }
    match step_of(best.concurrency, best.mean_ms, CYCLES * 2.0) {
        Next::Run { duration, .. } if elapsed + duration > budget(steps, limits) => None,
        run => Some(run),
    }
}

/// The concurrency above one that was read twice ([`confirm_peak`]'s), if any.
fn peak_read_again(steps: &[ProbeStep]) -> Option<usize> {
    steps
        .iter()
        .map(|s| s.concurrency)
        .filter(|c| *c > 1)
        .find(|c| {
            steps
                .iter()
                .filter(|s| s.concurrency == *c && s.requests > 0)
                .count()
                > 1
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
        rate_limit: None,
    })
}

/// The verdict on a contended service: its peak (the USL's, which the steps explain), how far
/// throughput fell past it, and how much better the law explains the latency than a pool.
fn contended(sorted: &[&ProbeStep], alone: &ProbeStep) -> Option<Verdict> {
    let s_ms = alone.mean_ms.max(1e-3);
    let (fit, ratio) = contention(sorted)?;
    let peak = fit.peak_concurrency?;
    let peak_x = fit.peak_throughput_rps?;
    let last = sorted.last()?;
    // Requests that slow each other down show it in their latency: a law fitted to a bend of
    // a few percent, which a shared machine gives a flat service, is no contention
    // (/bbox/async, 51.7 ms at every step, read "peaks near 61 connections" of 12 tried when
    // its last two steps lost 3 %).
    if last.mean_ms < GROWN * alone.mean_ms && !fell_past_best(sorted, 0.0) {
        return None;
    }
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
        max_throughput_rps: peak_x,
        hard_limit: false,
        explanation: format!(
            "contended: throughput peaks at about {:.1} req/s near {peak:.1} connections{fell}\
             {growth}: requests slow each other down (a lock, a shared resource, cache \
             lines), no pool of workers; the USL explains the steps (R² = {:.3}) and their \
             latency {ratio:.0}× better than a worker pool does — look for what the requests \
             share",
            peak_x, fit.r_squared
        ),
        pool_error_pct: None,
        binding: None,
        usl: Some(fit),
        rate_limit: None,
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
        if flat_cores.is_none() || fell_past_best(&sorted, repeat_drift(steps)) {
            return Some(v);
        }
    }
    // Where times vary widely, the service time is every request below the knee band (none
    // of them waited, so each latency is a service time), not one connection's few: a
    // lognormal pool of 16 × 300 ms read S = 231 ms (175–287) from one connection alone.
    let below = below_knee(&sorted);
    let first: &ProbeStep = below.as_ref().unwrap_or(first);
    let reading = Reading::new(steps, &sorted, first)?;
    if let Some(v) = reading.unlimited(flat_cores.is_some()) {
        return Some(v);
    }
    Some(reading.limited(flat_cores))
}

/// What the probe reads the steps by, once it knows they are neither rate-limited nor
/// contended: the service time alone, the top throughput, the last step and whether the climb
/// was still gaining there.
struct Reading<'a> {
    /// The steps by concurrency, each with requests.
    sorted: &'a [&'a ProbeStep],
    /// The step the service time is read from (one connection, or every step below the knee).
    first: &'a ProbeStep,
    /// The service time alone, ms: the mean, not the median (throughput is K over the mean
    /// service time whatever its spread, and the two agree when it has none).
    s_ms: f64,
    /// The most any step served, req/s.
    x_max: f64,
    /// The step at the highest concurrency.
    last: &'a ProbeStep,
    /// (concurrency, throughput) of every step, for the USL.
    points: Vec<(f64, f64)>,
    /// True when the last step still gained over the climb's step before it.
    growing: bool,
    /// The spread of the service times (coefficient of variation), 0 when unknown.
    cv: f64,
}

impl<'a> Reading<'a> {
    fn new(
        steps: &[ProbeStep],
        sorted: &'a [&'a ProbeStep],
        first: &'a ProbeStep,
    ) -> Option<Reading<'a>> {
        let s_ms = first.mean_ms.max(1e-3);
        let last = *sorted.last()?;
        let mut reading = Reading {
            sorted,
            first,
            s_ms,
            x_max: sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max),
            last,
            points: sorted
                .iter()
                .map(|s| (s.concurrency as f64, s.throughput_rps))
                .collect(),
            growing: true,
            cv: spread(sorted.iter().copied()).unwrap_or(0.0),
        };
        // Still growing at the end: the last step gained at least half of what its extra
        // connections would give a service with no limit, over the climb's step before it
        // (steps back and refinements are not the climb: a refinement far past the knee next
        // to another would compare two plateau readings' noise).
        let climbed = climb(steps);
        let before_last = climbed
            .iter()
            .rev()
            .find(|s| s.requests > 0 && s.concurrency < last.concurrency);
        if let Some(prev) = before_last {
            let more = last.concurrency as f64 / prev.concurrency as f64;
            let gain = (0.5 * (more - 1.0)).max(reading.apart(last, prev));
            reading.growing = last.throughput_rps >= prev.throughput_rps * (1.0 + gain);
        }
        Some(reading)
    }

    /// Throughput `c` connections would reach with no limit, req/s.
    fn ideal(&self, c: usize) -> f64 {
        c as f64 * 1000.0 / self.s_ms
    }

    /// The relative gap two steps' throughputs need to differ by more than noise: about
    /// cv·√(1/n₁ + 1/n₂) apart when times vary, twice that (2 exponential workers read "no
    /// limit" on 7 → 8 connections, +9 %).
    fn apart(&self, a: &ProbeStep, b: &ProbeStep) -> f64 {
        let n = |s: &ProbeStep| 1.0 / s.requests.max(1) as f64;
        2.0 * self.cv * (n(a) + n(b)).sqrt()
    }

    /// A verdict of no limit found, explained by `explanation`.
    fn no_limit(&self, explanation: String) -> Verdict {
        Verdict {
            kind: Kind::Async,
            workers: None,
            workers_observed: false,
            workers_range: None,
            service_time_ms: self.s_ms,
            service_time_ci_ms: mean_interval(self.first),
            max_throughput_rps: self.x_max,
            hard_limit: false,
            explanation,
            pool_error_pct: None,
            binding: None,
            usl: usl_fit(&self.points, false),
            rate_limit: None,
        }
    }

    /// No limit, when the steps show none: still scaling at the last step with latency near
    /// the service time alone (asynchronous), or still gaining past the knee (no plateau) —
    /// unless `cpu_flat`: a CPU saturated from one connection on is the plateau, and
    /// throughput that moved under it moved by what each request cost, not by the connections.
    fn unlimited(&self, cpu_flat: bool) -> Option<Verdict> {
        let (last, s_ms) = (self.last, self.s_ms);
        let scaling = last.throughput_rps / self.ideal(last.concurrency);
        if self.growing && scaling >= SCALING && last.mean_ms <= 1.5 * s_ms {
            return Some(self.no_limit(format!(
                "asynchronous: at {} connections the median latency is still {:.1} ms (S = \
                 {s_ms:.1} ms alone) and throughput {:.0} req/s is {:.0} % of {} × 1/S; no \
                 worker limit up to {} connections",
                last.concurrency,
                last.p50_ms,
                last.throughput_rps,
                100.0 * scaling,
                last.concurrency,
                last.concurrency
            )));
        }
        // Still gaining at the last step, and 10 % over the step at the mean latency's knee:
        // no plateau was seen (the climb's time ran out first); naming a worker count would be
        // a guess.
        let at_knee = knee(self.sorted);
        let knee_step = self.sorted.iter().rev().find(|s| s.concurrency <= at_knee);
        let knee_x = knee_step.map_or(0.0, |s| s.throughput_rps);
        let noise = knee_step.map_or(0.0, |k| self.apart(last, k));
        let unplateaued =
            at_knee >= last.concurrency || last.throughput_rps > FLAT * (1.0 + noise) * knee_x;
        (self.growing && unplateaued && !refusing(last) && !cpu_flat).then(|| {
            self.no_limit(format!(
                "no worker limit found up to {} connections: throughput still grew at the last \
                 step ({:.1} req/s, past the knee of the mean latency at {at_knee}), so no \
                 plateau was seen and a limit, if any, is above it; a longer --max-time climbs \
                 further",
                last.concurrency, last.throughput_rps
            ))
        })
    }

    /// The verdict on a service that hit a limit: a pool of K workers (`sync`), K cores
    /// (`cpu`), or no model that explains the steps (`unclassified`). `flat_cores`: the cores
    /// the server's CPU was saturated at from the first step, if it was.
    fn limited(&self, flat_cores: Option<usize>) -> Verdict {
        let Reading {
            sorted,
            first,
            s_ms,
            x_max,
            last,
            ref points,
            growing,
            ..
        } = *self;
        let (mut k, mut observed) = workers(sorted);
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
        let pool_error = pool_error_pct(sorted, k as f64).min(pool_error_pct(sorted, k_eff));
        let allowance = pool_allowance_pct(sorted);
        let mut usl = usl_fit(points, hard_limit);
        if !cpu && pool_error > allowance {
            return self.unclassified(k, (pool_error, allowance), usl);
        }
        let binding = (!cpu)
            .then(|| binding(sorted, first, plateau, k_eff))
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
                let (lo, hi) = knee_band(sorted);
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
        Verdict {
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
            rate_limit: None,
        }
    }

    /// The verdict on steps no model explains: a pool of `k` workers is `pool_error` % off
    /// their mean latency where their noise allows `allowance` %, the USL (`usl`) does not
    /// explain them either, and nothing was refused.
    fn unclassified(
        &self,
        k: usize,
        (pool_error, allowance): (f64, f64),
        usl: Option<UslFit>,
    ) -> Verdict {
        let (sorted, first, s_ms) = (self.sorted, self.first, self.s_ms);
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
        Verdict {
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
            rate_limit: None,
        }
    }
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

/// True when the steps' last throughput is 10 % or more under their best, and more than
/// `drift` (relative) beyond that: a fall seen, not extrapolated, and larger than two
/// readings of one concurrency were apart.
fn fell_past_best(sorted: &[&ProbeStep], drift: f64) -> bool {
    let best = sorted.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    sorted
        .last()
        .is_some_and(|last| last.throughput_rps <= best / (FLAT * (1.0 + drift)))
}

/// How far apart the throughputs of steps run at the same concurrency were, relative (the
/// larger over the smaller, less one), at the concurrency where they were furthest apart; 0
/// without such steps. Two readings of one concurrency differ by what the service and the
/// machine did between them, not by what the concurrency did: on a CPU saturated from one
/// connection on, Node /calc read 10.3 and 12.2 req/s at one connection, then 13.6, 12.9 and
/// 11.6 at 2, 3 and 4 — a fall no larger than that difference.
fn repeat_drift(steps: &[ProbeStep]) -> f64 {
    let mut sorted: Vec<&ProbeStep> = steps.iter().filter(|s| s.requests > 0).collect();
    sorted.sort_by_key(|s| s.concurrency);
    sorted
        .chunk_by(|a, b| a.concurrency == b.concurrency)
        .filter(|same| same.len() > 1)
        .map(|same| {
            let (lo, hi) = same.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
                (lo.min(s.throughput_rps), hi.max(s.throughput_rps))
            });
            if lo > 0.0 {
                hi / lo - 1.0
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max)
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
    // With neither contention nor coherency the law grows in proportion, without a limit.
    let peak_x = match peak {
        Some(n) => Some(law.throughput(n)),
        None if law.sigma > 0.0 => Some(law.lambda / law.sigma),
        None => None,
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

/// Growth of the mean latency from one connection to the last step under which the steps do
/// not read as contention (unless throughput fell past its best): with its peak at twice the
/// last step's concurrency, the USL's own latency there is about 1.25 × the latency alone.
const GROWN: f64 = 1.25;

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
mod tests;
