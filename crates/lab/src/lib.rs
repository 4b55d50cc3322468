//! The laboratory around the load: the service's topologies (workers, replicas, a load
//! balancer) started as real processes, and a sampler watching them while a run goes on.

#![deny(missing_docs)]

pub mod autoscale;
pub mod cgroup;
pub mod clock;
pub mod cores;
pub mod nginx;
pub mod process;
pub mod profile;
pub mod proxy;
pub mod redis;
pub mod runtime;
pub mod sampler;
pub mod store_sampler;
pub mod topology;
pub mod visits;

use std::path::PathBuf;
use std::time::Duration;

pub use redis::RedisServer;
pub use runtime::{Runtime, RuntimeError, ServiceOptions};
pub use sampler::{Sampler, SamplerError};
pub use topology::{deploy, deploy_serving_grpc, Deployment, Lb, Topology};

/// The program `name` on the PATH, else in one of `extra`, else where Debian's packages put
/// programs (`/usr/bin`, `/usr/sbin`, `/usr/local/sbin`).
pub fn find_program(name: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(extra.iter().cloned())
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A topology could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// redis-server is not installed.
    #[error("redis-server is not installed; install it with: apt-get install redis-server (or give --redis-url)")]
    RedisMissing,
    /// nginx is not installed.
    #[error("nginx is not installed; install it with: apt-get install nginx-light (or use --lb builtin)")]
    NginxMissing,
    /// The generated nginx configuration was rejected.
    #[error("nginx rejected the generated configuration: {0}")]
    NginxConfig(String),
    /// The topology's numbers are not usable.
    #[error("{0}")]
    Invalid(String),
    /// A port is taken.
    #[error("port {0} is in use ({1}); pick another with --port, or --port 0 for a free one")]
    PortInUse(u16, std::io::Error),
    /// A process of the topology exited while starting.
    #[error("{label} exited while starting ({status}); its last stderr lines: {stderr}")]
    Exited {
        /// Which process.
        label: String,
        /// Its exit status.
        status: String,
        /// Its last stderr lines.
        stderr: String,
    },
    /// A process did not answer in time.
    #[error(
        "{label} did not answer on port {port} within {after:?}; its last stderr lines: {stderr}"
    )]
    NotReady {
        /// Which process.
        label: String,
        /// Where it was polled.
        port: u16,
        /// How long we waited.
        after: Duration,
        /// Its last stderr lines.
        stderr: String,
    },
    /// A runtime's dependencies or code are missing.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A replica's CPU or memory budget could not be set.
    #[error(transparent)]
    Budget(#[from] crate::cgroup::CgroupError),
    /// Starting a process or writing a file failed.
    #[error(transparent)]
    Io(std::io::Error),
    /// An autoscaled topology's first instances did not start.
    #[error("the autoscaled topology did not start: {0}")]
    Autoscale(String),
}
