//! One module per subcommand.

pub mod capacity;
pub mod compare;
pub mod consume;
pub mod demo;
pub mod docs;
pub mod k8s;
pub mod k8s_run;
pub mod lab;
pub mod locust;
pub mod merge;
pub mod probe;
pub mod report;
pub mod run;
pub mod serve;
pub mod validate;

/// Names this process `name` (at most 15 bytes) where `ps`, `top` and the lab's watch read
/// it (`/proc/PID/comm`), so a service's tiers are told apart: `loadlab-serve` answers,
/// `loadlab-consume` counts.
pub fn name_process(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from `buf`.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// Sets the variables of the dotenv file `file` that the environment does not set already,
/// as Artillery's `--dotenv` does before it reads a script; a file that cannot be read is a
/// warning, as there. Call it before any thread starts: it changes this process's environment.
pub fn load_dotenv(file: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context;
    let Some(file) = file else {
        return Ok(());
    };
    let entries = match dotenvy::from_path_iter(file) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!(
                "warning: could not read the dotenv file {}: {e}",
                file.display()
            );
            return Ok(());
        }
    };
    for entry in entries {
        let (name, value) = entry.with_context(|| {
            format!(
                "the dotenv file {} has a line it cannot read",
                file.display()
            )
        })?;
        if std::env::var_os(&name).is_none() {
            std::env::set_var(name, value);
        }
    }
    Ok(())
}

/// How a subcommand ended, for the exit code.
pub enum Outcome {
    /// It did what was asked.
    Done,
    /// Ctrl-C stopped it; partial results were written.
    Interrupted,
    /// It ran, and found that no load met the objective (`loadlab capacity`).
    NotMet,
    /// It ran, and not one request got an answer from the target: every one failed to
    /// connect, resolve or finish its handshake.
    Unreachable,
    /// It ran, and a strict threshold (`--slo`, `ensure`) failed.
    ThresholdsFailed,
    /// It ran at a rate against URLs, and the generator saturated a thread and fell behind
    /// its schedule: the figures are of a lower rate than the one asked for.
    GeneratorLimited,
    /// A lab's verdicts changed against the baseline lab (`--baseline`).
    VerdictsChanged,
    /// It ran an Artillery script, and a strict threshold failed: Artillery's exit code for
    /// a failed `ensure`, so CI jobs written for Artillery read it alike.
    ScriptThresholdsFailed,
    /// It ran, its thresholds held, and a check of the expect plugin failed (a script that
    /// names `config.plugins.expect`).
    ExpectationsFailed,
    /// It ran, and the script's processor suggested this exit code
    /// (`artillery.suggestedExitCode`), which wins over the others as in Artillery.
    Suggested(u8),
    /// A processor function threw where Artillery's worker dies of it, which ended the run:
    /// Artillery's exit code for it, over every other.
    ScriptCrashed,
}

/// Reads the lab just judged in `dir` against the lab in `baseline`, verdict by verdict, and
/// prints what changed; true when any verdict's answer did.
pub fn against_baseline(dir: &std::path::Path, baseline: &std::path::Path) -> anyhow::Result<bool> {
    let (before, now) = (finished_lab(baseline)?, finished_lab(dir)?);
    let c = loadlab_analyze::lab_change::changes(&before.verdicts, &now.verdicts);
    let unmatched = if c.unmatched > 0 {
        format!(
            " ({} made by one lab only: the experiments differ)",
            c.unmatched
        )
    } else {
        String::new()
    };
    if c.changed.is_empty() {
        println!(
            "
  against the baseline {}: none of {} verdicts changed{unmatched}",
            baseline.display(),
            c.compared
        );
    } else {
        println!(
            "
  against the baseline {}: {} of {} verdicts changed{unmatched}",
            baseline.display(),
            c.changed.len(),
            c.compared
        );
        for change in &c.changed {
            println!("    {}", change.line());
        }
    }
    Ok(!c.changed.is_empty())
}

/// Refuses a `--baseline` that is no finished lab before anything runs.
pub fn baseline_is_a_lab(baseline: &std::path::Path) -> anyhow::Result<()> {
    finished_lab(baseline).map(|_| ())
}

