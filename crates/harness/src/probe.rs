//! The probe as a job: closed-model steps at rising concurrency, each chosen by the analysis
//! from the steps so far, with the service drained between them.

use std::time::Instant;

use loadlab_analyze::probe::{
    next_open_rate, next_step, verdict, with_open_steps, Next, OpenStep, ProbeLimits, ProbeStep,
    Verdict,
};
use loadlab_engine::StopSignal;
use loadlab_input::UrlTarget;
use loadlab_run::{RunData, Summary};

use crate::steps::{closed_step, drain, open_step, usual_alone_ms};
use crate::Result;

/// What a probe found: its steps, the verdict, and why it stopped.
pub struct Probed {
    /// Every closed-loop step, in order.
    pub steps: Vec<ProbeStep>,
    /// The open-model steps run after a closed loop was refused, to read the rate limit's
    /// rate, in order.
    pub open_steps: Vec<OpenStep>,
    /// The verdict; `None` when no step completed a request.
    pub verdict: Option<Verdict>,
    /// Why the probe stopped.
    pub stopped_because: String,
    /// The run of the step with the highest throughput, and its summary (`None` without a
    /// step).
    pub best: Option<(RunData, Summary)>,
}

impl Probed {
    /// What the probe found against `url`, as `probe --json` and a lab cell's `probe.json`
    /// hold it.
    pub fn result(&self, url: &str) -> loadlab_run::lab::ProbeResult {
        loadlab_run::lab::ProbeResult {
            url: url.to_string(),
            verdict: self.verdict.clone(),
            stopped_because: self.stopped_because.clone(),
            steps: self.steps.clone(),
            open_steps: self.open_steps.clone(),
        }
    }
}

/// Most time the open-model steps after a closed loop's refusals may start within, on top of
/// the probe's `max_time` (which bounds the closed loop): five steps of 4 s and their drains.
const OPEN_TIME: std::time::Duration = std::time::Duration::from_secs(30);

/// Most connections an open-model step of the probe opens.
const MOST_OPEN_CONNECTIONS: usize = 10_000;

/// A probe's step, as it is measured.
pub enum Stepped<'a> {
    /// A closed-loop step at a concurrency.
    Closed(&'a ProbeStep),
    /// An open-model step, run to read a rate limit's rate.
    Open(&'a OpenStep),
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
/// `on_step` as soon as it is measured. A closed loop that was refused is followed by
/// open-model steps that read the limit's rate.
pub fn probe(
    target: &UrlTarget,
    limits: &ProbeLimits,
    watch: &crate::Watch,
    stop: &StopSignal,
    mut on_step: impl FnMut(Stepped),
) -> Result<Probed> {
    let started = Instant::now();
    let work = loadlab_input::Work::Request(target.clone());
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
        if let Some(step) = alone(&steps) {
            drain(&work, usual_alone_ms(step), stop)?;
        }
        let (step, run, summary) =
            closed_step(target, concurrency, (requests, duration), stop, watch)?;
        on_step(Stepped::Closed(&step));
        let higher = steps.iter().all(|s| s.throughput_rps < step.throughput_rps);
        if best.is_none() || higher {
            best = Some((run, summary));
        }
        steps.push(step);
        if stop.is_stopped() {
            break "interrupted".to_string();
        }
    };
    let closed = verdict(&steps);
    let mut open_steps: Vec<OpenStep> = Vec::new();
    if let Some(closed) = closed.as_ref().filter(|_| !stop.is_stopped()) {
        let alone = alone(&steps).cloned();
        let began = Instant::now();
        while let Some(rate) = next_open_rate(closed, &open_steps) {
            if began.elapsed() >= OPEN_TIME {
                break;
            }
            if let Some(step) = &alone {
                drain(&work, usual_alone_ms(step), stop)?;
            }
            // Connections for twice the requests a steady state at this rate keeps in flight
            // (λ·S), so a slow answered request does not make the step queue on the client.
            let in_flight = 2.0 * rate * alone.as_ref().map_or(0.0, |s| s.p50_ms) / 1000.0;
            let connections = limits
                .max_concurrency
                .max(in_flight.ceil() as usize)
                .min(MOST_OPEN_CONNECTIONS);
            let (step, _, _) = open_step(target, rate, connections, stop, watch)?;
            if stop.is_stopped() {
                break;
            }
            on_step(Stepped::Open(&step));
            open_steps.push(step);
        }
    }
    Ok(Probed {
        verdict: closed.map(|v| with_open_steps(v, &steps, &open_steps)),
        steps,
        open_steps,
        stopped_because: reason,
        best,
    })
}

/// The latest one-connection step that completed requests (a first step slower than its
/// length completed none): the queue-free times.
fn alone(steps: &[ProbeStep]) -> Option<&ProbeStep> {
    steps
        .iter()
        .rev()
        .find(|s| s.concurrency == 1 && s.requests > 0)
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
        println!("{}", step_line(&step));
    })?;
    let verdict = probed.verdict.as_ref();
    for line in
        loadlab_report::probe::verdict_lines(verdict, &probed.steps, &probed.stopped_because)
    {
        println!("{line}");
    }
    Ok(probed)
}

/// A step as a line of the probe's table.
pub fn step_line(step: &Stepped) -> String {
    match step {
        Stepped::Closed(s) => loadlab_report::probe::step_line(s),
        Stepped::Open(s) => loadlab_report::probe::open_step_line(s),
    }
}
