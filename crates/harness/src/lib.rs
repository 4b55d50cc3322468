//! loadlab's jobs as the subcommands run them (plan → engine → run, with the lab watching):
//! one plan run with its servers sampled, its findings and Ctrl-C ([`execute`]); the live
//! dashboard ([`dashboard`]); an experiment's matrix of topologies × workloads ([`matrix`])
//! and its conclusion, also of a lab read again ([`conclude`]);
//! the stepped runs of the probe and the capacity search ([`steps`], [`probe`], [`capacity`]);
//! `loadlab demo`'s tour ([`demo`]); and the merge of shards' run directories into one ([`merge`]).
//! Subcommands parse, call one of these, and print.

#![deny(missing_docs)]

pub mod capacity;
pub mod conclude;
pub mod dashboard;
pub mod demo;
pub mod execute;
pub mod export;
pub mod interrupt;
pub mod kube;
pub mod matrix;
pub mod merge;
pub mod outputs;
pub mod probe;
pub mod steps;

pub use conclude::conclude_lab;
pub use dashboard::Dashboard;
pub use execute::{cores, execute, Progress, Watch};
pub use interrupt::interrupt_signal;
pub use matrix::{experiment_record, run_matrix};
pub use merge::{merge_dirs, MergeError, Merged};
pub use outputs::LiveOutputs;

/// A job that could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The engine could not run the plan.
    #[error(transparent)]
    Engine(#[from] loadlab_engine::EngineError),
    /// The watched processes could not be sampled.
    #[error(transparent)]
    Sampler(#[from] loadlab_lab::SamplerError),
    /// A topology could not be started.
    #[error("topology {name:?}: {error}")]
    Topology {
        /// The topology's name.
        name: String,
        /// Why.
        error: loadlab_lab::LabError,
    },
    /// A plan could not be made.
    #[error(transparent)]
    Input(#[from] loadlab_input::InputError),
    /// The script's `before` (or `after`) flow failed, so the load did not run (or ran).
    #[error("the {flow} flow failed: {reason}; the load {what}")]
    Once {
        /// `before` or `after`.
        flow: &'static str,
        /// Why its user failed.
        reason: String,
        /// What became of the load.
        what: &'static str,
    },
    /// Budgets that do not fit the host (the arithmetic, and what to do).
    #[error("{0}")]
    Budgets(String),
    /// A capacity workload's objective could not be read.
    #[error(transparent)]
    Slo(#[from] loadlab_analyze::slo::SloError),
    /// A run directory could not be written.
    #[error(transparent)]
    RunDir(#[from] loadlab_run::RunDirError),
    /// A lab directory could not be written.
    #[error(transparent)]
    LabDir(#[from] loadlab_run::lab::LabDirError),
    /// Shards' run directories could not be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// The operating system refused something (a thread, a socket, a signal handler).
    #[error("{what}: {error}")]
    System {
        /// What was being done.
        what: String,
        /// Why it failed.
        error: std::io::Error,
    },
}

impl HarnessError {
    /// An operating-system failure while doing `what`.
    pub fn system(what: impl Into<String>, error: std::io::Error) -> Self {
        HarnessError::System {
            what: what.into(),
            error,
        }
    }
}

/// The result of a job.
pub type Result<T> = std::result::Result<T, HarnessError>;
