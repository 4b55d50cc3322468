//! A rate limit read as a rate: after a closed loop was refused, open-model steps (requests
//! arriving one at a time at a constant rate) find the rate the service refuses past, and the
//! verdict says whether the closed loop's refusals came from that rate or from a burst.
//!
//! Why the closed loop is not enough: its c connections start together and, their requests
//! taking about the same time, come back together, so the limiter sees c requests at once
//! every S. A token bucket of rate R and burst B refuses them as soon as c > B even while
//! c / S is far under R (R = 100 req/s, B = 10, S = 228 ms: refusals from 11 connections, 48
//! req/s), and what the refused connections answer from then on is a mix of burst and rate
//! (it read 56.3 req/s there). Arrivals spread evenly are refused only past R.

use super::{by_concurrency, refusing, Kind, ProbeStep, Verdict, REFUSING};
use loadlab_run::lab::probe::{OpenStep, RateLimit};

/// Most open-model steps the probe runs to find a rate limit's rate: from twice what the
/// closed loop answered, each twice the last, so up to 32× that reading.
pub const OPEN_STEPS: usize = 5;

/// Share of the offered arrivals a step must answer or refuse to count as kept up with; a
/// step under it queued (the service's capacity is under its rate limit there).
const KEPT_UP: f64 = 0.9;

/// Share of the rate under which the closed loop's arrivals at its first refusal mean its
/// refusals were a burst's, not the rate's.
const UNDER_THE_RATE: f64 = 0.9;

/// True when at least [`REFUSING`] of an open step's requests were refused.
pub fn open_refusing(step: &OpenStep) -> bool {
    step.refused_rps > REFUSING * (step.answered_rps + step.refused_rps + step.failed_rps)
}

/// The next rate of the open-model steps after a closed loop whose verdict is `closed`, given
/// the open steps so far: twice what the closed loop answered, then twice the last, until one
/// is refused, one did not keep up with its arrivals, or [`OPEN_STEPS`] ran. `None` when done
/// (or when the verdict is not a rate limit).
pub fn next_open_rate(closed: &Verdict, open: &[OpenStep]) -> Option<f64> {
    if closed.kind != Kind::RateLimited {
        return None;
    }
    let Some(last) = open.last() else {
        return Some(2.0 * closed.max_throughput_rps.max(1.0));
    };
    if open_refusing(last) || open.len() >= OPEN_STEPS || !kept_up(last) {
        return None;
    }
    Some(2.0 * last.offered_rps)
}

/// True when an open step answered or refused (or failed) at least [`KEPT_UP`] of its
/// arrivals: it did not queue them.
fn kept_up(step: &OpenStep) -> bool {
    step.answered_rps + step.refused_rps + step.failed_rps >= KEPT_UP * step.offered_rps
}

