//! The lab's HTML report: the experiment's comparisons drawn the way the seeds' reports drew
//! them (bars with their intervals per workload and per compared pair, latency spectra
//! overlaid per workload, latency against offered load for breaking-point searches), its
//! verdicts as sentences, and its cells, each linked to its own run report.

use hdrhistogram::Histogram;
use minijinja::{context, Environment, Value};
use serde::Serialize;

use loadlab_analyze::verdict::{lead_measure, CellResult, Interval, Reading, Verdict};

use crate::chart::{Bar, BarChart, Chart, Marker, Series, XScale};
use crate::html::{spectrum, spectrum_chart};
use loadlab_run::lab::LabCell;

/// The page's template (styles included).
const TEMPLATE: &str = include_str!("lab.html");

/// Width and height of each chart, pixels.
const CHART_SIZE: (u32, u32) = (920, 280);

/// What the lab's report is made from.
pub struct LabPage<'a> {
    /// The experiment's name.
    pub title: &'a str,
    /// Every cell, as run.
    pub cells: &'a [LabCell],
    /// What the verdicts read of each cell (same order as `cells`).
    pub results: &'a [CellResult],
    /// The verdicts.
    pub verdicts: &'a [Verdict],
    /// The compared workload pairs (baseline, variant).
    pub pairs: &'a [(String, String)],
    /// Each cell's whole-run latency histogram (µs), when its run directory has one (same
    /// order as `cells`).
    pub latency: Vec<Option<Histogram<u64>>>,
    /// Each cell's own report, relative to the page (same order as `cells`).
    pub links: Vec<Option<String>>,
}

/// Names in the order they first appear.
fn in_order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// How a measure is titled and in what unit.
fn measure_words(measure: &str) -> (&'static str, &'static str) {
    match measure {
        "breaking_point" => ("Breaking point", "req/s"),
        "throughput" => ("Throughput (successful responses)", "ok req/s"),
        "latency_p50" => ("Median latency", "ms"),
        "max_throughput" => ("The probe's top throughput", "req/s"),
        "service_time" => ("Service time alone", "ms"),
        "instance_seconds" => ("Instance-seconds paid for", "instance-s"),
        _ => ("p99 latency", "ms"),
    }
}

