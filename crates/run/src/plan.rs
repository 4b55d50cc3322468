//! What to run: targets, the load model, when to stop. Flags and scenario files lower into one
//! [`Plan`]; the engine executes it and nothing else.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::thresholds::Threshold;
use crate::users::UserModel;

use serde::{Deserialize, Serialize};

/// A host and port that connections are opened to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Resolved socket address the engine connects to.
    pub addr: SocketAddr,
    /// `host[:port]` as it goes into the `Host` header.
    pub authority: String,
    /// For an `https://` endpoint, the name the TLS handshake sends (SNI) and checks the
    /// certificate against: the URL's host. `None` for plain HTTP.
    pub tls: Option<String>,
    /// Why the host name did not resolve when the plan was made, for a script's endpoint (its
    /// requests then fail as `unresolved`, nothing is dialled, and the run goes on, as
    /// Artillery's do); `None` when `addr` is the host's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved: Option<String>,
}

/// A private CA's certificates, added to the platform's roots (`--cacert`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaCert {
    /// The file they were read from, for reports.
    pub path: String,
    /// The file's PEM text.
    pub pem: Vec<u8>,
}

/// How connections to `https://` endpoints check the server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TlsSettings {
    /// Extra trusted roots, besides the platform's.
    pub cacert: Option<CaCert>,
    /// Skip certificate verification altogether (`--insecure`); reports say so.
    pub insecure: bool,
}

/// How requests travel on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Protocol {
    /// HTTP/1.1: one request at a time on a connection (or pipelined in the closed model).
    #[default]
    Http1,
    /// HTTP/2 (`--http2`): ALPN `h2` on `https://`, prior knowledge (h2c) on `http://`, with up
    /// to `streams` requests in flight on each connection.
    Http2 {
        /// Most concurrent streams per connection (`--streams`).
        streams: usize,
    },
}

impl Protocol {
    /// Requests one connection carries at once: its streams over HTTP/2, one over HTTP/1.1.
    pub fn streams(self) -> usize {
        match self {
            Protocol::Http1 => 1,
            Protocol::Http2 { streams } => streams,
        }
    }
}

/// One request as the user described it; the engine encodes it once and reuses the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTemplate {
    /// Name for per-request results (the scenario's name, or the URL as given).
    pub name: String,
    /// The URL as given, for reports.
    pub url: String,
    /// Index into [`Plan::endpoints`].
    pub endpoint: usize,
    /// HTTP method, upper case.
    pub method: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Extra headers, in order.
    pub headers: Vec<(String, String)>,
    /// Request body; empty means none.
    pub body: Vec<u8>,
    /// A streaming gRPC call's messages: how the client sends them and which answers are
    /// counted; `None` for any other request (a unary call included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_stream: Option<GrpcStream>,
}

/// How a streaming gRPC call goes: which side streams, and how the client spaces its messages
/// (the request's framed messages in turn, from the first again when there are more to send).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrpcStream {
    /// The client sends a stream of messages (client streaming or bidirectional).
    pub client: bool,
    /// The server answers with a stream of messages (server streaming or bidirectional).
    pub server: bool,
    /// Time between two messages the client sends; `None`: all at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Messages the client sends before it half-closes; `None`: the request's messages once,
    /// or as many as `duration` has room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The client half-closes this long after its first message (sending every `interval`
    /// until then); `None`: after its last message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
}

impl GrpcStream {
    /// Whether the client sends its messages over time rather than all at once.
    pub fn paced(&self) -> bool {
        self.client && (self.interval.is_some() || self.count.is_some() || self.duration.is_some())
    }

    /// The offset from the first message at which the client sends message `k` (from 0), or
    /// `None` when it has sent its last, given the request holds `messages` messages.
    pub fn offset_of(&self, k: u64, messages: usize) -> Option<Duration> {
        let every = self.interval.unwrap_or(Duration::ZERO);
        let offset = every.checked_mul(u32::try_from(k).ok()?)?;
        let within_count = match self.count {
            Some(n) => k < n,
            // A duration alone bounds the messages only when they are spaced.
            None if self.duration.is_some() && !every.is_zero() => true,
            None => k < messages as u64,
        };
        let within_time = self.duration.is_none_or(|d| offset < d);
        (within_count && within_time).then_some(offset)
    }

    /// The time from the client's first message to its half-close, given the request holds
    /// `messages` messages: the duration when one is set, else the last message's offset.
    pub fn sending_span(&self, messages: usize) -> Duration {
        if !self.client {
            return Duration::ZERO;
        }
        if let Some(d) = self.duration {
            return d;
        }
        let last = match self.count {
            Some(n) => n.saturating_sub(1),
            None => (messages as u64).saturating_sub(1),
        };
        let every = self.interval.unwrap_or(Duration::ZERO);
        u32::try_from(last)
            .ok()
            .and_then(|k| every.checked_mul(k))
            .unwrap_or(Duration::MAX)
    }
}

impl RequestTemplate {
    /// Whether it is a gRPC call (`content-type: application/grpc…`), whose answer ends with a
    /// `grpc-status`.
    pub fn is_grpc(&self) -> bool {
        self.headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("content-type")
                && crate::grpc_code::is_grpc_content_type(v.as_bytes())
        })
    }
}

