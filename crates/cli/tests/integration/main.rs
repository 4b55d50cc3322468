//! The `loadlab` binary's integration tests, one module per area, linked into one test binary:
//! each binary links all of loadlab, and on a 2-core machine nineteen of them spent minutes
//! linking (ripgrep's `tests/integration` does the same).

mod support;

mod analysis;
mod artillery;
mod browser;
mod budgets;
mod cli;
mod cookies_redirects;
mod corpus;
mod hooks;
mod locust;
mod observability;
mod profile;
mod runtimes;
mod scenario;
mod shard;
mod socketio;
mod stores;
mod thresholds;
mod tls;
mod topologies;
mod users;
mod verdicts;
mod websocket;
