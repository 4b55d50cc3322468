//! A sub-millisecond timer for the open model's pacer (a leaf of the bottom layer): a Linux
//! `timerfd` watched by the event loop.
//!
//! Written by hand because tokio's timer wheel has one-millisecond resolution: arrivals every
//! 200 µs would be released in bursts up to a millisecond late, and that lateness would be
//! charged to every request's latency. A timerfd wakes `epoll` at the exact deadline.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// A one-shot timer with microsecond precision, re-armed for each deadline.
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    /// Creates the timer; fails where timerfd is unavailable (the caller falls back to tokio's).
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the returned descriptor is checked before it is owned.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Ask the kernel not to coalesce this thread's timers (default slack is 50 µs).
        // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0);
        }
        // SAFETY: the descriptor is owned by the AsyncFd for its whole registration and is
        // closed only when the AsyncFd drops it.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        Ok(PreciseTimer { fd })
    }

    /// Waits until `deadline`; returns at once if it has passed.
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        // The expiration count is never read: `timerfd_settime` resets it, and each expiry
        // wakes epoll anew (tokio registers descriptors edge-triggered), so a `read` would only
        // cost a syscall per wake-up. A wake-up is checked against the clock instead; one
        // that comes early (the stale readiness of an earlier sleep that was abandoned)
        // re-arms the timer for the rest of the wait.
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                return Ok(());
            }
            self.arm(wait)?;
            let mut guard = self.fd.readable().await?;
            guard.clear_ready();
        }
    }

    /// Arms the timer to expire once, `wait` from now.
    fn arm(&self, wait: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
            },
        };
        // SAFETY: the descriptor is ours and `spec` is a valid itimerspec.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_wakes_after_its_deadline_with_sub_millisecond_lateness() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = PreciseTimer::new().unwrap();
            let mut late = Vec::new();
            for _ in 0..50 {
                let deadline = Instant::now() + Duration::from_micros(300);
                timer.sleep_until(deadline).await.unwrap();
                let now = Instant::now();
                assert!(now >= deadline, "woke before the deadline");
                late.push(now - deadline);
            }
            late.sort();
            // The median wake-up is well under tokio's 1 ms tick even on a busy machine.
            assert!(
                late[25] < Duration::from_micros(900),
                "median lateness {:?}",
                late[25]
            );
        });
    }

    #[test]
    fn an_abandoned_sleep_does_not_end_the_next_one_early() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = PreciseTimer::new().unwrap();
            // Armed for 1 ms, given up after 0.2 ms: the timer still fires while nobody waits.
            let abandoned = timer.sleep_until(Instant::now() + Duration::from_millis(1));
            let _ = tokio::time::timeout(Duration::from_micros(200), abandoned).await;
            tokio::time::sleep(Duration::from_millis(3)).await;
            for _ in 0..20 {
                let deadline = Instant::now() + Duration::from_micros(500);
                timer.sleep_until(deadline).await.unwrap();
                assert!(Instant::now() >= deadline, "woke before the deadline");
            }
        });
    }
}
