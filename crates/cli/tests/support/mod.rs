//! Helpers the `loadlab` binary's tests share: running it, reading what it wrote, and asking
//! the reference service's counters what it served.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use loadlab_service::TestServer;
use serde_json::Value;

/// Writes `text` as `name` in `dir`; the file's path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, text).expect("the test's directory is writable");
    file
}

/// Runs the `loadlab` binary with `args` and no standard input.
pub fn loadlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("loadlab runs")
}

/// Runs loadlab and insists it succeeded.
pub fn loadlab_ok(args: &[&str]) -> Output {
    let out = loadlab(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs loadlab with `args` plus `--json FILE` (a file of its own), insists it succeeded, and
/// returns the summary it wrote with what it printed.
pub fn loadlab_json(args: &[&str]) -> (Value, Output) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json = dir.path().join("summary.json");
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().expect("a UTF-8 path")]);
    let out = loadlab_ok(&all);
    (read_json(&json), out)
}

/// Fails when any of the `(what, text)` pairs holds a number that is not one: `NaN`, `inf` or
/// `Infinity` as a word of its own (so a workload named "info" is fine).
pub fn assert_no_nan(texts: &[(&str, &str)]) {
    for (what, text) in texts {
        let bad = text
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|w| matches!(*w, "NaN" | "nan" | "inf" | "Infinity"));
        assert!(bad.is_none(), "{what} holds {bad:?}:\n{text}");
    }
}

/// What a lab wrote beside its runs, with its stdout, checked for numbers that are not:
/// stdout, `comparison.csv` and `lab.json`.
pub fn assert_lab_finite(out: &Path, stdout: &str) {
    let csv = std::fs::read_to_string(out.join("comparison.csv")).expect("comparison.csv");
    let json = std::fs::read_to_string(out.join("lab.json")).expect("lab.json");
    assert_no_nan(&[
        ("stdout", stdout),
        ("comparison.csv", &csv),
        ("lab.json", &json),
    ]);
}

/// A JSON file loadlab wrote.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("file written")).expect("valid JSON")
}

/// Writes `experiment` (an experiment file's YAML) into `dir` and runs `loadlab lab` on it,
/// which must succeed; what it printed and its output directory, whose outputs are checked
/// for numbers that are not.
pub fn lab_ok(dir: &Path, experiment: &str) -> (String, std::path::PathBuf) {
    let (code, stdout, stderr, _) = lab_exit(dir, experiment);
    assert_eq!(code, Some(0), "loadlab lab: {stderr}");
    let out = dir.join("out");
    assert_lab_finite(&out, &stdout);
    (stdout, out)
}

/// Runs a scenario file against `server` (with `extra` flags) and returns its summary.
pub fn run_scenario(file: &Path, server: &TestServer, extra: &[&str]) -> Value {
    let target = server.url("");
    let mut args = vec!["run", file.to_str().unwrap(), "--target", &target];
    args.extend_from_slice(extra);
    loadlab_json(&args).0
}

/// The next ticket of queue `name`: one more than the requests it has served.
pub fn next_ticket(server: &TestServer, name: &str) -> u64 {
    ticket_at(server.addr, name)
}

/// The next ticket of queue `name` from the service (or balancer) at `addr`.
pub fn ticket_at(addr: std::net::SocketAddr, name: &str) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /turno/{name} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap();
    let v: Value = serde_json::from_str(body).unwrap();
    v["turno"].as_u64().unwrap()
}

