//! Schedulers (the bottom layer: pure, using nothing else of the engine): when each request
//! should start. Pure functions of time, tested with made-up clocks; the pooled connections,
//! the pacer and the user slots ask them for work.

pub mod closed;
pub mod open;
pub mod users;

/// How a run's request count is split across generator threads: thread `k` of `threads` gets
/// `count / threads`, plus one for the first `count % threads` threads (as shards split a plan).
pub use loadlab_run::shard::share_of;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_count() {
        for (count, threads) in [(1000, 3), (7, 2), (1, 4), (0, 2)] {
            let total: u64 = (0..threads).map(|k| share_of(count, k, threads)).sum();
            assert_eq!(total, count, "count {count} over {threads} threads");
        }
    }
}
