//! An experiment's matrix: every workload against every topology, each cell a run directory
//! with the topology's processes watched.

use std::path::Path;

use loadlab_engine::StopSignal;
use loadlab_input::Workload;
use loadlab_report::LabCell;

use crate::dashboard::Dashboard;
use crate::execute::execute;
use crate::{HarnessError, Result};

/// A file-name-safe form of a name.
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

/// Runs every workload against every topology, watching the topology's processes; each cell
/// goes to `out/<topology>/<workload>/`. Stops after the cell that Ctrl-C interrupted.
pub fn run_matrix(
    topologies: &[(String, loadlab_lab::Topology)],
    workloads: &[Workload],
    out: &Path,
    stop: &StopSignal,
    dashboard: Option<&Dashboard>,
) -> Result<Vec<LabCell>> {
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError::system("cannot find the loadlab executable", e))?;
    let mut cells = Vec::new();
    for (name, topology) in topologies {
        let deployment =
            loadlab_lab::deploy(topology, &exe).map_err(|source| HarnessError::Topology {
                name: name.clone(),
                source,
            })?;
        println!("\n  {name}: {}", deployment.description);
        let pids: Vec<i32> = deployment.pids().iter().map(|p| *p as i32).collect();
        let stores: Vec<String> = deployment.redis_url().into_iter().collect();
        for w in workloads {
            let plan = loadlab_input::lower::workload(&w.flags, &deployment.fronts)?;
            println!("    running {} …", w.name);
            if let Some(d) = dashboard {
                d.begin(
                    &format!("{name} / {}", w.name),
                    matches!(plan.model, loadlab_run::Model::Open { .. }),
                );
            }
            let (run, summary) = execute(&plan, stop, false, &pids, &stores, dashboard)?;
            let dir = out.join(slug(name)).join(slug(&w.name));
            loadlab_run::write_run_dir(&dir, &run, &summary)?;
            cells.push(LabCell {
                topology: name.clone(),
                workload: w.name.clone(),
                summary,
            });
            if !run.complete {
                return Ok(cells);
            }
        }
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_folder_names() {
        assert_eq!(slug("6 replicas / nginx"), "6-replicas-nginx");
        assert_eq!(slug("Ping 300/s"), "ping-300-s");
    }
}
