//! `loadlab k8s run (FLAGS | SCENARIO.yaml) --shards N`: the objects of `k8s job` created on the
//! cluster a kubeconfig names, each shard's state shown as its pod reports it, the merge Job
//! waited for, and the merged run directory copied out of the merge pod's log; the objects are
//! deleted at the end, and on Ctrl-C.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use loadlab_harness::kube::{default_kubeconfig, Kube};
use serde_json::Value;

use crate::args::K8sRunArgs;
use crate::cmd::Outcome;

/// Time between two looks at the pods.
const POLL: Duration = Duration::from_secs(1);
/// Time past the merge Job's own deadline before giving up on it.
const PAST_DEADLINE: Duration = Duration::from_secs(60);

/// Runs `loadlab k8s run`.
pub fn main(a: K8sRunArgs) -> Result<Outcome> {
    let a = super::k8s::take_run_flags(a)?;
    let kubeconfig = a.kubeconfig.clone().unwrap_or_else(default_kubeconfig);
    let kube = Kube::from_kubeconfig(&kubeconfig, a.namespace.as_deref())?;
    let spec = super::k8s::job_spec(a.job)?;
    let out = a
        .out
        .unwrap_or_else(|| PathBuf::from(format!("k8s-{}", spec.name)));
    if out.join("summary.json").exists() {
        bail!("{} already holds a run: give another --out", out.display());
    }
    let stop = loadlab_harness::interrupt::interrupt_signal()?;
    let objects = spec.objects();
    let mut created = Vec::new();
    for object in &objects {
        if let Err(e) = kube.create(object) {
            delete_all(&kube, &created);
            if e.status() == Some(409) {
                bail!(
                    "{e}: a run named {name} is on the cluster already; give another --name, or \
                     delete its objects (kubectl delete job,pvc,secret,configmap -l \
                     loadlab/run={name})",
                    name = spec.name
                );
            }
            return Err(e.into());
        }
        created.push(object);
    }
    eprintln!(
        "k8s run: {} shard(s) of `{}` created in namespace {} of {}; they start together at {}",
        spec.shards,
        spec.run_args.join(" "),
        kube.namespace(),
        kube.server(),
        spec.start_at
    );
    let followed = follow(&kube, &spec, &stop);
    let copied = followed.and_then(|merge_pod| copy_out(&kube, &merge_pod, &out));
    if a.keep {
        eprintln!(
            "k8s run: the objects stay on the cluster (kubectl delete job,pvc,secret,configmap \
             -l loadlab/run={})",
            spec.name
        );
    } else {
        delete_all(&kube, &created);
    }
    copied?;
    let saved = loadlab_run::read_run_dir(&out)
        .with_context(|| format!("reading the merged run copied to {}", out.display()))?;
    print!("{}", loadlab_report::render_summary(&saved.summary));
    println!("  results in   {}", out.display());
    Ok(Outcome::judged(&saved.summary.thresholds))
}

/// Deletes `objects` (a Job with its pods), saying which could not be.
fn delete_all(kube: &Kube, objects: &[&Value]) {
    for object in objects.iter().rev() {
        if let Err(e) = kube.delete(object) {
            eprintln!("warning: {e}");
        }
    }
}

