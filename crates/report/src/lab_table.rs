//! A lab's cells as rows: the terminal table, which answers the experiment's question in 120
//! columns (a block per topology: throughput, latency, errors, server CPU, and what a search
//! or probe found), and `comparison.csv`, which has every column seed 001's annex counted and
//! more.

use std::fmt::Write;

use loadlab_run::lab::probe::Kind;
use loadlab_run::lab::{CapacityResult, LabCell, ProbeVerdict};
use loadlab_run::Summary;

use crate::thousands;

/// Server CPU (sum over processes of their mean %) and memory (sum of their peak MB).
fn server_totals(s: &Summary) -> Option<(f64, f64)> {
    s.server
        .as_ref()
        .filter(|srv| !srv.processes.is_empty())
        .map(|srv| {
            (
                srv.processes.iter().map(|p| p.cpu_pct_avg).sum(),
                srv.processes.iter().map(|p| p.rss_mb_max).sum(),
            )
        })
}

pub(crate) const LAB_COLUMNS: [&str; 26] = [
    "topology",
    "workload",
    // Responses below 400 per second: a pipelined connection a gunicorn sync worker closes
    // completes its requests as `closed` errors, which are no throughput.
    "ok/s",
    "min ms",
    "median ms",
    "p95 ms",
    "p99 ms",
    "max ms",
    "requests",
    "2xx",
    "4xx",
    "5xx",
    // The balancer's answers seed 001's annex counted: no replica reachable, none in time.
    "502",
    "504",
    "transport errors",
    // The annex's ECONNRESET and ESOCKETTIMEDOUT.
    "reset",
    "timeout",
    // Still in flight when the cell ended (not waited for), and never sent for want of a
    // connection: a cell of 10 s sleeps shorter than 10 s reads as nothing answered otherwise.
    "unfinished",
    "dropped",
    "server cpu %",
    "server rss MB",
    // Added after the columns above, so theirs keep their positions in older scripts.
    // Rounds repeat every cell, interleaved, so each comparison has an interval.
    "round",
    // A capacity workload's breaking point: the highest rate that met its objective.
    "breaking req/s",
    // Why a cell does not count in the comparisons (a process of the topology exited).
    "left out",
    // A probe workload's reading: async, or sync/cpu with its workers, and the service time.
    "probe",
    // gRPC calls that ended with a status other than OK ("-" for a cell that made none).
    "grpc not ok",
];

/// A probe's reading in a table cell: `sync 3 workers S 905.2 ms` (no comma: the CSV has none).
fn probe_field(v: &ProbeVerdict) -> String {
    let how = match (v.kind, v.workers) {
        (Kind::RateLimited, _) => format!("rate-limited {:.1} req/s", v.max_throughput_rps),
        (Kind::Contended, _) => format!("contended peak {:.1} req/s", v.max_throughput_rps),
        (Kind::Unclassified, _) => format!("unclassified max {:.1} req/s", v.max_throughput_rps),
        (Kind::Async, _) | (_, None) => "async".to_string(),
        (Kind::Sync, Some(k)) if v.workers_observed => format!("sync {k} workers"),
        (Kind::Sync, Some(k)) => format!("sync ~{k} workers"),
        (Kind::Cpu, Some(k)) => format!("cpu {k} cores"),
    };
    format!("{how} S {:.1} ms", v.service_time_ms)
}

