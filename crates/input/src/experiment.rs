//! Experiment files for `loadlab lab`: a list of topologies × a list of workloads.
//!
//! ```yaml
//! name: seed-001
//! topologies:
//!   - { name: 1 replica, replicas: 1 }
//!   - { name: 6 replicas, replicas: 6, lb: nginx }
//! workloads:
//!   - { name: ping 300/s, run: "/ping -R 300 -d 10s --timeout 120s" }
//! ```
//!
//! A workload's `run` is `loadlab run` flags with the URL given as a path on the topology's
//! front; the same flags users already know, parsed once when the file is read into
//! [`LoadFlags`], and lowered against each topology's front by the lowering (`lower::workload`).
//! A workload's `capacity` instead searches for the breaking point, with `loadlab capacity`'s
//! flags ([`CapacityFlags`]).
//!
//! An experiment is a question: the topologies are one factor; `compare: [A, B]` (or a list
//! of such pairs) names workloads to set against each other on every topology; `rounds: N`
//! repeats every cell, interleaved (every topology and workload once, then again), so each
//! comparison has an interval (default 3 when the file compares anything, else 1).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha1::{Digest, Sha1};

use loadlab_run::thresholds::Threshold;
use serde::Deserialize;

use loadlab_run::topology::{Autoscale, Budget, ScaleMetric, ScalePolicy, Topology};

use crate::capacity::{CapacityError, CapacityFlags};
use crate::flags::{FlagsError, LoadFlags};
use crate::topology::{lb_named, runtime_named, stdout_named, TopologyError, TopologyInput};
use crate::values::ThresholdList;
use crate::yaml::YamlError;

/// An experiment file that cannot be run: the file, the topology or workload, and why.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The file cannot be read.
    #[error("cannot read the experiment file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: io::Error,
    },
    /// The file is not YAML in an experiment's shape.
    #[error(transparent)]
    Yaml(YamlError),
    /// No topology or no workload.
    #[error("{path}: needs at least one topology and one workload")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A topology that cannot be deployed.
    #[error("{path}: topology {name:?}: {error}")]
    Topology {
        /// The file.
        path: PathBuf,
        /// The topology's name.
        name: String,
        /// Why.
        error: TopologyError,
    },
    /// A workload whose flags cannot be parsed.
    #[error("{path}: workload {name:?}: {error}")]
    Workload {
        /// The file.
        path: PathBuf,
        /// The workload's name.
        name: String,
        /// Why.
        error: WorkloadError,
    },
    /// A topology's or workload's name that makes no folder of its own: empty once reduced to
    /// letters, digits and dashes, over 100 bytes so, or the same as another's.
    #[error(
        "{path}: the {kind} {name:?} needs a folder of its own, named from its letters and \
         digits: {why}"
    )]
    FolderName {
        /// The file.
        path: PathBuf,
        /// `topology` or `workload`.
        kind: &'static str,
        /// The name.
        name: String,
        /// What is wrong with the folder's name.
        why: String,
    },
    /// Two workloads of one name.
    #[error("{path}: two workloads are named {name:?}")]
    SameName {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// A `compare` entry that is not two workload names.
    #[error("{path}: compare takes pairs of workload names, [A, B], not {pair:?}")]
    NotAPair {
        /// The file.
        path: PathBuf,
        /// The entry.
        pair: Vec<String>,
    },
    /// A `compare` entry naming no workload.
    #[error("{path}: compare names {name:?}, which is no workload")]
    UnknownWorkload {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// A workload compared with itself.
    #[error("{path}: compare sets {name:?} against itself")]
    AgainstItself {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// A topology's `against` naming no topology, or itself.
    #[error("{path}: topology {name:?}: against names {against:?}, which is no other topology")]
    UnknownBaseline {
        /// The file.
        path: PathBuf,
        /// The topology.
        name: String,
        /// The name it gave.
        against: String,
    },
    /// A number of rounds out of range.
    #[error("{path}: rounds must be from 1 to {max}, got {rounds}")]
    Rounds {
        /// The file.
        path: PathBuf,
        /// The number given.
        rounds: usize,
        /// The most allowed.
        max: usize,
    },
}

/// A workload that cannot be run: its flags, or which of `run` and `capacity` it gives.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// `run` flags that cannot be parsed.
    #[error(transparent)]
    Flags(#[from] FlagsError),
    /// `capacity` flags that cannot be parsed or used.
    #[error("capacity: {0}")]
    Capacity(CapacityError),
    /// `probe` flags that cannot be parsed.
    #[error("probe: {0}")]
    Probe(crate::probe::ProbeError),
    /// `slo:` beside `capacity` or `probe` (a search's objective is its `--slo`; a probe has
    /// none).
    #[error("slo: applies to run workloads (a capacity workload takes its objective in --slo)")]
    SloWithCapacity,
    /// Not exactly one of `run`, `capacity` and `probe`.
    #[error(
        "give run (a fixed load), capacity (a breaking point) or probe (workers and service time), one of them"
    )]
    RunOrCapacity,
}

/// A whole experiment file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    /// Name, used for the results folder.
    pub name: String,
    /// What the original report ran, when this file shortens it (shown before the run).
    #[serde(default)]
    pub note: Option<String>,
    /// Systems under test.
    pub topologies: Vec<TopologySpec>,
    /// Loads run against each topology.
    pub workloads: Vec<WorkloadSpec>,
    /// Times every cell runs, interleaved.
    #[serde(default)]
    pub rounds: Option<usize>,
    /// Workloads to set against each other: one pair `[A, B]` or a list of pairs.
    #[serde(default)]
    pub compare: Option<Pairs>,
    /// Run topologies whose CPU quotas and the generator's core do not fit the host's cores
    /// (every verdict then names the host as a cap).
    #[serde(default)]
    pub oversubscribe: bool,
}

/// `compare:` as written: one pair, or a list of pairs.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Pairs {
    /// `[A, B]`.
    One(Vec<String>),
    /// `[[A, B], [C, D]]`.
    Many(Vec<Vec<String>>),
}

/// Most rounds an experiment may ask for.
const MAX_ROUNDS: usize = 100;

