//! `loadlab demo`: the README's first command. With nothing but the build, a tour of the
//! seeds' experiments in about a minute: ping, delay and calc on 1 replica vs 3 replicas in
//! the closed and open models, then coordinated omission made visible, then what it shows.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use loadlab_report::{render_comparison, render_lab_table, ComparisonRow};
use loadlab_run::{defaults, Model, Runtime, Stop, Topology};
use loadlab_target::TestServer;

use loadlab_harness::steps::one_request_ms;
use loadlab_harness::{execute, interrupt_signal, run_matrix, Watch};
use loadlab_input::experiment::{Experiment, WorkloadSpec};
use loadlab_input::{TopologyInput, Workload};
use loadlab_run::lab::slug;

use crate::args::DemoArgs;
use crate::cmd::Outcome;

/// Work per `/calc` request in the tour (about 20 ms of one core on a recent x86 machine).
const CALC_N: u64 = 2_000_000;

fn topology(replicas: usize) -> Topology {
    runtime_topology(replicas, Runtime::Rust)
}

/// `replicas` of the service in `runtime` behind nginx, every other setting the default.
fn runtime_topology(replicas: usize, runtime: Runtime) -> Topology {
    loadlab_input::topology::lower(&TopologyInput {
        replicas: Some(replicas),
        runtime: Some(runtime),
        ..TopologyInput::default()
    })
    .expect("replicas of the reference service are a valid topology")
}

/// The fastest of three sequential `/calc` requests, sent by the engine, on a fresh single
/// replica: the service time T, so one replica's capacity is about 1000/T per second.
fn calc_service_time(runtime: Runtime, stop: &loadlab_engine::StopSignal) -> Result<Duration> {
    let exe = std::env::current_exe().context("cannot find the loadlab executable")?;
    let one = loadlab_lab::deploy(&runtime_topology(1, runtime), &exe)?;
    let target = loadlab_input::UrlTarget::plain(
        &format!("{}/calc?n={CALC_N}", one.url),
        Duration::from_secs(10),
    );
    let mut best_ms = f64::INFINITY;
    for _ in 0..3 {
        let ms = one_request_ms(&target, stop)?
            .with_context(|| format!("{} did not answer /calc", one.url))?;
        best_ms = best_ms.min(ms);
    }
    Ok(Duration::from_secs_f64(best_ms / 1000.0))
}

/// Runs `loadlab demo`.
pub fn main(a: DemoArgs) -> Result<Outcome> {
    let secs = a.seconds.max(1);
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("demo-{stamp}"))
    });
    let stop = interrupt_signal()?;
    let t = calc_service_time(Runtime::Rust, &stop)?;
    let t_ms = t.as_secs_f64() * 1000.0;
    let calc_rate = (1.5 * 1000.0 / t_ms).clamp(2.0, 500.0).round();
    println!(
        "loadlab demo: the reference service as 1 replica and as 3 replicas behind a load\n\
         balancer, {secs} s per run. /calc?n={CALC_N} takes {t_ms:.1} ms here, so one replica \
         serves about {:.0}/s; the tour offers {calc_rate:.0}/s.",
        1000.0 / t_ms
    );
    let workloads = vec![
        (
            "ping closed c=50".to_string(),
            format!("/ping -c 50 -d {secs}s"),
        ),
        (
            "ping open 2000/s".to_string(),
            format!("/ping -R 2000 -d {secs}s"),
        ),
        (
            "delay 100ms open 300/s".to_string(),
            format!("/delay?ms=100 -R 300 -d {secs}s"),
        ),
        (
            format!("calc open {calc_rate:.0}/s"),
            format!("/calc?n={CALC_N} -R {calc_rate} -d {secs}s --timeout 10s"),
        ),
    ];
    let topologies = vec![
        ("1 replica".to_string(), topology(1)),
        ("3 replicas".to_string(), topology(3)),
    ];
    let workloads = workloads
        .into_iter()
        .map(|(name, run)| {
            let load = WorkloadSpec {
                name: name.clone(),
                run: Some(run),
                capacity: None,
                probe: None,
                slo: None,
            }
            .load()
            .with_context(|| format!("demo workload {name:?}"))?;
            Ok(Workload { name, load })
        })
        .collect::<Result<Vec<_>>>()?;
    let experiment = Experiment {
        name: "demo: 1 replica against 3".to_string(),
        note: None,
        topologies,
        workloads,
        rounds: 1,
        compare: Vec::new(),
        baselines: Vec::new(),
    };
    let lab = run_matrix(&experiment, &out.join("replicas"), &stop, None)?;
    // The tour's cells are a lab directory like any other: `loadlab report` reads it again.
    let judged = loadlab_analyze::lab::judge(&lab, loadlab_harness::cores());
    loadlab_report::files::write_lab(&lab, &judged, false)?;
    let cells = lab.cells;
    println!("\n{}", render_lab_table(&cells));
    println!("  findings on calc (every run's summary.json has its own):");
    for c in cells.iter().filter(|c| c.workload.starts_with("calc")) {
        for f in c.summary.findings.iter().filter(|f| {
            ["saturation", "rising_latency", "service_demand"].contains(&f.kind.as_str())
        }) {
            println!("  - {}: {}", c.topology, f.message);
        }
    }

    if !stop.is_stopped() {
        black_box(&stop)?;
    }
    if !stop.is_stopped() {
        runtimes(t, &stop);
    }

    let co = if stop.is_stopped() {
        Vec::new()
    } else {
        println!("  and coordinated omission: /stall freezes 1 s every 2 s");
        coordinated_omission(secs.max(4), &out.join("stall"), &stop)?
    };
    if !co.is_empty() {
        println!("\n{}", render_comparison(&co));
    }
    println!(
        "What it shows:\n\
         - ping: the closed model measures how fast the service answers when pushed as hard as\n\
         \x20 50 connections can; the open model holds 2000/s and shows the latency at that rate.\n\
         \x20 Behind a proxy, ping gets slower: the extra hop costs more than ping itself, and\n\
         \x20 replicas, proxy and generator share this machine's {cores} cores.\n\
         - delay waits without holding a worker, so one replica already serves 300/s at ~100 ms:\n\
         \x20 replicas add nothing where nothing is saturated (seed 001's finding).\n\
         - calc is CPU work: at 1.5× one replica's capacity its queue and latency grow through the\n\
         \x20 run; 3 replicas share it across the cores (seed 000's breaking points). The cpu %\n\
         \x20 column is the sum over the replicas' processes, sampled from /proc; the service\n\
         \x20 demand (CPU per request) gives the rate the cores can serve at most (seed 002's 1000/T).\n\
         - runtimes: the same /calc costs what each runtime pays for it (seed 001: the\n\
         \x20 technology matters as much as the replica count); `loadlab serve --runtime node`\n\
         \x20 or `--runtime python` serves the same endpoints for every experiment above.\n\
         - the black box: p99 doubles at 4 connections while throughput stays at 3 / 200 ms, so it\n\
         \x20 has 3 workers (seed 000 found this by hand with ab -c 1..4).\n\
         - /stall: one closed connection (like most load tools) sends nothing while the server is\n\
         \x20 frozen, so its p99 hides the freeze; the open model counts from each request's\n\
         \x20 scheduled start and shows it, and its service latency (svc p99, from the actual send)\n\
         \x20 stays low because the requests queued in the generator, not in the server.\n\
         Results: {} (one run directory per cell with summary.json, timeline.csv, latency.hlog,\n\
         server.csv; replicas/ is a lab directory, comparison.csv and lab.json beside its cells).",
        out.display(),
        cores = std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}

