//! One session of a virtual user (sessions layer): a new visitor with its own variables,
//! payload row, randomness and connections runs its scenario's flow or Markov chain, request
//! by request with think times between, and the session is recorded as completed or failed.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use cookie_store::CookieStore;
use loadlab_run::users::{Behaviour, GrpcStep, RequestStep, Step, Think, WsMessage, WsPayload};
use loadlab_run::{Endpoint, GrpcCode, RequestTemplate, Template};
use loadlab_script::{Eval, Render};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::conn::exchange::Answer;
use crate::http1::encode_request;
use crate::record::{micros, Pending};
use crate::session::checks::{check, count_checks, needs_response};
use crate::session::client::Client;
use crate::session::hooks::{Call, Op, Reply, RequestParams, Response, Thrown};
use crate::session::render::render;
use crate::session::socketio::Sio;
use crate::session::state::Users;
use crate::session::statics;
use crate::session::websocket::{self, Socket, WsFailed};

/// Artillery's name of the error a failed capture or match ends its user with.
const FAILED_CAPTURE: &str = "Failed capture or match";

/// Longest a browser flow may run before its user fails (its actions' own timeouts are
/// Playwright's: 30 s by default).
const BROWSER_FLOW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// How a user slot stops its session early: when the slot falls outside the target.
#[derive(Clone, Copy)]
pub struct SlotStop<'a> {
    /// The slot's number on its thread.
    pub slot: usize,
    /// Slots the thread should run now.
    pub target: &'a Cell<u64>,
    /// Signalled when the target changes.
    pub changed: &'a Notify,
}

/// How a session went, for its slot.
pub struct Ended {
    /// It ended by a transport error.
    pub transport_failure: bool,
    /// Requests it sent.
    pub sent: u64,
}

/// Why a session ended early.
enum End {
    /// A failure, with its reason for the report; `transport` when a connection failed.
    Failed { reason: String, transport: bool },
    /// The user's slot was stopped by a lower user count.
    Stopped,
}

