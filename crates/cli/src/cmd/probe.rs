//! `loadlab probe URL`: closed-model steps at rising concurrency, then a verdict (async, sync
//! with K workers, or CPU-bound), the service time and the top throughput, with the steps as
//! evidence — what seed 000 did by hand with `ab -c 1..4`.

use std::time::{Duration, Instant};

use anyhow::Result;
use loadlab_analyze::probe::{next_step, verdict, Next, ProbeLimits, ProbeStep, Verdict};
use loadlab_engine::StopSignal;
use loadlab_run::{Model, Stop};
use serde::Serialize;

use crate::args::ProbeArgs;
use crate::cmd::Outcome;
use crate::lower::plan_for_url;
use crate::stepping::{drain, error_pct, run_step, server_cpu};

/// `--json`: the verdict, why the probe stopped, and its steps.
#[derive(Serialize)]
struct ProbeReport<'a> {
    url: &'a str,
    #[serde(flatten)]
    verdict: Option<&'a Verdict>,
    stopped_because: &'a str,
    steps: &'a [ProbeStep],
}

/// Runs `loadlab probe`.
pub fn main(a: ProbeArgs) -> Result<Outcome> {
    // Checks the URL before anything runs.
    plan_for_url(
        &a.url,
        Model::Closed {
            connections: 1,
            pipeline: 1,
        },
        Stop::default(),
        a.timeout,
        1,
    )?;
    let limits = ProbeLimits {
        max_concurrency: a.max_concurrency,
        max_time: a.max_time,
        max_latency_ms: a.max_latency.as_secs_f64() * 1000.0,
        ..ProbeLimits::default()
    };
    let stop = crate::cmd::run::interrupt_signal()?;
    println!(
        "loadlab probe {}: closed-model steps at rising concurrency (up to {} connections, {:.0} s)",
        a.url,
        limits.max_concurrency,
        limits.max_time.as_secs_f64()
    );
    let (steps, v, reason) = probe(&a.url, &limits, a.timeout, &a.watch_pid, &stop)?;
    if let Some(path) = &a.json {
        let report = ProbeReport {
            url: &a.url,
            verdict: v.as_ref(),
            stopped_because: &reason,
            steps: &steps,
        };
        crate::stepping::write_json(path, &report)?;
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}

/// Probes `url` step by step, printing each step and the verdict; returns the steps, the
/// verdict and why the probe stopped.
pub fn probe(
    url: &str,
    limits: &ProbeLimits,
    timeout: Duration,
    watch: &[i32],
    stop: &StopSignal,
) -> Result<(Vec<ProbeStep>, Option<Verdict>, String)> {
    let started = Instant::now();
    let mut steps: Vec<ProbeStep> = Vec::new();
    println!(
        "  {:>11}{:>12}{:>11}{:>11}{:>10}{:>10}",
        "connections", "req/s", "p50 ms", "p99 ms", "errors %", "cpu %"
    );
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
        let plan = plan_for_url(
            url,
            Model::Closed {
                connections: concurrency,
                pipeline: 1,
            },
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
        println!(
            "  {:>11}{:>12.1}{:>11.2}{:>11.2}{:>10.1}{:>10}",
            step.concurrency,
            step.throughput_rps,
            step.p50_ms,
            step.p99_ms,
            step.error_pct,
            step.server_cpu_pct
                .map_or("-".to_string(), |c| format!("{c:.0}"))
        );
        steps.push(step);
        if stop.is_stopped() {
            break "interrupted".to_string();
        }
    };
    let v = verdict(&steps);
    println!("  stopped: {reason}");
    match &v {
        Some(v) => {
            let workers = v
                .workers
                .map_or("no limit found".to_string(), |k| format!("{k} worker(s)"));
            println!(
                "\n  verdict      {:?}, {workers}, service time {:.1} ms, max {:.1} req/s",
                v.kind, v.service_time_ms, v.max_throughput_rps
            );
            println!("  why          {}", v.explanation);
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
                println!(
                    "  USL          σ = {:.3} (contention), κ = {:.5} (coherency): {peak}",
                    u.law.sigma, u.law.kappa
                );
            }
        }
        None => println!("\n  verdict      none: no step at one connection completed a request"),
    }
    Ok((steps, v, reason))
}
