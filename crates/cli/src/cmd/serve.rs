//! `loadlab serve`: the reference service on a port, in Rust or another runtime, or a topology
//! of it (workers, replicas behind a load balancer, or the user's own command), until Ctrl-C.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use loadlab_input::TopologyInput;
use loadlab_run::topology::{defaults, Runtime};

use crate::args::{ServeArgs, StoreArg};
use crate::cmd::Outcome;

/// Runs `loadlab serve`.
pub fn main(a: ServeArgs) -> Result<Outcome> {
    let runtime = a.runtime.map_or(defaults::RUNTIME, Runtime::from);
    if a.async_workers && runtime != Runtime::Python {
        anyhow::bail!(
            "--async switches gunicorn to gevent workers; it applies to --runtime python only"
        );
    }
    if a.cmd.is_some() && runtime != Runtime::Rust {
        anyhow::bail!("--runtime applies to loadlab's service; --cmd runs your own server");
    }
    if let Some(flag) = rust_only_flag(&a).filter(|_| runtime != Runtime::Rust) {
        anyhow::bail!(
            "{flag} is served by the Rust service only (the {runtime} one has no Redis store, \
             visits queue or in-flight limit); drop it, or use --runtime rust"
        );
    }
    // A redis-server of loadlab's own is started here for a single process (and kept until
    // the service stops), or by the topology for workers and replicas.
    let own_redis = (a.store == StoreArg::Redis || a.visits) && a.redis_url.is_none();
    // Another runtime runs its own workers (cluster, gunicorn) under one process. The visits
    // application's consumers are processes of their own: with its own Redis, a topology
    // starts them (an instance given --redis-url is one of its processes).
    let single = a.replicas == 1
        && a.autoscale.is_none()
        && a.cmd.is_none()
        && !(a.visits && own_redis)
        && a.cpus.is_none()
        && a.memory.is_none();
    match runtime {
        Runtime::Rust if single && a.workers == 1 => {
            let redis = own_redis
                .then(loadlab_lab::RedisServer::start)
                .transpose()?;
            let url = redis.as_ref().map(|r| r.url()).or(a.redis_url.clone());
            let store = match (&redis, &url) {
                (Some(r), _) => format!("; /turno in redis-server {} (pid {})", r.url(), r.pid()),
                (None, Some(url)) => format!("; /turno in Redis at {url}"),
                (None, None) => String::new(),
            };
            serve_here(&a, url, &store)
        }
        Runtime::Node | Runtime::Python if single && !own_redis => serve_runtime(&a, runtime),
        _ => supervise(&a, own_redis),
    }
}

/// The first flag given that only the Rust service implements.
fn rust_only_flag(a: &ServeArgs) -> Option<&'static str> {
    [
        (a.store == StoreArg::Redis, "--store redis"),
        (a.redis_url.is_some(), "--redis-url"),
        (a.visits, "--visits"),
        (a.max_in_flight.is_some(), "--max-in-flight"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// The whole OTLP traces URL for `--otlp URL` (`/v1/traces` appended to a base), or, given
/// without one, from the environment as the OpenTelemetry SDKs read it: the exporter's own
/// reading of the flag.
fn traces_url(url: &str) -> String {
    loadlab_harness::export::ExportOptions::from_flags(None, &[], Some(url), &[], |k| {
        std::env::var(k).ok()
    })
    .ok()
    .and_then(|o| o.otlp_traces)
    .unwrap_or_else(|| "http://localhost:4318/v1/traces".into())
}

/// The service in another runtime: its dependencies installed if need be, then this process
/// becomes the runtime's (same PID, so whoever started loadlab stops the service by it).
fn serve_runtime(a: &ServeArgs, runtime: Runtime) -> Result<Outcome> {
    use std::os::unix::process::CommandExt;
    let options = loadlab_lab::ServiceOptions {
        host: a.host.clone(),
        port: a.port,
        workers: a.workers,
        bbox_delay: a.bbox_delay,
        bbox_async_delay: a.bbox_async_delay,
        bbox_workers: a.bbox_workers,
        bbox_url: a.bbox_url.clone(),
        async_workers: a.async_workers,
    };
    let mut cmd = loadlab_lab::runtime::command(runtime, &options)?;
    // The Node.js and Python services read where their spans go from the environment.
    if let Some(url) = &a.otlp {
        cmd.env("LOADLAB_OTLP_TRACES", traces_url(url));
    }
    loadlab_lab::runtime::prepare(runtime)?;
    let err = cmd.exec();
    Err(err).with_context(|| format!("cannot start the {runtime} service ({cmd:?})"))
}

/// Binds `host:port`, with SO_REUSEPORT when several worker processes share the port.
fn bind(a: &ServeArgs) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let addr: std::net::SocketAddr = format!("{}:{}", a.host, a.port)
        .parse()
        .with_context(|| format!("{}:{} is not an address to listen on", a.host, a.port))?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if a.reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into()).with_context(|| {
        format!("cannot listen on {addr} (is the port in use? try --port 0 for a free one)")
    })?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The service in this process, with `/turno` in the Redis server at `redis_url` if given
/// (`store` says so on the first line).
fn serve_here(a: &ServeArgs, redis_url: Option<String>, store: &str) -> Result<Outcome> {
    crate::cmd::name_process("loadlab-serve");
    let config = loadlab_service::ServiceConfig {
        bbox_delay: a.bbox_delay,
        bbox_async_delay: a.bbox_async_delay,
        bbox_url: a.bbox_url.clone(),
        bbox_workers: a.bbox_workers,
        redis_url,
        visits: a.visits,
        shards: a.shards,
        max_in_flight: a.max_in_flight,
        otlp_traces: a.otlp.as_deref().map(traces_url),
    };
    let listener = bind(a)?;
    let addr = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.threads)
        .enable_all()
        .build()
        .context("cannot start the service's runtime")?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        println!(
            "loadlab serve: listening on http://{addr} (pid {}, {} worker thread(s){store}); Ctrl-C stops",
            std::process::id(),
            a.threads
        );
        tokio::select! {
            r = loadlab_service::serve(listener, config) => r.context("the service stopped")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(Outcome::Done)
    })
}

