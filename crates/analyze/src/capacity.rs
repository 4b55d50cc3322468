//! The capacity search, as pure functions of the steps run so far: the highest constant
//! arrival rate whose steady state meets an objective. A quick closed-loop climb (doubling the
//! connections until throughput stops growing) gives the service's plateau, and the first rate
//! tried is a little under it; then bracket (go up while steps pass — past the plateau first,
//! then doubling — and step down by what a failing step served while they fail, until one
//! step passes and one fails) and bisect (geometric mean of the highest passing and lowest
//! failing rates) until they are within the tolerance.
//!
//! A step is judged by the requests that arrived in its measured window: they must have been
//! served (completed, or still in flight as any steady state has λ·W requests), the latency
//! objective met on a 95 % upper bound of its percentile (a step lasts long enough to hold the
//! requests that bound needs, within the search's time), and the median steady. A search
//! whose lowest failing step could not hold them stops: no rate met the objective with the
//! samples it could take.

use crate::probe::{first_step, step_of, Next, ProbeStep, CYCLES};
use crate::slo::{is_latency_break, percentile_name, Slo, Violations};
use loadlab_run::lab::WorkUnit;

/// Gain under which a doubling of the connections counts as the plateau.
const PLATEAU_GAIN: f64 = 1.10;

/// Fewest connections of a flat step that counts towards the plateau. Several processes on
/// one port (`SO_REUSEPORT`) each take the connections the kernel's hash gives them: two
/// connections land on one process of two half the time, of three a third of the time, and
/// that step gains nothing over one connection although the service has more to give.
const PLATEAU_MIN_CONNECTIONS: usize = 4;

/// Connections from which one flat step ends the climb. Under it a flat step may still be the
/// hash's doing, so the climb ends only on two flat doublings in a row, from 4 connections:
/// four land on just two processes of three 56 % of the time, and the lab's 3-worker
/// `/block` (150 req/s) read a plateau of 96 req/s in three climbs of six that stopped at
/// four, once 48 (two and four connections each on one process); four and eight both that
/// unlucky happen about once in fifteen. Sixteen leave a process of three without a
/// connection 0.5 % of the time: a flat step there is the service's plateau.
pub const SPREAD_CONNECTIONS: usize = 16;

/// The next step of the climb to the service's plateau: one connection, then twice as many
/// each step until one fails, the next would pass `max_concurrency`, or throughput stops
/// growing: a step gains less than 10 % over every step before it at 16 connections or more,
/// or two steps in a row do from 4 connections (see [`SPREAD_CONNECTIONS`]). `None` when the
/// climb is over.
pub fn plateau_step(steps: &[ProbeStep], max_concurrency: usize) -> Option<Next> {
    let Some(last) = steps.last() else {
        return Some(first_step());
    };
    if last.requests == 0 || last.error_pct > 1.0 {
        return None;
    }
    let flat_at = |i: usize| flat(&steps[..=i]);
    let n = steps.len();
    if flat_at(n - 1) && (last.concurrency >= SPREAD_CONNECTIONS || (n >= 2 && flat_at(n - 2))) {
        return None;
    }
    let next = last.concurrency * 2;
    (next <= max_concurrency).then(|| step_of(next, last.mean_ms * 2.0, CYCLES))
}

/// True when the climb's next step would only confirm a flat one: the last step gained less
/// than 10 % with 4 to 15 connections, where a second flat step is asked for (see
/// [`SPREAD_CONNECTIONS`]). A search short of time skips it: the plateau then reads as one
/// flat step says.
pub fn only_confirms(steps: &[ProbeStep]) -> bool {
    steps
        .last()
        .is_some_and(|last| last.concurrency < SPREAD_CONNECTIONS && flat(steps))
}

/// Whether the climb's `steps` found the service's limit: its last step gained less than 10 %
/// over every step before it, or failed. A climb that stopped on its time or its connections
/// while throughput still grew found only a lower bound of the plateau.
pub fn levelled(steps: &[ProbeStep]) -> bool {
    steps
        .last()
        .is_some_and(|last| last.requests == 0 || last.error_pct > 1.0 || flat(steps))
}

/// Whether the last of `steps` has at least 4 connections and gained less than 10 % over every
/// step before it.
fn flat(steps: &[ProbeStep]) -> bool {
    let Some((last, before)) = steps.split_last() else {
        return false;
    };
    let best_before = before.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    last.concurrency >= PLATEAU_MIN_CONNECTIONS && last.throughput_rps < PLATEAU_GAIN * best_before
}

/// The plateau the climb found, req/s: the throughput of the fewest connections that came
/// within 10 % of the best step. Steps far past the knee read high: their first requests all
/// queue at once, and a short step's mean latency keeps some of that start.
pub fn plateau_rps(steps: &[ProbeStep]) -> Option<f64> {
    let ok: Vec<&ProbeStep> = steps
        .iter()
        .filter(|s| s.requests > 0 && s.error_pct <= 1.0)
        .collect();
    let best = ok.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    ok.iter()
        .filter(|s| s.throughput_rps * PLATEAU_GAIN >= best)
        .min_by_key(|s| s.concurrency)
        .map(|s| s.throughput_rps)
}

/// Where the rate steps start, as a share of the closed-loop plateau. At the plateau itself a
/// service of steady service times is at utilization 1, where its queue is a random walk: the
/// step breaks or not by chance (one `/block?ms=20` worker, plateau 48.7 req/s, broke there
/// on a rising median in one run of three and met in the others). A little under it the
/// first verdict is settled, and the plateau is only known within 10 % anyway
/// ([`plateau_rps`] takes the fewest connections within 10 % of the best step).
const START_UNDER_PLATEAU: f64 = 0.9;

/// How far past the plateau the search goes up from a rate under it that met the objective:
/// the plateau is known within 10 %, so a little past it already brackets the knee, where
/// doubling would spend a step far above it (and a long one, when the objective's percentile
/// needs many requests).
const PAST_PLATEAU: f64 = 1.1;

/// The first rate the steps try after a climb that found a plateau of `plateau_rps`.
pub fn first_rate(plateau_rps: f64) -> f64 {
    START_UNDER_PLATEAU * plateau_rps
}

pub use loadlab_run::lab::capacity::RateStep;

/// Achieved/offered ratio under which a rate counts as not served.
const SERVED: f64 = 0.95;
/// Growth of the median from the first to the last third of a step that counts as rising.
const RISING: f64 = 1.25;
/// Smallest rise that counts, ms (so microsecond jitter on fast services is not a trend).
const RISING_MS: f64 = 1.0;
/// Significance of the rank test that a step's medians rise.
const TREND_ALPHA: f64 = 0.05;

