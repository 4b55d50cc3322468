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
            Seconds::Number(s) if s.is_finite() && *s > 0.0 => Ok(Duration::from_secs_f64(*s)),
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

/// Most request templates the weights may expand to.
const MAX_WEIGHT_SUM: u32 = 1000;

fn phase(i: usize, p: &PhaseSpec) -> Result<RatePhase> {
    let name = p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1));
    if let Some(pause) = &p.pause {
        if p.arrival_rate.is_some() || p.arrival_count.is_some() || p.duration.is_some() {
            bail!("phase {name:?}: a pause takes no duration, arrivalRate or arrivalCount");
        }
        return Ok(RatePhase::pause(&name, pause.duration()?));
    }
    let duration = p
        .duration
        .as_ref()
        .with_context(|| format!("phase {name:?} needs a duration (or is a pause)"))?
        .duration()?;
    let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
    match (p.arrival_rate, p.ramp_to, p.arrival_count) {
        (Some(r), to, None) if rate_ok(r) && to.is_none_or(rate_ok) => {
            Ok(RatePhase::ramp(&name, r, to.unwrap_or(r), duration))
        }
        (None, None, Some(n)) if rate_ok(n) => Ok(RatePhase::constant(
            &name,
            n / duration.as_secs_f64(),
            Some(duration),
        )),
        _ => bail!(
            "phase {name:?} needs arrivalRate (optionally rampTo) or arrivalCount, not negative"
        ),
    }
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
    let file: ScenarioFile = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}", located(path, &e.to_string())))?;
    let at = |what: String| format!("{}: {what}", path.display());

    let phases = file
        .config
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| phase(i, p))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| anyhow::anyhow!(at(e.to_string())))?;

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
        let url = if r.url.starts_with('/') {
            format!("{}{}", file.config.target.trim_end_matches('/'), r.url)
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