/// How arrivals are spaced in the open model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arrival {
    /// Evenly spaced at the current rate.
    Uniform,
    /// A Poisson process with the current rate (exponential gaps), seeded.
    Poisson,
}

/// A stretch of open-model load: the rate moves linearly from `start_rps` to `end_rps`
/// (equal for a constant rate, both zero for a pause).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePhase {
    /// Name, for per-phase results.
    pub name: String,
    /// Length; `None` only for a constant last phase that lasts until the run stops.
    pub duration: Option<Duration>,
    /// Rate at the start, requests per second.
    pub start_rps: f64,
    /// Rate at the end, requests per second.
    pub end_rps: f64,
    /// Artillery's `maxVusers`: a user arriving in this phase while this many users of the
    /// whole run are in a session is skipped (counted, never queued); `None`: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_users: Option<usize>,
    /// How this phase's arrivals are spaced, when not as the plan's (Artillery's phase
    /// `mode: poisson`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
}

impl RatePhase {
    /// A constant rate for `duration` (or until the run stops).
    pub fn constant(name: &str, rps: f64, duration: Option<Duration>) -> Self {
        RatePhase {
            name: name.into(),
            duration,
            start_rps: rps,
            end_rps: rps,
            max_users: None,
            arrival: None,
        }
    }

    /// A linear ramp over `duration`.
    pub fn ramp(name: &str, from_rps: f64, to_rps: f64, duration: Duration) -> Self {
        RatePhase {
            name: name.into(),
            duration: Some(duration),
            start_rps: from_rps,
            end_rps: to_rps,
            max_users: None,
            arrival: None,
        }
    }

    /// No arrivals for `duration`.
    pub fn pause(name: &str, duration: Duration) -> Self {
        RatePhase::constant(name, 0.0, Some(duration))
    }
}

/// A stretch of closed-model load with virtual users: during the phase the number of users
/// moves to `users`, `spawn_rate` users per second (at once when `None`), and each user runs
/// session after session until the phase's count leaves no room for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserPhase {
    /// Name, for per-phase results.
    pub name: String,
    /// Length.
    pub duration: Duration,
    /// Users running once the phase's ramp is done.
    pub users: usize,
    /// Users started (or stopped) per second on the way there; `None` for all at once.
    pub spawn_rate: Option<f64>,
}

/// What each arrival of the open model starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arrivals {
    /// One request of the plan's round robin, sent over a pool of kept-alive connections.
    Requests {
        /// Connections opened at the start.
        connections: usize,
        /// Connections that may be open at once; past that requests wait.
        max_connections: usize,
    },
    /// One virtual user running one session of the model, with connections of its own.
    Sessions {
        /// What the users do (shared, not copied, by every generator thread).
        users: Arc<UserModel>,
        /// Sessions that may run at once; past that arrivals wait.
        max_sessions: usize,
    },
}

/// The load model, with the parameters that belong to it and no others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Model {
    /// A fixed number of connections, each sending its next request when the last answered.
    Closed {
        /// Keep-alive connections kept busy.
        connections: usize,
        /// HTTP/1.1 requests written back to back on a connection before reading.
        pipeline: usize,
    },
    /// Arrivals scheduled at a rate from a fixed origin, whether or not the server keeps up.
    Open {
        /// The rate over time, phase after phase.
        phases: Vec<RatePhase>,
        /// Spacing of arrivals.
        arrival: Arrival,
        /// Seed of the Poisson arrivals.
        seed: u64,
        /// What each arrival starts: a request, or a user's session.
        arrivals: Arrivals,
    },
    /// A number of virtual users over time, each running the model session after session
    /// (Locust's model; the closed model with users instead of connections).
    Users {
        /// The user count over time, phase after phase.
        phases: Vec<UserPhase>,
        /// What the users do (shared, not copied, by every generator thread).
        users: Arc<UserModel>,
    },
}

impl Model {
    /// The closed model: `connections` kept busy, `pipeline` requests written at a time.
    pub fn closed(connections: usize, pipeline: usize) -> Model {
        Model::Closed {
            connections,
            pipeline,
        }
    }

    /// The open model at a constant `rate_rps` with evenly spaced arrivals, `connections`
    /// opened at the start and at most `max_connections`.
    pub fn open(rate_rps: f64, connections: usize, max_connections: usize) -> Model {
        Model::open_phases(
            vec![RatePhase::constant("main", rate_rps, None)],
            connections,
            max_connections,
        )
    }

    /// The open model over `phases` with evenly spaced arrivals, each a plain request.
    pub fn open_phases(
        phases: Vec<RatePhase>,
        connections: usize,
        max_connections: usize,
    ) -> Model {
        Model::Open {
            phases,
            arrival: Arrival::Uniform,
            seed: 1,
            arrivals: Arrivals::Requests {
                connections,
                max_connections,
            },
        }
    }

