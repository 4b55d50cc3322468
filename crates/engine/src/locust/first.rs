//! Helper 0, started before the plan (locust layer, called from the command): it imports the
//! file and fires `init` and `test_start`, and the options those listeners leave in
//! `parsed_options` (the users, spawn rate, run time, host) become the plan's, as Locust reads
//! them after `init`. The helper then waits here until the run's first thread takes it over,
//! so `init` runs once per helper, as in Locust.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use loadlab_run::users::LocustSpec;
use serde::Deserialize;

use super::helper::{init_message, Started, UserClass, PYTHON_ARGS};

/// How long importing the locustfile and its `init` and `test_start` may take.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The longest first line read from the helper (a traceback included).
const MAX_LINE: usize = 16 << 20;

/// Helpers started and not yet taken by a run, by key: a table, not one slot, so that runs in
/// one process (tests) never take each other's.
static WAITING: Mutex<Option<HashMap<u64, Started>>> = Mutex::new(None);

/// The next key of [`WAITING`].
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The run's settings as the file's listeners left them in `parsed_options` (Locust's
/// headless start reads them after `init`; the host after `test_start`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Settings {
    /// Users at once.
    pub num_users: u64,
    /// Users started per second.
    pub spawn_rate: f64,
    /// Seconds the run lasts; `None`: until stopped.
    pub run_time: Option<f64>,
    /// The environment's host, every class's when set.
    #[serde(default)]
    pub host: Option<String>,
    /// Seconds users get to finish their task at the end (the environment's).
    #[serde(default)]
    pub stop_timeout: f64,
}

/// What helper 0 answered once it had imported the file and fired `init` and `test_start`.
#[derive(Debug, Clone)]
pub struct First {
    /// The key the run's first thread takes the helper by ([`LocustSpec::first`]).
    pub key: u64,
    /// The user classes, as the helper describes them (hosts as the run gives them).
    pub classes: Vec<UserClass>,
    /// The file has a `LoadTestShape`.
    pub shape: bool,
    /// The run's settings after the file's listeners.
    pub settings: Settings,
    /// The host and the file's own options the other helpers take ([`LocustSpec::shared`]).
    pub shared: serde_json::Value,
}

/// `ready` as helper 0 sends it.
#[derive(Deserialize)]
struct Ready {
    #[serde(default)]
    classes: Vec<UserClass>,
    #[serde(default)]
    shape: bool,
    settings: Settings,
    #[serde(default)]
    shared: serde_json::Value,
}

/// Starts helper 0 of `helpers` on `spec`'s file and waits until it imported it and fired
/// `init` and `test_start`; it then waits for the run (see [`take`]). The error says why the
/// file does not run.
pub fn start_first(spec: &LocustSpec, helpers: usize, seed: u64) -> io::Result<First> {
    let (mut mine, theirs) = UnixStream::pair()?;
    let mut child = Command::new(&spec.python)
        .args(PYTHON_ARGS)
        .env("PYTHONPATH", super::helper::python_path(spec))
        .env("LOADLAB_LOCUST_FD", "0")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| super::helper::not_started(spec, e))?;
    let init = init_message(spec, (0, helpers.max(1)), seed, false);
    let epoch = Instant::now();
    let answered = mine
        .write_all(format!("{init}\n").as_bytes())
        .and_then(|()| first_line(&mut mine, &spec.file));
    let line = match answered {
        Ok(line) => line,
        Err(e) => {
            stop(&mut child);
            return Err(e);
        }
    };
    let ready = match super::helper::ready_or_failed(&spec.file, &line)
        .and_then(|()| parse_ready(&spec.file, &line))
    {
        Ok(r) => r,
        Err(e) => {
            stop(&mut child);
            return Err(e);
        }
    };
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    let started = Started {
        child,
        socket: mine,
        epoch,
        shape: ready.shape,
    };
    WAITING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, started);
    Ok(First {
        key,
        classes: ready.classes,
        shape: ready.shape,
        settings: ready.settings,
        shared: ready.shared,
    })
}

/// The helper started under `key`, for the run's first thread; `None` when none waits there.
pub(super) fn take(key: u64) -> Option<Started> {
    WAITING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|w| w.remove(&key))
}

/// Stops the helper waiting under `key`, when the run will not take it (a plan refused).
pub fn discard(key: u64) {
    if let Some(mut started) = take(key) {
        stop(&mut started.child);
    }
}

/// Stops a helper by its PID and reaps it.
fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `ready` with its settings; the error names the file.
fn parse_ready(file: &str, line: &str) -> io::Result<Ready> {
    serde_json::from_str(line).map_err(|e| {
        io::Error::other(format!(
            "{file}: unexpected first line from the Python helper ({e}): {line}"
        ))
    })
}

/// The helper's first line, read a byte at a time so that nothing after it is taken from the
/// socket the run reads next.
fn first_line(socket: &mut UnixStream, file: &str) -> io::Result<String> {
    socket.set_read_timeout(Some(IMPORT_TIMEOUT))?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match socket.read(&mut byte) {
            Ok(0) => {
                return Err(io::Error::other(format!(
                    "{file}: the Python helper exited while importing it"
                )))
            }
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() < MAX_LINE => line.push(byte[0]),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(io::Error::other(format!(
                    "{file}: the Python helper did not import it within {} s",
                    IMPORT_TIMEOUT.as_secs()
                )))
            }
            Err(e) => return Err(e),
        }
    }
    socket.set_read_timeout(None)?;
    Ok(String::from_utf8_lossy(&line).into_owned())
}
