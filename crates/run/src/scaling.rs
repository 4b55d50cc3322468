//! What an autoscaled topology did during a run: its instances each second, the autoscaler's
//! decisions and each instance's life, on the run's clock.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An autoscaled topology's record of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingData {
    /// `hpa` or `kpa`.
    pub policy: String,
    /// `cpu`, `concurrency` or `rps`.
    pub metric: String,
    /// Fewest and most instances.
    pub min: u32,
    /// Most instances.
    pub max: u32,
    /// Each second of the run the autoscaler saw.
    pub seconds: Vec<ScalingSecond>,
    /// Each change of the count wanted during the run.
    pub decisions: Vec<ScaleDecision>,
    /// Each instance that ran during the run.
    pub instances: Vec<InstanceLife>,
}

/// One second of an autoscaled topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingSecond {
    /// The run's second.
    pub second: u64,
    /// Instances ready (taking requests).
    pub ready: u32,
    /// Instances started and not ready yet.
    pub starting: u32,
    /// Instances finishing their requests before they stop.
    pub draining: u32,
    /// Instances the autoscaler wanted.
    pub desired: u32,
    /// Ready instances that served next to nothing (under 1 % of the second in flight).
    pub idle: u32,
    /// Requests held at the balancer at the second's end, waiting for an instance with room.
    pub held: u32,
    /// Requests that waited for room and were passed on.
    pub waited: u64,
    /// Their waits, seconds.
    pub wait_s: f64,
    /// Requests answered 429 after waiting the hold timeout.
    pub refused: u64,
}

/// One change of the instance count wanted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScaleDecision {
    /// When, seconds from the run's start.
    pub at_s: f64,
    /// Instances wanted before.
    pub from: u32,
    /// Instances wanted after.
    pub to: u32,
    /// The metric the decision read: the HPA's mean per ready instance, the KPA's stable
    /// window's total.
    pub metric: f64,
    /// Whether the KPA decided in panic mode.
    pub panicking: bool,
}

/// One instance's life, seconds from the run's start (negative: before it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceLife {
    /// Its number, in the order the autoscaler started them.
    pub id: u32,
    /// When its process started.
    pub started_s: f64,
    /// How long it took to join (its cold start), once it did.
    pub cold_start_s: Option<f64>,
    /// When it was told to stop, if it was.
    pub removed_s: Option<f64>,
    /// Why it never joined, when it did not.
    pub failed: Option<String>,
}

impl ScalingData {
    /// Instance-seconds paid for: every instance started, ready or draining, each second.
    pub fn instance_seconds(&self) -> f64 {
        self.seconds
            .iter()
            .map(|s| f64::from(s.ready + s.starting + s.draining))
            .sum()
    }
}
