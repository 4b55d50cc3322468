//! The probe's terminal table: a header, one line per step, and the verdict in words.

use loadlab_analyze::probe::{OpenStep, ProbeStep, UslFit, Verdict};

/// The header of the steps' table.
pub fn header() -> String {
    format!(
        "  {:>11}{:>12}{:>11}{:>11}{:>10}{:>11}{:>10}",
        "connections", "req/s", "p50 ms", "p99 ms", "errors %", "refused/s", "cpu %"
    )
}

/// One step as a line of the table.
pub fn step_line(step: &ProbeStep) -> String {
    format!(
        "  {:>11}{:>12.1}{:>11.2}{:>11.2}{:>10.1}{:>11.1}{:>10}",
        step.concurrency,
        step.throughput_rps,
        step.p50_ms,
        step.p99_ms,
        step.error_pct,
        step.refused_rps,
        step.server_cpu_pct
            .map_or("-".to_string(), |c| format!("{c:.0}"))
    )
}

/// An open-model step as a line of the same table: its offered rate where the connections
/// go, what it answered and refused per second, its median.
pub fn open_step_line(step: &OpenStep) -> String {
    let total = step.answered_rps + step.refused_rps + step.failed_rps;
    let failed_pct = if total > 0.0 {
        100.0 * step.failed_rps / total
    } else {
        0.0
    };
    format!(
        "  {:>11}{:>12.1}{:>11.2}{:>11}{:>10.1}{:>11.1}{:>10}",
        format!("{:.0}/s open", step.offered_rps),
        step.answered_rps,
        step.p50_ms,
        "-",
        failed_pct,
        step.refused_rps,
        "-"
    )
}

/// Why the probe stopped, then the verdict, its reason, and the hard limit or the USL fit, as
/// lines; `steps` are the probe's steps.
pub fn verdict_lines(
    verdict: Option<&Verdict>,
    steps: &[ProbeStep],
    stopped_because: &str,
) -> Vec<String> {
    let mut lines = vec![format!("  stopped: {stopped_because}")];
    let Some(v) = verdict else {
        lines.push("\n  verdict      none: no step at one connection completed a request".into());
        return lines;
    };
    let workers = match (v.workers, v.workers_observed) {
        (Some(k), true) => format!("{k} worker(s)"),
        (Some(k), false) => {
            let range = match v.workers_range {
                Some([lo, hi]) if hi >= max_concurrency(steps) => format!(", {lo} or more"),
                Some([lo, hi]) => format!(", {lo}–{hi} as likely"),
                None => String::new(),
            };
            format!(
                "about {k} worker(s) (the knee of the mean latency{range}; p99 did not jump \
                 right after it)"
            )
        }
        (None, _) if v.kind == loadlab_analyze::probe::Kind::RateLimited => {
            "429 beyond the rate".to_string()
        }
        (None, _) if v.kind == loadlab_analyze::probe::Kind::Contended => {
            "no worker limit, throughput falls past its peak".to_string()
        }
        (None, _) if v.kind == loadlab_analyze::probe::Kind::Unclassified => {
            "no model explains the steps".to_string()
        }
        (None, _) => "no limit found".to_string(),
    };
    let rate = if v.workers.is_some() {
        "plateau"
    } else if v.kind == loadlab_analyze::probe::Kind::RateLimited {
        "answered"
    } else if v.kind == loadlab_analyze::probe::Kind::Contended {
        "peak"
    } else {
        "max"
    };
    lines.push(format!(
        "\n  verdict      {:?}, {workers}, service time {:.1} ms{}, {rate} {:.1} req/s",
        v.kind,
        v.service_time_ms,
        v.service_time_ci_ms
            .map_or(String::new(), |[lo, hi]| format!(" ({lo:.1}–{hi:.1})")),
        v.max_throughput_rps
    ));
    lines.push(format!("  why          {}", v.explanation));
    if v.kind == loadlab_analyze::probe::Kind::RateLimited {
        let burst = v.rate_limit.as_ref().map_or(String::new(), |l| {
            match (l.burst_allowed, l.burst_refused_from) {
                (Some(least), Some(from)) if least + 1 < from => format!(
                    "; 429 past {least} to {} requests at once, a burst",
                    from - 1
                ),
                (_, Some(from)) => format!(
                    "; 429 past about {} request(s) at once, a burst",
                    from.saturating_sub(1).max(1)
                ),
                _ => String::new(),
            }
        });
        lines.push(format!(
            "  limit        a rate limit, not a pool: more connections get refusals, not \
             throughput; the USL does not apply{burst}"
        ));
    } else if let (true, Some(k)) = (v.hard_limit, v.workers) {
        lines.push(format!(
            "  limit        hard limit at {k}: throughput flat at {:.1} req/s from {k} connections \
             on (a cap, not the gradual slowdown the USL describes)",
            v.max_throughput_rps
        ));
    } else if let Some(u) = &v.usl {
        lines.push(usl_line(u, max_concurrency(steps)));
    }
    lines
}

/// The USL's line: its parameters, how well it fits, and its peak — or that it does not
/// explain the steps.
fn usl_line(u: &UslFit, tried: usize) -> String {
    if let Some(why) = &u.set_aside {
        return format!(
            "  USL          σ = {:.3}, κ = {:.5}, R² = {:.3}, set aside: {why}",
            u.law.sigma, u.law.kappa, u.r_squared
        );
    }
    if !u.explains {
        return format!(
            "  USL          does not explain these steps (R² = {:.2}): no scalability prediction",
            u.r_squared
        );
    }
    let peak = match (u.peak_concurrency, u.peak_throughput_rps) {
        (_, None) => "no peak (throughput grows in proportion to the connections)".to_string(),
        (None, Some(x)) => format!("no peak (throughput levels off towards {x:.1} req/s)"),
        (Some(n), Some(x)) if n > tried as f64 => format!(
            "peak at {n:.1} connections, {x:.1} req/s (beyond the {tried} tried: an extrapolation)"
        ),
        (Some(n), Some(x)) => format!("peak at {n:.1} connections, {x:.1} req/s"),
    };
    format!(
        "  USL          σ = {:.3} (contention), κ = {:.5} (coherency), R² = {:.3}: {peak}",
        u.law.sigma, u.law.kappa, u.r_squared
    )
}

fn max_concurrency(steps: &[ProbeStep]) -> usize {
    steps.iter().map(|s| s.concurrency).max().unwrap_or(0)
}
