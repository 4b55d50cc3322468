//! An experiment's verdicts as sentences, after the lab's table: a block per question (a
//! workload against a baseline topology, or a workload pair on one topology), its baseline
//! named once with what limited it, then a line per variant and measure with, under it, the
//! share of the ideal scaling and what limited the variant; every line fits 120 columns.

use std::fmt::Write;

use loadlab_analyze::verdict::{measure_name, Factor, Verdict};

/// Widest line the verdicts take; a longer one goes on under itself.
const WIDTH: usize = 120;

/// The verdicts, in blocks (empty when there are none).
pub fn render_verdicts(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    if verdicts.is_empty() {
        return out;
    }
    out.push_str(
        "  verdicts (variant over baseline, 95 % interval over the rounds; ≠ a real difference, \
         = within the rounds' noise):\n",
    );
    let mut block: Option<String> = None;
    for v in verdicts {
        let heading = heading(v);
        if block.as_ref() != Some(&heading) {
            let _ = writeln!(out, "  {heading}");
            if let Some(limits) = limits_of(v, &v.baseline) {
                fold(
                    &mut out,
                    "    ",
                    &format!("{}: {limits}", v.baseline),
                    "      ",
                );
            }
            block = Some(heading);
        }
        let interval = match v.rounds {
            1 => "one round, no interval: run rounds: 3 or more to judge".to_string(),
            n => format!("×{:.2}–×{:.2} over {n} rounds", v.ci_low, v.ci_high),
        };
        let line = format!(
            "{} {}: {} ×{:.2} ({interval})",
            if v.differs { "≠" } else { "=" },
            v.variant,
            measure_name(&v.measure),
            v.ratio
        );
        fold(&mut out, "    ", &line, "        ");
        for part in v.scaling.iter().cloned().chain(limits_of(v, &v.variant)) {
            fold(&mut out, "        ", &part, "          ");
        }
    }
    out
}

/// What a verdict answers, and against what: "block, against 1 worker", or for a workload
/// pair "on 1 worker, against calc 100k".
pub fn heading(v: &Verdict) -> String {
    match (&v.factor, &v.topology) {
        (Factor::Workload, Some(t)) => format!("on {t}, against {}", v.baseline),
        _ => format!("{}, against {}", v.workload, v.baseline),
    }
}

/// What limited `side` of a verdict, in words; `None` when nothing did.
fn limits_of(v: &Verdict, side: &str) -> Option<String> {
    v.limited
        .iter()
        .find(|(name, _)| name == side)
        .map(|(_, limits)| limits.join(", "))
}

/// Writes `text` as lines of at most [`WIDTH`] columns: the first after `first`, the rest
/// after `rest`, broken between words.
fn fold(out: &mut String, first: &str, text: &str, rest: &str) {
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split(' ') {
        let width = line.chars().count() + 1 + word.chars().count();
        if !empty && width > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_named_once_per_block_and_no_line_is_wider_than_120_columns() {
        let v = Verdict {
            factor: Factor::Topology,
            measure: "breaking_point".into(),
            baseline: "1 worker".into(),
            variant: "3 workers".into(),
            workload: "block".into(),
            topology: None,
            ratio: 3.0,
            ci_low: 2.8,
            ci_high: 3.2,
            rounds: 3,
            differs: true,
            why: "breaking point ×3.00 (3 workers over 1 worker)".into(),
            scaling: Some("1 → 3 processes: 100 % of the ideal ×3".into()),
            limited: vec![
                (
                    "1 worker".into(),
                    vec!["not the CPU (2 % of a core in all)".into()],
                ),
                (
                    "3 workers".into(),
                    vec!["the probe read 3 worker(s), S = 20.0 ms".repeat(3)],
                ),
            ],
        };
        let text = render_verdicts(&[v.clone(), v]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "  block, against 1 worker", "{text}");
        assert_eq!(
            lines[2], "    1 worker: not the CPU (2 % of a core in all)",
            "{text}"
        );
        assert_eq!(
            lines[3], "    ≠ 3 workers: breaking point ×3.00 (×2.80–×3.20 over 3 rounds)",
            "{text}"
        );
        assert_eq!(
            lines[4], "        1 → 3 processes: 100 % of the ideal ×3",
            "{text}"
        );
        assert!(lines[5].starts_with("        the probe read"), "{text}");
        assert!(
            lines[6].starts_with("          "),
            "a long line goes on under itself: {text}"
        );
        // The block's heading once, however many verdicts it holds.
        assert_eq!(text.matches("against 1 worker").count(), 1, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(render_verdicts(&[]).is_empty());
    }
}