impl LabPage<'_> {
    fn topologies(&self) -> Vec<&str> {
        in_order(self.results.iter().map(|c| c.topology.as_str()))
    }

    fn workloads(&self) -> Vec<&str> {
        in_order(self.results.iter().map(|c| c.workload.as_str()))
    }

    /// The cells of `topology` × `workload` that count in the comparisons.
    fn side(&self, topology: &str, workload: &str) -> Vec<&CellResult> {
        self.results
            .iter()
            .filter(|c| c.topology == topology && c.workload == workload && c.excluded.is_none())
            .collect()
    }

    /// One bar: the geometric mean of a side's rounds with its 95 % interval (none from one
    /// round); `None` when no round has the figure.
    fn bar(&self, name: &str, cells: &[&CellResult], read: Reading) -> Option<Bar> {
        let values: Vec<f64> = cells.iter().filter_map(|c| read(&c.measured)).collect();
        let i = Interval::of_ratios(&values)?;
        Some(Bar {
            name: name.to_string(),
            value: i.ratio,
            low: i.low,
            high: i.high,
            note: match i.n {
                1 => "1 round".to_string(),
                n => format!("95 % interval {:.1}–{:.1} over {n} rounds", i.low, i.high),
            },
        })
    }

    /// Per workload, its lead figure per topology; per compared pair, both workloads' figure
    /// per topology.
    pub fn bar_charts(&self) -> Vec<BarChart> {
        let topologies = self.topologies();
        let mut out = Vec::new();
        for (k, w) in self.workloads().iter().enumerate() {
            let all: Vec<&CellResult> = topologies.iter().flat_map(|t| self.side(t, w)).collect();
            let Some((measure, read)) = lead_measure(&all) else {
                continue;
            };
            let bars: Vec<Bar> = topologies
                .iter()
                .filter_map(|t| self.bar(t, &self.side(t, w), read))
                .collect();
            let (title, unit) = measure_words(measure);
            out.push(BarChart {
                id: format!("bars-{k}"),
                title: format!("{title}: {w}, per topology"),
                y_label: unit.into(),
                groups: vec![(w.to_string(), bars)],
            });
        }
        for (k, (a, b)) in self.pairs.iter().enumerate() {
            let all: Vec<&CellResult> = topologies
                .iter()
                .flat_map(|t| self.side(t, a).into_iter().chain(self.side(t, b)))
                .collect();
            let Some((measure, read)) = lead_measure(&all) else {
                continue;
            };
            let groups = topologies
                .iter()
                .map(|t| {
                    let bars = [a, b]
                        .iter()
                        .filter_map(|w| self.bar(w, &self.side(t, w), read))
                        .collect();
                    (t.to_string(), bars)
                })
                .collect();
            let (title, unit) = measure_words(measure);
            out.push(BarChart {
                id: format!("pair-{k}"),
                title: format!("{title}: {a} against {b}"),
                y_label: unit.into(),
                groups,
            });
        }
        out
    }

    /// Per workload, each topology's latency by percentile, its rounds' histograms added.
    pub fn spectra(&self) -> Vec<Chart> {
        let topologies = self.topologies();
        let mut out = Vec::new();
        for (k, w) in self.workloads().iter().enumerate() {
            let series: Vec<Series> = topologies
                .iter()
                .filter_map(|t| {
                    let mut sum: Option<Histogram<u64>> = None;
                    for (i, c) in self.results.iter().enumerate() {
                        if c.topology != *t || c.workload != *w || c.excluded.is_some() {
                            continue;
                        }
                        let Some(Some(h)) = self.latency.get(i) else {
                            continue;
                        };
                        match &mut sum {
                            None => sum = Some(h.clone()),
                            Some(s) => {
                                let _ = s.add(h);
                            }
                        }
                    }
                    Some(Series::new(*t, spectrum(&sum?)))
                })
                .collect();
            out.push(spectrum_chart(
                &format!("spectrum-{k}"),
                &format!("Latency by percentile: {w} (rounds added)"),
                series,
            ));
        }
        out
    }

    /// Per breaking-point workload, each topology's p99 at every rate its first counted
    /// round's search measured, with the breaking point marked.
    pub fn capacity_curves(&self) -> Vec<Chart> {
        let topologies = self.topologies();
        let mut out = Vec::new();
        for (k, w) in self.workloads().iter().enumerate() {
            let mut series = Vec::new();
            let mut markers = Vec::new();
            for t in &topologies {
                let found = self.cells.iter().find(|c| {
                    c.topology == *t
                        && c.workload == *w
                        && c.excluded.is_none()
                        && c.capacity.as_ref().is_some_and(|p| !p.steps.is_empty())
                });
                let Some(point) = found.and_then(|c| c.capacity.as_ref()) else {
                    continue;
                };
                let mut steps: Vec<(f64, f64)> = point
                    .steps
                    .iter()
                    .map(|s| (s.rate_rps, s.p99_ms))
                    .filter(|(r, p)| r.is_finite() && p.is_finite())
                    .collect();
                steps.sort_by(|a, b| a.0.total_cmp(&b.0));
                if let Some(r) = point.max_rate_rps {
                    markers.push(Marker {
                        x: r,
                        series: series.len(),
                        label: format!("{t}: {r:.0}/s"),
                    });
                }
                series.push(Series::new(*t, steps));
            }
            if series.is_empty() {
                continue;
            }
            let slo = self
                .cells
                .iter()
                .find_map(|c| (c.workload == *w).then_some(c.capacity.as_ref()).flatten())
                .map(|p| p.slo.clone())
                .unwrap_or_default();
            out.push(Chart {
                id: format!("capacity-{k}"),
                title: format!("p99 against offered load: {w} (objective {slo})"),
                x_label: "offered req/s".into(),
                y_label: "p99 ms".into(),
                series,
                bands: Vec::new(),
                x_scale: XScale::Linear,
                y_log: true,
                markers,
                dots: true,
            });
        }
        out
    }
}

/// A verdict as the page lists it.
#[derive(Serialize)]
struct VerdictLine {
    differs: bool,
    head: String,
    why: String,
}

/// A row of the cells' table, with its link.
#[derive(Serialize)]
struct CellRow {
    fields: Vec<String>,
    link: Option<String>,
}

/// Renders the lab's report as one self-contained HTML document.
pub fn render_lab_html(page: &LabPage) -> String {
    let (w, h) = CHART_SIZE;
    let svg = |s: String| Value::from_safe_string(s);
    let bars: Vec<Value> = page
        .bar_charts()
        .iter()
        .map(|c| svg(c.to_svg(w, h)))
        .collect();
    let capacity: Vec<Value> = page
        .capacity_curves()
        .iter()
        .map(|c| svg(c.to_svg(w, h)))
        .collect();
    let spectra: Vec<Value> = page.spectra().iter().map(|c| svg(c.to_svg(w, h))).collect();
    let verdicts: Vec<VerdictLine> = page
        .verdicts
        .iter()
        .map(|v| VerdictLine {
            differs: v.differs,
            head: crate::verdicts::heading(v),
            why: v.why.clone(),
        })
        .collect();
    let rows: Vec<CellRow> = page
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| CellRow {
            fields: crate::lab_table::lab_fields(c),
            link: page.links.get(i).cloned().flatten(),
        })
        .collect();
    let mut env = Environment::new();
    env.add_template("lab.html", TEMPLATE)
        .expect("the lab template parses");
    env.get_template("lab.html")
        .and_then(|t| {
            t.render(context! {
                title => page.title,
                bars => bars,
                capacity => capacity,
                spectra => spectra,
                verdicts => Value::from(minijinja::value::Serde(&verdicts)),
                columns => crate::lab_table::LAB_COLUMNS,
                rows => Value::from(minijinja::value::Serde(&rows)),
                version => env!("CARGO_PKG_VERSION"),
            })
        })
        .expect("the lab template renders")
}