/// Shows each pod's state as it changes until the merge Job ends; the merge pod's name once
/// it has succeeded.
fn follow(
    kube: &Kube,
    spec: &loadlab_report::k8s::JobSpec,
    stop: &loadlab_engine::StopSignal,
) -> Result<String> {
    let started = Instant::now();
    let deadline = Duration::from_secs(spec.merge_deadline_s) + PAST_DEADLINE;
    let merge_job = format!("{}-merge", spec.name);
    let start_at = humantime::parse_rfc3339(&spec.start_at).ok();
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    let mut load = Load::default();
    loop {
        if stop.is_stopped() {
            bail!("stopped by Ctrl-C; the run's objects are deleted");
        }
        if started.elapsed() > deadline {
            bail!(
                "the merge Job {merge_job} did not end within {}",
                humantime::format_duration(deadline)
            );
        }
        let pods = kube.pods(&format!("loadlab/run={}", spec.name))?;
        let mut failed = 0;
        for pod in &pods {
            let (who, state) = describe(pod, spec, &merge_job, start_at);
            let ended_badly = ended_badly(pod);
            failed += usize::from(ended_badly && job_of(pod) != merge_job);
            if shown.get(&who) != Some(&state) {
                eprintln!("  {who}: {state}");
                // Why it failed, from its own last words.
                if ended_badly {
                    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                    for line in kube.log(name, Some(3)).unwrap_or_default().lines() {
                        eprintln!("    | {line}");
                    }
                }
                shown.insert(who, state);
            }
        }
        load.look(kube, &pods, &merge_job);
        if failed == spec.shards {
            bail!("every shard failed (their logs' ends are above): nothing to merge");
        }
        let job = kube.job(&merge_job)?;
        if job["status"]["succeeded"].as_u64().unwrap_or(0) > 0 {
            let pod = pods
                .iter()
                .filter(|p| job_of(p) == merge_job)
                .find(|p| p["status"]["phase"] == "Succeeded")
                .and_then(|p| p["metadata"]["name"].as_str())
                .ok_or_else(|| anyhow!("the merge Job succeeded but its pod is gone"))?;
            return Ok(pod.to_string());
        }
        if job["status"]["failed"].as_u64().unwrap_or(0) > 0 || has_failed(&job) {
            let log = pods
                .iter()
                .filter(|p| job_of(p) == merge_job)
                .filter_map(|p| p["metadata"]["name"].as_str())
                .find_map(|name| kube.log(name, Some(20)).ok())
                .unwrap_or_default();
            bail!("the merge Job {merge_job} failed; the end of its log:\n{log}");
        }
        std::thread::sleep(POLL);
    }
}

/// The shards' progress, from the lines their logs print every few seconds (`run --progress`).
#[derive(Default)]
struct Load {
    /// Each shard's last progress, by its index.
    shards: BTreeMap<u64, loadlab_report::LoggedProgress>,
    /// When the running shards' logs were last read.
    read: Option<Instant>,
    /// The shards whose ended pod's log was read (once, for its last line).
    ended: std::collections::BTreeSet<u64>,
    /// The requests completed when last shown.
    shown: u64,
}

impl Load {
    /// Reads each running shard's last progress line every few seconds, and an ended shard's
    /// once, and shows the shards' sum when it changed.
    fn look(&mut self, kube: &Kube, pods: &[Value], merge_job: &str) {
        let every = Duration::from_secs(loadlab_report::k8s::PROGRESS_EVERY_S);
        let due = self.read.is_none_or(|at| at.elapsed() >= every);
        if due {
            self.read = Some(Instant::now());
        }
        for pod in pods {
            let Some(index) = shard_index(pod).filter(|_| job_of(pod) != merge_job) else {
                continue;
            };
            let phase = pod["status"]["phase"].as_str().unwrap_or_default();
            let ended = matches!(phase, "Succeeded" | "Failed");
            let read = if ended {
                !self.ended.contains(&index)
            } else {
                due && phase == "Running"
            };
            if !read {
                continue;
            }
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            // A running shard's last line is its progress; an ended one's summary follows it.
            let tail = if ended { 200 } else { 4 };
            let Ok(log) = kube.log(name, Some(tail)) else {
                continue;
            };
            if ended {
                self.ended.insert(index);
            }
            if let Some(p) = log
                .lines()
                .rev()
                .find_map(loadlab_report::LoggedProgress::parse)
            {
                self.shards.insert(index, p);
            }
        }
        let completed: u64 = self.shards.values().map(|p| p.completed).sum();
        if completed != self.shown {
            self.shown = completed;
            eprintln!("  {}", self.line());
        }
    }

