//! An experiment's matrix: every workload against every topology, round after round, each
//! cell a run directory with the topology's processes watched — a fixed load, or a search for
//! the breaking point — and what the verdicts read of each cell.

use std::path::Path;
use std::time::{Duration, Instant};

use loadlab_analyze::Slo;
use loadlab_engine::StopSignal;
use loadlab_input::experiment::{Experiment, Load};
use loadlab_input::{CapacityFlags, UrlTarget, Work, Workload};
use loadlab_lab::cores::Placement;
use loadlab_run::lab::{
    cell_path, write_cell, write_experiment, CapacityResult, LabCell, SavedLab, TopologyEntry,
    EXPERIMENT_SCHEMA,
};
use loadlab_run::summary::ServerCores;
use loadlab_run::{RunData, Summary, Topology};

use crate::capacity::{capacity, CapacitySearch, Progress};
use crate::execute::{execute, Watch};
use crate::outputs::LiveOutputs;
use crate::steps::{first_success, settled};
use crate::{HarnessError, Result};

/// The experiment as its lab directory records it (`cores`: the host's).
pub fn experiment_record(exp: &Experiment, cores: usize) -> loadlab_run::lab::Experiment {
    loadlab_run::lab::Experiment {
        schema: EXPERIMENT_SCHEMA.to_string(),
        name: exp.name.clone(),
        rounds: exp.rounds,
        compare: exp.compare.clone(),
        baselines: exp.baselines.clone(),
        topologies: exp
            .topologies
            .iter()
            .map(|(name, t)| TopologyEntry {
                name: name.clone(),
                processes: t.replicas * t.workers,
                cpus: t.cpu_quota.map(|q| q * t.replicas as f64),
            })
            .collect(),
        workloads: exp.workloads.iter().map(|w| w.name.clone()).collect(),
        cores: Some(cores),
        fingerprint: Some(exp.fingerprint()),
    }
}

/// Runs every workload against every topology, watching the topology's processes, `rounds`
/// times, interleaved (every topology and workload once, then again), so each comparison has
/// as many paired rounds; writes the lab directory `out` as it goes (`experiment.json` first,
/// then each cell where `run::lab::cell_path` puts it, its `cell.json` last). Stops after the
/// cell that Ctrl-C interrupted. With `resumed` (the lab `out` already holds, read back), its
/// finished cells are kept as they are and only the others run, in the same order; a topology
/// whose cells of a round are all finished is not started.
pub fn run_matrix(
    exp: &Experiment,
    out: &Path,
    stop: &StopSignal,
    outputs: &LiveOutputs,
    resumed: Option<SavedLab>,
) -> Result<SavedLab> {
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError::system("cannot find the loadlab executable", e))?;
    let (host, placements) = placements(exp)?;
    let (experiment, mut finished) = match resumed {
        // The lab as it began: its record and fingerprint stay those of its first start.
        Some(lab) => (lab.experiment, lab.cells),
        None => {
            let experiment = experiment_record(exp, crate::cores());
            write_experiment(out, &experiment)?;
            (experiment, Vec::new())
        }
    };
    let (topologies, workloads, rounds) = (&exp.topologies, &exp.workloads, exp.rounds);
    // A lab that calls gRPC methods starts the Node and Python replicas' gRPC servers too.
    let exe = Starter {
        exe,
        grpc: exp.calls_grpc(),
    };
    let mut cells = Vec::new();
    for round in 0..rounds {
        if rounds > 1 {
            println!("\n  round {} of {rounds}", round + 1);
        }
        for ((name, topology), placement) in topologies.iter().zip(&placements) {
            let is_finished = |c: &LabCell, w: &Workload| {
                c.topology == *name && c.workload == w.name && c.round == round
            };
            if workloads
                .iter()
                .all(|w| finished.iter().any(|c| is_finished(c, w)))
            {
                println!("\n  {name}: every cell of this round finished before; kept");
            }
            // The topology runs from its first cell left to run (placed and started there),
            // settled between two cells that ran, and stopped after its last.
            let mut running: Option<(loadlab_lab::Deployment, Topology, Option<GeneratorCores>)> =
                None;
            for w in workloads {
                if let Some(i) = finished.iter().position(|c| is_finished(c, w)) {
                    cells.push(finished.swap_remove(i));
                    continue;
                }
                let (mut deployment, topology, generator) = match running.take() {
                    Some((d, t, g)) => (settle(d, name, &t, &exe)?, t, g),
                    None => {
                        let (t, g) = placed(name, topology, placement, &host)?;
                        let d = start(name, &t, &exe)?;
                        (d, t, g)
                    }
                };
                let dir = out.join(cell_path(name, &w.name, round, rounds));
                // What an interrupted run of this cell left is not kept.
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(|e| {
                        HarnessError::system("cannot clear an unfinished cell's folder", e)
                    })?;
                }
                let cell = Cell {
                    topology: (name, &topology),
                    workload: w,
                    round,
                    dir: &dir,
                    cores: generator.as_ref().map(|g| &g.cores),
                };
                let (mut lab_cell, run) = run_cell(&cell, &deployment, stop, outputs)?;
                let complete = run.as_ref().map_or(!stop.is_stopped(), |r| r.complete);
                if let Some((label, pid, status)) = deployment.casualty() {
                    let group = deployment.group_of(&label).map(|g| g.name.clone());
                    let why = match oom_killed(&lab_cell.summary, group.as_deref()) {
                        Some(words) => format!("{label} (pid {pid}) was {words}"),
                        None => format!(
                            "{label} (pid {pid}) exited during the cell ({status}){}",
                            last_seen(run.as_ref(), pid)
                        ),
                    };
                    println!(
                        "    {why}: the cell is left out of the comparisons; starting {name} again"
                    );
                    lab_cell.excluded = Some(why);
                    drop(deployment);
                    deployment = start(name, &topology, &exe)?;
                }
                write_cell(&dir, &lab_cell)?;
                cells.push(lab_cell);
                if !complete {
                    return Ok(SavedLab {
                        experiment,
                        cells,
                        dir: out.to_path_buf(),
                    });
                }
                running = Some((deployment, topology, generator));
            }
        }
    }
    Ok(SavedLab {
        experiment,
        cells,
        dir: out.to_path_buf(),
    })
}