/// A topology of processes (after a redis-server of its own when `redis`), supervised until
/// Ctrl-C or until one of them exits.
fn supervise(a: &ServeArgs, redis: bool) -> Result<Outcome> {
    let exe = std::env::current_exe().context("cannot find the loadlab executable")?;
    let mut serve_args = vec![
        "--threads".to_string(),
        a.threads.to_string(),
        "--bbox-workers".to_string(),
        a.bbox_workers.to_string(),
        "--bbox-delay".to_string(),
        format!("{}ms", a.bbox_delay.as_millis()),
    ];
    if let Some(d) = a.bbox_async_delay {
        serve_args.extend([
            "--bbox-async-delay".to_string(),
            format!("{}ms", d.as_millis()),
        ]);
    }
    if let Some(url) = &a.bbox_url {
        serve_args.extend(["--bbox-url".to_string(), url.clone()]);
    }
    if a.host != "127.0.0.1" {
        serve_args.extend(["--host".to_string(), a.host.clone()]);
    }
    if let Some(url) = &a.redis_url {
        serve_args.extend(["--redis-url".to_string(), url.clone()]);
    }
    if a.visits {
        serve_args.extend([
            "--visits".to_string(),
            "--shards".into(),
            a.shards.to_string(),
        ]);
    }
    if let Some(n) = a.max_in_flight {
        serve_args.extend(["--max-in-flight".to_string(), n.to_string()]);
    }
    if let Some(url) = &a.otlp {
        let value = if url.is_empty() { "env" } else { url };
        serve_args.push(format!("--otlp={value}"));
    }
    if a.async_workers {
        serve_args.push("--async".to_string());
    }
    let topology = loadlab_input::topology::lower(&TopologyInput {
        workers: Some(a.workers),
        // The autoscaler sets the instance count and stands in front itself.
        replicas: a.autoscale.is_none().then_some(a.replicas),
        lb: a.lb.map(Into::into),
        port: Some(a.port),
        command: a.cmd.clone(),
        runtime: a.runtime.map(Into::into),
        serve_args,
        health_path: a.health_path.clone(),
        ready_timeout: a.ready_timeout,
        proxy_timeout: a.proxy_timeout,
        lb_connections: a.lb_connections.map(|n| n as usize),
        redis,
        consumers: if a.visits && redis { a.consumers } else { 0 },
        shards: Some(a.shards),
        profile: false,
        static_at_lb: a.static_at_lb,
        stdout: a
            .stdout
            .as_deref()
            .map(loadlab_input::topology::stdout_named)
            .transpose()?,
        cpus: a.cpus,
        memory: a.memory,
        autoscale: a.autoscale.clone(),
        ..TopologyInput::default()
    })?;
    let stop = loadlab_harness::interrupt_signal()?;
    // A CPU quota's periods pay for waking an idle core unless it is kept awake, as the lab
    // keeps it while a budgeted topology runs (`cores::AwakeCores`).
    let _awake = a.cpus.and_then(|_| loadlab_lab::cores::AwakeCores::hold());
    let mut deployment = loadlab_lab::deploy(&topology, &exe)?;
    let pids: Vec<String> = deployment.pids().iter().map(u32::to_string).collect();
    println!(
        "loadlab serve: {} (pids {}); Ctrl-C stops",
        deployment.description,
        pids.join(" ")
    );
    let mut told = 0;
    loop {
        if stop.is_stopped() {
            return Ok(Outcome::Done);
        }
        if let Some(label) = deployment.exited(Duration::from_millis(100)) {
            anyhow::bail!("{label} exited; stopping the topology");
        }
        if let Some(scaler) = deployment.autoscaler() {
            for d in scaler.decisions_from(told) {
                // A reader that went away (`| head`) costs the lines, not the topology.
                let _ = writeln!(
                    std::io::stdout(),
                    "loadlab serve: {}",
                    decision_words(&d, &topology)
                );
                told += 1;
            }
        }
    }
}

/// An autoscaler's decision in one line: when, the count, and what it read.
fn decision_words(
    d: &loadlab_lab::autoscale::scaler::ScaleDecision,
    topology: &loadlab_run::Topology,
) -> String {
    use loadlab_run::topology::{ScaleMetric, ScalePolicy};
    let m = d.metric;
    let read = match topology.autoscale.as_ref().map(|a| (a.policy, a.metric)) {
        Some((ScalePolicy::Kpa, ScaleMetric::Rps)) => format!("{m:.1} req/s in all"),
        Some((ScalePolicy::Kpa, _)) => format!("{m:.1} requests in flight in all"),
        Some((ScalePolicy::Hpa, ScaleMetric::Cpu)) => format!("{:.0} % of each quota", 100.0 * m),
        Some((ScalePolicy::Hpa, ScaleMetric::Concurrency)) => {
            format!("{m:.1} requests in flight each")
        }
        Some((ScalePolicy::Hpa, ScaleMetric::Rps)) => format!("{m:.1} req/s each"),
        None => format!("{m:.2}"),
    };
    format!(
        "{:.1} s: {} → {} instance(s){}, reading {read}",
        d.at.as_secs_f64(),
        d.from,
        d.to,
        if d.panicking { " (panicking)" } else { "" },
    )
}
