//! Scenario files in Artillery's format, parsed and lowered into a plan's parts (the
//! endpoints, the requests, the phases and the user model).
//!
//! `config` (target, phases, http.timeout, tls, variables, payload) and weighted `scenarios` whose
//! `flow` is requests, `think` and `loop` steps — or, beyond Artillery, a `markov` chain of
//! pages. Phases are arrival phases (the open model) or `users` phases (the closed model with
//! virtual users). A key outside the supported set is an error naming it with
//! `file:line:col`, never silently ignored (see docs/scenarios.md).
//!
//! A file whose scenarios are each a single plain request runs as plain arrivals over kept-alive
//! connections; anything more runs as virtual users, each with connections of its own.
//!
//! What cannot run is a [`ScenarioError`]: the file, where in it (a trail of [`Place`]s), and
//! the [`Problem`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod ensure;
mod error;
mod flows;
mod payload;
mod phases;

use loadlab_run::UserModel;
use serde::Deserialize;

use self::ensure::EnsureSpec;
pub use self::error::{
    EnsureError, FlowError, PayloadError, PhaseError, Place, Problem, ScenarioError,
};
use self::error::{Traced, Within};
use self::flows::{MarkovSpec, RequestSpec, StepSpec};
use self::payload::{read_payload, PayloadSpec};
use self::phases::PhaseSpec;
pub use self::phases::Phases;
use crate::target::Lookup;
use crate::yaml::{plain_untagged, OneOrMany, YamlError};

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
    /// How `https://` targets are verified.
    #[serde(default)]
    tls: Option<TlsConfig>,
    /// Checks that fail the run (thresholds, conditions, maxErrorRate).
    #[serde(default)]
    ensure: Option<EnsureSpec>,
}

/// `config.tls`: loadlab's `cacert` and `insecure`, and Artillery's `rejectUnauthorized`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsConfig {
    /// A private CA's PEM file, relative to the scenario file.
    #[serde(default)]
    cacert: Option<PathBuf>,
    /// Skip certificate verification.
    #[serde(default)]
    insecure: bool,
    /// Artillery's spelling: `false` skips verification.
    #[serde(default, rename = "rejectUnauthorized")]
    reject_unauthorized: Option<bool>,
}

