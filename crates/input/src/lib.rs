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
pub mod experiment;
pub mod flags;
pub mod lower;
pub mod scenario;
pub mod target;
pub mod topology;
pub mod values;
mod yaml;

#[cfg(test)]
mod fuzz;

pub use capacity::CapacityFlags;
pub use experiment::{Experiment, Workload};
pub use flags::{is_scenario, ArrivalArg, LoadFlags, ReachFlags};
pub use lower::{Overrides, UrlTarget};
pub use topology::{TopologyError, TopologyInput};

/// Input that cannot become a plan, with what is wrong in words (and where, for files).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Flags or URLs.
    #[error("{0}")]
    Flags(String),
    /// A scenario file; the message starts with its path.
    #[error("{0}")]
    Scenario(String),
    /// An experiment file; the message starts with its path.
    #[error("{0}")]
    Experiment(String),
    /// A plan whose numbers do not hold together.
    #[error(transparent)]
    Plan(#[from] loadlab_run::PlanError),
}

impl InputError {
    fn flags(e: anyhow::Error) -> Self {
        InputError::Flags(format!("{e:#}"))
    }

    fn scenario(e: anyhow::Error) -> Self {
        InputError::Scenario(format!("{e:#}"))
    }
}
