//! Thresholds: what a user demands of a run (`p99<300ms,errors<1%,rps>900`), parsed from
//! text. Checking a summary against them is analysis (`loadlab_analyze::thresholds`).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a threshold measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Latency from the intended start at a percentile (0–100; 100 is the maximum), ms.
    Latency {
        /// Percentile; 0 is the minimum.
        percentile: f64,
    },
    /// Mean latency from the intended start, ms.
    MeanLatency,
    /// Share of requests that failed (error statuses, transport errors, dropped), percent.
    Errors,
    /// Requests completed per second over the run.
    Rps,
    /// Share of requests (completed or dropped) that ended with one status, percent: an HTTP
    /// status by its three digits (`status:503`) or a gRPC call's by its name
    /// (`status:UNAVAILABLE`), as the summary keys them.
    Status(String),
    /// One of Artillery's metrics by its name, as an `ensure` condition writes it
    /// (`vusers.failed`, `http.codes.200`, `vusers.session_length.p95`, a processor's
    /// counter), read from the run's summary.
    Artillery(String),
}

impl Metric {
    /// The unit the metric is measured in, as printed.
    pub fn unit(&self) -> &'static str {
        match self {
            Metric::Latency { .. } | Metric::MeanLatency => "ms",
            Metric::Errors | Metric::Status(_) => "%",
            Metric::Rps => "req/s",
            Metric::Artillery(name) if name.contains("session_length") => "ms",
            Metric::Artillery(_) => "",
        }
    }

    /// The metric's name as users write it: `p99`, `p99.9`, `max`, `min`, `mean`, `errors`,
    /// `rps`.
    pub fn name(&self) -> String {
        match *self {
            Metric::Latency { percentile } if percentile >= 100.0 => "max".into(),
            Metric::Latency { percentile } if percentile <= 0.0 => "min".into(),
            Metric::Latency { percentile } => format!("p{percentile}"),
            Metric::MeanLatency => "mean".into(),
            Metric::Errors => "errors".into(),
            Metric::Rps => "rps".into(),
            Metric::Status(ref code) => format!("status:{code}"),
            Metric::Artillery(ref name) => name.clone(),
        }
    }
}

/// How the measured value must compare with the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Comparison {
    /// Strictly below.
    #[serde(rename = "<")]
    Below,
    /// Below or equal.
    #[serde(rename = "<=")]
    AtMost,
    /// Strictly above.
    #[serde(rename = ">")]
    Above,
    /// Above or equal.
    #[serde(rename = ">=")]
    AtLeast,
    /// Equal (Artillery's `==` in an `ensure` condition).
    #[serde(rename = "==")]
    Equal,
    /// Not equal (`!=`).
    #[serde(rename = "!=")]
    NotEqual,
}

impl Comparison {
    /// True when `value` satisfies the comparison with `limit`.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Comparison::Below => value < limit,
            Comparison::AtMost => value <= limit,
            Comparison::Above => value > limit,
            Comparison::AtLeast => value >= limit,
            Comparison::Equal => value == limit,
            Comparison::NotEqual => value != limit,
        }
    }

    /// Splits `text` at its first comparison: what comes before, the comparison, and what
    /// comes after (`p99<=300ms` → `p99`, `AtMost`, `300ms`); `None` without one. `==` and
    /// `!=` (also JavaScript's `===`, `!==`) are found too.
    pub fn split(text: &str) -> Option<(&str, Comparison, &str)> {
        // Not inside a request name's braces (`p99{a=b}<1ms`).
        let mut depth = 0usize;
        let at = text.char_indices().find_map(|(i, c)| match c {
            '{' => {
                depth += 1;
                None
            }
            '}' => {
                depth = depth.saturating_sub(1);
                None
            }
            '<' | '>' | '=' | '!' if depth == 0 => Some(i),
            _ => None,
        })?;
        let (left, right) = text.split_at(at);
        let (comparison, value) = match right.as_bytes() {
            [b'<', b'=', ..] => (Comparison::AtMost, &right[2..]),
            [b'>', b'=', ..] => (Comparison::AtLeast, &right[2..]),
            [b'<', ..] => (Comparison::Below, &right[1..]),
            [b'>', ..] => (Comparison::Above, &right[1..]),
            [b'=', b'=', rest @ ..] | [b'!', b'=', rest @ ..] => {
                let skip = 2 + usize::from(rest.first() == Some(&b'='));
                let kind = if right.starts_with('=') {
                    Comparison::Equal
                } else {
                    Comparison::NotEqual
                };
                (kind, &right[skip..])
            }
            _ => return None,
        };
        Some((left, comparison, value))
    }

    /// `<`, `<=`, `>` or `>=`.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Below => "<",
            Comparison::AtMost => "<=",
            Comparison::Above => ">",
            Comparison::AtLeast => ">=",
            Comparison::Equal => "==",
            Comparison::NotEqual => "!=",
        }
    }
}

