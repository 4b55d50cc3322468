//! Scenario flows and Markov user models as written in scenario files, lowered into the
//! plan's requests and a [`UserModel`] of steps the engine's virtual users run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use loadlab_grpc::Protos;
use loadlab_run::condition::Expr;
use loadlab_run::users::{
    Behaviour, Capture, CaptureSource, Chain, ChainState, Condition, ElementIndex, Expect,
    FormField, FormValue, GrpcStep, RequestStep, Step, Think, UserScenario,
};
use loadlab_run::{Endpoint, RequestTemplate, Template};
use loadlab_script::Render;
use serde::Deserialize;

use serde_saphyr::Spanned;

use super::error::{FlowError, Place, Refusal, Traced, Within};
use crate::target::{Lookup, UrlError};
use crate::yaml::{DurationError, OneOrMany, Seconds};

/// Request headers, in order.
pub type Headers = Vec<(String, String)>;

/// Most steps a user model may have, loops and states included.
const MAX_STEPS: usize = 10_000;

/// One step of a flow: a request, a think time, or a loop (Artillery writes `count` beside
/// `loop`, so a step is a map of optional keys of which exactly one kind is given).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    #[serde(default)]
    get: Option<RequestSpec>,
    #[serde(default)]
    post: Option<RequestSpec>,
    #[serde(default)]
    put: Option<RequestSpec>,
    #[serde(default)]
    patch: Option<RequestSpec>,
    #[serde(default)]
    delete: Option<RequestSpec>,
    #[serde(default)]
    think: Option<ThinkSpec>,
    /// Artillery's `jitter` of a `think` step: `"10%"` of it, or milliseconds, either way.
    #[serde(default)]
    jitter: Option<serde_json::Value>,
    /// A loop's name for its count variable, instead of `$loopCount`.
    #[serde(default, rename = "loopValue")]
    loop_value: Option<String>,
    /// A loop's name for its item variable, instead of `$loopElement`.
    #[serde(default, rename = "loopElement")]
    loop_element: Option<String>,
    #[serde(default, rename = "loop")]
    looped: Option<Vec<Spanned<StepSpec>>>,
    /// A loop's passes: a whole number (-1: endless, as in Artillery), or text rendered when
    /// the loop starts (`"{{ n }}"`, `"1-5"`).
    #[serde(default)]
    count: Option<LoopCount>,
    /// `loop` over a list (refused: not run yet).
    #[serde(default)]
    over: Option<Spanned<serde_json::Value>>,
    /// A function of the processor, called with the user's context.
    #[serde(default)]
    function: Option<Spanned<serde_json::Value>>,
    /// A message the user prints, rendered with its variables.
    #[serde(default)]
    log: Option<Spanned<serde_json::Value>>,
    /// A loop's condition: a processor function asked before each pass.
    #[serde(default, rename = "whileTrue")]
    while_true: Option<Spanned<serde_json::Value>>,
    /// Steps issued together.
    #[serde(default)]
    parallel: Option<Spanned<Vec<Spanned<StepSpec>>>>,
    /// `engine: ws`: a message sent on the user's WebSocket (and, with `capture` or `match`,
    /// the reply awaited).
    #[serde(default)]
    pub(super) send: Option<Spanned<serde_json::Value>>,
    /// `engine: ws`: the next message awaited, with `capture` or `match`.
    #[serde(default)]
    pub(super) wait: Option<Spanned<serde_json::Value>>,
    /// `engine: ws`, first step: where the WebSocket connects (a URL, or `target`, `headers`
    /// and `subprotocols`).
    #[serde(default)]
    pub(super) connect: Option<Spanned<serde_json::Value>>,
    /// `engine: socketio`: an event emitted (`{channel, data}`, or a list: the event's name
    /// and its arguments).
    #[serde(default)]
    pub(super) emit: Option<Spanned<serde_json::Value>>,
    /// `engine: socketio`: the event awaited after the emit.
    #[serde(default)]
    pub(super) response: Option<Spanned<AnswerSpec>>,
    /// `engine: socketio`: the acknowledgement awaited after the emit.
    #[serde(default)]
    pub(super) acknowledge: Option<Spanned<AnswerSpec>>,
    /// `engine: socketio`: the namespace the event goes to.
    #[serde(default)]
    pub(super) namespace: Option<Spanned<String>>,
    /// A gRPC call (loadlab's extension): the method, its request in JSON, metadata, captures
    /// from its answer and the statuses it must end with.
    #[serde(default)]
    grpc: Option<Spanned<GrpcStepSpec>>,
}

/// A `grpc:` step as scenario files write it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcStepSpec {
    /// `package.Service/Method` (a leading `/` is allowed).
    method: String,
    /// The request message in gRPC's JSON mapping (a list of them for a client stream); its
    /// strings may hold `{{ }}`.
    #[serde(default)]
    data: Option<serde_json::Value>,
    /// Metadata; values may hold `{{ }}`.
    #[serde(default, deserialize_with = "crate::yaml::null_as_default")]
    metadata: BTreeMap<String, String>,
    /// Name for the per-request results (default: `grpc` and the method).
    #[serde(default)]
    name: Option<String>,
    /// Values taken from the answer's first message (as JSON) into variables, as an HTTP
    /// request's `capture`.
    #[serde(default)]
    capture: Option<serde_json::Value>,
    /// The statuses the call must end with.
    #[serde(default)]
    expect: Option<GrpcExpectSpec>,
}

/// A `grpc:` step's `expect`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrpcExpectSpec {
    /// A status or a list of them, by name (`OK`, `NOT_FOUND`) or number.
    code: OneOrMany<serde_json::Value>,
}

/// `config.grpc` (loadlab's extension): where the `grpc:` steps' types come from, relative to
/// the scenario file; neither: the target's server reflection.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcConfig {
    /// `.proto` files, compiled by loadlab.
    #[serde(default)]
    proto: Option<OneOrMany<std::path::PathBuf>>,
    /// Where their imports are looked up.
    #[serde(default, rename = "importPaths")]
    import_paths: Vec<std::path::PathBuf>,
    /// Compiled `FileDescriptorSet` files.
    #[serde(default)]
    protoset: Option<OneOrMany<std::path::PathBuf>>,
}

impl StepSpec {
    /// True when `think` is text holding a placeholder (`"{{ $randomNumber(3, 5) }}"`).
    fn think_is_template(&self) -> bool {
        matches!(&self.think, Some(ThinkSpec::Fixed(crate::yaml::Seconds::Text(t))) if t.contains("{{"))
    }

    /// How many kinds of step the map gives — a request (one that reads or not), a think, a
    /// loop, a function, a log, a ws message, an emit, a parallel — where a step is one.
    fn kinds(&self) -> usize {
        [
            !matches!(self.request(), Ok(None)),
            self.think.is_some(),
            self.looped.is_some(),
            self.function.is_some(),
            self.log.is_some(),
            self.send.is_some() || self.wait.is_some(),
            self.emit.is_some(),
            self.parallel.is_some(),
            self.grpc.is_some(),
        ]
        .into_iter()
        .filter(|k| *k)
        .count()
    }

    /// The keys of other kinds of step written beside a `loop` (which Artillery does not read).
    fn beside_loop(&self) -> Vec<&'static str> {
        let method = match self.request() {
            Ok(Some((m, _))) => Some(m),
            Ok(None) => None,
            Err(_) => Some("a request"),
        };
        [
            (self.think.is_some(), "think"),
            (self.function.is_some(), "function"),
            (self.log.is_some(), "log"),
            (self.send.is_some(), "send"),
            (self.wait.is_some(), "wait"),
            (self.emit.is_some(), "emit"),
            (self.parallel.is_some(), "parallel"),
            (self.grpc.is_some(), "grpc"),
        ]
        .into_iter()
        .filter_map(|(given, key)| given.then_some(key))
        .chain(method)
        .collect()
    }

    /// The step's request when the step is exactly one plain request (see
    /// [`RequestSpec::is_plain`]).
    pub fn plain_request(&self) -> Option<(&'static str, &RequestSpec)> {
        if self.think.is_some()
            || self.looped.is_some()
            || self.count.is_some()
            || self.function.is_some()
        {
            return None;
        }
        self.request().ok().flatten().filter(|(_, r)| r.is_plain())
    }

    /// The step's request and its method, if it is one (and only one) request.
    fn request(&self) -> Result<Option<(&'static str, &RequestSpec)>, FlowError> {
        let all = [
            ("GET", &self.get),
            ("POST", &self.post),
            ("PUT", &self.put),
            ("PATCH", &self.patch),
            ("DELETE", &self.delete),
        ];
        let mut given = all.iter().filter_map(|(m, r)| r.as_ref().map(|r| (*m, r)));
        let first = given.next();
        if given.next().is_some() {
            return Err(FlowError::TwoRequests);
        }
        Ok(first)
    }
}

