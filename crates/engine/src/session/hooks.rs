//! Processor functions for virtual users (sessions layer): one Node.js helper process per
//! generator thread loads the script's `config.processor` and calls its functions with
//! Artillery's signatures, over newline-delimited JSON on its stdin and stdout.
//!
//! Written by hand because no crate runs JavaScript hooks for a Rust load generator. The
//! helper keeps each user's context (so objects a hook stores stay objects), answers calls in
//! any order by id, and batches its answers, so one helper serves every concurrent user of its
//! thread; calls from one thread go out in one write per turn of the event loop.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::process::Stdio;
use std::rc::Rc;
use std::time::Duration;

use loadlab_run::users::Processor;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, Notify};

/// The helper's program, run with `node -e`.
const HOST: &str = include_str!("hooks_host.js");

/// Longest wait for Node.js to load the processor.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait, at the end, for the helper to finish its calls and close its browser.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A processor that Node.js could not load: Artillery's worker dies on it and Artillery exits
/// 11, and so does a loadlab run.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// The module requires a package that is not installed where Node.js looks for it.
    #[error(
        "config.processor {} requires the package {package:?}, which is not installed: run `npm install {package}` in {}",
        module.display(),
        module.parent().map_or_else(|| ".".into(), |d| d.display().to_string())
    )]
    MissingPackage {
        /// The processor's path.
        module: std::path::PathBuf,
        /// The package's name.
        package: String,
    },
    /// Any other failure to load it (a syntax error, an exception at its top level).
    #[error("config.processor {} failed to load: {error}", module.display())]
    Load {
        /// The processor's path.
        module: std::path::PathBuf,
        /// Node.js's error, in one line.
        error: String,
    },
}

/// A thread's Node.js helper: calls go out through it and come back by id.
pub struct Hooks {
    shared: Rc<Shared>,
    /// The functions the processor exports.
    pub functions: Vec<String>,
    /// The helper process, until [`Hooks::stop`] has stopped it.
    child: RefCell<Option<Child>>,
}

/// What the helper's reader and writer tasks share with the callers.
struct Shared {
    /// Calls waiting to be written.
    outbox: RefCell<Vec<u8>>,
    /// Wakes the writer.
    wake: Notify,
    /// Calls written and not answered yet, by id.
    pending: RefCell<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: Cell<u64>,
    /// Why the helper can take no more calls, once it cannot.
    gone: RefCell<Option<String>>,
    /// Set by [`Hooks::stop`]: the writer closes the helper's input once the calls are out.
    closing: Cell<bool>,
    /// The exit code the functions last suggested.
    suggested_exit: Cell<Option<i32>>,
}

/// Which of Artillery's hook signatures a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A `function` step: `(context, events, next)`.
    Fn,
    /// `beforeRequest`: `(requestParams, context, events, next)`.
    Before,
    /// `afterResponse`: `(requestParams, response, context, events, next)`.
    After,
    /// `onError`: `(error, requestParams, context, events, next)` when a request failed.
    Error,
    /// `ifTrue` naming a function: `(vars)`, its result's truth.
    If,
    /// `loop … whileTrue`: `(context, next)`, `next(true)` to go on.
    While,
    /// `engine: playwright`'s flow function: `(page, context, events, test)` with a page of a
    /// new browser context, closed when the function's promise settles.
    Browser,
}

/// A request as hooks see and change it (Artillery's `requestParams`), before its templates
/// are rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestParams {
    /// The whole URL.
    pub url: String,
    /// `GET`, `POST`…
    pub method: String,
    /// Headers by name; absent when the request sets none, as in Artillery (a function that
    /// adds one must create the map).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, serde_json::Value>,
    /// JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// Raw body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// Query parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub qs: BTreeMap<String, serde_json::Value>,
    /// The request's name in the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A response as `afterResponse` sees it.
#[derive(Debug, Serialize)]
pub struct Response<'a> {
    /// Status code.
    #[serde(rename = "statusCode")]
    pub status_code: u16,
    /// Headers, names in lower case.
    pub headers: BTreeMap<String, &'a str>,
    /// The body as text.
    pub body: Cow<'a, str>,
}

/// One call.
#[derive(Debug, Serialize)]
pub struct Call<'a> {
    /// The signature.
    pub op: Op,
    /// The functions, called in order.
    pub names: &'a [String],
    /// The user (the helper keeps its context until [`Hooks::end`]).
    #[serde(rename = "u")]
    pub user: u64,
    /// The scenario's name (`context.scenario.name`).
    pub scenario: &'a str,
    /// The user's variables as loadlab has them.
    pub vars: &'a HashMap<String, String>,
    /// The request, for `Before` and `After`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub req: Option<&'a RequestParams>,
    /// The response, for `After`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub res: Option<Response<'a>>,
    /// Why the request failed, for `Error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// The helper's answer to a call.
