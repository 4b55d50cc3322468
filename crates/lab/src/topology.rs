//! Topologies of the service under test: N worker processes sharing a port, M replicas on
//! their own ports behind nginx or the built-in proxy, or any command of the user's. Targets
//! are started by re-executing `loadlab serve`; this crate never links the service.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::nginx::{self, NginxConfig};
use crate::process::Supervised;
use crate::proxy::Proxy;
use crate::runtime::{self, Runtime};
use crate::LabError;

/// The load balancer in front of replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lb {
    /// The real nginx, configured and run by loadlab.
    Nginx,
    /// loadlab's own round-robin TCP proxy.
    Builtin,
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
}

/// A running topology, stopped (every process, by PID) when dropped.
pub struct Deployment {
    /// Where load goes: the balancer, or the only replica.
    pub url: String,
    /// What was started, in words (including a fallback from nginx to the built-in proxy).
    pub description: String,
    proxy: Option<Proxy>,
    balancer: Option<Supervised>,
    instances: Vec<Supervised>,
    prefix: Option<PathBuf>,
}

impl Deployment {
    /// PIDs of every process started: instances first, then nginx.
    pub fn pids(&self) -> Vec<u32> {
        self.instances
            .iter()
            .chain(&self.balancer)
            .map(Supervised::pid)
            .collect()
    }

    /// Waits up to `wait` for one of the processes to exit; returns its label if one did.
    pub fn exited(&mut self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            for p in self.instances.iter_mut().chain(self.balancer.as_mut()) {
                if p.exited().is_some() {
                    return Some(p.label.clone());
                }
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
    }
}

/// A free port on 127.0.0.1 (bound, then released for a child to take).
fn free_port() -> Result<u16, LabError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(LabError::Io)?;
    Ok(l.local_addr().map_err(LabError::Io)?.port())
}

/// Starts `topology`, re-executing `loadlab` (at `loadlab_exe`) for its own service.
pub fn deploy(topology: &Topology, loadlab_exe: &Path) -> Result<Deployment, LabError> {
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
    let ports: Vec<u16> = if topology.replicas == 1 {
        vec![front]
    } else {
        (0..topology.replicas)
            .map(|_| free_port())
            .collect::<Result<_, _>>()?
    };
    let mut deployment = Deployment {
        url: format!("http://127.0.0.1:{front}"),
        description: String::new(),
        proxy: None,
        balancer: None,
        instances: Vec::new(),
        prefix: None,
    };
    for (r, port) in ports.iter().enumerate() {
        let first = deployment.instances.len();
        for w in 0..processes {
            let label = match (topology.replicas, processes) {
                (1, 1) => "service".to_string(),
                (1, _) => format!("worker {}", w + 1),
                (_, 1) => format!("replica {}", r + 1),
                _ => format!("replica {} worker {}", r + 1, w + 1),
            };
            let cmd = match &topology.command {
                Some(c) => {
                    let mut cmd = Command::new("sh");
                    cmd.arg("-c").arg(c).env("PORT", port.to_string());
                    // Its output goes to stderr, so loadlab's own stdout stays machine-readable.
                    cmd.stdout(std::io::stderr());
                    cmd
                }
                None => {
                    let mut cmd = Command::new(loadlab_exe);
                    cmd.args(["serve", "--port", &port.to_string()]);
                    if topology.runtime != Runtime::Rust {
                        cmd.args(["--runtime", topology.runtime.name()]);
                        cmd.args(["--workers", &topology.workers.to_string()]);
                    } else if topology.workers > 1 {
                        cmd.arg("--reuse-port");
                    }
                    cmd.args(&topology.serve_args);
                    cmd.stdout(std::process::Stdio::null());
                    cmd
                }
            };
            let child = Supervised::spawn(&label, cmd).map_err(LabError::Io)?;
            deployment.instances.push(child);
        }
        let expected: Vec<u32> = deployment.instances[first..]
            .iter()
            .map(Supervised::pid)
            .collect();
        // Only Rust workers answer /info with the PIDs started here (a Node or gunicorn
        // worker is a child of the process started).
        let own_service = topology.command.is_none() && topology.runtime == Runtime::Rust;
        wait_ready(
            &mut deployment.instances[first..],
            *port,
            topology,
            own_service.then_some(&expected),
        )?;
    }
    let workers = if topology.workers > 1 {
        format!(" × {} workers", topology.workers)
    } else {
        String::new()
    };
    let own = match topology.runtime {
        Runtime::Rust => "loadlab serve".to_string(),
        other => format!("loadlab serve --runtime {other}"),
    };
    let what = topology.command.as_deref().unwrap_or(&own);
    if topology.replicas == 1 {
        deployment.description = format!("{what}{workers} on {}", deployment.url);
        return Ok(deployment);
    }
    let lb = match topology.lb {
        Lb::Nginx => match nginx::find_nginx() {
            Ok(_) => Lb::Nginx,
            Err(_) => Lb::Builtin,
        },
        Lb::Builtin => Lb::Builtin,
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
            let config = NginxConfig {
                port: front,
                upstreams: ports.clone(),
                proxy_timeout: topology.proxy_timeout,
                keepalive: 64,
            };
            let conf = nginx::prepare(&config, &prefix)?;
            let mut balancer = nginx::start(&prefix, &conf)?;
            wait_ready(std::slice::from_mut(&mut balancer), front, topology, None)?;
            deployment.balancer = Some(balancer);
        }
        Lb::Builtin => {
            let listener = TcpListener::bind(("127.0.0.1", front))
                .map_err(|e| LabError::PortInUse(front, e))?;
            let backends = ports
                .iter()
                .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
                .collect();
            deployment.proxy = Some(Proxy::start(listener, backends).map_err(LabError::Io)?);
        }
    }
    deployment.description = format!(
        "{} replicas of {what}{workers} behind {} on {}{fallback}",
        topology.replicas,
        if lb == Lb::Nginx {
            "nginx"
        } else {
            "the built-in proxy"
        },
        deployment.url
    );
    Ok(deployment)
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
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.").then_some(out)
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
    fn the_pid_is_read_from_an_info_body() {
        assert_eq!(
            pid_in("HTTP/1.1 200 OK\r\n\r\n{\"arch\":\"x\",\"pid\":4242,\"os\":\"linux\"}"),
            Some(4242)
        );
        assert_eq!(pid_in("{}"), None);
    }
}
