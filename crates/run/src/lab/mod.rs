//! The lab directory, the contract of everything above one run, as `dir` is of a run: where
//! each cell's run directory goes, what the experiment and each cell were (`experiment.json`,
//! `cell.json`), what a capacity or probe workload found (`capacity.json`, `probe.json`, the
//! same documents as `capacity --json` and `probe --json`), and `lab.json` (schema
//! `loadlab.lab/v1`). Written and read only here, so `loadlab report LAB_DIR` can judge last
//! week's lab again without running it.
//!
//! ```text
//! LAB_DIR/experiment.json                 the question, written before the first cell
//! LAB_DIR/<topology>/<workload>/          a cell: a run directory and its cell.json
//!                        [round-N/]       (one folder per round when there are several)
//! LAB_DIR/lab.json                        cells as judged, and the verdicts (written last)
//! LAB_DIR/comparison.csv, report.html     the same, for a spreadsheet and a browser
//! ```

pub mod capacity;
pub mod judged;
pub mod probe;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use capacity::{CapacityResult, RateStep, WorkUnit};
pub use judged::{CellResult, Factor, LabJson, Limit, Measured, Verdict};
pub use probe::{OpenStep, ProbeResult, ProbeStep, ProbeVerdict, RateLimit};

use crate::dir::write_atomic;
use crate::summary::Summary;

/// The schema name of `lab.json`.
pub const LAB_SCHEMA: &str = "loadlab.lab/v1";
/// The schema name of `experiment.json`.
pub const EXPERIMENT_SCHEMA: &str = "loadlab.experiment/v1";

/// A file-name-safe form of a name: lower-case letters and digits, the rest one `-`.
pub fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Where a cell's run directory goes, relative to the lab directory: `<topology>/<workload>/`,
/// and `round-N/` below it (N from 1) when the experiment has several rounds.
pub fn cell_path(topology: &str, workload: &str, round: usize, rounds: usize) -> PathBuf {
    let dir = PathBuf::from(slug(topology)).join(slug(workload));
    if rounds > 1 {
        dir.join(format!("round-{}", round + 1))
    } else {
        dir
    }
}

/// A topology of the experiment as the judgments need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TopologyEntry {
    /// Its name in the experiment file.
    pub name: String,
    /// Processes serving it (replicas × workers), for the ideal scaling.
    pub processes: usize,
    /// Its replicas' CPU quotas together, CPUs, when they have quotas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
}

/// The experiment as the lab ran it (`experiment.json`, written before the first cell): what
/// it compares, and on what machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Experiment {
    /// `loadlab.experiment/v1`.
    pub schema: String,
    /// The experiment's name.
    pub name: String,
    /// Rounds of every cell.
    pub rounds: usize,
    /// Workload pairs compared (baseline, variant).
    pub compare: Vec<(String, String)>,
    /// Each topology judged against another: (variant, baseline); every topology against the
    /// first when empty.
    pub baselines: Vec<(String, String)>,
    /// The topologies, in order.
    pub topologies: Vec<TopologyEntry>,
    /// The workloads' names, in order.
    pub workloads: Vec<String>,
    /// The host's cores when the lab ran (`None` in labs written before it was recorded).
    pub cores: Option<usize>,
    /// What the experiment file said, part by part, so `lab --resume` can tell whether it
    /// changed (`None` in labs written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
}

/// An experiment file, part by part, as digests: its settings as a whole (rounds, comparisons,
/// baselines), each topology's definition, and each workload's (with the scenario file it
/// names). Equal fingerprints ran the same lab.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Fingerprint {
    /// Rounds, comparisons, baselines and oversubscription.
    pub settings: String,
    /// Each topology by name, in order, with its definition's digest.
    pub topologies: Vec<(String, String)>,
    /// Each workload by name, in order, with its definition's digest.
    pub workloads: Vec<(String, String)>,
}

