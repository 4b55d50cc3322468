//! A locustfile's users (sessions layer's sibling): a generator thread's Python helper runs the
//! file's users as greenlets, and every request they make comes here, goes out on that user's
//! own connections, is recorded under its Locust name, and goes back with its answer
//! (`PROTOCOL.md` is the contract). The users' count over time is the plan's user phases; the
//! helper starts and stops its share of them.

mod first;
mod helper;
mod names;
mod prepare;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use loadlab_run::users::{LocustSpec, UserModel};
use loadlab_run::{Plan, UserPhase, UserRecord};
use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::{sleep_until, Instant};

use crate::conn::exchange::{Failed, Wire};
use crate::record::Pending;
use crate::schedule::share_of;
use crate::session::client::Client;
pub use first::{discard, start_first, First, Settings};
pub use helper::{ClassTask, Helper, UserClass};
use helper::{FromHelper, RequestMsg};
use names::NameStats;
pub use prepare::{package, python, GEVENT};

/// The task errors whose traceback was shown, across the run's threads.
static SHOWN: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Most redirects a request follows, as Python's `requests` does.
const MAX_REDIRECTS: usize = 30;

/// One thread's locust users: the helper that runs them and what their requests share.
pub struct Locust {
    /// The thread's connection state and recorder.
    pub wire: Wire,
    plan: Arc<Plan>,
    spec: LocustSpec,
    helper: Rc<Helper>,
    /// Each user's connections, by the helper's user id.
    clients: RefCell<HashMap<u64, Client>>,
    /// Results by Locust name.
    names: RefCell<NameStats>,
    /// Requests made with `catch_response=True`, measured and waiting for their verdict.
    caught: RefCell<HashMap<u64, names::Outcome>>,
    /// Task errors, by their one-line message, and whether the traceback was shown.
    record: RefCell<UserRecord>,
    /// Users running in the helper now.
    running: Cell<u64>,
    /// Signalled when the helper answered `stopped` (or went away).
    pub stopped: Notify,
    /// True once the helper answered `stopped` or went away.
    done: Cell<bool>,
}

impl Locust {
    /// The locust users of thread `(index, threads)`, their helper already started.
    pub fn new(plan: Arc<Plan>, model: &UserModel, wire: Wire, helper: Rc<Helper>) -> Self {
        let spec = model.locust.clone().unwrap_or_default();
        Locust {
            wire,
            plan,
            spec,
            helper,
            clients: RefCell::new(HashMap::new()),
            names: RefCell::new(NameStats::default()),
            caught: RefCell::new(HashMap::new()),
            record: RefCell::new(UserRecord::new()),
            running: Cell::new(0),
            stopped: Notify::new(),
            done: Cell::new(false),
        }
    }

    /// Starts the thread's tasks: the helper's messages, and the users' count over `phases`
    /// (this thread's share of each phase's users and spawn rate).
    pub fn start(self: &Rc<Self>, phases: Vec<UserPhase>, (index, threads): (usize, usize)) {
        spawn_local(read(self.clone()));
        let me = self.clone();
        if self.helper.shape {
            // The shape's `tick()` sets the users, once a second, as Locust's runner asks it.
            spawn_local(async move {
                let origin = me.wire.rec.origin;
                let mut second = 0u64;
                while !me.done.get() {
                    me.helper.send(&serde_json::json!({
                        "op": "tick", "run_time": second, "user_count": me.running.get(),
                    }));
                    second += 1;
                    sleep_until(origin + Duration::from_secs(second)).await;
                }
            });
            return;
        }
        spawn_local(async move {
            let origin = me.wire.rec.origin;
            let mut at = origin;
            for p in phases {
                let count = share_of(p.users as u64, index, threads);
                let rate = p.spawn_rate.map_or(0.0, |r| r / threads as f64);
                sleep_until(at).await;
                me.helper.send(&serde_json::json!({
                    "op": "users", "count": count, "rate": rate,
                }));
                at += p.duration;
            }
        });
    }

    /// Stops the users (their `on_stop` runs) once the run's time is up; [`Locust::stopped`]
    /// is signalled when the helper has.
    pub fn stop(&self) {
        if !self.done.get() {
            self.helper.send(&serde_json::json!({"op": "stop"}));
        }
    }

