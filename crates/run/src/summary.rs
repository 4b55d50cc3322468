//! `summary.json` (schema `loadlab.summary/v1`): the run in numbers, built from [`RunData`].

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error_kind::{ErrorKind, TlsFailure};
use crate::interval::{us_to_ms, Counts};
use crate::plan::Protocol;
use crate::record::{RunData, StreamTimings, Timings};
use crate::server::ServerData;

/// Functions listed in a summary's profile.
const TOP_FUNCTIONS: usize = 20;

/// The schema name written into every summary.
pub const SUMMARY_SCHEMA: &str = "loadlab.summary/v1";

/// Percentiles and moments of a latency histogram, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyStats {
    /// Smallest value.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// 2.5th percentile.
    pub p2_5: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 97.5th percentile.
    pub p97_5: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Largest value.
    pub max: f64,
}

impl LatencyStats {
    /// Summarizes a histogram of microseconds; all zeros when it is empty.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencyStats::default();
        }
        let q = |q: f64| us_to_ms(h.value_at_quantile(q));
        LatencyStats {
            min: us_to_ms(h.min()),
            mean: h.mean() / 1000.0,
            stdev: h.stdev() / 1000.0,
            p2_5: q(0.025),
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p97_5: q(0.975),
            p99: q(0.99),
            p99_9: q(0.999),
            max: us_to_ms(h.max()),
        }
    }
}

/// Request counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Requests {
    /// Requests sent.
    pub sent: u64,
    /// Requests ended with a response or a transport error.
    pub completed: u64,
    /// Responses with a status below 400.
    pub ok: u64,
    /// Completed requests that were not ok: 4xx/5xx responses and transport errors.
    pub errors: u64,
    /// Requests never sent because no connection freed up within their timeout.
    pub dropped: u64,
    /// Requests still in flight when the run stopped (not in the latency figures).
    pub unfinished: u64,
    /// Responses that refused their request — 429, or 503 with `Retry-After` (a rate limit,
    /// load shed): the service said no rather than serving it. Counted in `errors` too.
    #[serde(default)]
    pub refused: u64,
}

/// Rates over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Throughput {
    /// Completed requests per second.
    pub rps: f64,
    /// Scheduled arrivals per second (open model only); with virtual users, an arrival is a
    /// user starting a session.
    pub offered_rps: Option<f64>,
    /// Response bytes per second.
    pub bytes_per_s: f64,
}

/// Transport errors by kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Errors {
    /// Connection refused.
    pub connect_refused: u64,
    /// Connect timed out.
    pub connect_timeout: u64,
    /// Connection reset by the peer.
    pub reset: u64,
    /// Response not complete within the timeout.
    pub timeout: u64,
    /// Malformed or oversized response.
    pub protocol: u64,
    /// Connection closed before the response was complete.
    pub closed: u64,
    /// TLS handshake failed (why: `tls.failures`).
    #[serde(default)]
    pub tls: u64,
    /// HTTP/2 stream reset by the server (RST_STREAM).
    #[serde(default)]
    pub stream_reset: u64,
    /// HTTP/2 connection shut down by the server (GOAWAY) before the answer.
    #[serde(default)]
    pub goaway: u64,
    /// The host name did not resolve when the run started (scripts' requests to such a host
    /// fail, as Artillery's ENOTFOUND, and the run goes on).
    #[serde(default)]
    pub unresolved: u64,
}

impl Errors {
    /// Each kind with its count, in [`ErrorKind::ALL`] order.
    pub fn by_kind(&self) -> [(ErrorKind, u64); ErrorKind::COUNT] {
        [
            (ErrorKind::ConnectRefused, self.connect_refused),
            (ErrorKind::ConnectTimeout, self.connect_timeout),
            (ErrorKind::Reset, self.reset),
            (ErrorKind::Timeout, self.timeout),
            (ErrorKind::Protocol, self.protocol),
            (ErrorKind::Closed, self.closed),
            (ErrorKind::Tls, self.tls),
            (ErrorKind::StreamReset, self.stream_reset),
            (ErrorKind::GoAway, self.goaway),
            (ErrorKind::Unresolved, self.unresolved),
        ]
    }

    /// The counts of [`ErrorKind::ALL`]'s kinds, in its order.
    pub fn from_kinds(k: &[u64; ErrorKind::COUNT]) -> Self {
        let at = |e: ErrorKind| k[e.index()];
        Errors {
            connect_refused: at(ErrorKind::ConnectRefused),
            connect_timeout: at(ErrorKind::ConnectTimeout),
            reset: at(ErrorKind::Reset),
            timeout: at(ErrorKind::Timeout),
            protocol: at(ErrorKind::Protocol),
            closed: at(ErrorKind::Closed),
            tls: at(ErrorKind::Tls),
            stream_reset: at(ErrorKind::StreamReset),
            goaway: at(ErrorKind::GoAway),
            unresolved: at(ErrorKind::Unresolved),
        }
    }
}

/// Where the requests' time went, as k6 breaks it down, over every response (ms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Breakdown {
    /// TCP connect; zero for a request sent on a connection already open.
    pub connect: LatencyStats,
    /// TLS handshake; zero on a connection already open, and for plain HTTP.
    pub tls: LatencyStats,
    /// Open model: from a request's release by the schedule to a connection taking it (time
    /// spent waiting in the generator for a free connection, k6's `blocked`); zero in the
    /// closed model. The schedule's own lateness is `generator.schedule_lag_ms_p99`.
    #[serde(default)]
    pub queued: LatencyStats,
    /// From the request's write to the first byte of its response (time to first byte).
    pub waiting: LatencyStats,
    /// From the first byte of the response to its last.
    pub receiving: LatencyStats,
    /// Responses whose request opened its connection (the ones with a non-zero connect).
    pub new_connections: u64,
}