/// An experiment file read and checked: each workload's flags parsed, each topology ready to
/// deploy.
#[derive(Debug)]
pub struct Experiment {
    /// Name, used for the results folder.
    pub name: String,
    /// What the original report ran, when this file shortens it.
    pub note: Option<String>,
    /// Systems under test, by name.
    pub topologies: Vec<(String, Topology)>,
    /// Loads, by name.
    pub workloads: Vec<Workload>,
    /// Times every cell runs, interleaved.
    pub rounds: usize,
    /// Workload pairs set against each other (baseline, variant), by name.
    pub compare: Vec<(String, String)>,
    /// Each topology but the first, with the topology it is judged against (its `against`, or
    /// the first): (variant, baseline), by name.
    pub baselines: Vec<(String, String)>,
    /// Run topologies whose budgets and the generator do not fit the host's cores.
    pub oversubscribe: bool,
}

impl Experiment {
    /// Lowers every workload against a stand-in front, as each cell will against its
    /// topology's, so a broken workload (a scenario file with an unknown key, flags that make no
    /// plan) is refused before the first cell starts, not when its cell comes, an hour into a
    /// lab. Each workload's scheduled length, in the experiment's order (`None` for a capacity
    /// or probe workload, or a load bounded by a count); else the first broken workload's name,
    /// with its error.
    pub fn check_workloads(&self) -> Result<Vec<Option<Duration>>, (String, crate::InputError)> {
        // Nothing is sent: lowering reads files and flags and resolves the front's address only.
        let stand_in = ["http://127.0.0.1:9".to_string()];
        self.workloads
            .iter()
            .map(|w| match &w.load {
                Load::Run(flags) => crate::lower::workload_before_deploy(flags, &stand_in)
                    .map(|plan| plan.scheduled_duration())
                    .map_err(|e| (w.name.clone(), e)),
                // A search's scenario file is lowered as its steps will lower it.
                Load::Capacity(flags) => crate::work::Work::new(&flags.on_front(&stand_in[0]))
                    .map(|_| None)
                    .map_err(|e| (w.name.clone(), e)),
                Load::Probe(_) => Ok(None),
            })
            .collect()
    }

    /// Whether a workload calls gRPC methods on the topologies (`grpc:///package.Service/Method`),
    /// so that they serve gRPC too.
    pub fn calls_grpc(&self) -> bool {
        self.workloads.iter().any(|w| match &w.load {
            Load::Run(flags) => flags.urls.iter().any(|u| u.starts_with("grpc:///")),
            _ => false,
        })
    }

    /// The experiment part by part, as digests (SHA-1 of each part's parsed form, a workload's
    /// with the bytes of the scenario file it names): what `lab --resume` compares with the
    /// lab it continues.
    pub fn fingerprint(&self) -> loadlab_run::lab::Fingerprint {
        let digest = |text: &str, file: Option<&str>| {
            let mut h = Sha1::new();
            h.update(text.as_bytes());
            if let Some(bytes) = file.and_then(|f| std::fs::read(f).ok()) {
                h.update(&bytes);
            }
            h.finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        loadlab_run::lab::Fingerprint {
            settings: digest(
                &format!(
                    "{} {:?} {:?} {}",
                    self.rounds, self.compare, self.baselines, self.oversubscribe
                ),
                None,
            ),
            topologies: self
                .topologies
                .iter()
                .map(|(name, t)| (name.clone(), digest(&format!("{t:?}"), None)))
                .collect(),
            workloads: self
                .workloads
                .iter()
                .map(|w| {
                    let file = match &w.load {
                        Load::Run(f) if f.is_scenario() => f.urls.first().map(String::as_str),
                        Load::Capacity(f) if crate::flags::is_scenario(&f.url) => {
                            Some(f.url.as_str())
                        }
                        _ => None,
                    };
                    (w.name.clone(), digest(&format!("{:?}", w.load), file))
                })
                .collect(),
        }
    }
}

/// One load of an experiment, its flags parsed.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name in the comparison table.
    pub name: String,
    /// What each cell runs.
    pub load: Load,
}

/// What a workload measures (both kinds of flags are large; a workload is made once per
/// experiment, so the size of the larger one costs nothing).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Load {
    /// A fixed load: `loadlab run` flags; URLs are paths on the topology's front.
    Run(LoadFlags),
    /// A breaking point: `loadlab capacity` flags; the URL is a path on the topology's front.
    Capacity(CapacityFlags),
    /// How the service serves concurrency (async, K workers, CPU-bound) and its service time:
    /// `loadlab probe` flags; the URL is a path on the topology's front.
    Probe(crate::probe::ProbeFlags),
}

/// One system under test.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Name in the comparison table.
    pub name: String,
    /// Replicas behind the load balancer (default 1).
    #[serde(default)]
    pub replicas: Option<usize>,
    /// Worker processes per replica (default 1).
    #[serde(default)]
    pub workers: Option<usize>,
    /// `nginx` (default), `builtin`, or `client` (no balancer: the load goes to every replica).
    #[serde(default)]
    pub lb: Option<String>,
    /// The user's server command (reads `$PORT`) instead of loadlab's service.
    #[serde(default)]
    pub cmd: Option<String>,
    /// Runtime of loadlab's service: `rust` (default), `node` or `python`.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Extra `loadlab serve` flags, e.g. `--bbox-workers 3 --bbox-delay 900ms`.
    #[serde(default)]
    pub serve: Option<String>,
    /// nginx's timeouts towards the replicas, e.g. `60s`.
    #[serde(default)]
    pub proxy_timeout: Option<String>,
    /// Requests nginx serves at once; past them it closes a new request's connection without
    /// an answer (a front that sheds load, as seed 001's did). No limit by default.
    #[serde(default)]
    pub lb_connections: Option<usize>,
    /// A black box every replica and worker shares, as seed 000's topologies called one:
    /// the `loadlab serve` flags of that one box (`--bbox-workers 3 --bbox-delay 905ms`, or
    /// `""` for its defaults); each instance's `/bbox/*` call it. Without it each instance
    /// serves its own.
    #[serde(default)]
    pub shared_bbox: Option<String>,
    /// Where `/turno` counts: `memory` (default) or `redis` (a redis-server the lab starts,
    /// shared by the replicas and watched with them).
    #[serde(default)]
    pub store: Option<String>,
    /// The visits application (seed 002): `/site` views queued on Redis and counted by this
    /// many consumers (`store: redis` is implied).
    #[serde(default)]
    pub consumers: Option<usize>,
    /// Profile the topology's processes during each run (`--profile`): flame graphs in each
    /// cell's directory.
    #[serde(default)]
    pub profile: bool,
    /// Who serves `/static/`: `service` (default) or `nginx` (seed 002's second test).
    #[serde(default)]
    pub static_files: Option<String>,
    /// Where the service's standard output goes: `pipe` (default, drained by the lab as a
    /// container runtime's log driver would), `null` or `file`.
    #[serde(default, deserialize_with = "null_is_a_name")]
    pub stdout: Option<String>,
    /// CPUs each replica may use: a whole number pins it to that many cores round robin over
    /// the host's (as a container given that many CPUs), a fraction (`0.25`) sets a control
    /// group's CPU quota (as `docker run --cpus 0.25`); every core by default.
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Memory each replica may hold (`256M`, `1G`), without swap, as `docker run --memory`.
    #[serde(default)]
    pub memory: Option<String>,
    /// Budgets of the processes around the replicas: `balancer` (nginx), `store`
    /// (redis-server), `consumers` (each visits consumer), each `{cpus, memory}`.
    #[serde(default)]
    pub budgets: Option<BudgetsSpec>,
    /// The topology this one is judged against (default: the first), so an experiment with
    /// two factors (runtime and replicas) compares within each.
    #[serde(default)]
    pub against: Option<String>,
    /// Instances started and drained by an autoscaler while load runs (Kubernetes' HPA or
    /// Knative's KPA), instead of fixed `replicas`.
    #[serde(default)]
    pub autoscale: Option<AutoscaleSpec>,
}

