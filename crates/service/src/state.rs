//! What the handlers share: the service's configuration and state (the black box's workers,
//! the store, the tokens `/login` issued).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::store::Store;

/// How the black-box endpoints behave, and where `/turno` counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Delay of `/bbox/sync` (and of `/bbox/async` unless `bbox_async_delay` says).
    pub bbox_delay: Duration,
    /// Delay of `/bbox/async` when it differs from `/bbox/sync`'s (seed 000's two boxes
    /// answered in about 1100 and 905 ms).
    pub bbox_async_delay: Option<Duration>,
    /// A black box every instance shares (`http://127.0.0.1:PORT`): `/bbox/async` and
    /// `/bbox/sync` call that service's and answer with what it answers, as seed 000's
    /// service called the one black box its course ran. `None` serves them here.
    pub bbox_url: Option<String>,
    /// Requests `/bbox/sync` serves at once; the rest queue.
    pub bbox_workers: usize,
    /// A Redis server holding `/turno`'s counters (shared by replicas); `None` counts in
    /// the process.
    pub redis_url: Option<String>,
    /// The visits application: each `/site` page view is recorded (queued on the visits
    /// stream with Redis, counted at once without), and `/visits/PAGE` tells the count.
    pub visits: bool,
    /// Counters per page the consumer spreads views over (seed 002 used 100).
    pub shards: usize,
    /// Most requests in progress at once; past it the service answers 429 (as Cloud Run's
    /// per-instance concurrency limit did in seed 002). `None` for no cap.
    pub max_in_flight: Option<usize>,
    /// Where to send the spans of the traced requests it serves (an OTLP/HTTP `…/v1/traces`
    /// URL): a request with a sampled `traceparent` gets a server span under the caller's,
    /// and `/turno`'s store call a child span. `None` traces nothing.
    pub otlp_traces: Option<String>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            bbox_delay: Duration::from_millis(1000),
            bbox_async_delay: None,
            bbox_url: None,
            bbox_workers: 3,
            redis_url: None,
            visits: false,
            shards: DEFAULT_SHARDS,
            max_in_flight: None,
            otlp_traces: None,
        }
    }
}

/// Counters per page of the visits application (seed 002's 100 shards).
pub const DEFAULT_SHARDS: usize = 100;

/// State shared by the handlers.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) started: Instant,
    /// What `/info` tells of the process that does not change while it runs.
    pub(crate) host: Arc<HostFacts>,
    pub(crate) config: ServiceConfig,
    pub(crate) bbox_sync: Arc<Semaphore>,
    /// Tickets and page views.
    pub(crate) store: Arc<Store>,
    /// Tokens issued by `/login`, to their users.
    pub(crate) tokens: Arc<Mutex<HashMap<String, String>>>,
    /// What `/leak` kept.
    pub(crate) leaked: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Where traced requests' spans go, when the service traces.
    pub(crate) tracer: Option<Arc<crate::tracing::Tracer>>,
}

/// Facts about the serving process read once at start, so `/info` answers from memory.
#[derive(Debug)]
pub(crate) struct HostFacts {
    pub(crate) hostname: Option<String>,
    pub(crate) argv: Vec<String>,
    pub(crate) exec_path: Option<String>,
    pub(crate) cwd: Option<String>,
}

impl HostFacts {
    /// This process's facts, now.
    pub(crate) fn read() -> HostFacts {
        let path_text = |p: std::io::Result<std::path::PathBuf>| {
            p.ok().map(|p| p.to_string_lossy().into_owned())
        };
        HostFacts {
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string()),
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exec_path: path_text(std::env::current_exe()),
            cwd: path_text(std::env::current_dir()),
        }
    }
}
