//! `loadlab capacity URL --slo …`: the highest constant arrival rate whose steady state meets
//! the objective. A quick closed-loop climb finds the service's plateau, and the first rate
//! tried is a little under it; each rate runs as one open-model run of two phases — a
//! warm-up, discarded and reported, then the measured part — bracketed, then bisected.

use std::time::Instant;

use anyhow::{Context, Result};
use loadlab_analyze::Slo;
use loadlab_harness::capacity::{capacity, CapacitySearch, Progress};
use loadlab_harness::steps::{one_request_ms, settled_ms};
use loadlab_input::UrlTarget;
use loadlab_report::capacity::{header, plateau_line, result_lines, step_line};

use crate::args::CapacityArgs;
use crate::cmd::Outcome;

/// Runs `loadlab capacity`.
pub fn main(a: CapacityArgs) -> Result<Outcome> {
    let f = &a.search;
    let slo = Slo::parse(&f.slo)?;
    f.check()?;
    let target = UrlTarget::new(&f.url, f.timeout, &f.reach, &f.request)?;
    let stop = loadlab_harness::interrupt_signal()?;
    let started = Instant::now();
    let first_ms = one_request_ms(&target, &stop)?
        .with_context(|| format!("{} did not answer one request with a success; check the URL and that the service is up", f.url))?;
    let base_ms = settled_ms(&target, first_ms, &stop)?;
    println!(
        "loadlab capacity {}: SLO {} (warm-up {:?} discarded, {:?} measured per rate)",
        f.url, slo, f.warmup, f.step
    );
    let search = CapacitySearch::new(slo, f);
    let found = capacity(&target, base_ms, started, &search, &stop, |p| match p {
        Progress::Climbed(plateau) => {
            if let Some(p) = plateau {
                println!(
                    "{}",
                    plateau_line(p.rps, p.connections, p.seconds, p.levelled)
                );
            }
            println!("{}", header());
        }
        Progress::Step(step) => println!("{}", step_line(step)),
    })?;
    for line in result_lines(&found.steps, &search.slo, &found.stopped_because) {
        println!("{line}");
    }
    let (lo, _) = found.bracket();
    if let Some(path) = &a.json {
        loadlab_run::lab::write_capacity(path, &found.result(&f.url, &f.slo))?;
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else if lo.is_some() {
        Outcome::Done
    } else {
        Outcome::NotMet
    })
}