/// `autoscale:` of a topology, as written: the policy, its bounds and target, and any of its
/// platform's settings (their defaults otherwise).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoscaleSpec {
    /// `hpa` (Kubernetes) or `kpa` (Knative, Cloud Run).
    pub policy: String,
    /// Fewest instances (default 1; the KPA's may be 0).
    #[serde(default)]
    pub min: Option<u32>,
    /// Most instances.
    pub max: u32,
    /// Instances at the start (default 1, within `min` and `max`).
    #[serde(default)]
    pub initial: Option<u32>,
    /// `cpu` (the HPA's default), `concurrency` (the KPA's) or `rps`.
    #[serde(default)]
    pub metric: Option<String>,
    /// Per instance: percent of its CPU quota for `cpu` (default 80, `kubectl autoscale`'s),
    /// requests in flight for `concurrency` (default `container_concurrency`, else 100 as
    /// Knative's), requests a second for `rps` (default 200, as Knative's).
    #[serde(default)]
    pub target: Option<f64>,
    /// Requests in flight an instance takes at most (Knative's `containerConcurrency`, Cloud
    /// Run's concurrency); past it requests wait at the balancer, then get 429.
    #[serde(default)]
    pub container_concurrency: Option<u32>,
    /// How long a request waits at the balancer for room before its 429 (default 10s).
    #[serde(default)]
    pub hold_timeout: Option<String>,
    /// The least time from an instance's start to its first request (an image's pull, a
    /// runtime's start), default 0s: it joins when it answers.
    #[serde(default)]
    pub cold_start: Option<String>,
    /// The HPA's sync period (default 15s).
    #[serde(default)]
    pub sync: Option<String>,
    /// The HPA's tolerance (default 0.1).
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// The HPA's scale-down stabilization window (default 300s).
    #[serde(default)]
    pub scale_down_stabilization: Option<String>,
    /// The KPA's stable window (default 60s).
    #[serde(default)]
    pub stable_window: Option<String>,
    /// The KPA's panic window (default 6s).
    #[serde(default)]
    pub panic_window: Option<String>,
    /// The KPA's panic threshold, percent of the ready instances (default 200).
    #[serde(default)]
    pub panic_threshold: Option<f64>,
    /// The KPA's target utilization, percent of the target (default 70).
    #[serde(default)]
    pub utilization: Option<f64>,
    /// How long the KPA's revision waits, inactive, before its last instance goes (default
    /// 30s).
    #[serde(default)]
    pub scale_to_zero_grace: Option<String>,
}

impl AutoscaleSpec {
    /// The settings, each default its platform's, checked.
    pub fn autoscale(&self) -> Result<Autoscale, TopologyError> {
        let bad = |why: String| TopologyError::Autoscale(why);
        let policy = match self.policy.as_str() {
            "hpa" => ScalePolicy::Hpa,
            "kpa" => ScalePolicy::Kpa,
            other => return Err(bad(format!("policy must be hpa or kpa, got {other:?}"))),
        };
        let metric = match (self.metric.as_deref(), policy) {
            (None, ScalePolicy::Hpa) | (Some("cpu"), _) => ScaleMetric::Cpu,
            (None, ScalePolicy::Kpa) | (Some("concurrency"), _) => ScaleMetric::Concurrency,
            (Some("rps"), _) => ScaleMetric::Rps,
            (Some(other), _) => {
                return Err(bad(format!(
                    "metric must be cpu, concurrency or rps, got {other:?}"
                )))
            }
        };
        let target = match (self.target, metric) {
            (Some(t), ScaleMetric::Cpu) => t / 100.0,
            (Some(t), _) => t,
            (None, ScaleMetric::Cpu) => 0.8,
            (None, ScaleMetric::Concurrency) => self.container_concurrency.map_or(100.0, f64::from),
            (None, ScaleMetric::Rps) => 200.0,
        };
        let mut a = Autoscale::new(policy, self.min.unwrap_or(1), self.max, metric, target);
        a.initial = self.initial.unwrap_or(1);
        a.container_concurrency = self.container_concurrency;
        let duration = |key: &str, v: &Option<String>, into: &mut Duration| {
            if let Some(text) = v {
                *into =
                    crate::values::parse_duration(text).map_err(|e| bad(format!("{key}: {e}")))?;
            }
            Ok::<_, TopologyError>(())
        };
        duration("hold_timeout", &self.hold_timeout, &mut a.hold_timeout)?;
        duration("cold_start", &self.cold_start, &mut a.cold_start)?;
        duration("sync", &self.sync, &mut a.sync)?;
        duration(
            "scale_down_stabilization",
            &self.scale_down_stabilization,
            &mut a.scale_down_stabilization,
        )?;
        duration("stable_window", &self.stable_window, &mut a.stable_window)?;
        duration("panic_window", &self.panic_window, &mut a.panic_window)?;
        duration(
            "scale_to_zero_grace",
            &self.scale_to_zero_grace,
            &mut a.scale_to_zero_grace,
        )?;
        if let Some(t) = self.tolerance {
            a.tolerance = t;
        }
        if let Some(p) = self.panic_threshold {
            a.panic_threshold = p / 100.0;
        }
        if let Some(u) = self.utilization {
            a.utilization = u / 100.0;
        }
        Ok(a)
    }
}

