//! Topologies of the service under test, described: workers, replicas and their balancer, the
//! runtime or the user's own command, stores and consumers, with their one table of defaults.
//! `input` builds one from flags or an experiment file; `lab` deploys it.

use std::time::Duration;

/// The defaults of a topology the user did not spell out, in one place for `serve`,
/// experiments and the demo.
pub mod defaults {
    use super::{Lb, Runtime};

    use std::time::Duration;

    /// Worker processes per replica.
    pub const WORKERS: usize = 1;
    /// Replicas.
    pub const REPLICAS: usize = 1;
    /// The balancer in front of replicas.
    pub const LB: Lb = Lb::Nginx;
    /// The runtime of loadlab's service.
    pub const RUNTIME: Runtime = Runtime::Rust;
    /// The path polled for readiness.
    pub const HEALTH_PATH: &str = "/health";
    /// How long a replica may take to become ready: a Node or Python service installs its
    /// dependencies and a gunicorn pool forks its workers within it on a loaded 2-core machine.
    pub const READY_TIMEOUT: Duration = Duration::from_secs(15);
    /// nginx's timeouts towards the replicas (seed 001 ran nginx with 60 s).
    pub const PROXY_TIMEOUT: Duration = Duration::from_secs(60);
    /// Where the service's standard output goes: a pipe the lab drains, as a container
    /// runtime's log driver reads a container's (seed 004's logging cost was measured there).
    pub const STDOUT: super::Stdout = super::Stdout::Pipe;
}

/// Where a topology's service processes write their standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdout {
    /// `/dev/null`: a write costs the system call alone.
    Null,
    /// A pipe the lab reads and discards, as a container runtime's log driver reads one: a
    /// write wakes the reader, and blocks when the pipe is full.
    Pipe,
    /// A file on disk, one per process, removed when the topology stops.
    File,
    /// A terminal (a pseudo-terminal the lab reads and discards), as when a service runs in
    /// a developer's shell: runtimes write to it synchronously, and Node colours what it
    /// formats.
    Tty,
}

impl Stdout {
    /// Every destination, in the order help texts list them.
    pub const ALL: [Stdout; 4] = [Stdout::Null, Stdout::Pipe, Stdout::File, Stdout::Tty];

    /// Its name in experiment files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Stdout::Null => "null",
            Stdout::Pipe => "pipe",
            Stdout::File => "file",
            Stdout::Tty => "tty",
        }
    }

    /// The destination `name` names, if any.
    pub fn named(name: &str) -> Option<Stdout> {
        Stdout::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The load balancer in front of replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lb {
    /// The real nginx, configured and run by loadlab.
    Nginx,
    /// loadlab's own round-robin TCP proxy.
    Builtin,
    /// No balancer: the load goes to every replica's own URL at once, as clients balancing
    /// by DNS do (seed 003).
    Client,
}

impl Lb {
    /// Every balancer, in the order help texts list them.
    pub const ALL: [Lb; 3] = [Lb::Nginx, Lb::Builtin, Lb::Client];

    /// Its name on the command line and in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            Lb::Nginx => "nginx",
            Lb::Builtin => "builtin",
            Lb::Client => "client",
        }
    }

    /// The balancer named `name`, if any.
    pub fn named(name: &str) -> Option<Lb> {
        Lb::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// A runtime of the reference service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Runtime {
    /// loadlab's own service (crates/service), in-process.
    #[default]
    Rust,
    /// Express on Node's http; `cluster` for workers.
    Node,
    /// A WSGI app under gunicorn; sync workers, or gevent ones.
    Python,
}

impl Runtime {
    /// Every runtime, in the order tables list them.
    pub const ALL: [Runtime; 3] = [Runtime::Rust, Runtime::Node, Runtime::Python];

