//! What loadlab's users write, parsed into typed inputs and lowered into one checked plan
//! (input → plan): `loadlab run` flags ([`LoadFlags`]), scenario files ([`scenario`]),
//! experiment files ([`experiment`]), and the URL steps of the probe and the capacity search;
//! and topologies ([`topology`]: `serve`'s flags, an experiment's topologies, the demo's),
//! lowered once with their own table of defaults.
//!
//! Where a new thing goes: a load flag is a field of [`LoadFlags`] and a line in [`lower`]; a
//! scenario key is a field of its `scenario/` parser and a line in [`lower`] (or in the
//! scenario's own lowering when it shapes flows or phases); defaults are in
//! [`loadlab_run::defaults`].

#![deny(missing_docs)]

pub mod capacity;
pub mod config_templates;
pub mod experiment;
pub mod flags;
pub mod grpc;
pub mod locust;
pub mod lower;
pub mod probe;
pub mod scenario;
pub mod target;
mod tls;
pub mod topology;
pub mod values;
pub mod work;
mod yaml;

#[cfg(test)]
mod fuzz;

pub use capacity::{CapacityError, CapacityFlags};
pub use experiment::{Experiment, ExperimentError, Workload, WorkloadError};
pub use flags::{
    is_scenario, ArrivalArg, FlagRequest, FlagsError, LoadFlags, ReachFlags, RequestFlags,
};
pub use lower::{Overrides, UrlTarget};
pub use probe::{ProbeError, ProbeFlags};
pub use scenario::ScenarioError;
pub use target::{HeaderError, UrlError};
pub use tls::CaFileError;
pub use topology::{TopologyError, TopologyInput};
pub use work::Work;
pub use yaml::{DurationError, Position, YamlError};

/// Input that cannot become a plan, with what is wrong in words (and where, for files).
///
/// Every error of this crate says all of itself in its `Display`, the errors it wraps
/// included, and returns none of them as its `source`: the message alone and the message with
/// its source chain (as the binary prints errors) are the same one line. The wrapped errors
/// stay typed, in the variants' fields. The file errors are boxed, so that a `Result`
/// carrying this error stays small.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Flags or URLs.
    #[error(transparent)]
    Flags(#[from] FlagsError),
    /// A scenario file; the message starts with its path.
    #[error(transparent)]
    Scenario(Box<ScenarioError>),
    /// An experiment file; the message starts with its path.
    #[error(transparent)]
    Experiment(Box<ExperimentError>),
    /// A plan whose numbers do not hold together.
    #[error(transparent)]
    Plan(#[from] loadlab_run::PlanError),
}

impl From<ScenarioError> for InputError {
    fn from(e: ScenarioError) -> Self {
        InputError::Scenario(Box::new(e))
    }
}

impl From<ExperimentError> for InputError {
    fn from(e: ExperimentError) -> Self {
        InputError::Experiment(Box::new(e))
    }
}
