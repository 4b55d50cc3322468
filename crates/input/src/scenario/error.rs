//! What can be wrong in a scenario file: a [`ScenarioError`] names the file, the trail of
//! [`Place`]s leading into it, and the [`Problem`], one enum for each part of the file (phases,
//! flows and chains, `ensure`, `payload`). The parsers return a crate-private [`Traced`]
//! problem, which [`Within::within`] places one step further out (`flow step 2` inside
//! `scenario "x"`), and the scenario's lowering names the file.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use loadlab_run::thresholds::ThresholdError;
use loadlab_run::{PlanError, TemplateError};

use crate::target::UrlError;
use crate::tls::CaFileError;
use crate::yaml::{DurationError, YamlError};
use crate::Position;

/// A scenario file that cannot become a plan.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read the scenario file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: io::Error,
    },
    /// The file is not YAML in a scenario's shape (an unknown key, a wrong type).
    #[error(transparent)]
    Yaml(YamlError),
    /// The file describes something loadlab cannot run.
    #[error("{path}{}: {}{problem}", At(.at), Trail(.trail))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the file the problem is, when known.
        at: Option<Position>,
        /// Where in the file, outermost first; empty for the file as a whole.
        trail: Vec<Place>,
        /// What is wrong (boxed: it is the large part of an error that is rarely made).
        problem: Box<Problem>,
    },
}

impl ScenarioError {
    /// `problem` in the file at `path` as a whole.
    pub(crate) fn invalid(path: &Path, problem: impl Into<Problem>) -> Self {
        Traced::from(problem).in_file(path)
    }
}

/// A place in a scenario file, as a trail names it on the way to a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A scenario, by its name (or `scenario N`).
    Scenario(String),
    /// A step of a flow or of a loop, from 1, with where it starts in the file.
    FlowStep(usize, Option<Position>),
    /// A state of a Markov chain, by its name.
    MarkovState(String),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Scenario(name) => write!(f, "scenario {name:?}"),
            Place::FlowStep(n, _) => write!(f, "flow step {n}"),
            Place::MarkovState(name) => write!(f, "markov state {name:?}"),
        }
    }
}

/// A position as a message writes it after the file: `:line:col`, or nothing.
struct At<'a>(&'a Option<Position>);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(p) => write!(f, ":{}:{}", p.line, p.column),
            None => Ok(()),
        }
    }
}

/// The position a span of the YAML parser names, when it knows one.
pub(crate) fn position(loc: &serde_saphyr::Location) -> Option<Position> {
    (loc.line() > 0).then(|| Position {
        line: loc.line(),
        column: loc.column(),
    })
}

/// A trail as a message writes it: each place followed by `: `.
struct Trail<'a>(&'a [Place]);

impl fmt::Display for Trail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|p| write!(f, "{p}: "))
    }
}

