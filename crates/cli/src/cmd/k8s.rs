//! `loadlab k8s job (FLAGS | SCENARIO.yaml) --shards N`: prints the Kubernetes objects that run
//! a plan as N shards on a cluster (nothing is sent to a cluster): the run's flags are lowered
//! into the plan here as `run` lowers them (without looking the cluster's host names up), every
//! shard of it is checked, and the files they read are shipped in a ConfigMap.
//! `loadlab k8s run …` creates the same objects on a cluster, follows them to the merge and
//! copies the merged run directory out.

use std::path::{Component, Path};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use loadlab_input::target::Lookup;
use loadlab_input::values::{positive_count, positive_duration};
use loadlab_input::LoadFlags;
use loadlab_report::k8s::{JobSpec, ShippedFile, CONFIGMAP_LIMIT, FILES_DIR};
use loadlab_run::shard::{ShardError, MAX_SHARDS};
use loadlab_run::ValidPlan;

use crate::args::{K8sJobArgs, K8sRunArgs};
use crate::cmd::Outcome;

/// Time from now to the common start when `--start-in` is not given.
const START_IN: Duration = Duration::from_secs(60);
/// How long past the scheduled end the merge Job may wait for stragglers and merge.
const MERGE_SLACK: Duration = Duration::from_secs(600);
/// Longest `--name`: the objects' names add up to 8 characters (`-results`) to it, and a
/// label value holds 63.
const MAX_NAME: usize = 52;
/// The run's length assumed for the merge Job's deadline when the plan's schedule does not end
/// it (a request count, or a constant rate without a duration).
const UNKNOWN_LENGTH: Duration = Duration::from_secs(3600);

/// Prints the objects of `loadlab k8s job`.
pub fn print_job(a: K8sJobArgs) -> Result<Outcome> {
    print!("{}", job_spec(a)?.yaml());
    Ok(Outcome::Done)
}

/// The objects of `loadlab k8s job`, from its flags.
pub(crate) fn job_spec(a: K8sJobArgs) -> Result<JobSpec> {
    let (a, words) = take_job_flags(a)?;
    let shards = a
        .shards
        .context("--shards N is required: the number of pods that share the load")?;
    let flags = LoadFlags::parse_words(&words).map_err(|e| anyhow!("the run's flags: {e}"))?;
    if flags.script.config.is_some() {
        bail!(
            "--config is not shipped to the pods yet: merge the config into the scenario file \
             (or its environments, chosen with -e)"
        );
    }
    if flags.shard.is_some() || flags.start_at.is_some() {
        bail!("the Job gives each pod its --shard and a common --start-at; drop them");
    }
    // The pods resolve the cluster's names; here none is looked up.
    let plan = loadlab_input::lower::flags_with(&flags, Lookup::Skip)?.plan;
    check_shards(&plan, shards)?;
    let (run_args, files) = ship_files(&words, &flags)?;
    let start_in = a.start_in.unwrap_or(START_IN);
    let length = plan.scheduled_duration().unwrap_or(UNKNOWN_LENGTH);
    let name = a.name.unwrap_or_else(|| "loadlab".into());
    let dns_label = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !dns_label {
        bail!(
            "--name {name:?}: Kubernetes names are lower-case letters, digits and '-', starting \
             with a letter, at most {MAX_NAME} characters here"
        );
    }
    let spec = JobSpec {
        name,
        image: a
            .image
            .unwrap_or_else(|| format!("loadlab:{}", env!("CARGO_PKG_VERSION"))),
        pull_policy: a.pull,
        host_network: a.host_network,
        cpu: a.cpu.unwrap_or_else(|| "1".into()),
        shards,
        run_args,
        files,
        start_at: humantime::format_rfc3339_seconds(SystemTime::now() + start_in).to_string(),
        storage: a.storage.unwrap_or_else(|| "1Gi".into()),
        merge_deadline_s: (start_in + length + MERGE_SLACK).as_secs(),
        dashboard_token: loadlab_harness::dashboard::new_token().map_err(|e| {
            anyhow::anyhow!("cannot read /dev/urandom for the dashboards' token: {e}")
        })?,
    };
    Ok(spec)
}

/// Moves `k8s run`'s own flags out of the run's words (they may follow the run's flags, as the
/// Job's flags may).
pub(crate) fn take_run_flags(mut a: K8sRunArgs) -> Result<K8sRunArgs> {
    let words = std::mem::take(&mut a.job.run);
    let (found, rest) = split_flags(
        words,
        &["--keep"],
        &["--kubeconfig", "--namespace", "--out"],
    )?;
    for (flag, value) in found {
        match (flag.as_str(), value) {
            ("--kubeconfig", Some(v)) => a.kubeconfig = Some(v.into()),
            ("--namespace", Some(v)) => a.namespace = Some(v),
            ("--out", Some(v)) => a.out = Some(v.into()),
            _ => a.keep = true,
        }
    }
    a.job.run = rest;
    Ok(a)
}

