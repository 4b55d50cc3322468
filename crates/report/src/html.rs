//! The HTML report: one self-contained file (its styles inside, its charts inline SVG, nothing
//! fetched) rendered from one template, for one run or several overlaid on the same axes.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

use loadlab_run::{ProfileOutcome, RunData, SavedRun, ServerData, Summary, TimelineRow};
use minijinja::{context, Environment, Value};
use serde::Serialize;

use crate::chart::{Band, Chart, Series, XScale};

/// The report's template (styles included).
const TEMPLATE: &str = include_str!("report.html");

/// Width and height of each chart, pixels.
const CHART_SIZE: (u32, u32) = (920, 300);

/// One run as the report shows it.
#[derive(Debug, Clone)]
pub struct RunView {
    /// Its name on the charts and tables (a folder name, a lab cell).
    pub label: String,
    /// The summary.
    pub summary: Summary,
    /// The per-second timeline.
    pub rows: Vec<TimelineRow>,
    /// The watched processes, if any.
    pub server: Option<ServerData>,
    /// The whole run's latency histogram (µs), for the percentile spectrum.
    pub latency: Option<Histogram<u64>>,
    /// The service's profile (folded stacks and counts), when it was profiled.
    pub profile: Option<BTreeMap<String, u64>>,
}

impl RunView {
    /// A run read back from its directory.
    pub fn from_saved(label: &str, saved: &SavedRun) -> Self {
        RunView {
            label: label.to_string(),
            summary: saved.summary.clone(),
            rows: saved.timeline(),
            server: saved.server.clone(),
            latency: saved.latency.clone(),
            profile: saved.profile.clone(),
        }
    }

    /// A run just made.
    pub fn from_run(label: &str, run: &RunData, summary: &Summary) -> Self {
        RunView {
            label: label.to_string(),
            summary: summary.clone(),
            rows: run.timeline.clone(),
            server: run.server.clone(),
            latency: Some(run.totals.latency.clone()),
            profile: match &run.profile {
                Some(ProfileOutcome::Recorded(p)) => Some(p.stacks.clone()),
                _ => None,
            },
        }
    }
}