/// The `lab.json` of the finished lab in `dir`, or an error saying what `--baseline` needs.
fn finished_lab(dir: &std::path::Path) -> anyhow::Result<loadlab_run::lab::LabJson> {
    loadlab_run::lab::read_lab_json(dir)?.ok_or_else(|| {
        anyhow::anyhow!(
            "{} has no lab.json: give --baseline a lab directory that finished (from `lab --out`)",
            dir.display()
        )
    })
}

impl Outcome {
    /// A lab's outcome: its thresholds' first, then whether its verdicts `changed` against a
    /// baseline lab (said with its exit code).
    pub fn of_lab(thresholds: &[loadlab_run::ThresholdResult], changed: bool) -> Outcome {
        match Outcome::judged(thresholds) {
            Outcome::Done if changed => {
                println!("  exit code 6: verdicts changed against the baseline lab");
                Outcome::VerdictsChanged
            }
            judged => judged,
        }
    }

    /// `Done`, or `ThresholdsFailed` when any of `results` fails the run.
    pub fn judged(results: &[loadlab_run::ThresholdResult]) -> Outcome {
        if results.iter().any(loadlab_run::ThresholdResult::fails_run) {
            Outcome::ThresholdsFailed
        } else {
            Outcome::Done
        }
    }
}

/// The live outputs a command's flags ask for: the dashboard at `dashboard`, and the metric
/// exporters of `export`, whose series name the run `run_id` (and its shard).
pub fn live_outputs(
    dashboard: Option<&str>,
    export: &crate::args::ExportFlags,
    stop: &loadlab_engine::StopSignal,
    run_id: &str,
    shard: Option<&loadlab_run::Shard>,
) -> anyhow::Result<loadlab_harness::LiveOutputs> {
    use loadlab_harness::export::{ExportOptions, Exporter};
    let mut options = ExportOptions::from_flags(
        export.remote_write.as_deref(),
        &export.remote_write_header,
        export.otlp.as_deref(),
        &export.otlp_header,
        |k| std::env::var(k).ok(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    if !options.resource.iter().any(|(k, _)| k == "service.name") {
        options
            .resource
            .insert(0, ("service.name".into(), "loadlab".into()));
    }
    options
        .resource
        .push(("loadlab.run.id".into(), run_id.to_string()));
    if let Some(s) = shard {
        options.resource.push((
            "loadlab.shard".into(),
            format!("{}/{}", s.index + 1, s.count),
        ));
    }
    let to: Vec<String> = [
        options
            .remote_write
            .as_ref()
            .map(|u| format!("remote write {u}")),
        options.otlp_metrics.as_ref().map(|u| format!("OTLP {u}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !to.is_empty() {
        println!("  exporting    {} (run id {run_id})", to.join(", "));
    }
    Ok(loadlab_harness::LiveOutputs {
        dashboard: loadlab_harness::Dashboard::start_if(dashboard, stop)?,
        export: Exporter::start(&options),
        ..Default::default()
    })
}

/// A run's id for its exported series: the plan's fingerprint for a shard (every shard of a
/// plan shares it), the run directory's name when there is one, else the start time and PID.
pub fn run_id(out: Option<&std::path::Path>, shard: Option<&loadlab_run::Shard>) -> String {
    if let Some(s) = shard {
        return format!("{:016x}", s.plan_hash);
    }
    if let Some(name) = out.and_then(|d| d.file_name()).and_then(|n| n.to_str()) {
        return name.to_string();
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{secs}-{}", std::process::id())
}

/// A run directory read back: a finished run's files, or a run that stopped before its end
/// (killed, out of power) with its summary rebuilt from the seconds it wrote, printed with a
/// line that says so.
pub fn read_run(dir: &std::path::Path) -> anyhow::Result<loadlab_run::SavedRun> {
    if !loadlab_run::is_stopped_run(dir) {
        return Ok(loadlab_run::read_run_dir(dir)?);
    }
    let run = loadlab_run::read_stopped_run(dir)?;
    let summary = loadlab_analyze::summarize(&run, loadlab_harness::cores());
    println!(
        "{}: the run stopped after {} s, before its end (it has no summary.json); read from the \
         seconds it wrote (seconds.jsonl, timeline.csv, latency.hlog):",
        dir.display(),
        run.elapsed.as_secs()
    );
    print!("{}", loadlab_report::render_summary(&summary));
    Ok(loadlab_run::read_run_files(dir, summary)?)
}