/// True when per-second medians climb through a step: they rise in rank order beyond chance
/// (Mann-Kendall, one-sided, 5 %: for 5 seconds at most one pair out of order) and the last
/// third's median is 25 % (and 1 ms) over the first third's — a queue building, not a steady
/// state. The rank test keeps seconds of a few requests of a long-tailed service (whose
/// medians vary ×3 from second to second) from reading as a trend.
pub fn rising(p50_per_second: &[f64]) -> bool {
    let n = p50_per_second.len();
    if n < 2 || !increasing_beyond_chance(p50_per_second) {
        return false;
    }
    let third = (n / 3).max(1);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let first = median(&p50_per_second[..third]);
    let last = median(&p50_per_second[n - third..]);
    last > RISING * first + RISING_MS
}

/// Mann-Kendall's test for an increasing trend at [`TREND_ALPHA`]: S (pairs in order less
/// pairs out of order) against its distribution under no trend — exact (inversion counts of
/// random orders) up to 12 values, normal beyond.
fn increasing_beyond_chance(v: &[f64]) -> bool {
    let n = v.len();
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match v[j].partial_cmp(&v[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    if n > 12 {
        let var = (n * (n - 1) * (2 * n + 5)) as f64 / 18.0;
        return (s - 1) as f64 / var.sqrt() >= 1.645;
    }
    // Orders of n values by their inversions (Mahonian numbers); S = C(n, 2) − 2·inversions.
    let pairs = n * (n - 1) / 2;
    let mut ways = vec![1.0f64];
    for m in 2..=n {
        let mut next = vec![0.0; ways.len() + m - 1];
        for (inv, w) in ways.iter().enumerate() {
            for extra in 0..m {
                next[inv + extra] += w;
            }
        }
        ways = next;
    }
    let total: f64 = ways.iter().sum();
    // P(S ≥ s) = P(inversions ≤ (pairs − s) / 2).
    let most = (pairs as i64 - s).div_euclid(2);
    if most < 0 {
        return false;
    }
    let p: f64 = ways.iter().take(most as usize + 1).sum::<f64>() / total;
    p <= TREND_ALPHA
}

/// Whole seconds a rate's measured part lasts: the `min_s` asked for, or, when the objective's
/// percentile needs `needed` requests for its 95 % bound, long enough to hold them at `rate`
/// with a tenth to spare.
pub fn step_seconds(min_s: u64, rate: f64, needed: Option<u64>) -> u64 {
    let for_bound = needed.map_or(0.0, |n| (1.1 * n as f64 / rate.max(1e-9)).ceil());
    if for_bound > 1e6 {
        return 1_000_000;
    }
    min_s.max(for_bound as u64)
}

/// What a rate step's measured window saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Arrivals the schedule made in the window.
    pub arrivals: u64,
    /// Requests that ended (answered or failed) in the window.
    pub completed: u64,
    /// Length of the window, seconds.
    pub seconds: f64,
    /// Requests in flight in a steady state at this rate: λ·W (Little's law), with W the
    /// latency of one request alone (the window's own latency would grow with an overload's
    /// backlog and excuse it).
    pub in_flight: f64,
    /// What the arrivals start: requests, or users' sessions (then `completed` and
    /// `in_flight` count sessions too).
    pub unit: WorkUnit,
    /// Requests whose latencies the percentiles are over: `completed` for requests, every
    /// request of the sessions for sessions.
    pub requests: u64,
}

impl Window {
    /// Arrivals per second.
    pub fn arrived_rps(&self) -> f64 {
        self.arrivals as f64 / self.seconds
    }

    /// Arrivals per second that were served. A window's completions fall short of its arrivals
    /// by the growth of the backlog across it; a steady state still has λ·W requests in flight
    /// at the window's end (those that arrived in the last W seconds), so they count as served.
    /// Past capacity the backlog grows by (λ − μ) per second and the shortfall shows.
    pub fn served_rps(&self) -> f64 {
        (self.completed as f64 + self.in_flight).min(self.arrivals as f64) / self.seconds
    }
}

/// Whether a step that served `served` of `arrived` requests a second left arrivals unserved:
/// its backlog grew past what a steady state holds.
fn left_unserved(served: f64, arrived: f64) -> bool {
    served < SERVED * arrived
}

/// Judges a measured step against the objective: the bounds it broke (a percentile on its 95 %
/// upper bound, over the window's completed requests), a rising latency, or arrivals it did
/// not serve. `p50_per_second` holds each second's median latency.
pub fn judge(
    slo: &Slo,
    window: &Window,
    latency_at: impl Fn(f64) -> f64,
    error_pct: f64,
    p50_per_second: &[f64],
) -> Violations {
    let mut v = slo.violations(window.requests, &latency_at, error_pct);
    let (arrived, served) = (window.arrived_rps(), window.served_rps());
    if left_unserved(served, arrived) {
        v.broken.push(format!(
            "served {served:.1} of {arrived:.1} {}",
            window.unit.per_second()
        ));
    }
    if rising(p50_per_second) {
        v.broken
            .push(format!("{QUEUE_BUILT} (a queue was building)"));
    }
    v
}

/// The words that say a step's latency rose through it: its arrivals outran the service.
const QUEUE_BUILT: &str = "latency kept rising";

/// The words that say a step was held to an overloaded step's throughput.
const HELD: &str = "the service served when offered";

/// How much more than an overloaded step served a lower rate must have served for that
/// overload to count as a collapse. Above [`SERVED`]'s margin: a step just past a pool's
/// capacity can read as served when a request's time alone is long against the step (its λ·W
/// credit covers the backlog), and it must not release itself from the overload that holds
/// it. A contended box that collapsed served 5.9 req/s after 26.5, ×4.5.
const COLLAPSE: f64 = 1.25;

/// Marks as broken each step that met the objective at a rate above what a step at a *higher*
/// rate served when it could not keep up (it left arrivals unserved), unless the service's
/// throughput fell with load. Just past a pool's capacity a short step can meet its bounds
/// before the backlog shows — the queue grows by only (λ − μ)·t — while an overloaded step
/// has already measured the throughput the pool gives: a rate above it is one the pool does
/// not sustain, however the short step went (a 12-worker pool of exponential times served
/// 306.6 req/s when offered 354.2, then met a 5 s step at 312.5).
///
/// That evidence holds only while the overloaded step served about the most the service ever
/// served below its rate. A contended service collapses past its peak: offered 32.3 req/s it
/// served 5.9 after meeting 26.4 (serving 26.5), and its collapse says nothing about rates
/// under the peak; an overloaded step that a lower rate out-served by a quarter
/// ([`COLLAPSE`]) is no evidence for any other step. Judged again from the steps' own
/// verdicts each time, so a step held before the collapse showed is released.
pub fn hold_to_overloads(steps: &mut [RateStep], unit: WorkUnit) {
    for s in steps.iter_mut() {
        s.broken.retain(|b| !b.contains(HELD));
        s.meets = s.broken.is_empty();
    }
    let ceilings = ceilings(steps);
    for s in steps.iter_mut().filter(|s| s.meets) {
        if let Some((served, at)) = holding(&ceilings, s.rate_rps) {
            s.meets = false;
            s.broken.push(format!(
                "over the {served:.1} {} {HELD} {at:.1}",
                unit.per_second()
            ));
        }
    }
}

/// What each overloaded step that is evidence for other rates served, with its rate: a step
/// that left arrivals unserved, or served them while a queue built up (what it served is then
/// the service's throughput all the same), unless a lower rate out-served it by [`COLLAPSE`].
/// Read from the steps' own verdicts.
fn ceilings(steps: &[RateStep]) -> Vec<(f64, f64)> {
    let overloaded = |s: &RateStep| {
        !s.broken.is_empty()
            && !held_only(s)
            && !acquitted(steps, s.rate_rps)
            && (left_unserved(s.served_rps, s.arrived_rps)
                || s.broken.iter().any(|b| b.starts_with(QUEUE_BUILT)))
    };
    let collapsed = |o: &RateStep| {
        steps
            .iter()
            .any(|t| t.rate_rps < o.rate_rps && t.served_rps > COLLAPSE * o.served_rps)
    };
    steps
        .iter()
        .filter(|o| overloaded(o) && !collapsed(o))
        .map(|o| (o.served_rps, o.rate_rps))
        .collect()
}

/// The overloaded step (what it served, its rate) that holds a step at `rate`: the one of
/// `ceilings` at a higher rate that served less than `rate`, the highest such throughput.
fn holding(ceilings: &[(f64, f64)], rate: f64) -> Option<(f64, f64)> {
    ceilings
        .iter()
        .filter(|&&(served, at)| rate > served && rate < at)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .copied()
}

/// For a step that met the objective on its own figures but is held to an overloaded step's
/// throughput: that throughput and the rate it was served at; `None` for any other step.
pub fn held_by(steps: &[RateStep], step: &RateStep) -> Option<(f64, f64)> {
    held_only(step)
        .then(|| holding(&ceilings(steps), step.rate_rps))
        .flatten()
}

/// True when `step` met the objective on its own figures and broke only for being held to an
/// overloaded step's throughput.
fn held_only(step: &RateStep) -> bool {
    !step.broken.is_empty() && step.broken.iter().all(|b| b.contains(HELD))
}

/// True when the rate `rate` ran twice and met the objective once: its first step broke by
/// chance. A step at a rate near the knee meets or breaks by chance (a queue at utilization
/// 0.9 is a random walk, and a service under a CPU quota sleeps out most of each 100 ms
/// period), so a break below a rate that met is run again before it ends the search (see
/// [`next_rate`]); one break of two, against the higher rate that met, is the chance one.
pub fn acquitted(steps: &[RateStep], rate: f64) -> bool {
    let mut at = steps.iter().filter(|s| s.rate_rps == rate);
    at.clone().count() > 1 && at.any(|s| s.meets)
}

/// The lowest rate that broke, when one step at it broke on its own figures while a higher
/// rate met the objective on its own: the two steps disagree, and the lower one runs again.
/// `None` when there is no such rate or it ran twice already.
fn disputed(steps: &[RateStep], hi: f64) -> Option<f64> {
    let at: Vec<&RateStep> = steps.iter().filter(|s| s.rate_rps == hi).collect();
    let met_above = steps
        .iter()
        .any(|s| s.rate_rps > hi && (s.meets || held_only(s)));
    (at.len() == 1 && !held_only(at[0]) && !at[0].undersampled && met_above).then_some(hi)
}

/// The lowest rate that broke, when its one step broke on its latency's tail alone (it served
/// its arrivals, its median held, its errors stayed within bounds) and it is the search's first
/// evidence: no rate has met yet and none broke twice, so the search would step far down on
/// its word and never come back above it. A step's tail is one draw, and a stall of the machine
/// of a tenth of a second breaks the p90 of a 1 s step (three 10 ms workers broke at 254.8
/// req/s on a p90 bound of 124.7 ms with a median of 18.5 ms, and the search ended at 245.8;
/// the next round met 253.2 and 287.1). Once a break is confirmed, or a rate met, the tail
/// breaks below it are the service's own: on a tail that no rate meets, running each twice
/// would halve the rates the search can try. `None` when there is no such step.
fn unconfirmed(steps: &[RateStep], lo: Option<f64>, hi: f64) -> Option<f64> {
    let runs_at = |rate: f64| steps.iter().filter(|s| s.rate_rps == rate).count();
    let first_evidence = lo.is_none() && steps.iter().all(|s| runs_at(s.rate_rps) == 1);
    let tail_only = |s: &RateStep| {
        !s.undersampled && !s.broken.is_empty() && s.broken.iter().all(|b| is_latency_break(b))
    };
    let at = steps.iter().find(|s| s.rate_rps == hi)?;
    (first_evidence && tail_only(at)).then_some(hi)
}

/// Bounds of the search.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// First rate tried.
    pub start_rps: f64,
    /// The closed-loop climb's plateau, when it found one: the throughput where the service
    /// stopped growing, so rates that meet the objective under it go up past it, not double.
    pub plateau_rps: Option<f64>,
    /// Lowest rate worth trying.
    pub min_rps: f64,
    /// Highest rate tried.
    pub max_rps: f64,
    /// Stop when the failing rate is within this ratio of the passing one (0.05 = 5 %).
    pub tolerance: f64,
    /// What a rate counts: requests, or users' sessions.
    pub unit: WorkUnit,
}

