//! Service-level objectives as users write them (`p99<300ms,errors<1%`), and the check of a
//! step's results against them.

use std::fmt;

use loadlab_run::thresholds::{Comparison, Metric, Threshold};
use serde::Serialize;

/// One bound of an objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bound {
    /// A latency percentile (0–100) must stay under `max_ms`.
    Latency {
        /// Percentile, e.g. 99.0.
        percentile: f64,
        /// Upper bound, milliseconds.
        max_ms: f64,
    },
    /// The share of requests that end in errors must stay under `max_pct` percent.
    Errors {
        /// Upper bound, percent.
        max_pct: f64,
    },
}

/// A service-level objective: every bound must hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slo {
    /// The text it was parsed from.
    pub text: String,
    /// The bounds.
    pub bounds: Vec<Bound>,
}

/// How a step stands against an objective's bounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Violations {
    /// The bounds it broke, in words; empty when it met them all.
    pub broken: Vec<String>,
    /// A percentile bound the step could not judge: it held fewer requests than a 95 % upper
    /// bound on that percentile needs (the percentile, the requests needed).
    pub undersampled: Option<(f64, u64)>,
    /// How many of `broken` say only that the step was too short to judge a percentile.
    pub unjudged: usize,
}

impl Violations {
    /// True when the step was too short to judge a percentile bound and broke nothing else
    /// (no other bound, no unserved arrivals, no rising median): it neither met nor broke
    /// the objective.
    pub fn only_undersampled(&self) -> bool {
        self.undersampled.is_some() && self.broken.len() == self.unjudged
    }
}

/// Confidence with which a step's latency bound holds the true percentile.
const BOUND_CONFIDENCE: f64 = 0.95;

/// The ranks (1-based, among `n` sorted latencies) whose latencies bound the `p`-th quantile
/// (0 < p < 1) with 95 % confidence from below and from above: the largest j with
/// P(X_(j) ≤ q_p) ≥ 0.95 and the smallest k with P(X_(k) ≥ q_p) ≥ 0.95. Fewer than k of n
/// requests fall under q_p with probability P(Bin(n, p) ≤ k − 1), and at least j do with
/// P(Bin(n, p) ≥ j). Either is `None` when n is too small for it (k: n < ln 0.05 / ln p, 299
/// for p99).
pub fn bound_ranks(n: u64, p: f64) -> (Option<u64>, Option<u64>) {
    if n == 0 || !(0.0..1.0).contains(&p) || p <= 0.0 {
        return (None, None);
    }
    let alpha = 1.0 - BOUND_CONFIDENCE;
    let nf = n as f64;
    // Y = n − X ~ Bin(n, 1 − p) counts the requests above the quantile: P(X ≥ r) =
    // P(Y ≤ n − r). Its distribution is summed up from P(Y = 0) = pⁿ, which underflows past
    // e^-700; there n p (1 − p) is large and the normal approximation is exact enough.
    if nf * -p.ln() > 700.0 {
        let (mean, sd) = (nf * p, (nf * p * (1.0 - p)).sqrt());
        let upper = ((mean + 1.645 * sd + 0.5).ceil() as u64).min(n);
        let lower = (mean - 1.645 * sd - 0.5).floor().max(0.0) as u64;
        return ((lower >= 1).then_some(lower), Some(upper));
    }
    let ratio = (1.0 - p) / p;
    let mut pmf = p.powf(nf);
    let mut cdf = pmf;
    let mut upper = None;
    let mut lower = None;
    let mut m = 0u64;
    loop {
        // P(Y ≤ m) ≤ α: rank n − m is an upper bound (the smallest such rank is wanted,
        // so the largest such m).
        if cdf <= alpha {
            upper = Some(n - m);
        }
        if cdf >= 1.0 - alpha {
            lower = (m < n).then_some(n - m);
            break;
        }
        if m == n {
            break;
        }
        pmf *= (n - m) as f64 / (m + 1) as f64 * ratio;
        cdf += pmf;
        m += 1;
    }
    (lower, upper)
}

