//! Virtual users: what one user does in a session — a flow of steps (requests, think times,
//! loops) or a walk over a Markov chain of pages — and the data it draws on (variables,
//! payload rows). Scenario files lower into a [`UserModel`]; the engine runs one session per
//! arrival (open model) or per user slot (user phases).

use std::time::Duration;

use crate::template::Template;

use serde::{Deserialize, Serialize};

/// What the users of a run do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserModel {
    /// The scenarios, each with its share of the users.
    pub scenarios: Vec<UserScenario>,
    /// Which scenario user `k` runs: `pattern[k % pattern.len()]`, the weights laid out as
    /// interleaved repetitions so every stretch of users sees the mix.
    pub pattern: Vec<usize>,
    /// `config.variables`: each user takes one value of each (a list gives one at random).
    pub variables: Vec<(String, Vec<String>)>,
    /// `config.variables` lists that hold objects (or lists): each user takes one element at
    /// random, as Artillery's `_.sample` does, read as the variable itself (JSON) and by the
    /// paths into it (`{{ name.key }}`, as `loadlab-script`'s `vars::loop_item_vars` sets them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variable_objects: Vec<(String, Vec<serde_json::Value>)>,
    /// `config.http.pool`: every user's requests share this many connections per host (an
    /// agent of the run's, as Artillery's engine gives every user when the pool is set),
    /// instead of each user connecting on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<usize>,
    /// `config.payload`: each user takes one row of each.
    pub payloads: Vec<Payload>,
    /// Seed of every user's random choices (think times, transitions, random rows).
    pub seed: u64,
    /// `config.processor`: the Node.js module whose functions the hooks and `function` steps
    /// name.
    #[serde(default)]
    pub processor: Option<Processor>,
    /// Artillery's top-level `before`: a flow one user runs once before the load; the
    /// variables it ends with (its captures) are every user's from the start.
    #[serde(default)]
    pub before: Option<Box<UserScenario>>,
    /// Artillery's top-level `after`: a flow one user runs once after the load, with the
    /// `before` flow's variables.
    #[serde(default)]
    pub after: Option<Box<UserScenario>>,
    /// Keep the variables of the sessions as they end (the `before` flow's run).
    #[serde(default)]
    pub keep_vars: bool,
    /// The scenarios read `{{ $uuid }}`: each user gets a random UUID (version 4) of its own.
    #[serde(default)]
    pub uuid: bool,
    /// A failed `expect` check ends the user's session as failed (the expect plugin's
    /// `reportFailuresAsErrors`, and the `before`/`after` flows); otherwise it is counted and
    /// the session goes on, as in Artillery.
    #[serde(default)]
    pub checks_fail_user: bool,
    /// The script names the expect plugin (`config.plugins.expect`): a failed check makes
    /// the run exit with code 21, as Artillery's. Without it the checks are counted only.
    #[serde(default)]
    pub checks_set_exit_code: bool,
    /// The users are a locustfile's, run by Python helpers (one per generator thread) whose
    /// requests the engine sends; `scenarios` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locust: Option<LocustSpec>,
}

/// The methods a locustfile's plan has a request template of, per endpoint, in this order: the
/// template of method `m` to endpoint `ep` is `ep * LOCUST_METHODS.len() + m` (as
/// [`locust_template`] finds it). `input` lays the templates out, the engine looks them up.
pub const LOCUST_METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// The request template of `method` (GET for one not in [`LOCUST_METHODS`]) to endpoint
/// `endpoint` of a locustfile's plan.
pub fn locust_template(endpoint: usize, method: &str) -> usize {
    let m = LOCUST_METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(0);
    endpoint * LOCUST_METHODS.len() + m
}

