//! `loadlab compare RUN_DIR...`: runs side by side in the form of seed 001's annex, each
//! against the first (the baseline), saying for the median and p99 whether the difference is
//! more than the run-to-run noise (a bootstrap over each run's per-second values).

use anyhow::Result;
use loadlab_analyze::compare::{versus_baseline, CompareReport};
use loadlab_report::{render_lab_table, render_versus};
use loadlab_run::lab::LabCell;

use crate::args::CompareArgs;
use crate::cmd::Outcome;

/// Runs `loadlab compare`.
pub fn main(a: CompareArgs) -> Result<Outcome> {
    let mut runs = Vec::new();
    for dir in &a.runs {
        let run = crate::cmd::read_run(dir)?;
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
    let base_label = &runs[0].0;
    let versus = versus_baseline(&runs);
    print!("{}", render_versus(base_label, &versus));
    flame_diffs(&runs, &a.runs)?;
    if let Some(html) = &a.html {
        let path = std::path::Path::new(if html.is_empty() { "report.html" } else { html });
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
