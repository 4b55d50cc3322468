//! Scenario files in Artillery's format, lowered into one [`Plan`] (flags/YAML → plan).
//!
//! `config` (target, phases, http.timeout, variables, payload) and weighted `scenarios` whose
//! `flow` is requests, `think` and `loop` steps — or, beyond Artillery, a `markov` chain of
//! pages. Phases are arrival phases (the open model) or `users` phases (the closed model with
//! virtual users). A key outside the supported set is an error naming it with
//! `file:line:col`, never silently ignored (see docs/scenarios.md).
//!
//! A file whose scenarios are each a single plain request runs as plain arrivals over kept-alive
//! connections; anything more runs as virtual users, each with connections of its own.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadlab_run::users::{Payload, PayloadOrder};
use loadlab_run::{Arrivals, Model, Plan, RatePhase, Stop, UserModel, UserPhase, ValidPlan};
use serde::Deserialize;

use crate::args::RunArgs;
use crate::experiment::located;

/// A whole scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    config: Config,
    scenarios: Vec<ScenarioSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    target: String,
    phases: Vec<PhaseSpec>,
    #[serde(default)]
    http: Option<HttpConfig>,
    /// Values for `{{ name }}`; a list gives each user one of them at random.
    #[serde(default)]
    variables: BTreeMap<String, serde_json::Value>,
    /// CSV files whose rows are handed to users.
    #[serde(default)]
    payload: Option<OneOrMany<PayloadSpec>>,
}

/// One item or a list of them, as Artillery accepts for `payload`, `capture` and codes.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single item.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The items as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(t) => std::slice::from_ref(t),
            OneOrMany::Many(v) => v,
        }
    }
}

/// `config.payload`: a CSV file and the variables its columns fill.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PayloadSpec {
    /// The CSV file, relative to the scenario file.
    pub path: String,
    /// Variable names, one per column.
    pub fields: Vec<String>,
    /// `random` (default) or `sequence`.
    #[serde(default)]
    pub order: Option<String>,
    /// Skip the first line (a header).
    #[serde(default)]
    pub skip_header: bool,
    /// Column separator (default `,`).
    #[serde(default)]
    pub delimiter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpConfig {
    /// Seconds, as in Artillery.
    timeout: Option<f64>,
}

/// Seconds as a number, or a duration such as `2m`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Seconds {
    /// Seconds.
    Number(f64),
    /// A duration with its unit.
    Text(String),
}

impl Seconds {
    /// The duration, which must be above zero.
    pub fn duration(&self) -> Result<Duration> {
        match self {
            Seconds::Number(s) if s.is_finite() && *s > 0.0 => Duration::try_from_secs_f64(*s)
                .map_err(|_| anyhow::anyhow!("a duration of {s} s is too long")),
            Seconds::Number(s) => bail!("a duration must be more than zero seconds, got {s}"),
            Seconds::Text(t) => {
                crate::args::parse_duration(t).map_err(|e| anyhow::anyhow!("{t:?}: {e}"))
            }
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PhaseSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    duration: Option<Seconds>,
    #[serde(default)]
    arrival_rate: Option<f64>,
    #[serde(default)]
    ramp_to: Option<f64>,
    #[serde(default)]
    arrival_count: Option<f64>,
    #[serde(default)]
    pause: Option<Seconds>,
    /// loadlab's shape: a base rate with periodic spikes.
    #[serde(default)]
    spike: Option<SpikeSpec>,
    /// loadlab's shape: equal steps from one rate to another.
    #[serde(default)]
    step: Option<StepShape>,
    /// Closed model: virtual users running during the phase.
    #[serde(default)]
    users: Option<usize>,
    /// Closed model: users started (or stopped) per second on the way to `users`.
    #[serde(default)]
    spawn_rate: Option<f64>,
}

/// A base rate with spikes of `length` to `to`, one every `every` (the first at `every`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpikeSpec {
    base: f64,
    to: f64,
    length: Seconds,
    every: Seconds,
}

/// `steps` constant rates of equal length, from `from` to `to`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepShape {
    from: f64,
    to: f64,
    steps: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    weight: Option<u32>,
    #[serde(default)]
    flow: Option<Vec<StepSpec>>,
    /// loadlab's user model: a Markov chain of pages.
    #[serde(default)]
    markov: Option<crate::flows::MarkovSpec>,
}

