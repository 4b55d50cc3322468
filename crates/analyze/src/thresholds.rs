//! Thresholds judged: a run's summary measured against each [`Threshold`] it was given, so a
//! saved or merged run directory is judged exactly as the run that wrote it.

use loadlab_run::summary::{LatencyStats, Summary, ThresholdResult};
use loadlab_run::thresholds::{Metric, Threshold};

/// The value `t` measures in `s`, or why there is none (no requests of that name, none
/// completed).
pub fn measure(t: &Threshold, s: &Summary) -> Result<f64, String> {
    let (latency, completed, failed, total) = match &t.name {
        None => {
            let r = &s.requests;
            (
                &s.latency_ms,
                r.completed,
                r.errors + r.dropped,
                r.completed + r.dropped,
            )
        }
        Some(name) => {
            let n = s
                .requests_by_name
                .get(name)
                .ok_or_else(|| format!("no requests named {name:?} in this run"))?;
            (&n.latency_ms, n.completed, n.errors, n.completed)
        }
    };
    match t.metric {
        Metric::Rps if s.duration_s > 0.0 => Ok(completed as f64 / s.duration_s),
        Metric::Rps => Err("the run lasted no time".into()),
        Metric::Errors if total > 0 => Ok(failed as f64 * 100.0 / total as f64),
        Metric::Errors => Err("no request ended".into()),
        _ if completed == 0 => Err("no request completed".into()),
        Metric::MeanLatency => Ok(latency.mean),
        Metric::Latency { percentile } => Ok(latency_at(latency, percentile)),
    }
}

/// Checks `s` against `t`.
pub fn check(t: &Threshold, s: &Summary) -> ThresholdResult {
    let measured = measure(t, s);
    ThresholdResult {
        threshold: t.to_string(),
        metric: t.metric.name(),
        name: t.name.clone(),
        comparison: t.comparison.symbol().to_string(),
        limit: t.limit,
        unit: t.metric.unit().to_string(),
        measured: measured.as_ref().ok().copied(),
        pass: measured
            .as_ref()
            .is_ok_and(|&v| t.comparison.holds(v, t.limit)),
        strict: t.strict,
        reason: measured.err(),
    }
}

/// Checks `s` against each threshold, in order.
pub fn check_all(thresholds: &[Threshold], s: &Summary) -> Vec<ThresholdResult> {
    thresholds.iter().map(|t| check(t, s)).collect()
}

/// The latency at `percentile` from a summary's figures: the exact keys it keeps, and
/// between them the next one up (a stricter reading, never a laxer one).
fn latency_at(l: &LatencyStats, percentile: f64) -> f64 {
    let keys = [
        (0.0, l.min),
        (2.5, l.p2_5),
        (50.0, l.p50),
        (90.0, l.p90),
        (95.0, l.p95),
        (97.5, l.p97_5),
        (99.0, l.p99),
        (99.9, l.p99_9),
        (100.0, l.max),
    ];
    keys.iter()
        .find(|(p, _)| *p >= percentile)
        .map_or(l.max, |(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::summary::{NamedRequests, Requests};

    fn summary() -> Summary {
        let latency_ms = LatencyStats {
            min: 1.0,
            mean: 20.0,
            p50: 10.0,
            p95: 40.0,
            p97_5: 45.0,
            p99: 50.0,
            p99_9: 80.0,
            max: 100.0,
            ..LatencyStats::default()
        };
        let mut s = Summary {
            duration_s: 10.0,
            requests: Requests {
                sent: 1000,
                completed: 990,
                ok: 970,
                errors: 20,
                dropped: 10,
                unfinished: 0,
                refused: 0,
            },
            latency_ms: latency_ms.clone(),
            ..Summary::default()
        };
        let login = NamedRequests {
            completed: 100,
            ok: 50,
            errors: 50,
            latency_ms,
            ..NamedRequests::default()
        };
        s.requests_by_name.insert("login".into(), login);
        s
    }

    #[test]
    fn a_summary_is_measured_per_metric_and_name() {
        let s = summary();
        let m = |t: &str| measure(&Threshold::parse(t).unwrap(), &s);
        assert_eq!(m("p99<1ms"), Ok(50.0));
        assert_eq!(m("p97<1ms"), Ok(45.0), "between keys, the next one up");
        assert_eq!(m("mean<1ms"), Ok(20.0));
        assert_eq!(m("errors<1%"), Ok(3.0), "(20 errors + 10 dropped) of 1000");
        assert_eq!(m("rps>1"), Ok(99.0));
        assert_eq!(m("errors{login}<1%"), Ok(50.0));
        assert_eq!(m("rps{login}>1"), Ok(10.0));
        assert!(m("p99{logout}<1ms")
            .unwrap_err()
            .contains("no requests named"));
        let pass = check(&Threshold::parse("p99<=50ms").unwrap(), &s);
        assert!(pass.pass && !pass.fails_run());
        let fail = check(&Threshold::parse("p99<50ms").unwrap(), &s);
        assert!(!fail.pass && fail.fails_run());
        assert_eq!(fail.measured_text(), "50.00 ms");
        let missing = check(&Threshold::parse("p99{logout}<50ms").unwrap(), &s);
        assert!(!missing.pass && missing.measured.is_none());
    }
}