/// A locustfile run by `loadlab locust`: what its Python helpers are told.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocustSpec {
    /// The locustfile (or a folder of them, or a comma list), absolute.
    pub file: String,
    /// The Python interpreter, with gevent installed.
    pub python: std::path::PathBuf,
    /// The folder holding loadlab's `locust` package and its helper.
    pub package: std::path::PathBuf,
    /// `-H/--host`: the host of users whose class gives none.
    pub host: Option<String>,
    /// User classes named on the command line; empty for every class of the file.
    pub classes: Vec<String>,
    /// `--tags`: only tasks with one of these tags run.
    pub tags: Option<Vec<String>>,
    /// `--exclude-tags`: tasks with one of these tags do not run.
    pub exclude_tags: Option<Vec<String>>,
    /// What `environment.parsed_options` shows the file (Locust's option names).
    pub options: serde_json::Value,
    /// The command line's words that are not loadlab's: the file's own options (which its
    /// `init_command_line_parser` listeners add), read by the helpers' parser.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_args: Vec<String>,
    /// The file has a `LoadTestShape`: helper 0's `tick()` sets the users each second.
    pub shape: bool,
    /// `--stop-timeout`: how long stopping users may take at the end.
    pub stop_timeout: Duration,
    /// `--iterations`: each helper's share of the task runs before its users stop.
    pub iterations: Option<u64>,
    /// Helper 0, started before the plan was made (its `init` and `test_start` fired, so the
    /// options they set are the plan's), waiting for the engine under this key; `None`: the
    /// first thread starts its own. A key of this process's, so not written with the plan.
    #[serde(skip)]
    pub first: Option<u64>,
    /// What helper 0 decided for the others, as Locust's master for its workers: the host and
    /// the file's own options, which each later helper takes after its own `init`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<serde_json::Value>,
}

impl UserModel {
    /// True when a session may run until the run stops: a flow holds a `loop` without
    /// `count`, `over` or `whileTrue`.
    pub fn has_endless_loop(&self) -> bool {
        fn endless(steps: &[Step]) -> bool {
            steps.iter().any(|s| match s {
                Step::Loop {
                    count,
                    steps,
                    over,
                    while_true,
                    ..
                } => (count.is_none() && over.is_empty() && while_true.is_none()) || endless(steps),
                Step::Parallel(steps) => endless(steps),
                _ => false,
            })
        }
        self.scenarios.iter().any(|sc| match &sc.behaviour {
            Behaviour::Flow(steps) => endless(steps),
            Behaviour::Chain(_) => false,
        })
    }

    /// True when a request of the scenarios carries `expect` checks.
    pub fn has_checks(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|s| match s {
                Step::Request(r) => !r.checks.is_empty(),
                Step::Loop { steps, .. } | Step::Parallel(steps) => any(steps),
                _ => false,
            })
        }
        self.scenarios.iter().any(|sc| match &sc.behaviour {
            Behaviour::Flow(steps) => any(steps),
            Behaviour::Chain(chain) => chain
                .states
                .iter()
                .filter_map(|s| s.request.as_ref())
                .any(|r| !r.checks.is_empty()),
        })
    }

    /// The model of a run of `flow` by one user, alone: the `before` or `after` flow of this
    /// model, keeping its variables.
    pub fn once(&self, flow: &UserScenario) -> UserModel {
        UserModel {
            scenarios: vec![flow.clone()],
            pattern: vec![0],
            before: None,
            after: None,
            keep_vars: true,
            checks_fail_user: true,
            ..self.clone()
        }
    }
}

impl UserModel {
    /// The processor functions the scenarios call, each once, in order of first use.
    pub fn function_names(&self) -> Vec<&str> {
        fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a str>) {
            for s in steps {
                match s {
                    Step::Function(f) | Step::Browser(f) => out.push(f),
                    Step::Request(r) => request(r, out),
                    Step::Loop {
                        steps, while_true, ..
                    } => {
                        out.extend(while_true.as_deref());
                        walk(steps, out);
                    }
                    Step::Parallel(steps) => walk(steps, out),
                    Step::Think(_)
                    | Step::ThinkTemplate(_)
                    | Step::Log(_)
                    | Step::Ws(_)
                    | Step::Emit(_) => {}
                }
            }
        }
        fn request<'a>(r: &'a RequestStep, out: &mut Vec<&'a str>) {
            out.extend(r.before_request.iter().map(String::as_str));
            out.extend(r.after_response.iter().map(String::as_str));
        }
        let mut out = Vec::new();
        for sc in &self.scenarios {
            match &sc.behaviour {
                Behaviour::Flow(steps) => walk(steps, &mut out),
                Behaviour::Chain(c) => {
                    for r in c.states.iter().filter_map(|s| s.request.as_ref()) {
                        request(r, &mut out);
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|n| seen.insert(*n));
        out
    }
}

/// An Artillery processor: a Node.js module (CommonJS or ES) of functions that virtual users
/// call through Node.js helper processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Processor {
    /// The module's file, absolute.
    pub path: std::path::PathBuf,
    /// The script's target, which hooks see as `context.vars.target`.
    pub target: String,
    /// The folder of the script's config, which hooks see as `context.vars.$dirname`.
    #[serde(default)]
    pub dir: std::path::PathBuf,
    /// Variables whose values are whole JSON values (payloads read with `loadAll`), which
    /// hooks and browser flows see as they are in `context.vars`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub lists: std::collections::BTreeMap<String, serde_json::Value>,
    /// `config.engines.playwright`, for scenarios whose users drive a browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<serde_json::Value>,
}