use crate::flows::StepSpec;

/// Most phases a `spike` or `step` shape may expand to.
const MAX_SHAPE_PHASES: u64 = 10_000;

/// Most request templates the weights may expand to.
const MAX_WEIGHT_SUM: u32 = 1000;

/// A phase as lowered: arrival rates, a user count, or a pause that fits either model.
#[derive(Debug, Clone, PartialEq)]
enum Lowered {
    Rates(Vec<RatePhase>),
    Users(UserPhase),
    Pause(String, Duration),
}

/// The phases of a file: all arrival phases (open model) or all user phases (closed model).
#[derive(Debug, Clone, PartialEq)]
enum Phases {
    Rates(Vec<RatePhase>),
    Users(Vec<UserPhase>),
}

fn phases_of(i: usize, p: &PhaseSpec) -> Result<Lowered> {
    let name = p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1));
    if let Some(pause) = &p.pause {
        if p.arrival_rate.is_some()
            || p.arrival_count.is_some()
            || p.duration.is_some()
            || p.users.is_some()
        {
            bail!("phase {name:?}: a pause takes no duration, arrivalRate, arrivalCount or users");
        }
        return Ok(Lowered::Pause(name, pause.duration()?));
    }
    let duration = p
        .duration
        .as_ref()
        .with_context(|| format!("phase {name:?} needs a duration (or is a pause)"))?
        .duration()?;
    if let Some(users) = p.users {
        let other = p.arrival_rate.is_some()
            || p.arrival_count.is_some()
            || p.spike.is_some()
            || p.step.is_some()
            || p.ramp_to.is_some();
        if other {
            bail!("phase {name:?}: users phases (closed model) take no arrival rates");
        }
        if users > loadlab_run::plan::MAX_CONNECTIONS {
            bail!(
                "phase {name:?}: at most {} users",
                loadlab_run::plan::MAX_CONNECTIONS
            );
        }
        if let Some(r) = p.spawn_rate {
            if !(r.is_finite() && r > 0.0) {
                bail!("phase {name:?}: spawnRate must be more than 0 users per second");
            }
        }
        return Ok(Lowered::Users(UserPhase {
            name,
            duration,
            users,
            spawn_rate: p.spawn_rate,
        }));
    }
    if p.spawn_rate.is_some() {
        bail!("phase {name:?}: spawnRate goes with users");
    }
    Ok(Lowered::Rates(rate_phases(&name, p, duration)?))
}

fn rate_phases(name: &str, p: &PhaseSpec, duration: Duration) -> Result<Vec<RatePhase>> {
    let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
    let kinds = [
        p.arrival_rate.is_some() || p.arrival_count.is_some(),
        p.spike.is_some(),
        p.step.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        bail!("phase {name:?} needs one of arrivalRate, arrivalCount, spike or step");
    }
    if let Some(sp) = &p.spike {
        let (length, every) = (sp.length.duration()?, sp.every.duration()?);
        if !(rate_ok(sp.base) && rate_ok(sp.to)) || length >= every {
            bail!("phase {name:?}: a spike needs rates of at least 0 and a length shorter than its spacing");
        }
        if duration.as_secs_f64() / every.as_secs_f64() > MAX_SHAPE_PHASES as f64 / 2.0 {
            bail!(
                "phase {name:?}: more than {} spikes; space them further apart",
                MAX_SHAPE_PHASES / 2
            );
        }
        return Ok(spikes(name, sp.base, sp.to, length, every, duration));
    }
    if let Some(st) = &p.step {
        if !(rate_ok(st.from) && rate_ok(st.to))
            || st.steps == 0
            || u64::from(st.steps) > MAX_SHAPE_PHASES
        {
            bail!(
                "phase {name:?}: steps need rates of at least 0 and 1 to {MAX_SHAPE_PHASES} steps"
            );
        }
        let each = duration / st.steps;
        return Ok((0..st.steps)
            .map(|k| {
                let f = if st.steps == 1 {
                    0.0
                } else {
                    f64::from(k) / f64::from(st.steps - 1)
                };
                RatePhase::constant(
                    &format!("{name} step {}", k + 1),
                    st.from + (st.to - st.from) * f,
                    Some(each),
                )
            })
            .collect());
    }
    match (p.arrival_rate, p.ramp_to, p.arrival_count) {
        (Some(r), to, None) if rate_ok(r) && to.is_none_or(rate_ok) => {
            Ok(vec![RatePhase::ramp(name, r, to.unwrap_or(r), duration)])
        }
        (None, None, Some(n)) if rate_ok(n) => Ok(vec![RatePhase::constant(
            name,
            n / duration.as_secs_f64(),
            Some(duration),
        )]),
        _ => bail!(
            "phase {name:?} needs arrivalRate (optionally rampTo) or arrivalCount, not negative"
        ),
    }
}