#[cfg(test)]
mod tests {
    use loadlab_analyze::verdict::Measured;

    use super::*;

    fn result(topology: &str, workload: &str, round: usize, measured: Measured) -> CellResult {
        CellResult {
            topology: topology.into(),
            processes: 1,
            cpus: None,
            cpu_ms_per_request: None,
            workload: workload.into(),
            round,
            measured,
            excluded: None,
            limits: Vec::new(),
            autoscale: None,
        }
    }

    fn cell(r: &CellResult) -> LabCell {
        LabCell {
            topology: r.topology.clone(),
            workload: r.workload.clone(),
            round: r.round,
            excluded: r.excluded.clone(),
            ..LabCell::default()
        }
    }

    fn closed(ok_rps: f64) -> Measured {
        Measured::Closed {
            ok_rps,
            p50_ms: 1.0,
            p99_ms: 2.0,
        }
    }

    #[test]
    fn bars_are_the_rounds_geometric_mean_per_topology_and_per_pair_and_skip_left_out_cells() {
        let mut results = vec![
            result("one", "a", 0, closed(100.0)),
            result("two", "a", 0, closed(200.0)),
            result("one", "b", 0, closed(50.0)),
            result("two", "b", 0, closed(100.0)),
            result("one", "a", 1, closed(400.0)),
            result("two", "a", 1, closed(800.0)),
            result("one", "b", 1, closed(50.0)),
            result("two", "b", 1, closed(1.0)),
        ];
        results[7].excluded = Some("replica 1 exited".into());
        let cells: Vec<LabCell> = results.iter().map(cell).collect();
        let pairs = [("a".to_string(), "b".to_string())];
        let page = LabPage {
            title: "t",
            cells: &cells,
            results: &results,
            verdicts: &[],
            pairs: &pairs,
            latency: vec![None; cells.len()],
            links: vec![None; cells.len()],
        };
        let charts = page.bar_charts();
        assert_eq!(charts.len(), 3, "a, b, and the pair");
        let a = &charts[0].groups[0].1;
        assert!((a[0].value - 200.0).abs() < 1e-9, "√(100 × 400)");
        assert!(a[0].low < 200.0 && a[0].high > 200.0);
        let b_two = &charts[1].groups[0].1[1];
        assert!(
            (b_two.value - 100.0).abs() < 1e-9,
            "one round left: {}",
            b_two.value
        );
        assert_eq!(
            (b_two.low, b_two.high),
            (b_two.value, b_two.value),
            "no interval"
        );
        assert_eq!(charts[2].groups.len(), 2, "a group per topology");
        assert_eq!(charts[2].groups[1].1.len(), 2, "both workloads");
        assert!(charts[2].title.contains("a against b"));
        let html = render_lab_html(&page);
        assert_eq!(html.matches("class=\"chart bars\"").count(), 3);
        assert!(html.contains("Nothing to compare"), "no verdicts given");
    }

    #[test]
    fn an_open_load_every_cell_kept_up_with_is_drawn_by_its_p99() {
        let open = |p99_ms| Measured::Open {
            offered_rps: 100.0,
            ok_rps: 100.0,
            p50_ms: 1.0,
            p99_ms,
        };
        let results = vec![
            result("one", "ping", 0, open(4.0)),
            result("two", "ping", 0, open(2.0)),
        ];
        let cells: Vec<LabCell> = results.iter().map(cell).collect();
        let page = LabPage {
            title: "t",
            cells: &cells,
            results: &results,
            verdicts: &[],
            pairs: &[],
            latency: vec![None; 2],
            links: vec![None; 2],
        };
        let charts = page.bar_charts();
        assert_eq!(charts[0].title, "p99 latency: ping, per topology");
        assert_eq!(charts[0].groups[0].1[0].value, 4.0);
        assert!(page.capacity_curves().is_empty());
    }
}
