//! Line charts as SVG: time series (requests per second, latency percentiles, errors, in-flight,
//! server CPU and memory) with phases shaded, and the latency percentile spectrum on
//! HdrHistogram's scale. One drawing for the HTML report, the live dashboard and `--plot`.
//!
//! Written by hand: the charts are few and simple, must be identical in a self-contained file,
//! a live page and an image, and a plotting crate would add a font stack to the build for text
//! that SVG leaves to the viewer.

use std::fmt::Write;

/// Colours of the series, in order (colour-blind-safe palette).
const PALETTE: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442", "#000000",
];

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Name in the legend (and the `data-series` attribute).
    pub name: String,
    /// Points (x, y), in x order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from its name and points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A shaded stretch of the x axis (a phase of the load).
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// Start.
    pub from: f64,
    /// End.
    pub to: f64,
    /// Label written at its top.
    pub label: String,
}

/// How the x axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XScale {
    /// Linear (seconds).
    Linear,
    /// Percentiles 0–100 drawn as `log10(1 / (1 − p))`, so 90, 99, 99.9 … are evenly spaced.
    Percentile,
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// `id` of the SVG element.
    pub id: String,
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Shaded stretches.
    pub bands: Vec<Band>,
    /// The x axis's scale.
    pub x_scale: XScale,
    /// Draw the y axis on a log scale.
    pub y_log: bool,
}

const MARGIN_LEFT: f64 = 64.0;
const MARGIN_RIGHT: f64 = 30.0;
const MARGIN_TOP: f64 = 48.0;
const MARGIN_BOTTOM: f64 = 44.0;
/// Most points drawn per series: beyond this, long runs are reduced per pixel column (the
/// lowest and highest point of each), so spikes stay visible. Only the drawing is reduced.
const MAX_DRAWN: usize = 1600;
/// Percentile axis limit (99.999).
const MAX_PERCENTILE: f64 = 99.999;

/// Escapes text for XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" step (1, 2 or 5 × 10^k) for about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick label without needless digits.
fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

fn percentile_x(p: f64) -> f64 {
    let p = p.clamp(0.0, MAX_PERCENTILE);
    (1.0 / (1.0 - p / 100.0)).log10()
}

/// The points to draw: at most `MAX_DRAWN`, each column's lowest and highest kept.
fn reduce(points: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    if points.len() <= MAX_DRAWN {
        return points.to_vec();
    }
    let per = points.len().div_ceil(columns.max(1));
    let mut out = Vec::with_capacity(2 * columns);
    for chunk in points.chunks(per) {
        let lo = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.extend([*lo, *hi]);
            } else {
                out.extend([*hi, *lo]);
            }
        }
    }
    out
}

