//! The profiler against real processes: perf on a busy shell, py-spy on a busy Python, and a
//! window longer than the run refused with what to do.

use std::process::Command;
use std::time::Duration;

use loadlab_lab::profile::Profiler;
use loadlab_run::profile::ProfileOutcome;

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
    // A Python process is read by py-spy: its frames are Python functions. The
    // interpreter itself, not a version manager's shim that is still a shell script when
    // the window opens on a loaded machine.
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8_lossy(&exe.stdout).trim().to_string();
    let mut py = Command::new(python)
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
