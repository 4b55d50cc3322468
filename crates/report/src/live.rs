//! What the live dashboard shows while a run goes on: the seconds so far, drawn with the
//! report's charts, a status line, and the run's counters in Prometheus' text format (names in
//! docs/dashboard.md). Pure: the command serving it feeds [`Live::add`] once a second.

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;
use loadlab_run::{ErrorKind, Interval, StoreSample, Summary, TimelineRow};
use serde::Serialize;

use crate::html::RunView;

/// The live page's template.
const PAGE: &str = include_str!("live.html");

/// Upper bounds of the latency histogram's buckets, seconds.
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The run so far.
#[derive(Debug, Clone)]
pub struct Live {
    label: String,
    open: bool,
    rows: Vec<TimelineRow>,
    status: BTreeMap<u16, u64>,
    errors: [u64; ErrorKind::COUNT],
    sent: u64,
    dropped: u64,
    offered: u64,
    latency: Histogram<u64>,
    summary: Option<Summary>,
    /// The latest reading of each watched store, by name.
    stores: BTreeMap<String, StoreSample>,
}

/// The status line the page polls.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Seconds recorded so far.
    pub seconds: u64,
    /// Requests ended so far.
    pub completed: u64,
    /// Completed requests in the last second.
    pub last_rps: u64,
    /// p99 of the last second, ms.
    pub last_p99_ms: f64,
    /// Requests that ended badly so far (4xx/5xx and transport errors).
    pub errors: u64,
    /// True once the run has ended.
    pub done: bool,
}

impl Live {
    /// An empty record of a run called `label`, `open` when it has an offered rate.
    pub fn new(label: &str, open: bool) -> Self {
        Live {
            label: label.to_string(),
            open,
            rows: Vec::new(),
            status: BTreeMap::new(),
            errors: [0; ErrorKind::COUNT],
            sent: 0,
            dropped: 0,
            offered: 0,
            latency: loadlab_run::new_histogram(),
            summary: None,
            stores: BTreeMap::new(),
        }
    }

