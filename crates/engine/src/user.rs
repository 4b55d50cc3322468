//! Virtual users: one task per session that runs its scenario's flow or Markov chain with
//! connections of its own, rendering each request from templates and the user's variables,
//! taking captures, checking expectations and fetching a page's static resources on the
//! user's first visit. Arrivals of the open model start sessions; user phases keep slots of
//! users running session after session.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use loadlab_run::users::{Behaviour, CaptureSource, Expect, RequestStep, Step, Think};
use loadlab_run::{ErrorKind, Plan, RequestTemplate};
use tokio::task::spawn_local;
use tokio::time::{sleep, sleep_until, Instant};

use crate::conn::{connect, Conn};
use crate::context::{micros, Ctx, Pending, ThreadCtx};
use crate::html::resource_urls;
use crate::http1::encode_request;
use crate::schedule::share_of;
use crate::schedule::users::UserCurve;
use crate::user_state::UsersState;

/// Longest pause between sessions of a user slot whose sessions fail to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

fn users(ctx: &ThreadCtx) -> &UsersState {
    ctx.users.as_ref().expect("a thread of a user-model plan")
}

/// Open model: user `index` arrives, due at `intended`; it starts a session now if the thread
/// runs fewer than its cap, else waits for one to end.
pub fn arrive(ctx: &Ctx, intended: Instant, index: u64) {
    let u = users(ctx);
    if u.tasks.get() < u.cap {
        u.tasks.set(u.tasks.get() + 1);
        spawn_local(open_sessions(ctx.clone(), intended, index));
    } else {
        u.queue.borrow_mut().push_back((intended, index));
    }
}

/// Gives back a session task's place when the task ends, however it ends.
struct TaskGuard(Ctx);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let u = users(&self.0);
        u.tasks.set(u.tasks.get().saturating_sub(1));
        if u.tasks.get() == 0 {
            u.idle.notify_waiters();
        }
    }
}

/// Runs a session, then the sessions of waiting arrivals while there are any (dropping those
/// that waited past the timeout).
async fn open_sessions(ctx: Ctx, intended: Instant, index: u64) {
    let _place = TaskGuard(ctx.clone());
    let mut next = Some((intended, index));
    while let Some((intended, index)) = next {
        let pattern = &users(&ctx).model().pattern;
        let scenario = pattern[(index % pattern.len() as u64) as usize];
        session(&ctx, index, scenario, Some(intended), None).await;
        next = loop {
            let popped = users(&ctx).queue.borrow_mut().pop_front();
            match popped {
                Some((t, _)) if t + ctx.timeout < Instant::now() => ctx.record_dropped(1),
                other => break other,
            }
        };
    }
}

/// User phases: keeps this thread's share of the wanted users running, following the curve.
pub async fn control(ctx: Ctx, curve: UserCurve, thread: usize, threads: usize) {
    loop {
        let now = Instant::now();
        // Seconds that ended before this change are sent first, with the count they had.
        ctx.rotate(now);
        let t = now.saturating_duration_since(ctx.origin).as_secs_f64();
        let target = share_of(curve.users_at(t), thread, threads);
        let u = users(&ctx);
        u.target.set(target);
        {
            let mut alive = u.alive.borrow_mut();
            if alive.len() < target as usize {
                alive.resize(target as usize, false);
            }
            for slot in 0..target as usize {
                if !alive[slot] {
                    alive[slot] = true;
                    spawn_local(run_slot(ctx.clone(), slot, thread, threads));
                }
            }
        }
        u.changed.notify_waiters();
        let Some(next) = curve
            .next_change(t)
            .and_then(|n| Duration::try_from_secs_f64(n).ok())
            .and_then(|n| ctx.origin.checked_add(n))
        else {
            break;
        };
        sleep_until(next).await;
    }
}

