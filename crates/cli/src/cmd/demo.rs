//! `loadlab demo`: starts the reference service in-process and runs a short tour (closed
//! model, open model, and coordinated omission made visible), then compares the runs.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use loadlab_report::{render_comparison, ComparisonRow};
use loadlab_run::{Model, Plan, Stop};
use loadlab_target::TestServer;

use crate::args::DemoArgs;
use crate::cmd::run::{execute, interrupt_signal};
use crate::cmd::Outcome;

fn plan(server: &TestServer, path: &str, model: Model, seconds: u64) -> Plan {
    let stop = Stop {
        duration: Some(Duration::from_secs(seconds)),
        count: None,
    };
    Plan::get(server.addr, path, model, stop)
}

/// Runs `loadlab demo`.
pub fn main(a: DemoArgs) -> Result<Outcome> {
    let seconds = a.seconds.max(1);
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("demo-{stamp}"))
    });
    let server = TestServer::start(1).context("cannot start the reference service")?;
    println!(
        "loadlab demo: reference service on http://{} (one thread); {} runs of {seconds} s\n",
        server.addr, 5
    );
    let tour: Vec<(&str, &str, Model)> = vec![
        (
            "closed c=50 /ping",
            "/ping",
            Model::Closed {
                connections: 50,
                pipeline: 1,
            },
        ),
        (
            "open 2000/s /delay?ms=20",
            "/delay?ms=20",
            Model::open(2000.0, 10, 1000),
        ),
        (
            "closed c=1 /stall",
            "/stall?every_ms=2000&for_ms=1000",
            Model::Closed {
                connections: 1,
                pipeline: 1,
            },
        ),
        (
            "open 200/s c=1 /stall",
            "/stall?every_ms=2000&for_ms=1000",
            Model::open(200.0, 1, 1),
        ),
        (
            "open 200/s c<=1000 /stall",
            "/stall?every_ms=2000&for_ms=1000",
            Model::open(200.0, 1, 1000),
        ),
    ];
    let stop = interrupt_signal()?;
    let mut rows = Vec::new();
    for (i, (label, path, model)) in tour.into_iter().enumerate() {
        println!("  running {label} …");
        let p = plan(&server, path, model, seconds);
        let (run, summary) = execute(&p, &stop, false, &[])?;
        let dir = out.join(format!(
            "{}-{}",
            i + 1,
            label.replace([' ', '/', '=', '<'], "_")
        ));
        loadlab_run::write_run_dir(&dir, &run, &summary)?;
        rows.push(ComparisonRow {
            label: label.to_string(),
            summary,
        });
        if !run.complete {
            break;
        }
    }
    println!("\n{}", render_comparison(&rows));
    println!(
        "What it shows:\n\
         - The closed model measures how fast the service answers as fast as it can; the open\n\
           model holds the rate you ask for and shows the latency at that rate.\n\
         - /stall freezes for 1 s every 2 s. One closed connection (like most load tools) sends\n\
           nothing while it waits, so its p99 hides the freeze (coordinated omission). The open\n\
           model counts latency from each request's scheduled start: its p99 shows the ~1 s freeze,\n\
           while its service latency (from the actual send) stays low when requests queued in\n\
           the generator behind one connection.\n\
         Results (summary.json, timeline.csv, latency.hlog per run) are in {}",
        out.display()
    );
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}
