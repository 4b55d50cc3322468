//! The lab crate's system tier: the real nginx, the profilers (perf, py-spy) on real processes,
//! the sampler's readings of their CPU, and the readers of a real redis-server. `cargo test`
//! leaves them out; `scripts/test.sh` runs them with `cargo test -p loadlab-lab --test system`.

mod nginx;
mod profile;
mod sampler;
mod store;
