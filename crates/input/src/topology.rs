//! A topology as the user describes it (`loadlab serve`'s flags, an experiment's `topologies`
//! entry, the demo's tour), before its defaults; [`lower`] turns it into the one
//! [`Topology`] the lab deploys, with every default from [`loadlab_run::topology::defaults`].

use std::time::Duration;

use loadlab_run::topology::{
    defaults, Autoscale, Budget, Lb, Runtime, ScaleMetric, ScalePolicy, Stdout, Topology,
};

/// A topology that cannot be deployed as described.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// A balancer name that is not one.
    #[error("lb must be nginx, builtin or client, got {0:?}")]
    UnknownLb(String),
    /// A runtime name that is not one.
    #[error("unknown runtime {0:?}; use rust, node or python")]
    UnknownRuntime(String),
    /// A standard-output destination that is not one.
    #[error("stdout must be null, pipe, file or tty, got {0:?}")]
    UnknownStdout(String),
    /// A store name that is not one.
    #[error("store must be memory or redis, got {0:?}")]
    UnknownStore(String),
    /// A static-files server that is not one.
    #[error("static_files must be service or nginx, got {0:?}")]
    UnknownStaticFiles(String),
    /// nginx serving the static files without nginx in front of replicas.
    #[error("static files at the balancer need nginx in front of the replicas (replicas > 1, or lb: nginx with one)")]
    StaticWithoutNginx,
    /// A limit on nginx's connections without nginx in front of the replicas.
    #[error("lb_connections limits nginx: put nginx in front of the replicas (replicas > 1, or lb: nginx with one)")]
    ConnectionsWithoutNginx,
    /// Zero workers or replicas.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A memory size that cannot be read.
    #[error("memory: {0}")]
    Memory(String),
    /// A budget of zero or less.
    #[error("{0} must be more than 0")]
    NotPositive(&'static str),
    /// A runtime asked for together with the user's own command.
    #[error("--runtime applies to loadlab's service; --cmd runs your own server")]
    RuntimeWithCommand,
    /// `serve:` flags that do not split into words.
    #[error("serve: {0}")]
    ServeArgs(String),
    /// A `proxy_timeout` that is not a duration.
    #[error("proxy_timeout {0}")]
    ProxyTimeout(String),
    /// A shared black box asked of the Python service, which cannot call one.
    #[error(
        "the python service cannot call a shared black box (shared_bbox): use runtime node or rust"
    )]
    SharedBboxPython,
    /// Consumers of the visits queue without Redis to read it from.
    #[error("the visits application's consumers read a Redis stream: give the topology redis")]
    ConsumersWithoutRedis,
    /// Autoscaling settings that cannot be run.
    #[error("autoscale: {0}")]
    Autoscale(String),
}

/// A topology as described, every part optional; `None` and `false` take the defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopologyInput {
    /// Worker processes per replica.
    pub workers: Option<usize>,
    /// Replicas.
    pub replicas: Option<usize>,
    /// The balancer.
    pub lb: Option<Lb>,
    /// Port of the front; 0 or `None` picks a free one.
    pub port: Option<u16>,
    /// The user's own server command, instead of loadlab's service.
    pub command: Option<String>,
    /// The runtime of loadlab's service.
    pub runtime: Option<Runtime>,
    /// Extra arguments for every `loadlab serve` instance.
    pub serve_args: Vec<String>,
    /// Path polled for readiness.
    pub health_path: Option<String>,
    /// How long a replica may take to become ready.
    pub ready_timeout: Option<Duration>,
    /// nginx's timeouts towards the replicas.
    pub proxy_timeout: Option<Duration>,
    /// Requests nginx serves at once (`None`: no limit).
    pub lb_connections: Option<usize>,
    /// Flags of a black box every instance shares (`None`: each serves its own).
    pub shared_bbox: Option<Vec<String>>,
    /// Start a redis-server of the topology's own.
    pub redis: bool,
    /// Consumers of the visits application's queue (they need `redis`).
    pub consumers: usize,
    /// Counters per page the consumers spread views over.
    pub shards: Option<usize>,
    /// Profile the topology's processes during each run against it.
    pub profile: bool,
    /// nginx serves `/static/` itself.
    pub static_at_lb: bool,
    /// Where the service processes' standard output goes.
    pub stdout: Option<Stdout>,
    /// CPUs each replica may use: whole ones pin it to that many cores, a fraction sets a
    /// quota.
    pub cpus: Option<f64>,
    /// Memory each replica may hold, bytes.
    pub memory: Option<u64>,
    /// What nginx may use.
    pub balancer_budget: Budget,
    /// What redis-server may use.
    pub store_budget: Budget,
    /// What each consumer may use.
    pub consumer_budget: Budget,
    /// Instances started and drained by an autoscaler instead of fixed replicas.
    pub autoscale: Option<Autoscale>,
}

