//! What the live dashboard shows while a run goes on: the seconds so far, drawn with the
//! report's charts, a status line, and the run's counters in Prometheus' text format (names in
//! docs/dashboard.md). Pure: the command serving it feeds [`Live::add`] once a second.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use loadlab_run::{
    ErrorKind, GrpcCode, Interval, LiveReading, NameOutcomes, ProcessSample, StoreSample,
    StreamReading, Summary, TimelineRow,
};
use serde::Serialize;

use crate::series::{self, Buckets, Family, Kind, Point, Value};

use crate::html::RunView;

/// The live page's template.
const PAGE: &str = include_str!("live.html");

/// Upper bounds of the latency histogram's buckets, seconds.
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Adds `outcomes` to name `name` of `totals`, growing it to hold the name.
fn add_outcomes(totals: &mut Vec<NameOutcomes>, name: usize, outcomes: &NameOutcomes) {
    if totals.len() <= name {
        totals.resize(name + 1, [0; 6]);
    }
    for (a, b) in totals[name].iter_mut().zip(outcomes) {
        *a += b;
    }
}

/// The run so far.
#[derive(Debug, Clone)]
pub struct Live {
    label: String,
    open: bool,
    rows: Vec<TimelineRow>,
    status: BTreeMap<u16, u64>,
    errors: [u64; ErrorKind::COUNT],
    /// gRPC calls by status, indexed by its number.
    grpc: [u64; loadlab_run::interval::GRPC_CODES],
    sent: u64,
    dropped: u64,
    offered: u64,
    latency: Histogram<u64>,
    service: Histogram<u64>,
    lag: Histogram<u64>,
    summary: Option<Summary>,
    /// The latest reading of each watched store, by name.
    stores: BTreeMap<String, StoreSample>,
    /// The latest reading of each watched process, by PID, with its command name.
    processes: BTreeMap<u32, (String, ProcessSample)>,
    /// Request names and methods, in the plan's order of names.
    names: Vec<(String, String)>,
    /// Outcomes so far per name of `names`.
    name_totals: Vec<NameOutcomes>,
    /// CPU time the generator's process has used, seconds.
    generator_cpu_s: f64,
}

/// Every family [`Live::families`] can hold, for the dashboard's check and the docs.
pub const FAMILIES: [&str; 26] = [
    "loadlab_responses_total",
    "loadlab_transport_errors_total",
    "loadlab_grpc_calls_total",
    "loadlab_requests_total",
    "loadlab_requests_sent_total",
    "loadlab_requests_dropped_total",
    "loadlab_arrivals_offered_total",
    "loadlab_in_flight",
    "loadlab_offered_rate",
    "loadlab_achieved_rate",
    "loadlab_users_active",
    "loadlab_instances",
    "loadlab_held_requests",
    "loadlab_generator_cpu_seconds_total",
    "loadlab_run_complete",
    "loadlab_latency_seconds",
    "loadlab_service_latency_seconds",
    "loadlab_schedule_lag_seconds",
    "loadlab_process_cpu_ratio",
    "loadlab_process_resident_bytes",
    "loadlab_store_commands_per_second",
    "loadlab_store_memory_bytes",
    "loadlab_store_clients",
    "loadlab_stream_length",
    "loadlab_stream_pending",
    "loadlab_stream_lag",
];

