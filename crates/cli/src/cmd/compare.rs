//! `loadlab compare RUN_DIR...`: runs side by side in the form of seed 001's annex, each
//! against the first (the baseline), saying for the median and p99 whether the difference is
//! more than the run-to-run noise (a bootstrap over each run's per-second values).

use anyhow::Result;
use loadlab_analyze::compare::{difference, Difference};
use loadlab_report::render_lab_table;
use loadlab_run::lab::LabCell;
use loadlab_run::read_run_dir;
use serde::Serialize;

use crate::args::CompareArgs;
use crate::cmd::Outcome;

/// One run against the baseline.
#[derive(Serialize)]
struct Versus {
    run: String,
    throughput_ratio: f64,
    p50: Option<Difference>,
    p99: Option<Difference>,
}

/// `--json`: each run's summary figures, and each against the first.
#[derive(Serialize)]
struct CompareReport {
    baseline: String,
    runs: Vec<loadlab_run::Summary>,
    versus: Vec<Versus>,
}

/// Runs `loadlab compare`.
pub fn main(a: CompareArgs) -> Result<Outcome> {
    let mut runs = Vec::new();
    for dir in &a.runs {
        let run = read_run_dir(dir)?;
        let label = loadlab_report::files::label_of(dir);
        runs.push((label, run));
    }
    let cells: Vec<LabCell> = runs
        .iter()
        .map(|(label, run)| LabCell {
            topology: "runs compared (the first is the baseline)".to_string(),
            workload: label.clone(),
            summary: run.summary.clone(),
            ..LabCell::default()
        })
        .collect();
    println!("{}", render_lab_table(&cells));
    let (base_label, base) = &runs[0];
    let per_second = |run: &loadlab_run::SavedRun, col: &str| -> Vec<f64> {
        let completed = run.column("completed");
        run.column(col)
            .into_iter()
            .zip(completed)
            .filter(|(v, n)| *n > 0.0 && v.is_finite())
            .map(|(v, _)| v)
            .collect()
    };
    let (b50, b99) = (per_second(base, "p50_ms"), per_second(base, "p99_ms"));
    println!(
        "  against {base_label} (per-second medians; 95 % bootstrap interval of the difference)"
    );
    let width = runs.iter().map(|(l, _)| l.len()).max().unwrap_or(3).max(3);
    println!(
        "  {:<width$}{:>10}   {:<34}{:<34}",
        "run", "req/s ×", "p50", "p99"
    );
    let mut versus = Vec::new();
    for (i, (label, run)) in runs.iter().enumerate().skip(1) {
        let seed = i as u64;
        let p50 = difference(&b50, &per_second(run, "p50_ms"), seed);
        let p99 = difference(&b99, &per_second(run, "p99_ms"), seed + 1000);
        let base_rps = base.summary.throughput.rps;
        let ratio = if base_rps > 0.0 {
            run.summary.throughput.rps / base_rps
        } else {
            f64::INFINITY
        };
        println!(
            "  {label:<width$}{ratio:>10.2}   {:<34}{:<34}",
            describe(&p50),
            describe(&p99)
        );
        versus.push(Versus {
            run: label.clone(),
            throughput_ratio: ratio,
            p50,
            p99,
        });
    }
    flame_diffs(&runs, &a.runs)?;
    if let Some(path) = &a.html {
        let views: Vec<loadlab_report::html::RunView> = runs
            .iter()
            .map(|(label, run)| loadlab_report::html::RunView::from_saved(label, run))
            .collect();
        loadlab_report::files::write_html(path, &format!("{base_label} compared"), &views)?;
    }
    if let Some(path) = &a.json {
        let report = CompareReport {
            baseline: base_label.clone(),
            runs: runs.iter().map(|(_, r)| r.summary.clone()).collect(),
            versus,
        };
        loadlab_report::files::write_json(path, &report)?;
    }
    Ok(Outcome::Done)
}

/// For each run profiled as the baseline was: where the CPU moved, as a differential flame
/// graph written beside the run's own (`flame-diff.svg`: red grew, blue shrank) and the
/// functions whose share changed most, printed.
fn flame_diffs(
    runs: &[(String, loadlab_run::SavedRun)],
    dirs: &[std::path::PathBuf],
) -> Result<()> {
    let (base_label, base) = &runs[0];
    let Some(before) = &base.profile else {
        return Ok(());
    };
    for ((label, run), dir) in runs.iter().zip(dirs).skip(1) {
        let Some(after) = &run.profile else {
            println!("  {label} has no profile to compare with {base_label}'s");
            continue;
        };
        let path = dir.join("flame-diff.svg");
        let title = format!("{base_label} → {label}");
        loadlab_report::files::write_flame_diff(&path, &title, before, after)?;
        println!("\n  where the CPU moved, {title} (share of samples in the function and what it called):");
        for m in loadlab_report::flame::moved(before, after, 8) {
            let new = if m.before_pct == 0.0 { "new " } else { "    " };
            println!(
                "  {new}{:>5.1} % → {:>5.1} %  {}",
                m.before_pct, m.after_pct, m.function
            );
        }
        println!("  differential flame graph: {}", path.display());
    }
    Ok(())
}

/// `×1.32 (+2.1..+4.0 ms) differs` or `×1.01 within noise`.
fn describe(d: &Option<Difference>) -> String {
    match d {
        None => "too few seconds to judge".to_string(),
        Some(d) => format!(
            "×{:.2} ({:+.2}..{:+.2} ms) {}",
            d.ratio,
            d.low,
            d.high,
            if d.significant {
                "differs"
            } else {
                "within noise"
            }
        ),
    }
}
