//! The opening of a thread's initial connections before the load starts (connections layer,
//! beside `conn`'s send step, called by the thread loop): paced at the thread's share of the
//! plan's connect rate, so a server's listen backlog never sees them all at once, and timed
//! apart from the run, so no request's latency holds a connect.

use std::rc::Rc;
use std::time::Duration;

use loadlab_run::ConnectStats;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

use crate::conn::{Conn, Dialer};

/// An initial connection of a thread: its endpoint, its place in the endpoint's requests, and
/// the connection when it opened.
pub struct Initial {
    /// The endpoint.
    pub ep: usize,
    /// Where the connection starts in its endpoint's requests (closed model).
    pub rotation: usize,
    /// The open connection, or `None` if it could not be opened (it tries again at its first
    /// request).
    pub conn: Option<Conn>,
}

/// Opens `wanted` ((endpoint, rotation) pairs) with `dialer`, the i-th no earlier than
/// `i / rate_per_s` seconds after the first, each without waiting for the ones before it;
/// returns them in order once every attempt has ended, with the count and the time taken.
pub async fn open_paced(
    dialer: &Rc<Dialer>,
    wanted: &[(usize, usize)],
    rate_per_s: f64,
) -> (Vec<Initial>, ConnectStats) {
    let start = Instant::now();
    let mut attempts = JoinSet::new();
    // Filled in place, so no second list of connections is alive at once with this one.
    let mut initial: Vec<Initial> = wanted
        .iter()
        .map(|&(ep, rotation)| Initial {
            ep,
            rotation,
            conn: None,
        })
        .collect();
    let mut keep = |joined: Result<(usize, Option<Conn>), _>| {
        if let Ok((i, conn)) = joined {
            initial[i].conn = conn;
        }
    };
    for (i, &(ep, _)) in wanted.iter().enumerate() {
        let due = start + Duration::from_secs_f64(i as f64 / rate_per_s);
        if due > Instant::now() {
            sleep_until(due).await;
        }
        let dialer = dialer.clone();
        attempts.spawn_local(async move { (i, dialer.dial(ep).await.ok().map(|(c, _)| c)) });
        // Ended attempts give their task's memory back while the others are still paced.
        while let Some(joined) = attempts.try_join_next() {
            keep(joined);
        }
    }
    while let Some(joined) = attempts.join_next().await {
        keep(joined);
    }
    let opened = initial.iter().filter(|c| c.conn.is_some()).count() as u64;
    let stats = ConnectStats {
        connections: wanted.len() as u64,
        opened,
        failed: wanted.len() as u64 - opened,
        duration_s: if wanted.is_empty() {
            0.0
        } else {
            start.elapsed().as_secs_f64()
        },
        ..ConnectStats::default()
    };
    (initial, stats)
}
