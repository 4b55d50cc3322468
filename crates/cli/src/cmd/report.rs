//! `loadlab report RUN_DIR...`: the self-contained HTML report of one run, or of several
//! overlaid on the same axes; and the `--html` / `--plot` files other commands write.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use loadlab_report::html::{render_html, RunView};
use loadlab_report::plot::{plot_svg, png};

use crate::args::ReportArgs;
use crate::cmd::Outcome;

/// Runs `loadlab report`.
pub fn main(a: ReportArgs) -> Result<Outcome> {
    if let Some(plot) = &a.plot {
        plot_is_png(plot)?;
    }
    let mut views = Vec::new();
    for dir in &a.runs {
        let saved = loadlab_run::read_run_dir(dir)?;
        views.push(RunView::from_saved(&label_of(dir), &saved));
    }
    let out = match (&a.out, a.runs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) => one.join("report.html"),
        (None, _) => PathBuf::from("report.html"),
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
    Ok(Outcome::Done)
}

/// A run's name in reports: its folder's name.
pub fn label_of(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Writes the HTML report of `views` to `path`.
pub fn write_html(path: &Path, title: &str, views: &[RunView]) -> Result<()> {
    let html = render_html(&format!("loadlab: {title}"), views);
    std::fs::write(path, html).with_context(|| format!("cannot write {}", path.display()))
}

/// True for a `.png` plot, false for `.svg`; any other name is refused before anything runs.
pub fn plot_is_png(path: &Path) -> Result<bool> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => bail!("--plot {}: name the image .png or .svg", path.display()),
    }
}

/// Writes the main charts of `views` as one image, SVG or PNG by the file's extension.
pub fn write_plot(path: &Path, title: &str, views: &[RunView]) -> Result<()> {
    let svg = plot_svg(title, views);
    let bytes = if plot_is_png(path)? {
        png(&svg)?
    } else {
        svg.into_bytes()
    };
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
