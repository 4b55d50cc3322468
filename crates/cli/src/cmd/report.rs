//! `loadlab report RUN_DIR...`: the self-contained HTML report of one run, or of several
//! overlaid on the same axes; and the `--html` / `--plot` files other commands write.

use std::path::PathBuf;

use anyhow::Result;
use loadlab_report::files::{label_of, plot_is_png, write_html, write_plot};
use loadlab_report::html::RunView;

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
