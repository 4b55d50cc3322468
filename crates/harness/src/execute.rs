//! One plan run as every subcommand runs it: the watched processes sampled from `/proc`, a
//! live progress line or dashboard fed each second, and the summary with its findings.

use std::io::Write;
use std::time::Duration;

use loadlab_engine::StopSignal;
use loadlab_run::{RunData, Summary, ValidPlan};

use crate::outputs::LiveOutputs;
use crate::Result;

/// What the lab watches while a plan runs.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Processes (and their children) sampled each second for CPU and memory.
    pub pids: Vec<i32>,
    /// Redis servers sampled each second for commands, memory and stream backlogs.
    pub stores: Vec<String>,
    /// Also profile the processes' CPU during the steady state.
    pub profile: bool,
    /// Control groups of budgeted processes, read each second for CPU against the quota,
    /// throttling, memory and OOM kills.
    pub groups: Vec<loadlab_lab::cgroup::Group>,
    /// The cores the watched processes and the generator were pinned to, when split.
    pub cores: Option<loadlab_run::summary::ServerCores>,
    /// An autoscaled topology's record, whose seconds during the run are attached to it.
    pub scaling: Option<loadlab_lab::autoscale::scaler::Recording>,
}

/// Longest profiling window.
const MAX_PROFILE: Duration = Duration::from_secs(30);

/// How a run shows its progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing.
    Off,
    /// One line redrawn each second, for a terminal.
    Terminal,
    /// A [`loadlab_report::LoggedProgress`] line each period (whole seconds, at least one), for
    /// a log.
    Lines(Duration),
}

/// Runs a plan, showing its progress on stderr as `progress` says and watching what `watch`
/// names, and summarizes it with its findings. A script's `before` flow runs first, once, and
/// its captures are every user's; its `after` flow runs once at the end.
pub fn execute(
    plan: &ValidPlan,
    stop: &StopSignal,
    progress: Progress,
    watch: &Watch,
    outputs: &LiveOutputs,
) -> Result<(RunData, Summary)> {
    let vars = match plan.once(false) {
        Some(before) => once(&before, stop, "before")?,
        None => Default::default(),
    };
    let with_vars = (!vars.is_empty()).then(|| plan.with_vars(&vars));
    let plan = with_vars.as_ref().unwrap_or(plan);
    let ran = execute_plan(plan, stop, progress, watch, outputs)?;
    if let Some(after) = plan.once(true) {
        if !stop.is_stopped() {
            once(&after, stop, "after")?;
        }
    }
    Ok(ran)
}

/// Runs a `before` or `after` flow's plan: the variables its user ended with, or the reason
/// it failed as an error.
fn once(
    plan: &ValidPlan,
    stop: &StopSignal,
    flow: &'static str,
) -> Result<std::collections::BTreeMap<String, String>> {
    let started = std::time::Instant::now();
    let run = loadlab_engine::run(plan, stop, |_, _| {})?;
    let users = run.users.unwrap_or_default();
    let reason = match users.failures.keys().next() {
        Some(r) => Some(r.clone()),
        None if run.totals.counts.users_started == 0 && !stop.is_stopped() => {
            Some("its user did not start".to_string())
        }
        None => None,
    };
    if let Some(reason) = reason {
        return Err(crate::HarnessError::Once {
            flow,
            reason,
            what: if flow == "before" {
                "was not run"
            } else {
                "ran"
            },
        });
    }
    eprintln!(
        "{flow}: its flow ran once ({} request(s), {:.0} ms)",
        run.totals.counts.completed,
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(users.vars.unwrap_or_default())
}

/// Runs one plan as [`execute`] does, without its `before` and `after` flows.
fn execute_plan(
    plan: &ValidPlan,
    stop: &StopSignal,
    progress: Progress,
    watch: &Watch,
    outputs: &LiveOutputs,
) -> Result<(RunData, Summary)> {
    let sampler = if watch.pids.is_empty()
        && watch.stores.is_empty()
        && watch.groups.is_empty()
        && watch.scaling.is_none()
    {
        None
    } else {
        let feed = outputs.feed();
        // An autoscaled topology's instances are watched while they live.
        let members = watch
            .scaling
            .clone()
            .map(|scaling| Box::new(move || scaling.members()) as loadlab_lab::sampler::Members);
        Some(loadlab_lab::Sampler::start_feeding(
            &watch.pids,
            &watch.stores,
            &watch.groups,
            members,
            Duration::from_secs(1),
            feed,
        )?)
    };
    let profiler = (watch.profile && !watch.pids.is_empty()).then(|| {
        let (delay, length) = profile_window(plan.stop.duration);
        loadlab_lab::profile::Profiler::start(&watch.pids, delay, length)
    });
    let mut errors = 0u64;
    let mut completed = 0u64;
    // The last second's progress, and whether its line was written (a log's last line is the
    // run's last second, whatever the period).
    let mut last: Option<(loadlab_report::LoggedProgress, bool)> = None;
    let mut stderr = std::io::stderr();
    let began = std::time::Instant::now();
    let run = loadlab_engine::run(plan, stop, |row, iv| {
        match &watch.scaling {
            // The live view draws the instances beside the load as they change.
            Some(scaling) => outputs.add(&scaling.mark(row), iv),
            None => outputs.add(row, iv),
        }
        errors += row.completed - row.status_classes[..3].iter().sum::<u64>();
        completed += row.completed;
        match progress {
            Progress::Off => {}
            Progress::Terminal => {
                let _ = write!(
                    stderr,
                    "\r{}\x1b[K",
                    loadlab_report::progress_line(row, errors)
                );
                let _ = stderr.flush();
            }
            Progress::Lines(every) => {
                let now = loadlab_report::LoggedProgress {
                    elapsed_s: row.second + 1,
                    completed,
                    last_second: row.completed,
                    p99_ms: row.p99_ms,
                    in_flight: row.in_flight,
                    errors,
                };
                let due = now.elapsed_s.is_multiple_of(every.as_secs().max(1));
                if due {
                    let _ = writeln!(stderr, "{}", now.line());
                }
                last = Some((now, due));
            }
        }
    });
    let seconds_failed = outputs.end_seconds();
    let mut run = run?;
    if let Some((now, false)) = last {
        let _ = writeln!(stderr, "{}", now.line());
    }
    if progress == Progress::Terminal {
        let _ = write!(stderr, "\r\x1b[K");
    }
    if let Some(sampler) = sampler {
        let mut server = sampler.finish();
        server.cores = watch.cores.clone();
        run.attach_server(server);
    }
    run.profile = profiler.map(loadlab_lab::profile::Profiler::finish);
    if let Some(scaling) = &watch.scaling {
        run.attach_scaling(scaling.during(began, std::time::Instant::now()));
    }
    let mut summary = loadlab_analyze::summarize(&run, cores());
    if let Some(why) = seconds_failed {
        summary.generator.warnings.push(format!(
            "the run directory stopped growing a second at a time ({why}); its files are \
             written whole at the run's end"
        ));
    }
    Ok((run, summary))
}

/// When to profile a run of `duration`: after the first fifth (the warm-up), for the next
/// three fifths at most (and at most 30 s); a run stopped by a count gets a window from 1 s
/// on, cut short when it ends.
fn profile_window(duration: Option<Duration>) -> (Duration, Duration) {
    match duration {
        Some(d) => (d / 5, (d * 3 / 5).min(MAX_PROFILE)),
        None => (Duration::from_secs(1), MAX_PROFILE),
    }
}

/// CPUs this machine offers: what a service on it could use, for the findings' capacity.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