impl Fingerprint {
    /// What changed from `earlier` to this one, in words (empty when nothing did).
    pub fn changes_since(&self, earlier: &Fingerprint) -> Vec<String> {
        let mut changes = Vec::new();
        if self.settings != earlier.settings {
            changes.push("its rounds, comparisons or baselines".to_string());
        }
        for (kind, now, then) in [
            ("topology", &self.topologies, &earlier.topologies),
            ("workload", &self.workloads, &earlier.workloads),
        ] {
            for (name, digest) in now {
                match then.iter().find(|(n, _)| n == name) {
                    None => changes.push(format!("{kind} {name:?} is new")),
                    Some((_, d)) if d != digest => changes.push(format!("{kind} {name:?} changed")),
                    Some(_) => {}
                }
            }
            for (name, _) in then {
                if !now.iter().any(|(n, _)| n == name) {
                    changes.push(format!("{kind} {name:?} is gone"));
                }
            }
            let order = |list: &[(String, String)]| -> Vec<String> {
                list.iter().map(|(n, _)| n.clone()).collect()
            };
            let (a, b) = (order(now), order(then));
            if changes.is_empty() && a != b {
                changes.push(format!("the order of the {kind}s"));
            }
        }
        changes
    }
}

impl Experiment {
    /// Every cell of the experiment in the order the lab runs them (round by round, topology
    /// by topology): (topology, workload, round).
    pub fn cells(&self) -> impl Iterator<Item = (&str, &str, usize)> {
        (0..self.rounds).flat_map(move |round| {
            self.topologies.iter().flat_map(move |t| {
                self.workloads
                    .iter()
                    .map(move |w| (t.name.as_str(), w.as_str(), round))
            })
        })
    }

    /// Processes serving `topology` (1 when it is not one of the experiment's).
    pub fn processes(&self, topology: &str) -> usize {
        self.topologies
            .iter()
            .find(|t| t.name == topology)
            .map_or(1, |t| t.processes)
    }

    /// The CPU quotas of `topology`'s replicas together, when they have quotas.
    pub fn cpus(&self, topology: &str) -> Option<f64> {
        self.topologies
            .iter()
            .find(|t| t.name == topology)
            .and_then(|t| t.cpus)
    }
}

/// One cell of a lab: a workload run against a topology in one round, what it measured, and
/// why it does not count when it does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabCell {
    /// Topology name.
    pub topology: String,
    /// Workload name.
    pub workload: String,
    /// The round, from 0.
    pub round: usize,
    /// The run's summary (for a breaking-point search, the run at the highest rate that met
    /// the objective; empty when the cell has no run).
    pub summary: Summary,
    /// What a capacity workload's search found.
    pub capacity: Option<CapacityResult>,
    /// What a probe workload found.
    pub probe: Option<ProbeResult>,
    /// Why the cell does not count in the comparisons, when it does not.
    pub excluded: Option<String>,
}

/// `cell.json`: which cell a run directory is, and whether it counts.
#[derive(Debug, Serialize, Deserialize)]
struct CellRecord {
    topology: String,
    workload: String,
    round: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    excluded: Option<String>,
}

/// A lab read back from its directory.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedLab {
    /// The experiment as it ran.
    pub experiment: Experiment,
    /// Its cells that ran, in the order they ran.
    pub cells: Vec<LabCell>,
    /// The lab's directory.
    pub dir: PathBuf,
}

impl SavedLab {
    /// Where `cell`'s run directory is, relative to the lab directory.
    pub fn cell_path(&self, cell: &LabCell) -> PathBuf {
        cell_path(
            &cell.topology,
            &cell.workload,
            cell.round,
            self.experiment.rounds,
        )
    }
}

/// A lab directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LabDirError {
    /// A file could not be read or written.
    #[error("cannot {action} {path}: {error}")]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        error: io::Error,
    },
    /// A file is not what this loadlab writes there.
    #[error("{path} is not a loadlab {what}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What it should have been.
        what: &'static str,
        /// Why it is not.
        reason: String,
    },
    /// The directory has neither `experiment.json` nor `lab.json`.
    #[error(
        "{0} is not a lab directory (no experiment.json or lab.json); give the --out folder of \
         `loadlab lab`"
    )]
    NotALab(PathBuf),
}