impl Breakdown {
    /// The breakdown of a run's timings; `None` when no response was timed (a run read back
    /// from its seconds).
    pub fn from_timings(t: &Timings) -> Option<Self> {
        if t.waiting.is_empty() {
            return None;
        }
        let responses = t.waiting.len();
        // Requests on connections already open count as zeros, as k6 counts them.
        let with_zeros = |h: &Histogram<u64>| {
            let mut all = h.clone();
            all.saturating_record_n(0, responses.saturating_sub(h.len()));
            LatencyStats::from_histogram(&all)
        };
        Some(Breakdown {
            connect: with_zeros(&t.connect),
            tls: with_zeros(&t.tls),
            queued: with_zeros(&t.queued),
            waiting: LatencyStats::from_histogram(&t.waiting),
            receiving: LatencyStats::from_histogram(&t.receiving),
            new_connections: t.connect.len(),
        })
    }
}

/// What streaming gRPC calls' messages did, over the streaming calls answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GrpcStreams {
    /// Streaming calls answered (whatever their status).
    pub calls: u64,
    /// Messages their clients sent.
    pub messages_sent: u64,
    /// Messages their servers answered with.
    pub messages_received: u64,
    /// Answered messages a second, over the run.
    pub messages_received_per_s: f64,
    /// From each call's intended start to its first answered message (ms); absent when no
    /// call was answered with a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_ms: Option<LatencyStats>,
    /// Bidirectional calls: from each message sent to its answer, the k-th answer taken as
    /// the k-th message's (ms); absent when no such call was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_ms: Option<LatencyStats>,
}

impl GrpcStreams {
    /// The account of `t` over a run of `secs` seconds; `None` when no streaming call was
    /// answered.
    pub fn of(t: &StreamTimings, secs: f64) -> Option<Self> {
        let stats = |h: &Histogram<u64>| (!h.is_empty()).then(|| LatencyStats::from_histogram(h));
        (t.calls > 0).then(|| GrpcStreams {
            calls: t.calls,
            messages_sent: t.messages_sent,
            messages_received: t.messages_received,
            messages_received_per_s: t.messages_received as f64 / secs,
            first_message_ms: stats(&t.first_message),
            reply_ms: stats(&t.replies),
        })
    }
}

/// How `https://` targets were reached (runs with at least one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tls {
    /// False when certificate verification was off (`--insecure`).
    pub verify: bool,
    /// The private CA file added to the platform's roots (`--cacert`), if any.
    pub cacert: Option<String>,
    /// Failed handshakes by cause (`unknown_issuer`, `name_mismatch`, `expired`, ...).
    pub failures: BTreeMap<String, u64>,
}

/// How an HTTP/2 run (`--http2`) used its connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Http2 {
    /// Most concurrent streams per connection (`--streams`).
    pub streams: usize,
    /// Connections opened during the run (the initial ones and reconnects).
    pub connections: u64,
    /// True for cleartext HTTP/2 (h2c, prior knowledge) on `http://` targets.
    pub cleartext: bool,
}

/// The generator's account of itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Generator {
    /// CPU seconds (user + system) the generator used during the load (not the connects before it).
    pub cpu_s: f64,
    /// Peak resident memory, MB.
    pub max_rss_mb: f64,
    /// 99th percentile of how late arrivals were released (open model), ms.
    pub schedule_lag_ms_p99: f64,
    /// True when a generator thread was busy most of the run.
    pub saturated: bool,
    /// Threads used.
    pub threads: usize,
    /// Plain-language warnings about the generator's own limits.
    pub warnings: Vec<String>,
    /// How the initial connections were opened, before the load (not in any latency).
    #[serde(default)]
    pub connect: Connect,
    /// CPU seconds the Node.js helpers of the script's processor used (their start
    /// included), beside the generator's own `cpu_s`; absent without a processor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor_cpu_s: Option<f64>,
    /// How evenly the open model's arrivals went out; absent in the other models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<Pacing>,
}

/// How evenly the open model's arrivals went out, and the slack they were allowed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Pacing {
    /// How early an arrival could go out to share a wake-up with an earlier one
    /// (`--pacing-slack`), ms; 0 sends each at its time.
    pub slack_ms: f64,
    /// The RMS difference between each gap between two consecutive sends of a generator
    /// thread and the schedule's gap between the same arrivals, over the mean scheduled gap:
    /// 0 for exact pacing; for evenly spaced arrivals at a constant rate, the gaps'
    /// coefficient of variation as the server sees them.
    pub arrival_gap_cv: f64,
}

/// The opening of the initial connections, paced, before the load started: its time is in no
/// request's latency and not in `duration_s`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Connect {
    /// Initial connections asked for.
    pub connections: u64,
    /// Connections opened.
    pub opened: u64,
    /// Connections that could not be opened (each tried again at its first request).
    pub failed: u64,
    /// Time from the first connect to the last, seconds.
    pub duration_s: f64,
    /// Connect rate asked for, connections per second.
    pub rate_per_s: f64,
    /// Local addresses the connections were bound to, round-robin (empty: the system's choice).
    pub source_addrs: Vec<String>,
    /// Open files the process could hold (the soft RLIMIT_NOFILE, raised when the run needed it).
    pub file_limit: u64,
}

/// One phase of the load (a plain run has a single phase).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Phase {
    /// Phase name.
    pub name: String,
    /// Start, seconds from the origin.
    pub start_s: f64,
    /// Length, seconds.
    pub duration_s: f64,
    /// Offered rate (open model).
    pub offered_rps: Option<f64>,
    /// Achieved rate.
    pub rps: f64,
    /// Latency from the intended start.
    pub latency_ms: LatencyStats,
}

/// Results of the requests of one name (a scenario, or a URL).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedRequests {
    /// Requests ended with a response or a transport error.
    pub completed: u64,
    /// Responses with a status below 400.
    pub ok: u64,
    /// Completed requests that were not ok.
    pub errors: u64,
    /// Responses by status code.
    pub status: BTreeMap<String, u64>,
    /// gRPC calls by the status they ended with, when the name made any.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc: BTreeMap<String, u64>,
    /// Latency from the intended start.
    pub latency_ms: LatencyStats,
}

