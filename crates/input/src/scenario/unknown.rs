//! Keys of an Artillery script that loadlab does not read: found while the file is parsed,
//! placed at their `file:line:col`, and explained — why Artillery's setting does not apply
//! here, or the key likely meant. Artillery ignores a key its schema does not know, so a
//! script with a typo or a cloud-only setting runs there; here it runs too, with a warning,
//! and `--strict` refuses it.
//!
//! serde reports what it ignored through `serde_ignored` (serde-saphyr documents that use);
//! where the key sits is found by walking the YAML's events to its path, because serde's
//! path carries no position.

use std::path::Path;

use serde::de::{self, DeserializeOwned, Visitor};
use serde_saphyr::granit_parser::{Event, Parser};

use super::ensure::EnsureSpec;
use super::error::{Refusal, ScenarioError};
use super::flows::{AnswerSpec, RequestSpec, StepSpec};
use super::phases::PhaseSpec;
use super::sockets::{SioSettings, WsSettings};
use crate::yaml::{plain_untagged, YamlError};
use crate::Position;

/// The keys of the script's own maps (defined where the script is read, which hands them
/// here): the file's top level, `config` and its maps, a scenario, a before or after section.
pub(super) struct ScriptMaps {
    /// The top level of a file.
    pub top: &'static [&'static str],
    /// `config`.
    pub config: &'static [&'static str],
    /// `config.http`.
    pub http: &'static [&'static str],
    /// `config.tls`.
    pub tls: &'static [&'static str],
    /// `config.defaults` (and `config.http.defaults`).
    pub defaults: &'static [&'static str],
    /// `config.apdex`.
    pub apdex: &'static [&'static str],
    /// A scenario.
    pub scenario: &'static [&'static str],
    /// A `before` or `after` section.
    pub once: &'static [&'static str],
}

/// One step of a key's path: a map's key or a list's index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A key the file gives and loadlab does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// Its path, as `config.phases[0].ramp`.
    pub path: String,
    /// Where the key is written, when found.
    pub at: Option<Position>,
    /// Why it is not read, or what was likely meant.
    pub why: String,
    /// Artillery reads it and it changes what runs: the file is refused on it.
    pub refused: bool,
}

impl UnknownKey {
    /// The warning line: `file:line:col: path: why`.
    pub fn warning(&self, file: &Path) -> String {
        format!(
            "{}{}: {}: {}",
            file.display(),
            at(self.at),
            self.path,
            self.why
        )
    }

    /// The file's refusal on it: its own, or the one `--strict` makes of a warning.
    pub fn refusal(&self, file: &Path) -> ScenarioError {
        let what = if self.refused {
            self.why.clone()
        } else {
            format!(
                "{} (--strict refuses a key loadlab does not read)",
                self.why
            )
        };
        ScenarioError::Invalid {
            path: file.to_path_buf(),
            at: self.at,
            trail: Vec::new(),
            problem: Box::new(
                Refusal::Key {
                    key: self.path.clone(),
                    what,
                }
                .into(),
            ),
        }
    }
}

fn at(p: Option<Position>) -> String {
    p.map_or_else(String::new, |p| format!(":{}:{}", p.line, p.column))
}

/// Reads `text` (the file at `path`) as `T`, a script's shape whose maps are `maps`, with the
/// keys it ignored.
pub(super) fn read_noting_unknown<T: DeserializeOwned>(
    text: &str,
    path: &Path,
    maps: &ScriptMaps,
) -> Result<(T, Vec<UnknownKey>), ScenarioError> {
    let mut ignored: Vec<Vec<Segment>> = Vec::new();
    let file = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_ignored::deserialize(de, |p| {
            let segs = segments(&p);
            // serde-saphyr's `Spanned` reads a marker of its own that it does not keep.
            if !matches!(segs.last(), Some(Segment::Key(k)) if k.starts_with("__serde_saphyr")) {
                ignored.push(segs);
            }
        })
    })
    .map_err(|e| ScenarioError::Yaml(YamlError::new(path, &plain_untagged(&e.to_string()))))?;
    let places = locate(text, &ignored);
    let unknown = ignored
        .iter()
        .zip(places)
        .map(|(segs, at)| {
            let (why, refused) = explain(segs, maps);
            UnknownKey {
                path: written(segs),
                at,
                why,
                refused,
            }
        })
        .collect();
    Ok((file, unknown))
}

