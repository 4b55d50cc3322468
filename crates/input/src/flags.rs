//! The flags of `loadlab run` that shape the load, as one typed input: the command line and
//! an experiment's workloads parse into [`LoadFlags`], and the lowering (`lower.rs`) turns them into a
//! plan, or refuses them with a [`FlagsError`]. A new load flag is a field here and a line in the
//! lowering.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, ValueEnum};
use loadlab_run::shard::ShardError;
use loadlab_run::thresholds::ThresholdError;

use crate::target::{HeaderError, UrlError};
use crate::tls::CaFileError;
use crate::values::{
    addr_list, non_negative_rate, parse_duration, positive_count, positive_duration, positive_rate,
    positive_u64, shard_arg, start_at, threshold_list, AddrList, ShardArg, ThresholdList,
};

/// Flags (or a URL among them) that cannot become a plan: which one, and why.
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    /// A target URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A locustfile's host that is not an `http://` or `https://` URL.
    #[error("host {0:?} is not an http:// or https:// URL; give -H http://HOST[:PORT]")]
    LocustHost(String),
    /// A `-H` header.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A `-m` that is not a method's name.
    #[error("method {0:?} is not an HTTP method")]
    Method(String),
    /// A `--body-file` that cannot be read.
    #[error("cannot read the body file {path}: {error}")]
    BodyFile {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: io::Error,
    },
    /// A `--cacert` that cannot be used.
    #[error(transparent)]
    CaFile(#[from] CaFileError),
    /// `-p` with `-R`.
    #[error("pipelining (-p) applies to the closed model only; drop -p or -R")]
    PipelineWithRate,
    /// `--ramp-to` without `-d`.
    #[error("--ramp-to needs a duration (-d) to ramp over")]
    RampWithoutDuration,
    /// A scenario file with the flags its phases replace.
    #[error("-R, --ramp-to, -d and -n come from the scenario's phases; drop them")]
    PhasesFromFlags,
    /// A scenario file with URLs or another file.
    #[error("give one scenario file and no URLs")]
    ScenarioWithUrls,
    /// A scenario file with the flags that shape a URL's request.
    #[error(
        "-m, -H, -b and --body-file shape a URL's request; a scenario file's requests come from \
         its flows: drop them"
    )]
    RequestWithScenario,
    /// `--target` with a URL rather than a scenario file.
    #[error("--target gives a scenario file's paths their host; with a URL, drop it")]
    TargetWithUrls,
    /// A scenario file with `--no-keepalive`.
    #[error(
        "--no-keepalive applies to URLs; in a scenario file, give its requests the header \
         'Connection: close'"
    )]
    NoKeepaliveWithScenario,
    /// An experiment's workload with `--shard` or `--start-at`.
    #[error("--shard and --start-at apply to `loadlab run`; drop them from the workload")]
    ShardInWorkload,
    /// A plan that cannot be split as `--shard` asks.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// A flag string whose quote is not closed.
    #[error("unbalanced quote in {0:?}")]
    UnbalancedQuote(String),
    /// A `grpc://` target that cannot become calls (boxed: the rarest error is the largest).
    #[error(transparent)]
    Grpc(Box<crate::grpc::GrpcError>),
    /// `--streams` on HTTP/1.1 URLs.
    #[error("--streams applies to HTTP/2: add --http2")]
    StreamsWithoutHttp2,
    /// Words clap refuses as load flags (an unknown flag, a bad value); shown as clap's
    /// first line.
    #[error("{}", first_line(.0))]
    Words(clap::Error),
    /// A workload's `slo` that is not a list of thresholds.
    #[error("slo: {0}")]
    Slo(ThresholdError),
}

impl From<crate::grpc::GrpcError> for FlagsError {
    fn from(e: crate::grpc::GrpcError) -> Self {
        FlagsError::Grpc(Box::new(e))
    }
}

/// The first line of clap's message, which names the flag and the problem.
pub(crate) fn first_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    rendered
        .lines()
        .next()
        .unwrap_or("invalid flags")
        .trim()
        .to_string()
}

/// Arrival spacing for the open model.
#[derive(Debug, Clone, Copy, Default, ValueEnum, PartialEq, Eq)]
pub enum ArrivalArg {
    /// Evenly spaced.
    #[default]
    Uniform,
    /// Exponential gaps (a Poisson process).
    Poisson,
}

