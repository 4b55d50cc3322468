//! Profiling the service while the load is on (lab → run): after the warm-up, the watched
//! processes and their descendants are sampled for a bounded window, each by the backend that
//! reads its stacks (`perf record` for native code, folded by inferno's perf folder; `py-spy`
//! for Python, which folds its own). A backend that cannot run says why in one line and the
//! run goes on.

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

/// How a process's stacks are read: perf for native code, py-spy for Python's interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Perf,
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
        } else {
            Backend::Perf
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Perf => "perf",
            Backend::PySpy => "py-spy",
        }
    }
}

/// One backend's recorder while it runs.
struct Recording {
    backend: Backend,
    tool: PathBuf,
    child: std::process::Child,
    out: PathBuf,
    /// The process names of the sampled pids, by pid (py-spy's stacks start below them).
    names: Vec<(u32, String)>,
}

/// Waits `delay`, records the processes `roots` and their descendants (perf for native code,
/// py-spy for Python) for up to `length` (less if stopped), and folds the stacks.
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
    for backend in [Backend::Perf, Backend::PySpy] {
        let mine: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| Backend::of(p) == backend)
            .collect();
        if mine.is_empty() {
            continue;
        }
        match start_backend(backend, &mine, length) {
            Ok(r) => recordings.push(r),
            Err(why) => problems.push(why),
        }
    }
    let sampling = Instant::now();
    // The window ends with the backends' own length, or at once when the run ends.
    loop {
        if recordings
            .iter_mut()
            .all(|r| matches!(r.child.try_wait(), Ok(Some(_))))
        {
            break;
        }
        match stopped.recv_timeout(Duration::from_millis(50)) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => {
                for r in &recordings {
                    // SAFETY: signals a recorder this thread started, by its PID; perf and
                    // py-spy write what they have and exit on SIGINT.
                    unsafe {
                        libc::kill(r.child.id() as libc::pid_t, libc::SIGINT);
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
    let out = std::env::temp_dir().join(format!(
        "loadlab-{}-{}-{}.out",
        backend.name(),
        std::process::id(),
        pids[0]
    ));
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let (tool, mut cmd) = match backend {
        Backend::Perf => {
            let perf = crate::find_program("perf", &[])
                .ok_or("perf is not installed: install it with apt-get install linux-perf")?;
            let mut cmd = Command::new(&perf);
            // DWARF unwinding: release builds (and most distributions' binaries) keep no
            // frame pointers, and without them every stack stops at its leaf.
            cmd.args([
                "record",
                "-F",
                &FREQUENCY.to_string(),
                "--call-graph",
                "dwarf",
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
    let names = pids
        .iter()
        .map(|&p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            (p, comm.trim().to_string())
        })
        .collect();
    Ok(Recording {
        backend,
        tool,
        child,
        out,
        names,
    })
}

/// Waits for a backend to exit and folds what it recorded.
fn finish_backend(
    r: Recording,
) -> Result<(Backend, std::collections::BTreeMap<String, u64>), String> {
    let output = r
        .child
        .wait_with_output()
        .map_err(|e| format!("{} did not finish: {e}", r.backend.name()))?;
    let folded = if !r.out.exists() {
        Err(match r.backend {
            Backend::Perf => denied(&String::from_utf8_lossy(&output.stderr)),
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
    fn a_busy_process_profiles_as_its_own_stacks_and_a_short_run_says_why_not() {
        // A shell busy in arithmetic: whatever perf can see, its samples name its pid's frames.
        let mut busy = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let p = Profiler::start(
            &[busy.id() as i32],
            Duration::from_millis(100),
            Duration::from_millis(800),
        );
        std::thread::sleep(Duration::from_millis(1200));
        let outcome = p.finish();
        let _ = busy.kill();
        let _ = busy.wait();
        match outcome {
            ProfileOutcome::Recorded(p) => {
                assert!(p.samples() > 50, "{} samples", p.samples());
                assert!((0.5..1.2).contains(&p.duration_s), "{}", p.duration_s);
                assert!(
                    p.stacks.keys().all(|s| s.starts_with("sh")),
                    "{:?}",
                    p.stacks.keys().take(3).collect::<Vec<_>>()
                );
            }
            ProfileOutcome::Failed { reason, .. } => {
                // Where this machine forbids perf, the message must say what to do.
                assert!(reason.contains("perf"), "{reason}");
                println!("perf is not usable here; checked the message instead: {reason}");
            }
        }
        // A Python process is read by py-spy: its frames are Python functions.
        let mut py = Command::new("python3")
            .args(["-c", "import math\ndef spin():\n    return sum(math.sin(i) for i in range(10**6))\nwhile True: spin()\n"])
            .spawn()
            .unwrap();
        let p = Profiler::start(
            &[py.id() as i32],
            Duration::from_millis(300),
            Duration::from_secs(1),
        );
        std::thread::sleep(Duration::from_millis(1600));
        let outcome = p.finish();
        let _ = py.kill();
        let _ = py.wait();
        match outcome {
            ProfileOutcome::Recorded(p) => {
                assert_eq!(p.backend, "py-spy");
                assert!(
                    p.stacks.keys().any(|s| s.contains("spin")),
                    "{:?}",
                    p.stacks.keys().take(3).collect::<Vec<_>>()
                );
            }
            ProfileOutcome::Failed { reason, .. } => {
                assert!(reason.contains("py-spy"), "{reason}");
                println!("py-spy is not usable here; checked the message instead: {reason}");
            }
        }
        let early = Profiler::start(
            &[std::process::id() as i32],
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        match early.finish() {
            ProfileOutcome::Failed { reason, .. } => {
                assert!(reason.contains("run longer"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