/// One scenario: a name and a behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserScenario {
    /// Name, for reports.
    pub name: String,
    /// What a user of this scenario does.
    pub behaviour: Behaviour,
    /// Artillery's `engine: ws`: the WebSocket each user opens when its session starts (its
    /// `Ws` steps go over it) and closes at its end.
    #[serde(default)]
    pub websocket: Option<WsConnect>,
    /// Processor functions called when one of its requests fails (Artillery's `onError`), with
    /// the error, the request and the user's context, before the user ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_error: Vec<String>,
}

/// How a user opens its WebSocket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WsConnect {
    /// Index into the plan's requests: the upgrade request (endpoint, path and name), under
    /// which the handshake is recorded.
    pub request: usize,
    /// The upgrade's path, rendered with the user's variables.
    pub path: Template,
    /// Headers of the upgrade request, rendered with the user's variables.
    pub headers: Vec<(String, Template)>,
    /// Subprotocols offered (`Sec-WebSocket-Protocol`).
    pub subprotocols: Vec<String>,
    /// Socket.IO over the socket (Artillery's `engine: socketio`): the path is Engine.IO's,
    /// and the default namespace is joined as the socket opens.
    #[serde(default)]
    pub socketio: bool,
}

/// A Socket.IO `emit` step: an event sent on a namespace, and what its answer must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SioEmit {
    /// Index into the plan's requests: the name an awaited answer's round trip is recorded
    /// under.
    pub request: usize,
    /// The namespace (`/` by default), joined on first use.
    pub namespace: String,
    /// The event's name.
    pub channel: Template,
    /// Its arguments, JSON whose strings are templates.
    pub args: Vec<serde_json::Value>,
    /// What to wait for, when the step awaits an answer.
    pub wait: Option<SioWait>,
}

/// The answer a Socket.IO emit awaits: an event on a channel (`response`) or the server's
/// acknowledgement (`acknowledge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SioWait {
    /// The event awaited (`response.channel`); `None` awaits the acknowledgement.
    pub channel: Option<Template>,
    /// The arguments expected, as Artillery compares them: a list equals all the arguments,
    /// an object the last one, a string is contained in the last one.
    pub data: Option<serde_json::Value>,
    /// Values taken from the arguments (as a JSON list: `$[0].name`).
    pub captures: Vec<Capture>,
    /// Checks on the arguments (`match`).
    pub expects: Vec<Expect>,
}

/// A WebSocket step (Artillery's `send` and `wait`): send a message, and when the step
/// captures or checks, wait for the next message and take them from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WsMessage {
    /// Index into the plan's requests: the name a reply's round trip is recorded under.
    pub request: usize,
    /// The message sent; `None` waits without sending (`wait`).
    pub send: Option<WsPayload>,
    /// Wait for the next message (the step captures or checks).
    pub reply: bool,
    /// Values taken from the reply (its text parsed as JSON when it is JSON).
    pub captures: Vec<Capture>,
    /// Checks on the reply (`match`); a failed one ends the session as failed.
    pub expects: Vec<Expect>,
}

/// A WebSocket message as the script writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WsPayload {
    /// Text, rendered with the user's variables.
    Text(Template),
    /// JSON whose strings are templates, sent as its text.
    Json(serde_json::Value),
}

/// A user's behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Behaviour {
    /// Steps in order, once.
    Flow(Vec<Step>),
    /// A walk over a Markov chain of pages until it reaches its end.
    Chain(Chain),
}