    /// Its name on the command line and in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Rust => "rust",
            Runtime::Node => "node",
            Runtime::Python => "python",
        }
    }

    /// The runtime named `name`, if any.
    pub fn named(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to deploy.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Worker processes per replica: loadlab processes sharing the replica's port for Rust,
    /// the runtime's own workers (Node `cluster`, gunicorn) for the others.
    pub workers: usize,
    /// Replicas, each on its own port; more than one puts a load balancer in front.
    pub replicas: usize,
    /// The load balancer, when there are replicas.
    pub lb: Lb,
    /// Port of the front (the balancer, or the only replica); 0 picks a free one.
    pub port: u16,
    /// The user's server command (reads `$PORT`), instead of loadlab's service.
    pub command: Option<String>,
    /// The runtime of loadlab's service (not of a user's command).
    pub runtime: Runtime,
    /// Extra arguments for `loadlab serve` (black-box settings, threads).
    pub serve_args: Vec<String>,
    /// Path polled for readiness; any HTTP response counts.
    pub health_path: String,
    /// How long a replica may take to become ready.
    pub ready_timeout: Duration,
    /// nginx's timeouts towards the replicas.
    pub proxy_timeout: Duration,
    /// Requests nginx serves at once; past them it closes a new request's connection without
    /// an answer, a front that sheds load (`None`: no limit).
    pub lb_connections: Option<usize>,
    /// A black box every instance shares, started first as one `loadlab serve` with these
    /// flags (`--bbox-workers 3 --bbox-delay 905ms`): each instance's `/bbox/*` call it, as
    /// seed 000's topologies all called one box. `None`: each instance serves its own.
    pub shared_bbox: Option<Vec<String>>,
    /// Put the balancer in front of a single replica too (seed 003's balancer with one
    /// instance); with more replicas it always stands in front.
    pub lb_alone: bool,
    /// Start a redis-server first and give every instance its URL (`--redis-url`, or
    /// `$REDIS_URL` for a user's command).
    pub redis: bool,
    /// With `redis`: `loadlab consume` processes counting the visits application's page
    /// views (named `counter-1`, `counter-2`, …).
    pub consumers: usize,
    /// Counters per page the consumers spread views over (`None`: the consumer's default;
    /// the service must be given the same).
    pub shards: Option<usize>,
    /// Profile its processes' CPU during each run against it (a lab's watch: deploying does
    /// not read it).
    pub profile: bool,
    /// nginx serves `/static/` itself, from copies of the service's static files taken at
    /// start (seed 002's second test); only with `Lb::Nginx`.
    pub static_at_lb: bool,
    /// Where the service processes' standard output goes.
    pub stdout: Stdout,
    /// Cores each replica may run on (all its workers together), pinned round robin over the
    /// host's cores, as a container given that many CPUs; `None` for every core.
    pub cpus: Option<usize>,
    /// CPUs' worth of time each replica may use (all its workers together), a fraction such
    /// as 0.25, enforced by a control group's CPU quota as `docker run --cpus 0.25` does.
    pub cpu_quota: Option<f64>,
    /// Memory each replica may hold, bytes, without swap, enforced by a control group's
    /// limit as `docker run --memory` does (the kernel's OOM killer ends a replica past it).
    pub memory_bytes: Option<u64>,
    /// What nginx may use (its master and workers together).
    pub balancer_budget: Budget,
    /// What redis-server may use.
    pub store_budget: Budget,
    /// What each visits consumer may use.
    pub consumer_budget: Budget,
    /// Cores the topology's processes may run on (empty: every core); the lab sets it when
    /// the budgets leave cores free for the generator.
    pub on_cores: Vec<usize>,
    /// Instances started and stopped by an autoscaler while load runs, instead of
    /// `replicas` fixed ones (`None`: fixed).
    pub autoscale: Option<Autoscale>,
}

/// Who decides an autoscaled topology's instance count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalePolicy {
    /// Kubernetes' Horizontal Pod Autoscaler.
    Hpa,
    /// Knative's Pod Autoscaler (Cloud Run's model).
    Kpa,
}

/// What an autoscaled topology scales on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleMetric {
    /// CPU as a share of each instance's quota (the HPA only).
    Cpu,
    /// Requests in flight per instance.
    Concurrency,
    /// Requests a second per instance.
    Rps,
}

impl ScalePolicy {
    /// Its name in topology files.
    pub fn name(self) -> &'static str {
        match self {
            ScalePolicy::Hpa => "hpa",
            ScalePolicy::Kpa => "kpa",
        }
    }
}

impl ScaleMetric {
    /// Its name in topology files.
    pub fn name(self) -> &'static str {
        match self {
            ScaleMetric::Cpu => "cpu",
            ScaleMetric::Concurrency => "concurrency",
            ScaleMetric::Rps => "rps",
        }
    }
}