/// serde_ignored's path as the file writes it: without the `value` field of serde-saphyr's
/// `Spanned` wrapper, which is no key of the file.
fn segments(p: &serde_ignored::Path) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut node = p;
    loop {
        match node {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Segment::Index(*index));
                node = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                let wrapper = matches!(parent, serde_ignored::Path::NewtypeStruct { .. });
                if !(wrapper && key == "value") {
                    out.push(Segment::Key(key.clone()));
                }
                node = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => node = parent,
        }
    }
    out.reverse();
    out
}

/// `config.phases[0].ramp`.
fn written(segs: &[Segment]) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            Segment::Key(k) if s.is_empty() => s.push_str(k),
            Segment::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Segment::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Where each key of `targets` is written, in one walk of the YAML's events that keeps the
/// path of each node. `None` for a key not found (one reached through an alias or a merge).
fn locate(text: &str, targets: &[Vec<Segment>]) -> Vec<Option<Position>> {
    let mut found = vec![None; targets.len()];
    if targets.is_empty() {
        return found;
    }
    /// A collection being read, with its own place in its parent.
    enum Frame {
        /// A map; `key` holds the key whose value comes next, if one was read.
        Map { key: Option<String> },
        /// A list; `next` is the index of its next item.
        Seq { next: usize },
    }
    let mut frames: Vec<(Option<Segment>, Frame)> = Vec::new();
    // The segment a node starting now takes in its parent, and whether it is a map's key.
    let place = |frames: &[(Option<Segment>, Frame)]| match frames.last() {
        Some((_, Frame::Map { key: Some(k) })) => (Some(Segment::Key(k.clone())), false),
        Some((_, Frame::Map { key: None })) => (None, true),
        Some((_, Frame::Seq { next })) => (Some(Segment::Index(*next)), false),
        None => (None, false),
    };
    // A node ended in its parent: a map's value was read, a list's item counted.
    let ended = |frames: &mut Vec<(Option<Segment>, Frame)>| match frames.last_mut() {
        Some((_, Frame::Map { key })) => *key = None,
        Some((_, Frame::Seq { next })) => *next += 1,
        None => {}
    };
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            break;
        };
        match event {
            Event::Scalar(value, ..) => {
                let (_, is_key) = place(&frames);
                if is_key {
                    let mut path: Vec<Segment> =
                        frames.iter().filter_map(|(s, _)| s.clone()).collect();
                    path.push(Segment::Key(value.to_string()));
                    for (i, target) in targets.iter().enumerate() {
                        if found[i].is_none() && path == *target {
                            found[i] = Some(Position {
                                line: span.start.line() as u64,
                                column: span.start.col() as u64 + 1,
                            });
                        }
                    }
                    if found.iter().all(Option::is_some) {
                        return found;
                    }
                    if let Some((_, Frame::Map { key })) = frames.last_mut() {
                        *key = Some(value.to_string());
                    }
                } else {
                    ended(&mut frames);
                }
            }
            Event::Alias(..) => {
                let (_, is_key) = place(&frames);
                if is_key {
                    if let Some((_, Frame::Map { key })) = frames.last_mut() {
                        *key = Some(String::new());
                    }
                } else {
                    ended(&mut frames);
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let (seg, _) = place(&frames);
                let frame = match event {
                    Event::MappingStart(..) => Frame::Map { key: None },
                    _ => Frame::Seq { next: 0 },
                };
                frames.push((seg, frame));
            }
            Event::MappingEnd | Event::SequenceEnd => {
                frames.pop();
                // A complex key (a map or list as a key) leaves its map waiting for a value.
                match frames.last_mut() {
                    Some((_, Frame::Map { key })) if key.is_none() => {
                        *key = Some(String::new());
                    }
                    _ => ended(&mut frames),
                }
            }
            _ => {}
        }
    }
    found
}

