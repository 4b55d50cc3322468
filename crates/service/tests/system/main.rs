//! The reference service's system tier: the time its endpoints take (waits, busy work, queues
//! behind a black box's workers, no Nagle delays, the in-flight cap), read on the clock. A busy
//! machine blurs these, so `cargo test` leaves them out; `scripts/test.sh` runs them with
//! `cargo test -p loadlab-service --test system`.

#[path = "../support/mod.rs"]
mod support;

mod endpoints;
