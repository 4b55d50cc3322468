//! The runtimes the reference service is written in: Rust (loadlab itself), Node
//! (`targets/node`, Express) and Python (`targets/python`, gunicorn). Finds their code, installs
//! their pinned dependencies into their own directory on first use, and builds the command
//! that serves them (topology → runtime process).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Environment variable naming the `targets` directory, when the repository's is not wanted.
pub const TARGETS_ENV: &str = "LOADLAB_TARGETS";

pub use loadlab_run::topology::Runtime;

/// A runtime could not be prepared or started.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A program the runtime needs is not installed.
    #[error("{program} is not installed; install it with: apt-get install {package}")]
    Missing {
        /// The program looked for.
        program: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The runtime's code is not where loadlab looked.
    #[error("cannot find {0}; set {TARGETS_ENV} to the targets directory of loadlab's repository")]
    NoCode(PathBuf),
    /// Installing the dependencies failed.
    #[error("installing the {runtime} dependencies failed: {command} {status}; {output}")]
    Install {
        /// Which runtime.
        runtime: Runtime,
        /// What ran.
        command: String,
        /// How it ended.
        status: String,
        /// Its last output lines.
        output: String,
    },
    /// A flag that only one runtime understands.
    #[error("{0}")]
    Invalid(String),
    /// Reading, writing or starting failed.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

/// How the service is to be served, whatever its runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOptions {
    /// Address to bind.
    pub host: String,
    /// Port (0: a free one, printed on the first line of stdout).
    pub port: u16,
    /// Worker processes: Node `cluster` workers or gunicorn workers.
    pub workers: usize,
    /// Delay of `/bbox/sync` (and of `/bbox/async` unless `bbox_async_delay` says).
    pub bbox_delay: Duration,
    /// Delay of `/bbox/async` when it differs from `/bbox/sync`'s (Node only).
    pub bbox_async_delay: Option<Duration>,
    /// Requests `/bbox/sync` serves at once per process.
    pub bbox_workers: usize,
    /// A black box every instance shares: `/bbox/*` call it (Node only).
    pub bbox_url: Option<String>,
    /// Asynchronous workers (Python: gevent instead of sync).
    pub async_workers: bool,
}

/// The directory holding `node/` and `python/`: `$LOADLAB_TARGETS`, else the repository's
/// `targets` (known when loadlab was built).
pub fn targets_dir() -> PathBuf {
    match std::env::var_os(TARGETS_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../targets"),
    }
}

/// The directory of `runtime`'s code (not for Rust, which is loadlab itself).
pub fn code_dir(runtime: Runtime) -> Result<PathBuf, RuntimeError> {
    let (dir, entry) = match runtime {
        Runtime::Rust => return Err(RuntimeError::Invalid("rust has no code directory".into())),
        Runtime::Node => ("node", "server.js"),
        Runtime::Python => ("python", "serve.py"),
    };
    let dir = targets_dir().join(dir);
    if !dir.join(entry).is_file() {
        return Err(RuntimeError::NoCode(dir.join(entry)));
    }
    Ok(dir.canonicalize().unwrap_or(dir))
}

/// Makes sure `runtime`'s pinned dependencies are installed in its own directory
/// (`node_modules` by `npm ci`, `.venv` by `python3 -m venv` and `pip install -r`), installing
/// them when missing or when the pins changed, with one line on stderr saying so. Safe to
/// call from several processes at once: one installs, the others wait for it.
pub fn prepare(runtime: Runtime) -> Result<(), RuntimeError> {
    if runtime == Runtime::Rust {
        return Ok(());
    }
    let dir = code_dir(runtime)?;
    let (pins, installed) = match runtime {
        Runtime::Node => (dir.join("package-lock.json"), dir.join("node_modules")),
        _ => (dir.join("requirements.txt"), dir.join(".venv")),
    };
    let stamp = installed.join(".loadlab-installed");
    let pinned = std::fs::read(&pins).map_err(|e| io(&pins, e))?;
    if runtime == Runtime::Node {
        require("node", "nodejs")?;
    }
    if std::fs::read(&stamp).is_ok_and(|s| s == pinned) {
        return Ok(());
    }
    let lock_path = dir.join(".install.lock");
    let lock = File::create(&lock_path).map_err(|e| io(&lock_path, e))?;
    // SAFETY: flock on a descriptor we own; released when `lock` is closed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io(&lock_path, std::io::Error::last_os_error()));
    }
    // Another process may have installed while this one waited.
    if std::fs::read(&stamp).is_ok_and(|s| s == pinned) {
        return Ok(());
    }
    eprintln!(
        "loadlab: installing the {runtime} service's pinned dependencies into {} (once)",
        installed.display()
    );
    match runtime {
        Runtime::Node => {
            require("npm", "npm")?;
            let mut npm = Command::new("npm");
            npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir);
            run(runtime, npm)?;
        }
        _ => {
            require("python3", "python3-venv")?;
            let python = installed.join("bin/python");
            if !python.is_file() {
                let mut venv = Command::new("python3");
                venv.args(["-m", "venv"]).arg(&installed);
                run(runtime, venv).map_err(|e| match e {
                    RuntimeError::Install { .. } => RuntimeError::Missing {
                        program: "python3's venv module",
                        package: "python3-venv",
                    },
                    other => other,
                })?;
            }
            let mut pip = Command::new(&python);
            pip.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .arg("-r")
                .arg(&pins);
            run(runtime, pip)?;
        }
    }
    std::fs::write(&stamp, &pinned).map_err(|e| io(&stamp, e))?;
    Ok(())
}