/// The verdict on a rate-limited service once the open steps ran: the rate they were refused
/// past (the service's answers per second there), and whether the closed loop's refusals
/// (`steps`) came from a burst under it. Without an open step that was refused, the verdict
/// says what the closed loop alone can and cannot tell.
pub fn with_open_steps(closed: Verdict, steps: &[ProbeStep], open: &[OpenStep]) -> Verdict {
    if closed.kind != Kind::RateLimited {
        return closed;
    }
    let merged = by_concurrency(steps);
    let sorted: Vec<&ProbeStep> = merged.iter().filter(|s| s.requests > 0).collect();
    let Some(onset) = sorted.iter().find(|s| refusing(s)) else {
        return closed;
    };
    let closed_rps = closed.max_throughput_rps;
    let s_ms = closed.service_time_ms.max(1e-3);
    // What the closed loop offered when its refusals began: its connections, each once per
    // request's time alone.
    let onset_rps = onset.concurrency as f64 * 1000.0 / s_ms;
    let refused = open.iter().find(|s| open_refusing(s));
    let rate = refused.map(|s| s.answered_rps);
    let queued = open.last().filter(|s| refused.is_none() && !kept_up(s));
    let burst = match rate {
        Some(r) => (onset_rps < UNDER_THE_RATE * r).then_some(onset.concurrency),
        // No rate found up to the last step's, which kept up: refusals of requests that came
        // together, none of requests that came one at a time.
        None => (!open.is_empty() && queued.is_none()).then_some(onset.concurrency),
    };
    // The most connections run without refusals under the onset: the burst is at least that.
    let allowed = sorted
        .iter()
        .filter(|s| s.concurrency < onset.concurrency && !refusing(s))
        .map(|s| s.concurrency)
        .max();
    let burst_words = |from: usize| {
        let most = from.saturating_sub(1).max(1);
        let size = match allowed {
            Some(least) if least < most => format!("of {least} to {most} requests"),
            _ => format!("of about {most} request(s)"),
        };
        format!(
            "with connections in a closed loop it refused from {from} requests at once, at \
             {onset_rps:.1} req/s: a burst allowance {size}"
        )
    };
    let answered_ms = onset.p50_ms;
    let (max, explanation) = match (refused, burst) {
        (Some(step), Some(from)) => (
            step.answered_rps,
            format!(
                "rate-limited at about {:.1} req/s, read with requests arriving at a constant \
                 rate (offered {:.1} req/s it answered {:.1} and refused {:.1} a second); \
                 {}, under that rate (a closed loop alone read {closed_rps:.1} req/s, a mix of \
                 the two); the requests it answered took {answered_ms:.1} ms (median at {} \
                 connections, S = {s_ms:.1} ms alone)",
                step.answered_rps,
                step.offered_rps,
                step.answered_rps,
                step.refused_rps,
                burst_words(from),
                onset.concurrency
            ),
        ),
        (Some(step), None) => (
            step.answered_rps,
            format!(
                "rate-limited at about {:.1} req/s, read with requests arriving at a constant \
                 rate (offered {:.1} req/s it answered {:.1} and refused {:.1} a second), where \
                 a closed loop's refusals began too (from {} connections, {onset_rps:.1} req/s): \
                 429 past the rate, not past a burst; the requests it answered took \
                 {answered_ms:.1} ms (median at {} connections, S = {s_ms:.1} ms alone)",
                step.answered_rps,
                step.offered_rps,
                step.answered_rps,
                step.refused_rps,
                onset.concurrency,
                onset.concurrency
            ),
        ),
        (None, Some(from)) => {
            let top = open
                .iter()
                .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
                .expect("open steps ran");
            (
                top.answered_rps,
                format!(
                    "refuses requests that come together, not a rate within the rates tried: \
                     {}, but arriving one at a time at up to {:.1} req/s none were refused \
                     past {:.0} % (it answered {:.1} req/s); the requests it answered took \
                     {answered_ms:.1} ms (S = {s_ms:.1} ms alone)",
                    burst_words(from),
                    top.offered_rps,
                    100.0 * REFUSING,
                    top.answered_rps
                ),
            )
        }
        (None, None) => (
            closed_rps,
            match queued {
                Some(q) => format!(
                    "{}; read from a closed loop only, whose requests arrive together: it may \
                     be a burst allowance, not the rate, and requests arriving at a constant \
                     rate could not tell (offered {:.1} req/s, the service answered {:.1} and \
                     refused none: it queued them)",
                    closed.explanation, q.offered_rps, q.answered_rps
                ),
                None => format!(
                    "{}; read from a closed loop only, whose requests arrive together: it may \
                     be a burst allowance, not the rate (no open-model step ran)",
                    closed.explanation
                ),
            },
        ),
    };
    Verdict {
        max_throughput_rps: max,
        explanation,
        rate_limit: Some(RateLimit {
            rate_rps: rate,
            closed_rps,
            burst_refused_from: burst,
            burst_allowed: burst.and(allowed),
        }),
        ..closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_step(c: usize, answered: f64, refused: f64, p50: f64) -> ProbeStep {
        ProbeStep {
            concurrency: c,
            throughput_rps: answered,
            refused_rps: refused,
            p50_ms: p50,
            p99_ms: p50 * 1.1,
            mean_ms: p50,
            stdev_ms: 0.0,
            requests: 100,
            error_pct: 0.0,
            server_cpu_pct: None,
            server_cpu_wait_pct: None,
        }
    }

    fn open_step(offered: f64, answered: f64, refused: f64) -> OpenStep {
        OpenStep {
            offered_rps: offered,
            answered_rps: answered,
            refused_rps: refused,
            failed_rps: 0.0,
            p50_ms: 228.0,
            measured_s: 3.0,
        }
    }

    /// The token bucket: R = 100 req/s, burst 10, D = 228 ms. A closed loop is
    /// refused from 11 connections (48 req/s) and reads 56.3.
    fn bucket_steps() -> Vec<ProbeStep> {
        let mut steps: Vec<ProbeStep> = (1..=10)
            .map(|c| closed_step(c, c as f64 / 0.228, 0.0, 228.0))
            .collect();
        steps.push(closed_step(11, 56.0, 40.0, 228.0));
        steps.push(closed_step(12, 56.3, 60.0, 228.0));
        steps.push(closed_step(14, 57.0, 90.0, 228.0));
        steps
    }

    #[test]
    fn a_burst_under_the_rate_is_told_from_the_rate_read_in_the_open_model() {
        let steps = bucket_steps();
        let closed = super::super::verdict(&steps).unwrap();
        assert_eq!(closed.kind, Kind::RateLimited);
        let first = next_open_rate(&closed, &[]).unwrap();
        assert!((first - 2.0 * closed.max_throughput_rps).abs() < 1e-9);
        // Offered 112.6 it answered 100.3 and refused 12.3 a second: done.
        let open = vec![open_step(112.6, 100.3, 12.3)];
        assert_eq!(next_open_rate(&closed, &open), None);
        let v = with_open_steps(closed, &steps, &open);
        assert_eq!(v.kind, Kind::RateLimited);
        assert!((v.max_throughput_rps - 100.3).abs() < 1e-9);
        let limit = v.rate_limit.as_ref().unwrap();
        assert_eq!(limit.rate_rps, Some(100.3));
        assert_eq!(limit.burst_refused_from, Some(11));
        assert_eq!(limit.burst_allowed, Some(10));
        assert!(
            v.explanation
                .starts_with("rate-limited at about 100.3 req/s")
                && v.explanation
                    .contains("a burst allowance of about 10 request(s)"),
            "{}",
            v.explanation
        );
        // A burst of 25 between the ladder's 24 and 32 (requests of 500 ms: 32 at once are
        // 64 req/s, under the rate): a range, not a number.
        let mut wide: Vec<ProbeStep> = [1, 2, 4, 8, 12, 16, 20, 24]
            .iter()
            .map(|&c| closed_step(c, c as f64 / 0.5, 0.0, 500.0))
            .collect();
        for c in [32, 40, 48] {
            wide.push(closed_step(c, 60.0, 50.0, 500.0));
        }
        let closed = super::super::verdict(&wide).unwrap();
        let v = with_open_steps(closed, &wide, &[open_step(220.0, 100.0, 120.0)]);
        assert!(
            v.explanation
                .contains("a burst allowance of 24 to 31 requests"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn refusals_that_began_at_the_rate_are_a_rate_limit_with_no_burst_named() {
        // 150 req/s, burst 15, 20 ms: one connection answers 50 req/s, refusals from 4
        // connections (200 req/s offered, over the rate).
        let mut steps = vec![
            closed_step(1, 50.0, 0.0, 20.0),
            closed_step(2, 100.0, 0.0, 20.0),
            closed_step(3, 148.0, 0.0, 20.0),
        ];
        for c in [4, 5, 6] {
            steps.push(closed_step(c, 150.0, c as f64 * 50.0 - 150.0, 20.0));
        }
        let closed = super::super::verdict(&steps).unwrap();
        let open = vec![open_step(300.0, 150.2, 149.8)];
        let v = with_open_steps(closed, &steps, &open);
        let limit = v.rate_limit.as_ref().unwrap();
        assert_eq!(limit.burst_refused_from, None, "{}", v.explanation);
        assert!(
            v.explanation.contains("not past a burst"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn open_steps_double_until_refused_and_a_limit_they_never_meet_is_a_burst_only() {
        let steps = bucket_steps();
        let closed = super::super::verdict(&steps).unwrap();
        let mut open = Vec::new();
        while let Some(rate) = next_open_rate(&closed, &open) {
            // No rate limit at all: every arrival answered.
            open.push(open_step(rate, rate, 0.0));
            assert!(open.len() <= OPEN_STEPS);
        }
        assert_eq!(open.len(), OPEN_STEPS);
        let v = with_open_steps(closed.clone(), &steps, &open);
        assert_eq!(v.rate_limit.as_ref().unwrap().rate_rps, None);
        assert!(
            v.explanation
                .starts_with("refuses requests that come together"),
            "{}",
            v.explanation
        );
        // A step that did not keep up (the service queued under its limit) ends the steps,
        // and names no burst: the open model could not tell.
        let queued = vec![open_step(112.6, 80.0, 0.0)];
        assert_eq!(next_open_rate(&closed, &queued), None);
        let v = with_open_steps(closed.clone(), &steps, &queued);
        assert_eq!(v.rate_limit.as_ref().unwrap().burst_refused_from, None);
        assert!(
            v.explanation.contains("it queued them"),
            "{}",
            v.explanation
        );
        assert!((v.max_throughput_rps - closed.max_throughput_rps).abs() < 1e-9);
        // Without an open step, the closed reading stands, with what it cannot tell.
        let v = with_open_steps(closed, &steps, &[]);
        assert!(
            v.explanation.contains("may be a burst allowance"),
            "{}",
            v.explanation
        );
        assert_eq!(v.rate_limit.unwrap().burst_refused_from, None);
    }
}