/// Marks a user slot free and its user gone when the slot's task ends, however it ends.
struct SlotGuard(Ctx, usize);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let u = users(&self.0);
        if let Some(alive) = u.alive.borrow_mut().get_mut(self.1) {
            *alive = false;
        }
        u.active.set(u.active.get().saturating_sub(1));
    }
}

/// One user slot: sessions back to back while the slot is within the target. Each new session
/// is a new visitor (new variables, payload row and connections); slot `g` (numbered across
/// threads) runs the scenario pattern from its own offset, so the mix holds at any user count.
async fn run_slot(ctx: Ctx, slot: usize, thread: usize, threads: usize) {
    let u = users(&ctx);
    u.active.set(u.active.get() + 1);
    let _slot = SlotGuard(ctx.clone(), slot);
    let global = (slot * threads + thread) as u64;
    let mut backoff = Duration::ZERO;
    let mut sessions = 0u64;
    while (slot as u64) < users(&ctx).target.get() {
        let u = users(&ctx);
        let index = u.begun.get() * threads as u64 + thread as u64;
        u.begun.set(u.begun.get() + 1);
        let pattern = &u.model().pattern;
        let scenario = pattern[((global + sessions) % pattern.len() as u64) as usize];
        sessions += 1;
        let ended = session(&ctx, index, scenario, None, Some(slot)).await;
        if ended.transport_failure || ended.sent == 0 {
            // Sessions that cannot connect, or send nothing, would otherwise spin.
            backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
            sleep(backoff).await;
        } else {
            backoff = Duration::ZERO;
        }
        tokio::task::yield_now().await;
    }
}

/// How a session went, for its slot.
struct Ended {
    /// It ended by a transport error.
    transport_failure: bool,
    /// Requests it sent.
    sent: u64,
}

/// Why a session ended early.
enum End {
    /// A failure, with its reason for the report; `transport` when a connection failed.
    Failed { reason: String, transport: bool },
    /// The user's slot was stopped by a lower user count.
    Stopped,
}

/// Counts an arrival's user as active while its session runs, however it ends.
struct ActiveGuard<'a>(&'a UsersState);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.active.set(self.0.active.get().saturating_sub(1));
    }
}

/// Runs one session of user `index` on `scenario` and records it.
async fn session(
    ctx: &Ctx,
    index: u64,
    scenario: usize,
    intended: Option<Instant>,
    slot: Option<usize>,
) -> Ended {
    let u = users(ctx);
    let start = Instant::now();
    ctx.rec_at(start).counts.users_started += 1;
    // A slot's user stays active between its sessions; an arrival is active for its session.
    let active = slot.is_none().then(|| {
        u.active.set(u.active.get() + 1);
        ActiveGuard(u)
    });
    let mut s = Session::new(ctx, u, index, intended, slot);
    let result = s.run(scenario).await;
    let sent = s.sent;
    drop(s);
    drop(active);
    let now = Instant::now();
    let length = micros(now.saturating_duration_since(intended.unwrap_or(start)));
    let mut record = u.record.borrow_mut();
    let transport_failure = match result {
        Ok(()) => {
            ctx.rec_at(now).counts.users_completed += 1;
            record.sessions.saturating_record(length);
            false
        }
        Err(End::Failed { reason, transport }) => {
            ctx.rec_at(now).counts.users_failed += 1;
            record.sessions.saturating_record(length);
            *record.failures.entry(reason).or_default() += 1;
            transport
        }
        Err(End::Stopped) => false,
    };
    Ended {
        transport_failure,
        sent,
    }
}

/// A user's state during one session.
struct Session<'a> {
    ctx: &'a ThreadCtx,
    users: &'a UsersState,
    plan: &'a Plan,
    vars: HashMap<String, String>,
    rng: fastrand::Rng,
    /// One connection per endpoint, opened on first use.
    conns: Vec<Option<Conn>>,
    /// Pages whose static resources this user has fetched.
    visited: HashSet<usize>,
    /// Open model: when the next request is due (the arrival, then the end of a think).
    next_intended: Option<Instant>,
    open: bool,
    slot: Option<usize>,
    /// Requests sent so far.
    sent: u64,
}

