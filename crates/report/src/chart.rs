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

/// A marked place on the x axis (a breaking point), in the colour of the series it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Where, on the x axis.
    pub x: f64,
    /// The series (by index) whose colour it takes.
    pub series: usize,
    /// Label written beside it.
    pub label: String,
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
    /// Vertical marks (breaking points).
    pub markers: Vec<Marker>,
    /// Draw each point as a dot on its line (few points that each are a measurement).
    pub dots: bool,
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

/// Height of one row of the legend, pixels.
const LEGEND_ROW: u32 = 16;

/// Width a legend entry takes, pixels (its swatch, its text at the chart's font size, a gap).
fn legend_width(name: &str) -> f64 {
    28.0 + 6.2 * name.chars().count() as f64
}

/// Rows the legend of `names` needs in `width` pixels (0 without names).
fn legend_rows<'a>(names: impl Iterator<Item = &'a str>, width: f64) -> u32 {
    let mut rows = 0;
    let mut used = f64::INFINITY;
    for name in names {
        let need = legend_width(name);
        if used + need > width {
            rows += 1;
            used = 0.0;
        }
        used += need;
    }
    rows
}

/// Writes the legend of `names` (coloured as the series, in order) in rows under the plot,
/// which starts at `top`, between `left` and `right`, so no name is cut off.
fn legend<'a>(
    svg: &mut String,
    names: impl Iterator<Item = &'a str>,
    left: f64,
    right: f64,
    top: f64,
) {
    let (mut x, mut y) = (left, top - 4.0);
    for (i, name) in names.enumerate() {
        let need = legend_width(name);
        if i == 0 || x + need > right {
            x = left;
            y += f64::from(LEGEND_ROW);
        }
        let color = PALETTE[i % PALETTE.len()];
        let _ = write!(
            svg,
            r#"<g class="legend"><rect x="{x:.1}" y="{:.1}" width="12" height="8" fill="{color}"/><text x="{:.1}" y="{y:.1}">{}</text></g>"#,
            y - 8.0,
            x + 16.0,
            escape(name)
        );
        x += need;
    }
}

/// An SVG element's opening, its white background and its title: `width` × `height` pixels.
fn svg_start(id: &str, class: &str, title: &str, (width, height): (u32, u32)) -> String {
    format!(
        r##"<svg id="{}" class="{class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11"><rect width="{width}" height="{height}" fill="#ffffff"/><text x="{MARGIN_LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"##,
        escape(id),
        escape(title)
    )
}

/// A y tick at pixel height `y`: its grid line across the plot (`left` to `right`) and its
/// label `value` on the left.
fn y_tick(svg: &mut String, (left, right): (f64, f64), y: f64, value: f64) {
    let _ = write!(
        svg,
        r##"<line x1="{left}" x2="{right}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
        left - 6.0,
        y + 4.0,
        tick_label(value)
    );
}

/// Ends `svg` with "no data" in the middle of a `w` × `h` plot.
fn no_data(mut svg: String, w: f64, h: f64) -> String {
    let _ = write!(
        svg,
        r##"<text class="empty" x="{}" y="{}" text-anchor="middle" fill="#777">no data</text></svg>"##,
        w / 2.0,
        h / 2.0
    );
    svg
}

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

/// Where a chart's plot area sits, in pixels, and the ranges of data its axes span: the
/// mapping from a point's values to its place in the SVG.
struct Frame {
    /// Left and right edges of the plot area.
    px: (f64, f64),
    /// Bottom and top edges of the plot area (y grows downwards in SVG).
    py: (f64, f64),
    /// The x axis's range, on its scale.
    x: (f64, f64),
    /// The y axis's range, on its scale (decades when it is logarithmic).
    y: (f64, f64),
    x_scale: XScale,
    y_log: bool,
}

impl Frame {
    /// A value of the x axis on its scale.
    fn xs(&self, x: f64) -> f64 {
        match self.x_scale {
            XScale::Linear => x,
            XScale::Percentile => percentile_x(x),
        }
    }

    /// A value of the y axis on its scale.
    fn ys(&self, y: f64) -> f64 {
        if self.y_log {
            y.max(1e-3).log10()
        } else {
            y
        }
    }

    /// The pixel column of a value already on the x scale.
    fn sx(&self, x: f64) -> f64 {
        let ((px0, px1), (x_min, x_max)) = (self.px, self.x);
        px0 + (x - x_min) / (x_max - x_min) * (px1 - px0)
    }