/// A token from the reference service's `POST /login` at `addr`, for `user`.
pub fn login_token(addr: std::net::SocketAddr, user: &str) -> String {
    let body = format!(r#"{{"user": "{user}", "password": "x"}}"#);
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let answer: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    answer["token"].as_str().unwrap().to_string()
}

/// A `loadlab serve` child process (one service, or a supervisor of a topology), interrupted
/// with SIGINT by its PID and awaited when dropped.
pub struct Served {
    /// The child process.
    pub child: std::process::Child,
    /// The port its front listens on.
    pub port: u16,
    /// The service's processes, as its first line lists them.
    pub pids: Vec<u32>,
    /// Its first line.
    pub line: String,
}

impl Served {
    /// Starts `loadlab serve --port 0` with `extra` flags and reads the port and pids it prints.
    pub fn start(extra: &[&str]) -> Served {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_loadlab"))
            .args(["serve", "--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        let pids = line
            .split("(pids ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .map(|p| p.split(' ').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        Served {
            child,
            port,
            pids,
            line,
        }
    }

    /// Sends SIGINT and waits (up to 15 s) for the process to exit; its exit code.
    pub fn interrupt(&mut self) -> Option<i32> {
        // SAFETY: signals the child we spawned, by its PID.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(15) {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("loadlab serve did not stop after SIGINT");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.interrupt();
        }
    }
}

/// True when no process has this pid any more (or only its zombie remains).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
    }
}

/// Waits (up to 10 s) until every pid is gone; fails naming those left running.
pub fn assert_all_gone(pids: &[u32]) {
    let start = std::time::Instant::now();
    while !pids.iter().all(|p| gone(*p)) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "left running: {pids:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// How the system tier's tests share the machine. On a 2-core machine a measuring test beside a
/// busy one has its core stolen, and its figures say nothing about what they measure (a probe
/// read stalls of 0.2–0.5 s on 50 ms workers beside the corpus); but most measuring tests read
/// what their services *wait*, at rates a tenth of a core drives, and four of them fit in one
/// of the two cores. So a test claims the machine one of three ways: [`alone`] (its figures
/// need every core: CPU readings, CPU budgets, rates the generator works hard for), [`quiet`]
/// (it measures waits and uses little CPU: beside three other quiet tests, never beside a busy
/// one) or [`shared`] (it measures nothing: beside two other such tests). The fast tier
/// measures nothing and claims nothing.
///
/// The harness runs every test at once (`scripts/test.sh`: a thread each), so the claims
/// decide the order: tests alone first, then the quiet ones, then the shared ones. Switching
/// between kinds waits for the running tests to end, with places idle meanwhile; in the
/// names' order (libtest's), four at a time, the switches left a fifth of the tier's time idle
/// (a suite's claims log: 810 s, where the kinds in turn take 650 s). Within a kind the long
/// tests (a minute or so: [`quiet_long`], [`shared_long`]) go first, so that none starts last and
/// runs on with the other places idle (the Kubernetes test started 60 s into the shared phase,
/// and the tier ended 13 s after the others).
#[derive(Debug, Default)]
struct Claims {
    alone: bool,
    quiet: usize,
    shared: usize,
    /// Tests waiting to run alone: nothing new starts before them, so they are not starved.
    waiting_alone: usize,
    /// Quiet tests waiting: no new shared test starts before them.
    waiting_quiet: usize,
    /// Long quiet tests waiting: no short quiet test starts before them.
    waiting_long_quiet: usize,
    /// Long shared tests waiting: no short shared test starts before them.
    waiting_long_shared: usize,
}

/// The machine's claims and the condition their holders wait on.
static MACHINE: (Mutex<Claims>, Condvar) = (
    Mutex::new(Claims {
        alone: false,
        quiet: 0,
        shared: 0,
        waiting_alone: 0,
        waiting_quiet: 0,
        waiting_long_quiet: 0,
        waiting_long_shared: 0,
    }),
    Condvar::new(),
);

/// Quiet tests that run at once: each uses a quarter of a core at most over its run, so four
/// take one of the two at most (beside three, a suite's `vmstat 10` read the CPU 85-90 % idle
/// through the quiet phase).
const QUIET_AT_ONCE: usize = 4;

/// Shared tests that run at once.
const SHARED_AT_ONCE: usize = 3;

/// A test's claim on the machine, given back when dropped (also when the test panics).
#[must_use = "the claim lasts as long as the guard"]
pub struct Claim {
    give: fn(&mut Claims),
    /// `alone`, `quiet` or `shared`, for the log.
    kind: &'static str,
    asked: std::time::Instant,
    taken: std::time::Instant,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let (lock, freed) = &MACHINE;
        (self.give)(&mut lock.lock().unwrap_or_else(|e| e.into_inner()));
        freed.notify_all();
        log_claim(self);
    }
}

