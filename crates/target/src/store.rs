//! Where `/turno` keeps its counters: in the process (each replica counts alone), or in a
//! Redis server shared by every replica (`INCR`, so tickets stay unique and gap-free).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

/// Longest wait for Redis to connect or to answer: past it the request gets a 503 instead of
/// hanging, and the next request connects anew.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// Counters by name.
pub enum Store {
    /// In this process.
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
        match self {
            Store::Memory(tickets) => {
                let mut tickets = tickets.lock().unwrap_or_else(|e| e.into_inner());
                let n = tickets.entry(name.to_string()).or_insert(0);
                *n += 1;
                Ok(*n)
            }
            Store::Redis(r) => {
                let RedisStore { url, client, conn } = &**r;
                let err = |reason: String| StoreError {
                    url: url.clone(),
                    reason,
                };
                let mut c = {
                    let mut open = conn.lock().await;
                    if open.is_none() {
                        let config = AsyncConnectionConfig::new()
                            .set_connection_timeout(Some(REDIS_TIMEOUT))
                            .set_response_timeout(Some(REDIS_TIMEOUT));
                        let fresh = client
                            .get_multiplexed_async_connection_with_config(&config)
                            .await
                            .map_err(|e| err(format!("cannot connect: {e}")))?;
                        *open = Some(fresh);
                    }
                    open.clone().expect("connected above")
                };
                let key = format!("turno:{name}");
                match redis::cmd("INCR")
                    .arg(&key)
                    .query_async::<u64>(&mut c)
                    .await
                {
                    Ok(n) => Ok(n),
                    Err(e) => {
                        if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                            *conn.lock().await = None;
                        }
                        Err(err(e.to_string()))
                    }
                }
            }
        }
    }
}
