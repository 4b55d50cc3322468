//! Expectations and captures of virtual users' requests (sessions layer): whether a step needs
//! its response kept, checking the response against the step's expectations, and taking its
//! captures (headers, JSONPath queries on the body) into the user's variables.

use std::collections::HashMap;

use loadlab_run::users::{
    Behaviour, Capture, CaptureSource, ElementIndex, Expect, RequestStep, Step, UserModel,
};
use loadlab_script::vars::json_at;
use loadlab_script::Render;
use serde_json_path::JsonPath;

use crate::conn::exchange::Answer;

/// A model's JSONPath capture queries, regular expressions (`matchesRegexp`, `regexp`
/// captures) and CSS selectors (`selector` captures), compiled once per thread, by their text.
pub struct Queries {
    /// JSONPath queries of captures and `match`.
    json: HashMap<String, JsonPath>,
    /// Regular expressions of `matchesRegexp` and `regexp` captures.
    regexes: HashMap<String, regex::Regex>,
    /// CSS selectors of `selector` captures.
    selectors: HashMap<String, scraper::Selector>,
}

impl Queries {
    /// Compiles the queries, expressions and selectors of `model`'s checks and captures.
    pub fn compile(model: &UserModel) -> Self {
        let mut json = HashMap::new();
        let mut regexes = HashMap::new();
        let mut selectors = HashMap::new();
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
                            json.insert(q.clone(), path);
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
                            json.insert(q.clone(), path);
                        }
                    }
                    CaptureSource::Regexp { re, .. } => {
                        if let Ok(compiled) = regex::Regex::new(re) {
                            regexes.insert(re.clone(), compiled);
                        }
                    }
                    CaptureSource::Selector { css, .. } => {
                        if let Ok(compiled) = scraper::Selector::parse(css) {
                            selectors.insert(css.clone(), compiled);
                        }
                    }
                    CaptureSource::Header(_) => {}
                }
            }
        }
        Queries {
            json,
            regexes,
            selectors,
        }
    }
}

/// The checks and captures of every request and WebSocket step of a model, loops and chains
/// included.
fn checked(model: &UserModel) -> Vec<(&[Expect], &[Capture])> {
    type Checks<'a> = Vec<(&'a [Expect], &'a [Capture])>;
    fn walk<'a>(steps: &'a [Step], out: &mut Checks<'a>) {
        for s in steps {
            match s {
                Step::Request(r) => {
                    out.push((&r.expects, &r.captures));
                    out.push((&r.checks, &[]));
                }
                Step::Ws(m) => out.push((&m.expects, &m.captures)),
                Step::Emit(e) => {
                    if let Some(w) = &e.wait {
                        out.push((&w.expects, &w.captures));
                    }
                }
                Step::Think(_)
                | Step::ThinkTemplate(_)
                | Step::Log(_)
                | Step::Function(_)
                | Step::Browser(_) => {}
                Step::Loop { steps, .. } | Step::Parallel(steps) => walk(steps, out),
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
                    .flat_map(|r| [(&r.expects[..], &r.captures[..]), (&r.checks[..], &[][..])]),
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
        || step.checks.iter().any(Expect::needs_response)
}

/// The response's body as Artillery's expect plugin reads it: `None` when the Content-Type is
/// not JSON (the body is text), else the parsed JSON (`None` inside when it does not parse).
type PluginBody = Option<Option<serde_json::Value>>;

/// What one check reads of a response, each part read once however many checks need it.
struct Reading<'a> {
    answer: &'a Answer,
    /// The body parsed as JSON whatever its Content-Type (`match`, captures).
    json: Option<Option<serde_json::Value>>,
    /// The body as the expect plugin reads it.
    plugin: Option<PluginBody>,
}

impl<'a> Reading<'a> {
    fn new(answer: &'a Answer) -> Self {
        Reading {
            answer,
            json: None,
            plugin: None,
        }
    }

    /// The first header named `wanted`, compared without regard to case.
    fn header(&self, wanted: &str) -> Option<&'a str> {
        let answer: &'a Answer = self.answer;
        answer
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(wanted))
            .map(|(_, v)| v.as_str())
    }

    /// A header as Node.js hands it to Artillery's plugins: keyed by its lower-case name, so
    /// a name written with capitals finds nothing; an empty value counts as absent.
    fn node_header(&self, name: &str) -> Option<&'a str> {
        let answer: &'a Answer = self.answer;
        answer
            .headers
            .iter()
            .find(|(k, _)| {
                !name.bytes().any(|b| b.is_ascii_uppercase()) && k.eq_ignore_ascii_case(name)
            })
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn json(&mut self) -> Option<&serde_json::Value> {
        let answer = self.answer;
        self.json
            .get_or_insert_with(|| serde_json::from_slice(&answer.body).ok())
            .as_ref()
    }

    fn plugin(&mut self) -> &PluginBody {
        if self.plugin.is_none() {
            let is_json = self.header("content-type").is_some_and(|ct| {
                [
                    "application/json",
                    "application/problem+json",
                    "application/ld+json",
                ]
                .iter()
                .any(|t| ct.contains(t))
            });
            let body = &self.answer.body;
            self.plugin = Some(is_json.then(|| serde_json::from_slice(body).ok()));
        }
        self.plugin.get_or_insert(None)
    }

    /// The parsed body when the plugin reads an object or array there (lodash's `_.has`
    /// and `typeof body === 'object'`).
    fn plugin_object(&mut self) -> Option<&serde_json::Value> {
        match self.plugin() {
            Some(Some(v @ (serde_json::Value::Object(_) | serde_json::Value::Array(_)))) => Some(v),
            _ => None,
        }
    }
}

