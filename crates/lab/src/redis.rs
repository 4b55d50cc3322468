//! A real `redis-server` for the service's state, started by loadlab on a free port of
//! 127.0.0.1 with a directory of its own, nothing persisted, and stopped by its PID (and its
//! directory removed) when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::Supervised;
use crate::LabError;

/// How long redis-server may take to answer PING after it starts.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running redis-server of loadlab's own.
pub struct RedisServer {
    process: Supervised,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts redis-server on a free port and waits until it answers PING.
    pub fn start() -> Result<RedisServer, LabError> {
        RedisServer::start_placed(|_| Ok(()))
    }

    /// Like [`RedisServer::start`], `place` setting up its command first (a control group,
    /// cores).
    pub fn start_placed(
        place: impl FnOnce(&mut Command) -> Result<(), LabError>,
    ) -> Result<RedisServer, LabError> {
        let exe = find_redis().ok_or(LabError::RedisMissing)?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(LabError::Io)?
            .port();
        let dir = std::env::temp_dir().join(format!("loadlab-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(LabError::Io)?;
        let mut cmd = Command::new(exe);
        // Only what the service needs: no snapshots, no append-only file, loopback only.
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--logfile", "", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null());
        place(&mut cmd)?;
        let process = Supervised::spawn("redis", cmd).map_err(LabError::Io)?;
        let mut server = RedisServer { process, port, dir };
        server.wait_ready()?;
        Ok(server)
    }

    /// The URL clients connect to: `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its data directory (removed when it stops).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The server's PID.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// True once the server process has exited.
    pub fn exited(&mut self) -> bool {
        self.process.exited().is_some()
    }

    fn wait_ready(&mut self) -> Result<(), LabError> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.process.exited() {
                return Err(LabError::Exited {
                    label: "redis-server".into(),
                    status: status.to_string(),
                    stderr: self.process.stderr_tail(),
                });
            }
            if ping(self.port) {
                return Ok(());
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(LabError::NotReady {
                    label: "redis-server".into(),
                    port: self.port,
                    after: READY_TIMEOUT,
                    stderr: self.process.stderr_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(3));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// True when a Redis server on `port` answers PING.
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

/// redis-server on the PATH, or where Debian's package puts it.
fn find_redis() -> Option<PathBuf> {
    crate::find_program("redis-server", &[])
}