/// `--autoscale POLICY[,KEY=VALUE…]` (`kpa,max=5,container_concurrency=10`): the keys of an
/// experiment topology's `autoscale:`, with their defaults, checked as there.
pub fn autoscale_flag(text: &str) -> Result<Autoscale, TopologyError> {
    let bad = |why: String| TopologyError::Autoscale(why);
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
    };
    let mut lines = Vec::new();
    for (i, item) in text.split(',').map(str::trim).enumerate() {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None if i == 0 => ("policy", item),
            None => {
                return Err(bad(format!(
                    "{item:?} is not KEY=VALUE (--autoscale kpa,max=5,container_concurrency=10)"
                )))
            }
        };
        if !word(key) || !word(value) {
            return Err(bad(format!(
                "{item:?}: each setting is a key and a number or word (max=5, hold_timeout=10s)"
            )));
        }
        lines.push(format!("{key}: {value}"));
    }
    let spec: AutoscaleSpec = serde_saphyr::from_str(&lines.join("\n"))
        .map_err(|e| bad(setting_error(&e.to_string(), &lines)))?;
    spec.autoscale()
}

/// A parser's message about the settings `lines` (one `key: value` each, made from the flag)
/// in the flag's words: the setting it points at, not a line of text the user never wrote.
fn setting_error(message: &str, lines: &[String]) -> String {
    let first = message.lines().next().unwrap_or_default();
    let at = first.find("line ").and_then(|i| {
        let rest = &first[i + 5..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let n: usize = digits.parse().ok()?;
        let why = rest.split_once(": ").map_or(rest, |(_, why)| why);
        Some((lines.get(n.checked_sub(1)?)?, why))
    });
    match at {
        Some((line, why)) => format!("{}: {why}", line.replacen(": ", "=", 1)),
        None => first.trim_start_matches("error: ").to_string(),
    }
}

/// `budgets:` of a topology: what the processes around its replicas may use.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetsSpec {
    /// nginx, its master and workers together.
    #[serde(default)]
    pub balancer: Option<BudgetSpec>,
    /// redis-server.
    #[serde(default)]
    pub store: Option<BudgetSpec>,
    /// Each visits consumer.
    #[serde(default)]
    pub consumers: Option<BudgetSpec>,
}

/// One process's budget as written: `{cpus: 0.5, memory: 128M}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// CPUs' worth of time (a quota; a whole number is a quota of that many cores).
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Memory, as `docker run --memory` writes it.
    #[serde(default)]
    pub memory: Option<String>,
}

impl BudgetSpec {
    /// The budget, checked.
    fn budget(&self, whose: &'static str) -> Result<Budget, TopologyError> {
        if self.cpus.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
            return Err(TopologyError::NotPositive(whose));
        }
        Ok(Budget {
            cpus: self.cpus,
            memory_bytes: self
                .memory
                .as_deref()
                .map(crate::values::memory_size)
                .transpose()
                .map_err(TopologyError::Memory)?,
        })
    }
}

/// A key whose value may be the word `null`, which YAML reads as no value: written, it names
/// itself (an absent key is `None` through `#[serde(default)]`).
fn null_is_a_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Some(
        Option::<String>::deserialize(d)?.unwrap_or_else(|| "null".into()),
    ))
}

/// One load.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name in the comparison table.
    pub name: String,
    /// `loadlab run` flags, with the URL as a path: `/ping -R 300 -d 10s`.
    #[serde(default)]
    pub run: Option<String>,
    /// `loadlab capacity` flags, with the URL as a path: `/heavy?ms=50 --slo 'p99<500ms'`.
    #[serde(default)]
    pub capacity: Option<String>,
    /// `loadlab probe` flags, with the URL as a path: `/bbox/sync --max-time 60s`.
    #[serde(default)]
    pub probe: Option<String>,
    /// Thresholds each cell of this workload must meet, as `--slo` takes them.
    #[serde(default)]
    pub slo: Option<String>,
}

/// Longest folder name a cell's topology or workload gets (file systems stop at 255 bytes).
const LONGEST_FOLDER: usize = 100;

/// Refuses `names` (of topologies or workloads, as `kind` says) whose folders in the lab
/// directory would be empty, too long, or shared: two names of one folder would write one
/// cell over the other.
fn folder_names(path: &Path, kind: &'static str, names: &[&String]) -> Result<(), ExperimentError> {
    let refuse = |name: &str, why: String| ExperimentError::FolderName {
        path: path.to_path_buf(),
        kind,
        name: name.to_string(),
        why,
    };
    for (i, name) in names.iter().enumerate() {
        let folder = loadlab_run::lab::slug(name);
        if folder.is_empty() {
            return Err(refuse(name, "it has none".into()));
        }
        if folder.len() > LONGEST_FOLDER {
            return Err(refuse(
                name,
                format!("{} bytes, where {LONGEST_FOLDER} is the most", folder.len()),
            ));
        }
        if let Some(other) = names[..i]
            .iter()
            .find(|o| **o != *name && loadlab_run::lab::slug(o) == folder)
        {
            return Err(refuse(name, format!("{folder:?}, as {other:?}'s")));
        }
    }
    Ok(())
}

/// Reads and checks an experiment file; errors name the file and, for YAML, line and column.
pub fn load(path: &Path) -> Result<Experiment, crate::InputError> {
    Ok(read(path)?)
}

