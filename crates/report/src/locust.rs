//! A locustfile's run as Locust users read it: the statistics table by request type and name
//! (with its percentiles and failures), and Locust's CSV files with the same columns.

use std::fmt::Write as _;
use std::path::PathBuf;

use hdrhistogram::Histogram;
use loadlab_run::{Interval, RunData};

/// The percentiles Locust's tables and CSV files show, in order.
const PERCENTILES: [f64; 11] = [
    50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0,
];

/// One row: a request type and name (or the aggregate), with its numbers.
struct Row<'a> {
    method: &'a str,
    name: &'a str,
    iv: &'a Interval,
}

impl Row<'_> {
    fn failures(&self) -> u64 {
        self.iv.counts.errors()
    }

    fn count(&self) -> u64 {
        self.iv.counts.completed
    }

    /// A latency statistic in ms.
    fn ms(h: &Histogram<u64>, v: u64) -> f64 {
        if h.is_empty() {
            0.0
        } else {
            v as f64 / 1000.0
        }
    }

    /// The latency at `p` %, rounded as Locust keeps response times (to the ms under 100 ms,
    /// to 10 ms under 1 s, to 100 ms above).
    fn percentile(&self, p: f64) -> u64 {
        let h = &self.iv.latency;
        if h.is_empty() {
            return 0;
        }
        locust_rounded(h.value_at_quantile(p / 100.0) as f64 / 1000.0)
    }
}

/// The rows of `run`: each `TYPE name` its users made, in first-seen order, then the aggregate.
fn rows(run: &RunData) -> (Vec<Row<'_>>, Interval) {
    let mut total = Interval::new(0);
    let rows = run
        .by_name
        .iter()
        .map(|(key, iv)| {
            total.merge(iv);
            let (method, name) = key.split_once(' ').unwrap_or(("", key));
            Row { method, name, iv }
        })
        .collect();
    (rows, total)
}

/// Locust's end-of-run tables: requests, response time percentiles, failures and task errors.
pub fn stats_table(run: &RunData) -> String {
    let secs = run.secs();
    let (rows, total) = rows(run);
    let aggregate = Row {
        method: "",
        name: "Aggregated",
        iv: &total,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<8} {:<40} {:>8} {:>12} | {:>7} {:>7} {:>7} {:>7} | {:>8} {:>10}",
        "Type", "Name", "# reqs", "# fails", "Avg", "Min", "Max", "Med", "req/s", "failures/s"
    );
    for r in rows.iter().chain(std::iter::once(&aggregate)) {
        let h = &r.iv.latency;
        let fails = r.failures();
        let pct = if r.count() > 0 {
            100.0 * fails as f64 / r.count() as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  {:<8} {:<40} {:>8} {:>5}({:>4.2}%) | {:>7.0} {:>7.0} {:>7.0} {:>7} | {:>8.2} {:>10.2}",
            r.method,
            r.name,
            r.count(),
            fails,
            pct,
            h.mean() / 1000.0,
            Row::ms(h, h.min()),
            Row::ms(h, h.max()),
            r.percentile(50.0),
            r.count() as f64 / secs,
            fails as f64 / secs,
        );
    }
    let _ = writeln!(
        out,
        "\n  response time percentiles (ms, from the intended start where users pace)"
    );
    let _ = write!(out, "  {:<8} {:<40}", "Type", "Name");
    for p in PERCENTILES {
        let _ = write!(out, " {:>7}", format!("{p}%"));
    }
    let _ = writeln!(out, " {:>8}", "# reqs");
    for r in rows.iter().chain(std::iter::once(&aggregate)) {
        let _ = write!(out, "  {:<8} {:<40}", r.method, r.name);
        for p in PERCENTILES {
            let _ = write!(out, " {:>7}", r.percentile(p));
        }
        let _ = writeln!(out, " {:>8}", r.count());
    }
    if let Some(u) = &run.users {
        if !u.request_failures.is_empty() {
            let _ = writeln!(out, "\n  failures");
            for ((method, name, error), n) in &u.request_failures {
                let error = console_error(error);
                let _ = writeln!(out, "  {n:>8}  {method} {name}: {error}");
            }
        }
        for (title, errors) in [
            (
                "errors raised by tasks (each traceback was shown once)",
                &u.failures,
            ),
            (
                "unhandled errors (no user was started after one; each traceback was shown once)",
                &u.unhandled,
            ),
        ] {
            if !errors.is_empty() {
                let _ = writeln!(out, "\n  {title}");
                for (error, n) in errors {
                    let _ = writeln!(out, "  {n:>8}  {error}");
                }
            }
        }
    }
    out
}