    /// The shards' progress in one line: their requests completed (each's), errors, the worst
    /// p99 of their last seconds.
    fn line(&self) -> String {
        let thousands = loadlab_report::thousands;
        let elapsed = self.shards.values().map(|p| p.elapsed_s).max().unwrap_or(0);
        let each: Vec<String> = self
            .shards
            .iter()
            .map(|(i, p)| format!("{i}: {}", thousands(p.completed)))
            .collect();
        let errors: u64 = self.shards.values().map(|p| p.errors).sum();
        let p99 = self.shards.values().map(|p| p.p99_ms).fold(0.0, f64::max);
        format!(
            "load at {elapsed} s: {} completed (by shard {}), {} errors, last second's p99 up to \
             {p99:.2} ms",
            thousands(self.shown),
            each.join(", "),
            thousands(errors)
        )
    }
}

/// The completion index the Job gave `pod` (its shard's).
fn shard_index(pod: &Value) -> Option<u64> {
    pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        .as_str()?
        .parse()
        .ok()
}

/// The Job that made `pod`.
fn job_of(pod: &Value) -> &str {
    pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        .as_str()
        .or_else(|| pod["metadata"]["labels"]["job-name"].as_str())
        .unwrap_or_default()
}

/// Whether a pod's container ended with an error.
fn ended_badly(pod: &Value) -> bool {
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        .as_i64()
        .is_some_and(|code| code != 0)
}

/// Whether a Job's conditions say it failed (its deadline passed, say).
fn has_failed(job: &Value) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Failed" && c["status"] == "True")
    })
}

/// Who a pod is (`shard 2`, `merge`) and its state in words: its phase, why it waits, how its
/// container ended, and for a running shard how far into the schedule it is.
fn describe(
    pod: &Value,
    spec: &loadlab_report::k8s::JobSpec,
    merge_job: &str,
    start_at: Option<SystemTime>,
) -> (String, String) {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let who = if job_of(pod) == merge_job {
        format!("merge ({name})")
    } else {
        let index = shard_index(pod).map_or("?".into(), |i| i.to_string());
        format!("shard {index}/{} ({name})", spec.shards)
    };
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    let container = &pod["status"]["containerStatuses"][0]["state"];
    let state = if let Some(w) = container["waiting"]["reason"].as_str() {
        match container["waiting"]["message"].as_str() {
            Some(m) => format!("{phase}, {w}: {m}"),
            None => format!("{phase}, {w}"),
        }
    } else if let Some(code) = container["terminated"]["exitCode"].as_i64() {
        let reason = container["terminated"]["reason"].as_str().unwrap_or("");
        format!("{phase}, exited {code} {reason}")
            .trim_end()
            .to_string()
    } else if phase == "Running" && job_of(pod) != merge_job {
        match start_at.and_then(|at| SystemTime::now().duration_since(at).ok()) {
            Some(_) => "Running, sending load".to_string(),
            None => "Running, waiting for the common start".to_string(),
        }
    } else {
        phase.to_string()
    };
    (who, state)
}

/// Copies the merged run directory out of the merge pod's log into `out`.
fn copy_out(kube: &Kube, pod: &str, out: &std::path::Path) -> Result<()> {
    let log = kube.log(pod, None)?;
    let files = loadlab_run::archive::extract_archive(log.as_bytes(), out)
        .with_context(|| format!("copying the merged run out of pod {pod}'s log"))?;
    eprintln!(
        "k8s run: the merged run ({files} files) copied to {}",
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shards_progress_is_summed_in_one_line() {
        let p = |elapsed_s, completed, errors, p99_ms| loadlab_report::LoggedProgress {
            elapsed_s,
            completed,
            last_second: 100,
            p99_ms,
            in_flight: 1,
            errors,
        };
        let mut load = Load::default();
        load.shards.insert(0, p(10, 1_000, 0, 1.5));
        load.shards.insert(1, p(9, 900, 2, 4.25));
        load.shown = 1_900;
        assert_eq!(
            load.line(),
            "load at 10 s: 1,900 completed (by shard 0: 1,000, 1: 900), 2 errors, last second's \
             p99 up to 4.25 ms"
        );
    }
}