/// The highest rate that met the objective and the lowest that did not, each below the other
/// (a passing rate above a failing one is ignored: the service is no better there). A step too
/// short to bound the objective's percentile neither met nor broke it, and a rate that met when
/// run again ([`acquitted`]) did not break.
pub fn bracket(steps: &[RateStep]) -> (Option<f64>, Option<f64>) {
    let hi = steps
        .iter()
        .filter(|s| !s.meets && !s.undersampled && !acquitted(steps, s.rate_rps))
        .map(|s| s.rate_rps)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    let lo = steps
        .iter()
        .filter(|s| s.meets && hi.is_none_or(|h| s.rate_rps < h))
        .map(|s| s.rate_rps)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    (lo, hi)
}

/// The index of the step at the highest rate that met the objective ([`bracket`]'s lower
/// end; of two steps at that rate, the one that met).
pub fn best_step(steps: &[RateStep]) -> Option<usize> {
    let lo = bracket(steps).0?;
    steps.iter().position(|s| s.rate_rps == lo && s.meets)
}

/// The factor to step down by from the lowest failing rate `hi` when no rate has met the
/// objective yet. The failing step says how far the capacity is: one that served nearly all
/// its arrivals failed on latency, the capacity is close, and a step of a quarter keeps the
/// search from halving past it (seed 000's three workers broke at their 96 req/s plateau and
/// met at 48, with no time left to try between); one that served a fraction `f` of them
/// was overloaded about `1/f` times, so the next rate is a little under what it served.
/// Between a quarter and three quarters of `hi` either way.
///
/// A step that met on its own figures and is held to an overloaded step's throughput goes to
/// just under that throughput: the rates between are the ones the evidence rules out.
fn descent(steps: &[RateStep], hi: f64) -> f64 {
    let Some(at_hi) = steps.iter().find(|s| s.rate_rps == hi) else {
        return 0.5;
    };
    if let Some((served, _)) = held_by(steps, at_hi) {
        return (SERVED * served / hi).clamp(0.25, SERVED);
    }
    let served = Some(at_hi)
        .filter(|s| s.arrived_rps > 0.0)
        .map_or(0.5, |s| s.served_rps / s.arrived_rps);
    (SERVED * served).clamp(0.25, 0.75)
}