/// One demand on a run: a metric, of the whole run or of the requests of one name, compared
/// with a limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Threshold {
    /// What is measured.
    pub metric: Metric,
    /// The request name it is scoped to; `None` for the whole run.
    pub name: Option<String>,
    /// How the measured value must compare with the limit.
    pub comparison: Comparison,
    /// The limit, in the metric's unit.
    pub limit: f64,
    /// A failed threshold fails the run (exit code); `false` only reports it (Artillery's
    /// `strict: false`).
    pub strict: bool,
}

/// A threshold that cannot be parsed, with what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("threshold {text:?}: {reason}; write thresholds like 'p99<300ms,errors<1%,rps>900'")]
pub struct ThresholdError {
    text: String,
    reason: String,
}

impl ThresholdError {
    /// An error about `text`, saying `reason`.
    pub fn new(text: &str, reason: impl Into<String>) -> Self {
        ThresholdError {
            text: text.to_string(),
            reason: reason.into(),
        }
    }

    /// What is wrong, without the advice.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl Threshold {
    /// Parses a comma-separated list: `p99<300ms, p50<=50ms, errors<1%, rps>900,
    /// p95{login}<200ms`. Latency metrics are `p0`…`p100` (or `p(99)`), `median`, `min`,
    /// `max`, `mean`/`avg`, with `us`, `ms` or `s` (a bare number is milliseconds);
    /// `errors` and `status:CODE` (an HTTP status, `status:503`, or a gRPC status by name,
    /// `status:UNAVAILABLE`) take a percentage; `rps` requests per second. `{name}` (or
    /// `{name:NAME}`) scopes a threshold to the requests of that name.
    pub fn parse_list(text: &str) -> Result<Vec<Threshold>, ThresholdError> {
        let list: Vec<Threshold> = split_top_level(text)
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(Threshold::parse)
            .collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(ThresholdError::new(text, "no threshold given"));
        }
        Ok(list)
    }

    /// Parses one threshold, such as `p99<300ms` or `errors{checkout}<=0.5%`.
    pub fn parse(text: &str) -> Result<Threshold, ThresholdError> {
        let err = |reason: String| ThresholdError::new(text, reason);
        let (left, comparison, value) = Comparison::split(text)
            .ok_or_else(|| err("it has no comparison (<, <=, > or >=)".into()))?;
        let (key, name) = split_scope(left.trim()).map_err(err)?;
        let metric = match key.get(..7) {
            Some(prefix) if prefix.eq_ignore_ascii_case("status:") => {
                Metric::Status(status_code(&key[7..]).map_err(err)?)
            }
            _ => metric(key).ok_or_else(|| {
                err(format!(
                    "{key:?} is not a metric: use p50…p99.9, median, min, max, mean, errors, \
                     rps or status:CODE"
                ))
            })?,
        };
        let limit = limit(&metric, value.trim()).map_err(err)?;
        Ok(Threshold {
            metric,
            name,
            comparison,
            limit,
            strict: true,
        })
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.metric.name())?;
        if let Some(name) = &self.name {
            write!(f, "{{{name}}}")?;
        }
        write!(f, "{}", self.comparison.symbol())?;
        match self.metric {
            Metric::Errors | Metric::Status(_) => write!(f, "{}%", self.limit),
            Metric::Rps | Metric::Artillery(_) => write!(f, "{}", self.limit),
            _ if self.limit >= 1000.0 => write!(f, "{}s", self.limit / 1000.0),
            _ if self.limit > 0.0 && self.limit < 1.0 => {
                write!(f, "{}us", (self.limit * 1e6).round() / 1e3)
            }
            _ => write!(f, "{}ms", self.limit),
        }
    }
}

/// Splits on commas outside `{…}`, so request names may hold commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `p99{login}` → (`p99`, `Some("login")`); `{name:login}` is accepted as k6 writes tags.
fn split_scope(left: &str) -> Result<(&str, Option<String>), String> {
    let Some(open) = left.find('{') else {
        return Ok((left, None));
    };
    let inner = left[open + 1..]
        .strip_suffix('}')
        .ok_or_else(|| format!("{left:?}: a request name goes in braces, as p99{{login}}"))?;
    let inner = inner.strip_prefix("name:").unwrap_or(inner).trim();
    if inner.is_empty() {
        return Err(format!("{left:?} has an empty request name"));
    }
    Ok((left[..open].trim(), Some(inner.to_string())))
}

