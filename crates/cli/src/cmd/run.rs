//! `loadlab run`: lower the flags into a plan, run it with a live progress line, print the
//! summary and write the requested files.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use loadlab_harness::{execute, interrupt_signal, Progress, Watch};
use loadlab_report::files::{
    label_of, plot_is_png, writable, write_html, write_junit, write_plot, write_run_flame,
};
use loadlab_report::html::RunView;

use crate::args::RunArgs;
use crate::cmd::Outcome;

/// Runs `loadlab run`.
pub fn main(a: RunArgs) -> Result<Outcome> {
    if let [file] = a.load.urls.as_slice() {
        if file.ends_with(".py") {
            return locustfile(file, &a);
        }
    }
    crate::cmd::load_dotenv(a.load.script.dotenv.as_deref())?;
    let lowered = loadlab_input::lower::flags(&a.load)?;
    for w in &lowered.warnings {
        eprintln!("warning: {w}");
    }
    let plan = lowered.plan.traced(a.export.tracing())?;
    for e in &plan.endpoints {
        if let Some(why) = &e.unresolved {
            eprintln!(
                "warning: {} does not resolve ({why}): its requests will fail as `unresolved` \
                 (Artillery's ENOTFOUND) and the rest of the run goes on",
                e.authority
            );
        }
    }
    if let Some(at) = plan.start_at {
        loadlab_run::shard::check_start_at(at, std::time::SystemTime::now())?;
    }
    if let Some(plot) = &a.plot {
        plot_is_png(plot)?;
    }
    if a.html.as_ref().is_some_and(|f| f.is_empty()) && a.out.is_none() {
        anyhow::bail!(
            "--html without a file writes report.html into the run directory: add --out DIR, or \
             write --html=FILE"
        );
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    }
    for file in a.json.iter().chain(&a.junit) {
        writable(file)?;
    }
    let stop = interrupt_signal()?;
    let progress = match a.progress {
        _ if a.quiet => Progress::Off,
        Some(every) => Progress::Lines(every),
        None if std::io::stderr().is_terminal() => Progress::Terminal,
        None => Progress::Off,
    };
    let shard = plan.shard.as_ref();
    let outputs = crate::cmd::live_outputs(
        a.dashboard.as_deref(),
        &a.export,
        &stop,
        &crate::cmd::run_id(a.out.as_deref(), shard),
        shard,
    )?;
    outputs.begin(
        &plan.target_urls().join(" "),
        matches!(plan.model, loadlab_run::Model::Open { .. }),
        &plan,
        Vec::new(),
    );
    let watch = Watch {
        pids: a.watch_pid.clone(),
        stores: a.watch_redis.clone(),
        profile: a.profile,
        ..Watch::default()
    };
    if let Some(dir) = &a.out {
        outputs.write_seconds(dir, &plan)?;
    }
    if plan.start_at.is_some() && !a.quiet {
        eprintln!("waiting for the start time (--start-at)");
    }
    let (run, summary) = execute(&plan, &stop, progress, &watch, &outputs)?;
    print!("{}", loadlab_report::render_summary(&summary));
    if let Some(path) = &a.json {
        loadlab_run::write_summary(path, &summary)?;
    }
    let label = a
        .out
        .as_deref()
        .map_or_else(|| plan.target_urls().join(" "), label_of);
    // With a run directory, the report and the plot are drawn from what it holds, as
    // `loadlab report` and `lab --html` draw them.
    let view = match &a.out {
        Some(dir) => {
            loadlab_run::write_run_dir(dir, &run, &summary)?;
            if let Some(flame) = write_run_flame(dir, &label, &run)? {
                println!("  profile      {}", flame.display());
            }
            println!("  results in   {}", dir.display());
            RunView::from_saved(&label, &loadlab_run::read_run_dir(dir)?)
        }
        None => RunView::from_run(&label, &run, &summary),
    };
    if let Some(html) = html_path(a.html.as_deref(), a.out.as_deref()) {
        write_html(&html, &label, std::slice::from_ref(&view))?;
        println!("  report       {}", html.display());
    }
    if let Some(plot) = &a.plot {
        write_plot(plot, &label, &[view])?;
        println!("  plot         {}", plot.display());
    }
    if let Some(path) = &a.junit {
        let suite = (label, summary.duration_s, summary.thresholds.clone());
        write_junit(path, &[suite])?;
        println!("  junit        {}", path.display());
    }
    outputs.finish(&summary);
    outputs.close(a.dashboard_keep);
    let suggested = summary
        .users
        .as_ref()
        .and_then(|u| u.suggested_exit_code)
        .filter(|&c| c != 0);
    let crashed = summary.users.as_ref().and_then(|u| u.crashed.as_deref());
    Ok(if let Some(error) = crashed {
        // As Artillery: its worker dies of such a throw and the process exits 11 at once.
        println!(
            "  exit code    11: a processor function threw where Artillery's worker dies of it, and the run ended there: {error}"
        );
        Outcome::ScriptCrashed
    } else if !run.complete {
        Outcome::Interrupted
    } else if !a.load.is_scenario() && unreachable(&summary) {
        // A script exits as Artillery does, which answers 0 for a target it never reached.
        println!(
            "  exit code    4: not one request reached the target (refused, unresolved, timed out \
             connecting or failed the TLS handshake); check the URL and that the service is up"
        );
        Outcome::Unreachable
    } else if let Some(code) = suggested {
        // As Artillery: `process.exit(suggestedExitCode || exitCode)`; a process exit code is
        // its low 8 bits.
        let code = (code & 0xff) as u8;
        println!("  exit code    {code}, as the script's processor suggested (artillery.suggestedExitCode)");
        Outcome::Suggested(code)
    } else {
        match Outcome::judged(&summary.thresholds) {
            Outcome::Done if expectations_failed(&plan, &summary) => Outcome::ExpectationsFailed,
            Outcome::ThresholdsFailed if a.load.is_scenario() => Outcome::ScriptThresholdsFailed,
            // A script exits as its tool does; a URL run at a rate says it did not send it.
            Outcome::Done
                if !a.load.is_scenario()
                    && loadlab_analyze::health::fell_behind_its_rate(&summary.generator) =>
            {
                println!(
                    "  exit code    5: the generator saturated a thread and released arrivals up                      to {:.1} ms late (p99): the rate sent was not the rate asked for; give it                      threads (-t) or a core of its own",
                    summary.generator.schedule_lag_ms_p99
                );
                Outcome::GeneratorLimited
            }
            judged => judged,
        }
    })
}