/// Where each of the experiment's topologies and the generator run, with the cores this
/// process may use; an error with the arithmetic for budgets that do not fit (the lab checks
/// this before it starts anything).
pub fn placements(exp: &Experiment) -> Result<(Vec<usize>, Vec<Placement>)> {
    let host = loadlab_lab::cores::allowed().map_err(lab_error)?;
    let placements = exp
        .topologies
        .iter()
        .map(|(name, t)| loadlab_lab::cores::place(name, t, &host, exp.oversubscribe))
        .collect::<std::result::Result<Vec<_>, String>>()
        .map_err(HarnessError::Budgets)?;
    Ok((host, placements))
}

/// `topology` on its placement's cores, and the generator (this thread and the threads it
/// starts) on its own until the returned guard goes; what was placed where is printed.
fn placed(
    name: &str,
    topology: &Topology,
    placement: &Placement,
    host: &[usize],
) -> Result<(Topology, Option<GeneratorCores>)> {
    let mut topology = topology.clone();
    match placement {
        Placement::Anywhere => Ok((topology, None)),
        Placement::Shared(why) => {
            println!("    sharing the host's cores on purpose (oversubscribe): {why}");
            Ok((topology, None))
        }
        Placement::Split {
            topology: service,
            generator,
        } => {
            loadlab_lab::cores::pin_this_thread(generator).map_err(lab_error)?;
            let unbudgeted = match unbudgeted(&topology).as_slice() {
                [] => String::new(),
                names => format!(
                    " ({} without a CPU quota, sharing them)",
                    names.join(" and ")
                ),
            };
            println!(
                "    the generator runs on {}, {name}'s processes on {}{unbudgeted}",
                loadlab_lab::cores::words(generator),
                loadlab_lab::cores::words(service),
            );
            topology.on_cores = service.clone();
            Ok((
                topology,
                Some(GeneratorCores {
                    cores: ServerCores {
                        service: service.clone(),
                        generator: generator.clone(),
                    },
                    host: host.to_vec(),
                    _awake: loadlab_lab::cores::AwakeCores::hold(),
                }),
            ))
        }
    }
}

/// The processes of `t` around its replicas that run without a CPU quota.
fn unbudgeted(t: &Topology) -> Vec<&'static str> {
    t.cpu_quotas()
        .into_iter()
        .filter(|(kind, _, cpus)| *kind != "replica" && cpus.is_none())
        .map(|(kind, n, _)| match (kind, n) {
            ("consumer", _) => "the consumers",
            (other, _) => other,
        })
        .collect()
}