type Steps<'s> = Pin<Box<dyn Future<Output = Result<(), End>> + 's>>;

impl<'a> Session<'a> {
    fn new(
        ctx: &'a ThreadCtx,
        users: &'a UsersState,
        index: u64,
        intended: Option<Instant>,
        slot: Option<usize>,
    ) -> Self {
        let plan: &Plan = &users.plan;
        let model = users.model();
        // Each user's randomness depends only on the seed and its index, whatever thread runs it.
        let mut rng =
            fastrand::Rng::with_seed(model.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut vars = HashMap::new();
        for (name, values) in &model.variables {
            if !values.is_empty() {
                vars.insert(name.clone(), values[rng.usize(..values.len())].clone());
            }
        }
        for p in &model.payloads {
            for (field, value) in p.fields.iter().zip(p.row(index, &mut rng)) {
                vars.insert(field.clone(), value.clone());
            }
        }
        Session {
            ctx,
            users,
            plan,
            vars,
            rng,
            conns: (0..plan.endpoints.len()).map(|_| None).collect(),
            visited: HashSet::new(),
            next_intended: intended,
            open: intended.is_some(),
            slot,
            sent: 0,
        }
    }

    async fn run(&mut self, scenario: usize) -> Result<(), End> {
        let model = self.users.model();
        let scenario = &model.scenarios[scenario];
        match &scenario.behaviour {
            Behaviour::Flow(steps) => self.steps(steps).await,
            Behaviour::Chain(chain) => {
                let mut state = Some(chain.start);
                while let Some(s) = state {
                    self.check_stop()?;
                    let st = &chain.states[s];
                    if let Some(r) = &st.request {
                        self.request(r).await?;
                    }
                    if let Some(t) = &st.think {
                        self.think(t).await?;
                    }
                    state = chain.next(s, &mut self.rng);
                    tokio::task::yield_now().await;
                }
                Ok(())
            }
        }
    }

    fn steps<'s>(&'s mut self, steps: &'s [Step]) -> Steps<'s> {
        Box::pin(async move {
            for step in steps {
                match step {
                    Step::Request(r) => self.request(r).await?,
                    Step::Think(t) => self.think(t).await?,
                    Step::Loop { count, steps } => {
                        let mut k = 0;
                        while count.is_none_or(|c| k < c) {
                            self.steps(steps).await?;
                            k += 1;
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }
            Ok(())
        })
    }

    fn check_stop(&self) -> Result<(), End> {
        match self.slot {
            Some(slot) if slot as u64 >= self.users.target.get() => Err(End::Stopped),
            _ => Ok(()),
        }
    }

    async fn think(&mut self, think: &Think) -> Result<(), End> {
        let until = Instant::now() + think.sample(&mut self.rng);
        if self.open {
            self.next_intended = Some(until);
        }
        if self.slot.is_none() {
            sleep_until(until).await;
            return Ok(());
        }
        loop {
            tokio::select! {
                _ = sleep_until(until) => return self.check_stop(),
                _ = self.users.changed.notified() => self.check_stop()?,
            }
        }
    }

    /// Sends one request step, then checks, captures and fetches what it says.
    async fn request(&mut self, step: &RequestStep) -> Result<(), End> {
        self.check_stop()?;
        let t = &self.plan.requests[step.request];
        let (bytes, path) = self.render(step, t);
        let intended = if self.open {
            Some(self.next_intended.take().unwrap_or_else(Instant::now))
        } else {
            None
        };
        let keep = step.needs_body()
            || !step.captures.is_empty()
            || step
                .expects
                .iter()
                .any(|e| matches!(e, Expect::ContentType(_)));
        let (status, headers, body) = self
            .send(step.request, &bytes, intended, keep)
            .await
            .map_err(|kind| End::Failed {
                reason: format!("{} on {}", kind.as_str(), t.name),
                transport: true,
            })?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        for e in &step.expects {
            let ok = match e {
                Expect::Status(codes) => codes.contains(&status),
                Expect::ContentType(ct) => header("content-type")
                    .is_some_and(|v| v.to_ascii_lowercase().contains(&ct.to_ascii_lowercase())),
            };
            if !ok {
                let what = match e {
                    Expect::Status(_) => "statusCode",
                    Expect::ContentType(_) => "contentType",
                };
                return Err(End::Failed {
                    reason: format!("expect {what} on {}", t.name),
                    transport: false,
                });
            }
        }
        let mut json: Option<Option<serde_json::Value>> = None;
        for c in &step.captures {
            let value = match &c.source {
                CaptureSource::Header(h) => header(h).map(str::to_string),
                CaptureSource::Json(q) => {
                    let doc = json.get_or_insert_with(|| serde_json::from_slice(&body).ok());
                    match (doc.as_ref(), self.users.json_paths.get(q)) {
                        (Some(doc), Some(path)) => path.query(doc).first().map(|v| match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        }),
                        _ => None,
                    }
                }
            };
            match value {
                Some(v) => {
                    self.vars.insert(c.var.clone(), v);
                }
                None => {
                    return Err(End::Failed {
                        reason: format!("capture {} on {}", c.var, t.name),
                        transport: false,
                    })
                }
            }
        }
        if let Some(statics) = step.static_resources {
            if self.visited.insert(step.request) {
                let base = format!("http://{}{path}", self.plan.endpoints[t.endpoint].authority);
                self.fetch_static(statics, &base, &body).await;
            }
        }
        Ok(())
    }

    /// Fetches, one after another on the page's connection, the resources the page's HTML
    /// names on the page's own host; others are counted as skipped. A failed resource is
    /// recorded but does not end the session, as a browser shows the page without it.
    async fn fetch_static(&mut self, statics: usize, base: &str, body: &[u8]) {
        let html = String::from_utf8_lossy(body);
        let base = url::Url::parse(base).ok();
        let t = &self.plan.requests[statics];
        let (mut fetched, mut skipped) = (0, 0);
        for src in resource_urls(&html) {
            let resolved = base.as_ref().and_then(|b| b.join(&src).ok());
            let same_host = resolved.as_ref().zip(base.as_ref()).is_some_and(|(r, b)| {
                r.scheme() == "http"
                    && r.host_str() == b.host_str()
                    && r.port_or_known_default() == b.port_or_known_default()
            });
            let Some(url) = resolved.filter(|_| same_host) else {
                skipped += 1;
                continue;
            };
            let mut path = url.path().to_string();
            if let Some(q) = url.query() {
                path.push('?');
                path.push_str(q);
            }
            let req = RequestTemplate {
                path,
                headers: Vec::new(),
                body: Vec::new(),
                method: "GET".into(),
                ..t.clone()
            };
            let bytes = encode_request(&req, &self.plan.endpoints[t.endpoint].authority);
            if self.send(statics, &bytes, None, false).await.is_ok() {
                fetched += 1;
            }
        }
        let mut record = self.users.record.borrow_mut();
        record.static_fetched += fetched;
        record.static_skipped += skipped;
    }

    /// Renders a request step into bytes, and the path it was sent to.
    fn render(&mut self, step: &RequestStep, t: &RequestTemplate) -> (Vec<u8>, String) {
        let Session { vars, rng, .. } = self;
        let lookup = |k: &str| vars.get(k).map(String::as_str);
        let mut raw = String::new();
        step.path.render(lookup, rng, &mut raw);
        let mut path = request_target(&raw);
        for (k, v) in &step.query {
            path.push(if path.contains('?') { '&' } else { '?' });
            let mut value = String::new();
            v.render(lookup, rng, &mut value);
            path.extend(url::form_urlencoded::byte_serialize(k.as_bytes()));
            path.push('=');
            path.extend(url::form_urlencoded::byte_serialize(value.as_bytes()));
        }
        let headers = step
            .headers
            .iter()
            .map(|(k, v)| {
                let mut value = String::new();
                v.render(lookup, rng, &mut value);
                // A captured value must not be able to end the header line.
                value.retain(|c| c != '\r' && c != '\n');
                (k.clone(), value)
            })
            .collect();
        let body = match &step.json {
            Some(doc) => {
                let rendered = render_json(doc, &lookup, rng);
                serde_json::to_vec(&rendered).unwrap_or_default()
            }
            None => {
                let mut b = String::new();
                step.body.render(lookup, rng, &mut b);
                b.into_bytes()
            }
        };
        let req = RequestTemplate {
            path: path.clone(),
            headers,
            body,
            ..t.clone()
        };
        let bytes = encode_request(&req, &self.plan.endpoints[t.endpoint].authority);
        (bytes, path)
    }

    /// Sends rendered bytes as request `template` on the session's connection to its endpoint
    /// (opening it first if needed) and records the outcome; returns the status and, when
    /// `keep`, the response's headers and body.
    async fn send(
        &mut self,
        template: usize,
        bytes: &[u8],
        intended: Option<Instant>,
        keep: bool,
    ) -> Result<(u16, Vec<(String, String)>, Vec<u8>), ErrorKind> {
        let ep = self.plan.requests[template].endpoint;
        let pending = Pending { intended, template };
        let sent_at = Instant::now();
        self.ctx.mark_sent(1, sent_at);
        self.sent += 1;
        // A kept-alive connection the server closed while the user thought fails before any
        // byte of the answer; like a browser, the request then goes once more on a new one.
        let mut retried = false;
        loop {
            let reused = self.conns[ep].is_some();
            if !reused {
                match connect(&self.ctx.endpoints[ep], self.ctx.connect_timeout).await {
                    Ok(stream) => self.conns[ep] = Some(Conn::new(stream)),
                    Err(kind) => {
                        self.ctx.record_errors(kind, &[pending]);
                        return Err(kind);
                    }
                }
            }
            let conn = self.conns[ep].as_mut().expect("connected above");
            conn.parser.keep(keep);
            let outcome = conn
                .exchange(
                    self.ctx,
                    std::slice::from_ref(&pending),
                    sent_at,
                    Some(bytes),
                )
                .await;
            match outcome {
                Ok(alive) => {
                    let status = conn.last_status;
                    let (headers, body) = conn.parser.take_kept();
                    if !alive {
                        self.conns[ep] = None;
                    }
                    return Ok((status, headers, body));
                }
                Err((kind, 0))
                    if reused
                        && !retried
                        && matches!(kind, ErrorKind::Closed | ErrorKind::Reset) =>
                {
                    self.conns[ep] = None;
                    retried = true;
                }
                Err((kind, _)) => {
                    self.ctx.record_errors(kind, &[pending]);
                    self.conns[ep] = None;
                    return Err(kind);
                }
            }
        }
    }
}

/// A rendered path made safe for the request line: bytes that may not appear there (spaces,
/// controls, non-ASCII) are percent-encoded.
fn request_target(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b <= b' ' || b >= 0x7f || b == b'"' {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    if !out.starts_with('/') {
        out.insert(0, '/');
    }
    out
}

/// A JSON document with every string rendered as a template.
fn render_json<'v>(
    doc: &serde_json::Value,
    lookup: &impl Fn(&str) -> Option<&'v str>,
    rng: &mut fastrand::Rng,
) -> serde_json::Value {
    use serde_json::Value;
    match doc {
        Value::String(s) if s.contains("{{") => match loadlab_run::Template::parse(s) {
            Ok(t) => {
                let mut out = String::new();
                t.render(lookup, rng, &mut out);
                Value::String(out)
            }
            Err(_) => doc.clone(),
        },
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| render_json(v, lookup, rng)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), render_json(v, lookup, rng)))
                .collect(),
        ),
        other => other.clone(),
    }
}
