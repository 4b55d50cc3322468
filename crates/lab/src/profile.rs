//! Profiling the service while the load is on (lab → run): after the warm-up, the watched
//! processes and their descendants are sampled for a bounded window, each by the backend that
//! reads its stacks (`perf record` for native code, folded by inferno's perf folder; V8's own
//! CPU profiler for loadlab's Node service, asked for by signal and converted from its
//! `.cpuprofile`; perf on frame pointers for any other node process, named through
//! `/tmp/perf-PID.map` when it was started with `--perf-basic-prof`; `py-spy` for Python,
//! which folds its own). A backend that cannot run says why in one line and the run goes on.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;
use loadlab_run::{Profile, ProfileOutcome};

/// Samples per second per CPU: odd, so it does not beat with timers of round periods.
const FREQUENCY: u32 = 499;

/// A profile being recorded on its own thread until [`Profiler::finish`].
pub struct Profiler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<ProfileOutcome>,
}

impl Profiler {
    /// Starts profiling `pids` `delay` from now, for `length` at most.
    pub fn start(pids: &[i32], delay: Duration, length: Duration) -> Profiler {
        let pids: Vec<u32> = pids.iter().map(|&p| p as u32).collect();
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("loadlab-profiler".into())
            .spawn(move || record(&pids, delay, length, &stopped))
            .expect("the profiler thread starts");
        Profiler { stop, thread }
    }

    /// Ends the window now if it is still open, and returns the profile (or why there is none).
    pub fn finish(self) -> ProfileOutcome {
        let _ = self.stop.send(());
        self.thread
            .join()
            .unwrap_or_else(|_| failed("the profiler stopped unexpectedly"))
    }
}

fn failed(reason: &str) -> ProfileOutcome {
    ProfileOutcome::Failed {
        backend: "perf".into(),
        reason: reason.to_string(),
    }
}

/// How a process's stacks are read: perf for native code and for Node, V8's profiler for
/// loadlab's Node service, py-spy for Python's interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Perf,
    /// V8's sampling profiler inside the process, started and stopped by SIGUSR2 (the Node
    /// service loadlab starts installs the handler). It names JavaScript frames exactly,
    /// functions the optimizing compiler inlined included, which perf cannot see.
    V8,
    /// perf walking frame pointers: V8 keeps them in the code it compiles, which has no
    /// unwind tables for DWARF unwinding to read; node started with `--perf-basic-prof`
    /// names that code in `/tmp/perf-PID.map`, where perf looks.
    Node,
    PySpy,
}

impl Backend {
    /// The backend for `pid`, by what it runs.
    fn of(pid: u32) -> Backend {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let exe = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .split('\0')
            .next()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        let python = |name: &str| name.starts_with("python") || name == "gunicorn";
        if python(comm.trim()) || python(&exe) {
            Backend::PySpy
        } else if comm.trim() == "node" || exe == "node" {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let asked = format!("{}=1", crate::runtime::V8_PROFILE_ENV);
            if environ.split(|&b| b == 0).any(|v| v == asked.as_bytes()) {
                Backend::V8
            } else {
                Backend::Node
            }
        } else {
            Backend::Perf
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Perf => "perf",
            Backend::V8 => "v8",
            Backend::Node => "node-perf",
            Backend::PySpy => "py-spy",
        }
    }
}

/// One backend's recorder while it runs.
struct Recording {
    backend: Backend,
    tool: PathBuf,
    /// The recording program (perf, py-spy); none for V8, which samples inside the process.
    child: Option<std::process::Child>,
    /// When the window ends without a program to say so (V8).
    until: Instant,
    out: PathBuf,
    /// The process names of the sampled pids, by pid (py-spy's stacks start below them).
    names: Vec<(u32, String)>,
}

impl Recording {
    /// True once the window is over: the recording program exited, or the time passed.
    fn done(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => Instant::now() >= self.until,
        }
    }
}

