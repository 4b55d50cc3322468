//! Report files other commands write beside their runs: the HTML report, the charts as one
//! image, and JSON results; each refuses a bad name before anything runs.

use std::path::Path;

use loadlab_run::lab::{LabJson, SavedLab};

use crate::html::{render_html, RunView};
use crate::lab::{render_lab_html, LabPage};
use crate::plot::{plot_svg, png, PlotError};

/// A report file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The plot's name is neither `.png` nor `.svg`.
    #[error("--plot {0}: name the image .png or .svg")]
    PlotName(String),
    /// The image could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// The value could not be written as JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The file's directory does not exist.
    #[error("cannot write {file}: directory {dir} does not exist")]
    NoDirectory {
        /// The file.
        file: String,
        /// Its directory.
        dir: String,
    },
    /// A lab directory's `lab.json` could not be written.
    #[error(transparent)]
    LabDir(#[from] loadlab_run::lab::LabDirError),
    /// The file could not be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), FileError> {
    std::fs::write(path, bytes).map_err(|error| FileError::Write {
        path: path.display().to_string(),
        error,
    })
}

/// A run's name in reports: its folder's name.
pub fn label_of(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Writes the HTML report of `views` to `path`.
pub fn write_html(path: &Path, title: &str, views: &[RunView]) -> Result<(), FileError> {
    write(path, render_html(&format!("loadlab: {title}"), views))
}

/// Writes the JUnit XML of the thresholds of runs (`(label, duration_s, results)`) to `path`.
pub fn write_junit(
    path: &Path,
    suites: &[(String, f64, Vec<loadlab_run::ThresholdResult>)],
) -> Result<(), FileError> {
    write(path, crate::thresholds::junit_xml(suites))
}

/// Writes the flame graph of a profile's `stacks` to `path`.
fn write_flame(
    path: &Path,
    title: &str,
    stacks: &std::collections::BTreeMap<String, u64>,
) -> Result<(), FileError> {
    let svg = crate::flame::flame_svg(title, stacks).map_err(|error| FileError::Write {
        path: path.display().to_string(),
        error,
    })?;
    write(path, svg)
}

/// Writes `flame.svg` into run directory `dir` when the run recorded a profile; its path.
pub fn write_run_flame(
    dir: &Path,
    title: &str,
    run: &loadlab_run::RunData,
) -> Result<Option<std::path::PathBuf>, FileError> {
    let Some(loadlab_run::ProfileOutcome::Recorded(p)) = &run.profile else {
        return Ok(None);
    };
    let path = dir.join("flame.svg");
    write_flame(&path, title, &p.stacks)?;
    Ok(Some(path))
}

/// Writes the differential flame graph from `before`'s stacks to `after`'s to `path`.
pub fn write_flame_diff(
    path: &Path,
    title: &str,
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> Result<(), FileError> {
    let svg = crate::flame::diff_svg(title, before, after).map_err(|error| FileError::Write {
        path: path.display().to_string(),
        error,
    })?;
    write(path, svg)
}

/// Refuses, before a run, a file whose directory does not exist (rather than losing the run's
/// results at its end).
pub fn writable(file: &Path) -> Result<(), FileError> {
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
    match parent.filter(|p| !p.is_dir()) {
        Some(dir) => Err(FileError::NoDirectory {
            file: file.display().to_string(),
            dir: dir.display().to_string(),
        }),
        None => Ok(()),
    }
}

/// True for a `.png` plot, false for `.svg`; any other name is refused.
pub fn plot_is_png(path: &Path) -> Result<bool, FileError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => Err(FileError::PlotName(path.display().to_string())),
    }
}

/// Writes the main charts of `views` as one image, SVG or PNG by the file's extension.
pub fn write_plot(path: &Path, title: &str, views: &[RunView]) -> Result<(), FileError> {
    let svg = plot_svg(title, views);
    let bytes = if plot_is_png(path)? {
        png(&svg)?
    } else {
        svg.into_bytes()
    };
    write(path, bytes)
}

/// Writes `value` as pretty JSON to `path` (`--json` of probe, capacity and compare).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), FileError> {
    write(path, serde_json::to_string_pretty(value)? + "\n")
}

/// The files of a lab directory made from its cells as judged: `lab.json`, `comparison.csv`,
/// and with `html` `report.html`, the lab's page linking each cell's own report (written in
/// the cell's run directory, with its per-second charts).
pub fn write_lab(lab: &SavedLab, judged: &LabJson, html: bool) -> Result<(), FileError> {
    loadlab_run::lab::write_lab_json(&lab.dir, judged)?;
    write(
        &lab.dir.join("comparison.csv"),
        crate::lab_table::lab_csv(&lab.cells),
    )?;
    if !html {
        return Ok(());
    }
    let rounds = lab.experiment.rounds;
    let mut latency = Vec::new();
    let mut links = Vec::new();
    for c in &lab.cells {
        let rel = lab.cell_path(c);
        let dir = lab.dir.join(&rel);
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
        write_html(&dir.join("report.html"), &label, &[view])?;
        latency.push(saved.latency.clone());
        links.push(Some(rel.join("report.html").to_string_lossy().into_owned()));
    }
    let page = LabPage {
        title: &lab.experiment.name,
        cells: &lab.cells,
        results: &judged.cells,
        verdicts: &judged.verdicts,
        pairs: &lab.experiment.compare,
        latency,
        links,
    };
    write(&lab.dir.join("report.html"), render_lab_html(&page))
}
