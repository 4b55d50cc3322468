//! `loadlab capacity URL --slo …`: the highest constant arrival rate whose steady state meets
//! the objective. A quick closed-loop climb finds the service's plateau, the first rate tried;
//! each rate runs as one open-model run of two phases — a warm-up, discarded and reported,
//! then the measured part — bracketed, then bisected.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use loadlab_analyze::capacity::{
    bracket, judge, next_rate, plateau_rps, plateau_step, RateStep, Search, Window,
};
use loadlab_analyze::probe::{Next, ProbeStep};
use loadlab_analyze::Slo;
use loadlab_input::UrlTarget;
use loadlab_run::{Model, RatePhase, Stop};
use serde::Serialize;

use loadlab_harness::steps::{closed_step, drain, one_request_ms, run_step};

use crate::args::CapacityArgs;
use crate::cmd::Outcome;

/// `--json`: the rate found, the objective, where it broke, and every step.
#[derive(Serialize)]
struct CapacityReport<'a> {
    url: &'a str,
    max_rate_rps: Option<f64>,
    /// Throughput of the closed-loop climb, the first rate tried (absent with `--start`).
    plateau_rps: Option<f64>,
    slo: &'a Slo,
    broke_at_rps: Option<f64>,
    /// Latency at the highest passing rate.
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    stopped_because: &'a str,
    steps: &'a [RateStep],
}

