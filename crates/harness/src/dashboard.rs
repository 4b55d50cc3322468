//! The live dashboard (`--dashboard`): a page on its own port that redraws the run's charts
//! every second, a stop button, and `/metrics` in Prometheus' text format — served by axum on
//! a thread of its own while the engine runs. A random token (or `LOADLAB_DASHBOARD_TOKEN`)
//! guards it: `/stop` needs it from the dashboard's own origin, and beyond loopback every
//! request needs it; on loopback the Host header must name this machine, so a web page that
//! rebinds its own name to 127.0.0.1 reaches nothing.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
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

/// The environment variable that sets the dashboard's token (a Kubernetes Secret's, say);
/// without it each dashboard makes a random one.
pub const TOKEN_ENV: &str = "LOADLAB_DASHBOARD_TOKEN";

/// Who may use the dashboard: the token, and whether it listens on loopback only.
#[derive(Clone)]
struct Access {
    token: Arc<str>,
    loopback: bool,
}

/// A running dashboard; stopped when dropped.
pub struct Dashboard {
    shared: Shared,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The token its stop (and, beyond loopback, every request) needs.
    pub token: String,
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
        println!("  dashboard    {}", d.url());
        Ok(Some(d))
    }

    /// The page's address with its token, as printed.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.addr, self.token)
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
        let token = match std::env::var(TOKEN_ENV) {
            Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
            _ => new_token().map_err(sys("cannot read /dev/urandom for the dashboard's token"))?,
        };
        let access = Access {
            token: token.as_str().into(),
            loopback: bound.ip().is_loopback(),
        };
        let app = Router::new()
            .route("/", get(page))
            .route("/status", get(status))
            .route("/charts", get(charts))
            .route("/metrics", get(metrics))
            .route("/stop", post(stop_run))
            .with_state(shared.clone())
            .layer(axum::middleware::from_fn_with_state(access, guard));
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
            token,
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
            println!("  dashboard stays up {keep:?} at {}", self.url());
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

/// A new random token: 128 bits from the kernel, in hex.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token a request carries: `?token=` in its query, or `Authorization: Bearer`.
fn token_of(req: &Request) -> Option<String> {
    let from_query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .map(String::from)
    });
    from_query.or_else(|| {
        req.headers()
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")
            .map(|t| t.trim().to_string())
    })
}

/// Equal strings, compared in a time that does not depend on where they first differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// True when a Host header names this machine (for a dashboard on loopback).
fn local_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

/// True when the request's Origin and Referer, where it has them, are the dashboard's own
/// (the address in its Host header).
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(host) = text(header::HOST) else {
        return false;
    };
    let own = format!("http://{host}");
    let origin_ok = text(header::ORIGIN).is_none_or(|o| o == own);
    let referer_ok =
        text(header::REFERER).is_none_or(|r| r == own || r.starts_with(&format!("{own}/")));
    origin_ok && referer_ok
}

/// Lets a request through, or answers 403 saying why: a Host that is not this machine (on
/// loopback), no token beyond loopback, and a stop without the token or from another origin.
async fn guard(State(access): State<Access>, req: Request, next: Next) -> Response {
    let refuse = |why: &'static str| (StatusCode::FORBIDDEN, why).into_response();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if access.loopback && host.is_some_and(|h| !local_host(h)) {
        return refuse("the dashboard answers only to 127.0.0.1, localhost or [::1]\n");
    }
    let tokened = token_of(&req).is_some_and(|t| same_secret(&t, &access.token));
    if !access.loopback && !tokened {
        return refuse(
            "the dashboard needs its token: ?token=TOKEN or Authorization: Bearer TOKEN\n",
        );
    }
    if req.method() == Method::POST {
        if !tokened {
            return refuse("stopping the run needs the dashboard's token\n");
        }
        if !same_origin(req.headers()) {
            return refuse("stopping the run is only allowed from the dashboard's own page\n");
        }
    }
    next.run(req).await
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Sends one request to the dashboard and returns its status code.
    fn status_of(addr: SocketAddr, request_line: &str, headers: &[(&str, String)]) -> u16 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", addr.port())).unwrap();
        let mut text =
            format!("{request_line} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        s.write_all(text.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn on_loopback_the_pages_are_open_but_a_stop_needs_the_token_from_its_own_origin() {
        let stop = StopSignal::default();
        let d = Dashboard::start("127.0.0.1:0", stop.clone()).unwrap();
        let host = ("Host", format!("127.0.0.1:{}", d.addr.port()));
        let own = ("Origin", format!("http://127.0.0.1:{}", d.addr.port()));
        assert!(d.url().ends_with(&format!("/?token={}", d.token)));
        assert_eq!(d.token.len(), 32);
        assert_eq!(
            status_of(d.addr, "GET /metrics", std::slice::from_ref(&host)),
            200
        );
        assert_eq!(status_of(d.addr, "GET /", std::slice::from_ref(&host)), 200);
        // A page of another site whose name was rebound to 127.0.0.1.
        let rebound = ("Host", format!("attacker.example:{}", d.addr.port()));
        assert_eq!(status_of(d.addr, "GET /status", &[rebound]), 403);
        // A form on another page posting to the dashboard.
        assert_eq!(
            status_of(d.addr, "POST /stop", &[host.clone(), own.clone()]),
            403
        );
        let with_token = format!("POST /stop?token={}", d.token);
        let elsewhere = ("Origin", "http://attacker.example".to_string());
        assert_eq!(
            status_of(d.addr, &with_token, &[host.clone(), elsewhere]),
            403
        );
        let wrong = "POST /stop?token=00000000000000000000000000000000";
        assert_eq!(status_of(d.addr, wrong, &[host.clone(), own.clone()]), 403);
        assert!(!stop.is_stopped(), "no refused request stopped the run");
        assert_eq!(status_of(d.addr, &with_token, &[host, own]), 202);
        assert!(stop.is_stopped());
    }

    #[test]
    fn beyond_loopback_every_request_needs_the_token() {
        let d = Dashboard::start("0.0.0.0:0", StopSignal::default()).unwrap();
        let host = ("Host", format!("203.0.113.9:{}", d.addr.port()));
        assert_eq!(
            status_of(d.addr, "GET /metrics", std::slice::from_ref(&host)),
            403
        );
        assert_eq!(status_of(d.addr, "GET /", std::slice::from_ref(&host)), 403);
        let bearer = ("Authorization", format!("Bearer {}", d.token));
        assert_eq!(
            status_of(d.addr, "GET /metrics", &[host.clone(), bearer]),
            200
        );
        let query = format!("GET /?token={}", d.token);
        assert_eq!(status_of(d.addr, &query, &[host]), 200);
    }

    #[test]
    fn host_names_of_this_machine_are_told_from_others() {
        for local in ["127.0.0.1:9", "localhost:9090", "[::1]:80", "localhost"] {
            assert!(local_host(local), "{local}");
        }
        for other in [
            "x",
            "127.0.0.1.attacker.example:9",
            "localhost.example",
            "[::2]:80",
        ] {
            assert!(!local_host(other), "{other}");
        }
    }
}
