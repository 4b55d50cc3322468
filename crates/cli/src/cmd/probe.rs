//! `loadlab probe URL`: closed-model steps at rising concurrency, then a verdict (async, sync
//! with K workers, or CPU-bound), the service time and the top throughput, with the steps as
//! evidence — what seed 000 did by hand with `ab -c 1..4`.

use anyhow::Result;
use loadlab_harness::probe::print_probe;
use loadlab_input::UrlTarget;
use loadlab_run::{Model, Stop};

use crate::args::ProbeArgs;
use crate::cmd::Outcome;

/// Runs `loadlab probe`.
pub fn main(args: ProbeArgs) -> Result<Outcome> {
    let a = &args.flags;
    if a.reach.streams.is_some() {
        anyhow::bail!(
            "--streams does not apply to probe: each step's concurrency is its connections, one \
             request in flight each"
        );
    }
    // Checks the URL (and any CA file) before anything runs.
    let target = UrlTarget::new(&a.url, a.timeout, &a.reach, &a.request)?;
    loadlab_input::lower::url(&target, Model::closed(1, 1), Stop::default(), 1)?;
    let limits = loadlab_harness::probe::limits_of(a);
    let stop = loadlab_harness::interrupt_signal()?;
    let varied = if limits.max_time_varied > limits.max_time {
        format!(
            "; {:.0} s if its times vary widely",
            limits.max_time_varied.as_secs_f64()
        )
    } else {
        String::new()
    };
    println!(
        "loadlab probe {}: closed-model steps at rising concurrency (up to {} connections, {:.0} s{varied})",
        a.url,
        limits.max_concurrency,
        limits.max_time.as_secs_f64()
    );
    let probed = print_probe(
        &target,
        &limits,
        &loadlab_harness::Watch {
            pids: args.watch_pid.clone(),
            ..Default::default()
        },
        &stop,
    )?;
    if let Some(path) = &args.json {
        loadlab_run::lab::write_probe(path, &probed.result(&a.url))?;
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}
