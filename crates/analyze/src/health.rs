//! The generator's own health, judged: whether a thread saturated, the schedule slipped,
//! requests were dropped or connections failed, said in words in `summary.json`'s
//! `generator.warnings` (a merged run's too, shard by shard).

use loadlab_run::summary::{Generator, MergedShard, Summary};
use loadlab_run::{ErrorKind, RunData, TlsFailure};

/// Achieved/offered ratio under which the generator is said to have fallen behind.
const BEHIND_RATIO: f64 = 0.98;
/// Connect time past which connections closed by the server are blamed on idle timeouts, s.
const SLOW_CONNECTS_S: f64 = 30.0;
/// Busiest thread's CPU share over which the generator is said to be saturated.
const SATURATED_UTILIZATION: f64 = 0.9;
/// p99 schedule lag over which the generator did not keep its schedule, ms (a shard this late
/// limited the load itself).
const LATE_MS: f64 = 5.0;

/// Judges the generator of `run` into `g`: `saturated` and the warnings.
pub fn judge_generator(run: &RunData, g: &mut Generator) {
    let stats = &run.generator;
    let c = &run.totals.counts;
    g.saturated = stats.busiest_thread_utilization > SATURATED_UTILIZATION;
    let limited = generator_limited(g);
    let (lag_p99, saturated) = (g.schedule_lag_ms_p99, g.saturated);
    let warnings = &mut g.warnings;
    if let Some(offered) = run.offered_rps() {
        // With virtual users an arrival is a user, who may send many requests.
        // A user skipped at its phase's cap (`maxVusers`) was not held back by the generator.
        let (started, what) = match &run.users {
            Some(u) => (c.users_started + u.skipped, "users/s"),
            None => (c.sent, "req/s"),
        };
        let achieved = started as f64 / run.schedule_secs();
        if offered > 0.0 && achieved < BEHIND_RATIO * offered {
            warnings.push(format!(
                "the generator started {achieved:.0} {what} of the {offered:.0} {what} offered \
                 ({:.1} %): arrivals waited for connections or the generator fell behind",
                100.0 * achieved / offered
            ));
        }
    }
    if c.dropped > 0 {
        warnings.push(format!(
            "{} requests were dropped: no connection freed up within their timeout; raise \
             --max-connections or lower the rate",
            c.dropped
        ));
    }
    if saturated && limited {
        warnings.push(format!(
            "a generator thread was busy {:.0} % of the run: the generator may have limited the \
             load; give it more threads (-t) or a core of its own",
            100.0 * stats.busiest_thread_utilization
        ));
    } else if saturated {
        warnings.push(format!(
            "a generator thread was busy {:.0} % of the run but kept its schedule (lag p99 \
             {:.2} ms): arrivals this close together are waited for without sleeping; another \
             thread (-t) leaves it room to spare",
            100.0 * stats.busiest_thread_utilization,
            lag_p99
        ));
    }
    if lag_p99 > LATE_MS {
        warnings.push(format!(
            "arrivals were released up to {lag_p99:.1} ms late (p99 schedule lag): the \
             generator could not keep its schedule"
        ));
    }
    let k = &stats.connect;
    if k.failed > 0 {
        warnings.push(format!(
            "{} of {} connections could not be opened before the load started; each tried again \
             at its first request (lower --connect-rate if the server's listen backlog \
             overflowed)",
            k.failed, k.connections
        ));
    }
    let closed = c.error_kinds[ErrorKind::Closed.index()];
    if k.duration_s > SLOW_CONNECTS_S && closed > 0 {
        warnings.push(format!(
            "opening the connections took {:.0} s, and {closed} requests found their connection \
             closed: a server closes connections idle that long (nginx after its 60 s \
             client_header_timeout); open them faster with --connect-rate, or with --source-addr \
             when connects to one destination slow down past ~14,000 from one address",
            k.duration_s
        ));
    }
    if run.plan.uses_tls() {
        tls_warnings(run, warnings);
    }
}

/// Warns when certificate verification was off, and names the commonest cause of failed
/// handshakes in words.
fn tls_warnings(run: &RunData, warnings: &mut Vec<String>) {
    if run.plan.tls.insecure {
        warnings.push(
            "TLS certificate verification was off (--insecure): the servers' identities were not \
             checked"
                .into(),
        );
    }
    let failed = &run.timings.tls_failures;
    let commonest = TlsFailure::ALL
        .into_iter()
        .filter(|f| failed[f.index()] > 0)
        .max_by_key(|f| (failed[f.index()], std::cmp::Reverse(f.index())));
    if let Some(cause) = commonest {
        let total: u64 = failed.iter().sum();
        warnings.push(format!(
            "{total} TLS handshake(s) failed; the commonest cause: tls: {}",
            cause.message()
        ));
    }
}

/// True when the generator, not the service, limited the load (a run's, or one shard's): a
/// thread saturated or its schedule slipped. An open-model thread that kept its schedule
/// (lag p99 under 1 ms) limited nothing, however busy it was: above ~100,000 arrivals a
/// second per thread the pacer waits for the next arrival without sleeping, so its thread
/// reads as fully busy.
pub fn generator_limited(g: &Generator) -> bool {
    let kept_schedule = g.pacing.is_some() && g.schedule_lag_ms_p99 < KEPT_MS;
    (g.saturated && !kept_schedule) || g.schedule_lag_ms_p99 > LATE_MS
}