/// One step of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// Send a request and wait for its response.
    Request(Box<RequestStep>),
    /// Wait, as a person reading.
    Think(Think),
    /// Wait for a time that is a template (`{{ $randomNumber(3, 5) }}`), rendered at each
    /// pass as Artillery reads it: a whole number is seconds, other text a duration (`500ms`,
    /// `2s`; a bare fraction is milliseconds).
    ThinkTemplate(Template),
    /// Send a message on the user's WebSocket, or wait for one.
    Ws(Box<WsMessage>),
    /// Emit a Socket.IO event on the user's socket, and await its answer.
    Emit(Box<SioEmit>),
    /// Print a message, rendered with the user's variables, on the generator's stderr
    /// (Artillery's `log` step).
    Log(Template),
    /// Call a function of the processor with the user's context (Artillery's `function` step,
    /// and `beforeScenario` / `afterScenario`, which Artillery turns into such steps).
    Function(String),
    /// `engine: playwright`: call a function of the processor with a page of a browser context
    /// of the user's own, `(page, context, events, test)` (Artillery's `flowFunction`).
    Browser(String),
    /// Run `steps` `count` times (forever when `None`: until the run stops).
    Loop {
        /// Repetitions.
        count: Option<u64>,
        /// The body of the loop.
        steps: Vec<Step>,
        /// `loop … over`: run the body once per item, with `$loopElement` (and, for an object,
        /// `$loopElement.KEY`) set to it; `count` is then `None`. Every loop sets `$loopCount`
        /// (0 in the first pass, as Artillery counts).
        #[serde(default)]
        over: Vec<serde_json::Value>,
        /// `whileTrue`: a processor function asked before each pass, `(context, next)` with
        /// `next(true)` to go on; the loop ends when it answers false (or at `count`).
        #[serde(default)]
        while_true: Option<String>,
        /// A `count` that is a template (`"{{ n }}"`, `"1-5"` after rendering), rendered when the
        /// loop starts as Artillery reads it: a number of passes, or a range `FROM-TO` whose
        /// passes count from FROM up to TO, excluded; anything else runs none.
        #[serde(default)]
        count_template: Option<Template>,
        /// The variables a pass sets: its count (`loopValue`, `$loopCount` by default) and its
        /// item (`loopElement`, `$loopElement` by default; the count when there are no items,
        /// as Artillery sets it).
        #[serde(default)]
        names: LoopNames,
    },
    /// Artillery's `parallel`: the steps issued together at its start; their requests queue
    /// on the user's one connection per host (Artillery's user agent has one socket), each
    /// timed from the step's start.
    Parallel(Vec<Step>),
}

/// A request's `ifTrue`: the request is sent only when the condition holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// The condition as written.
    pub text: String,
    /// The expression, over the user's variables.
    pub expr: crate::condition::Expr,
    /// The processor function of that name, when the script has a processor and the
    /// condition is a bare name: called with the user's variables when the processor exports
    /// it (Artillery's rule), the expression otherwise.
    pub function: Option<String>,
}