/// Counts an arrival's user as active while its session runs, however it ends.
struct ActiveGuard<'a>(&'a Cell<u64>);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Runs one session of user `index` on `scenario` and records it: an arrival's session due at
/// `intended` (open model), or a session of a user slot that `slot` may stop early.
pub async fn session(
    users: &Users,
    index: u64,
    scenario: usize,
    intended: Option<Instant>,
    slot: Option<SlotStop<'_>>,
) -> Ended {
    let rec = &users.wire.rec;
    let start = Instant::now();
    rec.rec_at(start).counts.users_started += 1;
    {
        let by = &mut users.record.borrow_mut().started_by_scenario;
        if by.len() <= scenario {
            by.resize(scenario + 1, 0);
        }
        by[scenario] += 1;
    }
    // A slot's user stays active between its sessions; an arrival is active for its session.
    let active = slot.is_none().then(|| {
        let active = &rec.users_active;
        active.set(active.get() + 1);
        ActiveGuard(active)
    });
    let mut s = Session::new(users, index, intended, slot);
    let result = s.run(scenario).await;
    if let Some(socket) = s.socket.take() {
        websocket::close(socket).await;
    }
    if let Some(sio) = s.sio.take() {
        sio.close().await;
    }
    let sent = s.client.sent;
    if users.model.keep_vars {
        users.record.borrow_mut().vars =
            Some(s.vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    }
    if s.hooked {
        if let Some(h) = &users.hooks {
            h.end(index);
        }
    }
    drop(s);
    drop(active);
    let now = Instant::now();
    let length = micros(now.saturating_duration_since(intended.unwrap_or(start)));
    let mut record = users.record.borrow_mut();
    let transport_failure = match result {
        Ok(()) => {
            rec.rec_at(now).counts.users_completed += 1;
            record.sessions.saturating_record(length);
            false
        }
        Err(End::Failed { reason, transport }) => {
            rec.rec_at(now).counts.users_failed += 1;
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
    users: &'a Users,
    vars: HashMap<String, String>,
    rng: fastrand::Rng,
    /// The user's connections.
    client: Client,
    /// Pages whose static resources this user has fetched.
    visited: HashSet<usize>,
    /// Open model: when the next request is due (the arrival, then the end of a think).
    next_intended: Option<Instant>,
    open: bool,
    slot: Option<SlotStop<'a>>,
    /// The user's index: its context's key in the processor's helper.
    index: u64,
    /// The scenario it runs.
    scenario: usize,
    /// True once a processor function was called for it.
    hooked: bool,
    /// The user's cookies, from the first `Set-Cookie` or `cookie` on (Artillery's jar).
    cookies: Option<CookieStore>,
    /// True once a response set a cookie: from then on every request sends the jar's
    /// cookies, as Artillery attaches its jar; before, only a request with `cookie` does.
    jar_enabled: bool,
    /// A ws scenario's socket, open for the session.
    socket: Option<Socket>,
    /// A socketio scenario's connection, open for the session.
    sio: Option<Sio>,
    /// While a `parallel` step runs, its start: every request of it is timed from there.
    issued_at: Option<Instant>,
    /// While the scenario's `onError` functions run, why the request failed.
    failure: Option<String>,
    /// Set when a request step failed in the client's own way without a transport error (too
    /// many redirects), which Artillery's `onError` functions hear of.
    request_failed: bool,
    /// How deep in loops and parallel steps the user is (0: a step of the flow itself).
    depth: u32,
    /// True once the current step of the flow itself has waited on I/O (a request, a think,
    /// a function that called back late): from there Artillery runs the step's remaining work
    /// from the event loop, where a function's throw is not caught.
    io_in_step: bool,
}

impl From<WsFailed> for End {
    fn from(f: WsFailed) -> Self {
        End::Failed {
            reason: f.reason,
            transport: f.transport,
        }
    }
}

/// True for a status that redirects with a `Location`.
fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// A random UUID, version 4 (RFC 9562), from the user's own randomness.
fn uuid_v4(rng: &mut fastrand::Rng) -> String {
    let (hi, lo) = (rng.u64(..), rng.u64(..));
    let hi = (hi & !0xF000) | 0x4000;
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

/// The URL of `path` on `origin` (`scheme://authority`).
fn url_of(origin: &str, path: &str) -> Option<url::Url> {
    url::Url::parse(&format!("{origin}{path}")).ok()
}

type Steps<'s> = Pin<Box<dyn Future<Output = Result<(), End>> + 's>>;

impl<'a> Session<'a> {
    fn new(
        users: &'a Users,
        index: u64,
        intended: Option<Instant>,
        slot: Option<SlotStop<'a>>,
    ) -> Self {
        let model = &users.model;
        // Each user's randomness depends only on the seed and its index, whatever thread runs it.
        let mut rng =
            fastrand::Rng::with_seed(model.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut vars = HashMap::new();
        for (name, values) in &model.variables {
            if !values.is_empty() {
                vars.insert(name.clone(), values[rng.usize(..values.len())].clone());
            }
        }
        for (name, items) in &model.variable_objects {
            if !items.is_empty() {
                let item = &items[rng.usize(..items.len())];
                vars.extend(loadlab_script::vars::loop_item_vars(name, item));
            }
        }
        for p in &model.payloads {
            for (field, value) in p.fields.iter().zip(p.row(index, &mut rng)) {
                vars.insert(field.clone(), value.clone());
            }
        }
        if model.uuid {
            vars.insert("$uuid".into(), uuid_v4(&mut rng));
        }
        Session {
            users,
            vars,
            rng,
            client: Client::new(&users.wire, users.pool.clone()),
            visited: HashSet::new(),
            next_intended: intended,
            open: intended.is_some(),
            slot,
            index,
            scenario: 0,
            hooked: false,
            cookies: None,
            jar_enabled: false,
            socket: None,
            sio: None,
            issued_at: None,
            failure: None,
            request_failed: false,
            depth: 0,
            io_in_step: false,
        }
    }

    async fn run(&mut self, scenario: usize) -> Result<(), End> {
        self.scenario = scenario;
        let scenario = &self.users.model.scenarios[scenario];
        if let Some(connect) = &scenario.websocket {
            // As Artillery's ws engine: the socket opens before the flow's first step.
            let lookup = |k: &str| self.vars.get(k).map(String::as_str);
            let mut path = String::new();
            connect.path.render(lookup, &mut self.rng, &mut path);
            let mut headers = Vec::with_capacity(connect.headers.len());
            for (k, v) in &connect.headers {
                let mut value = String::new();
                v.render(lookup, &mut self.rng, &mut value);
                headers.push((k.clone(), value));
            }
            let intended = self.intended();
            if connect.socketio {
                self.sio = Some(Sio::open(self.users, connect, &path, &headers, intended).await?);
            } else {
                self.socket =
                    Some(websocket::open(self.users, connect, &path, &headers, intended).await?);
            }
        }
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
                if self.depth == 0 {
                    self.io_in_step = false;
                }
                match step {
                    Step::Request(r) => self.request(r).await?,
                    Step::Ws(m) => self.message(m).await?,
                    Step::Emit(e) => self.emit(e).await?,
                    Step::Think(t) => self.think(t).await?,
                    Step::ThinkTemplate(t) => {
                        let mut text = String::new();
                        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
                        t.render(lookup, &mut self.rng, &mut text);
                        let Some(d) = think_time(&text) else {
                            return Err(End::Failed {
                                reason: format!("Invalid think time: {text}"),
                                transport: false,
                            });
                        };
                        self.think(&Think::Constant(d)).await?
                    }
                    Step::Function(name) => {
                        self.call(Op::Fn, std::slice::from_ref(name), None, None)
                            .await?;
                    }
                    Step::Browser(name) => {
                        self.call(Op::Browser, std::slice::from_ref(name), None, None)
                            .await?;
                    }
                    Step::Log(t) => {
                        let mut line = String::new();
                        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
                        t.render(lookup, &mut self.rng, &mut line);
                        eprintln!("{line}");
                    }
                    Step::Parallel(steps) => {
                        self.depth += 1;
                        self.parallel(steps).await?;
                        self.depth -= 1;
                    }
                    Step::Loop {
                        count,
                        steps,
                        over,
                        while_true,
                        names,
                        count_template,
                    } => {
                        // A templated count is read when the loop starts, as Artillery does.
                        let (start, count) = match count_template {
                            Some(t) => {
                                let mut text = String::new();
                                let lookup = |k: &str| self.vars.get(k).map(String::as_str);
                                t.render(lookup, &mut self.rng, &mut text);
                                let (from, to) = loop_range(&text);
                                (from, Some(to.saturating_sub(from)))
                            }
                            None => (0, *count),
                        };
                        let count = &count;
                        // As Artillery: `over` runs once per item; with `whileTrue` the
                        // function, asked after each pass, decides (the count is ignored);
                        // otherwise the count.
                        let mut k = 0u64;
                        loop {
                            let more = match (over.is_empty(), while_true) {
                                (false, _) => (k as usize) < over.len(),
                                (true, Some(_)) => true,
                                (true, None) => count.is_none_or(|c| k < c),
                            };
                            if !more {
                                break;
                            }
                            // As Artillery counts: 0 in the first pass, and after each pass
                            // the passes done (what `whileTrue` sees); the item is the count
                            // when there are no items.
                            self.vars
                                .insert(names.count.clone(), (start + k).to_string());
                            match over.get(k as usize) {
                                Some(item) => self.vars.extend(
                                    loadlab_script::vars::loop_item_vars(&names.element, item),
                                ),
                                None => {
                                    self.vars
                                        .insert(names.element.clone(), (start + k).to_string());
                                }
                            }
                            self.depth += 1;
                            self.steps(steps).await?;
                            self.depth -= 1;
                            k += 1;
                            self.vars
                                .insert(names.count.clone(), (start + k).to_string());
                            if let Some(f) = while_true.as_ref().filter(|_| over.is_empty()) {
                                if !self.ask(Op::While, f).await? {
                                    break;
                                }
                            }
                            tokio::task::yield_now().await;
                        }
                    }
                }
                // Artillery calls back from the event loop after every kind of step but a
                // function that called back at once (and loops and parallel steps, whose own
                // steps say).
                if !matches!(
                    step,
                    Step::Function(_) | Step::Loop { .. } | Step::Parallel(_)
                ) {
                    self.io_in_step = true;
                }
            }
            Ok(())
        })
    }

    /// Runs a `parallel` step's `steps` as Artillery's user does: each is issued at the
    /// step's start, but the user's agent holds one socket per host (`maxSockets: 1`), so the
    /// requests queue on the user's connection and go one after another, each timed from the
    /// step's start (the queue included, as Artillery times a request from its issue).
    async fn parallel(&mut self, steps: &[Step]) -> Result<(), End> {
        self.check_stop()?;
        // A parallel step inside another was issued with it.
        let outer = self.issued_at;
        let start = outer.unwrap_or_else(|| self.next_intended.take().unwrap_or_else(Instant::now));
        self.issued_at = Some(start);
        let result = self.steps(steps).await;
        self.issued_at = outer;
        result
    }

    fn check_stop(&self) -> Result<(), End> {
        match self.slot {
            Some(s) if s.slot as u64 >= s.target.get() => Err(End::Stopped),
            _ => Ok(()),
        }
    }

    async fn think(&mut self, think: &Think) -> Result<(), End> {
        let until = Instant::now() + think.sample(&mut self.rng);
        if self.open {
            self.next_intended = Some(until);
        }
        // A Socket.IO server pings and closes a connection that does not answer.
        if let Some(sio) = self.sio.as_mut() {
            sio.idle_until(until).await;
        }
        let Some(slot) = self.slot else {
            sleep_until(until).await;
            return Ok(());
        };
        loop {
            tokio::select! {
                _ = sleep_until(until) => return self.check_stop(),
                _ = slot.changed.notified() => self.check_stop()?,
            }
        }
    }

    /// Calls processor functions `names` with the user's context (and the request and its
    /// response, for the request hooks); takes the variables they set and the metrics they
    /// emitted. Their answer: the request as they changed it, and an `If` or `While` call's
    /// result.
    async fn exchange(
        &mut self,
        op: Op,
        names: &[String],
        req: Option<&RequestParams>,
        res: Option<Response<'_>>,
    ) -> Result<Reply, End> {
        let users = self.users;
        let failed = |reason: String| End::Failed {
            reason,
            transport: false,
        };
        let Some(hooks) = &users.hooks else {
            return Err(failed("no processor to call functions of".into()));
        };
        self.hooked = true;
        let call = Call {
            op,
            names,
            user: self.index,
            scenario: &users.model.scenarios[self.scenario].name,
            vars: &self.vars,
            req,
            res,
            error: self.failure.as_deref(),
        };
        // A browser flow is a whole journey, each of its actions bounded by Playwright's own
        // timeouts; a hook is one step, bounded by the request timeout.
        let timeout = match op {
            Op::Browser => users.wire.timeout.max(BROWSER_FLOW_TIMEOUT),
            _ => users.wire.timeout,
        };
        let mut reply = hooks.call(&call, timeout).await.map_err(failed)?;
        {
            let mut record = users.record.borrow_mut();
            for (kind, name, value) in &reply.metrics {
                record.custom.add(kind, name, *value);
            }
        }
        self.vars.extend(std::mem::take(&mut reply.vars));
        let Some(err) = reply.err.take() else {
            self.io_in_step |= reply.deferred;
            return Ok(reply);
        };
        // A function that throws where Artillery's engine calls it from the event loop (an
        // `afterResponse` or `onError` hook, or any function once the step has waited on
        // I/O) kills Artillery's worker, and Artillery exits 11: the run ends here too.
        let escaped = match reply.thrown {
            Some(Thrown::Deferred) => true,
            Some(Thrown::Sync) => matches!(op, Op::After | Op::Error) || self.io_in_step,
            None => false,
        };
        let mut record = users.record.borrow_mut();
        if escaped {
            record.crashed.get_or_insert_with(|| err.clone());
            drop(record);
            users.wire.rec.ask_finish();
        } else if let Some(name) = &reply.counted {
            record.custom.add("error", name, 1.0);
        }
        Err(failed(err))
    }

    /// Calls processor functions for a step or a request hook: the request as they changed
    /// it, when they did.
    async fn call(
        &mut self,
        op: Op,
        names: &[String],
        req: Option<&RequestParams>,
        res: Option<Response<'_>>,
    ) -> Result<Option<RequestParams>, End> {
        Ok(self.exchange(op, names, req, res).await?.req)
    }

    /// Asks processor function `name` a question (`ifTrue`'s `(vars)`, `whileTrue`'s
    /// `(context, next)`): its answer.
    async fn ask(&mut self, op: Op, name: &str) -> Result<bool, End> {
        let names = [name.to_string()];
        Ok(self.exchange(op, &names, None, None).await?.ok == Some(true))
    }

    /// Adds the user's cookies for `req`'s URL as a `Cookie` header at the end of its headers
    /// (after a `Cookie` header the step sets itself); true when it added one.
    fn add_cookies(&self, req: &mut RequestTemplate, origin: &str) -> bool {
        let (Some(jar), Some(url)) = (&self.cookies, url_of(origin, &req.path)) else {
            return false;
        };
        let value = jar
            .get_request_values(&url)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        if value.is_empty() {
            return false;
        }
        req.headers.push(("Cookie".into(), value));
        true
    }

    /// Keeps the cookies a response to `path` on `origin` sets.
    fn keep_cookies(&mut self, answer: &Answer, origin: &str, path: &str) {
        let mut set = answer
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .peekable();
        if set.peek().is_none() {
            return;
        }
        let Some(url) = url_of(origin, path) else {
            return;
        };
        self.jar_enabled = true;
        let jar = self.cookies.get_or_insert_with(CookieStore::default);
        for (_, value) in set {
            // A cookie the store refuses (bad domain, unparseable) is skipped, as a browser
            // and Artillery's jar skip it.
            let _ = jar.parse(value, &url);
        }
    }

    /// True when `step` is to be sent: its `probability` drew it, and it has no `ifTrue` or
    /// its condition holds (the processor's function of that name when it exports one, the
    /// expression otherwise).
    async fn wanted(&mut self, step: &RequestStep) -> Result<bool, End> {
        // As Artillery draws it: a whole number from 0 to 100, both included, under the
        // percent (so 100 sends 100 times in 101).
        if let Some(p) = step.probability {
            if (self.rng.u32(0..=100) as f64) >= p.min(100.0) {
                return Ok(false);
            }
        }
        let Some(c) = &step.if_true else {
            return Ok(true);
        };
        let exported = |f: &String| {
            self.users
                .hooks
                .as_ref()
                .is_some_and(|h| h.functions.contains(f))
        };
        match c.function.as_ref().filter(|f| exported(f)) {
            Some(f) => self.ask(Op::If, f).await,
            None => {
                let lookup = |k: &str| self.vars.get(k).map(String::as_str);
                Ok(c.expr.eval(&lookup).truthy())
            }
        }
    }

    /// `step` sent to the request of the host its templated URL renders to, when that is one
    /// of the step's other origins: the request and the URL's path; `None` otherwise.
    fn reroute(&mut self, step: &RequestStep) -> Option<RequestStep> {
        if step.origins.is_empty() {
            return None;
        }
        let mut url = String::new();
        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
        step.path.render(lookup, &mut self.rng, &mut url);
        let (_, request) = step.origins.iter().find(|(o, _)| {
            url.strip_prefix(o.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']))
        })?;
        let origin_len = step
            .origins
            .iter()
            .find(|(_, r)| r == request)
            .map_or(0, |(o, _)| o.len());
        let rest = &url[origin_len..];
        Some(RequestStep {
            request: *request,
            path: Template::literal(if rest.is_empty() { "/" } else { rest }),
            ..step.clone()
        })
    }

    /// When the next request (or message) was due: a running `parallel` step's start; in the
    /// open model, the arrival or the end of the last think; `None` in the closed model, where
    /// it is its send.
    fn intended(&mut self) -> Option<Instant> {
        if let Some(start) = self.issued_at {
            return Some(start);
        }
        if self.open {
            Some(self.next_intended.take().unwrap_or_else(Instant::now))
        } else {
            None
        }
    }

    /// Sends a ws step's message on the user's socket, and takes what it says from the reply.
    async fn message(&mut self, m: &WsMessage) -> Result<(), End> {
        self.check_stop()?;
        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
        let text = m.send.as_ref().map(|p| match p {
            WsPayload::Text(t) => {
                let mut out = String::new();
                t.render(lookup, &mut self.rng, &mut out);
                out
            }
            WsPayload::Json(doc) => {
                crate::session::render::render_json(doc, &lookup, &mut self.rng).to_string()
            }
        });
        let intended = if m.reply { self.intended() } else { None };
        let Some(socket) = self.socket.as_mut() else {
            return Err(End::Failed {
                reason: "no WebSocket open for a ws step".into(),
                transport: false,
            });
        };
        websocket::exchange(
            self.users,
            socket,
            m,
            (text, intended),
            (&mut self.vars, &mut self.rng),
        )
        .await?;
        Ok(())
    }

    /// Emits a socketio step's event on the user's connection and takes what it says from the
    /// answer.
    async fn emit(&mut self, e: &loadlab_run::users::SioEmit) -> Result<(), End> {
        self.check_stop()?;
        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
        let mut channel = String::new();
        e.channel.render(lookup, &mut self.rng, &mut channel);
        let render = |v: &serde_json::Value, rng: &mut fastrand::Rng| {
            crate::session::render::render_json(v, &lookup, rng)
        };
        let args: Vec<serde_json::Value> =
            e.args.iter().map(|a| render(a, &mut self.rng)).collect();
        let expected = e
            .wait
            .as_ref()
            .and_then(|w| w.data.as_ref())
            .map(|d| render(d, &mut self.rng));
        let intended = if e.wait.is_some() {
            self.intended()
        } else {
            None
        };
        let Some(sio) = self.sio.as_mut() else {
            return Err(End::Failed {
                reason: "no Socket.IO connection open for an emit step".into(),
                transport: false,
            });
        };
        sio.emit(
            self.users,
            e,
            (channel, args, expected),
            intended,
            (&mut self.vars, &mut self.rng),
        )
        .await?;
        Ok(())
    }

    /// Sends one request step ([`Session::request_once`]); when it fails, the scenario's
    /// `onError` functions are called with why before the user ends (what they do cannot undo
    /// the failure).
    async fn request(&mut self, step: &RequestStep) -> Result<(), End> {
        let result = self.request_once(step).await;
        let users = self.users;
        let on_error = &users.model.scenarios[self.scenario].on_error;
        // Artillery calls onError when the request itself failed (its client's error: a
        // connection, a timeout, too many redirects), not when what came after the answer
        // failed (a capture, a check, a hook).
        let request_failed = std::mem::take(&mut self.request_failed);
        match result {
            Err(End::Failed { reason, transport })
                if (transport || request_failed)
                    && !on_error.is_empty()
                    && users.hooks.is_some() =>
            {
                let t = &users.plan.requests[step.request];
                let params = params_of(step, &t.method, &users.plan.endpoints[t.endpoint]);
                self.failure = Some(reason);
                let _ = self.call(Op::Error, on_error, Some(&params), None).await;
                let reason = self.failure.take().unwrap_or_default();
                Err(End::Failed { reason, transport })
            }
            other => other,
        }
    }

    /// Sends one request step, then checks, captures and fetches what it says.
    async fn request_once(&mut self, step: &RequestStep) -> Result<(), End> {
        self.check_stop()?;
        if !self.wanted(step).await? {
            return Ok(());
        }
        let users = self.users;
        // A URL that renders to another host the plan knows goes to that host's request.
        let rerouted = self.reroute(step);
        let step = rerouted.as_ref().unwrap_or(step);
        let changed = self.before_request(step).await?;
        let step = changed.as_ref().unwrap_or(step);
        let t = &users.plan.requests[step.request];
        let endpoint = &users.plan.endpoints[t.endpoint];
        let mut req = render(step, t, &self.vars, &mut self.rng).map_err(|reason| End::Failed {
            reason: format!("{reason} on {}", t.name),
            transport: false,
        })?;
        if step.grpc.is_some() {
            req.body = users
                .grpc
                .encode(step, &req.body)
                .map_err(|reason| End::Failed {
                    reason: format!("{reason} on {}", t.name),
                    transport: false,
                })?;
        }
        let origin = origin(endpoint);
        self.set_step_cookies(step, &origin, &req.path);
        // As Artillery: the jar goes with a request once a response set a cookie, or when the
        // request sets cookies itself.
        let with_jar = self.jar_enabled || !step.cookies.is_empty();
        let jar_cookie = with_jar && self.add_cookies(&mut req, &origin);
        let pending = Pending {
            intended: self.intended(),
            template: step.request,
        };
        let bytes = encode_request(&req, &endpoint.authority);
        self.client.close_idle(Instant::now());
        let answer = self
            .client
            .send(&users.wire, &pending, &bytes, needs_response(step))
            .await
            .map_err(|failed| transport_failure(failed, &t.name))?;
        let mut answer = self
            .follow_redirects(step, &mut req, answer, jar_cookie)
            .await?;
        // The connection is free from here on, as an agent frees its socket at the answer's
        // end (hooks and checks run on the user's time, not the connection's).
        self.client.idle_since = Some(Instant::now());
        if let Some(g) = &step.grpc {
            self.grpc_answer(step, g, &mut answer)?;
        }
        self.judge_answer(step, &answer).await?;
        if let Some(page_statics) = step.static_resources {
            if self.visited.insert(step.request) {
                let base = format!("http://{}{}", endpoint.authority, req.path);
                statics::fetch(users, &mut self.client, page_statics, &base, &answer.body).await;
                self.client.idle_since = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// Checks a gRPC call's status against the statuses its step expects (the user fails on
    /// another, as on a failed `match`), and puts its first message, as JSON, where captures and
    /// checks read the body.
    fn grpc_answer(
        &mut self,
        step: &RequestStep,
        g: &GrpcStep,
        answer: &mut Answer,
    ) -> Result<(), End> {
        let users = self.users;
        let name = &users.plan.requests[step.request].name;
        let code = answer.grpc.unwrap_or(GrpcCode::INTERNAL);
        if !g.codes.is_empty() && !g.codes.contains(&(code.number() as u32)) {
            users
                .record
                .borrow_mut()
                .custom
                .add("error", FAILED_CAPTURE, 1.0);
            let expected: Vec<&str> = g
                .codes
                .iter()
                .map(|c| GrpcCode::from_number(*c).name())
                .collect();
            return Err(End::Failed {
                reason: format!(
                    "gRPC status {}, expected {} on {name}",
                    code.name(),
                    expected.join(" or ")
                ),
                transport: false,
            });
        }
        if let Some(json) = users.grpc.first_message_json(step, &answer.body) {
            answer.body = json;
            answer
                .headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            answer
                .headers
                .push(("content-type".into(), "application/json".into()));
        }
        Ok(())
    }

    /// The step as the processor's `beforeRequest` functions changed it, when it has any and
    /// they changed it.
    async fn before_request(&mut self, step: &RequestStep) -> Result<Option<RequestStep>, End> {
        if step.before_request.is_empty() {
            return Ok(None);
        }
        let users = self.users;
        let t = &users.plan.requests[step.request];
        let endpoint = &users.plan.endpoints[t.endpoint];
        let params = params_of(step, &t.method, endpoint);
        let Some(p) = self
            .call(Op::Before, &step.before_request, Some(&params), None)
            .await?
        else {
            return Ok(None);
        };
        changed_step(step, &p, &origin(endpoint))
            .map(Some)
            .map_err(|reason| End::Failed {
                reason: format!("{reason} on {}", t.name),
                transport: false,
            })
    }

    /// Puts the cookies the step sets itself (`cookie:`) in the user's jar for `path` on
    /// `origin`.
    fn set_step_cookies(&mut self, step: &RequestStep, origin: &str, path: &str) {
        if step.cookies.is_empty() {
            return;
        }
        let url = url_of(origin, path);
        for (name, value) in &step.cookies {
            let mut v = String::new();
            let lookup = |k: &str| self.vars.get(k).map(String::as_str);
            value.render(lookup, &mut self.rng, &mut v);
            if let Some(url) = &url {
                let _ = self
                    .cookies
                    .get_or_insert_with(CookieStore::default)
                    .parse(&format!("{name}={v}"), url);
            }
        }
    }

    /// Keeps the answer's cookies and, when the step follows redirects, follows them on the
    /// request's own origin as Artillery's client does (a 303 turns the request into a GET;
    /// one redirect past the most allowed fails it): the last answer.
    async fn follow_redirects(
        &mut self,
        step: &RequestStep,
        req: &mut RequestTemplate,
        mut answer: Answer,
        mut jar_cookie: bool,
    ) -> Result<Answer, End> {
        let users = self.users;
        let t = &users.plan.requests[step.request];
        let endpoint = &users.plan.endpoints[t.endpoint];
        let origin = origin(endpoint);
        let with_jar = self.jar_enabled || !step.cookies.is_empty();
        let mut hops = 0;
        loop {
            self.keep_cookies(&answer, &origin, &req.path);
            if !step.follow_redirect || !is_redirect(answer.status) {
                return Ok(answer);
            }
            let location = answer
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("location"))
                .map(|(_, v)| v.as_str());
            let Some(next) = location.and_then(|l| url_of(&origin, &req.path)?.join(l).ok()) else {
                return Ok(answer);
            };
            // Only on the request's own origin: its user's connection goes there, and loadlab
            // sends load to the hosts the script names.
            if next.origin().ascii_serialization() != origin {
                return Ok(answer);
            }
            if hops == step.max_redirects {
                self.request_failed = true;
                return Err(End::Failed {
                    reason: format!("too many redirects (over {hops}) on {}", t.name),
                    transport: false,
                });
            }
            hops += 1;
            req.path = next[url::Position::BeforePath..].to_string();
            if answer.status == 303 && req.method != "HEAD" {
                req.method = "GET".into();
                req.body.clear();
                req.headers
                    .retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            }
            if jar_cookie {
                req.headers.pop();
            }
            jar_cookie = (with_jar || self.jar_enabled) && self.add_cookies(req, &origin);
            let bytes = encode_request(req, &endpoint.authority);
            let hop = Pending {
                intended: None,
                template: step.request,
            };
            answer = self
                .client
                .send(&users.wire, &hop, &bytes, needs_response(step))
                .await
                .map_err(|failed| transport_failure(failed, &t.name))?;
        }
    }

    /// Runs the step's expectations, captures, checks and `afterResponse` functions on its
    /// answer. A capture or match that fails ends the user, as in Artillery, after the
    /// response's hooks (the expect plugin's checks among them) have run; Artillery counts it
    /// as the error `Failed capture or match`.
    async fn judge_answer(&mut self, step: &RequestStep, answer: &Answer) -> Result<(), End> {
        let users = self.users;
        let t = &users.plan.requests[step.request];
        let captured = check(
            (&step.expects, &step.captures),
            &t.name,
            answer,
            &mut self.vars,
            &mut self.rng,
            &users.queries,
        );
        if captured.is_err() {
            users
                .record
                .borrow_mut()
                .custom
                .add("error", FAILED_CAPTURE, 1.0);
        }
        if !step.checks.is_empty() {
            let failed = count_checks(
                &step.checks,
                &t.name,
                answer,
                &self.vars,
                &users.queries,
                &mut users.record.borrow_mut(),
            );
            if let Some(reason) = failed.filter(|_| users.model.checks_fail_user) {
                return Err(End::Failed {
                    reason,
                    transport: false,
                });
            }
        }
        if !step.after_response.is_empty() {
            let params = params_of(step, &t.method, &users.plan.endpoints[t.endpoint]);
            let res = Response {
                status_code: answer.status,
                headers: answer
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str()))
                    .collect(),
                body: String::from_utf8_lossy(&answer.body),
            };
            self.call(Op::After, &step.after_response, Some(&params), Some(res))
                .await?;
        }
        captured.map_err(|reason| End::Failed {
            reason,
            transport: false,
        })
    }
}

/// How a request that failed on its connection ends its user.
fn transport_failure(failed: crate::conn::exchange::Failed, name: &str) -> End {
    End::Failed {
        reason: format!("{} on {name}", failed.kind().as_str()),
        transport: true,
    }
}

/// `scheme://authority` of an endpoint.
fn origin(endpoint: &Endpoint) -> String {
    let scheme = if endpoint.tls.is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{}", endpoint.authority)
}

/// A request step as Artillery's hooks see it: the whole URL and the templates as written,
/// before they are rendered (hooks set the variables they read).
fn params_of(step: &RequestStep, method: &str, endpoint: &Endpoint) -> RequestParams {
    let text = |t: &Template| serde_json::Value::String(t.to_string());
    let body = step.body.to_string();
    RequestParams {
        url: format!("{}{}", origin(endpoint), step.path),
        method: method.to_string(),
        headers: step
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), text(v)))
            .collect(),
        json: step.json.clone(),
        body: (step.json.is_none() && !body.is_empty()).then_some(serde_json::Value::String(body)),
        qs: step
            .query
            .iter()
            .map(|(k, v)| (k.clone(), text(v)))
            .collect(),
        name: None,
    }
}