/// With `LOADLAB_CLAIMS_LOG=FILE`, appends a line per claim to FILE: the test, its kind, when it
/// asked and when it got the machine (seconds since the first claim) and how long it held it. It
/// shows where the system tier's time goes: the sum of `alone` holds is its serial floor, and a
/// gap between a hold's end and the next hold's start is a core left idle.
fn log_claim(c: &Claim) {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let Some(path) = std::env::var_os("LOADLAB_CLAIMS_LOG") else {
        return;
    };
    let epoch = *EPOCH.get_or_init(|| c.asked);
    let since = |t: std::time::Instant| t.saturating_duration_since(epoch).as_secs_f64();
    let line = format!(
        "{}\t{}\t{:.2}\t{:.2}\t{:.2}\n",
        std::thread::current().name().unwrap_or("?"),
        c.kind,
        since(c.asked),
        since(c.taken),
        c.taken.elapsed().as_secs_f64(),
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// How long after the first claim is asked for the first is granted: the harness starts every
/// test at once, and each says its kind before the order is decided (else the quiet tests that
/// asked first ran before the tests alone that asked a millisecond later).
const GATHER: Duration = Duration::from_millis(300);

/// Waits until `may` allows this test in, then records it with `take`.
fn claim(
    kind: &'static str,
    may: fn(&Claims) -> bool,
    take: fn(&mut Claims),
    give: fn(&mut Claims),
) -> Claim {
    static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let asked = std::time::Instant::now();
    let first = *FIRST.get_or_init(|| asked);
    std::thread::sleep((first + GATHER).saturating_duration_since(asked));
    let (lock, freed) = &MACHINE;
    let mut c = lock.lock().unwrap_or_else(|e| e.into_inner());
    while !may(&c) {
        c = freed.wait(c).unwrap_or_else(|e| e.into_inner());
    }
    take(&mut c);
    Claim {
        give,
        kind,
        asked,
        taken: std::time::Instant::now(),
    }
}

/// Claims the machine for this test alone.
pub fn alone() -> Claim {
    let (lock, _) = &MACHINE;
    lock.lock().unwrap_or_else(|e| e.into_inner()).waiting_alone += 1;
    claim(
        "alone",
        |c| !c.alone && c.quiet == 0 && c.shared == 0,
        |c| {
            c.waiting_alone -= 1;
            c.alone = true;
        },
        |c| c.alone = false,
    )
}

/// Whether a quiet test may start now (`long`: before the short ones waiting).
fn may_quiet(c: &Claims, long: bool) -> bool {
    !c.alone
        && c.waiting_alone == 0
        && c.shared == 0
        && c.quiet < QUIET_AT_ONCE
        && (long || c.waiting_long_quiet == 0)
}

/// Claims a quarter of the machine for a test that measures what its services wait and uses little
/// CPU (a quarter of a core at most over its run, measured with `/usr/bin/time` on the test
/// alone).
pub fn quiet() -> Claim {
    let (lock, _) = &MACHINE;
    lock.lock().unwrap_or_else(|e| e.into_inner()).waiting_quiet += 1;
    claim(
        "quiet",
        |c| may_quiet(c, false),
        |c| {
            c.waiting_quiet -= 1;
            c.quiet += 1;
        },
        |c| c.quiet -= 1,
    )
}

/// [`quiet`] for a test of about a minute or more: it starts before the short quiet ones.
pub fn quiet_long() -> Claim {
    let (lock, _) = &MACHINE;
    let mut c = lock.lock().unwrap_or_else(|e| e.into_inner());
    c.waiting_quiet += 1;
    c.waiting_long_quiet += 1;
    drop(c);
    claim(
        "quiet",
        |c| may_quiet(c, true),
        |c| {
            c.waiting_quiet -= 1;
            c.waiting_long_quiet -= 1;
            c.quiet += 1;
        },
        |c| c.quiet -= 1,
    )
}

/// Whether a shared test may start now (`long`: before the short ones waiting).
fn may_share(c: &Claims, long: bool) -> bool {
    !c.alone
        && c.waiting_alone == 0
        && c.waiting_quiet == 0
        && c.quiet == 0
        && c.shared < SHARED_AT_ONCE
        && (long || c.waiting_long_shared == 0)
}

/// Claims the machine beside other tests that measure nothing.
pub fn shared() -> Claim {
    claim(
        "shared",
        |c| may_share(c, false),
        |c| c.shared += 1,
        |c| c.shared -= 1,
    )
}

/// [`shared`] for a test of about a minute or more: it starts before the short shared ones.
pub fn shared_long() -> Claim {
    let (lock, _) = &MACHINE;
    lock.lock()
        .unwrap_or_else(|e| e.into_inner())
        .waiting_long_shared += 1;
    claim(
        "shared",
        |c| may_share(c, true),
        |c| {
            c.waiting_long_shared -= 1;
            c.shared += 1;
        },
        |c| c.shared -= 1,
    )
}

/// What one of the project's install scripts builds once per machine (a program, or a directory
/// of them): the path in environment variable `var`, which `scripts/test.sh` sets, or else
/// `relative` under loadlab's cache (`$XDG_CACHE_HOME/loadlab`, or `~/.cache/loadlab`). A
/// missing one fails the test with the script that builds it.
pub fn built_once(var: &str, relative: &str, script: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        return path.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    let path = cache.join("loadlab").join(relative);
    assert!(
        path.exists(),
        "{} is missing: run {script} (scripts/test.sh does)",
        path.display()
    );
    path
}

/// `GET /info` on a new connection; the answering process's pid.
pub fn info_pid(port: u16) -> u32 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let rest = body.split("\"pid\":").nth(1).expect("an /info body");
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The pids answering `/info` over `n` new connections to `port`, with how many times each did.
pub fn answers(port: u16, n: usize) -> BTreeMap<u32, usize> {
    let mut by_pid = BTreeMap::new();
    for _ in 0..n {
        *by_pid.entry(info_pid(port)).or_insert(0) += 1;
    }
    by_pid
}

/// Runs `loadlab lab` on `experiment` (written into `dir`, its results in `dir/out`), whatever
/// its outcome: its exit code, stdout, stderr and PID.
pub fn lab_exit(dir: &Path, experiment: &str) -> (Option<i32>, String, String, u32) {
    let file = dir.join("exp.yaml");
    std::fs::write(&file, experiment).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["lab", file.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        pid,
    )
}

/// The kinds of a summary's findings, in order.
pub fn finding_kinds(summary: &Value) -> Vec<&str> {
    summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect()
}

/// A port of 127.0.0.1 nothing listens on (bound, then let go).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The exit code of a run whose strict thresholds failed.
pub const EXIT_THRESHOLDS: i32 = 99;

/// The exit code of a loadlab that exited.
pub fn exit_code(out: &Output) -> i32 {
    out.status.code().expect("loadlab exited")
}

/// What a loadlab printed on stdout.
pub fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `text` as `scenario.yml` in a new temporary folder.
pub fn scenario_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// The reference service's `.proto` file, as the repository ships it.
pub fn reference_proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../grpc/proto/loadlab/reference/v1/reference.proto")
}

/// A `.proto` file in `dir` declaring `loadlab.reference.v1.Reference/Nope`, a method the
/// reference services do not have (their answer: `UNIMPLEMENTED`).
pub fn unknown_method_proto(dir: &Path) -> PathBuf {
    write_file(
        dir,
        "other.proto",
        "syntax = \"proto3\";\npackage loadlab.reference.v1;\nmessage E {}\n\
         service Reference { rpc Nope(E) returns (E); }\n",
    )
}