/// JavaScript's `String(value)` of a parsed JSON value, which the expect plugin's
/// `matchesRegexp` tests when the body is JSON.
fn js_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(_) => "[object Object]".into(),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                serde_json::Value::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// Whether `answer` passes check `e`, with Artillery's expect plugin's rules (and core's for
/// `match`); templates render with `vars`.
fn holds(
    e: &Expect,
    read: &mut Reading,
    vars: &HashMap<String, String>,
    queries: &Queries,
) -> bool {
    let render = |t: &loadlab_run::Template| {
        let mut out = String::new();
        let lookup = |k: &str| vars.get(k).map(String::as_str);
        // Random functions in an expectation draw from a fixed seed: they are not expected
        // there, and a check must not shift the user's own random sequence.
        t.render(lookup, &mut fastrand::Rng::with_seed(0), &mut out);
        out
    };
    let status = read.answer.status;
    match e {
        Expect::Status(codes) => codes.contains(&status),
        Expect::StatusOf(t) => render(t).trim().parse::<u16>() == Ok(status),
        Expect::NotStatus(codes) => !codes.contains(&status),
        Expect::ContentType(ct) if ct == "json" => read.plugin_object().is_some(),
        Expect::ContentType(ct) => read
            .node_header("content-type")
            .is_some_and(|v| v.eq_ignore_ascii_case(ct)),
        Expect::HasProperty(p) => read
            .plugin_object()
            .is_some_and(|d| json_at(d, p).is_some()),
        Expect::NotHasProperty(p) => read
            .plugin_object()
            .is_some_and(|d| json_at(d, p).is_none()),
        Expect::Equals(values) => {
            let rendered: Vec<String> = values.iter().map(render).collect();
            rendered.windows(2).all(|w| w[0] == w[1])
        }
        Expect::HasHeader(h) => read.node_header(h).is_some(),
        Expect::HeaderEquals(h, v) => read.node_header(h).is_some_and(|got| got == render(v)),
        Expect::MatchesRegexp(r) => {
            let text = match read.plugin() {
                Some(Some(v)) => js_string(v),
                Some(None) => "null".into(),
                None => String::from_utf8_lossy(&read.answer.body).into_owned(),
            };
            queries.regexes.get(r).is_some_and(|re| re.is_match(&text))
        }
        Expect::CdnHit(hit) => {
            let wanted: &[&str] = if *hit { &["hit", "stale"] } else { &["miss"] };
            ["cf-cache-status", "x-cache", "x-vercel-cache"]
                .iter()
                .any(|h| {
                    read.node_header(h).is_some_and(|v| {
                        let v = v.to_ascii_lowercase();
                        wanted.iter().any(|w| v.starts_with(w))
                    })
                })
        }
        Expect::JsonMatch(q, v) => match (read.json(), queries.json.get(q)) {
            (Some(d), Some(path)) => path.query(d).first().is_some_and(|got| {
                let got = match got {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                got == render(v)
            }),
            _ => false,
        },
    }
}

/// The name Artillery's expect plugin counts a check under (`plugins.expect.failed.TYPE`).
fn counted_type(e: &Expect) -> std::borrow::Cow<'static, str> {
    match e {
        Expect::HeaderEquals(h, _) => format!("header {h} values equals").into(),
        other => other.key().into(),
    }
}