/// What the virtual users did (runs with scenarios of flows or user models).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Users {
    /// Sessions started.
    pub started: u64,
    /// Sessions that ran to their end.
    pub completed: u64,
    /// Sessions ended early (transport error, failed expectation, failed capture).
    pub failed: u64,
    /// Why sessions failed, with counts.
    pub failures: BTreeMap<String, u64>,
    /// `expect` checks that failed, by check and request (e.g. `expect statusCode on GET /a`),
    /// with counts (whether or not the failure ended its session); the totals are the
    /// counters `plugins.expect.ok` and `plugins.expect.failed` in `metrics`, as Artillery
    /// names them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks_failed: BTreeMap<String, u64>,
    /// Most users in a session at once (at a second's end).
    pub max_active: u64,
    /// Length of the sessions that ended.
    pub session_ms: LatencyStats,
    /// Static resources fetched on users' first visits to pages.
    pub static_fetched: u64,
    /// Resources pages named but that were not fetched (another host, or not a URL).
    pub static_skipped: u64,
    /// Users who arrived while their phase's `maxVusers` were in a session, and were skipped
    /// (Artillery's `vusers.skipped`); absent when none was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// Sessions started, by scenario name (Artillery's `vusers.created_by_name.NAME`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub started_by_scenario: BTreeMap<String, u64>,
    /// Metrics the script's processor functions emitted; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<CustomSummary>,
    /// The exit code the script's processor suggested (`artillery.suggestedExitCode = N` in a
    /// function), which `run` exits with as Artillery does; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_exit_code: Option<i32>,
    /// The error of a processor function that threw where Artillery's worker dies of it (an
    /// `afterResponse` hook, a function called once its step waited on I/O): the run ended
    /// there and exits 11, as Artillery does; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed: Option<String>,
}

/// The apdex score of a run's latencies against a threshold T, as Artillery's apdex plugin
/// scores them: satisfied at most T, tolerated at most 4T, frustrated beyond (and failed
/// requests, which have no latency, are left out as the plugin leaves them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Apdex {
    /// T, ms.
    pub threshold_ms: f64,
    /// (satisfied + tolerated / 2) / all, 0–1.
    pub score: f64,
    /// The plugin's words for the score: excellent (≥ 0.94), good (≥ 0.85), fair (≥ 0.7),
    /// poor (≥ 0.49), unacceptable.
    pub ranking: String,
    /// Requests answered within T.
    pub satisfied: u64,
    /// Requests answered within 4T, past T.
    pub tolerated: u64,
    /// Requests answered past 4T.
    pub frustrated: u64,
}

impl Apdex {
    /// The score of the latencies in `latency` (µs) against `threshold_ms`; `None` without
    /// any latency.
    pub fn of(latency: &Histogram<u64>, threshold_ms: f64) -> Option<Apdex> {
        let total = latency.len();
        if total == 0 {
            return None;
        }
        let t_us = (threshold_ms * 1000.0).round() as u64;
        let within = |us: u64| latency.count_between(0, us.min(latency.max()));
        let satisfied = within(t_us);
        let tolerated = within(t_us.saturating_mul(4)).saturating_sub(satisfied);
        let frustrated = total.saturating_sub(satisfied + tolerated);
        let score = (satisfied as f64 + tolerated as f64 / 2.0) / total as f64;
        let ranking = match score {
            s if s >= 0.94 => "excellent",
            s if s >= 0.85 => "good",
            s if s >= 0.7 => "fair",
            s if s >= 0.49 => "poor",
            _ => "unacceptable",
        };
        Some(Apdex {
            threshold_ms,
            score,
            ranking: ranking.into(),
            satisfied,
            tolerated,
            frustrated,
        })
    }
}

/// Metrics a script's processor functions emitted, over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomSummary {
    /// Counters: the sum of what was emitted, by name.
    pub counters: BTreeMap<String, f64>,
    /// Rates: times emitted per second of the run, by name.
    pub rates: BTreeMap<String, f64>,
    /// Histograms of the values emitted, in the unit they were emitted in, by name.
    pub histograms: BTreeMap<String, CustomHistogram>,
}

/// One emitted histogram.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomHistogram {
    /// Values emitted.
    pub count: u64,
    /// Their statistics, in the unit they were emitted in.
    #[serde(flatten)]
    pub stats: LatencyStats,
}

impl CustomSummary {
    /// The summary of `m` over a run of `secs` seconds; `None` when nothing was emitted.
    pub fn of(m: &crate::record::CustomMetrics, secs: f64) -> Option<CustomSummary> {
        if m.is_empty() {
            return None;
        }
        Some(CustomSummary {
            counters: m.counters.clone(),
            rates: m
                .rates
                .iter()
                .map(|(k, n)| (k.clone(), *n as f64 / secs.max(1e-9)))
                .collect(),
            histograms: m
                .histograms
                .iter()
                .map(|(k, h)| {
                    (
                        k.clone(),
                        CustomHistogram {
                            count: h.len(),
                            stats: LatencyStats::from_histogram(h),
                        },
                    )
                })
                .collect(),
        })
    }
}

/// One watched process of the service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerProcess {
    /// Command name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Mean CPU over the run's readings, percent of one core (the readings it missed, having
    /// started late or ended early as an autoscaled instance, count 0, so the processes'
    /// means add up to the service's).
    pub cpu_pct_avg: f64,
    /// Highest one-second CPU, percent of one core.
    pub cpu_pct_max: f64,
    /// Mean time its threads were runnable but waiting for a CPU, percent of one core (the
    /// machine's other work took it); with `cpu_pct_avg`, the CPU it wanted.
    #[serde(default)]
    pub cpu_wait_pct_avg: f64,
    /// Highest resident memory, MB.
    pub rss_mb_max: f64,
}

