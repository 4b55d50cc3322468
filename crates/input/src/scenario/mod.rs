//! Scenario files in Artillery's format, parsed and lowered into a plan's parts (the
//! endpoints, the requests, the phases and the user model).
//!
//! `config` (target, phases, http.timeout, tls, variables, payload) and weighted `scenarios` whose
//! `flow` is requests, `think` and `loop` steps — or, beyond Artillery, a `markov` chain of
//! pages. Phases are arrival phases (the open model) or `users` phases (the closed model with
//! virtual users). A key outside the supported set is an error naming it with
//! `file:line:col`, never silently ignored (see docs/scenarios.md).
//!
//! A file whose scenarios are each a single plain request runs as plain arrivals over kept-alive
//! connections; anything more runs as virtual users, each with connections of its own.
//!
//! What cannot run is a [`ScenarioError`]: the file, where in it (a trail of [`Place`]s), and
//! the [`Problem`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod ensure;
mod error;
mod flows;
mod payload;
mod phases;
mod sockets;
mod unknown;
mod websocket;

use loadlab_run::UserModel;
use serde::Deserialize;
use serde_saphyr::Spanned;

use self::ensure::EnsureSpec;
pub use self::error::Refusal;
pub use self::error::{
    EnsureError, FlowError, PayloadError, PhaseError, Place, Problem, ScenarioError,
};
use self::error::{Traced, Within};
use self::flows::{MarkovSpec, RequestSpec, StepSpec};
use self::payload::{read_payload, PayloadSpec};
use self::phases::PhaseSpec;
pub use self::phases::Phases;
use crate::flags::ScriptFlags;
use crate::target::Lookup;
use crate::yaml::OneOrMany;

/// A whole scenario file (or, with `--config`, a file of scenarios or a file of config).
#[derive(Debug, Deserialize)]
struct ScenarioFile {
    /// Artillery's old script version marker; it changes nothing.
    #[serde(default)]
    #[allow(dead_code)]
    version: Option<serde_json::Value>,
    #[serde(default)]
    config: Option<Config>,
    #[serde(default)]
    scenarios: Option<Vec<ScenarioSpec>>,
    /// A flow one user runs once before the load; its captures are every user's variables.
    #[serde(default)]
    before: Option<OnceSpec>,
    /// A flow one user runs once after the load.
    #[serde(default)]
    after: Option<OnceSpec>,
}

/// A top-level `before` or `after` section: a flow run once.
#[derive(Debug, Deserialize)]
struct OnceSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    flow: Vec<Spanned<StepSpec>>,
    /// `playwright` for a browser flow (with `flowFunction`); HTTP otherwise.
    #[serde(default)]
    engine: Option<Spanned<String>>,
    #[serde(default, rename = "flowFunction", alias = "testFunction")]
    flow_function: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
struct Config {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    phases: Option<Vec<Spanned<PhaseSpec>>>,
    #[serde(default)]
    http: Option<HttpConfig>,
    /// Artillery's older request timeout, seconds: its HTTP engine reads it before
    /// `http.timeout`.
    #[serde(default)]
    timeout: Option<phases::Num>,
    /// Values for `{{ name }}`; a list gives each user one of them at random.
    #[serde(default)]
    variables: Option<BTreeMap<String, serde_json::Value>>,
    /// CSV files whose rows are handed to users.
    #[serde(default)]
    payload: Option<OneOrMany<PayloadSpec>>,
    /// How `https://` targets are verified.
    #[serde(default)]
    tls: Option<TlsConfig>,
    /// Checks that fail the run (thresholds, conditions, maxErrorRate).
    #[serde(default)]
    ensure: Option<EnsureSpec>,
    /// Artillery's plugins by name, with their settings.
    #[serde(default, deserialize_with = "plugin_map")]
    plugins: Option<BTreeMap<String, serde_json::Value>>,
    /// The apdex plugin's settings (`threshold`, ms).
    #[serde(default)]
    apdex: Option<ApdexSpec>,
    /// Config overlays chosen with `-e NAME`.
    #[serde(default)]
    environments: Option<BTreeMap<String, Spanned<Config>>>,
    /// What every request gets unless it says otherwise.
    #[serde(default)]
    defaults: Option<DefaultsSpec>,
    /// A Node.js module whose functions the hooks and `function` steps call.
    #[serde(default)]
    processor: Option<Spanned<String>>,
    /// Settings of engines other than HTTP (refused).
    #[serde(default)]
    engines: Option<Spanned<serde_json::Value>>,
    /// The engine of the scenarios that name none (HTTP when this is not given either).
    #[serde(default)]
    engine: Option<Spanned<String>>,
    /// How every phase's arrivals are spaced unless the phase says (`uniform`, `poisson`).
    #[serde(default)]
    mode: Option<String>,
    /// The ws engine's settings: headers and subprotocols of every user's WebSocket.
    #[serde(default)]
    ws: Option<sockets::WsSettings>,
    /// The socketio engine's settings: Engine.IO's path, query and headers.
    #[serde(default)]
    socketio: Option<sockets::SioSettings>,
    /// Where the `grpc:` steps' types come from (loadlab's extension).
    #[serde(default)]
    grpc: Option<flows::GrpcConfig>,
}

/// `config.plugins`: a map of plugin names to settings. A list of names is read too, each item
/// named so that no plugin matches it: Artillery reads a list by its indices (`0`, `1`…) and
/// loads none of its plugins.
fn plugin_map<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, serde_json::Value>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Map(BTreeMap<String, serde_json::Value>),
        List(Vec<serde_json::Value>),
    }
    Ok(match Option::<Given>::deserialize(d)? {
        None => None,
        Some(Given::Map(m)) => Some(m),
        Some(Given::List(items)) => Some(
            items
                .iter()
                .map(|item| {
                    let name = item
                        .as_str()
                        .map_or_else(|| item.to_string(), str::to_string);
                    let key =
                        format!("{name} (an item of a list, for which Artillery loads no plugin)");
                    (key, serde_json::Value::Null)
                })
                .collect(),
        ),
    })
}

/// `config.apdex`: the satisfied latency, ms.
#[derive(Debug, Clone, Deserialize)]
struct ApdexSpec {
    threshold: f64,
}

/// `config.defaults`: headers every request sends unless it sets them itself.
#[derive(Debug, Default, Clone, Deserialize)]
struct DefaultsSpec {
    #[serde(default, deserialize_with = "crate::yaml::null_as_default")]
    headers: BTreeMap<String, String>,
    /// Cookies set before every request (the request's own `cookie` over them).
    #[serde(default)]
    cookie: Option<Spanned<serde_json::Value>>,
    /// `think: {jitter}`: the spread of every think step without its own.
    #[serde(default)]
    think: Option<ThinkDefaults>,
    /// `false`: a capture that finds nothing leaves its variable unset instead of failing the
    /// user, unless the capture says `strict` itself.
    #[serde(default, rename = "strictCapture")]
    strict_capture: Option<bool>,
}

/// `config.defaults.think`.
#[derive(Debug, Default, Clone, Deserialize)]
struct ThinkDefaults {
    #[serde(default)]
    jitter: Option<serde_json::Value>,
}

/// Puts `over`'s map entries over `base`'s, key by key.
fn merge_maps<V>(base: &mut Option<BTreeMap<String, V>>, over: Option<BTreeMap<String, V>>) {
    if let Some(over) = over {
        base.get_or_insert_with(BTreeMap::new).extend(over);
    }
}

