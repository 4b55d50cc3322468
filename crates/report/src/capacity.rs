//! The capacity search's terminal lines: the climb's plateau, the rates' table, and the
//! capacity found in words.

use loadlab_analyze::capacity::{best_step, bracket, first_rate, held_by, RateStep};
use loadlab_analyze::Slo;
use loadlab_run::lab::WorkUnit;

/// The plateau the closed-loop climb found at `rps`, with up to `connections` connections in
/// `seconds`, and the first rate the steps try; a climb that was not `levelled` (its time or
/// connections ran out while throughput grew) says `rps` is a lower bound.
pub fn plateau_line(rps: f64, connections: usize, seconds: f64, levelled: bool) -> String {
    let first = first_rate(rps);
    if levelled {
        format!(
            "  plateau      {rps:.1} req/s in a closed loop of up to {connections} connections \
             ({seconds:.0} s): the steps start a little under it, at {first:.1}"
        )
    } else {
        format!(
            "  climb        {rps:.1} req/s and still rising at {connections} connections when \
             the climb stopped ({seconds:.0} s, a third of --max-time, up to \
             --max-connections): the steps start at {first:.1} and double while they meet"
        )
    }
}

/// The header of the rates' table.
pub fn header() -> String {
    format!(
        "  {:>10}{:>11}{:>10}{:>10}{:>10}  verdict",
        "rate/s", "served/s", "p50 ms", "p99 ms", "errors %"
    )
}

/// One rate step as a line of the table, with its verdict.
pub fn step_line(step: &RateStep) -> String {
    format!(
        "  {:>10.1}{:>11.1}{:>10.2}{:>10.2}{:>10.2}  {}",
        step.rate_rps,
        step.served_rps,
        step.p50_ms,
        step.p99_ms,
        step.error_pct,
        if step.meets {
            "meets".to_string()
        } else {
            format!("breaks: {}", step.broken.join("; "))
        }
    )
}