/// True when requests ended, not one of them with an HTTP answer, and every one failed before
/// it could be sent: refused, unresolved, timed out connecting, or a failed TLS handshake. A
/// server that reset or closed what it was sent was reached.
fn unreachable(summary: &loadlab_run::Summary) -> bool {
    let e = &summary.errors;
    let before_sending = e.connect_refused + e.connect_timeout + e.unresolved + e.tls;
    summary.requests.completed > 0
        && summary.status.values().all(|&n| n == 0)
        && before_sending == summary.requests.completed
}

/// True when the script names the expect plugin and one of its checks failed; says so.
fn expectations_failed(plan: &loadlab_run::Plan, summary: &loadlab_run::Summary) -> bool {
    let named = plan.model.users().is_some_and(|u| u.checks_set_exit_code);
    let failed = summary
        .users
        .as_ref()
        .and_then(|u| u.metrics.as_ref())
        .and_then(|m| m.counters.get("plugins.expect.failed"))
        .copied()
        .unwrap_or(0.0);
    if named && failed > 0.0 {
        println!("  expect       {failed} check(s) failed (config.plugins.expect): exit code 21");
    }
    named && failed > 0.0
}

/// `loadlab run locustfile.py`: the file's users as `loadlab locust` runs them, with run's
/// flags: `-c` users (10 by default) started at once, `-d` the run time (10 s), `--target` the
/// host, `--out`, `--slo`, `-t` helpers.
fn locustfile(file: &str, a: &RunArgs) -> Result<Outcome> {
    let mut args = crate::args::LocustArgs::for_file(file);
    let users = a.load.connections.unwrap_or(10);
    args.host = a.load.target.clone();
    args.users = users;
    args.spawn_rate = users as f64;
    args.run_time = Some(
        a.load
            .duration
            .unwrap_or(std::time::Duration::from_secs(10)),
    );
    args.processes = a.load.threads;
    args.timeout = a.load.timeout;
    args.slo = a.load.slo.clone();
    args.out = a.out.clone();
    args.dashboard = a.dashboard.clone();
    args.export = a.export.clone();
    if let Some(seed) = a.load.seed {
        args.seed = seed;
    }
    crate::cmd::locust::main(args)
}

/// Where `--html` writes the report: FILE when given, else `report.html` in the `--out`
/// directory (the run's arguments were checked to have one).
fn html_path(html: Option<&str>, out: Option<&Path>) -> Option<PathBuf> {
    match (html, out) {
        (Some(file), _) if !file.is_empty() => Some(PathBuf::from(file)),
        (Some(_), Some(dir)) => Some(dir.join("report.html")),
        _ => None,
    }
}