/// A request as scenario files write it.
#[derive(Debug, Deserialize)]
pub struct RequestSpec {
    /// Absolute, or a path relative to `config.target`; may hold `{{ }}` after the host
    /// (`uri` is its other name, as in Artillery).
    #[serde(alias = "uri")]
    pub url: String,
    /// Name for the per-request results (default: method and URL as written).
    #[serde(default)]
    pub name: Option<String>,
    /// Headers; values may hold `{{ }}`.
    #[serde(default, deserialize_with = "crate::yaml::null_as_default")]
    pub headers: BTreeMap<String, String>,
    /// Query parameters, URL-encoded once rendered.
    #[serde(default, deserialize_with = "crate::yaml::null_as_default")]
    pub qs: BTreeMap<String, serde_json::Value>,
    /// JSON body; its strings may hold `{{ }}`.
    #[serde(default)]
    pub json: Option<serde_json::Value>,
    /// Raw body; may hold `{{ }}`.
    #[serde(default)]
    pub body: Option<String>,
    /// Values taken from the response into variables.
    #[serde(default)]
    pub capture: Option<OneOrMany<CaptureSpec>>,
    /// Checks on the response.
    #[serde(default)]
    pub expect: Option<OneOrMany<ExpectSpec>>,
    /// Fetch the resources the page's HTML names on a user's first visit (a browser's first
    /// load).
    #[serde(default, rename = "static")]
    pub fetch_static: bool,
    /// A URL-encoded form body: field → value.
    #[serde(default)]
    pub form: Option<Spanned<BTreeMap<String, serde_json::Value>>>,
    /// A multipart body: field → text, or `{fromFile: PATH}` / `{value: TEXT}` with an
    /// optional `contentType`.
    #[serde(default, rename = "formData")]
    pub form_data: Option<Spanned<BTreeMap<String, serde_json::Value>>>,
    /// Whether redirects are followed (the default, as in Artillery).
    #[serde(default, rename = "followRedirect")]
    pub follow_redirect: Option<Spanned<bool>>,
    /// Most redirects followed before the request fails (10 when not given, as in Artillery).
    #[serde(default, rename = "maxRedirects")]
    pub max_redirects: Option<u32>,
    /// Processor functions called before the request is rendered.
    #[serde(default, rename = "beforeRequest")]
    pub before_request: Option<Spanned<serde_json::Value>>,
    /// Processor functions called with the response.
    #[serde(default, rename = "afterResponse")]
    pub after_response: Option<Spanned<serde_json::Value>>,
    /// Artillery's older response check: `{json: QUERY, value: V}` (or a list), which fails
    /// the session when the query's first value is not V.
    #[serde(default, rename = "match")]
    pub matches: Option<Spanned<serde_json::Value>>,
    /// A condition on the user's variables: the request is sent only when it holds.
    #[serde(default, rename = "ifTrue")]
    pub if_true: Option<Spanned<serde_json::Value>>,
    /// The percent chance that the request is sent.
    #[serde(default)]
    pub probability: Option<serde_json::Value>,
    /// Cookies set in the user's jar before the request: name → value.
    #[serde(default)]
    pub cookie: Option<Spanned<serde_json::Value>>,
    /// HTTP basic authentication, sent as an `Authorization` header (as Artillery's client
    /// sends it) unless the request's headers set one.
    #[serde(default)]
    pub auth: Option<AuthSpec>,
}

/// `auth: {user, pass}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    #[serde(default)]
    user: String,
    #[serde(default)]
    pass: String,
}

impl CaptureSpec {
    /// The regular expression, when the capture gives one.
    pub(super) fn regexp_given(&self) -> Option<&str> {
        self.regexp.as_deref()
    }
}

impl RequestSpec {
    /// True when the request is one fixed request: nothing to render, capture or check.
    pub fn is_plain(&self) -> bool {
        !self.url.contains("{{")
            && self.qs.is_empty()
            && self.capture.is_none()
            && self.expect.is_none()
            && !self.fetch_static
            && self.name.is_none()
            && self.form.is_none()
            && self.before_request.is_none()
            && self.after_response.is_none()
            && self.form_data.is_none()
            && self.matches.is_none()
            && self.if_true.is_none()
            && self.probability.is_none()
            && self.cookie.is_none()
            && self.follow_redirect.is_none()
            && self.max_redirects.is_none()
            && self.headers.values().all(|v| !v.contains("{{"))
            && self
                .auth_rendered()
                .is_none_or(|a| !a.user.contains("{{") && !a.pass.contains("{{"))
            && self.body.as_ref().is_none_or(|b| !b.contains("{{"))
            && self
                .json
                .as_ref()
                .is_none_or(|j| !j.to_string().contains("{{"))
    }

    /// The `form` fields as text, in order: strings, numbers and booleans; a template may be
    /// a value, not a name.
    fn form_fields(&self) -> Result<Vec<(String, String)>, FlowError> {
        let Some(form) = &self.form else {
            return Ok(Vec::new());
        };
        form.value
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
                    _ => return Err(FlowError::FormValue(k.clone())),
                };
                if k.contains("{{") {
                    return Err(FlowError::FormValue(k.clone()));
                }
                Ok((k.clone(), text))
            })
            .collect()
    }

    /// `auth`'s user and password, the config's values (the environment, `-v`) rendered; what
    /// is left of a template is a user's variable, rendered for each request.
    pub fn auth_rendered(&self) -> Option<AuthSpec> {
        self.auth.as_ref().map(|auth| AuthSpec {
            user: crate::config_templates::render_request(&auth.user),
            pass: crate::config_templates::render_request(&auth.pass),
        })
    }

    /// The headers (with `Content-Type: application/json` added for a JSON body) and the body.
    /// `auth` of a user's variables is left to the caller, who renders it for each request.
    pub fn headers_and_body(&self) -> Result<(Headers, Vec<u8>), FlowError> {
        let mut headers: Headers = self.headers.clone().into_iter().collect();
        if let Some(auth) = self.auth_rendered() {
            let templated = auth.user.contains("{{") || auth.pass.contains("{{");
            if !templated
                && !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                use base64::Engine as _;
                let token = base64::engine::general_purpose::STANDARD
                    .encode(format!("{}:{}", auth.user, auth.pass));
                headers.push(("authorization".into(), format!("Basic {token}")));
            }
        }
        for (k, v) in &headers {
            if k.is_empty()
                || k.bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                return Err(FlowError::HeaderName(k.clone()));
            }
            if v.contains(['\r', '\n']) {
                return Err(FlowError::HeaderLineBreak(k.clone()));
            }
        }
        if self.form.is_some() {
            if self.json.is_some() || self.body.is_some() {
                return Err(FlowError::JsonAndBody);
            }
            let fields = self.form_fields()?;
            let mut encoded = url::form_urlencoded::Serializer::new(String::new());
            for (k, text) in &fields {
                encoded.append_pair(k, text);
            }
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                headers.push((
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ));
            }
            // A form with templates is encoded when each request is rendered.
            let templated = fields.iter().any(|(_, v)| v.contains("{{"));
            let body = if templated {
                Vec::new()
            } else {
                encoded.finish().into_bytes()
            };
            return Ok((headers, body));
        }
        let body = match (&self.json, &self.body) {
            (Some(_), Some(_)) => return Err(FlowError::JsonAndBody),
            (Some(j), None) => {
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                serde_json::to_vec(j).map_err(FlowError::Json)?
            }
            (None, Some(b)) => b.clone().into_bytes(),
            (None, None) => Vec::new(),
        };
        Ok((headers, body))
    }
}

/// A status of a `grpc:` step's `expect: {code}`: a name (`OK`, `not_found`) or a number.
fn grpc_code_of(v: &serde_json::Value) -> Result<u32, String> {
    let named = v
        .as_str()
        .and_then(|n| loadlab_run::GrpcCode::from_name(&n.trim().to_ascii_uppercase()));
    let numbered = v
        .as_u64()
        .filter(|n| *n < loadlab_run::GrpcCode::COUNT as u64);
    match (named, numbered) {
        (Some(c), _) => Ok(c.number() as u32),
        (None, Some(n)) => Ok(n as u32),
        _ => Err(format!(
            "expect code {v}: a gRPC status by name (OK, NOT_FOUND, UNAVAILABLE…) or number (0-16)"
        )),
    }
}

/// `capture`: a JSONPath query over the body, or a header, into a variable.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    #[serde(default)]
    pub(super) json: Option<String>,
    #[serde(default)]
    pub(super) header: Option<String>,
    /// A regular expression over the body.
    #[serde(default)]
    regexp: Option<String>,
    /// The regexp's group: a number or a name.
    #[serde(default)]
    group: Option<serde_json::Value>,
    /// The regexp's flags, as JavaScript writes them (`i`, `m`, `s`).
    #[serde(default)]
    flags: Option<String>,
    /// A CSS selector over the body as HTML.
    #[serde(default)]
    selector: Option<String>,
    /// The selector's attribute whose value is captured.
    #[serde(default)]
    attr: Option<String>,
    /// Which of the selector's elements: a number from 0, `last` or `random`.
    #[serde(default)]
    index: Option<serde_json::Value>,
    /// `false`: finding nothing leaves the variable unset instead of failing the session.
    #[serde(default)]
    strict: Option<bool>,
    #[serde(rename = "as")]
    pub(super) var: String,
}

/// A Socket.IO answer as Artillery's `response` and `acknowledge` write it.
#[derive(Debug, Deserialize)]
pub struct AnswerSpec {
    /// `response`: the event awaited (`on` is its other name).
    #[serde(default)]
    pub(super) channel: Option<String>,
    #[serde(default)]
    pub(super) on: Option<String>,
    /// The arguments expected (`args` is its other name).
    #[serde(default)]
    pub(super) data: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) args: Option<serde_json::Value>,
    /// Values taken from the arguments.
    #[serde(default)]
    pub(super) capture: Option<OneOrMany<CaptureSpec>>,
    /// Checks on the arguments.
    #[serde(default, rename = "match")]
    pub(super) matches: Option<serde_json::Value>,
}

/// `expect`: checks by name, as Artillery's expect plugin writes them (an item may hold several).
pub type ExpectSpec = BTreeMap<String, Spanned<serde_json::Value>>;

/// The expect plugin's checks that loadlab does not make yet.
const EXPECT_LATER: [&str; 2] = ["jmespath", "jpath"];

/// The expect plugin's checks, by name.
const EXPECT_CHECKS: [&str; 12] = [
    "statusCode",
    "notStatusCode",
    "contentType",
    "hasProperty",
    "notHasProperty",
    "equals",
    "hasHeader",
    "headerEquals",
    "matchesRegexp",
    "cdnHit",
    "jmespath",
    "jpath",
];

/// A loop's `count` as written.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum LoopCount {
    /// A number of passes.
    Number(i64),
    /// Text rendered when the loop starts.
    Text(String),
}

/// `think`: seconds (Artillery), or a distribution.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ThinkSpec {
    /// A constant time.
    Fixed(Seconds),
    /// A distribution of times.
    Dist(ThinkDist),
}

/// A think-time distribution.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkDist {
    #[serde(default)]
    constant: Option<Seconds>,
    #[serde(default)]
    uniform: Option<[Seconds; 2]>,
    #[serde(default)]
    exponential: Option<Seconds>,
}

/// loadlab's user model: states (pages) with transitions that carry probabilities.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkovSpec {
    /// The first state.
    start: String,
    /// The states by name; `end` is the end of the session and cannot be defined.
    states: BTreeMap<String, StateSpec>,
}

/// One state of a Markov user model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    #[serde(default)]
    get: Option<RequestSpec>,
    #[serde(default)]
    post: Option<RequestSpec>,
    #[serde(default)]
    think: Option<ThinkSpec>,
    /// Next state → weight (normalized into probabilities); `end` ends the session.
    #[serde(default)]
    next: BTreeMap<String, f64>,
}

fn seconds(s: &Seconds) -> Result<Duration, DurationError> {
    match s {
        Seconds::Number(n) if *n == 0.0 => Ok(Duration::ZERO),
        other => other.duration(),
    }
}

