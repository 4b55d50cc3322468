//! Child processes the lab starts: spawned so they die with loadlab, their stderr kept for
//! error messages, stopped by PID (SIGTERM, then SIGKILL).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of a child's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// A child process that is stopped when dropped.
pub struct Supervised {
    /// What it is, for messages ("replica 2", "nginx").
    pub label: String,
    child: Child,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Supervised {
    /// Spawns `command`; the child gets SIGTERM if loadlab dies first, its stderr is both
    /// passed through and remembered, and a piped stdout is drained.
    pub fn spawn(label: &str, mut command: Command) -> std::io::Result<Supervised> {
        command.stdin(Stdio::null()).stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; it runs in the child between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        if let Some(mut pipe) = child.stdout.take() {
            // A piped stdout is drained and discarded, as a container runtime's log driver
            // reads a container's: the service pays for its writes, never blocks on a full
            // pipe for long.
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            });
        }
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_LINES)));
        if let Some(pipe) = child.stderr.take() {
            let keep = stderr.clone();
            let label = label.to_string();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    eprintln!("[{label}] {line}");
                    let mut k = keep.lock().unwrap_or_else(|e| e.into_inner());
                    if k.len() == STDERR_LINES {
                        k.pop_front();
                    }
                    k.push_back(line);
                }
            });
        }
        Ok(Supervised {
            label: label.to_string(),
            child,
            stderr,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last lines it wrote to stderr, joined for an error message.
    pub fn stderr_tail(&self) -> String {
        // Give the reader thread a moment to drain what a dying process wrote.
        std::thread::sleep(Duration::from_millis(50));
        let lines = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if lines.is_empty() {
            "(it wrote nothing to stderr)".to_string()
        } else {
            lines.iter().cloned().collect::<Vec<_>>().join(" | ")
        }
    }

    /// Stops it: SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        // SAFETY: signals the child we spawned, by its PID.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}