/// The generator's cores while a topology's cells run, with the cores kept awake; the thread
/// gets every core back when it goes.
struct GeneratorCores {
    cores: ServerCores,
    host: Vec<usize>,
    _awake: Option<loadlab_lab::cores::AwakeCores>,
}

impl Drop for GeneratorCores {
    fn drop(&mut self) {
        let _ = loadlab_lab::cores::pin_this_thread(&self.host);
    }
}

/// A lab error outside a topology's start.
fn lab_error(error: loadlab_lab::LabError) -> HarnessError {
    HarnessError::system("cannot place the topology", std::io::Error::other(error))
}

/// One cell to run: which topology, which workload, which round, and where its results go.
struct Cell<'a> {
    topology: (&'a str, &'a Topology),
    workload: &'a Workload,
    round: usize,
    dir: &'a Path,
    /// The service's and the generator's cores, when split.
    cores: Option<&'a ServerCores>,
}

impl Cell<'_> {
    /// This cell with nothing measured, left out of the comparisons for `why`.
    fn left_out(&self, why: &str) -> LabCell {
        LabCell {
            topology: self.topology.0.to_string(),
            workload: self.workload.name.clone(),
            round: self.round,
            excluded: Some(why.to_string()),
            ..LabCell::default()
        }
    }
}

/// Runs one cell against its deployed topology and writes its run directory; the cell and its
/// run (none when the target did not answer a capacity search's first request).
fn run_cell(
    cell: &Cell,
    deployment: &loadlab_lab::Deployment,
    stop: &StopSignal,
    outputs: &LiveOutputs,
) -> Result<(LabCell, Option<RunData>)> {
    let (name, topology) = cell.topology;
    let w = cell.workload;
    let watch = Watch {
        pids: deployment.pids().iter().map(|p| *p as i32).collect(),
        stores: deployment.redis_url().into_iter().collect(),
        profile: topology.profile,
        groups: deployment.groups().to_vec(),
        cores: cell.cores.cloned(),
        scaling: deployment
            .autoscaler()
            .map(loadlab_lab::autoscale::scaler::Autoscaler::recording),
    };
    println!("    running {} …", w.name);
    let title = format!("{name} / {}", w.name);
    let mut probe = None;
    let (run, summary, capacity) = match &w.load {
        Load::Run(flags) => {
            let plan =
                loadlab_input::lower::workload(flags, &deployment.fronts, &deployment.grpc_fronts)?;
            outputs.begin(
                &title,
                matches!(plan.model, loadlab_run::Model::Open { .. }),
                &plan,
                vec![
                    ("loadlab.topology".into(), name.to_string()),
                    ("loadlab.workload".into(), w.name.to_string()),
                ],
            );
            // The visits application's books are checked around each cell.
            let books = match deployment.redis_url() {
                Some(url) if deployment.counts_visits() => {
                    Some((loadlab_lab::visits::counted(&url).unwrap_or_default(), url))
                }
                _ => None,
            };
            outputs.write_seconds(cell.dir, &plan)?;
            let (run, mut summary) =
                execute(&plan, stop, crate::execute::Progress::Off, &watch, outputs)?;
            if let Some(e) = &outputs.export {
                e.finish(&summary);
            }
            if let Some((before, url)) = books {
                summary.findings.push(reconcile(&summary, &before, &url));
            }
            (run, summary, None)
        }
        Load::Capacity(flags) => {
            let Some((run, summary, found)) = breaking_point(flags, &deployment.url, watch, stop)?
            else {
                let why = "the target did not answer one request with a success";
                return Ok((cell.left_out(why), None));
            };
            (run, summary, Some(found))
        }
        Load::Probe(flags) => {
            let f = flags.on_front(&deployment.url);
            let target = UrlTarget::new(&f.url, f.timeout, &f.reach, &f.request)?;
            println!("      {}", loadlab_report::probe::header());
            let probed = crate::probe::probe(
                &target,
                &crate::probe::limits_of(&f),
                &watch,
                stop,
                |step| println!("      {}", crate::probe::step_line(&step)),
            )?;
            let result = probed.result(&f.url);
            let (Some((run, summary)), Some(verdict)) = (probed.best, &result.verdict) else {
                let mut left_out = cell.left_out("the probe completed no request");
                left_out.probe = Some(result);
                return Ok((left_out, None));
            };
            println!("      {}", verdict.explanation);
            probe = Some(result);
            (run, summary, None)
        }
    };
    loadlab_run::write_run_dir(cell.dir, &run, &summary)?;
    loadlab_report::files::write_run_flame(cell.dir, &title, &run).map_err(|e| {
        HarnessError::system("cannot write the flame graph", std::io::Error::other(e))
    })?;
    let lab_cell = LabCell {
        topology: name.to_string(),
        workload: w.name.clone(),
        round: cell.round,
        summary,
        capacity,
        probe,
        excluded: None,
    };
    Ok((lab_cell, Some(run)))
}

