//! A scenario's `config.ensure` (Artillery's checks that fail a run) as thresholds:
//! `thresholds` (a metric under a limit), `conditions` (`A < x and B > y`, with `strict`),
//! `maxErrorRate`, the older top-level percentiles (`p99: 200`), and loadlab's own `slo`
//! text (`'p99<300ms,errors<1%'`).
//!
//! Artillery's metric names map onto loadlab's: `http.response_time.{min,max,mean,median,
//! p50…p999}` is the latency from the intended start in ms, `http.request_rate` the
//! completed requests per second, and `plugins.metrics-by-endpoint.response_time.NAME.STAT`
//! the latency of the requests named NAME; any other name (`vusers.failed`, `http.codes.200`)
//! is read from the summary's counts when the run is judged.

use loadlab_run::thresholds::{Comparison, Metric, Threshold};
use serde::Deserialize;

use super::error::EnsureError;

/// `config.ensure` as written.
#[derive(Debug, Default, Deserialize)]
pub struct EnsureSpec {
    /// `- http.response_time.p99: 250`: the metric must stay under the value.
    #[serde(default)]
    thresholds: Vec<std::collections::BTreeMap<String, f64>>,
    /// `- expression: "http.response_time.p99 < 250 and http.request_rate > 100"`.
    #[serde(default)]
    conditions: Vec<ConditionSpec>,
    /// Most failed requests allowed, percent.
    #[serde(default, rename = "maxErrorRate")]
    max_error_rate: Option<f64>,
    /// loadlab's threshold syntax, as `--slo` takes it.
    #[serde(default)]
    slo: Option<String>,
    /// The older top-level forms: the latency must stay under the value, ms.
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    median: Option<f64>,
    #[serde(default)]
    p50: Option<f64>,
    #[serde(default)]
    p75: Option<f64>,
    #[serde(default)]
    p90: Option<f64>,
    #[serde(default)]
    p95: Option<f64>,
    #[serde(default)]
    p99: Option<f64>,
    #[serde(default)]
    p999: Option<f64>,
}

/// One of `ensure.conditions`.
#[derive(Debug, Deserialize)]
struct ConditionSpec {
    expression: String,
    /// A failed non-strict condition is reported but does not fail the run.
    #[serde(default = "strict_by_default")]
    strict: bool,
}

fn strict_by_default() -> bool {
    true
}

impl EnsureSpec {
    /// The thresholds this block asks for, in the order written. Unless `gates` (Artillery
    /// runs its ensure plugin only when `config.plugins` names it), Artillery's checks are
    /// reported without failing the run; loadlab's own `slo` always gates.
    pub fn thresholds(&self, gates: bool) -> Result<Vec<Threshold>, EnsureError> {
        let mut out = Vec::new();
        let legacy = [
            ("min", self.min),
            ("max", self.max),
            ("median", self.median),
            ("p50", self.p50),
            ("p75", self.p75),
            ("p90", self.p90),
            ("p95", self.p95),
            ("p99", self.p99),
            ("p999", self.p999),
        ];
        for (stat, limit) in legacy {
            if let Some(limit) = limit {
                out.push(under(latency_stat(stat)?, None, limit, "ensure")?);
            }
        }
        for entry in &self.thresholds {
            for (key, limit) in entry {
                let (metric, name) = artillery_metric(key)?;
                out.push(under(metric, name, *limit, key)?);
            }
        }
        for c in &self.conditions {
            out.extend(condition(&c.expression, c.strict)?);
        }
        if let Some(pct) = self.max_error_rate {
            if !(0.0..=100.0).contains(&pct) {
                return Err(EnsureError::MaxErrorRate(pct));
            }
            out.push(Threshold {
                metric: Metric::Errors,
                name: None,
                comparison: Comparison::AtMost,
                limit: pct,
                strict: true,
            });
        }
        if !gates {
            for t in out.iter_mut() {
                t.strict = false;
            }
        }
        if let Some(text) = &self.slo {
            out.extend(Threshold::parse_list(text)?);
        }
        Ok(out)
    }
}

/// `metric < limit`, strict, with a finite non-negative limit.
fn under(
    metric: Metric,
    name: Option<String>,
    limit: f64,
    what: &str,
) -> Result<Threshold, EnsureError> {
    if !(limit.is_finite() && limit >= 0.0) {
        return Err(EnsureError::Limit {
            what: what.into(),
            limit,
        });
    }
    Ok(Threshold {
        metric,
        name,
        comparison: Comparison::Below,
        limit,
        strict: true,
    })
}

/// A latency statistic's Artillery name (`p99`, `p999`, `median`, `mean`).
fn latency_stat(stat: &str) -> Result<Metric, EnsureError> {
    Ok(match stat {
        "min" => Metric::Latency { percentile: 0.0 },
        "max" => Metric::Latency { percentile: 100.0 },
        "mean" => Metric::MeanLatency,
        "median" | "p50" => Metric::Latency { percentile: 50.0 },
        "p75" => Metric::Latency { percentile: 75.0 },
        "p90" => Metric::Latency { percentile: 90.0 },
        "p95" => Metric::Latency { percentile: 95.0 },
        "p99" => Metric::Latency { percentile: 99.0 },
        "p999" => Metric::Latency { percentile: 99.9 },
        _ => return Err(EnsureError::LatencyStat(stat.into())),
    })
}