/// A scenario's TLS settings, its CA path resolved against the file's directory.
#[derive(Debug, Default)]
pub struct ScenarioTls {
    /// The private CA's PEM file.
    pub cacert: Option<PathBuf>,
    /// Skip certificate verification.
    pub insecure: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpConfig {
    /// Seconds, as in Artillery.
    timeout: Option<f64>,
    /// Speak HTTP/2 (ALPN `h2` on `https://`, prior knowledge on `http://`).
    #[serde(default)]
    http2: bool,
    /// HTTP/2: most requests in flight per connection.
    #[serde(default)]
    streams: Option<usize>,
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
    markov: Option<MarkovSpec>,
}

/// Most request templates the weights may expand to.
const MAX_WEIGHT_SUM: u32 = 1000;

/// Parses a scenario's text and its phases; no I/O, so it can be fed anything.
fn parse(text: &str, path: &Path) -> Result<(ScenarioFile, Phases), ScenarioError> {
    let file: ScenarioFile = serde_saphyr::from_str(text)
        .map_err(|e| ScenarioError::Yaml(YamlError::new(path, &plain_untagged(&e.to_string()))))?;
    let phases = phases::lower(&file.config.phases).map_err(|e| ScenarioError::invalid(path, e))?;
    Ok((file, phases))
}

/// The files a scenario's text reads besides itself (payload CSV files and a CA file), as it
/// names them: relative to the scenario file, or absolute.
pub fn side_files(text: &str, path: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    let (file, _) = parse(text, path)?;
    let payloads = file.config.payload.iter().flat_map(|p| p.as_slice());
    let mut files: Vec<PathBuf> = payloads.map(|p| PathBuf::from(&p.path)).collect();
    files.extend(file.config.tls.and_then(|t| t.cacert));
    Ok(files)
}

/// A scenario file lowered into the parts of a plan; the lowering (`lower.rs`) adds the run's
/// flags and the defaults.
#[derive(Debug)]
pub struct Scenario {
    /// Where connections go.
    pub endpoints: Vec<loadlab_run::Endpoint>,
    /// The requests: the round robin of plain requests, or every request step of the users.
    pub requests: Vec<loadlab_run::RequestTemplate>,
    /// Arrival phases or user phases.
    pub phases: Phases,
    /// What virtual users do; `None` when every scenario is one plain request.
    pub users: Option<UserModel>,
    /// `config.http.timeout`, when given.
    pub timeout: Option<Duration>,
    /// `config.tls`.
    pub tls: ScenarioTls,
    /// `config.http.http2` and `config.http.streams`: HTTP/2 with that many streams per
    /// connection (`None` for the default), or `None` for HTTP/1.1.
    pub http2: Option<Option<usize>>,
    /// `config.ensure` as thresholds.
    pub thresholds: Vec<loadlab_run::Threshold>,
}

/// Lowers a scenario's text (read from `path`, which payload paths are relative to), sending
/// the load to `target` instead of `config.target` when given; `seed` seeds the users, and
/// `lookup` says whether the hosts are looked up.
pub fn from_text(
    text: &str,
    path: &Path,
    target: Option<&str>,
    seed: u64,
    lookup: Lookup,
) -> Result<Scenario, ScenarioError> {
    let (file, phases) = parse(text, path)?;
    let target = target.unwrap_or(&file.config.target);
    let (endpoints, requests, users) = match plain(&file, &phases) {
        Some(plain) => {
            let (e, r) = plain_requests(&file.scenarios, &plain, target, lookup)
                .map_err(|e| e.in_file(path))?;
            (e, r, None)
        }
        None => user_model(&file, path, target, seed, lookup).map_err(|e| e.in_file(path))?,
    };
    let timeout = file
        .config
        .http
        .as_ref()
        .and_then(|h| h.timeout)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| {
            Duration::try_from_secs_f64(t)
                .map_err(|_| ScenarioError::invalid(path, Problem::TimeoutTooLong(t)))
        })
        .transpose()?;
    let tls = file
        .config
        .tls
        .as_ref()
        .map_or_else(ScenarioTls::default, |t| {
            let dir = path.parent().unwrap_or(Path::new("."));
            ScenarioTls {
                cacert: t.cacert.as_ref().map(|c| dir.join(c)),
                insecure: t.insecure || t.reject_unauthorized == Some(false),
            }
        });
    let thresholds = match &file.config.ensure {
        Some(e) => e
            .thresholds()
            .map_err(|e| ScenarioError::invalid(path, e))?,
        None => Vec::new(),
    };
    let http2 = file
        .config
        .http
        .as_ref()
        .filter(|h| h.http2)
        .map(|h| h.streams);
    Ok(Scenario {
        endpoints,
        requests,
        phases,
        users,
        timeout,
        tls,
        http2,
        thresholds,
    })
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

/// Each scenario's one plain request and its method, when the file runs as plain arrivals:
/// arrival phases, no variables or payload, and every scenario a flow of one plain request.
fn plain<'a>(
    file: &'a ScenarioFile,
    phases: &Phases,
) -> Option<Vec<(&'static str, &'a RequestSpec)>> {
    if !matches!(phases, Phases::Rates(_))
        || !file.config.variables.is_empty()
        || file.config.payload.is_some()
    {
        return None;
    }
    file.scenarios
        .iter()
        .map(|s| match (&s.markov, s.flow.as_deref()) {
            (None, Some([step])) => step.plain_request(),
            _ => None,
        })
        .collect()
}

