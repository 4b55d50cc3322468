//! `loadlab lab EXPERIMENT.yaml`: every workload against every topology, round after round,
//! each cell a run directory of the lab directory; then the comparison table, the verdicts of
//! each factor the experiment varies, and `lab.json`, `comparison.csv` (and `report.html`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use loadlab_harness::{conclude_lab, cores, interrupt_signal, run_matrix};
use loadlab_input::experiment::{Experiment, Load};
use loadlab_run::lab::{read_lab_dir, slug, SavedLab};

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
    // Every workload is lowered once before anything starts or is written.
    let lengths = exp
        .check_workloads()
        .map_err(|(name, e)| anyhow::anyhow!("workload {name:?}: {e}"))?;
    if let Some(junit) = &a.junit {
        loadlab_report::files::writable(junit)?;
    }
    if let Some(baseline) = &a.baseline {
        crate::cmd::baseline_is_a_lab(baseline)?;
    }
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("{}-{stamp}", slug(&exp.name)))
    });
    // Budgets that do not fit are refused before anything starts or prints.
    loadlab_harness::matrix::placements(&exp)?;
    if a.check {
        print!("{}", plan_in_words(&exp, &lengths));
        return Ok(Outcome::Done);
    }
    let resumed = match a.resume {
        true => Some(to_resume(&exp, &a.file, &out)?),
        false if out.join("experiment.json").exists() => anyhow::bail!(
            "{} already holds a lab: continue it with --resume, or give another --out",
            out.display()
        ),
        false => None,
    };
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
    if let Some(lab) = &resumed {
        let all = exp.topologies.len() * exp.workloads.len() * exp.rounds;
        println!(
            "  resuming {}: {} of {all} cells finished before and are kept",
            out.display(),
            lab.cells.len()
        );
    }
    let lab = run_matrix(&exp, &out, &stop, &outputs, resumed)?;
    let thresholds = conclude_lab(&lab, cores(), a.html, a.junit.as_deref())?;
    if let (Some(d), Some(last)) = (&outputs.dashboard, lab.cells.last()) {
        // The page follows the lab cell by cell and says done only now.
        d.finish(&last.summary);
    }
    outputs.close(a.dashboard_keep);
    if stop.is_stopped() {
        return Ok(Outcome::Interrupted);
    }
    let changed = match &a.baseline {
        Some(baseline) => crate::cmd::against_baseline(&lab.dir, baseline)?,
        None => false,
    };
    Ok(Outcome::of_lab(&thresholds, changed))
}

/// The lab in `out` that `lab --resume` continues, read back with its finished cells; refused
/// when there is none, or when `file` (the experiment `exp` was read from) changed since it began.
fn to_resume(exp: &Experiment, file: &Path, out: &Path) -> Result<SavedLab> {
    if !out.join("experiment.json").exists() {
        anyhow::bail!(
            "{} holds no lab to resume (no experiment.json); drop --resume to start one there",
            out.display()
        );
    }
    let lab = read_lab_dir(out)?;
    let Some(began) = &lab.experiment.fingerprint else {
        anyhow::bail!(
            "the lab in {} kept no fingerprint of its experiment (an older loadlab wrote it), so \
             loadlab cannot tell whether {} changed; run it again into another --out",
            out.display(),
            file.display()
        );
    };
    let changes = exp.fingerprint().changes_since(began);
    if !changes.is_empty() {
        anyhow::bail!(
            "{} changed since the lab in {} began: {}; undo the change, or run it into another \
             --out",
            file.display(),
            out.display(),
            changes.join(", ")
        );
    }
    Ok(lab)
}

/// What `lab --check` prints: the cells, what bounds each workload's cell, and how long the
/// lab takes at most, from the workloads' own bounds and the lab's waits between cells.
fn plan_in_words(exp: &Experiment, lengths: &[Option<Duration>]) -> String {
    let cells = exp.topologies.len() * exp.workloads.len() * exp.rounds;
    let mut out = format!(
        "loadlab lab: {} — {} topologies × {} workloads × {} round(s) = {cells} cells; checked, \
         nothing ran\n",
        exp.name,
        exp.topologies.len(),
        exp.workloads.len(),
        exp.rounds
    );
    let width = exp
        .workloads
        .iter()
        .map(|w| w.name.len())
        .max()
        .unwrap_or(0);
    let (mut load, mut unbounded) = (Duration::ZERO, 0usize);
    for (w, length) in exp.workloads.iter().zip(lengths) {
        let (said, bound) = match (&w.load, length) {
            (Load::Run(_), Some(d)) => (words(*d), Some(*d)),
            (Load::Run(_), None) => ("until its requests are done: no bound in time".into(), None),
            (Load::Capacity(f), _) => (
                format!("capacity search, at most {}", words(f.max_time)),
                Some(f.max_time),
            ),
            (Load::Probe(f), _) => {
                let l = loadlab_harness::probe::limits_of(f);
                // Open-model steps may follow the closed loop for a service that refuses.
                let most = l.max_time.max(l.max_time_varied) + Duration::from_secs(30);
                (format!("probe, at most {}", words(most)), Some(most))
            }
        };
        match bound {
            Some(d) => load += d,
            None => unbounded += 1,
        }
        out.push_str(&format!("  {:<width$}  {said}\n", w.name));
    }
    let per_round = exp.topologies.len() as u32 * exp.rounds as u32;
    let load = load * per_round;
    let settle = loadlab_harness::matrix::SETTLE_WAIT * cells as u32;
    out.push_str(&format!(
        "  at most {} of load, plus up to {} between cells while each target settles: about {} \
         in all (10 s more for a cell after which nginx took a replica out of its round, and a \
         topology's start each time one starts again)",
        words(load),
        words(settle),
        words(load + settle)
    ));
    if unbounded > 0 {
        out.push_str(&format!(
            ", and more: {unbounded} workload(s) end on a count of requests, not a time"
        ));
    }
    out.push('\n');
    out
}

/// A length in hours, minutes and seconds, to the second.
fn words(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, m, _) => format!("{h} h {m:02} min"),
    }
}
