//! The reference service: endpoints with known costs (DESIGN §4.3) that experiments load,
//! served by `loadlab serve` and started in-process by tests.
//!
//! It depends on no other loadlab crate, so it behaves the same whoever starts it. A
//! "worker" is a runtime thread: endpoints that block (`/block`, `/calc`, `/heavy`,
//! `/site?work_ms=N`) hold it the way a synchronous server's worker is held; `/delay` and
//! `/bbox/async` do not.

#![deny(missing_docs)]

pub mod consumer;
mod endpoints;
mod store;
mod web;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::store::Store;

/// How the black-box endpoints behave, and where `/turno` counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Delay of `/bbox/async` and `/bbox/sync`.
    pub bbox_delay: Duration,
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
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            bbox_delay: Duration::from_millis(1000),
            bbox_workers: 3,
            redis_url: None,
            visits: false,
            shards: DEFAULT_SHARDS,
            max_in_flight: None,
        }
    }
}

/// Counters per page of the visits application (seed 002's 100 shards).
pub const DEFAULT_SHARDS: usize = 100;

/// State shared by the handlers.
#[derive(Clone)]
struct Shared {
    started: Instant,
    config: ServiceConfig,
    bbox_sync: Arc<Semaphore>,
    /// Tickets and page views.
    store: Arc<Store>,
    /// Tokens issued by `/login`, to their users.
    tokens: Arc<Mutex<HashMap<String, String>>>,
}

/// The service's routes; fails only on a Redis URL that cannot be parsed.
pub fn router(config: ServiceConfig) -> Result<Router, String> {
    use endpoints::*;
    let app = Router::new()
        .route("/ping", get(ping))
        .route("/health", get(health))
        .route("/delay", get(delay))
        .route("/block", get(block))
        .route("/calc", get(calc))
        .route("/heavy", get(heavy))
        .route("/info", get(info))
        .route("/stall", get(stall))
        .route("/bbox/async", get(bbox_async))
        .route("/bbox/sync", get(bbox_sync))
        .route("/turno/{name}", get(turno))
        .route("/visits/{page}", get(web::visits))
        .route("/site/{page}", get(web::site))
        .route("/static/{file}", get(web::static_file))
        .route("/login", post(web::login))
        .route("/account", get(web::account))
        .fallback(not_found);
    let in_flight = config
        .max_in_flight
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    let app = app.with_state(Shared {
        started: Instant::now(),
        bbox_sync: Arc::new(Semaphore::new(config.bbox_workers.max(1))),
        store: Arc::new(Store::new(config.redis_url.as_deref())?),
        config,
        tokens: Arc::new(Mutex::new(HashMap::new())),
    });
    Ok(match in_flight {
        Some(cap) => app.layer(axum::middleware::from_fn_with_state(cap, capped)),
        None => app,
    })
}

/// Passes a request on while fewer than the cap are in progress, else answers 429.
async fn capped(
    axum::extract::State(cap): axum::extract::State<Arc<Semaphore>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match cap.clone().try_acquire_owned() {
        Ok(_permit) => next.run(request).await,
        Err(_) => (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            "too many requests in progress (--max-in-flight)\n",
        )
            .into_response(),
    }
}

/// Serves the reference service on `listener` until the future is dropped.
pub async fn serve(listener: TcpListener, config: ServiceConfig) -> std::io::Result<()> {
    let app = router(config).map_err(std::io::Error::other)?;
    axum::serve(no_delay(listener), app).await
}

/// Accepted connections with Nagle's algorithm off: with pipelined requests, small responses
/// would otherwise wait for the client's delayed ACK (about 40 ms each).
fn no_delay(
    listener: TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    })
}

/// A reference service running on its own thread and runtime, for tests and the demo.
pub struct TestServer {
    /// Where it listens (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts the service on 127.0.0.1 with an ephemeral port, with `threads` worker threads.
    pub fn start(threads: usize) -> std::io::Result<TestServer> {
        TestServer::start_with(threads, ServiceConfig::default())
    }

    /// Like [`TestServer::start`], with black-box settings.
    pub fn start_with(threads: usize, config: ServiceConfig) -> std::io::Result<TestServer> {
        let app = router(config).map_err(std::io::Error::other)?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("loadlab-target".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener =
                        TcpListener::from_std(std_listener).expect("listener is non-blocking");
                    let server =
                        axum::serve(no_delay(listener), app).with_graceful_shutdown(async {
                            let _ = rx.await;
                        });
                    let _ = server.await;
                });
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(TestServer {
            addr,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
