//! A lab judged: from its cells as read (or just run) to what each measured and what limited
//! it, the verdicts of each factor the experiment varies, and where two load models on one
//! target disagree — the same whether the lab has just run or `loadlab report LAB_DIR` reads
//! last week's.

use loadlab_run::lab::judged::ScaledCell;
use loadlab_run::lab::{CellResult, LabCell, LabJson, Limit, Measured, SavedLab, LAB_SCHEMA};
use loadlab_run::Summary;

use crate::models::disagreement_line;
use crate::verdict::{limits, saturated, verdicts};

/// What a lab's cells say, judged: `lab.json`'s content.
pub fn judge(lab: &SavedLab, cores: usize) -> LabJson {
    let e = &lab.experiment;
    let cells = cell_results(lab, cores);
    LabJson {
        schema: LAB_SCHEMA.to_string(),
        name: e.name.clone(),
        rounds: e.rounds,
        compare: e.compare.clone(),
        baselines: e.baselines.clone(),
        cores: Some(cores),
        verdicts: verdicts(&cells, &e.baselines, &e.compare),
        disagreements: disagreements(lab),
        cells,
    }
}

/// What the verdicts read of each cell: its figures, the topology's processes, and what
/// limited it (`cores`: the host's when the lab ran).
pub fn cell_results(lab: &SavedLab, cores: usize) -> Vec<CellResult> {
    lab.cells
        .iter()
        .map(|c| {
            let mut r = cell_result(c, lab.experiment.processes(&c.topology), cores);
            r.cpus = lab.experiment.cpus(&c.topology);
            r
        })
        .collect()
}

/// One cell as the verdicts read it.
fn cell_result(c: &LabCell, processes: usize, cores: usize) -> CellResult {
    let verdict = c.probe.as_ref().and_then(|p| p.verdict.as_ref());
    let measured = match (&c.capacity, verdict) {
        (Some(found), _) => Measured::Capacity {
            breaking_point_rps: found.max_rate_rps,
        },
        (None, Some(v)) => Measured::Probe {
            behaviour: v.kind,
            workers: v.workers,
            service_time_ms: v.service_time_ms,
            max_throughput_rps: v.max_throughput_rps,
        },
        (None, None) => Measured::of_run(&c.summary),
    };
    // A closed model's throughput is its connections over the latency whatever the service:
    // only a breaking point or an open load it fell behind says the service itself hit a limit.
    let service_bound = match measured {
        Measured::Closed { .. } => false,
        _ => saturated(&measured),
    };
    let mut found = limits(&c.summary, cores, service_bound);
    if let Some(v) = verdict {
        // The probe's reading first: the worker cap is what limited a probed service.
        found.retain(|l| !matches!(l, Limit::NotCpu { .. }));
        found.insert(
            0,
            Limit::Probed {
                behaviour: v.kind,
                workers: v.workers,
                observed: v.workers_observed,
                service_time_ms: v.service_time_ms,
            },
        );
    }
    CellResult {
        topology: c.topology.clone(),
        processes,
        cpus: None,
        cpu_ms_per_request: crate::verdict::cpu_ms_per_request(&c.summary),
        workload: c.workload.clone(),
        round: c.round,
        measured,
        excluded: c.excluded.clone(),
        limits: found,
        autoscale: c.summary.autoscale.as_ref().map(|a| ScaledCell {
            instance_seconds: a.instance_seconds,
            requests: c.summary.requests.sent,
            failed: c.summary.requests.errors,
            waited: a.requests_waited,
            refused: a.requests_refused,
        }),
    }
}

/// Workloads aimed at the same target on one topology: why their load models disagree, one
/// line per topology and target where they do.
pub fn disagreements(lab: &SavedLab) -> Vec<String> {
    let mut out = Vec::new();
    for t in &lab.experiment.topologies {
        let mut by_target: Vec<(&str, Vec<(&str, &Summary)>)> = Vec::new();
        for c in lab.cells.iter().filter(|c| c.topology == t.name) {
            let Some(target) = c.summary.targets.first() else {
                continue;
            };
            let run = (c.workload.as_str(), &c.summary);
            match by_target.iter_mut().find(|(u, _)| u == target) {
                Some((_, runs)) => runs.push(run),
                None => by_target.push((target, vec![run])),
            }
        }
        out.extend(
            by_target
                .into_iter()
                .filter_map(|(_, runs)| disagreement_line(&t.name, &runs)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::lab::{
        CapacityResult, Experiment, ProbeResult, ProbeVerdict, TopologyEntry, EXPERIMENT_SCHEMA,
    };

    fn lab(cells: Vec<LabCell>) -> SavedLab {
        SavedLab {
            experiment: Experiment {
                schema: EXPERIMENT_SCHEMA.into(),
                name: "scaling".into(),
                rounds: 1,
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
                workloads: vec!["search".into()],
                cores: Some(2),
                fingerprint: None,
            },
            cells,
            dir: std::path::PathBuf::new(),
        }
    }

    fn capacity(topology: &str, rps: f64) -> LabCell {
        LabCell {
            topology: topology.into(),
            workload: "search".into(),
            capacity: Some(CapacityResult {
                max_rate_rps: Some(rps),
                slo: "p99<100ms".into(),
                ..CapacityResult::default()
            }),
            ..LabCell::default()
        }
    }

    #[test]
    fn a_breaking_point_cell_is_judged_on_its_rate_and_a_topology_against_the_first() {
        let judged = judge(
            &lab(vec![capacity("one", 50.0), capacity("three", 150.0)]),
            2,
        );
        assert_eq!(judged.schema, LAB_SCHEMA);
        assert_eq!(
            judged.cells[1].measured,
            Measured::Capacity {
                breaking_point_rps: Some(150.0)
            }
        );
        assert_eq!(judged.cells[1].processes, 3);
        let v = &judged.verdicts[0];
        assert_eq!((v.baseline.as_str(), v.variant.as_str()), ("one", "three"));
        assert_eq!(v.measure, "breaking_point");
        assert!((v.ratio - 3.0).abs() < 1e-9, "{}", v.ratio);
    }

    #[test]
    fn a_probed_cell_reads_the_probes_workers_as_its_first_limit() {
        let mut probed = capacity("one", 0.0);
        probed.capacity = None;
        probed.probe = Some(ProbeResult {
            url: "http://127.0.0.1:1/".into(),
            verdict: Some(ProbeVerdict {
                kind: loadlab_run::lab::probe::Kind::Sync,
                workers: Some(3),
                workers_observed: true,
                workers_range: None,
                service_time_ms: 200.0,
                service_time_ci_ms: None,
                max_throughput_rps: 15.0,
                hard_limit: true,
                explanation: String::new(),
                pool_error_pct: None,
                binding: None,
                usl: None,
                rate_limit: None,
            }),
            stopped_because: String::new(),
            steps: vec![],
            open_steps: vec![],
        });
        let judged = judge(&lab(vec![probed]), 2);
        assert!(matches!(
            judged.cells[0].limits[0],
            Limit::Probed {
                workers: Some(3),
                observed: true,
                ..
            }
        ));
    }
}