fn think_of(t: &ThinkSpec) -> Result<Think, FlowError> {
    let think = think_kind(t)?;
    let longest = match think {
        Think::Constant(d) | Think::Exponential(d) => d,
        Think::Uniform(_, b) => b,
    };
    if longest > loadlab_run::plan::MAX_DURATION {
        return Err(FlowError::ThinkTooLong);
    }
    Ok(think)
}

/// `think` spread by Artillery's `jitter` (the step's, else `config.defaults.think.jitter`):
/// a constant T becomes uniform over T ± J, J a percent of T (`"10%"`) or milliseconds (a
/// number), at least zero, as Artillery draws it. A distribution of loadlab's own keeps its
/// shape.
pub(super) fn jittered(
    think: Think,
    jitter: Option<&serde_json::Value>,
) -> Result<Think, FlowError> {
    let (Think::Constant(t), Some(j)) = (think, jitter) else {
        return Ok(think);
    };
    let bad = || FlowError::Jitter(j.to_string());
    let by = match j {
        serde_json::Value::Number(n) => {
            Duration::from_secs_f64(n.as_f64().filter(|v| *v >= 0.0).ok_or_else(bad)? / 1000.0)
        }
        serde_json::Value::String(s) => match s.trim().strip_suffix('%') {
            Some(p) => t.mul_f64(
                p.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| *p >= 0.0)
                    .ok_or_else(bad)?
                    / 100.0,
            ),
            None => Duration::from_secs_f64(
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| *v >= 0.0)
                    .ok_or_else(bad)?
                    / 1000.0,
            ),
        },
        _ => return Err(bad()),
    };
    if by.is_zero() {
        return Ok(think);
    }
    Ok(Think::Uniform(t.saturating_sub(by), t + by))
}

fn think_kind(t: &ThinkSpec) -> Result<Think, FlowError> {
    Ok(match t {
        ThinkSpec::Fixed(s) => Think::Constant(seconds(s)?),
        ThinkSpec::Dist(d) => match (&d.constant, &d.uniform, &d.exponential) {
            (Some(c), None, None) => Think::Constant(seconds(c)?),
            (None, Some([a, b]), None) => {
                let (a, b) = (seconds(a)?, seconds(b)?);
                if a > b {
                    return Err(FlowError::UniformOrder);
                }
                Think::Uniform(a, b)
            }
            (None, None, Some(m)) => Think::Exponential(seconds(m)?),
            _ => return Err(FlowError::ThinkKind),
        },
    })
}

/// Builds the plan's requests and the user model's scenarios from scenario specs.
pub struct Lowering<'a> {
    /// `config.target`, or `--target`.
    pub target: &'a str,
    /// Whether the requests' hosts are looked up.
    pub lookup: Lookup,
    /// The plan's endpoints, filled as requests name them.
    pub endpoints: Vec<Endpoint>,
    /// The plan's requests, one per request step (and one per page's static resources).
    pub requests: Vec<RequestTemplate>,
    /// Variables some source defines: config variables, payload fields, captures.
    pub defined: HashSet<String>,
    /// `config.defaults.headers`: sent by every request that does not set the header itself.
    pub default_headers: BTreeMap<String, String>,
    /// `config.defaults.cookie`: cookies every request sets, its own `cookie` over them.
    pub default_cookies: Vec<(String, Template)>,
    /// `config.defaults.think.jitter`: the spread of every `think` step without its own.
    pub think_jitter: Option<serde_json::Value>,
    /// `config.defaults.strictCapture`: whether a capture without its own `strict` fails the
    /// user when it finds nothing (true, Artillery's default).
    pub strict_capture: bool,
    /// The scenario file's folder, which `formData` files are relative to.
    pub dir: std::path::PathBuf,
    /// Lists a `loop … over` may name: payloads read whole (`loadAll` with `name`), by name.
    pub lists: BTreeMap<String, Vec<serde_json::Value>>,
    /// True when the script gives `config.processor`: its functions may set any variable, so
    /// none is undefined, and hooks may be named.
    pub processor: bool,
    /// The current scenario's `beforeRequest` and `afterResponse` functions, called around each
    /// of its requests before the request's own.
    hooks: (Vec<String>, Vec<String>),
    steps: usize,
    /// The current scenario's WebSocket, when its engine is `ws`: its steps send messages,
    /// and an HTTP request step is refused.
    pub(super) websocket: Option<super::sockets::Socket>,
    /// What the file asks that runs, but not as its author likely meant, one line each.
    pub warnings: Vec<String>,
    /// The expect plugin's `expectDefault200`: a request without checks expects status 200.
    pub expect_default_200: bool,
    /// True under users phases (loadlab's closed model), where a session that sends nothing
    /// would be followed by the next at once.
    pub closed: bool,
    /// True under `--strict`: a variable that no source defines is refused. Otherwise it is
    /// recorded in `unset` and renders as Artillery renders it.
    pub strict: bool,
    /// The variables used that no source of the file defines (they may come with `-v`, or
    /// render as Artillery renders an undefined one), in order of name.
    pub(super) unset: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// Hooks and `function` steps named without a `config.processor` (`afterResponse check`),
    /// skipped as Artillery skips a function it cannot find; `--strict` refuses them.
    pub(super) without_processor: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// True once a template read `target` (Artillery's variable holding the config's target).
    pub(super) reads_target: std::cell::Cell<bool>,
    /// Calls of functions Artillery's templates do not have (`$pick(1, 2)`), as written.
    pub(super) unknown_functions: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// `config.grpc`: where the `grpc:` steps' types come from (the target's reflection
    /// without it).
    pub grpc_config: Option<GrpcConfig>,
    /// False while the target is a stand-in (a check before the run): no server to ask.
    pub target_known: bool,
    /// The types read so far: under "" from `config.grpc`, else by service from reflection.
    grpc_protos: BTreeMap<String, Protos>,
}

/// A scenario's Node.js hooks, by key: `beforeScenario`, `afterScenario`, `beforeRequest`,
/// `afterResponse`, `onError` (each a function name or a list of them).
#[derive(Debug, Default)]
pub struct ScenarioHooks<'s> {
    /// Functions called first, as `function` steps.
    pub before_scenario: Option<&'s Spanned<serde_json::Value>>,
    /// Functions called last, as `function` steps.
    pub after_scenario: Option<&'s Spanned<serde_json::Value>>,
    /// Functions called before each request.
    pub before_request: Option<&'s Spanned<serde_json::Value>>,
    /// Functions called after each response.
    pub after_response: Option<&'s Spanned<serde_json::Value>>,
    /// Functions called when a request fails.
    pub on_error: Option<&'s Spanned<serde_json::Value>>,
}

impl<'a> Lowering<'a> {
    /// Starts lowering against `target`, with the variables config and payload define, looking
    /// hosts up as `lookup` says.
    pub fn new(target: &'a str, defined: HashSet<String>, lookup: Lookup) -> Self {
        Lowering {
            target,
            lookup,
            endpoints: Vec::new(),
            requests: Vec::new(),
            defined,
            default_headers: BTreeMap::new(),
            default_cookies: Vec::new(),
            think_jitter: None,
            strict_capture: true,
            dir: std::path::PathBuf::from("."),
            lists: BTreeMap::new(),
            processor: false,
            hooks: Default::default(),
            steps: 0,
            websocket: None,
            warnings: Vec::new(),
            expect_default_200: false,
            strict: false,
            closed: false,
            unset: Default::default(),
            without_processor: Default::default(),
            reads_target: Default::default(),
            unknown_functions: Default::default(),
            grpc_config: None,
            target_known: true,
            grpc_protos: BTreeMap::new(),
        }
    }

    /// True when some source defines `var`, or a processor may; `name.key` is defined by a
    /// capture of `name` (an object captured whole is read into).
    ///
    /// As Artillery runs a script whose variable nothing sets (it may come at run time with
    /// `-v`), one that no source defines is taken too, and noted in `unset` for a warning;
    /// only `--strict` refuses it.
    pub(super) fn is_defined(&self, var: &str) -> bool {
        // A call of a function Artillery's templates do not have (a processor's export): its
        // text renders as undefined, as in Artillery; warned about, refused under --strict.
        if loadlab_run::template::is_function_call(var) {
            self.unknown_functions.borrow_mut().insert(var.to_string());
            return !self.strict;
        }
        if var == "target" {
            self.reads_target.set(true);
        }
        let defined = self.processor
            || self.defined.contains(var)
            || var
                .split_once('.')
                .is_some_and(|(head, _)| self.defined.contains(head));
        if !defined && !self.strict {
            self.unset.borrow_mut().insert(var.to_string());
            return true;
        }
        defined
    }