    /// `"closed"` or `"open"`, as in `summary.json`.
    pub fn name(&self) -> &'static str {
        match self {
            Model::Closed { .. } | Model::Users { .. } => "closed",
            Model::Open { .. } => "open",
        }
    }

    /// What the virtual users do, when the model runs users rather than plain requests.
    pub fn users(&self) -> Option<&UserModel> {
        match self {
            Model::Users { users, .. }
            | Model::Open {
                arrivals: Arrivals::Sessions { users, .. },
                ..
            } => Some(users),
            _ => None,
        }
    }

    /// Connections (or users, or sessions) open at the start, and at most at once.
    pub fn connection_bounds(&self) -> (usize, usize) {
        match self {
            Model::Closed { connections, .. } => (*connections, *connections),
            Model::Open {
                arrivals:
                    Arrivals::Requests {
                        connections,
                        max_connections,
                    },
                ..
            } => (*connections, *max_connections),
            Model::Open {
                arrivals: Arrivals::Sessions { max_sessions, .. },
                ..
            } => (0, *max_sessions),
            Model::Users { phases, .. } => (0, phases.iter().map(|p| p.users).max().unwrap_or(0)),
        }
    }
}

/// When a run ends: after a duration, after a number of requests, or whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Stop {
    /// Wall-clock length of the run.
    pub duration: Option<Duration>,
    /// Number of requests that end (with a response or an error) before the run stops.
    pub count: Option<u64>,
}

/// Which part of a shared plan a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, from 0.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
    /// Fingerprint of the whole (unsharded) plan: equal for every shard of one plan.
    pub plan_hash: u64,
}

/// Everything the engine needs to run a load test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Where connections go.
    pub endpoints: Vec<Endpoint>,
    /// The requests, sent round-robin.
    pub requests: Vec<RequestTemplate>,
    /// Open or closed model.
    pub model: Model,
    /// When to stop.
    pub stop: Stop,
    /// Longest time a request may take, from its send, before it counts as a timeout.
    pub timeout: Duration,
    /// Longest time a TCP connect may take.
    pub connect_timeout: Duration,
    /// Generator threads, each with its own event loop.
    pub threads: usize,
    /// Connections opened per second, all threads together, while the initial connections
    /// are opened before the load starts.
    pub connect_rate: f64,
    /// Local addresses connections bind to before connecting, taken round-robin; empty for
    /// the system's choice. Each gives its own set of ephemeral ports per destination.
    pub source_addrs: Vec<IpAddr>,
    /// How `https://` endpoints are verified.
    pub tls: TlsSettings,
    /// HTTP/1.1, or HTTP/2 with its streams per connection.
    pub protocol: Protocol,
    /// What the run must meet (`--slo`, a scenario's `ensure`), checked on its summary.
    pub thresholds: Vec<Threshold>,
    /// This run's part of a plan that several generators share (`--shard I/N`); `None` when
    /// it runs the whole plan.
    pub shard: Option<Shard>,
    /// Wall-clock time the schedule starts from (`--start-at`), common to every shard; `None`
    /// to start as soon as the connections are open.
    pub start_at: Option<SystemTime>,
    /// The apdex threshold T, ms (a scenario's `config.apdex` or the apdex plugin's): the
    /// summary scores the latencies against it. `None` without one.
    #[serde(default)]
    pub apdex_ms: Option<f64>,
    /// Open model: how early an arrival may go out to share a wake-up with an earlier one
    /// (`--pacing-slack`); zero sends each at its time. A request sent early counts its
    /// latency from its send.
    #[serde(default)]
    pub pacing_slack: Duration,
    /// The share of requests sent with a W3C `traceparent` and recorded as client spans
    /// (`--trace-sample`); `None` traces none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::Tracing>,
}

/// The defaults every input falls back on (flags, scenario files, experiment workloads, the
/// analysis steps): one table, so a plan means the same whatever it was written in.
pub mod defaults {
    use std::time::Duration;

    /// Closed-model connections when none are given (as wrk and autocannon).
    pub const CONNECTIONS: usize = 10;
    /// Open-model cap on connections (or sessions) open at once.
    pub const MAX_CONNECTIONS: usize = 1000;
    /// Requests written at a time on a closed-model connection.
    pub const PIPELINE: usize = 1;
    /// HTTP/2 streams per connection (h2load's and oha's default).
    pub const STREAMS: usize = 1;
    /// Run length when neither a duration nor a count is given.
    pub const DURATION: Duration = Duration::from_secs(10);
    /// Longest wait for a response, from its send.
    pub const TIMEOUT: Duration = Duration::from_secs(10);
    /// Longest wait for a TCP connect; never longer than the request timeout.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Seed of Poisson arrivals and of virtual users' random choices.
    pub const SEED: u64 = 1;
    /// HTTP method.
    pub const METHOD: &str = "GET";
    /// Initial connections opened per second, all threads together, before the load starts.
    /// wrk opens every connection at once, which at 20,000 overflows a listen backlog (nginx
    /// has 511 by default) and gets connections refused; at 10,000 a second, 1,000
    /// connections open in a tenth of a second and 20,000 in two, and a server that stalls
    /// 50 ms between accepts still sees no more than 500 waiting in its backlog.
    pub const CONNECT_RATE: f64 = 10_000.0;

    /// The connect timeout for a request timeout when none is given.
    pub fn connect_timeout(timeout: Duration) -> Duration {
        CONNECT_TIMEOUT.min(timeout)
    }

