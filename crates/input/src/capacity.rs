//! The flags of a breaking-point search (`loadlab capacity`, an experiment's `capacity:`
//! workload) as one typed input, so the command and the lab search alike.

use std::time::Duration;

use clap::{Args, Parser};

use crate::flags::{ReachFlags, RequestFlags, ScriptFlags};
use crate::values::{positive_count, positive_duration, positive_rate};

/// What a capacity search looks for and its bounds.
#[derive(Debug, Clone, Args)]
pub struct CapacityFlags {
    /// The URL to load (GET unless -m says), or a scenario file whose users' sessions are the
    /// unit (each arrival a user who runs its flow once); in an experiment, a path on the
    /// topology's front, or a scenario file sent to it.
    #[arg(value_name = "URL|SCENARIO.yaml")]
    pub url: String,
    /// The objective, e.g. 'p99<300ms,errors<1%'.
    #[arg(long, value_name = "SLO")]
    pub slo: String,
    /// Longest time the search may take.
    #[arg(long = "max-time", value_name = "DUR", default_value = "120s", value_parser = positive_duration)]
    pub max_time: Duration,
    /// Each rate's warm-up, discarded (and reported).
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = positive_duration)]
    pub warmup: Duration,
    /// Each rate's measured steady state.
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = positive_duration)]
    pub step: Duration,
    /// First rate tried (default: the plateau of a quick closed-loop climb).
    #[arg(long, value_name = "RATE", value_parser = positive_rate, allow_negative_numbers = true)]
    pub start: Option<f64>,
    /// Highest rate tried.
    #[arg(long = "max-rate", value_name = "RATE", default_value = "200000", value_parser = positive_rate, allow_negative_numbers = true)]
    pub max_rate: f64,
    /// Stop when the failing rate is within this share of the passing one: a percentage
    /// (`5%`, as --slo writes `errors<1%`) or a fraction (`0.05`).
    #[arg(long, value_name = "SHARE", default_value = "5%", value_parser = share)]
    pub tolerance: f64,
    /// A request not answered this long after its send counts as a timeout.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = positive_duration)]
    pub timeout: Duration,
    /// Most connections open at once.
    #[arg(long = "max-connections", value_name = "N", default_value = "1000", value_parser = positive_count)]
    pub max_connections: usize,
    /// Generator threads (default: the cores this process may use).
    #[arg(short = 't', long = "threads", value_name = "N", value_parser = positive_count)]
    pub threads: Option<usize>,
    /// HTTP/2 and TLS verification, as `run` takes them.
    #[command(flatten)]
    pub reach: ReachFlags,
    /// The request (-m, -H, -b, --body-file), as `run` takes it.
    #[command(flatten)]
    pub request: RequestFlags,
    /// With a scenario file: the URL its paths are relative to, in place of its config.target.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// With a scenario file: its environment, variables, payload and the like, as `run` takes
    /// them.
    #[command(flatten)]
    pub script: ScriptFlags,
}

/// A share written as a percentage (`5%`) or as a fraction (`0.05`), as a fraction.
fn share(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v / scale)
        .ok_or_else(|| format!("{text:?} is not a share: write 5% or 0.05"))
}

/// Capacity flags that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    /// Words clap refuses (an unknown flag, a bad value, no `--slo`); shown as clap's first
    /// line.
    #[error("{}", crate::flags::first_line(.0))]
    Words(clap::Error),
    /// A tolerance outside (0, 1).
    #[error("--tolerance must be between 0 and 100 %, such as 5%")]
    Tolerance,
    /// Warm-up or step lengths that are not whole seconds (results are kept per second).
    #[error("--warmup and --step are whole seconds, such as 2s and 5s")]
    WholeSeconds,
}

/// Capacity flags alone, as an experiment's `capacity:` workload writes them.
#[derive(Debug, Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct CapacityCommand {
    #[command(flatten)]
    flags: CapacityFlags,
}

impl CapacityFlags {
    /// Parses a `capacity:` workload's words (`/heavy?ms=50 --slo 'p99<500ms'`) and checks
    /// them ([`CapacityFlags::check`]).
    pub fn parse_words(words: &[String]) -> Result<CapacityFlags, CapacityError> {
        let flags = CapacityCommand::try_parse_from(words)
            .map(|c| c.flags)
            .map_err(CapacityError::Words)?;
        flags.check()?;
        Ok(flags)
    }

    /// Refuses bounds the search cannot use: a tolerance outside (0, 1), warm-up or step
    /// lengths that are not whole seconds (results are kept per second).
    pub fn check(&self) -> Result<(), CapacityError> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(CapacityError::Tolerance);
        }
        if self.warmup.subsec_nanos() != 0 || self.step.subsec_nanos() != 0 {
            return Err(CapacityError::WholeSeconds);
        }
        Ok(())
    }

    /// The same search aimed at `front` (an experiment's workload): a path goes to it, and a
    /// scenario file's paths are relative to it.
    pub fn on_front(&self, front: &str) -> CapacityFlags {
        if crate::flags::is_scenario(&self.url) {
            return CapacityFlags {
                target: Some(front.to_string()),
                ..self.clone()
            };
        }
        CapacityFlags {
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
        let f = CapacityFlags::parse_words(&words("/block?ms=20 --slo 'p99<100ms' --max-time 20s"))
            .unwrap();
        assert_eq!(f.url, "/block?ms=20");
        assert_eq!(f.slo, "p99<100ms");
        assert_eq!(f.max_time, Duration::from_secs(20));
        assert_eq!(f.step, Duration::from_secs(5));
        assert_eq!(
            f.on_front("http://127.0.0.1:9").url,
            "http://127.0.0.1:9/block?ms=20"
        );
        let e = CapacityFlags::parse_words(&words("/x --slo p99<1s --step 1500ms")).unwrap_err();
        assert!(matches!(e, CapacityError::WholeSeconds), "{e}");
        assert!(
            CapacityFlags::parse_words(&words("/x")).is_err(),
            "--slo is required"
        );
    }

    #[test]
    fn the_tolerance_is_a_percentage_or_a_fraction() {
        let at = |t: &str| {
            CapacityFlags::parse_words(&words(&format!("/x --slo p99<1s --tolerance {t}")))
                .map(|f| f.tolerance)
        };
        assert!((at("5%").unwrap() - 0.05).abs() < 1e-12);
        assert!((at("0.05").unwrap() - 0.05).abs() < 1e-12);
        assert!((at("'2.5 %'").unwrap() - 0.025).abs() < 1e-12);
        assert!(at("five").is_err());
        let default = CapacityFlags::parse_words(&words("/x --slo p99<1s")).unwrap();
        assert!((default.tolerance - 0.05).abs() < 1e-12);
        assert!(matches!(at("150%"), Err(CapacityError::Tolerance)));
    }
}
