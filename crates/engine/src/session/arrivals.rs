//! The open model's users (sessions layer): each arrival starts a session, up to a cap of
//! sessions at once per thread; later arrivals wait for a session to end, and are dropped if
//! they waited past the timeout.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::Instant;

use crate::session::runner::session;
use crate::session::state::Users;

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
}

impl Arrivals {
    /// The arrivals of a thread allowed `cap` sessions at once.
    pub fn new(users: Users, cap: usize) -> Self {
        Arrivals {
            users,
            tasks: Cell::new(0),
            cap: cap.max(1) as u64,
            queue: RefCell::new(VecDeque::new()),
            idle: Notify::new(),
        }
    }

    /// User `index` arrives, due at `intended`; it starts a session now if the thread runs
    /// fewer than its cap, else waits for one to end.
    pub fn arrive(self: &Rc<Self>, intended: Instant, index: u64) {
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
        next = loop {
            let popped = arrivals.queue.borrow_mut().pop_front();
            match popped {
                Some((t, _)) if t + users.wire.timeout < Instant::now() => {
                    users.wire.rec.record_dropped(1)
                }
                other => break other,
            }
        };
    }
}
