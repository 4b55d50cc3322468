//! loadlab's analysis: pure functions over runs (no I/O, no clock), so each is table-tested
//! on synthetic runs. Findings explain a run; the probe's and the capacity search's step
//! functions say what to run next given the steps so far; the USL fits a concurrency sweep;
//! comparisons say whether two runs differ by more than noise.

pub mod capacity;
pub mod compare;
pub mod findings;
pub mod models;
pub mod probe;
pub mod scaling;
pub mod slo;
pub mod usl;

pub use findings::findings;
pub use slo::Slo;
pub use usl::Usl;
