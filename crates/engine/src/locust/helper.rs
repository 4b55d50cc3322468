//! One generator thread's Python helper: started on the locustfile with loadlab's `locust`
//! package in front, spoken to in JSON lines over a Unix socket (its standard input, so that
//! what the user's code prints still reaches the terminal), stopped by PID with the thread.

use std::cell::RefCell;
use std::io;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::rc::Rc;
use std::time::Duration;

use loadlab_run::users::LocustSpec;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long importing the locustfile may take.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

/// A user class as a helper describes it in `ready` (see `PROTOCOL.md`): its tasks and hosts
/// as its users will run them. Attributes the user's code set to something Locust would not
/// read (a weight that is not a number) are `None`: such a class is described, not refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UserClass {
    /// The class's name.
    pub name: String,
    /// Its `weight`: its share of the users.
    #[serde(default, deserialize_with = "number_or_none")]
    pub weight: Option<f64>,
    /// Its `fixed_count`: users of it started first, whatever the weights.
    #[serde(default, deserialize_with = "number_or_none")]
    pub fixed_count: Option<f64>,
    /// Its `host`, when it sets one.
    #[serde(default, deserialize_with = "text_or_none")]
    pub host: Option<String>,
    /// Its `wait_time`, in words (`between(1, 5)`), when it declares one.
    #[serde(default, deserialize_with = "text_or_none")]
    pub wait_time: Option<String>,
    /// `http` (an `HttpUser`), `fasthttp` (a `FastHttpUser`) or `user` (a plain `User`, whose
    /// host is its own business: a gRPC channel's `localhost:50051`).
    #[serde(default, deserialize_with = "text_or_none")]
    pub kind: Option<String>,
    /// Its tasks.
    #[serde(default)]
    pub tasks: Vec<ClassTask>,
}

/// A number, or `None` for any other JSON value.
fn number_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(serde_json::Value::deserialize(d)?.as_f64())
}

/// A string, or `None` for any other JSON value.
fn text_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })
}

/// A task of a user class.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClassTask {
    /// The task's function (or task set's class) name.
    pub name: String,
    /// Its weight among the class's tasks.
    #[serde(default)]
    pub weight: u64,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A message from the helper (see `PROTOCOL.md`).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FromHelper {
    /// The file imported; its user classes.
    Ready {
        /// The user classes, as the helper describes them.
        #[serde(default)]
        classes: Vec<UserClass>,
        /// The file has a `LoadTestShape`.
        #[serde(default)]
        shape: bool,
    },
    /// The file could not be imported.
    Failed {
        /// Why, with the traceback.
        error: String,
    },
    /// A user's request.
    Request(RequestMsg),
    /// The outcome of a `catch_response=True` request.
    Verdict {
        /// The request.
        id: u64,
        /// True when it counts as a success.
        ok: bool,
        /// Why it failed.
        #[serde(default)]
        error: Option<String>,
        /// The request is not recorded at all: an exception other than a `ResponseError` left
        /// the `with` block, which Locust lets through without reporting the request.
        #[serde(default)]
        drop: bool,
    },
    /// A request the user's code recorded itself (`events.request.fire`).
    Event {
        /// Its type (`GET`, `grpc`…).
        request_type: String,
        /// Its name.
        name: String,
        /// Its response time, ms.
        response_time_ms: f64,
        /// Its response's length, bytes.
        #[serde(default)]
        response_length: u64,
        /// Why it failed.
        #[serde(default)]
        error: Option<String>,
    },
    /// A task raised an exception.
    TaskError {
        /// The user's class.
        user_class: String,
        /// The task.
        task: String,
        /// The exception in one line.
        error: String,
        /// The traceback.
        #[serde(default)]
        traceback: String,
        /// Raised where Locust has no handler (a class's `__init__` while spawning): not a
        /// task's error but the run's (Locust's exit code 2).
        #[serde(default)]
        unhandled: bool,
    },
    /// Users running in the helper now.
    Spawned {
        /// How many.
        count: u64,
    },
    /// A shape's tick.
    Shape {
        /// Users to run.
        #[serde(default)]
        users: Option<u64>,
        /// Users started or stopped per second.
        #[serde(default)]
        rate: Option<f64>,
        /// The shape ended the test.
        #[serde(default)]
        stop: bool,
        /// The user classes the shape asks for, by name.
        #[serde(default)]
        classes: Option<Vec<String>>,
    },
    /// User code asked the run to stop.
    Quit,
    /// The answer to `stop`.
    Stopped {
        /// `environment.process_exit_code` as the user's code left it (a `quitting`
        /// listener's), which becomes the process's exit code as in Locust.
        #[serde(default)]
        exit_code: Option<i32>,
    },
}