/// True when an open-model generator saturated a thread and released its arrivals late (p99
/// schedule lag past [`LATE_MS`]): the rate sent was not the rate asked for, and the figures
/// are the generator's as much as the service's. A closed model's saturated generator is
/// not judged here: it sent as fast as it could, which is what it was asked.
pub fn fell_behind_its_rate(g: &Generator) -> bool {
    g.pacing.is_some() && g.saturated && g.schedule_lag_ms_p99 > LATE_MS
}

/// p99 schedule lag under which an open-model generator kept its schedule, ms.
const KEPT_MS: f64 = 1.0;

/// A merged run's generator warnings: every shard's own, prefixed with the shard; one for each
/// shard that limited the load (or one for all, when every shard did: then the machines were
/// the limit); one for the shards of the plan that are missing.
pub fn merged_warnings(
    summaries: &[&Summary],
    health: &[MergedShard],
    missing: &[usize],
    count: usize,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for s in summaries {
        let index = s.shard.as_ref().map_or(0, |x| x.index);
        for w in &s.generator.warnings {
            warnings.push(format!("shard {index}/{count}: {w}"));
        }
    }
    let late: Vec<&MergedShard> = health.iter().filter(|h| h.bottleneck).collect();
    if late.len() > 1 && late.len() == health.len() {
        warnings.push(format!(
            "every shard was late on its schedule (worst lag p99 {:.1} ms): the generators' \
             machines were the limit, not one shard; give them more CPU or use more shards",
            late.iter()
                .map(|h| h.schedule_lag_ms_p99)
                .fold(0.0, f64::max)
        ));
    } else {
        for h in late {
            warnings.push(format!(
                "shard {}/{count} was itself a bottleneck (schedule lag p99 {:.1} ms{}): its \
                 requests went out late, and their latency includes the generator's delay; give \
                 that generator more CPU or use more shards",
                h.index,
                h.schedule_lag_ms_p99,
                if h.saturated {
                    ", a thread saturated"
                } else {
                    ""
                }
            ));
        }
    }
    for s in summaries.iter().filter(|s| !s.complete) {
        let index = s.shard.as_ref().map_or(0, |x| x.index);
        warnings.push(format!(
            "shard {index}/{count} stopped before its end (Ctrl-C, or its pod was stopped) after \
             {:.1} s and {} request(s): it sent part of its share of the plan's load",
            s.duration_s, s.requests.sent
        ));
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "shards {missing:?} of {count} are missing: this is part of the plan's load, not all"
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::summary::Pacing;
    use loadlab_run::{Model, Plan, Stop, TlsSettings};

    #[test]
    fn only_an_open_model_generator_that_saturated_and_released_late_fell_behind_its_rate() {
        let g = |open: bool, saturated: bool, lag: f64| Generator {
            saturated,
            schedule_lag_ms_p99: lag,
            pacing: open.then(Pacing::default),
            ..Generator::default()
        };
        assert!(fell_behind_its_rate(&g(true, true, 12.0)));
        // Saturated, yet every arrival went out on time.
        assert!(!fell_behind_its_rate(&g(true, true, 0.4)));
        // Late without a saturated thread: the host, not the generator.
        assert!(!fell_behind_its_rate(&g(true, false, 12.0)));
        // A closed model sends as fast as it can.
        assert!(!fell_behind_its_rate(&g(false, true, 12.0)));
    }

    #[test]
    fn an_insecure_https_run_says_so_and_names_the_commonest_tls_failure() {
        let mut plan = Plan::get(
            "127.0.0.1:8443".parse().unwrap(),
            "/",
            Model::closed(1, 1),
            Stop::default(),
        );
        plan.endpoints[0].tls = Some("127.0.0.1".into());
        plan.tls = TlsSettings {
            cacert: None,
            insecure: true,
        };
        let mut run = RunData::from_intervals(plan, &[]);
        run.timings.tls_failures[TlsFailure::NameMismatch.index()] = 3;
        run.timings.tls_failures[TlsFailure::Expired.index()] = 1;
        let mut s = Summary::from_run(&run);
        judge_generator(&run, &mut s.generator);
        let tls = s.tls.expect("an https run has a tls section");
        assert!(!tls.verify);
        assert_eq!(tls.failures.get("name_mismatch"), Some(&3));
        assert_eq!(tls.failures.get("expired"), Some(&1));
        let w = s.generator.warnings.join("\n");
        assert!(w.contains("verification was off (--insecure)"), "{w}");
        assert!(w.contains("4 TLS handshake(s) failed"), "{w}");
        assert!(w.contains("not valid for the URL's host name"), "{w}");
    }

    #[test]
    fn a_busy_thread_and_a_late_schedule_are_named() {
        let plan = Plan::get(
            "127.0.0.1:80".parse().unwrap(),
            "/",
            Model::closed(1, 1),
            Stop::default(),
        );
        let mut run = RunData::from_intervals(plan, &[]);
        run.generator.busiest_thread_utilization = 0.95;
        let mut g = Generator {
            schedule_lag_ms_p99: 12.0,
            ..Generator::default()
        };
        judge_generator(&run, &mut g);
        assert!(g.saturated);
        let w = g.warnings.join("\n");
        assert!(w.contains("busy 95 % of the run"), "{w}");
        assert!(w.contains("up to 12.0 ms late"), "{w}");
        run.generator.busiest_thread_utilization = 0.5;
        let mut calm = Generator::default();
        judge_generator(&run, &mut calm);
        assert!(
            !calm.saturated && calm.warnings.is_empty(),
            "{:?}",
            calm.warnings
        );
    }
}