    /// Resolves once the helper has stopped.
    pub async fn until_stopped(&self) {
        while !self.done.get() {
            self.stopped.notified().await;
        }
    }

    /// The run's account of the users: task errors, and failed requests by type, name and
    /// message.
    pub fn take_record(&self) -> UserRecord {
        let mut record = self.record.replace(UserRecord::new());
        record.request_failures = std::mem::take(&mut self.names.borrow_mut().failures);
        record
    }

    /// The results by Locust name (`TYPE name`), in first-seen order.
    pub fn take_names(&self) -> Vec<(String, loadlab_run::Interval)> {
        self.names.borrow_mut().take_intervals()
    }

    /// How long stopping the users may take.
    pub fn stop_timeout(&self) -> Duration {
        self.spec.stop_timeout
    }

    /// Stops the helper's process.
    pub async fn kill(&self) {
        self.helper.kill().await;
    }

    /// The request template (its endpoint and method) of `method` to `origin`.
    fn template(&self, origin: &str, method: &str) -> Option<usize> {
        let ep = self.plan.endpoints.iter().position(|e| {
            let scheme = if e.tls.is_some() { "https" } else { "http" };
            origin == format!("{scheme}://{}", e.authority)
        })?;
        Some(loadlab_run::users::locust_template(ep, method))
    }

    /// Handles one message from the helper.
    fn handle(self: &Rc<Self>, msg: FromHelper) {
        match msg {
            FromHelper::Request(r) => {
                spawn_local(serve(self.clone(), r));
            }
            FromHelper::Verdict {
                id,
                ok,
                error,
                drop,
            } => {
                let caught = self.caught.borrow_mut().remove(&id);
                if let Some(mut outcome) = caught.filter(|_| !drop) {
                    outcome.error = if ok {
                        None
                    } else {
                        Some(error.unwrap_or_else(|| "failure".into()))
                    };
                    self.names.borrow_mut().record(&outcome);
                }
            }
            FromHelper::Event {
                request_type,
                name,
                response_time_ms,
                response_length,
                error,
            } => {
                let outcome = names::Outcome {
                    method: request_type,
                    name,
                    latency: event_latency(response_time_ms),
                    status: 0,
                    length: response_length,
                    error,
                    interval: None,
                };
                self.names.borrow_mut().record(&outcome);
            }
            FromHelper::TaskError {
                user_class,
                task,
                error,
                traceback,
                unhandled,
            } => {
                let key = format!("{user_class}.{task}: {error}");
                // As Locust logs it: the traceback once per distinct error, whichever helper
                // saw it first.
                let first = SHOWN
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.clone());
                let mut record = self.record.borrow_mut();
                let (what, counts) = if unhandled {
                    ("unhandled error", &mut record.unhandled)
                } else {
                    ("a task raised an error", &mut record.failures)
                };
                if first {
                    eprintln!("loadlab locust: {what} (shown once):\n{traceback}");
                }
                *counts.entry(key).or_default() += 1;
            }
            FromHelper::Spawned { count } => {
                let before = self.running.replace(count);
                let rec = &self.wire.rec;
                if count > before {
                    rec.rec_at(Instant::now()).counts.users_started += count - before;
                } else {
                    rec.rec_at(Instant::now()).counts.users_completed += before - count;
                }
                rec.users_active.set(count);
            }
            FromHelper::Quit => self.wire.rec.ask_finish(),
            FromHelper::Shape { stop: true, .. } => self.wire.rec.ask_finish(),
            FromHelper::Shape {
                users,
                rate,
                classes,
                ..
            } => {
                // The shape's count is the run's, and a shape runs on one helper.
                self.helper.send(&serde_json::json!({
                    "op": "users", "count": users.unwrap_or(0), "rate": rate.unwrap_or(0.0),
                    "classes": classes,
                }));
            }
            FromHelper::Stopped { exit_code } => {
                if exit_code.is_some() {
                    self.record.borrow_mut().suggested_exit_code = exit_code;
                }
                self.finish();
            }
            FromHelper::Ready { .. } | FromHelper::Failed { .. } => {}
        }
    }

    /// The helper stopped or went away.
    fn finish(&self) {
        if !self.done.replace(true) {
            let rec = &self.wire.rec;
            rec.rec_at(Instant::now()).counts.users_completed += self.running.replace(0);
            rec.users_active.set(0);
            self.stopped.notify_waiters();
        }
    }
}

