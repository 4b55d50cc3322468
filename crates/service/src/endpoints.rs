//! The handlers, one per endpoint of DESIGN §4.3, with their costs taken from the query.

use std::time::{Duration, Instant as StdInstant};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use crate::state::Shared;

/// Longest wait an endpoint accepts, so a typo cannot hold a connection for days.
pub(crate) const MAX_WAIT_MS: u64 = 600_000;
/// Most iterations `/calc` accepts (about a minute of CPU).
pub(crate) const MAX_CALC_N: u64 = 2_000_000_000;
/// Most KB one `/leak` request keeps (1 GB).
const MAX_LEAK_KB: u64 = 1 << 20;

/// Query parameters, all optional; each handler parses what it needs.
#[derive(Deserialize, Default)]
pub struct Params {
    ms: Option<String>,
    n: Option<String>,
    from: Option<String>,
    log: Option<String>,
    every_ms: Option<String>,
    for_ms: Option<String>,
    kb: Option<String>,
}

/// A 400 with a one-line reason.
pub(crate) fn bad_request(reason: String) -> Response {
    (StatusCode::BAD_REQUEST, reason + "\n").into_response()
}

/// A query parameter that cannot be used; answered as a 400 with its reason.
pub(crate) struct BadRequest(String);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        bad_request(self.0)
    }
}

/// Parses a whole number no larger than `max`, or uses `default` when it is absent.
fn number(
    name: &str,
    value: Option<&str>,
    default: Option<u64>,
    max: u64,
) -> Result<u64, BadRequest> {
    match (value, default) {
        (None, Some(d)) => Ok(d),
        (None, None) => Err(BadRequest(format!("missing query parameter {name}"))),
        (Some(v), _) => match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(BadRequest(format!(
                "{name} must be a whole number from 0 to {max}, got {v:?}"
            ))),
        },
    }
}

/// Parses milliseconds up to [`MAX_WAIT_MS`], or uses `default` when absent.
pub(crate) fn millis(
    name: &str,
    value: Option<&str>,
    default: Option<u64>,
) -> Result<Duration, BadRequest> {
    number(name, value, default, MAX_WAIT_MS).map(Duration::from_millis)
}

/// `200 pong`, no work.
pub async fn ping() -> &'static str {
    "pong"
}

/// Readiness.
pub async fn health() -> &'static str {
    "ok"
}

/// Unknown paths.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("no endpoint {}; try /ping, /delay?ms=N, /block?ms=N, /calc?n=N, /heavy?ms=N, /leak?kb=N, /info, /bbox/async, /bbox/sync, /turno/NAME, /visits/PAGE, /site/PAGE, /static/FILE, POST /login, /account, /health\n", uri.path()),
    )
        .into_response()
}

