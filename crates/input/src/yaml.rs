//! YAML shapes that scenario and experiment files share (one item or a list, seconds or a
//! duration) and the parser's messages rewritten as `file:line:col: message`.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Deserialize;

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
                crate::values::parse_duration(t).map_err(|e| anyhow::anyhow!("{t:?}: {e}"))
            }
        }
    }
}

/// The parser's first line as `file:line:col: message`.
pub fn located(path: &Path, message: &str) -> String {
    let first = message.lines().next().unwrap_or("invalid YAML");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let position = first.strip_prefix("line ").and_then(|rest| {
        let (line, rest) = rest.split_once(" column ")?;
        let (col, msg) = rest.split_once(": ")?;
        Some(format!("{}:{line}:{col}: {msg}", path.display()))
    });
    position.unwrap_or_else(|| format!("{}: {first}", path.display()))
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
        assert_eq!(
            located(p, "error: line 4 column 1: unknown field `extra`\n  |"),
            "x.yaml:4:1: unknown field `extra`"
        );
        assert_eq!(located(p, "something else"), "x.yaml: something else");
    }
}