/// What is wrong in a scenario file that parses.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// A phase of `config.phases`.
    #[error(transparent)]
    Phase(#[from] PhaseError),
    /// A flow or a Markov chain.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// `config.ensure`.
    #[error(transparent)]
    Ensure(#[from] EnsureError),
    /// `config.payload`.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// `config.target` (or `--target`), or a plain request's URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// `config.tls.cacert` (or `--cacert`).
    #[error(transparent)]
    CaFile(#[from] CaFileError),
    /// The plan the file describes does not hold together.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A variable whose value is a list or a map of lists or maps.
    #[error("variable {0:?}: values are strings, numbers or booleans")]
    VariableNotScalar(String),
    /// Every scenario has weight 0.
    #[error("no scenario with a positive weight")]
    NoWeight,
    /// Weights whose mix takes too many slots.
    #[error("scenario weights reduce to {slots} slots; keep them under {max}")]
    TooManySlots {
        /// Slots the weights reduce to.
        slots: u32,
        /// Most slots a file may have.
        max: u32,
    },
    /// A `config.http.timeout` past what a duration holds.
    #[error("config.http.timeout of {0} s is too long")]
    TimeoutTooLong(f64),
    /// A key loadlab reads but cannot run yet (or never runs), with what to do instead.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Neither `config.target` nor `--target`.
    #[error("config.target is not set: set it (or an environment's target, chosen with -e), or give --target URL")]
    NoTarget,
    /// No `scenarios`.
    #[error("the file has no scenarios; a file of config alone goes with a scenarios file: loadlab validate --config THIS_FILE SCENARIOS.yml")]
    NoScenarios,
    /// `-e NAME` that `config.environments` does not define.
    #[error("-e {name}: config.environments has no {name:?} (it has: {known})")]
    NoEnvironment {
        /// The name given.
        name: String,
        /// The environments the file defines.
        known: String,
    },
    /// `--overrides` that is not a JSON object.
    #[error("--overrides takes a JSON object laid over the script, such as '{{\"config\": {{\"target\": \"http://127.0.0.1:8080\"}}}}': {0}")]
    OverridesFlag(String),
    /// `--scenario-name` that names no scenario.
    #[error("--scenario-name {name:?}: no scenario has this name (the file has: {known})")]
    NoScenarioNamed {
        /// The name given.
        name: String,
        /// The scenarios' names.
        known: String,
    },
    /// `-v` that is not a JSON object.
    #[error("-v/--variables takes a JSON object such as '{{\"id\": [1, 2]}}': {0}")]
    VariablesFlag(String),
    /// A plugin loadlab ignores, with `--strict`.
    #[error(
        "config.plugins.{0}: loadlab does not run this plugin (--strict refuses ignored plugins)"
    )]
    StrictPlugin(String),
    /// `config.plugins.ensure` or `config.plugins.expect` settings that do not read.
    #[error("config.plugins.{plugin}: {error}")]
    PluginSettings {
        /// The plugin.
        plugin: String,
        /// Why its settings do not read.
        error: String,
    },
    /// `-c` or `--max-connections` with users phases.
    #[error(
        "-c and --max-connections do not apply to users phases: each user has its own connections"
    )]
    ConnectionsWithUsers,
}

/// A problem with the trail that leads to it, before the file's path is known.
#[derive(Debug)]
pub(crate) struct Traced {
    trail: Vec<Place>,
    at: Option<Position>,
    problem: Box<Problem>,
}

impl<E: Into<Problem>> From<E> for Traced {
    fn from(problem: E) -> Self {
        Traced {
            trail: Vec::new(),
            at: None,
            problem: Box::new(problem.into()),
        }
    }
}

impl Traced {
    /// `problem` at the place in the file a span names.
    pub(crate) fn at(problem: impl Into<Problem>, loc: &serde_saphyr::Location) -> Self {
        Traced {
            trail: Vec::new(),
            at: position(loc),
            problem: Box::new(problem.into()),
        }
    }

    /// The same, at the place a span names when it knows none closer.
    pub(crate) fn or_at(mut self, loc: &serde_saphyr::Location) -> Self {
        if self.at.is_none() {
            self.at = position(loc);
        }
        self
    }

    /// The error of the file at `path`.
    pub(crate) fn in_file(self, path: &Path) -> ScenarioError {
        ScenarioError::Invalid {
            path: path.to_path_buf(),
            at: self.at,
            trail: self.trail,
            problem: self.problem,
        }
    }
}

/// A key of Artillery's format that loadlab reads but does not run, refused with what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// A scenario engine other than HTTP.
    #[error("engine: {0}: loadlab runs HTTP, WebSocket (ws), Socket.IO (socketio) and browser (playwright) scenarios only; remove the scenario or run it with Artillery")]
    Engine(String),
    /// `config.engines` naming a custom engine.
    #[error("config.engines.{0}: loadlab runs HTTP, ws, socketio and playwright scenarios only (no custom engines); remove it or run the script with Artillery")]
    Engines(String),
    /// A step or request key the engine cannot run yet.
    #[error("{key}: {what}")]
    Key {
        /// The key as written.
        key: String,
        /// What to do instead.
        what: String,
    },
}

/// Puts a result's error at a place in the file, one step further out on its trail.
pub(crate) trait Within<T> {
    /// The error, if any, found within `place`.
    fn within(self, place: impl FnOnce() -> Place) -> Result<T, Traced>;
}

impl<T, E: Into<Traced>> Within<T> for Result<T, E> {
    fn within(self, place: impl FnOnce() -> Place) -> Result<T, Traced> {
        self.map_err(|e| {
            let mut traced = e.into();
            let place = place();
            if let (None, Place::FlowStep(_, Some(at))) = (traced.at, &place) {
                traced.at = Some(*at);
            }
            traced.trail.insert(0, place);
            traced
        })
    }
}