/// Moves the job's own flags out of the run's words (they may follow the run's flags). Clap
/// cannot: the run's words are one trailing list, which takes every word after the first URL
/// (the job's flags too), and they must stay words, as the pods get them as written (files
/// renamed), rather than be parsed into flags beside the job's own.
fn take_job_flags(mut a: K8sJobArgs) -> Result<(K8sJobArgs, Vec<String>)> {
    let words = std::mem::take(&mut a.run);
    let valued = [
        "--shards",
        "--image",
        "--start-in",
        "--name",
        "--storage",
        "--pull",
        "--cpu",
    ];
    let (found, rest) = split_flags(words, &["--host-network"], &valued)?;
    for (flag, value) in found {
        let Some(value) = value else {
            a.host_network = true;
            continue;
        };
        let bad = |e: String| anyhow!("{flag} {value}: {e}");
        match flag.as_str() {
            "--shards" => a.shards = Some(positive_count(&value).map_err(bad)?),
            "--start-in" => a.start_in = Some(positive_duration(&value).map_err(bad)?),
            "--image" => a.image = Some(value),
            "--name" => a.name = Some(value),
            "--pull" => a.pull = Some(crate::args::pull_policy(&value).map_err(bad)?),
            "--cpu" => a.cpu = Some(crate::args::cpu_quantity(&value).map_err(bad)?),
            _ => a.storage = Some(value),
        }
    }
    Ok((a, rest))
}

/// Flags found in the run's words, in order, each with its value (none for a switch).
type FoundFlags = Vec<(String, Option<String>)>;

/// Takes the `switches` (no value) and the `valued` flags (`--flag V` or `--flag=V`) out of
/// `words`: those found, in order, with their values, and the words left.
fn split_flags(
    words: Vec<String>,
    switches: &[&str],
    valued: &[&str],
) -> Result<(FoundFlags, Vec<String>)> {
    let (mut found, mut rest) = (Vec::new(), Vec::new());
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (word.clone(), None),
        };
        if switches.contains(&flag.as_str()) && inline.is_none() {
            found.push((flag, None));
        } else if valued.contains(&flag.as_str()) {
            let Some(value) = inline.or_else(|| words.next()) else {
                bail!("{flag} needs a value");
            };
            found.push((flag, Some(value)));
        } else {
            rest.push(word);
        }
    }
    Ok((found, rest))
}

/// Refuses a plan that some shard's pod would refuse at the start: each shard is split off as
/// `run --shard I/N` splits it (connections, the request count, users and payload rows) and
/// checked.
fn check_shards(plan: &ValidPlan, shards: usize) -> Result<()> {
    if shards > MAX_SHARDS {
        bail!("--shards {shards}: a plan splits into at most {MAX_SHARDS} shards");
    }
    for index in 0..shards {
        match plan.clone().shard(index, shards) {
            Ok(_) => {}
            Err(e @ ShardError::Plan(_)) => bail!("shard {index}/{shards}: {e}"),
            Err(e) => bail!("{e}"),
        }
    }
    Ok(())
}

/// The run's words with the files they read renamed under the ConfigMap's mount, and those
/// files: the scenario file with its payloads and CA file, `--body-file` and `--cacert`.
fn ship_files(words: &[String], f: &LoadFlags) -> Result<(Vec<String>, Vec<ShippedFile>)> {
    let mut files: Vec<ShippedFile> = Vec::new();
    let mut out = Vec::with_capacity(words.len());
    let mut next_is_file = false;
    for word in words {
        if next_is_file {
            next_is_file = false;
            out.push(ship(Path::new(word), None, &mut files)?);
            continue;
        }
        if let Some((flag @ ("--body-file" | "--cacert"), path)) = word.split_once('=') {
            out.push(format!(
                "{flag}={}",
                ship(Path::new(path), None, &mut files)?
            ));
            continue;
        }
        if word == "--body-file" || word == "--cacert" {
            next_is_file = true;
            out.push(word.clone());
            continue;
        }
        if f.is_scenario() && f.urls.first() == Some(word) {
            let path = Path::new(word);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the scenario file {word}"))?;
            let dir = path.parent().unwrap_or(Path::new("."));
            for side in loadlab_input::scenario::side_files(&text, path)? {
                ship(&dir.join(&side), Some(relative(&side)?), &mut files)?;
            }
            out.push(ship(path, None, &mut files)?);
            continue;
        }
        out.push(word.clone());
    }
    let total: usize = files.iter().map(|f| f.text.len()).sum();
    if total > CONFIGMAP_LIMIT {
        bail!(
            "the run's files hold {total} bytes, over a ConfigMap's 1 MiB; bake them into the \
             image instead and name them by their path there"
        );
    }
    Ok((out, files))
}

/// `path` as a relative path inside the scenario's folder, `/`-separated.
fn relative(path: &Path) -> Result<String> {
    let inside = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        bail!(
            "{} is outside the scenario's folder: to ship it in the ConfigMap, name it relative \
             to the scenario file, below it",
            path.display()
        );
    }
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    Ok(parts.join("/"))
}

/// Adds the file at `path` to `files`, under `under` (its path below the mount; its own name
/// when `None`), and returns where the pods see it.
fn ship(path: &Path, under: Option<String>, files: &mut Vec<ShippedFile>) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {} to ship it in the ConfigMap (text files only)",
            path.display()
        )
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} names no file", path.display()))?;
    let under = under.unwrap_or_else(|| name.clone());
    if let Some(same) = files.iter().find(|f| f.path == under) {
        return Ok(format!("{FILES_DIR}/{}", same.path));
    }
    let mut key: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-_.".contains(c) {
            true => c,
            false => '-',
        })
        .collect();
    if files.iter().any(|f| f.key == key) {
        key = format!("{}-{key}", files.len());
    }
    files.push(ShippedFile {
        key,
        path: under.clone(),
        text,
    });
    Ok(format!("{FILES_DIR}/{under}"))
}
