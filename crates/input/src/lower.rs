//! The one lowering: each kind of input (run flags, a scenario file, an experiment workload,
//! an analysis step's URL) becomes a checked [`ValidPlan`] here, and every default comes from
//! [`loadlab_run::defaults`]. A new flag or scenario key is read in its parser and used here,
//! nowhere else.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::{
    defaults, Arrival, Arrivals, Endpoint, Model, Plan, PlanError, Protocol, RatePhase,
    RequestTemplate, Stop, Threshold, TlsSettings, ValidPlan,
};

use crate::flags::{
    ArrivalArg, FlagRequest, FlagsError, LoadFlags, ReachFlags, RequestFlags, ScriptFlags,
};
use crate::grpc::{GrpcError, Reflection};
use crate::scenario::{self, Phases, Problem, ScenarioError};
use crate::target::{resolve, Lookup, RequestSpec};
use crate::tls;
use crate::InputError;

/// The run flags a scenario file still takes, as the command line gave them: its phases, target
/// and timeout come from the file, the rest of `flags` from the command line (each unset one
/// falls back on the file or the defaults); `lookup` says whether the file's hosts are looked up
/// (not a flag: `loadlab k8s job` skips it).
#[derive(Debug, Clone, Copy)]
pub struct Overrides<'a> {
    /// The run flags.
    pub flags: &'a LoadFlags,
    /// Whether the file's hosts are looked up.
    pub lookup: Lookup,
}

/// A plan's parts before the defaults fill what the input left open.
pub(crate) struct Parts {
    pub endpoints: Vec<Endpoint>,
    pub requests: Vec<RequestTemplate>,
    pub model: Model,
    pub stop: Stop,
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    pub threads: Option<usize>,
    pub connect_rate: Option<f64>,
    pub source_addrs: Vec<IpAddr>,
    pub tls: TlsSettings,
    pub protocol: Protocol,
    pub thresholds: Vec<Threshold>,
    pub apdex_ms: Option<f64>,
    pub pacing_slack: Option<Duration>,
}

/// Fills the defaults and checks the plan: the one place a plan is made.
pub(crate) fn finish(p: Parts) -> Result<ValidPlan, PlanError> {
    let timeout = p.timeout.unwrap_or(defaults::TIMEOUT);
    Plan {
        endpoints: p.endpoints,
        requests: p.requests,
        model: p.model,
        stop: p.stop,
        timeout,
        connect_timeout: p
            .connect_timeout
            .unwrap_or_else(|| defaults::connect_timeout(timeout)),
        threads: p.threads.unwrap_or_else(defaults::threads),
        connect_rate: p.connect_rate.unwrap_or(defaults::CONNECT_RATE),
        source_addrs: p.source_addrs,
        tls: p.tls,
        protocol: p.protocol,
        thresholds: p.thresholds,
        shard: None,
        start_at: None,
        apdex_ms: p.apdex_ms,
        pacing_slack: p.pacing_slack.unwrap_or_default(),
        trace: None,
    }
    .check()
}

/// HTTP/2 with `streams` per connection (one by default, as h2load and oha) when asked for,
/// else HTTP/1.1.
fn protocol(http2: Option<Option<usize>>) -> Protocol {
    match http2 {
        None => Protocol::Http1,
        Some(streams) => Protocol::Http2 {
            streams: streams.unwrap_or(defaults::STREAMS),
        },
    }
}

/// `--http2` and `--streams` as [`protocol`] takes them.
fn http2_reach(f: &ReachFlags) -> Option<Option<usize>> {
    f.http2.then_some(f.streams)
}

/// Refuses `--streams` without `--http2` (gRPC targets, which go over HTTP/2 anyway, take it
/// alone).
fn streams_need_http2(f: &ReachFlags) -> Result<(), FlagsError> {
    match f.streams.is_some() && !f.http2 {
        true => Err(FlagsError::StreamsWithoutHttp2),
        false => Ok(()),
    }
}

