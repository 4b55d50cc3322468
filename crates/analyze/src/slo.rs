//! Service-level objectives as users write them (`p99<300ms,errors<1%`), and the check of a
//! step's results against them.

use std::fmt;

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
    /// Parses `p50<100ms,p99<1s,errors<0.5%` (latency percentiles p50…p99.9, `max` or
    /// `mean`; durations in `us`, `ms` or `s`).
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let err = |reason: &str| SloError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let mut bounds = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('<')
                .ok_or_else(|| err(&format!("{part:?} has no '<'")))?;
            let (key, value) = (key.trim(), value.trim_start_matches('=').trim());
            if key == "errors" {
                let pct = value
                    .strip_suffix('%')
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|p| p.is_finite() && (0.0..=100.0).contains(p))
                    .ok_or_else(|| err("errors takes a percentage such as 1%"))?;
                bounds.push(Bound::Errors { max_pct: pct });
                continue;
            }
            let percentile = match key {
                "max" => 100.0,
                "median" => 50.0,
                k => k
                    .strip_prefix('p')
                    .and_then(|p| p.parse::<f64>().ok())
                    .filter(|p| p.is_finite() && *p > 0.0 && *p <= 100.0)
                    .ok_or_else(|| {
                        err(&format!("{key:?} is not p50…p99.9, max, median or errors"))
                    })?,
            };
            let max_ms = duration_ms(value)
                .ok_or_else(|| err(&format!("{value:?} is not a duration such as 300ms")))?;
            bounds.push(Bound::Latency { percentile, max_ms });
        }
        if bounds.is_empty() {
            return Err(err("no bound given"));
        }
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

fn duration_ms(v: &str) -> Option<f64> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
        .map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in [
            "", "p99", "p99<fast", "p0<1ms", "errors<1", "q99<1ms", "p99<-1ms",
        ] {
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