impl Config {
    /// The keys whose errors carry a position, that this config gives.
    fn located_keys(&self) -> Vec<&'static str> {
        let given = [
            ("phases", self.phases.is_some()),
            ("http", self.http.as_ref().is_some_and(|h| h.pool.is_some())),
            ("processor", self.processor.is_some()),
            ("engines", self.engines.is_some()),
            ("environments", self.environments.is_some()),
        ];
        given
            .into_iter()
            .filter(|(_, g)| *g)
            .map(|(k, _)| k)
            .collect()
    }

    /// `over` laid over this config as Artillery merges an environment or a `--config` file:
    /// maps (variables, plugins, default headers, http settings) key by key, the rest whole.
    fn merge(&mut self, over: Config) {
        macro_rules! replace {
            ($($f:ident),*) => {$( if over.$f.is_some() { self.$f = over.$f; } )*};
        }
        replace!(
            target, payload, tls, ensure, apdex, processor, engines, engine, mode, ws, socketio,
            grpc
        );
        // Artillery merges lists by position: a phase over the phase at its index, so an
        // environment of one phase over a config of three changes the first and keeps the rest.
        match (&mut self.phases, over.phases) {
            (Some(base), Some(over)) => {
                let mut over = over.into_iter();
                for (b, o) in base.iter_mut().zip(over.by_ref()) {
                    b.value.merge(o.value);
                }
                base.extend(over);
            }
            (base, over @ Some(_)) => *base = over,
            (_, None) => {}
        }
        merge_maps(&mut self.variables, over.variables);
        merge_maps(&mut self.plugins, over.plugins);
        merge_maps(&mut self.environments, over.environments);
        if let Some(h) = over.http {
            let base = self.http.get_or_insert_with(HttpConfig::default);
            base.timeout = h.timeout.or(base.timeout.take());
            base.http2 |= h.http2;
            base.streams = h.streams.or(base.streams);
            base.pool = h.pool.or(base.pool.take());
            base.max_sockets = h.max_sockets.or(base.max_sockets.take());
            if let Some(d) = h.defaults {
                base.defaults
                    .get_or_insert_with(DefaultsSpec::default)
                    .headers
                    .extend(d.headers);
            }
        }
        if let Some(d) = over.defaults {
            self.defaults
                .get_or_insert_with(DefaultsSpec::default)
                .headers
                .extend(d.headers);
        }
    }
}

/// `config.tls`: loadlab's `cacert` and `insecure`, and Artillery's `rejectUnauthorized`.
#[derive(Debug, Default, Deserialize)]
struct TlsConfig {
    /// A private CA's PEM file, relative to the scenario file.
    #[serde(default)]
    cacert: Option<PathBuf>,
    /// Skip certificate verification.
    #[serde(default)]
    insecure: bool,
    /// Artillery's spelling: `false` skips verification.
    #[serde(default, rename = "rejectUnauthorized")]
    reject_unauthorized: Option<bool>,
}

/// A scenario's TLS settings, its CA path resolved against the file's directory.
#[derive(Debug, Default)]
pub struct ScenarioTls {
    /// The private CA's PEM file.
    pub cacert: Option<PathBuf>,
    /// Skip certificate verification.
    pub insecure: bool,
}

