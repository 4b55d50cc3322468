//! Profiling the service while the load is on (lab → run): after the warm-up, `perf record`
//! samples the watched processes' stacks for a bounded window, and inferno's perf folder
//! collapses them. When perf cannot run, the outcome says why in one line and the run goes on.

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

/// Waits `delay`, records `pids` with perf for up to `length` (less if stopped), and folds
/// the stacks.
fn record(
    pids: &[u32],
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
    let Some(perf) = find_perf() else {
        return failed("perf is not installed: install it with apt-get install linux-perf");
    };
    let data = std::env::temp_dir().join(format!(
        "loadlab-perf-{}-{}.data",
        std::process::id(),
        began.elapsed().as_nanos()
    ));
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let start_s = began.elapsed().as_secs_f64();
    let child = Command::new(&perf)
        // DWARF unwinding: release builds (and most distributions' binaries) keep no frame
        // pointers, and without them every stack stops at its leaf.
        .args([
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
        .arg(&data)
        .args(["--", "sleep", &format!("{:.3}", length.as_secs_f64())])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return failed(&format!("cannot start perf: {e}")),
    };
    let sampling = Instant::now();
    // The window ends with its sleep, or at once when the run ends.
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        match stopped.recv_timeout(Duration::from_millis(50)) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => {
                // SAFETY: signals the perf process this thread started, by its PID; perf
                // writes its data and exits on SIGINT.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGINT);
                }
                break;
            }
        }
    }
    let duration_s = sampling.elapsed().as_secs_f64();
    let output = child.wait_with_output();
    let outcome = match output {
        Ok(out) if !data.exists() => failed(&denied(&String::from_utf8_lossy(&out.stderr))),
        Ok(_) => fold(&perf, &data).map_or_else(
            |e| failed(&e),
            |stacks| {
                ProfileOutcome::Recorded(Profile {
                    backend: "perf".into(),
                    pids: pids.to_vec(),
                    start_s,
                    duration_s,
                    stacks,
                })
            },
        ),
        Err(e) => failed(&format!("perf did not finish: {e}")),
    };
    let _ = std::fs::remove_file(&data);
    outcome
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
        .args(["script", "--no-inline", "-F", "comm,pid,tid,time,event,ip,sym,dso", "-i"])
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

/// perf on the PATH, or where Debian's linux-perf puts it.
fn find_perf() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("perf"))
        .chain([PathBuf::from("/usr/bin/perf")])
        .find(|p| p.is_file())
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
