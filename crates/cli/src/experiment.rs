//! Experiment files for `loadlab lab`: a list of topologies × a list of workloads.
//!
//! ```yaml
//! name: seed-001
//! topologies:
//!   - { name: 1 replica, replicas: 1 }
//!   - { name: 6 replicas, replicas: 6, lb: nginx }
//! workloads:
//!   - { name: ping 300/s, run: "/ping -R 300 -d 10s --timeout 120s" }
//! ```
//!
//! A workload's `run` is `loadlab run` flags with the URL given as a path on the topology's
//! front; the same flags users already know.

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Deserialize;

use crate::args::{Cli, Command, RunArgs};

/// A whole experiment file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Name, used for the results folder.
    pub name: String,
    /// What the original report ran, when this file shortens it (shown before the run).
    #[serde(default)]
    pub note: Option<String>,
    /// Systems under test.
    pub topologies: Vec<TopologySpec>,
    /// Loads run against each topology.
    pub workloads: Vec<WorkloadSpec>,
}

/// One system under test.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Name in the comparison table.
    pub name: String,
    /// Replicas behind the load balancer.
    #[serde(default = "one")]
    pub replicas: usize,
    /// Worker processes per replica.
    #[serde(default = "one")]
    pub workers: usize,
    /// `nginx` or `builtin`.
    #[serde(default = "nginx")]
    pub lb: String,
    /// The user's server command (reads `$PORT`) instead of loadlab's service.
    #[serde(default)]
    pub cmd: Option<String>,
    /// Extra `loadlab serve` flags, e.g. `--bbox-workers 3 --bbox-delay 900ms`.
    #[serde(default)]
    pub serve: Option<String>,
    /// nginx's timeouts towards the replicas, e.g. `60s`.
    #[serde(default)]
    pub proxy_timeout: Option<String>,
}

/// One load.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name in the comparison table.
    pub name: String,
    /// `loadlab run` flags, with the URL as a path: `/ping -R 300 -d 10s`.
    pub run: String,
}

fn one() -> usize {
    1
}

fn nginx() -> String {
    "nginx".into()
}

/// Reads and checks an experiment file; errors name the file and, for YAML, line and column.
pub fn load(path: &Path) -> Result<Experiment> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the experiment file {}", path.display()))?;
    let exp: Experiment = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}", located(path, &e.to_string())))?;
    if exp.topologies.is_empty() || exp.workloads.is_empty() {
        bail!(
            "{}: needs at least one topology and one workload",
            path.display()
        );
    }
    for t in &exp.topologies {
        if !matches!(t.lb.as_str(), "nginx" | "builtin") {
            bail!(
                "{}: topology {:?}: lb must be nginx or builtin, got {:?}",
                path.display(),
                t.name,
                t.lb
            );
        }
    }
    for w in &exp.workloads {
        workload_args(w, "http://127.0.0.1:1")
            .with_context(|| format!("{}: workload {:?}", path.display(), w.name))?;
    }
    Ok(exp)
}

/// The parser's first line as `file:line:col: message`.
pub fn located(path: &Path, message: &str) -> String {
    let first = message.lines().next().unwrap_or("invalid YAML");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let position = first.strip_prefix("line ").and_then(|rest| {
        let (line, rest) = rest.split_once(" column ")?;
        let (col, msg) = rest.split_once(": ")?;
        Some(format!("{}:{line}:{col}: {msg}", path.display()))
    });
    position.unwrap_or_else(|| format!("{}: {first}", path.display()))
}

/// Splits a flag string on whitespace, keeping single- or double-quoted parts together.
pub fn split_words(s: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if quote.is_some() {
        bail!("unbalanced quote in {s:?}");
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

/// The workload's flags as `loadlab run` arguments aimed at `front` (paths become URLs).
pub fn workload_args(w: &WorkloadSpec, front: &str) -> Result<RunArgs> {
    let words = split_words(&w.run)?;
    let mut argv = vec!["loadlab".to_string(), "run".to_string()];
    argv.extend(words.into_iter().map(|word| {
        if word.starts_with('/') {
            format!("{front}{word}")
        } else {
            word
        }
    }));
    let cli = Cli::try_parse_from(&argv).map_err(|e| {
        let rendered = e.render().to_string();
        anyhow::anyhow!(
            "{}",
            rendered.lines().next().unwrap_or("invalid flags").trim()
        )
    })?;
    match cli.command {
        Command::Run(a) => Ok(*a),
        _ => unreachable!("parsed as a run"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_experiment_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let exp = load(&path).unwrap_or_else(|e| panic!("{e:#}"));
                assert!(
                    exp.note.is_some(),
                    "{} says what it shortens",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen >= 4, "{seen} examples");
    }

    #[test]
    fn parser_errors_read_as_file_line_col() {
        let p = Path::new("x.yaml");
        assert_eq!(
            located(p, "error: line 4 column 1: unknown field `extra`\n  |"),
            "x.yaml:4:1: unknown field `extra`"
        );
        assert_eq!(located(p, "something else"), "x.yaml: something else");
    }

    #[test]
    fn words_split_on_spaces_and_keep_quotes() {
        assert_eq!(
            split_words("/ping -H 'X-A: b c' -d 10s").unwrap(),
            vec!["/ping", "-H", "X-A: b c", "-d", "10s"]
        );
        assert!(split_words("-H 'open").is_err());
    }

    #[test]
    fn a_workload_becomes_run_flags_aimed_at_the_front() {
        let w = WorkloadSpec {
            name: "x".into(),
            run: "/delay?ms=5 -R 300 -d 10s".into(),
        };
        let a = workload_args(&w, "http://127.0.0.1:8080").unwrap();
        assert_eq!(a.urls, vec!["http://127.0.0.1:8080/delay?ms=5"]);
        assert_eq!(a.rate, Some(300.0));
        let bad = WorkloadSpec {
            name: "y".into(),
            run: "/ping -c 0".into(),
        };
        assert!(workload_args(&bad, "http://127.0.0.1:1").is_err());
    }
}
