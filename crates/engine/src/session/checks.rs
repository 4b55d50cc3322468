//! Expectations and captures of virtual users' requests (sessions layer): whether a step needs
//! its response kept, checking the response against the step's expectations, and taking its
//! captures (headers, JSONPath queries on the body) into the user's variables.

use std::collections::HashMap;

use loadlab_run::users::{
    json_at, Behaviour, Capture, CaptureSource, Expect, RequestStep, Step, UserModel,
};
use serde_json_path::JsonPath;

use crate::conn::exchange::Answer;

/// A model's JSONPath capture queries and `matchesRegexp` expressions, compiled once per
/// thread, by their text.
pub struct JsonPaths(HashMap<String, JsonPath>, HashMap<String, regex::Regex>);

impl JsonPaths {
    /// Compiles the JSONPath queries of `model`'s captures.
    pub fn compile(model: &UserModel) -> Self {
        let mut json_paths = HashMap::new();
        let mut regexes = HashMap::new();
        for (expects, captures) in checked(model) {
            for e in expects {
                // Checked when the plan was built; one that still fails to compile fails its
                // check.
                match e {
                    Expect::MatchesRegexp(r) => {
                        if let Ok(re) = regex::Regex::new(r) {
                            regexes.insert(r.clone(), re);
                        }
                    }
                    Expect::JsonMatch(q, _) => {
                        if let Ok(path) = JsonPath::parse(q) {
                            json_paths.insert(q.clone(), path);
                        }
                    }
                    _ => {}
                }
            }
            for c in captures {
                // The plan was checked when it was built; a query that still fails to parse
                // makes its capture fail, with its text as the reason.
                match &c.source {
                    CaptureSource::Json(q) => {
                        if let Ok(path) = JsonPath::parse(q) {
                            json_paths.insert(q.clone(), path);
                        }
                    }
                    CaptureSource::Regexp { re, .. } => {
                        if let Ok(compiled) = regex::Regex::new(re) {
                            regexes.insert(re.clone(), compiled);
                        }
                    }
                    CaptureSource::Header(_) => {}
                }
            }
        }
        JsonPaths(json_paths, regexes)
    }
}

/// The checks and captures of every request and WebSocket step of a model, loops and chains
/// included.
fn checked(model: &UserModel) -> Vec<(&[Expect], &[Capture])> {
    type Checks<'a> = Vec<(&'a [Expect], &'a [Capture])>;
    fn walk<'a>(steps: &'a [Step], out: &mut Checks<'a>) {
        for s in steps {
            match s {
                Step::Request(r) => out.push((&r.expects, &r.captures)),
                Step::Ws(m) => out.push((&m.expects, &m.captures)),
                Step::Emit(e) => {
                    if let Some(w) = &e.wait {
                        out.push((&w.expects, &w.captures));
                    }
                }
                Step::Think(_) | Step::Log(_) | Step::Function(_) => {}
                Step::Loop { steps, .. } => walk(steps, out),
            }
        }
    }
    let mut out = Vec::new();
    for sc in &model.scenarios {
        match &sc.behaviour {
            Behaviour::Flow(steps) => walk(steps, &mut out),
            Behaviour::Chain(chain) => out.extend(
                chain
                    .states
                    .iter()
                    .filter_map(|s| s.request.as_ref())
                    .map(|r| (&r.expects[..], &r.captures[..])),
            ),
        }
    }
    out
}

/// True when `step` needs its response's headers or body: for its static resources, its
/// captures or a content-type expectation.
pub fn needs_response(step: &RequestStep) -> bool {
    step.needs_body()
        || !step.captures.is_empty()
        || step.expects.iter().any(Expect::needs_response)
}