    /// The function names a hook key gives (one name or a list), refused without a processor.
    fn function_names(
        &self,
        key: &str,
        given: &Spanned<serde_json::Value>,
    ) -> Result<Vec<String>, Traced> {
        let refused = |what: &str| Traced::at(refuse(key, what), &given.referenced);
        if !self.processor {
            return Err(refused(
                "names a Node.js function, but the script gives no config.processor; add \
                 processor: ./functions.js (the module that exports it)",
            ));
        }
        let names = match &given.value {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| refused("takes a function name or a list of them"))?,
            _ => return Err(refused("takes a function name or a list of them")),
        };
        if names.iter().any(|n| n.is_empty()) {
            return Err(refused("a function name is empty"));
        }
        Ok(names)
    }

    /// [`Lowering::function_names`] for a hook or a `function` step, which without a processor
    /// are skipped (noted in `without_processor`), as Artillery skips a function it cannot
    /// find, unless `--strict`.
    fn hook_names(
        &self,
        key: &str,
        given: &Spanned<serde_json::Value>,
    ) -> Result<Vec<String>, Traced> {
        if self.processor || self.strict {
            return self.function_names(key, given);
        }
        let names = match &given.value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.without_processor
            .borrow_mut()
            .insert(format!("{key} {names}"));
        Ok(Vec::new())
    }

    /// Lowers one scenario's flow or chain.
    pub fn scenario(
        &mut self,
        name: &str,
        flow: Option<&[Spanned<StepSpec>]>,
        markov: Option<&MarkovSpec>,
        hooks: &ScenarioHooks,
        engine: Option<super::sockets::Engine>,
    ) -> Result<UserScenario, Traced> {
        let before = self.requests.len();
        // A ws scenario connects first (to its `connect` step's URL, else the target); its
        // other steps are lowered with the socket known. A socketio scenario connects to the
        // target's Engine.IO path.
        let ws = match engine {
            Some(super::sockets::Engine::SocketIo(settings)) => {
                let (socket, connect) = self.connect_socketio(settings)?;
                self.websocket = Some(socket);
                let websocket = Some(connect);
                return self.finish_scenario(name, flow, markov, hooks, websocket, before);
            }
            Some(super::sockets::Engine::Ws(settings)) => Some(settings),
            None => None,
        };
        let (websocket, flow) = match (ws, flow) {
            (Some(settings), Some(flow)) => {
                let (connect, rest) = match flow.split_first() {
                    Some((first, rest)) if first.value.connect.is_some() => {
                        (first.value.connect.as_ref(), rest)
                    }
                    _ => (None, flow),
                };
                let (socket, connect) = self.connect(settings, connect)?;
                self.websocket = Some(socket);
                (Some(connect), Some(rest))
            }
            (Some(_), None) => {
                return Err(refuse("markov", "a ws scenario takes a flow of messages").into())
            }
            (None, flow) => {
                self.websocket = None;
                (None, flow)
            }
        };
        self.finish_scenario(name, flow, markov, hooks, websocket, before)
    }

    /// Lowers a scenario's flow or chain once its socket (if any) is known; `before` is the
    /// number of requests before the scenario's own.
    /// `engine: playwright`: a user drives a browser page with processor function `function`
    /// (`flowFunction` or `testFunction`); a `flow` beside it is warned about, as Artillery's
    /// engine ignores it.
    pub fn browser_scenario(
        &mut self,
        name: &str,
        function: Option<&Spanned<String>>,
        engine: Option<&Spanned<String>>,
        has_flow: bool,
    ) -> Result<UserScenario, Traced> {
        let Some(function) = function else {
            let what = "a playwright scenario runs a function of config.processor; give \
                        flowFunction: NAME (the exported async function that drives the page)";
            return Err(match engine {
                Some(e) => Traced::at(refuse("engine", what), &e.referenced),
                None => refuse("engine", what).into(),
            });
        };
        let given = Spanned {
            value: serde_json::Value::String(function.value.clone()),
            referenced: function.referenced,
            defined: function.defined,
        };
        let mut names = self.function_names("flowFunction", &given)?;
        if has_flow {
            self.warnings.push(format!(
                "scenario {name}: engine: playwright runs flowFunction {}; its flow is ignored, \
                 as Artillery ignores it",
                function.value
            ));
        }
        Ok(UserScenario {
            name: name.to_string(),
            behaviour: Behaviour::Flow(vec![Step::Browser(names.remove(0))]),
            websocket: None,
            on_error: Vec::new(),
        })
    }

    fn finish_scenario(
        &mut self,
        name: &str,
        flow: Option<&[Spanned<StepSpec>]>,
        markov: Option<&MarkovSpec>,
        hooks: &ScenarioHooks,
        websocket: Option<loadlab_run::users::WsConnect>,
        before: usize,
    ) -> Result<UserScenario, Traced> {
        let names = |given: Option<&Spanned<serde_json::Value>>, key: &str| {
            given.map_or(Ok(Vec::new()), |g| self.hook_names(key, g))
        };
        let first = names(hooks.before_scenario, "beforeScenario")?;
        let last = names(hooks.after_scenario, "afterScenario")?;
        let on_error = names(hooks.on_error, "onError")?;
        self.hooks = (
            names(hooks.before_request, "beforeRequest")?,
            names(hooks.after_response, "afterResponse")?,
        );
        if let Some(h) = hooks
            .before_scenario
            .or(hooks.after_scenario)
            .filter(|_| markov.is_some())
        {
            return Err(Traced::at(
                refuse(
                    "beforeScenario",
                    "a markov chain takes no scenario hooks; call the functions from a flow",
                ),
                &h.referenced,
            ));
        }
        let behaviour = match (flow, markov) {
            (Some(flow), None) => {
                // As Artillery does: the scenario's hooks become function steps around its flow.
                let mut steps: Vec<Step> = first.into_iter().map(Step::Function).collect();
                steps.extend(self.steps(flow)?);
                steps.extend(last.into_iter().map(Step::Function));
                Behaviour::Flow(steps)
            }
            (None, Some(m)) => Behaviour::Chain(self.chain(m)?),
            _ => return Err(FlowError::NoBehaviour(name.into()).into()),
        };
        self.websocket = None;
        // A flow of processor functions alone is what Artillery runs for a protocol it has no
        // engine for (SOAP, Twirp, Redis): the functions send their own traffic.
        // A flow of `log` and `think` steps alone Artillery runs too (its own tests' scenarios
        // that only log which one ran): its users take their steps' time and send nothing.
        // Under users phases, whose users start a new session as one ends, such a flow would
        // only spin.
        let does_something = match &behaviour {
            Behaviour::Flow(steps) => {
                steps.iter().any(|s| matches!(s, Step::Function(_)))
                    || (!steps.is_empty() && !self.closed)
            }
            Behaviour::Chain(_) => false,
        };
        if self.requests.len() == before && !does_something {
            return Err(FlowError::NoRequest.into());
        }
        if self.requests.len() == before
            && matches!(&behaviour, Behaviour::Flow(steps) if !steps.iter().any(|s| matches!(s, Step::Function(_))))
        {
            self.warnings.push(format!(
                "scenario {name:?} sends no request and calls no function: its users only take \
                 their steps (log, think), as Artillery runs them"
            ));
        }
        Ok(UserScenario {
            name: name.to_string(),
            behaviour,
            websocket,
            on_error,
        })
    }

    fn count_step(&mut self) -> Result<(), FlowError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(FlowError::TooManySteps { max: MAX_STEPS });
        }
        Ok(())
    }

    fn steps(&mut self, flow: &[Spanned<StepSpec>]) -> Result<Vec<Step>, Traced> {
        let mut out = Vec::with_capacity(flow.len());
        for (i, spanned) in flow.iter().enumerate() {
            self.count_step()?;
            let s = &spanned.value;
            // Every problem of the step is placed at it, unless it knows a closer place.
            let step = || Place::FlowStep(i + 1, super::error::position(&spanned.referenced));
            // Artillery's engine reads `loop` before every other key of a step, and its script
            // check lets a loop step hold any key: a loop runs, what is beside it is not read.
            let looping = s.looped.is_some();
            if looping && s.kinds() > 1 {
                self.warn_beside_loop(i, spanned);
            }
            if let Some(body) = s.parallel.as_ref().filter(|_| !looping) {
                out.push(self.parallel(s, body).within(step)?);
                continue;
            }
            let while_true = self.while_true(s).within(step)?;
            let request = s.request().within(step)?;
            if s.connect.is_some() {
                // Artillery's ws engine reads `connect` from the first step only, and no other
                // engine reads it.
                let what = match self.websocket {
                    Some(_) => "goes in the first step of the flow, where the socket opens",
                    None => "is a step of engine: ws scenarios",
                };
                return Err(refuse("connect", what)).within(step);
            }
            if s.emit.is_none()
                && (s.response.is_some() || s.acknowledge.is_some() || s.namespace.is_some())
            {
                return Err(refuse(
                    "response",
                    "response, acknowledge and namespace go with emit in the same step",
                ))
                .within(step);
            }
            if let Some(emit) = s.emit.as_ref().filter(|_| !looping) {
                if request.is_some() || s.think.is_some() || s.looped.is_some() {
                    return Err(FlowError::StepKind).within(step);
                }
                let e = self.sio_emit(emit, s).within(step)?;
                out.push(Step::Emit(Box::new(e)));
                continue;
            }
            let message = !looping && (s.send.is_some() || s.wait.is_some());
            if (!looping && s.kinds() != 1) || (message && s.send.is_some() && s.wait.is_some()) {
                return Err(FlowError::StepKind).within(step);
            }
            if message {
                let m = self
                    .ws_message(s.send.as_ref(), s.wait.as_ref())
                    .within(step)?;
                out.push(Step::Ws(Box::new(m)));
                continue;
            }
            let request = request.filter(|_| !looping);
            if request.is_some() && self.websocket.as_ref().is_some_and(|w| !w.socketio()) {
                return Err(refuse(
                    "engine: ws",
                    "a ws scenario sends messages (send, wait); Artillery's ws engine does not \
                     run HTTP requests: move them to a scenario of their own",
                ))
                .within(step);
            }
            if s.count.is_some() && s.looped.is_none() {
                return Err(FlowError::CountWithoutLoop).within(step);
            }
            if let Some(body) = &s.looped {
                out.push(self.loop_step(s, body, while_true).within(step)?);
            } else if let Some(f) = &s.function {
                for name in self.hook_names("function", f).within(step)? {
                    out.push(Step::Function(name));
                }
            } else if let Some(log) = &s.log {
                out.push(Step::Log(self.log(log).within(step)?));
            } else if let Some(g) = &s.grpc {
                let call = self
                    .grpc_call(&g.value)
                    .map_err(|e| e.or_at(&g.referenced))
                    .within(step)?;
                out.push(Step::Request(Box::new(call)));
            } else if let Some((method, r)) = request {
                out.push(Step::Request(Box::new(
                    self.request(method, r).within(step)?,
                )));
            } else if let Some(ThinkSpec::Fixed(crate::yaml::Seconds::Text(t))) =
                s.think.as_ref().filter(|_| s.think_is_template())
            {
                // A template, rendered at each pass as Artillery renders it.
                let t = Template::parse(t).map_err(FlowError::from).within(step)?;
                if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
                    return Err(FlowError::Undefined(v.to_string())).within(step);
                }
                out.push(Step::ThinkTemplate(t));
            } else if let Some(t) = &s.think {
                let think = think_of(t).within(step)?;
                let jitter = s.jitter.as_ref().or(self.think_jitter.as_ref());
                out.push(Step::Think(jittered(think, jitter).within(step)?));
            }
        }
        Ok(out)
    }

    /// Warns that the keys beside a step's `loop` are not read (as Artillery's engine reads
    /// `loop` first and its script check lets a loop step hold any key).
    fn warn_beside_loop(&mut self, i: usize, spanned: &Spanned<StepSpec>) {
        let at = super::error::position(&spanned.referenced).map_or_else(String::new, |p| {
            format!(" (line {}, column {})", p.line, p.column)
        });
        self.warnings.push(format!(
            "flow step {}{at}: {} beside loop is not read: Artillery runs the loop and \
             ignores it, and so does loadlab",
            i + 1,
            spanned.value.beside_loop().join(", ")
        ));
    }

    /// The processor function a loop step's `whileTrue` names: one name, and only on a loop.
    fn while_true(&self, s: &StepSpec) -> Result<Option<String>, Traced> {
        let Some(v) = &s.while_true else {
            return Ok(None);
        };
        if s.looped.is_none() {
            return Err(FlowError::CountWithoutLoop.into());
        }
        let mut names = self.function_names("whileTrue", v)?;
        if names.len() != 1 {
            return Err(Traced::at(
                refuse("whileTrue", "takes one function name"),
                &v.referenced,
            ));
        }
        Ok(names.pop())
    }

    /// Lowers a `loop` step: its body, what it goes over (a list, a payload read whole), its
    /// count (a number or a template), the names its variables take, and its `whileTrue`. A
    /// loop with none of count, `over` or `whileTrue` and no request in it never ends: refused.
    fn loop_step(
        &mut self,
        s: &StepSpec,
        body: &[Spanned<StepSpec>],
        while_true: Option<String>,
    ) -> Result<Step, Traced> {
        if body.is_empty() {
            return Err(FlowError::EmptyLoop.into());
        }
        let over = match &s.over {
            Some(o) => Some(self.loop_items(o, s.count.is_some())?),
            None => None,
        };
        let defaults = loadlab_run::users::LoopNames::default();
        let names = loadlab_run::users::LoopNames {
            count: s.loop_value.clone().unwrap_or(defaults.count),
            element: s.loop_element.clone().unwrap_or(defaults.element),
        };
        self.defined.insert(names.count.clone());
        self.defined.insert(names.element.clone());
        for item in over.iter().flatten() {
            for (var, _) in loadlab_script::vars::loop_item_vars(&names.element, item) {
                self.defined.insert(var);
            }
        }
        let before = self.requests.len();
        let mut steps = self.steps(body)?;
        if let Some(items) = &over {
            self.origins_from_items(&mut steps, (&names.element, items))?;
        }
        let (count, count_template) = match &s.count {
            None | Some(LoopCount::Number(-1)) => (None, None),
            Some(LoopCount::Number(n)) => match u64::try_from(*n) {
                Ok(n) => (Some(n), None),
                Err(_) => return Err(FlowError::LoopCount(n.to_string()).into()),
            },
            Some(LoopCount::Text(t)) => {
                let t = Template::parse(t).map_err(FlowError::from)?;
                if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
                    return Err(FlowError::Undefined(v.to_string()).into());
                }
                (Some(0), Some(t))
            }
        };
        if count.is_none()
            && over.is_none()
            && while_true.is_none()
            && self.requests.len() == before
        {
            return Err(FlowError::EndlessLoop.into());
        }
        Ok(Step::Loop {
            count,
            steps,
            over: over.unwrap_or_default(),
            while_true,
            names,
            count_template,
        })
    }

    /// Lowers a `parallel` step: its steps.
    fn parallel(
        &mut self,
        s: &StepSpec,
        body: &Spanned<Vec<Spanned<StepSpec>>>,
    ) -> Result<Step, Traced> {
        // `count`, `over`, `whileTrue` and `connect` go with other kinds of step.
        let alone =
            s.count.is_none() && s.over.is_none() && s.while_true.is_none() && s.connect.is_none();
        if s.kinds() != 1 || !alone {
            return Err(FlowError::StepKind.into());
        }
        if self.websocket.is_some() {
            return Err(Traced::at(
                refuse(
                    "parallel",
                    "runs HTTP steps; Artillery's ws and socketio engines do not run it",
                ),
                &body.referenced,
            ));
        }
        if body.value.is_empty() {
            return Err(Traced::at(
                refuse("parallel", "holds no step; give the steps to run at once"),
                &body.referenced,
            ));
        }
        Ok(Step::Parallel(self.steps(&body.value)?))
    }

    fn chain(&mut self, m: &MarkovSpec) -> Result<Chain, Traced> {
        if m.states.contains_key("end") {
            return Err(FlowError::EndState.into());
        }
        let names: Vec<&String> = m.states.keys().collect();
        let index = |n: &str| -> Result<Option<usize>, FlowError> {
            if n == "end" {
                return Ok(None);
            }
            names
                .iter()
                .position(|s| *s == n)
                .map(Some)
                .ok_or_else(|| FlowError::NoState(n.into()))
        };
        let start = index(&m.start)?.ok_or(FlowError::StartAtEnd)?;
        // A walk's order is random: any state's capture may come before any other's use.
        for st in m.states.values() {
            for r in [&st.get, &st.post].into_iter().flatten() {
                for c in r.capture.iter().flat_map(OneOrMany::as_slice) {
                    self.defined.insert(c.var.clone());
                }
            }
        }
        let mut states = Vec::new();
        for (name, st) in &m.states {
            self.count_step()?;
            let state = || Place::MarkovState(name.clone());
            let request = match (&st.get, &st.post) {
                (Some(r), None) => Some(self.request("GET", r).within(state)?),
                (None, Some(r)) => Some(self.request("POST", r).within(state)?),
                (None, None) => None,
                _ => return Err(FlowError::TwoPages).within(state),
            };
            let think = st.think.as_ref().map(think_of).transpose().within(state)?;
            let mut weights = Vec::new();
            for (to, w) in &st.next {
                if !(w.is_finite() && *w >= 0.0) {
                    return Err(FlowError::NegativeWeight).within(state);
                }
                weights.push((index(to).within(state)?, *w));
            }
            if !st.next.is_empty() && weights.iter().all(|(_, w)| *w == 0.0) {
                return Err(FlowError::ZeroWeights).within(state);
            }
            states.push(ChainState {
                name: name.clone(),
                request,
                think,
                next: ChainState::transitions(&weights),
            });
        }
        // A cycle of states with no request and no think would spin without end.
        let idle = |i: usize| states[i].request.is_none() && states[i].think.is_none();
        for from in (0..states.len()).filter(|i| idle(*i)) {
            // Depth-first over idle states only: reaching `from` again is a cycle.
            let mut stack = vec![from];
            let mut seen = vec![false; states.len()];
            while let Some(i) = stack.pop() {
                for (to, _) in &states[i].next {
                    let Some(to) = *to else { continue };
                    if to == from {
                        return Err(FlowError::IdleCycle(states[from].name.clone()).into());
                    }
                    if idle(to) && !seen[to] {
                        seen[to] = true;
                        stack.push(to);
                    }
                }
            }
        }
        Ok(Chain { start, states })
    }

    /// The items of `loop … over`: a list written in the file, or the name of a payload read
    /// whole (`loadAll: true` with `name`).
    fn loop_items(
        &self,
        over: &Spanned<serde_json::Value>,
        counted: bool,
    ) -> Result<Vec<serde_json::Value>, Traced> {
        let refused = |what: &str| Traced::at(refuse("over", what), &over.referenced);
        if counted {
            return Err(refused("a loop takes count or over, not both"));
        }
        let items = match &over.value {
            serde_json::Value::Array(items) => items.clone(),
            serde_json::Value::String(name) => match self.lists.get(name) {
                Some(rows) => rows.clone(),
                None => {
                    return Err(refused(&format!(
                        "{name:?} is not a list loadlab knows before the run: write the list, or \
                         name a payload with loadAll: true and name: {name}"
                    )))
                }
            },
            _ => {
                return Err(refused(
                    "takes a list, or the name of a payload read with loadAll",
                ))
            }
        };
        if items.is_empty() {
            return Err(refused("the list is empty"));
        }
        Ok(items)
    }

    /// A `log` step's message as a template whose variables are defined.
    fn log(&self, log: &Spanned<serde_json::Value>) -> Result<Template, Traced> {
        let Some(text) = scalar_text(&log.value) else {
            return Err(Traced::at(
                refuse("log", "takes a message (text, with {{ }} for variables)"),
                &log.referenced,
            ));
        };
        let t =
            Template::parse(&text).map_err(|e| Traced::at(FlowError::from(e), &log.referenced))?;
        if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
            return Err(FlowError::Undefined(v.to_string()).into());
        }
        Ok(t)
    }

    /// Lowers one request step: its endpoint and name into the plan's requests, its templates
    /// parsed, its captures and expectations checked.
    fn request(&mut self, method: &str, r: &RequestSpec) -> Result<RequestStep, Traced> {
        let if_true = match &r.if_true {
            Some(v) => Some(Box::new(self.condition(v)?)),
            None => None,
        };
        let mut cookies = match &r.cookie {
            Some(c) => self
                .cookies(&c.value)
                .map_err(|e| Traced::at(e, &c.referenced))?,
            None => Vec::new(),
        };
        for (name, value) in &self.default_cookies {
            if !cookies.iter().any(|(n, _)| n == name) {
                cookies.push((name.clone(), value.clone()));
            }
        }
        for e in r.expect.iter().flat_map(OneOrMany::as_slice) {
            for (check, v) in e {
                if !EXPECT_CHECKS.contains(&check.as_str()) {
                    self.warnings.push(format!(
                        "expect {check}: not a check of the expect plugin ({}); ignored, as \
                         Artillery ignores it",
                        EXPECT_CHECKS.join(", ")
                    ));
                } else if let Err(e) = expect_of(check, v) {
                    return Err(Traced::at(e, &v.referenced));
                }
            }
        }
        let form_data = match &r.form_data {
            Some(f) => {
                if r.json.is_some() || r.body.is_some() || r.form.is_some() {
                    return Err(Traced::at(FlowError::JsonAndBody, &f.referenced));
                }
                let fields = self
                    .form_data(&f.value)
                    .map_err(|e| Traced::at(e, &f.referenced))?;
                let uses = fields.iter().flat_map(|f| match &f.value {
                    FormValue::Text(t) | FormValue::File(t) => t.variables(),
                });
                if let Some(v) = uses.into_iter().find(|v| !self.is_defined(v)) {
                    return Err(FlowError::Undefined(v.to_string()).into());
                }
                fields
            }
            None => Vec::new(),
        };
        let matches = match &r.matches {
            Some(m) => self
                .matches(&m.value)
                .map_err(|e| Traced::at(e, &m.referenced))?,
            None => Vec::new(),
        };
        let mut step = self.request_inner(method, r)?;
        step.form_data = form_data;
        step.expects.extend(matches);
        step.before_request = self.hooks.0.clone();
        if let Some(h) = &r.before_request {
            step.before_request
                .extend(self.hook_names("beforeRequest", h)?);
        }
        step.after_response = self.hooks.1.clone();
        if let Some(h) = &r.after_response {
            step.after_response
                .extend(self.hook_names("afterResponse", h)?);
        }
        step.cookies = cookies;
        step.follow_redirect = r.follow_redirect.as_ref().is_none_or(|f| f.value);
        step.max_redirects = r.max_redirects.unwrap_or(10);
        step.if_true = if_true;
        // As Artillery reads it: `Number(probability) || 0`.
        step.probability = r.probability.as_ref().map(|p| {
            let n = match p {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            n.filter(|n: &f64| n.is_finite()).unwrap_or(0.0)
        });
        Ok(step)
    }

    /// A `grpc:` step as the request step it is: a POST of the method's path with gRPC's
    /// headers and the step's metadata, its `data` the JSON the engine renders and encodes for
    /// each call, with the method's types (read once, from `config.grpc` or the target's
    /// reflection) and the statuses it must end with.
    fn grpc_call(&mut self, g: &GrpcStepSpec) -> Result<RequestStep, Traced> {
        let bad = |why: String| Traced::from(FlowError::Grpc(why));
        let path = format!("/{}", g.method.trim_start_matches('/'));
        let service = path[1..].rsplit_once('/').map(|(s, _)| s.to_string());
        let Some(service) = service.filter(|s| !s.is_empty()) else {
            return Err(bad(format!(
                "method {:?} is not package.Service/Method",
                g.method
            )));
        };
        let protos = self.grpc_types(&service).map_err(bad)?;
        let (types, method) = match &protos {
            Some(p) => (
                p.encode(),
                Some(p.method_at(&path).map_err(|e| bad(e.to_string()))?),
            ),
            None => (Vec::new(), None),
        };
        let data = g.data.clone().unwrap_or_else(|| serde_json::json!({}));
        // A request without placeholders is checked against its type now, not at every call.
        if let Some(m) = method.as_ref().filter(|_| !data.to_string().contains("{{")) {
            m.framed_requests(&data.to_string())
                .map_err(|e| bad(e.to_string()))?;
        }
        let codes = match &g.expect {
            Some(e) => e
                .code
                .as_slice()
                .iter()
                .map(grpc_code_of)
                .collect::<Result<Vec<u32>, String>>()
                .map_err(bad)?,
            None => Vec::new(),
        };
        let mut headers: BTreeMap<String, String> = g
            .metadata
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        headers
            .entry("content-type".into())
            .or_insert_with(|| "application/grpc".into());
        headers.insert("te".into(), "trailers".into());
        let name = g
            .name
            .clone()
            .unwrap_or_else(|| format!("grpc {}", &path[1..]));
        let mut spec = serde_json::json!({
            "url": path,
            "name": name,
            "headers": headers,
            "json": data,
        });
        if let Some(c) = &g.capture {
            spec["capture"] = c.clone();
        }
        let spec: RequestSpec =
            serde_json::from_value(spec).map_err(|e| bad(format!("capture: {e}")))?;
        let mut step = self.request("POST", &spec)?;
        // A streaming method's messages are counted and timed as a run's are.
        if let Some(m) = method.filter(|m| m.client_streaming || m.server_streaming) {
            self.requests[step.request].grpc_stream = Some(loadlab_run::GrpcStream {
                client: m.client_streaming,
                server: m.server_streaming,
                ..Default::default()
            });
        }
        step.grpc = Some(Box::new(GrpcStep {
            method: path,
            types,
            codes,
        }));
        Ok(step)
    }

    /// The types the `grpc:` steps call with: `config.grpc`'s files, or else what the target's
    /// server answers for `service` by reflection; `None` while the target is not known or
    /// not to be asked (a check before the run, a plan for elsewhere), when calls are checked
    /// as far as their method's name.
    fn grpc_types(&mut self, service: &str) -> Result<Option<Protos>, String> {
        let key = match self.grpc_config {
            Some(_) => String::new(),
            None => service.to_string(),
        };
        if let Some(p) = self.grpc_protos.get(&key) {
            return Ok(Some(p.clone()));
        }
        let in_dir = |paths: &Option<OneOrMany<std::path::PathBuf>>| -> Vec<std::path::PathBuf> {
            paths
                .iter()
                .flat_map(OneOrMany::as_slice)
                .map(|p| self.dir.join(p))
                .collect()
        };
        let protos = match &self.grpc_config {
            Some(c) if c.proto.is_some() => {
                let imports: Vec<_> = c.import_paths.iter().map(|p| self.dir.join(p)).collect();
                Protos::compile(&in_dir(&c.proto), &imports).map_err(|e| e.to_string())?
            }
            Some(c) if c.protoset.is_some() => {
                Protos::read_descriptor_sets(&in_dir(&c.protoset)).map_err(|e| e.to_string())?
            }
            _ if !self.target_known => return Ok(None),
            _ if self.lookup == Lookup::Skip => {
                return Err(
                    "a plan that runs elsewhere cannot ask the server for its types: \
                     give them in config.grpc (proto: FILE, or protoset: FILE)"
                        .into(),
                )
            }
            _ => crate::grpc::reflect_target(self.target, service).map_err(|e| match e {
                crate::grpc::GrpcError::NoProto { why, .. } => format!(
                    "{why}: give the types in config.grpc (proto: FILE, importPaths: [DIR], or \
                     protoset: FILE)"
                ),
                e => e.to_string(),
            })?,
        };
        self.grpc_protos.insert(key, protos.clone());
        Ok(Some(protos))
    }

    /// A request's `ifTrue`: an expression over the user's variables, or with a processor, a
    /// bare name that may be one of its functions.
    fn condition(&self, v: &Spanned<serde_json::Value>) -> Result<Condition, Traced> {
        let refused = |what: String| Traced::at(refuse("ifTrue", &what), &v.referenced);
        let Some(text) = scalar_text(&v.value) else {
            return Err(refused(
                "takes a condition on the variables, as \"status == 200 and $loopCount < 3\""
                    .into(),
            ));
        };
        let expr = Expr::parse(&text).map_err(|e| refused(e.to_string()))?;
        let bare = matches!(&expr, Expr::Var(name) if *name == text.trim());
        Ok(Condition {
            function: (self.processor && bare).then(|| text.trim().to_string()),
            text,
            expr,
        })
    }

    /// A request's `cookie`: name → value (`{{ }}` allowed), set in the user's jar before the
    /// request is sent.
    pub(super) fn cookies(
        &self,
        v: &serde_json::Value,
    ) -> Result<Vec<(String, Template)>, FlowError> {
        let bad = || FlowError::Cookie(v.to_string());
        let serde_json::Value::Object(map) = v else {
            return Err(bad());
        };
        let mut out = Vec::new();
        for (name, value) in map {
            let text = scalar_text(value).ok_or_else(bad)?;
            if name.is_empty() || name.contains(['=', ';', ' ']) {
                return Err(bad());
            }
            let t = Template::parse(&text)?;
            if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
                return Err(FlowError::Undefined(v.to_string()));
            }
            out.push((name.clone(), t));
        }
        Ok(out)
    }

    /// Artillery's `match`: one or a list of `{json: QUERY, value: V, strict}` as checks;
    /// `strict: false` only reports in Artillery, and is left out here.
    pub(super) fn matches(&self, v: &serde_json::Value) -> Result<Vec<Expect>, FlowError> {
        let items = match v {
            serde_json::Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let mut out = Vec::new();
        for item in &items {
            let bad = || FlowError::Match(item.to_string());
            let serde_json::Value::Object(o) = item else {
                return Err(bad());
            };
            if o.keys()
                .any(|k| !matches!(k.as_str(), "json" | "value" | "strict"))
            {
                return Err(bad());
            }
            let (Some(serde_json::Value::String(query)), Some(value)) =
                (o.get("json"), o.get("value").and_then(scalar_text))
            else {
                return Err(bad());
            };
            if o.get("strict") == Some(&serde_json::Value::Bool(false)) {
                continue;
            }
            let written = query;
            let query = &loadlab_script::jsonpath::standard(written);
            serde_json_path::JsonPath::parse(query).map_err(|error| FlowError::CaptureQuery {
                query: written.clone(),
                error,
            })?;
            let value = Template::parse(&value)?;
            if let Some(v) = value.variables().find(|v| !self.is_defined(v)) {
                return Err(FlowError::Undefined(v.to_string()));
            }
            out.push(Expect::JsonMatch(query.clone(), value));
        }
        Ok(out)
    }

    /// A `formData` map as multipart fields: text, `{value}`, or `{fromFile}` (relative to the
    /// scenario file's folder), each with an optional `contentType`.
    fn form_data(
        &self,
        map: &BTreeMap<String, serde_json::Value>,
    ) -> Result<Vec<FormField>, FlowError> {
        let mut out = Vec::new();
        for (name, v) in map {
            let bad = || FlowError::FormData(name.clone());
            let (value, content_type) = match v {
                serde_json::Value::Object(o) => {
                    if o.keys()
                        .any(|k| !matches!(k.as_str(), "fromFile" | "value" | "contentType"))
                    {
                        return Err(bad());
                    }
                    let content_type = match o.get("contentType") {
                        Some(serde_json::Value::String(c)) => Some(c.clone()),
                        None => None,
                        Some(_) => return Err(bad()),
                    };
                    let value = match (o.get("fromFile"), o.get("value")) {
                        (Some(serde_json::Value::String(p)), None) => {
                            // A path written absolute stays so; a relative one is from the
                            // scenario file's folder, as Artillery resolves it.
                            let full = self.dir.join(p);
                            FormValue::File(Template::parse(&full.to_string_lossy())?)
                        }
                        (None, Some(v)) => {
                            FormValue::Text(Template::parse(&scalar_text(v).ok_or_else(bad)?)?)
                        }
                        _ => return Err(bad()),
                    };
                    (value, content_type)
                }
                other => (
                    FormValue::Text(Template::parse(&scalar_text(other).ok_or_else(bad)?)?),
                    None,
                ),
            };
            out.push(FormField {
                name: name.clone(),
                value,
                content_type,
            });
        }
        Ok(out)
    }

    fn request_inner(&mut self, method: &str, r: &RequestSpec) -> Result<RequestStep, FlowError> {
        let url = with_target(&r.url, self.target);
        let url = url.as_ref();
        let (origin, path) = self.origin_and_path(url)?;
        let endpoint = self.endpoint(&origin)?;
        let (mut headers, body) = r.headers_and_body()?;
        for (k, v) in &self.default_headers {
            if !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
                headers.push((k.clone(), v.clone()));
            }
        }
        for (_, v) in headers.iter_mut() {
            *v = crate::config_templates::render_request(v);
        }
        let name = r
            .name
            .clone()
            .unwrap_or_else(|| format!("{method} {}", r.url));
        let path_t = Template::parse(&path)?;
        let mut header_ts = headers
            .iter()
            .map(|(k, v)| Ok((k.clone(), Template::parse(v)?)))
            .collect::<Result<Vec<_>, FlowError>>()?;
        // Basic authentication of a user's variables (a captured token), encoded per request.
        if let Some(auth) = r
            .auth_rendered()
            .filter(|a| a.user.contains("{{") || a.pass.contains("{{"))
        {
            if !header_ts
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                header_ts.push((
                    "authorization".into(),
                    Template::basic_auth(&auth.user, &auth.pass)?,
                ));
            }
        }
        let query = query_templates(r)?;
        let body_t = match &r.json {
            Some(_) => Template::default(),
            None => Template::parse(&String::from_utf8_lossy(&body))?,
        };
        // A form whose values are templates, rendered and encoded for each request.
        let form = match &r.form {
            Some(_) if body.is_empty() => r
                .form_fields()?
                .into_iter()
                .map(|(k, v)| Ok((k, Template::parse(&v)?)))
                .collect::<Result<Vec<_>, FlowError>>()?,
            _ => Vec::new(),
        };
        let mut uses: Vec<String> = path_t.variables().map(str::to_string).collect();
        uses.extend(
            header_ts
                .iter()
                .flat_map(|(_, t)| t.variables().map(str::to_string)),
        );
        uses.extend(
            query
                .iter()
                .flat_map(|(_, t)| t.variables().map(str::to_string)),
        );
        uses.extend(body_t.variables().map(str::to_string));
        uses.extend(
            form.iter()
                .flat_map(|(_, t)| t.variables().map(str::to_string)),
        );
        if let Some(j) = &r.json {
            json_variables(j, &mut uses)?;
        }
        if let Some(v) = uses.iter().find(|v| !self.is_defined(v)) {
            return Err(FlowError::Undefined(v.clone()));
        }
        let request = self.push_request(&name, url, endpoint, method, &path, &headers, &body);
        let captures = self.captures(r.capture.iter().flat_map(OneOrMany::as_slice))?;
        let checks = self.expect_checks(r)?;
        let static_resources = r.fetch_static.then(|| {
            self.push_request(
                &format!("{name} static"),
                url,
                endpoint,
                "GET",
                &path,
                &[],
                &[],
            )
        });
        Ok(RequestStep {
            request,
            path: path_t,
            query,
            headers: header_ts,
            body: body_t,
            json: r.json.clone(),
            captures,
            expects: Vec::new(),
            checks,
            form_data: Vec::new(),
            form,
            static_resources,
            before_request: Vec::new(),
            after_response: Vec::new(),
            follow_redirect: true,
            max_redirects: 10,
            cookies: Vec::new(),
            if_true: None,
            probability: None,
            origins: Vec::new(),
            grpc: None,
        })
    }

    /// The origin and path of a request's URL: a relative one (`members/create`) goes to the
    /// target's origin as it is, where Artillery's HTTP client refuses it and every user fails
    /// at it; so does loadlab's, with a warning.
    fn origin_and_path(&mut self, url: &str) -> Result<(String, String), FlowError> {
        let relative = !(url.starts_with('/')
            || url.starts_with("{{")
            || url.starts_with("http://")
            || url.starts_with("https://"));
        if !relative {
            return split_url(self.target, url);
        }
        self.warnings.push(format!(
            "url {:?} is neither a path starting with / nor a URL: as in Artillery, every \
             user fails at that request (Invalid URL); write /{}",
            url, url
        ));
        Ok((split_url(self.target, self.target)?.0, url.to_string()))
    }

    /// The checks of the expect plugin a request's `expect` lists (the keys it knows), each of
    /// defined variables; a status of 200 when it lists none and the script asks for that
    /// default.
    fn expect_checks(&self, r: &RequestSpec) -> Result<Vec<Expect>, FlowError> {
        let mut checks = Vec::new();
        for e in r.expect.iter().flat_map(OneOrMany::as_slice) {
            for (check, v) in e {
                if !EXPECT_CHECKS.contains(&check.as_str()) {
                    continue;
                }
                let expect = expect_of(check, v)?;
                if let Some(v) = expect.variables().into_iter().find(|v| !self.is_defined(v)) {
                    return Err(FlowError::Undefined(v.to_string()));
                }
                checks.push(expect);
            }
        }
        if checks.is_empty() && self.expect_default_200 {
            checks.push(Expect::Status(vec![200]));
        }
        Ok(checks)
    }

    /// `capture` items as captures; each defines its variable for later steps.
    pub(super) fn captures<'c>(
        &mut self,
        specs: impl Iterator<Item = &'c CaptureSpec>,
    ) -> Result<Vec<Capture>, FlowError> {
        let mut captures = Vec::new();
        for c in specs {
            let source = match (&c.json, &c.header, &c.regexp) {
                (None, None, None) if c.selector.is_some() => selector_capture(c)?,
                _ if c.selector.is_some() => return Err(FlowError::CaptureSource(c.var.clone())),
                (Some(written), None, None) => {
                    // Artillery's dialect (`$.items.0.name`) in the standard's form.
                    let q = &loadlab_script::jsonpath::standard(written);
                    // A query may hold templates (`$[{{ $randomNumber(0, 9) }}]`, `$.{{ key }}`),
                    // rendered for each response, as Artillery renders it: checked here with
                    // each placeholder as an index or as a name.
                    let t = Template::parse(q)?;
                    if let Some(v) = t.variables().find(|v| !self.is_defined(v)) {
                        return Err(FlowError::Undefined(v.to_string()));
                    }
                    let parsed = if t.is_literal() {
                        serde_json_path::JsonPath::parse(q)
                    } else {
                        serde_json_path::JsonPath::parse(&t.sample_with("0"))
                            .or_else(|_| serde_json_path::JsonPath::parse(&t.sample_with("a")))
                    };
                    parsed.map_err(|error| FlowError::CaptureQuery {
                        query: written.clone(),
                        error,
                    })?;
                    CaptureSource::Json(q.clone())
                }
                (None, Some(h), None) => CaptureSource::Header(h.clone()),
                (None, None, Some(re)) => regexp_capture(re, c)?,
                _ => return Err(FlowError::CaptureSource(c.var.clone())),
            };
            if c.regexp.is_none() && (c.group.is_some() || c.flags.is_some()) {
                return Err(FlowError::Capture {
                    var: c.var.clone(),
                    what: "group and flags go with regexp".into(),
                });
            }
            if c.selector.is_none() && (c.attr.is_some() || c.index.is_some()) {
                return Err(FlowError::Capture {
                    var: c.var.clone(),
                    what: "attr and index go with selector".into(),
                });
            }
            self.defined.insert(c.var.clone());
            captures.push(Capture {
                source,
                var: c.var.clone(),
                strict: c.strict.unwrap_or(self.strict_capture),
            });
        }
        Ok(captures)
    }

    /// Registers the other hosts a loop's items send its templated URLs to (`{{ $loopElement.url
    /// }}` rendering to `https://other/x`), as Artillery follows them: each origin gets an
    /// endpoint and a request of the step's name, which the step takes when its URL renders
    /// there.
    fn origins_from_items(
        &mut self,
        steps: &mut [Step],
        (element, items): (&str, &[serde_json::Value]),
    ) -> Result<(), FlowError> {
        let mut rng = fastrand::Rng::with_seed(0);
        for step in steps.iter_mut() {
            let r = match step {
                Step::Request(r) => r,
                Step::Loop { steps, .. } | Step::Parallel(steps) => {
                    self.origins_from_items(steps, (element, items))?;
                    continue;
                }
                _ => continue,
            };
            for item in items {
                let vars: HashMap<String, String> =
                    loadlab_script::vars::loop_item_vars(element, item)
                        .into_iter()
                        .collect();
                if r.path.variables().all(|v| !vars.contains_key(v)) {
                    continue;
                }
                let mut url = String::new();
                r.path
                    .render(|k| vars.get(k).map(String::as_str), &mut rng, &mut url);
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    continue;
                }
                let parsed = url::Url::parse(&url).map_err(|_| FlowError::NotUrl(url.clone()))?;
                let origin = parsed.origin().ascii_serialization();
                if r.origins.iter().any(|(o, _)| *o == origin) {
                    continue;
                }
                let endpoint = self.endpoint(&origin)?;
                let t = self.requests[r.request].clone();
                let path = &url[origin.len()..];
                let index = self.push_request(
                    &t.name,
                    &url,
                    endpoint,
                    &t.method,
                    if path.is_empty() { "/" } else { path },
                    &t.headers,
                    &t.body,
                );
                r.origins.push((origin, index));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_request(
        &mut self,
        name: &str,
        url: &str,
        endpoint: usize,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> usize {
        let url = if url.starts_with('/') || url.starts_with("{{") {
            format!("{}{url}", self.target.trim_end_matches('/'))
        } else {
            url.to_string()
        };
        self.requests.push(RequestTemplate {
            name: name.to_string(),
            url,
            endpoint,
            method: method.to_string(),
            path: path.to_string(),
            headers: headers.to_vec(),
            body: body.to_vec(),
            grpc_stream: None,
        });
        self.requests.len() - 1
    }

    pub(super) fn endpoint(&mut self, origin: &str) -> Result<usize, UrlError> {
        crate::target::endpoint_index(&mut self.endpoints, &format!("{origin}/"), self.lookup)
    }
}

/// A refusal of a key, with what to do.
fn refuse(key: &str, what: &str) -> Refusal {
    Refusal::Key {
        key: key.into(),
        what: what.into(),
    }
}

/// A request's `qs` as templates: strings as they are, numbers and booleans as written;
/// other values are refused.
fn query_templates(r: &RequestSpec) -> Result<Vec<(String, Template)>, FlowError> {
    r.qs.iter()
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
                _ => return Err(FlowError::QueryValue(k.clone())),
            };
            Ok((k.clone(), Template::parse(&text)?))
        })
        .collect()
}