/// A request a user sends: the parts that may hold `{{ }}` placeholders, and what to take from
/// and check in the response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestStep {
    /// Index into the plan's requests: its endpoint, method and name for the results.
    pub request: usize,
    /// Path, with any query written into the URL.
    pub path: Template,
    /// Query parameters added to the path (`qs`), their values URL-encoded once rendered.
    pub query: Vec<(String, Template)>,
    /// Headers, in order.
    pub headers: Vec<(String, Template)>,
    /// Raw body (empty for none).
    pub body: Template,
    /// JSON body, whose strings are templates rendered for each send (so a value stays
    /// properly quoted whatever it holds); takes the place of `body` when set.
    pub json: Option<serde_json::Value>,
    /// Values taken from the response into variables.
    pub captures: Vec<Capture>,
    /// Checks on the response that end the session as failed (`match`).
    pub expects: Vec<Expect>,
    /// The expect plugin's checks (`expect`): each counted as passed or failed; a failed one
    /// ends the session only when [`UserModel::checks_fail_user`] says so.
    #[serde(default)]
    pub checks: Vec<Expect>,
    /// A multipart body (`formData`): its fields in order; takes the place of `body` when not
    /// empty.
    #[serde(default)]
    pub form_data: Vec<FormField>,
    /// A URL-encoded form body (`form`) whose values are templates: its fields in order,
    /// encoded when rendered; takes the place of `body` when not empty (a form of fixed values
    /// is encoded into `body` once).
    #[serde(default)]
    pub form: Vec<(String, Template)>,
    /// When set, the first time a user loads this page the resources its HTML names
    /// (`img src`, stylesheet `link href`, `script src`) are fetched too, and recorded under
    /// this request index.
    pub static_resources: Option<usize>,
    /// Processor functions called before the request is rendered, in order (the scenario's
    /// `beforeRequest` first, then the request's own): they may change the request and set
    /// variables its templates read.
    #[serde(default)]
    pub before_request: Vec<String>,
    /// Processor functions called with the response, in order (the scenario's `afterResponse`
    /// first).
    #[serde(default)]
    pub after_response: Vec<String>,
    /// Follow redirects (Artillery's default; `followRedirect: false` turns it off).
    #[serde(default = "yes")]
    pub follow_redirect: bool,
    /// Most redirects followed before the request fails as too many (`maxRedirects`; 10,
    /// the default of Artillery's HTTP client).
    #[serde(default = "ten")]
    pub max_redirects: u32,
    /// Cookies set in the user's jar before the request (Artillery's `cookie`), values
    /// rendered with the user's variables.
    #[serde(default)]
    pub cookies: Vec<(String, Template)>,
    /// `ifTrue`: send the request only when this holds.
    #[serde(default)]
    pub if_true: Option<Box<Condition>>,
    /// `probability`: the percent chance that the request is sent (Artillery's draw).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Where a URL that is a template from its start renders to another host (a `loop … over`
    /// item's absolute URL, as Artillery follows it): each such origin (`https://host:port`)
    /// and the plan request (its endpoint) that goes there.
    #[serde(default)]
    pub origins: Vec<(String, usize)>,
    /// A gRPC call (a `grpc:` step, loadlab's extension): `json` is its request message, rendered
    /// and encoded for each call; its answer's first message is what captures and checks read,
    /// as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Box<GrpcStep>>,
}

/// What a user's gRPC call needs beyond an HTTP/2 POST: its method's types and the statuses it
/// must end with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrpcStep {
    /// `/package.Service/Method`.
    pub method: String,
    /// The types that define it: a serialized `FileDescriptorSet` with its imports.
    pub types: Vec<u8>,
    /// The gRPC statuses (numbers) it must end with (`expect: {code: …}`), or the user fails;
    /// empty: any.
    #[serde(default)]
    pub codes: Vec<u32>,
}

fn yes() -> bool {
    true
}

fn ten() -> u32 {
    10
}

/// One field of a multipart body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormField {
    /// The field's name.
    pub name: String,
    /// Its value, or the file it sends.
    pub value: FormValue,
    /// The part's `Content-Type`, when given (files default to `application/octet-stream`,
    /// text to none).
    #[serde(default)]
    pub content_type: Option<String>,
}

/// A multipart field's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FormValue {
    /// Text, rendered with the user's variables.
    Text(Template),
    /// The bytes of a file whose path (rendered with the user's variables) is read at each
    /// send; the file's name goes in the part's `filename`.
    File(Template),
}

impl RequestStep {
    /// True when the response body must be kept (to capture from it, or to find resources).
    pub fn needs_body(&self) -> bool {
        self.static_resources.is_some()
            || !self.after_response.is_empty()
            || self.captures.iter().any(|c| {
                matches!(
                    c.source,
                    CaptureSource::Json(_)
                        | CaptureSource::Regexp { .. }
                        | CaptureSource::Selector { .. }
                )
            })
    }
}

/// A value taken from a response into a variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// Where the value comes from.
    pub source: CaptureSource,
    /// The variable it goes into.
    pub var: String,
    /// A capture that finds nothing fails the session (Artillery's default); `strict: false`
    /// leaves the variable unset instead.
    #[serde(default = "yes")]
    pub strict: bool,
}