/// Helper `index` of `helpers` for a run of `spec`: helper 0 taken over when the command
/// started it before the plan (its `init` and `test_start` are not fired again), else started
/// here; the error says what to do.
pub async fn start_helper(
    spec: &LocustSpec,
    (index, helpers): (usize, usize),
    seed: u64,
) -> std::io::Result<Rc<Helper>> {
    match spec.first.filter(|_| index == 0).and_then(first::take) {
        Some(started) => Helper::adopt(started),
        None => Helper::start(spec, (index, helpers), seed).await,
    }
}

/// What `spec`'s file holds, found by importing it in a helper that runs nothing: its user
/// classes (as the helper describes them: name, weight, host, tasks, wait time) and whether it
/// has a `LoadTestShape`. The error says why the file does not import.
pub fn describe(spec: &LocustSpec) -> std::io::Result<(Vec<UserClass>, bool)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    tokio::task::LocalSet::new().block_on(&rt, Helper::describe(spec))
}

/// Reads the helper's messages until it goes away; a line that is not a message is shown.
async fn read(locust: Rc<Locust>) {
    if let Some(mut lines) = locust.helper.take_lines() {
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<FromHelper>(&line) {
                Ok(msg) => locust.handle(msg),
                Err(e) => {
                    eprintln!("loadlab locust: unexpected line from the helper ({e}): {line}")
                }
            }
        }
    }
    locust.finish();
}

/// Sends a user's request, following redirects on its origin when asked, and answers the
/// helper with the last response; records it under its Locust name (or keeps it for its
/// verdict).
/// The latency of a request the user's code recorded itself (`events.request.fire`), from
/// its `response_time` in ms: any number the code gave, held to the histograms' hour (a
/// `response_time` of 1e300 ended the run with a panic).
fn event_latency(ms: f64) -> Duration {
    let most = Duration::from_micros(loadlab_run::interval::MAX_LATENCY_US);
    Duration::try_from_secs_f64(ms.max(0.0) / 1000.0).map_or(most, |d| d.min(most))
}

/// What the run takes from a helper's request before sending it.
#[derive(Debug)]
pub struct RequestParts {
    /// The name it is recorded under: the one the user gave, else the URL's path and query.
    pub name: String,
    /// The body, decoded from base64 (empty when absent or not base64).
    pub body: Vec<u8>,
    /// When it was due, from the helper's epoch; `None` when not said, or not a time a
    /// [`Duration`] holds.
    pub intended: Option<Duration>,
    /// The user's pacing interval (`constant_pacing`), when positive and finite.
    pub interval: Option<Duration>,
}

/// One line of a helper's messages (`PROTOCOL.md`) as the run reads it, with, for a request,
/// the parts it takes before sending; the error says why the line is not a message.
pub fn read_message(line: &str) -> Result<Option<RequestParts>, serde_json::Error> {
    Ok(match serde_json::from_str::<FromHelper>(line)? {
        FromHelper::Request(r) => Some(request_parts(&r)),
        _ => None,
    })
}

/// What the run takes from `r` before sending it. A time from the helper is a number of its
/// choosing: one past what a [`Duration`] holds is no time at all, not a panic.
fn request_parts(r: &RequestMsg) -> RequestParts {
    RequestParts {
        name: r.name.clone().unwrap_or_else(|| path_of(&r.url)),
        body: match r.body.as_deref() {
            Some(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default(),
            None => Vec::new(),
        },
        intended: r
            .intended
            .and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok()),
        interval: r
            .interval
            .filter(|i| *i > 0.0)
            .and_then(|i| Duration::try_from_secs_f64(i).ok()),
    }
}

