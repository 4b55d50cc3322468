//! `loadlab report RUN_DIR...`: the self-contained HTML report of one run, or of several
//! overlaid on the same axes; and the `--html` / `--plot` files other commands write.
//! `loadlab report LAB_DIR`: a lab judged again from its cells, without running anything.

use std::path::{Path, PathBuf};

use anyhow::Result;
use loadlab_analyze::thresholds::check_all;
use loadlab_harness::conclude_lab;
use loadlab_report::files::{label_of, plot_is_png, write_html, write_junit, write_plot};
use loadlab_report::html::RunView;
use loadlab_report::thresholds::render_thresholds;
use loadlab_run::Threshold;

use crate::args::ReportArgs;
use crate::cmd::Outcome;

/// Runs `loadlab report`.
pub fn main(a: ReportArgs) -> Result<Outcome> {
    if let [dir] = a.runs.as_slice() {
        if loadlab_run::lab::is_lab_dir(dir) {
            return lab(dir, &a);
        }
    }
    if a.baseline.is_some() {
        anyhow::bail!(
            "--baseline compares two labs' verdicts: give one lab directory (from `lab --out`),              or `loadlab compare` for run directories"
        );
    }
    if let Some(plot) = &a.plot {
        plot_is_png(plot)?;
    }
    if let Some(junit) = &a.junit {
        loadlab_report::files::writable(junit)?;
    }
    let slo: Vec<Threshold> = a.slo.iter().flat_map(|l| l.0.iter().cloned()).collect();
    let mut views = Vec::new();
    let mut suites = Vec::new();
    for dir in &a.runs {
        let saved = crate::cmd::read_run(dir)?;
        let label = label_of(dir);
        // A saved run is judged as the run that wrote it was, or by the thresholds given here.
        let results = if slo.is_empty() {
            saved.summary.thresholds.clone()
        } else {
            check_all(&slo, &saved.summary)
        };
        if !results.is_empty() {
            println!("{label}");
            print!("{}", render_thresholds(&results));
            suites.push((label.clone(), saved.summary.duration_s, results));
        }
        views.push(RunView::from_saved(&label, &saved));
    }
    let out = match (&a.html, a.runs.as_slice()) {
        (Some(file), _) if !file.is_empty() => PathBuf::from(file),
        (_, [one]) => one.join("report.html"),
        _ => PathBuf::from("report.html"),
    };
    let title = views
        .iter()
        .map(|v| v.label.as_str())
        .collect::<Vec<_>>()
        .join(" vs ");
    write_html(&out, &title, &views)?;
    println!("report: {}", out.display());
    if let Some(plot) = &a.plot {
        write_plot(plot, &title, &views)?;
        println!("plot: {}", plot.display());
    }
    if let Some(junit) = &a.junit {
        write_junit(junit, &suites)?;
        println!("junit: {}", junit.display());
    }
    let all: Vec<_> = suites.into_iter().flat_map(|(_, _, r)| r).collect();
    Ok(Outcome::judged(&all))
}

/// Judges the lab in `dir` again from its cells and rewrites its `lab.json`, `comparison.csv`
/// and `report.html`.
fn lab(dir: &Path, a: &ReportArgs) -> Result<Outcome> {
    if a.html.as_ref().is_some_and(|f| !f.is_empty()) || a.plot.is_some() || !a.slo.is_empty() {
        anyhow::bail!(
            "--html=FILE, --plot and --slo apply to run directories; a lab directory's files \
             are rewritten in place (give one cell's run directory for those)"
        );
    }
    if let Some(junit) = &a.junit {
        loadlab_report::files::writable(junit)?;
    }
    if let Some(baseline) = &a.baseline {
        crate::cmd::baseline_is_a_lab(baseline)?;
    }
    let lab = loadlab_run::lab::read_lab_dir(dir)?;
    let cores = match lab.experiment.cores {
        Some(cores) => cores,
        None => {
            let here = loadlab_harness::cores();
            println!(
                "  (the lab recorded no core count: its limits are read against this machine's \
                 {here} cores)"
            );
            here
        }
    };
    println!(
        "loadlab report: lab {} — {} cells judged again from {}",
        lab.experiment.name,
        lab.cells.len(),
        dir.display()
    );
    let thresholds = conclude_lab(&lab, cores, true, a.junit.as_deref())?;
    let changed = match &a.baseline {
        Some(baseline) => crate::cmd::against_baseline(dir, baseline)?,
        None => false,
    };
    Ok(Outcome::of_lab(&thresholds, changed))
}