/// One check of an `expect` item, one of [`EXPECT_CHECKS`].
fn expect_of(check: &str, v: &Spanned<serde_json::Value>) -> Result<Expect, FlowError> {
    let bad = |what: &str| FlowError::Expect {
        check: check.into(),
        what: what.into(),
    };
    match check {
        "statusCode" | "notStatusCode" => {
            if let Some(t) = v.value.as_str().filter(|t| t.contains("{{") && check == "statusCode") {
                return Ok(Expect::StatusOf(Template::parse(t)?));
            }
            let items = match &v.value {
                serde_json::Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            let codes = items
                .iter()
                .map(|c| {
                    c.as_u64()
                        .and_then(|c| u16::try_from(c).ok())
                        .filter(|c| (100..1000).contains(c))
                })
                .collect::<Option<Vec<u16>>>()
                .ok_or_else(|| bad("takes a status code from 100 to 999, a list of them, or a template"))?;
            Ok(if check == "notStatusCode" {
                Expect::NotStatus(codes)
            } else {
                Expect::Status(codes)
            })
        }
        "cdnHit" => match &v.value {
            serde_json::Value::Bool(hit) => Ok(Expect::CdnHit(*hit)),
            _ => Err(bad("takes true (a cache hit) or false (a miss)")),
        },
        "contentType" => match &v.value {
            serde_json::Value::String(ct) => Ok(Expect::ContentType(ct.clone())),
            _ => Err(bad("takes text that the Content-Type header contains, such as json")),
        },
        "hasProperty" | "notHasProperty" | "hasHeader" | "matchesRegexp" => {
            let serde_json::Value::String(text) = &v.value else {
                return Err(bad("takes text"));
            };
            Ok(match check {
                "hasProperty" => Expect::HasProperty(text.clone()),
                "notHasProperty" => Expect::NotHasProperty(text.clone()),
                "hasHeader" => Expect::HasHeader(text.clone()),
                _ => {
                    let re = js_regex(text);
                    regex::Regex::new(&re).map_err(|e| bad(&format!("{text:?} is not a regular expression: {e}")))?;
                    Expect::MatchesRegexp(re)
                }
            })
        }
        "equals" => {
            let serde_json::Value::Array(items) = &v.value else {
                return Err(bad("takes a list of values that must all be equal"));
            };
            let values = items
                .iter()
                .map(|i| Template::parse(&scalar_text(i).ok_or_else(|| bad("takes strings, numbers or booleans"))?).map_err(FlowError::from))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Expect::Equals(values))
        }
        "headerEquals" => match &v.value {
            serde_json::Value::Array(pair) if pair.len() == 2 => {
                let (Some(name), Some(value)) = (pair[0].as_str(), scalar_text(&pair[1])) else {
                    return Err(bad("takes [header name, value]"));
                };
                Ok(Expect::HeaderEquals(name.to_string(), Template::parse(&value)?))
            }
            _ => Err(bad("takes [header name, value]")),
        },
        c if EXPECT_LATER.contains(&c) => Err(bad(
            "loadlab does not make this check yet; remove it or run the script with Artillery",
        )),
        _ => Err(bad(
            "is not a check of the expect plugin (statusCode, contentType, hasProperty, notHasProperty, equals, hasHeader, headerEquals, matchesRegexp, cdnHit)",
        )),
    }
}