/// A phase of `config.phases` that cannot run, by its name (or `phase N`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PhaseError {
    /// Users phases and arrival phases in one file.
    #[error("phases mix users (closed model) with arrival rates (open model); use one kind")]
    Mixed,
    /// A pause with a duration or a load.
    #[error("phase {0:?}: a pause takes no duration, arrivalRate, arrivalCount or users")]
    PauseWithLoad(String),
    /// A phase that is neither a pause nor has a duration.
    #[error("phase {0:?} needs a duration (or is a pause)")]
    NoDuration(String),
    /// A duration (or a spike's length or spacing) that is not one.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A users phase with arrival rates.
    #[error("phase {0:?}: users phases (closed model) take no arrival rates")]
    UsersWithRates(String),
    /// More users than a plan may have.
    #[error("phase {phase:?}: at most {max} users")]
    TooManyUsers {
        /// The phase.
        phase: String,
        /// Most users a phase may have.
        max: usize,
    },
    /// A spawn rate of zero or less.
    #[error("phase {0:?}: spawnRate must be more than 0 users per second")]
    SpawnRate(String),
    /// A spawn rate without users.
    #[error("phase {0:?}: spawnRate goes with users")]
    SpawnRateWithoutUsers(String),
    /// None, or several, of the arrival shapes.
    #[error(
        "phase {0:?} needs one of arrivalRate (or rampTo alone, from 0), arrivalCount, spike \
         or step"
    )]
    Shape(String),
    /// A spike with a negative rate, or as long as its spacing.
    #[error(
        "phase {0:?}: a spike needs rates of at least 0 and a length shorter than its spacing"
    )]
    Spike(String),
    /// Spikes too close together for the phase's length.
    #[error("phase {phase:?}: more than {max} spikes; space them further apart")]
    TooManySpikes {
        /// The phase.
        phase: String,
        /// Most spikes a phase may have.
        max: u64,
    },
    /// Steps with a negative rate, or too few or too many steps.
    #[error("phase {phase:?}: steps need rates of at least 0 and 1 to {max} steps")]
    Steps {
        /// The phase.
        phase: String,
        /// Most steps a phase may have.
        max: u64,
    },
    /// A number given as a template that does not read as one.
    #[error("phase {phase:?}: {key}: {reason}")]
    Template {
        /// The phase.
        phase: String,
        /// The key as written (`arrivalRate`).
        key: String,
        /// Why it is not a number.
        reason: String,
    },
    /// A `mode` other than `uniform` and `poisson`.
    #[error(
        "phase {phase:?}: mode {mode:?} is not one of uniform, poisson (Artillery stops on it too)"
    )]
    Mode {
        /// The phase.
        phase: String,
        /// The mode as written.
        mode: String,
    },
    /// A `maxVusers` below 1 or past the most connections a plan may have.
    #[error("phase {0:?}: maxVusers is a whole number of users from 1")]
    MaxVusers(String),
    /// A negative arrival rate or count, or a count with `rampTo`.
    #[error("phase {0:?} needs arrivalRate (optionally rampTo) or arrivalCount, not negative")]
    Rates(String),
}

