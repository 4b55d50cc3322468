//! The laboratory around the load: watching the service's processes while a run goes on.
//! Samples land in [`loadlab_run::ServerData`], which summaries and reports read.

pub mod sampler;

pub use sampler::{Sampler, SamplerError};