fn read(path: &Path) -> Result<Experiment, ExperimentError> {
    let text = std::fs::read_to_string(path).map_err(|error| ExperimentError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    from_text(&text, path)
}

/// Checks an experiment's text, read from `path` (its scenario files are found beside it);
/// errors name the file and, for YAML, line and column.
pub fn from_text(text: &str, path: &Path) -> Result<Experiment, ExperimentError> {
    let exp: ExperimentFile = serde_saphyr::from_str(text)
        .map_err(|e| ExperimentError::Yaml(YamlError::new(path, &e.to_string())))?;
    if exp.topologies.is_empty() || exp.workloads.is_empty() {
        return Err(ExperimentError::Empty {
            path: path.to_path_buf(),
        });
    }
    for (kind, names) in [
        (
            "topology",
            exp.topologies.iter().map(|t| &t.name).collect::<Vec<_>>(),
        ),
        ("workload", exp.workloads.iter().map(|w| &w.name).collect()),
    ] {
        folder_names(path, kind, &names)?;
    }
    let mut topologies = Vec::new();
    let mut baselines = Vec::new();
    for t in &exp.topologies {
        if let Some(against) = &t.against {
            if against == &t.name || !exp.topologies.iter().any(|o| &o.name == against) {
                return Err(ExperimentError::UnknownBaseline {
                    path: path.to_path_buf(),
                    name: t.name.clone(),
                    against: against.clone(),
                });
            }
            baselines.push((t.name.clone(), against.clone()));
        } else if t.name != exp.topologies[0].name {
            baselines.push((t.name.clone(), exp.topologies[0].name.clone()));
        }
        let topology = t.topology().map_err(|error| ExperimentError::Topology {
            path: path.to_path_buf(),
            name: t.name.clone(),
            error,
        })?;
        topologies.push((t.name.clone(), topology));
    }
    let mut workloads: Vec<Workload> = Vec::new();
    for w in &exp.workloads {
        let mut load = w.load().map_err(|error| ExperimentError::Workload {
            path: path.to_path_buf(),
            name: w.name.clone(),
            error,
        })?;
        // A scenario file named by a workload is found beside the experiment file.
        // Whether it is a script is told there (by its name, or by its content when the name
        // does not say), not in the current directory.
        let first = match &mut load {
            Load::Run(flags) => flags.urls.first_mut(),
            Load::Capacity(flags) => Some(&mut flags.url),
            _ => None,
        };
        if let Some(first) = first {
            let file = Path::new(first.as_str());
            if file.is_relative() && !first.contains("://") {
                let beside = path.parent().unwrap_or(Path::new(".")).join(file);
                let beside = beside.to_string_lossy().into_owned();
                if crate::flags::is_scenario(&beside) {
                    *first = beside;
                }
            }
        }
        if workloads.iter().any(|x| x.name == w.name) {
            return Err(ExperimentError::SameName {
                path: path.to_path_buf(),
                name: w.name.clone(),
            });
        }
        workloads.push(Workload {
            name: w.name.clone(),
            load,
        });
    }
    let pairs = match exp.compare {
        None => Vec::new(),
        Some(Pairs::One(pair)) => vec![pair],
        Some(Pairs::Many(pairs)) => pairs,
    };
    let mut compare = Vec::new();
    for pair in pairs {
        let [a, b] =
            <[String; 2]>::try_from(pair.clone()).map_err(|_| ExperimentError::NotAPair {
                path: path.to_path_buf(),
                pair,
            })?;
        for name in [&a, &b] {
            if !workloads.iter().any(|w| &w.name == name) {
                return Err(ExperimentError::UnknownWorkload {
                    path: path.to_path_buf(),
                    name: name.clone(),
                });
            }
        }
        if a == b {
            return Err(ExperimentError::AgainstItself {
                path: path.to_path_buf(),
                name: a,
            });
        }
        compare.push((a, b));
    }
    let compares = topologies.len() > 1 || !compare.is_empty();
    let rounds = exp.rounds.unwrap_or(if compares { 3 } else { 1 });
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        return Err(ExperimentError::Rounds {
            path: path.to_path_buf(),
            rounds,
            max: MAX_ROUNDS,
        });
    }
    Ok(Experiment {
        name: exp.name,
        note: exp.note,
        topologies,
        workloads,
        rounds,
        compare,
        baselines,
        oversubscribe: exp.oversubscribe,
    })
}

impl TopologySpec {
    /// The topology described, before its defaults: loadlab's service (or the user's
    /// command) on a free port.
    pub fn input(&self) -> Result<TopologyInput, TopologyError> {
        let consumers = self.consumers.unwrap_or(0);
        let redis = match self.store.as_deref() {
            None | Some("memory") => consumers > 0,
            Some("redis") => true,
            Some(other) => return Err(TopologyError::UnknownStore(other.into())),
        };
        let static_at_lb = match self.static_files.as_deref() {
            None | Some("service") => false,
            Some("nginx") => true,
            Some(other) => return Err(TopologyError::UnknownStaticFiles(other.into())),
        };
        let mut serve_args = split_words(self.serve.as_deref().unwrap_or(""))
            .map_err(|e| TopologyError::ServeArgs(e.to_string()))?;
        if consumers > 0 {
            serve_args.push("--visits".into());
        }
        Ok(TopologyInput {
            workers: self.workers,
            replicas: self.replicas,
            lb: self.lb.as_deref().map(lb_named).transpose()?,
            port: None,
            command: self.cmd.clone(),
            runtime: self.runtime.as_deref().map(runtime_named).transpose()?,
            serve_args,
            health_path: None,
            ready_timeout: None,
            proxy_timeout: match &self.proxy_timeout {
                Some(d) => Some(
                    crate::values::parse_duration(d)
                        .map_err(|e| TopologyError::ProxyTimeout(e.to_string()))?,
                ),
                None => None,
            },
            lb_connections: self.lb_connections,
            shared_bbox: self
                .shared_bbox
                .as_deref()
                .map(split_words)
                .transpose()
                .map_err(|e| TopologyError::ServeArgs(e.to_string()))?,
            redis,
            consumers,
            shards: None,
            profile: self.profile,
            static_at_lb,
            stdout: self.stdout.as_deref().map(stdout_named).transpose()?,
            cpus: self.cpus,
            memory: self
                .memory
                .as_deref()
                .map(crate::values::memory_size)
                .transpose()
                .map_err(TopologyError::Memory)?,
            balancer_budget: self.other_budget(|b| &b.balancer, "budgets.balancer.cpus")?,
            store_budget: self.other_budget(|b| &b.store, "budgets.store.cpus")?,
            consumer_budget: self.other_budget(|b| &b.consumers, "budgets.consumers.cpus")?,
            autoscale: self
                .autoscale
                .as_ref()
                .map(AutoscaleSpec::autoscale)
                .transpose()?,
        })
    }

