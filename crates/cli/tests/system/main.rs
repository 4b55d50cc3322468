//! The system tier of the `loadlab` binary's tests: those that need real programs (nginx,
//! redis-server, Node.js, gunicorn, grpcio, Locust, Prometheus, an OpenTelemetry Collector, Jaeger,
//! perf, Chromium, a Kubernetes cluster), run labs, or measure the services they start. `scripts/test.sh` installs
//! what they need and runs them after the fast tier, with `cargo test -p loadlab --test system`
//! (`cargo test` alone leaves them out). A missing program fails its test with a line naming it
//! and how to install it.

#[allow(dead_code)] // each tier uses its own part of the shared helpers
#[path = "../support/mod.rs"]
mod support;

mod analysis;
mod autoscale;
mod browser;
mod budgets;
mod cli;
mod corpus;
mod docs;
mod grpc;
mod hooks;
mod kubernetes;
mod locust;
mod observability;
mod profile;
mod python_suites;
mod resume;
mod runtimes;
mod seeds;
mod shard;
mod socketio;
mod stores;
mod thresholds;
mod tls;
mod topologies;
mod users;
mod verdicts;