/// A failure as Locust's console shows it: the CSV's `CatchResponseError('message')` as the
/// message alone (the string its `failure()` was given), any other error as its repr.
fn console_error(error: &str) -> std::borrow::Cow<'_, str> {
    let Some(literal) = error
        .strip_prefix("CatchResponseError(")
        .and_then(|e| e.strip_suffix(')'))
    else {
        return error.into();
    };
    // A Python string literal as repr writes it: quoted with ' or ", backslash escapes.
    let quote = literal.chars().next();
    let Some(inner) = quote
        .filter(|q| matches!(q, '\'' | '"') && literal.len() >= 2 && literal.ends_with(*q))
        .map(|_| &literal[1..literal.len() - 1])
    else {
        return error.into();
    };
    let mut text = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => text.push('\n'),
            Some('t') => text.push('\t'),
            Some('r') => text.push('\r'),
            Some(other) if matches!(other, '\\' | '\'' | '"') => text.push(other),
            Some(other) => {
                text.push('\\');
                text.push(other);
            }
            None => text.push('\\'),
        }
    }
    text.into()
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// Writes Locust's CSV files for `run` under `prefix` (`PREFIX_stats.csv`,
/// `PREFIX_failures.csv`, `PREFIX_exceptions.csv`, `PREFIX_stats_history.csv`), with Locust's
/// columns; the paths written.
pub fn write_csv(prefix: &str, run: &RunData) -> std::io::Result<Vec<PathBuf>> {
    let secs = run.secs();
    let (rows, total) = rows(run);
    let aggregate = Row {
        method: "",
        name: "Aggregated",
        iv: &total,
    };
    let pct_header: Vec<String> = PERCENTILES.iter().map(|p| format!("{p}%")).collect();
    let mut stats = format!(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,{}\n",
        pct_header.join(",")
    );
    for r in rows.iter().chain(std::iter::once(&aggregate)) {
        let h = &r.iv.latency;
        let count = r.count();
        let size = if count > 0 {
            r.iv.counts.bytes as f64 / count as f64
        } else {
            0.0
        };
        let pcts: Vec<String> = PERCENTILES
            .iter()
            .map(|p| {
                if count > 0 {
                    r.percentile(*p).to_string()
                } else {
                    "N/A".into()
                }
            })
            .collect();
        let _ = writeln!(
            stats,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            csv(r.method),
            csv(r.name),
            count,
            r.failures(),
            r.percentile(50.0),
            h.mean() / 1000.0,
            Row::ms(h, h.min()),
            Row::ms(h, h.max()),
            size,
            count as f64 / secs,
            r.failures() as f64 / secs,
            pcts.join(","),
        );
    }
    let mut failures = String::from("Method,Name,Error,Occurrences\n");
    let mut exceptions = String::from("Count,Message,Traceback,Nodes\n");
    if let Some(u) = &run.users {
        for ((method, name, error), n) in &u.request_failures {
            let _ = writeln!(failures, "{},{},{},{n}", csv(method), csv(name), csv(error));
        }
        for (error, n) in &u.failures {
            let _ = writeln!(exceptions, "{n},{},,local", csv(error));
        }
    }
    let mut history = format!(
        "Timestamp,User Count,Type,Name,Requests/s,Failures/s,{},Total Request Count,Total Failure Count\n",
        pct_header.join(",")
    );
    let start = run
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (mut requests, mut failed) = (0u64, 0u64);
    for row in &run.timeline {
        let errors =
            row.status_classes[3] + row.status_classes[4] + row.error_kinds.iter().sum::<u64>();
        requests += row.completed;
        failed += errors;
        // The timeline keeps the median and p99 of each second; the other columns are not kept.
        let pcts: Vec<String> = PERCENTILES
            .iter()
            .map(|p| match *p {
                50.0 => format!("{:.0}", row.p50_ms),
                99.0 => format!("{:.0}", row.p99_ms),
                _ => "N/A".into(),
            })
            .collect();
        let _ = writeln!(
            history,
            "{},{},,Aggregated,{},{},{},{requests},{failed}",
            start + row.second + 1,
            row.users_active,
            row.completed,
            errors,
            pcts.join(","),
        );
    }
    let files = [
        ("stats", stats),
        ("failures", failures),
        ("exceptions", exceptions),
        ("stats_history", history),
    ];
    let mut written = Vec::new();
    for (suffix, text) in files {
        let path = PathBuf::from(format!("{prefix}_{suffix}.csv"));
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// A response time in ms rounded as Locust keeps it in its `response_times` buckets: to the
/// ms under 100 ms, to 10 ms under 1 s, to 100 ms above.
fn locust_rounded(ms: f64) -> u64 {
    let step = if ms < 100.0 {
        1.0
    } else if ms < 1000.0 {
        10.0
    } else {
        100.0
    };
    ((ms / step).round() * step) as u64
}

/// The final statistics as Locust's `--json` prints them and `--json-file` writes them: one
/// object per request type and name with its counts, response times in ms (`response_times`
/// holds each rounded time's count, from loadlab's histogram) and content length.
/// `num_reqs_per_sec` and `num_fail_per_sec` are empty: loadlab keeps each second's counts for
/// the whole run (its timeline), not per name.
pub fn stats_json(run: &RunData) -> serde_json::Value {
    let epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let start = epoch(run.started_at);
    let end = start + run.secs();
    let (rows, _) = rows(run);
    let entries: Vec<serde_json::Value> = rows
        .iter()
        .filter(|r| r.count() > 0)
        .map(|r| {
            let h = &r.iv.latency;
            let mut times = std::collections::BTreeMap::<u64, u64>::new();
            for v in h.iter_recorded() {
                let ms =
                    locust_rounded(h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0);
                *times.entry(ms).or_default() += v.count_at_value();
            }
            serde_json::json!({
                "name": r.name,
                "method": r.method,
                "last_request_timestamp": end,
                "start_time": start,
                "num_requests": r.count(),
                "num_none_requests": 0,
                "num_failures": r.failures(),
                "total_response_time": h.mean() * h.len() as f64 / 1000.0,
                "max_response_time": Row::ms(h, h.max()),
                "min_response_time": (!h.is_empty()).then(|| Row::ms(h, h.min())),
                "total_content_length": r.iv.counts.bytes,
                "response_times": times,
                "num_reqs_per_sec": {},
                "num_fail_per_sec": {},
            })
        })
        .collect();
    serde_json::Value::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::console_error;

    #[test]
    fn the_console_shows_a_failure_message_as_given_and_other_errors_as_their_repr() {
        assert_eq!(
            console_error("CatchResponseError('bad token')"),
            "bad token"
        );
        assert_eq!(
            console_error(r#"CatchResponseError("it's \"late\"\nagain")"#),
            "it's \"late\"\nagain"
        );
        assert_eq!(console_error(r"CatchResponseError('a\\b')"), r"a\b");
        let http = "HTTPError('404 Client Error: Not Found for url: /bye')";
        assert_eq!(console_error(http), http);
        assert_eq!(
            console_error("CatchResponseError(42)"),
            "CatchResponseError(42)"
        );
    }
}