/// A user's request, as the helper sends it.
#[derive(Debug, Deserialize)]
pub struct RequestMsg {
    /// Its id, for the answer.
    pub id: u64,
    /// The user making it.
    pub user: u64,
    /// The method.
    pub method: String,
    /// The absolute URL, query included.
    pub url: String,
    /// Headers, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body, base64.
    #[serde(default)]
    pub body: Option<String>,
    /// The `name=` given.
    #[serde(default)]
    pub name: Option<String>,
    /// The `timeout=` given, seconds: the request fails as timed out when no response
    /// came within it (each redirect's request gets it anew, as in `requests`).
    #[serde(default)]
    pub timeout: Option<f64>,
    /// Follow redirects.
    #[serde(default = "yes")]
    pub redirects: bool,
    /// Made with `catch_response=True`: recorded when its verdict comes.
    #[serde(default)]
    pub catch: bool,
    /// When it was due, seconds from the helper's `init`.
    #[serde(default)]
    pub intended: Option<f64>,
    /// The user's pacing period, seconds (`constant_pacing`, `constant_throughput`).
    #[serde(default)]
    pub interval: Option<f64>,
}

fn yes() -> bool {
    true
}

/// A running helper: what to write to it, and its process.
pub struct Helper {
    /// Lines waiting to be written.
    out: RefCell<Vec<u8>>,
    /// Signalled when `out` has lines.
    wake: Notify,
    /// The lines it writes, taken by the thread's reader.
    lines: RefCell<Option<Lines<BufReader<OwnedReadHalf>>>>,
    /// The process.
    child: RefCell<Option<Process>>,
    /// When `init` was sent: the helper's times count from here.
    pub epoch: Instant,
    /// The file has a `LoadTestShape`.
    pub shape: bool,
}

impl Helper {
    /// Starts helper `index` of `helpers` on `spec`'s file and waits until it imported it; the
    /// error says what to do.
    pub async fn start(
        spec: &LocustSpec,
        (index, helpers): (usize, usize),
        seed: u64,
    ) -> io::Result<Rc<Helper>> {
        Self::launch(spec, (index, helpers), seed, false, &RefCell::default()).await
    }

    /// Imports `spec`'s file in a helper that runs nothing, and answers what it found: the
    /// user classes (as the helper describes them) and whether it has a `LoadTestShape`.
    pub async fn describe(spec: &LocustSpec) -> io::Result<(Vec<UserClass>, bool)> {
        let described = RefCell::default();
        let helper = Self::launch(spec, (0, 1), 0, true, &described).await?;
        helper.kill().await;
        Ok((described.take(), helper.shape))
    }

