//! `loadlab lab EXPERIMENT.yaml`: every workload against every topology, each cell a run
//! directory, then one comparison table (also as CSV) and how throughput scaled.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use loadlab_harness::{interrupt_signal, run_matrix, slug, Dashboard};
use loadlab_report::files::write_junit;
use loadlab_report::html::RunView;
use loadlab_report::thresholds::render_thresholds;
use loadlab_report::{lab_csv, render_lab_table, LabCell};
use loadlab_run::ThresholdResult;

use crate::args::LabArgs;
use crate::cmd::Outcome;

/// Runs `loadlab lab`.
pub fn main(a: LabArgs) -> Result<Outcome> {
    let exp = loadlab_input::experiment::load(&a.file)?;
    if let Some(junit) = &a.junit {
        loadlab_report::files::writable(junit)?;
    }
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("{}-{stamp}", slug(&exp.name)))
    });
    let stop = interrupt_signal()?;
    println!(
        "loadlab lab: {} — {} topologies × {} workloads",
        exp.name,
        exp.topologies.len(),
        exp.workloads.len()
    );
    if let Some(note) = &exp.note {
        println!("  {note}");
    }
    let dashboard = Dashboard::start_if(a.dashboard.as_deref(), &stop)?;
    let cells = run_matrix(
        &exp.topologies,
        &exp.workloads,
        &out,
        &stop,
        dashboard.as_ref(),
    )?;
    println!("\n{}", render_lab_table(&cells));
    for w in &exp.workloads {
        // Processes (replicas × workers) against throughput, one point per topology.
        let points: Vec<(f64, f64)> = exp
            .topologies
            .iter()
            .filter_map(|(name, t)| {
                let cell = cells
                    .iter()
                    .find(|c| c.topology == *name && c.workload == w.name)?;
                Some(((t.replicas * t.workers) as f64, cell.summary.throughput.rps))
            })
            .collect();
        if let Some(line) = loadlab_analyze::scaling::scaling_line(&w.name, &points) {
            println!("  {line}");
        }
    }
    // Workloads aimed at the same target on one topology: why their load models disagree.
    for (topology, _) in &exp.topologies {
        let mut by_target: Vec<(&str, Vec<(&str, &loadlab_run::Summary)>)> = Vec::new();
        for c in cells.iter().filter(|c| c.topology == *topology) {
            let Some(target) = c.summary.targets.first() else {
                continue;
            };
            let run = (c.workload.as_str(), &c.summary);
            match by_target.iter_mut().find(|(t, _)| t == target) {
                Some((_, runs)) => runs.push(run),
                None => by_target.push((target, vec![run])),
            }
        }
        for (_, runs) in by_target {
            if let Some(line) = loadlab_analyze::models::disagreement_line(topology, &runs) {
                println!("  {line}");
            }
        }
    }
    let suites: Vec<(String, f64, Vec<ThresholdResult>)> = cells
        .iter()
        .filter(|c| !c.summary.thresholds.is_empty())
        .map(|c| {
            let label = format!("{} / {}", c.topology, c.workload);
            (label, c.summary.duration_s, c.summary.thresholds.clone())
        })
        .collect();
    for (label, _, results) in &suites {
        println!("\n  {label}");
        print!("{}", render_thresholds(results));
    }
    if let Some(junit) = &a.junit {
        write_junit(junit, &suites)?;
        println!("  junit {}", junit.display());
    }
    std::fs::create_dir_all(&out)?;
    let csv = out.join("comparison.csv");
    std::fs::write(&csv, lab_csv(&cells))
        .with_context(|| format!("cannot write {}", csv.display()))?;
    if a.html {
        write_report(&out, &exp.name, &cells)?;
    }
    println!(
        "  results in {} (comparison.csv, {}one run directory per cell)",
        out.display(),
        if a.html { "report.html, " } else { "" }
    );
    if let Some(d) = dashboard {
        // The page follows the lab cell by cell and says done only now.
        if let Some(last) = cells.last() {
            d.finish(&last.summary);
        }
        d.close(a.dashboard_keep);
    }
    let all: Vec<ThresholdResult> = suites.into_iter().flat_map(|(_, _, r)| r).collect();
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::judged(&all)
    })
}

/// `out/report.html` overlaying every cell, read back from the cells' run directories.
fn write_report(out: &std::path::Path, title: &str, cells: &[LabCell]) -> Result<()> {
    let mut views = Vec::new();
    for c in cells {
        let dir = out.join(slug(&c.topology)).join(slug(&c.workload));
        let saved = loadlab_run::read_run_dir(&dir)?;
        views.push(RunView::from_saved(
            &format!("{} / {}", c.topology, c.workload),
            &saved,
        ));
    }
    loadlab_report::files::write_html(&out.join("report.html"), title, &views)?;
    Ok(())
}