    /// The budget `pick` reads from `budgets:`, none when absent.
    fn other_budget(
        &self,
        pick: impl Fn(&BudgetsSpec) -> &Option<BudgetSpec>,
        whose: &'static str,
    ) -> Result<Budget, TopologyError> {
        match self.budgets.as_ref().and_then(|b| pick(b).as_ref()) {
            Some(spec) => spec.budget(whose),
            None => Ok(Budget::default()),
        }
    }

    /// The topology to deploy, lowered with the defaults every topology shares.
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        crate::topology::lower(&self.input()?)
    }
}

impl WorkloadSpec {
    /// What the workload measures: a fixed load (`run`), a breaking point (`capacity`) or the
    /// service's workers (`probe`).
    pub fn load(&self) -> Result<Load, WorkloadError> {
        match (&self.run, &self.capacity, &self.probe) {
            (Some(_), None, None) => Ok(Load::Run(self.flags()?)),
            (None, Some(words), None) => {
                if self.slo.is_some() {
                    return Err(WorkloadError::SloWithCapacity);
                }
                let flags = CapacityFlags::parse_words(&split_words(words)?)
                    .map_err(WorkloadError::Capacity)?;
                Ok(Load::Capacity(flags))
            }
            (None, None, Some(words)) => {
                if self.slo.is_some() {
                    return Err(WorkloadError::SloWithCapacity);
                }
                let flags = crate::probe::ProbeFlags::parse_words(&split_words(words)?)
                    .map_err(WorkloadError::Probe)?;
                Ok(Load::Probe(flags))
            }
            _ => Err(WorkloadError::RunOrCapacity),
        }
    }

    /// The workload's `run` as load flags (paths stand for URLs on the topology's front).
    pub fn flags(&self) -> Result<LoadFlags, FlagsError> {
        let run = self.run.as_deref().unwrap_or_default();
        let mut flags = LoadFlags::parse_words(&split_words(run)?)?;
        if let Some(slo) = &self.slo {
            let list = Threshold::parse_list(slo).map_err(FlagsError::Slo)?;
            flags.slo.push(ThresholdList(list));
        }
        Ok(flags)
    }
}