/// The flags of `loadlab run` that shape the load (the rest say where results go); an
/// experiment's workload is written in the same flags.
#[derive(Debug, Clone, Default, Args)]
pub struct LoadFlags {
    /// Target URLs (http[s]://host[:port]/path, or gRPC methods,
    /// grpc[s]://host:port/package.Service/Method), used round-robin; or one scenario file
    /// (Artillery YAML with flows, users phases or Markov user models).
    #[arg(required = true, value_name = "URL|SCENARIO.yaml")]
    pub urls: Vec<String>,
    /// Connections: kept busy in the closed model [default: 10], opened at the start in the
    /// open model [default: one per target].
    #[arg(short = 'c', long = "connections", value_name = "N", value_parser = positive_count, allow_negative_numbers = true)]
    pub connections: Option<usize>,
    /// Length of the run (e.g. 10s, 1m, 500ms; a bare number is seconds) [default: 10s, unless
    /// -n].
    #[arg(short = 'd', long = "duration", value_name = "DUR", value_parser = positive_duration, allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    /// Stop after exactly COUNT requests have ended.
    #[arg(short = 'n', long = "requests", value_name = "COUNT", value_parser = positive_u64, allow_negative_numbers = true)]
    pub requests: Option<u64>,
    /// Open model: schedule requests at RATE per second from a fixed origin.
    #[arg(short = 'R', long = "rate", value_name = "RATE", value_parser = positive_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Open model: ramp linearly from -R to RATE2 over the duration.
    #[arg(long = "ramp-to", value_name = "RATE2", requires = "rate", value_parser = non_negative_rate, allow_negative_numbers = true)]
    pub ramp_to: Option<f64>,
    /// Open model: spacing of arrivals [default: uniform].
    #[arg(long, value_enum, requires = "rate")]
    pub arrival: Option<ArrivalArg>,
    /// Open model: most connections open at once; past that, requests wait, and the wait
    /// counts in their latency [default: 1000].
    #[arg(long = "max-connections", value_name = "N", requires = "rate", value_parser = positive_count, allow_negative_numbers = true)]
    pub max_connections: Option<usize>,
    /// Open model: let an arrival go out up to DUR early, with an earlier one's wake-up
    /// (e.g. 500us, 1ms): less CPU per request, sends bunched by up to DUR; 0 sends each at
    /// its time [default: 0]. At most 100ms.
    #[arg(long = "pacing-slack", value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub pacing_slack: Option<Duration>,
    /// Closed model: HTTP/1.1 requests pipelined per connection [default: 1].
    #[arg(short = 'p', long = "pipeline", value_name = "DEPTH", value_parser = positive_count, allow_negative_numbers = true)]
    pub pipeline: Option<usize>,
    /// Generator threads [default: the cores this process may use].
    #[arg(short = 't', long = "threads", value_name = "N", value_parser = positive_count, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    /// A request not answered this long after its send counts as a timeout [default: 10s].
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// A TCP connect not done this long after it began counts as connect_timeout [default:
    /// 5s, or --timeout when shorter].
    #[arg(long = "connect-timeout", value_name = "DUR", value_parser = positive_duration, allow_negative_numbers = true)]
    pub connect_timeout: Option<Duration>,
    /// Initial connections opened per second before the load starts, all threads together
    /// (the connect time is reported, never in latency) [default: 10000].
    #[arg(long = "connect-rate", value_name = "N", value_parser = positive_rate, allow_negative_numbers = true)]
    pub connect_rate: Option<f64>,
    /// Local addresses to bind connections to, round-robin: a list and ranges such as
    /// 127.0.0.2,127.0.0.5-127.0.0.9 (repeatable). Each adds ~28,000 ports per destination.
    #[arg(long = "source-addr", value_name = "ADDRS", value_parser = addr_list)]
    pub source_addrs: Vec<AddrList>,
    /// The request: method, headers and body.
    #[command(flatten)]
    pub request: RequestFlags,
    /// gRPC targets: where their methods' types come from.
    #[command(flatten)]
    pub grpc: crate::grpc::GrpcFlags,
    /// Seed for Poisson arrivals and virtual users' random choices [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Scenario files: send the load here instead of to `config.target` (as Artillery's --target).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Close each connection after its response, so every request opens a new one (and over
    /// HTTPS makes a handshake), as oha's --disable-keepalive; HTTP/1.1 URLs only.
    #[arg(long = "no-keepalive", conflicts_with_all = ["http2", "pipeline"])]
    pub no_keepalive: bool,
    /// HTTP/2 and TLS verification.
    #[command(flatten)]
    pub reach: ReachFlags,
    /// Scenario files: --config, -e, -v, --strict.
    #[command(flatten)]
    pub script: ScriptFlags,
    /// Thresholds the run must meet, e.g. 'p99<300ms,errors<1%,rps>900' or 'p95{login}<200ms'
    /// for one request name (repeatable); any failed sets exit code 99.
    #[arg(long = "slo", value_name = "THRESHOLDS", value_parser = threshold_list)]
    pub slo: Vec<ThresholdList>,
    /// Run only shard I (from 0) of N of the plan: arrival k of the schedule goes to shard
    /// k mod N, connections, -n, users and payload rows are split; `loadlab merge` joins them.
    #[arg(long, value_name = "I/N", value_parser = shard_arg)]
    pub shard: Option<ShardArg>,
    /// Start the schedule at this wall-clock time, shared by every shard (RFC 3339, e.g.
    /// 2026-11-23T15:00:00Z, or Unix seconds); the connections open just before.
    #[arg(long = "start-at", value_name = "TIME", value_parser = start_at)]
    pub start_at: Option<std::time::SystemTime>,
}