/// A point of one number.
fn point(labels: Vec<(&'static str, String)>, value: f64) -> Point {
    Point {
        labels,
        value: Value::Number(value),
    }
}

/// A latency histogram (µs) in [`BUCKETS_S`]'s buckets, seconds.
fn histogram(name: &'static str, help: &'static str, h: &Histogram<u64>) -> Family {
    let mut counts = Vec::with_capacity(BUCKETS_S.len() + 1);
    let mut below = 0;
    for le in BUCKETS_S {
        let upto = if h.is_empty() {
            0
        } else {
            h.count_between(0, (le * 1e6) as u64)
        };
        counts.push(upto.saturating_sub(below));
        below = upto.max(below);
    }
    counts.push(h.len().saturating_sub(below));
    let sum = if h.is_empty() {
        0.0
    } else {
        h.mean() * h.len() as f64 / 1e6
    };
    Family {
        name,
        help,
        unit: "s",
        kind: Kind::Histogram,
        points: vec![Point {
            labels: Vec::new(),
            value: Value::Histogram(Buckets {
                bounds: &BUCKETS_S,
                counts,
                sum,
                count: h.len(),
            }),
        }],
    }
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
            grpc: [0; loadlab_run::interval::GRPC_CODES],
            sent: 0,
            dropped: 0,
            offered: 0,
            latency: loadlab_run::new_histogram(),
            service: loadlab_run::new_histogram(),
            lag: loadlab_run::new_histogram(),
            summary: None,
            stores: BTreeMap::new(),
            processes: BTreeMap::new(),
            names: Vec::new(),
            name_totals: Vec::new(),
            generator_cpu_s: 0.0,
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
        for (all, n) in self.grpc.iter_mut().zip(iv.counts.grpc) {
            *all += n;
        }
        self.sent += iv.counts.sent;
        self.dropped += iv.counts.dropped;
        self.offered += iv.counts.offered;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&iv.latency);
        let _ = self.service.add(&iv.service);
        let _ = self.lag.add(&iv.lag);
        if self.names.len() == 1 && iv.by_name.is_empty() {
            // One name and a record without outcomes per name (the engine's older ones, a
            // Locust run's): the second's are its.
            let c = &iv.counts;
            let mut one = [0; 6];
            for (class, n) in one.iter_mut().take(5).enumerate() {
                *n = c.status_class(class + 1);
            }
            one[5] = c.error_kinds.iter().sum();
            add_outcomes(&mut self.name_totals, 0, &one);
        }
        for (name, outcomes) in iv.by_name.iter().enumerate() {
            add_outcomes(&mut self.name_totals, name, outcomes);
        }
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
        let grpc_failed: u64 = self.rows.iter().map(|r| r.grpc_failed).sum();
        Status {
            seconds: self.rows.len() as u64,
            completed: responses + transport,
            last_rps: last.map_or(0, |r| r.completed),
            last_p99_ms: last.map_or(0.0, |r| r.p99_ms),
            errors: bad + transport + grpc_failed,
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

    /// Keeps a watched store's or process's latest reading.
    pub fn read(&mut self, reading: LiveReading) {
        match reading {
            LiveReading::Store { name, sample } => {
                self.stores.insert(name, sample);
            }
            LiveReading::Process { pid, name, sample } => {
                self.processes.insert(pid, (name, sample));
            }
        }
    }

    /// The run's requests by name, as (name, method) in the plan's order of names: each
    /// second's outcomes per name are counted under these.
    pub fn with_names(mut self, names: Vec<(String, String)>) -> Self {
        self.names = names;
        self
    }

    /// Sets the CPU time the generator's process has used, seconds.
    pub fn set_generator_cpu(&mut self, seconds: f64) {
        self.generator_cpu_s = seconds;
    }

    /// The counters in Prometheus' text exposition format.
    pub fn metrics(&self) -> String {
        series::text(&self.families())
    }

    /// The run so far as metric families: the names `/metrics` shows and the exporters send
    /// (listed in [`FAMILIES`]).
    pub fn families(&self) -> Vec<Family> {
        let last = self.rows.last();
        let mut out = vec![
            Family {
                name: "loadlab_responses_total",
                help: "Responses received, by status code.",
                unit: "{response}",
                kind: Kind::Counter,
                points: self
                    .status
                    .iter()
                    .map(|(code, n)| point(vec![("status", code.to_string())], *n as f64))
                    .collect(),
            },
            Family {
                name: "loadlab_transport_errors_total",
                help: "Requests that ended in a transport error, by kind.",
                unit: "{request}",
                kind: Kind::Counter,
                points: ErrorKind::ALL
                    .iter()
                    .zip(self.errors)
                    .map(|(k, n)| point(vec![("kind", k.as_str().to_string())], n as f64))
                    .collect(),
            },
            Family {
                name: "loadlab_grpc_calls_total",
                help: "gRPC calls ended, by status (code).",
                unit: "{call}",
                kind: Kind::Counter,
                points: GrpcCode::all()
                    .zip(self.grpc)
                    .filter(|(_, n)| *n > 0)
                    .map(|(code, n)| point(vec![("code", code.name().to_string())], n as f64))
                    .collect(),
            },
            self.by_name(),
            Family::single(
                "loadlab_requests_sent_total",
                Kind::Counter,
                "{request}",
                "Requests written to a connection.",
                self.sent as f64,
            ),
            Family::single(
                "loadlab_requests_dropped_total",
                Kind::Counter,
                "{request}",
                "Requests never sent: no connection within their timeout.",
                self.dropped as f64,
            ),
            Family::single(
                "loadlab_arrivals_offered_total",
                Kind::Counter,
                "{arrival}",
                "Arrivals the open model scheduled.",
                self.offered as f64,
            ),
            Family::single(
                "loadlab_in_flight",
                Kind::Gauge,
                "{request}",
                "Requests in flight at the end of the last second.",
                last.map_or(0, |r| r.in_flight) as f64,
            ),
            Family::single(
                "loadlab_offered_rate",
                Kind::Gauge,
                "{arrival}/s",
                "Arrivals offered in the last second.",
                last.map_or(0, |r| r.offered) as f64,
            ),
            Family::single(
                "loadlab_achieved_rate",
                Kind::Gauge,
                "{request}/s",
                "Requests that ended in the last second.",
                last.map_or(0, |r| r.completed) as f64,
            ),
            Family::single(
                "loadlab_users_active",
                Kind::Gauge,
                "{user}",
                "Virtual users at the end of the last second.",
                last.map_or(0, |r| r.users_active) as f64,
            ),
            Family::single(
                "loadlab_generator_cpu_seconds_total",
                Kind::Counter,
                "s",
                "CPU time the generator's process has used.",
                self.generator_cpu_s,
            ),
            Family::single(
                "loadlab_run_complete",
                Kind::Gauge,
                "1",
                "1 once the run has ended.",
                f64::from(u8::from(self.summary.is_some())),
            ),
            histogram(
                "loadlab_latency_seconds",
                "Latency from each response's intended start (bucket edges exact to 3 significant digits).",
                &self.latency,
            ),
            histogram(
                "loadlab_service_latency_seconds",
                "Latency from each request's send (bucket edges exact to 3 significant digits).",
                &self.service,
            ),
            histogram(
                "loadlab_schedule_lag_seconds",
                "How late the open model's scheduler released each arrival.",
                &self.lag,
            ),
        ];
        if let Some((r, ready)) = last.and_then(|r| Some((r, r.replicas?))) {
            out.push(Family {
                name: "loadlab_instances",
                help: "An autoscaled topology's instances at the last second, by state.",
                unit: "{instance}",
                kind: Kind::Gauge,
                points: [
                    ("ready", Some(ready)),
                    ("desired", r.replicas_desired),
                    ("starting", r.replicas_starting),
                ]
                .into_iter()
                .filter_map(|(state, n)| Some(point(vec![("state", state.into())], n?.into())))
                .collect(),
            });
        }
        if let Some(held) = last.and_then(|r| r.held) {
            out.push(Family {
                name: "loadlab_held_requests",
                help: "Requests an autoscaled topology's balancer held at the last second, \
                       waiting for an instance with room.",
                unit: "{request}",
                kind: Kind::Gauge,
                points: vec![point(vec![], held.into())],
            });
        }
        out.extend(self.process_families());
        out.extend(self.store_families());
        out
    }

    /// `loadlab_requests_total` by name, method and status class (`1xx`–`5xx`, `error` for
    /// a transport error).
    fn by_name(&self) -> Family {
        let mut points = Vec::new();
        for ((name, method), outcomes) in self.names.iter().zip(&self.name_totals) {
            for (slot, n) in outcomes.iter().enumerate().filter(|(_, n)| **n > 0) {
                let class = match slot {
                    5 => "error".to_string(),
                    c => format!("{}xx", c + 1),
                };
                points.push(point(
                    vec![
                        ("name", name.clone()),
                        ("method", method.clone()),
                        ("status_class", class),
                    ],
                    *n as f64,
                ));
            }
        }
        Family {
            name: "loadlab_requests_total",
            help: "Requests that ended, by name, method and status class (error: no response).",
            unit: "{request}",
            kind: Kind::Counter,
            points,
        }
    }

    /// The watched processes' latest CPU and memory, by PID.
    fn process_families(&self) -> Vec<Family> {
        if self.processes.is_empty() {
            return Vec::new();
        }
        let labels =
            |pid: &u32, name: &String| vec![("pid", pid.to_string()), ("process", name.clone())];
        vec![
            Family {
                name: "loadlab_process_cpu_ratio",
                help: "CPU a watched process used in the last reading, in cores.",
                unit: "1",
                kind: Kind::Gauge,
                points: self
                    .processes
                    .iter()
                    .map(|(pid, (name, s))| point(labels(pid, name), s.cpu_pct / 100.0))
                    .collect(),
            },
            Family {
                name: "loadlab_process_resident_bytes",
                help: "Resident memory of a watched process.",
                unit: "By",
                kind: Kind::Gauge,
                points: self
                    .processes
                    .iter()
                    .map(|(pid, (name, s))| {
                        point(labels(pid, name), (s.rss_mb * 1024.0 * 1024.0).round())
                    })
                    .collect(),
            },
        ]
    }

    /// Each watched store's latest reading as gauges.
    fn store_families(&self) -> Vec<Family> {
        let store = |name: &str| vec![("store", name.to_string())];
        let stream =
            |name: &str, s: &str| vec![("store", name.to_string()), ("stream", s.to_string())];
        let gauge = |name, help, unit, points: Vec<Point>| Family {
            name,
            help,
            unit,
            kind: Kind::Gauge,
            points,
        };
        let each = |f: &dyn Fn(&str, &StoreSample) -> Vec<Point>| {
            self.stores
                .iter()
                .flat_map(|(n, r)| f(n, r))
                .collect::<Vec<_>>()
        };
        // One point per stream of every store, where `value` reads one.
        let streams = |value: &dyn Fn(&StreamReading) -> Option<f64>| {
            self.stores
                .iter()
                .flat_map(|(n, r)| {
                    r.streams
                        .iter()
                        .filter_map(move |q| value(q).map(|v| point(stream(n, &q.stream), v)))
                })
                .collect::<Vec<_>>()
        };
        let all = [
            gauge(
                "loadlab_store_commands_per_second",
                "Commands a watched store ran in the last second (the service's).",
                "{command}/s",
                each(&|n, r| vec![point(store(n), r.commands_per_s)]),
            ),
            gauge(
                "loadlab_store_memory_bytes",
                "Memory a watched store uses.",
                "By",
                each(&|n, r| vec![point(store(n), (r.memory_mb * 1024.0 * 1024.0).round())]),
            ),
            gauge(
                "loadlab_store_clients",
                "Clients connected to a watched store.",
                "{client}",
                each(&|n, r| vec![point(store(n), r.clients as f64)]),
            ),
            gauge(
                "loadlab_stream_length",
                "Entries in a watched stream.",
                "{entry}",
                streams(&|q| Some(q.length as f64)),
            ),
            gauge(
                "loadlab_stream_pending",
                "Entries delivered to a stream's consumer group and not acknowledged.",
                "{entry}",
                streams(&|q| Some(q.pending as f64)),
            ),
            gauge(
                "loadlab_stream_lag",
                "Entries not yet delivered to a stream's consumer group.",
                "{entry}",
                streams(&|q| q.lag.map(|lag| lag as f64)),
            ),
        ];
        all.into_iter().filter(|f| !f.points.is_empty()).collect()
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
    fn an_autoscaled_runs_instances_are_a_gauge_and_a_chart_as_they_change() {
        let mut live = Live::new("x", true);
        let iv = Interval::new(0);
        live.add(&TimelineRow::default(), &iv);
        assert!(!live.metrics().contains("loadlab_instances"));
        assert!(!live.charts_html().contains("instances"));
        for (second, ready, desired, starting, held) in
            [(1, 1, 1, 0, 0), (2, 1, 4, 3, 9), (3, 4, 4, 0, 1)]
        {
            let mut row = TimelineRow {
                second,
                ..TimelineRow::default()
            };
            row.set_instances(ready, desired, starting, held);
            live.add(&row, &iv);
            let m = live.metrics();
            assert!(m.contains("# TYPE loadlab_instances gauge"), "{m}");
            let line = format!("loadlab_held_requests {held}\n");
            assert!(m.contains(&line), "{line} in {m}");
            for (state, n) in [
                ("ready", ready),
                ("desired", desired),
                ("starting", starting),
            ] {
                let line = format!("loadlab_instances{{state=\"{state}\"}} {n}\n");
                assert!(m.contains(&line), "{line} in {m}");
            }
        }
        assert!(live.charts_html().contains("instances"));
    }

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
        let store = |sample| LiveReading::Store {
            name: "redis 127.0.0.1:1".into(),
            sample,
        };
        live.read(store(reading(100.0, 40)));
        live.read(store(reading(250.0, 7)));
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
