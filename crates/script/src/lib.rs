//! What a scenario's plan leaves to run time: its templates rendered (with fake data), its
//! conditions evaluated, its JSONPath queries put in the standard form, and the variables a
//! loop item sets. The plan's types (`Template`, `Expr`, the user model) are `loadlab-run`'s
//! contract; this crate gives them their values, for the engine that runs a scenario and for
//! the lowering that renders a loop's URLs ahead of it.

#![deny(missing_docs)]

pub mod condition;
pub mod fake;
pub mod jsonpath;
pub mod template;
pub mod vars;

pub use condition::{Eval, Value};
pub use template::Render;
