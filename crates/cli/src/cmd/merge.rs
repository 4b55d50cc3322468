//! `loadlab merge RUN_DIR... --out DIR`: the shards of one plan merged into one run directory,
//! its findings and thresholds computed on the merged data as `run` computes them; with
//! `--wait`, once the shards' runs have ended.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

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
    let runs = match a.wait {
        Some(limit) => ended_within(&a.runs, limit)?,
        None => a.runs.clone(),
    };
    let began = Instant::now();
    let merged = loadlab_harness::merge_dirs(&runs, loadlab_harness::cores())?;
    let summary = &merged.summary;
    loadlab_run::write_run_dir(&a.out, &merged.run, summary)?;
    print!("{}", loadlab_report::render_summary(summary));
    println!(
        "  merged       {} shard(s) in {:.0} ms",
        runs.len(),
        began.elapsed().as_secs_f64() * 1000.0
    );
    println!("  results in   {}", a.out.display());
    if a.print_archive {
        let mut stdout = std::io::stdout().lock();
        loadlab_run::archive::write_archive(&a.out, &mut stdout)
            .with_context(|| format!("printing {} as an archive", a.out.display()))?;
    }
    Ok(Outcome::judged(&summary.thresholds))
}

/// How long a shard's directory may stay unchanged, once another shard's run has ended, before
/// the shard counts as stopped: a running shard writes its directory every second.
const STALE: Duration = Duration::from_secs(30);

/// The shards' directories whose runs ended (their `summary.json`, written last) within
/// `limit`, looked for each second. A shard whose directory stays unchanged for [`STALE`] once
/// another has ended stopped (its pod was deleted, say) and is not waited for. Those left out
/// are named on stderr, to be merged as missing shards; none ending is an error.
fn ended_within(dirs: &[PathBuf], limit: Duration) -> Result<Vec<PathBuf>> {
    let until = Instant::now() + limit;
    let ended = |d: &PathBuf| d.join("summary.json").is_file();
    // Each shard's newest change seen, and when it was first seen.
    let mut changed: Vec<(Option<SystemTime>, Instant)> =
        dirs.iter().map(|_| (None, Instant::now())).collect();
    loop {
        let now = Instant::now();
        for (d, seen) in dirs.iter().zip(&mut changed) {
            let newest = newest_change(d);
            if newest != seen.0 {
                *seen = (newest, now);
            }
        }
        let done: Vec<PathBuf> = dirs.iter().filter(|d| ended(d)).cloned().collect();
        let stopped: Vec<&PathBuf> = dirs
            .iter()
            .zip(&changed)
            .filter(|(d, seen)| !ended(d) && !done.is_empty() && now - seen.1 >= STALE)
            .map(|(d, _)| d)
            .collect();
        let out_of_time = now >= until;
        if done.len() + stopped.len() == dirs.len() || out_of_time {
            if done.is_empty() {
                bail!(
                    "no shard's run ended within {}: none of the {} directories holds a \
                     summary.json",
                    humantime::format_duration(limit),
                    dirs.len()
                );
            }
            for d in dirs.iter().filter(|d| !ended(d)) {
                let why = match stopped.contains(&d) {
                    true => format!(
                        "stopped changing {} s before the others ended",
                        STALE.as_secs()
                    ),
                    false => format!("did not end within {}", humantime::format_duration(limit)),
                };
                eprintln!(
                    "merge: {} {why}: merged without it, as a missing shard",
                    d.display()
                );
            }
            return Ok(done);
        }
        std::thread::sleep((until - now).min(Duration::from_secs(1)));
    }
}

/// When a file of `dir` last changed (the folder's own time for an empty one); none when it
/// does not exist.
fn newest_change(dir: &std::path::Path) -> Option<SystemTime> {
    let own = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    let files = std::fs::read_dir(dir).ok()?.flatten();
    let newest = files
        .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
        .max();
    Some(newest.map_or(own, |n| n.max(own)))
}
