//! The fast tier of the `loadlab` binary's tests, one module per area, linked into one test
//! binary (each binary links all of loadlab; ripgrep's `tests/integration` does the same).
//!
//! These run the binary against in-process services on 127.0.0.1 (`TestServer`) and loadlab's
//! own `serve`: no other program starts, no lab runs, and nothing asserts a wall-clock or CPU
//! figure of the machine, so `cargo test` passes with only the Rust toolchain on PATH, on a busy
//! machine too. What needs real programs or measures lives in `tests/system` (the system tier).

#[allow(dead_code)] // each tier uses its own part of the shared helpers
#[path = "../support/mod.rs"]
mod support;

mod analysis;
mod artillery;
mod budgets;
mod cli;
mod cookies_redirects;
mod examples;
mod grpc;
mod observability;
mod scenario;
mod shard;
mod thresholds;
mod topologies;
mod users;
mod websocket;