/// A lab cell's row of the comparison table, as text (the columns of `LAB_COLUMNS`).
pub(crate) fn lab_fields(c: &LabCell) -> Vec<String> {
    let s = &c.summary;
    let l = &s.latency_ms;
    let class = |k: char| -> u64 {
        s.status
            .iter()
            .filter(|(code, _)| code.starts_with(k))
            .map(|(_, n)| n)
            .sum()
    };
    let transport: u64 = s.errors.by_kind().iter().map(|(_, n)| n).sum();
    let grpc_not_ok = match s.grpc.values().sum::<u64>() {
        0 => "-".to_string(),
        calls => (calls - s.grpc.get("OK").copied().unwrap_or(0)).to_string(),
    };
    let (cpu, rss) = server_totals(s).map_or(("-".to_string(), "-".to_string()), |(c, r)| {
        (format!("{c:.0}"), format!("{r:.1}"))
    });
    let breaking = match &c.capacity {
        Some(CapacityResult {
            max_rate_rps: Some(r),
            ..
        }) => format!("{r:.1}"),
        Some(_) => "none met".to_string(),
        None => "-".to_string(),
    };
    vec![
        c.topology.clone(),
        c.workload.clone(),
        format!("{:.0}", s.ok_rps()),
        format!("{:.2}", l.min),
        format!("{:.2}", l.p50),
        format!("{:.2}", l.p95),
        format!("{:.2}", l.p99),
        format!("{:.2}", l.max),
        s.requests.completed.to_string(),
        class('2').to_string(),
        class('4').to_string(),
        class('5').to_string(),
        s.status.get("502").copied().unwrap_or(0).to_string(),
        s.status.get("504").copied().unwrap_or(0).to_string(),
        transport.to_string(),
        s.errors.reset.to_string(),
        s.errors.timeout.to_string(),
        s.requests.unfinished.to_string(),
        s.requests.dropped.to_string(),
        cpu,
        rss,
        (c.round + 1).to_string(),
        breaking,
        c.excluded.clone().unwrap_or_else(|| "-".into()),
        c.probe
            .as_ref()
            .and_then(|p| p.verdict.as_ref())
            .map_or_else(|| "-".into(), probe_field),
        grpc_not_ok,
    ]
}

/// What a breaking-point search or a probe found, in a few words; `None` for a fixed load.
fn found(c: &LabCell) -> Option<String> {
    if let Some(why) = &c.excluded {
        return Some(format!("left out: {why}"));
    }
    if let Some(cap) = &c.capacity {
        let broke = cap
            .broke_at_rps
            .map_or(String::new(), |b| format!(", broke at {b:.1}"));
        return Some(match cap.max_rate_rps {
            Some(r) => format!("capacity {r:.1} {}{broke}", cap.unit.per_second()),
            None => format!("capacity: none met {}{broke}", cap.slo),
        });
    }
    let p = c.probe.as_ref()?;
    Some(match &p.verdict {
        Some(v) => probe_field(v),
        None => "probe: no verdict".to_string(),
    })
}

