//! `loadlab lab EXPERIMENT.yaml`: every workload against every topology, each cell a run
//! directory, then one comparison table (also as CSV).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use loadlab_engine::StopSignal;
use loadlab_report::{lab_csv, render_lab_table, LabCell};

use crate::args::LabArgs;
use crate::cmd::run::{execute, interrupt_signal};
use crate::cmd::Outcome;
use crate::experiment::{self, split_words, workload_args};
use crate::lower::plan_from_args;

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

/// Runs `loadlab lab`.
pub fn main(a: LabArgs) -> Result<Outcome> {
    let exp = experiment::load(&a.file)?;
    let out = a.out.unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("runs").join(format!("{}-{stamp}", slug(&exp.name)))
    });
    let stop = interrupt_signal()?;
    println!(
        "loadlab lab: {} — {} topologies × {} workloads",
        exp.name,
        exp.topologies.len(),
        exp.workloads.len()
    );
    if let Some(note) = &exp.note {
        println!("  {note}");
    }
    let mut topologies = Vec::new();
    for t in &exp.topologies {
        topologies.push((
            t.name.clone(),
            loadlab_lab::Topology {
                workers: t.workers,
                replicas: t.replicas,
                lb: if t.lb == "builtin" {
                    loadlab_lab::Lb::Builtin
                } else {
                    loadlab_lab::Lb::Nginx
                },
                port: 0,
                command: t.cmd.clone(),
                serve_args: split_words(t.serve.as_deref().unwrap_or(""))?,
                health_path: "/health".into(),
                ready_timeout: Duration::from_secs(15),
                proxy_timeout: match &t.proxy_timeout {
                    Some(d) => crate::args::parse_duration(d)
                        .map_err(|e| anyhow::anyhow!("topology {:?}: proxy_timeout {e}", t.name))?,
                    None => Duration::from_secs(60),
                },
            },
        ));
    }
    let workloads: Vec<(String, String)> = exp
        .workloads
        .iter()
        .map(|w| (w.name.clone(), w.run.clone()))
        .collect();
    let dashboard = crate::dashboard::Dashboard::start_if(a.dashboard.as_deref(), &stop)?;
    let cells = run_matrix(&topologies, &workloads, &out, &stop, dashboard.as_ref())?;
    println!("\n{}", render_lab_table(&cells));
    for line in scalability(&topologies, &workloads, &cells) {
        println!("  {line}");
    }
    std::fs::create_dir_all(&out)?;
    let csv = out.join("comparison.csv");
    std::fs::write(&csv, lab_csv(&cells))
        .with_context(|| format!("cannot write {}", csv.display()))?;
    if a.html {
        let mut views = Vec::new();
        for c in &cells {
            let dir = out.join(slug(&c.topology)).join(slug(&c.workload));
            let saved = loadlab_run::read_run_dir(&dir)?;
            let label = format!("{} / {}", c.topology, c.workload);
            views.push(loadlab_report::html::RunView::from_saved(&label, &saved));
        }
        crate::cmd::report::write_html(&out.join("report.html"), &exp.name, &views)?;
    }
    println!(
        "  results in {} (comparison.csv, {}one run directory per cell)",
        out.display(),
        if a.html { "report.html, " } else { "" }
    );
    if let Some(d) = dashboard {
        // The page follows the lab cell by cell and says done only now.
        if let Some(last) = cells.last() {
            d.finish(&last.summary);
        }
        d.close(a.dashboard_keep);
    }
    Ok(if stop.is_stopped() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}

/// Runs every workload (`loadlab run` flags with paths) against every topology, watching the
/// topology's processes; each cell goes to `out/<topology>/<workload>/`.
pub fn run_matrix(
    topologies: &[(String, loadlab_lab::Topology)],
    workloads: &[(String, String)],
    out: &Path,
    stop: &StopSignal,
    dashboard: Option<&crate::dashboard::Dashboard>,
) -> Result<Vec<LabCell>> {
    let exe = std::env::current_exe().context("cannot find the loadlab executable")?;
    let mut cells = Vec::new();
    for (name, topology) in topologies {
        let deployment =
            loadlab_lab::deploy(topology, &exe).with_context(|| format!("topology {name:?}"))?;
        println!("\n  {name}: {}", deployment.description);
        let pids: Vec<i32> = deployment.pids().iter().map(|p| *p as i32).collect();
        for (workload, flags) in workloads {
            let spec = experiment::WorkloadSpec {
                name: workload.clone(),
                run: flags.clone(),
            };
            let plan = plan_from_args(&workload_args(&spec, &deployment.url)?)?;
            println!("    running {workload} …");
            if let Some(d) = dashboard {
                d.begin(
                    &format!("{name} / {workload}"),
                    matches!(plan.model, loadlab_run::Model::Open { .. }),
                );
            }
            let (run, summary) = execute(&plan, stop, false, &pids, dashboard)?;
            let dir = out.join(slug(name)).join(slug(workload));
            loadlab_run::write_run_dir(&dir, &run, &summary)?;
            cells.push(LabCell {
                topology: name.clone(),
                workload: workload.clone(),
                summary,
            });
            if !run.complete {
                return Ok(cells);
            }
        }
    }
    Ok(cells)
}

/// For each workload run on topologies of different sizes (replicas × workers processes), how
/// throughput scaled: the ratio to the smallest topology against the ideal, and with three
/// sizes or more the Universal Scalability Law fitted with its predicted peak.
fn scalability(
    topologies: &[(String, loadlab_lab::Topology)],
    workloads: &[(String, String)],
    cells: &[LabCell],
) -> Vec<String> {
    let mut lines = Vec::new();
    for (workload, _) in workloads {
        let mut points: Vec<(f64, f64)> = topologies
            .iter()
            .filter_map(|(name, t)| {
                let cell = cells
                    .iter()
                    .find(|c| c.topology == *name && c.workload == *workload)?;
                Some(((t.replicas * t.workers) as f64, cell.summary.throughput.rps))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            continue;
        };
        if points.len() < 2 || first.1 <= 0.0 {
            continue;
        }
        let mut line = format!(
            "{workload}: {:.0} → {:.0} processes gave ×{:.2} throughput (ideal ×{:.0})",
            first.0,
            last.0,
            last.1 / first.1,
            last.0 / first.0
        );
        // The law's N is processes; normalized so one process is where it starts.
        let scaled: Vec<(f64, f64)> = points.iter().map(|(n, x)| (n / first.0, *x)).collect();
        if let Some(law) = loadlab_analyze::Usl::fit(&scaled) {
            line.push_str(&format!("; USL σ = {:.3}, κ = {:.4}", law.sigma, law.kappa));
            if let Some(peak) = law.peak_concurrency() {
                line.push_str(&format!(
                    ", peak near {:.0} processes ({:.0} req/s)",
                    peak * first.0,
                    law.throughput(peak)
                ));
            }
        }
        lines.push(line);
    }
    lines
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
