//! Where `/turno` keeps its counters and the visits application its page views: in the process
//! (each replica counts alone), or in a Redis server shared by every replica (`INCR`, so
//! tickets stay unique and gap-free; page views queued on a stream for the counter consumer).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

/// Longest wait for Redis to connect or to answer: past it the request gets a 503 instead of
/// hanging, and the next request connects anew.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// The stream page views are queued on.
pub const VISITS_STREAM: &str = "visits";

/// The consumer group that counts them.
pub const VISITS_GROUP: &str = "counters";

/// The key of shard `shard` of page `page`'s visit counter.
pub fn visits_key(page: &str, shard: usize) -> String {
    format!("visits:{page}:{shard}")
}

/// Counters by name.
pub enum Store {
    /// In this process (tickets under `turno:NAME`, visits under `visits:PAGE`).
    Memory(Mutex<HashMap<String, u64>>),
    /// In Redis.
    Redis(Box<RedisStore>),
}

/// Counters in Redis, over one multiplexed connection (concurrent commands are pipelined on
/// it), opened at the first request and again after a failure.
pub struct RedisStore {
    /// The server, as given.
    url: String,
    /// The client it was parsed into.
    client: redis::Client,
    /// The open connection, if any.
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

/// A counter that could not be incremented, in words for the 503's body.
#[derive(Debug, thiserror::Error)]
#[error("the store at {url} failed: {reason}")]
pub struct StoreError {
    url: String,
    reason: String,
}

impl Store {
    /// The store for `redis_url`, or the in-process one; a URL Redis cannot parse is refused.
    pub fn new(redis_url: Option<&str>) -> Result<Store, String> {
        Ok(match redis_url {
            None => Store::Memory(Mutex::new(HashMap::new())),
            Some(url) => Store::Redis(Box::new(RedisStore {
                url: url.to_string(),
                client: redis::Client::open(url)
                    .map_err(|e| format!("--redis-url {url:?} is not a Redis URL: {e}"))?,
                conn: tokio::sync::Mutex::new(None),
            })),
        })
    }

    /// Adds one to counter `name` and returns the new value (the first is 1).
    pub async fn next(&self, name: &str) -> Result<u64, StoreError> {
        let key = format!("turno:{name}");
        match self {
            Store::Memory(m) => Ok(add(m, &key)),
            Store::Redis(r) => r.query(redis::cmd("INCR").arg(&key)).await,
        }
    }

    /// Records a view of `page`: counted at once in the process, or queued on the visits
    /// stream for the counter consumer.
    pub async fn record_visit(&self, page: &str) -> Result<(), StoreError> {
        match self {
            Store::Memory(m) => {
                add(m, &format!("visits:{page}"));
                Ok(())
            }
            Store::Redis(r) => {
                let mut cmd = redis::cmd("XADD");
                cmd.arg(VISITS_STREAM).arg("*").arg("page").arg(page);
                r.query::<String>(&cmd).await.map(|_| ())
            }
        }
    }

    /// The views of `page` counted so far: the sum of its `shards` counters in Redis.
    pub async fn visits(&self, page: &str, shards: usize) -> Result<u64, StoreError> {
        match self {
            Store::Memory(m) => {
                let m = m.lock().unwrap_or_else(|e| e.into_inner());
                Ok(m.get(&format!("visits:{page}")).copied().unwrap_or(0))
            }
            Store::Redis(r) => {
                let mut cmd = redis::cmd("MGET");
                for shard in 0..shards {
                    cmd.arg(visits_key(page, shard));
                }
                let counts: Vec<Option<u64>> = r.query(&cmd).await?;
                Ok(counts.into_iter().flatten().sum())
            }
        }
    }
}

/// Adds one to `key` in the process's counters and returns the new value.
fn add(m: &Mutex<HashMap<String, u64>>, key: &str) -> u64 {
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    let n = m.entry(key.to_string()).or_insert(0);
    *n += 1;
    *n
}

impl RedisStore {
    /// Runs `cmd` on the shared connection, opening it first when there is none; a failure of
    /// the connection drops it, so the next command connects anew.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let err = |reason: String| StoreError {
            url: self.url.clone(),
            reason,
        };
        let mut c = {
            let mut open = self.conn.lock().await;
            if open.is_none() {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(REDIS_TIMEOUT))
                    .set_response_timeout(Some(REDIS_TIMEOUT));
                let fresh = self
                    .client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(|e| err(format!("cannot connect: {e}")))?;
                *open = Some(fresh);
            }
            open.clone().expect("connected above")
        };
        match cmd.query_async::<T>(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => {
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                    *self.conn.lock().await = None;
                }
                Err(err(e.to_string()))
            }
        }
    }
}