/// Runs `loadlab capacity`.
pub fn main(a: CapacityArgs) -> Result<Outcome> {
    let slo = Slo::parse(&a.slo)?;
    if !(a.tolerance > 0.0 && a.tolerance < 1.0) {
        bail!("--tolerance must be between 0 and 1, such as 0.05");
    }
    // Results are kept per whole second, so phases must fall on seconds.
    if a.warmup.subsec_nanos() != 0 || a.step.subsec_nanos() != 0 {
        bail!("--warmup and --step are whole seconds, such as 2s and 5s");
    }
    let target = UrlTarget::new(&a.url, a.timeout, &a.reach)?;
    let stop = loadlab_harness::interrupt_signal()?;
    let started = Instant::now();
    let base_ms = one_request_ms(&target, &stop)?
        .with_context(|| format!("{} did not answer one request with a success; check the URL and that the service is up", a.url))?;
    println!(
        "loadlab capacity {}: SLO {} (warm-up {:?} discarded, {:?} measured per rate)",
        a.url, slo, a.warmup, a.step
    );
    let plateau = match a.start {
        Some(_) => None,
        None => climb_to_plateau(&a, &target, base_ms, &stop)?,
    };
    // Without a plateau (the climb failed at once), one connection's rate: any service serves
    // that much.
    let start = a
        .start
        .or(plateau)
        .unwrap_or(1000.0 / base_ms.max(0.01))
        .min(a.max_rate);
    let search = Search {
        start_rps: start,
        min_rps: 0.1,
        max_rps: a.max_rate,
        tolerance: a.tolerance,
    };
    let threads = a.threads.unwrap_or_else(loadlab_run::defaults::threads);
    println!(
        "  {:>10}{:>11}{:>10}{:>10}{:>10}  verdict",
        "rate/s", "served/s", "p50 ms", "p99 ms", "errors %"
    );
    let mut steps: Vec<RateStep> = Vec::new();
    let reason = loop {
        let Some(rate) = next_rate(&steps, &search) else {
            break "bracketed within the tolerance".to_string();
        };
        let step_time = a.warmup + a.step;
        if started.elapsed() + step_time > a.max_time {
            break format!(
                "the search's time ({:.0} s) is up",
                a.max_time.as_secs_f64()
            );
        }
        if !steps.is_empty() {
            drain(&target, base_ms, &stop)?;
        }
        let plan = loadlab_input::lower::url(
            &target,
            Model::open_phases(
                vec![
                    RatePhase::constant("warm-up", rate, Some(a.warmup)),
                    RatePhase::constant("measured", rate, Some(a.step)),
                ],
                1,
                a.max_connections,
            ),
            Stop::default(),
            threads,
        )?;
        let (run, _) = run_step(&plan, &stop, &[])?;
        if stop.is_stopped() {
            break "interrupted".to_string();
        }
        let measured = &run.phases[1];
        let h = &measured.totals.latency;
        let at = |p: f64| {
            if h.is_empty() {
                f64::INFINITY
            } else {
                h.value_at_quantile(p / 100.0) as f64 / 1000.0
            }
        };
        let c = &measured.totals.counts;
        let secs = a.step.as_secs_f64();
        let achieved = c.completed as f64 / secs;
        let errors = if c.completed == 0 {
            100.0
        } else {
            100.0 * c.errors() as f64 / c.completed as f64
        };
        let warm = a.warmup.as_secs_f64();
        let in_window = |second: u64| second as f64 >= warm && (second as f64) < warm + secs;
        let window = Window {
            arrivals: run
                .timeline
                .iter()
                .filter(|r| in_window(r.second))
                .map(|r| r.offered)
                .sum(),
            completed: c.completed,
            seconds: secs,
            in_flight: rate * base_ms / 1000.0,
        };
        let per_second: Vec<f64> = run
            .timeline
            .iter()
            .filter(|r| r.second as f64 >= warm && r.completed > 0)
            .map(|r| r.p50_ms)
            .collect();
        let broken = judge(&slo, &window, at, errors, &per_second);
        let step = RateStep {
            rate_rps: rate,
            achieved_rps: achieved,
            arrived_rps: window.arrived_rps(),
            served_rps: window.served_rps(),
            p50_ms: at(50.0),
            p99_ms: at(99.0),
            error_pct: errors,
            warmup_s: warm,
            measured_s: secs,
            meets: broken.is_empty(),
            broken,
        };
        println!(
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
        );
        steps.push(step);
    };
    let (lo, hi) = bracket(&steps);
    let at_lo = lo.and_then(|r| steps.iter().find(|s| s.rate_rps == r));
    println!("  stopped: {reason}");
    match (lo, hi) {
        (Some(lo), _) => println!(
            "\n  capacity     {lo:.1} req/s meet {slo} (p50 {:.2} ms, p99 {:.2} ms){}",
            at_lo.map_or(0.0, |s| s.p50_ms),
            at_lo.map_or(0.0, |s| s.p99_ms),
            hi.map_or(String::new(), |h| format!("; it broke at {h:.1} req/s")),
        ),
        (None, Some(hi)) => println!("\n  capacity     none: even {hi:.1} req/s broke {slo}"),
        (None, None) => println!("\n  capacity     unknown: no rate was measured"),
    }
    if let Some(path) = &a.json {
        let report = CapacityReport {
            url: &a.url,
            max_rate_rps: lo,
            plateau_rps: plateau,
            slo: &slo,
            broke_at_rps: hi,
            p50_ms: at_lo.map(|s| s.p50_ms),
            p99_ms: at_lo.map(|s| s.p99_ms),
            stopped_because: &reason,
            steps: &steps,
        };
        loadlab_report::files::write_json(path, &report)?;
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else if lo.is_some() {
        Outcome::Done
    } else {
        Outcome::NotMet
    })
}

/// The closed-loop climb to the service's plateau (connections doubled until throughput stops
/// growing, within `--max-connections` and a third of `--max-time`), printed as it goes; its
/// throughput, or `None` when no step completed.
fn climb_to_plateau(
    a: &CapacityArgs,
    target: &UrlTarget,
    base_ms: f64,
    stop: &loadlab_engine::StopSignal,
) -> Result<Option<f64>> {
    let started = Instant::now();
    let budget = a.max_time / 3;
    let mut steps: Vec<ProbeStep> = Vec::new();
    while let Some(Next::Run {
        concurrency,
        requests,
        duration,
        max_duration,
    }) = plateau_step(&steps, a.max_connections)
    {
        if started.elapsed() + duration > budget || stop.is_stopped() {
            break;
        }
        if !steps.is_empty() {
            drain(target, base_ms, stop)?;
        }
        steps.push(closed_step(
            target,
            concurrency,
            (requests, max_duration),
            stop,
            &[],
        )?);
    }
    let plateau = plateau_rps(&steps);
    if let Some(x) = plateau {
        println!(
            "  plateau      {x:.1} req/s in a closed loop of up to {} connections ({:.0} s): the first rate tried",
            steps.last().map_or(0, |s| s.concurrency),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(plateau)
}
