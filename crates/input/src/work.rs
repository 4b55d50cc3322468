//! What the capacity search sends as one unit of work, lowered once: a request to a URL, or a
//! scenario file's users, each arrival a user who runs the file's flow once (think times and
//! all), so the search finds the rate of sessions that meets the objective.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::lab::WorkUnit;
use loadlab_run::{Arrival, Arrivals, Model, Plan, RatePhase, Stop, ValidPlan};

use crate::capacity::CapacityFlags;
use crate::flags::{is_scenario, FlagsError, LoadFlags};
use crate::lower::{scenario_checked, url, Overrides, UrlTarget};
use crate::target::Lookup;
use crate::InputError;

/// The unit a capacity search's rate counts.
#[derive(Debug, Clone)]
pub enum Work {
    /// A request to a URL, as the flags describe it.
    Request(UrlTarget),
    /// A scenario file's arrivals: users who each run one session of its flows.
    Script(Box<ScriptWork>),
}

/// A scenario file lowered once; each step of a search replaces its phases with its own.
#[derive(Debug, Clone)]
pub struct ScriptWork {
    /// The file, as given.
    pub path: String,
    /// The file's plan, with its own phases (never run as they are).
    plan: Plan,
    /// Keys the file holds that loadlab ignores, one line each.
    pub warnings: Vec<String>,
}

impl Work {
    /// The work `f` names: its `URL` argument is a URL, or a scenario file (its paths relative to
    /// `--target` when given, else to the file's `config.target`).
    pub fn new(f: &CapacityFlags) -> Result<Work, InputError> {
        if !is_scenario(&f.url) {
            if f.target.is_some() {
                return Err(FlagsError::TargetWithUrls.into());
            }
            return Ok(Work::Request(UrlTarget::new(
                &f.url, f.timeout, &f.reach, &f.request,
            )?));
        }
        if f.request.is_set() {
            return Err(FlagsError::RequestWithScenario.into());
        }
        let flags = LoadFlags {
            urls: vec![f.url.clone()],
            target: f.target.clone(),
            timeout: Some(f.timeout),
            reach: f.reach.clone(),
            script: f.script.clone(),
            ..LoadFlags::default()
        };
        let overrides = Overrides {
            flags: &flags,
            lookup: Lookup::Resolve,
        };
        let checked = scenario_checked(Path::new(&f.url), &overrides)?;
        Ok(Work::Script(Box::new(ScriptWork {
            path: f.url.clone(),
            plan: checked.plan.into_inner(),
            warnings: checked.warnings,
        })))
    }

    /// The URL or the file, as given.
    pub fn name(&self) -> &str {
        match self {
            Work::Request(t) => &t.url,
            Work::Script(s) => &s.path,
        }
    }

    /// What one arrival starts: a request, or (for a script whose flows are more than one
    /// plain request each) a user's session.
    pub fn unit(&self) -> WorkUnit {
        match self {
            Work::Script(s) if s.plan.model.users().is_some() => WorkUnit::Session,
            _ => WorkUnit::Request,
        }
    }

    /// The URL, when the unit is a request to one (the closed-loop climb and the probe load
    /// a URL only).
    pub fn url(&self) -> Option<&UrlTarget> {
        match self {
            Work::Request(t) => Some(t),
            Work::Script(_) => None,
        }
    }

    /// Arrivals of this work over `phases`, evenly spaced: on up to `most` connections (opening
    /// `initial` at the start) for requests, or up to `most` users' sessions at once; on
    /// `threads` generator threads.
    pub fn open(
        &self,
        phases: Vec<RatePhase>,
        (initial, most): (usize, usize),
        threads: usize,
    ) -> Result<ValidPlan, InputError> {
        match self {
            Work::Request(t) => url(
                t,
                Model::open_phases(phases, initial, most),
                Stop::default(),
                threads,
            ),
            Work::Script(s) => {
                let mut plan = s.plan.clone();
                plan.model = match plan.model.users() {
                    Some(users) => Model::Open {
                        phases,
                        arrival: Arrival::Uniform,
                        seed: users.seed,
                        arrivals: Arrivals::Sessions {
                            users: Arc::new(users.clone()),
                            max_sessions: most,
                        },
                    },
                    None => Model::open_phases(phases, initial, most),
                };
                plan.threads = threads;
                plan.stop = Stop::default();
                // The search judges its own objective; the file's `ensure` is for its own run.
                plan.thresholds.clear();
                plan.start_at = None;
                Ok(plan.check()?)
            }
        }
    }

