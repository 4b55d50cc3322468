//! `loadlab capacity URL --slo …`: the highest constant arrival rate whose steady state meets
//! the objective. A quick closed-loop climb finds the service's plateau, and the first rate
//! tried is a little under it; each rate runs as one open-model run of two phases — a
//! warm-up, discarded and reported, then the measured part — bracketed, then bisected. With a
//! scenario file in place of the URL, each arrival is a user who runs its flow once.

use std::time::Instant;

use anyhow::{Context, Result};
use loadlab_analyze::Slo;
use loadlab_harness::capacity::{capacity, CapacitySearch, Progress};
use loadlab_harness::steps::{one_alone, settled};
use loadlab_input::Work;
use loadlab_report::capacity::{header, plateau_line, result_lines, step_line};
use loadlab_run::lab::WorkUnit;

use crate::args::CapacityArgs;
use crate::cmd::Outcome;

/// Runs `loadlab capacity`.
pub fn main(a: CapacityArgs) -> Result<Outcome> {
    let f = &a.search;
    let slo = Slo::parse(&f.slo)?;
    f.check()?;
    let work = Work::new(f)?;
    if let Work::Script(script) = &work {
        for warning in &script.warnings {
            eprintln!("warning: {warning}");
        }
    }
    let stop = loadlab_harness::interrupt_signal()?;
    let started = Instant::now();
    let what = match work.unit() {
        WorkUnit::Request => "answer one request with a success; check the URL",
        WorkUnit::Session => {
            "run one user's session to its end with every request answered \
                              below 400; run the script once with `loadlab run` to see why"
        }
    };
    let first = one_alone(&work, &stop)?
        .with_context(|| format!("{} did not {what}, and that the service is up", work.name()))?;
    let alone = settled(&work, first, &stop)?;
    let unit = match work.unit() {
        WorkUnit::Request => String::new(),
        WorkUnit::Session => format!(
            "; rates count users' sessions, one alone {:.0} ms with {} requests",
            alone.unit_ms, alone.requests
        ),
    };
    println!(
        "loadlab capacity {}: SLO {} (warm-up {:?} discarded, {:?} measured per rate{unit})",
        work.name(),
        slo,
        f.warmup,
        f.step
    );
    let search = CapacitySearch::new(slo, f);
    let found = capacity(&work, alone, started, &search, &stop, |p| match p {
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
    for line in result_lines(
        &found.steps,
        &search.slo,
        &found.stopped_because,
        found.unit,
    ) {
        println!("{line}");
    }
    let (lo, _) = found.bracket();
    if let Some(path) = &a.json {
        loadlab_run::lab::write_capacity(path, &found.result(work.name(), &f.slo))?;
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else if lo.is_some() {
        Outcome::Done
    } else {
        Outcome::NotMet
    })
}