/// A flow step, a Markov chain or a request in either that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A scenario with both a flow and a chain, or neither.
    #[error("scenario {0:?} needs a flow or a markov model (one of them)")]
    NoBehaviour(String),
    /// A scenario that never sends a request.
    #[error("sends no request and calls no function; add a get, post, put, patch or delete step")]
    NoRequest,
    /// More steps than a user model may have.
    #[error("more than {max} steps; use loop with a count instead of repeating steps")]
    TooManySteps {
        /// Most steps a user model may have.
        max: usize,
    },
    /// A step with two requests.
    #[error("a step sends one request; split get/post/… into separate steps")]
    TwoRequests,
    /// A step that is not exactly one of a request, a think and a loop.
    #[error(
        "a step is one of get/post/put/patch/delete, think, log, function, or loop (with count)"
    )]
    StepKind,
    /// `count` without `loop`.
    #[error("count goes with loop")]
    CountWithoutLoop,
    /// A loop without steps.
    #[error("a loop needs steps")]
    EmptyLoop,
    /// A loop without count and without a request: it would never end.
    #[error("a loop without count runs until the run ends, so it needs a request in it")]
    EndlessLoop,
    /// A think time that is not a duration.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A think time past a year.
    #[error("think times are at most a year")]
    ThinkTooLong,
    /// A uniform think time whose low end is above its high end.
    #[error("think: uniform needs [low, high] with low ≤ high")]
    UniformOrder,
    /// A think time that is none of the distributions, or several.
    #[error(
        "think takes seconds, or one of constant, uniform [low, high], exponential (its mean)"
    )]
    ThinkKind,
    /// A state named `end`, which ends sessions.
    #[error("markov: `end` ends a session and cannot be a state")]
    EndState,
    /// A transition (or the start) to a state that is not defined.
    #[error("markov: no state named {0:?}")]
    NoState(String),
    /// `start: end`.
    #[error("markov: start must be a state, not end")]
    StartAtEnd,
    /// A state with both a get and a post.
    #[error("a state loads one page: get or post")]
    TwoPages,
    /// A negative or non-finite transition weight.
    #[error("transition weights must be 0 or more")]
    NegativeWeight,
    /// Transitions whose weights are all 0.
    #[error("every transition weight is 0")]
    ZeroWeights,
    /// States that load nothing and lead back to themselves.
    #[error(
        "markov state {0:?} can come back to itself through states that load no page and do not think; a walk would never end"
    )]
    IdleCycle(String),
    /// A request's URL that is neither a path nor an `http[s]://` URL.
    #[error(
        "url {0:?} is neither a path starting with / nor an http:// or https:// URL; write /{0}"
    )]
    NotUrl(String),
    /// A template in a URL's scheme or host.
    #[error("{0:?}: templates may appear in the path, not in the scheme or host")]
    TemplatedOrigin(String),
    /// A request's origin that cannot be loaded.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A header name that is empty or holds spaces or control characters.
    #[error("header name {0:?} is not valid")]
    HeaderName(String),
    /// A header value with a line break.
    #[error("header {0:?} must not contain line breaks")]
    HeaderLineBreak(String),
    /// Two of `json`, `body` and `form`.
    #[error("give one of json, body or form")]
    JsonAndBody,
    /// A `match` item that is not `{json: QUERY, value: V}` (with `strict`).
    #[error(
        "match {0}: loadlab reads {{ json: QUERY, value: VALUE, strict }} (or a list of them); \
         for headers or regular expressions use expect"
    )]
    Match(String),
    /// A request's `cookie` that is not a map of cookie names to text.
    #[error("cookie {0}: write a map of cookie names to values, {{ session: \"{{{{ id }}}}\" }}")]
    Cookie(String),
    /// A `formData` field that is none of text, `{fromFile}` or `{value}` (with `contentType`).
    #[error(
        "formData {0:?}: a field is text, {{ fromFile: PATH }} or {{ value: TEXT }}, with an \
         optional contentType"
    )]
    FormData(String),
    /// A loop `count` below -1.
    #[error("count {0}: a number of passes from 0 (-1 loops until the run ends), or text such as \"{{{{ n }}}}\" or \"1-5\"")]
    LoopCount(String),
    /// A `jitter` that is neither a percent nor a number of milliseconds.
    #[error("jitter {0}: a percent of the think time (\"10%\") or milliseconds (200)")]
    Jitter(String),
    /// A `form` field whose value is a list or a map, or whose name is a template.
    #[error(
        "form {0:?}: a field's name is fixed text and its value a string, number or boolean \
         (a template in a value is rendered for each request)"
    )]
    FormValue(String),
    /// A JSON body that cannot be written.
    #[error("{0}")]
    Json(serde_json::Error),
    /// A `{{ }}` template that does not parse.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A `qs` value that is a list or a map.
    #[error("qs {0:?}: a value must be a string, number or boolean")]
    QueryValue(String),
    /// A variable used before anything defines it.
    #[error(
        "{{{{ {0} }}}} is not defined before this request: define it in config.variables, a payload's fields, or an earlier capture"
    )]
    Undefined(String),
    /// A capture's JSONPath query that does not parse.
    #[error("capture json {query:?} is not a JSONPath query: {error}")]
    CaptureQuery {
        /// The query as written.
        query: String,
        /// The JSONPath parser's reason.
        error: serde_json_path::ParseError,
    },
    /// A capture with more or fewer than one of `json`, `header`, `regexp` and `selector`.
    #[error(
        "capture {0:?} needs json (a JSONPath), header, regexp or selector (with attr), one of \
         them"
    )]
    CaptureSource(String),
    /// A capture that cannot run as written (a regexp or a selector that does not parse, an
    /// option of another kind of capture).
    #[error("capture {var:?}: {what}")]
    Capture {
        /// The variable.
        var: String,
        /// What is wrong.
        what: String,
    },
    /// An `expect` check loadlab cannot make, by its key.
    #[error("expect {check}: {what}")]
    Expect {
        /// The check's key as written.
        check: String,
        /// What is wrong and what to do.
        what: String,
    },
    /// A template reading an environment variable that is not set.
    #[error("{0}")]
    Env(String),
    /// A `grpc:` step that cannot call its method (its types, its request, its expectation).
    #[error("grpc: {0}")]
    Grpc(String),
}