/// What the map holding a key is, and the keys it takes, by the path of the map.
fn context(
    parent: &[Segment],
    maps: &ScriptMaps,
) -> Option<(&'static str, &'static [&'static str])> {
    use Segment::{Index, Key};
    let key = |s: &Segment, k: &str| matches!(s, Key(x) if x == k);
    // An environment's config is a config.
    let p: Vec<&Segment> = match parent {
        [c, e, _, rest @ ..] if key(c, "config") && key(e, "environments") => {
            std::iter::once(c).chain(rest).collect()
        }
        _ => parent.iter().collect(),
    };
    let last_key = p.last().and_then(|s| match s {
        Key(k) => Some(k.as_str()),
        Index(_) => None,
    });
    Some(match p.as_slice() {
        [] => ("the top level of a script", maps.top),
        [c] if key(c, "config") => ("config", maps.config),
        [c, ph, Index(_)] if key(c, "config") && key(ph, "phases") => {
            ("a phase", fields_of::<PhaseSpec>())
        }
        [c, h] if key(c, "config") && key(h, "http") => ("config.http", maps.http),
        [c, t] if key(c, "config") && key(t, "tls") => ("config.tls", maps.tls),
        [c, d] if key(c, "config") && key(d, "defaults") => ("config.defaults", maps.defaults),
        [c, h, d] if key(c, "config") && key(h, "http") && key(d, "defaults") => {
            ("config.defaults", maps.defaults)
        }
        [c, e] if key(c, "config") && key(e, "ensure") => {
            ("config.ensure", fields_of::<EnsureSpec>())
        }
        [c, a] if key(c, "config") && key(a, "apdex") => ("config.apdex", maps.apdex),
        [c, w] if key(c, "config") && key(w, "ws") => ("config.ws", fields_of::<WsSettings>()),
        [c, s] if key(c, "config") && key(s, "socketio") => {
            ("config.socketio", fields_of::<SioSettings>())
        }
        [s, Index(_)] if key(s, "scenarios") => ("a scenario", maps.scenario),
        [o] if key(o, "before") || key(o, "after") => ("a before or after section", maps.once),
        _ => match last_key {
            Some("get" | "post" | "put" | "patch" | "delete") => {
                ("a request", fields_of::<RequestSpec>())
            }
            Some("response" | "acknowledge") => ("a Socket.IO answer", fields_of::<AnswerSpec>()),
            _ => return None,
        },
    })
}

/// Artillery settings loadlab has no use for, with why; the key's map and the key.
const NOT_NEEDED: &[(&str, &str, &str)] = &[
    ("the top level of a script", "$schema", "an editor's schema reference"),
    ("config", "statsInterval", "Artillery's reporting period; loadlab reports every second"),
    ("config", "includeFiles", "files Artillery packs for cloud runs; loadlab reads files where the script names them"),
    ("config", "bundling", "Artillery's esbuild settings for a TypeScript processor; loadlab bundles it with its own"),
    ("config", "pluginsScope", "where Artillery looks for plugins; loadlab loads none"),
    ("config.http", "extendedMetrics", "Artillery's extra timing metrics; loadlab always breaks each response's time down (timings_ms)"),
    ("config.http", "cookieJarOptions", "options of Artillery's cookie library; loadlab's cookie jar has none"),
    ("a request", "setContentLengthHeader", "Artillery's switch for a Content-Length header on a body; loadlab always sends one with a body"),
    ("a request", "gzip", "Artillery's switch for decompressing answers; loadlab asks for none compressed (it sends no Accept-Encoding), so checks and captures read the same body"),
];

/// Keys Artillery reads that change what runs and that loadlab does not run yet: the file is
/// refused on them, with what to write instead.
const NOT_YET: &[(&str, &str, &str)] = &[
    (
        "config.http",
        "distributedTracing",
        "Artillery adds a W3C traceparent header to each request; loadlab does not yet",
    ),
    (
        "a scenario",
        "socketio",
        "Socket.IO settings for this scenario; loadlab reads them only as config.socketio",
    ),
    (
        "a Socket.IO answer",
        "concat",
        "Artillery joins the event's arguments before matching; loadlab does not yet",
    ),
];

/// Maps whose other keys Artillery hands to a client library as options, and what loadlab
/// does with them: refuse (`true`, they change what runs) or ignore.
const PASSED_ON: &[(&str, &str, bool)] = &[
    ("config.tls", "an option Artillery passes to Node's TLS client (a CA, a client certificate); loadlab does not read it: give a private CA as tls.cacert", true),
    ("config.ws", "an option Artillery passes to its WebSocket client; loadlab does not apply it", false),
    ("config.socketio", "an option Artillery passes to socket.io-client; loadlab does not apply it", false),
];

/// Why the key at `segs` is not read, and whether the file is refused on it: Artillery's
/// reason where loadlab has no use for it, what to write where loadlab does not run it yet,
/// where it belongs when it is another map's key, or the key likely meant.
fn explain(segs: &[Segment], maps: &ScriptMaps) -> (String, bool) {
    let unread = || {
        (
            "not a key loadlab reads; Artillery ignores it too".to_string(),
            false,
        )
    };
    let (parent, key) = match segs.split_last() {
        Some((Segment::Key(k), parent)) => (parent, k.as_str()),
        _ => return unread(),
    };
    let Some((what, known)) = context(parent, maps) else {
        return unread();
    };
    if let Some((_, _, why)) = NOT_YET.iter().find(|(w, k, _)| *w == what && *k == key) {
        return ((*why).to_string(), true);
    }
    if let Some((_, _, why)) = NOT_NEEDED.iter().find(|(w, k, _)| *w == what && *k == key) {
        return (format!("ignored: {why}"), false);
    }
    if let Some((_, why, refused)) = PASSED_ON.iter().find(|(w, _, _)| *w == what) {
        return ((*why).to_string(), *refused);
    }
    (hint(what, key, known, maps), false)
}

/// Where a key Artillery ignores likely belongs, or the key likely meant.
fn hint(what: &str, key: &str, known: &[&'static str], maps: &ScriptMaps) -> String {
    let not_here = format!("not a key of {what}; Artillery ignores it, and so does loadlab");
    if let Some(meant) = likely_meant(key, known) {
        return format!("{not_here} — did you mean `{meant}`?");
    }
    let elsewhere = [
        ("config", maps.config),
        ("a phase", fields_of::<PhaseSpec>()),
        ("a request", fields_of::<RequestSpec>()),
        ("a flow step", fields_of::<StepSpec>()),
    ];
    if let Some((place, _)) = elsewhere
        .iter()
        .find(|(place, fields)| *place != what && fields.contains(&key))
    {
        let hint = match (*place, key) {
            (_, "think") => "a think is a step of its own in the flow (`- think: 1`)".to_string(),
            (place, _) => format!("it is a key of {place}"),
        };
        return format!("{not_here} — {hint}");
    }
    not_here
}

/// The known key likely meant by `key`: the same but for case, one that begins with the
/// other (`ramp` for `rampTo`), or the nearest within a few edits (one for a short word).
fn likely_meant(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let known_lower = |k: &&'static str| k.to_ascii_lowercase();
    if let Some(k) = known.iter().find(|k| known_lower(k) == lower) {
        return Some(k);
    }
    if lower.len() >= 3 {
        let prefixed = known.iter().find(|k| {
            let k = known_lower(k);
            k.len() >= 3 && (k.starts_with(&lower) || lower.starts_with(&k))
        });
        if prefixed.is_some() {
            return prefixed.copied();
        }
    }
    let most = match key.len() {
        0..=4 => 1,
        5..=10 => 2,
        _ => 3,
    };
    known
        .iter()
        .map(|k| (edits(&lower, &known_lower(k)), *k))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance (no crate for one small loop).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The keys a derived struct reads, as serde's derive hands them to a deserializer (its
/// `deserialize_struct` call); a deserializer that keeps them and reads nothing.
pub(super) fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(FieldsOnly) {
        Err(Fields(Some(fields))) => fields,
        _ => &[],
    }
}

/// The fields of the struct asked for, carried out as the "error" of [`FieldsOnly`].
#[derive(Debug)]
struct Fields(Option<&'static [&'static str]>);

impl std::fmt::Display for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("only a struct's fields are read")
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Fields(None)
    }
}

