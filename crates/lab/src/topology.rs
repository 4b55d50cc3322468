//! Topologies of the service under test: N worker processes sharing a port, M replicas on
//! their own ports behind nginx or the built-in proxy, or any command of the user's. Targets
//! are started by re-executing `loadlab serve`; this crate never links the service.

use std::io::{Read, Seek, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::autoscale::balancer::{self, Balancer};
use crate::autoscale::scaler::{self, Autoscaler, Launch, Policy, Probe, Started};
use crate::autoscale::{hpa, kpa};
use crate::cgroup::{Budget, Budgets, Group, CGROUP_ROOT};
use crate::nginx::{self, NginxConfig};
use crate::process::Supervised;
use crate::proxy::Proxy;
use crate::redis::RedisServer;
use crate::runtime;
use crate::LabError;
pub use loadlab_run::topology::{
    Autoscale, Lb, Runtime, ScaleMetric, ScalePolicy, Stdout, Topology,
};

/// How long the replicas must stay quiet for a settle to count them done.
const QUIET_WINDOW: Duration = Duration::from_millis(300);

/// Share of the replicas' CPU under which they count as quiet: an idle replica of any of the
/// reference runtimes uses under 1 % of a core; one still working off a backlog uses its
/// whole quota.
const QUIET_SHARE: f64 = 0.1;

/// A running topology, stopped (every process, by PID) when dropped.
pub struct Deployment {
    /// Where load goes: the balancer, or the only replica (the first one with client-side
    /// balancing).
    pub url: String,
    /// Every URL load goes to: `url`, or each replica's with client-side balancing.
    pub fronts: Vec<String>,
    /// Every URL gRPC calls go to: the fronts, for a service that answers gRPC on its HTTP
    /// port (Rust's, a user's command); each replica's gRPC process for Node and Python when
    /// deployed with [`deploy_serving_grpc`] (the only replica's, or each one's with
    /// client-side balancing); empty when the topology serves no gRPC.
    pub grpc_fronts: Vec<String>,
    /// What was started, in words (including a fallback from nginx to the built-in proxy).
    pub description: String,
    proxy: Option<Proxy>,
    balancer: Option<Supervised>,
    instances: Vec<Supervised>,
    prefix: Option<PathBuf>,
    /// Bytes of nginx's error log already read by [`Deployment::settle`].
    balancer_log_read: AtomicU64,
    redis: Option<RedisServer>,
    /// The black box every instance calls, when they share one.
    shared_bbox: Option<Supervised>,
    /// Its URL, given to every instance.
    bbox_url: Option<String>,
    consumers: Vec<Supervised>,
    /// How to start consumer `i` again (the loadlab executable, the Redis URL, the shards).
    consumer_spec: Option<(PathBuf, String, Option<usize>)>,
    /// Each replica's port, as often as processes share it (a settle probe per process).
    probes: Vec<u16>,
    /// The path a settle probe asks for.
    health_path: String,
    /// The replicas' CPU and memory budgets (their control groups), when the topology sets
    /// any; removed after the processes stop. Shared with an autoscaler, which makes a group
    /// for each instance it starts.
    budgets: Option<Arc<Mutex<Budgets>>>,
    /// The autoscaler of an autoscaled topology, and the balancer its instances stand behind.
    autoscaler: Option<Autoscaler>,
    scaled_balancer: Option<Arc<Balancer>>,
    /// The budgeted groups, to watch.
    groups: Vec<Group>,
    /// The group of each of `instances`, by name, when it has one.
    instance_groups: Vec<Option<String>>,
    /// Each consumer's group, when consumers have budgets (a consumer started again joins it).
    consumer_groups: Vec<Option<Group>>,
    /// The cores the topology's processes may use (empty: every core).
    on_cores: Vec<usize>,
}

impl Deployment {
    /// PIDs of every process started: instances first, then nginx, the shared black box, the
    /// consumers and redis-server.
    pub fn pids(&self) -> Vec<u32> {
        self.instances
            .iter()
            .chain(&self.balancer)
            .chain(&self.shared_bbox)
            .chain(&self.consumers)
            .map(Supervised::pid)
            .chain(self.redis.as_ref().map(RedisServer::pid))
            .collect()
    }

    /// Starts again, under the same name, every consumer that exited: as an orchestrator
    /// would, so it takes back the views it had not acknowledged.
    fn restart_consumers(&mut self) {
        let Some((exe, url, shards)) = &self.consumer_spec else {
            return;
        };
        for (i, c) in self.consumers.iter_mut().enumerate() {
            if let Some(status) = c.exited() {
                eprintln!("[{}] exited ({status}); starting it again", c.label);
                let mut cmd = consumer_command(exe, url, i + 1, *shards);
                let group = self.consumer_groups.get(i).and_then(Option::as_ref);
                if place(&mut cmd, group, &self.on_cores).is_err() {
                    continue;
                }
                if let Ok(fresh) = Supervised::spawn(&c.label, cmd) {
                    *c = fresh;
                }
            }
        }
    }

    /// A control group `name` with `budget`, watched with the others; none without a budget.
    fn budgeted(&mut self, name: &str, budget: Budget) -> Result<Option<Group>, LabError> {
        let Some(budgets) = self.budgets.as_ref().filter(|_| !budget.is_none()) else {
            return Ok(None);
        };
        let group = lock(budgets).group(name, &budget)?;
        self.groups.push(group.clone());
        Ok(Some(group))
    }

    /// The autoscaler of an autoscaled topology: what it decided and how many instances ran
    /// each second.
    pub fn autoscaler(&self) -> Option<&Autoscaler> {
        self.autoscaler.as_ref()
    }

    /// The control groups of its budgeted processes (a replica's processes share one).
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The control group instance `label` is in, when it has one.
    pub fn group_of(&self, label: &str) -> Option<&Group> {
        let i = self.instances.iter().position(|p| p.label == label)?;
        let name = self.instance_groups.get(i)?.as_deref()?;
        self.groups.iter().find(|g| g.name == name)
    }

    /// True when the topology runs the visits application's consumers.
    pub fn counts_visits(&self) -> bool {
        !self.consumers.is_empty()
    }

    /// The URL of the topology's redis-server, when it has one.
    pub fn redis_url(&self) -> Option<String> {
        self.redis.as_ref().map(RedisServer::url)
    }

    /// Waits up to `bound` until every replica answers a fresh request for the health path,
    /// asked of each replica's own port (past the balancer); the time it took, or `None` if
    /// some replica had not answered by then. A replica serves its queued connections in the
    /// order they came, so its answer means that what an earlier run left queued or in
    /// progress there is done (a request still sleeping without holding a worker, as an
    /// asynchronous `/delay`, does not delay the answer, and does not hold back the next run
    /// either). A refusal (429, or 503 with `Retry-After`) is not that answer: a replica at
    /// its in-flight cap refuses while the earlier requests still hold its slots. Processes
    /// sharing a port by SO_REUSEPORT are each reached only by chance: one probe per process
    /// goes to that port. An answer alone is not enough where the replica serves requests
    /// concurrently: seed 002's web instance (0.3 CPU, 10 requests in flight) answered the
    /// probe as soon as one of its slots freed, while the other nine still worked off the
    /// users' cell, and the capacity search after it read 1.3 s a page where a page alone
    /// takes 85 ms. So the replicas must then also have gone quiet: for [`QUIET_WINDOW`] their
    /// processes (and their children) used under [`QUIET_SHARE`] of their CPU (a quota, or
    /// one core). nginx, last, must have every replica back in its round: a replica it
    /// marked down after a failure (a timeout, a refused connection) gets no request for
    /// [`nginx::FAIL_TIMEOUT`], so the next cell would read nginx's instant 502s where the
    /// replica is idle; when its error log says it disabled one since the last settle, a
    /// settled wait lasts at least that long (beyond `bound`; starting again clears it too).
    pub fn settle(&self, bound: Duration) -> Option<Duration> {
        let began = Instant::now();
        let disabled = self.balancer_disabled_a_replica();
        for &port in &self.probes {
            // A full accept queue refuses or drops the connection, and a service at its
            // in-flight cap answers 429 (or 503) while the backlog lasts: ask again until the
            // bound.
            loop {
                let left = bound.checked_sub(began.elapsed())?;
                let answer = http_get_within(port, &self.health_path, left);
                if answer.as_deref().is_some_and(|a| !refusal(a)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let allowed = QUIET_SHARE * self.instance_cpus();
        let mut before = self.instances_cpu_s();
        loop {
            let left = bound.checked_sub(began.elapsed())?;
            std::thread::sleep(QUIET_WINDOW.min(left));
            let now = self.instances_cpu_s();
            if now - before <= allowed * QUIET_WINDOW.as_secs_f64() {
                if disabled {
                    std::thread::sleep(nginx::FAIL_TIMEOUT.saturating_sub(began.elapsed()));
                }
                return Some(began.elapsed());
            }
            before = now;
        }
    }

    /// True when nginx's error log says, since the last call, that it took a replica out of
    /// its round.
    fn balancer_disabled_a_replica(&self) -> bool {
        let Some(prefix) = self.prefix.as_ref().filter(|_| self.balancer.is_some()) else {
            return false;
        };
        // Only what nginx wrote since the last call is read.
        let Ok(mut log) = std::fs::File::open(prefix.join("error.log")) else {
            return false;
        };
        let from = self.balancer_log_read.load(Ordering::Relaxed);
        let mut new = Vec::new();
        if log.seek(std::io::SeekFrom::Start(from)).is_err() || log.read_to_end(&mut new).is_err() {
            return false;
        }
        self.balancer_log_read
            .store(from + new.len() as u64, Ordering::Relaxed);
        nginx::disabled_a_server(&String::from_utf8_lossy(&new))
    }

    /// The CPUs the replicas may use together: each one's quota, or one core without one.
    fn instance_cpus(&self) -> f64 {
        self.instances
            .iter()
            .map(|p| {
                self.group_of(&p.label)
                    .and_then(|g| g.budget.cpus)
                    .unwrap_or(1.0)
            })
            .sum()
    }

    /// CPU seconds the replicas' processes and their descendants have used so far.
    fn instances_cpu_s(&self) -> f64 {
        let roots: Vec<i32> = self.instances.iter().map(|p| p.pid() as i32).collect();
        let ticks: u64 = crate::sampler::watched(&roots)
            .into_iter()
            .filter_map(|pid| procfs::process::Process::new(pid).ok()?.stat().ok())
            .map(|s| s.utime + s.stime)
            .sum();
        ticks as f64 / procfs::ticks_per_second() as f64
    }

    /// The first process of the topology that has exited (a crash, the OOM killer, a kill),
    /// with its PID and exit status in words; consumers are started again instead, as
    /// [`Deployment::exited`] does. Does not wait.
    pub fn casualty(&mut self) -> Option<(String, u32, String)> {
        self.restart_consumers();
        let watched = self.instances.iter_mut();
        for p in watched
            .chain(self.balancer.as_mut())
            .chain(self.shared_bbox.as_mut())
        {
            if let Some(status) = p.exited() {
                return Some((p.label.clone(), p.pid(), status.to_string()));
            }
        }
        if self.redis.as_mut().is_some_and(RedisServer::exited) {
            let pid = self.redis.as_ref().map_or(0, RedisServer::pid);
            return Some(("redis-server".into(), pid, "exited".into()));
        }
        None
    }

    /// Waits up to `wait` for one of the processes to exit; returns its label if one did. A
    /// consumer that exited is started again instead.
    pub fn exited(&mut self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            self.restart_consumers();
            let watched = self.instances.iter_mut();
            for p in watched
                .chain(self.balancer.as_mut())
                .chain(self.shared_bbox.as_mut())
            {
                if p.exited().is_some() {
                    return Some(p.label.clone());
                }
            }
            if self.redis.as_mut().is_some_and(RedisServer::exited) {
                return Some("redis-server".into());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        // An autoscaler's instances first (it stops them), then its balancer.
        self.autoscaler.take();
        self.scaled_balancer.take();
        self.proxy.take();
        if let Some(mut b) = self.balancer.take() {
            b.stop(Duration::from_secs(3));
        }
        for p in &mut self.instances {
            p.stop(Duration::from_secs(3));
        }

        if let Some(prefix) = self.prefix.take() {
            let _ = std::fs::remove_dir_all(prefix);
        }
        for c in &mut self.consumers {
            c.stop(Duration::from_secs(3));
        }
        if let Some(mut b) = self.shared_bbox.take() {
            b.stop(Duration::from_secs(3));
        }
        // Last: the instances and consumers may still be using it while they stop.
        self.redis.take();
        self.budgets.take();
    }
}

/// The budgets behind their lock (a thread that panicked holding it left them usable).
fn lock(budgets: &Mutex<Budgets>) -> std::sync::MutexGuard<'_, Budgets> {
    budgets.lock().unwrap_or_else(|e| e.into_inner())
}

/// `loadlab consume` as consumer `i` (`counter-i`) of the Redis server at `url`.
fn consumer_command(exe: &Path, url: &str, i: usize, shards: Option<usize>) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["consume", "--redis-url", url])
        .args(["--name", &format!("counter-{i}")])
        .stdout(std::process::Stdio::null());
    if let Some(shards) = shards {
        cmd.args(["--shards", &shards.to_string()]);
    }
    cmd
}

/// Where a service process's standard output goes: `/dev/null`, a pipe the process's
/// supervisor drains, a file of its own in the system's temporary directory (removed once
/// opened: the process keeps writing to it, and nothing is left behind), or a terminal the
/// lab drains.
fn stdout_of(sink: Stdout, label: &str) -> Result<std::process::Stdio, LabError> {
    Ok(match sink {
        Stdout::Null => std::process::Stdio::null(),
        Stdout::Pipe => std::process::Stdio::piped(),
        Stdout::File => {
            let path = std::env::temp_dir().join(format!(
                "loadlab-stdout-{}-{}-{}",
                std::process::id(),
                label.replace(' ', "-"),
                unique_suffix()
            ));
            let file = std::fs::File::create(&path).map_err(LabError::Io)?;
            let _ = std::fs::remove_file(&path);
            std::process::Stdio::from(file)
        }
        Stdout::Tty => std::process::Stdio::from(drained_terminal()?),
    })
}

/// The terminal end of a new pseudo-terminal, sized as a common terminal window, whose other
/// end a thread reads and discards until every process holding this end has closed it (the
/// read then fails and the thread ends). libc's `openpty`: no crate adds to it.
fn drained_terminal() -> Result<std::os::fd::OwnedFd, LabError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the given ints; the name and termios
    // pointers may be null, and the winsize outlives the call.
    let done = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if done != 0 {
        return Err(LabError::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut reader = std::fs::File::from(master);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    Ok(slave)
}

/// The cores replica `r` runs on when each replica gets `n`: the next `n` of `among` (of the
/// cores this process may use when empty), round robin, so replicas spread over the cores
/// before they share one.
fn replica_cores(r: usize, n: usize, among: &[usize]) -> Result<Vec<usize>, LabError> {
    let allowed = match among {
        [] => crate::cores::allowed()?,
        some => some.to_vec(),
    };
    if allowed.is_empty() {
        return Ok(Vec::new());
    }
    Ok((0..n.min(allowed.len()))
        .map(|k| allowed[(r * n + k) % allowed.len()])
        .collect())
}

/// Makes `cmd`'s process (and the processes it starts) run on `cores` only.
fn pin(cmd: &mut Command, cores: &[usize]) {
    use std::os::unix::process::CommandExt;
    let set = crate::cores::cpu_set(cores);
    // SAFETY: sched_setaffinity is async-signal-safe; it runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A suffix that keeps two files of one label apart.
fn unique_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A free port on 127.0.0.1 (bound, then released for a child to take).
fn free_port() -> Result<u16, LabError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(LabError::Io)?;
    Ok(l.local_addr().map_err(LabError::Io)?.port())
}

/// Starts `topology`, re-executing `loadlab` (at `loadlab_exe`) for its own service.
pub fn deploy(topology: &Topology, loadlab_exe: &Path) -> Result<Deployment, LabError> {
    deploy_with(topology, loadlab_exe, false)
}

/// As [`deploy`], for a lab that calls gRPC methods too: a Node or Python replica also starts
/// its runtime's gRPC server of the reference service (`grpc_server.js`, `grpc_server.py`) on a
/// port of its own, in the replica's budget and on its cores, as a second container of the
/// same pod would.
pub fn deploy_serving_grpc(
    topology: &Topology,
    loadlab_exe: &Path,
) -> Result<Deployment, LabError> {
    deploy_with(topology, loadlab_exe, true)
}

/// [`deploy`], with the runtimes' gRPC servers when `grpc`.
fn deploy_with(
    topology: &Topology,
    loadlab_exe: &Path,
    grpc: bool,
) -> Result<Deployment, LabError> {
    check(topology)?;
    // Once here, so replicas starting together never install at the same time.
    runtime::prepare(topology.runtime)?;
    // Rust workers are loadlab processes sharing a port; another runtime's workers are its
    // own (cluster, gunicorn), under the one process started per replica.
    let processes = if topology.runtime == Runtime::Rust {
        topology.workers
    } else {
        1
    };
    let front = if topology.port == 0 {
        free_port()?
    } else {
        topology.port
    };
    // With client-side balancing the first replica takes the front's port.
    let ports: Vec<u16> = if topology.replicas == 1 && !topology.lb_alone {
        vec![front]
    } else {
        (0..topology.replicas)
            .map(|i| match (i, topology.lb) {
                (0, Lb::Client) => Ok(front),
                _ => free_port(),
            })
            .collect::<Result<_, _>>()?
    };
    let mut deployment = Deployment {
        url: format!("http://127.0.0.1:{front}"),
        fronts: vec![format!("http://127.0.0.1:{front}")],
        grpc_fronts: Vec::new(),
        description: String::new(),
        proxy: None,
        balancer: None,
        instances: Vec::new(),
        prefix: None,
        balancer_log_read: AtomicU64::new(0),
        redis: None,
        shared_bbox: None,
        bbox_url: None,
        consumers: Vec::new(),
        consumer_spec: None,
        probes: ports
            .iter()
            .flat_map(|&p| std::iter::repeat_n(p, processes))
            .collect(),
        health_path: topology.health_path.clone(),
        budgets: None,
        autoscaler: None,
        scaled_balancer: None,
        groups: Vec::new(),
        instance_groups: Vec::new(),
        consumer_groups: Vec::new(),
        on_cores: topology.on_cores.clone(),
    };
    let budgets = [
        topology.replica_budget(),
        topology.balancer_budget,
        topology.store_budget,
        topology.consumer_budget,
    ];
    if budgets.iter().any(|b| !b.is_none()) {
        let budgets = Budgets::new(Path::new(CGROUP_ROOT))?;
        deployment.budgets = Some(Arc::new(Mutex::new(budgets)));
    }
    start_store(&mut deployment, topology, loadlab_exe)?;
    let bbox_url = start_shared_bbox(&mut deployment, topology, loadlab_exe)?;
    if let Some(autoscale) = &topology.autoscale {
        let spec = InstanceSpec {
            topology: topology.clone(),
            exe: loadlab_exe.to_path_buf(),
            redis_url: deployment.redis.as_ref().map(RedisServer::url),
            bbox_url,
            budgets: deployment.budgets.clone(),
            processes,
        };
        return deploy_autoscaled(deployment, autoscale, spec, front);
    }
    // Rust's service (and a user's command) answers gRPC on its HTTP port; Node's and Python's
    // serve it from a process of their own beside each replica.
    let sidecars = grpc && topology.command.is_none() && topology.runtime != Runtime::Rust;
    let mut grpc_ports = Vec::new();
    for (r, port) in ports.iter().enumerate() {
        let group = start_replica(
            &mut deployment,
            topology,
            loadlab_exe,
            (r, *port),
            processes,
        )?;
        if sidecars {
            grpc_ports.push(start_grpc_sidecar(&mut deployment, topology, r, group)?);
        }
    }
    let grpc_words = match grpc_ports.as_slice() {
        [] => String::new(),
        [one] => format!(", its gRPC server on 127.0.0.1:{one}"),
        many => format!(", each with its gRPC server ({} ports)", many.len()),
    };
    let workers = if topology.workers > 1 {
        format!(" × {} workers", topology.workers)
    } else {
        String::new()
    };
    let what = what_runs(topology);
    let store = match &deployment.redis {
        Some(r) => format!(", sharing redis-server {} (pid {})", r.url(), r.pid()),
        None => String::new(),
    } + &match deployment.consumers.len() {
        0 => String::new(),
        n => format!(" with {n} visit counter consumer(s)"),
    } + &match (&bbox_url, &deployment.shared_bbox) {
        (Some(url), Some(p)) => {
            format!(", calling one shared black box on {url} (pid {})", p.pid())
        }
        _ => String::new(),
    };
    if topology.replicas == 1 && !topology.lb_alone {
        deployment.description =
            format!("{what}{workers} on {}{store}{grpc_words}", deployment.url);
        deployment.grpc_fronts = grpc_fronts(&deployment.fronts, &grpc_ports, sidecars, true);
        return Ok(deployment);
    }
    let (balanced, fallback) = start_balancer(&mut deployment, topology, front, &ports)?;
    let replicas = match topology.replicas {
        1 => "1 replica".to_string(),
        n => format!("{n} replicas"),
    };
    deployment.description =
        format!("{replicas} of {what}{workers}{balanced}{store}{fallback}{grpc_words}");
    let direct = topology.lb == Lb::Client;
    deployment.grpc_fronts = grpc_fronts(&deployment.fronts, &grpc_ports, sidecars, direct);
    Ok(deployment)
}

/// Where gRPC calls go: the fronts, unless the replicas serve gRPC from processes of their own
/// (`sidecars`), whose ports are then the fronts when the client reaches the replicas
/// `direct`ly (one replica, or client-side balancing), and none behind a balancer, which
/// passes on only the HTTP ports.
fn grpc_fronts(fronts: &[String], ports: &[u16], sidecars: bool, direct: bool) -> Vec<String> {
    match (sidecars, direct) {
        (false, _) => fronts.to_vec(),
        (true, true) => ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect(),
        (true, false) => Vec::new(),
    }
}

/// Starts replica `r`'s gRPC server in its runtime, in the replica's `group` and on its cores,
/// and waits until it listens: its port.
fn start_grpc_sidecar(
    deployment: &mut Deployment,
    topology: &Topology,
    r: usize,
    group: Option<Group>,
) -> Result<u16, LabError> {
    let port = free_port()?;
    let label = match topology.replicas {
        1 => "service grpc".to_string(),
        _ => format!("replica {} grpc", r + 1),
    };
    let mut cmd = runtime::grpc_command(topology.runtime, "127.0.0.1", port)?;
    // Its one line (where it listens) says nothing the lab needs.
    cmd.stdout(std::process::Stdio::null());
    let cores = match topology.cpus {
        Some(n) => replica_cores(r, n, &topology.on_cores)?,
        None => topology.on_cores.clone(),
    };
    place(&mut cmd, group.as_ref(), &cores)?;
    let mut child = Supervised::spawn(&label, cmd).map_err(LabError::Io)?;
    let deadline = Instant::now() + topology.ready_timeout;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.exited() {
            return Err(LabError::Exited {
                label,
                status: status.to_string(),
                stderr: child.stderr_tail(),
            });
        }
        if Instant::now() > deadline {
            return Err(LabError::NotReady {
                label,
                port,
                after: topology.ready_timeout,
                stderr: child.stderr_tail(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    deployment.instances.push(child);
    deployment
        .instance_groups
        .push(group.map(|g| g.name.clone()));
    Ok(port)
}

/// A replica's budget in words (" (0.25 CPU, 64 MB each)"), empty without one.
fn budget_words(topology: &Topology) -> String {
    let b = topology.replica_budget();
    let parts: Vec<String> = b
        .cpus
        .map(|c| format!("{c} CPU"))
        .into_iter()
        .chain(b.memory_bytes.map(|m| format!("{} MB", m >> 20)))
        .collect();
    match (parts.is_empty(), topology.replicas) {
        (true, _) => String::new(),
        (false, 1) => format!(" ({})", parts.join(", ")),
        (false, _) => format!(" ({} each)", parts.join(", ")),
    }
}

/// Makes `cmd`'s process join `group` and run on `cores` (every core when empty) from its
/// first instruction.
fn place(cmd: &mut Command, group: Option<&Group>, cores: &[usize]) -> Result<(), LabError> {
    if !cores.is_empty() {
        pin(cmd, cores);
    }
    if let Some(g) = group {
        g.join_on_spawn(cmd)?;
    }
    Ok(())
}

/// Refuses a topology whose settings contradict each other.
fn check(topology: &Topology) -> Result<(), LabError> {
    if topology.workers == 0 || topology.replicas == 0 {
        return Err(LabError::Invalid(
            "workers and replicas must be at least 1".into(),
        ));
    }
    if topology.command.is_some() && topology.workers > 1 {
        return Err(LabError::Invalid(
            "--workers applies to loadlab's own service; give your command its own worker setting"
                .into(),
        ));
    }
    if topology.command.is_some() && topology.runtime != Runtime::Rust {
        return Err(LabError::Invalid(
            "a runtime applies to loadlab's service, not to your own command".into(),
        ));
    }
    if topology.redis && topology.command.is_none() && topology.runtime != Runtime::Rust {
        return Err(LabError::Invalid(format!(
            "the {} service has no Redis store (only the Rust one has): drop `store: redis`, or \
             use `runtime: rust`",
            topology.runtime
        )));
    }
    Ok(())
}

/// Starts the topology's redis-server and its visit-counting consumers, when it has a store.
fn start_store(
    deployment: &mut Deployment,
    topology: &Topology,
    loadlab_exe: &Path,
) -> Result<(), LabError> {
    if !topology.redis {
        return Ok(());
    }
    let group = deployment.budgeted("redis-server", topology.store_budget)?;
    let redis = RedisServer::start_placed(|cmd| place(cmd, group.as_ref(), &topology.on_cores))?;
    let url = redis.url();
    deployment.redis = Some(redis);
    deployment.consumer_spec = Some((loadlab_exe.to_path_buf(), url.clone(), topology.shards));
    for i in 1..=topology.consumers {
        let label = format!("consumer {i}");
        let group = deployment.budgeted(&label, topology.consumer_budget)?;
        let mut cmd = consumer_command(loadlab_exe, &url, i, topology.shards);
        place(&mut cmd, group.as_ref(), &topology.on_cores)?;
        let child = Supervised::spawn(&label, cmd).map_err(LabError::Io)?;
        deployment.consumers.push(child);
        deployment.consumer_groups.push(group);
    }
    Ok(())
}

/// Starts the black box every instance shares, when the topology has one, and waits until it
/// answers; its URL, for the instances' `--bbox-url`.
fn start_shared_bbox(
    deployment: &mut Deployment,
    topology: &Topology,
    loadlab_exe: &Path,
) -> Result<Option<String>, LabError> {
    let Some(flags) = &topology.shared_bbox else {
        return Ok(None);
    };
    let port = free_port()?;
    let mut cmd = Command::new(loadlab_exe);
    // Two threads: the box waits, it does not compute, and its answers must not queue
    // behind one another on a busy core.
    cmd.args(["serve", "--port", &port.to_string(), "--threads", "2"])
        .args(flags)
        .stdout(std::process::Stdio::null());
    place(&mut cmd, None, &topology.on_cores)?;
    let mut child = Supervised::spawn("black box", cmd).map_err(LabError::Io)?;
    wait_ready(std::slice::from_mut(&mut child), port, topology, None)?;
    deployment.shared_bbox = Some(child);
    deployment.bbox_url = Some(format!("http://127.0.0.1:{port}"));
    Ok(deployment.bbox_url.clone())
}

/// Starts replica `r`'s `processes` on `port` and waits until they answer.
fn start_replica(
    deployment: &mut Deployment,
    topology: &Topology,
    loadlab_exe: &Path,
    (r, port): (usize, u16),
    processes: usize,
) -> Result<Option<Group>, LabError> {
    let redis_url = deployment.redis.as_ref().map(RedisServer::url);
    let bbox_url = deployment.bbox_url.clone();
    let first = deployment.instances.len();
    // One group per replica: its workers share its budget, as a container's processes do.
    let name = match topology.replicas {
        1 => "service".to_string(),
        _ => format!("replica {}", r + 1),
    };
    let group = deployment.budgeted(&name, topology.replica_budget())?;
    for w in 0..processes {
        let label = match (topology.replicas, processes) {
            (1, 1) => "service".to_string(),
            (1, _) => format!("worker {}", w + 1),
            (_, 1) => format!("replica {}", r + 1),
            _ => format!("replica {} worker {}", r + 1, w + 1),
        };
        let calls = Calls {
            redis_url: redis_url.as_deref(),
            bbox_url: bbox_url.as_deref(),
        };
        let mut cmd = instance_command(topology, loadlab_exe, port, &label, calls)?;
        let cores = match topology.cpus {
            Some(n) => replica_cores(r, n, &topology.on_cores)?,
            None => topology.on_cores.clone(),
        };
        place(&mut cmd, group.as_ref(), &cores)?;
        let child = Supervised::spawn(&label, cmd).map_err(LabError::Io)?;
        deployment.instances.push(child);
        deployment
            .instance_groups
            .push(group.as_ref().map(|g| g.name.clone()));
    }
    let expected: Vec<u32> = deployment.instances[first..]
        .iter()
        .map(Supervised::pid)
        .collect();
    // Only Rust workers answer /info with the PIDs started here (a Node or gunicorn worker is
    // a child of the process started).
    let own_service = topology.command.is_none() && topology.runtime == Runtime::Rust;
    wait_ready(
        &mut deployment.instances[first..],
        port,
        topology,
        own_service.then_some(&expected),
    )?;
    Ok(group)
}

/// The services an instance calls: the topology's Redis server and shared black box.
#[derive(Clone, Copy)]
struct Calls<'a> {
    redis_url: Option<&'a str>,
    bbox_url: Option<&'a str>,
}

/// The command of one process of the service on `port`: the user's own command, or `loadlab
/// serve` in the topology's runtime.
fn instance_command(
    topology: &Topology,
    loadlab_exe: &Path,
    port: u16,
    label: &str,
    calls: Calls<'_>,
) -> Result<Command, LabError> {
    let Calls {
        redis_url,
        bbox_url,
    } = calls;
    if let Some(c) = &topology.command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(c).env("PORT", port.to_string());
        if let Some(url) = redis_url {
            cmd.env("REDIS_URL", url);
        }
        if let Some(url) = bbox_url {
            cmd.env("BBOX_URL", url);
        }
        // Its output goes to stderr, so loadlab's own stdout stays machine-readable.
        cmd.stdout(std::io::stderr());
        return Ok(cmd);
    }
    let mut cmd = Command::new(loadlab_exe);
    cmd.args(["serve", "--port", &port.to_string()]);
    if topology.runtime != Runtime::Rust {
        cmd.args(["--runtime", topology.runtime.name()]);
        cmd.args(["--workers", &topology.workers.to_string()]);
    } else if topology.workers > 1 {
        cmd.arg("--reuse-port");
    }
    cmd.args(&topology.serve_args);
    if let Some(url) = redis_url {
        cmd.args(["--redis-url", url]);
    }
    if let Some(url) = bbox_url {
        cmd.args(["--bbox-url", url]);
    }
    cmd.stdout(stdout_of(topology.stdout, label)?);
    if topology.stdout == Stdout::Tty && std::env::var_os("TERM").is_none() {
        // A terminal window says what it is; without it Node prints no colour.
        cmd.env("TERM", "xterm-256color");
    }
    Ok(cmd)
}

/// What each replica runs, in words: the command and its budget.
fn what_runs(topology: &Topology) -> String {
    let own = match topology.runtime {
        Runtime::Rust => "loadlab serve".to_string(),
        other => format!("loadlab serve --runtime {other}"),
    };
    topology.command.as_deref().unwrap_or(&own).to_string() + &budget_words(topology)
}

/// What an autoscaler needs to start one instance of the topology.
struct InstanceSpec {
    topology: Topology,
    exe: PathBuf,
    redis_url: Option<String>,
    bbox_url: Option<String>,
    budgets: Option<Arc<Mutex<Budgets>>>,
    /// Processes per instance (Rust workers sharing its port).
    processes: usize,
}

impl InstanceSpec {
    /// Starts instance `id` on a free port, in a control group of its own with the topology's
    /// budget (as a pod of the platform's), without waiting for it to answer.
    fn start(&self, id: u32) -> Result<Started, LabError> {
        let topology = &self.topology;
        let port = free_port()?;
        let name = format!("instance {id}");
        let budget = topology.replica_budget();
        let group = match &self.budgets {
            Some(b) if !budget.is_none() => Some(lock(b).group(&name, &budget)?),
            _ => None,
        };
        let cores = match topology.cpus {
            Some(n) => replica_cores(id as usize - 1, n, &topology.on_cores)?,
            None => topology.on_cores.clone(),
        };
        let mut processes = Vec::new();
        for w in 0..self.processes {
            let label = match self.processes {
                1 => name.clone(),
                _ => format!("{name} worker {}", w + 1),
            };
            let calls = Calls {
                redis_url: self.redis_url.as_deref(),
                bbox_url: self.bbox_url.as_deref(),
            };
            let mut cmd = instance_command(topology, &self.exe, port, &label, calls)?;
            place(&mut cmd, group.as_ref(), &cores)?;
            processes.push(Supervised::spawn(&label, cmd).map_err(LabError::Io)?);
        }
        Ok(Started {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            cpus: topology.cpu_quota,
            pids: processes.iter().map(Supervised::pid).collect(),
            group,
            guard: Box::new(processes),
        })
    }
}

/// Deploys an autoscaled topology: loadlab's balancer on the front port, and an autoscaler
/// that starts its first instances and waits until they answer.
fn deploy_autoscaled(
    mut deployment: Deployment,
    autoscale: &Autoscale,
    spec: InstanceSpec,
    front: u16,
) -> Result<Deployment, LabError> {
    let listener =
        TcpListener::bind(("127.0.0.1", front)).map_err(|e| LabError::PortInUse(front, e))?;
    let settings = balancer::Settings {
        container_concurrency: autoscale.container_concurrency,
        hold_timeout: autoscale.hold_timeout,
    };
    let lb = Arc::new(Balancer::start(listener, settings).map_err(LabError::Io)?);
    let health = spec.topology.health_path.clone();
    let probe: Probe = Arc::new(move |addr: SocketAddr| {
        http_get_within(addr.port(), &health, Duration::from_millis(500)).is_some()
    });
    let settings = scaler_settings(autoscale, &spec.topology);
    let what = what_runs(&spec.topology);
    let launch: Launch = Box::new(move |id| spec.start(id).map_err(|e| e.to_string()));
    let autoscaler =
        Autoscaler::start(settings, Arc::clone(&lb), launch, probe).map_err(LabError::Autoscale)?;
    let policy = match autoscale.policy {
        ScalePolicy::Hpa => "Kubernetes' HPA",
        ScalePolicy::Kpa => "Knative's KPA",
    };
    let limit = match autoscale.container_concurrency {
        Some(n) => format!(", at most {n} in flight each"),
        None => String::new(),
    };
    let target = match autoscale.metric {
        ScaleMetric::Cpu => format!("{:.0} % of the quota", 100.0 * autoscale.target),
        ScaleMetric::Concurrency => format!("{} in flight", autoscale.target),
        ScaleMetric::Rps => format!("{} requests/s", autoscale.target),
    };
    deployment.description = format!(
        "{} to {} instances of {what} scaled by {policy} on {} (target {target}{limit}) behind \
         loadlab's balancer on {}",
        autoscale.min,
        autoscale.max,
        autoscale.metric.name(),
        deployment.url
    );
    deployment.autoscaler = Some(autoscaler);
    deployment.scaled_balancer = Some(lb);
    Ok(deployment)
}

/// The scaler's settings for `a`: the policy's own with its platform's defaults replaced by
/// what the topology sets.
fn scaler_settings(a: &Autoscale, topology: &Topology) -> scaler::Settings {
    let policy = match a.policy {
        ScalePolicy::Hpa => {
            let mut settings = hpa::Settings::new(a.min, a.max, a.target);
            settings.tolerance = a.tolerance;
            settings.down.stabilization = a.scale_down_stabilization;
            // A CPU share reads 1.0 at the whole quota.
            settings.full = (a.metric == ScaleMetric::Cpu).then_some(1.0);
            Policy::Hpa {
                settings,
                sync: a.sync,
            }
        }
        ScalePolicy::Kpa => {
            // Knative aims at no more than the container's concurrency limit.
            let target = match (a.metric, a.container_concurrency) {
                (ScaleMetric::Concurrency, Some(cc)) => a.target.min(f64::from(cc)),
                _ => a.target,
            };
            Policy::Kpa(kpa::Settings {
                utilization: a.utilization,
                stable_window: a.stable_window,
                panic_window: a.panic_window,
                panic_threshold: a.panic_threshold,
                scale_to_zero_grace: a.scale_to_zero_grace,
                ..kpa::Settings::new(a.min, a.max, target)
            })
        }
    };
    scaler::Settings {
        policy,
        metric: a.metric,
        initial: a.initial,
        cold_start_floor: a.cold_start,
        ready_timeout: topology.ready_timeout,
        drain_timeout: topology.proxy_timeout,
    }
}

/// Puts the topology's balancer in front of the replicas on `ports` (nginx, the built-in
/// proxy when nginx is missing, or the client itself); returns how the replicas are
/// balanced, in words, and why the built-in proxy stood in for nginx when it did.
fn start_balancer(
    deployment: &mut Deployment,
    topology: &Topology,
    front: u16,
    ports: &[u16],
) -> Result<(String, &'static str), LabError> {
    let lb = match topology.lb {
        Lb::Nginx => match nginx::find_nginx() {
            Ok(_) => Lb::Nginx,
            Err(_) => Lb::Builtin,
        },
        other => other,
    };
    let fallback = if lb != topology.lb {
        " (nginx is not installed, so the built-in proxy balances instead; install it with: apt-get install nginx-light)"
    } else {
        ""
    };
    match lb {
        Lb::Nginx => {
            let prefix =
                std::env::temp_dir().join(format!("loadlab-nginx-{}-{front}", std::process::id()));
            deployment.prefix = Some(prefix.clone());
            let static_dir = if topology.static_at_lb {
                Some(copy_statics(ports[0], &prefix.join("static"))?)
            } else {
                None
            };
            let config = NginxConfig {
                port: front,
                upstreams: ports.to_vec(),
                proxy_timeout: topology.proxy_timeout,
                keepalive: 64,
                connections: topology.lb_connections,
                static_dir,
            };
            let conf = nginx::prepare(&config, &prefix)?;
            let group = deployment.budgeted("nginx", topology.balancer_budget)?;
            let mut balancer = nginx::start(&prefix, &conf, |cmd| {
                place(cmd, group.as_ref(), &topology.on_cores)
            })?;
            wait_ready(std::slice::from_mut(&mut balancer), front, topology, None)?;
            deployment.balancer = Some(balancer);
            Ok((format!(" behind nginx on {}", deployment.url), fallback))
        }
        Lb::Builtin => {
            let listener = TcpListener::bind(("127.0.0.1", front))
                .map_err(|e| LabError::PortInUse(front, e))?;
            let backends = ports
                .iter()
                .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
                .collect();
            deployment.proxy = Some(Proxy::start(listener, backends).map_err(LabError::Io)?);
            Ok((
                format!(" behind the built-in proxy on {}", deployment.url),
                fallback,
            ))
        }
        Lb::Client => {
            deployment.fronts = ports
                .iter()
                .map(|p| format!("http://127.0.0.1:{p}"))
                .collect();
            Ok((
                format!(
                    ", balanced by the client over {}",
                    deployment.fronts.join(" ")
                ),
                fallback,
            ))
        }
    }
}

/// Polls `port` until it answers HTTP (and, for loadlab's service, until every expected PID
/// has answered `/info`), failing early with the stderr of a process that exited.
fn wait_ready(
    procs: &mut [Supervised],
    port: u16,
    topology: &Topology,
    expected_pids: Option<&Vec<u32>>,
) -> Result<(), LabError> {
    let deadline = Instant::now() + topology.ready_timeout;
    let mut seen: Vec<u32> = Vec::new();
    let path = if expected_pids.is_some() {
        "/info"
    } else {
        topology.health_path.as_str()
    };
    loop {
        for p in procs.iter_mut() {
            if let Some(status) = p.exited() {
                return Err(LabError::Exited {
                    label: p.label.clone(),
                    status: status.to_string(),
                    stderr: p.stderr_tail(),
                });
            }
        }
        if let Some(body) = http_get(port, path) {
            match expected_pids {
                None => return Ok(()),
                Some(pids) => {
                    if let Some(pid) = pid_in(&body) {
                        if !seen.contains(&pid) {
                            seen.push(pid);
                        }
                    }
                    if pids.iter().all(|p| seen.contains(p)) {
                        return Ok(());
                    }
                }
            }
        }
        if Instant::now() > deadline {
            let label = procs.first().map_or("service".into(), |p| p.label.clone());
            return Err(LabError::NotReady {
                label,
                port,
                after: topology.ready_timeout,
                stderr: procs.first().map_or(String::new(), Supervised::stderr_tail),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A one-shot `GET` on 127.0.0.1:`port`; the response, if any HTTP response came.
fn http_get(port: u16, path: &str) -> Option<String> {
    http_get_within(port, path, Duration::from_secs(2))
}

/// True when an HTTP response is a refusal, as the engine counts one: 429, or 503 with
/// `Retry-After` — a service at its in-flight cap or shedding load, still busy with earlier
/// requests.
fn refusal(response: &str) -> bool {
    let head = response.split("\r\n\r\n").next().unwrap_or("");
    match response.get(9..12) {
        Some("429") => true,
        Some("503") => head
            .lines()
            .any(|l| l.to_ascii_lowercase().starts_with("retry-after:")),
        _ => false,
    }
}

/// A one-shot `GET` on 127.0.0.1:`port` answered within about `within` (connecting included,
/// each read given what is left); the response, if any HTTP response came in time.
fn http_get_within(port: u16, path: &str, within: Duration) -> Option<String> {
    let began = Instant::now();
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        within
            .min(Duration::from_millis(200))
            .max(Duration::from_millis(1)),
    )
    .ok()?;
    let left = within
        .checked_sub(began.elapsed())
        .filter(|d| !d.is_zero())?;
    s.set_read_timeout(Some(left)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.").then_some(out)
}

/// Copies the service's static files (one body per kind) from the replica on `port` into
/// `dir`, for nginx to serve.
fn copy_statics(port: u16, dir: &Path) -> Result<PathBuf, LabError> {
    std::fs::create_dir_all(dir).map_err(LabError::Io)?;
    for (path, file) in [
        ("/static/site.css", "site.css"),
        ("/static/app.js", "app.js"),
        ("/static/logo.png", "image.png"),
    ] {
        let body = http_get_body(port, path).ok_or_else(|| {
            LabError::Invalid(format!(
                "the service on port {port} did not answer {path} with 200: nginx cannot serve \
                 its static files"
            ))
        })?;
        std::fs::write(dir.join(file), body).map_err(LabError::Io)?;
    }
    Ok(dir.to_path_buf())
}

/// The body of a 200 answer to `GET path` on `port`, bytes as sent.
fn http_get_body(port: u16, path: &str) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let end = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    out.starts_with(b"HTTP/1.1 200")
        .then(|| out[end + 4..].to_vec())
}

/// The `"pid":N` of an `/info` body.
fn pid_in(body: &str) -> Option<u32> {
    let rest = body.split("\"pid\":").nth(1)?;
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_not_a_settled_answer() {
        assert!(refusal("HTTP/1.1 429 Too Many Requests\r\n\r\n"));
        assert!(refusal(
            "HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n"
        ));
        assert!(!refusal(
            "HTTP/1.1 503 Service Unavailable\r\n\r\nretry-after: 1"
        ));
        assert!(!refusal(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\npong\n"
        ));
        assert!(!refusal("HTTP/1.1 404 Not Found\r\n"));
        assert!(!refusal("HTTP/1.1"));
    }

    #[test]
    fn a_tty_stdout_is_a_terminal_drained_past_what_its_buffer_holds() {
        // 4 MB is far more than a pseudo-terminal buffers: an undrained one blocks the writer.
        let status = Command::new("sh")
            .args([
                "-c",
                "[ -t 1 ] || exit 3; head -c 4000000 /dev/zero | tr '\\0' x; printf '\\n'",
            ])
            .stdout(stdout_of(Stdout::Tty, "test").unwrap())
            .status()
            .unwrap();
        assert_eq!(
            status.code(),
            Some(0),
            "stdout was not a terminal, or blocked"
        );
        let status = Command::new("sh")
            .args(["-c", "[ -t 1 ] && exit 3; exit 0"])
            .stdout(stdout_of(Stdout::Pipe, "test").unwrap())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "a pipe passed for a terminal");
    }

    #[test]
    fn replicas_get_their_own_cores_round_robin_and_a_pinned_child_runs_on_them() {
        let first = replica_cores(0, 1, &[]).unwrap();
        assert_eq!(first.len(), 1);
        let all = replica_cores(0, 10_000, &[]).unwrap();
        assert!(!all.is_empty() && all.len() <= 10_000);
        // Replica r starts where replica r - 1 stopped, wrapping around the host's cores.
        assert_eq!(replica_cores(1, 1, &[]).unwrap()[0], all[1 % all.len()]);
        assert_eq!(replica_cores(all.len(), 1, &[]).unwrap(), first);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        cmd.stdout(std::process::Stdio::piped());
        pin(&mut cmd, &first);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().last(),
            Some(first[0].to_string().as_str()),
            "{text}"
        );
    }

    #[test]
    fn the_pid_is_read_from_an_info_body() {
        assert_eq!(
            pid_in("HTTP/1.1 200 OK\r\n\r\n{\"arch\":\"x\",\"pid\":4242,\"os\":\"linux\"}"),
            Some(4242)
        );
        assert_eq!(pid_in("{}"), None);
    }
}
