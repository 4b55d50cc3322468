//! One second of a run: what the engine counts ([`Counts`], latency histograms, in an
//! [`Interval`]) and the row of `timeline.csv` it becomes ([`TimelineRow`]).

use std::io::{self, Write};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error_kind::ErrorKind;
use crate::grpc_code::GrpcCode;

/// Highest latency a histogram holds, in microseconds (one hour); longer values are clamped.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 1 µs to one hour, three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant bounds are valid")
}

/// Number of distinct status codes counted (000–999; httparse accepts any three digits).
const STATUS_SLOTS: usize = 1000;

/// Number of gRPC status codes (`grpc-status` 0, `OK`, to 16, `UNAUTHENTICATED`).
pub const GRPC_CODES: usize = GrpcCode::COUNT;

/// Request counters for one interval or a whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Requests whose bytes were written (or whose connect was attempted).
    pub sent: u64,
    /// Requests that ended, with a response or a transport error.
    pub completed: u64,
    /// Responses with a status below 400; for gRPC calls, those that ended `OK` (HTTP 200
    /// and `grpc-status` 0).
    pub ok: u64,
    /// Requests never sent: they could not get a connection within their timeout.
    pub dropped: u64,
    /// Arrivals scheduled by the open model.
    pub offered: u64,
    /// Response bytes read, headers included.
    pub bytes: u64,
    /// Responses by status code.
    #[serde(with = "sparse_status")]
    pub status: Vec<u64>,
    /// Responses that refused their request (429, or 503 with `Retry-After`): the service
    /// said no rather than serving it.
    pub refused: u64,
    /// Transport errors by kind, indexed by [`ErrorKind::index`].
    pub error_kinds: [u64; ErrorKind::COUNT],
    /// Virtual-user sessions started.
    pub users_started: u64,
    /// Sessions that ran to their end.
    pub users_completed: u64,
    /// Sessions ended early by an error, a failed expectation or a failed capture.
    pub users_failed: u64,
    /// gRPC calls by the status they ended with (`grpc-status`), indexed by its number; all
    /// zero, and left out of records, for plans that make no gRPC call.
    #[serde(default, skip_serializing_if = "no_grpc")]
    pub grpc: [u64; GRPC_CODES],
}

/// Whether no gRPC call was counted.
fn no_grpc(grpc: &[u64; GRPC_CODES]) -> bool {
    grpc.iter().all(|n| *n == 0)
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            sent: 0,
            completed: 0,
            ok: 0,
            dropped: 0,
            offered: 0,
            bytes: 0,
            status: vec![0; STATUS_SLOTS],
            refused: 0,
            error_kinds: [0; ErrorKind::COUNT],
            users_started: 0,
            users_completed: 0,
            users_failed: 0,
            grpc: [0; GRPC_CODES],
        }
    }
}

impl Counts {
    /// Counts one response with the given status.
    #[inline]
    pub fn record_status(&mut self, status: u16) {
        self.completed += 1;
        if status < 400 {
            self.ok += 1;
        }
        self.status[usize::from(status) % STATUS_SLOTS] += 1;
    }

    /// Counts one gRPC call answered with HTTP status `http_status` and gRPC status `code`: it
    /// is a success only when both say so.
    #[inline]
    pub fn record_grpc(&mut self, http_status: u16, code: GrpcCode) {
        self.completed += 1;
        if http_status == 200 && code == GrpcCode::OK {
            self.ok += 1;
        }
        self.status[usize::from(http_status) % STATUS_SLOTS] += 1;
        self.grpc[code.number()] += 1;
    }

    /// gRPC statuses that occurred, with their counts, in the order of their numbers.
    pub fn grpc_codes(&self) -> impl Iterator<Item = (GrpcCode, u64)> + '_ {
        GrpcCode::all()
            .zip(&self.grpc)
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code, *n))
    }

    /// Counts one request that ended in a transport error.
    #[inline]
    pub fn record_error(&mut self, kind: ErrorKind) {
        self.completed += 1;
        self.error_kinds[kind.index()] += 1;
    }

    /// Requests that ended without a successful status: HTTP errors plus transport errors.
    pub fn errors(&self) -> u64 {
        self.completed - self.ok
    }

    /// Counts one gRPC call that ended in a transport error: as that error, and under `code`,
    /// the status a gRPC client gives it.
    #[inline]
    pub fn record_grpc_error(&mut self, kind: ErrorKind, code: GrpcCode) {
        self.record_error(kind);
        self.grpc[code.number()] += 1;
    }

    /// Transport errors of every kind.
    pub fn transport_errors(&self) -> u64 {
        self.error_kinds.iter().sum()
    }

    /// Responses whose status is in `class` (1 for 1xx … 5xx).
    pub fn status_class(&self, class: usize) -> u64 {
        self.status[class * 100..(class + 1) * 100].iter().sum()
    }

    /// Status codes that occurred, with their counts, in ascending order.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code as u16, *n))
    }

    /// Adds another set of counts to this one.
    pub fn add(&mut self, other: &Counts) {
        self.sent += other.sent;
        self.completed += other.completed;
        self.ok += other.ok;
        self.dropped += other.dropped;
        self.offered += other.offered;
        self.bytes += other.bytes;
        self.refused += other.refused;
        self.users_started += other.users_started;
        self.users_completed += other.users_completed;
        self.users_failed += other.users_failed;
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
        for (a, b) in self.error_kinds.iter_mut().zip(&other.error_kinds) {
            *a += b;
        }
        for (a, b) in self.grpc.iter_mut().zip(&other.grpc) {
            *a += b;
        }
    }
}