/// An autoscaled topology's settings (issue 55): `min` to `max` instances of the service, each
/// on the topology's budget, behind loadlab's balancer; every duration and ratio has its
/// platform's default in [`Autoscale::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscale {
    /// Who decides.
    pub policy: ScalePolicy,
    /// Fewest instances (0 lets the KPA scale to zero).
    pub min: u32,
    /// Most instances.
    pub max: u32,
    /// Instances at the start (Knative's `initial-scale`, 1), within `min` and `max`.
    pub initial: u32,
    /// On what.
    pub metric: ScaleMetric,
    /// The metric per instance aimed at: a share of the quota for `cpu` (0.6), requests in
    /// flight or a second otherwise.
    pub target: f64,
    /// Requests in flight an instance takes at most (`containerConcurrency`; `None`: no
    /// limit); past it requests wait at the balancer, then get 429.
    pub container_concurrency: Option<u32>,
    /// How long a request may wait at the balancer for room before its 429.
    pub hold_timeout: Duration,
    /// The least time from an instance's start to its first request (an image's pull, a
    /// runtime's start): it joins no sooner, however soon it answers.
    pub cold_start: Duration,
    /// The HPA's sync period (15 s).
    pub sync: Duration,
    /// The HPA's tolerance (0.1).
    pub tolerance: f64,
    /// The HPA's scale-down stabilization window (300 s).
    pub scale_down_stabilization: Duration,
    /// The KPA's stable window (60 s).
    pub stable_window: Duration,
    /// The KPA's panic window (6 s).
    pub panic_window: Duration,
    /// The KPA panics when the panic window asks for this many times the ready instances (2.0).
    pub panic_threshold: f64,
    /// The share of the target the KPA aims at (0.7).
    pub utilization: f64,
    /// How long the KPA waits, its revision inactive, before removing the last instance (30 s).
    pub scale_to_zero_grace: Duration,
}

impl Autoscale {
    /// `policy` between `min` and `max` at `target` per instance on `metric`, with the
    /// platform's defaults for the rest.
    pub fn new(policy: ScalePolicy, min: u32, max: u32, metric: ScaleMetric, target: f64) -> Self {
        Autoscale {
            policy,
            min,
            max,
            initial: 1,
            metric,
            target,
            container_concurrency: None,
            hold_timeout: Duration::from_secs(10),
            cold_start: Duration::ZERO,
            sync: Duration::from_secs(15),
            tolerance: 0.1,
            scale_down_stabilization: Duration::from_secs(300),
            stable_window: Duration::from_secs(60),
            panic_window: Duration::from_secs(6),
            panic_threshold: 2.0,
            utilization: 0.7,
            scale_to_zero_grace: Duration::from_secs(30),
        }
    }
}

/// What one instance (a replica, the balancer, the store, a consumer) may use, as a
/// container's limits say it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Budget {
    /// CPUs' worth of time per period (0.25: a quarter of one core), all its processes together.
    pub cpus: Option<f64>,
    /// Memory it may hold, bytes, without swap.
    pub memory_bytes: Option<u64>,
}

impl Budget {
    /// True when it limits nothing.
    pub fn is_none(&self) -> bool {
        self.cpus.is_none() && self.memory_bytes.is_none()
    }
}

impl Topology {
    /// What each replica may use.
    pub fn replica_budget(&self) -> Budget {
        Budget {
            cpus: self.cpu_quota,
            memory_bytes: self.memory_bytes,
        }
    }

    /// The kinds of process the topology runs, each with how many and the CPU quota of each:
    /// the replicas, then nginx, redis-server and the consumers when it has them.
    pub fn cpu_quotas(&self) -> Vec<(&'static str, usize, Option<f64>)> {
        let balanced = self.replicas > 1 && self.lb == Lb::Nginx && self.autoscale.is_none();
        // An autoscaled topology may run its most instances at once.
        let replicas = self
            .autoscale
            .as_ref()
            .map_or(self.replicas, |a| a.max as usize);
        [
            (true, "replica", replicas, self.cpu_quota),
            (balanced, "nginx", 1, self.balancer_budget.cpus),
            (self.redis, "redis-server", 1, self.store_budget.cpus),
            (
                self.consumers > 0,
                "consumer",
                self.consumers,
                self.consumer_budget.cpus,
            ),
        ]
        .into_iter()
        .filter_map(|(runs, kind, n, cpus)| runs.then_some((kind, n, cpus)))
        .collect()
    }

    /// CPU quotas of every process of the topology together, CPUs.
    pub fn quota_total(&self) -> f64 {
        self.cpu_quotas()
            .iter()
            .map(|(_, n, cpus)| *n as f64 * cpus.unwrap_or(0.0))
            .sum()
    }
}