/// A base rate over `duration` with a spike of `length` at every multiple of `every`.
fn spikes(
    name: &str,
    base: f64,
    to: f64,
    length: Duration,
    every: Duration,
    duration: Duration,
) -> Vec<RatePhase> {
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    let mut k = 1;
    while t < duration {
        let spike_at = every * k;
        let base_end = spike_at.min(duration);
        if base_end > t {
            out.push(RatePhase::constant(
                &format!("{name} base {k}"),
                base,
                Some(base_end - t),
            ));
        }
        if spike_at >= duration {
            break;
        }
        let spike_end = (spike_at + length).min(duration);
        out.push(RatePhase::constant(
            &format!("{name} spike {k}"),
            to,
            Some(spike_end - spike_at),
        ));
        t = spike_end;
        k += 1;
    }
    out
}

/// Parses a scenario's text and its phases; no I/O, so it can be fed anything.
fn parse(text: &str, path: &Path) -> Result<(ScenarioFile, Phases)> {
    let file: ScenarioFile = serde_saphyr::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}", located(path, &plain_untagged(&e.to_string()))))?;
    let at = |e: anyhow::Error| anyhow::anyhow!("{}: {e:#}", path.display());
    let mut lowered = Vec::new();
    for (i, p) in file.config.phases.iter().enumerate() {
        lowered.push(phases_of(i, p).map_err(at)?);
    }
    let users = lowered.iter().any(|l| matches!(l, Lowered::Users(_)));
    let rates = lowered.iter().any(|l| matches!(l, Lowered::Rates(_)));
    if users && rates {
        return Err(at(anyhow::anyhow!(
            "phases mix users (closed model) with arrival rates (open model); use one kind"
        )));
    }
    let phases = if users {
        Phases::Users(
            lowered
                .into_iter()
                .map(|l| match l {
                    Lowered::Users(u) => u,
                    Lowered::Pause(name, duration) => UserPhase {
                        name,
                        duration,
                        users: 0,
                        spawn_rate: None,
                    },
                    Lowered::Rates(_) => unreachable!("checked above"),
                })
                .collect(),
        )
    } else {
        Phases::Rates(
            lowered
                .into_iter()
                .flat_map(|l| match l {
                    Lowered::Rates(r) => r,
                    Lowered::Pause(name, d) => vec![RatePhase::pause(&name, d)],
                    Lowered::Users(_) => unreachable!("checked above"),
                })
                .collect(),
        )
    };
    Ok((file, phases))
}

/// serde's message for a value that fits none of an untagged enum's shapes names the Rust
/// type; this says what the key accepts instead.
fn plain_untagged(message: &str) -> String {
    let accepts = [
        (
            "enum ThinkSpec",
            "think takes seconds (2, 0.5, \"500ms\") or one of { constant: S }, { uniform: [LOW, HIGH] }, { exponential: MEAN }",
        ),
        ("enum Seconds", "expected seconds (2, 0.5) or a duration such as \"2m\""),
        ("enum OneOrMany", "expected one item or a list of them"),
    ];
    for (ty, says) in accepts {
        if message.contains(ty) {
            let (head, _) = message
                .split_once("data did not match")
                .unwrap_or((message, ""));
            return format!("{head}{says}");
        }
    }
    message.to_string()
}