struct FieldsOnly;

impl<'de> de::Deserializer<'de> for FieldsOnly {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(text: &str) -> Vec<UnknownKey> {
        let maps = super::super::script_maps();
        read_noting_unknown::<super::super::ScenarioFile>(text, Path::new("s.yml"), &maps)
            .unwrap()
            .1
    }

    /// The unknown key at `path`, which the test expects.
    fn at_path<'a>(u: &'a [UnknownKey], path: &str) -> &'a UnknownKey {
        u.iter()
            .find(|k| k.path == path)
            .unwrap_or_else(|| panic!("{path}: {u:?}"))
    }

    #[test]
    fn a_mistyped_phase_key_is_placed_and_the_key_meant_named() {
        let u = unknown(
            "config:\n  target: http://127.0.0.1:1\n  phases:\n    - duration: 10\n      arrivalRate: 1\n      ramp: 5\nscenarios:\n  - flow: [{ get: { url: / } }]\n",
        );
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!(u[0].path, "config.phases[0].ramp");
        assert_eq!(u[0].at, Some(Position { line: 6, column: 7 }));
        assert!(u[0].why.contains("did you mean `rampTo`"), "{}", u[0].why);
        assert_eq!(
            u[0].warning(Path::new("s.yml")),
            format!("s.yml:6:7: config.phases[0].ramp: {}", u[0].why)
        );
    }

    #[test]
    fn keys_in_flow_maps_nested_flows_and_environments_are_found() {
        let text = "config:\n  target: http://127.0.0.1:1\n  statsInterval: 10\n  environments:\n    ci:\n      http: { timeout: 2, extendedMetrics: true }\nscenarios:\n  - name: a\n    flow:\n      - loop:\n          - get: { url: /, header: { a: b }, think: 1 }\n        count: 2\nthresholds: []\n";
        let u = unknown(text);
        let by_path = |p: &str| at_path(&u, p);
        let stats = by_path("config.statsInterval");
        assert_eq!(stats.at, Some(Position { line: 3, column: 3 }));
        assert!(stats.why.contains("reports every second"), "{}", stats.why);
        let metrics = by_path("config.environments.ci.http.extendedMetrics");
        assert_eq!(
            metrics.at,
            Some(Position {
                line: 6,
                column: 27
            })
        );
        let header = by_path("scenarios[0].flow[0].loop[0].get.header");
        assert_eq!(
            header.at,
            Some(Position {
                line: 11,
                column: 28
            })
        );
        assert!(
            header.why.contains("did you mean `headers`"),
            "{}",
            header.why
        );
        let think = by_path("scenarios[0].flow[0].loop[0].get.think");
        assert!(think.why.contains("a step of its own"), "{}", think.why);
        let top = by_path("thresholds");
        assert_eq!(
            top.at,
            Some(Position {
                line: 13,
                column: 1
            })
        );
        assert_eq!(u.len(), 5, "{u:?}");
    }

    #[test]
    fn a_key_of_another_map_says_where_it_belongs() {
        let u = unknown("processor: ./p.js\nconfig:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
        assert_eq!(u.len(), 1, "{u:?}");
        assert!(u[0].why.contains("it is a key of config"), "{}", u[0].why);
    }

    #[test]
    fn keys_artillery_runs_and_loadlab_does_not_yet_refuse_the_file_with_what_to_write() {
        let text = "config:\n  target: https://127.0.0.1:1\n  http: { distributedTracing: {} }\n  tls: { certificateAuthority: ca.pem }\n  ws: { handshakeTimeout: 100 }\nscenarios:\n  - flow: [{ get: { uri: /, gzip: true } }]\n";
        let u = unknown(text);
        let by_path = |p: &str| at_path(&u, p);
        let tracing = by_path("config.http.distributedTracing");
        assert!(
            tracing.refused && tracing.why.contains("traceparent"),
            "{tracing:?}"
        );
        let ca = by_path("config.tls.certificateAuthority");
        assert!(ca.refused && ca.why.contains("tls.cacert"), "{ca:?}");
        let ws = by_path("config.ws.handshakeTimeout");
        assert!(!ws.refused && ws.why.contains("WebSocket client"), "{ws:?}");
        let gzip = by_path("scenarios[0].flow[0].get.gzip");
        assert!(
            !gzip.refused && gzip.why.starts_with("ignored: "),
            "{gzip:?}"
        );
        assert_eq!(
            gzip.at,
            Some(Position {
                line: 7,
                column: 29
            })
        );
        // `uri` is `url`'s other name: read, not reported.
        assert_eq!(u.len(), 4, "{u:?}");
        let e = tracing.refusal(Path::new("s.yml")).to_string();
        assert!(
            e.starts_with("s.yml:3:11: config.http.distributedTracing: Artillery adds"),
            "{e}"
        );
    }

    #[test]
    fn the_fields_of_a_struct_are_the_keys_it_reads() {
        let phase = fields_of::<PhaseSpec>();
        assert!(
            phase.contains(&"rampTo") && phase.contains(&"arrivalRate"),
            "{phase:?}"
        );
        assert_eq!(likely_meant("arrivalrate", phase), Some("arrivalRate"));
        assert_eq!(likely_meant("duraton", phase), Some("duration"));
        assert_eq!(likely_meant("zzz", phase), None);
        assert_eq!(likely_meant("ramp", phase), Some("rampTo"));
        assert_eq!(edits("kitten", "sitting"), 3);
    }

    #[test]
    fn every_key_of_artillerys_schema_has_its_row_in_the_docs() {
        // A key is documented when it stands in backticks in docs/scenarios.md, alone or in a
        // path (`config.http.timeout`, `…probability`).
        let docs = include_str!("../../../../docs/scenarios.md");
        let quoted: Vec<&str> = docs.split('`').skip(1).step_by(2).collect();
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$';
        let named = |key: &str| {
            quoted.iter().any(|q| {
                q.match_indices(key).any(|(at, _)| {
                    let before = q[..at].chars().next_back();
                    let after = q[at + key.len()..].chars().next();
                    !before.is_some_and(word) && !after.is_some_and(word)
                })
            })
        };
        let missing: Vec<&str> = include_str!("artillery-schema-keys.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('[') && !l.is_empty())
            .filter(|k| !named(k))
            .collect();
        assert!(
            missing.is_empty(),
            "keys of Artillery's schema without a row in docs/scenarios.md: {missing:?}"
        );
    }
}
