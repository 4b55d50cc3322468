//! The open model's users (sessions layer): each arrival starts a session, up to a cap of
//! sessions at once per thread; later arrivals wait for a session to end, and are dropped if
//! they waited past the timeout. An arrival in a phase with a cap on the run's users at once
//! (Artillery's `maxVusers`) is skipped while that many are in a session.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::RatePhase;

use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::Instant;

use crate::session::runner::session;
use crate::session::state::Users;

/// The phases' caps on users at once (Artillery's `maxVusers`), shared by every generator
/// thread with the count they are held against.
#[derive(Debug)]
pub struct PhaseCaps {
    /// Each phase's end, from the run's origin, and its cap (`None`: uncapped), in order.
    ends: Vec<(Duration, Option<u64>)>,
    /// Users in a session (or waiting for one) across the threads.
    in_session: AtomicU64,
}

impl PhaseCaps {
    /// The caps of `phases`; `None` when no phase has one.
    pub fn of(phases: &[RatePhase]) -> Option<Arc<Self>> {
        if phases.iter().all(|p| p.max_users.is_none()) {
            return None;
        }
        let mut end = Duration::ZERO;
        let ends = phases
            .iter()
            .map(|p| {
                end = p.duration.map_or(Duration::MAX, |d| end.saturating_add(d));
                (end, p.max_users.map(|m| m as u64))
            })
            .collect();
        Some(Arc::new(PhaseCaps {
            ends,
            in_session: AtomicU64::new(0),
        }))
    }

    /// The cap of the phase an arrival due `offset` after the origin belongs to.
    fn cap_at(&self, offset: Duration) -> Option<u64> {
        let phase = self.ends.iter().find(|(end, _)| offset < *end);
        phase.or(self.ends.last()).and_then(|(_, cap)| *cap)
    }

    /// Admits a user due `offset` after the origin unless its phase's cap is in a session.
    fn admit(&self, offset: Duration) -> bool {
        let Some(cap) = self.cap_at(offset) else {
            self.in_session.fetch_add(1, Ordering::Relaxed);
            return true;
        };
        self.in_session
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    /// A user admitted earlier left its session (or its wait).
    fn leave(&self) {
        self.in_session.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One thread's arriving users.
pub struct Arrivals {
    /// What the users share.
    pub users: Users,
    /// Session tasks alive (running or about to), bounded by `cap`.
    tasks: Cell<u64>,
    /// Most sessions at once; later arrivals wait in `queue`.
    cap: u64,
    /// Arrivals waiting for a session to end (intended start, user index).
    queue: RefCell<VecDeque<(Instant, u64)>>,
    /// Signalled when the last session task ends.
    idle: Notify,
    /// The phases' caps on the run's users at once, when the script gives any.
    caps: Option<Arc<PhaseCaps>>,
}

impl Arrivals {
    /// The arrivals of a thread allowed `cap` sessions at once, and the phases' `caps`.
    pub fn new(users: Users, cap: usize, caps: Option<Arc<PhaseCaps>>) -> Self {
        Arrivals {
            users,
            tasks: Cell::new(0),
            cap: cap.max(1) as u64,
            queue: RefCell::new(VecDeque::new()),
            idle: Notify::new(),
            caps,
        }
    }

    /// User `index` arrives, due at `intended`; it is skipped if its phase's cap of users is
    /// in a session, else starts a session now if the thread runs fewer than its cap, else
    /// waits for one to end.
    pub fn arrive(self: &Rc<Self>, intended: Instant, index: u64) {
        if let Some(caps) = &self.caps {
            let offset = intended.saturating_duration_since(self.users.wire.rec.origin);
            if !caps.admit(offset) {
                self.users.record.borrow_mut().skipped += 1;
                return;
            }
        }
        if self.tasks.get() < self.cap {
            self.tasks.set(self.tasks.get() + 1);
            spawn_local(open_sessions(self.clone(), intended, index));
        } else {
            self.queue.borrow_mut().push_back((intended, index));
        }
    }

    /// Resolves once no session is running or waiting.
    pub async fn drained(&self) {
        while self.tasks.get() > 0 {
            self.idle.notified().await;
        }
    }

    /// Arrivals still waiting when the run stops; they count as dropped.
    pub fn drop_queued(&self) {
        let n = {
            let mut q = self.queue.borrow_mut();
            let n = q.len() as u64;
            q.clear();
            n
        };
        self.users.wire.rec.record_dropped(n);
        for _ in 0..n {
            self.left();
        }
    }

    /// An admitted user's session ended, or its wait did.
    fn left(&self) {
        if let Some(caps) = &self.caps {
            caps.leave();
        }
    }
}

/// Gives back a session task's place when the task ends, however it ends.
struct TaskGuard(Rc<Arrivals>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let a = &*self.0;
        a.tasks.set(a.tasks.get().saturating_sub(1));
        if a.tasks.get() == 0 {
            a.idle.notify_waiters();
        }
    }
}

/// Runs a session, then the sessions of waiting arrivals while there are any (dropping those
/// that waited past the timeout).
async fn open_sessions(arrivals: Rc<Arrivals>, intended: Instant, index: u64) {
    let _place = TaskGuard(arrivals.clone());
    let users = &arrivals.users;
    let mut next = Some((intended, index));
    while let Some((intended, index)) = next {
        let pattern = &users.model.pattern;
        let scenario = pattern[(index % pattern.len() as u64) as usize];
        session(users, index, scenario, Some(intended), None).await;
        arrivals.left();
        next = loop {
            let popped = arrivals.queue.borrow_mut().pop_front();
            match popped {
                Some((t, _)) if t + users.wire.timeout < Instant::now() => {
                    users.wire.rec.record_dropped(1);
                    arrivals.left();
                }
                other => break other,
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_holds_arrivals_to_its_own_cap_of_users_in_a_session() {
        let mut phases = vec![
            RatePhase::constant("a", 10.0, Some(Duration::from_secs(2))),
            RatePhase::constant("b", 10.0, Some(Duration::from_secs(2))),
            RatePhase::constant("c", 10.0, None),
        ];
        assert!(PhaseCaps::of(&phases).is_none(), "no cap, nothing to count");
        phases[0].max_users = Some(1);
        phases[2].max_users = Some(3);
        let caps = PhaseCaps::of(&phases).unwrap();
        let at = Duration::from_millis;
        assert!(caps.admit(at(0)));
        assert!(!caps.admit(at(1999)), "phase a: one user at once");
        assert!(
            caps.admit(at(2000)) && caps.admit(at(3000)),
            "phase b: no cap"
        );
        assert!(
            !caps.admit(at(9000)),
            "phase c, to the end: three in a session"
        );
        caps.leave();
        assert!(caps.admit(at(60_000)) && !caps.admit(at(60_000)));
    }
}