/// An objective that cannot be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("SLO {text:?}: {reason}; write it like 'p99<300ms,errors<1%'")]
pub struct SloError {
    text: String,
    reason: String,
}

impl Slo {
    /// The requests a step needs for its highest latency percentile under the max (the
    /// tightest bound) to be a 95 % upper bound of that percentile: the smallest n with
    /// 1 − (p/100)ⁿ ≥ 0.95, 299 for p99 (fewer, and the step's pXX is a point estimate a short
    /// step can pass by luck); `None` without a percentile bound under the max.
    pub fn requests_for_a_bound(&self) -> Option<(f64, u64)> {
        let p = self
            .bounds
            .iter()
            .filter_map(|b| match b {
                Bound::Latency { percentile, .. } if *percentile < 100.0 => Some(*percentile),
                _ => None,
            })
            .reduce(f64::max)?;
        Some((p, requests_for(p)))
    }

    /// Parses `p50<100ms,p99<1s,errors<0.5%` with the thresholds' syntax
    /// ([`Threshold::parse_list`]), keeping to what a capacity search can aim for: upper
    /// bounds on latency percentiles and on errors, for the whole run.
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let err = |reason: String| SloError {
            text: text.to_string(),
            reason,
        };
        let list = Threshold::parse_list(text).map_err(|e| err(e.reason().to_string()))?;
        let bounds = list
            .into_iter()
            .map(|t| {
                let upper = matches!(t.comparison, Comparison::Below | Comparison::AtMost);
                match t.metric {
                    _ if t.name.is_some() => Err(err(format!(
                        "{t}: an objective covers every request, not one name"
                    ))),
                    Metric::Latency { percentile } if upper && percentile > 0.0 => {
                        Ok(Bound::Latency {
                            percentile,
                            max_ms: t.limit,
                        })
                    }
                    Metric::Errors if upper => Ok(Bound::Errors { max_pct: t.limit }),
                    _ => Err(err(format!(
                        "{t}: an objective is upper bounds on latency percentiles and errors"
                    ))),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Slo {
            text: text.to_string(),
            bounds,
        })
    }

    /// How a step of `n` requests stands: the bounds it broke, in words. `latency_at` gives the
    /// step's latency at a percentile (0–100), in ms. A percentile bound is judged on a 95 %
    /// upper bound of that percentile (the latency at [`bound_ranks`]'s upper rank), never on the point
    /// estimate a few requests can pass by luck; a step too short to have that bound breaks it
    /// as `undersampled`.
    pub fn violations(
        &self,
        n: u64,
        latency_at: impl Fn(f64) -> f64,
        error_pct: f64,
    ) -> Violations {
        let mut out = Violations::default();
        for b in &self.bounds {
            match *b {
                Bound::Latency { percentile, max_ms } if percentile < 100.0 => {
                    let name = percentile_name(percentile);
                    let at_rank = |r: u64| latency_at(100.0 * r as f64 / n as f64);
                    match bound_ranks(n, percentile / 100.0) {
                        (_, Some(k)) => {
                            let got = at_rank(k);
                            if got >= max_ms {
                                out.broken.push(format!(
                                    "{name} {got:.1} ms (95 % upper bound) ≥ {max_ms} ms"
                                ));
                            }
                        }
                        // Too few to show the percentile is under the bound, but enough to
                        // show it is over: a 95 % lower bound already breaks it.
                        (Some(j), None) if at_rank(j) >= max_ms => {
                            out.broken.push(format!(
                                "{name} {:.1} ms (95 % lower bound) ≥ {max_ms} ms",
                                at_rank(j)
                            ));
                        }
                        (_, None) => {
                            let needed = requests_for(percentile);
                            out.broken.push(format!(
                                "{n} requests cannot bound {name}: a 95 % bound needs {needed}"
                            ));
                            out.undersampled = Some((percentile, needed));
                            out.unjudged += 1;
                        }
                    }
                }
                Bound::Latency { percentile, max_ms } => {
                    let got = latency_at(percentile);
                    if got >= max_ms {
                        out.broken.push(format!(
                            "{} {got:.1} ms ≥ {max_ms} ms",
                            percentile_name(percentile)
                        ));
                    }
                }
                Bound::Errors { max_pct } => {
                    if error_pct >= max_pct {
                        out.broken
                            .push(format!("errors {error_pct:.2} % ≥ {max_pct} %"));
                    }
                }
            }
        }
        out
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The fewest requests whose largest latency is a 95 % upper bound of percentile `p` (0–100):
/// the smallest n with 1 − (p/100)ⁿ ≥ 0.95.
fn requests_for(p: f64) -> u64 {
    let n = ((1.0 - BOUND_CONFIDENCE).ln() / (p / 100.0).ln()).ceil();
    n.max(1.0) as u64
}

/// True when `words`, one of a step's broken bounds as [`Slo::violations`] writes it, says a
/// latency percentile went over its bound (every such line ends in the bound's milliseconds,
/// and no other line does): a break the step's own tail decided, which a stall of the machine
/// alone can cause.
pub fn is_latency_break(words: &str) -> bool {
    words.ends_with(" ms") && words.contains(" ≥ ")
}

/// The name a percentile goes by in an objective (`p99`, `p99.9`, `max`).
pub fn percentile_name(p: f64) -> String {
    if p >= 100.0 {
        "max".into()
    } else {
        format!("p{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentiles_bound_needs_the_requests_whose_max_bounds_it() {
        let n = |text: &str| Slo::parse(text).unwrap().requests_for_a_bound();
        assert_eq!(n("p99<300ms,errors<1%"), Some((99.0, 299)));
        assert_eq!(n("p50<100ms,p95<1s"), Some((95.0, 59)));
        assert_eq!(n("errors<1%"), None);
    }

    #[test]
    fn objectives_parse_into_bounds() {
        let s = Slo::parse("p99<300ms, errors<1%,p50<=0.1s,max<2s").unwrap();
        assert_eq!(
            s.bounds,
            vec![
                Bound::Latency {
                    percentile: 99.0,
                    max_ms: 300.0
                },
                Bound::Errors { max_pct: 1.0 },
                Bound::Latency {
                    percentile: 50.0,
                    max_ms: 100.0
                },
                Bound::Latency {
                    percentile: 100.0,
                    max_ms: 2000.0
                },
            ]
        );
        // The syntax is the thresholds' (tested there); an objective refuses what a capacity
        // search cannot aim for.
        for bad in ["p99<fast", "rps>10", "p99>1ms", "p99{a}<1ms", "mean<1ms"] {
            assert!(Slo::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn violations_name_the_broken_bounds() {
        let s = Slo::parse("p99<300ms,errors<1%").unwrap();
        assert_eq!(s.violations(1000, |_| 120.0, 0.0), Violations::default());
        let v = s.violations(1000, |p| if p >= 99.0 { 450.0 } else { 100.0 }, 2.5);
        assert_eq!(v.broken.len(), 2, "{v:?}");
        assert!(v.broken[0].starts_with("p99 450.0 ms (95 % upper bound)"));
        assert_eq!(v.undersampled, None);
    }

    #[test]
    fn latency_breaks_are_told_from_every_other_broken_bound() {
        let s = Slo::parse("p90<100ms,max<2s,errors<1%").unwrap();
        // Upper bounds and the maximum broken, errors too.
        let v = s.violations(1000, |_| 5000.0, 2.0);
        assert_eq!(v.broken.len(), 3, "{v:?}");
        assert!(is_latency_break(&v.broken[0]), "{v:?}");
        assert!(is_latency_break(&v.broken[1]), "{v:?}");
        assert!(!is_latency_break(&v.broken[2]), "{v:?}");
        // Too few to bound p90 under, enough to show it over: a latency break all the same.
        let few = s.violations(10, |_| 5000.0, 0.0);
        assert!(few.broken[0].contains("lower bound"), "{few:?}");
        assert!(is_latency_break(&few.broken[0]), "{few:?}");
        // Too few either way: not a break of the latency, only a step too short.
        let short = s.violations(10, |_| 1.0, 0.0);
        assert!(!is_latency_break(&short.broken[0]), "{short:?}");
    }

    #[test]
    fn a_percentile_is_judged_on_its_upper_bound_and_never_on_too_few_requests() {
        let s = Slo::parse("p99<300ms").unwrap();
        // 298 requests cannot bound p99, however fast they were.
        let v = s.violations(298, |_| 1.0, 0.0);
        assert_eq!(v.undersampled, Some((99.0, 299)), "{v:?}");
        assert!(v.only_undersampled(), "{v:?}");
        // Two percentiles too few requests can bound: still only undersampled; with the
        // errors bound broken too, decided.
        let two = Slo::parse("p95<300ms,p99<300ms,errors<1%").unwrap();
        assert!(two.violations(40, |_| 1.0, 0.0).only_undersampled());
        assert!(!two.violations(40, |_| 1.0, 5.0).only_undersampled());
        assert!(
            v.broken[0].contains("298 requests cannot bound p99"),
            "{v:?}"
        );
        // 299 can: the bound is their largest latency.
        assert_eq!(bound_ranks(299, 0.99).1, Some(299));
        let v = s.violations(299, |p| if p >= 100.0 { 350.0 } else { 100.0 }, 0.0);
        assert!(v.broken[0].starts_with("p99 350.0 ms"), "{v:?}");
        // With many requests the bound is a little above the point estimate: for 10,000, the
        // 9,916th (9,900 + 1.645 sd + continuity; sd ≈ 9.95).
        let k = bound_ranks(10_000, 0.99).1.unwrap();
        assert!((9_915..=9_918).contains(&k), "{k}");
    }

    #[test]
    fn the_bound_rank_holds_its_confidence() {
        // Exact check: P(Bin(n, p) ≥ k) ≤ 5 % < P(Bin(n, p) ≥ k − 1), summed directly.
        let tail = |n: u64, p: f64, k: u64| -> f64 {
            let mut pmf = vec![0.0f64; n as usize + 1];
            pmf[0] = 1.0;
            for _ in 0..n {
                for j in (1..pmf.len()).rev() {
                    pmf[j] = pmf[j] * (1.0 - p) + pmf[j - 1] * p;
                }
                pmf[0] *= 1.0 - p;
            }
            pmf[k as usize..].iter().sum()
        };
        for (n, p) in [
            (299, 0.99),
            (400, 0.99),
            (59, 0.95),
            (200, 0.95),
            (29, 0.9),
            (50, 0.5),
        ] {
            let k = bound_ranks(n, p).1.unwrap();
            assert!(tail(n, p, k) <= 0.05 + 1e-12, "{n} {p} {k}");
            if k > 1 {
                assert!(tail(n, p, k - 1) > 0.05, "{n} {p} {k}");
            }
        }
        assert_eq!(bound_ranks(58, 0.95).1, None);
        assert_eq!(bound_ranks(28, 0.9).1, None);
        // The lower bound: P(Bin(n, p) ≥ j) ≥ 95 % > P(Bin(n, p) ≥ j + 1).
        for (n, p) in [
            (120, 0.99),
            (299, 0.99),
            (59, 0.95),
            (50, 0.5),
            (2_000, 0.99),
        ] {
            let j = bound_ranks(n, p).0.unwrap();
            assert!(tail(n, p, j) >= 0.95 - 1e-12, "{n} {p} {j}");
            assert!(tail(n, p, j + 1) < 0.95, "{n} {p} {j}");
        }
        // Two requests: both under the median only a quarter of the time, under p99 98 %.
        assert_eq!(bound_ranks(2, 0.5).0, None);
        assert_eq!(bound_ranks(2, 0.99).0, Some(2));
    }

    #[test]
    fn too_few_requests_still_show_a_percentile_over_its_bound() {
        // 120 requests of a service whose every request takes 100 ms: p99 < 50 ms is broken
        // on its lower bound, not undecided.
        let s = Slo::parse("p99<50ms").unwrap();
        let v = s.violations(120, |_| 100.0, 0.0);
        assert_eq!(v.undersampled, None, "{v:?}");
        assert!(v.broken[0].contains("(95 % lower bound)"), "{v:?}");
    }
}