async fn serve(locust: Rc<Locust>, r: RequestMsg) {
    let started = Instant::now();
    let RequestParts {
        name,
        body,
        intended,
        interval,
    } = request_parts(&r);
    let intended = intended.and_then(|d| locust.helper.epoch.checked_add(d));
    let mut client = locust
        .clients
        .borrow_mut()
        .remove(&r.user)
        .unwrap_or_else(|| Client::new(&locust.wire, None));
    let result = exchange(&locust, &mut client, &r, body, intended).await;
    match &result {
        // A request given up mid-way leaves its connection with a response on the way: the
        // user's next request opens new ones.
        Err(e) if e.starts_with(TIMED_OUT) => {}
        _ => {
            client.idle_since = Some(Instant::now());
            locust.clients.borrow_mut().insert(r.user, client);
        }
    }
    let end = Instant::now();
    let latency = end.saturating_duration_since(intended.unwrap_or(started).min(started));
    // The run's latency counts the requests a paced user's wait kept back, as its name does.
    {
        let mut second = locust.wire.rec.rec_at(end);
        for m in names::missed(latency, interval) {
            second
                .latency
                .saturating_record(m.as_micros().min(u64::MAX as u128) as u64);
        }
    }
    let (reply, outcome) = match result {
        Ok((status, headers, body, url)) => {
            let error = http_error(status, &name);
            let reply = serde_json::json!({
                "op": "response", "id": r.id, "status": status, "reason": reason(status),
                "headers": headers,
                "body": base64::engine::general_purpose::STANDARD.encode(&body),
                "url": url, "elapsed_ms": latency.as_secs_f64() * 1000.0, "error": null,
            });
            let outcome = names::Outcome {
                method: r.method.clone(),
                name,
                latency,
                status,
                length: body.len() as u64,
                error,
                interval,
            };
            (reply, outcome)
        }
        Err(why) => {
            let reply = serde_json::json!({
                "op": "response", "id": r.id, "status": 0, "reason": null, "headers": [],
                "body": "", "url": r.url, "elapsed_ms": latency.as_secs_f64() * 1000.0,
                "error": why,
            });
            let outcome = names::Outcome {
                method: r.method.clone(),
                name,
                latency,
                status: 0,
                length: 0,
                error: Some(why),
                interval,
            };
            (reply, outcome)
        }
    };
    if r.catch {
        locust.caught.borrow_mut().insert(r.id, outcome);
    } else {
        locust.names.borrow_mut().record(&outcome);
    }
    locust.helper.send(&reply);
}

/// A response's status, headers, body and final URL.
type Answered = (u16, Vec<(String, String)>, Vec<u8>, String);

/// The request and its redirects on `client`; the error in words.
async fn exchange(
    locust: &Locust,
    client: &mut Client,
    r: &RequestMsg,
    mut body: Vec<u8>,
    intended: Option<Instant>,
) -> Result<Answered, String> {
    let mut url = url::Url::parse(&r.url).map_err(|e| format!("InvalidURL: {} ({e})", r.url))?;
    let mut method = r.method.to_ascii_uppercase();
    let mut headers = r.headers.clone();
    let mut hops = 0;
    loop {
        let origin = url.origin().ascii_serialization();
        let template = locust.template(&origin, &method).ok_or_else(|| {
            format!(
                "ConnectionError: loadlab sends requests only to the hosts it was given (-H, a \
                 User's host), not to {origin}"
            )
        })?;
        let authority = &locust.plan.endpoints[locust.plan.requests[template].endpoint].authority;
        let parsed = &url[url::Position::BeforePath..url::Position::AfterQuery];
        // The first request's path and query as the helper wrote them (`requests`' own
        // quoting); the URL parser's would percent-encode a query's `'`.
        let raw = (hops == 0).then(|| raw_path(&r.url)).flatten();
        let path = raw.as_deref().unwrap_or(parsed);
        let bytes = encode(&method, path, &headers, &body, authority);
        let pending = Pending {
            intended: if hops == 0 { intended } else { None },
            template,
        };
        client.close_idle(Instant::now());
        let answer = within(
            r.timeout,
            &locust.wire,
            &pending,
            client.send(&locust.wire, &pending, &bytes, true),
        )
        .await
        .map_err(|f| match f {
            Some(f) => failure(&f),
            None => timed_out(&url, r.timeout.unwrap_or_default()),
        })?;
        let location = answer
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.clone());
        let redirect = matches!(answer.status, 301 | 302 | 303 | 307 | 308);
        match location.filter(|_| redirect && r.redirects && hops < MAX_REDIRECTS) {
            Some(to) => {
                url = url
                    .join(&to)
                    .map_err(|e| format!("InvalidURL: {to} ({e})"))?;
                hops += 1;
                // As `requests`: 303 (and 301/302 of a POST) turn into a GET without a body.
                if answer.status == 303 || (matches!(answer.status, 301 | 302) && method == "POST")
                {
                    method = if method == "HEAD" {
                        method
                    } else {
                        "GET".into()
                    };
                    body.clear();
                    headers.retain(|(k, _)| {
                        !k.eq_ignore_ascii_case("content-type")
                            && !k.eq_ignore_ascii_case("content-length")
                    });
                }
            }
            None => return Ok((answer.status, answer.headers, answer.body, url.to_string())),
        }
    }
}