/// Waits `delay`, records the processes `roots` and their descendants (each by its backend)
/// for up to `length` (less if stopped), and folds the stacks.
fn record(
    roots: &[u32],
    delay: Duration,
    length: Duration,
    stopped: &mpsc::Receiver<()>,
) -> ProfileOutcome {
    let began = Instant::now();
    match stopped.recv_timeout(delay) {
        Err(RecvTimeoutError::Timeout) => {}
        _ => {
            return failed(
                "the run ended before the profile's window began (it starts after the \
                 warm-up): run longer",
            )
        }
    }
    let roots: Vec<i32> = roots.iter().map(|&p| p as i32).collect();
    let pids: Vec<u32> = crate::sampler::watched(&roots)
        .into_iter()
        .map(|p| p as u32)
        .collect();
    let start_s = began.elapsed().as_secs_f64();
    let mut recordings = Vec::new();
    let mut problems = Vec::new();
    for backend in [Backend::Perf, Backend::V8, Backend::Node, Backend::PySpy] {
        let mine: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| Backend::of(p) == backend)
            .collect();
        if mine.is_empty() {
            continue;
        }
        if backend == Backend::Node {
            problems.extend(unmapped(&mine));
        }
        match start_backend(backend, &mine, length) {
            Ok(r) => recordings.push(r),
            Err(why) => problems.push(why),
        }
    }
    let sampling = Instant::now();
    // The window ends with the backends' own length, or at once when the run ends.
    loop {
        if recordings.iter_mut().all(Recording::done) {
            break;
        }
        match stopped.recv_timeout(Duration::from_millis(50)) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => {
                for child in recordings.iter().filter_map(|r| r.child.as_ref()) {
                    // SAFETY: signals a recorder this thread started, by its PID; perf and
                    // py-spy write what they have and exit on SIGINT.
                    unsafe {
                        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
                    }
                }
                break;
            }
        }
    }
    let duration_s = sampling.elapsed().as_secs_f64();
    let mut stacks = std::collections::BTreeMap::new();
    let mut used = Vec::new();
    for r in recordings {
        match finish_backend(r) {
            Ok((backend, folded)) => {
                used.push(backend.name());
                for (stack, n) in folded {
                    *stacks.entry(stack).or_insert(0) += n;
                }
            }
            Err(why) => problems.push(why),
        }
    }
    if stacks.is_empty() {
        return ProfileOutcome::Failed {
            backend: if used.is_empty() {
                "perf".into()
            } else {
                used.join("+")
            },
            reason: if problems.is_empty() {
                "no stack was sampled: the watched processes used no CPU in the window".into()
            } else {
                problems.join("; ")
            },
        };
    }
    ProfileOutcome::Recorded(Profile {
        backend: used.join("+"),
        pids,
        start_s,
        duration_s,
        stacks,
        notes: problems,
    })
}