/// A `selector` capture, as Artillery's: a CSS selector (checked here), the attribute read
/// (required: without one, Artillery captures cheerio's attribute object, which no template
/// can use), and which element (`index`: a number from 0, `last` or `random`; the first by
/// default).
fn selector_capture(c: &CaptureSpec) -> Result<CaptureSource, FlowError> {
    let bad = |what: String| FlowError::Capture {
        var: c.var.clone(),
        what,
    };
    let css = c.selector.clone().unwrap_or_default();
    scraper::Selector::parse(&css)
        .map_err(|e| bad(format!("selector {css:?} does not parse: {e}")))?;
    let attr = c.attr.clone().ok_or_else(|| {
        bad("a selector capture needs attr: the attribute whose value it takes".into())
    })?;
    let index = match &c.index {
        None => ElementIndex::Nth(0),
        Some(serde_json::Value::String(s)) if s == "last" => ElementIndex::Last,
        Some(serde_json::Value::String(s)) if s == "random" => ElementIndex::Random,
        Some(v) => {
            let n = match v {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            };
            ElementIndex::Nth(
                n.ok_or_else(|| bad(format!("index {v} is not a number from 0, last or random")))?
                    as usize,
            )
        }
    };
    Ok(CaptureSource::Selector { css, attr, index })
}