/// True when the argument names a scenario file rather than a URL.
pub fn is_scenario(arg: &str) -> bool {
    arg.ends_with(".yaml") || arg.ends_with(".yml")
}

/// Reads a scenario file and lowers it, with the run flags that still apply (connections,
/// threads, arrival spacing, seed), into a plan.
pub fn plan_from_scenario(path: &Path, a: &RunArgs) -> Result<ValidPlan> {
    if a.rate.is_some() || a.ramp_to.is_some() || a.duration.is_some() || a.requests.is_some() {
        bail!("-R, --ramp-to, -d and -n come from the scenario's phases; drop them");
    }
    if a.urls.len() != 1 {
        bail!("give one scenario file and no URLs");
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scenario file {}", path.display()))?;
    plan_from_text(&text, path, a)
}

/// Lowers a scenario's text (read from `path`, which payload paths are relative to) into a
/// plan.
fn plan_from_text(text: &str, path: &Path, a: &RunArgs) -> Result<ValidPlan> {
    let (file, phases) = parse(text, path)?;
    let at = |e: anyhow::Error| anyhow::anyhow!("{}: {e:#}", path.display());
    let target = a.target.as_deref().unwrap_or(&file.config.target);
    let simple = matches!(phases, Phases::Rates(_))
        && file.config.variables.is_empty()
        && file.config.payload.is_none()
        && file.scenarios.iter().all(|s| {
            s.markov.is_none()
                && s.flow.as_ref().is_some_and(
                    |f| matches!(f.as_slice(), [step] if step.plain_request().is_some()),
                )
        });
    let (endpoints, requests, users) = if simple {
        let (e, r) = plain_requests(&file.scenarios, target).map_err(at)?;
        (e, r, None)
    } else {
        user_model(&file, path, target, a.seed).map_err(at)?
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let model = match phases {
        Phases::Rates(phases) => {
            let connections = a.connections.unwrap_or(endpoints.len());
            let max_connections = a
                .max_connections
                .unwrap_or(crate::lower::DEFAULT_MAX_CONNECTIONS.max(connections));
            Model::Open {
                phases,
                arrival: crate::lower::arrival(a.arrival),
                seed: a.seed,
                arrivals: match users {
                    Some(users) => Arrivals::Sessions {
                        users,
                        max_sessions: max_connections,
                    },
                    None => Arrivals::Requests {
                        connections,
                        max_connections,
                    },
                },
            }
        }
        Phases::Users(phases) => {
            if a.connections.is_some() || a.max_connections.is_some() {
                return Err(at(anyhow::anyhow!(
                    "-c and --max-connections do not apply to users phases: each user has its own connections"
                )));
            }
            Model::Users {
                phases,
                users: users.context("users phases run virtual users")?,
            }
        }
    };
    let plan = Plan {
        endpoints,
        requests,
        model,
        stop: Stop::default(),
        timeout: file
            .config
            .http
            .and_then(|h| h.timeout)
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(Ok(a.timeout), |t| {
                Duration::try_from_secs_f64(t)
                    .map_err(|_| at(anyhow::anyhow!("config.http.timeout of {t} s is too long")))
            })?,
        connect_timeout: a.connect_timeout.unwrap_or(Duration::from_secs(5)),
        threads,
    };
    plan.check().map_err(|e| at(e.into()))
}

/// The scenario names and weights, with defaults; scenarios of weight 0 are left out.
fn weighted(scenarios: &[ScenarioSpec]) -> Vec<(usize, String, u32)> {
    scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = s
                .name
                .clone()
                .unwrap_or_else(|| format!("scenario {}", i + 1));
            (i, name, s.weight.unwrap_or(1))
        })
        .filter(|(_, _, w)| *w > 0)
        .collect()
}