/// The metric a key names.
fn metric(key: &str) -> Option<Metric> {
    let key = key.to_ascii_lowercase();
    Some(match key.as_str() {
        "errors" | "error_rate" => Metric::Errors,
        "rps" | "throughput" => Metric::Rps,
        "mean" | "avg" => Metric::MeanLatency,
        "max" => Metric::Latency { percentile: 100.0 },
        "min" => Metric::Latency { percentile: 0.0 },
        "median" => Metric::Latency { percentile: 50.0 },
        k => {
            let p = k.strip_prefix('p')?;
            let p = p
                .strip_prefix('(')
                .and_then(|p| p.strip_suffix(')'))
                .unwrap_or(p);
            let percentile = p.parse::<f64>().ok()?;
            if !(percentile.is_finite() && percentile > 0.0 && percentile <= 100.0) {
                return None;
            }
            Metric::Latency { percentile }
        }
    })
}

/// The status a `status:` threshold counts, as the summary keys it: an HTTP status's three
/// digits, or a gRPC status's name in capitals (`unavailable` → `UNAVAILABLE`).
fn status_code(code: &str) -> Result<String, String> {
    let code = code.trim();
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) && code >= "100" {
        return Ok(code.to_string());
    }
    if code.bytes().any(|b| b.is_ascii_alphabetic()) {
        if let Some(grpc) = crate::GrpcCode::from_name(code) {
            return Ok(grpc.name().to_string());
        }
    }
    Err(format!(
        "status:{code} names no status: write an HTTP status (status:503) or a gRPC status by \
         name (status:UNAVAILABLE)"
    ))
}

/// The limit written after the comparison, in the metric's unit.
fn limit(metric: &Metric, value: &str) -> Result<f64, String> {
    let number = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    match metric {
        Metric::Errors | Metric::Status(_) => value
            .strip_suffix('%')
            .and_then(number)
            .filter(|p| *p <= 100.0)
            .ok_or_else(|| {
                format!(
                    "{} takes a percentage such as 1%, not {value:?}",
                    metric.name()
                )
            }),
        Metric::Rps => value
            .strip_suffix("/s")
            .or(Some(value))
            .and_then(number)
            .ok_or_else(|| format!("rps takes requests per second such as 900, not {value:?}")),
        Metric::Latency { .. } | Metric::MeanLatency => {
            duration_ms(value).ok_or_else(|| format!("{value:?} is not a duration such as 300ms"))
        }
        Metric::Artillery(_) => number(value).ok_or_else(|| format!("{value:?} is not a number")),
    }
}

/// `300ms`, `0.3s`, `250us` or a bare number of milliseconds, in milliseconds.
pub fn duration_ms(v: &str) -> Option<f64> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (v, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_with_every_comparison_and_scope() {
        let list = Threshold::parse_list(
            "p99<300ms, p(95)<=0.2s,errors<1%,rps>900, max>=1, p50{login, with comma}<50ms",
        )
        .unwrap();
        let texts: Vec<String> = list.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            texts,
            [
                "p99<300ms",
                "p95<=200ms",
                "errors<1%",
                "rps>900",
                "max>=1ms",
                "p50{login, with comma}<50ms"
            ]
        );
        assert_eq!(list[4].metric, Metric::Latency { percentile: 100.0 });
        assert_eq!(list[5].name.as_deref(), Some("login, with comma"));
        let shown = |t: &str| Threshold::parse(t).unwrap().to_string();
        assert_eq!(shown("p99<0.3ms"), "p99<300us");
        assert_eq!(shown("p99<1500"), "p99<1.5s");
        let k6 = Threshold::parse("p99{name:checkout}<1s").unwrap();
        assert_eq!(k6.name.as_deref(), Some("checkout"));
        assert_eq!(k6.limit, 1000.0);
        for bad in [
            "",
            "p99",
            "p99<fast",
            "p0<1ms",
            "errors<1",
            "q99<1ms",
            "p99<-1ms",
            "rps>lots",
            "p99{}<1ms",
            "p99{x<1ms",
            "errors<120%",
        ] {
            assert!(Threshold::parse_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_status_threshold_names_an_http_status_or_a_grpc_status() {
        let list = Threshold::parse_list(
            "status:unavailable<0.1%, Status:503<=1%, status:resource_exhausted{Calc}<5%",
        )
        .unwrap();
        let texts: Vec<String> = list.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            texts,
            [
                "status:UNAVAILABLE<0.1%",
                "status:503<=1%",
                "status:RESOURCE_EXHAUSTED{Calc}<5%"
            ]
        );
        assert_eq!(list[0].metric, Metric::Status("UNAVAILABLE".into()));
        assert_eq!(list[0].metric.unit(), "%");
        for bad in [
            "status:<1%",
            "status:SLOW<1%",
            "status:14<1%",
            "status:099<1%",
            "status:5030<1%",
            "status:503<1",
            "status:503<101%",
        ] {
            let e = Threshold::parse(bad).unwrap_err();
            assert!(e.reason().contains("status"), "{bad:?}: {e}");
        }
    }
}
