//! Why load models disagree on one target (seed 003's 10,000 / 8,500 / 5,800 req/s): each
//! run's throughput explained by what it kept in flight (Little's law, N = X·R) and by whether
//! it offered more than the service served.

use loadlab_run::Summary;

/// Throughputs further apart than this (the highest over the lowest) need explaining.
const DISAGREE: f64 = 1.10;

/// More requests in flight that raised throughput by less than this (the latency at least
/// doubling) mostly queued: the service was at or near its capacity.
const MOSTLY_QUEUED: f64 = 1.5;

/// An open-model run that served less than this share of what it offered was saturated.
const SERVED_SHARE: f64 = 0.95;

/// One sentence on why runs of the same target under different load models (`(name,
/// summary)` pairs) measured different throughputs; `None` when there are fewer than two, they
/// agree within 10 %, or all are open-model runs (a sweep of offered rates).
pub fn disagreement_line(target: &str, runs: &[(&str, &Summary)]) -> Option<String> {
    let rps: Vec<f64> = runs.iter().map(|(_, s)| s.throughput.rps).collect();
    let high = rps.iter().copied().fold(0.0, f64::max);
    let low = rps.iter().copied().fold(f64::INFINITY, f64::min);
    // Open-model runs alone are a sweep of offered rates, not load models that disagree.
    let all_open = runs.iter().all(|(_, s)| s.throughput.offered_rps.is_some());
    if runs.len() < 2 || low <= 0.0 || high / low < DISAGREE || all_open {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    let mut closed: Vec<(&str, f64, f64, f64)> = Vec::new();
    for (name, s) in runs {
        let x = s.throughput.rps;
        let r = s.latency_ms.mean;
        let in_flight = x * r / 1000.0;
        match s.throughput.offered_rps {
            Some(offered) if x < SERVED_SHARE * offered => parts.push(format!(
                "{name} offered {offered:.0} req/s and got {x:.0} (saturated: its queue grew, \
                 {r:.0} ms mean from the intended start)"
            )),
            Some(offered) => parts.push(format!(
                "{name} got the {offered:.0} req/s it offered at {r:.1} ms: a latency at that \
                 rate, not a capacity"
            )),
            None => {
                parts.push(format!(
                    "{name} {x:.0} req/s = {in_flight:.0} in flight / {r:.1} ms"
                ));
                closed.push((name, x, in_flight, r));
            }
        }
    }
    closed.sort_by(|a, b| a.2.total_cmp(&b.2));
    if let (Some(&(lo_name, lo_x, lo_n, lo_r)), Some(&(hi_name, hi_x, hi_n, hi_r))) =
        (closed.first(), closed.last())
    {
        if closed.len() >= 2 && lo_x > 0.0 && lo_r > 0.0 && lo_n > 0.0 {
            let (gain, more, slower) = (hi_x / lo_x, hi_n / lo_n, hi_r / lo_r);
            parts.push(if gain < MOSTLY_QUEUED && slower >= 2.0 {
                let best = closed.iter().map(|c| c.1).fold(0.0, f64::max);
                format!(
                    "{hi_name} kept {more:.1}× the requests in flight of {lo_name} for ×{gain:.2} \
                     the throughput at ×{slower:.1} the latency: the service was at or near its \
                     capacity, ~{best:.0} req/s, and the extra requests mostly queued"
                )
            } else if gain * DISAGREE <= 1.0 {
                // More in flight for less throughput: each request of the other took less of
                // the service (a different page, a cheaper variant), which no load model explains.
                format!(
                    "{lo_name} got ×{:.2} the throughput of {hi_name} with ×{:.2} the requests \
                     in flight, each answered in ×{:.2} the time: the two asked the service for \
                     different work, which their load models do not explain",
                    1.0 / gain,
                    lo_n / hi_n,
                    lo_r / hi_r
                )
            } else if gain >= DISAGREE {
                format!(
                    "{hi_name} kept {more:.1}× the requests in flight of {lo_name} and got \
                     ×{gain:.2} the throughput (at ×{slower:.1} the latency): {lo_name} had \
                     not saturated the service"
                )
            } else {
                format!(
                    "{hi_name} and {lo_name} got about the same throughput at about the same \
                     latency"
                )
            });
        }
    }
    Some(format!(
        "{target}: the load models disagree ({high:.0} vs {low:.0} req/s): {}; each measured \
         its own load model (throughput = requests in flight / latency, Little's law), and a \
         service's capacity is a throughput at a stated latency (`loadlab capacity URL --slo \
         'p99<…'`)",
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use loadlab_run::summary::{LatencyStats, Throughput};

    use super::*;

    fn summary(rps: f64, offered: Option<f64>, mean_ms: f64) -> Summary {
        Summary {
            throughput: Throughput {
                rps,
                offered_rps: offered,
                ..Throughput::default()
            },
            latency_ms: LatencyStats {
                mean: mean_ms,
                ..LatencyStats::default()
            },
            ..Summary::default()
        }
    }

    #[test]
    fn seed_003s_three_tools_are_explained_by_what_they_kept_in_flight() {
        let pipelined = summary(10_000.0, None, 100.0);
        let open = summary(8_500.0, Some(20_000.0), 2_500.0);
        let plain = summary(5_800.0, None, 17.2);
        let line = disagreement_line(
            "1 instance",
            &[
                ("closed c100 p10", &pipelined),
                ("open 20000/s", &open),
                ("closed c100", &plain),
            ],
        )
        .unwrap();
        assert!(
            line.contains("closed c100 p10 10000 req/s = 1000 in flight / 100.0 ms"),
            "{line}"
        );
        assert!(
            line.contains("open 20000/s offered 20000 req/s and got 8500 (saturated"),
            "{line}"
        );
        assert!(
            line.contains("closed c100 5800 req/s = 100 in flight / 17.2 ms"),
            "{line}"
        );
        assert!(
            line.contains(
                "closed c100 p10 kept 10.0× the requests in flight of closed c100 and got ×1.72 \
                 the throughput (at ×5.8 the latency)"
            ),
            "{line}"
        );
        // More in flight for no more throughput: saturated.
        let queued = summary(5_900.0, None, 170.0);
        let open_met = summary(2_000.0, Some(2_000.0), 1.0);
        let line = disagreement_line(
            "y",
            &[
                ("c1000", &queued),
                ("c100", &plain),
                ("open 2000/s", &open_met),
            ],
        )
        .unwrap();
        assert!(
            line.contains(
                "at or near its capacity, ~5900 req/s, and the extra requests mostly queued"
            ),
            "{line}"
        );
        assert!(
            line.contains("open 2000/s got the 2000 req/s it offered at 1.0 ms"),
            "{line}"
        );
        let agree = summary(9_500.0, None, 99.0);
        assert!(disagreement_line("x", &[("a", &pipelined), ("b", &agree)]).is_none());
        assert!(disagreement_line("x", &[("a", &pipelined)]).is_none());
        let sweep = [
            summary(50.0, Some(50.0), 1.0),
            summary(600.0, Some(600.0), 1.0),
        ];
        assert!(disagreement_line("x", &[("a", &sweep[0]), ("b", &sweep[1])]).is_none());
    }

    #[test]
    fn the_same_users_asking_for_cheaper_work_are_not_read_as_the_same_throughput() {
        // A lab's users and the same users on pages half of whose CPU became a sleep: 6 in
        // flight each, 16 against 26 req/s (it read "about the same throughput at about the
        // same latency").
        let busy = summary(16.0, None, 397.6);
        let half = summary(26.4, None, 227.0);
        let line = disagreement_line("x", &[("site users", &busy), ("half sleep", &half)]).unwrap();
        assert!(
            line.contains(
                "half sleep got ×1.65 the throughput of site users with ×0.94 the requests in \
                 flight, each answered in ×0.57 the time: the two asked the service for \
                 different work"
            ),
            "{line}"
        );
        assert!(!line.contains("about the same"), "{line}");
    }
}