    /// The pixel row of a value already on the y scale.
    fn sy(&self, y: f64) -> f64 {
        let ((py0, py1), (y_min, y_max)) = (self.py, self.y);
        py0 - (y - y_min) / (y_max - y_min) * (py0 - py1)
    }

    /// Where a data point is drawn.
    fn at(&self, (x, y): (f64, f64)) -> (f64, f64) {
        (self.sx(self.xs(x)), self.sy(self.ys(y)))
    }
}

impl Chart {
    /// The plot area of a `w` × `h` chart and the ranges its axes span: every finite point and
    /// band inside, time from the origin, percentiles from 0 to 99 at least, a linear y axis
    /// from 0 with 8 % headroom. `None` when no point is finite.
    fn frame(&self, w: f64, h: f64) -> Option<Frame> {
        let mut frame = Frame {
            px: (MARGIN_LEFT, w - MARGIN_RIGHT),
            py: (h - MARGIN_BOTTOM, MARGIN_TOP),
            x: (0.0, 1.0),
            y: (0.0, 1.0),
            x_scale: self.x_scale,
            y_log: self.y_log,
        };
        let finite: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| (frame.xs(*x), frame.ys(*y)))
            .collect();
        if finite.is_empty() {
            return None;
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
            x_min = x_min.min(frame.xs(b.from));
            x_max = x_max.max(frame.xs(b.to));
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
        frame.x = (x_min, x_max);
        frame.y = (y_min, y_max);
        Some(frame)
    }

    /// Draws the chart as an SVG element `width` × `height` pixels (taller by the rows its
    /// legend needs).
    pub fn to_svg(&self, width: u32, height: u32) -> String {
        let (w, h) = (f64::from(width), f64::from(height));
        let (px0, px1) = (MARGIN_LEFT, w - MARGIN_RIGHT);
        let rows = legend_rows(self.series.iter().map(|s| s.name.as_str()), px1 - px0);
        let mut svg = svg_start(
            &self.id,
            "chart",
            &self.title,
            (width, height + LEGEND_ROW * rows),
        );
        let Some(frame) = self.frame(w, h) else {
            return no_data(svg, w, h);
        };
        self.draw_bands(&mut svg, &frame);
        self.draw_axes(&mut svg, &frame, h);
        self.draw_series(&mut svg, &frame);
        self.draw_markers(&mut svg, &frame);
        legend(
            &mut svg,
            self.series.iter().map(|s| s.name.as_str()),
            px0,
            px1,
            h,
        );
        svg.push_str("</svg>");
        svg
    }

    /// The phases: every other one shaded, so neighbours stay apart; each labelled.
    fn draw_bands(&self, svg: &mut String, frame: &Frame) {
        let (py0, py1) = frame.py;
        for (i, b) in self.bands.iter().enumerate() {
            let (a, z) = (frame.sx(frame.xs(b.from)), frame.sx(frame.xs(b.to)));
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
    }

    /// Ticks, grid, the two axes and their labels: decades on a log y axis, round steps on a
    /// linear one; percentiles 90, 99, 99.9 … on a spectrum's x axis.
    fn draw_axes(&self, svg: &mut String, frame: &Frame, h: f64) {
        let ((px0, px1), (py0, py1)) = (frame.px, frame.py);
        let ((x_min, x_max), (y_min, y_max)) = (frame.x, frame.y);
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
            y_tick(svg, (px0, px1), frame.sy(at), label);
        }
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
            let x = frame.sx(v);
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
    }

    /// Each series as a path in its colour (reduced to the plot's pixel columns), with a dot
    /// on each point when the chart asks for dots.
    fn draw_series(&self, svg: &mut String, frame: &Frame) {
        let columns = (frame.px.1 - frame.px.0) as usize;
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let drawn = reduce(&s.points, columns);
            let mut d = String::new();
            for (k, point) in drawn
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .enumerate()
            {
                let (x, y) = frame.at(*point);
                let _ = write!(d, "{}{x:.1},{y:.1}", if k == 0 { "M" } else { " L" });
                if self.dots {
                    let _ = write!(
                        svg,
                        r#"<circle class="dot" cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"/>"#
                    );
                }
            }
            let _ = write!(
                svg,
                r#"<path class="series" data-series="{}" data-points="{}" d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>"#,
                escape(&s.name),
                s.points.len()
            );
        }
    }

    /// The markers: a dashed line in its series' colour, labelled on the side with room.
    fn draw_markers(&self, svg: &mut String, frame: &Frame) {
        let ((px0, px1), (py0, py1)) = (frame.px, frame.py);
        for (k, m) in self.markers.iter().enumerate() {
            if !m.x.is_finite() {
                continue;
            }
            let color = PALETTE[m.series % PALETTE.len()];
            let x = frame.sx(frame.xs(m.x));
            let (text_x, anchor) = if x > (px0 + px1) / 2.0 {
                (x - 3.0, "end")
            } else {
                (x + 3.0, "start")
            };
            let _ = write!(
                svg,
                r##"<g class="marker" data-x="{}"><line x1="{x:.1}" x2="{x:.1}" y1="{py1}" y2="{py0}" stroke="{color}" stroke-width="1.4" stroke-dasharray="5 3"/><text x="{:.1}" y="{:.1}" fill="{color}" font-size="10" text-anchor="{anchor}">{}</text></g>"##,
                m.x,
                text_x,
                py1 + 11.0 + 11.0 * (k % 3) as f64,
                escape(&m.label)
            );
        }
    }
}