    /// One unit alone: one request, or one user arriving at once who runs one session.
    pub fn one(&self) -> Result<ValidPlan, InputError> {
        match self {
            Work::Request(t) => url(
                t,
                Model::closed(1, 1),
                Stop {
                    duration: None,
                    count: Some(1),
                },
                1,
            ),
            // One arrival at the origin on one thread: a rate of 1/s for 1 s (as a `before`
            // flow runs).
            Work::Script(_) => self.open(
                vec![RatePhase::constant(
                    "one",
                    1.0,
                    Some(Duration::from_secs(1)),
                )],
                (1, 1),
                1,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(words: &str) -> CapacityFlags {
        CapacityFlags::parse_words(&crate::experiment::split_words(words).unwrap()).unwrap()
    }

    /// A script of `flow` (YAML lines of a scenario's flow, indented by six) in a file of the
    /// test's own.
    fn script(name: &str, flow: &str) -> String {
        let dir = std::env::temp_dir().join(format!("loadlab-work-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "config:\n  target: http://127.0.0.1:9\n  phases:\n    - duration: 60\n      \
                 arrivalRate: 5\n  ensure:\n    p99: 10\nscenarios:\n  - flow:\n{flow}"
            ),
        )
        .unwrap();
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn a_scripts_sessions_arrive_at_the_steps_rate_without_its_phases_or_ensure() {
        let path = script(
            "login.yml",
            "      - post:\n          url: /login\n      - think: 1\n      - get:\n          \
             url: /account\n",
        );
        let work = Work::new(&flags(&format!("{path} --slo p99<1s"))).unwrap();
        assert_eq!(work.unit(), WorkUnit::Session);
        assert_eq!(work.name(), path);
        assert!(work.url().is_none());
        let plan = work
            .open(
                vec![
                    RatePhase::constant("warm-up", 4.0, Some(Duration::from_secs(2))),
                    RatePhase::constant("measured", 4.0, Some(Duration::from_secs(5))),
                ],
                (16, 300),
                2,
            )
            .unwrap();
        match &plan.model {
            Model::Open {
                phases,
                arrivals: Arrivals::Sessions { max_sessions, .. },
                ..
            } => {
                assert_eq!(phases.len(), 2);
                assert_eq!(phases[1].name, "measured");
                assert_eq!(*max_sessions, 300);
            }
            other => panic!("not the users' sessions: {other:?}"),
        }
        assert!(plan.thresholds.is_empty(), "the file's ensure is left out");
        assert_eq!(plan.threads, 2);
        assert_eq!(plan.scheduled_duration(), Some(Duration::from_secs(7)));
        let one = work.one().unwrap();
        assert_eq!(one.scheduled_duration(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_url_is_one_request_and_a_script_takes_no_request_flags() {
        let work = Work::new(&flags("http://127.0.0.1:9/x --slo p99<1s -m POST")).unwrap();
        assert_eq!(work.unit(), WorkUnit::Request);
        assert_eq!(work.url().map(|t| t.request.method.as_str()), Some("POST"));
        let path = script("plain.yml", "      - get:\n          url: /a\n");
        let e = Work::new(&flags(&format!("{path} --slo p99<1s -m POST"))).unwrap_err();
        assert!(e.to_string().contains("scenario file"), "{e}");
        let e = Work::new(&flags(
            "http://127.0.0.1:9/x --slo p99<1s --target http://h",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("--target"), "{e}");
    }

    #[test]
    fn a_broken_script_is_refused_with_its_place() {
        let path = script("broken.yml", "      - gett:\n          url: /a\n");
        let e = Work::new(&flags(&format!("{path} --slo p99<1s"))).unwrap_err();
        assert!(e.to_string().contains("broken.yml:"), "{e}");
        assert!(e.to_string().contains("gett"), "{e}");
    }
}
