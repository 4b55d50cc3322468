//! The `loadlab` binary: parses flags and hands each subcommand to its module in `cmd/`, which
//! calls the library crates (input → plan, harness → runs, report → output) and prints.

mod args;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;
/// Exit code for bad input or a failure to run.
const EXIT_FAILURE: u8 = 1;
/// Exit code for flags clap rejects.
const EXIT_USAGE: u8 = 2;
/// Exit code of `loadlab capacity` when no rate met the objective.
const EXIT_NOT_MET: u8 = 3;
/// Exit code of a run in which not one request got an answer from the target.
const EXIT_UNREACHABLE: u8 = 4;
/// Exit code of an open-model run against URLs whose generator saturated a thread and fell
/// behind its schedule: the rate asked for was not the rate sent.
const EXIT_GENERATOR_LIMITED: u8 = 5;
/// Exit code of a lab (or a lab judged again by `report`) whose verdicts changed against the
/// baseline lab given with `--baseline`.
const EXIT_VERDICTS_CHANGED: u8 = 6;
/// Exit code of a run, lab or report whose strict thresholds failed (k6's code, so CI
/// scripts written for k6 read it alike).
const EXIT_THRESHOLDS: u8 = 99;
/// Exit code of a run whose script names the expect plugin and one of its checks failed
/// (Artillery's code for it).
const EXIT_EXPECTATIONS: u8 = 21;
/// Exit code of a script whose processor failed where Artillery's worker dies of it (a module
/// that does not load, a function that throws outside a user's flow): Artillery's code.
const EXIT_SCRIPT_CRASHED: u8 = 11;

fn main() -> ExitCode {
    let (line, file_args) =
        args::split_locust_file_args(args::join_dashboard_addr(std::env::args_os()));
    let cli = match Cli::try_parse_from(line) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(
                e.kind(),
                K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            eprintln!("{}", one_line(&e.render().to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = match cli.command {
        Command::Run(a) => cmd::run::main(*a),
        Command::Serve(a) => cmd::serve::main(a),
        Command::Validate(a) => cmd::validate::main(a),
        Command::Lab(a) => cmd::lab::main(a),
        Command::Demo(a) => cmd::demo::main(a),
        Command::Probe(a) => cmd::probe::main(a),
        Command::Capacity(a) => cmd::capacity::main(a),
        Command::Compare(a) => cmd::compare::main(a),
        Command::Report(a) => cmd::report::main(a),
        Command::Merge(a) => cmd::merge::main(a),
        Command::K8s(a) => match a.what {
            args::K8sCommand::Job(job) => cmd::k8s::print_job(job),
            args::K8sCommand::Run(run) => cmd::k8s_run::main(run),
        },
        Command::Consume(a) => cmd::consume::main(a),
        Command::Locust(mut a) => {
            a.file_args = file_args;
            cmd::locust::main(*a)
        }
        Command::Completions(a) => cmd::docs::completions(a),
        Command::Man(a) => cmd::docs::man(a),
    };
    match result {
        Ok(cmd::Outcome::Done) => ExitCode::SUCCESS,
        Ok(cmd::Outcome::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Ok(cmd::Outcome::NotMet) => ExitCode::from(EXIT_NOT_MET),
        Ok(cmd::Outcome::Unreachable) => ExitCode::from(EXIT_UNREACHABLE),
        Ok(cmd::Outcome::ThresholdsFailed) => ExitCode::from(EXIT_THRESHOLDS),
        Ok(cmd::Outcome::GeneratorLimited) => ExitCode::from(EXIT_GENERATOR_LIMITED),
        Ok(cmd::Outcome::VerdictsChanged) => ExitCode::from(EXIT_VERDICTS_CHANGED),
        Ok(cmd::Outcome::ScriptThresholdsFailed) => ExitCode::from(EXIT_FAILURE),
        Ok(cmd::Outcome::ExpectationsFailed) => ExitCode::from(EXIT_EXPECTATIONS),
        Ok(cmd::Outcome::Suggested(code)) => ExitCode::from(code),
        Ok(cmd::Outcome::ScriptCrashed) => ExitCode::from(EXIT_SCRIPT_CRASHED),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(if e.chain().any(is_processor_failure) {
                EXIT_SCRIPT_CRASHED
            } else {
                EXIT_FAILURE
            })
        }
    }
}

/// True when `e` is a processor that failed to load, however the layers above wrapped it.
fn is_processor_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    use loadlab_engine::EngineError;
    let engine = e.downcast_ref::<EngineError>().or_else(|| {
        match e.downcast_ref::<loadlab_harness::HarnessError>() {
            Some(loadlab_harness::HarnessError::Engine(inner)) => Some(inner),
            _ => None,
        }
    });
    matches!(engine, Some(EngineError::Processor(_))) || e.is::<loadlab_engine::ProcessorError>()
}

/// Clap's error in one line: its first line, plus the next one when the first ends in a colon
/// (as in "required arguments were not provided:"), and where to read more.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut msg = lines
        .next()
        .unwrap_or("error: invalid arguments")
        .to_string();
    if msg.ends_with(':') {
        if let Some(next) = lines.next() {
            msg.push(' ');
            msg.push_str(next);
        }
    }
    let sub = std::env::args().nth(1).filter(|a| {
        [
            "run", "serve", "validate", "lab", "demo", "probe", "capacity", "compare", "report",
            "consume",
        ]
        .contains(&a.as_str())
    });
    match sub {
        Some(sub) => format!("{msg} (see loadlab {sub} --help)"),
        None => format!("{msg} (see loadlab --help)"),
    }
}