/// A JavaScript regular expression in Rust's syntax where the two differ in a way scripts
/// use: `[^]` (any character, a line break too) is `[\s\S]`.
fn js_regex(re: &str) -> String {
    re.replace("[^]", r"[\s\S]")
}

/// A `regexp` capture: the expression with its JavaScript flags written inline, and its group.
fn regexp_capture(re: &str, c: &CaptureSpec) -> Result<CaptureSource, FlowError> {
    let bad = |what: String| FlowError::Capture {
        var: c.var.clone(),
        what,
    };
    let mut inline = String::new();
    for f in c.flags.as_deref().unwrap_or("").chars() {
        match f {
            'i' | 'm' | 's' => inline.push(f),
            // Global, sticky and unicode change nothing for a first match here.
            'g' | 'y' | 'u' => {}
            other => return Err(bad(format!("{other:?} is not a regexp flag (i, m, s)"))),
        }
    }
    let re = js_regex(re);
    let full = if inline.is_empty() {
        re.clone()
    } else {
        format!("(?{inline}){re}")
    };
    let compiled = regex::Regex::new(&full)
        .map_err(|e| bad(format!("{re:?} is not a regular expression: {e}")))?;
    let group = match &c.group {
        None => None,
        Some(serde_json::Value::Number(n)) => {
            let k = n
                .as_u64()
                .filter(|k| (*k as usize) < compiled.captures_len());
            Some(
                k.ok_or_else(|| bad(format!("the expression has no group {n}")))?
                    .to_string(),
            )
        }
        Some(serde_json::Value::String(name)) => {
            if !compiled.capture_names().flatten().any(|n| n == name) {
                return Err(bad(format!("the expression has no group named {name:?}")));
            }
            Some(name.clone())
        }
        Some(other) => return Err(bad(format!("group {other} is not a number or a name"))),
    };
    Ok(CaptureSource::Regexp { re: full, group })
}