/// The plan's arrival spacing for the flag's value.
fn arrival(a: Option<ArrivalArg>) -> Arrival {
    match a.unwrap_or_default() {
        ArrivalArg::Uniform => Arrival::Uniform,
        ArrivalArg::Poisson => Arrival::Poisson,
    }
}

/// A plan lowered from run flags, with the warnings its scenario file earned (keys loadlab reads
/// but ignores, one line each; none for URLs): the file is lowered once and its warnings travel
/// with the plan.
#[derive(Debug)]
pub struct Lowered {
    /// The plan.
    pub plan: ValidPlan,
    /// What the scenario file holds that loadlab ignores, one line each.
    pub warnings: Vec<String>,
}

/// `loadlab run` flags: URLs, or one scenario file with the flags that still apply to it; with
/// `--shard I/N`, shard I's part of the plan, and with `--start-at`, its common start.
pub fn flags(f: &LoadFlags) -> Result<Lowered, InputError> {
    flags_with(f, Lookup::Resolve)
}

/// As [`flags`], with host names looked up as `lookup` says: [`Lookup::Skip`] lowers the plan
/// of a run on other machines (`loadlab k8s job`), whose names resolve only there.
pub fn flags_with(f: &LoadFlags, lookup: Lookup) -> Result<Lowered, InputError> {
    let Lowered { mut plan, warnings } = whole_plan(f, lookup)?;
    if let Some(s) = f.shard {
        plan = plan.shard(s.index, s.count).map_err(FlagsError::Shard)?;
    }
    let plan = match f.start_at {
        Some(at) => plan.starting_at(at),
        None => plan,
    };
    Ok(Lowered { plan, warnings })
}

/// The plan the flags describe, before any sharding.
fn whole_plan(f: &LoadFlags, lookup: Lookup) -> Result<Lowered, InputError> {
    if f.is_scenario() {
        if f.rate.is_some() || f.ramp_to.is_some() || f.duration.is_some() || f.requests.is_some() {
            return Err(FlagsError::PhasesFromFlags.into());
        }
        if f.urls.len() != 1 {
            return Err(FlagsError::ScenarioWithUrls.into());
        }
        if f.no_keepalive {
            return Err(FlagsError::NoKeepaliveWithScenario.into());
        }
        streams_need_http2(&f.reach)?;
        let overrides = Overrides { flags: f, lookup };
        let checked = scenario_checked(Path::new(&f.urls[0]), &overrides)?;
        return Ok(Lowered {
            plan: checked.plan,
            warnings: checked.warnings,
        });
    }
    Ok(Lowered {
        plan: urls(f, lookup)?,
        warnings: Vec::new(),
    })
}

/// An experiment's workload: load flags whose URLs are paths on the topology's `fronts`
/// (`http://127.0.0.1:PORT`; several when the client balances over the replicas, and then each
/// path goes to every one of them) or gRPC methods on its `grpc_fronts` (`grpc:///package.Service/Method`,
/// the fronts themselves for a service that answers gRPC on its HTTP port), or a scenario file
/// sent to the first front.
pub fn workload(
    f: &LoadFlags,
    fronts: &[String],
    grpc_fronts: &[String],
) -> Result<ValidPlan, InputError> {
    workload_for(f, (fronts, grpc_fronts), Reflection::Ask(connect_wait(f)))
}

/// As [`workload`], before the topology is up (a lab's check of its workloads against a
/// stand-in front, for HTTP and gRPC alike): a gRPC method whose types would come from its
/// server is checked as far as its URL and flags, not asked for.
pub fn workload_before_deploy(f: &LoadFlags, fronts: &[String]) -> Result<ValidPlan, InputError> {
    workload_for(f, (fronts, fronts), Reflection::Later)
}