/// Where a captured value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CaptureSource {
    /// A JSONPath query (RFC 9535) over the JSON body; the first match is taken.
    Json(String),
    /// A response header, by name (case-insensitive).
    Header(String),
    /// A regular expression over the body as text: the whole match, or a group by number or
    /// name.
    Regexp {
        /// The expression, its flags written inline (`(?i)`).
        re: String,
        /// The group taken (`None`: the whole match).
        group: Option<String>,
    },
    /// A CSS selector over the body as HTML (Artillery's `selector` capture, which it runs
    /// with cheerio): the attribute `attr` of one of the elements it selects.
    Selector {
        /// The selector.
        css: String,
        /// The attribute whose value is taken.
        attr: String,
        /// Which of the selected elements.
        index: ElementIndex,
    },
}

/// Which of a selector's elements a capture reads (Artillery's `index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElementIndex {
    /// The element at this position, from 0 (the first when no index is given).
    Nth(usize),
    /// The last one.
    Last,
    /// One at random, by the user's randomness.
    Random,
}

/// A check on a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expect {
    /// The status is one of these.
    Status(Vec<u16>),
    /// The status is the code the template renders to (`"{{ $loopElement.code }}"`).
    StatusOf(Template),
    /// The status is none of these.
    NotStatus(Vec<u16>),
    /// The `Content-Type` header is this text (case-insensitive); `json`: a JSON type
    /// (`application/json`, `problem+json`, `ld+json`) whose body parses as JSON.
    ContentType(String),
    /// The JSON body has a value at this path (`user.name`, `items[0].id`).
    HasProperty(String),
    /// The body is JSON without a value at this path.
    NotHasProperty(String),
    /// Every value, rendered with the user's variables, is the same text.
    Equals(Vec<Template>),
    /// The response has this header, non-empty (the name as Node.js keys headers: lower
    /// case).
    HasHeader(String),
    /// The header (named as for `HasHeader`) has this value once rendered.
    HeaderEquals(String, Template),
    /// The body matches this regular expression; a JSON body is read as JavaScript's
    /// `String()` of it, as Artillery's expect plugin does (`[object Object]`).
    MatchesRegexp(String),
    /// A CDN cache header (`cf-cache-status`, `x-cache`, `x-vercel-cache`) says hit (or
    /// stale) when `true`, miss when `false`.
    CdnHit(bool),
    /// Artillery's `match`: the first value of a JSONPath query (RFC 9535) over the JSON body
    /// (a string as is, other values as JSON) equals the rendered value.
    JsonMatch(String, Template),
}