/// Weights as interleaved repetitions (a b a a …), reduced by their common divisor, so short
/// stretches of arrivals see the mix too: the item indices in order.
fn interleave(weights: &[u32]) -> Result<Vec<usize>, Problem> {
    let divisor = weights.iter().fold(0, |g, w| gcd(g, *w));
    if divisor == 0 {
        return Err(Problem::NoWeight);
    }
    let total: u32 = weights.iter().map(|w| w / divisor).sum();
    if total > MAX_WEIGHT_SUM {
        return Err(Problem::TooManySlots {
            slots: total,
            max: MAX_WEIGHT_SUM,
        });
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

/// Single-request scenarios (each scenario's request in `plain`) as the round-robin list of
/// plain requests.
fn plain_requests(
    scenarios: &[ScenarioSpec],
    plain: &[(&'static str, &RequestSpec)],
    target: &str,
    lookup: Lookup,
) -> Result<
    (
        Vec<loadlab_run::Endpoint>,
        Vec<loadlab_run::RequestTemplate>,
    ),
    Traced,
> {
    let chosen = weighted(scenarios);
    let mut specs = Vec::new();
    for (i, name, _) in &chosen {
        let (method, r) = plain[*i];
        let url = if r.url.starts_with('/') {
            format!("{}{}", target.trim_end_matches('/'), r.url)
        } else {
            r.url.clone()
        };
        let (headers, body) = r
            .headers_and_body()
            .within(|| Place::Scenario(name.clone()))?;
        specs.push(crate::target::RequestSpec {
            name: name.clone(),
            url,
            method: method.into(),
            headers,
            body,
        });
    }
    let weights: Vec<u32> = chosen.iter().map(|(_, _, w)| *w).collect();
    let order: Vec<crate::target::RequestSpec> = interleave(&weights)?
        .into_iter()
        .map(|k| specs[k].clone())
        .collect();
    Ok(crate::target::resolve(&order, lookup)?)
}

/// A file's scenarios lowered: the plan's endpoints and requests, and what users do.
type Lowered = (
    Vec<loadlab_run::Endpoint>,
    Vec<loadlab_run::RequestTemplate>,
    Option<UserModel>,
);

/// Flows and chains as a user model, with the plan's endpoints and requests.
fn user_model(
    file: &ScenarioFile,
    path: &Path,
    target: &str,
    seed: u64,
    lookup: Lookup,
) -> Result<Lowered, Traced> {
    let mut variables = Vec::new();
    for (name, v) in &file.config.variables {
        let scalar = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok(v.to_string()),
            _ => Err(Problem::VariableNotScalar(name.clone())),
        };
        let values = match v {
            serde_json::Value::Array(items) => {
                items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?
            }
            other => vec![scalar(other)?],
        };
        if values.is_empty() {
            return Err(Problem::VariableEmpty(name.clone()).into());
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
    let mut lowering = flows::Lowering::new(target, defined.clone(), lookup);
    for (i, name, _) in &chosen {
        let s = &file.scenarios[*i];
        // Each scenario sees only the variables defined before it: config, payload, and its
        // own captures.
        lowering.defined = defined.clone();
        scenarios.push(
            lowering
                .scenario(name, s.flow.as_deref(), s.markov.as_ref())
                .within(|| Place::Scenario(name.clone()))?,
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
    use crate::fuzz::{mutations, SEED, USERS_SEED};

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

    #[test]
    fn a_scenario_error_names_the_file_the_places_leading_to_the_problem_and_the_problem() {
        let path = Path::new("s.yaml");
        let text = "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - { duration: 1, users: 1 }\nscenarios:\n  - name: shop\n    flow:\n      - get: { url: \"/\" }\n      - loop:\n          - get: { url: \"/{{ cart }}\" }\n        count: 2\n";
        let e = from_text(text, path, None, 1, Lookup::Skip).unwrap_err();
        let ScenarioError::Invalid {
            path: at,
            trail,
            problem: Problem::Flow(FlowError::Undefined(variable)),
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(at, path);
        assert_eq!(
            trail,
            &[
                Place::Scenario("shop".into()),
                Place::FlowStep(2),
                Place::FlowStep(1)
            ]
        );
        assert_eq!(variable, "cart");
        assert!(
            e.to_string()
                .starts_with("s.yaml: scenario \"shop\": flow step 2: flow step 1: {{ cart }}"),
            "{e}"
        );

        let e = parse("config:\n  target: x\n  extra: 1\n", path).unwrap_err();
        let ScenarioError::Yaml(yaml) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(yaml.position, Some(crate::Position { line: 3, column: 3 }));
        assert!(yaml.message.starts_with("unknown field `extra`"), "{e}");
    }
}