    /// Starts a helper and waits until it imported the file (`describe`: and does nothing
    /// else); the classes it found go to `described`.
    async fn launch(
        spec: &LocustSpec,
        (index, helpers): (usize, usize),
        seed: u64,
        describe: bool,
        described: &RefCell<Vec<UserClass>>,
    ) -> io::Result<Rc<Helper>> {
        let (mine, theirs) = std::os::unix::net::UnixStream::pair()?;
        mine.set_nonblocking(true)?;
        let child = Command::new(&spec.python)
            .args(PYTHON_ARGS)
            .env("PYTHONPATH", python_path(spec))
            .env("LOADLAB_LOCUST_FD", "0")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| not_started(spec, e))?;
        let (read, mut write) = UnixStream::from_std(mine)?.into_split();
        // The writer task below takes `write` for the run.
        let mut lines = BufReader::new(read).lines();
        let init = init_message(spec, (index, helpers), seed, describe);
        let epoch = Instant::now();
        write.write_all(format!("{init}\n").as_bytes()).await?;
        let file = &spec.file;
        let first = crate::session::hooks::first_line(
            &mut lines,
            IMPORT_TIMEOUT,
            || format!("{file}: the Python helper exited while importing it"),
            || {
                format!(
                    "{file}: the Python helper did not import it within {} s",
                    IMPORT_TIMEOUT.as_secs()
                )
            },
        )
        .await?;
        ready_or_failed(file, &first)?;
        let shape = match serde_json::from_str::<FromHelper>(&first) {
            Ok(FromHelper::Ready { shape, classes }) => {
                *described.borrow_mut() = classes;
                shape
            }
            _ => false,
        };
        Ok(Self::running(
            lines,
            write,
            Process::Spawned(child),
            epoch,
            shape,
        ))
    }

    /// Takes over a helper started elsewhere (helper 0, started before the plan): the run's
    /// first thread talks to it from here on.
    pub(super) fn adopt(started: Started) -> io::Result<Rc<Helper>> {
        started.socket.set_nonblocking(true)?;
        let (read, write) = UnixStream::from_std(started.socket)?.into_split();
        Ok(Self::running(
            BufReader::new(read).lines(),
            write,
            Process::Adopted(started.child),
            Instant::from_std(started.epoch),
            started.shape,
        ))
    }

    /// A helper that has answered `ready`, with the task that writes what is queued for it.
    fn running(
        lines: Lines<BufReader<OwnedReadHalf>>,
        mut write: OwnedWriteHalf,
        process: Process,
        epoch: Instant,
        shape: bool,
    ) -> Rc<Helper> {
        let helper = Rc::new(Helper {
            out: RefCell::new(Vec::new()),
            wake: Notify::new(),
            lines: RefCell::new(Some(lines)),
            child: RefCell::new(Some(process)),
            epoch,
            shape,
        });
        let writer = helper.clone();
        tokio::task::spawn_local(async move {
            loop {
                writer.wake.notified().await;
                let bytes = std::mem::take(&mut *writer.out.borrow_mut());
                if !bytes.is_empty() && write.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        helper
    }

    /// Queues `msg` for the helper.
    pub fn send(&self, msg: &serde_json::Value) {
        let mut out = self.out.borrow_mut();
        let first = out.is_empty();
        out.extend_from_slice(msg.to_string().as_bytes());
        out.push(b'\n');
        if first {
            self.wake.notify_one();
        }
    }

    /// The lines the helper writes, for the one task that reads them (`None` after the
    /// first call).
    pub fn take_lines(&self) -> Option<Lines<BufReader<OwnedReadHalf>>> {
        self.lines.borrow_mut().take()
    }

    /// Stops the process (by its PID, through the handle that started it).
    pub async fn kill(&self) {
        let child = self.child.borrow_mut().take();
        match child {
            Some(Process::Spawned(mut c)) => {
                let _ = c.kill().await;
            }
            Some(Process::Adopted(mut c)) => {
                // Killed, it is reaped at once; off the event loop all the same.
                let _ = tokio::task::spawn_blocking(move || {
                    let _ = c.kill();
                    let _ = c.wait();
                })
                .await;
            }
            None => {}
        }
    }
}

/// A helper process started outside a run's thread, with its socket and when it was sent
/// `init`, for a thread to take over ([`Helper::adopt`]).
pub(super) struct Started {
    /// The process.
    pub child: std::process::Child,
    /// loadlab's end of its socket, blocking.
    pub socket: std::os::unix::net::UnixStream,
    /// When `init` was sent: the helper's times count from here.
    pub epoch: std::time::Instant,
    /// The file has a `LoadTestShape`.
    pub shape: bool,
}

/// A helper's process: started by this thread, or taken over ([`Helper::adopt`]).
enum Process {
    /// Started here (killed when dropped).
    Spawned(Child),
    /// Started before the plan; without a reaper of the runtime's.
    Adopted(std::process::Child),
}

/// How the helper's Python is run.
pub(super) const PYTHON_ARGS: [&str; 3] = ["-u", "-m", "loadlab_locust.helper"];

/// The helpers' `PYTHONPATH`: loadlab's package first, then the caller's.
pub(super) fn python_path(spec: &LocustSpec) -> std::ffi::OsString {
    match std::env::var_os("PYTHONPATH") {
        Some(p) if !p.is_empty() => {
            let mut all = spec.package.clone().into_os_string();
            all.push(":");
            all.push(p);
            all
        }
        _ => spec.package.clone().into_os_string(),
    }
}

/// The error of a helper whose Python could not be started.
pub(super) fn not_started(spec: &LocustSpec, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "loadlab locust needs Python 3 with gevent: {} could not be started ({e})",
            spec.python.display()
        ),
    )
}

/// The `init` message of helper `index` of `helpers` (see `PROTOCOL.md`).
pub(super) fn init_message(
    spec: &LocustSpec,
    (index, helpers): (usize, usize),
    seed: u64,
    describe: bool,
) -> serde_json::Value {
    serde_json::json!({
        "op": "init",
        "file": spec.file,
        "host": spec.host,
        "classes": spec.classes,
        "tags": spec.tags,
        "exclude_tags": spec.exclude_tags,
        "helper": index,
        "helpers": helpers,
        "describe": describe,
        "seed": seed,
        "iterations": spec.iterations.map(|n| crate::schedule::share_of(n, index, helpers)),
        "options": spec.options,
        "file_args": spec.file_args,
        "shared": if index > 0 { spec.shared.clone() } else { None },
    })
}

/// Ok when the helper's first line is `ready`; else the error it gives, naming the file.
pub(super) fn ready_or_failed(file: &str, first: &str) -> io::Result<()> {
    match serde_json::from_str::<FromHelper>(first) {
        Ok(FromHelper::Ready { .. }) => Ok(()),
        Ok(FromHelper::Failed { error }) => Err(io::Error::other(format!("{file}: {error}"))),
        _ => Err(io::Error::other(format!(
            "{file}: unexpected first line from the Python helper: {first}"
        ))),
    }
}