/// How a request given up after its `timeout=` starts its error text.
const TIMED_OUT: &str = "ReadTimeout(";

/// `send`, given up after `timeout` seconds when one is given (`None` then): a request sent
/// and not answered is recorded as timed out, as the connection's own deadline records it.
async fn within<T>(
    timeout: Option<f64>,
    wire: &Wire,
    pending: &Pending,
    send: impl std::future::Future<Output = Result<T, Failed>>,
) -> Result<T, Option<Failed>> {
    let Some(limit) = timeout
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| Duration::from_secs_f64(t.min(1e9)))
    else {
        return send.await.map_err(Some);
    };
    // The thread runs one task at a time, so what a poll of `send` changes in the count of
    // requests in flight is this request's own: whether it was sent, and is still unanswered.
    let counted = Cell::new(0i64);
    let mut send = std::pin::pin!(send);
    let polled = std::future::poll_fn(|cx| {
        let before = wire.rec.in_flight.get() as i64;
        let poll = send.as_mut().poll(cx);
        counted.set(counted.get() + wire.rec.in_flight.get() as i64 - before);
        poll
    });
    match tokio::time::timeout(limit, polled).await {
        Ok(answer) => answer.map_err(Some),
        Err(_) => {
            if counted.get() > 0 {
                wire.rec.record_errors(
                    loadlab_run::ErrorKind::Timeout,
                    std::slice::from_ref(pending),
                );
            }
            Err(None)
        }
    }
}

/// The failure of a request not answered within `timeout` seconds, as Locust records it
/// (`requests`' read timeout).
fn timed_out(url: &url::Url, timeout: f64) -> String {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    let pool = if url.scheme() == "https" {
        "HTTPSConnectionPool"
    } else {
        "HTTPConnectionPool"
    };
    let secs = if timeout.fract() == 0.0 && timeout.abs() < 1e15 {
        format!("{}", timeout as i64)
    } else {
        format!("{timeout}")
    };
    let inner = py_repr(&format!(
        "{pool}(host='{host}', port={port}): Read timed out. (read timeout={secs})"
    ));
    format!("{TIMED_OUT}ReadTimeoutError({inner}))")
}

/// The failure of a response with status `status` recorded under `name`, as Locust records
/// it: `requests`' `HTTPError` for 4xx and 5xx, its URL the stats name.
fn http_error(status: u16, name: &str) -> Option<String> {
    let kind = match status {
        400..=499 => "Client",
        500..=599 => "Server",
        _ => return None,
    };
    let reason = reason(status).unwrap_or_default();
    let message = format!("{status} {kind} Error: {reason} for url: {name}");
    Some(format!("HTTPError({})", py_repr(&message)))
}

/// Python's `repr` of a string: single quotes, double quotes when it holds a single quote
/// and no double one, the quote and backslash and control characters escaped.
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// A transport failure as the helper's error text (Python's names where they match).
fn failure(f: &Failed) -> String {
    let kind = f.kind();
    let python = match kind.as_str() {
        "connect_refused" => "ConnectionRefusedError",
        "timeout" | "connect_timeout" => "Timeout",
        "reset" => "ConnectionResetError",
        _ => "ConnectionError",
    };
    format!("{python}: {}", kind.as_str())
}

/// An HTTP/1.1 request as written: the method, path, the helper's headers, then `Host`,
/// `Content-Length` and a `User-Agent` where the helper gave none.
fn encode(
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    authority: &str,
) -> Vec<u8> {
    let template = loadlab_run::RequestTemplate {
        name: String::new(),
        url: String::new(),
        endpoint: 0,
        method: method.to_string(),
        path: if path.is_empty() {
            "/".into()
        } else {
            path.to_string()
        },
        headers: headers
            .iter()
            .filter(|(k, _)| {
                !k.eq_ignore_ascii_case("content-length") && !k.eq_ignore_ascii_case("host")
            })
            .cloned()
            .collect(),
        body: body.to_vec(),
        grpc_stream: None,
    };
    crate::http1::encode_request(&template, authority)
}