/// One bar: a value with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What it is (a topology, a workload); bars of one name share a colour.
    pub name: String,
    /// Its height.
    pub value: f64,
    /// The interval's ends, drawn as a whisker when they differ from the value.
    pub low: f64,
    /// See `low`.
    pub high: f64,
    /// What the bar's label says under it (e.g. "×3 rounds").
    pub note: String,
}

/// Bars side by side in groups, each with its interval: one configuration's figure against
/// another's, the seeds' reports' way.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// `id` of the SVG element.
    pub id: String,
    /// Title above the plot.
    pub title: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Groups of bars, each with its label under it.
    pub groups: Vec<(String, Vec<Bar>)>,
}

impl BarChart {
    /// Draws the chart as an SVG element `width` × `height` pixels (taller by its legend).
    pub fn to_svg(&self, width: u32, height: u32) -> String {
        let (w, h) = (f64::from(width), f64::from(height));
        let (px0, px1) = (MARGIN_LEFT, w - MARGIN_RIGHT);
        let (py0, py1) = (h - MARGIN_BOTTOM, MARGIN_TOP);
        let mut names: Vec<&str> = Vec::new();
        for bar in self.groups.iter().flat_map(|(_, bars)| bars) {
            if !names.contains(&bar.name.as_str()) {
                names.push(&bar.name);
            }
        }
        let rows = legend_rows(names.iter().copied(), px1 - px0);
        let height = height + LEGEND_ROW * rows;
        let mut svg = svg_start(&self.id, "chart bars", &self.title, (width, height));
        let top = self
            .groups
            .iter()
            .flat_map(|(_, bars)| bars)
            // An interval wider than the bar itself (two noisy rounds) would flatten every
            // bar: the axis stops at twice the bar, and the whisker runs off its top.
            .flat_map(|b| [b.value, b.high.min(2.0 * b.value)])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        if top <= 0.0 {
            return no_data(svg, w, h);
        }
        let step = nice_step(top * 1.1, 5.0);
        let y_max = (top * 1.1 / step).ceil() * step;
        let sy = |y: f64| py0 - y.max(0.0) / y_max * (py0 - py1);
        let mut k = 0.0;
        while k <= y_max + 1e-9 {
            y_tick(&mut svg, (px0, px1), sy(k), k);
            k += step;
        }
        let group_w = (px1 - px0) / self.groups.len().max(1) as f64;
        for (g, (label, bars)) in self.groups.iter().enumerate() {
            let gx = px0 + g as f64 * group_w;
            let bar_w = (group_w * 0.8 / bars.len().max(1) as f64).min(90.0);
            let start = gx + (group_w - bar_w * bars.len() as f64) / 2.0;
            for (i, b) in bars.iter().enumerate() {
                let color_at = names.iter().position(|n| *n == b.name).unwrap_or(0);
                let color = PALETTE[color_at % PALETTE.len()];
                let x = start + i as f64 * bar_w;
                let (top_y, base_y) = (sy(b.value), sy(0.0));
                let _ = write!(
                    svg,
                    r#"<g class="bar" data-bar="{}" data-group="{}" data-value="{:.3}"><rect x="{:.1}" y="{top_y:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
                    escape(&b.name),
                    escape(label),
                    b.value,
                    x + 2.0,
                    bar_w - 4.0,
                    (base_y - top_y).max(0.0)
                );
                let mid = x + bar_w / 2.0;
                if b.low.is_finite() && b.high.is_finite() && b.high > b.low {
                    let (lo, hi) = (sy(b.low), sy(b.high.min(y_max)));
                    let _ = write!(
                        svg,
                        r##"<path class="whisker" d="M{mid:.1},{lo:.1} L{mid:.1},{hi:.1} M{:.1},{lo:.1} L{:.1},{lo:.1} M{:.1},{hi:.1} L{:.1},{hi:.1}" stroke="#222" stroke-width="1.3" fill="none"/>"##,
                        mid - 5.0,
                        mid + 5.0,
                        mid - 5.0,
                        mid + 5.0
                    );
                }
                let _ = write!(
                    svg,
                    r#"<text x="{mid:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text><title>{}: {} {}</title></g>"#,
                    top_y.min(sy(b.high.max(b.value).min(y_max))) - 4.0,
                    tick_label(b.value),
                    escape(&b.name),
                    tick_label(b.value),
                    escape(&b.note)
                );
            }
            let _ = write!(
                svg,
                r#"<text class="group" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                gx + group_w / 2.0,
                py0 + 16.0,
                escape(label)
            );
        }
        let _ = write!(
            svg,
            r##"<line x1="{px0}" x2="{px1}" y1="{py0}" y2="{py0}" stroke="#333"/><line x1="{px0}" x2="{px0}" y1="{py0}" y2="{py1}" stroke="#333"/><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            (py0 + py1) / 2.0,
            escape(&self.y_label)
        );
        legend(&mut svg, names.into_iter(), px0, px1, h);
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
            markers: Vec::new(),
            dots: false,
        }
    }

    #[test]
    fn a_long_legend_wraps_into_rows_inside_the_chart() {
        let names: Vec<String> = (0..12)
            .map(|i| format!("3 replicas behind nginx / closed c100 #{i}"))
            .collect();
        let series = names
            .iter()
            .map(|n| Series::new(n.clone(), vec![(0.0, 1.0), (1.0, 2.0)]))
            .collect();
        let svg = chart(series).to_svg(800, 300);
        let rows = legend_rows(
            names.iter().map(String::as_str),
            800.0 - MARGIN_LEFT - MARGIN_RIGHT,
        );
        assert!(rows >= 4, "{rows}");
        assert!(svg.contains(&format!("height=\"{}\"", 300 + LEGEND_ROW * rows)));
        // Every entry starts inside the chart and ends before its right edge.
        for text in svg.split("<g class=\"legend\">").skip(1) {
            let x: f64 = text
                .split("<text x=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let name = text.split('>').nth(2).unwrap().split('<').next().unwrap();
            assert!(
                x >= MARGIN_LEFT && x + legend_width(name) - 16.0 <= 800.0,
                "{x} {name}"
            );
        }
    }

    #[test]
    fn bars_have_their_values_intervals_and_one_colour_per_name() {
        let bar = |name: &str, value: f64, low: f64, high: f64| Bar {
            name: name.into(),
            value,
            low,
            high,
            note: "3 rounds".into(),
        };
        let svg = BarChart {
            id: "bp".into(),
            title: "Breaking point".into(),
            y_label: "req/s".into(),
            groups: vec![
                (
                    "heavy".into(),
                    vec![
                        bar("1 worker", 50.0, 45.0, 55.0),
                        bar("3 workers", 150.0, 140.0, 160.0),
                    ],
                ),
                (
                    "sync".into(),
                    vec![
                        bar("1 worker", 3.0, 3.0, 3.0),
                        bar("3 workers", 9.0, 8.0, 10.0),
                    ],
                ),
            ],
        }
        .to_svg(800, 300);
        assert_eq!(svg.matches("class=\"bar\"").count(), 4);
        assert_eq!(
            svg.matches("class=\"whisker\"").count(),
            3,
            "no whisker without an interval"
        );
        assert_eq!(svg.matches("class=\"legend\"").count(), 2);
        assert!(svg.contains("data-bar=\"3 workers\" data-group=\"heavy\" data-value=\"150.000\""));
        let empty = BarChart {
            groups: vec![],
            ..BarChart {
                id: "e".into(),
                title: "t".into(),
                y_label: "y".into(),
                groups: vec![],
            }
        };
        assert!(empty.to_svg(400, 200).contains("no data"));
    }

    #[test]
    fn markers_and_dots_are_drawn() {
        let c = Chart {
            markers: vec![Marker {
                x: 3.0,
                series: 0,
                label: "breaks at 3".into(),
            }],
            dots: true,
            ..chart(vec![Series::new(
                "p99",
                vec![(1.0, 1.0), (2.0, 1.0), (3.0, 5.0)],
            )])
        };
        let svg = c.to_svg(800, 300);
        assert_eq!(svg.matches("class=\"dot\"").count(), 3);
        assert!(svg.contains("class=\"marker\" data-x=\"3\"") && svg.contains("breaks at 3"));
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
