//! One image of a run's main charts (requests per second, latency over time, errors, the
//! percentile spectrum), stacked, for pasting into a report: SVG as drawn, or PNG rasterized
//! with resvg (text in the system's fonts).

use crate::chart::escape;
use crate::html::{charts, RunView};

/// Width and height of each chart in the image.
const SIZE: (u32, u32) = (900, 280);
/// The charts the image holds, by id.
const MAIN: [&str; 4] = ["throughput", "latency", "errors", "spectrum"];

/// Sans-serif fonts tried for the PNG's text, in order.
const SANS: [&str; 5] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
];

/// An image that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The SVG did not parse (a bug: it is ours).
    #[error("the plot's SVG is not valid: {0}")]
    Svg(String),
    /// The PNG could not be encoded.
    #[error("cannot encode the PNG: {0}")]
    Png(String),
}

/// The main charts of `runs` stacked in one SVG document.
pub fn plot_svg(title: &str, runs: &[RunView]) -> String {
    let (w, h) = SIZE;
    let drawn: Vec<String> = charts(runs)
        .into_iter()
        .filter(|c| MAIN.contains(&c.id.as_str()))
        .map(|c| c.to_svg(w, h))
        .collect();
    let top = 30;
    let total = top + h * drawn.len() as u32;
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{total}" viewBox="0 0 {w} {total}" font-family="sans-serif"><rect width="{w}" height="{total}" fill="#ffffff"/><text x="12" y="20" font-size="15" font-weight="bold">{}</text>"##,
        escape(title)
    );
    for (i, chart) in drawn.iter().enumerate() {
        // Nested <svg> elements take their place from x/y.
        let placed = chart.replacen(
            "<svg ",
            &format!("<svg x=\"0\" y=\"{}\" ", top + h * i as u32),
            1,
        );
        svg.push_str(&placed);
    }
    svg.push_str("</svg>");
    svg
}

/// Rasterizes an SVG document to PNG.
pub fn png(svg: &str) -> Result<Vec<u8>, PlotError> {
    let mut options = resvg::usvg::Options::default();
    let db = options.fontdb_mut();
    db.load_system_fonts();
    // fontdb's generic sans-serif is Arial, rarely on Linux: take a sans font that is there.
    let installed = |name: &str| {
        db.faces()
            .any(|f| f.families.iter().any(|(family, _)| family == name))
    };
    if let Some(sans) = SANS.iter().find(|n| installed(n)) {
        db.set_sans_serif_family(*sans);
    }
    let tree =
        resvg::usvg::Tree::from_str(svg, &options).map_err(|e| PlotError::Svg(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| PlotError::Png("the image has no size".into()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PlotError::Png(e.to_string()))
}
