//! `loadlab demo`: the embedded tour of the seeds' experiments (`harness::demo`), its results
//! under `--out` or `./runs/demo-<time>`.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use loadlab_harness::interrupt_signal;

use crate::args::DemoArgs;
use crate::cmd::Outcome;

/// Runs `loadlab demo`.
pub fn main(a: DemoArgs) -> Result<Outcome> {
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("demo-{stamp}"))
    });
    let stop = interrupt_signal()?;
    loadlab_harness::demo::demo(a.duration.as_secs(), &out, &stop)?;
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}