/// Scenario files: what Artillery's `run` flags add to a script (`--config`, `-e`, `-v`,
/// `--overrides`, `--payload`, `--scenario-name`, `--solo`, `--dotenv`), and whether ignored
/// keys are refused.
#[derive(Debug, Clone, Default, Args)]
pub struct ScriptFlags {
    /// Scenario files: take `config` from this file, laid over the script's own (as
    /// Artillery's --config), so a file of scenarios alone can run.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Scenario files: lay `config.environments.NAME` over `config` (as Artillery's -e).
    #[arg(short = 'e', long = "environment", value_name = "NAME")]
    pub environment: Option<String>,
    /// Scenario files: variables as a JSON object, set over `config.variables` (as
    /// Artillery's -v), e.g. '{"id": [1, 2, 3]}'.
    #[arg(short = 'v', long = "variables", value_name = "JSON")]
    pub variables: Option<String>,
    /// Scenario files: a JSON object laid over the whole script, its lists replacing the
    /// script's (as Artillery's --overrides), e.g. '{"config": {"phases": [{"duration": 5,
    /// "arrivalRate": 2}]}}'.
    #[arg(long = "overrides", value_name = "JSON")]
    pub overrides: Option<String>,
    /// Scenario files: the CSV file of a single `config.payload`, relative to the current
    /// directory (as Artillery's -p): for a payload written without a path.
    #[arg(long = "payload", value_name = "FILE")]
    pub payload: Option<PathBuf>,
    /// Scenario files: run only the scenario of this name (as Artillery's --scenario-name).
    #[arg(long = "scenario-name", value_name = "NAME")]
    pub scenario_name: Option<String>,
    /// Scenario files: one user, once, whatever the phases say (as Artillery's --solo).
    #[arg(long)]
    pub solo: bool,
    /// Scenario files: environment variables from this dotenv file, for those not set already
    /// (as Artillery's --dotenv), read before the script.
    #[arg(long = "dotenv", visible_alias = "env-file", value_name = "FILE")]
    pub dotenv: Option<PathBuf>,
    /// Scenario files: refuse what loadlab would otherwise ignore with a warning (keys it does
    /// not read, plugins it does not run, an http.pool its users cannot share, variables that
    /// nothing sets, an environment the script does not define).
    #[arg(long)]
    pub strict: bool,
    /// Set by `validate`, not a flag: what may come at run time (a target, a payload's file,
    /// an environment variable) is a warning when the file lacks it, not an error.
    #[arg(skip)]
    pub checking: bool,
    /// Set by the command, not a flag: the command line gives connection counts, so a script
    /// of plain requests sends them over a shared pool (as `config.http.pool` asks).
    #[arg(skip)]
    pub pooled: bool,
}

impl ScriptFlags {
    /// True when the script is only checked and may lack what comes at run time (`validate`
    /// without `--strict`).
    pub fn lenient_check(&self) -> bool {
        self.checking && !self.strict
    }
}

/// The request every arrival sends: `run`'s URLs, and the one URL `capacity` and `probe` load.
#[derive(Debug, Clone, Default, Args)]
pub struct RequestFlags {
    /// HTTP method [default: GET].
    #[arg(short = 'm', long = "method")]
    pub method: Option<String>,
    /// Request header 'Name: value' (or name=value; repeatable).
    #[arg(short = 'H', long = "header", value_name = "'K: V'")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(short = 'b', long = "body", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long = "body-file", value_name = "FILE")]
    pub body_file: Option<PathBuf>,
}

/// A request as the flags give it: its method (upper case), headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagRequest {
    /// The method, upper case.
    pub method: String,
    /// Headers, in the order given.
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
}

impl RequestFlags {
    /// True when any of the flags was given.
    pub fn is_set(&self) -> bool {
        self.method.is_some()
            || !self.headers.is_empty()
            || self.body.is_some()
            || self.body_file.is_some()
    }

    /// The request the flags describe: the method checked, the headers parsed, the body file
    /// read.
    pub fn lowered(&self) -> Result<FlagRequest, FlagsError> {
        let given = self
            .method
            .as_deref()
            .unwrap_or(loadlab_run::defaults::METHOD);
        let method = given.to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(FlagsError::Method(given.into()));
        }
        let headers = self
            .headers
            .iter()
            .map(|h| crate::target::parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let body = match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(file)) => std::fs::read(file).map_err(|error| FlagsError::BodyFile {
                path: file.clone(),
                error,
            })?,
            (None, None) => Vec::new(),
        };
        Ok(FlagRequest {
            method,
            headers,
            body,
        })
    }
}

