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
        let n = (0.05_f64.ln() / (p / 100.0).ln()).ceil();
        Some((p, n.max(1.0) as u64))
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

    /// The bounds a step broke, in words; empty when it met them all. `latency_at` gives the
    /// step's latency at a percentile (0–100), in ms.
    pub fn violations(&self, latency_at: impl Fn(f64) -> f64, error_pct: f64) -> Vec<String> {
        self.bounds
            .iter()
            .filter_map(|b| match *b {
                Bound::Latency { percentile, max_ms } => {
                    let got = latency_at(percentile);
                    (got >= max_ms).then(|| {
                        format!("{} {got:.1} ms ≥ {max_ms} ms", percentile_name(percentile))
                    })
                }
                Bound::Errors { max_pct } => {
                    (error_pct >= max_pct).then(|| format!("errors {error_pct:.2} % ≥ {max_pct} %"))
                }
            })
            .collect()
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `p99`, `p99.9`, `max`.
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
        assert!(s.violations(|_| 120.0, 0.0).is_empty());
        let v = s.violations(|p| if p >= 99.0 { 450.0 } else { 100.0 }, 2.5);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].starts_with("p99 450.0 ms"));
    }
}
