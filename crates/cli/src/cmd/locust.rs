//! `loadlab locust`: run a locustfile unchanged with Locust's command line. The first Python
//! helper imports the file and fires `init` and `test_start`; the plan takes the user classes,
//! hosts, users, spawn rate and run time as the file's listeners left them, then each
//! generator thread's helper (the first one taken over) runs its share of the users while
//! loadlab's engine sends their requests; the summary is loadlab's and Locust's tables, and
//! `--csv` writes Locust's files.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context, Result};
use loadlab_engine::locustfile;
use loadlab_harness::{execute, interrupt_signal, Progress, Watch};
use loadlab_input::locust::LocustRun;
use loadlab_input::target::Lookup;
use loadlab_run::users::LocustSpec;

use crate::args::LocustArgs;
use crate::cmd::Outcome;

/// The locustfile's path as the helpers take it: each of a comma list made absolute.
fn absolute(files: &str) -> Result<String> {
    let mut out = Vec::new();
    for f in files.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let path = Path::new(f);
        if !path.exists() {
            bail!("{f}: no such locustfile; give it with -f FILE");
        }
        out.push(
            std::fs::canonicalize(path)
                .with_context(|| format!("cannot read {f}"))?
                .display()
                .to_string(),
        );
    }
    if out.is_empty() {
        bail!("no locustfile given; give it with -f FILE");
    }
    Ok(out.join(","))
}

/// The helpers' instructions for `a`, the interpreter and package made ready.
pub fn spec(a: &LocustArgs) -> Result<LocustSpec> {
    let python = locustfile::python()?;
    let package = locustfile::package().context("cannot write loadlab's locust package")?;
    let options = serde_json::json!({
        "locustfile": a.locustfile,
        "host": a.host,
        "num_users": a.users,
        "users": a.users,
        "spawn_rate": a.spawn_rate,
        "run_time": a.run_time.map(|d| d.as_secs()),
        "headless": true,
        "tags": a.tags,
        "exclude_tags": a.exclude_tags,
        "stop_timeout": a.stop_timeout,
        "iterations": a.iterations,
        "csv_prefix": a.csv,
        "html_file": a.html,
        "exit_code_on_error": a.exit_code_on_error,
        "processes": a.processes,
        "user_classes": a.classes,
    });
    Ok(LocustSpec {
        file: absolute(&a.locustfile)?,
        python,
        package,
        host: a.host.clone(),
        classes: a.classes.clone(),
        tags: a.tags.clone(),
        exclude_tags: a.exclude_tags.clone(),
        options,
        file_args: a.file_args.clone(),
        shape: false,
        stop_timeout: std::time::Duration::from_secs_f64(a.stop_timeout.clamp(0.0, 3600.0)),
        iterations: a.iterations,
        first: None,
        shared: None,
    })
}

/// The plan of `a` with the settings `first` (helper 0) read after the file's listeners; says
/// on the terminal what the run will do.
fn plan_of(
    a: &LocustArgs,
    spec: &mut LocustSpec,
    first: &locustfile::First,
) -> Result<loadlab_run::ValidPlan> {
    let shape = first.shape;
    let settings = &first.settings;
    spec.shape = shape;
    spec.first = Some(first.key);
    spec.shared = Some(first.shared.clone());
    spec.stop_timeout =
        std::time::Duration::try_from_secs_f64(settings.stop_timeout.clamp(0.0, 3600.0))
            .unwrap_or_default();
    // The environment's host is every class's when set; the classes report theirs as given.
    // Only HTTP users send through the engine: a plain User's host is its own (a gRPC
    // channel's `localhost:50051`), and a run of plain Users alone needs no HTTP host.
    let http = |c: &&locustfile::UserClass| c.kind.as_deref() != Some("user");
    let http_classes: Vec<_> = first.classes.iter().filter(http).collect();
    let mut hosts: Vec<String> = settings
        .host
        .iter()
        .filter(|h| !http_classes.is_empty() || h.starts_with("http"))
        .cloned()
        .collect();
    hosts.extend(http_classes.iter().filter_map(|c| c.host.clone()));
    if hosts.is_empty() && !http_classes.is_empty() {
        bail!("no host: give -H http://HOST[:PORT], or set host on the User classes");
    }
    let names: Vec<&str> = first.classes.iter().map(|c| c.name.as_str()).collect();
    let users = usize::try_from(settings.num_users).unwrap_or(usize::MAX);
    let run_time = settings
        .run_time
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| std::time::Duration::from_secs_f64(s.min(1e9)));
    eprintln!(
        "loadlab locust: {} with {} ({}{}); loadlab's engine sends the requests",
        spec.file,
        if names.is_empty() {
            "no user class".to_string()
        } else {
            names.join(", ")
        },
        if shape {
            "users set by its LoadTestShape".to_string()
        } else {
            format!("{users} users, {} started per second", settings.spawn_rate)
        },
        run_time
            .filter(|_| !shape)
            .map_or(String::new(), |d| format!(
                ", for {}",
                humantime::format_duration(d)
            )),
    );
    let changed = changed_by_listeners(a, settings, users, run_time);
    if !changed.is_empty() && !shape {
        eprintln!(
            "note: the file's listeners set {} in parsed_options; the run uses them, as Locust's",
            changed.join(", ")
        );
    }
    // As Locust's headless runner: a shape's tick() alone sets the users and ends the run;
    // -t, -u and -r reach it as parsed options, for a shape that reads them.
    if shape && (a.run_time.is_some() || a.users != 1 || a.spawn_rate != 1.0) {
        eprintln!(
            "note: the file's LoadTestShape sets the users and ends the run: --run-time, --users \
             and --spawn-rate only reach it as parsed options (use_common_options), as in Locust"
        );
    }
    let run = LocustRun {
        spec: spec.clone(),
        hosts,
        users,
        spawn_rate: Some(settings.spawn_rate),
        run_time: if shape { None } else { run_time },
        threads: a.processes,
        seed: a.seed,
        timeout: a.timeout,
        thresholds: a.slo.iter().flat_map(|l| l.0.iter().cloned()).collect(),
    };
    let plan = loadlab_input::locust::plan(&run, Lookup::Resolve)?.traced(a.export.tracing())?;
    Ok(plan)
}

