//! The sampler against real processes this test starts (and stops, by PID).

use std::process::{Child, Command};
use std::time::Duration;

use loadlab_lab::{Sampler, SamplerError};

/// A child process killed (by its PID) when the guard drops.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(script: &str) -> Guard {
    Guard(Command::new("sh").arg("-c").arg(script).spawn().unwrap())
}

#[test]
fn a_busy_process_reads_about_one_core_and_an_idle_one_about_zero() {
    // A loop of shell arithmetic (no forks), bounded in count: it ends on its own within
    // about a minute should the test die before killing it.
    let busy = spawn("i=0; while [ $i -lt 30000000 ]; do i=$((i+1)); done");
    let idle = spawn("sleep 20");
    let sampler = Sampler::start(
        &[busy.0.id() as i32, idle.0.id() as i32],
        &[],
        Duration::from_millis(500),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(3200));
    let data = sampler.finish();
    let by_pid = |pid: u32| {
        data.processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("pid {pid} not sampled: {data:?}"))
    };
    let b = by_pid(busy.0.id());
    assert!(b.samples.len() >= 4, "{} samples", b.samples.len());
    // What it ran plus what it waited for: other tests and processes share the cores.
    let (avg, waited) = (b.cpu_pct_avg(), b.cpu_wait_pct_avg());
    assert!(
        (60.0..=115.0).contains(&(avg + waited)),
        "busy loop read {avg:.1} % CPU and {waited:.1} % waiting for one"
    );
    assert!(b.rss_mb_max() > 0.0);
    let i = by_pid(idle.0.id());
    assert!(
        i.cpu_pct_max() < 5.0,
        "sleep read {:.1} % CPU",
        i.cpu_pct_max()
    );
    // The host's CPU is read beside them: at least the busy loop's, at most every core's.
    let cores = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes()[3].is_ascii_digit())
        .count() as f64;
    assert!(data.host.len() >= 4, "{:?}", data.host);
    let host = data.host_cpu_pct_avg().unwrap();
    assert!(
        host >= 0.9 * avg && host <= 100.0 * cores + 1.0,
        "host {host:.1} % with the loop at {avg:.1} % on {cores} cores"
    );
}

#[test]
fn children_of_a_watched_process_are_watched_too() {
    let parent = spawn("sleep 20 & sleep 20 & wait");
    std::thread::sleep(Duration::from_millis(200));
    let sampler = Sampler::start(&[parent.0.id() as i32], &[], Duration::from_millis(300)).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let data = sampler.finish();
    let sleeps = data.processes.iter().filter(|p| p.name == "sleep").count();
    assert_eq!(sleeps, 2, "{data:?}");
    assert!(data.processes.iter().any(|p| p.pid == parent.0.id()));
}

#[test]
fn a_missing_process_is_a_clear_error() {
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id() as i32;
    gone.wait().unwrap();
    match Sampler::start(&[pid], &[], Duration::from_secs(1)) {
        Err(SamplerError::NoSuchProcess(p)) => assert_eq!(p, pid),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a finished process was accepted"),
    }
    match Sampler::start(&[], &["http://not-redis".into()], Duration::from_secs(1)) {
        Err(SamplerError::BadStore(why)) => assert!(why.contains("not a Redis URL"), "{why}"),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a URL that is not Redis's was accepted"),
    }
}

#[test]
fn processes_sharing_one_core_read_the_cpu_they_waited_for() {
    // Three bounded busy loops on CPU 0 alone: each runs about a third of the time and waits
    // for the core the rest; what they wanted is a whole core each.
    if !std::path::Path::new("/proc/self/schedstat").exists() {
        eprintln!("this kernel keeps no schedstat: the wait cannot be read here");
        return;
    }
    let busy = "i=0; while [ $i -lt 30000000 ]; do i=$((i+1)); done";
    let loops: Vec<Guard> = (0..3)
        .map(|_| {
            Guard(
                Command::new("taskset")
                    .args(["-c", "0", "sh", "-c", busy])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let pids: Vec<i32> = loops.iter().map(|g| g.0.id() as i32).collect();
    let sampler = Sampler::start(&pids, &[], Duration::from_millis(500)).unwrap();
    std::thread::sleep(Duration::from_millis(2600));
    let data = sampler.finish();
    for pid in &pids {
        let p = data
            .processes
            .iter()
            .find(|p| p.pid == *pid as u32)
            .unwrap_or_else(|| panic!("pid {pid} not sampled: {data:?}"));
        let (cpu, wait) = (p.cpu_pct_avg(), p.cpu_wait_pct_avg());
        assert!(cpu < 60.0, "three loops on one core: {cpu:.1} % each");
        assert!(wait > 30.0, "each waited for the core: {wait:.1} %");
        assert!(
            (70.0..=115.0).contains(&(cpu + wait)),
            "each wanted a core: {cpu:.1} % ran + {wait:.1} % waited"
        );
    }
}