/// [`workload`], finding gRPC methods' types as `reflection` says.
fn workload_for(
    f: &LoadFlags,
    (fronts, grpc_fronts): (&[String], &[String]),
    reflection: Reflection,
) -> Result<ValidPlan, InputError> {
    if f.shard.is_some() || f.start_at.is_some() {
        return Err(FlagsError::ShardInWorkload.into());
    }
    let mut f = f.clone();
    if f.is_scenario() {
        // A scenario's paths are relative to its target: the (first) front.
        f.target = f.target.or_else(|| fronts.first().cloned());
        return Ok(whole_plan(&f, Lookup::Resolve)?.plan);
    }
    if f.urls.iter().any(|u| u.starts_with("grpc:///")) && grpc_fronts.is_empty() {
        return Err(FlagsError::from(GrpcError::NoGrpcFront).into());
    }
    f.urls = f
        .urls
        .iter()
        .flat_map(|url| {
            // A path goes to the topology's fronts, a gRPC method on no host
            // (`grpc:///package.Service/Method`) to where it serves gRPC.
            let grpc = url.strip_prefix("grpc://").filter(|m| m.starts_with('/'));
            match (url.starts_with('/'), grpc) {
                (true, _) => fronts.iter().map(|front| format!("{front}{url}")).collect(),
                (false, Some(method)) => grpc_fronts
                    .iter()
                    .map(|front| front.replacen("http://", "grpc://", 1) + method)
                    .collect(),
                (false, None) => vec![url.clone()],
            }
        })
        .collect();
    Ok(finish(url_parts(&f, Lookup::Resolve, reflection)?)?)
}

/// A URL the analysis commands load step by step (probe, capacity), with how to reach it.
#[derive(Debug, Clone)]
pub struct UrlTarget {
    /// The URL, as given.
    pub url: String,
    /// The request sent to it (GET without headers or body unless the flags say).
    pub request: FlagRequest,
    /// Request timeout.
    pub timeout: Duration,
    /// How an `https://` URL's certificate is checked.
    pub tls: TlsSettings,
    /// HTTP/1.1 or HTTP/2.
    pub protocol: Protocol,
}

impl UrlTarget {
    /// `url` with `--timeout`, the `reach` flags and the `request` flags; a CA file and a body
    /// file are read here, so a missing one is refused before anything runs.
    pub fn new(
        url: &str,
        timeout: Duration,
        reach: &ReachFlags,
        request: &RequestFlags,
    ) -> Result<Self, InputError> {
        streams_need_http2(reach)?;
        Ok(UrlTarget {
            url: url.to_string(),
            request: request.lowered()?,
            timeout,
            tls: tls::settings(reach.cacert.as_deref(), reach.insecure)
                .map_err(FlagsError::from)?,
            protocol: protocol(http2_reach(reach)),
        })
    }

    /// `url` over plain HTTP/1.1 defaults (no CA file, verification on).
    pub fn plain(url: &str, timeout: Duration) -> Self {
        UrlTarget {
            url: url.to_string(),
            request: FlagRequest {
                method: defaults::METHOD.into(),
                headers: Vec::new(),
                body: Vec::new(),
            },
            timeout,
            tls: TlsSettings::default(),
            protocol: Protocol::Http1,
        }
    }
}

/// The target's request under `model` until `stop`, on `threads` generator threads: what the
/// probe and the capacity search run step by step.
pub fn url(
    target: &UrlTarget,
    model: Model,
    stop: Stop,
    threads: usize,
) -> Result<ValidPlan, InputError> {
    let spec = RequestSpec {
        name: target.url.clone(),
        url: target.url.clone(),
        method: target.request.method.clone(),
        headers: target.request.headers.clone(),
        body: target.request.body.clone(),
        grpc_stream: None,
    };
    let (endpoints, requests) =
        resolve(std::slice::from_ref(&spec), Lookup::Resolve).map_err(FlagsError::from)?;
    Ok(finish(Parts {
        endpoints,
        requests,
        model,
        stop,
        timeout: Some(target.timeout),
        connect_timeout: None,
        threads: Some(threads),
        connect_rate: None,
        source_addrs: Vec::new(),
        tls: target.tls.clone(),
        protocol: target.protocol,
        thresholds: Vec::new(),
        apdex_ms: None,
        pacing_slack: None,
    })?)
}