    /// Adds a finished second.
    pub fn add(&mut self, row: &TimelineRow, iv: &Interval) {
        self.rows.push(row.clone());
        for (code, n) in iv.counts.statuses() {
            *self.status.entry(code).or_default() += n;
        }
        for (all, n) in self.errors.iter_mut().zip(iv.counts.error_kinds) {
            *all += n;
        }
        self.sent += iv.counts.sent;
        self.dropped += iv.counts.dropped;
        self.offered += iv.counts.offered;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&iv.latency);
    }

    /// Marks the run as ended, with its summary.
    pub fn finish(&mut self, summary: Summary) {
        self.summary = Some(summary);
    }

    /// The status line.
    pub fn status(&self) -> Status {
        let last = self.rows.last();
        let responses: u64 = self.status.values().sum();
        let bad: u64 = self
            .status
            .iter()
            .filter(|(c, _)| **c >= 400)
            .map(|(_, n)| n)
            .sum();
        let transport: u64 = self.errors.iter().sum();
        Status {
            seconds: self.rows.len() as u64,
            completed: responses + transport,
            last_rps: last.map_or(0, |r| r.completed),
            last_p99_ms: last.map_or(0.0, |r| r.p99_ms),
            errors: bad + transport,
            done: self.summary.is_some(),
        }
    }

    /// The charts so far, as an HTML fragment of inline SVGs.
    pub fn charts_html(&self) -> String {
        let view = RunView {
            label: self.label.clone(),
            summary: self
                .summary
                .clone()
                .unwrap_or_else(|| self.interim_summary()),
            rows: self.rows.clone(),
            server: None,
            latency: Some(self.latency.clone()),
            profile: None,
        };
        crate::html::charts(std::slice::from_ref(&view))
            .iter()
            .map(|c| c.to_svg(920, 260))
            .collect()
    }

    /// A summary that only carries what the charts read before the run's own exists.
    fn interim_summary(&self) -> Summary {
        let mut s = Summary::default();
        s.throughput.offered_rps = self.open.then_some(0.0);
        s
    }

    /// Keeps store `name`'s latest reading for `/metrics`.
    pub fn set_store(&mut self, name: &str, sample: &StoreSample) {
        self.stores.insert(name.to_string(), sample.clone());
    }

    /// The counters in Prometheus' text exposition format.
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family(
            "loadlab_responses_total",
            "counter",
            "Responses received, by status code.",
        );
        let mut lines = String::new();
        for (code, n) in &self.status {
            let _ = writeln!(lines, "loadlab_responses_total{{status=\"{code}\"}} {n}");
        }
        out.push_str(&lines);
        let mut family = |name: &str, kind: &str, help: &str, body: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            out.push_str(&body);
        };
        let mut errors = String::new();
        for (k, n) in ErrorKind::ALL.iter().zip(self.errors) {
            let _ = writeln!(
                errors,
                "loadlab_transport_errors_total{{kind=\"{}\"}} {n}",
                k.as_str()
            );
        }
        family(
            "loadlab_transport_errors_total",
            "counter",
            "Requests that ended in a transport error, by kind.",
            errors,
        );
        family(
            "loadlab_requests_sent_total",
            "counter",
            "Requests written to a connection.",
            format!("loadlab_requests_sent_total {}\n", self.sent),
        );
        family(
            "loadlab_requests_dropped_total",
            "counter",
            "Requests never sent: no connection within their timeout.",
            format!("loadlab_requests_dropped_total {}\n", self.dropped),
        );
        family(
            "loadlab_arrivals_offered_total",
            "counter",
            "Arrivals the open model scheduled.",
            format!("loadlab_arrivals_offered_total {}\n", self.offered),
        );
        let last = self.rows.last();
        family(
            "loadlab_in_flight",
            "gauge",
            "Requests in flight at the end of the last second.",
            format!("loadlab_in_flight {}\n", last.map_or(0, |r| r.in_flight)),
        );
        family(
            "loadlab_offered_rate",
            "gauge",
            "Arrivals offered in the last second.",
            format!("loadlab_offered_rate {}\n", last.map_or(0, |r| r.offered)),
        );
        family(
            "loadlab_users_active",
            "gauge",
            "Virtual users at the end of the last second.",
            format!(
                "loadlab_users_active {}\n",
                last.map_or(0, |r| r.users_active)
            ),
        );
        family(
            "loadlab_run_complete",
            "gauge",
            "1 once the run has ended.",
            format!(
                "loadlab_run_complete {}\n",
                u8::from(self.summary.is_some())
            ),
        );
        let mut hist = String::new();
        let h = &self.latency;
        for le in BUCKETS_S {
            let count = if h.is_empty() {
                0
            } else {
                h.count_between(0, (le * 1e6) as u64)
            };
            let _ = writeln!(
                hist,
                "loadlab_latency_seconds_bucket{{le=\"{le}\"}} {count}"
            );
        }
        let _ = writeln!(
            hist,
            "loadlab_latency_seconds_bucket{{le=\"+Inf\"}} {}",
            h.len()
        );
        let sum = if h.is_empty() {
            0.0
        } else {
            h.mean() * h.len() as f64 / 1e6
        };
        let _ = writeln!(hist, "loadlab_latency_seconds_sum {sum}");
        let _ = writeln!(hist, "loadlab_latency_seconds_count {}", h.len());
        family(
            "loadlab_latency_seconds",
            "histogram",
            "Latency from each response's intended start (bucket edges exact to 3 significant digits).",
            hist,
        );
        if !self.stores.is_empty() {
            let mut gauges: [(&str, &str, String); 6] = [
                (
                    "loadlab_store_commands_per_second",
                    "Commands a watched store ran in the last second (the service's).",
                    String::new(),
                ),
                (
                    "loadlab_store_memory_bytes",
                    "Memory a watched store uses.",
                    String::new(),
                ),
                (
                    "loadlab_store_clients",
                    "Clients connected to a watched store.",
                    String::new(),
                ),
                (
                    "loadlab_stream_length",
                    "Entries in a watched stream.",
                    String::new(),
                ),
                (
                    "loadlab_stream_pending",
                    "Entries delivered to a stream's consumer group and not acknowledged.",
                    String::new(),
                ),
                (
                    "loadlab_stream_lag",
                    "Entries not yet delivered to a stream's consumer group.",
                    String::new(),
                ),
            ];
            for (store, r) in &self.stores {
                let store = store.replace('"', "'");
                let _ = writeln!(
                    gauges[0].2,
                    "{}{{store=\"{store}\"}} {}",
                    gauges[0].0, r.commands_per_s
                );
                let _ = writeln!(
                    gauges[1].2,
                    "{}{{store=\"{store}\"}} {}",
                    gauges[1].0,
                    (r.memory_mb * 1024.0 * 1024.0).round()
                );
                let _ = writeln!(
                    gauges[2].2,
                    "{}{{store=\"{store}\"}} {}",
                    gauges[2].0, r.clients
                );
                for q in &r.streams {
                    let labels = format!(
                        "store=\"{store}\",stream=\"{}\"",
                        q.stream.replace('"', "'")
                    );
                    let _ = writeln!(gauges[3].2, "{}{{{labels}}} {}", gauges[3].0, q.length);
                    let _ = writeln!(gauges[4].2, "{}{{{labels}}} {}", gauges[4].0, q.pending);
                    if let Some(lag) = q.lag {
                        let _ = writeln!(gauges[5].2, "{}{{{labels}}} {lag}", gauges[5].0);
                    }
                }
            }
            for (name, help, body) in gauges {
                if !body.is_empty() {
                    family(name, "gauge", help, body);
                }
            }
        }
        out
    }

    /// The dashboard's page; `title` names the run.
    pub fn page(title: &str) -> String {
        let mut env = minijinja::Environment::new();
        env.add_template("live.html", PAGE)
            .expect("the live template parses");
        env.get_template("live.html")
            .and_then(|t| t.render(minijinja::context! { title => title }))
            .expect("the live template renders")
    }
}

