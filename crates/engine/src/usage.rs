//! The generator's own CPU time and peak memory, from `getrusage(2)` (a leaf of the bottom
//! layer, read by the thread loop and by `run`).

use std::time::Duration;

fn rusage(who: libc::c_int) -> Option<libc::rusage> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes into the struct we own; on failure we do not read it.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    // SAFETY: rc == 0 means the kernel filled the struct.
    (rc == 0).then(|| unsafe { ru.assume_init() })
}

fn cpu_of(ru: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (user + system) the whole process has used.
pub fn process_cpu() -> Duration {
    rusage(libc::RUSAGE_SELF).map_or(Duration::ZERO, |r| cpu_of(&r))
}

/// CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    rusage(libc::RUSAGE_THREAD).map_or(Duration::ZERO, |r| cpu_of(&r))
}

/// Peak resident memory of the process, MB.
pub fn max_rss_mb() -> f64 {
    rusage(libc::RUSAGE_SELF).map_or(0.0, |r| r.ru_maxrss as f64 / 1024.0)
}
