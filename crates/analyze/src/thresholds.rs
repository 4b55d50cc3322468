//! Thresholds judged: a run's summary measured against each [`Threshold`] it was given, so a
//! saved or merged run directory is judged exactly as the run that wrote it.

use loadlab_run::summary::{LatencyStats, Summary, ThresholdResult};
use loadlab_run::thresholds::{Metric, Threshold};

/// The value `t` measures in `s`, or why there is none (no requests of that name, none
/// completed).
pub fn measure(t: &Threshold, s: &Summary) -> Result<f64, String> {
    if let Metric::Artillery(name) = &t.metric {
        return artillery_metric(name, s);
    }
    let (latency, completed, failed, total, (status, grpc)) = match &t.name {
        None => {
            let r = &s.requests;
            (
                &s.latency_ms,
                r.completed,
                r.errors + r.dropped,
                r.completed + r.dropped,
                (&s.status, &s.grpc),
            )
        }
        Some(name) => {
            let n = s
                .requests_by_name
                .get(name)
                .ok_or_else(|| format!("no requests named {name:?} in this run"))?;
            (
                &n.latency_ms,
                n.completed,
                n.errors,
                n.completed,
                (&n.status, &n.grpc),
            )
        }
    };
    match &t.metric {
        Metric::Artillery(_) => unreachable!("read above"),
        Metric::Status(code) if total > 0 => {
            // The summary keys HTTP statuses by their digits and gRPC statuses by their names.
            let by = if code.starts_with(|c: char| c.is_ascii_digit()) {
                status
            } else {
                grpc
            };
            let n = by.get(code).copied().unwrap_or(0);
            Ok(n as f64 * 100.0 / total as f64)
        }
        Metric::Status(_) => Err("no request ended".into()),
        Metric::Rps if s.duration_s > 0.0 => Ok(completed as f64 / s.duration_s),
        Metric::Rps => Err("the run lasted no time".into()),
        Metric::Errors if total > 0 => Ok(failed as f64 * 100.0 / total as f64),
        Metric::Errors => Err("no request ended".into()),
        _ if completed == 0 => Err("no request completed".into()),
        Metric::MeanLatency => Ok(latency.mean),
        Metric::Latency { percentile } => Ok(latency_at(latency, *percentile)),
    }
}

/// One of Artillery's metrics by its name, from the summary: the virtual users' counts
/// (`vusers.created`, `.completed`, `.failed`, `.skipped`, `.created_by_name.NAME`, the
/// session length's statistics), the requests' (`http.requests`, `http.responses`,
/// `http.codes.NNN`) and what a processor emitted. A count loadlab keeps is 0 when nothing
/// happened (Artillery leaves such a counter out); a name the run has nothing of is an error.
fn artillery_metric(name: &str, s: &Summary) -> Result<f64, String> {
    let users = s.users.as_ref();
    let count = |n: u64| Ok(n as f64);
    let missing = || format!("no metric named {name:?} in this run");
    if let Some(stat) = name.strip_prefix("vusers.session_length.") {
        let u = users.ok_or_else(missing)?;
        return stat_of(&u.session_ms, stat).ok_or_else(missing);
    }
    if let Some(scenario) = name.strip_prefix("vusers.created_by_name.") {
        let by = &users.ok_or_else(missing)?.started_by_scenario;
        // An unnamed scenario is its index in Artillery, `scenario N` (from 1) here.
        let unnamed = scenario
            .parse::<usize>()
            .ok()
            .map(|i| format!("scenario {}", i + 1));
        let n = by
            .get(scenario)
            .or_else(|| unnamed.and_then(|u| by.get(&u)));
        return count(n.copied().unwrap_or(0));
    }
    if let Some(code) = name.strip_prefix("http.codes.") {
        return count(s.status.get(code).copied().unwrap_or(0));
    }
    match (name, users) {
        ("vusers.created", Some(u)) => return count(u.started),
        ("vusers.completed", Some(u)) => return count(u.completed),
        ("vusers.failed", Some(u)) => return count(u.failed),
        ("vusers.skipped", Some(u)) => return count(u.skipped),
        ("http.requests", _) => return count(s.requests.sent),
        ("http.responses", _) => return count(s.status.values().sum()),
        _ => {}
    }
    let emitted = users.and_then(|u| u.metrics.as_ref()).ok_or_else(missing)?;
    if let Some(v) = emitted.counters.get(name).or(emitted.rates.get(name)) {
        return Ok(*v);
    }
    let (histogram, stat) = name.rsplit_once('.').ok_or_else(missing)?;
    let h = emitted.histograms.get(histogram).ok_or_else(missing)?;
    match stat {
        "count" => count(h.count),
        _ => stat_of(&h.stats, stat).ok_or_else(missing),
    }
}

