//! What generator threads send the collector: each second's record, and how the thread
//! ended (the bottom of the engine's layers, beside the schedules).

use std::time::Duration;

use loadlab_run::{Interval, UserRecord};

/// What a thread reports when it stops.
#[derive(Debug, Clone)]
pub struct ThreadEnd {
    /// CPU time the thread used.
    pub cpu: Duration,
    /// Time from the origin to the thread's stop.
    pub elapsed: Duration,
    /// Requests in flight when it stopped.
    pub unfinished: u64,
    /// Whole-run results per request name (empty when the plan has one name).
    pub by_name: Vec<Interval>,
    /// The sessions of the thread's virtual users, when the plan has a user model.
    pub users: Option<UserRecord>,
}

/// Messages from generator threads to the collector.
pub enum Msg {
    /// A second's record from thread `.0`.
    Interval(usize, Box<Interval>),
    /// Thread `.0` stopped.
    End(usize, ThreadEnd),
    /// Thread `.0` could not start its event loop.
    Failed(usize, std::io::Error),
}