/// How connections reach a target: HTTP/2 and the checking of HTTPS certificates (`run`, and
/// the analysis commands that load one URL).
#[derive(Debug, Clone, Default, Args)]
pub struct ReachFlags {
    /// Speak HTTP/2: ALPN h2 on https:// URLs, prior knowledge (h2c) on http:// ones.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/2 (and gRPC): most requests in flight on each connection, so the closed model
    /// keeps -c × N requests in flight (h2load's -m, oha's -p) [default: 1].
    #[arg(long, value_name = "N", value_parser = positive_count, allow_negative_numbers = true)]
    pub streams: Option<usize>,
    /// HTTPS: trust the CA certificates of this PEM file besides the platform's roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// HTTPS: do not verify the servers' certificates (the output says verification was off);
    /// `-k` as curl's.
    #[arg(short = 'k', long)]
    pub insecure: bool,
}

/// Load flags alone, as an experiment file's workload writes them (`/ping -R 300 -d 10s`).
#[derive(Debug, Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct WorkloadCommand {
    #[command(flatten)]
    flags: LoadFlags,
}

impl LoadFlags {
    /// Parses a workload's words (paths stand for URLs on the topology's front); the message
    /// of a refusal is clap's first line.
    pub fn parse_words(words: &[String]) -> Result<LoadFlags, FlagsError> {
        WorkloadCommand::try_parse_from(words)
            .map(|c| c.flags)
            .map_err(FlagsError::Words)
    }

    /// True when the flags name a scenario file rather than URLs.
    pub fn is_scenario(&self) -> bool {
        self.urls.first().is_some_and(|u| is_scenario(u))
    }
}

/// True when the argument names a scenario file rather than a URL: a word with a scheme
/// (`http://…`) is a URL; a name ending in `.yml`, `.yaml` or `.json` is a script (Artillery
/// runs scripts in YAML and in JSON), and so is any existing file whose content is an
/// Artillery script (a map with `config` or `scenarios`), whatever its name.
pub fn is_scenario(arg: &str) -> bool {
    if arg.contains("://") {
        return false;
    }
    let lower = arg.to_ascii_lowercase();
    if [".yml", ".yaml", ".json"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        return true;
    }
    holds_a_script(std::path::Path::new(arg))
}

/// Largest file read to tell whether it holds a script (scripts are small; a bigger file is
/// not read whole just to find out).
const LARGEST_SCRIPT_PROBED: u64 = 16 << 20;

/// True when `path` is a file whose content parses as a map with `config` or `scenarios`
/// (JSON is read as YAML, of which it is a subset).
fn holds_a_script(path: &std::path::Path) -> bool {
    let small_file =
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= LARGEST_SCRIPT_PROBED);
    if !small_file {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    serde_saphyr::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(&text)
        .is_ok_and(|top| top.contains_key("config") || top.contains_key("scenarios"))
}

/// `url` aimed at `front` (`http://127.0.0.1:PORT`) when it is a path, as an experiment's
/// workloads write their URLs; a full URL is kept.
pub(crate) fn on_front(url: &str, front: &str) -> String {
    if url.starts_with('/') {
        format!("{front}{url}")
    } else {
        url.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder of this test's own under the system's temporary folder.
    fn folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("loadlab-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_script_is_told_by_its_name_or_its_content_and_a_url_stays_a_url() {
        let dir = folder("is-scenario");
        let json = dir.join("hello");
        std::fs::write(
            &json,
            r#"{"config": {"target": "http://127.0.0.1:1"}, "scenarios": [{"flow": [{"get": {"url": "/"}}]}]}"#,
        )
        .unwrap();
        let yaml = dir.join("hello.txt");
        std::fs::write(&yaml, "scenarios:\n  - flow: [{ get: { url: / } }]\n").unwrap();
        let other = dir.join("notes.txt");
        std::fs::write(&other, "just: text\n").unwrap();
        let word = |p: &std::path::Path| p.to_string_lossy().into_owned();
        assert!(is_scenario("hello.json"));
        assert!(is_scenario("hello.yml"));
        assert!(is_scenario("HELLO.YAML"));
        assert!(is_scenario(&word(&json)), "JSON content, no extension");
        assert!(is_scenario(&word(&yaml)), "YAML content, another extension");
        assert!(
            !is_scenario(&word(&other)),
            "a map without config or scenarios"
        );
        assert!(!is_scenario(&word(&dir)), "a folder");
        assert!(!is_scenario("http://127.0.0.1:1/data.json"));
        assert!(!is_scenario("https://example.test/script.yml"));
        assert!(!is_scenario("/ping"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