    /// Generator threads when none are given: the cores this process may use.
    pub fn threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Highest rate a phase may ask for: more than one machine can send, low enough that the
/// schedule's arithmetic stays exact.
pub const MAX_RATE_RPS: f64 = 10_000_000.0;

/// Longest duration a plan may name (a phase, the run, a timeout, a think time): a year, far
/// past any test, short enough that adding it to a clock reading cannot overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Most messages one streaming gRPC call may send: a million, far past any test's need, so that
/// a call's messages stay countable and in memory.
pub const MAX_STREAM_MESSAGES: u64 = 1_000_000;

/// Most generator threads a plan may ask for.
pub const MAX_THREADS: usize = 1024;
/// Most connections a plan may ask for (each costs a socket and a file descriptor).
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// Most concurrent HTTP/2 streams per connection a plan may ask for (servers advertise 100 to
/// 250; nginx 128).
pub const MAX_STREAMS: usize = 10_000;
/// Most source addresses a plan may name.
pub const MAX_SOURCE_ADDRS: usize = 65_536;
/// Longest pacing slack: past it, arrivals sent together are bursts, not a paced rate.
pub const MAX_PACING_SLACK: Duration = Duration::from_millis(100);

/// A plan that cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    /// A threshold scoped to a request name no request has.
    #[error("a threshold names requests {name:?}, but the requests are named: {names}")]
    UnknownThresholdName {
        /// The name the threshold gave.
        name: String,
        /// The plan's request names, comma-separated.
        names: String,
    },
    /// No request to send.
    #[error("no target URL given")]
    NoTargets,
    /// A count that must be positive is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A rate that is not a finite number from 0 to [`MAX_RATE_RPS`].
    #[error("{0} must be from 0 to 10,000,000 requests per second, got {1}")]
    BadRate(&'static str, f64),
    /// A ramp needs a duration to ramp over.
    #[error("--ramp-to needs a duration (-d) to ramp over")]
    RampWithoutDuration,
    /// No phases, or phases that offer nothing.
    #[error("the open model's phases offer no requests")]
    NoArrivals,
    /// An open-ended phase that is not the last.
    #[error("phase {0:?} has no duration but is not the last phase")]
    OpenEndedPhase(String),
    /// Pipelining only applies to the closed model.
    #[error("pipelining (-p) applies to the closed model only; drop -p or -R")]
    PipelineInOpenModel,
    /// Pipelining is HTTP/1.1's; HTTP/2 multiplexes streams instead.
    #[error("pipelining (-p) is HTTP/1.1's; with --http2 use --streams N for requests in flight per connection")]
    PipelineWithHttp2,
    /// Fewer connections than hosts: some hosts would get no traffic.
    #[error("{connections} connection(s) cannot reach {endpoints} distinct hosts; use -c {endpoints} or more")]
    TooFewConnections {
        /// Connections asked for.
        connections: usize,
        /// Distinct host:port pairs among the targets.
        endpoints: usize,
    },
    /// A count above what one machine can hold.
    #[error("{0} must be at most {1}")]
    TooMany(&'static str, usize),
    /// A duration past [`MAX_DURATION`].
    #[error("{0} is longer than a year; give a shorter one")]
    TooLong(&'static str),
    /// A phase with no length, a bad user count or spawn rate.
    #[error(
        "user phase {0:?} needs a duration above zero and a spawn rate of at least one user a year"
    )]
    BadUserPhase(String),
    /// A pacing slack outside the open model, or longer than [`MAX_PACING_SLACK`].
    #[error("--pacing-slack {0}; give it with -R (or arrival phases), at most 100ms")]
    BadPacingSlack(&'static str),
    /// `--trace-sample` is not a share of the requests.
    #[error("--trace-sample must be a share of the requests between 0 and 1 (got {0}); 0.01 traces one in a hundred")]
    BadTraceSample(f64),
    /// A stream that sends for a time with no interval between its messages.
    #[error("--stream-call-duration needs --stream-interval, the time between the messages sent")]
    StreamDurationWithoutInterval,
    /// A connect rate that is not a finite number above zero.
    #[error("the connect rate (--connect-rate) must be above zero and at most 10,000,000 per second, got {0}")]
    BadConnectRate(f64),
    /// A source address of another family than a target, or one no socket can bind to.
    #[error("source address {source_addr} cannot reach {target}: {why}")]
    BadSourceAddr {
        /// The source address.
        source_addr: IpAddr,
        /// The target it was checked against.
        target: SocketAddr,
        /// What is wrong.
        why: &'static str,
    },
    /// Max connections below initial connections.
    #[error("--max-connections ({max}) is below -c ({initial})")]
    MaxBelowInitial {
        /// Initial connections.
        initial: usize,
        /// Cap.
        max: usize,
    },
}

impl Plan {
    /// A plan of plain `GET path` requests to one address on one thread, with the default
    /// timeouts: what unit tests start from (nothing to resolve). Commands lower their plans
    /// through `loadlab_input` instead.
    pub fn get(addr: SocketAddr, path: &str, model: Model, stop: Stop) -> Plan {
        Plan {
            endpoints: vec![Endpoint {
                addr,
                authority: addr.to_string(),
                tls: None,
                unresolved: None,
            }],
            requests: vec![RequestTemplate {
                name: path.into(),
                url: format!("http://{addr}{path}"),
                endpoint: 0,
                method: "GET".into(),
                path: path.into(),
                headers: Vec::new(),
                body: Vec::new(),
                grpc_stream: None,
            }],
            model,
            stop,
            timeout: defaults::TIMEOUT,
            connect_timeout: defaults::connect_timeout(defaults::TIMEOUT),
            threads: 1,
            connect_rate: defaults::CONNECT_RATE,
            source_addrs: Vec::new(),
            tls: TlsSettings::default(),
            protocol: Protocol::Http1,
            thresholds: Vec::new(),
            shard: None,
            start_at: None,
            apdex_ms: None,
            pacing_slack: Duration::ZERO,
            trace: None,
        }
    }

    /// Fingerprint of what a plan asks of the service, equal on every machine that runs it: the
    /// addresses names resolve to, the thread count, source addresses, the shard and the start
    /// time are left out (they differ between machines or between shards, not between plans).
    /// FNV-1a over the plan's debug form, so one loadlab version gives one value.
    pub fn fingerprint(&self) -> u64 {
        let mut whole = self.clone();
        for e in &mut whole.endpoints {
            e.addr = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        }
        whole.threads = 0;
        whole.source_addrs.clear();
        whole.shard = None;
        whole.start_at = None;
        let text = format!("{whole:?}");
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// Requests pipelined per connection: the closed model's depth, 1 otherwise.
    pub fn pipeline(&self) -> usize {
        match self.model {
            Model::Closed { pipeline, .. } => pipeline,
            _ => 1,
        }
    }

    /// True when an endpoint is `https://`.
    pub fn uses_tls(&self) -> bool {
        self.endpoints.iter().any(|e| e.tls.is_some())
    }

    /// Checks the plan's numbers, once: only a [`ValidPlan`] runs.
    pub fn check(mut self) -> Result<ValidPlan, PlanError> {
        self.validate()?;
        self.scope_thresholds()?;
        Ok(ValidPlan(self))
    }

    /// Checks that each threshold scoped to a request name names one of the plan's requests;
    /// with a single name, a scoped threshold is the whole run's (the summary keeps figures by
    /// name only when there are several).
    fn scope_thresholds(&mut self) -> Result<(), PlanError> {
        let (names, _) = self.request_names();
        for t in &mut self.thresholds {
            let Some(name) = &t.name else { continue };
            if !names.contains(name) {
                return Err(PlanError::UnknownThresholdName {
                    name: name.clone(),
                    names: names.join(", "),
                });
            }
            if names.len() == 1 {
                t.name = None;
            }
        }
        Ok(())
    }

    /// Checks the plan holds together: targets, the generator's bounds, the stop, the model.
    fn validate(&self) -> Result<(), PlanError> {
        // Virtual users whose processor functions send all their traffic need no request of
        // their own.
        if (self.requests.is_empty() || self.endpoints.is_empty()) && self.model.users().is_none() {
            return Err(PlanError::NoTargets);
        }
        self.check_generator()?;
        self.check_stop()?;
        self.check_streams()?;
        self.check_model()
    }

    /// Streaming gRPC calls whose client sends a bounded number of messages, over time.
    fn check_streams(&self) -> Result<(), PlanError> {
        for s in self.requests.iter().filter_map(|r| r.grpc_stream) {
            if s.count.is_some_and(|n| n > MAX_STREAM_MESSAGES) {
                return Err(PlanError::TooMany(
                    "messages a call streams (--stream-call-count)",
                    MAX_STREAM_MESSAGES as usize,
                ));
            }
            if s.interval.is_some_and(|d| d.is_zero()) {
                return Err(PlanError::Zero("the stream interval (--stream-interval)"));
            }
            if s.duration.is_some() && s.interval.is_none() {
                return Err(PlanError::StreamDurationWithoutInterval);
            }
            if s.duration.is_some_and(|d| d > MAX_DURATION) {
                return Err(PlanError::TooLong(
                    "a call's stream (--stream-call-duration)",
                ));
            }
        }
        Ok(())
    }

    /// Threads, connections, connect rate, source addresses, pacing slack, trace sampling and
    /// HTTP/2 streams within their bounds.
    fn check_generator(&self) -> Result<(), PlanError> {
        if self.threads == 0 {
            return Err(PlanError::Zero("threads (-t)"));
        }
        if self.threads > MAX_THREADS {
            return Err(PlanError::TooMany("threads (-t)", MAX_THREADS));
        }
        let (initial, cap) = self.model.connection_bounds();
        if initial.max(cap) > MAX_CONNECTIONS {
            return Err(PlanError::TooMany("connections", MAX_CONNECTIONS));
        }
        if !(self.connect_rate.is_finite()
            && self.connect_rate > 0.0
            && self.connect_rate <= MAX_RATE_RPS)
        {
            return Err(PlanError::BadConnectRate(self.connect_rate));
        }
        self.check_sources()?;
        if !self.pacing_slack.is_zero() {
            if !matches!(self.model, Model::Open { .. }) {
                return Err(PlanError::BadPacingSlack("applies to the open model only"));
            }
            if self.pacing_slack > MAX_PACING_SLACK {
                return Err(PlanError::BadPacingSlack("is too long"));
            }
        }
        if let Some(t) = &self.trace {
            if !(t.sample > 0.0 && t.sample <= 1.0) {
                return Err(PlanError::BadTraceSample(t.sample));
            }
        }
        match self.protocol {
            Protocol::Http2 { streams: 0 } => {
                return Err(PlanError::Zero("streams per connection (--streams)"))
            }
            Protocol::Http2 { streams } if streams > MAX_STREAMS => {
                return Err(PlanError::TooMany(
                    "streams per connection (--streams)",
                    MAX_STREAMS,
                ))
            }
            Protocol::Http2 { .. } => {
                if matches!(self.model, Model::Closed { pipeline, .. } if pipeline > 1) {
                    return Err(PlanError::PipelineWithHttp2);
                }
            }
            Protocol::Http1 => {}
        }
        Ok(())
    }

    /// A count, duration and timeouts that are neither zero nor longer than loadlab runs.
    fn check_stop(&self) -> Result<(), PlanError> {
        if self.stop.count == Some(0) {
            return Err(PlanError::Zero("the request count (-n)"));
        }
        if self.stop.duration == Some(Duration::ZERO) {
            return Err(PlanError::Zero("the duration (-d)"));
        }
        if self.timeout.is_zero() {
            return Err(PlanError::Zero("the timeout (--timeout)"));
        }
        let too_long = |d: Option<Duration>| d.is_some_and(|d| d > MAX_DURATION);
        if too_long(self.stop.duration) {
            return Err(PlanError::TooLong("the duration (-d)"));
        }
        if too_long(Some(self.timeout)) || too_long(Some(self.connect_timeout)) {
            return Err(PlanError::TooLong("a timeout"));
        }
        let phases_long = match &self.model {
            Model::Open { phases, .. } => phases.iter().any(|p| too_long(p.duration)),
            Model::Users { phases, .. } => phases.iter().any(|p| too_long(Some(p.duration))),
            Model::Closed { .. } => false,
        };
        if phases_long || too_long(self.scheduled_duration()) {
            return Err(PlanError::TooLong("a phase, or the phases together,"));
        }
        Ok(())
    }

    /// The load model's own figures: user phases that move, connections for every endpoint,
    /// open phases with finite rates that offer something.
    fn check_model(&self) -> Result<(), PlanError> {
        let endpoints = self.endpoints.len();
        match &self.model {
            Model::Users { phases, .. } => {
                for p in phases {
                    // At least one user per MAX_DURATION: slower would never move.
                    let slowest = 1.0 / MAX_DURATION.as_secs_f64();
                    let rate_ok = p
                        .spawn_rate
                        .is_none_or(|r| r.is_finite() && r >= slowest && r <= MAX_RATE_RPS);
                    if p.duration.is_zero() || !rate_ok {
                        return Err(PlanError::BadUserPhase(p.name.clone()));
                    }
                }
                if !phases.iter().any(|p| p.users > 0) {
                    return Err(PlanError::NoArrivals);
                }
            }
            Model::Closed {
                connections,
                pipeline,
            } => {
                if *connections == 0 {
                    return Err(PlanError::Zero("connections (-c)"));
                }
                if *pipeline == 0 {
                    return Err(PlanError::Zero("the pipeline depth (-p)"));
                }
                if *connections < endpoints {
                    return Err(PlanError::TooFewConnections {
                        connections: *connections,
                        endpoints,
                    });
                }
            }
            Model::Open {
                phases, arrivals, ..
            } => {
                for (i, p) in phases.iter().enumerate() {
                    for r in [p.start_rps, p.end_rps] {
                        if !(r.is_finite() && (0.0..=MAX_RATE_RPS).contains(&r)) {
                            return Err(PlanError::BadRate("a phase's rate", r));
                        }
                    }
                    if p.duration.is_none() {
                        if i + 1 != phases.len() {
                            return Err(PlanError::OpenEndedPhase(p.name.clone()));
                        }
                        if p.start_rps != p.end_rps {
                            return Err(PlanError::RampWithoutDuration);
                        }
                    }
                }
                let offers = phases.iter().any(|p| p.start_rps > 0.0 || p.end_rps > 0.0);
                if !offers {
                    return Err(PlanError::NoArrivals);
                }
                // A last phase with no end and no stop (Artillery's `duration: -1`) runs until
                // the run is stopped, as Artillery runs it.
                let (connections, max_connections) = self.model.connection_bounds();
                if max_connections == 0 {
                    return Err(PlanError::Zero("--max-connections"));
                }
                if max_connections < connections {
                    return Err(PlanError::MaxBelowInitial {
                        initial: connections,
                        max: max_connections,
                    });
                }
                // Sessions open their own connections, to whichever hosts their steps name.
                let pooled = matches!(arrivals, Arrivals::Requests { .. });
                if pooled && max_connections < endpoints {
                    return Err(PlanError::TooFewConnections {
                        connections: max_connections,
                        endpoints,
                    });
                }
            }
        }
        Ok(())
    }

    /// Source addresses must be of each target's family (IPv4 or IPv6), and addresses a
    /// socket can bind to as a source: not unspecified, not multicast or broadcast.
    fn check_sources(&self) -> Result<(), PlanError> {
        if self.source_addrs.len() > MAX_SOURCE_ADDRS {
            return Err(PlanError::TooMany("source addresses", MAX_SOURCE_ADDRS));
        }
        for &source_addr in &self.source_addrs {
            let bad = |why, target| PlanError::BadSourceAddr {
                source_addr,
                target,
                why,
            };
            let target = self.endpoints[0].addr;
            if source_addr.is_unspecified() || source_addr.is_multicast() {
                return Err(bad("it is unspecified or multicast", target));
            }
            if let IpAddr::V4(v4) = source_addr {
                if v4.is_broadcast() {
                    return Err(bad("it is a broadcast address", target));
                }
            }
            for e in &self.endpoints {
                if e.addr.is_ipv4() != source_addr.is_ipv4() {
                    return Err(bad("one is IPv4 and the other IPv6", e.addr));
                }
            }
        }
        Ok(())
    }

    /// When the run ends by its schedule alone: the stop duration, or the phases' total
    /// when every phase has one, whichever is shorter.
    pub fn scheduled_duration(&self) -> Option<Duration> {
        let phases_total = match &self.model {
            Model::Open { phases, .. } => {
                phases.iter().map(|p| p.duration).sum::<Option<Duration>>()
            }
            Model::Users { phases, .. } => Some(phases.iter().map(|p| p.duration).sum()),
            Model::Closed { .. } => None,
        };
        match (self.stop.duration, phases_total) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The phases of the load as (name, start, length) in seconds; the closed model and
    /// open-ended phases have no length of their own.
    pub fn phase_spans(&self) -> Vec<(String, f64, Option<f64>)> {
        match &self.model {
            Model::Closed { .. } => vec![("main".to_string(), 0.0, None)],
            Model::Open { phases, .. } => {
                let mut start = 0.0;
                phases
                    .iter()
                    .map(|p| {
                        let span = (p.name.clone(), start, p.duration.map(|d| d.as_secs_f64()));
                        start += span.2.unwrap_or(0.0);
                        span
                    })
                    .collect()
            }
            Model::Users { phases, .. } => {
                let mut start = 0.0;
                phases
                    .iter()
                    .map(|p| {
                        let span = (p.name.clone(), start, Some(p.duration.as_secs_f64()));
                        start += p.duration.as_secs_f64();
                        span
                    })
                    .collect()
            }
        }
    }

    /// The distinct request names, in first-seen order, and each request's index among them.
    pub fn request_names(&self) -> (Vec<String>, Vec<usize>) {
        let mut names: Vec<String> = Vec::new();
        let index = self
            .requests
            .iter()
            .map(|r| match names.iter().position(|n| *n == r.name) {
                Some(i) => i,
                None => {
                    names.push(r.name.clone());
                    names.len() - 1
                }
            })
            .collect();
        (names, index)
    }

    /// The distinct URLs of the requests, in first-seen order.
    pub fn target_urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = Vec::new();
        for r in &self.requests {
            if !urls.contains(&r.url) {
                urls.push(r.url.clone());
            }
        }
        urls
    }
}

/// A plan whose numbers were checked ([`Plan::check`]): the only kind the engine runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidPlan(Plan);

impl ValidPlan {
    /// The plan itself, to keep with its results.
    pub fn into_inner(self) -> Plan {
        self.0
    }

    /// The same plan tracing as `tracing` says (`--trace-sample`): its share is checked.
    pub fn traced(
        mut self,
        tracing: Option<crate::trace::Tracing>,
    ) -> Result<ValidPlan, PlanError> {
        if let Some(t) = &tracing {
            if !(t.sample > 0.0 && t.sample <= 1.0) {
                return Err(PlanError::BadTraceSample(t.sample));
            }
        }
        self.0.trace = tracing;
        Ok(self)
    }

    /// The same plan, its schedule starting at `at` (a start time changes no number).
    pub fn starting_at(mut self, at: SystemTime) -> ValidPlan {
        self.0.start_at = Some(at);
        self
    }

    /// The run of the users' `before` flow (or with `after`, their `after` flow) alone: one
    /// user, at once, keeping the variables it ends with; `None` when the model has no such
    /// flow.
    pub fn once(&self, after: bool) -> Option<ValidPlan> {
        let users = self.0.model.users()?;
        let flow = if after { &users.after } else { &users.before };
        let flow = flow.as_deref()?;
        let mut plan = self.0.clone();
        // One arrival at the origin, on one thread: a rate of 1/s for 1 s. (A shorter phase
        // can end before the arrival's pacer first runs, and then no user arrives.)
        plan.threads = 1;
        plan.model = Model::Open {
            phases: vec![crate::RatePhase::constant(
                flow.name.as_str(),
                1.0,
                Some(Duration::from_secs(1)),
            )],
            arrival: Arrival::Uniform,
            seed: users.seed,
            arrivals: Arrivals::Sessions {
                users: Arc::new(users.once(flow)),
                max_sessions: 1,
            },
        };
        plan.stop = Stop::default();
        plan.thresholds.clear();
        plan.start_at = None;
        Some(ValidPlan(plan))
    }

    /// The same plan, every user starting with `vars` (what the `before` flow captured or its
    /// functions set) besides its own variables, which keep their per-user values.
    pub fn with_vars(&self, vars: &std::collections::BTreeMap<String, String>) -> ValidPlan {
        let mut plan = self.0.clone();
        let with = |users: &Arc<UserModel>| {
            let mut model = (**users).clone();
            let own: std::collections::HashSet<&str> = users
                .variables
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(
                    users
                        .payloads
                        .iter()
                        .flat_map(|p| p.fields.iter().map(String::as_str)),
                )
                .collect();
            for (k, v) in vars {
                if !k.starts_with('$') && !own.contains(k.as_str()) {
                    model.variables.push((k.clone(), vec![v.clone()]));
                }
            }
            Arc::new(model)
        };
        match &mut plan.model {
            Model::Users { users, .. }
            | Model::Open {
                arrivals: Arrivals::Sessions { users, .. },
                ..
            } => *users = with(users),
            _ => {}
        }
        ValidPlan(plan)
    }
}

impl std::ops::Deref for ValidPlan {
    type Target = Plan;

    fn deref(&self) -> &Plan {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_from(source_addrs: &[&str]) -> Plan {
        Plan {
            source_addrs: source_addrs.iter().map(|a| a.parse().unwrap()).collect(),
            ..Plan::get(
                "127.0.0.1:8080".parse().unwrap(),
                "/",
                Model::closed(10, 1),
                Stop::default(),
            )
        }
    }

    #[test]
    fn loopback_sources_of_the_targets_family_are_accepted() {
        assert!(plan_from(&["127.0.0.2", "127.0.0.3"]).check().is_ok());
        assert!(
            plan_from(&["10.1.2.3"]).check().is_ok(),
            "sources need not be loopback"
        );
    }

    #[test]
    fn a_source_of_another_family_or_unspecified_is_refused() {
        for bad in ["::1", "0.0.0.0", "224.0.0.1", "255.255.255.255"] {
            let e = plan_from(&[bad]).check().unwrap_err();
            assert!(matches!(e, PlanError::BadSourceAddr { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn a_threshold_must_name_a_request_and_one_name_is_the_whole_run() {
        let with = |text: &str| Plan {
            thresholds: Threshold::parse_list(text).unwrap(),
            ..plan_from(&[])
        };
        let e = with("p99{/nope}<1ms").check().unwrap_err();
        assert!(e.to_string().contains("named: /"), "{e}");
        let plan = with("p99{/}<1ms,errors<1%").check().unwrap();
        assert!(plan.thresholds.iter().all(|t| t.name.is_none()));
    }

    #[test]
    fn a_connect_rate_must_be_finite_and_above_zero() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let p = Plan {
                connect_rate: rate,
                ..plan_from(&[])
            };
            assert!(matches!(p.check(), Err(PlanError::BadConnectRate(_))));
        }
    }

    #[test]
    fn a_pacing_slack_is_the_open_models_and_at_most_100ms() {
        let slack = |ms: u64, model: Model| Plan {
            pacing_slack: Duration::from_millis(ms),
            trace: None,
            model,
            stop: Stop {
                duration: Some(Duration::from_secs(1)),
                count: None,
            },
            ..plan_from(&[])
        };
        assert!(slack(1, Model::open(100.0, 1, 10)).check().is_ok());
        assert!(slack(100, Model::open(100.0, 1, 10)).check().is_ok());
        for bad in [
            slack(101, Model::open(100.0, 1, 10)),
            slack(1, Model::closed(1, 1)),
        ] {
            let e = bad.check().unwrap_err();
            assert!(matches!(e, PlanError::BadPacingSlack(_)), "{e}");
            assert!(e.to_string().contains("--pacing-slack"), "{e}");
        }
        assert!(slack(0, Model::closed(1, 1)).check().is_ok());
    }

    #[test]
    fn a_streaming_call_sends_a_bounded_number_of_spaced_messages() {
        let ms = Duration::from_millis;
        let with = |stream: GrpcStream| {
            let mut p = plan_from(&[]);
            p.requests[0].grpc_stream = Some(stream);
            p
        };
        let bidi = GrpcStream {
            client: true,
            server: true,
            ..GrpcStream::default()
        };
        let fine = GrpcStream {
            interval: Some(ms(10)),
            duration: Some(ms(100)),
            ..bidi
        };
        assert!(with(fine).check().is_ok());
        for bad in [
            GrpcStream {
                interval: None,
                ..fine
            },
            GrpcStream {
                interval: Some(Duration::ZERO),
                ..fine
            },
            GrpcStream {
                count: Some(MAX_STREAM_MESSAGES + 1),
                ..bidi
            },
            GrpcStream {
                duration: Some(MAX_DURATION + ms(1)),
                ..fine
            },
        ] {
            let e = with(bad).check().unwrap_err();
            assert!(e.to_string().contains("stream"), "{bad:?}: {e}");
        }
    }
}