/// Why a search that [`next_rate`] ended stopped, in words.
pub fn done_because(steps: &[RateStep], slo: &Slo, search: &Search) -> String {
    let per_s = search.unit.per_second();
    if let (Some(last), Some((p, needed))) = (steps.last(), slo.requests_for_a_bound()) {
        if last.undersampled {
            let short = format!(
                "the step at {:.1} {per_s} held {} requests where a 95 % bound on {} needs \
                 {needed}, and no time was left for a longer one",
                last.rate_rps,
                last.requests,
                percentile_name(p)
            );
            return match bracket(steps).0 {
                None => format!(
                    "no rate met the objective with the samples it could take ({short}): give \
                     the search more --max-time, or aim at a lower percentile"
                ),
                Some(lo) => format!("{short}; the capacity is at least {lo:.1} {per_s}"),
            };
        }
    }
    match bracket(steps) {
        (None, Some(_)) => format!(
            "even the lowest rate tried broke the objective (down to {:.1} {per_s})",
            search.min_rps
        ),
        (Some(lo), None) if lo >= search.max_rps => {
            format!(
                "the highest rate, {:.1} {per_s} (--max-rate), met it",
                search.max_rps
            )
        }
        _ => "bracketed within the tolerance".into(),
    }
}

/// The next rate to try, or `None` when the search is done. The lowest rate that broke runs
/// once more when a higher rate met the objective (one of the two went by chance), or when it
/// broke on its latency's tail alone before anything else was known ([`unconfirmed`]).
pub fn next_rate(steps: &[RateStep], search: &Search) -> Option<f64> {
    let Some(last) = steps.last() else {
        return Some(search.start_rps.clamp(search.min_rps, search.max_rps));
    };
    // A step that could not hold the requests its objective needs ran out of the search's
    // time (it lasts as long as they take): a lower rate needs longer, and no time is left.
    if last.undersampled {
        return None;
    }
    let (lo, hi) = bracket(steps);
    if let Some(again) =
        hi.and_then(|hi| disputed(steps, hi).or_else(|| unconfirmed(steps, lo, hi)))
    {
        return Some(again);
    }
    let next = match bracket(steps) {
        (Some(lo), None) => {
            if lo >= search.max_rps {
                return None;
            }
            let up = match search.plateau_rps {
                Some(p) if lo < p => (lo * 2.0).min(p * PAST_PLATEAU),
                _ => lo * 2.0,
            };
            up.min(search.max_rps)
        }
        (None, Some(hi)) => {
            if hi <= search.min_rps {
                return None;
            }
            (hi * descent(steps, hi)).max(search.min_rps)
        }
        (Some(lo), Some(hi)) => {
            if hi <= lo * (1.0 + search.tolerance) {
                return None;
            }
            (lo * hi).sqrt()
        }
        (None, None) => return None,
    };
    // A rate already tried would loop.
    (!steps.iter().any(|s| (s.rate_rps - next).abs() < 1e-9)).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step of a service that meets the objective at rates up to `capacity`.
    fn step(rate: f64, capacity: f64) -> RateStep {
        let meets = rate <= capacity;
        RateStep {
            rate_rps: rate,
            achieved_rps: rate.min(capacity),
            arrived_rps: rate,
            served_rps: rate.min(capacity),
            p50_ms: 10.0,
            p99_ms: if meets { 20.0 } else { 900.0 },
            error_pct: 0.0,
            refused_pct: 0.0,
            warmup_s: 1.0,
            measured_s: 3.0,
            requests: 0,
            meets,
            undersampled: false,
            broken: Vec::new(),
        }
    }

    /// A search from `start` down to `min` req/s, up to 100,000, to 5 %.
    fn from(start: f64, min: f64) -> Search {
        Search {
            start_rps: start,
            plateau_rps: None,
            min_rps: min,
            max_rps: 100_000.0,
            tolerance: 0.05,
            unit: WorkUnit::Request,
        }
    }

    fn search_for(capacity: f64, start: f64) -> (Vec<RateStep>, Option<f64>, Option<f64>) {
        search_from(
            capacity,
            Search {
                start_rps: start,
                ..from(start, 1.0)
            },
        )
    }

    /// The steps `search` runs on a service that meets the objective up to `capacity`, and the
    /// bracket they end with.
    fn search_from(capacity: f64, search: Search) -> (Vec<RateStep>, Option<f64>, Option<f64>) {
        let mut steps = Vec::new();
        while let Some(r) = next_rate(&steps, &search) {
            steps.push(step(r, capacity));
            assert!(steps.len() < 50, "the search must end");
        }
        let (lo, hi) = bracket(&steps);
        (steps, lo, hi)
    }

    #[test]
    fn from_under_the_plateau_the_search_goes_just_past_it_rather_than_doubling() {
        // One 20 ms worker: plateau 48.7 req/s, capacity 48.
        let plateau = 48.7;
        let search = Search {
            start_rps: first_rate(plateau),
            plateau_rps: Some(plateau),
            ..from(0.0, 1.0)
        };
        let (steps, lo, hi) = search_from(48.0, search);
        let rates: Vec<f64> = steps.iter().map(|s| s.rate_rps).collect();
        assert!((rates[0] - 43.83).abs() < 0.01, "{rates:?}");
        assert!(
            (rates[1] - 53.57).abs() < 0.01,
            "past the plateau: {rates:?}"
        );
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert!(lo <= 48.0 && hi > 48.0 && hi / lo <= 1.05, "{rates:?}");
        assert!(steps.len() <= 5, "{rates:?}");
        // A capacity far over the plateau (the climb stopped at its connection limit): past
        // the plateau the search doubles again.
        let search = Search {
            start_rps: first_rate(plateau),
            plateau_rps: Some(plateau),
            ..from(0.0, 1.0)
        };
        let (steps, lo, _) = search_from(400.0, search);
        assert!(lo.unwrap() >= 400.0 / 1.05, "{steps:?}");
        assert!((steps[2].rate_rps - 2.0 * steps[1].rate_rps).abs() < 1e-9);
    }

    #[test]
    fn the_search_brackets_then_bisects_to_the_tolerance() {
        for (capacity, start) in [
            (30.0, 5.0),
            (2_750.0, 10.0),
            (7.0, 100.0),
            (1_000.0, 1_000.0),
        ] {
            let (steps, lo, hi) = search_for(capacity, start);
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(
                lo <= capacity && hi > capacity,
                "{lo} {hi} around {capacity}"
            );
            assert!(hi / lo <= 1.05 + 1e-9, "{lo} {hi}");
            assert!(lo >= capacity / 1.05, "{lo} for {capacity}");
            assert!(steps.len() <= 16, "{} steps", steps.len());
        }
    }

    #[test]
    fn a_failure_on_latency_alone_steps_down_a_quarter_and_an_overload_to_what_it_served() {
        let search = from(96.0, 1.0);
        let mut late = step(96.0, 1_000.0);
        (late.meets, late.served_rps) = (false, 95.6);
        assert_eq!(next_rate(&[late], &search), Some(72.0));
        let mut overloaded = step(96.0, 50.0);
        overloaded.served_rps = 50.0;
        let next = next_rate(&[overloaded], &search).unwrap();
        assert!((next - 0.95 * 50.0).abs() < 1e-9, "{next}");
        let far = step(1_000.0, 10.0);
        assert_eq!(next_rate(&[far], &search), Some(250.0));
    }

    #[test]
    fn a_service_that_fails_everywhere_or_nowhere_ends_the_search() {
        let (_, lo, hi) = search_for(0.1, 50.0);
        assert_eq!(lo, None);
        assert_eq!(hi, Some(1.0));
        let (_, lo, hi) = search_for(1e9, 50.0);
        assert_eq!(lo, Some(100_000.0));
        assert_eq!(hi, None);
    }

    #[test]
    fn a_rising_median_is_not_a_steady_state() {
        assert!(!rising(&[10.0, 10.2, 9.9, 10.1, 10.0, 10.3]));
        assert!(rising(&[100.0, 130.0, 160.0, 190.0, 220.0, 250.0]));
        assert!(
            !rising(&[0.05, 0.2, 0.07, 0.3, 0.5, 0.4]),
            "sub-ms jitter is not a trend"
        );
        // The 12-worker pool at 1.6 req/s: a second or two of exponential draws each,
        // whose medians vary ×3; two pairs out of order in five seconds happen by chance
        // 12 % of the time.
        assert!(!rising(&[120.0, 95.0, 400.0, 380.0, 520.0]));
        assert!(rising(&[120.0, 95.0, 400.0, 450.0, 520.0]));
        assert!(increasing_beyond_chance(&[1.0, 2.0, 3.0, 4.0, 5.0]));
        assert!(!increasing_beyond_chance(&[1.0, 2.0, 3.0]));
        // Long steps: the normal approximation.
        let noisy: Vec<f64> = (0..30).map(|i| ((i * 7919) % 13) as f64).collect();
        assert!(!increasing_beyond_chance(&noisy));
        let climbing: Vec<f64> = (0..30)
            .map(|i| i as f64 + ((i * 7919) % 5) as f64)
            .collect();
        assert!(increasing_beyond_chance(&climbing));
        let slo = Slo::parse("p99<300ms,errors<1%").unwrap();
        let window = |arrivals, completed, in_flight| Window {
            arrivals,
            completed,
            seconds: 10.0,
            in_flight,
            unit: WorkUnit::Request,
            requests: completed,
        };
        let broken = judge(
            &slo,
            &window(1000, 800, 5.0),
            |_| 50.0,
            0.0,
            &[50.0, 50.0, 51.0],
        )
        .broken;
        assert_eq!(broken, vec!["served 80.5 of 100.0 req/s".to_string()]);
        assert!(judge(
            &slo,
            &window(1000, 995, 5.0),
            |_| 50.0,
            0.0,
            &[50.0, 50.0, 51.0]
        )
        .broken
        .is_empty());
    }

    #[test]
    fn a_window_of_sessions_bounds_its_percentile_over_their_requests_and_serves_sessions() {
        // 150 sessions of two requests each in 5 s: 300 requests bound p99 (299 needed),
        // though 150 sessions would not; 30 arrived a second and 30 were served.
        let slo = Slo::parse("p99<200ms").unwrap();
        let sessions = Window {
            arrivals: 150,
            completed: 150,
            seconds: 5.0,
            in_flight: 30.0 * 0.25,
            unit: WorkUnit::Session,
            requests: 300,
        };
        let v = judge(&slo, &sessions, |_| 30.0, 0.0, &[30.0; 5]);
        assert!(v.broken.is_empty() && v.undersampled.is_none(), "{v:?}");
        let short = Window {
            requests: 150,
            ..sessions
        };
        let v = judge(&slo, &short, |_| 30.0, 0.0, &[30.0; 5]);
        assert_eq!(v.undersampled, Some((99.0, 299)), "{v:?}");
        // Over capacity, what was not served is said in sessions.
        let over = Window {
            completed: 100,
            in_flight: 0.0,
            ..sessions
        };
        let v = judge(&slo, &over, |_| 30.0, 0.0, &[30.0; 5]);
        assert_eq!(v.broken, ["served 20.0 of 30.0 sessions/s"]);
    }

    #[test]
    fn a_slow_service_at_a_low_rate_is_served_though_a_request_is_always_in_flight() {
        // The box: 5 workers of 389 ms (12.9 req/s). At 2.6 req/s for 5 s, 13 requests
        // arrive and 12 end in the window: one is always in flight (2.6 × 0.389 = 1.0).
        let slo = Slo::parse("p50<778ms").unwrap();
        let low = Window {
            arrivals: 13,
            completed: 12,
            seconds: 5.0,
            in_flight: 2.6 * 0.389,
            unit: WorkUnit::Request,
            requests: 12,
        };
        assert!((low.served_rps() - 2.6).abs() < 1e-9);
        assert!(judge(&slo, &low, |_| 389.0, 0.0, &[389.0; 5])
            .broken
            .is_empty());
        // At 15 req/s the backlog grows by 2.1 a second: 64 of 75 end in the window.
        let over = Window {
            arrivals: 75,
            completed: 64,
            seconds: 5.0,
            in_flight: 15.0 * 0.389,
            unit: WorkUnit::Request,
            requests: 64,
        };
        let broken = judge(
            &slo,
            &over,
            |_| 700.0,
            0.0,
            &[810.0, 970.0, 1150.0, 1320.0, 1480.0],
        )
        .broken;
        assert!(
            broken.iter().any(|b| b.starts_with("served 14.0 of 15.0")),
            "{broken:?}"
        );
        assert!(broken.iter().any(|b| b.contains("rising")), "{broken:?}");
    }

    #[test]
    fn a_step_whose_queue_built_up_holds_the_rates_over_what_it_served() {
        // The long-tail test's failing run on 2026-11-28: offered 316.9 the pool served 308.9
        // (97 %, so no arrival counted as unserved) while its latency kept rising; a later
        // 5 s step at 309.1 then met, and was reported as the capacity.
        let at = |rate: f64, served: f64, broken: &[&str]| RateStep {
            served_rps: served,
            meets: broken.is_empty(),
            broken: broken.iter().map(|b| b.to_string()).collect(),
            ..step(rate, 1e9)
        };
        let rising = "latency kept rising (a queue was building)";
        let mut steps = vec![
            at(259.3, 259.4, &[]),
            at(316.9, 308.9, &[rising]),
            at(286.7, 286.6, &[]),
            at(301.4, 293.6, &[]),
            at(309.1, 306.8, &[]),
        ];
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert!(!steps[4].meets, "{:?}", steps[4].broken);
        assert!(steps[3].meets);
        assert_eq!(bracket(&steps), (Some(301.4), Some(309.1)));
    }

    #[test]
    fn a_rate_over_what_an_overloaded_step_served_does_not_meet_however_its_step_went() {
        // The failing run of the long-tail test (12 workers × 40 ms, exponential): overloaded
        // at 354.2 it served 306.6; 320.4 broke on latency alone; then 304.7 and 312.5 met.
        let at = |rate: f64, served: f64, meets: bool| RateStep {
            served_rps: served,
            meets,
            broken: if meets { vec![] } else { vec!["p99".into()] },
            ..step(rate, 1e9)
        };
        let mut steps = vec![
            at(289.8, 289.8, true),
            at(354.2, 306.6, false),
            at(320.4, 305.3, false),
            at(304.7, 303.9, true),
            at(312.5, 307.0, true),
        ];
        hold_to_overloads(&mut steps, WorkUnit::Request);
        let met: Vec<f64> = steps
            .iter()
            .filter(|s| s.meets)
            .map(|s| s.rate_rps)
            .collect();
        assert_eq!(met, [289.8, 304.7]);
        assert_eq!(
            steps[4].broken,
            ["over the 306.6 req/s the service served when offered 354.2"]
        );
        assert_eq!(bracket(&steps), (Some(304.7), Some(312.5)));
        assert_eq!(next_rate(&steps, &from(289.8, 0.1)), None, "within 5 %");
        // Judged again, nothing changes; a step broken on latency alone sets no ceiling.
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert_eq!(steps[4].broken.len(), 1);
        let mut latency_only = vec![at(300.0, 299.0, false), at(350.0, 340.0, true)];
        hold_to_overloads(&mut latency_only, WorkUnit::Request);
        assert!(latency_only[1].meets);
        // Of several overloads, one beaten by a lower rate's throughput sets no ceiling (a
        // service whose throughput collapses under heavy overload is not held to its
        // collapse).
        let mut collapse = vec![
            at(600.0, 150.0, false),
            at(330.0, 290.0, false),
            at(280.0, 280.0, true),
        ];
        hold_to_overloads(&mut collapse, WorkUnit::Request);
        assert!(collapse[2].meets);
        // A step just past a pool's capacity that read as served (its λ·W credit covered the
        // backlog) does not release itself: 340 served 339.5 where 354.2 served 306.6.
        let mut lucky = vec![at(354.2, 306.6, false), at(340.0, 339.5, true)];
        hold_to_overloads(&mut lucky, WorkUnit::Request);
        assert!(!lucky[1].meets, "{lucky:?}");
        // A step held by an overload is released when a later step shows the overload was a
        // collapse: offered 600 it served 150; 160 met and was held; then 300 served 300.
        let mut released = vec![at(600.0, 150.0, false), at(160.0, 160.0, true)];
        hold_to_overloads(&mut released, WorkUnit::Request);
        assert!(!released[1].meets);
        released.push(at(300.0, 300.0, true));
        hold_to_overloads(&mut released, WorkUnit::Request);
        assert!(released[1].meets && released[2].meets, "{released:?}");
        assert!(released[1].broken.is_empty());
    }

    #[test]
    fn a_service_whose_throughput_collapses_past_its_peak_is_judged_below_it_on_its_own_steps() {
        // The contended box (D = 136 ms, peak 30.1 req/s at 11 in flight) under
        // --slo 'p99<408ms,errors<1%': 26.4 met; offered 32.3 it served 5.9; 19.8, 14.9 and
        // 11.1 met by their own figures, and were all held to the 5.9 before.
        let at = |rate: f64, served: f64, p99: f64, meets: bool| RateStep {
            served_rps: served,
            achieved_rps: served,
            p99_ms: p99,
            meets,
            broken: if meets {
                vec![]
            } else {
                vec!["latency kept rising (a queue was building)".into()]
            },
            ..step(rate, 1e9)
        };
        let mut steps = vec![
            at(26.4, 26.5, 225.0, true),
            at(32.3, 5.9, 8262.0, false),
            at(19.8, 19.8, 177.0, true),
            at(14.9, 14.9, 159.0, true),
            at(11.1, 11.1, 149.0, true),
        ];
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert!(
            steps.iter().filter(|s| s.rate_rps < 30.0).all(|s| s.meets),
            "{steps:?}"
        );
        assert_eq!(bracket(&steps), (Some(26.4), Some(32.3)));
        // The search settles between them instead of stepping down.
        let next = next_rate(&steps, &from(26.4, 0.1)).unwrap();
        assert!((next - (26.4_f64 * 32.3).sqrt()).abs() < 1e-9, "{next}");
        // Overloaded first, then a lower rate: what that rate served (more than the overload
        // did) is its own.
        let mut first_over = vec![at(32.3, 5.9, 8262.0, false), at(8.1, 8.1, 140.0, true)];
        hold_to_overloads(&mut first_over, WorkUnit::Request);
        assert!(first_over[1].meets, "{first_over:?}");
        let next = next_rate(&first_over, &from(32.3, 0.1)).unwrap();
        assert!(next > 8.1 && next < 32.3, "{next}");
    }

    #[test]
    fn a_step_held_to_an_overload_sends_the_search_just_under_what_the_overload_served() {
        // 67.8 met on its own figures; offered 82.9 the pool served 58.9: the rates between are
        // ruled out, so the next is just under 58.9 (not three quarters of 67.8, 50.9).
        let mut steps = vec![step(67.8, 1e9), step(82.9, 58.9)];
        steps[1].broken = vec!["served 58.9 of 82.9 req/s".into()];
        steps[1].meets = false;
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert_eq!(held_by(&steps, &steps[0]), Some((58.9, 82.9)));
        assert_eq!(held_by(&steps, &steps[1]), None);
        let next = next_rate(&steps, &from(67.8, 0.1)).unwrap();
        assert!((next - 0.95 * 58.9).abs() < 1e-9, "{next}");
        // A step that broke on its own figures descends as before.
        let own = vec![step(67.8, 60.0)];
        let next = next_rate(&own, &from(67.8, 0.1)).unwrap();
        assert!(next < 0.95 * 60.0, "{next}");
    }

    #[test]
    fn a_break_below_a_rate_that_met_runs_again_and_stands_only_when_it_breaks_twice() {
        // A replica on a fifth of a CPU met 134.5 req/s, then broke at 117.7 serving 109.2 of
        // it: one of the two went by chance, and 117.7 runs again before the search descends.
        let mut steps = vec![step(134.5, 1e9), step(117.7, 109.2)];
        steps[1].broken = vec!["served 109.2 of 117.7 req/s".into()];
        hold_to_overloads(&mut steps, WorkUnit::Request);
        let search = from(134.5, 0.1);
        assert_eq!(next_rate(&steps, &search), Some(117.7));
        // Met the second time: the first break was the chance one, and it holds nothing.
        let mut acquitted_steps = steps.clone();
        acquitted_steps.push(step(117.7, 1e9));
        hold_to_overloads(&mut acquitted_steps, WorkUnit::Request);
        assert!(acquitted(&acquitted_steps, 117.7));
        assert!(acquitted_steps[0].meets, "{:?}", acquitted_steps[0].broken);
        assert_eq!(bracket(&acquitted_steps), (Some(134.5), None));
        assert!(next_rate(&acquitted_steps, &search).unwrap() > 134.5);
        // Broke again: the break stands, the higher rate's pass is the chance one, and the
        // search goes down without a third run.
        steps.push(step(117.7, 109.2));
        steps[2].broken = vec!["served 109.2 of 117.7 req/s".into()];
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert!(!acquitted(&steps, 117.7));
        assert_eq!(bracket(&steps), (None, Some(117.7)));
        assert!(next_rate(&steps, &search).unwrap() < 117.7);
        // A break with no higher rate that met is not run again.
        let alone = vec![step(117.7, 109.2)];
        assert!(next_rate(&alone, &search).unwrap() < 117.7);
    }

    #[test]
    fn a_break_on_the_tail_alone_runs_again_before_the_search_rests_on_it() {
        // Three 10 ms workers, plateau 283 req/s: the first step, at 254.8, served every
        // arrival with a median of 18.5 ms and broke on its p90 bound alone (a stall).
        let tail = |rate: f64, capacity: f64| {
            let mut s = step(rate, capacity);
            if !s.meets {
                s.served_rps = rate;
                s.broken = vec!["p90 124.7 ms (95 % upper bound) ≥ 100 ms".into()];
            }
            s
        };
        let search = Search {
            plateau_rps: Some(283.0),
            ..from(254.8, 0.1)
        };
        let mut steps = vec![tail(254.8, 0.0)];
        assert_eq!(
            next_rate(&steps, &search),
            Some(254.8),
            "before any rate met"
        );
        // Met the second time: the search goes up, past the plateau.
        steps.push(tail(254.8, 1e9));
        assert_eq!(bracket(&steps), (Some(254.8), None));
        assert!(next_rate(&steps, &search).unwrap() > 283.0);
        // Broke again: it stands, and the search steps down from it.
        let twice = vec![tail(254.8, 0.0), tail(254.8, 0.0)];
        assert!(next_rate(&twice, &search).unwrap() < 254.8);
        // Between a rate that met and a tail-only break, the search bisects as before.
        let wide = vec![tail(200.0, 1e9), tail(300.0, 0.0)];
        let mid = next_rate(&wide, &search).unwrap();
        assert!((mid - (200.0f64 * 300.0).sqrt()).abs() < 1e-9, "{mid}");
        // A break that left arrivals unserved, or whose median rose, is the service's own:
        // it is not run again.
        let mut unserved = step(254.8, 200.0);
        unserved.broken = vec!["served 200.0 of 254.8 req/s".into()];
        assert!(next_rate(&[unserved], &search).unwrap() < 254.8);
        let mut rising = tail(254.8, 0.0);
        rising
            .broken
            .push("latency kept rising (a queue was building)".into());
        assert!(next_rate(&[rising], &search).unwrap() < 254.8);
        // A whole search on a tail no rate meets runs its first rate twice and every other
        // once: once a break is confirmed, the ones below it are the service's own.
        let mut steps = Vec::new();
        while let Some(r) = next_rate(&steps, &search) {
            steps.push(tail(r, 0.0));
            assert!(steps.len() < 50, "the search must end");
        }
        let rates: Vec<f64> = steps.iter().map(|s| s.rate_rps).collect();
        assert_eq!(rates[..2], [254.8, 254.8], "{rates:?}");
        assert!(rates[2..].windows(2).all(|w| w[1] < w[0]), "{rates:?}");
        assert!(rates.len() > 4, "{rates:?}");
    }

    #[test]
    fn a_step_lasts_long_enough_to_bound_the_percentile_and_a_short_one_ends_the_search() {
        // p99 needs 299 requests: at 100 req/s 5 s hold them (with a tenth to spare, 3.3 s);
        // at 20 req/s the step lasts 17 s.
        assert_eq!(step_seconds(5, 100.0, Some(299)), 5);
        assert_eq!(step_seconds(5, 20.0, Some(299)), 17);
        assert_eq!(step_seconds(5, 20.0, None), 5);
        let slo = Slo::parse("p99<300ms").unwrap();
        let search = from(50.0, 0.1);
        // A step at 50 req/s broke the bound; the next, at a quarter, could not hold 299
        // requests in the time left: it neither met nor broke the objective, and the search
        // stops and says why.
        let mut first = step(50.0, 10.0);
        first.requests = 500;
        let mut short = step(12.5, 10.0);
        (short.requests, short.undersampled) = (150, true);
        let steps = vec![first, short];
        assert_eq!(next_rate(&steps, &search), None);
        assert_eq!(bracket(&steps), (None, Some(50.0)));
        let why = done_because(&steps, &slo, &search);
        assert!(
            why.starts_with("no rate met the objective with the samples it could take")
                && why.contains("needs 299")
                && why.contains("held 150"),
            "{why}"
        );
        // With a passing rate below, the capacity is at least that.
        let mut low = step(10.0, 10.0);
        low.requests = 400;
        let mut short = step(20.0, 10.0);
        (short.requests, short.undersampled) = (200, true);
        let steps = vec![low, short];
        assert_eq!(bracket(&steps), (Some(10.0), None));
        assert_eq!(next_rate(&steps, &search), None);
        let why = done_because(&steps, &slo, &search);
        assert!(
            why.ends_with("the capacity is at least 10.0 req/s"),
            "{why}"
        );
    }

    #[test]
    fn the_climb_to_the_plateau_doubles_until_a_step_gains_less_than_ten_percent() {
        let step = |c: usize, x: f64| ProbeStep {
            concurrency: c,
            throughput_rps: x,
            p50_ms: 100.0,
            p99_ms: 120.0,
            mean_ms: c as f64 * 1000.0 / x,
            requests: 50,
            error_pct: 0.0,
            server_cpu_pct: None,
            server_cpu_wait_pct: None,
            refused_rps: 0.0,
            stdev_ms: 0.0,
        };
        // 5 workers of 389 ms: 2.6 req/s per connection up to 12.9; far past the knee a short
        // step reads 7 % high.
        let service = |c: usize| {
            let x = (c.min(5) as f64) / 0.389;
            step(c, if c > 10 { x * 1.07 } else { x })
        };
        let mut steps = Vec::new();
        while let Some(Next::Run { concurrency, .. }) = plateau_step(&steps, 1000) {
            steps.push(service(concurrency));
        }
        let ran: Vec<usize> = steps.iter().map(|s| s.concurrency).collect();
        assert_eq!(ran, vec![1, 2, 4, 8, 16]);
        assert!((plateau_rps(&steps).unwrap() - 5.0 / 0.389).abs() < 1e-9);
        assert!(levelled(&steps));
        // Cut at four connections (the climb's time was up) while it still grew.
        assert!(!levelled(&steps[..3]));
        // The bound stops it, and a failing step ends it.
        let mut steps = Vec::new();
        while let Some(Next::Run { concurrency, .. }) = plateau_step(&steps, 4) {
            steps.push(step(concurrency, concurrency as f64 * 10.0));
        }
        assert_eq!(steps.len(), 3);
        // Still growing when the bound stopped it: a lower bound, not the plateau.
        assert!(!levelled(&steps));
        let mut failing = step(2, 20.0);
        failing.error_pct = 50.0;
        assert!(plateau_step(&[step(1, 10.0), failing.clone()], 64).is_none());
        assert!(levelled(&[step(1, 10.0), failing]));
        // Three processes of 48 req/s on one port, whose two connections hashed onto one of
        // them: the climb goes on to four, which reach the others, and to where they stop.
        let climb = |service: [f64; 6]| {
            let mut steps = Vec::new();
            while let Some(Next::Run { concurrency, .. }) = plateau_step(&steps, 1000) {
                steps.push(step(concurrency, service[concurrency.ilog2() as usize]));
            }
            steps
        };
        let steps = climb([48.0, 48.5, 120.0, 146.0, 147.0, 147.0]);
        let ran: Vec<usize> = steps.iter().map(|s| s.concurrency).collect();
        assert_eq!(ran, vec![1, 2, 4, 8, 16]);
        assert_eq!(plateau_rps(&steps), Some(146.0));
        // Two connections reached two of them, and four only the same two (as three climbs of
        // six did): one flat step under 16 connections is not the plateau; eight reach the
        // third.
        let steps = climb([48.0, 96.0, 96.5, 146.0, 147.0, 147.0]);
        let ran: Vec<usize> = steps.iter().map(|s| s.concurrency).collect();
        assert_eq!(ran, vec![1, 2, 4, 8, 16]);
        assert_eq!(plateau_rps(&steps), Some(146.0));
        // Two and four both on one of them (the CI run that read 48 req/s): eight go on.
        let steps = climb([48.0, 48.5, 49.0, 146.0, 147.0, 147.0]);
        assert_eq!(plateau_rps(&steps), Some(146.0));
        // The step to eight only confirms the flat step at four; the one after sixteen is none.
        assert!(only_confirms(&steps[..3]));
        assert!(!only_confirms(&steps[..2]) && !only_confirms(&steps));
        // One process: four and eight connections confirm what two said.
        let mut steps = Vec::new();
        while let Some(Next::Run { concurrency, .. }) = plateau_step(&steps, 1000) {
            steps.push(step(concurrency, 48.0));
        }
        assert_eq!(steps.len(), 4);
        assert_eq!(plateau_rps(&steps), Some(48.0));
    }
}
