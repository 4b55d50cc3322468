//! What a probe found, as `probe --json` and a lab cell's `probe.json` hold it: the steps at
//! rising concurrency and the verdict read from them (the reading itself is `analyze::probe`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What one step measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeStep {
    /// Connections kept busy.
    pub concurrency: usize,
    /// Requests answered per second (the refused ones left out).
    pub throughput_rps: f64,
    /// Requests refused per second: 429, or 503 with `Retry-After` (a rate limit saying no).
    pub refused_rps: f64,
    /// Median latency of the answered requests, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Standard deviation of the latency, ms (0 when not measured).
    #[serde(default)]
    pub stdev_ms: f64,
    /// Requests completed.
    pub requests: u64,
    /// Percent of completed requests that failed.
    pub error_pct: f64,
    /// CPU of the watched server during the step, percent of one core (summed over processes).
    pub server_cpu_pct: Option<f64>,
    /// Time the watched server's threads were runnable but waiting for a CPU during the step,
    /// percent of one core: on a machine shared with other work, the CPU it wanted is this
    /// plus `server_cpu_pct`.
    pub server_cpu_wait_pct: Option<f64>,
}

impl ProbeStep {
    /// The CPU the server wanted during the step: what it used plus what it waited for,
    /// percent of one core. A busy service starved by other processes is as CPU-bound as one
    /// that has the cores to itself.
    pub fn server_cpu_demand_pct(&self) -> Option<f64> {
        self.server_cpu_pct
            .map(|c| c + self.server_cpu_wait_pct.unwrap_or(0.0))
    }
}

/// How the service behaves under concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Latency stays flat as concurrency grows: no worker limit found.
    Async,
    /// A fixed number of workers; requests past them queue.
    Sync,
    /// Throughput plateaus with the server's CPU saturated.
    Cpu,
    /// Past a rate the service refuses requests (429, or 503 with `Retry-After`) instead of
    /// queueing them: a rate limit or load shedding.
    RateLimited,
    /// No worker limit, but requests slow each other down: latency grows from the first extra
    /// connection and throughput peaks, then falls (retrograde scaling, the USL's shape).
    Contended,
    /// No model explains the steps: neither a worker pool (its latency model is further from
    /// them than their noise allows), nor contention, nor a rate limit, nor no limit.
    Unclassified,
}

/// Which tier of a service binds (`sync` verdicts whose times do not vary; see `binding`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "tier", rename_all = "snake_case")]
pub enum Binding {
    /// A whole number of requests in service, and queued requests wait most of a request's
    /// time: the binding pool holds its worker for the whole request (one tier, or the front).
    Outer {
        /// The wait of the slowest queued requests at the first queued step, ms.
        turn_ms: f64,
    },
    /// The requests in service at the plateau fall between whole numbers of workers: a tier
    /// the request holds for a part of its time binds (a backend, a database pool).
    Inner {
        /// Requests in service at the plateau, `X · S`.
        requests_in_service: f64,
        /// What the inner tier serves, req/s: its workers over its time per request.
        rate_rps: f64,
    },
}

/// The probe's conclusion, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeVerdict {
    /// `async`, `sync`, `cpu`, `rate_limited`, `contended` or `unclassified`.
    pub kind: Kind,
    /// Workers (requests served at once), for `sync` and `cpu`.
    pub workers: Option<usize>,
    /// True when the worker count was observed: p99 jumped between K and K + 1 connections.
    /// False when only the knee of the mean latency shows it (the service's times vary, or the
    /// probe ran out of time before measuring K + 1).
    pub workers_observed: bool,
    /// The worker counts the steps cannot tell apart (lowest, highest), when the count was
    /// not observed and they are more than one: the count is "about K (lo–hi)".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers_range: Option<[usize; 2]>,
    /// Service time at minimum load (mean latency with one connection), ms.
    pub service_time_ms: f64,
    /// 95 % interval of the service time (the mean's, from its spread and count), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_time_ci_ms: Option<[f64; 2]>,
    /// Throughput at the plateau (`sync`, `cpu`: the median of the steps from the worker count
    /// on) or the highest seen (`async`), requests per second.
    pub max_throughput_rps: f64,
    /// True when throughput stays flat past the worker count (within 5 %): a hard limit, which
    /// the USL's smooth curve does not describe.
    pub hard_limit: bool,
    /// The sentence that explains the verdict with its numbers.
    pub explanation: String,
    /// How far the worker pool's latency model, `S · max(1, c / K)`, is from the steps' mean
    /// latencies: the root mean square of their relative errors, percent. It decides between
    /// `sync` and `unclassified`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_error_pct: Option<f64>,
    /// Which tier binds, where the steps can tell (`sync` with times that do not vary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
    /// The Universal Scalability Law fitted to the steps, when there are enough.
    pub usl: Option<UslFit>,
    /// A `rate_limited` service's limit read in the open model: its rate, and whether the
    /// closed loop's refusals came from a burst under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// A rate limit as the probe read it: the closed loop finds that a service refuses, the open
