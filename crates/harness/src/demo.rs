//! `loadlab demo`'s tour of the seeds' experiments: the reference service as 1 replica and as
//! 3 behind a balancer under the closed and open models, a black box's workers counted, the
//! same /calc in each runtime, and coordinated omission shown, each step printed as it ends.

use std::path::Path;
use std::time::Duration;

use loadlab_engine::StopSignal;
use loadlab_input::experiment::{Experiment, ExperimentError, WorkloadSpec};
use loadlab_input::{TopologyInput, Workload};
use loadlab_report::{render_comparison, render_lab_table, ComparisonRow};
use loadlab_run::lab::slug;
use loadlab_run::{defaults, Model, Runtime, Stop, Topology};

use crate::execute::{execute, Watch};
use crate::matrix::run_matrix;
use crate::steps::one_request_ms;
use crate::{HarnessError, Result};

/// Work per `/calc` request in the tour (about 20 ms of one core on a recent x86 machine).
const CALC_N: u64 = 2_000_000;

fn topology(replicas: usize) -> Topology {
    runtime_topology(replicas, Runtime::Rust, &[])
}

/// `replicas` of the service in `runtime` behind nginx, started with `serve_args`, every other
/// setting the default.
fn runtime_topology(replicas: usize, runtime: Runtime, serve_args: &[&str]) -> Topology {
    loadlab_input::topology::lower(&TopologyInput {
        replicas: Some(replicas),
        runtime: Some(runtime),
        serve_args: serve_args.iter().map(|a| a.to_string()).collect(),
        ..TopologyInput::default()
    })
    .expect("replicas of the reference service are a valid topology")
}

/// Starts `topology` as the demo's `name`.
fn deploy(name: &str, topology: &Topology) -> Result<loadlab_lab::Deployment> {
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError::system("cannot find the loadlab executable", e))?;
    loadlab_lab::deploy(topology, &exe).map_err(|error| HarnessError::Topology {
        name: name.to_string(),
        error,
    })
}

/// The fastest of three sequential `/calc` requests, sent by the engine, on a fresh single
/// replica: the service time T, so one replica's capacity is about 1000/T per second.
fn calc_service_time(runtime: Runtime, stop: &StopSignal) -> Result<Duration> {
    let one = deploy(runtime.name(), &runtime_topology(1, runtime, &[]))?;
    let target = loadlab_input::UrlTarget::plain(
        &format!("{}/calc?n={CALC_N}", one.url),
        Duration::from_secs(10),
    );
    let mut best_ms = f64::INFINITY;
    for _ in 0..3 {
        let Some(ms) = one_request_ms(&target, stop)? else {
            return Err(HarnessError::system(
                format!("{} did not answer /calc", one.url),
                std::io::Error::other("no successful response"),
            ));
        };
        best_ms = best_ms.min(ms);
    }
    Ok(Duration::from_secs_f64(best_ms / 1000.0))
}

/// The tour `loadlab demo` prints, `secs` seconds a run, its run directories under `out`
/// (`replicas/` is a lab directory): the reference service as 1 replica and as 3 behind a
/// balancer under ping, delay and calc in both models, the findings on calc, a black box's
/// workers counted, the same /calc in each runtime, and coordinated omission shown.
pub fn demo(secs: u64, out: &Path, stop: &StopSignal) -> Result<()> {
    let secs = secs.max(1);
    let stop = stop.clone();
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
            .map_err(|error| ExperimentError::Workload {
                path: "loadlab demo".into(),
                name: name.clone(),
                error,
            })
            .map_err(loadlab_input::InputError::from)?;
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
        oversubscribe: false,
    };
    let lab = run_matrix(
        &experiment,
        &out.join("replicas"),
        &stop,
        &crate::LiveOutputs::default(),
        None,
    )?;
    // The tour's cells are a lab directory like any other: `loadlab report` reads it again.
    let judged = loadlab_analyze::lab::judge(&lab, crate::cores());
    loadlab_report::files::write_lab(&lab, &judged, false).map_err(|e| {
        HarnessError::system(
            "cannot write the tour's lab files",
            std::io::Error::other(e),
        )
    })?;
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
    Ok(())
}

/// One row: the same `/calc` on one process of each runtime (Rust's time `rust` already
/// measured). A runtime that cannot start is named with its reason, not fatal.
fn runtimes(rust: Duration, stop: &StopSignal) {
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
fn black_box(stop: &StopSignal) -> Result<()> {
    let topology = runtime_topology(
        1,
        Runtime::Rust,
        &["--bbox-delay", "200ms", "--bbox-workers", "3"],
    );
    let server = deploy("black box", &topology)?;
    println!(
        "\n  and a black box: /bbox/sync (3 workers of 200 ms inside); loadlab probe counts them"
    );
    let limits = loadlab_analyze::probe::ProbeLimits {
        max_time: Duration::from_secs(30),
        max_time_varied: Duration::from_secs(30),
        ..Default::default()
    };
    let target = loadlab_input::UrlTarget::plain(
        &format!("{}/bbox/sync", server.url),
        Duration::from_secs(10),
    );
    crate::probe::print_probe(&target, &limits, &crate::Watch::default(), stop)?;
    Ok(())
}

/// The same freezing server measured by one closed connection and by the open model.
fn coordinated_omission(secs: u64, out: &Path, stop: &StopSignal) -> Result<Vec<ComparisonRow>> {
    let server = deploy("stall", &topology(1))?;
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
        let target =
            loadlab_input::UrlTarget::plain(&format!("{}{path}", server.url), defaults::TIMEOUT);
        let plan = loadlab_input::lower::url(&target, model, stop_at, 1)?;
        let (run, summary) = execute(
            &plan,
            stop,
            crate::execute::Progress::Off,
            &Watch::default(),
            &crate::LiveOutputs::default(),
        )?;
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