/// The path and query of the absolute `url` as written (from the first `/` or `?` after its
/// authority to any `#`), when it needs no quoting: only visible ASCII.
fn raw_path(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let tail = rest[start..].split('#').next().unwrap_or_default();
    if !tail.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    Some(match tail.as_bytes().first() {
        None => "/".into(),
        Some(b'?') => format!("/{tail}"),
        Some(_) => tail.into(),
    })
}

/// The path and query of `url`, Locust's name for a request given none.
fn path_of(url: &str) -> String {
    if let Some(path) = raw_path(url) {
        return path;
    }
    match url::Url::parse(url) {
        Ok(u) => u[url::Position::BeforePath..url::Position::AfterQuery].to_string(),
        Err(_) => url.to_string(),
    }
}

/// The reason phrase Python's `requests` shows for common statuses.
fn reason(status: u16) -> Option<&'static str> {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_due_past_what_a_duration_holds_is_read_without_a_time_not_a_panic() {
        let line = r#"{"op": "request", "id": 1, "user": 2, "method": "GET", "url": "http://h/a?b=1", "intended": 1e300, "interval": 1e300, "body": "aGk="}"#;
        let parts = read_message(line).unwrap().unwrap();
        assert_eq!(parts.intended, None);
        assert_eq!(parts.interval, None);
        assert_eq!(parts.name, "/a?b=1");
        assert_eq!(parts.body, b"hi");
        let line = r#"{"op": "request", "id": 1, "user": 2, "method": "GET", "url": "/a", "intended": 1.5, "interval": -1}"#;
        let parts = read_message(line).unwrap().unwrap();
        assert_eq!(parts.intended, Some(Duration::from_millis(1500)));
        assert_eq!(parts.interval, None);
        assert!(read_message("{\"op\": \"nope\"}").is_err());
    }

    #[test]
    fn a_recorded_request_of_any_response_time_has_a_latency_within_the_hour() {
        assert_eq!(event_latency(1e300), Duration::from_secs(3600));
        assert_eq!(event_latency(-5.0), Duration::ZERO);
        assert_eq!(event_latency(f64::NAN), Duration::ZERO);
        assert_eq!(event_latency(250.0), Duration::from_millis(250));
    }

    #[test]
    fn a_request_is_written_with_host_and_length_from_loadlab() {
        let headers = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("Content-Length".to_string(), "999".to_string()),
        ];
        let bytes = encode("POST", "/a?b=1", &headers, b"{}", "127.0.0.1:9");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("POST /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Type: application/json\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Length: 2\r\n") && !text.contains("999"),
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\n{}"), "{text}");
        assert_eq!(path_of("http://h:1/x/y?z=2#f"), "/x/y?z=2");
        // As `requests` sends it: a `'` is kept, in the path and in the query.
        assert_eq!(path_of("http://h:1/it's?q=it's"), "/it's?q=it's");
        assert_eq!(raw_path("http://h:1?a=1").as_deref(), Some("/?a=1"));
        assert_eq!(raw_path("http://h:1").as_deref(), Some("/"));
        assert_eq!(raw_path("http://h:1/a b"), None);
        assert_eq!(reason(404), Some("Not Found"));
    }

    #[test]
    fn failures_are_worded_as_locust_records_them() {
        assert_eq!(
            http_error(404, "/nope").as_deref(),
            Some("HTTPError('404 Client Error: Not Found for url: /nope')")
        );
        assert_eq!(
            http_error(503, "/it's").as_deref(),
            Some("HTTPError(\"503 Server Error: Service Unavailable for url: /it's\")")
        );
        assert_eq!(http_error(302, "/"), None);
        assert_eq!(http_error(200, "/"), None);
        let url = url::Url::parse("http://127.0.0.1:18181/delay").unwrap();
        assert_eq!(
            timed_out(&url, 0.2),
            "ReadTimeout(ReadTimeoutError(\"HTTPConnectionPool(host='127.0.0.1', port=18181): \
             Read timed out. (read timeout=0.2)\"))"
        );
        assert!(timed_out(&url, 2.0).ends_with("(read timeout=2)\"))"));
        assert_eq!(py_repr("a'b\"c\\"), "'a\\'b\"c\\\\'");
    }
}
