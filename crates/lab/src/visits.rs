//! The visits application's books, read from its Redis: the views counted per page (the sum of
//! each page's shard counters), and the wait for the queue to drain, so a run can check that
//! every page view it was answered 200 for was counted once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::Connection;

use crate::store_sampler::{groups_backlog, scan_keys};

/// The stream the web tier queues page views on (the service's `VISITS_STREAM`).
const STREAM: &str = "visits";

/// Views counted so far per page: `visits:PAGE:SHARD` counters summed over the shards.
pub fn counted(url: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut c = connect(url)?;
    let (keys, _) =
        scan_keys(&mut c, &["MATCH", "visits:*"], usize::MAX).map_err(|e| e.to_string())?;
    let mut pages = BTreeMap::new();
    for chunk in keys.chunks(500) {
        let values: Vec<Option<u64>> = redis::cmd("MGET")
            .arg(chunk)
            .query(&mut c)
            .map_err(|e| e.to_string())?;
        for (key, n) in chunk.iter().zip(values) {
            // visits:PAGE:SHARD; a page name has no colon.
            let Some(page) = key.strip_prefix("visits:").and_then(|k| k.rsplit_once(':')) else {
                continue;
            };
            *pages.entry(page.0.to_string()).or_insert(0) += n.unwrap_or(0);
        }
    }
    Ok(pages)
}

/// Waits until the queue is empty (every consumer group has no undelivered and no
/// unacknowledged entry), up to `limit`; returns how long it took, or `None` if it did not
/// drain in time.
pub fn drain(url: &str, limit: Duration) -> Result<Option<Duration>, String> {
    let mut c = connect(url)?;
    let start = Instant::now();
    loop {
        if backlog(&mut c)? == 0 {
            return Ok(Some(start.elapsed()));
        }
        if start.elapsed() >= limit {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Entries of the stream not yet delivered or not yet acknowledged, over its groups.
fn backlog(c: &mut Connection) -> Result<u64, String> {
    match groups_backlog(c, STREAM) {
        // Without a lag (entries deleted), a group counts as undrained only by its pending.
        Ok((pending, lag)) => Ok(pending + lag.unwrap_or(0)),
        // No stream yet: nothing was queued.
        Err(e) if e.to_string().contains("no such key") => Ok(0),
        Err(e) => Err(e.to_string()),
    }
}

fn connect(url: &str) -> Result<Connection, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let c = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    Ok(c)
}