/// A statistic by Artillery's name (`min`, `max`, `mean`, `median`, `p50`…`p999`).
fn stat_of(l: &LatencyStats, stat: &str) -> Option<f64> {
    let percentile = match stat {
        "mean" => return Some(l.mean),
        "min" => 0.0,
        "max" => 100.0,
        "median" | "p50" => 50.0,
        "p75" => 75.0,
        "p90" => 90.0,
        "p95" => 95.0,
        "p99" => 99.0,
        "p999" => 99.9,
        _ => return None,
    };
    Some(latency_at(l, percentile))
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

    #[test]
    fn a_status_share_counts_http_and_grpc_statuses_of_the_run_or_a_name() {
        let mut s = summary();
        s.status.insert("200".into(), 990);
        s.grpc.insert("OK".into(), 960);
        s.grpc.insert("UNAVAILABLE".into(), 30);
        let login = s.requests_by_name.get_mut("login").unwrap();
        login.grpc.insert("UNAVAILABLE".into(), 25);
        let m = |t: &str| measure(&Threshold::parse(t).unwrap(), &s);
        assert_eq!(
            m("status:UNAVAILABLE<0.1%"),
            Ok(3.0),
            "30 of 990 + 10 dropped"
        );
        assert_eq!(m("status:unavailable{login}<1%"), Ok(25.0));
        assert_eq!(m("status:200>99%"), Ok(99.0));
        assert_eq!(
            m("status:DEADLINE_EXCEEDED<1%"),
            Ok(0.0),
            "none is a share of 0"
        );
        assert!(!check(&Threshold::parse("status:UNAVAILABLE<0.1%").unwrap(), &s).pass);
        assert!(check(&Threshold::parse("status:UNAVAILABLE<5%").unwrap(), &s).pass);
        let empty = Summary::default();
        let none = measure(&Threshold::parse("status:503<1%").unwrap(), &empty);
        assert_eq!(none, Err("no request ended".into()));
    }

    #[test]
    fn artillerys_metrics_are_read_from_the_users_and_status_counts() {
        use loadlab_run::summary::Users;
        use loadlab_run::thresholds::Comparison;
        let mut s = summary();
        s.status.insert("200".into(), 970);
        s.status.insert("500".into(), 20);
        let mut users = Users {
            started: 80,
            completed: 78,
            failed: 2,
            ..Users::default()
        };
        users
            .started_by_scenario
            .insert("Getting a resource".into(), 50);
        users.started_by_scenario.insert("scenario 2".into(), 30);
        users.session_ms.p95 = 700.0;
        s.users = Some(users);
        let m = |name: &str| {
            let t = Threshold {
                metric: Metric::Artillery(name.into()),
                name: None,
                comparison: Comparison::Equal,
                limit: 0.0,
                strict: true,
            };
            measure(&t, &s)
        };
        assert_eq!(m("vusers.created"), Ok(80.0));
        assert_eq!(m("vusers.failed"), Ok(2.0));
        assert_eq!(
            m("vusers.skipped"),
            Ok(0.0),
            "a count kept is 0 when nothing happened"
        );
        assert_eq!(m("vusers.created_by_name.Getting a resource"), Ok(50.0));
        assert_eq!(
            m("vusers.created_by_name.1"),
            Ok(30.0),
            "an unnamed scenario by index"
        );
        assert_eq!(m("vusers.session_length.p95"), Ok(700.0));
        assert_eq!(m("http.codes.500"), Ok(20.0));
        assert_eq!(m("http.codes.404"), Ok(0.0));
        assert_eq!(m("http.responses"), Ok(990.0));
        assert_eq!(m("http.requests"), Ok(1000.0));
        assert!(m("stats.errors.count")
            .unwrap_err()
            .contains("no metric named"));
    }
}