#[cfg(test)]
mod tests {
    use loadlab_run::StreamReading;

    use super::*;

    #[test]
    fn a_watched_stores_latest_reading_is_a_set_of_gauges() {
        let mut live = Live::new("x", false);
        assert!(!live.metrics().contains("loadlab_store_"));
        let reading = |commands_per_s: f64, lag: u64| StoreSample {
            second: 3,
            commands_per_s,
            memory_mb: 2.0,
            clients: 5,
            streams: vec![StreamReading {
                stream: "visits".into(),
                length: 900,
                pending: 12,
                lag: Some(lag),
            }],
        };
        live.set_store("redis 127.0.0.1:1", &reading(100.0, 40));
        live.set_store("redis 127.0.0.1:1", &reading(250.0, 7));
        let m = live.metrics();
        assert!(
            m.contains("# TYPE loadlab_store_commands_per_second gauge"),
            "{m}"
        );
        assert!(
            m.contains("loadlab_store_commands_per_second{store=\"redis 127.0.0.1:1\"} 250\n"),
            "{m}"
        );
        assert!(m.contains("loadlab_store_memory_bytes{store=\"redis 127.0.0.1:1\"} 2097152\n"));
        assert!(m.contains("loadlab_stream_lag{store=\"redis 127.0.0.1:1\",stream=\"visits\"} 7\n"));
        assert!(m.contains(
            "loadlab_stream_pending{store=\"redis 127.0.0.1:1\",stream=\"visits\"} 12\n"
        ));
    }
}
