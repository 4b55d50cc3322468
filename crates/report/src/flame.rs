//! Flame graphs of the service's CPU, drawn by inferno (interactive SVG: search, zoom, a
//! title per frame): one run's, and the differential one between two runs (red grew, blue
//! shrank) that `report A B` shows.

use std::collections::BTreeMap;
use std::io;

use inferno::flamegraph::{self, Options};

/// The flame graph of `stacks` (folded stacks and their counts), as SVG text.
pub fn flame_svg(title: &str, stacks: &BTreeMap<String, u64>) -> io::Result<String> {
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut opts = Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".into();
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .map_err(io::Error::other)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The differential flame graph from `before` to `after`: the shape of `after`, each frame red
/// where it took a larger share of the samples than before, blue where a smaller one. Counts
/// are normalized first, so runs of different lengths compare by share.
pub fn diff_svg(
    title: &str,
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> io::Result<String> {
    let folded = |m: &BTreeMap<String, u64>| -> String {
        m.iter().map(|(s, n)| format!("{s} {n}\n")).collect()
    };
    let opts = inferno::differential::Options {
        normalize: true,
        ..Default::default()
    };
    let mut diff = Vec::new();
    inferno::differential::from_readers(
        opts,
        folded(before).as_bytes(),
        folded(after).as_bytes(),
        &mut diff,
    )?;
    let text = String::from_utf8_lossy(&diff).into_owned();
    let mut opts = Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".into();
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, text.lines(), &mut out).map_err(io::Error::other)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stacks(lines: &[(&str, u64)]) -> BTreeMap<String, u64> {
        lines.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn flame_graphs_name_their_frames_and_a_diff_colours_what_changed() {
        let before = stacks(&[("main;serve;calc", 80), ("main;serve;write", 20)]);
        let after = stacks(&[
            ("main;serve;calc", 40),
            ("main;serve;write", 20),
            ("main;serve;log", 40),
        ]);
        let svg = flame_svg("calc", &before).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("calc") && svg.contains("write"));
        let diff = diff_svg("before → after", &before, &after).unwrap();
        assert!(diff.contains("log"), "the new frame is drawn");
        // Grown frames are red, shrunk ones blue.
        assert!(
            diff.contains("rgb(255,") && diff.contains(",255)"),
            "{}",
            &diff[..400]
        );
    }
}