/// A scenario file's plan with what `validate` shows beside it.
#[derive(Debug)]
pub struct CheckedScenario {
    /// The plan.
    pub plan: ValidPlan,
    /// Keys read but ignored, one line each.
    pub warnings: Vec<String>,
    /// What the file asks that the plan does not show, one line each.
    pub notes: Vec<String>,
}

/// A scenario file, read from `path`, with the run flags that still apply to it: its plan, the
/// warnings about ignored keys and the notes `validate` prints.
pub fn scenario_checked(path: &Path, o: &Overrides<'_>) -> Result<CheckedScenario, InputError> {
    let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    Ok(scenario_text(&text, path, o)?)
}

/// A scenario's text (read from `path`, which payload paths are relative to) as a plan: what
/// [`scenario_checked`] does once the file is read.
pub fn scenario_text(
    text: &str,
    path: &Path,
    o: &Overrides<'_>,
) -> Result<CheckedScenario, ScenarioError> {
    let f = o.flags;
    let seed = f.seed.unwrap_or(defaults::SEED);
    let flags = ScriptFlags {
        pooled: f.connections.is_some() || f.max_connections.is_some(),
        ..f.script.clone()
    };
    let sc = scenario::from_text(text, path, f.target.as_deref(), seed, o.lookup, &flags)?;
    let (warnings, notes) = (sc.warnings, sc.notes);
    let model = match sc.phases {
        Phases::Rates(phases) => {
            let connections = f
                .connections
                .unwrap_or(sc.endpoints.len().min(sc.pool.unwrap_or(usize::MAX)));
            // Room for the largest phase cap of users at once; past a phase's own cap an
            // arriving user is skipped, not queued.
            let max_connections = f
                .max_connections
                .or(sc.pool)
                .unwrap_or(defaults::MAX_CONNECTIONS.max(connections))
                .max(sc.max_vusers.unwrap_or(0));
            Model::Open {
                phases,
                arrival: arrival(f.arrival),
                seed,
                arrivals: match sc.users {
                    Some(users) => Arrivals::Sessions {
                        users: Arc::new(users),
                        max_sessions: max_connections,
                    },
                    None => Arrivals::Requests {
                        connections,
                        max_connections,
                    },
                },
            }
        }
        Phases::Users(phases) => {
            if f.connections.is_some() || f.max_connections.is_some() {
                return Err(ScenarioError::invalid(path, Problem::ConnectionsWithUsers));
            }
            Model::Users {
                phases,
                users: Arc::new(
                    sc.users
                        .expect("a file of users phases lowers into virtual users"),
                ),
            }
        }
    };
    finish(Parts {
        endpoints: sc.endpoints,
        requests: sc.requests,
        model,
        stop: Stop::default(),
        timeout: sc.timeout.or(f.timeout),
        connect_timeout: f.connect_timeout,
        threads: f.threads,
        connect_rate: f.connect_rate,
        source_addrs: source_addrs(f),
        tls: tls::settings(
            f.reach.cacert.as_deref().or(sc.tls.cacert.as_deref()),
            f.reach.insecure || sc.tls.insecure,
        )
        .map_err(|e| ScenarioError::invalid(path, e))?,
        // The flags' HTTP/2 wins; their --streams fills in for the file's.
        protocol: protocol(match (http2_reach(&f.reach), sc.http2) {
            (Some(flag), file) => Some(flag.or(file.flatten())),
            (None, file) => file,
        }),
        thresholds: sc.thresholds.into_iter().chain(thresholds(f)).collect(),
        apdex_ms: sc.apdex_ms,
        pacing_slack: f.pacing_slack,
    })
    .map(|plan| CheckedScenario {
        plan,
        warnings,
        notes,
    })
    .map_err(|e| ScenarioError::invalid(path, e))
}

/// URLs with their method, headers and body, under the closed or open model the flags say,
/// their hosts looked up as `lookup` says.
fn urls(f: &LoadFlags, lookup: Lookup) -> Result<ValidPlan, InputError> {
    let reflection = match lookup {
        Lookup::Skip => Reflection::Never,
        _ => Reflection::Ask(connect_wait(f)),
    };
    Ok(finish(url_parts(f, lookup, reflection)?)?)
}

