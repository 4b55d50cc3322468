//! The engine's system tier: what it claims about time (latency accuracy, the open model's
//! schedule and pacing, connects paced before the load, runs that end on time), measured
//! against listeners on 127.0.0.1. A busy machine blurs these figures, so `cargo test` leaves
//! them out; `scripts/test.sh` runs them with `cargo test -p loadlab-engine --test system`.

#[path = "../support/mod.rs"]
mod support;

mod connections;
mod engine;
mod http2;
