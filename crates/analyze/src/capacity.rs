//! The capacity search, as pure functions of the steps run so far: the highest constant
//! arrival rate whose steady state meets an objective. Bracket (double the rate until a step
//! fails), then bisect (geometric mean of the highest passing and lowest failing rates) until
//! they are within the tolerance.

use serde::Serialize;

use crate::slo::Slo;

/// What one rate's steady state measured (after its warm-up).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateStep {
    /// Offered rate, requests per second.
    pub rate_rps: f64,
    /// Completed requests per second in the measured part.
    pub achieved_rps: f64,
    /// Median latency from the intended start, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Errors, percent of completed requests.
    pub error_pct: f64,
    /// Warm-up discarded before measuring, seconds.
    pub warmup_s: f64,
    /// Length of the measured part, seconds.
    pub measured_s: f64,
    /// True when the step met the objective in a steady state.
    pub meets: bool,
    /// Why it did not (empty when it met the objective).
    pub broken: Vec<String>,
}

/// Achieved/offered ratio under which a rate counts as not served.
const SERVED: f64 = 0.95;
/// Growth of the median from the first to the last third of a step that counts as rising.
const RISING: f64 = 1.25;
/// Smallest rise that counts, ms (so microsecond jitter on fast services is not a trend).
const RISING_MS: f64 = 1.0;

/// True when per-second medians climb through a step: the last third's median is 25 % (and
/// 1 ms) over the first third's — a queue building, not a steady state.
pub fn rising(p50_per_second: &[f64]) -> bool {
    let n = p50_per_second.len();
    if n < 2 {
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

/// Judges a measured step against the objective: the bounds it broke, a rising latency, or a
/// rate it could not serve.
#[allow(clippy::too_many_arguments)]
pub fn judge(
    slo: &Slo,
    rate_rps: f64,
    achieved_rps: f64,
    latency_at: impl Fn(f64) -> f64,
    error_pct: f64,
    p50_per_second: &[f64],
) -> Vec<String> {
    let mut broken = slo.violations(&latency_at, error_pct);
    if achieved_rps < SERVED * rate_rps {
        broken.push(format!("served {achieved_rps:.1} of {rate_rps:.1} req/s"));
    }
    if rising(p50_per_second) {
        broken.push("latency kept rising (a queue was building)".into());
    }
    broken
}

/// Bounds of the search.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// First rate tried.
    pub start_rps: f64,
    /// Lowest rate worth trying.
    pub min_rps: f64,
    /// Highest rate tried.
    pub max_rps: f64,
    /// Stop when the failing rate is within this ratio of the passing one (0.05 = 5 %).
    pub tolerance: f64,
}

/// The highest rate that met the objective and the lowest that did not, each below the other
/// (a passing rate above a failing one is ignored: the service is no better there).
pub fn bracket(steps: &[RateStep]) -> (Option<f64>, Option<f64>) {
    let hi = steps
        .iter()
        .filter(|s| !s.meets)
        .map(|s| s.rate_rps)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    let lo = steps
        .iter()
        .filter(|s| s.meets && hi.is_none_or(|h| s.rate_rps < h))
        .map(|s| s.rate_rps)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    (lo, hi)
}

/// The next rate to try, or `None` when the search is done.
pub fn next_rate(steps: &[RateStep], search: &Search) -> Option<f64> {
    if steps.is_empty() {
        return Some(search.start_rps.clamp(search.min_rps, search.max_rps));
    }
    let next = match bracket(steps) {
        (Some(lo), None) => {
            if lo >= search.max_rps {
                return None;
            }
            (lo * 2.0).min(search.max_rps)
        }
        (None, Some(hi)) => {
            if hi <= search.min_rps {
                return None;
            }
            (hi / 2.0).max(search.min_rps)
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
            p50_ms: 10.0,
            p99_ms: if meets { 20.0 } else { 900.0 },
            error_pct: 0.0,
            warmup_s: 1.0,
            measured_s: 3.0,
            meets,
            broken: Vec::new(),
        }
    }

    fn search_for(capacity: f64, start: f64) -> (Vec<RateStep>, Option<f64>, Option<f64>) {
        let search = Search {
            start_rps: start,
            min_rps: 1.0,
            max_rps: 100_000.0,
            tolerance: 0.05,
        };
        let mut steps = Vec::new();
        while let Some(r) = next_rate(&steps, &search) {
            steps.push(step(r, capacity));
            assert!(steps.len() < 50, "the search must end");
        }
        let (lo, hi) = bracket(&steps);
        (steps, lo, hi)
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
        let slo = Slo::parse("p99<300ms,errors<1%").unwrap();
        let broken = judge(&slo, 100.0, 80.0, |_| 50.0, 0.0, &[50.0, 50.0, 51.0]);
        assert_eq!(broken, vec!["served 80.0 of 100.0 req/s".to_string()]);
        assert!(judge(&slo, 100.0, 99.5, |_| 50.0, 0.0, &[50.0, 50.0, 51.0]).is_empty());
    }
}