/// Weights as interleaved repetitions (a b a a …), reduced by their common divisor, so short
/// stretches of arrivals see the mix too: the item indices in order.
fn interleave(weights: &[u32]) -> Result<Vec<usize>> {
    let divisor = weights.iter().fold(0, |g, w| gcd(g, *w));
    if divisor == 0 {
        bail!("no scenario with a positive weight");
    }
    let total: u32 = weights.iter().map(|w| w / divisor).sum();
    if total > MAX_WEIGHT_SUM {
        bail!("scenario weights reduce to {total} slots; keep them under {MAX_WEIGHT_SUM}");
    }
    let mut remaining: Vec<u32> = weights.iter().map(|w| w / divisor).collect();
    let mut out = Vec::new();
    while remaining.iter().any(|r| *r > 0) {
        for (i, r) in remaining.iter_mut().enumerate() {
            if *r > 0 {
                *r -= 1;
                out.push(i);
            }
        }
    }
    Ok(out)
}

/// Single-request scenarios as the round-robin list of plain requests.
fn plain_requests(
    scenarios: &[ScenarioSpec],
    target: &str,
) -> Result<(
    Vec<loadlab_run::Endpoint>,
    Vec<loadlab_run::RequestTemplate>,
)> {
    let chosen = weighted(scenarios);
    let mut specs = Vec::new();
    for (i, name, _) in &chosen {
        let flow = scenarios[*i].flow.as_deref().unwrap_or_default();
        let (method, r) = flow[0].plain_request().context("a single request")?;
        let url = if r.url.starts_with('/') {
            format!("{}{}", target.trim_end_matches('/'), r.url)
        } else {
            r.url.clone()
        };
        let (headers, body) = r
            .headers_and_body()
            .with_context(|| format!("scenario {name:?}"))?;
        specs.push(crate::lower::RequestSpec {
            name: name.clone(),
            url,
            method: method.into(),
            headers,
            body,
        });
    }
    let weights: Vec<u32> = chosen.iter().map(|(_, _, w)| *w).collect();
    let order: Vec<crate::lower::RequestSpec> = interleave(&weights)?
        .into_iter()
        .map(|k| specs[k].clone())
        .collect();
    crate::lower::resolve(&order)
}

/// Flows and chains as a user model, with the plan's endpoints and requests.
fn user_model(
    file: &ScenarioFile,
    path: &Path,
    target: &str,
    seed: u64,
) -> Result<(
    Vec<loadlab_run::Endpoint>,
    Vec<loadlab_run::RequestTemplate>,
    Option<UserModel>,
)> {
    let mut variables = Vec::new();
    for (name, v) in &file.config.variables {
        let scalar = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok(v.to_string()),
            _ => bail!("variable {name:?}: values are strings, numbers or booleans"),
        };
        let values = match v {
            serde_json::Value::Array(items) => {
                items.iter().map(scalar).collect::<Result<Vec<_>>>()?
            }
            other => vec![scalar(other)?],
        };
        if values.is_empty() {
            bail!("variable {name:?} has an empty list of values");
        }
        variables.push((name.clone(), values));
    }
    let mut payloads = Vec::new();
    if let Some(p) = &file.config.payload {
        for spec in p.as_slice() {
            payloads.push(read_payload(spec, path)?);
        }
    }
    let mut defined: std::collections::HashSet<String> =
        variables.iter().map(|(n, _)| n.clone()).collect();
    defined.extend(payloads.iter().flat_map(|p| p.fields.iter().cloned()));
    let chosen = weighted(&file.scenarios);
    let mut scenarios = Vec::new();
    let mut lowering = crate::flows::Lowering::new(target, defined.clone());
    for (i, name, _) in &chosen {
        let s = &file.scenarios[*i];
        // Each scenario sees only the variables defined before it: config, payload, and its
        // own captures.
        lowering.defined = defined.clone();
        scenarios.push(
            lowering
                .scenario(name, s.flow.as_deref(), s.markov.as_ref())
                .with_context(|| format!("scenario {name:?}"))?,
        );
    }
    let weights: Vec<u32> = chosen.iter().map(|(_, _, w)| *w).collect();
    let pattern = interleave(&weights)?;
    let model = UserModel {
        scenarios,
        pattern,
        variables,
        payloads,
        seed,
    };
    Ok((lowering.endpoints, lowering.requests, Some(model)))
}