/// Why the search stopped, then the capacity against `slo`: the highest rate of `unit` that
/// met it with its latency and where it broke, or that none met it, as lines.
pub fn result_lines(
    steps: &[RateStep],
    slo: &Slo,
    stopped_because: &str,
    unit: WorkUnit,
) -> Vec<String> {
    let per_s = unit.per_second();
    let (lo, hi) = bracket(steps);
    let at_lo = best_step(steps).map(|i| &steps[i]);
    let capacity = match (lo, hi) {
        (Some(lo), _) => format!(
            "\n  capacity     {lo:.1} {per_s} meet {slo} (p50 {:.2} ms, p99 {:.2} ms){}",
            at_lo.map_or(0.0, |s| s.p50_ms),
            at_lo.map_or(0.0, |s| s.p99_ms),
            hi.map_or(String::new(), |h| format!("; it broke at {h:.1} {per_s}")),
        ),
        // A rate that met on its own step but is over what an overloaded step served: the
        // capacity is under that throughput, not none (the search ran out before a rate there).
        (None, Some(hi)) => match steps.iter().find_map(|s| held_by(steps, s).map(|h| (s, h))) {
            Some((s, (served, at))) => format!(
                "\n  capacity     under {served:.1} {per_s}: {:.1} {per_s} met {slo} on its own step, \
                 but offered {at:.1} the service served {served:.1}, and no rate under that was \
                 measured; search again with more --max-time, or with --start {:.1}",
                s.rate_rps,
                0.95 * served
            ),
            None => format!("\n  capacity     none: even {hi:.1} {per_s} broke {slo}"),
        },
        (None, None) => match steps.last() {
            Some(s) if s.undersampled => format!(
                "\n  capacity     unknown: no rate met {slo} with the samples it could take (at \
                 {:.1} {per_s} the step held {} requests)",
                s.rate_rps, s.requests
            ),
            _ => "\n  capacity     unknown: no rate was measured".to_string(),
        },
    };
    let mut lines = vec![format!("  stopped: {stopped_because}"), capacity];
    // A rate limiter: the steps it refused a share of, and what it answered there.
    let limited: Vec<&RateStep> = steps.iter().filter(|s| s.refused_pct >= 5.0).collect();
    if let Some(lowest) = limited.iter().map(|s| s.rate_rps).reduce(f64::min) {
        let answered = limited
            .iter()
            .map(|s| s.requests as f64 * (1.0 - s.refused_pct / 100.0) / s.measured_s)
            .fold(0.0, f64::max);
        lines.push(format!(
            "  limit        a rate limit: from {lowest:.1} {per_s} on the service refused requests \
             (429, or 503 with Retry-After) and answered at most {answered:.1} req/s"
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_analyze::capacity::hold_to_overloads;

    fn step(rate: f64, meets: bool) -> RateStep {
        RateStep {
            rate_rps: rate,
            achieved_rps: rate,
            arrived_rps: rate,
            served_rps: rate,
            p50_ms: 1.5,
            p99_ms: 4.25,
            error_pct: 0.0,
            refused_pct: 0.0,
            warmup_s: 2.0,
            measured_s: 5.0,
            requests: (rate * 5.0) as u64,
            meets,
            undersampled: false,
            broken: if meets {
                Vec::new()
            } else {
                vec!["p99 9.0 ms > 5 ms".into()]
            },
        }
    }

    #[test]
    fn the_capacity_is_the_highest_passing_rate_below_the_lowest_failing_one() {
        let slo = Slo::parse("p99<5ms").unwrap();
        let steps = [step(100.0, true), step(200.0, false), step(141.4, true)];
        assert_eq!(
            result_lines(&steps, &slo, "bracketed within the tolerance", WorkUnit::Request),
            [
                "  stopped: bracketed within the tolerance",
                "\n  capacity     141.4 req/s meet p99<5ms (p50 1.50 ms, p99 4.25 ms); it broke at 200.0 req/s",
            ]
        );
        assert_eq!(
            result_lines(&steps[1..2], &slo, "interrupted", WorkUnit::Request)[1],
            "\n  capacity     none: even 200.0 req/s broke p99<5ms"
        );
        assert!(step_line(&steps[1]).ends_with("  breaks: p99 9.0 ms > 5 ms"));
        // A script's search counts users' sessions.
        assert_eq!(
            result_lines(&steps, &slo, "bracketed", WorkUnit::Session)[1],
            "\n  capacity     141.4 sessions/s meet p99<5ms (p50 1.50 ms, p99 4.25 ms); it broke \
             at 200.0 sessions/s",
        );
    }

    #[test]
    fn a_rate_limit_reads_the_requests_it_answered_whatever_the_unit() {
        let slo = Slo::parse("p99<5ms").unwrap();
        // 10 sessions a second of 4 requests each, for 5 s: 200 requests, a quarter refused.
        let mut limited = step(10.0, false);
        limited.refused_pct = 25.0;
        limited.requests = 200;
        let lines = result_lines(&[limited], &slo, "no rate met", WorkUnit::Session);
        assert_eq!(
            lines[2],
            "  limit        a rate limit: from 10.0 sessions/s on the service refused requests \
             (429, or 503 with Retry-After) and answered at most 30.0 req/s"
        );
    }

    #[test]
    fn a_rate_that_met_on_its_own_step_but_was_held_gives_a_bound_not_none() {
        // Seed 000's short variant on a busy machine: 67.8 req/s met, then offered 82.9 the
        // pool served 58.9, and the search's time ran out before a rate under 58.9.
        let slo = Slo::parse("p99<5ms").unwrap();
        let mut steps = vec![step(67.8, true), step(82.9, false)];
        steps[1].served_rps = 58.9;
        steps[1].arrived_rps = 82.9;
        hold_to_overloads(&mut steps, WorkUnit::Request);
        assert!(!steps[0].meets, "{steps:?}");
        let lines = result_lines(
            &steps,
            &slo,
            "the search's time (12 s) is up",
            WorkUnit::Request,
        );
        assert_eq!(
            lines[1],
            "\n  capacity     under 58.9 req/s: 67.8 req/s met p99<5ms on its own step, but \
             offered 82.9 the service served 58.9, and no rate under that was measured; search \
             again with more --max-time, or with --start 56.0"
        );
    }

    #[test]
    fn a_search_whose_steps_could_not_bound_the_percentile_finds_no_capacity() {
        // 13 req/s for 5 s: 65 requests, where a 95 % bound on p99 needs 299.
        let slo = Slo::parse("p99<5ms").unwrap();
        let mut short = step(13.0, false);
        short.undersampled = true;
        let lines = result_lines(
            &[short],
            &slo,
            "no rate met the objective",
            WorkUnit::Request,
        );
        assert_eq!(
            lines[1],
            "\n  capacity     unknown: no rate met p99<5ms with the samples it could take (at 13.0 \
             req/s the step held 65 requests)"
        );
    }
}