/// Starts `backend` on `pids` for `length`.
fn start_backend(backend: Backend, pids: &[u32], length: Duration) -> Result<Recording, String> {
    let names = pids
        .iter()
        .map(|&p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            (p, comm.trim().to_string())
        })
        .collect();
    if backend == Backend::V8 {
        for &pid in pids {
            let _ = std::fs::remove_file(v8_profile_path(pid));
            // SAFETY: signals a watched process by its PID; loadlab's node service starts its
            // profiler on SIGUSR2 (its environment says it handles it).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGUSR2);
            }
        }
        return Ok(Recording {
            backend,
            tool: PathBuf::new(),
            child: None,
            until: Instant::now() + length,
            out: PathBuf::new(),
            names,
        });
    }
    let out = std::env::temp_dir().join(format!(
        "loadlab-{}-{}-{}.out",
        backend.name(),
        std::process::id(),
        pids[0]
    ));
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let (tool, mut cmd) = match backend {
        Backend::V8 => unreachable!("V8 samples inside the process"),
        Backend::Perf | Backend::Node => {
            let perf = crate::find_program("perf", &[])
                .ok_or("perf is not installed: install it with apt-get install linux-perf")?;
            let mut cmd = Command::new(&perf);
            // DWARF unwinding for native code: release builds (and most distributions'
            // binaries) keep no frame pointers, and without them every stack stops at its
            // leaf. Frame pointers for Node: JIT code has no unwind tables, and Debian's node
            // keeps frame pointers through its own C++ and builtins.
            let unwind = if backend == Backend::Node {
                "fp"
            } else {
                "dwarf"
            };
            cmd.args([
                "record",
                "-F",
                &FREQUENCY.to_string(),
                "--call-graph",
                unwind,
                "-q",
            ])
            // No build-id collection: it only slows perf's exit at the window's end.
            .args(["--no-buildid", "--no-buildid-cache"])
            .args(["-p", &list.join(",")])
            .arg("-o")
            .arg(&out)
            .args(["--", "sleep", &format!("{:.3}", length.as_secs_f64())]);
            (perf, cmd)
        }
        Backend::PySpy => {
            let spy = crate::find_program("py-spy", &tools_venvs()).ok_or(
                "py-spy is not installed: install it with pip install py-spy==0.4.1 (on the \
                 PATH, or in target/tools-venv as scripts/test.sh does)",
            )?;
            // py-spy samples one process; a gunicorn master's workers are its children.
            let mut cmd = Command::new(&spy);
            cmd.args([
                "record",
                "--format",
                "raw",
                "--nonblocking",
                "--subprocesses",
            ])
            .args(["-r", &FREQUENCY.to_string()])
            .args(["-d", &format!("{}", length.as_secs().max(1))])
            .args(["-p", &list[0]])
            .arg("-o")
            .arg(&out);
            (spy, cmd)
        }
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", backend.name()))?;
    Ok(Recording {
        backend,
        tool,
        child: Some(child),
        until: Instant::now() + length,
        out,
        names,
    })
}

/// Waits for a backend to exit and folds what it recorded.
fn finish_backend(
    r: Recording,
) -> Result<(Backend, std::collections::BTreeMap<String, u64>), String> {
    let Some(child) = r.child else {
        return finish_v8(&r.names).map(|f| (r.backend, f));
    };
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{} did not finish: {e}", r.backend.name()))?;
    let folded = if !r.out.exists() {
        Err(match r.backend {
            Backend::Perf | Backend::Node | Backend::V8 => {
                denied(&String::from_utf8_lossy(&output.stderr))
            }
            Backend::PySpy => format!(
                "py-spy could not sample the service ({}): it needs ptrace rights over it (run \
                 as root or the service's owner with kernel.yama.ptrace_scope=0, or CAP_SYS_PTRACE \
                 in a container)",
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("it wrote nothing")
            ),
        })
    } else {
        match r.backend {
            Backend::Perf => fold(&r.tool, &r.out),
            Backend::V8 => unreachable!("V8's profiles are read by finish_v8"),
            Backend::Node => fold(&r.tool, &r.out).map(|stacks| {
                let mut tidy = std::collections::BTreeMap::new();
                for (stack, n) in stacks {
                    *tidy.entry(js_frames(&stack)).or_insert(0) += n;
                }
                tidy
            }),
            Backend::PySpy => {
                // py-spy's raw format is already folded, from the Python frames down; the
                // process name goes on top, as perf's stacks have it.
                let text = std::fs::read_to_string(&r.out).unwrap_or_default();
                let root = r.names.first().map_or("python", |(_, n)| n.as_str());
                Ok(Profile::parse_folded(&text)
                    .into_iter()
                    .map(|(s, n)| (format!("{root};{s}"), n))
                    .collect())
            }
        }
    };
    let _ = std::fs::remove_file(&r.out);
    folded.map(|f| (r.backend, f))
}

/// Where loadlab's node service writes its V8 profile (as `os.tmpdir()` in node says).
fn v8_profile_path(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("loadlab-v8-{pid}.cpuprofile"))
}

/// Longest wait for node to write its profile once asked.
const V8_WRITE_WAIT: Duration = Duration::from_secs(10);