/// Serde for the responses by status code: the codes that occurred, with their counts.
mod sparse_status {
    use std::collections::BTreeMap;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(status: &[u64], s: S) -> Result<S::Ok, S::Error> {
        let codes: BTreeMap<usize, u64> = status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code, *n))
            .collect();
        codes.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let mut status = vec![0; super::STATUS_SLOTS];
        for (code, n) in BTreeMap::<usize, u64>::deserialize(d)? {
            let slot = status
                .get_mut(code)
                .ok_or_else(|| D::Error::custom(format!("status {code} is not three digits")))?;
            *slot = n;
        }
        Ok(status)
    }
}

/// What one generator thread (or all of them, merged) saw during one second of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// Second of the run this interval covers, counted from the run's origin.
    pub second: u64,
    /// Request counters.
    pub counts: Counts,
    /// Latency from the intended start, µs.
    #[serde(with = "crate::hlog::as_encoded")]
    pub latency: Histogram<u64>,
    /// Latency from the actual send, µs.
    #[serde(with = "crate::hlog::as_encoded")]
    pub service: Histogram<u64>,
    /// How late the open-model scheduler released each arrival, µs.
    #[serde(with = "crate::hlog::as_encoded")]
    pub lag: Histogram<u64>,
    /// Requests in flight (sent, not ended) when the interval closed.
    pub in_flight: u64,
    /// Virtual users in a session when the interval closed.
    pub users_active: u64,
    /// Outcomes per request name, indexed as the plan's names (`Plan::request_names`):
    /// responses by status class (1xx to 5xx), then transport errors. Empty when the plan
    /// has one name.
    pub by_name: Vec<NameOutcomes>,
    /// The sampled requests that ended in the interval, as client spans (`--trace-sample`);
    /// not recorded (a run keeps the slowest in [`crate::trace::TraceRecord`]).
    #[serde(skip)]
    pub spans: Vec<crate::trace::ClientSpan>,
}

/// One request name's outcomes in an interval: responses by status class (1xx to 5xx), then
/// transport errors.
pub type NameOutcomes = [u64; 6];

/// Adds one outcome (`slot`: status class 0–4, or 5 for a transport error) of name `name` to
/// `by_name`, growing it to hold the name.
#[inline]
pub fn count_outcome(by_name: &mut Vec<NameOutcomes>, name: usize, slot: usize) {
    if by_name.len() <= name {
        by_name.resize(name + 1, [0; 6]);
    }
    by_name[name][slot.min(5)] += 1;
}

impl Interval {
    /// An empty interval for `second`.
    pub fn new(second: u64) -> Self {
        Interval {
            second,
            counts: Counts::default(),
            latency: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
            in_flight: 0,
            users_active: 0,
            by_name: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// Adds another thread's interval (or a later interval, for totals) into this one.
    pub fn merge(&mut self, other: &Interval) {
        self.counts.add(&other.counts);
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
        self.service
            .add(&other.service)
            .expect("histograms share bounds");
        self.lag.add(&other.lag).expect("histograms share bounds");
        self.in_flight += other.in_flight;
        self.users_active += other.users_active;
        for (name, outcomes) in other.by_name.iter().enumerate() {
            if self.by_name.len() <= name {
                self.by_name.resize(name + 1, [0; 6]);
            }
            for (a, b) in self.by_name[name].iter_mut().zip(outcomes) {
                *a += b;
            }
        }
        self.spans.extend(other.spans.iter().cloned());
    }

    /// Empties the interval for reuse as `second`, keeping its allocations.
    pub fn reset(&mut self, second: u64) {
        self.second = second;
        self.counts = Counts::default();
        self.latency.reset();
        self.service.reset();
        self.lag.reset();
        self.in_flight = 0;
        self.users_active = 0;
        self.by_name.iter_mut().for_each(|n| *n = [0; 6]);
        self.spans.clear();
    }
}

/// What happened during one second of a run.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// Sessions that ran to their end this second.
    pub users_completed: u64,
    /// gRPC calls that failed with an HTTP status below 400 (a `grpc-status` other than
    /// `OK`): the failures the status classes do not show, so that the second's errors are
    /// `s4xx + s5xx` + transport errors + this.
    pub grpc_failed: u64,
    /// An autoscaled topology's ready instances this second.
    pub replicas: Option<u32>,
    /// The instances its autoscaler wanted.
    pub replicas_desired: Option<u32>,
    /// Its instances started and not ready yet.
    pub replicas_starting: Option<u32>,
    /// Requests its balancer held at the second's end, waiting for an instance with room
    /// (`container_concurrency`) or for the first one to start (scale from zero).
    pub held: Option<u32>,
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
            users_completed: c.users_completed,
            // Only calls count: an HTTP response past 599 is not ok either, and no gRPC call.
            grpc_failed: if no_grpc(&c.grpc) {
                0
            } else {
                c.errors()
                    .saturating_sub(c.status_class(4) + c.status_class(5) + c.transport_errors())
            },
            replicas: None,
            replicas_desired: None,
            replicas_starting: None,
            held: None,
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
        h.push_str(",users_completed,grpc_failed,replicas,replicas_desired,replicas_starting,held");
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
        let count = |v: Option<u32>| v.map_or(String::new(), |n| n.to_string());
        writeln!(
            w,
            ",{},{},{},{},{},{}",
            self.users_completed,
            self.grpc_failed,
            count(self.replicas),
            count(self.replicas_desired),
            count(self.replicas_starting),
            count(self.held)
        )
    }
}