/// Where the service's CPU went while the load was on (`profile.folded` and `flame.svg` in
/// the run directory hold the whole profile).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileSummary {
    /// What recorded the stacks: `perf`, `v8`, `py-spy`.
    pub backend: String,
    /// The processes sampled.
    pub pids: Vec<u32>,
    /// When sampling began, seconds from the run's origin.
    pub start_s: f64,
    /// How long it sampled.
    pub duration_s: f64,
    /// Stacks sampled.
    pub samples: u64,
    /// The functions with the most samples on top of the stack.
    pub top: Vec<crate::profile::TopFunction>,
    /// Why there is no profile, and what to do, when the backend could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What one backend could not do while another recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ProfileSummary {
    /// The summary of a profiling outcome, with its `top` functions.
    pub fn from_outcome(outcome: &crate::profile::ProfileOutcome, top: usize) -> ProfileSummary {
        match outcome {
            crate::profile::ProfileOutcome::Recorded(p) => ProfileSummary {
                backend: p.backend.clone(),
                pids: p.pids.clone(),
                start_s: p.start_s,
                duration_s: p.duration_s,
                samples: p.samples(),
                top: p.top_functions(top),
                error: None,
                notes: p.notes.clone(),
            },
            crate::profile::ProfileOutcome::Failed { backend, reason } => ProfileSummary {
                backend: backend.clone(),
                error: Some(reason.clone()),
                ..ProfileSummary::default()
            },
        }
    }
}

/// A threshold checked against a run, as `summary.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThresholdResult {
    /// The threshold as text, normalized (`p99<300ms`, `errors{login}<1%`).
    pub threshold: String,
    /// The metric's name (`p99`, `mean`, `errors`, `rps`).
    pub metric: String,
    /// The request name it is scoped to; absent for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How the measured value had to compare with the limit: `<`, `<=`, `>` or `>=`.
    pub comparison: String,
    /// The limit, in `unit`.
    pub limit: f64,
    /// `ms`, `%` or `req/s`.
    pub unit: String,
    /// What the run measured; absent when there was nothing to measure (see `reason`).
    pub measured: Option<f64>,
    /// True when the measured value met the limit.
    pub pass: bool,
    /// A failure here fails the run (its exit code); false only reports it.
    pub strict: bool,
    /// Why nothing was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ThresholdResult {
    /// True when this result fails the run: strict and not passed.
    pub fn fails_run(&self) -> bool {
        self.strict && !self.pass
    }

    /// The measured value with its unit, or why there is none.
    pub fn measured_text(&self) -> String {
        match (self.measured, &self.reason) {
            (Some(v), _) if self.unit == "ms" => format!("{v:.2} ms"),
            (Some(v), _) if self.unit == "%" => format!("{v:.2} %"),
            (Some(v), _) => format!("{v:.1} {}", self.unit),
            (None, Some(why)) => why.clone(),
            (None, None) => "not measured".into(),
        }
    }
}

/// One stream (queue) of a watched store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerStream {
    /// The stream's key.
    pub name: String,
    /// Most entries it held at a reading.
    pub length_max: u64,
    /// Entries delivered to its consumer group but not acknowledged, at the last reading.
    pub pending_end: u64,
    /// Most entries waiting for the consumer group (not yet delivered) at a reading.
    pub lag_max: u64,
    /// Entries waiting for the consumer group at the last reading: a backlog still there
    /// when the load ended.
    pub lag_end: u64,
}

/// One watched store (a Redis server).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerStore {
    /// What it is: `redis 127.0.0.1:PORT`.
    pub name: String,
    /// Mean commands per second.
    pub commands_per_s_avg: f64,
    /// Highest one-second commands per second.
    pub commands_per_s_max: f64,
    /// Highest memory used, MB.
    pub memory_mb_max: f64,
    /// Most clients connected at a reading.
    pub clients_max: u64,
    /// Its streams with a consumer group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<ServerStream>,
}

/// The service's processes (and stores) as the lab saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Server {
    /// One entry per process.
    pub processes: Vec<ServerProcess>,
    /// The whole host's mean CPU over the same seconds, every process's together (the
    /// generator's, the watched ones', and any other's), percent of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_pct_avg: Option<f64>,
    /// One entry per watched store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<ServerStore>,
    /// One entry per control group with a budget (a replica, the balancer, the store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<ServerBudget>,
    /// The cores the service's processes and the generator ran on, when the lab gave each
    /// cores of their own (the budgets left whole cores free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<ServerCores>,
}

pub use crate::server::ServerCores;

/// What one budgeted group (a replica's processes together) used against its budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerBudget {
    /// Whose group: `replica 1`, `service`, `nginx`, `redis-server`, `consumer 1`.
    pub name: String,
    /// Its CPU quota, CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Its memory limit, MB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<f64>,
    /// CPU it used over the run, percent of one core.
    pub cpu_pct_avg: f64,
    /// CPU it used over the run, percent of its quota (with a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_used_pct: Option<f64>,
    /// CFS periods it ran in.
    pub periods: u64,
    /// Percent of those periods in which it was throttled (stopped until the next period for
    /// having used its quota).
    pub throttled_pct: f64,
    /// Time its threads spent throttled, seconds.
    pub throttled_s: f64,
    /// Most memory charged to it, MB.
    pub memory_peak_mb: f64,
    /// Its processes the kernel's OOM killer ended.
    pub oom_kills: u64,
    /// Second of the run by which its first OOM kill was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_second: Option<u64>,
    /// The processes seen in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
}