/// Most rows a payload file may have.
const MAX_PAYLOAD_ROWS: usize = 10_000_000;

/// Reads a payload CSV file, relative to the scenario file.
fn read_payload(spec: &PayloadSpec, scenario: &Path) -> Result<Payload> {
    let file = scenario.parent().unwrap_or(Path::new(".")).join(&spec.path);
    let delimiter = match spec.delimiter.as_deref() {
        None => b',',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => bail!("payload delimiter {d:?} must be one character"),
    };
    let order = match spec.order.as_deref() {
        None | Some("random") => PayloadOrder::Random,
        Some("sequence") => PayloadOrder::Sequence,
        Some(o) => bail!("payload order {o:?}: use random or sequence"),
    };
    if spec.fields.is_empty() {
        bail!(
            "payload {}: fields names the variables of its columns",
            spec.path
        );
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(spec.skip_header)
        .delimiter(delimiter)
        .flexible(true)
        .from_path(&file)
        .with_context(|| format!("cannot read the payload file {}", file.display()))?;
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("payload {}", file.display()))?;
        if record.len() < spec.fields.len() {
            bail!(
                "payload {} row {}: {} columns, fields names {}",
                file.display(),
                i + 1,
                record.len(),
                spec.fields.len()
            );
        }
        rows.push(
            record
                .iter()
                .take(spec.fields.len())
                .map(str::to_string)
                .collect(),
        );
        if rows.len() > MAX_PAYLOAD_ROWS {
            bail!(
                "payload {} has more than {MAX_PAYLOAD_ROWS} rows",
                file.display()
            );
        }
    }
    if rows.is_empty() {
        bail!("payload {} has no rows", file.display());
    }
    Ok(Payload {
        fields: spec.fields.clone(),
        rows,
        order,
    })
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// A valid file to mutate.
    const SEED: &str = "config:\n  target: \"http://127.0.0.1:8080\"\n  http:\n    timeout: 5\n  phases:\n    - duration: 2\n      arrivalRate: 10\n      rampTo: 20\n    - pause: 1\n    - duration: 3\n      spike: { base: 1, to: 9, length: 1, every: 2 }\n    - duration: 4\n      step: { from: 1, to: 4, steps: 4 }\nscenarios:\n  - name: a\n    weight: 2\n    flow:\n      - post:\n          url: \"/x\"\n          json: { k: [1, 2] }\n";

    /// A file of users phases with every flow and Markov feature, to mutate.
    const USERS_SEED: &str = "config:\n  target: \"http://127.0.0.1:8080\"\n  variables:\n    v: [a, 2]\n  phases:\n    - { duration: 2, users: 3, spawnRate: 2 }\n    - pause: 1\nscenarios:\n  - name: f\n    weight: 2\n    flow:\n      - post:\n          url: \"/login?x={{ v }}\"\n          json: { user: \"{{ v }}-{{ $randomNumber(1, 9) }}\" }\n          capture: [{ json: \"$.token\", as: t }, { header: X-A, as: h }]\n          expect: [{ statusCode: [200, 201] }, { contentType: json }]\n      - think: { uniform: [0.1, 0.2] }\n      - loop:\n          - get: { url: \"/a/{{ t }}\", qs: { q: \"{{ h }}\" }, headers: { A: \"{{ t }}\" }, static: true }\n          - think: 0.5\n        count: 3\n  - name: m\n    markov:\n      start: r\n      states:\n        r: { next: { p: 1 } }\n        p: { get: { url: \"/p\", static: true }, think: { exponential: 1 }, next: { p: 0.5, end: 0.5 } }\n";

    #[test]
    fn the_parser_never_panics_on_mangled_or_random_input() {
        let path = Path::new("fuzz.yaml");
        assert!(parse(SEED, path).is_ok(), "the seed parses");
        assert!(parse(USERS_SEED, path).is_ok(), "the users seed parses");
        // Either outcome is fine; a panic fails the test.
        mutations(SEED, 3000, |text| {
            let _ = parse(text, path);
        });
        mutations(USERS_SEED, 3000, |text| {
            let _ = parse(text, path);
        });
    }

    /// Mutates `seed` a few bytes at a time (or replaces it with random bytes every tenth
    /// round) and hands each text to `check`.
    fn mutations(seed: &str, rounds: usize, mut check: impl FnMut(&str)) {
        let mut rng = fastrand::Rng::with_seed(4);
        let alphabet: &[u8] =
            b" \n\t:-{}[],\"'#&*!|>%@`0123456789.eE+-abcdefghijklmnopqrstuvwxyz\\\x00\xff";
        for round in 0..rounds {
            let mut bytes = seed.as_bytes().to_vec();
            if round % 10 == 0 {
                bytes = (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect();
            } else {
                for _ in 0..rng.usize(1..6) {
                    let at = rng.usize(0..=bytes.len());
                    match rng.u8(0..4) {
                        0 if at < bytes.len() => bytes[at] = alphabet[rng.usize(0..alphabet.len())],
                        1 => bytes.insert(at, alphabet[rng.usize(0..alphabet.len())]),
                        2 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        _ => {
                            let end = (at + rng.usize(0..40)).min(bytes.len());
                            let piece = bytes[at..end].to_vec();
                            bytes.splice(at..at, piece);
                        }
                    }
                }
            }
            check(&String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn lowering_flows_and_chains_never_panics_on_mangled_files() {
        let path = Path::new("fuzz.yaml");
        let crate::args::Command::Run(args) =
            <crate::args::Cli as clap::Parser>::try_parse_from(["loadlab", "run", "fuzz.yaml"])
                .unwrap()
                .command
        else {
            unreachable!("parsed as a run");
        };
        let plan = plan_from_text(USERS_SEED, path, &args).unwrap();
        assert!(plan.model.users().is_some(), "the seed runs as users");
        mutations(USERS_SEED, 3000, |text| {
            // Only loopback addresses: a mangled host name would wait on a resolver.
            if text.matches("://").count() == 1 && text.contains("http://127.0.0.1:") {
                let _ = plan_from_text(text, path, &args);
            }
        });
    }

    #[test]
    fn seed_000s_spike_test_becomes_base_and_spike_phases() {
        // Base 100 req/s, 15 s spikes to 1000 every 45 s, over 120 s: two spikes.
        let p = spikes("s", 100.0, 1000.0, secs(15), secs(45), secs(120));
        let shape: Vec<(f64, u64)> = p
            .iter()
            .map(|ph| (ph.start_rps, ph.duration.unwrap().as_secs()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (100.0, 45),
                (1000.0, 15),
                (100.0, 30),
                (1000.0, 15),
                (100.0, 15)
            ]
        );
        assert_eq!(p[1].name, "s spike 1");
    }

    #[test]
    fn steps_split_the_duration_evenly_from_one_rate_to_another() {
        let spec = PhaseSpec {
            name: Some("up".into()),
            duration: Some(Seconds::Number(40.0)),
            arrival_rate: None,
            ramp_to: None,
            arrival_count: None,
            pause: None,
            spike: None,
            users: None,
            spawn_rate: None,
            step: Some(StepShape {
                from: 100.0,
                to: 400.0,
                steps: 4,
            }),
        };
        let Lowered::Rates(p) = phases_of(0, &spec).unwrap() else {
            panic!("a step phase gives rates");
        };
        let rates: Vec<f64> = p.iter().map(|ph| ph.start_rps).collect();
        assert_eq!(rates, vec![100.0, 200.0, 300.0, 400.0]);
        assert!(p.iter().all(|ph| ph.duration == Some(secs(10))));
    }
}