/// Asks each node process (`names`: pid and process name) to stop its profiler, reads the
/// profiles they write, and folds them.
fn finish_v8(names: &[(u32, String)]) -> Result<std::collections::BTreeMap<String, u64>, String> {
    for &(pid, _) in names {
        // SAFETY: as when starting: the second SIGUSR2 stops the profiler and writes it.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGUSR2);
        }
    }
    let deadline = Instant::now() + V8_WRITE_WAIT;
    let mut stacks = std::collections::BTreeMap::new();
    let mut missing = Vec::new();
    for (pid, name) in names {
        let path = v8_profile_path(*pid);
        while !path.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&path);
        let _ = std::fs::remove_file(&path);
        match text.ok().and_then(|t| v8_folded(&t, name)) {
            Some(folded) => {
                for (stack, n) in folded {
                    *stacks.entry(stack).or_insert(0) += n;
                }
            }
            None => missing.push(pid.to_string()),
        }
    }
    if stacks.is_empty() && !missing.is_empty() {
        return Err(format!(
            "node's V8 profiler wrote no profile for process {} within {} s: is it loadlab's \
             node service, still running? (another node program: start it with \
             --perf-basic-prof for perf instead)",
            missing.join(", "),
            V8_WRITE_WAIT.as_secs()
        ));
    }
    Ok(stacks)
}

/// A V8 `.cpuprofile` (a call tree of nodes, and the node each sample hit) as folded stacks
/// under `root` (the process name), one count per sample. Frames read `function url:line`
/// (`(anonymous)` when unnamed); samples of an idle event loop are left out, as perf sees no
/// idle process; `None` if the text is not such a profile.
fn v8_folded(text: &str, root: &str) -> Option<std::collections::BTreeMap<String, u64>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct CallFrame {
        function_name: String,
        #[serde(default)]
        url: String,
        #[serde(default)]
        line_number: i64,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Node {
        id: u64,
        call_frame: CallFrame,
        #[serde(default)]
        children: Vec<u64>,
    }
    #[derive(serde::Deserialize)]
    struct CpuProfile {
        nodes: Vec<Node>,
        #[serde(default)]
        samples: Vec<u64>,
    }
    let profile: CpuProfile = serde_json::from_str(text).ok()?;
    let mut parent = std::collections::HashMap::new();
    let mut frame = std::collections::HashMap::new();
    for n in &profile.nodes {
        for c in &n.children {
            parent.insert(*c, n.id);
        }
        let f = &n.call_frame;
        let name = if f.function_name.is_empty() {
            "(anonymous)"
        } else {
            f.function_name.as_str()
        };
        // A `;` would split the frame in the folded line.
        let name = name.replace(';', ":");
        let label = if f.url.is_empty() {
            name
        } else {
            // V8 counts lines from 0; editors and perf's map from 1.
            format!("{name} {}:{}", f.url, f.line_number + 1)
        };
        frame.insert(n.id, label);
    }
    let mut hits: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for s in &profile.samples {
        *hits.entry(*s).or_insert(0) += 1;
    }
    let mut stacks = std::collections::BTreeMap::new();
    for (leaf, count) in hits {
        let mut frames = Vec::new();
        let mut at = Some(leaf);
        while let Some(id) = at {
            match frame.get(&id).map(String::as_str) {
                Some("(root)") | None => {}
                Some(f) => frames.push(f.to_string()),
            }
            at = parent.get(&id).copied();
        }
        if frames.first().is_some_and(|f| f == "(idle)") {
            continue;
        }
        frames.push(root.to_string());
        frames.reverse();
        *stacks.entry(frames.join(";")).or_insert(0) += count;
    }
    Some(stacks)
}

/// One line for each node process whose JavaScript frames perf cannot name: started without
/// V8's perf map.
fn unmapped(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .filter(|pid| !std::path::Path::new(&format!("/tmp/perf-{pid}.map")).exists())
        .map(|pid| {
            format!(
                "node process {pid} was started without --perf-basic-prof, so its JavaScript \
                 frames are unnamed addresses: start node with --perf-basic-prof (loadlab serve \
                 --runtime node --perf-map does; a lab topology with profile: true does it itself)"
            )
        })
        .collect()
}