impl ServerBudget {
    /// The summary of a group's readings: its totals when it has them, else its series.
    pub fn from_series(g: &crate::server::GroupSeries) -> ServerBudget {
        let n = g.samples.len().max(1) as f64;
        let sampled_cpu = g.samples.iter().map(|s| s.cpu_pct).sum::<f64>() / n;
        let sampled_peak = g.samples.iter().map(|s| s.memory_mb).fold(0.0, f64::max);
        let t = g.totals.unwrap_or_default();
        let cpu_pct_avg = match g.totals {
            Some(t) if t.wall_s > 0.0 => 100.0 * t.cpu_s / t.wall_s,
            _ => sampled_cpu,
        };
        ServerBudget {
            name: g.name.clone(),
            cpus: g.cpus,
            memory_limit_mb: g.memory_bytes.map(|b| b as f64 / (1024.0 * 1024.0)),
            cpu_pct_avg,
            quota_used_pct: g.cpus.map(|c| cpu_pct_avg / c),
            periods: t.periods,
            throttled_pct: match t.periods {
                0 => 0.0,
                p => 100.0 * t.throttled_periods as f64 / p as f64,
            },
            throttled_s: t.throttled_s,
            memory_peak_mb: t.memory_peak_mb.max(sampled_peak),
            oom_kills: t.oom_kills,
            oom_second: t.first_oom_second,
            pids: g.pids.clone(),
        }
    }
}

impl ServerStore {
    /// The summary of a store's readings.
    pub fn from_series(s: &crate::server::StoreSeries) -> ServerStore {
        let n = s.samples.len().max(1) as f64;
        let mut streams: Vec<ServerStream> = Vec::new();
        for q in s.samples.iter().flat_map(|x| &x.streams) {
            let i = match streams.iter().position(|x| x.name == q.stream) {
                Some(i) => i,
                None => {
                    streams.push(ServerStream {
                        name: q.stream.clone(),
                        ..ServerStream::default()
                    });
                    streams.len() - 1
                }
            };
            let e = &mut streams[i];
            e.length_max = e.length_max.max(q.length);
            e.lag_max = e.lag_max.max(q.lag.unwrap_or(0));
            // Readings come in time order, so the last one seen is the end.
            e.pending_end = q.pending;
            e.lag_end = q.lag.unwrap_or(0);
        }
        ServerStore {
            name: s.name.clone(),
            commands_per_s_avg: s.samples.iter().map(|x| x.commands_per_s).sum::<f64>() / n,
            commands_per_s_max: s
                .samples
                .iter()
                .map(|x| x.commands_per_s)
                .fold(0.0, f64::max),
            memory_mb_max: s.samples.iter().map(|x| x.memory_mb).fold(0.0, f64::max),
            clients_max: s.samples.iter().map(|x| x.clients).max().unwrap_or(0),
            streams,
        }
    }
}

/// One thing the analysis noticed about a run, in a sentence, with the numbers behind it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// What kind of finding: `errors`, `saturation`, `rising_latency`, `climbing_in_flight`,
    /// `littles_law`, `service_demand`, `generator`, `spike_recovery`.
    pub kind: String,
    /// The sentence.
    pub message: String,
    /// What to look at or try next.
    #[serde(default)]
    pub next: String,
    /// The numbers behind it, by name.
    #[serde(default)]
    pub values: BTreeMap<String, f64>,
}

/// Which part of a shared plan a run was (`--shard I/N`), and its share of the load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShardSummary {
    /// This shard, from 0.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
    /// This shard's closed-model connections (or open-model initial connections).
    pub connections: usize,
    /// This shard's cap on connections (or sessions, or users) open at once.
    pub max_connections: usize,
    /// Requests pipelined per connection (closed model).
    pub pipeline: usize,
}

/// When the schedule was asked to start (`--start-at`) and when it did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StartSummary {
    /// The start time asked for, RFC 3339.
    pub requested: String,
    /// How much later than asked the schedule's origin was, ms (negative: earlier).
    pub offset_ms: f64,
}

/// One shard of a merged run, as its own summary saw it: the generator's health.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MergedShard {
    /// The shard's index.
    pub index: usize,
    /// The run directory it came from.
    pub dir: String,
    /// Requests it sent.
    pub sent: u64,
    /// Requests it dropped.
    pub dropped: u64,
    /// Its start offset from `--start-at`, ms, when it had one.
    pub start_offset_ms: Option<f64>,
    /// Its p99 schedule lag, ms.
    pub schedule_lag_ms_p99: f64,
    /// Its generator's CPU seconds.
    pub cpu_s: f64,
    /// True when a generator thread of it was busy most of the run.
    pub saturated: bool,
    /// True when this shard, not the service, limited the load (saturated, late on its
    /// schedule, or dropping requests the others did not).
    pub bottleneck: bool,
}

/// Where a merged run came from (`loadlab merge`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MergeSummary {
    /// Shards the plan was split into.
    pub count: usize,
    /// The shards merged, by index.
    pub shards: Vec<MergedShard>,
    /// Shards of the plan that were not merged.
    pub missing: Vec<usize>,
}

/// `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// Always [`SUMMARY_SCHEMA`].
    pub schema: String,
    /// False when the run was interrupted.
    pub complete: bool,
    /// `"closed"` or `"open"`.
    pub model: String,
    /// Target URLs.
    pub targets: Vec<String>,
    /// RFC 3339 time of the run's origin.
    pub started_at: String,
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// Request counts.
    pub requests: Requests,
    /// Rates.
    pub throughput: Throughput,
    /// Latency from the intended start (equal to the send time in the closed model).
    pub latency_ms: LatencyStats,
    /// Latency of the requests the service answered, the refused ones (`requests.refused`)
    /// left out: what being served took. Only when some were refused (and not in merged runs,
    /// whose shards keep no histogram of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_latency_ms: Option<LatencyStats>,
    /// Latency from the actual send.
    pub service_latency_ms: LatencyStats,
    /// Responses by status code.
    pub status: BTreeMap<String, u64>,
    /// gRPC calls by the status they ended with (`OK`, `UNAVAILABLE`…), when the run made any;
    /// their HTTP statuses are in `status` too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc: BTreeMap<String, u64>,
    /// Streaming gRPC calls' messages, when the run made any such call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_streams: Option<GrpcStreams>,
    /// Transport errors by kind.
    pub errors: Errors,
    /// The generator's own resource use.
    pub generator: Generator,
    /// Phases of the load.
    pub phases: Vec<Phase>,
    /// The service's processes, when the lab watched them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Server>,
    /// Results per request name, when the run had more than one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests_by_name: BTreeMap<String, NamedRequests>,
    /// Virtual users' sessions, when the run had a user model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Users>,
    /// The apdex score against the scenario's threshold, when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apdex: Option<Apdex>,
    /// Where the requests' time went: connect, TLS handshake, waiting, receiving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings_ms: Option<Breakdown>,
    /// How `https://` targets were reached, when the run had any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
    /// HTTP/2's streams and connections, when the run used it (`--http2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2>,
    /// What the analysis noticed, one sentence each.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The service's CPU profile, when one was asked for (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileSummary>,
    /// The run's thresholds (`--slo`, a scenario's `ensure`), each checked against this
    /// summary; absent when none were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdResult>,
    /// Fingerprint of the plan (16 hex digits), equal for every shard of one plan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan_hash: String,
    /// The shard this run was (`--shard I/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardSummary>,
    /// The start time asked for and the one achieved (`--start-at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartSummary>,
    /// The shards this run was merged from (`loadlab merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeSummary>,
    /// The requests sampled for tracing (`--trace-sample`), with the slowest's trace IDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<Traces>,
    /// What an autoscaled topology did: its instances, its decisions, what its scaling cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<Autoscaling>,
}

