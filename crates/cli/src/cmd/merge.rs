//! `loadlab merge RUN_DIR... --out DIR`: the shards of one plan merged into one run directory,
//! its findings and thresholds computed on the merged data as `run` computes them.

use std::time::Instant;

use anyhow::{bail, Result};

use crate::args::MergeArgs;
use crate::cmd::Outcome;

/// Runs `loadlab merge`.
pub fn main(a: MergeArgs) -> Result<Outcome> {
    let out = std::path::absolute(&a.out)?;
    for dir in &a.runs {
        if std::path::absolute(dir)? == out {
            bail!(
                "--out {} is one of the shards' directories; merge into a new directory",
                a.out.display()
            );
        }
    }
    let began = Instant::now();
    let merged = loadlab_harness::merge_dirs(&a.runs, loadlab_harness::cores())?;
    let summary = &merged.summary;
    loadlab_run::write_run_dir(&a.out, &merged.run, summary)?;
    print!("{}", loadlab_report::render_summary(summary));
    println!(
        "  merged       {} shard(s) in {:.0} ms",
        a.runs.len(),
        began.elapsed().as_secs_f64() * 1000.0
    );
    println!("  results in   {}", a.out.display());
    Ok(Outcome::judged(&summary.thresholds))
}