impl Expect {
    /// The check's key as Artillery's expect plugin writes it.
    pub fn key(&self) -> &'static str {
        match self {
            Expect::Status(_) | Expect::StatusOf(_) => "statusCode",
            Expect::NotStatus(_) => "notStatusCode",
            Expect::CdnHit(_) => "cdnHit",
            Expect::ContentType(_) => "contentType",
            Expect::HasProperty(_) => "hasProperty",
            Expect::NotHasProperty(_) => "notHasProperty",
            Expect::Equals(_) => "equals",
            Expect::HasHeader(_) => "hasHeader",
            Expect::HeaderEquals(..) => "headerEquals",
            Expect::MatchesRegexp(_) => "matchesRegexp",
            Expect::JsonMatch(..) => "match",
        }
    }

    /// True when the check reads the response's headers or body (not only its status).
    pub fn needs_response(&self) -> bool {
        !matches!(
            self,
            Expect::Status(_) | Expect::StatusOf(_) | Expect::NotStatus(_) | Expect::Equals(_)
        )
    }

    /// The variables the check's templates read.
    pub fn variables(&self) -> Vec<&str> {
        match self {
            Expect::Equals(ts) => ts.iter().flat_map(Template::variables).collect(),
            Expect::HeaderEquals(_, t) | Expect::JsonMatch(_, t) | Expect::StatusOf(t) => {
                t.variables().collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The names of the variables a loop's pass sets (Artillery's `loopValue` and `loopElement`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopNames {
    /// The pass's count, from 0.
    pub count: String,
    /// The pass's item.
    pub element: String,
}

impl Default for LoopNames {
    fn default() -> Self {
        LoopNames {
            count: "$loopCount".into(),
            element: "$loopElement".into(),
        }
    }
}

/// A think time: how long a user waits between steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Think {
    /// Always the same.
    Constant(Duration),
    /// Uniform between two bounds.
    Uniform(Duration, Duration),
    /// Exponential with this mean (memoryless, as arrivals of a Poisson process).
    Exponential(Duration),
}

/// Longest think time an exponential draw may give, as a multiple of its mean; the tail past it
/// (e^-20) never matters for load and would only stall a session.
const EXPONENTIAL_CAP: f64 = 20.0;

impl Think {
    /// Draws one think time.
    pub fn sample(&self, rng: &mut fastrand::Rng) -> Duration {
        match *self {
            Think::Constant(d) => d,
            Think::Uniform(a, b) => a + (b.saturating_sub(a)).mul_f64(rng.f64()),
            Think::Exponential(mean) => {
                // 1 - U lies in (0, 1], so the logarithm is finite.
                let draw = -(1.0 - rng.f64()).ln();
                mean.mul_f64(draw.min(EXPONENTIAL_CAP))
            }
        }
    }

    /// The mean think time.
    pub fn mean(&self) -> Duration {
        match *self {
            Think::Constant(d) | Think::Exponential(d) => d,
            Think::Uniform(a, b) => (a + b) / 2,
        }
    }
}

/// A Markov chain of pages: a user starts at `start`, does the state's request (if any), thinks,
/// and moves to a next state drawn from the state's transitions, until it reaches the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// The first state.
    pub start: usize,
    /// The states.
    pub states: Vec<ChainState>,
}

/// One state of a [`Chain`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainState {
    /// Name, for reports.
    pub name: String,
    /// The page this state loads; `None` for a state that only routes (instantaneous).
    pub request: Option<RequestStep>,
    /// Think time after the request.
    pub think: Option<Think>,
    /// Next states with their cumulative probabilities (the last is 1); `None` is the end of
    /// the session. No transitions means the end.
    pub next: Vec<(Option<usize>, f64)>,
}

impl ChainState {
    /// Builds the cumulative transition table from weights (any non-negative numbers, at
    /// least one positive); `None` as a target is the end.
    pub fn transitions(weights: &[(Option<usize>, f64)]) -> Vec<(Option<usize>, f64)> {
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut acc = 0.0;
        let mut out: Vec<(Option<usize>, f64)> = weights
            .iter()
            .filter(|(_, w)| *w > 0.0)
            .map(|(to, w)| {
                acc += w / total;
                (*to, acc)
            })
            .collect();
        if let Some(last) = out.last_mut() {
            last.1 = 1.0;
        }
        out
    }
}

impl Chain {
    /// The state after `state`, drawn from its transitions; `None` when the session ends.
    pub fn next(&self, state: usize, rng: &mut fastrand::Rng) -> Option<usize> {
        let u = rng.f64();
        let next = &self.states[state].next;
        next.iter()
            .find(|(_, cum)| u < *cum)
            .or(next.last())
            .and_then(|(to, _)| *to)
    }

    /// Each state's long-run share of visits for a user that restarts at `start` whenever it
    /// reaches the end: the stationary distribution of the chain with the end wired back to the
    /// start, found by power iteration.
    pub fn stationary(&self) -> Vec<f64> {
        let n = self.states.len();
        let mut p = vec![1.0 / n as f64; n];
        for _ in 0..10_000 {
            let mut q = vec![0.0; n];
            for (i, s) in self.states.iter().enumerate() {
                let mut prev = 0.0;
                if s.next.is_empty() {
                    q[self.start] += p[i];
                }
                for (to, cum) in &s.next {
                    q[to.unwrap_or(self.start)] += p[i] * (cum - prev);
                    prev = *cum;
                }
            }
            // Averaging with the last step makes periodic chains converge too.
            for (a, b) in p.iter_mut().zip(&q) {
                *a = 0.5 * *a + 0.5 * b;
            }
        }
        p
    }
}

/// How payload rows are handed to users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PayloadOrder {
    /// A row at random for each user.
    Random,
    /// Row `k % rows` for user `k`: in order, wrapping around.
    Sequence,
}

/// Rows of a CSV file, each user taking one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    /// Variable names of the columns.
    pub fields: Vec<String>,
    /// The rows (each as long as `fields`).
    pub rows: Vec<Vec<String>>,
    /// How rows are handed out.
    pub order: PayloadOrder,
}