/// Writes `value` as pretty JSON to `path`, atomically.
fn write_json(path: &Path, value: &impl Serialize) -> Result<(), LabDirError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| LabDirError::Format {
        path: path.to_path_buf(),
        what: "document",
        reason: e.to_string(),
    })? + "\n";
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|error| LabDirError::Io {
            action: "write",
            path: parent.to_path_buf(),
            error,
        })?;
    }
    write_atomic(path, text.as_bytes()).map_err(|e| LabDirError::Io {
        action: "write",
        path: e.path,
        error: e.error,
    })
}

/// Reads the JSON document `path` as a `what`; `None` when there is no such file.
fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, LabDirError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(LabDirError::Io {
                action: "read",
                path: path.to_path_buf(),
                error,
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| LabDirError::Format {
            path: path.to_path_buf(),
            what,
            reason: e.to_string(),
        })
}

/// Writes `experiment.json` into the lab directory `dir` (creating it).
pub fn write_experiment(dir: &Path, experiment: &Experiment) -> Result<(), LabDirError> {
    write_json(&dir.join("experiment.json"), experiment)
}

/// Writes what the lab knows of `cell` beside its run directory, in `dir` (the cell's):
/// `capacity.json` or `probe.json` for those workloads, then `cell.json`, last. The run
/// directory itself is `dir::write_run_dir`'s, written before.
pub fn write_cell(dir: &Path, cell: &LabCell) -> Result<(), LabDirError> {
    let record = CellRecord {
        topology: cell.topology.clone(),
        workload: cell.workload.clone(),
        round: cell.round,
        excluded: cell.excluded.clone(),
    };
    if let Some(found) = &cell.capacity {
        write_capacity(&dir.join("capacity.json"), found)?;
    }
    if let Some(probed) = &cell.probe {
        write_probe(&dir.join("probe.json"), probed)?;
    }
    // Last: a cell with its record is finished, and `lab --resume` keeps it as it is.
    write_json(&dir.join("cell.json"), &record)
}

/// Writes a capacity search's result (`capacity --json`, a cell's `capacity.json`).
pub fn write_capacity(path: &Path, found: &CapacityResult) -> Result<(), LabDirError> {
    write_json(path, found)
}

/// Writes a probe's result (`probe --json`, a cell's `probe.json`).
pub fn write_probe(path: &Path, probed: &ProbeResult) -> Result<(), LabDirError> {
    write_json(path, probed)
}

/// Writes `lab.json` into the lab directory `dir`.
pub fn write_lab_json(dir: &Path, lab: &LabJson) -> Result<(), LabDirError> {
    write_json(&dir.join("lab.json"), lab)
}

/// Reads `lab.json` from the lab directory `dir`; `None` when it has none.
pub fn read_lab_json(dir: &Path) -> Result<Option<LabJson>, LabDirError> {
    read_json(&dir.join("lab.json"), "lab.json")
}

/// The summary in a cell's run directory, or an empty one when the cell has none (its
/// topology did not answer).
fn cell_summary(dir: &Path) -> Result<Summary, LabDirError> {
    Ok(read_json(&dir.join("summary.json"), "summary")?.unwrap_or_default())
}

/// True when `dir` is a lab directory: it has `experiment.json` or `lab.json` and is no run
/// directory.
pub fn is_lab_dir(dir: &Path) -> bool {
    !dir.join("summary.json").exists()
        && (dir.join("experiment.json").exists() || dir.join("lab.json").exists())
}