/// `step` with what `beforeRequest` functions changed in its request: URL (on the same
/// origin), headers, query, JSON or raw body, each still a template.
fn changed_step(
    step: &RequestStep,
    p: &RequestParams,
    origin: &str,
) -> Result<RequestStep, String> {
    let path = match p.url.strip_prefix(origin) {
        Some(rest) if rest.is_empty() || rest.starts_with(['/', '?']) => rest.to_string(),
        _ if p.url.starts_with('/') => p.url.clone(),
        _ => {
            return Err(format!(
                "beforeRequest set the url to {:?}, not on the target {origin}",
                p.url
            ))
        }
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let template = |s: &str| Template::parse(s).unwrap_or_else(|_| Template::literal(s));
    Ok(RequestStep {
        path: template(&path),
        query: p
            .qs
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), template(&text(v))))
            .collect(),
        headers: p
            .headers
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), template(&text(v))))
            .collect(),
        json: p.json.clone().filter(|j| !j.is_null()),
        body: p
            .body
            .as_ref()
            .filter(|b| !b.is_null())
            .map_or_else(|| Template::literal(""), |b| template(&text(b))),
        ..step.clone()
    })
}

/// A think time as Artillery reads a rendered one: a whole number is seconds, a number with a
/// unit (`ms`, `s`, `m`, `h`) that much, a bare fraction milliseconds (its `ms` package reads
/// it so); `None` for anything else.
fn think_time(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(n) = text.parse::<f64>() {
        if !n.is_finite() || n < 0.0 {
            return None;
        }
        let secs = if n.fract() == 0.0 { n } else { n / 1000.0 };
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = text.find(|c: char| c.is_ascii_alphabetic())?;
    let n: f64 = text[..at]
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let unit = match text[at..].trim() {
        "ms" => 0.001,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(n * unit).ok()
}

/// A rendered loop count as Artillery reads it: a number of passes from 0, or `FROM-TO`;
/// anything else none.
fn loop_range(text: &str) -> (u64, u64) {
    let text = text.trim();
    if let Ok(n) = text.parse::<f64>() {
        return (
            0,
            if n.is_finite() && n > 0.0 {
                n as u64
            } else {
                0
            },
        );
    }
    match text.split_once('-') {
        Some((a, b)) => match (a.trim().parse::<u64>(), b.trim().parse::<u64>()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => (0, 0),
        },
        None => (0, 0),
    }
}

#[cfg(test)]
mod rendered_tests {
    use super::*;

    #[test]
    fn think_times_and_loop_counts_read_as_artillery_reads_them() {
        assert_eq!(think_time("3"), Some(Duration::from_secs(3)));
        assert_eq!(think_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(think_time("2s"), Some(Duration::from_secs(2)));
        assert_eq!(think_time("1.5"), Some(Duration::from_micros(1500)));
        assert_eq!(think_time("soon"), None);
        assert_eq!(think_time(""), None);
        assert_eq!(loop_range("4"), (0, 4));
        assert_eq!(loop_range("2-5"), (2, 5));
        assert_eq!(loop_range("x"), (0, 0));
        assert_eq!(loop_range(""), (0, 0));
    }
}