/// How long asking a server (its reflection) may wait: the connect timeout.
fn connect_wait(f: &LoadFlags) -> Duration {
    f.connect_timeout.unwrap_or(defaults::CONNECT_TIMEOUT)
}

/// The parts of the plan of [`urls`], before the defaults and the checks.
fn url_parts(f: &LoadFlags, lookup: Lookup, reflection: Reflection) -> Result<Parts, FlagsError> {
    let request = f.request.lowered()?;
    let grpc = crate::grpc::any_grpc(&f.urls)?;
    let specs = if grpc {
        if f.no_keepalive {
            return Err(GrpcError::Http1Flag("--no-keepalive").into());
        }
        if f.pipeline.is_some_and(|p| p > 1) {
            return Err(GrpcError::Http1Flag("-p").into());
        }
        crate::grpc::call_specs(
            &f.urls,
            &f.grpc,
            (&request.headers, &request.body),
            f.request.method.is_some(),
            f.timeout,
            reflection,
            &tls::settings(f.reach.cacert.as_deref(), f.reach.insecure)?,
        )?
    } else {
        if !f.grpc.proto.is_empty() || !f.grpc.protoset.is_empty() {
            return Err(GrpcError::ProtoWithoutGrpc.into());
        }
        http_specs(f, request)
    };
    let (endpoints, mut requests) = resolve(&specs, lookup)?;
    // A call whose client streams over time gets that time on top of the default deadline.
    let timeout = f.timeout.or_else(|| {
        let span = crate::grpc::sending_span(&specs);
        (!span.is_zero()).then(|| span.saturating_add(defaults::TIMEOUT))
    });
    if grpc {
        // Reports name a call by its grpc:// URL, not the HTTP/2 request it goes as.
        for (r, url) in requests.iter_mut().zip(&f.urls) {
            r.url = url.clone();
        }
    }

    let duration = match (f.duration, f.requests) {
        (None, None) => Some(defaults::DURATION),
        (d, _) => d,
    };
    let pipeline = f.pipeline.unwrap_or(defaults::PIPELINE);
    let model = match f.rate {
        None => Model::Closed {
            connections: f
                .connections
                .unwrap_or(defaults::CONNECTIONS.max(endpoints.len())),
            pipeline,
        },
        Some(rate) => {
            if pipeline > 1 {
                return Err(FlagsError::PipelineWithRate);
            }
            let connections = f.connections.unwrap_or(endpoints.len());
            // A constant rate lasts until the run stops; a ramp spans the run's duration.
            let phase = match (f.ramp_to, duration) {
                (Some(to), Some(d)) => RatePhase::ramp("main", rate, to, d),
                (Some(_), None) => return Err(FlagsError::RampWithoutDuration),
                (None, _) => RatePhase::constant("main", rate, None),
            };
            Model::Open {
                phases: vec![phase],
                arrival: arrival(f.arrival),
                seed: f.seed.unwrap_or(defaults::SEED),
                arrivals: Arrivals::Requests {
                    connections,
                    max_connections: f
                        .max_connections
                        .unwrap_or(defaults::MAX_CONNECTIONS.max(connections)),
                },
            }
        }
    };
    Ok(Parts {
        endpoints,
        requests,
        model,
        stop: Stop {
            duration,
            count: f.requests,
        },
        timeout,
        connect_timeout: f.connect_timeout,
        threads: f.threads,
        connect_rate: f.connect_rate,
        source_addrs: source_addrs(f),
        tls: tls::settings(f.reach.cacert.as_deref(), f.reach.insecure)?,
        // gRPC goes over HTTP/2 whether or not --http2 was given.
        protocol: protocol(match grpc {
            true => Some(f.reach.streams),
            false => {
                streams_need_http2(&f.reach)?;
                http2_reach(&f.reach)
            }
        }),
        thresholds: thresholds(f),
        apdex_ms: None,
        pacing_slack: f.pacing_slack,
    })
}