/// Runs the expect plugin's `checks` on `answer` to the request named `name`: each counted
/// under Artillery's counters (`plugins.expect.ok`, `plugins.expect.failed` and by type) in
/// `record`, and each failure by check and request. The first failure's reason, if any.
pub fn count_checks(
    checks: &[Expect],
    name: &str,
    answer: &Answer,
    vars: &HashMap<String, String>,
    queries: &Queries,
    record: &mut loadlab_run::UserRecord,
) -> Option<String> {
    let mut read = Reading::new(answer);
    let mut first = None;
    for e in checks {
        let ok = holds(e, &mut read, vars, queries);
        let total = if ok {
            "plugins.expect.ok"
        } else {
            "plugins.expect.failed"
        };
        record.custom.add("counter", total, 1.0);
        record
            .custom
            .add("counter", &format!("{total}.{}", counted_type(e)), 1.0);
        if !ok {
            let reason = format!("expect {} on {name}", e.key());
            *record.checks_failed.entry(reason.clone()).or_default() += 1;
            first.get_or_insert(reason);
        }
    }
    first
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
    queries: &Queries,
) -> Result<(), String> {
    let mut read = Reading::new(answer);
    for e in expects {
        if !holds(e, &mut read, vars, queries) {
            return Err(format!("expect {} on {name}", e.key()));
        }
    }
    let mut json = read.json.take();
    // Parsed once, for the first selector capture, as HTML.
    let mut html: Option<scraper::Html> = None;
    let header = |wanted: &str| read.header(wanted);
    let mut taken: Vec<(String, String)> = Vec::with_capacity(captures.len());
    let mut failed: Option<String> = None;
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
                        JsonPath::parse(&loadlab_script::jsonpath::standard(&out)).ok()
                    })
                    .flatten();
                match (doc.as_ref(), rendered.as_ref().or(queries.json.get(q))) {
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
            CaptureSource::Regexp { re, group } => queries.regexes.get(re).and_then(|re| {
                let body = String::from_utf8_lossy(&answer.body);
                regexp_capture(re, &body, group.as_deref())
            }),
            CaptureSource::Selector { css, attr, index } => {
                queries.selectors.get(css).and_then(|sel| {
                    let doc = html.get_or_insert_with(|| {
                        scraper::Html::parse_document(&String::from_utf8_lossy(&answer.body))
                    });
                    let found: Vec<scraper::ElementRef> = doc.select(sel).collect();
                    let at = match index {
                        ElementIndex::Nth(n) => *n,
                        ElementIndex::Last => found.len().checked_sub(1)?,
                        ElementIndex::Random if found.is_empty() => return None,
                        ElementIndex::Random => rng.usize(..found.len()),
                    };
                    found.get(at)?.value().attr(attr).map(str::to_string)
                })
            }
        };
        // As Artillery: a capture that found nothing, or found empty text, fails the user
        // unless it is not strict; when one fails, none of the step's captures is kept.
        match value {
            Some(v) if !v.is_empty() => taken.push((c.var.clone(), v)),
            found if !c.strict => {
                if let Some(v) = found {
                    taken.push((c.var.clone(), v));
                }
            }
            _ => {
                failed.get_or_insert_with(|| format!("capture {} on {name}", c.var));
            }
        }
    }
    if let Some(reason) = failed {
        return Err(reason);
    }
    vars.extend(taken);
    Ok(())
}