/// An Artillery metric name as a metric, and the request name it is scoped to.
fn artillery_metric(key: &str) -> Result<(Metric, Option<String>), EnsureError> {
    const BY_ENDPOINT: &str = "plugins.metrics-by-endpoint.response_time.";
    if let Some(stat) = key.strip_prefix("http.response_time.") {
        return Ok((latency_stat(stat)?, None));
    }
    if key == "http.request_rate" {
        return Ok((Metric::Rps, None));
    }
    if let Some(rest) = key.strip_prefix(BY_ENDPOINT) {
        if let Some((name, stat)) = rest.rsplit_once('.') {
            return Ok((latency_stat(stat)?, Some(name.to_string())));
        }
    }
    // Any other of Artillery's metrics (`vusers.failed`, `http.codes.200`, a processor's
    // counter) is read from the summary when the run is judged; one the run does not have
    // fails its check, as a missing metric fails Artillery's.
    if key.is_empty() {
        return Err(EnsureError::NoMetric);
    }
    Ok((Metric::Artillery(key.to_string()), None))
}

/// A condition's expression: clauses `METRIC OP NUMBER` joined by `and`.
fn condition(expression: &str, strict: bool) -> Result<Vec<Threshold>, EnsureError> {
    if expression
        .split_whitespace()
        .any(|w| w == "or" || w == "not")
    {
        return Err(EnsureError::OrNot(expression.into()));
    }
    expression
        .split(" and ")
        .map(|clause| {
            let clause = clause.trim();
            let (key, comparison, value) = Comparison::split(clause)
                .ok_or_else(|| EnsureError::NoComparison(clause.into()))?;
            let (metric, name) = artillery_metric(key.trim())?;
            let limit: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| EnsureError::NoNumber(clause.into()))?;
            Ok(Threshold {
                metric,
                name,
                comparison,
                limit,
                strict,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thresholds(yaml: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        thresholds_gating(yaml, true)
    }

    fn thresholds_gating(
        yaml: &str,
        gates: bool,
    ) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let spec: EnsureSpec = serde_saphyr::from_str(yaml)?;
        Ok(spec
            .thresholds(gates)?
            .iter()
            .map(|t| format!("{t}{}", if t.strict { "" } else { " (report)" }))
            .collect())
    }

    #[test]
    fn every_form_of_ensure_becomes_thresholds() {
        let got = thresholds(
            "p99: 500\n\
             thresholds:\n  - http.response_time.p95: 250\n  - http.request_rate: 1000\n\
             \x20 - plugins.metrics-by-endpoint.response_time./api/v1.2/login.p99: 300\n\
             conditions:\n  - expression: http.response_time.median <= 20 and http.request_rate > 50\n\
             \x20   strict: false\n\
             maxErrorRate: 1\n\
             slo: 'errors{/api/v1.2/login}<5%'\n",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "p99<500ms",
                "p95<250ms",
                "rps<1000",
                "p99{/api/v1.2/login}<300ms",
                "p50<=20ms (report)",
                "rps>50 (report)",
                "errors<=1%",
                "errors{/api/v1.2/login}<5%",
            ]
        );
    }

    #[test]
    fn without_the_plugin_named_artillerys_checks_are_reported_and_loadlabs_slo_still_gates() {
        let got = thresholds_gating(
            "thresholds:\n  - http.response_time.p95: 250\nmaxErrorRate: 1\nslo: 'p50<1s'\n",
            false,
        )
        .unwrap();
        assert_eq!(got, ["p95<250ms (report)", "errors<=1% (report)", "p50<1s"]);
    }

    #[test]
    fn artillerys_other_metrics_and_equality_are_read_from_the_summary() {
        let got = thresholds(
            "thresholds:\n  - vusers.session_length.p95: 900\n\
             conditions:\n  - expression: vusers.failed == 0 and vusers.created > 70\n\
             \x20 - expression: vusers.created_by_name.Getting a resource === 80\n\
             \x20 - expression: http.codes.500 != 3\n",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "vusers.session_length.p95<900",
                "vusers.failed==0",
                "vusers.created>70",
                "vusers.created_by_name.Getting a resource==80",
                "http.codes.500!=3",
            ]
        );
    }

    #[test]
    fn what_loadlab_cannot_check_is_refused_by_name() {
        for bad in [
            "conditions:\n  - expression: http.response_time.p99 < 1 or http.request_rate > 1\n",
            "conditions:\n  - expression: http.response_time.p99 = 1\n",
            "thresholds:\n  - http.response_time.p42: 1\n",
            "maxErrorRate: 120\n",
            "slo: 'p99<fast'\n",
        ] {
            assert!(thresholds(bad).is_err(), "{bad:?}");
        }
        // A key the ensure plugin does not read (its legacy form reads min, max, median, p95
        // and p99) is ignored there; the script's reader warns about it, naming p99.
        assert_eq!(thresholds("p98: 10\n").unwrap(), Vec::<String>::new());
    }
}