impl Chart {
    /// Draws the chart as an SVG element `width` × `height` pixels.
    pub fn to_svg(&self, width: u32, height: u32) -> String {
        let (w, h) = (f64::from(width), f64::from(height));
        let (px0, px1) = (MARGIN_LEFT, w - MARGIN_RIGHT);
        let (py0, py1) = (h - MARGIN_BOTTOM, MARGIN_TOP);
        let xs = |x: f64| match self.x_scale {
            XScale::Linear => x,
            XScale::Percentile => percentile_x(x),
        };
        let ys = |y: f64| if self.y_log { y.max(1e-3).log10() } else { y };
        let finite: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| (xs(*x), ys(*y)))
            .collect();
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#,
            escape(&self.id)
        );
        let _ = write!(
            svg,
            r##"<rect width="{width}" height="{height}" fill="#ffffff"/><text x="{px0}" y="18" font-size="14" font-weight="bold">{}</text>"##,
            escape(&self.title)
        );
        if finite.is_empty() {
            let _ = write!(
                svg,
                r##"<text class="empty" x="{}" y="{}" text-anchor="middle" fill="#777">no data</text></svg>"##,
                w / 2.0,
                h / 2.0
            );
            return svg;
        }
        let (mut x_min, mut x_max) = finite
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.0), b.max(p.0))
            });
        match self.x_scale {
            XScale::Percentile => {
                x_min = 0.0;
                x_max = x_max.max(percentile_x(99.0));
            }
            // Time starts at the run's origin.
            XScale::Linear => x_min = x_min.min(0.0),
        }
        for b in &self.bands {
            x_min = x_min.min(xs(b.from));
            x_max = x_max.max(xs(b.to));
        }
        let y_hi = finite.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        let (y_min, mut y_max) = if self.y_log {
            let lo = finite.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            (lo.floor(), y_hi.ceil())
        } else {
            (0.0, y_hi * 1.08)
        };
        if y_max <= y_min {
            y_max = y_min + 1.0;
        }
        if x_max <= x_min {
            x_max = x_min + 1.0;
        }
        let sx = |x: f64| px0 + (x - x_min) / (x_max - x_min) * (px1 - px0);
        let sy = |y: f64| py0 - (y - y_min) / (y_max - y_min) * (py0 - py1);

        // Every other phase is shaded, so neighbours stay apart; each is labelled.
        for (i, b) in self.bands.iter().enumerate() {
            let (a, z) = (sx(xs(b.from)), sx(xs(b.to)));
            let fill = if i % 2 == 0 { "#f3f3f3" } else { "#ffffff" };
            let _ = write!(
                svg,
                r##"<g class="band"><rect x="{a:.1}" y="{py1}" width="{:.1}" height="{:.1}" fill="{fill}"/><line x1="{a:.1}" x2="{a:.1}" y1="{py1}" y2="{py0}" stroke="#cccccc" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" fill="#666" font-size="10">{}</text></g>"##,
                (z - a).max(0.0),
                py0 - py1,
                a + 3.0,
                py1 + 11.0 + 11.0 * (i % 2) as f64,
                escape(&b.label)
            );
        }
        // Y ticks and grid: decades on a log scale, round steps on a linear one.
        let y_ticks: Vec<(f64, f64)> = if self.y_log {
            let decades = (y_max - y_min).round().max(0.0) as usize;
            (0..=decades)
                .map(|k| (y_min + k as f64, 10f64.powf(y_min + k as f64)))
                .collect()
        } else {
            let step = nice_step(y_max - y_min, 5.0);
            let count = ((y_max + 1e-9) / step).floor().max(0.0) as usize;
            (0..=count)
                .map(|k| (k as f64 * step, k as f64 * step))
                .collect()
        };
        for (at, label) in y_ticks {
            let y = sy(at);
            let _ = write!(
                svg,
                r##"<line x1="{px0}" x2="{px1}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                px0 - 6.0,
                y + 4.0,
                tick_label(label)
            );
        }
        // X ticks.
        let x_ticks: Vec<(f64, String)> = match self.x_scale {
            XScale::Percentile => [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]
                .iter()
                .filter(|p| percentile_x(**p) <= x_max + 1e-9)
                .map(|p| (percentile_x(*p), format!("{p}%")))
                .collect(),
            XScale::Linear => {
                let step = nice_step(x_max - x_min, 8.0);
                let mut v = (x_min / step).ceil() * step;
                let mut out = Vec::new();
                while v <= x_max + 1e-9 {
                    out.push((v, tick_label(v)));
                    v += step;
                }
                out
            }
        };
        for (v, label) in x_ticks {
            let x = sx(v);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{py0}" y2="{}" stroke="#999"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                py0 + 4.0,
                py0 + 16.0,
                escape(&label)
            );
        }
        let _ = write!(
            svg,
            r##"<line x1="{px0}" x2="{px1}" y1="{py0}" y2="{py0}" stroke="#333"/><line x1="{px0}" x2="{px0}" y1="{py0}" y2="{py1}" stroke="#333"/><text x="{:.1}" y="{}" text-anchor="middle">{}</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            (px0 + px1) / 2.0,
            h - 8.0,
            escape(&self.x_label),
            (py0 + py1) / 2.0,
            escape(&self.y_label)
        );
        // Lines and legend.
        let columns = (px1 - px0) as usize;
        let mut legend_x = px0 + 200.0_f64.min((px1 - px0) / 3.0);
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let drawn = reduce(&s.points, columns);
            let mut d = String::new();
            for (k, (x, y)) in drawn
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .enumerate()
            {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if k == 0 { "M" } else { " L" },
                    sx(xs(*x)),
                    sy(ys(*y))
                );
            }
            let _ = write!(
                svg,
                r#"<path class="series" data-series="{}" data-points="{}" d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>"#,
                escape(&s.name),
                s.points.len()
            );
            let _ = write!(
                svg,
                r#"<g class="legend"><rect x="{legend_x:.1}" y="27" width="12" height="3" fill="{color}"/><text x="{:.1}" y="33">{}</text></g>"#,
                legend_x + 16.0,
                escape(&s.name)
            );
            legend_x += 24.0 + 6.5 * s.name.chars().count() as f64;
        }
        svg.push_str("</svg>");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            id: "rps".into(),
            title: "Requests <per> second".into(),
            x_label: "seconds".into(),
            y_label: "req/s".into(),
            series,
            bands: vec![Band {
                from: 0.0,
                to: 5.0,
                label: "warm & up".into(),
            }],
            x_scale: XScale::Linear,
            y_log: false,
        }
    }

    #[test]
    fn a_chart_has_one_path_per_series_with_its_name() {
        let svg = chart(vec![
            Series::new("offered", (0..10).map(|s| (s as f64, 100.0)).collect()),
            Series::new(
                "achieved",
                (0..10).map(|s| (s as f64, 90.0 + s as f64)).collect(),
            ),
        ])
        .to_svg(800, 300);
        assert!(svg.starts_with("<svg id=\"rps\""));
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
        assert!(svg.contains("data-series=\"offered\"") && svg.contains("data-points=\"10\""));
        assert!(svg.contains("Requests &lt;per&gt; second") && svg.contains("warm &amp; up"));
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn long_runs_are_reduced_for_drawing_only() {
        let mut points: Vec<(f64, f64)> = (0..100_000).map(|s| (s as f64, 1.0)).collect();
        points[54_321].1 = 500.0;
        let drawn = reduce(&points, 700);
        assert!(drawn.len() <= 2 * 700 + 2, "{}", drawn.len());
        assert!(drawn.iter().any(|p| p.1 == 500.0), "the spike survives");
        let svg = chart(vec![Series::new("long", points)]).to_svg(800, 300);
        assert!(svg.contains("data-points=\"100000\""));
    }

    #[test]
    fn empty_charts_say_so_and_spectra_use_percentile_ticks() {
        let svg = chart(vec![Series::new("none", Vec::new())]).to_svg(400, 200);
        assert!(svg.contains("no data"));
        let spectrum = Chart {
            x_scale: XScale::Percentile,
            y_log: true,
            ..chart(vec![Series::new(
                "latency",
                vec![(0.0, 1.0), (50.0, 2.0), (99.0, 30.0), (99.9, 200.0)],
            )])
        };
        let svg = spectrum.to_svg(800, 300);
        assert!(svg.contains(">99.9%<") && svg.contains(">90%<"));
        assert!((percentile_x(99.0) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(7.0, 8.0), 1.0);
        assert_eq!(tick_label(12_000.0), "12k");
        assert_eq!(tick_label(0.25), "0.25");
    }
}
