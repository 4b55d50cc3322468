//! A locustfile's run as a plan: Locust's command line (users, spawn rate, run time, host,
//! classes, tags) and what the file holds (its classes' hosts, a shape) lowered into user
//! phases whose users are the file's, run by Python helpers.

use std::sync::Arc;
use std::time::Duration;

use loadlab_run::users::{LocustSpec, UserModel, LOCUST_METHODS};
use loadlab_run::{Model, Protocol, RequestTemplate, Stop, UserPhase, ValidPlan};

use crate::target::{resolve, Lookup, RequestSpec};
use crate::{FlagsError, InputError};

/// How long a run without `-t` lasts: until it is stopped (Ctrl-C), as Locust's — the longest
/// run a plan may have (a year; ten years was refused as too long, so every run without `-t`
/// failed).
const UNTIL_STOPPED: Duration = loadlab_run::plan::MAX_DURATION;

/// What a locustfile run is asked to do.
#[derive(Debug, Clone)]
pub struct LocustRun {
    /// The helpers' instructions: the file, interpreter, package, host, classes, tags.
    pub spec: LocustSpec,
    /// The hosts the users send to: `-H` and the classes' own, as `scheme://host[:port]`.
    pub hosts: Vec<String>,
    /// `-u`: users at once (peak).
    pub users: usize,
    /// `-r`: users started per second (`None`: at once).
    pub spawn_rate: Option<f64>,
    /// `-t`: how long the run lasts; `None` until stopped (or the shape ends it).
    pub run_time: Option<Duration>,
    /// Generator threads, one Python helper each (`None`: one, as Locust's one process).
    pub threads: Option<usize>,
    /// Seed of the users' choices.
    pub seed: u64,
    /// Request timeout.
    pub timeout: Option<Duration>,
    /// Thresholds (`--slo`).
    pub thresholds: Vec<loadlab_run::Threshold>,
}

/// The plan of `r`, its hosts looked up as `lookup` says: one request template per host and
/// method (the users' requests are recorded under their Locust names, not these), user phases
/// of `-u` users at `-r` per second for `-t`.
pub fn plan(r: &LocustRun, lookup: Lookup) -> Result<ValidPlan, InputError> {
    let mut hosts: Vec<String> = Vec::new();
    for h in &r.hosts {
        let origin = origin_of(h)?;
        if !hosts.contains(&origin) {
            hosts.push(origin);
        }
    }
    let specs: Vec<RequestSpec> = hosts
        .iter()
        .flat_map(|h| {
            LOCUST_METHODS.iter().map(move |m| RequestSpec {
                name: "locust".into(),
                url: format!("{h}/"),
                method: (*m).into(),
                headers: Vec::new(),
                body: Vec::new(),
                grpc_stream: None,
            })
        })
        .collect();
    let (endpoints, requests): (_, Vec<RequestTemplate>) =
        resolve(&specs, lookup).map_err(FlagsError::from)?;
    let duration = r.run_time.unwrap_or(UNTIL_STOPPED);
    // A shape sets the users itself, once a second, on one helper: the phase's users are
    // the run's nominal peak (`-u`, at least one), which the engine does not start.
    let phase = UserPhase {
        name: "locust".into(),
        duration,
        users: if r.spec.shape {
            r.users.max(1)
        } else {
            r.users
        },
        spawn_rate: r.spawn_rate.filter(|s| s.is_finite() && *s > 0.0),
    };
    let model = Model::Users {
        phases: vec![phase],
        users: Arc::new(UserModel {
            pattern: vec![0],
            seed: r.seed,
            locust: Some(r.spec.clone()),
            ..UserModel::default()
        }),
    };
    let parts = crate::lower::Parts {
        endpoints,
        requests,
        model,
        stop: Stop::default(),
        timeout: r.timeout,
        connect_timeout: None,
        // One helper unless asked, as Locust runs one process unless given --processes: a
        // file's module state (a list of accounts its users pop, a counter) is then the
        // run's, and its test_start sees the users it set up. A shape runs on one always.
        threads: Some(if r.spec.shape {
            1
        } else {
            r.threads.unwrap_or(1)
        }),
        connect_rate: None,
        source_addrs: Vec::new(),
        tls: Default::default(),
        protocol: Protocol::Http1,
        thresholds: r.thresholds.clone(),
        apdex_ms: None,
        pacing_slack: None,
    };
    Ok(crate::lower::finish(parts)?)
}

/// `scheme://host[:port]` of a host given as Locust takes it (`http://h:8089`, with a path or
/// not); the error says what to write.
fn origin_of(host: &str) -> Result<String, InputError> {
    let url = url::Url::parse(host)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .ok_or_else(|| FlagsError::LocustHost(host.to_string()))?;
    Ok(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(shape: bool) -> LocustRun {
        LocustRun {
            spec: LocustSpec {
                shape,
                ..LocustSpec::default()
            },
            hosts: vec!["http://127.0.0.1:8089".into()],
            users: 0,
            spawn_rate: Some(1.0),
            run_time: Some(Duration::from_secs(10)),
            threads: None,
            seed: 1,
            timeout: None,
            thresholds: Vec::new(),
        }
    }

    #[test]
    fn a_file_with_a_load_test_shape_plans_without_users_given() {
        // A shape's tick() sets the users; `-u` need not be given (Locust's default is 1).
        let planned = plan(&run(true), Lookup::Resolve).expect("a shape's run plans");
        assert_eq!(planned.threads, 1, "a shape runs on one helper");
        assert!(plan(&run(false), Lookup::Resolve).is_err());
    }
}