/// model (requests arriving one at a time at a constant rate) what rate it refuses past. A
/// closed loop's requests start together and come back together, so a limiter's burst
/// allowance can refuse them while their rate is well under the limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RateLimit {
    /// What the service answered per second while refusing requests that arrived at a
    /// constant rate: the limit's rate. `None` when no open-model step was refused (or none
    /// ran).
    pub rate_rps: Option<f64>,
    /// What the closed loop's refusing steps answered, req/s (their median): the rate a
    /// closed loop would report.
    pub closed_rps: f64,
    /// Connections (requests at once) from which the closed loop was refused while its
    /// arrivals stayed under the rate: the limiter allows a burst of fewer. `None` when the
    /// refusals began at the rate, or when the open model could not tell (no open step ran,
    /// or the service queued one instead of refusing).
    pub burst_refused_from: Option<usize>,
    /// The most connections the closed loop ran without refusals, under
    /// `burst_refused_from`: the burst is at least this and under that (the probe's ladder
    /// skips counts past 12). `None` with no burst named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_allowed: Option<usize>,
}

/// One open-model step of a probe: requests arriving at a constant rate for a warm-up and a
/// measured part, run past a closed loop's refusals to read a rate limit as a rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenStep {
    /// Arrival rate offered, req/s.
    pub offered_rps: f64,
    /// Requests answered (not refused, not failed) per second of the measured part.
    pub answered_rps: f64,
    /// Requests refused (429, or 503 with `Retry-After`) per second of the measured part.
    pub refused_rps: f64,
    /// Other failures per second of the measured part.
    pub failed_rps: f64,
    /// Median latency of the measured part's requests (refusals included), ms.
    pub p50_ms: f64,
    /// Length of the measured part, seconds (after a warm-up that takes the limiter's burst).
    pub measured_s: f64,
}

/// The USL fitted to a probe, with its predicted peak and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UslFit {
    /// The law's parameters.
    #[serde(flatten)]
    pub law: Usl,
    /// Concurrency where throughput peaks (none when it only flattens).
    pub peak_concurrency: Option<f64>,
    /// Throughput at the peak (or the law's limit as concurrency grows), req/s; `None` when
    /// the law has no limit (σ = κ = 0: throughput in proportion to concurrency).
    pub peak_throughput_rps: Option<f64>,
    /// Share of the steps' throughput variance the law explains (1 − SSres/SStot).
    pub r_squared: f64,
    /// True when the law explains the steps (R² ≥ 0.95), the service has no hard limit and
    /// the verdict does not set the law aside: only then is its line worth reading.
    pub explains: bool,
    /// Why the verdict sets the law aside though it fits the throughput: a worker pool
    /// explains the steps' latency better than its peak inside the steps does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<String>,
}

/// A fitted law.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usl {
    /// Throughput of one client alone, requests per second.
    pub lambda: f64,
    /// Contention, 0–1.
    pub sigma: f64,
    /// Coherency, 0 or more.
    pub kappa: f64,
}

impl Usl {
    /// Throughput the law predicts at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// The concurrency where throughput peaks, when coherency makes it peak at all.
    pub fn peak_concurrency(&self) -> Option<f64> {
        (self.kappa > 1e-12).then(|| ((1.0 - self.sigma).max(0.0) / self.kappa).sqrt())
    }
}

/// A probe as `probe --json` and a lab cell's `probe.json` hold it: the verdict (its fields at
/// the top level), why the probe stopped, and its steps.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ProbeResult {
    /// The URL probed.
    pub url: String,
    /// The verdict; none when no step at one connection completed a request.
    #[serde(flatten)]
    pub verdict: Option<ProbeVerdict>,
    /// Why the probe stopped.
    pub stopped_because: String,
    /// Every step, in order.
    pub steps: Vec<ProbeStep>,
    /// The open-model steps run to read a rate limit's rate, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_steps: Vec<OpenStep>,
}

/// Read by hand because serde's derive reads a flattened `Option` as `None` when any of its
/// fields fails to read: a verdict written with a value it cannot read back would vanish
/// without a word (a lab judged again lost a cell's verdict so). Here a document with the
/// verdict's `kind` must hold a whole verdict, or reading it is an error that names the field.
impl<'de> Deserialize<'de> for ProbeResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_json::{Map, Value};
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let mut take = |key: &str| fields.remove(key).unwrap_or(Value::Null);
        let url = take("url");
        let stopped_because = take("stopped_because");
        let steps = take("steps");
        let open_steps = take("open_steps");
        fn field<T: serde::de::DeserializeOwned, E: Error>(
            value: Value,
            name: &str,
        ) -> Result<T, E> {
            serde_path_to_error::deserialize(value).map_err(|e| {
                let path = e.path().to_string();
                E::custom(format!("{name}, at {path}: {}", e.into_inner()))
            })
        }
        let verdict = if fields.contains_key("kind") {
            Some(field::<_, D::Error>(Value::Object(fields), "the verdict")?)
        } else {
            None
        };
        Ok(ProbeResult {
            url: field::<_, D::Error>(url, "url")?,
            verdict,
            stopped_because: field::<_, D::Error>(stopped_because, "stopped_because")?,
            steps: field::<_, D::Error>(steps, "steps")?,
            open_steps: match open_steps {
                Value::Null => Vec::new(),
                v => field::<_, D::Error>(v, "open_steps")?,
            },
        })
    }
}