/// The terminal's comparison: one block per topology, named once, with a row per workload
/// (and round): successful responses per second, median and p99 latency, errors, the server's
/// CPU, and what a search or probe found. Fits 120 columns for names of up to 30 characters;
/// `comparison.csv` has the other columns.
pub fn render_lab_table(cells: &[LabCell]) -> String {
    let rounds = cells.iter().map(|c| c.round + 1).max().unwrap_or(1);
    let mut header = vec!["workload"];
    if rounds > 1 {
        header.push("round");
    }
    header.extend(["ok/s", "p50 ms", "p99 ms", "errors %", "cpu %", "found"]);
    let rows: Vec<(&str, Vec<String>)> = cells
        .iter()
        .map(|c| {
            let s = &c.summary;
            let due = s.requests.completed + s.requests.dropped;
            let failed = s.requests.errors + s.requests.dropped;
            let errors = 100.0 * failed as f64 / due.max(1) as f64;
            let cpu = server_totals(s).map_or("-".to_string(), |(cpu, _)| format!("{cpu:.0}"));
            let mut row = vec![c.workload.clone()];
            if rounds > 1 {
                row.push((c.round + 1).to_string());
            }
            row.extend([
                rate(s.ok_rps()),
                format!("{:.2}", s.latency_ms.p50),
                format!("{:.2}", s.latency_ms.p99),
                format!("{errors:.1}"),
                cpu,
                found(c).unwrap_or_default(),
            ]);
            (c.topology.as_str(), row)
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|(_, r)| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let last = header.len() - 1;
    let line = |out: &mut String, fields: &[&str]| {
        let mut text = String::from("   ");
        for (i, f) in fields.iter().enumerate() {
            if i == 0 {
                let _ = write!(text, " {:<w$}", f, w = widths[i]);
            } else if i == last {
                let _ = write!(text, "  {f}");
            } else {
                let _ = write!(text, " {:>w$}", f, w = widths[i]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    let mut out = String::new();
    let mut topology: Option<&str> = None;
    for (t, row) in &rows {
        if topology != Some(t) {
            if topology.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "  {t}");
            line(&mut out, &header);
            topology = Some(t);
        }
        let fields: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &fields);
    }
    out
}

/// A rate with as many figures as its size needs: `12.3`, `999.8`, `90,675`.
fn rate(r: f64) -> String {
    if r >= 1000.0 {
        thousands(r.round() as u64)
    } else {
        format!("{r:.1}")
    }
}

/// The lab's comparison as CSV, every column of seed 001's annex and more.
pub fn lab_csv(cells: &[LabCell]) -> String {
    let quote = |f: &str| {
        if f.contains([',', '"']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.to_string()
        }
    };
    let mut out = LAB_COLUMNS.map(quote).join(",");
    out.push('\n');
    for c in cells {
        let fields: Vec<String> = lab_fields(c).iter().map(|f| quote(f)).collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab CSV's row for one cell of `summary`, by column name.
    fn lab_row(
        topology: &str,
        workload: &str,
        summary: Summary,
    ) -> std::collections::BTreeMap<String, String> {
        let cell = LabCell {
            topology: topology.into(),
            workload: workload.into(),
            round: 0,
            summary,
            ..LabCell::default()
        };
        let csv = lab_csv(&[cell]);
        let mut lines = csv.lines();
        let header = lines.next().unwrap().split(',').map(str::to_string);
        let row = lines.next().unwrap().split(',').map(str::to_string);
        header.zip(row).collect()
    }

    #[test]
    fn the_lab_table_counts_the_balancers_502_and_504_and_resets_and_timeouts_as_seed_001s_annex() {
        let mut summary = Summary::default();
        summary.requests.completed = 8;
        summary.requests.errors = 3 + 2 + 1;
        summary.status = [("200", 5), ("502", 2), ("504", 1)]
            .map(|(code, n)| (code.to_string(), n))
            .into();
        summary.errors.reset = 2;
        summary.errors.timeout = 1;
        let row = lab_row("6 replicas", "calc 600/s", summary);
        let at = |name: &str| row[name].as_str();
        assert_eq!(
            [
                "2xx",
                "5xx",
                "502",
                "504",
                "transport errors",
                "reset",
                "timeout"
            ]
            .map(at),
            ["5", "3", "2", "1", "3", "2", "1"]
        );
    }

    #[test]
    fn the_lab_tables_rate_counts_ok_responses_not_closed_connections() {
        // A gunicorn sync worker closing pipelined connections: 1,000 completed in 10 s, of
        // which 400 answered 200 and 600 ended as `closed`.
        let mut summary = Summary::default();
        summary.throughput.rps = 100.0;
        summary.requests.completed = 1000;
        summary.requests.ok = 400;
        summary.requests.errors = 600;
        summary.errors.closed = 600;
        summary.status = [("200".to_string(), 400)].into();
        summary.requests.unfinished = 7;
        summary.requests.dropped = 3;
        let row = lab_row("python 1 replica", "ping -p 10", summary);
        let at = |name: &str| row[name].as_str();
        assert_eq!(
            [
                "ok/s",
                "requests",
                "2xx",
                "transport errors",
                "unfinished",
                "dropped"
            ]
            .map(at),
            ["40", "1000", "400", "600", "7", "3"]
        );
        let empty = Summary::default();
        assert_eq!(empty.ok_rps(), 0.0);
    }

    #[test]
    fn grpc_calls_failed_with_http_200_are_neither_transport_errors_nor_ok() {
        let mut summary = Summary::default();
        summary.throughput.rps = 100.0;
        summary.requests.completed = 1000;
        summary.requests.ok = 970;
        summary.requests.errors = 30;
        summary.status = [("200".to_string(), 1000)].into();
        summary.grpc = [("OK".to_string(), 970), ("UNAVAILABLE".to_string(), 30)].into();
        let row = lab_row("grpc", "Calc 100/s", summary);
        let at = |name: &str| row[name].as_str();
        assert_eq!(
            ["ok/s", "2xx", "transport errors", "grpc not ok"].map(at),
            ["97", "1000", "0", "30"]
        );
        let http = lab_row("http", "calc", Summary::default());
        assert_eq!(http["grpc not ok"], "-");
        let s = Summary {
            grpc: [("UNAVAILABLE".to_string(), 30), ("OK".to_string(), 970)].into(),
            ..Summary::default()
        };
        let text = crate::render_summary(&s);
        assert!(
            text.contains("  grpc         OK × 970  UNAVAILABLE × 30"),
            "{text}"
        );
        assert!(!crate::render_summary(&Summary::default()).contains("grpc"));
    }
}
