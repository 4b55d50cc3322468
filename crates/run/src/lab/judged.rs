//! What `lab.json` holds: each cell as the verdicts read it, what limited it, and the verdicts
//! of each factor the experiment varies (the judging itself is `analyze::verdict` and
//! `analyze::lab`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::probe::Kind;
use crate::Summary;

/// What one cell of one round measured, as the verdicts read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CellResult {
    /// The topology's name.
    pub topology: String,
    /// Processes serving the topology (replicas × workers), for the ideal scaling.
    pub processes: usize,
    /// The replicas' CPU quotas together, CPUs, when they had quotas: the ideal scaling is
    /// their ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// CPU the budgeted replicas used per successful response, ms (with quotas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_request: Option<f64>,
    /// The workload's name.
    pub workload: String,
    /// The round, from 0.
    pub round: usize,
    /// What the cell measured.
    pub measured: Measured,
    /// Why this cell is left out of the comparisons, when it is (a process exited mid-cell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// What limited it (empty when nothing did).
    pub limits: Vec<Limit>,
    /// What an autoscaled topology's cell paid and failed (`None` for a fixed topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<ScaledCell>,
}

/// What a cell on an autoscaled topology paid for and what its load got, for setting one
/// autoscaler's settings against another's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScaledCell {
    /// Instance-seconds paid for: every instance started, ready or draining, each second.
    pub instance_seconds: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (an error or a failing status, 429 included).
    pub failed: u64,
    /// Requests held at the balancer for an instance with room, then served.
    pub waited: u64,
    /// Requests the balancer answered 429 after its hold timeout.
    pub refused: u64,
}

/// A cell's figures, by the kind of load it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Measured {
    /// A breaking-point search: the highest rate that met the objective, req/s (`None` when
    /// none did).
    Capacity {
        /// The highest rate that met the objective.
        breaking_point_rps: Option<f64>,
    },
    /// A closed model: successful responses per second.
    Closed {
        /// Successful responses per second.
        ok_rps: f64,
        /// Median latency, ms.
        p50_ms: f64,
        /// 99th percentile latency, ms.
        p99_ms: f64,
    },
    /// A probe: how the service serves concurrency, read from closed-model steps.
    Probe {
        /// `async`, `sync` or `cpu`.
        behaviour: Kind,
        /// Workers (requests served at once), for `sync` and `cpu`.
        workers: Option<usize>,
        /// Service time alone (mean latency at one connection), ms.
        service_time_ms: f64,
        /// Throughput at the plateau (or the highest seen), req/s.
        max_throughput_rps: f64,
    },
    /// An open model at an offered rate.
    Open {
        /// Offered arrivals per second.
        offered_rps: f64,
        /// Successful responses per second.
        ok_rps: f64,
        /// Median latency from the intended start, ms.
        p50_ms: f64,
        /// 99th percentile latency from the intended start, ms.
        p99_ms: f64,
    },
}

impl Measured {
    /// The figures of a fixed-load run's summary.
    pub fn of_run(s: &Summary) -> Measured {
        let ok_rps = s.ok_rps();
        let (p50_ms, p99_ms) = (s.latency_ms.p50, s.latency_ms.p99);
        match s.throughput.offered_rps {
            Some(offered_rps) => Measured::Open {
                offered_rps,
                ok_rps,
                p50_ms,
                p99_ms,
            },
            None => Measured::Closed {
                ok_rps,
                p50_ms,
                p99_ms,
            },
        }
    }
}

/// What an experiment compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Factor {
    /// Every topology against the first, workload by workload.
    Topology,
    /// Workload `variant` against workload `baseline`, topology by topology (`compare:`).
    Workload,
}

/// One comparison's answer (`lab.json`'s `verdicts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// `topology` or `workload`.
    pub factor: Factor,
    /// `breaking_point`, `throughput`, `latency_p50` or `latency_p99`.
    pub measure: String,
    /// The side compared against.
    pub baseline: String,
    /// The side compared.
    pub variant: String,
    /// The workload both sides ran (for a workload factor: the baseline's).
    pub workload: String,
    /// The topology both sides ran on (workload factor only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// Variant over baseline (geometric mean of the rounds' ratios).
    pub ratio: f64,
    /// Lower end of the ratio's 95 % interval over the rounds (equal to `ratio` with one
    /// round).
    pub ci_low: f64,
    /// Upper end of that interval.
    pub ci_high: f64,
    /// Rounds compared.
    pub rounds: usize,
    /// True only when the interval leaves out 1.
    pub differs: bool,
    /// The verdict in words: the ratio, what limited each side, and for topologies the ideal
    /// scaling when the smaller side saturated.
    pub why: String,
    /// For topologies, the gain against the ideal scaling in words, when the baseline
    /// saturated (also in `why`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<String>,
    /// What limited each side, in words: (side, its limits), the sides that had any (also in
    /// `why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limited: Vec<(String, Vec<String>)>,
}

