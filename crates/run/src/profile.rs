//! Profiles of the service's CPU: stacks collapsed into `frame;frame;frame count` lines (the
//! `profile.folded` file of a run directory), and the functions that held the most samples.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Stacks sampled from the service while the load was on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// What recorded them: `perf`, `v8`, `py-spy`.
    pub backend: String,
    /// The processes sampled.
    pub pids: Vec<u32>,
    /// When sampling began, seconds from the run's origin.
    pub start_s: f64,
    /// How long it sampled.
    pub duration_s: f64,
    /// Each distinct stack (root first, frames joined by `;`) and its sample count.
    pub stacks: BTreeMap<String, u64>,
    /// What a backend could not do while another recorded (one line each).
    pub notes: Vec<String>,
}

/// What profiling gave: stacks, or why it could not run and what to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileOutcome {
    /// Stacks were recorded.
    Recorded(Profile),
    /// The backend could not run; the run went on without a profile.
    Failed {
        /// The backend that failed.
        backend: String,
        /// Why, and what to do, in one line.
        reason: String,
    },
}

/// One function's share of the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TopFunction {
    /// The frame's name.
    pub function: String,
    /// Samples with this function on top of the stack (running itself), percent.
    pub self_pct: f64,
    /// Samples with this function anywhere on the stack (itself or what it called), percent.
    pub total_pct: f64,
}

impl Profile {
    /// Reads folded lines (`a;b;c 12`); lines that are not are skipped.
    pub fn parse_folded(text: &str) -> BTreeMap<String, u64> {
        let mut stacks = BTreeMap::new();
        for line in text.lines() {
            let Some((stack, count)) = line.trim_end().rsplit_once(' ') else {
                continue;
            };
            if let Ok(n) = count.parse::<u64>() {
                *stacks.entry(stack.to_string()).or_insert(0) += n;
            }
        }
        stacks
    }

    /// The stacks as folded lines, one per stack.
    pub fn folded(&self) -> String {
        self.stacks
            .iter()
            .map(|(stack, n)| format!("{stack} {n}\n"))
            .collect()
    }

    /// Every sample.
    pub fn samples(&self) -> u64 {
        self.stacks.values().sum()
    }

    /// The `n` functions with the most samples on top of the stack, with their self and
    /// total shares (a function recursing counts once per sample in its total).
    pub fn top_functions(&self, n: usize) -> Vec<TopFunction> {
        let all = self.samples();
        if all == 0 {
            return Vec::new();
        }
        let mut own: BTreeMap<&str, u64> = BTreeMap::new();
        let mut total: BTreeMap<&str, u64> = BTreeMap::new();
        for (stack, &count) in &self.stacks {
            let frames: Vec<&str> = stack.split(';').collect();
            if let Some(leaf) = frames.last() {
                *own.entry(leaf).or_insert(0) += count;
            }
            let mut seen = HashSet::new();
            for f in frames {
                if seen.insert(f) {
                    *total.entry(f).or_insert(0) += count;
                }
            }
        }
        let mut ranked: Vec<(&str, u64)> = own.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        ranked
            .into_iter()
            .take(n)
            .map(|(f, s)| TopFunction {
                function: f.to_string(),
                self_pct: 100.0 * s as f64 / all as f64,
                total_pct: 100.0 * total.get(f).copied().unwrap_or(0) as f64 / all as f64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_stacks_give_each_functions_self_and_total_share() {
        let stacks = Profile::parse_folded(
            "main;serve;calc;sin 60\nmain;serve;calc 20\nmain;serve;write 15\nmain;idle 5\nbad\n",
        );
        let p = Profile {
            stacks,
            ..Profile::default()
        };
        assert_eq!(p.samples(), 100);
        let top = p.top_functions(3);
        let names: Vec<&str> = top.iter().map(|t| t.function.as_str()).collect();
        assert_eq!(names, ["sin", "calc", "write"]);
        assert_eq!((top[0].self_pct, top[0].total_pct), (60.0, 60.0));
        assert_eq!((top[1].self_pct, top[1].total_pct), (20.0, 80.0));
        assert_eq!(Profile::parse_folded(&p.folded()), p.stacks);
    }
}