/// Reads a lab directory: the experiment and every cell that ran, with its summary and what a
/// capacity or probe workload found. A lab from before `experiment.json` and `cell.json` were
/// written is read from its `lab.json`, whose cells carry what their searches found.
pub fn read_lab_dir(dir: &Path) -> Result<SavedLab, LabDirError> {
    let experiment: Option<Experiment> = read_json(&dir.join("experiment.json"), "experiment")?;
    let Some(experiment) = experiment else {
        let lab = read_lab_json(dir)?.ok_or_else(|| LabDirError::NotALab(dir.to_path_buf()))?;
        return read_older_lab(dir, &lab);
    };
    let mut cells = Vec::new();
    for (topology, workload, round) in experiment.cells() {
        let cell_dir = dir.join(cell_path(topology, workload, round, experiment.rounds));
        let record: Option<CellRecord> = read_json(&cell_dir.join("cell.json"), "cell")?;
        // A cell without its record never ran: the lab was stopped before it.
        let Some(record) = record else {
            continue;
        };
        cells.push(LabCell {
            topology: record.topology,
            workload: record.workload,
            round: record.round,
            summary: cell_summary(&cell_dir)?,
            capacity: read_json(&cell_dir.join("capacity.json"), "capacity result")?,
            probe: read_json(&cell_dir.join("probe.json"), "probe result")?,
            excluded: record.excluded,
        });
    }
    Ok(SavedLab {
        experiment,
        cells,
        dir: dir.to_path_buf(),
    })
}

/// A lab written before `experiment.json`: the experiment and the cells from `lab.json`, each
/// cell's summary from its run directory, and what a search found from `capacity.json` or
/// `probe.json` when the cell kept one, else from the figures `lab.json` kept of it.
fn read_older_lab(dir: &Path, lab: &LabJson) -> Result<SavedLab, LabDirError> {
    let mut topologies: Vec<TopologyEntry> = Vec::new();
    let mut workloads: Vec<String> = Vec::new();
    for c in &lab.cells {
        if !topologies.iter().any(|t| t.name == c.topology) {
            topologies.push(TopologyEntry {
                name: c.topology.clone(),
                processes: c.processes,
                cpus: c.cpus,
            });
        }
        if !workloads.contains(&c.workload) {
            workloads.push(c.workload.clone());
        }
    }
    let experiment = Experiment {
        schema: EXPERIMENT_SCHEMA.to_string(),
        name: lab.name.clone(),
        rounds: lab.rounds,
        compare: lab.compare.clone(),
        baselines: lab.baselines.clone(),
        topologies,
        workloads,
        cores: lab.cores,
        fingerprint: None,
    };
    let mut cells = Vec::new();
    for c in &lab.cells {
        let cell_dir = dir.join(cell_path(&c.topology, &c.workload, c.round, lab.rounds));
        let capacity = match read_json(&cell_dir.join("capacity.json"), "capacity result")? {
            Some(found) => Some(found),
            None => capacity_kept_in(c),
        };
        let probe = match read_json(&cell_dir.join("probe.json"), "probe result")? {
            Some(probed) => Some(probed),
            None => probe_kept_in(c),
        };
        cells.push(LabCell {
            topology: c.topology.clone(),
            workload: c.workload.clone(),
            round: c.round,
            summary: cell_summary(&cell_dir)?,
            capacity,
            probe,
            excluded: c.excluded.clone(),
        });
    }
    Ok(SavedLab {
        experiment,
        cells,
        dir: dir.to_path_buf(),
    })
}

/// What a lab written before cells kept `capacity.json` held of a breaking-point cell: the
/// rate its `lab.json` kept (no steps); `None` for a cell of another workload.
fn capacity_kept_in(cell: &CellResult) -> Option<CapacityResult> {
    let Measured::Capacity { breaking_point_rps } = cell.measured else {
        return None;
    };
    Some(CapacityResult {
        max_rate_rps: breaking_point_rps,
        stopped_because: "read from lab.json (the cell kept no capacity.json)".to_string(),
        ..CapacityResult::default()
    })
}