/// Splits a flag string on whitespace, keeping single- or double-quoted parts together.
pub fn split_words(s: &str) -> Result<Vec<String>, FlagsError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if quote.is_some() {
        return Err(FlagsError::UnbalancedQuote(s.into()));
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_make_no_folder_of_their_own_are_refused() {
        let at = |workloads: &str| {
            from_text(
                &format!("name: x\ntopologies: [{{ name: one }}]\nworkloads:\n{workloads}"),
                Path::new("e.yaml"),
            )
        };
        let e = at("  - { name: ping 300/s, run: /ping }\n  - { name: ping-300-s, run: /ping }\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"ping-300-s\", as \"ping 300/s\"'s"),
            "{e}"
        );
        let e = at("  - { name: \"!!!\", run: /ping }\n").unwrap_err();
        assert!(e.to_string().contains("it has none"), "{e}");
        let long = "w".repeat(101);
        let e = at(&format!("  - {{ name: {long}, run: /ping }}\n")).unwrap_err();
        assert!(
            e.to_string().contains("101 bytes, where 100 is the most"),
            "{e}"
        );
        assert!(at("  - { name: ping, run: /ping }\n  - { name: ping 2, run: /ping }\n").is_ok());
    }

    #[test]
    fn the_fingerprint_changes_with_a_workload_and_with_the_scenario_file_it_names() {
        let dir = std::env::temp_dir().join(format!("loadlab-exp-print-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = "config:\n  phases: [{ duration: 1, arrivalRate: 1 }]\nscenarios:\n  - flow:\n      - get: { url: /ping }\n";
        std::fs::write(dir.join("s.yml"), script).unwrap();
        let file = dir.join("e.yaml");
        let at = |workloads: &str| {
            std::fs::write(
                &file,
                format!("name: x\ntopologies: [{{ name: one }}]\nworkloads:\n{workloads}"),
            )
            .unwrap();
            load(&file).unwrap().fingerprint()
        };
        let began =
            at("  - { name: ping, run: \"/ping -d 2s\" }\n  - { name: flow, run: s.yml }\n");
        let again =
            at("  - { name: ping, run: \"/ping -d 2s\" }\n  - { name: flow, run: s.yml }\n");
        assert_eq!(again, began, "the same file, the same fingerprint");
        let longer =
            at("  - { name: ping, run: \"/ping -d 3s\" }\n  - { name: flow, run: s.yml }\n");
        assert_eq!(longer.changes_since(&began), ["workload \"ping\" changed"]);
        std::fs::write(dir.join("s.yml"), script.replace("/ping", "/pong")).unwrap();
        let edited =
            at("  - { name: ping, run: \"/ping -d 2s\" }\n  - { name: flow, run: s.yml }\n");
        assert_eq!(edited.changes_since(&began), ["workload \"flow\" changed"]);
    }
    use loadlab_run::topology::Runtime;

    #[test]
    fn every_example_experiment_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let exp = load(&path).unwrap_or_else(|e| panic!("{e:#}"));
                assert!(
                    exp.note.is_some(),
                    "{} says what it shortens",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen >= 4, "{seen} examples");
    }

    #[test]
    fn a_workload_names_a_json_script_or_one_told_by_its_content_beside_the_experiment() {
        let dir = std::env::temp_dir().join(format!("loadlab-exp-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = r#"{"config": {"phases": [{"duration": 1, "arrivalCount": 1}]},
            "scenarios": [{"flow": [{"get": {"url": "/ping"}}]}]}"#;
        std::fs::write(dir.join("hello.json"), script).unwrap();
        std::fs::write(dir.join("hello-script"), script).unwrap();
        let file = dir.join("e.yaml");
        std::fs::write(
            &file,
            "name: json-scripts\ntopologies:\n  - { name: one, replicas: 1 }\nworkloads:\n  - { name: json, run: hello.json }\n  - { name: content, run: hello-script }\n",
        )
        .unwrap();
        let exp = load(&file).unwrap_or_else(|e| panic!("{e:#}"));
        for (w, name) in exp.workloads.iter().zip(["hello.json", "hello-script"]) {
            let Load::Run(flags) = &w.load else {
                panic!("a run workload");
            };
            assert_eq!(Path::new(&flags.urls[0]), dir.join(name));
            assert!(flags.is_scenario(), "{}", flags.urls[0]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_topology_names_its_runtime() {
        let spec = |runtime: Option<&str>| TopologySpec {
            name: "t".into(),
            replicas: Some(6),
            workers: Some(3),
            lb: Some("nginx".into()),
            cmd: None,
            runtime: runtime.map(String::from),
            serve: None,
            proxy_timeout: None,
            lb_connections: None,
            shared_bbox: None,
            store: None,
            consumers: None,
            profile: false,
            static_files: None,
            stdout: None,
            cpus: None,
            memory: None,
            budgets: None,
            against: None,
            autoscale: None,
        };
        assert_eq!(spec(None).topology().unwrap().runtime, Runtime::Rust);
        assert_eq!(
            spec(Some("python")).topology().unwrap().runtime,
            Runtime::Python
        );
        let err = spec(Some("java")).topology().unwrap_err().to_string();
        assert_eq!(err, "unknown runtime \"java\"; use rust, node or python");
    }

    #[test]
    fn an_experiment_error_names_the_file_the_topology_and_the_cause() {
        let dir = std::env::temp_dir().join(format!("loadlab-exp-err-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("e.yaml");
        std::fs::write(
            &file,
            "name: e\ntopologies:\n  - { name: big, runtime: java }\nworkloads:\n  - { name: w, run: /ping }\n",
        )
        .unwrap();
        let e = load(&file).unwrap_err();
        let crate::InputError::Experiment(exp) = &e else {
            panic!("{e:?}");
        };
        let ExperimentError::Topology { path, name, error } = exp.as_ref() else {
            panic!("{e:?}");
        };
        assert_eq!((path, name.as_str()), (&file, "big"));
        assert_eq!(error, &TopologyError::UnknownRuntime("java".into()));
        assert_eq!(
            e.to_string(),
            format!(
                "{}: topology \"big\": unknown runtime \"java\"; use rust, node or python",
                file.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn words_split_on_spaces_and_keep_quotes() {
        assert_eq!(
            split_words("/ping -H 'X-A: b c' -d 10s").unwrap(),
            vec!["/ping", "-H", "X-A: b c", "-d", "10s"]
        );
        assert!(matches!(
            split_words("-H 'open"),
            Err(FlagsError::UnbalancedQuote(_))
        ));
    }

    #[test]
    fn a_topologys_store_is_memory_or_redis() {
        let spec = |store: &str| -> TopologySpec {
            serde_saphyr::from_str(&format!("name: t\nstore: {store}\n")).unwrap()
        };
        assert!(spec("redis").topology().unwrap().redis);
        assert!(!spec("memory").topology().unwrap().redis);
        let e = spec("postgres").topology().unwrap_err();
        assert!(e.to_string().contains("memory or redis"), "{e}");
    }

    #[test]
    fn an_autoscaled_topology_takes_its_platforms_defaults_and_refuses_what_it_would() {
        let spec = |yaml: &str| -> TopologySpec {
            serde_saphyr::from_str(&format!("name: t\n{yaml}\n")).unwrap()
        };
        let hpa = spec("cpus: 0.2\nautoscale: { policy: hpa, max: 6 }")
            .topology()
            .unwrap();
        let a = hpa.autoscale.clone().unwrap();
        assert_eq!(
            (a.policy, a.metric, a.min, a.max),
            (ScalePolicy::Hpa, ScaleMetric::Cpu, 1, 6)
        );
        // kubectl autoscale's 80 % of the quota, Kubernetes' sync and windows.
        assert!((a.target - 0.8).abs() < 1e-9);
        assert_eq!(
            (a.sync.as_secs(), a.scale_down_stabilization.as_secs()),
            (15, 300)
        );
        // Its most instances' quotas are what the topology may use.
        assert!((hpa.quota_total() - 1.2).abs() < 1e-9);
        let kpa = spec(
            "autoscale: { policy: kpa, min: 0, max: 4, container_concurrency: 8, \
             stable_window: 10s, panic_threshold: 300, utilization: 50 }",
        )
        .topology()
        .unwrap();
        let a = kpa.autoscale.unwrap();
        assert_eq!((a.metric, a.min), (ScaleMetric::Concurrency, 0));
        // Without a target, the container's concurrency (Knative's).
        assert_eq!((a.target, a.container_concurrency), (8.0, Some(8)));
        assert_eq!(
            (a.stable_window.as_secs(), a.panic_window.as_secs()),
            (10, 6)
        );
        assert!((a.panic_threshold - 3.0).abs() < 1e-9 && (a.utilization - 0.5).abs() < 1e-9);
        for (yaml, says) in [
            ("autoscale: { policy: vpa, max: 2 }", "hpa or kpa"),
            (
                "replicas: 2\nautoscale: { policy: kpa, max: 2 }",
                "not replicas",
            ),
            ("lb: nginx\nautoscale: { policy: kpa, max: 2 }", "drop lb"),
            (
                "autoscale: { policy: hpa, min: 0, max: 2, metric: rps }",
                "min 1 or more",
            ),
            (
                "cpus: 0.2\nautoscale: { policy: kpa, max: 2, metric: cpu }",
                "use policy hpa",
            ),
            ("autoscale: { policy: hpa, max: 2 }", "fractional cpus"),
            (
                "autoscale: { policy: kpa, min: 3, max: 2 }",
                "min at most max",
            ),
            (
                "autoscale: { policy: kpa, max: 2, stable_window: 2s }",
                "panic_window",
            ),
            (
                "autoscale: { policy: kpa, max: 2, cold_start: soon }",
                "cold_start",
            ),
        ] {
            let e = spec(yaml).topology().unwrap_err().to_string();
            assert!(
                e.starts_with("autoscale: ") && e.contains(says),
                "{yaml}: {e}"
            );
        }
    }

    #[test]
    fn the_autoscale_flag_takes_the_files_keys_and_refuses_in_one_line() {
        let a =
            autoscale_flag("kpa,min=0,max=5,container_concurrency=10,stable_window=6s").unwrap();
        assert_eq!(
            (a.policy, a.metric, a.min, a.max, a.container_concurrency),
            (ScalePolicy::Kpa, ScaleMetric::Concurrency, 0, 5, Some(10))
        );
        assert_eq!((a.target, a.stable_window.as_secs()), (10.0, 6));
        let a = autoscale_flag("policy=hpa, max=4, target=60").unwrap();
        assert_eq!((a.policy, a.min), (ScalePolicy::Hpa, 1));
        assert!((a.target - 0.6).abs() < 1e-9);
        for (flag, says) in [
            ("kpa,max=5,windw=6s", "windw"),
            ("kpa", "max"),
            ("kpa,max=5,hpa", "is not KEY=VALUE"),
            ("kpa,max=5: 3", "a key and a number or word"),
            ("kpa,max=five", "max=five: invalid u32"),
            ("vpa,max=2", "hpa or kpa"),
        ] {
            let e = autoscale_flag(flag).unwrap_err().to_string();
            assert!(
                e.starts_with("autoscale: ") && e.contains(says) && !e.contains('\n'),
                "{flag}: {e}"
            );
        }
    }

    #[test]
    fn a_workload_becomes_run_flags_aimed_at_the_front() {
        let w = WorkloadSpec {
            name: "x".into(),
            run: Some("/delay?ms=5 -R 300 -d 10s".into()),
            capacity: None,
            probe: None,
            slo: Some("p99<300ms".into()),
        };
        let flags = w.flags().unwrap();
        assert_eq!(flags.urls, vec!["/delay?ms=5"]);
        assert_eq!(flags.rate, Some(300.0));
        let plan = crate::lower::workload(&flags, &["http://127.0.0.1:8080".into()], &[]).unwrap();
        assert_eq!(plan.target_urls(), vec!["http://127.0.0.1:8080/delay?ms=5"]);
        let fronts = [
            "http://127.0.0.1:8081".into(),
            "http://127.0.0.1:8082".into(),
        ];
        let both = crate::lower::workload(&flags, &fronts, &fronts).unwrap();
        assert_eq!(
            both.target_urls(),
            vec![
                "http://127.0.0.1:8081/delay?ms=5",
                "http://127.0.0.1:8082/delay?ms=5"
            ]
        );
        assert_eq!(plan.thresholds.len(), 1);
        let bad = WorkloadSpec {
            name: "y".into(),
            run: Some("/ping -c 0".into()),
            capacity: None,
            probe: None,
            slo: None,
        };
        assert!(matches!(bad.flags(), Err(FlagsError::Words(_))));
        let bad_slo = WorkloadSpec {
            name: "z".into(),
            run: Some("/ping".into()),
            capacity: None,
            probe: None,
            slo: Some("p99<soon".into()),
        };
        assert!(matches!(bad_slo.flags(), Err(FlagsError::Slo(_))));
    }

    fn experiment(text: &str) -> Result<Experiment, ExperimentError> {
        let dir = std::env::temp_dir().join(format!("loadlab-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{}.yaml", fastrand::u64(..)));
        std::fs::write(&file, text).unwrap();
        let read = read(&file);
        let _ = std::fs::remove_file(&file);
        read
    }

    #[test]
    fn an_experiment_names_its_question_rounds_pairs_and_breaking_points() {
        let e = experiment(
            "name: q\n\
             topologies: [{ name: one }, { name: three, workers: 3, stdout: null }]\n\
             workloads:\n\
             - { name: a, run: /ping -c 2 -d 2s }\n\
             - { name: b, run: /ping?x=1 -c 2 -d 2s }\n\
             - { name: k, capacity: \"/block?ms=20 --slo 'p99<100ms' --max-time 20s\" }\n\
             compare: [a, b]\n",
        )
        .unwrap();
        assert_eq!(e.rounds, 3, "a comparison gets 3 rounds unless told");
        assert_eq!(e.topologies[0].1.stdout, loadlab_run::Stdout::Pipe);
        assert_eq!(
            e.topologies[1].1.stdout,
            loadlab_run::Stdout::Null,
            "YAML's null names /dev/null here"
        );
        assert_eq!(e.compare, vec![("a".to_string(), "b".to_string())]);
        assert!(matches!(&e.workloads[2].load, Load::Capacity(f) if f.slo == "p99<100ms"));
        let one = experiment(
            "name: q\ntopologies: [{ name: one }]\nworkloads: [{ name: a, run: /ping }]\n",
        )
        .unwrap();
        assert_eq!(one.rounds, 1, "nothing to compare: one round");
        for (bad, says) in [
            ("compare: [a, zz]", "which is no workload"),
            ("compare: [a, a]", "against itself"),
            ("compare: [[a, b, a]]", "pairs of workload names"),
            ("rounds: 0", "rounds must be from 1"),
        ] {
            let text = format!(
                "name: q\ntopologies: [{{ name: one }}]\n\
                 workloads: [{{ name: a, run: /ping }}, {{ name: b, run: /ping }}]\n{bad}\n"
            );
            let e = format!("{:#}", experiment(&text).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
        let neither = "name: q\ntopologies: [{ name: one }]\nworkloads: [{ name: a }]\n";
        let e = format!("{:#}", experiment(neither).unwrap_err());
        assert!(e.contains("give run (a fixed load), capacity"), "{e}");
    }

    #[test]
    fn a_topology_takes_a_cpu_quota_and_a_memory_limit() {
        let dir = std::env::temp_dir().join(format!("loadlab-exp-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("e.yaml");
        let write = |topology: &str| {
            std::fs::write(
                &file,
                format!(
                    "name: e\ntopologies:\n  - {topology}\nworkloads:\n  - {{ name: w, run: /ping }}\n"
                ),
            )
            .unwrap();
        };
        write("{ name: small, replicas: 2, cpus: 0.5, memory: 128M }");
        let exp = load(&file).unwrap();
        let t = &exp.topologies[0].1;
        assert_eq!((t.cpu_quota, t.memory_bytes), (Some(0.5), Some(128 << 20)));
        write("{ name: small, memory: lots }");
        let e = load(&file).unwrap_err().to_string();
        assert!(e.contains("topology \"small\": memory:"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