#[derive(Debug, Default, Deserialize)]
struct HttpConfig {
    /// Seconds, as in Artillery: a number, or a template of the config's (`-v`, the
    /// environment) rendered to one.
    #[serde(default)]
    timeout: Option<phases::Num>,
    /// Speak HTTP/2 (ALPN `h2` on `https://`, prior knowledge on `http://`).
    #[serde(default)]
    http2: bool,
    /// HTTP/2: most requests in flight per connection.
    #[serde(default)]
    streams: Option<usize>,
    /// Artillery: one pool of this many connections shared by every user, instead of each
    /// user's own.
    #[serde(default)]
    pool: Option<Spanned<serde_json::Value>>,
    /// Artillery: most connections per user and host (a loadlab user sends one request at a
    /// time, so it opens one per host whatever this says).
    #[serde(default, rename = "maxSockets")]
    max_sockets: Option<serde_json::Value>,
    /// Artillery's newer place for `config.defaults`: its headers, when given, replace those
    /// of `config.defaults` whole (as Artillery's HTTP engine prefers them).
    #[serde(default)]
    defaults: Option<DefaultsSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScenarioSpec {
    #[serde(default)]
    name: Option<String>,
    /// `http` (the default), `ws`, or another engine (refused before the flows are read, by
    /// `other_engine`).
    #[serde(default)]
    engine: Option<Spanned<String>>,
    /// Processor functions called before and after the scenario's flow.
    #[serde(default)]
    before_scenario: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    after_scenario: Option<Spanned<serde_json::Value>>,
    /// Processor functions called around each request of the scenario.
    #[serde(default)]
    before_request: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    after_response: Option<Spanned<serde_json::Value>>,
    /// Processor functions called when one of the scenario's requests fails.
    #[serde(default)]
    on_error: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    weight: Option<u32>,
    #[serde(default)]
    flow: Option<Vec<Spanned<StepSpec>>>,
    /// `engine: playwright`: the processor function that drives the user's page (Artillery
    /// reads `testFunction` first, then `flowFunction`).
    #[serde(default)]
    flow_function: Option<Spanned<String>>,
    #[serde(default)]
    test_function: Option<Spanned<String>>,
    /// loadlab's user model: a Markov chain of pages.
    #[serde(default)]
    markov: Option<MarkovSpec>,
}

/// Most request templates the weights may expand to.
const MAX_WEIGHT_SUM: u32 = 1000;

/// A script as it runs: its config with `--config`, `-e` and `-v` laid over it, its scenarios,
/// and the folder its side files (payloads, CA) are relative to.
#[derive(Debug)]
struct Script {
    config: Config,
    scenarios: Vec<ScenarioSpec>,
    /// The folder of the file the config came from (Artillery's `$dirname`).
    dir: PathBuf,
    /// The file the side files' errors name.
    config_path: PathBuf,
    /// The scenario file's folder (`formData` files are relative to it).
    scenario_dir: PathBuf,
    /// The file each located config key came from, when not the scenario file (`--config`).
    origin: BTreeMap<&'static str, PathBuf>,
    before: Option<OnceSpec>,
    after: Option<OnceSpec>,
    /// A warning for each key of the files that loadlab does not read.
    unknown: Vec<String>,
}

impl Script {
    /// The file a located config key came from: the `--config` file, or `path`.
    fn file_of<'a>(&'a self, key: &str, path: &'a Path) -> &'a Path {
        self.origin.get(key).map_or(path, PathBuf::as_path)
    }
}

/// The keys of the script's own maps, for the reader of unknown keys.
fn script_maps() -> unknown::ScriptMaps {
    use unknown::fields_of;
    unknown::ScriptMaps {
        top: fields_of::<ScenarioFile>(),
        config: fields_of::<Config>(),
        http: fields_of::<HttpConfig>(),
        tls: fields_of::<TlsConfig>(),
        defaults: fields_of::<DefaultsSpec>(),
        apdex: fields_of::<ApdexSpec>(),
        scenario: fields_of::<ScenarioSpec>(),
        once: fields_of::<OnceSpec>(),
    }
}

/// One file's text as YAML of a script's shape, with the keys it gives that loadlab does not
/// read: each a warning, or with `--strict` the file's refusal.
fn read_yaml(
    text: &str,
    path: &Path,
    strict: bool,
    warnings: &mut Vec<String>,
) -> Result<ScenarioFile, ScenarioError> {
    let (file, unknown) = unknown::read_noting_unknown::<ScenarioFile>(text, path, &script_maps())?;
    if let Some(first) = unknown.iter().find(|u| u.refused || strict) {
        return Err(first.refusal(path));
    }
    warnings.extend(unknown.iter().map(|u| u.warning(path)));
    Ok(file)
}

/// Scenarios of another engine than HTTP, found before the flows are read (their steps are
/// another engine's, so reading them as HTTP steps would refuse the wrong key).
#[derive(Deserialize)]
struct EngineProbe {
    #[serde(default)]
    config: Option<EngineOnly>,
    #[serde(default)]
    scenarios: Option<Vec<EngineOnly>>,
}

#[derive(Deserialize)]
struct EngineOnly {
    #[serde(default)]
    engine: Option<Spanned<String>>,
}

/// The first scenario whose engine is not HTTP, as a refusal at its position.
fn other_engine(text: &str, path: &Path) -> Result<(), ScenarioError> {
    let Ok(probe) = serde_saphyr::from_str::<EngineProbe>(text) else {
        return Ok(());
    };
    let config = probe.config.iter();
    for s in config.chain(probe.scenarios.iter().flatten()) {
        if let Some(e) = &s.engine {
            if !matches!(
                e.value.as_str(),
                "http" | "ws" | "socketio" | "socketio-v3" | "playwright"
            ) {
                return Err(
                    Traced::at(Refusal::Engine(e.value.clone()), &e.referenced).in_file(path)
                );
            }
        }
    }
    Ok(())
}

/// Reads a script, with the command line's `--config`, `-e` and `-v`, into the config and
/// scenarios that run.
fn script(text: &str, path: &Path, flags: &ScriptFlags) -> Result<Script, ScenarioError> {
    other_engine(text, path)?;
    let mut unknown = Vec::new();
    let mut file = read_yaml(text, path, flags.strict, &mut unknown)?;
    let mut config = file.config.take().unwrap_or_default();
    let mut config_path = path.to_path_buf();
    let mut origin = BTreeMap::new();
    if let Some(cfg) = &flags.config {
        let cfg_text = std::fs::read_to_string(cfg).map_err(|error| ScenarioError::Read {
            path: cfg.clone(),
            error,
        })?;
        let over = read_yaml(&cfg_text, cfg, flags.strict, &mut unknown)?
            .config
            .unwrap_or_default();
        for key in over.located_keys() {
            origin.insert(key, cfg.clone());
        }
        // Artillery merges the --config file after the script: its keys win.
        config.merge(over);
        config_path = cfg.clone();
    }
    if let Some(name) = &flags.environment {
        let mut envs = config.environments.take().unwrap_or_default();
        let chosen = envs.remove(name);
        let Some(env) = chosen else {
            let known: Vec<&str> = envs.keys().map(String::as_str).collect();
            let problem = Problem::NoEnvironment {
                name: name.clone(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            };
            // Artillery warns and runs the script's own config.
            if flags.strict {
                return Err(ScenarioError::invalid(path, problem));
            }
            unknown.push(format!(
                "{problem}; the script's own config runs, as in Artillery"
            ));
            return finish(file, config, (path, config_path, origin, unknown), flags);
        };
        let file = origin.get("environments").cloned();
        for key in env.value.located_keys() {
            match &file {
                Some(f) => origin.insert(key, f.clone()),
                None => origin.remove(key),
            };
        }
        config.merge(env.value);
    }
    finish(file, config, (path, config_path, origin, unknown), flags)
}

/// The rest of [`script`], once the environment is chosen: Artillery's `--overrides`, `-v`,
/// `-p`, `--scenario-name` and `--solo`, in the order it applies them.
fn finish(
    mut file: ScenarioFile,
    mut config: Config,
    (path, config_path, origin, mut unknown): (
        &Path,
        PathBuf,
        BTreeMap<&'static str, PathBuf>,
        Vec<String>,
    ),
    flags: &ScriptFlags,
) -> Result<Script, ScenarioError> {
    if let Some(json) = &flags.overrides {
        let over = overrides(json, flags.strict, &mut unknown)
            .map_err(|e| ScenarioError::invalid(path, Problem::OverridesFlag(e)))?;
        // Its lists replace the script's whole (Artillery's merge customizer), phases too.
        if let Some(mut c) = over.config {
            if c.phases.is_some() {
                config.phases = None;
            }
            c.environments = None;
            config.merge(c);
        }
        if over.scenarios.is_some() {
            file.scenarios = over.scenarios;
        }
    }
    if let Some(json) = &flags.variables {
        let vars: BTreeMap<String, serde_json::Value> = serde_json::from_str(json)
            .map_err(|e| ScenarioError::invalid(path, Problem::VariablesFlag(e.to_string())))?;
        merge_maps(&mut config.variables, Some(vars));
    }
    // `config.http.defaults`' headers and cookie each win whole over `config.defaults`', as
    // in Artillery's HTTP engine.
    if let Some(d) = config.http.as_mut().and_then(|h| h.defaults.take()) {
        let base = config.defaults.get_or_insert_with(DefaultsSpec::default);
        if !d.headers.is_empty() {
            base.headers = d.headers;
        }
        if d.cookie.is_some() {
            base.cookie = d.cookie;
        }
        if d.think.is_some() {
            base.think = d.think;
        }
        if d.strict_capture.is_some() {
            base.strict_capture = d.strict_capture;
        }
    }
    if let Some(file) = &flags.payload {
        // Artillery's -p names the file of a single payload (relative to where it runs).
        let file = std::env::current_dir().unwrap_or_default().join(file);
        match config.payload.as_mut() {
            Some(OneOrMany::One(spec)) => spec.path = Some(file.display().to_string()),
            Some(OneOrMany::Many(_)) => unknown.push(
                "--payload: config.payload is a list, and Artillery's -p sets the file of a \
                 single payload only; the list's own paths are read"
                    .into(),
            ),
            None => unknown.push("--payload: the script has no config.payload; ignored".into()),
        }
    }
    if flags.solo {
        // One user, once: what no phases give.
        config.phases = None;
    }
    let mut scenarios = match file.scenarios {
        Some(s) if !s.is_empty() => s,
        _ => return Err(ScenarioError::invalid(path, Problem::NoScenarios)),
    };
    if let Some(name) = &flags.scenario_name {
        let named = |s: &ScenarioSpec| s.name.as_deref() == Some(name.as_str());
        if !scenarios.iter().any(named) {
            let known: Vec<&str> = scenarios.iter().filter_map(|s| s.name.as_deref()).collect();
            return Err(ScenarioError::invalid(
                path,
                Problem::NoScenarioNamed {
                    name: name.clone(),
                    known: if known.is_empty() {
                        "no named scenario".into()
                    } else {
                        known.join(", ")
                    },
                },
            ));
        }
        scenarios.retain(named);
    }
    // As Artillery's runner: a phase's mode, else the config's.
    if let (Some(mode), Some(phases)) = (&config.mode, config.phases.as_mut()) {
        for p in phases {
            p.value.default_mode(mode);
        }
    }
    // As Artillery's runner: a scenario's engine, else the config's, else HTTP.
    if let Some(engine) = &config.engine {
        for s in scenarios.iter_mut().filter(|s| s.engine.is_none()) {
            s.engine = Some(engine.clone());
        }
    }
    let dir = config_path.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok(Script {
        config,
        scenarios,
        dir,
        config_path,
        scenario_dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        origin,
        before: file.before,
        after: file.after,
        unknown,
    })
}

/// `--overrides`: a JSON object read as a script (JSON is YAML), its unknown keys warned as
/// the script's are; the error in words.
fn overrides(json: &str, strict: bool, unknown: &mut Vec<String>) -> Result<ScenarioFile, String> {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err("not an object".into()),
        Err(e) => return Err(e.to_string()),
    }
    read_yaml(json, Path::new("--overrides"), strict, unknown).map_err(|e| e.to_string())
}

/// Parses a scenario's text and its phases; no I/O but `--config`'s file, so it can be fed
/// anything.
fn parse(text: &str, path: &Path, flags: &ScriptFlags) -> Result<(Script, Phases), ScenarioError> {
    let script = script(text, path, flags)?;
    // No phases: Artillery runs one user (one arrival in a phase of one second).
    let phases = match &script.config.phases {
        Some(specs) => {
            // Each phase alone first, so its error is placed at it.
            let file = script.file_of("phases", path);
            for (i, p) in specs.iter().enumerate() {
                phases::check(i, &p.value)
                    .map_err(|e| Traced::at(e, &p.referenced).in_file(file))?;
            }
            phases::lower(specs.iter().map(|p| &p.value))
        }
        None => phases::lower(&[PhaseSpec::one_user()]),
    }
    .map_err(|e| ScenarioError::invalid(path, e))?;
    Ok((script, phases))
}

/// The files a scenario's text reads besides itself (payload CSV files, a processor and a CA
/// file), as it names them: relative to the scenario file, or absolute.
pub fn side_files(text: &str, path: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    let (script, _) = parse(text, path, &ScriptFlags::default())?;
    let payloads = script.config.payload.iter().flat_map(|p| p.as_slice());
    let mut files: Vec<PathBuf> = payloads
        .filter_map(|p| p.path.as_ref().map(PathBuf::from))
        .collect();
    files.extend(script.config.processor.map(|p| PathBuf::from(p.value)));
    files.extend(script.config.tls.and_then(|t| t.cacert));
    Ok(files)
}

/// Plugins loadlab understands: their checks run (ensure, expect), their template functions
/// render (fake-data), or their results are what loadlab reports anyway (metrics-by-endpoint,
/// apdex).
const KNOWN_PLUGINS: [&str; 5] = [
    "ensure",
    "expect",
    "metrics-by-endpoint",
    "apdex",
    "fake-data",
];

/// The keys of `config` loadlab reads but does not act on, one warning each (refused when
/// `strict`).
fn ignored(config: &Config, path: &Path, strict: bool) -> Result<Vec<String>, ScenarioError> {
    let mut warnings = Vec::new();
    for name in config.plugins.iter().flat_map(|p| p.keys()) {
        if !KNOWN_PLUGINS.contains(&name.as_str()) {
            if strict {
                return Err(ScenarioError::invalid(
                    path,
                    Problem::StrictPlugin(name.clone()),
                ));
            }
            warnings.push(format!(
                "config.plugins.{name}: loadlab does not run this plugin; it is ignored"
            ));
        }
    }
    let fake_data = config.plugins.as_ref().and_then(|p| p.get("fake-data"));
    if let Some(options) = fake_data
        .and_then(|v| v.as_object())
        .filter(|o| !o.is_empty())
    {
        let names: Vec<&str> = options.keys().map(String::as_str).collect();
        warnings.push(format!(
            "config.plugins.fake-data: options of {} are not applied; those functions render \
             values of their default shape",
            names.join(", ")
        ));
    }
    Ok(warnings)
}

/// `config.http.pool` as a number of connections (a positive whole number).
fn pool_size(config: &Config) -> Result<Option<usize>, Traced> {
    let Some(pool) = config.http.as_ref().and_then(|h| h.pool.as_ref()) else {
        return Ok(None);
    };
    match pool.value.as_u64().filter(|n| (1..=1_000_000).contains(n)) {
        Some(n) => Ok(Some(n as usize)),
        None => Err(Traced::at(
            Refusal::Key {
                key: "config.http.pool".into(),
                what: format!(
                    "is {}: give the number of connections every user shares, e.g. pool: 10",
                    pool.value
                ),
            },
            &pool.referenced,
        )),
    }
}

/// The expect plugin's settings that change what runs (`config.plugins.expect`); its output
/// options (`formatter`, `outputFormat`, `useOnlyRequestNames`) only shape Artillery's console
/// lines, which loadlab replaces by its counts.
struct ExpectPlugin {
    /// `reportFailuresAsErrors`: a failed check ends the user as failed.
    failures_as_errors: bool,
    /// `expectDefault200`: a request without checks expects status 200.
    default_200: bool,
}

impl ExpectPlugin {
    /// The settings, when the script names the plugin. Read as the plugin reads them:
    /// `reportFailuresAsErrors` by JavaScript's truthiness, `expectDefault200` as `true` or
    /// `"true"`.
    fn of(config: &Config) -> Option<ExpectPlugin> {
        let settings = config.plugins.as_ref()?.get("expect")?;
        let truthy = |v: Option<&serde_json::Value>| match v {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(serde_json::Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
            Some(serde_json::Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        let default_200 = settings.get("expectDefault200");
        Some(ExpectPlugin {
            failures_as_errors: truthy(settings.get("reportFailuresAsErrors")),
            default_200: default_200 == Some(&serde_json::Value::Bool(true))
                || default_200.and_then(|v| v.as_str()) == Some("true"),
        })
    }
}

/// `config.ensure`, or when it is not given, the ensure plugin's settings
/// (`config.plugins.ensure`), which Artillery also reads.
fn ensure_spec(config: &Config) -> Result<Option<EnsureSpec>, Problem> {
    let from_plugin = config.plugins.as_ref().and_then(|p| p.get("ensure"));
    match (&config.ensure, from_plugin) {
        (Some(_), _) | (None, None) => Ok(None),
        (None, Some(v)) => {
            serde_json::from_value(v.clone())
                .map(Some)
                .map_err(|e| Problem::PluginSettings {
                    plugin: "ensure".into(),
                    error: e.to_string(),
                })
        }
    }
}

/// A scenario file lowered into the parts of a plan; the lowering (`lower.rs`) adds the run's
/// flags and the defaults.
#[derive(Debug)]
pub struct Scenario {
    /// Where connections go.
    pub endpoints: Vec<loadlab_run::Endpoint>,
    /// The requests: the round robin of plain requests, or every request step of the users.
    pub requests: Vec<loadlab_run::RequestTemplate>,
    /// Arrival phases or user phases.
    pub phases: Phases,
    /// What virtual users do; `None` when every scenario is one plain request sent over a
    /// shared pool of connections.
    pub users: Option<UserModel>,
    /// `config.http.pool`: most connections of the shared pool, when the requests use one.
    pub pool: Option<usize>,
    /// `config.http.timeout`, when given.
    pub timeout: Option<Duration>,
    /// `config.tls`.
    pub tls: ScenarioTls,
    /// `config.http.http2` and `config.http.streams`: HTTP/2 with that many streams per
    /// connection (`None` for the default), or `None` for HTTP/1.1.
    pub http2: Option<Option<usize>>,
    /// `config.ensure` as thresholds.
    pub thresholds: Vec<loadlab_run::Threshold>,
    /// The largest of the phases' `maxVusers` (each phase's own is in its rate phases).
    pub max_vusers: Option<usize>,
    /// Keys read but ignored, in words (one line each).
    pub warnings: Vec<String>,
    /// What the file asks that the plan does not show, in words (apdex threshold, environment).
    pub notes: Vec<String>,
    /// The apdex threshold, ms, when the file sets one (`config.apdex` or the apdex plugin).
    pub apdex_ms: Option<f64>,
}

/// The target a script is checked against when it leaves its own to run time (`validate`
/// without `--target`): a name no lookup resolves, so nothing is ever sent to it.
const RUN_TIME_TARGET: &str = "http://target.given.at.run.time";

/// Lowers a scenario's text (read from `path`, which payload paths are relative to), sending
/// the load to `target` instead of `config.target` when given; `seed` seeds the users,
/// `lookup` says whether the hosts are looked up, and `flags` adds Artillery's run flags.
pub fn from_text(
    text: &str,
    path: &Path,
    target: Option<&str>,
    seed: u64,
    lookup: Lookup,
    flags: &ScriptFlags,
) -> Result<Scenario, ScenarioError> {
    let config_file = flags.config.as_deref().unwrap_or(path);
    let context = crate::config_templates::Context {
        // A -v that is no JSON object is refused where the script reads it.
        variables: flags
            .variables
            .as_deref()
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default(),
        environment: flags.environment.clone(),
        // Artillery's `path.dirname` of the config file's absolute path.
        dirname: std::path::absolute(config_file)
            .unwrap_or_else(|_| config_file.to_path_buf())
            .parent()
            .unwrap_or(Path::new("."))
            .display()
            .to_string(),
        scenario_file: path.display().to_string(),
        checking: flags.lenient_check(),
    };
    let (lowered, mut rendering) = crate::config_templates::within(context, || {
        lower_text(text, path, target, seed, lookup, flags)
    });
    let mut scenario = lowered?;
    scenario.warnings.append(&mut rendering);
    Ok(scenario)
}

/// [`from_text`], with the config's templates' values set.
fn lower_text(
    text: &str,
    path: &Path,
    target: Option<&str>,
    seed: u64,
    lookup: Lookup,
    flags: &ScriptFlags,
) -> Result<Scenario, ScenarioError> {
    let (script, phases) = parse(text, path, flags)?;
    let config = &script.config;
    // As Artillery: a host that does not resolve fails its own requests (ENOTFOUND) and the
    // run goes on, so a script's lookups never refuse the run.
    let lookup = match lookup {
        Lookup::Resolve => Lookup::Defer,
        other => other,
    };
    let mut warnings_of_engines = Vec::new();
    let browser = match &config.engines {
        Some(e) => browser_settings(e, &mut warnings_of_engines, flags.strict)
            .map_err(|r| Traced::at(r, &e.referenced).in_file(script.file_of("engines", path)))?,
        None => None,
    };
    // The browser's settings go to the processor's helper only when some flow drives a
    // browser: it then checks for Playwright and Chromium before the load starts.
    let playwright = |e: Option<&Spanned<String>>| e.is_some_and(|e| e.value == "playwright");
    let browses = script
        .scenarios
        .iter()
        .any(|s| playwright(s.engine.as_ref()))
        || [&script.before, &script.after]
            .into_iter()
            .flatten()
            .any(|o| playwright(o.engine.as_ref()));
    let browser = browser.filter(|_| browses);
    // As Artillery: each user opens connections of its own, unless `config.http.pool` (or the
    // command line's connection counts) asks for a pool that every user shares. Only scripts
    // whose every request is plain can share one.
    let pool = pool_size(config).map_err(|e| e.in_file(script.file_of("http", path)))?;
    let plain = plain(&script, &phases).filter(|_| pool.is_some() || flags.pooled);
    let mut warnings = script.unknown.clone();
    warnings.append(&mut ignored(config, path, flags.strict)?);
    warnings.append(&mut warnings_of_engines);
    let max_vusers = match &config.phases {
        Some(p) => phases::max_vusers(p.iter().map(|p| &p.value))
            .map_err(|e| ScenarioError::invalid(path, e))?,
        None => None,
    };
    // What only checks the script may lack what comes at run time: the target.
    let checking = flags.lenient_check();
    let target = &script_target(target, config, path, checking, &mut warnings)?;
    let processor = processor_of(&script, path, target, browser)?;
    let (endpoints, requests, users) = match plain {
        Some(plain) => {
            let (e, r) = plain_requests(&script.scenarios, &plain, target, lookup)
                .map_err(|e| e.in_file(path))?;
            (e, r, None)
        }
        None => {
            let (e, r, mut users) = user_model(
                &script,
                target,
                seed,
                (lookup, &mut warnings, flags),
                (processor, matches!(phases, Phases::Users(_))),
            )
            .map_err(|e| e.in_file(path))?;
            if let Some(u) = users.as_mut() {
                u.uuid = text.contains("$uuid");
                // As Artillery's engine: with `config.http.pool` every user, whatever it
                // does, sends over one agent of that many sockets per host.
                u.pool = pool;
            }
            (e, r, users)
        }
    };
    let timeout = script_timeout(config, path, &mut warnings)?;
    let tls = config
        .tls
        .as_ref()
        .map_or_else(ScenarioTls::default, |t| ScenarioTls {
            cacert: t.cacert.as_ref().map(|c| script.dir.join(c)),
            insecure: t.insecure || t.reject_unauthorized == Some(false),
        });
    let thresholds = script_thresholds(config, path, &mut warnings)?;
    let mut http2 = config.http.as_ref().filter(|h| h.http2).map(|h| h.streams);
    // gRPC steps go over HTTP/2, and so does the rest of the script with them.
    if requests.iter().any(loadlab_run::RequestTemplate::is_grpc) {
        http2 = Some(http2.flatten());
    }
    let apdex_ms = apdex_ms(config);
    let notes = script_notes(config, flags, apdex_ms, max_vusers, (users.is_some(), pool));
    Ok(Scenario {
        endpoints,
        requests,
        pool: users.is_none().then_some(pool).flatten(),
        phases,
        users,
        timeout,
        tls,
        http2,
        thresholds,
        max_vusers,
        warnings,
        notes,
        apdex_ms,
    })
}

/// The target users send to: `target` (the command line's) or the config's, rendered as
/// Artillery renders `{{ $env.… }}`; when only `checking` the script, one it lacks is
/// [`RUN_TIME_TARGET`], with a warning.
fn script_target(
    target: Option<&str>,
    config: &Config,
    path: &Path,
    checking: bool,
    warnings: &mut Vec<String>,
) -> Result<String, ScenarioError> {
    // An empty `target: ""` is one the command line gives, as in Artillery's own tests.
    let target = match target
        .or(config.target.as_deref())
        .filter(|t| !t.is_empty())
    {
        Some(t) => t,
        None if checking => {
            warnings.push(format!(
                "config.target is not set: give --target URL when it runs (Artillery's -t), or \
                 -e NAME for an environment's target; checked against {RUN_TIME_TARGET}"
            ));
            RUN_TIME_TARGET
        }
        None => return Err(ScenarioError::invalid(path, Problem::NoTarget)),
    };
    // `target: "{{ $processEnvironment.TARGET }}"`, as Artillery reads it.
    match crate::config_templates::render(target, None) {
        Ok(t) => Ok(t),
        Err(e) if checking => {
            warnings.push(format!(
                "config.target: {e} before it runs; checked against {RUN_TIME_TARGET}"
            ));
            Ok(RUN_TIME_TARGET.to_string())
        }
        Err(e) => Err(ScenarioError::invalid(
            path,
            Problem::Flow(FlowError::Env(format!("config.target: {e}"))),
        )),
    }
}

/// The request timeout `config.timeout` (or `config.http.timeout`) gives, seconds; `None` when
/// it gives none, or one that reads a variable nothing sets (Artillery's default applies).
fn script_timeout(
    config: &Config,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<Duration>, ScenarioError> {
    let written = config
        .timeout
        .as_ref()
        .or(config.http.as_ref().and_then(|h| h.timeout.as_ref()));
    match written {
        // A template of a variable that only -v gives: Artillery's timeout is then undefined,
        // and its default applies.
        Some(phases::Num::Text(t))
            if !crate::config_templates::render(t, None).is_ok_and(|r| !r.contains("{{")) =>
        {
            warnings.push(format!(
                "config.http.timeout: {t:?} reads a variable nothing gives here (-v gives it) \
                 or an environment variable that is not set; the default timeout applies, as in \
                 Artillery"
            ));
            None
        }
        Some(n) => Some(n.number().map_err(|e| {
            ScenarioError::invalid(
                path,
                Problem::Flow(FlowError::Env(format!("config.http.timeout: {e}"))),
            )
        })?),
        None => None,
    }
    .filter(|t| t.is_finite() && *t > 0.0)
    .map(|t| {
        Duration::try_from_secs_f64(t)
            .map_err(|_| ScenarioError::invalid(path, Problem::TimeoutTooLong(t)))
    })
    .transpose()
}

/// The thresholds of `config.ensure` (or the ensure plugin's), gating the exit code only when
/// `config.plugins` names the plugin, as Artillery 2.0.34.
fn script_thresholds(
    config: &Config,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<loadlab_run::thresholds::Threshold>, ScenarioError> {
    let from_plugin = ensure_spec(config).map_err(|e| ScenarioError::invalid(path, e))?;
    // Artillery 2.0.34 loads its ensure plugin only when `config.plugins` names it: without
    // it, `config.ensure` checks nothing and the run exits 0 (measured with Artillery itself).
    let named = config
        .plugins
        .as_ref()
        .is_some_and(|p| p.contains_key("ensure"));
    let thresholds = match config.ensure.as_ref().or(from_plugin.as_ref()) {
        Some(e) => e
            .thresholds(named)
            .map_err(|e| ScenarioError::invalid(path, e))?,
        None => Vec::new(),
    };
    if config.ensure.is_some() && !named {
        warnings.push(
            "config.ensure: Artillery checks it only when config.plugins names ensure (add \
             `plugins: { ensure: {} }`), so without that its checks are reported and do not \
             fail the run, as Artillery's exit code says"
                .into(),
        );
    }
    Ok(thresholds)
}

/// The Apdex threshold, ms: `config.apdex.threshold`, else the apdex plugin's, else 500 ms
/// when the plugin is named; `None` without either.
fn apdex_ms(config: &Config) -> Option<f64> {
    let from_plugin = config.plugins.as_ref().and_then(|p| p.get("apdex"));
    match (&config.apdex, from_plugin) {
        (Some(a), _) => Some(a.threshold),
        (None, Some(p)) => Some(p.get("threshold").and_then(|t| t.as_f64()).unwrap_or(500.0)),
        (None, None) => None,
    }
    .filter(|t| t.is_finite() && *t > 0.0)
}

/// What the run takes from the script beside its plan, in words: the environment and config
/// file used, no phases, the Apdex threshold, `maxVusers`, and how users share connections
/// (`users`: whether the script runs as virtual users; `pool`: `config.http.pool`).
fn script_notes(
    config: &Config,
    flags: &ScriptFlags,
    apdex_ms: Option<f64>,
    max_vusers: Option<usize>,
    (users, pool): (bool, Option<usize>),
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(env) = &flags.environment {
        notes.push(format!(
            "environment {env} (config.environments.{env} over config)"
        ));
    }
    if let Some(c) = &flags.config {
        notes.push(format!("config from {}", c.display()));
    }
    if config.phases.is_none() {
        notes.push("no phases: one user, as Artillery runs a script without phases".into());
    }
    if let Some(t) = apdex_ms {
        notes.push(format!(
            "apdex threshold {t} ms (satisfied under it, tolerated under 4×; the score is in the summary)"
        ));
    }
    if let Some(m) = max_vusers {
        notes.push(format!(
            "maxVusers: a user arriving while their phase's cap (up to {m}) is in a session is \
             skipped, as in Artillery"
        ));
    }
    notes.push(match (users, pool) {
        (true, Some(n)) => format!(
            "connections: every user's requests share a pool of {n} per host (config.http.pool), \
             as Artillery's agent; each user keeps its own cookies and variables"
        ),
        (true, None) => {
            "connections: each user opens its own, one per host, as Artillery's users do \
                      (config.http.pool makes them share a pool)"
                .into()
        }
        (false, Some(n)) => {
            format!("connections: a pool of {n} shared by every user (config.http.pool)")
        }
        (false, None) => {
            "connections: a pool shared by every user (the command line's connection counts)".into()
        }
    });
    notes
}

/// The settings of Artillery's Playwright engine that loadlab reads.
const PLAYWRIGHT_KEYS: [&str; 10] = [
    "launchOptions",
    "contextOptions",
    "defaultNavigationTimeout",
    "defaultTimeout",
    "aggregateByName",
    "extendedMetrics",
    "showAllPageMetrics",
    "stripQueryString",
    "normalizeQueryString",
    "testIdAttribute",
];

/// `config.engines`: the Playwright engine's settings (what `engine: playwright` scenarios'
/// browsers are launched with); other engines are refused, settings loadlab does not read are
/// warned about (refused with `--strict`).
fn browser_settings(
    engines: &Spanned<serde_json::Value>,
    warnings: &mut Vec<String>,
    strict: bool,
) -> Result<Option<serde_json::Value>, Refusal> {
    let key = |what: &str| Refusal::Key {
        key: "config.engines".into(),
        what: what.into(),
    };
    let serde_json::Value::Object(map) = &engines.value else {
        return Err(key("takes a map of engine names to their settings"));
    };
    let mut browser = None;
    for (name, settings) in map {
        // The built-in engines' entries: `socketio-v3: {}` is what loads that community engine
        // in Artillery (loadlab speaks it as socketio); settings there are not read.
        if matches!(name.as_str(), "http" | "ws" | "socketio" | "socketio-v3") {
            let empty = settings.is_null() || settings.as_object().is_some_and(|m| m.is_empty());
            if !empty {
                if strict {
                    return Err(Refusal::Key {
                        key: format!("config.engines.{name}"),
                        what: "loadlab does not read these settings; remove them".into(),
                    });
                }
                warnings.push(format!(
                    "config.engines.{name}: settings of the {name} engine that loadlab does not \
                     read (it reads config.{}); ignored",
                    if name == "socketio-v3" {
                        "socketio"
                    } else {
                        name
                    }
                ));
            }
            continue;
        }
        if name != "playwright" {
            return Err(Refusal::Engines(name.clone()));
        }
        let settings = match settings {
            serde_json::Value::Null => serde_json::Value::Object(Default::default()),
            serde_json::Value::Object(m) => {
                for k in m.keys().filter(|k| !PLAYWRIGHT_KEYS.contains(&k.as_str())) {
                    if strict {
                        return Err(Refusal::Key {
                            key: format!("config.engines.playwright.{k}"),
                            what: "loadlab does not read this setting; remove it".into(),
                        });
                    }
                    warnings.push(format!(
                        "config.engines.playwright.{k}: loadlab does not read this setting; it \
                         is ignored"
                    ));
                }
                for k in ["launchOptions", "contextOptions"] {
                    if m.get(k).is_some_and(|v| !v.is_object() && !v.is_null()) {
                        return Err(Refusal::Key {
                            key: format!("config.engines.playwright.{k}"),
                            what: "takes a map of Playwright's options".into(),
                        });
                    }
                }
                settings.clone()
            }
            _ => return Err(key("engines.playwright takes a map of settings")),
        };
        browser = Some(settings);
    }
    Ok(browser)
}

/// `config.processor`: its file, resolved against the folder of the file that names it, must
/// exist; Node.js loads it when the run starts.
fn processor_of(
    script: &Script,
    path: &Path,
    target: &str,
    browser: Option<serde_json::Value>,
) -> Result<Option<loadlab_run::users::Processor>, ScenarioError> {
    let Some(p) = &script.config.processor else {
        return Ok(None);
    };
    let file = script.file_of("processor", path);
    let dir = file.parent().unwrap_or(Path::new("."));
    let module = dir.join(&p.value);
    if !module.is_file() {
        return Err(Traced::at(
            Refusal::Key {
                key: "config.processor".into(),
                what: format!(
                    "{} is not a file; give the path of the Node.js module, relative to {}",
                    module.display(),
                    file.display()
                ),
            },
            &p.referenced,
        )
        .in_file(file));
    }
    let module = std::path::absolute(&module).unwrap_or(module);
    Ok(Some(loadlab_run::users::Processor {
        path: module,
        target: target.to_string(),
        dir: std::path::absolute(&script.dir).unwrap_or_else(|_| script.dir.clone()),
        lists: BTreeMap::new(),
        browser,
    }))
}

/// The scenario names and weights, with defaults; scenarios of weight 0 are left out.
fn weighted(scenarios: &[ScenarioSpec]) -> Vec<(usize, String, u32)> {
    scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = s
                .name
                .clone()
                .unwrap_or_else(|| format!("scenario {}", i + 1));
            (i, name, s.weight.unwrap_or(1))
        })
        .filter(|(_, _, w)| *w > 0)
        .collect()
}

/// Each scenario's one plain request and its method, when the file runs as plain arrivals:
/// arrival phases, no variables or payload, and every scenario a flow of one plain request.
fn plain<'a>(file: &'a Script, phases: &Phases) -> Option<Vec<(&'static str, &'a RequestSpec)>> {
    if !matches!(phases, Phases::Rates(_))
        || file.config.processor.is_some()
        || file.before.is_some()
        || file.after.is_some()
        || file.scenarios.iter().any(|s| {
            s.engine.as_ref().is_some_and(|e| e.value != "http")
                || s.before_scenario.is_some()
                || s.after_scenario.is_some()
                || s.before_request.is_some()
                || s.after_response.is_some()
                || s.on_error.is_some()
        })
        || file
            .config
            .variables
            .as_ref()
            .is_some_and(|v| !v.is_empty())
        || file.config.payload.is_some()
        || file
            .config
            .defaults
            .as_ref()
            .is_some_and(|d| !d.headers.is_empty())
    {
        return None;
    }
    file.scenarios
        .iter()
        .map(|s| match (&s.markov, s.flow.as_deref()) {
            (None, Some([step])) => step.value.plain_request(),
            _ => None,
        })
        .collect()
}

/// Weights as interleaved repetitions (a b a a …), reduced by their common divisor, so short
/// stretches of arrivals see the mix too: the item indices in order.
fn interleave(weights: &[u32]) -> Result<Vec<usize>, Problem> {
    let divisor = weights.iter().fold(0, |g, w| gcd(g, *w));
    if divisor == 0 {
        return Err(Problem::NoWeight);
    }
    let total: u32 = weights.iter().map(|w| w / divisor).sum();
    if total > MAX_WEIGHT_SUM {
        return Err(Problem::TooManySlots {
            slots: total,
            max: MAX_WEIGHT_SUM,
        });
    }
    let mut remaining: Vec<u32> = weights.iter().map(|w| w / divisor).collect();
    let mut out = Vec::new();
    while remaining.iter().any(|r| *r > 0) {
        for (i, r) in remaining.iter_mut().enumerate() {
            if *r > 0 {
                *r -= 1;
                out.push(i);
            }
        }
    }
    Ok(out)
}

/// Single-request scenarios (each scenario's request in `plain`) as the round-robin list of
/// plain requests.
fn plain_requests(
    scenarios: &[ScenarioSpec],
    plain: &[(&'static str, &RequestSpec)],
    target: &str,
    lookup: Lookup,
) -> Result<
    (
        Vec<loadlab_run::Endpoint>,
        Vec<loadlab_run::RequestTemplate>,
    ),
    Traced,
> {
    let chosen = weighted(scenarios);
    let mut specs = Vec::new();
    for (i, name, _) in &chosen {
        let (method, r) = plain[*i];
        let url = if r.url.starts_with('/') {
            format!("{}{}", target.trim_end_matches('/'), r.url)
        } else {
            r.url.clone()
        };
        let (headers, body) = r
            .headers_and_body()
            .within(|| Place::Scenario(name.clone()))?;
        specs.push(crate::target::RequestSpec {
            name: name.clone(),
            url,
            method: method.into(),
            headers,
            body,
            grpc_stream: None,
        });
    }
    let weights: Vec<u32> = chosen.iter().map(|(_, _, w)| *w).collect();
    let order: Vec<crate::target::RequestSpec> = interleave(&weights)?
        .into_iter()
        .map(|k| specs[k].clone())
        .collect();
    Ok(crate::target::resolve(&order, lookup)?)
}

/// A file's scenarios lowered: the plan's endpoints and requests, and what users do.
type Lowered = (
    Vec<loadlab_run::Endpoint>,
    Vec<loadlab_run::RequestTemplate>,
    Option<UserModel>,
);

/// Flows and chains as a user model, with the plan's endpoints and requests.
fn user_model(
    file: &Script,
    target: &str,
    seed: u64,
    (lookup, warnings, flags): (Lookup, &mut Vec<String>, &ScriptFlags),
    (mut processor, closed): (Option<loadlab_run::users::Processor>, bool),
) -> Result<Lowered, Traced> {
    let checking = flags.lenient_check();
    let ConfigVariables {
        mut variables,
        undefined,
        objects,
    } = config_variables(file, warnings)?;
    // Artillery gives every user `target`, the config's target, unless a variable says else;
    // the model carries it when a template reads it.
    let target_is_theirs =
        variables.iter().any(|(n, _)| n == "target") || undefined.iter().any(|n| n == "target");
    let ConfigPayloads {
        payloads,
        lists,
        later,
    } = config_payloads(file, checking, warnings)?;
    // Artillery gives functions a `loadAll` payload as its list of rows.
    if let Some(p) = processor.as_mut() {
        p.lists = lists
            .iter()
            .map(|(k, rows)| (k.clone(), serde_json::Value::Array(rows.clone())))
            .collect();
    }
    let mut defined: std::collections::HashSet<String> =
        variables.iter().map(|(n, _)| n.clone()).collect();
    for (name, items) in &objects {
        for item in items {
            defined.extend(
                loadlab_script::vars::loop_item_vars(name, item)
                    .into_iter()
                    .map(|(k, _)| k),
            );
        }
    }
    defined.extend(payloads.iter().flat_map(|p| p.fields.iter().cloned()));
    defined.extend(later);
    defined.extend(undefined);
    defined.insert("$uuid".into());
    if !target_is_theirs {
        defined.insert("target".into());
    }
    let chosen = weighted(&file.scenarios);
    let expect = ExpectPlugin::of(&file.config);
    let mut lowering = lowering_for(
        file,
        (target, defined.clone(), lookup),
        (processor.is_some(), flags.strict),
        expect.as_ref(),
    )?;
    lowering.lists = lists;
    lowering.closed = closed;
    // The `before` flow first: what it captures, every scenario may read.
    let once = |key: &str, spec: Option<&OnceSpec>, lowering: &mut flows::Lowering| {
        let Some(spec) = spec else {
            return Ok(None);
        };
        let name = spec.name.clone().unwrap_or_else(|| key.to_string());
        if spec
            .engine
            .as_ref()
            .is_some_and(|e| e.value == "playwright")
        {
            return lowering
                .browser_scenario(
                    &name,
                    spec.flow_function.as_ref(),
                    spec.engine.as_ref(),
                    !spec.flow.is_empty(),
                )
                .within(|| Place::Scenario(name.clone()))
                .map(|s| Some(Box::new(s)));
        }
        lowering
            .scenario(&name, Some(&spec.flow), None, &Default::default(), None)
            .within(|| Place::Scenario(name.clone()))
            .map(|s| Some(Box::new(s)))
    };
    lowering.defined = defined.clone();
    let before = once("before", file.before.as_ref(), &mut lowering)?;
    defined.extend(lowering.defined.iter().cloned());
    let scenarios = lower_scenarios(file, &chosen, &defined, &mut lowering)?;
    lowering.defined = defined.clone();
    let after = once("after", file.after.as_ref(), &mut lowering)?;
    let weights: Vec<u32> = chosen.iter().map(|(_, _, w)| *w).collect();
    let pattern = interleave(&weights)?;
    if !target_is_theirs && lowering.reads_target.get() {
        variables.push(("target".into(), vec![target.to_string()]));
    }
    let model = UserModel {
        scenarios,
        pattern,
        variables,
        variable_objects: objects,
        pool: None,
        payloads,
        seed,
        processor,
        before,
        after,
        keep_vars: false,
        uuid: false,
        checks_fail_user: expect.as_ref().is_some_and(|e| e.failures_as_errors),
        checks_set_exit_code: expect.is_some(),
        locust: None,
    };
    lowering_warnings(&mut lowering, warnings);
    Ok((lowering.endpoints, lowering.requests, Some(model)))
}

/// The scenarios `chosen` (index, name, weight) lowered in turn, each seeing the names in
/// `defined` and its own captures.
fn lower_scenarios(
    file: &Script,
    chosen: &[(usize, String, u32)],
    defined: &std::collections::HashSet<String>,
    lowering: &mut flows::Lowering,
) -> Result<Vec<loadlab_run::users::UserScenario>, Traced> {
    let mut scenarios = Vec::new();
    for (i, name, _) in chosen {
        let s = &file.scenarios[*i];
        // Each scenario sees only the variables defined before it: config, payload, and its
        // own captures.
        lowering.defined = defined.clone();
        let hooks = flows::ScenarioHooks {
            before_scenario: s.before_scenario.as_ref(),
            after_scenario: s.after_scenario.as_ref(),
            before_request: s.before_request.as_ref(),
            after_response: s.after_response.as_ref(),
            on_error: s.on_error.as_ref(),
        };
        let (ws, sio) = (
            file.config.ws.clone().unwrap_or_default(),
            file.config.socketio.clone().unwrap_or_default(),
        );
        let engine = match s.engine.as_ref().map(|e| e.value.as_str()) {
            Some("ws") => Some(sockets::Engine::Ws(&ws)),
            // The community's socketio-v3 engine speaks Socket.IO 3 and 4, as loadlab's does.
            Some("socketio") | Some("socketio-v3") => Some(sockets::Engine::SocketIo(&sio)),
            Some("playwright") => {
                let function = s.test_function.as_ref().or(s.flow_function.as_ref());
                scenarios.push(
                    lowering
                        .browser_scenario(name, function, s.engine.as_ref(), s.flow.is_some())
                        .within(|| Place::Scenario(name.clone()))?,
                );
                continue;
            }
            _ => None,
        };
        if let Some(f) = s.flow_function.as_ref().or(s.test_function.as_ref()) {
            return Err(Traced::at(
                Refusal::Key {
                    key: "flowFunction".into(),
                    what: "is a key of engine: playwright scenarios (add engine: playwright)"
                        .into(),
                },
                &f.referenced,
            ));
        }
        scenarios.push(
            lowering
                .scenario(name, s.flow.as_deref(), s.markov.as_ref(), &hooks, engine)
                .within(|| Place::Scenario(name.clone()))?,
        );
    }
    Ok(scenarios)
}

/// The config's variables as users read them: each name's values (a user picks one), the
/// names an unset environment variable leaves undefined, and the lists of objects (a user
/// takes one element whole, as Artillery samples a list).
struct ConfigVariables {
    variables: Vec<(String, Vec<String>)>,
    undefined: Vec<String>,
    objects: Vec<(String, Vec<serde_json::Value>)>,
}

/// Reads `config.variables`: objects flattened to `name.key` leaves, lists of objects kept
/// whole, values that are the config's templates rendered.
fn config_variables(file: &Script, warnings: &mut Vec<String>) -> Result<ConfigVariables, Traced> {
    let mut variables = Vec::new();
    // Variables whose value is an unset environment variable: defined, with no value.
    let mut undefined = Vec::new();
    let mut flat = Vec::new();
    // Lists holding objects: each user takes one element whole, as Artillery samples a list.
    let mut objects = Vec::new();
    for (name, v) in file.config.variables.iter().flatten() {
        match v {
            // An object: each of its leaves a variable `name.key.…`, as Artillery reads
            // `{{ name.key }}`.
            serde_json::Value::Object(_) => flatten_object(name, v, &mut flat),
            serde_json::Value::Array(items)
                if items.iter().any(|i| i.is_object() || i.is_array()) =>
            {
                objects.push((name.clone(), items.clone()));
            }
            _ => flat.push((name.clone(), v.clone())),
        }
    }
    for (name, v) in &flat {
        let scalar = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok(v.to_string()),
            _ => Err(Problem::VariableNotScalar(name.clone())),
        };
        let mut values = match v {
            serde_json::Value::Array(items) => {
                items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?
            }
            other => vec![scalar(other)?],
        };
        if values.is_empty() {
            warnings.push(format!(
                "config.variables.{name} is an empty list: it is undefined, as in Artillery"
            ));
            undefined.push(name.clone());
            continue;
        }
        // A value may be a template of the config's (`{{ $env.HOST }}`, a -v variable), which
        // Artillery renders before the run; one that reads an unset environment variable alone
        // leaves the variable undefined there.
        let mut rendered = Vec::with_capacity(values.len());
        for value in values.drain(..) {
            if !value.contains("{{") {
                rendered.push(value);
            } else if let Some(v) = crate::config_templates::render_value(&value) {
                rendered.push(v);
            }
        }
        let values = rendered;
        if values.is_empty() {
            warnings.push(format!(
                "config.variables.{name} reads an environment variable that is not set: it is \
                 undefined, as in Artillery"
            ));
            undefined.push(name.clone());
            continue;
        }
        variables.push((name.clone(), values));
    }
    Ok(ConfigVariables {
        variables,
        undefined,
        objects,
    })
}

/// The config's payloads: the files each user takes a row of, the `loadAll` ones as lists of
/// rows by name, and the fields of payloads whose file comes only when the script runs (when
/// only checking it).
struct ConfigPayloads {
    payloads: Vec<loadlab_run::users::Payload>,
    lists: BTreeMap<String, Vec<serde_json::Value>>,
    later: Vec<String>,
}

/// Reads `config.payload`; `checking` when the script is only checked, not run.
fn config_payloads(
    file: &Script,
    checking: bool,
    warnings: &mut Vec<String>,
) -> Result<ConfigPayloads, Traced> {
    let mut payloads = Vec::new();
    let mut lists = BTreeMap::new();
    // The fields of payloads whose file comes at run time, when only checking the script.
    let mut later = Vec::new();
    if let Some(p) = &file.config.payload {
        for spec in p.as_slice() {
            if let Some(o) = spec.options.as_ref().and_then(|o| o.as_object()) {
                let keys: Vec<&str> = o.keys().map(String::as_str).collect();
                if !keys.is_empty() {
                    warnings.push(format!(
                        "config.payload.options ({}): options of Artillery's CSV parser that \
                         loadlab's reader does not take (it reads RFC 4180 CSV with the \
                         payload's delimiter); ignored",
                        keys.join(", ")
                    ));
                }
            }
            // A path that depends on the command line (`names-{{ $environment }}.csv`) may
            // name no file until it runs with its -e.
            let later_file = checking
                && spec.path.as_ref().is_some_and(|p| p.contains("{{"))
                && matches!(
                    read_payload(spec, &file.config_path),
                    Err(PayloadError::Unreadable { .. })
                );
            if later_file {
                warnings.push(format!(
                    "config.payload {}: no such file before it runs with its -e or -v",
                    spec.path.as_deref().unwrap_or_default()
                ));
                later.extend(spec.fields.iter().cloned());
                continue;
            }
            if spec.path.is_none() && checking {
                warnings.push(format!(
                    "config.payload (fields {}) has no path: give its CSV file with --payload \
                     FILE when it runs, as Artillery's -p",
                    spec.fields.join(", ")
                ));
                later.extend(spec.fields.iter().cloned());
                continue;
            }
            let read = read_payload(spec, &file.config_path)?;
            match (spec.load_all, &spec.name) {
                (false, None) => payloads.push(read),
                (true, Some(name)) => {
                    lists.insert(name.clone(), payload::rows_as_objects(&read));
                }
                _ => {
                    return Err(
                        PayloadError::LoadAllName(spec.path.clone().unwrap_or_default()).into(),
                    )
                }
            }
        }
    }
    Ok(ConfigPayloads {
        payloads,
        lists,
        later,
    })
}

/// The lowering of `file`'s flows against `target` with the config's defaults (headers,
/// cookies, captures, think-time jitter, the `expect` plugin's default status), every name in
/// `defined` known, and whether the script has a processor and runs `--strict` (both decide
/// which names the default cookies may read).
fn lowering_for<'a>(
    file: &Script,
    (target, defined, lookup): (&'a str, std::collections::HashSet<String>, Lookup),
    (processor, strict): (bool, bool),
    expect: Option<&ExpectPlugin>,
) -> Result<flows::Lowering<'a>, Traced> {
    let mut lowering = flows::Lowering::new(target, defined, lookup);
    lowering.processor = processor;
    lowering.strict = strict;
    lowering.dir = file.scenario_dir.clone();
    lowering.expect_default_200 = expect.is_some_and(|e| e.default_200);
    lowering.grpc_config = file.config.grpc.clone();
    lowering.target_known = target != RUN_TIME_TARGET;
    lowering.default_headers = file
        .config
        .defaults
        .as_ref()
        .map(|d| d.headers.clone())
        .unwrap_or_default();
    if let Some(c) = file
        .config
        .defaults
        .as_ref()
        .and_then(|d| d.cookie.as_ref())
    {
        lowering.default_cookies = lowering
            .cookies(&c.value)
            .map_err(|e| Traced::at(e, &c.referenced))?;
    }
    lowering.strict_capture = file
        .config
        .defaults
        .as_ref()
        .and_then(|d| d.strict_capture)
        .unwrap_or(true);
    lowering.think_jitter = file
        .config
        .defaults
        .as_ref()
        .and_then(|d| d.think.as_ref())
        .and_then(|t| t.jitter.clone());
    Ok(lowering)
}

/// The warnings lowering left: its own, then the functions named without a processor, the
/// template calls Artillery does not make, and the variables nothing sets.
fn lowering_warnings(lowering: &mut flows::Lowering, warnings: &mut Vec<String>) {
    warnings.append(&mut lowering.warnings);
    let skipped: Vec<String> = lowering.without_processor.take().into_iter().collect();
    if !skipped.is_empty() {
        warnings.push(format!(
            "{}: named, but the script gives no config.processor; Artillery skips a function it \
             cannot find, and so does loadlab (--strict refuses): add processor: ./functions.js",
            skipped.join(", ")
        ));
    }
    for call in lowering.unknown_functions.take() {
        warnings.push(format!(
            "{{{{ {call} }}}}: Artillery 2.0.34's templates call only their own functions \
             ($randomNumber, $randomString, $template and the fake-data plugin's), not a \
             processor's exports; it renders the whole text holding this call as undefined (a \
             URL then fails its user with Invalid URL, a JSON member is left out, a query value \
             is empty), and so does loadlab; --strict refuses it"
        ));
    }
    for name in lowering.unset.take() {
        warnings.push(format!(
            "{{{{ {name} }}}} is set by none of this file's sources (config.variables, a \
             payload's fields, a capture before it): give it with -v '{{\"{name}\": …}}', or it \
             renders as Artillery renders an undefined variable (\"undefined\" within text, \
             nothing as a whole value); --strict refuses it"
        ));
    }
}

/// An object variable's leaves as variables named by their path (`user.name`); a leaf that is a
/// list keeps its values for a random pick, as a top-level list does.
fn flatten_object(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                flatten_object(&format!("{prefix}.{k}"), v, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::{mutations, SEED, USERS_SEED};

    #[test]
    fn the_parser_never_panics_on_mangled_or_random_input() {
        let path = Path::new("fuzz.yaml");
        assert!(
            parse(SEED, path, &ScriptFlags::default()).is_ok(),
            "the seed parses"
        );
        assert!(
            parse(USERS_SEED, path, &ScriptFlags::default()).is_ok(),
            "the users seed parses"
        );
        // Either outcome is fine; a panic fails the test.
        mutations(SEED, 3000, |text| {
            let _ = parse(text, path, &ScriptFlags::default());
        });
        mutations(USERS_SEED, 3000, |text| {
            let _ = parse(text, path, &ScriptFlags::default());
        });
    }

    #[test]
    fn a_scenario_error_names_the_file_the_places_leading_to_the_problem_and_the_problem() {
        let path = Path::new("s.yaml");
        let text = "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - { duration: 1, users: 1 }\nscenarios:\n  - name: shop\n    flow:\n      - get: { url: \"/\" }\n      - loop:\n          - get: { url: \"/{{ cart }}\" }\n        count: 2\n";
        let strict = ScriptFlags {
            strict: true,
            ..ScriptFlags::default()
        };
        let e = from_text(text, path, None, 1, Lookup::Skip, &strict).unwrap_err();
        let ScenarioError::Invalid {
            path: file,
            trail,
            at,
            problem,
        } = &e
        else {
            panic!("{e:?}");
        };
        let Problem::Flow(FlowError::Undefined(variable)) = problem.as_ref() else {
            panic!("{e:?}");
        };
        assert_eq!(file, path);
        let step = |n, line, column| Place::FlowStep(n, Some(crate::Position { line, column }));
        assert_eq!(
            trail,
            &[
                Place::Scenario("shop".into()),
                step(2, 9, 9),
                step(1, 10, 13)
            ]
        );
        assert_eq!(
            *at,
            Some(crate::Position {
                line: 10,
                column: 13
            }),
            "the innermost step's place"
        );
        assert_eq!(variable, "cart");
        assert!(
            e.to_string().starts_with(
                "s.yaml:10:13: scenario \"shop\": flow step 2: flow step 1: {{ cart }}"
            ),
            "{e}"
        );

        let (script, _) = parse(
            "config:\n  target: x\n  extra: 1\nscenarios:\n  - flow: []\n",
            path,
            &ScriptFlags::default(),
        )
        .unwrap();
        assert_eq!(
            script.unknown,
            [
                "s.yaml:3:3: config.extra: not a key of config; Artillery ignores it, and so does \
              loadlab"
            ]
        );
    }
}

#[cfg(test)]
mod artillery_tests;
