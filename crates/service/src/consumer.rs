//! The visits application's counter consumer (seed 002's queue → sharded counter): reads page
//! views from the visits stream as one consumer of its group and adds each to one of the page's
//! shard counters in the same transaction as its acknowledgement, so a consumer killed at any
//! point loses no view and counts none twice: what it had not acknowledged is delivered again.

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{AsyncConnectionConfig, Value};

use crate::store::{visits_key, VISITS_GROUP, VISITS_STREAM};

/// Entries read at a time.
const BATCH: usize = 100;

/// How long a read waits for new entries before looking again (and at `stop`).
const BLOCK: Duration = Duration::from_secs(1);

/// Entries another consumer has held this long unacknowledged are taken over (it died).
const CLAIM_IDLE: Duration = Duration::from_secs(5);

/// Where and how to count.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The Redis server holding the stream and the counters.
    pub redis_url: String,
    /// This consumer's name in the group; a consumer restarted under the same name first
    /// takes back what it had not acknowledged.
    pub name: String,
    /// Counters per page; each view goes to one at random.
    pub shards: usize,
}

/// A consumer that cannot run.
#[derive(Debug, thiserror::Error)]
#[error("the counter consumer at {url}: {reason}")]
pub struct ConsumerError {
    url: String,
    reason: String,
}

/// Counts views until `stop` completes; returns how many it counted.
pub async fn consume(
    config: &ConsumerConfig,
    stop: impl Future<Output = ()>,
) -> Result<u64, ConsumerError> {
    let err = |reason: String| ConsumerError {
        url: config.redis_url.clone(),
        reason,
    };
    if config.shards == 0 {
        return Err(err("the number of shards must be at least 1".into()));
    }
    let client = redis::Client::open(config.redis_url.as_str())
        .map_err(|e| err(format!("not a Redis URL: {e}")))?;
    let settings = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(BLOCK + Duration::from_secs(5)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&settings)
        .await
        .map_err(|e| err(format!("cannot connect: {e}")))?;
    create_group(&mut conn)
        .await
        .map_err(|e| err(e.to_string()))?;
    let mut counted = 0;
    // First what this consumer had been given and not acknowledged (id 0), then new entries.
    let mut own_pending = true;
    let mut last_claim = tokio::time::Instant::now();
    tokio::pin!(stop);
    loop {
        let read = read_batch(&mut conn, &config.name, own_pending);
        let entries = tokio::select! {
            _ = &mut stop => return Ok(counted),
            r = read => r.map_err(|e| err(e.to_string()))?,
        };
        if own_pending && entries.is_empty() {
            own_pending = false;
        }
        for entry in &entries {
            count(&mut conn, entry, config.shards)
                .await
                .map_err(|e| err(e.to_string()))?;
            counted += 1;
        }
        if last_claim.elapsed() >= CLAIM_IDLE {
            last_claim = tokio::time::Instant::now();
            for entry in claim(&mut conn, &config.name)
                .await
                .map_err(|e| err(e.to_string()))?
            {
                count(&mut conn, &entry, config.shards)
                    .await
                    .map_err(|e| err(e.to_string()))?;
                counted += 1;
            }
        }
    }
}

/// Creates the group at the stream's start (and the stream), unless it exists.
async fn create_group(conn: &mut MultiplexedConnection) -> redis::RedisResult<()> {
    let created: redis::RedisResult<String> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(VISITS_STREAM)
        .arg(VISITS_GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match created {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        other => other.map(|_| ()),
    }
}

/// The next entries for consumer `name`: its own unacknowledged ones, or new ones (waiting
/// up to [`BLOCK`]).
async fn read_batch(
    conn: &mut MultiplexedConnection,
    name: &str,
    own_pending: bool,
) -> redis::RedisResult<Vec<StreamId>> {
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(VISITS_GROUP)
        .arg(name)
        .arg("COUNT")
        .arg(BATCH);
    if !own_pending {
        cmd.arg("BLOCK").arg(BLOCK.as_millis() as u64);
    }
    cmd.arg("STREAMS")
        .arg(VISITS_STREAM)
        .arg(if own_pending { "0" } else { ">" });
    let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
    Ok(reply
        .into_iter()
        .flat_map(|r| r.keys)
        .flat_map(|k| k.ids)
        .collect())
}

/// Entries other consumers have held unacknowledged for [`CLAIM_IDLE`], now this one's.
async fn claim(conn: &mut MultiplexedConnection, name: &str) -> redis::RedisResult<Vec<StreamId>> {
    let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
        .arg(VISITS_STREAM)
        .arg(VISITS_GROUP)
        .arg(name)
        .arg(CLAIM_IDLE.as_millis() as u64)
        .arg("0-0")
        .arg("COUNT")
        .arg(BATCH)
        .query_async(conn)
        .await?;
    Ok(reply.claimed)
}

/// Adds one view to a random shard of its page and acknowledges it, in one transaction.
async fn count(
    conn: &mut MultiplexedConnection,
    entry: &StreamId,
    shards: usize,
) -> redis::RedisResult<()> {
    let page = match entry.map.get("page") {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        // An entry without a page is acknowledged and not counted.
        _ => String::new(),
    };
    let mut tx = redis::pipe();
    tx.atomic();
    if !page.is_empty() {
        tx.cmd("INCR")
            .arg(visits_key(&page, fastrand::usize(..shards)))
            .ignore();
    }
    tx.cmd("XACK")
        .arg(VISITS_STREAM)
        .arg(VISITS_GROUP)
        .arg(&entry.id)
        .ignore();
    tx.query_async::<()>(conn).await
}