/// An autoscaled topology's account of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Autoscaling {
    /// `hpa` or `kpa`.
    pub policy: String,
    /// `cpu`, `concurrency` or `rps`.
    pub metric: String,
    /// Fewest instances.
    pub min: u32,
    /// Most instances.
    pub max: u32,
    /// Ready instances in the run's first second.
    pub ready_first: u32,
    /// Most instances ready at once.
    pub ready_most: u32,
    /// Ready instances in the run's last second.
    pub ready_last: u32,
    /// Instance-seconds paid for: every instance started, ready or draining, each second.
    pub instance_seconds: f64,
    /// Of them, ready instances that served next to nothing.
    pub idle_instance_seconds: f64,
    /// Seconds the run's scaling record covers.
    #[serde(default)]
    pub seconds: u64,
    /// Of them, seconds in which at least one ready instance served next to nothing (the
    /// others had room for every request).
    #[serde(default)]
    pub idle_seconds: u64,
    /// Requests held at the balancer for an instance with room, then served.
    pub requests_waited: u64,
    /// Their mean wait, ms.
    pub wait_ms_mean: f64,
    /// Requests answered 429 after waiting the hold timeout.
    pub requests_refused: u64,
    /// The cold starts of the instances that joined during the run, ms: the mean.
    pub cold_start_ms_mean: Option<f64>,
    /// The longest.
    pub cold_start_ms_max: Option<f64>,
    /// Each change of the instance count wanted.
    pub decisions: Vec<crate::scaling::ScaleDecision>,
}

impl Autoscaling {
    /// The account of `data`.
    pub fn of(data: &crate::scaling::ScalingData) -> Self {
        let s = &data.seconds;
        let waited: u64 = s.iter().map(|x| x.waited).sum();
        let wait_s: f64 = s.iter().map(|x| x.wait_s).sum();
        let colds: Vec<f64> = data
            .instances
            .iter()
            .filter(|i| i.started_s >= 0.0)
            .filter_map(|i| i.cold_start_s.map(|c| c * 1000.0))
            .collect();
        Autoscaling {
            policy: data.policy.clone(),
            metric: data.metric.clone(),
            min: data.min,
            max: data.max,
            ready_first: s.first().map_or(0, |x| x.ready),
            ready_most: s.iter().map(|x| x.ready).max().unwrap_or(0),
            ready_last: s.last().map_or(0, |x| x.ready),
            instance_seconds: data.instance_seconds(),
            idle_instance_seconds: s.iter().map(|x| f64::from(x.idle)).sum(),
            seconds: s.len() as u64,
            idle_seconds: s.iter().filter(|x| x.idle > 0).count() as u64,
            requests_waited: waited,
            wait_ms_mean: if waited == 0 {
                0.0
            } else {
                1000.0 * wait_s / waited as f64
            },
            requests_refused: s.iter().map(|x| x.refused).sum(),
            cold_start_ms_mean: (!colds.is_empty())
                .then(|| colds.iter().sum::<f64>() / colds.len() as f64),
            cold_start_ms_max: colds.iter().copied().reduce(f64::max),
            decisions: data.decisions.clone(),
        }
    }
}

/// The requests a run sampled for tracing: to look up in a tracing backend by trace ID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Traces {
    /// The share of requests sampled.
    pub sample: f64,
    /// Requests sampled (each sent with a `traceparent`, its client span exported).
    pub sampled: u64,
    /// The slowest sampled requests, slowest first.
    pub slowest: Vec<SlowRequest>,
}

/// One of the slowest sampled requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlowRequest {
    /// Its trace ID (32 hex digits).
    pub trace_id: String,
    /// Its client span's ID (16 hex digits).
    pub span_id: String,
    /// Its request name.
    pub name: String,
    /// Its method.
    pub method: String,
    /// Latency from the intended start, ms.
    pub latency_ms: f64,
    /// The response's status; absent when it failed without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The transport error it failed with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// RFC 3339 time it was sent.
    pub sent_at: String,
}

/// The run's sampled requests as the summary lists them; `None` when the plan traced none.
fn traces_of(run: &RunData) -> Option<Traces> {
    let tracing = run.plan.trace.as_ref()?;
    let (names, index) = run.plan.request_names();
    let method = |name: usize| {
        index
            .iter()
            .position(|&i| i == name)
            .map_or(String::new(), |r| run.plan.requests[r].method.clone())
    };
    let slowest = run
        .traces
        .slowest
        .iter()
        .map(|s| SlowRequest {
            trace_id: s.trace_id.clone(),
            span_id: s.span_id.clone(),
            name: names.get(s.name).cloned().unwrap_or_default(),
            method: method(s.name),
            latency_ms: s.latency_ms(),
            status: s.status,
            error: s.error.clone(),
            sent_at: humantime::format_rfc3339_micros(
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(s.sent_ns),
            )
            .to_string(),
        })
        .collect();
    Some(Traces {
        sample: tracing.sample,
        sampled: run.traces.sampled,
        slowest,
    })
}

