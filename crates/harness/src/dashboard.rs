//! The live dashboard (`--dashboard`): a page on its own port that redraws the run's charts
//! every second, a stop button, and `/metrics` in Prometheus' text format — served by axum on
//! a thread of its own while the engine runs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::{Json, Router};
use loadlab_engine::StopSignal;
use loadlab_report::live::Live;
use loadlab_run::{Interval, Summary, TimelineRow};

use crate::{HarnessError, Result};

/// What the handlers share.
#[derive(Clone)]
struct Shared {
    live: Arc<Mutex<Live>>,
    title: Arc<Mutex<String>>,
    stop: StopSignal,
}

/// A running dashboard; stopped when dropped.
pub struct Dashboard {
    shared: Shared,
    /// Where it listens.
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    /// Starts a dashboard when `addr` is given, and prints where.
    pub fn start_if(addr: Option<&str>, stop: &StopSignal) -> Result<Option<Dashboard>> {
        let Some(addr) = addr else {
            return Ok(None);
        };
        let d = Dashboard::start(addr, stop.clone())?;
        println!("  dashboard    http://{}/", d.addr);
        Ok(Some(d))
    }

    /// Binds `addr` (port 0 picks a free one) and serves the page; its stop button raises
    /// `stop`.
    pub fn start(addr: &str, stop: StopSignal) -> Result<Dashboard> {
        let sys = |what: &str| {
            let what = what.to_string();
            move |e| HarnessError::system(what, e)
        };
        let listener = std::net::TcpListener::bind(addr).map_err(sys(&format!(
            "cannot listen on {addr} for the dashboard; give --dashboard=127.0.0.1:PORT with a free port"
        )))?;
        listener
            .set_nonblocking(true)
            .map_err(sys("cannot set up the dashboard's socket"))?;
        let bound = listener
            .local_addr()
            .map_err(sys("cannot set up the dashboard's socket"))?;
        let shared = Shared {
            live: Arc::new(Mutex::new(Live::new("", false))),
            title: Arc::new(Mutex::new(String::new())),
            stop,
        };
        let app = Router::new()
            .route("/", get(page))
            .route("/status", get(status))
            .route("/charts", get(charts))
            .route("/metrics", get(metrics))
            .route("/stop", post(stop_run))
            .with_state(shared.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(sys("cannot start the dashboard's event loop"))?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loadlab-dashboard".into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                });
            })
            .map_err(sys("cannot start the dashboard's thread"))?;
        Ok(Dashboard {
            shared,
            addr: bound,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Starts showing a new run called `label` (`open` when it has an offered rate) whose
    /// requests have `names` (name, method).
    pub fn begin(&self, label: &str, open: bool, names: Vec<(String, String)>) {
        *lock(&self.shared.live) = Live::new(label, open).with_names(names);
        *lock(&self.shared.title) = label.to_string();
    }

    /// Adds a finished second of the current run.
    pub fn add(&self, row: &TimelineRow, iv: &Interval) {
        lock(&self.shared.live).add(row, iv);
    }

    /// A feed for the sampler: each store and process reading shows on `/metrics` as it is
    /// taken.
    pub fn feed(&self) -> Box<dyn Fn(loadlab_run::LiveReading) + Send> {
        let live = self.shared.live.clone();
        Box::new(move |r| lock(&live).read(r))
    }

    /// Marks the current run as ended.
    pub fn finish(&self, summary: &Summary) {
        lock(&self.shared.live).finish(summary.clone());
    }

    /// Keeps serving for `keep` (so the last numbers can be read), then stops.
    pub fn close(mut self, keep: Duration) {
        if !keep.is_zero() {
            println!("  dashboard stays up {keep:?} at http://{}/", self.addr);
            std::thread::sleep(keep);
        }
        self.stop_server();
    }

    fn stop_server(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop_server();
    }
}

/// Locks a mutex, taking the data even if a handler panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn page(State(s): State<Shared>) -> Html<String> {
    Html(Live::page(&lock(&s.title)))
}

async fn status(State(s): State<Shared>) -> Json<loadlab_report::live::Status> {
    Json(lock(&s.live).status())
}

async fn charts(State(s): State<Shared>) -> Html<String> {
    Html(lock(&s.live).charts_html())
}

async fn metrics(State(s): State<Shared>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        lock(&s.live).metrics(),
    )
}

async fn stop_run(State(s): State<Shared>) -> impl IntoResponse {
    s.stop.stop();
    (axum::http::StatusCode::ACCEPTED, "stopping\n")
}
