//! `loadlab lab EXPERIMENT.yaml`: every workload against every topology, round after round,
//! each cell a run directory of the lab directory; then the comparison table, the verdicts of
//! each factor the experiment varies, and `lab.json`, `comparison.csv` (and `report.html`).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use loadlab_harness::{conclude_lab, cores, interrupt_signal, run_matrix};
use loadlab_run::lab::slug;

use crate::args::LabArgs;
use crate::cmd::Outcome;

/// Runs `loadlab lab`.
pub fn main(a: LabArgs) -> Result<Outcome> {
    if a.export.trace_sample.is_some() {
        anyhow::bail!(
            "--trace-sample traces `loadlab run`'s requests only for now; run the workload you \
             want traced with `loadlab run URL --trace-sample RATIO --otlp`"
        );
    }
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
    // Budgets that do not fit are refused before anything starts or prints.
    loadlab_harness::matrix::placements(&exp)?;
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
    let outputs = crate::cmd::live_outputs(
        a.dashboard.as_deref(),
        &a.export,
        &stop,
        &crate::cmd::run_id(Some(&out), None),
        None,
    )?;
    let lab = run_matrix(&exp, &out, &stop, &outputs)?;
    let thresholds = conclude_lab(&lab, cores(), a.html, a.junit.as_deref())?;
    if let (Some(d), Some(last)) = (&outputs.dashboard, lab.cells.last()) {
        // The page follows the lab cell by cell and says done only now.
        d.finish(&last.summary);
    }
    outputs.close(a.dashboard_keep);
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::judged(&thresholds)
    })
}