/// The balancer `name` names (`nginx`, `builtin`, `client`).
pub fn lb_named(name: &str) -> Result<Lb, TopologyError> {
    Lb::named(name).ok_or_else(|| TopologyError::UnknownLb(name.into()))
}

/// The runtime `name` names (`rust`, `node`, `python`).
pub fn runtime_named(name: &str) -> Result<Runtime, TopologyError> {
    Runtime::named(name).ok_or_else(|| TopologyError::UnknownRuntime(name.into()))
}

/// The standard-output destination `name` names (`null`, `pipe`, `file`, `tty`).
pub fn stdout_named(name: &str) -> Result<Stdout, TopologyError> {
    Stdout::named(name).ok_or_else(|| TopologyError::UnknownStdout(name.into()))
}

/// The topology `input` describes, its gaps filled from the defaults, checked.
pub fn lower(input: &TopologyInput) -> Result<Topology, TopologyError> {
    let lb = input.lb.unwrap_or(defaults::LB);
    let runtime = input.runtime.unwrap_or(defaults::RUNTIME);
    let workers = input.workers.unwrap_or(defaults::WORKERS);
    let replicas = input.replicas.unwrap_or(defaults::REPLICAS);
    if workers == 0 {
        return Err(TopologyError::Zero("workers"));
    }
    if replicas == 0 {
        return Err(TopologyError::Zero("replicas"));
    }
    if input.cpus.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
        return Err(TopologyError::NotPositive("cpus"));
    }
    if input.command.is_some() && runtime != Runtime::Rust {
        return Err(TopologyError::RuntimeWithCommand);
    }
    if input.consumers > 0 && !input.redis {
        return Err(TopologyError::ConsumersWithoutRedis);
    }
    if input.shared_bbox.is_some() && runtime == Runtime::Python && input.command.is_none() {
        return Err(TopologyError::SharedBboxPython);
    }
    // A balancer asked for by name stands in front of one replica too.
    let lb_alone = replicas == 1 && matches!(input.lb, Some(Lb::Nginx | Lb::Builtin));
    let nginx_in_front = (replicas > 1 || lb_alone) && lb == Lb::Nginx;
    if input.static_at_lb && !nginx_in_front {
        return Err(TopologyError::StaticWithoutNginx);
    }
    if input.lb_connections == Some(0) {
        return Err(TopologyError::Zero("lb_connections"));
    }
    if input.lb_connections.is_some() && !nginx_in_front {
        return Err(TopologyError::ConnectionsWithoutNginx);
    }
    if let Some(a) = &input.autoscale {
        check_autoscale(a, input)?;
    }
    Ok(Topology {
        workers,
        replicas,
        lb,
        port: input.port.unwrap_or(0),
        command: input.command.clone(),
        runtime,
        serve_args: input.serve_args.clone(),
        health_path: input
            .health_path
            .clone()
            .unwrap_or_else(|| defaults::HEALTH_PATH.into()),
        ready_timeout: input.ready_timeout.unwrap_or(defaults::READY_TIMEOUT),
        proxy_timeout: input.proxy_timeout.unwrap_or(defaults::PROXY_TIMEOUT),
        lb_connections: input.lb_connections,
        shared_bbox: input.shared_bbox.clone(),
        lb_alone,
        redis: input.redis,
        consumers: input.consumers,
        shards: input.shards,
        profile: input.profile,
        static_at_lb: input.static_at_lb,
        stdout: input.stdout.unwrap_or(defaults::STDOUT),
        cpus: input.cpus.filter(|c| c.fract() == 0.0).map(|c| c as usize),
        cpu_quota: input.cpus.filter(|c| c.fract() != 0.0),
        memory_bytes: input.memory,
        balancer_budget: input.balancer_budget,
        store_budget: input.store_budget,
        consumer_budget: input.consumer_budget,
        on_cores: Vec::new(),
        autoscale: input.autoscale.clone(),
    })
}