#[derive(Debug, Default, Deserialize)]
pub struct Reply {
    id: u64,
    /// Variables the functions set or changed, as text (an object's properties also as
    /// `name.key`).
    #[serde(default)]
    pub vars: HashMap<String, String>,
    /// The request as the functions left it, when they changed it.
    #[serde(default)]
    pub req: Option<RequestParams>,
    /// Metrics the functions emitted: (kind, name, value).
    #[serde(default, rename = "m")]
    pub metrics: Vec<(String, String, f64)>,
    /// The error a function threw or passed to `next`.
    #[serde(default)]
    pub err: Option<String>,
    /// The error's name as Artillery counts it (`errors.NAME`: its code, else its message).
    #[serde(default)]
    pub counted: Option<String>,
    /// How a function that failed did: it threw instead of passing its error to the callback
    /// (`Sync`), after an earlier function of the call had called back late (`Deferred`).
    #[serde(default)]
    pub thrown: Option<Thrown>,
    /// True when a function of the call finished after it returned (an async function, or a
    /// callback called later): from there Artillery's next steps run from the event loop.
    #[serde(default)]
    pub deferred: bool,
    /// The answer of an `If` or `While` call.
    #[serde(default)]
    pub ok: Option<bool>,
    /// The exit code a function suggested (`artillery.suggestedExitCode = N`), when one did
    /// during the call.
    #[serde(default)]
    exit: Option<i32>,
}

/// How a failing function threw (see [`Reply::thrown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thrown {
    /// It threw while called from the call's start.
    Sync,
    /// It threw after an earlier function of the call had called back late.
    Deferred,
}

impl Hooks {
    /// Starts Node.js on `processor` and waits until it has loaded the module. The error says
    /// what to do: install Node.js, or fix the module.
    pub async fn start(processor: &Processor) -> io::Result<Hooks> {
        let mut child = Command::new("node")
            .arg("-e")
            .arg(HOST)
            .arg(&processor.path)
            .arg(&processor.target)
            .arg(
                serde_json::json!({
                    "dir": processor.dir,
                    "lists": processor.lists,
                    "browser": processor.browser,
                })
                .to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "config.processor needs Node.js, and `node` could not be started ({e}); \
                         install Node.js 18 or later"
                    ),
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the Node.js helper has no pipes"));
        };
        let mut lines = BufReader::new(stdout).lines();
        let module = processor.path.display();
        let first = first_line(
            &mut lines,
            LOAD_TIMEOUT,
            || format!("config.processor {module}: Node.js exited while loading it"),
            || {
                format!(
                    "config.processor {module}: Node.js did not load it within {} s",
                    LOAD_TIMEOUT.as_secs()
                )
            },
        )
        .await?;
        #[derive(Deserialize)]
        struct Ready {
            ready: bool,
            #[serde(default)]
            functions: Vec<String>,
            #[serde(default)]
            error: String,
            #[serde(default)]
            missing: Option<String>,
        }
        let ready: Ready = serde_json::from_str(&first).map_err(|e| {
            io::Error::other(format!(
                "config.processor {module}: unexpected first line from Node.js ({e}): {first}"
            ))
        })?;
        if !ready.ready {
            return Err(io::Error::other(match ready.missing {
                Some(package) => ProcessorError::MissingPackage {
                    module: processor.path.clone(),
                    package,
                },
                None => ProcessorError::Load {
                    module: processor.path.clone(),
                    error: ready.error,
                },
            }));
        }
        let shared = Rc::new(Shared {
            outbox: RefCell::new(Vec::new()),
            wake: Notify::new(),
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(0),
            gone: RefCell::new(None),
            closing: Cell::new(false),
            suggested_exit: Cell::new(None),
        });
        tokio::task::spawn_local(write_calls(shared.clone(), stdin));
        tokio::task::spawn_local(read_replies(shared.clone(), lines));
        Ok(Hooks {
            shared,
            functions: ready.functions,
            child: RefCell::new(Some(child)),
        })
    }

    /// Calls `call`'s functions and waits at most `timeout` for them to finish; the error is
    /// the failure in words (a function's error and where it was thrown, or the wait).
    pub async fn call(&self, call: &Call<'_>, timeout: Duration) -> Result<Reply, String> {
        if let Some(why) = self.shared.gone.borrow().as_ref() {
            return Err(why.clone());
        }
        let id = self.shared.next_id.get();
        self.shared.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.shared.pending.borrow_mut().insert(id, tx);
        #[derive(Serialize)]
        struct Numbered<'c> {
            id: u64,
            #[serde(flatten)]
            call: &'c Call<'c>,
        }
        {
            let mut out = self.shared.outbox.borrow_mut();
            let at = out.len();
            if serde_json::to_writer(&mut *out, &Numbered { id, call }).is_err() {
                out.truncate(at);
                self.shared.pending.borrow_mut().remove(&id);
                return Err("a call could not be written as JSON".into());
            }
            out.push(b'\n');
        }
        self.shared.wake.notify_one();
        let names = call.names.join(", ");
        let reply = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => {
                let why = self.shared.gone.borrow().clone();
                return Err(why.unwrap_or_else(|| "the Node.js helper stopped".into()));
            }
            Err(_) => {
                self.shared.pending.borrow_mut().remove(&id);
                return Err(format!(
                    "{names}: did not finish within {:.0} s (a callback function must call next)",
                    timeout.as_secs_f64()
                ));
            }
        };
        Ok(reply)
    }

    /// Lets the helper forget user `user`'s context: its session is over.
    pub fn end(&self, user: u64) {
        if self.shared.gone.borrow().is_some() {
            return;
        }
        self.shared
            .outbox
            .borrow_mut()
            .extend_from_slice(format!("{{\"u\":{user},\"op\":\"end\"}}\n").as_bytes());
        self.shared.wake.notify_one();
    }

    /// The helper's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.borrow().as_ref().and_then(Child::id)
    }

    /// Stops the helper: closes its input, so it answers what is in flight and closes its
    /// browser, and waits for it to exit; after [`STOP_GRACE`], stops it by its own handle
    /// (its PID, never by name).
    pub async fn stop(&self) {
        let Some(mut child) = self.child.borrow_mut().take() else {
            return;
        };
        self.shared.closing.set(true);
        self.shared.wake.notify_one();
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        }
    }

    /// The exit code the processor's functions last suggested (`artillery.suggestedExitCode`),
    /// which Artillery exits with.
    pub fn suggested_exit_code(&self) -> Option<i32> {
        self.shared.suggested_exit.get()
    }

    /// CPU seconds (user + system) the helper has used so far; 0 when it is gone.
    pub fn cpu_s(&self) -> f64 {
        let Some(pid) = self.pid() else { return 0.0 };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return 0.0;
        };
        // Fields after the command name (which may hold spaces): state is the first, utime the
        // 12th and stime the 13th.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return 0.0;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
            .sum();
        // SAFETY: sysconf only reads a configuration value.
        let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if per_s > 0 {
            ticks / per_s as f64
        } else {
            0.0
        }
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        // Stopped by its own handle (its PID), never by name.
        if let Some(child) = self.child.get_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Writes the calls as they are queued, all that are waiting in one write.