/// The latency of the answered requests: `all` without the `refused` ones; `None` when none
/// was refused (or the histograms do not nest, as a run cut short may leave them).
fn answered_latency(all: &Histogram<u64>, refused: &Histogram<u64>) -> Option<LatencyStats> {
    if refused.is_empty() {
        return None;
    }
    let mut answered = all.clone();
    answered.subtract(refused).ok()?;
    Some(LatencyStats::from_histogram(&answered))
}

impl Summary {
    /// Responses below 400 per second: the completed requests' rate, scaled by their ok share
    /// (a pipelined connection a server closes completes its requests as errors, which are no
    /// throughput).
    pub fn ok_rps(&self) -> f64 {
        if self.requests.completed == 0 {
            return 0.0;
        }
        self.throughput.rps * self.requests.ok as f64 / self.requests.completed as f64
    }

    /// The numbers of a run; the judgments (the generator's health, findings, thresholds) are
    /// the analysis's to add (`loadlab_analyze::summarize`).
    pub fn from_run(run: &RunData) -> Self {
        let t = &run.totals;
        let c = &t.counts;
        let secs = run.secs();
        let rps = c.completed as f64 / secs;
        let offered_rps = run.offered_rps();
        let latency = LatencyStats::from_histogram(&t.latency);
        let k = &run.generator.connect;
        let tls = run.plan.uses_tls().then(|| tls_summary(run));
        Summary {
            schema: SUMMARY_SCHEMA.into(),
            complete: run.complete,
            model: run.plan.model.name().into(),
            targets: run.plan.target_urls(),
            started_at: humantime::format_rfc3339_millis(run.started_at).to_string(),
            duration_s: secs,
            requests: Requests {
                sent: c.sent,
                completed: c.completed,
                ok: c.ok,
                errors: c.errors(),
                dropped: c.dropped,
                unfinished: run.unfinished,
                refused: c.refused,
            },
            throughput: Throughput {
                rps,
                offered_rps,
                bytes_per_s: c.bytes as f64 / secs,
            },
            latency_ms: latency,
            answered_latency_ms: answered_latency(&t.latency, &run.timings.refused),
            apdex: run.plan.apdex_ms.and_then(|ms| Apdex::of(&t.latency, ms)),
            service_latency_ms: LatencyStats::from_histogram(&t.service),
            status: c
                .statuses()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            grpc: grpc_codes(c),
            grpc_streams: GrpcStreams::of(&run.timings.streams, secs),
            errors: Errors::from_kinds(&c.error_kinds),
            generator: generator_of(run),
            phases: phases_of(run),
            requests_by_name: requests_by_name(run),
            findings: Vec::new(),
            timings_ms: Breakdown::from_timings(&run.timings),
            tls,
            http2: match run.plan.protocol {
                Protocol::Http1 => None,
                Protocol::Http2 { streams } => Some(Http2 {
                    streams,
                    connections: k.opened + run.timings.connect.len(),
                    cleartext: !run.plan.uses_tls(),
                }),
            },
            users: users_of(run),
            server: run.server.as_ref().map(server_of),
            profile: run
                .profile
                .as_ref()
                .map(|p| ProfileSummary::from_outcome(p, TOP_FUNCTIONS)),
            thresholds: Vec::new(),
            plan_hash: format!(
                "{:016x}",
                run.plan
                    .shard
                    .map_or_else(|| run.plan.fingerprint(), |s| s.plan_hash)
            ),
            shard: shard_of(run),
            start: start_of(run),
            merged: None,
            traces: traces_of(run),
            autoscale: run.scaling.as_ref().map(Autoscaling::of),
        }
    }
}

/// The phases a run reached, each with its length as run, its rates and latency.
fn phases_of(run: &RunData) -> Vec<Phase> {
    let secs = run.secs();
    let open = run.offered_rps().is_some();
    run.phases
        .iter()
        .filter(|p| p.start_s < secs)
        .map(|p| {
            let length = p
                .duration_s
                .unwrap_or(f64::INFINITY)
                .min(secs - p.start_s)
                .max(1e-9);
            let c = &p.totals.counts;
            Phase {
                name: p.name.clone(),
                start_s: p.start_s,
                duration_s: length,
                offered_rps: open.then(|| c.offered as f64 / length),
                rps: c.completed as f64 / length,
                latency_ms: LatencyStats::from_histogram(&p.totals.latency),
            }
        })
        .collect()
}

/// The generator's figures (its health is judged by `analyze::health`).
fn generator_of(run: &RunData) -> Generator {
    let lag = &run.totals.lag;
    let lag_p99 = if lag.is_empty() {
        0.0
    } else {
        us_to_ms(lag.value_at_quantile(0.99))
    };
    let g = &run.generator;
    let k = &g.connect;
    Generator {
        processor_cpu_s: run.users.as_ref().and_then(|u| u.processor_cpu_s),
        cpu_s: g.cpu_s,
        max_rss_mb: g.max_rss_mb,
        schedule_lag_ms_p99: lag_p99,
        pacing: g.pacing.gap_cv().map(|cv| Pacing {
            slack_ms: run.plan.pacing_slack.as_secs_f64() * 1000.0,
            arrival_gap_cv: cv,
        }),
        saturated: false,
        threads: g.threads,
        warnings: Vec::new(),
        connect: Connect {
            connections: k.connections,
            opened: k.opened,
            failed: k.failed,
            duration_s: k.duration_s,
            rate_per_s: k.rate_per_s,
            source_addrs: run
                .plan
                .source_addrs
                .iter()
                .map(|a| a.to_string())
                .collect(),
            file_limit: k.file_limit,
        },
    }
}