/// One row: the same `/calc` on one process of each runtime (Rust's time `rust` already
/// measured). A runtime that cannot start is named with its reason, not fatal.
fn runtimes(rust: Duration, stop: &loadlab_engine::StopSignal) {
    let mut row = vec![format!("rust {:.1} ms", rust.as_secs_f64() * 1000.0)];
    for runtime in [Runtime::Node, Runtime::Python] {
        row.push(match calc_service_time(runtime, stop) {
            Ok(t) => format!("{runtime} {:.1} ms", t.as_secs_f64() * 1000.0),
            Err(e) => format!("{runtime} not run ({e:#})"),
        });
    }
    println!(
        "  runtimes: /calc?n={CALC_N} on one process: {}",
        row.join(", ")
    );
}

/// Seed 000's black box: `/bbox/sync` with 3 workers of 200 ms, counted by the probe.
fn black_box(stop: &loadlab_engine::StopSignal) -> Result<()> {
    let server = TestServer::start_with(
        1,
        loadlab_target::ServiceConfig {
            bbox_delay: Duration::from_millis(200),
            bbox_workers: 3,
            ..Default::default()
        },
    )
    .context("cannot start the reference service")?;
    println!(
        "\n  and a black box: /bbox/sync (3 workers of 200 ms inside); loadlab probe counts them"
    );
    let limits = loadlab_analyze::probe::ProbeLimits {
        max_time: Duration::from_secs(30),
        max_time_varied: Duration::from_secs(30),
        ..Default::default()
    };
    let target =
        loadlab_input::UrlTarget::plain(&server.url("/bbox/sync"), Duration::from_secs(10));
    loadlab_harness::probe::print_probe(&target, &limits, &[], stop)?;
    Ok(())
}

/// The same freezing server measured by one closed connection and by the open model.
fn coordinated_omission(
    secs: u64,
    out: &std::path::Path,
    stop: &loadlab_engine::StopSignal,
) -> Result<Vec<ComparisonRow>> {
    let server = TestServer::start(1).context("cannot start the reference service")?;
    let path = "/stall?every_ms=2000&for_ms=1000";
    let runs = [
        ("closed c=1", Model::closed(1, 1)),
        ("open 200/s c=1", Model::open(200.0, 1, 1)),
    ];
    let mut rows = Vec::new();
    for (label, model) in runs {
        let stop_at = Stop {
            duration: Some(Duration::from_secs(secs)),
            count: None,
        };
        // One thread: one connection in either model, as the closed-model tools run it.
        let target = loadlab_input::UrlTarget::plain(&server.url(path), defaults::TIMEOUT);
        let plan = loadlab_input::lower::url(&target, model, stop_at, 1)?;
        let (run, summary) = execute(&plan, stop, false, &Watch::default(), None)?;
        loadlab_run::write_run_dir(&out.join(slug(label)), &run, &summary)?;
        rows.push(ComparisonRow {
            label: format!("/stall {label}"),
            summary,
        });
        if !run.complete {
            break;
        }
    }
    Ok(rows)
}
