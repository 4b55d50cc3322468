//! The opening of a thread's initial connections before the load starts (connections layer,
//! beside `conn`'s send step, called by the thread loop): paced at the thread's share of the
//! plan's connect rate, so a server's listen backlog never sees them all at once, and timed
//! apart from the run, so no request's latency holds a connect.

use std::rc::Rc;
use std::time::Duration;

use loadlab_run::ConnectStats;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

use crate::conn::dialer::Dialer;
use crate::conn::{self, Conn};

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
    // Connections opened: over HTTP/2 the first slot of a connection opens it and the others
    // join it.
    let mut opened = 0u64;
    let mut keep = |joined: Result<(usize, Option<(Conn, bool)>), _>| {
        if let Ok((i, conn)) = joined {
            opened += conn.as_ref().is_some_and(|c| c.1) as u64;
            initial[i].conn = conn.map(|c| c.0);
        }
    };
    for (i, &(ep, _)) in wanted.iter().enumerate() {
        let due = start + Duration::from_secs_f64(i as f64 / rate_per_s);
        if due > Instant::now() {
            sleep_until(due).await;
        }
        let dialer = dialer.clone();
        attempts.spawn_local(async move {
            let dialed = conn::dial(&dialer, ep).await.ok();
            (i, dialed.map(|(c, new)| (c, new.is_some())))
        });
        // Ended attempts give their task's memory back while the others are still paced.
        while let Some(joined) = attempts.try_join_next() {
            keep(joined);
        }
    }
    while let Some(joined) = attempts.join_next().await {
        keep(joined);
    }
    let connections = wanted.len().div_ceil(dialer.streams()) as u64;
    let stats = ConnectStats {
        connections,
        opened,
        failed: connections.saturating_sub(opened),
        duration_s: if wanted.is_empty() {
            0.0
        } else {
            start.elapsed().as_secs_f64()
        },
        ..ConnectStats::default()
    };
    (initial, stats)
}