/// A string, number or boolean as text.
fn scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Some(v.to_string()),
        _ => None,
    }
}

/// `url` with a leading `{{ target }}` (Artillery's variable holding `config.target`) written
/// out, so that the request goes to the target's origin whatever follows.
pub(super) fn with_target<'u>(url: &'u str, target: &str) -> std::borrow::Cow<'u, str> {
    let rest = url
        .strip_prefix("{{{")
        .and_then(|r| r.trim_start().strip_prefix("target"))
        .and_then(|r| r.trim_start().strip_prefix("}}}"))
        .or_else(|| {
            url.strip_prefix("{{")
                .and_then(|r| r.trim_start().strip_prefix("target"))
                .and_then(|r| r.trim_start().strip_prefix("}}"))
        });
    match rest {
        Some(rest) => format!("{target}{rest}").into(),
        None => url.into(),
    }
}

/// Splits a request URL into its origin (`http://host:port`) and its path template; relative
/// URLs take the target's origin and path prefix.
pub(super) fn split_url(target: &str, url: &str) -> Result<(String, String), FlowError> {
    // A URL that is a template from its start (`{{ url }}` from a CSV) renders to a path
    // relative to the target.
    if url.starts_with("{{") {
        let (origin, prefix) = split_url(target, target)?;
        return Ok((origin, format!("{}{url}", prefix.trim_end_matches('/'))));
    }
    let mut absolute = if url.starts_with('/') {
        format!("{}{url}", target.trim_end_matches('/'))
    } else {
        url.to_string()
    };
    // A target that is not `scheme://host` (`http:/`, `http:example.com`): Artillery joins it
    // to the path as text and its client reads the result as a browser would.
    if !absolute.contains("://") && url.starts_with('/') && !url.contains("{{") {
        if let Ok(joined) = url::Url::parse(&format!("{target}{url}")) {
            if joined.has_host() {
                absolute = joined.to_string();
            }
        }
    }
    let after_scheme = absolute
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| FlowError::NotUrl(url.into()))?;
    let path_at = absolute[after_scheme..]
        .find(['/', '?'])
        .map_or(absolute.len(), |i| after_scheme + i);
    let (origin, path) = absolute.split_at(path_at);
    if origin.contains("{{") {
        return Err(FlowError::TemplatedOrigin(url.into()));
    }
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Ok((origin.to_string(), path))
}

/// Collects the variables a JSON body's strings read; fails on a malformed template.
pub(super) fn json_variables(
    v: &serde_json::Value,
    out: &mut Vec<String>,
) -> Result<(), FlowError> {
    match v {
        serde_json::Value::String(s) => {
            let t = Template::parse(s)?;
            out.extend(t.variables().map(str::to_string));
        }
        serde_json::Value::Array(items) => {
            for i in items {
                json_variables(i, out)?;
            }
        }
        serde_json::Value::Object(m) => {
            for i in m.values() {
                json_variables(i, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_origin_and_path_template() {
        let t = "http://127.0.0.1:8080";
        assert_eq!(
            split_url(t, "/users/{{ id }}").unwrap(),
            (
                "http://127.0.0.1:8080".to_string(),
                "/users/{{ id }}".to_string()
            )
        );
        assert_eq!(
            split_url(t, "http://127.0.0.1:9/x?a={{ b }}").unwrap(),
            ("http://127.0.0.1:9".to_string(), "/x?a={{ b }}".to_string())
        );
        assert_eq!(
            split_url("http://h:1/base", "/p").unwrap().1,
            "/base/p".to_string()
        );
        assert!(matches!(
            split_url(t, "http://{{ host }}/x"),
            Err(FlowError::TemplatedOrigin(_))
        ));
        assert!(matches!(split_url(t, "x"), Err(FlowError::NotUrl(_))));
        // A URL that is a template from its start is a path the target's origin takes.
        assert_eq!(
            split_url(t, "{{ url }}").unwrap(),
            ("http://127.0.0.1:8080".to_string(), "{{ url }}".to_string())
        );
        assert_eq!(
            split_url("http://h:1/base/", "{{ u }}").unwrap().1,
            "/base{{ u }}"
        );
    }
}
