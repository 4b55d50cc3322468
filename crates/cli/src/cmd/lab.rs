//! `loadlab lab EXPERIMENT.yaml`: every workload against every topology, round after round,
//! each cell a run directory; then one comparison table (also as CSV), the verdicts of each
//! factor the experiment varies, and `lab.json` with the cells and verdicts.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use loadlab_analyze::verdict::{CellResult, Verdict};
use loadlab_harness::{cell_results, cores, interrupt_signal, run_matrix, slug, Dashboard};
use loadlab_report::files::write_junit;
use loadlab_report::html::RunView;
use loadlab_report::lab::{render_lab_html, LabPage};
use loadlab_report::thresholds::render_thresholds;
use loadlab_report::verdicts::render_verdicts;
use loadlab_report::{lab_csv, render_lab_table, LabCell};
use loadlab_run::ThresholdResult;

use crate::args::LabArgs;
use crate::cmd::Outcome;

/// The schema name of `lab.json`.
const LAB_SCHEMA: &str = "loadlab.lab/v1";

/// `lab.json`: what each cell measured and the verdicts of each factor.
#[derive(serde::Serialize)]
struct LabJson<'a> {
    schema: &'a str,
    name: &'a str,
    rounds: usize,
    compare: &'a [(String, String)],
    /// Each topology judged against another: (variant, baseline).
    baselines: &'a [(String, String)],
    cells: &'a [CellResult],
    verdicts: &'a [Verdict],
}

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
        "loadlab lab: {} — {} topologies × {} workloads × {} round(s)",
        exp.name,
        exp.topologies.len(),
        exp.workloads.len(),
        exp.rounds
    );
    if let Some(note) = &exp.note {
        println!("  {note}");
    }
    let dashboard = Dashboard::start_if(a.dashboard.as_deref(), &stop)?;
    let cells = run_matrix(
        &exp.topologies,
        &exp.workloads,
        exp.rounds,
        &out,
        &stop,
        dashboard.as_ref(),
    )?;
    println!("\n{}", render_lab_table(&cells));
    let results = cell_results(&cells, &exp.topologies, cores());
    let verdicts = loadlab_analyze::verdict::verdicts(&results, &exp.baselines, &exp.compare);
    print!("{}", render_verdicts(&verdicts));
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
    let lab = LabJson {
        schema: LAB_SCHEMA,
        name: &exp.name,
        rounds: exp.rounds,
        compare: &exp.compare,
        baselines: &exp.baselines,
        cells: &results,
        verdicts: &verdicts,
    };
    loadlab_report::files::write_json(&out.join("lab.json"), &lab)?;
    if a.html {
        write_report(&out, &exp.name, &cells, &results, &verdicts, &exp.compare)?;
    }
    println!(
        "  results in {} (comparison.csv, lab.json, {}one run directory per cell)",
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

/// `out/report.html`: the experiment's comparisons, verdicts and cells, each cell linked to
/// its own report (`report.html` in its run directory, with its per-second charts).
fn write_report(
    out: &std::path::Path,
    title: &str,
    cells: &[LabCell],
    results: &[CellResult],
    verdicts: &[Verdict],
    pairs: &[(String, String)],
) -> Result<()> {
    let rounds = cells.iter().map(|c| c.round + 1).max().unwrap_or(1);
    let mut latency = Vec::new();
    let mut links = Vec::new();
    for c in cells {
        let mut rel = PathBuf::from(slug(&c.topology)).join(slug(&c.workload));
        if rounds > 1 {
            rel = rel.join(format!("round-{}", c.round + 1));
        }
        let dir = out.join(&rel);
        // A cell left out (its topology crashed) may have no complete run directory.
        let Ok(saved) = loadlab_run::read_run_dir(&dir) else {
            latency.push(None);
            links.push(None);
            continue;
        };
        let label = match rounds {
            1 => format!("{} / {}", c.topology, c.workload),
            _ => format!("{} / {} #{}", c.topology, c.workload, c.round + 1),
        };
        let view = RunView::from_saved(&label, &saved);
        loadlab_report::files::write_html(&dir.join("report.html"), &label, &[view])?;
        latency.push(saved.latency.clone());
        links.push(Some(rel.join("report.html").to_string_lossy().into_owned()));
    }
    let page = LabPage {
        title,
        cells,
        results,
        verdicts,
        pairs,
        latency,
        links,
    };
    let path = out.join("report.html");
    std::fs::write(&path, render_lab_html(&page))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