impl Payload {
    /// The row user `user` takes.
    pub fn row(&self, user: u64, rng: &mut fastrand::Rng) -> &[String] {
        let i = match self.order {
            PayloadOrder::Sequence => (user % self.rows.len() as u64) as usize,
            PayloadOrder::Random => rng.usize(..self.rows.len()),
        };
        &self.rows[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &str, next: &[(Option<usize>, f64)]) -> ChainState {
        ChainState {
            name: name.into(),
            request: None,
            think: None,
            next: ChainState::transitions(next),
        }
    }

    /// Seed 002's shape: home leads to news, about or legal; about routes on; legal is rare
    /// and some users leave.
    fn site() -> Chain {
        Chain {
            start: 0,
            states: vec![
                state("home", &[(Some(1), 0.5), (Some(2), 0.3), (Some(0), 0.2)]),
                state("news", &[(Some(0), 0.6), (Some(1), 0.3), (None, 0.1)]),
                state("about", &[(Some(3), 0.1), (Some(0), 0.9)]),
                state("legal", &[(None, 1.0)]),
            ],
        }
    }

    #[test]
    fn weights_become_cumulative_probabilities() {
        let t = ChainState::transitions(&[(Some(0), 5.0), (Some(1), 0.0), (None, 5.0)]);
        assert_eq!(t, vec![(Some(0), 0.5), (None, 1.0)]);
    }

    #[test]
    fn visit_frequencies_match_the_stationary_distribution() {
        let chain = site();
        let pi = chain.stationary();
        assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let mut rng = fastrand::Rng::with_seed(7);
        let mut visits = [0u64; 4];
        let mut s = chain.start;
        let steps = 1_000_000;
        for _ in 0..steps {
            visits[s] += 1;
            s = chain.next(s, &mut rng).unwrap_or(chain.start);
        }
        for (i, v) in visits.iter().enumerate() {
            let seen = *v as f64 / steps as f64;
            assert!(
                (seen - pi[i]).abs() < 0.005,
                "state {i}: visited {seen:.4}, stationary {:.4}",
                pi[i]
            );
        }
    }

    #[test]
    fn the_same_seed_walks_the_same_path() {
        let chain = site();
        let walk = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut s = Some(chain.start);
            let mut path = Vec::new();
            while let Some(i) = s {
                path.push(i);
                if path.len() > 1000 {
                    break;
                }
                s = chain.next(i, &mut rng);
            }
            path
        };
        assert_eq!(walk(3), walk(3));
        assert_ne!(walk(3), walk(4));
    }

    #[test]
    fn think_times_have_their_means() {
        let mut rng = fastrand::Rng::with_seed(11);
        let n = 200_000;
        for think in [
            Think::Constant(Duration::from_millis(500)),
            Think::Uniform(Duration::from_millis(200), Duration::from_millis(800)),
            Think::Exponential(Duration::from_millis(500)),
        ] {
            let total: f64 = (0..n).map(|_| think.sample(&mut rng).as_secs_f64()).sum();
            let mean = total / n as f64;
            assert!((mean - 0.5).abs() < 0.01, "{think:?}: mean {mean}");
        }
        let u = Think::Uniform(Duration::from_millis(200), Duration::from_millis(800));
        assert!((0..10_000).all(|_| {
            let d = u.sample(&mut rng);
            d >= Duration::from_millis(200) && d <= Duration::from_millis(800)
        }));
    }

    #[test]
    fn payload_rows_go_in_order_or_at_random() {
        let p = Payload {
            fields: vec!["user".into()],
            rows: (0..3).map(|i| vec![format!("u{i}")]).collect(),
            order: PayloadOrder::Sequence,
        };
        let mut rng = fastrand::Rng::with_seed(1);
        let seq: Vec<&str> = (0..5).map(|k| p.row(k, &mut rng)[0].as_str()).collect();
        assert_eq!(seq, vec!["u0", "u1", "u2", "u0", "u1"]);
        let r = Payload {
            order: PayloadOrder::Random,
            ..p
        };
        let mut seen = [false; 3];
        for k in 0..100 {
            let v = &r.row(k, &mut rng)[0];
            seen[v[1..].parse::<usize>().unwrap()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