async fn write_calls(shared: Rc<Shared>, mut stdin: ChildStdin) {
    loop {
        let batch = std::mem::take(&mut *shared.outbox.borrow_mut());
        if batch.is_empty() {
            if shared.closing.get() {
                // Dropping the pipe tells the helper that no more calls come.
                return;
            }
            shared.wake.notified().await;
            continue;
        }
        if let Err(e) = stdin.write_all(&batch).await {
            gone(
                &shared,
                format!("the Node.js helper stopped reading calls ({e})"),
            );
            return;
        }
    }
}

/// Hands each answer to its caller; when the helper's output ends, fails every call left.
async fn read_replies(shared: Rc<Shared>, mut lines: tokio::io::Lines<BufReader<ChildStdout>>) {
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => match serde_json::from_str::<Reply>(&line) {
                Ok(reply) => {
                    if let Some(code) = reply.exit {
                        shared.suggested_exit.set(Some(code));
                    }
                    if let Some(tx) = shared.pending.borrow_mut().remove(&reply.id) {
                        let _ = tx.send(reply);
                    }
                }
                Err(e) => eprintln!("warning: unreadable answer from the Node.js helper: {e}"),
            },
            Ok(None) => {
                gone(
                    &shared,
                    "the Node.js helper of config.processor exited".into(),
                );
                return;
            }
            Err(e) => {
                gone(&shared, format!("the Node.js helper's output failed ({e})"));
                return;
            }
        }
    }
}

/// Marks the helper gone and fails every call waiting on it.
fn gone(shared: &Shared, why: String) {
    shared.gone.borrow_mut().get_or_insert(why);
    shared.pending.borrow_mut().clear();
}

/// A helper process's first line (what it says once it has loaded the user's code) within
/// `limit`; an error `exited()` when it ended without one, `late()` when it took too long.
pub(crate) async fn first_line<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    limit: Duration,
    exited: impl FnOnce() -> String,
    late: impl FnOnce() -> String,
) -> io::Result<String> {
    match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(_) => Err(io::Error::other(exited())),
        Err(_) => Err(io::Error::other(late())),
    }
}