/// What a lab written before cells kept `probe.json` held of a probe cell: the verdict's
/// figures its `lab.json` kept (no steps); `None` for a cell of another workload.
fn probe_kept_in(cell: &CellResult) -> Option<ProbeResult> {
    let Measured::Probe {
        behaviour,
        workers,
        service_time_ms,
        max_throughput_rps,
    } = cell.measured
    else {
        return None;
    };
    let observed = cell
        .limits
        .iter()
        .any(|l| matches!(l, Limit::Probed { observed: true, .. }));
    Some(ProbeResult {
        url: String::new(),
        verdict: Some(ProbeVerdict {
            kind: behaviour,
            workers,
            workers_observed: observed,
            workers_range: None,
            service_time_ms,
            service_time_ci_ms: None,
            max_throughput_rps,
            hard_limit: false,
            explanation: String::new(),
            pool_error_pct: None,
            binding: None,
            usl: None,
            rate_limit: None,
        }),
        stopped_because: "read from lab.json (the cell kept no probe.json)".to_string(),
        steps: Vec::new(),
        open_steps: Vec::new(),
    })
}

/// The JSON Schema of `lab.json`, generated from these types (kept in `schemas/lab.v1.json`
/// and checked by a test).
pub fn lab_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(LabJson)).expect("a schema serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_names_each_part_that_changed_and_nothing_else() {
        let print = |workloads: &[(&str, &str)]| Fingerprint {
            settings: "s".into(),
            topologies: vec![("one".into(), "t1".into())],
            workloads: workloads
                .iter()
                .map(|(n, d)| (n.to_string(), d.to_string()))
                .collect(),
        };
        let began = print(&[("ping", "a"), ("calc", "b")]);
        assert!(began.changes_since(&began).is_empty());
        assert_eq!(
            print(&[("ping", "a"), ("calc", "c")]).changes_since(&began),
            ["workload \"calc\" changed"]
        );
        assert_eq!(
            print(&[("ping", "a"), ("heavy", "b")]).changes_since(&began),
            ["workload \"heavy\" is new", "workload \"calc\" is gone"]
        );
        assert_eq!(
            print(&[("calc", "b"), ("ping", "a")]).changes_since(&began),
            ["the order of the workloads"]
        );
        let more_rounds = Fingerprint {
            settings: "s2".into(),
            ..began.clone()
        };
        assert_eq!(
            more_rounds.changes_since(&began),
            ["its rounds, comparisons or baselines"]
        );
    }

    #[test]
    fn names_become_folder_names() {
        assert_eq!(slug("6 replicas / nginx"), "6-replicas-nginx");
        assert_eq!(slug("Ping 300/s"), "ping-300-s");
    }

    #[test]
    fn a_cell_has_one_path_with_a_round_folder_only_when_there_are_rounds() {
        assert_eq!(
            cell_path("3 replicas", "calc 600/s", 0, 1),
            PathBuf::from("3-replicas/calc-600-s")
        );
        assert_eq!(
            cell_path("3 replicas", "calc 600/s", 1, 3),
            PathBuf::from("3-replicas/calc-600-s/round-2")
        );
    }

    fn experiment() -> Experiment {
        Experiment {
            schema: EXPERIMENT_SCHEMA.into(),
            name: "scaling".into(),
            rounds: 2,
            compare: vec![],
            baselines: vec![],
            topologies: vec![
                TopologyEntry {
                    name: "one".into(),
                    processes: 1,
                    cpus: None,
                },
                TopologyEntry {
                    name: "three".into(),
                    processes: 3,
                    cpus: None,
                },
            ],
            workloads: vec!["ping".into(), "calc".into()],
            cores: Some(2),
            fingerprint: None,
        }
    }

    #[test]
    fn the_cells_run_round_by_round_then_topology_by_topology() {
        let e = experiment();
        let order: Vec<(&str, &str, usize)> = e.cells().collect();
        assert_eq!(order.len(), 8);
        assert_eq!(order[0], ("one", "ping", 0));
        assert_eq!(order[1], ("one", "calc", 0));
        assert_eq!(order[2], ("three", "ping", 0));
        assert_eq!(order[4], ("one", "ping", 1));
        assert_eq!(e.processes("three"), 3);
        assert_eq!(e.processes("none"), 1);
    }

    #[test]
    fn a_lab_directory_reads_back_the_cells_that_ran_and_skips_those_that_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let e = experiment();
        write_experiment(dir.path(), &e).unwrap();
        let mut summary = Summary::default();
        summary.requests.completed = 42;
        let ran = LabCell {
            topology: "one".into(),
            workload: "ping".into(),
            round: 0,
            summary: summary.clone(),
            excluded: Some("a replica exited".into()),
            ..LabCell::default()
        };
        let cell_dir = dir.path().join(cell_path("one", "ping", 0, 2));
        write_cell(&cell_dir, &ran).unwrap();
        crate::write_summary(&cell_dir.join("summary.json"), &summary).unwrap();
        let saved = read_lab_dir(dir.path()).unwrap();
        assert_eq!(saved.experiment, e);
        assert_eq!(saved.cells, vec![ran]);
        assert_eq!(dir.path().join(saved.cell_path(&saved.cells[0])), cell_dir);
    }

    #[test]
    fn figures_read_back_bit_for_bit() {
        // A lab judged again must give the verdicts it gave when it ran: a figure read back from
        // its files must be the figure written (serde_json's float_roundtrip).
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let x = rng.f64() * 10f64.powi(rng.i32(-6..9));
            let back: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e}");
        }
    }

    #[test]
    fn a_folder_that_is_no_lab_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_lab_dir(dir.path()).unwrap_err();
        assert!(matches!(err, LabDirError::NotALab(_)), "{err}");
        fs::write(dir.path().join("experiment.json"), "{}").unwrap();
        let err = read_lab_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is not a loadlab experiment"), "{err}");
    }

    /// A probe of a service that scales in proportion, as a lab cell keeps it.
    fn linear_probe() -> ProbeResult {
        use crate::lab::probe::{Kind, ProbeVerdict, Usl, UslFit};
        ProbeResult {
            url: "http://127.0.0.1:1/bbox/async".into(),
            verdict: Some(ProbeVerdict {
                kind: Kind::Async,
                workers: None,
                workers_observed: false,
                workers_range: None,
                service_time_ms: 51.7,
                service_time_ci_ms: None,
                max_throughput_rps: 173.3,
                hard_limit: false,
                explanation: "async".into(),
                pool_error_pct: None,
                binding: None,
                usl: Some(UslFit {
                    law: Usl {
                        lambda: 19.4,
                        sigma: 0.0,
                        kappa: 0.0,
                    },
                    peak_concurrency: None,
                    peak_throughput_rps: None,
                    r_squared: 0.9999,
                    explains: true,
                    set_aside: None,
                }),
                rate_limit: None,
            }),
            stopped_because: "done".into(),
            steps: Vec::new(),
            open_steps: Vec::new(),
        }
    }

    #[test]
    fn a_probe_reads_back_whole_or_not_at_all() {
        // A law without contention or coherency has no limit: written as none, read back.
        let probed = linear_probe();
        let text = serde_json::to_string(&probed).unwrap();
        let back: ProbeResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, probed);
        // A verdict with a field it cannot read is an error that names it, not a probe without
        // a verdict (once an unbounded peak written as null lost a lab cell's verdict).
        let broken = text.replace("\"r_squared\":0.9999", "\"r_squared\":null");
        assert_ne!(broken, text);
        let err = serde_json::from_str::<ProbeResult>(&broken).unwrap_err();
        assert!(err.to_string().contains("r_squared"), "{err}");
        // A probe that found nothing has no verdict.
        let nothing = ProbeResult {
            verdict: None,
            ..linear_probe()
        };
        let text = serde_json::to_string(&nothing).unwrap();
        assert_eq!(serde_json::from_str::<ProbeResult>(&text).unwrap(), nothing);
    }
}