/// The command serving `runtime` with `options` (its first stdout line says where it listens).
/// Call [`prepare`] first.
pub fn command(runtime: Runtime, options: &ServiceOptions) -> Result<Command, RuntimeError> {
    if options.async_workers && runtime != Runtime::Python {
        return Err(RuntimeError::Invalid(format!(
            "--async switches gunicorn to gevent workers; it applies to --runtime python, not {runtime} (whose /delay never holds a worker anyway)"
        )));
    }
    if runtime == Runtime::Python
        && (options.bbox_url.is_some() || options.bbox_async_delay.is_some())
    {
        return Err(RuntimeError::Invalid(
            "the python service has one black-box delay and no shared black box: use --runtime node or rust for --bbox-url and --bbox-async-delay".into(),
        ));
    }
    let dir = code_dir(runtime)?;
    let mut cmd = match runtime {
        Runtime::Rust => return Err(RuntimeError::Invalid("rust is served by loadlab".into())),
        Runtime::Node => {
            let mut c = Command::new("node");
            c.arg(dir.join("server.js"));
            // Tells the profiler its CPU profile can be asked for (SIGUSR2, see server.js).
            c.env(V8_PROFILE_ENV, "1");
            c
        }
        Runtime::Python => {
            let mut c = Command::new(dir.join(".venv/bin/python"));
            c.arg(dir.join("serve.py"));
            if options.async_workers {
                c.arg("--async");
            }
            c
        }
    };
    cmd.args(["--host", &options.host])
        .args(["--port", &options.port.to_string()])
        .args(["--workers", &options.workers.to_string()])
        .args([
            "--bbox-delay-ms",
            &options.bbox_delay.as_millis().to_string(),
        ])
        .args(["--bbox-workers", &options.bbox_workers.to_string()])
        .current_dir(&dir);
    if let Some(delay) = options.bbox_async_delay {
        cmd.args(["--bbox-async-delay-ms", &delay.as_millis().to_string()]);
    }
    if let Some(url) = &options.bbox_url {
        cmd.args(["--bbox-url", url]);
    }
    Ok(cmd)
}

/// The reference service's `.proto` file, which the Node and Python gRPC servers load at start.
pub fn reference_proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../grpc/proto/loadlab/reference/v1/reference.proto")
}

/// The command serving the reference service's gRPC face in `runtime` (Node's @grpc/grpc-js,
/// Python's grpcio) on `host:port`, one process beside the HTTP service (Rust answers both on
/// one port). Call [`prepare`] first.
pub fn grpc_command(runtime: Runtime, host: &str, port: u16) -> Result<Command, RuntimeError> {
    let dir = code_dir(runtime)?;
    let mut cmd = match runtime {
        Runtime::Rust => {
            return Err(RuntimeError::Invalid(
                "rust answers gRPC on its HTTP port".into(),
            ))
        }
        Runtime::Node => {
            let mut c = Command::new("node");
            c.arg(dir.join("grpc_server.js"));
            c
        }
        Runtime::Python => {
            let mut c = Command::new(dir.join(".venv/bin/python"));
            c.arg(dir.join("grpc_server.py"));
            c
        }
    };
    let proto = reference_proto();
    if !proto.is_file() {
        return Err(RuntimeError::NoCode(proto));
    }
    cmd.arg("--proto")
        .arg(proto.canonicalize().unwrap_or(proto))
        .args(["--host", host])
        .args(["--port", &port.to_string()])
        .current_dir(&dir);
    Ok(cmd)
}

/// Set in the environment of the Node service (and so of its cluster workers): the process
/// starts V8's CPU profiler on SIGUSR2 and writes the profile on the next SIGUSR2.
pub const V8_PROFILE_ENV: &str = "LOADLAB_V8_PROFILE";

/// Fails with the Debian package to install when `program` cannot be run.
fn require(program: &'static str, package: &'static str) -> Result<(), RuntimeError> {
    let found = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        Ok(())
    } else {
        Err(RuntimeError::Missing { program, package })
    }
}

/// Runs an installer step with its output kept for the error message, never on stdout.
fn run(runtime: Runtime, mut cmd: Command) -> Result<(), RuntimeError> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RuntimeError::Io(shown.clone(), e))?;
    if out.status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    Err(RuntimeError::Install {
        runtime,
        command: shown,
        status: out.status.to_string(),
        output: tail[tail.len().saturating_sub(5)..].join(" | "),
    })
}

fn io(path: &Path, e: std::io::Error) -> RuntimeError {
    RuntimeError::Io(path.display().to_string(), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_holds_both_runtimes_code() {
        assert!(code_dir(Runtime::Node)
            .unwrap()
            .join("package-lock.json")
            .is_file());
        assert!(code_dir(Runtime::Python)
            .unwrap()
            .join("requirements.txt")
            .is_file());
    }

    #[test]
    fn async_workers_are_a_python_switch() {
        let options = ServiceOptions {
            host: "127.0.0.1".into(),
            port: 0,
            workers: 2,
            bbox_delay: Duration::from_millis(900),
            bbox_async_delay: None,
            bbox_workers: 3,
            bbox_url: None,
            async_workers: true,
        };
        let err = command(Runtime::Node, &options).unwrap_err().to_string();
        assert!(err.contains("applies to --runtime python"), "{err}");
        let node = command(
            Runtime::Node,
            &ServiceOptions {
                async_workers: false,
                ..options.clone()
            },
        )
        .unwrap();
        assert!(
            node.get_envs()
                .any(|(k, v)| k == V8_PROFILE_ENV && v.is_some_and(|v| v == "1")),
            "node is told its profile can be asked for"
        );
        let cmd = command(Runtime::Python, &options).unwrap();
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.ends_with(
                &[
                    "--async",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--workers",
                    "2",
                    "--bbox-delay-ms",
                    "900",
                    "--bbox-workers",
                    "3"
                ]
                .map(String::from)
            ),
            "{args:?}"
        );
    }
}