/// The series of `runs`, each named `name` (prefixed with the run's label when there are
/// several), from a per-second value.
fn per_second(
    runs: &[RunView],
    name: &str,
    value: impl Fn(&RunView, &TimelineRow) -> Option<f64>,
) -> Vec<Series> {
    runs.iter()
        .map(|r| {
            let points: Vec<(f64, f64)> = r
                .rows
                .iter()
                // A second's value is drawn at its middle, inside its phase's band.
                .filter_map(|row| value(r, row).map(|v| (row.second as f64 + 0.5, v)))
                .collect();
            Series::new(series_name(runs, r, name), points)
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn series_name(runs: &[RunView], r: &RunView, name: &str) -> String {
    if runs.len() > 1 {
        format!("{}: {name}", r.label)
    } else {
        name.to_string()
    }
}

/// Percentiles of a histogram for the spectrum: dense towards the tail, as HdrHistogram's
/// plotter draws it.
pub fn spectrum(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut p = 0.0;
    while p < 99.9999 {
        out.push((p, h.value_at_quantile(p / 100.0) as f64 / 1000.0));
        // Ten points per decade of 1/(1 − p).
        let tail = 100.0 - p;
        p = 100.0 - tail / 10f64.powf(0.1);
    }
    out.push((99.9999, h.max() as f64 / 1000.0));
    out
}

/// The first run's phases as shaded bands, when it has more than one.
fn phase_bands(runs: &[RunView]) -> Vec<Band> {
    runs.first()
        .filter(|r| r.summary.phases.len() > 1)
        .map(|r| {
            r.summary
                .phases
                .iter()
                .map(|p| Band {
                    from: p.start_s,
                    to: p.start_s + p.duration_s,
                    label: p.name.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Offered (open model) and achieved requests per second.
fn throughput_series(runs: &[RunView]) -> Vec<Series> {
    let mut throughput = per_second(runs, "offered", |r, row| {
        r.summary.throughput.offered_rps.map(|_| row.offered as f64)
    });
    throughput.extend(per_second(runs, "achieved", |_, row| {
        Some(row.completed as f64)
    }));
    throughput
}

/// Each second's p50, p90, p99 and maximum latency, over the seconds that had responses.
fn latency_series(runs: &[RunView]) -> Vec<Series> {
    let mut latency = Vec::new();
    for (name, get) in [
        (
            "p50",
            (|row: &TimelineRow| row.p50_ms) as fn(&TimelineRow) -> f64,
        ),
        ("p90", |row| row.p90_ms),
        ("p99", |row| row.p99_ms),
        ("max", |row| row.max_ms),
    ] {
        // Only seconds with responses have latencies (transport errors have none).
        latency.extend(per_second(runs, name, |_, row| {
            (row.status_classes.iter().sum::<u64>() > 0).then(|| get(row))
        }));
    }
    latency
}

/// Errors per second: each transport error kind, the 4xx and 5xx classes, and gRPC calls
/// failed by their status alone, that occurred.
fn error_series(runs: &[RunView]) -> Vec<Series> {
    let mut errors = Vec::new();
    for (k, kind) in loadlab_run::ErrorKind::ALL.iter().enumerate() {
        if runs
            .iter()
            .any(|r| r.rows.iter().any(|row| row.error_kinds[k] > 0))
        {
            errors.extend(per_second(runs, kind.as_str(), |_, row| {
                Some(row.error_kinds[k] as f64)
            }));
        }
    }
    for (class, label) in [(3, "4xx"), (4, "5xx")] {
        if runs
            .iter()
            .any(|r| r.rows.iter().any(|row| row.status_classes[class] > 0))
        {
            errors.extend(per_second(runs, label, |_, row| {
                Some(row.status_classes[class] as f64)
            }));
        }
    }
    if runs
        .iter()
        .any(|r| r.rows.iter().any(|row| row.grpc_failed > 0))
    {
        errors.extend(per_second(runs, "gRPC status", |_, row| {
            Some(row.grpc_failed as f64)
        }));
    }
    errors
}

/// An autoscaled topology's instances each second: ready, wanted and starting.
fn instance_series(runs: &[RunView]) -> Vec<Series> {
    let mut out = per_second(runs, "ready", |_, row| row.replicas.map(f64::from));
    out.extend(per_second(runs, "wanted", |_, row| {
        row.replicas_desired.map(f64::from)
    }));
    out.extend(per_second(runs, "starting", |_, row| {
        row.replicas_starting.map(f64::from)
    }));
    out
}

/// Requests in flight, virtual users in a session for runs of users, and the requests an
/// autoscaled topology's balancer held (part of those in flight, waiting for an instance).
fn in_flight_series(runs: &[RunView]) -> Vec<Series> {
    let mut in_flight = per_second(runs, "in flight", |_, row| Some(row.in_flight as f64));
    in_flight.extend(per_second(runs, "users", |r, row| {
        r.summary.users.as_ref().map(|_| row.users_active as f64)
    }));
    in_flight.extend(per_second(runs, "held at the balancer", |_, row| {
        row.held.map(f64::from)
    }));
    in_flight
}

/// Each watched process's CPU (% of a core) and resident memory (MB) per second.
fn process_series(runs: &[RunView]) -> (Vec<Series>, Vec<Series>) {
    let mut cpu = Vec::new();
    let mut rss = Vec::new();
    for r in runs {
        for p in r.server.iter().flat_map(|s| &s.processes) {
            let name = series_name(runs, r, &format!("{} {}", p.name, p.pid));
            cpu.push(Series::new(
                name.clone(),
                p.samples
                    .iter()
                    .map(|s| (s.second as f64 + 0.5, s.cpu_pct))
                    .collect(),
            ));
            rss.push(Series::new(
                name,
                p.samples
                    .iter()
                    .map(|s| (s.second as f64 + 0.5, s.rss_mb))
                    .collect(),
            ));
        }
    }
    (cpu, rss)
}

/// Each watched store's commands per second, and each of its streams' backlog (entries not
/// yet delivered plus entries not yet acknowledged).
fn store_series(runs: &[RunView]) -> (Vec<Series>, Vec<Series>) {
    let mut commands = Vec::new();
    let mut backlog = Vec::new();
    for r in runs {
        for st in r.server.iter().flat_map(|s| &s.stores) {
            let name = series_name(runs, r, &st.name);
            commands.push(Series::new(
                name.clone(),
                st.samples
                    .iter()
                    .map(|s| (s.second as f64 + 0.5, s.commands_per_s))
                    .collect(),
            ));
            let mut streams: Vec<&str> = Vec::new();
            for q in st.samples.iter().flat_map(|s| &s.streams) {
                if !streams.contains(&q.stream.as_str()) {
                    streams.push(&q.stream);
                }
            }
            for stream in streams {
                let points = st
                    .samples
                    .iter()
                    .filter_map(|s| {
                        let q = s.streams.iter().find(|q| q.stream == stream)?;
                        Some((
                            s.second as f64 + 0.5,
                            (q.lag.unwrap_or(0) + q.pending) as f64,
                        ))
                    })
                    .collect();
                backlog.push(Series::new(format!("{name} {stream}"), points));
            }
        }
    }
    (commands, backlog)
}

/// The report's charts for `runs`, overlaid on shared axes; phases of the first run shaded.
/// The load's four charts always; the service's (processes, budgets, stores) when it was
/// watched; the latency spectrum last.
pub fn charts(runs: &[RunView]) -> Vec<Chart> {
    let bands = phase_bands(runs);
    let chart = |id: &str, title: &str, y: &str, series: Vec<Series>| Chart {
        id: id.into(),
        title: title.into(),
        x_label: "seconds".into(),
        y_label: y.into(),
        series,
        bands: bands.clone(),
        x_scale: XScale::Linear,
        y_log: false,
        markers: Vec::new(),
        dots: false,
    };
    let mut out = vec![
        chart(
            "throughput",
            "Requests per second",
            "req/s",
            throughput_series(runs),
        ),
        chart(
            "latency",
            "Latency from the intended start, per second",
            "ms",
            latency_series(runs),
        ),
        chart(
            "errors",
            "Errors per second, by kind and status class",
            "per second",
            error_series(runs),
        ),
        chart(
            "in-flight",
            "Requests in flight",
            "requests",
            in_flight_series(runs),
        ),
    ];
    let instances = instance_series(runs);
    if !instances.is_empty() {
        // Beside the load it answered: the requests' rate and latency charts come first.
        out.insert(
            1,
            chart(
                "instances",
                "Instances of the autoscaled topology (its 429s are with the errors, the \
                 requests it held with those in flight)",
                "instances",
                instances,
            ),
        );
    }
    let (cpu, rss) = process_series(runs);
    if !cpu.is_empty() {
        out.push(chart(
            "server-cpu",
            "Server CPU, per process",
            "% of a core",
            cpu,
        ));
        out.push(chart("server-rss", "Server memory, per process", "MB", rss));
    }
    let (quota, throttled, memory) = budget_series(runs);
    if !quota.is_empty() {
        out.push(chart(
            "budget-cpu",
            "CPU against each budget's quota, per second",
            "% of its quota",
            quota,
        ));
        out.push(chart(
            "budget-throttled",
            "CFS periods throttled (the quota used up before the period ended)",
            "% of periods",
            throttled,
        ));
    }
    if !memory.is_empty() {
        out.push(chart(
            "budget-memory",
            "Memory charged to each budget, with its limit",
            "MB",
            memory,
        ));
    }
    let (commands, backlog) = store_series(runs);
    if !commands.is_empty() {
        out.push(chart(
            "store-commands",
            "Store commands per second (the service's, not the sampler's)",
            "per second",
            commands,
        ));
    }
    if !backlog.is_empty() {
        out.push(chart(
            "queue-backlog",
            "Queue backlog: entries not yet delivered or not yet acknowledged",
            "entries",
            backlog,
        ));
    }
    let spectra: Vec<Series> = runs
        .iter()
        .filter_map(|r| {
            let h = r.latency.as_ref()?;
            Some(Series::new(series_name(runs, r, "latency"), spectrum(h)))
        })
        .collect();
    out.push(spectrum_chart(
        "spectrum",
        "Latency by percentile (whole run)",
        spectra,
    ));
    out
}

/// The budgeted groups' series: CPU as a share of the quota and throttled periods (groups
/// with a quota), and memory with a flat line at the limit (groups with one).
fn budget_series(runs: &[RunView]) -> (Vec<Series>, Vec<Series>, Vec<Series>) {
    let (mut quota, mut throttled, mut memory) = (Vec::new(), Vec::new(), Vec::new());
    for r in runs {
        for g in r.server.iter().flat_map(|s| &s.groups) {
            let name = series_name(runs, r, &g.name);
            let at = |s: &loadlab_run::GroupSample| s.second as f64 + 0.5;
            if let Some(cpus) = g.cpus.filter(|c| *c > 0.0) {
                quota.push(Series::new(
                    name.clone(),
                    g.samples
                        .iter()
                        .map(|s| (at(s), s.cpu_pct / cpus))
                        .collect(),
                ));
                throttled.push(Series::new(
                    name.clone(),
                    g.samples.iter().map(|s| (at(s), s.throttled_pct)).collect(),
                ));
            }
            memory.push(Series::new(
                name.clone(),
                g.samples.iter().map(|s| (at(s), s.memory_mb)).collect(),
            ));
            if let Some(limit) = g.memory_bytes {
                let mb = limit as f64 / (1024.0 * 1024.0);
                memory.push(Series::new(
                    format!("{name} limit"),
                    g.samples.iter().map(|s| (at(s), mb)).collect(),
                ));
            }
        }
    }
    (quota, throttled, memory)
}

/// A chart of latency spectra: percentiles on HdrHistogram's axis, milliseconds on a log one.
pub(crate) fn spectrum_chart(id: &str, title: &str, series: Vec<Series>) -> Chart {
    Chart {
        id: id.into(),
        title: title.into(),
        x_label: "percentile".into(),
        y_label: "ms".into(),
        series,
        bands: Vec::new(),
        x_scale: XScale::Percentile,
        y_log: true,
        markers: Vec::new(),
        dots: false,
    }
}

/// What the template shows of one run.
#[derive(Serialize)]
struct RunContext<'a> {
    label: &'a str,
    headline: String,
    s: &'a Summary,
    statuses: String,
    grpc: Option<String>,
    /// Streaming gRPC calls' messages, when the run made any.
    grpc_streams: Option<String>,
    errors: String,
    timings: Option<String>,
    tls: Option<String>,
    http2: Option<String>,
    /// The run's flame graph as a self-contained `srcdoc` (escaped SVG), when profiled.
    flame: Option<String>,
}

/// An SVG made safe as an iframe's `srcdoc` attribute: the flame graph keeps its own script
/// (search, zoom) apart from the report's.
fn srcdoc(svg: &str) -> String {
    svg.replace('&', "&amp;").replace('"', "&quot;")
}

/// Renders the report of `runs` (one run, or several to compare) as one HTML document.
pub fn render_html(title: &str, runs: &[RunView]) -> String {
    let mut env = Environment::new();
    env.add_template("report.html", TEMPLATE)
        .expect("the report template parses");
    let charts: Vec<Value> = charts(runs)
        .iter()
        .map(|c| {
            let (w, h) = CHART_SIZE;
            Value::from_safe_string(c.to_svg(w, h))
        })
        .collect();
    let views: Vec<RunContext> = runs
        .iter()
        .map(|r| RunContext {
            label: &r.label,
            headline: crate::headline(&r.summary),
            s: &r.summary,
            statuses: r
                .summary
                .status
                .iter()
                .map(|(c, n)| format!("{c} × {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            grpc: crate::grpc_line(&r.summary),
            grpc_streams: crate::grpc_streams_line(&r.summary),
            errors: r
                .summary
                .errors
                .by_kind()
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            timings: crate::timings_line(&r.summary),
            tls: crate::tls_line(&r.summary),
            http2: crate::http2_line(&r.summary),
            flame: r
                .profile
                .as_ref()
                .and_then(|p| crate::flame::flame_svg(&r.label, p).ok())
                .map(|svg| srcdoc(&svg)),
        })
        .collect();
    // Two profiled runs: where the CPU moved from the first to the second.
    let diff = match runs {
        [a, b] => match (&a.profile, &b.profile) {
            (Some(pa), Some(pb)) => {
                crate::flame::diff_svg(&format!("{} → {}", a.label, b.label), pa, pb)
                    .ok()
                    .map(|svg| srcdoc(&svg))
            }
            _ => None,
        },
        _ => None,
    };
    env.get_template("report.html")
        .and_then(|t| {
            t.render(context! {
                title => title,
                runs => Value::from(minijinja::value::Serde(&views)),
                charts => charts,
                diff => diff,
                version => env!("CARGO_PKG_VERSION"),
            })
        })
        .expect("the report template renders")
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use loadlab_run::{Interval, Model, Plan, RatePhase, RunData, Stop};

    use super::*;

    /// A run of `secs` seconds at 100 req/s; `errors` makes every request a reset instead.
    fn run(secs: u64, errors: bool) -> (RunData, Summary) {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let model = Model::open_phases(
            vec![
                RatePhase::constant("warm", 100.0, Some(Duration::from_secs(secs / 2))),
                RatePhase::constant("hot", 100.0, Some(Duration::from_secs(secs - secs / 2))),
            ],
            1,
            10,
        );
        let plan = Plan::get(addr, "/x", model, Stop::default());
        let seconds: Vec<Interval> = (0..secs)
            .map(|s| {
                let mut iv = Interval::new(s);
                for i in 0..100u64 {
                    iv.counts.offered += 1;
                    iv.counts.sent += 1;
                    if errors {
                        iv.counts.record_error(loadlab_run::ErrorKind::Reset);
                    } else {
                        iv.counts.record_status(200);
                        iv.latency.record(1000 + 10 * i).unwrap();
                    }
                }
                iv
            })
            .collect();
        let run = RunData::from_intervals(plan, &seconds);
        let summary = Summary::from_run(&run);
        (run, summary)
    }

    #[test]
    fn a_report_has_every_chart_with_its_series_and_the_tables() {
        let (r, s) = run(10, false);
        let html = render_html("ping", &[RunView::from_run("ping", &r, &s)]);
        for id in ["throughput", "latency", "errors", "in-flight", "spectrum"] {
            assert!(html.contains(&format!("<svg id=\"{id}\"")), "{id}");
        }
        for series in ["offered", "achieved", "p50", "p90", "p99", "max", "latency"] {
            assert!(
                html.contains(&format!("data-series=\"{series}\"")),
                "{series}"
            );
        }
        assert!(html.contains("<td>warm</td>") && html.contains("<td>hot</td>"));
        assert!(
            !html.contains("http://") || !html.contains("src=\"http"),
            "nothing fetched"
        );
        assert!(
            html.contains("no data"),
            "no errors: the errors chart says so"
        );
    }

    #[test]
    fn budgeted_groups_get_charts_of_their_quota_throttling_and_memory_against_the_limit() {
        let (mut r, s) = run(4, false);
        let samples = (0..4)
            .map(|second| loadlab_run::GroupSample {
                second,
                cpu_pct: 24.0,
                throttled_pct: 40.0,
                memory_mb: 10.0 * (second + 1) as f64,
            })
            .collect();
        r.server = Some(ServerData {
            groups: vec![loadlab_run::GroupSeries {
                name: "replica 1".into(),
                cpus: Some(0.25),
                memory_bytes: Some(64 << 20),
                samples,
                ..Default::default()
            }],
            ..Default::default()
        });
        let html = render_html("budgets", &[RunView::from_run("budgets", &r, &s)]);
        for id in ["budget-cpu", "budget-throttled", "budget-memory"] {
            assert!(html.contains(&format!("<svg id=\"{id}\"")), "{id}");
        }
        for series in ["replica 1", "replica 1 limit"] {
            assert!(
                html.contains(&format!("data-series=\"{series}\"")),
                "{series}"
            );
        }
        // 24 % of a core on a 0.25 CPU quota is 96 % of it.
        let (quota, _, memory) = budget_series(&[RunView::from_run("budgets", &r, &s)]);
        assert_eq!(quota[0].points[0].1, 96.0);
        assert_eq!(memory[1].points[0].1, 64.0);
    }

    #[test]
    fn an_autoscaled_run_gets_a_chart_of_its_instances_after_the_throughput() {
        let (plain, ps) = run(4, false);
        let html = render_html("plain", &[RunView::from_run("plain", &plain, &ps)]);
        assert!(
            !html.contains("<svg id=\"instances\""),
            "no instances without autoscaling"
        );
        let (mut r, s) = run(4, false);
        for row in &mut r.timeline {
            let (second, held) = (row.second as u32, [0, 7, 2, 0][row.second as usize]);
            row.set_instances(1 + second / 2, 3, 2 - second / 2, held);
        }
        let view = RunView::from_run("scaled", &r, &s);
        let charts = charts(std::slice::from_ref(&view));
        assert_eq!(charts[1].id, "instances");
        let ready = &charts[1].series[0];
        assert_eq!(
            ready.points,
            vec![(0.5, 1.0), (1.5, 1.0), (2.5, 2.0), (3.5, 2.0)]
        );
        // The requests held at the balancer are drawn with those in flight.
        let in_flight = charts.iter().find(|c| c.id == "in-flight").unwrap();
        let held = in_flight
            .series
            .iter()
            .find(|s| s.name == "held at the balancer")
            .expect("a series of held requests");
        assert_eq!(
            held.points,
            vec![(0.5, 0.0), (1.5, 7.0), (2.5, 2.0), (3.5, 0.0)]
        );
        let html = render_html("scaled", &[view]);
        for series in ["ready", "wanted", "starting", "held at the balancer"] {
            assert!(
                html.contains(&format!("data-series=\"{series}\"")),
                "{series}"
            );
        }
    }

    #[test]
    fn a_run_of_only_errors_and_an_overlay_of_two_runs_render() {
        let (bad, bs) = run(4, true);
        let html = render_html("errors", &[RunView::from_run("bad", &bad, &bs)]);
        assert!(html.contains("data-series=\"reset\""));
        assert!(html.contains("reset × 400"));
        let (good, gs) = run(6, false);
        let html = render_html(
            "two",
            &[
                RunView::from_run("good", &good, &gs),
                RunView::from_run("bad", &bad, &bs),
            ],
        );
        assert!(html.contains("data-series=\"good: achieved\""));
        assert!(html.contains("data-series=\"bad: achieved\""));
        assert_eq!(html.matches("<section class=\"run\"").count(), 2);
    }

    #[test]
    fn the_spectrum_runs_from_the_median_region_to_the_tail() {
        let mut h = loadlab_run::new_histogram();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let s = spectrum(&h);
        assert_eq!(s[0].0, 0.0);
        assert!(s.iter().any(|(p, _)| (*p - 99.0).abs() < 0.01));
        assert!(s.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 >= w[0].1));
        assert!((s.last().unwrap().1 - 10.0).abs() < 0.01, "{:?}", s.last());
    }
}