/// A folded stack with V8's frame names made stable: `JS:*log node:internal/console:377:6`
/// (the mark says which tier compiled it, and changes as V8 optimizes) becomes
/// `log node:internal/console:377:6`, and an anonymous function is named `(anonymous)`.
fn js_frames(stack: &str) -> String {
    stack
        .split(';')
        .map(|frame| match frame.strip_prefix("JS:") {
            Some(rest) => {
                let unmarked = rest.trim_start_matches(['*', '^', '~', '+']);
                if unmarked.is_empty() || unmarked.starts_with(' ') {
                    format!("(anonymous){unmarked}")
                } else {
                    unmarked.to_string()
                }
            }
            None => frame.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Why perf recorded nothing, in one line with what to do.
fn denied(stderr: &str) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let first = stderr.lines().map(str::trim).find(|l| !l.is_empty());
    format!(
        "perf could not sample the service ({}; kernel.perf_event_paranoid is {paranoid}): run \
         loadlab as the service's owner with `sysctl kernel.perf_event_paranoid=1`, or as root; \
         in a container, allow perf_event_open (CAP_PERFMON)",
        first.unwrap_or("it wrote no data")
    )
}

/// The recorded stacks, folded by inferno.
fn fold(perf: &PathBuf, data: &PathBuf) -> Result<std::collections::BTreeMap<String, u64>, String> {
    // Without the period field each sample counts once (with it, inferno weighs samples by
    // their period, which with cpu-clock is nanoseconds, not samples). Without inlined frames:
    // perf resolves those with one addr2line run after another, a minute for a few seconds
    // of a debug build's stacks.
    let script = Command::new(perf)
        .args([
            "script",
            "--no-inline",
            "-F",
            "comm,pid,tid,time,event,ip,sym,dso",
            "-i",
        ])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run perf script: {e}"))?;
    let mut folded = Vec::new();
    Folder::from(Options::default())
        .collapse(BufReader::new(&script.stdout[..]), &mut folded)
        .map_err(|e| format!("cannot fold perf's stacks: {e}"))?;
    Ok(Profile::parse_folded(&String::from_utf8_lossy(&folded)))
}

/// The `tools-venv/bin` folders beside the directories above loadlab's executable: the
/// build's `target/` holds the one scripts/test.sh makes, whichever binary runs.
fn tools_venvs() -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("tools-venv").join("bin"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v8_cpu_profile_folds_into_stacks_under_the_process_name_without_idle_samples() {
        let text = r#"{"nodes":[
            {"id":1,"callFrame":{"functionName":"(root)","url":"","lineNumber":-1},"children":[2,3]},
            {"id":2,"callFrame":{"functionName":"(idle)","url":"","lineNumber":-1}},
            {"id":3,"callFrame":{"functionName":"","url":"file:///srv/server.js","lineNumber":286},"children":[4]},
            {"id":4,"callFrame":{"functionName":"log","url":"node:internal/console/constructor","lineNumber":376}}
          ],"startTime":0,"endTime":5,"samples":[2,2,4,3,4],"timeDeltas":[1,1,1,1,1]}"#;
        let stacks = v8_folded(text, "node").unwrap();
        assert_eq!(
            stacks,
            [
                ("node;(anonymous) file:///srv/server.js:287".to_string(), 1),
                (
                    "node;(anonymous) file:///srv/server.js:287;log node:internal/console/constructor:377"
                        .to_string(),
                    2
                ),
            ]
            .into()
        );
        assert_eq!(v8_folded("{}", "node"), None);
    }

    #[test]
    fn v8_frames_lose_their_tier_mark_and_anonymous_ones_get_a_name() {
        assert_eq!(
            js_frames("node;uv_run;JS:*log node:internal/console/constructor:377:6;JS:^formatWithOptions node:internal/util/inspect:2237:27"),
            "node;uv_run;log node:internal/console/constructor:377:6;formatWithOptions node:internal/util/inspect:2237:27"
        );
        assert_eq!(
            js_frames("node;JS:~ /srv/server.js:2:19;JS:+get /srv/app.js:9:1"),
            "node;(anonymous) /srv/server.js:2:19;get /srv/app.js:9:1"
        );
    }
}
