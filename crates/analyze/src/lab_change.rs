//! A lab's verdicts read against an earlier lab's: the comparisons whose answer changed, so a
//! CI job that reruns an experiment learns that a topology stopped paying or started to.

use loadlab_run::lab::{Factor, Verdict};

/// What a verdict answered, as compared across labs: its interval's side of 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The interval holds 1: no difference beyond the rounds' spread.
    Same,
    /// The variant measured more than the baseline.
    Higher,
    /// The variant measured less.
    Lower,
}

impl Answer {
    /// The answer of `v`.
    pub fn of(v: &Verdict) -> Answer {
        if !v.differs {
            Answer::Same
        } else if v.ratio > 1.0 {
            Answer::Higher
        } else {
            Answer::Lower
        }
    }

    fn words(self) -> &'static str {
        match self {
            Answer::Same => "no difference",
            Answer::Higher => "higher",
            Answer::Lower => "lower",
        }
    }
}

/// One comparison whose answer changed between two labs.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    /// The comparison: measure, variant over baseline, workload (and topology).
    pub what: String,
    /// The earlier lab's answer.
    pub before: Answer,
    /// This lab's answer.
    pub now: Answer,
    /// The earlier lab's ratio and interval, in words.
    pub before_figures: String,
    /// This lab's.
    pub now_figures: String,
}

impl Changed {
    /// One line: the comparison, and its answer before and now with their figures.
    pub fn line(&self) -> String {
        format!(
            "{}: {} ({}) → {} ({})",
            self.what,
            self.before.words(),
            self.before_figures,
            self.now.words(),
            self.now_figures
        )
    }
}

/// `before` against `now`: the verdicts both labs have, and of those the ones whose answer
/// changed, in `now`'s order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VerdictChanges {
    /// Comparisons both labs made.
    pub compared: usize,
    /// Those whose answer changed.
    pub changed: Vec<Changed>,
    /// Comparisons only one of the labs made (the experiment changed between them).
    pub unmatched: usize,
}

/// The same comparison in two labs: what is compared with what, on which workload and
/// topology, by which measure.
fn same_comparison(a: &Verdict, b: &Verdict) -> bool {
    a.factor == b.factor
        && a.measure == b.measure
        && a.baseline == b.baseline
        && a.variant == b.variant
        && a.workload == b.workload
        && a.topology == b.topology
}

fn figures(v: &Verdict) -> String {
    if v.rounds > 1 {
        format!(
            "×{:.2}, ×{:.2}–×{:.2} over {} rounds",
            v.ratio, v.ci_low, v.ci_high, v.rounds
        )
    } else {
        format!("×{:.2}, one round", v.ratio)
    }
}

fn comparison(v: &Verdict) -> String {
    let on = match (&v.factor, &v.topology) {
        (Factor::Workload, Some(t)) => format!(", on {t}"),
        _ => String::new(),
    };
    format!(
        "{} of {} over {}, {}{on}",
        v.measure, v.variant, v.baseline, v.workload
    )
}

/// Reads `now` against `before`, comparison by comparison.
pub fn changes(before: &[Verdict], now: &[Verdict]) -> VerdictChanges {
    let mut out = VerdictChanges::default();
    for v in now {
        let Some(old) = before.iter().find(|b| same_comparison(b, v)) else {
            out.unmatched += 1;
            continue;
        };
        out.compared += 1;
        let (was, is) = (Answer::of(old), Answer::of(v));
        if was != is {
            out.changed.push(Changed {
                what: comparison(v),
                before: was,
                now: is,
                before_figures: figures(old),
                now_figures: figures(v),
            });
        }
    }
    out.unmatched += before
        .iter()
        .filter(|b| !now.iter().any(|v| same_comparison(b, v)))
        .count();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(variant: &str, ratio: f64, low: f64, high: f64) -> Verdict {
        Verdict {
            factor: Factor::Topology,
            measure: "throughput".into(),
            baseline: "1 replica".into(),
            variant: variant.into(),
            workload: "ping".into(),
            topology: None,
            ratio,
            ci_low: low,
            ci_high: high,
            rounds: 3,
            differs: low > 1.0 || high < 1.0,
            why: String::new(),
            scaling: None,
            limited: Vec::new(),
        }
    }

    #[test]
    fn an_answer_that_moved_across_one_is_a_change_and_a_ratio_that_moved_alone_is_not() {
        let before = [
            verdict("3 replicas", 2.9, 2.6, 3.3),
            verdict("6 replicas", 1.02, 0.95, 1.10),
            verdict("9 replicas", 0.7, 0.6, 0.8),
        ];
        let now = [
            // Still higher, by less: the same answer.
            verdict("3 replicas", 1.8, 1.5, 2.1),
            // No difference before, higher now.
            verdict("6 replicas", 1.6, 1.4, 1.8),
            // Lower before, no difference now.
            verdict("9 replicas", 0.98, 0.9, 1.05),
        ];
        let c = changes(&before, &now);
        assert_eq!((c.compared, c.unmatched), (3, 0));
        let moved: Vec<(Answer, Answer)> = c.changed.iter().map(|x| (x.before, x.now)).collect();
        assert_eq!(
            moved,
            [
                (Answer::Same, Answer::Higher),
                (Answer::Lower, Answer::Same)
            ]
        );
        assert_eq!(
            c.changed[0].line(),
            "throughput of 6 replicas over 1 replica, ping: no difference (×1.02, ×0.95–×1.10 \
             over 3 rounds) → higher (×1.60, ×1.40–×1.80 over 3 rounds)"
        );
    }

    #[test]
    fn comparisons_only_one_lab_made_are_counted_apart() {
        let before = [verdict("3 replicas", 2.9, 2.6, 3.3)];
        let now = [verdict("6 replicas", 5.0, 4.0, 6.0)];
        let c = changes(&before, &now);
        assert_eq!((c.compared, c.changed.len(), c.unmatched), (0, 0, 2));
        let same = changes(&before, &before);
        assert_eq!(
            (same.compared, same.changed.len(), same.unmatched),
            (1, 0, 0)
        );
    }
}
