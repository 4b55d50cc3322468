//! The probe as a job: closed-model steps at rising concurrency, each chosen by the analysis
//! from the steps so far, with the service drained between them.

use std::time::{Duration, Instant};

use loadlab_analyze::probe::{next_step, verdict, Next, ProbeLimits, ProbeStep, Verdict};
use loadlab_engine::StopSignal;
use loadlab_run::{Model, Stop};

use crate::steps::{drain, error_pct, run_step, server_cpu};
use crate::Result;

/// What a probe found: its steps, the verdict, and why it stopped.
pub struct Probed {
    /// Every step, in order.
    pub steps: Vec<ProbeStep>,
    /// The verdict; `None` when no step completed a request.
    pub verdict: Option<Verdict>,
    /// Why the probe stopped.
    pub stopped_because: String,
}

/// Probes `url` step by step within `limits`, watching `watch`, and hands each step to
/// `on_step` as soon as it is measured.
pub fn probe(
    url: &str,
    limits: &ProbeLimits,
    timeout: Duration,
    watch: &[i32],
    stop: &StopSignal,
    mut on_step: impl FnMut(&ProbeStep),
) -> Result<Probed> {
    let started = Instant::now();
    let mut steps: Vec<ProbeStep> = Vec::new();
    let reason = loop {
        let (concurrency, duration) = match next_step(&steps, started.elapsed(), limits) {
            Next::Run {
                concurrency,
                duration,
            } => (concurrency, duration),
            Next::Stop(why) => break why,
        };
        if let Some(first) = steps.first() {
            drain(url, first.p50_ms, timeout, stop)?;
        }
        let plan = loadlab_input::lower::url(
            url,
            Model::closed(concurrency, 1),
            Stop {
                duration: Some(duration),
                count: None,
            },
            timeout,
            1,
        )?;
        let (_, s) = run_step(&plan, stop, watch)?;
        // Little's law in a closed loop without think time: X = c / R, exact even when a
        // slow service completes only a few requests in the step.
        let throughput = if s.latency_ms.mean > 0.0 {
            concurrency as f64 * 1000.0 / s.latency_ms.mean
        } else {
            s.throughput.rps
        };
        let step = ProbeStep {
            concurrency,
            throughput_rps: throughput,
            p50_ms: s.latency_ms.p50,
            p99_ms: s.latency_ms.p99,
            mean_ms: s.latency_ms.mean,
            requests: s.requests.completed,
            error_pct: error_pct(&s),
            server_cpu_pct: server_cpu(&s),
        };
        on_step(&step);
        steps.push(step);
        if stop.is_stopped() {
            break "interrupted".to_string();
        }
    };
    Ok(Probed {
        verdict: verdict(&steps),
        steps,
        stopped_because: reason,
    })
}

/// Probes `url` as [`probe`] does, printing the steps' table as they are measured and then
/// the verdict.
pub fn print_probe(
    url: &str,
    limits: &ProbeLimits,
    timeout: Duration,
    watch: &[i32],
    stop: &StopSignal,
) -> Result<Probed> {
    println!("{}", loadlab_report::probe::header());
    let probed = probe(url, limits, timeout, watch, stop, |step| {
        println!("{}", loadlab_report::probe::step_line(step));
    })?;
    let verdict = probed.verdict.as_ref();
    for line in loadlab_report::probe::verdict_lines(verdict, &probed.stopped_because) {
        println!("{line}");
    }
    Ok(probed)
}
