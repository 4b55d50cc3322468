//! `loadlab run`: lower the flags into a plan, run it with a live progress line, print the
//! summary and write the requested files.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use loadlab_engine::StopSignal;
use loadlab_run::{RunData, Summary, ValidPlan};

use crate::args::RunArgs;
use crate::cmd::Outcome;
use crate::lower::plan_from_args;

/// Runs `loadlab run`.
pub fn main(a: RunArgs) -> Result<Outcome> {
    let plan = match a.urls.first() {
        Some(first) if crate::scenario::is_scenario(first) => {
            crate::scenario::plan_from_scenario(std::path::Path::new(first), &a)?
        }
        _ => plan_from_args(&a)?,
    };
    if let Some(plot) = &a.plot {
        crate::cmd::report::plot_is_png(plot)?;
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    }
    if let Some(json) = &a.json {
        let parent = json.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.is_dir()) {
            anyhow::bail!(
                "cannot write {}: directory {} does not exist",
                json.display(),
                parent.display()
            );
        }
    }
    let stop = interrupt_signal()?;
    let live = !a.quiet && std::io::stderr().is_terminal();
    let dashboard = crate::dashboard::Dashboard::start_if(a.dashboard.as_deref(), &stop)?;
    if let Some(d) = &dashboard {
        d.begin(
            &plan.target_urls().join(" "),
            matches!(plan.model, loadlab_run::Model::Open { .. }),
        );
    }
    let (run, summary) = execute(&plan, &stop, live, &a.watch_pid, dashboard.as_ref())?;
    print!("{}", loadlab_report::render_summary(&summary));
    if let Some(path) = &a.json {
        loadlab_run::write_summary(path, &summary)?;
    }
    let label = a.out.as_deref().map_or_else(
        || plan.target_urls().join(" "),
        crate::cmd::report::label_of,
    );
    let view = loadlab_report::html::RunView::from_run(&label, &run, &summary);
    if let Some(dir) = &a.out {
        loadlab_run::write_run_dir(dir, &run, &summary)?;
        if a.html {
            crate::cmd::report::write_html(
                &dir.join("report.html"),
                &label,
                std::slice::from_ref(&view),
            )?;
        }
        println!("  results in   {}", dir.display());
    }
    if let Some(plot) = &a.plot {
        crate::cmd::report::write_plot(plot, &label, &[view])?;
        println!("  plot         {}", plot.display());
    }
    if let Some(d) = dashboard {
        d.finish(&summary);
        d.close(a.dashboard_keep);
    }
    Ok(if run.complete {
        Outcome::Done
    } else {
        Outcome::Interrupted
    })
}

/// Runs a plan, showing a live progress line on stderr when `live` and watching the
/// processes `watch` (and their children), and summarizes it.
pub fn execute(
    plan: &ValidPlan,
    stop: &StopSignal,
    live: bool,
    watch: &[i32],
    dashboard: Option<&crate::dashboard::Dashboard>,
) -> Result<(RunData, Summary)> {
    let sampler = if watch.is_empty() {
        None
    } else {
        Some(loadlab_lab::Sampler::start(watch, Duration::from_secs(1))?)
    };
    let mut errors = 0u64;
    let mut stderr = std::io::stderr();
    let mut run = loadlab_engine::run(plan, stop, |row, iv| {
        if let Some(d) = dashboard {
            d.add(row, iv);
        }
        if live {
            errors += row.completed - row.status_classes[..3].iter().sum::<u64>();
            let _ = write!(
                stderr,
                "\r{}\x1b[K",
                loadlab_report::progress_line(row, errors)
            );
            let _ = stderr.flush();
        }
    })?;
    if live {
        let _ = write!(stderr, "\r\x1b[K");
    }
    if let Some(sampler) = sampler {
        run.attach_server(sampler.finish());
    }
    let mut summary = Summary::from_run(&run);
    summary.findings = loadlab_analyze::findings(&run, &summary, cores());
    Ok((run, summary))
}

/// CPUs this machine offers: what a service on it could use, for the findings' capacity.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The process-wide stop signal, raised by the first Ctrl-C; a second Ctrl-C exits at once.
pub fn interrupt_signal() -> Result<StopSignal> {
    static SIGNAL: std::sync::OnceLock<StopSignal> = std::sync::OnceLock::new();
    if let Some(s) = SIGNAL.get() {
        return Ok(s.clone());
    }
    let stop = StopSignal::default();
    let handler_stop = stop.clone();
    ctrlc::set_handler(move || {
        if handler_stop.is_stopped() {
            std::process::exit(130);
        }
        handler_stop.stop();
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(SIGNAL.get_or_init(|| stop).clone())
}
