//! The probe's terminal table: a header, one line per step, and the verdict in words.

use loadlab_analyze::probe::{ProbeStep, Verdict};

/// The header of the steps' table.
pub fn header() -> String {
    format!(
        "  {:>11}{:>12}{:>11}{:>11}{:>10}{:>10}",
        "connections", "req/s", "p50 ms", "p99 ms", "errors %", "cpu %"
    )
}

/// One step as a line of the table.
pub fn step_line(step: &ProbeStep) -> String {
    format!(
        "  {:>11}{:>12.1}{:>11.2}{:>11.2}{:>10.1}{:>10}",
        step.concurrency,
        step.throughput_rps,
        step.p50_ms,
        step.p99_ms,
        step.error_pct,
        step.server_cpu_pct
            .map_or("-".to_string(), |c| format!("{c:.0}"))
    )
}

/// Why the probe stopped, then the verdict, its reason and the USL fit, as lines.
pub fn verdict_lines(verdict: Option<&Verdict>, stopped_because: &str) -> Vec<String> {
    let mut lines = vec![format!("  stopped: {stopped_because}")];
    let Some(v) = verdict else {
        lines.push("\n  verdict      none: no step at one connection completed a request".into());
        return lines;
    };
    let workers = v
        .workers
        .map_or("no limit found".to_string(), |k| format!("{k} worker(s)"));
    lines.push(format!(
        "\n  verdict      {:?}, {workers}, service time {:.1} ms, max {:.1} req/s",
        v.kind, v.service_time_ms, v.max_throughput_rps
    ));
    lines.push(format!("  why          {}", v.explanation));
    if let Some(u) = &v.usl {
        let peak = u.peak_concurrency.map_or(
            format!(
                "no peak (throughput levels off towards {:.1} req/s)",
                u.peak_throughput_rps
            ),
            |n| {
                format!(
                    "peak at {n:.1} connections, {:.1} req/s",
                    u.peak_throughput_rps
                )
            },
        );
        lines.push(format!(
            "  USL          σ = {:.3} (contention), κ = {:.5} (coherency): {peak}",
            u.law.sigma, u.law.kappa
        ));
    }
    lines
}
