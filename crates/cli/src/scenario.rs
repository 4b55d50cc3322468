//! Scenario files in Artillery's format, lowered into one [`Plan`] (flags/YAML → plan).
//!
//! This first slice runs scripts whose scenarios are single requests: `config.target`,
//! `config.phases` (`duration`, `arrivalRate`, `rampTo`, `arrivalCount`, `pause`, `name`),
//! `config.http.timeout`, and weighted `scenarios` of one `get`/`post`/`put`/`patch`/`delete`
//! step each. A key outside that set is an error naming it with `file:line:col`, never
//! silently ignored; multi-step flows (think, capture, loop, variables) come next.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadlab_run::{Model, Plan, RatePhase, Stop};
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
enum Seconds {
    Number(f64),
    Text(String),
}

impl Seconds {
    fn duration(&self) -> Result<Duration> {
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
    step: Option<StepSpec>,
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
struct StepSpec {
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
    flow: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Step {
    Get(RequestSpec),
    Post(RequestSpec),
    Put(RequestSpec),
    Patch(RequestSpec),
    Delete(RequestSpec),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestSpec {
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    json: Option<serde_json::Value>,
    #[serde(default)]
    body: Option<String>,
}

/// Most phases a `spike` or `step` shape may expand to.
const MAX_SHAPE_PHASES: u64 = 10_000;

/// Most request templates the weights may expand to.
const MAX_WEIGHT_SUM: u32 = 1000;

fn phases_of(i: usize, p: &PhaseSpec) -> Result<Vec<RatePhase>> {
    let name = p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1));
    let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
    if let Some(pause) = &p.pause {
        if p.arrival_rate.is_some() || p.arrival_count.is_some() || p.duration.is_some() {
            bail!("phase {name:?}: a pause takes no duration, arrivalRate or arrivalCount");
        }
        return Ok(vec![RatePhase::pause(&name, pause.duration()?)]);
    }
    let duration = p
        .duration
        .as_ref()
        .with_context(|| format!("phase {name:?} needs a duration (or is a pause)"))?
        .duration()?;
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
        return Ok(spikes(&name, sp.base, sp.to, length, every, duration));
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
            Ok(vec![RatePhase::ramp(&name, r, to.unwrap_or(r), duration)])
        }
        (None, None, Some(n)) if rate_ok(n) => Ok(vec![RatePhase::constant(
            &name,
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
fn parse(text: &str, path: &Path) -> Result<(ScenarioFile, Vec<RatePhase>)> {
    let file: ScenarioFile = serde_saphyr::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}", located(path, &e.to_string())))?;
    let mut phases = Vec::new();
    for (i, p) in file.config.phases.iter().enumerate() {
        phases.extend(phases_of(i, p).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?);
    }
    Ok((file, phases))
}

/// True when the argument names a scenario file rather than a URL.
pub fn is_scenario(arg: &str) -> bool {
    arg.ends_with(".yaml") || arg.ends_with(".yml")
}

/// Reads a scenario file and lowers it, with the run flags that still apply (connections,
/// threads, arrival spacing, seed), into a plan.
pub fn plan_from_scenario(path: &Path, a: &RunArgs) -> Result<Plan> {
    if a.rate.is_some() || a.ramp_to.is_some() || a.duration.is_some() || a.requests.is_some() {
        bail!("-R, --ramp-to, -d and -n come from the scenario's phases; drop them");
    }
    if a.urls.len() != 1 {
        bail!("give one scenario file and no URLs");
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scenario file {}", path.display()))?;
    let (file, phases) = parse(&text, path)?;
    let at = |what: String| format!("{}: {what}", path.display());

    let mut urls = Vec::new();
    let mut weighted: Vec<(u32, crate::lower::RequestSpec)> = Vec::new();
    for (i, s) in file.scenarios.iter().enumerate() {
        let name = s
            .name
            .clone()
            .unwrap_or_else(|| format!("scenario {}", i + 1));
        let [step] = s.flow.as_slice() else {
            bail!(at(format!(
                "scenario {name:?} has {} steps; this version runs one-request flows (think, capture and loop are coming)",
                s.flow.len()
            )));
        };
        let (method, r) = match step {
            Step::Get(r) => ("GET", r),
            Step::Post(r) => ("POST", r),
            Step::Put(r) => ("PUT", r),
            Step::Patch(r) => ("PATCH", r),
            Step::Delete(r) => ("DELETE", r),
        };
        let target = a.target.as_deref().unwrap_or(&file.config.target);
        let url = if r.url.starts_with('/') {
            format!("{}{}", target.trim_end_matches('/'), r.url)
        } else {
            r.url.clone()
        };
        let mut headers: Vec<(String, String)> = r.headers.clone().into_iter().collect();
        let body = match (&r.json, &r.body) {
            (Some(_), Some(_)) => bail!(at(format!(
                "scenario {name:?}: give json or body, not both"
            ))),
            (Some(j), None) => {
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                serde_json::to_vec(j)?
            }
            (None, Some(b)) => b.clone().into_bytes(),
            (None, None) => Vec::new(),
        };
        let weight = s.weight.unwrap_or(1);
        if weight == 0 {
            continue;
        }
        urls.push(url.clone());
        weighted.push((
            weight,
            crate::lower::RequestSpec {
                name: name.clone(),
                url,
                method: method.into(),
                headers,
                body,
            },
        ));
    }
    if weighted.is_empty() {
        bail!(at("no scenario with a positive weight".into()));
    }
    // Weights become repetitions in the round-robin list, reduced by their common divisor.
    let divisor = weighted.iter().fold(0, |g, (w, _)| gcd(g, *w));
    let total: u32 = weighted.iter().map(|(w, _)| w / divisor).sum();
    if total > MAX_WEIGHT_SUM {
        bail!(at(format!(
            "scenario weights reduce to {total} slots; keep them under {MAX_WEIGHT_SUM}"
        )));
    }
    let mut specs = Vec::new();
    let mut remaining: Vec<u32> = weighted.iter().map(|(w, _)| w / divisor).collect();
    // Interleave (a b a a b …) rather than block, so short phases see the mix too.
    while remaining.iter().any(|r| *r > 0) {
        for (i, (_, spec)) in weighted.iter().enumerate() {
            if remaining[i] > 0 {
                remaining[i] -= 1;
                specs.push(spec.clone());
            }
        }
    }
    let (endpoints, requests) = crate::lower::resolve(&specs)?;
    let connections = a.connections.unwrap_or(endpoints.len());
    let plan = Plan {
        endpoints,
        requests,
        model: Model::Open {
            phases,
            arrival: crate::lower::arrival(a.arrival),
            connections,
            max_connections: a
                .max_connections
                .unwrap_or(crate::lower::DEFAULT_MAX_CONNECTIONS.max(connections)),
            seed: a.seed,
        },
        stop: Stop::default(),
        timeout: file
            .config
            .http
            .and_then(|h| h.timeout)
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(a.timeout, Duration::from_secs_f64),
        connect_timeout: a.connect_timeout.unwrap_or(Duration::from_secs(5)),
        threads: a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    plan.validate()
        .map_err(|e| anyhow::anyhow!(at(e.to_string())))?;
    Ok(plan)
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

    #[test]
    fn the_parser_never_panics_on_mangled_or_random_input() {
        let path = Path::new("fuzz.yaml");
        assert!(parse(SEED, path).is_ok(), "the seed parses");
        let mut rng = fastrand::Rng::with_seed(4);
        let alphabet: &[u8] =
            b" \n\t:-{}[],\"'#&*!|>%@`0123456789.eE+-abcdefghijklmnopqrstuvwxyz\\\x00\xff";
        for round in 0..3000 {
            let mut bytes = SEED.as_bytes().to_vec();
            if round % 10 == 0 {
                // Wholly random input.
                bytes = (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect();
            } else {
                // A few mutations of the valid file: replace, insert, delete, duplicate.
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
            let text = String::from_utf8_lossy(&bytes);
            // Either outcome is fine; a panic fails the test.
            let _ = parse(&text, path);
        }
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
            step: Some(StepSpec {
                from: 100.0,
                to: 400.0,
                steps: 4,
            }),
        };
        let p = phases_of(0, &spec).unwrap();
        let rates: Vec<f64> = p.iter().map(|ph| ph.start_rps).collect();
        assert_eq!(rates, vec![100.0, 200.0, 300.0, 400.0]);
        assert!(p.iter().all(|ph| ph.duration == Some(secs(10))));
    }
}
