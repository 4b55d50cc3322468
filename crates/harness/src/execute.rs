//! One plan run as every subcommand runs it: the watched processes sampled from `/proc`, a
//! live progress line or dashboard fed each second, and the summary with its findings.

use std::io::Write;
use std::time::Duration;

use loadlab_engine::StopSignal;
use loadlab_run::{RunData, Summary, ValidPlan};

use crate::dashboard::Dashboard;
use crate::Result;

/// Runs a plan, showing a live progress line on stderr when `live` and watching the
/// processes `watch` (and their children) and the Redis servers at `stores`, and summarizes it
/// with its findings.
pub fn execute(
    plan: &ValidPlan,
    stop: &StopSignal,
    live: bool,
    watch: &[i32],
    stores: &[String],
    dashboard: Option<&Dashboard>,
) -> Result<(RunData, Summary)> {
    let sampler = if watch.is_empty() && stores.is_empty() {
        None
    } else {
        Some(loadlab_lab::Sampler::start(
            watch,
            stores,
            Duration::from_secs(1),
        )?)
    };
    let mut errors = 0u64;
    let mut stderr = std::io::stderr();
    let mut run = loadlab_engine::run(plan, stop, |row, iv| {
        if let Some(d) = dashboard {
            d.add(row, iv);
        }
        if live {
            errors += row.completed - row.status_classes[..3].iter().sum::<u64>();
            let _ = write!(
                stderr,
                "\r{}\x1b[K",
                loadlab_report::progress_line(row, errors)
            );
            let _ = stderr.flush();
        }
    })?;
    if live {
        let _ = write!(stderr, "\r\x1b[K");
    }
    if let Some(sampler) = sampler {
        run.attach_server(sampler.finish());
    }
    let mut summary = Summary::from_run(&run);
    summary.findings = loadlab_analyze::findings(&run, &summary, cores());
    Ok((run, summary))
}

/// CPUs this machine offers: what a service on it could use, for the findings' capacity.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
