//! What a capacity search found, as `capacity --json` and a lab cell's `capacity.json` hold it:
//! every rate step and the bracket read from them (the search itself is `analyze::capacity`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What one rate's steady state measured (after its warm-up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RateStep {
    /// Offered rate, a second, in the search's unit (requests, or users' sessions).
    pub rate_rps: f64,
    /// Completed requests (or sessions that ended) per second in the measured part.
    pub achieved_rps: f64,
    /// Arrivals per second in the measured part (the schedule's, exact).
    pub arrived_rps: f64,
    /// Arrivals per second that were served: completed, or in flight as a steady state keeps
    /// λ·W of them.
    pub served_rps: f64,
    /// Median latency from the intended start, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Errors, percent of completed requests (refusals included); for sessions, the larger of
    /// that and the share of sessions that failed.
    pub error_pct: f64,
    /// Refusals (429, or 503 with `Retry-After`), percent of completed requests.
    pub refused_pct: f64,
    /// Warm-up discarded before measuring, seconds.
    pub warmup_s: f64,
    /// Length of the measured part, seconds.
    pub measured_s: f64,
    /// Requests that ended in the measured part.
    pub requests: u64,
    /// True when the step met the objective in a steady state.
    pub meets: bool,
    /// True when the step held too few requests to bound the objective's percentile and
    /// nothing else broke it (so it could not meet it, whatever its latencies, nor be said to
    /// break it).
    #[serde(default)]
    pub undersampled: bool,
    /// Why it did not (empty when it met the objective).
    pub broken: Vec<String>,
}

/// A capacity search as `capacity --json` and a lab cell's `capacity.json` hold it: the rate
/// found, the objective, where it broke, and every step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityResult {
    /// The URL searched, or the scenario file whose users' sessions were the unit of work.
    #[serde(default)]
    pub url: String,
    /// What each rate counts: requests, or users' sessions of a scenario file (absent in files
    /// written before sessions could be searched: requests).
    #[serde(default)]
    pub unit: WorkUnit,
    /// The highest rate that met the objective, a second (`None`: none did).
    #[serde(alias = "rps")]
    pub max_rate_rps: Option<f64>,
    /// Throughput of the closed-loop climb; the first rate tried is a little under it (absent
    /// with `--start`).
    #[serde(default)]
    pub plateau_rps: Option<f64>,
    /// The objective, as written.
    pub slo: String,
    /// The lowest rate that broke it, a second.
    pub broke_at_rps: Option<f64>,
    /// Median latency at the highest rate that met the objective, ms.
    #[serde(default)]
    pub p50_ms: Option<f64>,
    /// 99th percentile at that rate, ms.
    #[serde(default)]
    pub p99_ms: Option<f64>,
    /// Why the search stopped.
    pub stopped_because: String,
    /// Every rate the search measured, in order: latency against offered load.
    pub steps: Vec<RateStep>,
}

/// What a capacity search's rate counts a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkUnit {
    /// Requests to a URL (or a script's plain requests, each arrival one).
    #[default]
    Request,
    /// Users' sessions: each arrival a user who runs a scenario's flow once.
    Session,
}

impl WorkUnit {
    /// The rate's unit as the reports write it: `req/s` or `sessions/s`.
    pub fn per_second(self) -> &'static str {
        match self {
            WorkUnit::Request => "req/s",
            WorkUnit::Session => "sessions/s",
        }
    }
}
