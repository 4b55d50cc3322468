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

/// One function whose share of the samples changed between two profiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The frame's name.
    pub function: String,
    /// Its share of the first profile's samples (itself and what it called), percent.
    pub before_pct: f64,
    /// Its share of the second's, percent.
    pub after_pct: f64,
}

/// The `n` functions whose total share (itself and what it called) changed the most from
/// `before` to `after`: first those absent before that hold at least 1 % after (new work, as
/// seed 004's console.log), then the largest changes; the terminal's reading of a
/// differential flame graph.
pub fn moved(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    n: usize,
) -> Vec<Moved> {
    let shares = |stacks: &BTreeMap<String, u64>| -> BTreeMap<String, f64> {
        let all = stacks.values().sum::<u64>().max(1) as f64;
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        for (stack, count) in stacks {
            let mut seen = std::collections::HashSet::new();
            for f in stack.split(';') {
                if seen.insert(f) {
                    *total.entry(f.to_string()).or_insert(0) += count;
                }
            }
        }
        total
            .into_iter()
            .map(|(f, c)| (f, 100.0 * c as f64 / all))
            .collect()
    };
    let (b, a) = (shares(before), shares(after));
    let mut out: Vec<Moved> = b
        .keys()
        .chain(a.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|f| Moved {
            function: f.clone(),
            before_pct: b.get(f).copied().unwrap_or(0.0),
            after_pct: a.get(f).copied().unwrap_or(0.0),
        })
        .collect();
    let new = |m: &Moved| m.before_pct == 0.0 && m.after_pct >= 1.0;
    out.sort_by(|x, y| {
        let d = |m: &Moved| (m.after_pct - m.before_pct).abs();
        new(y)
            .cmp(&new(x))
            .then(d(y).total_cmp(&d(x)))
            .then(x.function.cmp(&y.function))
    });
    out.truncate(n);
    out
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
        let m = moved(&before, &after, 2);
        assert_eq!(m[0].function, "log", "new work first");
        assert_eq!((m[0].before_pct, m[0].after_pct), (0.0, 40.0));
        assert_eq!(m[1].function, "calc");
        assert_eq!((m[1].before_pct, m[1].after_pct), (80.0, 40.0));
        // Grown frames are red, shrunk ones blue.
        assert!(
            diff.contains("rgb(255,") && diff.contains(",255)"),
            "{}",
            &diff[..400]
        );
    }
}
