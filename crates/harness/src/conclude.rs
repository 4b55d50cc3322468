//! A lab's conclusion, the same after `loadlab lab` ran it and when `loadlab report LAB_DIR`
//! reads it again: its cells judged, the comparison table, the verdicts and the thresholds
//! printed, and the lab directory's files written.

use std::path::Path;

use loadlab_run::lab::SavedLab;
use loadlab_run::ThresholdResult;

use crate::Result;

/// Judges `lab` against the host's `cores`, prints its table, verdicts and each cell's
/// thresholds, and writes `lab.json`, `comparison.csv` (with `html`, `report.html`; with
/// `junit`, the thresholds as JUnit XML); returns every cell's threshold results.
pub fn conclude_lab(
    lab: &SavedLab,
    cores: usize,
    html: bool,
    junit: Option<&Path>,
) -> Result<Vec<ThresholdResult>> {
    let judged = loadlab_analyze::lab::judge(lab, cores);
    println!("\n{}", loadlab_report::render_lab_table(&lab.cells));
    print!(
        "{}",
        loadlab_report::verdicts::render_verdicts(&judged.verdicts)
    );
    for line in &judged.disagreements {
        println!("  {line}");
    }
    let suites: Vec<(String, f64, Vec<ThresholdResult>)> = lab
        .cells
        .iter()
        .filter(|c| !c.summary.thresholds.is_empty())
        .map(|c| {
            let label = format!("{} / {}", c.topology, c.workload);
            (label, c.summary.duration_s, c.summary.thresholds.clone())
        })
        .collect();
    for (label, _, results) in &suites {
        println!("\n  {label}");
        print!("{}", loadlab_report::thresholds::render_thresholds(results));
    }
    if let Some(junit) = junit {
        loadlab_report::files::write_junit(junit, &suites).map_err(files_error)?;
        println!("  junit {}", junit.display());
    }
    loadlab_report::files::write_lab(lab, &judged, html).map_err(files_error)?;
    println!(
        "  results in {} (comparison.csv, lab.json, {}one run directory per cell)",
        lab.dir.display(),
        if html { "report.html, " } else { "" }
    );
    let all = suites.into_iter().flat_map(|(_, _, r)| r).collect();
    Ok(all)
}

/// A report file that could not be written, as the job's error.
fn files_error(e: loadlab_report::files::FileError) -> crate::HarnessError {
    crate::HarnessError::system("cannot write the lab's files", std::io::Error::other(e))
}
