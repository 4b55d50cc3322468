//! An experiment's matrix: every workload against every topology, each cell a run directory
//! with the topology's processes watched.

use std::path::Path;
use std::time::Duration;

use loadlab_engine::StopSignal;
use loadlab_input::Workload;
use loadlab_report::LabCell;

use crate::dashboard::Dashboard;
use crate::execute::{execute, Watch};
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
        let mut deployment = start(name, topology, &exe)?;
        for (i, w) in workloads.iter().enumerate() {
            if i > 0 {
                deployment = settle(deployment, name, topology, &exe)?;
            }
            let watch = Watch {
                pids: deployment.pids().iter().map(|p| *p as i32).collect(),
                stores: deployment.redis_url().into_iter().collect(),
                profile: topology.profile,
            };
            let plan = loadlab_input::lower::workload(&w.flags, &deployment.fronts)?;
            println!("    running {} …", w.name);
            if let Some(d) = dashboard {
                d.begin(
                    &format!("{name} / {}", w.name),
                    matches!(plan.model, loadlab_run::Model::Open { .. }),
                );
            }
            // The visits application's books are checked around each cell.
            let books = match deployment.redis_url() {
                Some(url) if deployment.counts_visits() => {
                    Some((loadlab_lab::visits::counted(&url).unwrap_or_default(), url))
                }
                _ => None,
            };
            let (run, mut summary) = execute(&plan, stop, false, &watch, dashboard)?;
            if let Some((before, url)) = books {
                summary.findings.push(reconcile(&summary, &before, &url));
            }
            let dir = out.join(slug(name)).join(slug(&w.name));
            loadlab_run::write_run_dir(&dir, &run, &summary)?;
            let title = format!("{name} / {}", w.name);
            loadlab_report::files::write_run_flame(&dir, &title, &run).map_err(|e| {
                HarnessError::system("cannot write the flame graph", std::io::Error::other(e))
            })?;
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

/// Starts a topology, saying what runs.
fn start(
    name: &str,
    topology: &loadlab_lab::Topology,
    exe: &Path,
) -> Result<loadlab_lab::Deployment> {
    let deployment =
        loadlab_lab::deploy(topology, exe).map_err(|error| HarnessError::Topology {
            name: name.to_string(),
            error,
        })?;
    println!("\n  {name}: {}", deployment.description);
    Ok(deployment)
}

/// Longest wait between two cells for the target to finish what the first left behind.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// A wait between cells worth a line in the output.
const NOTICEABLE: Duration = Duration::from_millis(500);

/// Hands the next cell a target that has finished the previous cell's requests. The client
/// stops at the end of a cell, but a server keeps what it had already accepted: a gunicorn
/// sync worker answers its whole accept queue, one request after another, so a cell started
/// at once would measure the previous cell's backlog (seed 001's 1 s cells read 0 req/s). A
/// user comparing cells expects each to start against an idle target that keeps its warm
/// state (a JIT's compiled code, pooled connections), so the lab first waits, up to
/// [`SETTLE_WAIT`], for every replica to answer a fresh request; a backlog longer than that
/// (a 10 s sleep per request on one worker can queue hours) costs less to drop than to wait
/// for, so the topology is then started again. Either is said in the output.
fn settle(
    deployment: loadlab_lab::Deployment,
    name: &str,
    topology: &loadlab_lab::Topology,
    exe: &Path,
) -> Result<loadlab_lab::Deployment> {
    match deployment.settle(SETTLE_WAIT) {
        Some(waited) => {
            if waited >= NOTICEABLE {
                println!(
                    "    waited {:.1} s for the target to finish the previous cell's requests",
                    waited.as_secs_f64()
                );
            }
            Ok(deployment)
        }
        None => {
            println!(
                "    the target was still serving the previous cell's requests after {} s: \
                 starting {name} again",
                SETTLE_WAIT.as_secs()
            );
            drop(deployment);
            start(name, topology, exe)
        }
    }
}

/// Longest wait after a cell for the visits queue to drain before its books are checked.
const DRAIN_WAIT: Duration = Duration::from_secs(30);

/// The visits application's books for a cell: the page views answered 200 against those its
/// consumers counted since `before`, once the queue drained.
fn reconcile(
    summary: &loadlab_run::Summary,
    before: &std::collections::BTreeMap<String, u64>,
    url: &str,
) -> loadlab_run::Finding {
    let drained = loadlab_lab::visits::drain(url, DRAIN_WAIT).unwrap_or(None);
    let after = loadlab_lab::visits::counted(url).unwrap_or_default();
    let counted = after
        .into_iter()
        .map(|(page, n)| {
            let was = before.get(&page).copied().unwrap_or(0);
            (page, n.saturating_sub(was))
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let answered = loadlab_analyze::findings::site_views(summary);
    loadlab_analyze::findings::visits_reconciled(
        &answered,
        &counted,
        summary.requests.unfinished,
        drained,
    )
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