/// The settings the file's listeners changed from the command line's, as `-u 7` words.
fn changed_by_listeners(
    a: &LocustArgs,
    settings: &locustfile::Settings,
    users: usize,
    run_time: Option<std::time::Duration>,
) -> Vec<String> {
    let mut changed = Vec::new();
    if users != a.users {
        changed.push(format!("num_users {users}"));
    }
    if settings.spawn_rate != a.spawn_rate {
        changed.push(format!("spawn_rate {}", settings.spawn_rate));
    }
    if run_time != a.run_time {
        changed.push(match run_time {
            Some(d) => format!("run_time {}", humantime::format_duration(d)),
            None => "no run_time".to_string(),
        });
    }
    if settings.stop_timeout != a.stop_timeout {
        changed.push(format!(
            "the environment's stop_timeout {} s",
            settings.stop_timeout
        ));
    }
    if settings.host.is_some() && settings.host != a.host {
        changed.push(format!(
            "the environment's host {}",
            settings.host.as_deref().unwrap_or_default()
        ));
    }
    changed
}

/// Runs `loadlab locust`.
pub fn main(a: LocustArgs) -> Result<Outcome> {
    if a.web_host.is_some() || a.web_port.is_some() {
        eprintln!("note: loadlab runs headless; --dashboard is its live view");
    }
    let mut spec = spec(&a)?;
    // Helper 0 imports the file and fires `init` and `test_start` before the plan is made: the
    // users, spawn rate, run time and host are what the file's listeners left in
    // `parsed_options` and `environment.host`, as Locust reads them; the run then takes the
    // helper over.
    let first = locustfile::start_first(&spec, a.processes.unwrap_or(1), a.seed)?;
    let planned = plan_of(&a, &mut spec, &first);
    if planned.is_err() {
        locustfile::discard(first.key);
    }
    let plan = planned?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    }
    let stop = interrupt_signal()?;
    let progress = if std::io::stderr().is_terminal() {
        Progress::Terminal
    } else {
        Progress::Off
    };
    let outputs = crate::cmd::live_outputs(
        a.dashboard.as_deref(),
        &a.export,
        &stop,
        &crate::cmd::run_id(a.out.as_deref(), None),
        None,
    )?;
    outputs.begin(&a.locustfile, false, &plan, Vec::new());
    if let Some(dir) = &a.out {
        outputs.write_seconds(dir, &plan)?;
    }
    let (data, summary) = execute(&plan, &stop, progress, &Watch::default(), &outputs)?;
    // With --json, standard output holds the JSON alone (as Locust's, for a pipe); the tables
    // and file lines go to standard error.
    let mut out: Box<dyn std::io::Write> = if a.json {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    write!(out, "{}", loadlab_report::render_summary(&summary))?;
    writeln!(out)?;
    write!(out, "{}", loadlab_report::locust::stats_table(&data))?;
    if a.json || a.json_file.is_some() {
        let stats = serde_json::to_string_pretty(&loadlab_report::locust::stats_json(&data))?;
        if a.json {
            println!("{stats}");
        }
        if let Some(file) = &a.json_file {
            let path = format!("{file}.json");
            std::fs::write(&path, stats).with_context(|| format!("cannot write {path}"))?;
            writeln!(out, "  json         {path}")?;
        }
    }
    if let Some(prefix) = &a.csv {
        for f in loadlab_report::locust::write_csv(prefix, &data)
            .with_context(|| format!("cannot write the CSV files {prefix}_*.csv"))?
        {
            writeln!(out, "  csv          {}", f.display())?;
        }
    }
    if let Some(dir) = &a.out {
        loadlab_run::write_run_dir(dir, &data, &summary)?;
        writeln!(out, "  results in   {}", dir.display())?;
    }
    if let Some(html) = &a.html {
        let label = a.locustfile.clone();
        let view = loadlab_report::html::RunView::from_run(&label, &data, &summary);
        loadlab_report::files::write_html(html, &label, std::slice::from_ref(&view))?;
        writeln!(out, "  report       {}", html.display())?;
    }
    outputs.finish(&summary);
    outputs.close(std::time::Duration::ZERO);
    // As Locust: the run failed when any request failed by its verdict (an HTTP error, a
    // `failure()`, an `events.request` fired with an exception; not a 404 its
    // `catch_response` block called a success) or a task raised; and
    // `environment.process_exit_code`, set by the user's code, wins over that. A run ended by
    // Ctrl-C or SIGTERM is judged alike (Locust's shutdown is the same for both), after its
    // users' on_stop and test_stop ran.
    let users = data.users.as_ref();
    let failed = summary.requests.dropped > 0
        || users.is_some_and(|u| !u.failures.is_empty() || !u.request_failures.is_empty());
    let chosen = users.and_then(|u| u.suggested_exit_code);
    Ok(if let Some(code) = chosen {
        Outcome::Suggested(code.rem_euclid(256) as u8)
    } else {
        match Outcome::judged(&summary.thresholds) {
            Outcome::Done if failed => Outcome::Suggested(a.exit_code_on_error),
            Outcome::Done if users.is_some_and(|u| !u.unhandled.is_empty()) => {
                Outcome::Suggested(2)
            }
            judged => judged,
        }
    })
}
