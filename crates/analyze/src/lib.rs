//! loadlab's analysis: pure functions over runs (no I/O, no clock), so each is table-tested
//! on synthetic runs. Findings explain a run; the probe's and the capacity search's step
//! functions say what to run next given the steps so far; the USL fits a concurrency sweep;
//! comparisons say whether two runs differ by more than noise; thresholds and the generator's
//! health are judged here too, so one crate writes every verdict.

#![deny(missing_docs)]

use loadlab_run::{RunData, Summary};

pub mod autoscale;
pub mod capacity;
pub mod compare;
pub mod findings;
pub mod health;
pub mod lab;
pub mod lab_change;
pub mod models;
pub mod probe;
pub mod slo;
pub mod thresholds;
pub mod usl;
pub mod verdict;

pub use findings::findings;
pub use slo::Slo;
pub use usl::Usl;

/// A run's summary as every command writes it: the numbers, the generator's health judged, the
/// findings (`cores`: the CPUs the service could use) and the plan's thresholds checked.
pub fn summarize(run: &RunData, cores: usize) -> Summary {
    summarize_judging(run, cores, health::judge_generator)
}

/// [`summarize`] with the generator judged by `judge`: a merge of shards judges each shard's
/// generator on its own machine, not the shards' records added up.
pub fn summarize_judging(
    run: &RunData,
    cores: usize,
    judge: impl FnOnce(&RunData, &mut loadlab_run::summary::Generator),
) -> Summary {
    let mut s = Summary::from_run(run);
    judge(run, &mut s.generator);
    s.findings = findings(run, &s, cores);
    if let Some(scaling) = &run.scaling {
        autoscale::findings(scaling, &run.timeline, &mut s.findings);
    }
    s.thresholds = thresholds::check_all(&run.plan.thresholds, &s);
    s
}