/// Checks `answer` to a step (a request or message named `name`) against its `expects`, then
/// takes its `captures` into `vars` (a capture's query that holds templates is rendered with
/// `rng`, the user's); the error is the failure's reason for the report.
pub fn check(
    (expects, captures): (&[Expect], &[Capture]),
    name: &str,
    answer: &Answer,
    vars: &mut HashMap<String, String>,
    rng: &mut fastrand::Rng,
    json_paths: &JsonPaths,
) -> Result<(), String> {
    let header = |wanted: &str| {
        answer
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(wanted))
            .map(|(_, v)| v.as_str())
    };
    let mut json: Option<Option<serde_json::Value>> = None;
    for e in expects {
        let render = |t: &loadlab_run::Template| {
            let mut out = String::new();
            let lookup = |k: &str| vars.get(k).map(String::as_str);
            // Random functions in an expectation draw from a fixed seed: they are not
            // expected there, and a check must not shift the user's own random sequence.
            t.render(lookup, &mut fastrand::Rng::with_seed(0), &mut out);
            out
        };
        if matches!(
            e,
            Expect::HasProperty(_) | Expect::NotHasProperty(_) | Expect::JsonMatch(..)
        ) && json.is_none()
        {
            json = Some(serde_json::from_slice(&answer.body).ok());
        }
        let doc = || json.as_ref().and_then(Option::as_ref);
        let ok = match e {
            Expect::Status(codes) => codes.contains(&answer.status),
            Expect::StatusOf(t) => render(t).trim().parse::<u16>() == Ok(answer.status),
            Expect::ContentType(ct) => header("content-type")
                .is_some_and(|v| v.to_ascii_lowercase().contains(&ct.to_ascii_lowercase())),
            Expect::HasProperty(p) => doc().is_some_and(|d| json_at(d, p).is_some()),
            Expect::NotHasProperty(p) => doc().is_some_and(|d| json_at(d, p).is_none()),
            Expect::Equals(values) => {
                let rendered: Vec<String> = values.iter().map(render).collect();
                rendered.windows(2).all(|w| w[0] == w[1])
            }
            Expect::HasHeader(h) => header(h).is_some(),
            Expect::HeaderEquals(h, v) => header(h).is_some_and(|got| got == render(v)),
            Expect::JsonMatch(q, v) => match (doc(), json_paths.0.get(q)) {
                (Some(d), Some(path)) => path.query(d).first().is_some_and(|got| {
                    let got = match got {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    got == render(v)
                }),
                _ => false,
            },
            Expect::MatchesRegexp(r) => json_paths
                .1
                .get(r)
                .is_some_and(|re| re.is_match(&String::from_utf8_lossy(&answer.body))),
        };
        if !ok {
            return Err(format!("expect {} on {name}", e.key()));
        }
    }
    for c in captures {
        let value = match &c.source {
            CaptureSource::Header(h) => header(h).map(str::to_string),
            CaptureSource::Json(q) => {
                let doc = json.get_or_insert_with(|| serde_json::from_slice(&answer.body).ok());
                // A query that holds templates is rendered for this response, with the
                // user's randomness (`$[{{ $randomNumber(0, 9) }}]` picks for each user).
                let rendered = q
                    .contains("{{")
                    .then(|| {
                        let t = loadlab_run::Template::parse(q).ok()?;
                        let mut out = String::new();
                        let lookup = |k: &str| vars.get(k).map(String::as_str);
                        t.render(lookup, rng, &mut out);
                        JsonPath::parse(&out).ok()
                    })
                    .flatten();
                match (doc.as_ref(), rendered.as_ref().or(json_paths.0.get(q))) {
                    (Some(doc), Some(path)) => path.query(doc).first().map(|v| {
                        // An object captured whole is read as `{{ var.key }}` too, as
                        // Artillery's templates read into it.
                        flatten(&c.var, v, vars, 0);
                        match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        }
                    }),
                    _ => None,
                }
            }
            CaptureSource::Regexp { re, group } => json_paths.1.get(re).and_then(|re| {
                let body = String::from_utf8_lossy(&answer.body);
                let found = re.captures(&body)?;
                let m = match group {
                    None => found.get(0),
                    Some(g) => match g.parse::<usize>() {
                        Ok(k) => found.get(k),
                        Err(_) => found.name(g),
                    },
                };
                m.map(|m| m.as_str().to_string())
            }),
        };
        match value {
            Some(v) => {
                vars.insert(c.var.clone(), v);
            }
            None if !c.strict => {}
            None => return Err(format!("capture {} on {name}", c.var)),
        }
    }
    Ok(())
}

/// Sets `name.key` for each property of an object `v` (and theirs, two levels deep), as text.
fn flatten(name: &str, v: &serde_json::Value, vars: &mut HashMap<String, String>, depth: usize) {
    let serde_json::Value::Object(o) = v else {
        return;
    };
    if depth >= 2 {
        return;
    }
    for (k, v) in o {
        let key = format!("{name}.{k}");
        flatten(&key, v, vars, depth + 1);
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        vars.insert(key, text);
    }
}