/// How the kernel's OOM killer ended a process of control group `group` during the cell, in
/// words ("killed by the kernel's OOM killer at its 64 MB limit, 3 s into the cell"), when the
/// cell's readings of the group saw it do so.
fn oom_killed(summary: &Summary, group: Option<&str>) -> Option<String> {
    let group = group?;
    let b = summary
        .server
        .as_ref()?
        .budgets
        .iter()
        .find(|b| b.name == group && b.oom_kills > 0)?;
    let limit = b
        .memory_limit_mb
        .map_or(String::new(), |mb| format!(" at its {mb:.0} MB limit"));
    let when = b
        .oom_second
        .map_or(String::new(), |s| format!(", {s} s into the cell"));
    Some(format!("killed by the kernel's OOM killer{limit}{when}"))
}

/// When the lab last saw process `pid` running, from the cell's server samples.
fn last_seen(run: Option<&RunData>, pid: u32) -> String {
    let last = run
        .and_then(|r| r.server.as_ref())
        .and_then(|s| s.processes.iter().find(|p| p.pid == pid))
        .and_then(|p| p.samples.last())
        .map(|x| x.second);
    match last {
        Some(second) => format!(", last sampled at second {second} of the cell"),
        None => String::new(),
    }
}

/// A capacity workload's search against a topology's front, with its processes watched: the
/// run at the highest rate that met the objective (or the lowest tried) and what it found;
/// `None` when the target did not answer one request or Ctrl-C stopped the search before a step.
fn breaking_point(
    flags: &CapacityFlags,
    front: &str,
    watch: Watch,
    stop: &StopSignal,
) -> Result<Option<(RunData, Summary, CapacityResult)>> {
    let f = flags.on_front(front);
    let slo = Slo::parse(&f.slo)?;
    let work = Work::new(&f)?;
    let started = Instant::now();
    let Some(first) = first_success(&work, stop)? else {
        return Ok(None);
    };
    let alone = settled(&work, first, stop)?;
    let mut search = CapacitySearch::new(slo, &f);
    search.watch = watch;
    let found = capacity(&work, alone, started, &search, stop, |p| {
        if let Progress::Step(step) = p {
            println!("      {}", loadlab_report::capacity::step_line(step));
        }
    })?;
    let point = found.result(&f.url, &f.slo);
    let Some(best) = found.best_index() else {
        return Ok(None);
    };
    let Some((run, summary)) = found.runs.into_iter().nth(best) else {
        return Ok(None);
    };
    Ok(Some((run, summary, point)))
}

/// How the lab starts its topologies: with the loadlab executable (for Rust replicas and
/// consumers), and with the runtimes' gRPC servers when its workloads call gRPC methods.
struct Starter {
    exe: std::path::PathBuf,
    grpc: bool,
}

/// Starts a topology, saying what runs.
fn start(name: &str, topology: &Topology, exe: &Starter) -> Result<loadlab_lab::Deployment> {
    let deployed = match exe.grpc {
        true => loadlab_lab::deploy_serving_grpc(topology, &exe.exe),
        false => loadlab_lab::deploy(topology, &exe.exe),
    };
    let deployment = deployed.map_err(|error| HarnessError::Topology {
        name: name.to_string(),
        error,
    })?;
    println!("\n  {name}: {}", deployment.description);
    Ok(deployment)
}

/// Longest wait between two cells for the target to finish what the first left behind.
pub const SETTLE_WAIT: Duration = Duration::from_secs(10);

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
    topology: &Topology,
    exe: &Starter,
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
