//! The reference service: endpoints with known costs (`/ping`, `/delay`, `/stall`, `/health`)
//! that experiments load, served by `loadlab serve` and started in-process by tests.
//!
//! It depends on no other loadlab crate, so it behaves the same whoever starts it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Longest wait an endpoint accepts, so a typo cannot hold a connection for days.
const MAX_WAIT_MS: u64 = 600_000;

#[derive(Clone)]
struct Shared {
    started: Instant,
}

#[derive(Deserialize)]
struct DelayQuery {
    ms: Option<String>,
}

#[derive(Deserialize)]
struct StallQuery {
    every_ms: Option<String>,
    for_ms: Option<String>,
}

fn bad_request(reason: String) -> Response {
    (StatusCode::BAD_REQUEST, reason + "\n").into_response()
}

fn parse_ms(name: &str, value: Option<&str>, default: Option<u64>) -> Result<u64, String> {
    match (value, default) {
        (None, Some(d)) => Ok(d),
        (None, None) => Err(format!("missing query parameter {name}")),
        (Some(v), _) => match v.parse::<u64>() {
            Ok(n) if n <= MAX_WAIT_MS => Ok(n),
            _ => Err(format!(
                "{name} must be a whole number of milliseconds from 0 to {MAX_WAIT_MS}, got {v:?}"
            )),
        },
    }
}

async fn ping() -> &'static str {
    "pong"
}

async fn health() -> &'static str {
    "ok"
}

/// Waits `ms` milliseconds without holding a worker.
async fn delay(Query(q): Query<DelayQuery>) -> Response {
    match parse_ms("ms", q.ms.as_deref(), None) {
        Ok(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            "done".into_response()
        }
        Err(reason) => bad_request(reason),
    }
}

/// Answers at once except during the last `for_ms` of every `every_ms` period (counted from
/// the service's start), when it holds each request until the period ends: a periodic freeze,
/// like a stop-the-world pause.
async fn stall(State(s): State<Shared>, Query(q): Query<StallQuery>) -> Response {
    let every = match parse_ms("every_ms", q.every_ms.as_deref(), Some(2000)) {
        Ok(0) => return bad_request("every_ms must be at least 1".into()),
        Ok(v) => v,
        Err(reason) => return bad_request(reason),
    };
    let freeze = match parse_ms("for_ms", q.for_ms.as_deref(), Some(1000)) {
        Ok(v) if v <= every => v,
        Ok(_) => return bad_request("for_ms must not exceed every_ms".into()),
        Err(reason) => return bad_request(reason),
    };
    let now_ms = s.started.elapsed().as_millis() as u64;
    let phase = now_ms % every;
    if phase >= every - freeze {
        tokio::time::sleep(Duration::from_millis(every - phase)).await;
    }
    "ok".into_response()
}

/// The service's routes.
pub fn router() -> Router {
    Router::new()
        .route("/ping", get(ping))
        .route("/health", get(health))
        .route("/delay", get(delay))
        .route("/stall", get(stall))
        .with_state(Shared {
            started: Instant::now(),
        })
}

/// Serves the reference service on `listener` until the future is dropped.
pub async fn serve(listener: TcpListener) -> std::io::Result<()> {
    axum::serve(listener, router()).await
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
                    let server = axum::serve(listener, router()).with_graceful_shutdown(async {
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
