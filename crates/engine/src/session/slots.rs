//! User phases' users (sessions layer): slots of users that follow the user curve, each
//! running sessions back to back while the curve wants it, pausing after sessions that fail
//! to connect.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::spawn_local;
use tokio::time::{sleep_until, Instant};

use crate::conn::Backoff;
use crate::schedule::share_of;
use crate::schedule::users::UserCurve;
use crate::session::runner::{session, SlotStop};
use crate::session::state::Users;

/// One thread's user slots.
pub struct Slots {
    /// What the users share.
    pub users: Users,
    /// Slots this thread should run now.
    target: Cell<u64>,
    /// Which slots have a task.
    alive: RefCell<Vec<bool>>,
    /// Sessions begun by this thread, for user indices.
    begun: Cell<u64>,
    /// Wakes thinking users when the target drops.
    changed: Notify,
}

impl Slots {
    /// No slots yet: [`control`] starts them.
    pub fn new(users: Users) -> Self {
        Slots {
            users,
            target: Cell::new(0),
            alive: RefCell::new(Vec::new()),
            begun: Cell::new(0),
            changed: Notify::new(),
        }
    }
}

/// Keeps this thread's share (`thread` of `threads`) of the wanted users running, following
/// the curve.
pub async fn control(slots: Rc<Slots>, curve: UserCurve, thread: usize, threads: usize) {
    let rec = &slots.users.wire.rec;
    loop {
        let now = Instant::now();
        // Seconds that ended before this change are sent first, with the count they had.
        rec.rotate(now);
        let t = now.saturating_duration_since(rec.origin).as_secs_f64();
        let target = share_of(curve.users_at(t), thread, threads);
        slots.target.set(target);
        {
            let mut alive = slots.alive.borrow_mut();
            if alive.len() < target as usize {
                alive.resize(target as usize, false);
            }
            for slot in 0..target as usize {
                if !alive[slot] {
                    alive[slot] = true;
                    spawn_local(run_slot(slots.clone(), slot, thread, threads));
                }
            }
        }
        slots.changed.notify_waiters();
        let Some(next) = curve
            .next_change(t)
            .and_then(|n| Duration::try_from_secs_f64(n).ok())
            .and_then(|n| rec.origin.checked_add(n))
        else {
            break;
        };
        sleep_until(next).await;
    }
}

/// Marks a user slot free and its user gone when the slot's task ends, however it ends.
struct SlotGuard(Rc<Slots>, usize);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(alive) = self.0.alive.borrow_mut().get_mut(self.1) {
            *alive = false;
        }
        let active = &self.0.users.wire.rec.users_active;
        active.set(active.get().saturating_sub(1));
    }
}

/// One user slot: sessions back to back while the slot is within the target. Each new session
/// is a new visitor (new variables, payload row and connections); slot `g` (numbered across
/// threads) runs the scenario pattern from its own offset, so the mix holds at any user count.
async fn run_slot(slots: Rc<Slots>, slot: usize, thread: usize, threads: usize) {
    let active = &slots.users.wire.rec.users_active;
    active.set(active.get() + 1);
    let _slot = SlotGuard(slots.clone(), slot);
    let global = (slot * threads + thread) as u64;
    let mut backoff = Backoff::default();
    let mut sessions = 0u64;
    let stop = SlotStop {
        slot,
        target: &slots.target,
        changed: &slots.changed,
    };
    while (slot as u64) < slots.target.get() {
        let index = slots.begun.get() * threads as u64 + thread as u64;
        slots.begun.set(slots.begun.get() + 1);
        let pattern = &slots.users.model.pattern;
        let scenario = pattern[((global + sessions) % pattern.len() as u64) as usize];
        sessions += 1;
        let ended = session(&slots.users, index, scenario, None, Some(stop)).await;
        if ended.transport_failure || ended.sent == 0 {
            // Sessions that cannot connect, or send nothing, would otherwise spin.
            backoff.pause().await;
        } else {
            backoff.reset();
        }
        tokio::task::yield_now().await;
    }
}
