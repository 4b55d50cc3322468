//! The run's numbers as metric families — name, kind, unit, labels and values — the one list
//! the live `/metrics` page prints in Prometheus' text format and the exporters send
//! (Prometheus remote write, OpenTelemetry), so every backend sees the same names.

use std::fmt::Write;

/// What a family's values mean over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A total that only grows during a run.
    Counter,
    /// A reading that goes up and down.
    Gauge,
    /// A distribution, with buckets of fixed upper bounds.
    Histogram,
}

impl Kind {
    /// The kind's name in Prometheus' text format.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric: its name, what it counts, and one point per set of labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Prometheus name (`loadlab_…`; counters end in `_total`).
    pub name: &'static str,
    /// One sentence on what it counts.
    pub help: &'static str,
    /// Unit in UCUM, as OpenTelemetry writes it (`s`, `By`, `1`, `{request}`).
    pub unit: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// The values, one per set of labels.
    pub points: Vec<Point>,
}

/// One series of a family.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Label names and values.
    pub labels: Vec<(&'static str, String)>,
    /// The value now.
    pub value: Value,
}

/// A point's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's total or a gauge's reading.
    Number(f64),
    /// A histogram's buckets.
    Histogram(Buckets),
}

/// A histogram's counts in buckets of fixed upper bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    /// Upper bounds, in the family's unit, increasing; a last bucket above them is implied.
    pub bounds: &'static [f64],
    /// Values in each bucket (not cumulative): one more than `bounds`.
    pub counts: Vec<u64>,
    /// Sum of the values.
    pub sum: f64,
    /// Number of values.
    pub count: u64,
}

impl Family {
    /// A family without labels holding one number.
    pub fn single(
        name: &'static str,
        kind: Kind,
        unit: &'static str,
        help: &'static str,
        value: f64,
    ) -> Family {
        Family {
            name,
            help,
            unit,
            kind,
            points: vec![Point {
                labels: Vec::new(),
                value: Value::Number(value),
            }],
        }
    }
}

/// `families` in Prometheus' text exposition format (version 0.0.4).
pub fn text(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.as_str());
        for p in &f.points {
            match &p.value {
                Value::Number(v) => {
                    let _ = writeln!(out, "{}{} {v}", f.name, labels(&p.labels, None));
                }
                Value::Histogram(b) => {
                    let mut below = 0;
                    for (bound, n) in b.bounds.iter().zip(&b.counts) {
                        below += n;
                        let le = bound.to_string();
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {below}",
                            f.name,
                            labels(&p.labels, Some(&le))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{}_bucket{} {}",
                        f.name,
                        labels(&p.labels, Some("+Inf")),
                        b.count
                    );
                    let _ = writeln!(out, "{}_sum{} {}", f.name, labels(&p.labels, None), b.sum);
                    let _ = writeln!(
                        out,
                        "{}_count{} {}",
                        f.name,
                        labels(&p.labels, None),
                        b.count
                    );
                }
            }
        }
    }
    out
}

/// `{a="x",b="y"}` with `le` last when given; nothing without labels.
fn labels(pairs: &[(&'static str, String)], le: Option<&str>) -> String {
    if pairs.is_empty() && le.is_none() {
        return String::new();
    }
    let mut s = String::from("{");
    let all = pairs
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|le| ("le", le)));
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape(v));
    }
    s.push('}');
    s
}

/// A label value escaped as the text format asks: backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_prints_cumulative_buckets_then_its_sum_and_count() {
        let f = Family {
            name: "x_seconds",
            help: "X.",
            unit: "s",
            kind: Kind::Histogram,
            points: vec![Point {
                labels: vec![("name", "a\"b".into())],
                value: Value::Histogram(Buckets {
                    bounds: &[0.1, 1.0],
                    counts: vec![2, 3, 1],
                    sum: 4.5,
                    count: 6,
                }),
            }],
        };
        let t = text(&[f]);
        assert_eq!(
            t,
            "# HELP x_seconds X.\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{name=\"a\\\"b\",le=\"0.1\"} 2\n\
             x_seconds_bucket{name=\"a\\\"b\",le=\"1\"} 5\n\
             x_seconds_bucket{name=\"a\\\"b\",le=\"+Inf\"} 6\n\
             x_seconds_sum{name=\"a\\\"b\"} 4.5\n\
             x_seconds_count{name=\"a\\\"b\"} 6\n"
        );
    }

    #[test]
    fn a_number_without_labels_prints_bare() {
        let t = text(&[Family::single("y_total", Kind::Counter, "1", "Y.", 3.0)]);
        assert!(t.ends_with("# TYPE y_total counter\ny_total 3\n"), "{t}");
    }
}
