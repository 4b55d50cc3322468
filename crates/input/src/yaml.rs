//! YAML shapes that scenario and experiment files share (one item or a list, seconds or a
//! duration) and the parser's messages as a [`YamlError`] read as `file:line:col: message`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// One item or a list of them, as Artillery accepts for `payload`, `capture` and codes.
///
/// Read without serde's buffering of untagged enums, so an item's own error (an unknown key,
/// a wrong type) reaches the message with its position instead of "no variant matched".
#[derive(Debug, Clone)]
pub enum OneOrMany<T> {
    /// A single item.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OneOrManyVisitor(std::marker::PhantomData))
    }
}

struct OneOrManyVisitor<T>(std::marker::PhantomData<T>);

/// Hands a scalar the visitor met to the item's own `Deserialize`.
macro_rules! one_scalar {
    ($($visit:ident: $ty:ty),*) => {$(
        fn $visit<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            T::deserialize(v.into_deserializer()).map(OneOrMany::One)
        }
    )*};
}

use serde::de::{self, IntoDeserializer};

impl<'de, T: Deserialize<'de>> de::Visitor<'de> for OneOrManyVisitor<T> {
    type Value = OneOrMany<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one item or a list of them")
    }

    one_scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str, visit_string: String);

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Vec::<T>::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(OneOrMany::Many)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(OneOrMany::One)
    }
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

/// Seconds as a number, or a duration such as `2m`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Seconds {
    /// Seconds.
    Number(f64),
    /// A duration with its unit.
    Text(String),
}

/// A duration in a file that cannot be one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// Seconds past what a duration holds.
    #[error("a duration of {0} s is too long")]
    TooLong(f64),
    /// Zero or fewer seconds (or not a number).
    #[error("a duration must be more than zero seconds, got {0}")]
    NotPositive(f64),
    /// Text that is not a duration, with the duration parser's reason.
    #[error("{text:?}: {reason}")]
    Text {
        /// The text as written.
        text: String,
        /// Why it is not a duration.
        reason: String,
    },
}

impl Seconds {
    /// The duration, which must be above zero.
    pub fn duration(&self) -> Result<Duration, DurationError> {
        match self {
            Seconds::Number(s) if s.is_finite() && *s > 0.0 => {
                Duration::try_from_secs_f64(*s).map_err(|_| DurationError::TooLong(*s))
            }
            Seconds::Number(s) => Err(DurationError::NotPositive(*s)),
            Seconds::Text(t) => {
                let t = &crate::config_templates::render(t, Some("1")).map_err(|reason| {
                    DurationError::Text {
                        text: t.clone(),
                        reason,
                    }
                })?;
                crate::values::parse_duration(t).map_err(|reason| DurationError::Text {
                    text: t.clone(),
                    reason,
                })
            }
        }
    }
}

/// A line and a column in a file, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line.
    pub line: u64,
    /// The column.
    pub column: u64,
}

/// A file the YAML parser refused, with its message and where it stopped when it said so;
/// read as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// The file.
    pub path: PathBuf,
    /// Where the parser stopped, when its message says.
    pub position: Option<Position>,
    /// The parser's message (its first line, without the position).
    pub message: String,
}

impl YamlError {
    /// The parser's `message` about `path`, its position taken out of the first line.
    pub fn new(path: &Path, message: &str) -> Self {
        let first = message.lines().next().unwrap_or("invalid YAML");
        let first = first.strip_prefix("error: ").unwrap_or(first);
        let located = first.strip_prefix("line ").and_then(|rest| {
            let (line, rest) = rest.split_once(" column ")?;
            let (column, message) = rest.split_once(": ")?;
            let position = Position {
                line: line.parse().ok()?,
                column: column.parse().ok()?,
            };
            Some((position, message))
        });
        let (position, message) = match located {
            Some((p, m)) => (Some(p), m),
            None => (None, first),
        };
        YamlError {
            path: path.to_path_buf(),
            position,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for YamlError {}

/// Reads a value written empty (`headers:` with nothing after it, YAML's null) as its
/// default, as Artillery reads a map left empty.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// serde's message for a value that fits none of an untagged enum's shapes names the Rust
/// type; this says what the key accepts instead.
pub fn plain_untagged(message: &str) -> String {
    let accepts = [
        (
            "enum ThinkSpec",
            "think takes seconds (2, 0.5, \"500ms\") or one of { constant: S }, { uniform: [LOW, HIGH] }, { exponential: MEAN }",
        ),
        ("enum Seconds", "expected seconds (2, 0.5) or a duration such as \"2m\""),
        ("enum OneOrMany", "expected one item or a list of them"),
    ];
    // A wrong type where a map of keys belongs names the Rust struct: say which key's map.
    let structs = [
        ("PayloadSpec", "payload: { path, fields, order, skipHeader, delimiter } (or a list of them)"),
        ("CaptureSpec", "capture: { json: QUERY, as: NAME } or { header: NAME, as: NAME } (or a list of them)"),
        ("PhaseSpec", "a phase: { duration, arrivalRate, rampTo, arrivalCount, pause, users, … }"),
        ("StepSpec", "a flow step: { get/post/put/patch/delete: {…} }, { think: S }, { log: TEXT } or { loop: [...], count: N }"),
        ("RequestSpec", "a request: { url, headers, qs, json, body, form, capture, expect, … }"),
        ("ScenarioSpec", "a scenario: { name, weight, flow }"),
        ("Config", "config: { target, phases, variables, payload, … }"),
        ("HttpConfig", "config.http: { timeout, http2, streams }"),
        ("TlsConfig", "config.tls: { rejectUnauthorized, cacert, insecure }"),
        ("EnsureSpec", "ensure: { thresholds, conditions, maxErrorRate, p99, … }"),
        ("ApdexSpec", "apdex: { threshold: MS }"),
        ("DefaultsSpec", "config.defaults: { headers: { NAME: VALUE } }"),
        ("MarkovSpec", "markov: { start: STATE, states: { … } }"),
        ("StateSpec", "a markov state: { get or post, think, next }"),
        ("SpikeSpec", "spike: { base, to, length, every }"),
        ("StepShape", "step: { from, to, steps }"),
    ];
    for (ty, says) in structs {
        let needle = format!("expected struct {ty}");
        if message.contains(&needle) {
            return message.replace(&needle, &format!("expected {says}"));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_errors_read_as_file_line_col() {
        let p = Path::new("x.yaml");
        let e = YamlError::new(p, "error: line 4 column 1: unknown field `extra`\n  |");
        assert_eq!(e.position, Some(Position { line: 4, column: 1 }));
        assert_eq!(e.to_string(), "x.yaml:4:1: unknown field `extra`");
        assert_eq!(
            plain_untagged("line 3 column 3: invalid type: integer `5`, expected struct PayloadSpec"),
            "line 3 column 3: invalid type: integer `5`, expected payload: { path, fields, order, skipHeader, delimiter } (or a list of them)"
        );
        let e = YamlError::new(p, "something else");
        assert_eq!(e.position, None);
        assert_eq!(e.to_string(), "x.yaml: something else");
    }
}