/// The requests of HTTP URLs: each the flags' request, sent to its URL.
fn http_specs(f: &LoadFlags, request: FlagRequest) -> Vec<RequestSpec> {
    let FlagRequest {
        method,
        mut headers,
        body,
    } = request;
    if f.no_keepalive {
        // The server closes after answering; the engine then opens the next connection.
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case("connection"));
        headers.push(("Connection".into(), "close".into()));
    }
    f.urls
        .iter()
        .map(|url| RequestSpec {
            name: url.clone(),
            url: url.clone(),
            method: method.clone(),
            headers: headers.clone(),
            body: body.clone(),
            grpc_stream: None,
        })
        .collect()
}

/// The source addresses of every `--source-addr`, in order.
fn source_addrs(f: &LoadFlags) -> Vec<IpAddr> {
    f.source_addrs
        .iter()
        .flat_map(|l| l.0.iter().copied())
        .collect()
}

/// The thresholds of every `--slo`, in order.
fn thresholds(f: &LoadFlags) -> Vec<Threshold> {
    f.slo.iter().flat_map(|l| l.0.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::{mutations, USERS_SEED};

    /// Overrides of `flags` (leaked: a test's flags live as long as the test binary).
    fn with(flags: LoadFlags) -> Overrides<'static> {
        Overrides {
            flags: Box::leak(Box::new(flags)),
            lookup: Lookup::Resolve,
        }
    }

    /// Overrides of no flag at all.
    fn no_flags() -> Overrides<'static> {
        with(LoadFlags::default())
    }

    #[test]
    fn lowering_flows_and_chains_never_panics_on_mangled_files() {
        let path = Path::new("fuzz.yaml");
        let flags = no_flags();
        let plan = scenario_text(USERS_SEED, path, &flags).unwrap().plan;
        assert!(plan.model.users().is_some(), "the seed runs as users");
        mutations(USERS_SEED, 3000, |text| {
            // Only loopback addresses: a mangled host name would wait on a resolver.
            if text.matches("://").count() == 1 && text.contains("http://127.0.0.1:") {
                let _ = scenario_text(text, path, &flags);
            }
        });
    }

    #[test]
    fn https_targets_and_the_tls_flags_reach_the_plan_from_flags_files_and_workloads() {
        let dir = std::env::temp_dir().join(format!("loadlab-lower-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let from_flags = urls(
            &LoadFlags {
                urls: vec!["https://127.0.0.1/x".into()],
                reach: ReachFlags {
                    cacert: Some(ca.clone()),
                    ..ReachFlags::default()
                },
                ..LoadFlags::default()
            },
            Lookup::Resolve,
        )
        .unwrap();
        assert_eq!(from_flags.endpoints[0].addr.port(), 443);
        assert_eq!(from_flags.endpoints[0].tls.as_deref(), Some("127.0.0.1"));
        let cacert = from_flags.tls.cacert.as_ref().unwrap();
        assert_eq!(cacert.path, ca.display().to_string());
        assert!(!from_flags.tls.insecure);

        let from_workload = workload(
            &LoadFlags {
                urls: vec!["https://127.0.0.1:8443/y".into(), "/z".into()],
                reach: ReachFlags {
                    insecure: true,
                    ..ReachFlags::default()
                },
                ..LoadFlags::default()
            },
            &["http://127.0.0.1:1".to_string()],
            &[],
        )
        .unwrap();
        assert!(from_workload.tls.insecure);
        assert_eq!(from_workload.endpoints.len(), 2);
        assert_eq!(from_workload.endpoints[1].tls, None, "the topology's front");

        let file = dir.join("s.yaml");
        let text = "config:\n  target: \"https://127.0.0.1:8443\"\n  tls:\n    cacert: ca.pem\n  phases:\n    - { duration: 1, arrivalRate: 5 }\nscenarios:\n  - flow:\n      - get: { url: \"/x\" }\n";
        let from_file = scenario_text(text, &file, &no_flags()).unwrap().plan;
        assert_eq!(
            from_file.tls.cacert.as_ref().unwrap().path,
            ca.display().to_string(),
            "relative to the scenario file"
        );
        let mut insecure = LoadFlags::default();
        insecure.reach.insecure = true;
        let insecure = with(insecure);
        assert!(
            scenario_text(text, &file, &insecure)
                .unwrap()
                .plan
                .tls
                .insecure
        );

        std::fs::write(&ca, "not a certificate").unwrap();
        let e = scenario_text(text, &file, &no_flags()).unwrap_err();
        assert!(
            format!("{e:#}").contains("holds no PEM certificate"),
            "{e:#}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_input_falls_back_on_the_same_defaults() {
        let from_flags = urls(
            &LoadFlags {
                urls: vec!["http://127.0.0.1:1/x".into()],
                timeout: Some(Duration::from_secs(2)),
                ..LoadFlags::default()
            },
            Lookup::Resolve,
        )
        .unwrap();
        let text = "config:\n  target: \"http://127.0.0.1:1\"\n  http:\n    timeout: 2\n  phases:\n    - { duration: 1, arrivalRate: 5 }\nscenarios:\n  - flow:\n      - get: { url: \"/x\" }\n";
        let from_file = scenario_text(text, Path::new("d.yaml"), &no_flags())
            .unwrap()
            .plan;
        let from_url = url(
            &UrlTarget::plain("http://127.0.0.1:1/x", Duration::from_secs(2)),
            Model::closed(1, 1),
            Stop::default(),
            1,
        )
        .unwrap();
        for p in [&from_flags, &from_file, &from_url] {
            assert_eq!(p.timeout, Duration::from_secs(2));
            assert_eq!(
                p.connect_timeout,
                Duration::from_secs(2),
                "capped at the timeout"
            );
        }
        assert_eq!(from_flags.threads, defaults::threads());
        assert_eq!(from_file.threads, defaults::threads());
    }

    #[test]
    fn http2_and_its_streams_reach_the_plan_from_flags_and_files_and_refuse_pipelining() {
        let flags = |http2: bool, streams: Option<usize>, pipeline: Option<usize>| LoadFlags {
            urls: vec!["http://127.0.0.1:9/x".into()],
            reach: ReachFlags {
                http2,
                streams,
                ..ReachFlags::default()
            },
            pipeline,
            ..LoadFlags::default()
        };
        let plan = |f: &LoadFlags| urls(f, Lookup::Resolve).map(|p| p.protocol);
        assert_eq!(plan(&flags(false, None, None)).unwrap(), Protocol::Http1);
        assert_eq!(
            plan(&flags(true, None, None)).unwrap(),
            Protocol::Http2 {
                streams: defaults::STREAMS
            }
        );
        assert_eq!(
            plan(&flags(true, Some(16), None)).unwrap(),
            Protocol::Http2 { streams: 16 }
        );
        let refused = plan(&flags(true, Some(4), Some(8)))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--streams"), "{refused}");

        let text = "config:\n  target: \"http://127.0.0.1:9\"\n  http:\n    http2: true\n    streams: 6\n  phases:\n    - { duration: 1, arrivalRate: 5 }\nscenarios:\n  - flow:\n      - get: { url: \"/x\" }\n";
        let file = Path::new("h2.yaml");
        let from_file = scenario_text(text, file, &no_flags()).unwrap().plan;
        assert_eq!(from_file.protocol, Protocol::Http2 { streams: 6 });
        // The flags' --streams wins over the file's.
        let mut h2 = LoadFlags::default();
        h2.reach.http2 = true;
        h2.reach.streams = Some(2);
        let overridden = with(h2);
        let from_both = scenario_text(text, file, &overridden).unwrap().plan;
        assert_eq!(from_both.protocol, Protocol::Http2 { streams: 2 });
        let plain_text = text.replace("    http2: true\n    streams: 6\n", "    timeout: 5\n");
        let http1 = scenario_text(&plain_text, file, &no_flags()).unwrap().plan;
        assert_eq!(http1.protocol, Protocol::Http1);
    }

    #[test]
    fn a_workloads_grpc_method_without_a_host_goes_to_each_front() {
        let proto = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../grpc/proto/loadlab/reference/v1/reference.proto"
        );
        let words: Vec<String> = [
            "grpc:///loadlab.reference.v1.Reference/Ping",
            "--proto",
            proto,
            "-n",
            "4",
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        let f = LoadFlags::parse_words(&words).unwrap();
        let fronts = [
            "http://127.0.0.1:18081".to_string(),
            "http://127.0.0.1:18082".to_string(),
        ];
        let plan = workload(&f, &fronts, &fronts).unwrap();
        let urls: Vec<&str> = plan.requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "grpc://127.0.0.1:18081/loadlab.reference.v1.Reference/Ping",
                "grpc://127.0.0.1:18082/loadlab.reference.v1.Reference/Ping"
            ]
        );
        // A topology that serves gRPC from ports of its own (a Node or Python replica's gRPC
        // server) gets the calls there, and one that serves none refuses them in one line.
        let sidecar = ["http://127.0.0.1:18090".to_string()];
        let plan = workload(&f, &fronts, &sidecar).unwrap();
        assert_eq!(
            plan.requests[0].url,
            "grpc://127.0.0.1:18090/loadlab.reference.v1.Reference/Ping"
        );
        let e = workload(&f, &fronts, &[]).unwrap_err().to_string();
        assert!(e.contains("serves no gRPC"), "{e}");
        // An autoscaled topology (its balancer passes HTTP/1.1) is named too.
        assert!(e.contains("an autoscaled topology's balancer"), "{e}");
        assert!(plan.requests.iter().all(|r| r.is_grpc()
            && r.path == "/loadlab.reference.v1.Reference/Ping"
            && r.method == "POST"));
        assert!(matches!(plan.protocol, Protocol::Http2 { .. }));
    }

    #[test]
    fn refused_flags_say_which_flag_and_why() {
        let flags = |words: &[&str]| {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            LoadFlags::parse_words(&words).unwrap()
        };
        let e = super::flags(&flags(&["http://127.0.0.1:9/", "-p", "2", "-R", "10"])).unwrap_err();
        assert!(
            matches!(e, InputError::Flags(FlagsError::PipelineWithRate)),
            "{e:?}"
        );
        let e = super::flags(&flags(&["gopher://127.0.0.1/"])).unwrap_err();
        let InputError::Flags(FlagsError::Url(crate::UrlError::UnsupportedScheme {
            scheme, ..
        })) = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(scheme, "gopher");
        let e = super::flags(&flags(&["http://127.0.0.1:9/", "-H", "nocolon"])).unwrap_err();
        let InputError::Flags(FlagsError::Header(crate::HeaderError::NoColon(header))) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(header, "nocolon");
        // The wrapped errors are in the message, not in the source chain: {:#} adds nothing.
        assert!(std::error::Error::source(&e).is_none());
        let e = super::flags(&flags(&["/nonexistent/s.yaml", "-c", "2"])).unwrap_err();
        let InputError::Scenario(scenario) = &e else {
            panic!("{e:?}");
        };
        let ScenarioError::Read { path, .. } = scenario.as_ref() else {
            panic!("{e:?}");
        };
        assert_eq!(path, Path::new("/nonexistent/s.yaml"));
    }

    #[test]
    fn no_keepalive_asks_the_server_to_close_after_each_response() {
        let plan = urls(
            &LoadFlags {
                urls: vec!["http://127.0.0.1:9/x".into()],
                request: RequestFlags {
                    headers: vec!["connection: keep-alive".into(), "X-A: 1".into()],
                    ..RequestFlags::default()
                },
                no_keepalive: true,
                ..LoadFlags::default()
            },
            Lookup::Resolve,
        )
        .unwrap();
        let headers = &plan.requests[0].headers;
        assert_eq!(
            headers,
            &vec![
                ("X-A".to_string(), "1".to_string()),
                ("Connection".to_string(), "close".to_string())
            ]
        );
    }
}