/// Waits `ms` milliseconds without holding a worker.
pub async fn delay(Query(q): Query<Params>) -> Response {
    match millis("ms", q.ms.as_deref(), None) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            "done".into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Holds its worker `ms` milliseconds with a blocking sleep, like a synchronous server.
pub async fn block(Query(q): Query<Params>) -> Response {
    match millis("ms", q.ms.as_deref(), None) {
        Ok(d) => {
            std::thread::sleep(d);
            "done".into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// CPU work on the worker: the sum of sin(i) for `n` values of i from `from` (default 0; seed
/// 001 summed over 5M..6M, where the runtimes' sin differ in cost).
pub async fn calc(Query(q): Query<Params>) -> Response {
    let from = match number("from", q.from.as_deref(), Some(0), MAX_CALC_N) {
        Ok(from) => from,
        Err(e) => return e.into_response(),
    };
    match number("n", q.n.as_deref(), None, MAX_CALC_N) {
        Ok(n) => {
            // A fold from 0.0, not `sum()` (which starts from -0.0): no work answers "0", as
            // the Node and Python services do.
            let sum = (from..from + n).fold(0.0f64, |acc, i| acc + (i as f64).sin());
            format!("{sum}").into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Keeps `kb` KB for the process's life, every byte written so it is resident: a leak, for
/// watching memory grow on the timeline, or end in an OOM kill under a memory limit.
pub async fn leak(State(s): State<Shared>, Query(q): Query<Params>) -> Response {
    match number("kb", q.kb.as_deref(), None, MAX_LEAK_KB) {
        Ok(kb) => {
            let kept = vec![0x5a_u8; kb as usize * 1024];
            let mut leaked = s.leaked.lock().unwrap_or_else(|e| e.into_inner());
            leaked.push(kept);
            let held: usize = leaked.iter().map(Vec::len).sum();
            format!("kept {kb} KB; {} KB held\n", held / 1024).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Busy-waits `ms` milliseconds on the CPU, holding the worker.
pub async fn heavy(Query(q): Query<Params>) -> Response {
    match millis("ms", q.ms.as_deref(), None) {
        Ok(d) => {
            busy_wait(d);
            "done".into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Spins until this thread has used `d` of CPU, holding the worker: a request's cost in CPU,
/// the same however many threads share the core (on a core of its own, `d` of wall time too).
/// Where the thread's CPU clock cannot be read, spins for `d` of wall time.
pub(crate) fn busy_wait(d: Duration) {
    let Some(start) = thread_cpu() else {
        let start = StdInstant::now();
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
        return;
    };
    let mut spins = 0u64;
    while thread_cpu().is_some_and(|now| now.saturating_sub(start) < d) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
}

/// The CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> Option<Duration> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return None;
    }
    Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

/// Process and OS information as JSON; with `log=1` also written to stdout (seed 004).
pub async fn info(State(s): State<Shared>, Query(q): Query<Params>) -> Response {
    let log = match q.log.as_deref() {
        None | Some("0") | Some("false") => false,
        Some("1") | Some("true") => true,
        Some(v) => return bad_request(format!("log must be 0 or 1, got {v:?}")),
    };
    let body = serde_json::json!({
        "pid": std::process::id(),
        "hostname": s.host.hostname,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "uptime_s": s.started.elapsed().as_secs_f64(),
        "rss_kb": rss_kb(),
        "loadavg": loadavg(),
        "runtime": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "argv": s.host.argv,
        "exec_path": s.host.exec_path,
        "cwd": s.host.cwd,
    });
    if log {
        // The body pretty-printed on the hot path, as a service logging a value for people
        // would (seed 004's console.log of an object).
        println!("{body:#}");
    }
    Json(body).into_response()
}

/// This process's resident memory in KB (the second field of `/proc/self/statm`, in pages).
fn rss_kb() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()? / 1024)
}

/// The 1, 5 and 15-minute load averages, from one `sysinfo` system call.
fn loadavg() -> Option<[f64; 3]> {
    // SAFETY: sysinfo fills the zeroed struct it is given and touches nothing else.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    let scale = f64::from(1u32 << libc::SI_LOAD_SHIFT);
    Some(info.loads.map(|l| l as f64 / scale))
}

/// Answers at once except during the last `for_ms` of every `every_ms` period (counted from
/// the service's start), when it holds each request until the period ends: a periodic freeze,
/// like a stop-the-world pause.
pub async fn stall(State(s): State<Shared>, Query(q): Query<Params>) -> Response {
    let every = match number("every_ms", q.every_ms.as_deref(), Some(2000), MAX_WAIT_MS) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let freeze = match number("for_ms", q.for_ms.as_deref(), Some(1000), MAX_WAIT_MS) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    match stalled_for(&s, every, freeze) {
        Ok(hold) => {
            tokio::time::sleep(hold).await;
            "ok".into_response()
        }
        Err(reason) => bad_request(reason),
    }
}

/// How long a request that arrives now waits under a freeze of the last `freeze` ms of every
/// `every` ms since the service started (zero outside the freeze), or why the two do not fit.
pub(crate) fn stalled_for(s: &Shared, every: u64, freeze: u64) -> Result<Duration, String> {
    if every == 0 {
        return Err("every_ms must be at least 1".into());
    }
    if freeze > every {
        return Err("for_ms must not exceed every_ms".into());
    }
    let now_ms = s.started.elapsed().as_millis() as u64;
    let phase = now_ms % every;
    Ok(if phase >= every - freeze {
        Duration::from_millis(every - phase)
    } else {
        Duration::ZERO
    })
}

/// Black box, asynchronous: a fixed delay, any number at once (or the shared box's answer).
pub async fn bbox_async(State(s): State<Shared>) -> Response {
    if let Some(url) = &s.config.bbox_url {
        return crate::shared_box::call(url, "/bbox/async").await;
    }
    tokio::time::sleep(s.config.bbox_async_delay.unwrap_or(s.config.bbox_delay)).await;
    "ok".into_response()
}

/// Black box, synchronous: a fixed delay, `bbox_workers` at once; the rest queue (or the
/// shared box's answer).
pub async fn bbox_sync(State(s): State<Shared>) -> Response {
    if let Some(url) = &s.config.bbox_url {
        return crate::shared_box::call(url, "/bbox/sync").await;
    }
    let Ok(_permit) = s.bbox_sync.acquire().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    tokio::time::sleep(s.config.bbox_delay).await;
    "ok".into_response()
}

/// The next ticket number of queue `name`, from 1, atomically (in the process, or in the
/// Redis server the replicas share); a store that fails answers 503 with why.
pub async fn turno(
    State(s): State<Shared>,
    Path(name): Path<String>,
    ctx: Option<axum::Extension<crate::tracing::TraceContext>>,
) -> Response {
    if name.is_empty() || name.len() > 128 {
        return bad_request("the queue name must have 1 to 128 characters".into());
    }
    let (wall, start) = (std::time::SystemTime::now(), std::time::Instant::now());
    let next = s.store.next(&name).await;
    if let (Some(tracer), Some(axum::Extension(ctx))) = (&s.tracer, ctx) {
        let (system, op) = match s.config.redis_url {
            Some(_) => ("redis", "INCR"),
            None => ("memory", "increment"),
        };
        let error = next.as_ref().err().map(ToString::to_string);
        tracer.child(
            ctx,
            &format!("{op} turno"),
            (wall, start.elapsed()),
            &[("db.system", system), ("db.operation.name", op)],
            error.as_deref(),
        );
    }
    match next {
        Ok(n) => Json(serde_json::json!({ "turno": n })).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}
