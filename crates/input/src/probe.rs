//! The flags of a probe (`loadlab probe`, an experiment's `probe:` workload) as one typed
//! input, so the command and the lab probe alike.

use std::time::Duration;

use clap::{Args, Parser};

use crate::flags::{ReachFlags, RequestFlags};
use crate::values::{concurrency_bound, positive_duration};

/// What a probe aims at and its bounds.
#[derive(Debug, Clone, Args)]
pub struct ProbeFlags {
    /// The URL to probe (GET unless -m says); in an experiment, a path on the topology's
    /// front.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Longest time the probe's closed-loop steps may take; a service that refuses gets up to
    /// 30 s of open-model steps more, to read its rate [default: 60s, or 5m for a service
    /// whose times vary widely, which an exact worker count needs]
    #[arg(long = "max-time", value_name = "DUR", value_parser = positive_duration)]
    pub max_time: Option<Duration>,
    /// Highest concurrency tried (at most 100,000).
    #[arg(long = "max-concurrency", value_name = "N", default_value = "64", value_parser = concurrency_bound)]
    pub max_concurrency: usize,
    /// Stop when a step's median latency passes this.
    #[arg(long = "max-latency", value_name = "DUR", default_value = "10s", value_parser = positive_duration)]
    pub max_latency: Duration,
    /// A request not answered this long after its send counts as a timeout.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = positive_duration)]
    pub timeout: Duration,
    /// HTTP/2 and TLS verification, as `run` takes them.
    #[command(flatten)]
    pub reach: ReachFlags,
    /// The request (-m, -H, -b, --body-file), as `run` takes it.
    #[command(flatten)]
    pub request: RequestFlags,
}

/// Probe flags alone, as an experiment's `probe:` workload writes them.
#[derive(Debug, Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct ProbeCommand {
    #[command(flatten)]
    flags: ProbeFlags,
}

/// Probe flags that cannot be used: the words clap refuses, shown as clap's first line.
#[derive(Debug, thiserror::Error)]
#[error("{}", crate::flags::first_line(.0))]
pub struct ProbeError(clap::Error);

impl ProbeFlags {
    /// Parses a `probe:` workload's words (`/bbox/sync --max-time 30s`).
    pub fn parse_words(words: &[String]) -> Result<ProbeFlags, ProbeError> {
        ProbeCommand::try_parse_from(words)
            .map(|c| c.flags)
            .map_err(ProbeError)
    }

    /// The same probe aimed at `front` when the URL is a path (an experiment's workload).
    pub fn on_front(&self, front: &str) -> ProbeFlags {
        ProbeFlags {
            url: crate::flags::on_front(&self.url, front),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        crate::experiment::split_words(s).unwrap()
    }

    #[test]
    fn a_workloads_words_parse_with_the_commands_defaults() {
        let f = ProbeFlags::parse_words(&words("/bbox/sync --max-time 20s")).unwrap();
        assert_eq!(f.url, "/bbox/sync");
        assert_eq!(f.max_time, Some(Duration::from_secs(20)));
        assert_eq!(f.max_concurrency, 64);
        assert_eq!(
            f.on_front("http://127.0.0.1:9").url,
            "http://127.0.0.1:9/bbox/sync"
        );
        let e = ProbeFlags::parse_words(&words("/x --max-tim 3s")).unwrap_err();
        assert!(e.to_string().contains("--max-tim"), "{e}");
    }
}