/// Each named request's counts and latency.
fn requests_by_name(run: &RunData) -> BTreeMap<String, NamedRequests> {
    run.by_name
        .iter()
        .map(|(name, iv)| {
            let c = &iv.counts;
            let named = NamedRequests {
                completed: c.completed,
                ok: c.ok,
                errors: c.errors(),
                status: c
                    .statuses()
                    .map(|(code, n)| (code.to_string(), n))
                    .collect(),
                grpc: grpc_codes(c),
                latency_ms: LatencyStats::from_histogram(&iv.latency),
            };
            (name.clone(), named)
        })
        .collect()
}

/// gRPC calls by the name of their status.
fn grpc_codes(c: &Counts) -> BTreeMap<String, u64> {
    c.grpc_codes()
        .map(|(code, n)| (code.name().to_string(), n))
        .collect()
}

/// The names of the run's user scenarios, in the model's order.
fn scenario_names(run: &RunData) -> impl Iterator<Item = &str> {
    let users = match &run.plan.model {
        crate::plan::Model::Open {
            arrivals: crate::plan::Arrivals::Sessions { users, .. },
            ..
        }
        | crate::plan::Model::Users { users, .. } => Some(users),
        _ => None,
    };
    users
        .into_iter()
        .flat_map(|u| u.scenarios.iter().map(|s| s.name.as_str()))
}

/// Whether a count is zero (a count left out of the document when so).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The virtual users' section, for a run of the users model.
fn users_of(run: &RunData) -> Option<Users> {
    let c = &run.totals.counts;
    run.users.as_ref().map(|u| Users {
        started: c.users_started,
        completed: c.users_completed,
        failed: c.users_failed,
        failures: u.failures.clone(),
        checks_failed: u.checks_failed.clone(),
        max_active: run
            .timeline
            .iter()
            .map(|r| r.users_active)
            .max()
            .unwrap_or(0),
        session_ms: LatencyStats::from_histogram(&u.sessions),
        static_fetched: u.static_fetched,
        static_skipped: u.static_skipped,
        skipped: u.skipped,
        started_by_scenario: scenario_names(run)
            .zip(&u.started_by_scenario)
            .map(|(name, n)| (name.to_string(), *n))
            .collect(),
        metrics: CustomSummary::of(&u.custom, run.secs()),
        suggested_exit_code: u.suggested_exit_code,
        crashed: u.crashed.clone(),
    })
}

/// The watched processes' and stores' figures.
fn server_of(d: &ServerData) -> Server {
    // The sampler's readings: the most any process got (those that lived the whole run).
    let readings = d.processes.iter().map(|p| p.samples.len()).max();
    let readings = readings.unwrap_or(0);
    Server {
        processes: d
            .processes
            .iter()
            .map(|p| ServerProcess {
                name: p.name.clone(),
                pid: p.pid,
                cpu_pct_avg: p.cpu_pct_avg_over(readings),
                cpu_pct_max: p.cpu_pct_max(),
                cpu_wait_pct_avg: p.cpu_wait_pct_avg_over(readings),
                rss_mb_max: p.rss_mb_max(),
            })
            .collect(),
        stores: d.stores.iter().map(ServerStore::from_series).collect(),
        host_cpu_pct_avg: d.host_cpu_pct_avg(),
        budgets: d.groups.iter().map(ServerBudget::from_series).collect(),
        cores: d.cores.clone(),
    }
}

/// Which shard of its plan a run was, with its part of the connections.
fn shard_of(run: &RunData) -> Option<ShardSummary> {
    run.plan.shard.map(|s| {
        let (connections, max_connections) = run.plan.model.connection_bounds();
        ShardSummary {
            index: s.index,
            count: s.count,
            connections,
            max_connections,
            pipeline: run.plan.pipeline(),
        }
    })
}

/// When a run asked to start (`--start-at`), and how far from it it started.
fn start_of(run: &RunData) -> Option<StartSummary> {
    run.plan.start_at.map(|at| StartSummary {
        requested: humantime::format_rfc3339_millis(at).to_string(),
        offset_ms: match run.started_at.duration_since(at) {
            Ok(late) => late.as_secs_f64() * 1000.0,
            Err(early) => -early.duration().as_secs_f64() * 1000.0,
        },
    })
}

/// The `tls` section of a run with `https://` targets.
fn tls_summary(run: &RunData) -> Tls {
    let settings = &run.plan.tls;
    let failed = &run.timings.tls_failures;
    Tls {
        verify: !settings.insecure,
        cacert: settings.cacert.as_ref().map(|c| c.path.clone()),
        failures: TlsFailure::ALL
            .into_iter()
            .filter(|f| failed[f.index()] > 0)
            .map(|f| (f.as_str().to_string(), failed[f.index()]))
            .collect(),
    }
}

/// The JSON Schema of `summary.json`, generated from these types (kept in
/// `schemas/summary.v1.json` and checked by a test).
pub fn summary_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Summary)).expect("a schema serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_on_open_connections_count_as_zero_connect_time() {
        let mut t = Timings::new();
        for _ in 0..98 {
            t.waiting.record(1000).unwrap();
            t.receiving.record(10).unwrap();
        }
        t.connect.record(500).unwrap();
        t.connect.record(700).unwrap();
        t.waiting.record(1000).unwrap();
        t.waiting.record(1000).unwrap();
        let b = Breakdown::from_timings(&t).unwrap();
        assert_eq!(b.new_connections, 2);
        assert_eq!(b.connect.p50, 0.0);
        assert!((b.connect.max - 0.7).abs() < 0.01, "{}", b.connect.max);
        assert!((b.connect.mean - 0.012).abs() < 0.001, "{}", b.connect.mean);
        assert_eq!(b.tls.max, 0.0);
        assert!((b.waiting.p50 - 1.0).abs() < 0.01);
        assert!(Breakdown::from_timings(&Timings::new()).is_none());
    }
}