impl TimelineRow {
    /// Sets an autoscaled topology's second: its instances ready, wanted and starting, and the
    /// requests its balancer held.
    pub fn set_instances(&mut self, ready: u32, desired: u32, starting: u32, held: u32) {
        self.replicas = Some(ready);
        self.replicas_desired = Some(desired);
        self.replicas_starting = Some(starting);
        self.held = Some(held);
    }

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
            users_completed: n("users_completed"),
            grpc_failed: n("grpc_failed"),
            p90_ms: f("p90_ms"),
            max_ms: f("max_ms"),
            replicas: o("replicas").map(|v| v as u32),
            replicas_desired: o("replicas_desired").map(|v| v as u32),
            replicas_starting: o("replicas_starting").map(|v| v as u32),
            held: o("held").map(|v| v as u32),
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

    #[test]
    fn a_grpc_call_succeeds_only_on_http_200_and_ok_and_counts_under_its_status() {
        let mut c = Counts::default();
        c.record_grpc(200, GrpcCode::OK);
        c.record_grpc(200, GrpcCode::from_number(14));
        c.record_grpc(503, GrpcCode::OK);
        c.record_grpc(200, GrpcCode::from_number(99));
        assert_eq!((c.completed, c.ok, c.errors()), (4, 1, 3));
        assert_eq!((c.grpc[0], c.grpc[14], c.grpc[2]), (2, 1, 1));
        assert_eq!(c.status[200], 3);
        let mut total = Counts::default();
        total.add(&c);
        total.add(&c);
        assert_eq!(total.grpc[14], 2);
        let mut iv = Interval::new(0);
        iv.counts = c.clone();
        iv.counts.record_status(404);
        let row = TimelineRow::from_interval(&iv);
        assert_eq!(
            (
                row.status_classes[1],
                row.status_classes[3],
                row.grpc_failed
            ),
            (3, 1, 2),
            "the 503 is a 5xx; the UNAVAILABLE and UNKNOWN answered 200 are what the classes miss"
        );
        let mut http = Interval::new(0);
        http.counts.record_status(200);
        http.counts.record_status(601);
        assert_eq!(TimelineRow::from_interval(&http).grpc_failed, 0);
        let names: Vec<_> = c.grpc_codes().map(|(code, n)| (code.name(), n)).collect();
        assert_eq!(names, [("OK", 2), ("UNKNOWN", 1), ("UNAVAILABLE", 1)]);
        // Records of calls keep the statuses; records of HTTP requests do not mention them,
        // and read back as before.
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"grpc\":[2,0,1,"), "{json}");
        assert_eq!(serde_json::from_str::<Counts>(&json).unwrap(), c);
        let mut http = Counts::default();
        http.record_status(200);
        let json = serde_json::to_string(&http).unwrap();
        assert!(!json.contains("grpc"), "{json}");
        assert_eq!(serde_json::from_str::<Counts>(&json).unwrap(), http);
    }

    #[test]
    fn status_500_counts_as_an_error_and_under_its_code() {
        let mut c = Counts::default();
        c.record_status(200);
        c.record_status(500);
        c.record_error(ErrorKind::Reset);
        assert_eq!(c.completed, 3);
        assert_eq!(c.ok, 1);
        assert_eq!(c.errors(), 2);
        assert_eq!(c.transport_errors(), 1);
        assert_eq!(c.statuses().collect::<Vec<_>>(), vec![(200, 1), (500, 1)]);
        assert_eq!(c.status_class(5), 1);
    }

    #[test]
    fn merging_intervals_adds_counts_and_histograms() {
        let mut a = Interval::new(0);
        let mut b = Interval::new(0);
        a.latency.record(100).unwrap();
        b.latency.record(300).unwrap();
        a.counts.record_status(200);
        b.counts.record_status(204);
        a.merge(&b);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.counts.ok, 2);
        assert_eq!(a.latency.max(), 300);
    }
}
