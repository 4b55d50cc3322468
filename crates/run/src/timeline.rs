//! One row per second of a run, as written to `timeline.csv`.

use std::io::{self, Write};

use crate::{ErrorKind, Interval};

/// What happened during one second of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    /// Second since the run's origin.
    pub second: u64,
    /// Arrivals scheduled (open model; 0 in the closed model).
    pub offered: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests ended.
    pub completed: u64,
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 5],
    /// Transport errors by kind, in [`ErrorKind::ALL`] order.
    pub error_kinds: [u64; ErrorKind::COUNT],
    /// Requests dropped before they could be sent.
    pub dropped: u64,
    /// Requests in flight at the end of the second.
    pub in_flight: u64,
    /// Median latency of the second's requests, ms.
    pub p50_ms: f64,
    /// 99th percentile latency of the second's requests, ms.
    pub p99_ms: f64,
    /// 99th percentile service latency of the second's requests, ms.
    pub service_p99_ms: f64,
    /// 99th percentile schedule lag, ms.
    pub lag_p99_ms: f64,
    /// CPU of the watched server processes this second, summed, percent of one core.
    pub server_cpu_pct: Option<f64>,
    /// Resident memory of the watched server processes this second, summed, MB.
    pub server_rss_mb: Option<f64>,
    /// Virtual users in a session at the end of the second.
    pub users_active: u64,
    /// 90th percentile latency of the second's requests, ms.
    pub p90_ms: f64,
    /// Highest latency of the second's requests, ms.
    pub max_ms: f64,
    /// Sessions started this second.
    pub users_started: u64,
    /// Sessions failed this second.
    pub users_failed: u64,
}

/// Error kinds whose columns sit between the status classes and `dropped`; kinds added later
/// get columns at the end of the line, so the columns of older files keep their positions.
const FIRST_KINDS: usize = 6;

pub(crate) fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl TimelineRow {
    /// Summarizes a merged interval.
    pub fn from_interval(iv: &Interval) -> Self {
        let c = &iv.counts;
        let pct = |h: &hdrhistogram::Histogram<u64>, q: f64| {
            if h.is_empty() {
                0.0
            } else {
                us_to_ms(h.value_at_quantile(q))
            }
        };
        TimelineRow {
            second: iv.second,
            offered: c.offered,
            sent: c.sent,
            completed: c.completed,
            status_classes: [1, 2, 3, 4, 5].map(|k| c.status_class(k)),
            error_kinds: c.error_kinds,
            dropped: c.dropped,
            in_flight: iv.in_flight,
            p50_ms: pct(&iv.latency, 0.5),
            p99_ms: pct(&iv.latency, 0.99),
            service_p99_ms: pct(&iv.service, 0.99),
            lag_p99_ms: pct(&iv.lag, 0.99),
            server_cpu_pct: None,
            server_rss_mb: None,
            users_active: iv.users_active,
            p90_ms: pct(&iv.latency, 0.9),
            max_ms: if iv.latency.is_empty() {
                0.0
            } else {
                us_to_ms(iv.latency.max())
            },
            users_started: c.users_started,
            users_failed: c.users_failed,
        }
    }

    /// The CSV header line, without a newline.
    pub fn csv_header() -> String {
        let mut h = String::from("second,offered,sent,completed,s1xx,s2xx,s3xx,s4xx,s5xx");
        for k in &ErrorKind::ALL[..FIRST_KINDS] {
            h.push(',');
            h.push_str(k.as_str());
        }
        h.push_str(",dropped,in_flight,p50_ms,p99_ms,service_p99_ms,lag_p99_ms");
        h.push_str(",server_cpu_pct,server_rss_mb,users_active,users_started,users_failed");
        h.push_str(",p90_ms,max_ms");
        for k in &ErrorKind::ALL[FIRST_KINDS..] {
            h.push(',');
            h.push_str(k.as_str());
        }
        h
    }

    /// Writes the row as one CSV line.
    pub fn write_csv(&self, w: &mut impl Write) -> io::Result<()> {
        write!(
            w,
            "{},{},{},{}",
            self.second, self.offered, self.sent, self.completed
        )?;
        let (first_kinds, later_kinds) = self.error_kinds.split_at(FIRST_KINDS);
        for n in self.status_classes.iter().chain(first_kinds) {
            write!(w, ",{n}")?;
        }
        write!(
            w,
            ",{},{},{:.3},{:.3},{:.3},{:.3}",
            self.dropped,
            self.in_flight,
            self.p50_ms,
            self.p99_ms,
            self.service_p99_ms,
            self.lag_p99_ms
        )?;
        let opt =
            |v: Option<f64>, digits: usize| v.map_or(String::new(), |x| format!("{x:.digits$}"));
        write!(
            w,
            ",{},{},{},{},{},{:.3},{:.3}",
            opt(self.server_cpu_pct, 1),
            opt(self.server_rss_mb, 2),
            self.users_active,
            self.users_started,
            self.users_failed,
            self.p90_ms,
            self.max_ms
        )?;
        for n in later_kinds {
            write!(w, ",{n}")?;
        }
        writeln!(w)
    }
}

impl TimelineRow {
    /// A row read back from `timeline.csv`: `value(column)` gives a column's number (NaN when
    /// empty or missing); columns a file lacks read as zero (or `None`).
    pub fn from_columns(value: impl Fn(&str) -> f64) -> Self {
        let n = |c: &str| {
            let v = value(c);
            if v.is_finite() && v >= 0.0 {
                v as u64
            } else {
                0
            }
        };
        let f = |c: &str| {
            let v = value(c);
            if v.is_finite() {
                v
            } else {
                0.0
            }
        };
        let o = |c: &str| Some(value(c)).filter(|v| v.is_finite());
        TimelineRow {
            second: n("second"),
            offered: n("offered"),
            sent: n("sent"),
            completed: n("completed"),
            status_classes: ["s1xx", "s2xx", "s3xx", "s4xx", "s5xx"].map(n),
            error_kinds: ErrorKind::ALL.map(|k| n(k.as_str())),
            dropped: n("dropped"),
            in_flight: n("in_flight"),
            p50_ms: f("p50_ms"),
            p99_ms: f("p99_ms"),
            service_p99_ms: f("service_p99_ms"),
            lag_p99_ms: f("lag_p99_ms"),
            server_cpu_pct: o("server_cpu_pct"),
            server_rss_mb: o("server_rss_mb"),
            users_active: n("users_active"),
            users_started: n("users_started"),
            users_failed: n("users_failed"),
            p90_ms: f("p90_ms"),
            max_ms: f("max_ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_row_has_as_many_fields_as_the_header() {
        let mut iv = Interval::new(3);
        iv.counts.record_status(200);
        iv.latency.record(1500).unwrap();
        let row = TimelineRow::from_interval(&iv);
        let mut out = Vec::new();
        row.write_csv(&mut out).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert_eq!(
            line.trim().split(',').count(),
            TimelineRow::csv_header().split(',').count()
        );
        assert!(line.starts_with("3,0,0,1,0,1,0,0,0,"));
        assert!((row.p50_ms - 1.5).abs() < 0.01);
    }
}