/// A check in `config.ensure` that loadlab cannot make.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnsureError {
    /// A `maxErrorRate` outside 0 to 100.
    #[error("ensure.maxErrorRate is a percentage from 0 to 100, got {0}")]
    MaxErrorRate(f64),
    /// An `ensure.slo` that is not a list of thresholds.
    #[error(transparent)]
    Slo(#[from] ThresholdError),
    /// A negative or non-finite limit.
    #[error("ensure: {what} needs a limit of 0 or more, got {limit}")]
    Limit {
        /// The metric's key as written (`ensure` for the top-level forms).
        what: String,
        /// The limit given.
        limit: f64,
    },
    /// A latency statistic loadlab does not know.
    #[error(
        "ensure: {0:?} is not a latency statistic (min, max, mean, median, p50, p75, \
         p90, p95, p99, p999)"
    )]
    LatencyStat(String),
    /// A threshold or clause without a metric's name.
    #[error("ensure: a threshold names no metric")]
    NoMetric,
    /// A condition with `or` or `not`.
    #[error(
        "ensure.conditions: {0:?} uses 'or' or 'not'; loadlab checks clauses \
         joined by 'and' (write each alternative as its own run's threshold)"
    )]
    OrNot(String),
    /// A clause without a comparison.
    #[error("ensure.conditions: {0:?} has no <, <=, >, >=, == or !=")]
    NoComparison(String),
    /// A clause whose limit is not a number of 0 or more.
    #[error("ensure.conditions: {0:?} needs a number after it")]
    NoNumber(String),
}

/// A `config.payload` entry that cannot be read into rows.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// A delimiter longer than one character.
    #[error("payload delimiter {0:?} must be one character")]
    Delimiter(String),
    /// An order other than `random` and `sequence`.
    #[error("payload order {0:?}: use random or sequence")]
    Order(String),
    /// A payload written without `path` (its file given at run time with Artillery's -p),
    /// run without `--payload`; its fields.
    #[error("config.payload (fields {0}) has no path: give its CSV file with --payload FILE, as Artillery's -p")]
    NoPath(String),
    /// A path whose template reads an environment variable that is not set.
    #[error("config.payload path: {0}")]
    Template(String),
    /// No `fields`, by the path as written.
    #[error("payload {0}: fields names the variables of its columns")]
    NoFields(String),
    /// The CSV file cannot be opened.
    #[error("cannot read the payload file {file}: {error}")]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// The CSV reader's failure.
        error: csv::Error,
    },
    /// A row the CSV reader refuses.
    #[error("payload {file}: {error}")]
    Row {
        /// The file.
        file: PathBuf,
        /// The CSV reader's failure.
        error: csv::Error,
    },
    /// A row with fewer columns than `fields` names.
    #[error("payload {file} row {row}: {columns} columns, fields names {fields}")]
    ShortRow {
        /// The file.
        file: PathBuf,
        /// The row, from 1.
        row: usize,
        /// Its columns.
        columns: usize,
        /// The fields named.
        fields: usize,
    },
    /// `loadAll` without `name`, or `name` without `loadAll`.
    #[error("payload {0}: loadAll: true and name: LIST go together (the rows become the list LIST for loop over)")]
    LoadAllName(String),
    /// More rows than a payload may have.
    #[error("payload {file} has more than {max} rows")]
    TooManyRows {
        /// The file.
        file: PathBuf,
        /// Most rows a payload may have.
        max: usize,
    },
    /// A file without rows.
    #[error("payload {file} has no rows")]
    NoRows {
        /// The file.
        file: PathBuf,
    },
}