/// Something that limited a cell, with the figures that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    /// The host's cores were busy: the generator, the watched processes and whatever else
    /// ran on the host together.
    Host {
        /// The host's cores.
        cores: usize,
        /// The generator's CPU, percent of one core.
        generator_pct: f64,
        /// The watched processes' CPU, percent of one core.
        service_pct: f64,
        /// Every other process of the host (another program, a build), percent of one core;
        /// 0 when the host's own total was not read.
        other_pct: f64,
    },
    /// Processes of the topology that were CPU-bound (used plus waited ≥ 85 % of a core).
    CpuBound {
        /// Their command name.
        name: String,
        /// How many were.
        busy: usize,
        /// Processes of that name watched.
        of: usize,
        /// Their mean CPU used, percent of one core.
        used_pct: f64,
        /// Their mean time waiting for a core, percent of one core (summed over their
        /// threads: many threads on few cores wait far more than a core's time).
        waited_pct: f64,
    },
    /// Budgeted groups (replicas, the balancer, the store) at their CPU quota (≥ 90 % of it
    /// used over the cell).
    AtQuota {
        /// What they are: `replica`, `service`, `nginx`, `redis-server`, `consumer`.
        name: String,
        /// How many were at their quota.
        busy: usize,
        /// Groups of that kind with a quota.
        of: usize,
        /// Each one's quota, CPUs.
        cpus: f64,
        /// The least of their quota any of them used, percent.
        used_low_pct: f64,
        /// The most of their quota any of them used, percent.
        used_high_pct: f64,
        /// Their mean share of CFS periods throttled, percent.
        throttled_pct: f64,
    },
    /// Responses with status 429.
    RateLimited {
        /// Percent of completed requests.
        pct: f64,
    },
    /// Requests that failed otherwise (error statuses, transport errors, dropped).
    Failing {
        /// Percent of the requests that were due (completed or dropped).
        pct: f64,
    },
    /// A generator thread saturated.
    Generator,
    /// What the probe read of the service: how it serves concurrency, its workers (the knee
    /// of the latency) and its service time.
    Probed {
        /// `async`, `sync` or `cpu`.
        behaviour: Kind,
        /// Workers, for `sync` and `cpu`.
        workers: Option<usize>,
        /// True when the worker count was observed (p99 jumped past it), not only estimated.
        observed: bool,
        /// Service time alone, ms.
        service_time_ms: f64,
    },
    /// A queue (a Redis stream's consumer group) still held entries when the load ended: the
    /// tier after it fell behind.
    Backlog {
        /// The stream.
        stream: String,
        /// Entries not yet delivered at the end.
        waiting: u64,
    },
    /// The cell saturated with no process CPU-bound and the host not busy: a worker cap, a
    /// lock, a rate limit or I/O set the limit, not the CPU (`loadlab probe` counts workers).
    NotCpu {
        /// The watched processes' CPU together, percent of one core.
        service_pct: f64,
    },
}

/// `lab.json`: the experiment, what each cell measured as the verdicts read it, the verdicts of
/// each factor, and where two load models on one target disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LabJson {
    /// `loadlab.lab/v1`.
    pub schema: String,
    /// The experiment's name.
    pub name: String,
    /// Rounds of every cell.
    pub rounds: usize,
    /// Workload pairs compared (baseline, variant).
    #[serde(default)]
    pub compare: Vec<(String, String)>,
    /// Each topology judged against another: (variant, baseline); absent in labs written
    /// before topologies named their baseline (every one against the first).
    #[serde(default)]
    pub baselines: Vec<(String, String)>,
    /// The host's cores the limits were read against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<usize>,
    /// Every cell, in the order it ran.
    pub cells: Vec<CellResult>,
    /// The verdicts.
    pub verdicts: Vec<Verdict>,
    /// Workloads aimed at one target on one topology whose load models disagree, in words.
    #[serde(default)]
    pub disagreements: Vec<String>,
}
