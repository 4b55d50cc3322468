//! The probe as a job: closed-model steps at rising concurrency, each chosen by the analysis
//! from the steps so far, with the service drained between them.

use std::time::Instant;

use loadlab_analyze::probe::{next_step, verdict, Next, ProbeLimits, ProbeStep, Verdict};
use loadlab_engine::StopSignal;
use loadlab_input::UrlTarget;
use loadlab_run::{RunData, Summary};

use crate::steps::{closed_step, drain};
use crate::Result;

/// What a probe found: its steps, the verdict, and why it stopped.
pub struct Probed {
    /// Every step, in order.
    pub steps: Vec<ProbeStep>,
    /// The verdict; `None` when no step completed a request.
    pub verdict: Option<Verdict>,
    /// Why the probe stopped.
    pub stopped_because: String,
    /// The run of the step with the highest throughput, and its summary (`None` without a
    /// step).
    pub best: Option<(RunData, Summary)>,
}

/// The bounds `flags` give a probe: `--max-time` for every service when given, else 60 s, or
/// 5 min for a service whose times vary widely.
pub fn limits_of(flags: &loadlab_input::ProbeFlags) -> ProbeLimits {
    let default = ProbeLimits::default();
    ProbeLimits {
        max_concurrency: flags.max_concurrency,
        // A time the user gave holds whatever the service's spread.
        max_time: flags.max_time.unwrap_or(default.max_time),
        max_time_varied: flags.max_time.unwrap_or(default.max_time_varied),
        max_latency_ms: flags.max_latency.as_secs_f64() * 1000.0,
        ..default
    }
}

/// Probes `target` step by step within `limits`, watching `watch`, and hands each step to
/// `on_step` as soon as it is measured.
pub fn probe(
    target: &UrlTarget,
    limits: &ProbeLimits,
    watch: &crate::Watch,
    stop: &StopSignal,
    mut on_step: impl FnMut(&ProbeStep),
) -> Result<Probed> {
    let started = Instant::now();
    let mut steps: Vec<ProbeStep> = Vec::new();
    let mut best: Option<(RunData, Summary)> = None;
    let reason = loop {
        let (concurrency, requests, duration) = match next_step(&steps, started.elapsed(), limits) {
            Next::Run {
                concurrency,
                requests,
                max_duration,
                ..
            } => (concurrency, requests, max_duration),
            Next::Stop(why) => break why,
        };
        // The queue-free time is the latest one-connection measure that completed requests
        // (a first step slower than its length completed none).
        if let Some(alone) = steps
            .iter()
            .rev()
            .find(|s| s.concurrency == 1 && s.requests > 0)
        {
            drain(target, alone.p50_ms, stop)?;
        }
        let (step, run, summary) =
            closed_step(target, concurrency, (requests, duration), stop, watch)?;
        on_step(&step);
        let higher = steps.iter().all(|s| s.throughput_rps < step.throughput_rps);
        if best.is_none() || higher {
            best = Some((run, summary));
        }
        steps.push(step);
        if stop.is_stopped() {
            break "interrupted".to_string();
        }
    };
    Ok(Probed {
        verdict: verdict(&steps),
        steps,
        stopped_because: reason,
        best,
    })
}

/// Probes `target` as [`probe`] does, printing the steps' table as they are measured and
/// then the verdict.
pub fn print_probe(
    target: &UrlTarget,
    limits: &ProbeLimits,
    watch: &crate::Watch,
    stop: &StopSignal,
) -> Result<Probed> {
    println!("{}", loadlab_report::probe::header());
    let probed = probe(target, limits, watch, stop, |step| {
        println!("{}", loadlab_report::probe::step_line(step));
    })?;
    let verdict = probed.verdict.as_ref();
    for line in
        loadlab_report::probe::verdict_lines(verdict, &probed.steps, &probed.stopped_because)
    {
        println!("{line}");
    }
    Ok(probed)
}
