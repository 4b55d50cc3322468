//! One module per subcommand.

pub mod capacity;
pub mod compare;
pub mod consume;
pub mod demo;
pub mod k8s;
pub mod lab;
pub mod merge;
pub mod probe;
pub mod report;
pub mod run;
pub mod serve;
pub mod validate;

/// How a subcommand ended, for the exit code.
pub enum Outcome {
    /// It did what was asked.
    Done,
    /// Ctrl-C stopped it; partial results were written.
    Interrupted,
    /// It ran, and found that no load met the objective (`loadlab capacity`).
    NotMet,
    /// It ran, and a strict threshold (`--slo`, `ensure`) failed.
    ThresholdsFailed,
}

impl Outcome {
    /// `Done`, or `ThresholdsFailed` when any of `results` fails the run.
    pub fn judged(results: &[loadlab_run::ThresholdResult]) -> Outcome {
        if results.iter().any(loadlab_run::ThresholdResult::fails_run) {
            Outcome::ThresholdsFailed
        } else {
            Outcome::Done
        }
    }
}
