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
mod grpc;
mod shared_box;
mod state;
mod store;
pub mod tracing;
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

use crate::state::{HostFacts, Shared};
pub use crate::state::{ServiceConfig, DEFAULT_SHARDS};
use crate::store::Store;

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
        .route("/leak", get(leak))
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
        .route(&format!("/{}/{{method}}", grpc::SERVICE), post(grpc::call))
        .route(loadlab_grpc::reflection::V1, post(grpc::reflect))
        .route(loadlab_grpc::reflection::V1ALPHA, post(grpc::reflect))
        .fallback(not_found);
    let in_flight = config
        .max_in_flight
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "loadlab-serve".into());
    let tracer = match &config.otlp_traces {
        Some(url) => Some(tracing::Tracer::start(url, &service).map_err(|e| e.to_string())?),
        None => None,
    };
    let app = app.with_state(Shared {
        started: Instant::now(),
        host: Arc::new(HostFacts::read()),
        bbox_sync: Arc::new(Semaphore::new(config.bbox_workers.max(1))),
        store: Arc::new(Store::new(config.redis_url.as_deref())?),
        config,
        tokens: Arc::new(Mutex::new(HashMap::new())),
        leaked: Arc::new(Mutex::new(Vec::new())),
        tracer: tracer.clone(),
    });
    // Traced after the cap: a refused request is answered, and traced, too.
    let app = match tracer {
        Some(t) => app.layer(axum::middleware::from_fn_with_state(t, tracing::traced)),
        None => app,
    };
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
            .name("loadlab-service".into())
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