/// Refuses autoscaling settings a platform would refuse, or that contradict the topology.
fn check_autoscale(a: &Autoscale, input: &TopologyInput) -> Result<(), TopologyError> {
    let refuse = |why: &str| Err(TopologyError::Autoscale(why.into()));
    if input.replicas.is_some() {
        return refuse("the autoscaler sets the instance count: give min and max, not replicas");
    }
    if input.lb.is_some() {
        return refuse(
            "an autoscaled topology stands behind loadlab's own balancer, which holds the \
             requests no instance has room for: drop lb",
        );
    }
    if a.max == 0 || a.min > a.max {
        return refuse("max must be at least 1 and min at most max");
    }
    if a.policy == ScalePolicy::Hpa && a.min == 0 {
        return refuse(
            "the HPA keeps at least one instance: min 1 or more (the KPA scales to zero)",
        );
    }
    if !(a.target > 0.0 && a.target.is_finite()) {
        return refuse("target must be more than 0");
    }
    if a.container_concurrency == Some(0) {
        return refuse("container_concurrency must be at least 1 (leave it out for no limit)");
    }
    if a.metric == ScaleMetric::Cpu {
        if a.policy == ScalePolicy::Kpa {
            return refuse(
                "the KPA scales on concurrency or rps (Knative's CPU autoscaling is the HPA): use \
                 policy hpa, or metric concurrency",
            );
        }
        if !input.cpus.is_some_and(|c| c.fract() != 0.0) {
            return refuse(
                "metric cpu is a share of each instance's CPU quota: give the topology a \
                 fractional cpus (0.2)",
            );
        }
    }
    if !(a.tolerance >= 0.0
        && a.panic_threshold > 0.0
        && a.utilization > 0.0
        && a.utilization <= 1.0)
    {
        return refuse(
            "tolerance must be 0 or more, panic_threshold more than 0, utilization in (0, 100]",
        );
    }
    if a.sync.is_zero() || a.stable_window.as_secs() == 0 || a.panic_window.is_zero() {
        return refuse("sync, stable_window and panic_window must be at least 1s");
    }
    if a.panic_window > a.stable_window {
        return refuse("panic_window must not be longer than stable_window");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_on_connections_needs_nginx_in_front() {
        let input = |replicas, lb| TopologyInput {
            replicas: Some(replicas),
            lb,
            lb_connections: Some(65),
            ..TopologyInput::default()
        };
        let limited = lower(&input(1, Some(Lb::Nginx))).unwrap();
        assert_eq!(limited.lb_connections, Some(65));
        assert!(lower(&input(6, None)).is_ok());
        assert_eq!(
            lower(&input(1, None)),
            Err(TopologyError::ConnectionsWithoutNginx)
        );
        assert_eq!(
            lower(&input(6, Some(Lb::Builtin))),
            Err(TopologyError::ConnectionsWithoutNginx)
        );
        assert_eq!(
            lower(&TopologyInput {
                lb_connections: Some(0),
                ..input(6, None)
            }),
            Err(TopologyError::Zero("lb_connections"))
        );
    }

    #[test]
    fn an_empty_description_is_the_defaults() {
        let t = lower(&TopologyInput::default()).unwrap();
        assert_eq!((t.workers, t.replicas), (1, 1));
        assert_eq!(t.lb, Lb::Nginx);
        assert_eq!(t.runtime, Runtime::Rust);
        assert_eq!(t.health_path, "/health");
        assert_eq!(t.ready_timeout, defaults::READY_TIMEOUT);
        assert_eq!(t.proxy_timeout, Duration::from_secs(60));
        assert_eq!(t.port, 0);
        assert_eq!(t.stdout, Stdout::Pipe);
    }

    #[test]
    fn a_balancer_named_stands_in_front_of_one_replica_and_the_default_does_not() {
        assert!(!lower(&TopologyInput::default()).unwrap().lb_alone);
        for lb in [Lb::Nginx, Lb::Builtin] {
            let named = TopologyInput {
                lb: Some(lb),
                ..TopologyInput::default()
            };
            assert!(lower(&named).unwrap().lb_alone, "{lb:?}");
        }
        let client = TopologyInput {
            lb: Some(Lb::Client),
            ..TopologyInput::default()
        };
        assert!(!lower(&client).unwrap().lb_alone);
        let many = TopologyInput {
            lb: Some(Lb::Nginx),
            replicas: Some(3),
            ..TopologyInput::default()
        };
        assert!(
            !lower(&many).unwrap().lb_alone,
            "more replicas always have it"
        );
    }

    #[test]
    fn a_shared_black_box_is_refused_to_the_python_service_only() {
        let shared = TopologyInput {
            shared_bbox: Some(vec!["--bbox-workers".into(), "3".into()]),
            ..TopologyInput::default()
        };
        assert!(lower(&shared).unwrap().shared_bbox.is_some());
        let node = TopologyInput {
            runtime: Some(Runtime::Node),
            ..shared.clone()
        };
        assert!(lower(&node).is_ok());
        let python = TopologyInput {
            runtime: Some(Runtime::Python),
            ..shared
        };
        assert_eq!(lower(&python), Err(TopologyError::SharedBboxPython));
    }

    #[test]
    fn names_are_spelled_as_the_flags_and_files_spell_them() {
        for r in Runtime::ALL {
            assert_eq!(runtime_named(r.name()), Ok(r));
        }
        for l in Lb::ALL {
            assert_eq!(lb_named(l.name()), Ok(l));
        }
        for o in Stdout::ALL {
            assert_eq!(stdout_named(o.name()), Ok(o));
        }
        assert!(stdout_named("terminal").is_err());
        assert_eq!(
            runtime_named("java").unwrap_err().to_string(),
            "unknown runtime \"java\"; use rust, node or python"
        );
        assert_eq!(
            lb_named("haproxy").unwrap_err().to_string(),
            "lb must be nginx, builtin or client, got \"haproxy\""
        );
    }

    #[test]
    fn what_cannot_be_deployed_is_refused_in_one_line() {
        let bad = [
            TopologyInput {
                static_at_lb: true,
                ..TopologyInput::default()
            },
            TopologyInput {
                consumers: 2,
                ..TopologyInput::default()
            },
            TopologyInput {
                command: Some("python3 app.py".into()),
                runtime: Some(Runtime::Node),
                ..TopologyInput::default()
            },
            TopologyInput {
                replicas: Some(0),
                ..TopologyInput::default()
            },
        ];
        for input in bad {
            let e = lower(&input).unwrap_err().to_string();
            assert!(!e.contains('\n') && !e.is_empty(), "{input:?}: {e}");
        }
        let at_nginx = TopologyInput {
            replicas: Some(3),
            static_at_lb: true,
            ..TopologyInput::default()
        };
        assert!(lower(&at_nginx).unwrap().static_at_lb);
    }

    #[test]
    fn a_fraction_of_a_cpu_is_a_quota_and_a_whole_number_pins() {
        let with = |cpus: f64| {
            lower(&TopologyInput {
                cpus: Some(cpus),
                memory: Some(64 << 20),
                ..TopologyInput::default()
            })
        };
        let t = with(0.25).unwrap();
        assert_eq!(
            (t.cpus, t.cpu_quota, t.memory_bytes),
            (None, Some(0.25), Some(64 << 20))
        );
        let t = with(2.0).unwrap();
        assert_eq!((t.cpus, t.cpu_quota), (Some(2), None));
        assert_eq!(
            with(0.0).unwrap_err().to_string(),
            "cpus must be more than 0"
        );
        assert_eq!(
            with(-1.0).unwrap_err().to_string(),
            "cpus must be more than 0"
        );
    }
}