/// What a `regexp` capture takes from `body`, as Artillery's extractor reads a match: without
/// a group (or group 0), the whole match; with a group, by name when the expression names
/// groups, else by number, and the whole match when that group took nothing; `None` when
/// the expression does not match.
fn regexp_capture(re: &regex::Regex, body: &str, group: Option<&str>) -> Option<String> {
    let found = re.captures(body)?;
    let whole = || found.get(0).map(|m| m.as_str().to_string());
    let group = group.filter(|g| !g.is_empty() && *g != "0");
    let Some(g) = group else {
        return whole();
    };
    if re.capture_names().any(|n| n.is_some()) {
        return found.name(g).map(|m| m.as_str().to_string());
    }
    match g.parse::<usize>().ok().and_then(|k| found.get(k)) {
        Some(m) if !m.as_str().is_empty() => Some(m.as_str().to_string()),
        _ => whole(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn queries(json: &[&str], res: &[&str]) -> Queries {
        Queries {
            json: json
                .iter()
                .map(|q| (q.to_string(), JsonPath::parse(q).unwrap()))
                .collect(),
            regexes: res
                .iter()
                .map(|r| (r.to_string(), regex::Regex::new(r).unwrap()))
                .collect(),
            selectors: HashMap::new(),
        }
    }

    fn capture(source: CaptureSource, var: &str, strict: bool) -> Capture {
        Capture {
            source,
            var: var.into(),
            strict,
        }
    }

    fn answer(body: &str) -> Answer {
        Answer {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
            grpc: None,
        }
    }

    #[test]
    fn a_capture_of_empty_text_fails_as_in_artillery_and_the_steps_other_captures_are_not_kept() {
        let q = queries(&["$.id", "$.empty"], &[]);
        let captures = [
            capture(CaptureSource::Json("$.id".into()), "id", true),
            capture(CaptureSource::Json("$.empty".into()), "empty", true),
        ];
        let mut vars = HashMap::new();
        let mut rng = fastrand::Rng::with_seed(1);
        let got = check(
            (&[], &captures),
            "GET /a",
            &answer(r#"{"id": 7, "empty": ""}"#),
            &mut vars,
            &mut rng,
            &q,
        );
        assert_eq!(got, Err("capture empty on GET /a".to_string()));
        assert!(!vars.contains_key("id"), "{vars:?}");
        // Not strict: the empty text is taken, as Artillery sets it.
        let lenient = [capture(
            CaptureSource::Json("$.empty".into()),
            "empty",
            false,
        )];
        let got = check(
            (&[], &lenient),
            "GET /a",
            &answer(r#"{"empty": ""}"#),
            &mut vars,
            &mut rng,
            &q,
        );
        assert_eq!(got, Ok(()));
        assert_eq!(vars.get("empty").map(String::as_str), Some(""));
    }

    #[test]
    fn a_regexp_capture_reads_its_group_as_artillerys_extractor_does() {
        let re = |r: &str| regex::Regex::new(r).unwrap();
        // A numbered group that took nothing gives the whole match.
        assert_eq!(
            regexp_capture(&re("a(b*)"), "xa", Some("1")).as_deref(),
            Some("a")
        );
        assert_eq!(
            regexp_capture(&re("a(b+)?"), "xa", Some("1")).as_deref(),
            Some("a")
        );
        assert_eq!(
            regexp_capture(&re("a(b+)"), "xabb", Some("1")).as_deref(),
            Some("bb")
        );
        // Group 0, or none: the whole match; an empty match is empty text (which fails).
        assert_eq!(regexp_capture(&re("x*"), "abc", None).as_deref(), Some(""));
        assert_eq!(
            regexp_capture(&re("b."), "abc", Some("0")).as_deref(),
            Some("bc")
        );
        // With named groups, the group is read by name: a number finds none.
        assert_eq!(
            regexp_capture(&re("a(?P<n>b)"), "ab", Some("n")).as_deref(),
            Some("b")
        );
        assert_eq!(regexp_capture(&re("a(?P<n>b)"), "ab", Some("1")), None);
        assert_eq!(regexp_capture(&re("z"), "ab", None), None);
    }
}
