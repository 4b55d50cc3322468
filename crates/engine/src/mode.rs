//! A thread's state by the plan's model (thread-loop layer, above the pooled connections and
//! the virtual users): what the model asks of every thread, solved once per run ([`Load`]),
//! and one thread's state in that mode ([`Mode`]), with the tasks each mode starts.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadlab_run::users::UserModel;
use loadlab_run::{Arrival, Arrivals, Model, Plan, UserPhase, UserRecord};
use tokio::task::spawn_local;
use tokio::time::Instant;

use crate::conn::dialer::Dialer;
use crate::conn::exchange::Wire;
use crate::connect::Initial;
use crate::locust::{Helper, Locust};
use crate::pace::{pace, MachineClock};
use crate::pool::{self, Budgeted, Pool, Queues};
use crate::record::Recorder;
use crate::schedule::open::{stripe, ArrivalClock, RateCurve};
use crate::schedule::users::UserCurve;
use crate::session::{self, PhaseCaps, Slots, Users};

/// The open model's arrival schedule, shared by every thread.
#[derive(Clone)]
pub struct OpenSchedule {
    curve: RateCurve,
    arrival: Arrival,
    seed: u64,
    /// This run's shard of the plan, `(0, 1)` when it runs the whole plan.
    shard: (usize, usize),
    /// How early an arrival may go out to share a wake-up with an earlier one.
    slack: Duration,
}

impl OpenSchedule {
    /// Thread `index`'s share of this shard's arrivals, at most `expected` of them.
    fn clock(&self, (index, threads): (usize, usize), expected: Option<u64>) -> ArrivalClock {
        let curve = self.curve.clone();
        let (k, of) = stripe(index, threads, self.shard);
        ArrivalClock::new(curve, self.arrival, k, of, self.seed, expected)
    }
}

/// What the plan's model asks of every thread, solved once per run.
#[derive(Clone)]
pub enum Load {
    /// Closed model: keep the connections busy, `pipeline` requests at a time.
    Closed {
        /// Pipeline depth.
        pipeline: usize,
    },
    /// Open model: each arrival is a request on the pooled connections.
    OpenRequests(OpenSchedule),
    /// Open model: each arrival is a user's session, skipped past its phase's cap of users.
    OpenSessions(OpenSchedule, Arc<UserModel>, Option<Arc<PhaseCaps>>),
    /// User phases: a number of users over time, session after session.
    Users(UserCurve, Arc<UserModel>),
    /// User phases of a locustfile's users, run by the thread's Python helper.
    Locust(Vec<UserPhase>, Arc<UserModel>),
}

impl Load {
    /// The user model the load runs, when it runs virtual users.
    pub fn user_model(&self) -> Option<&UserModel> {
        match self {
            Load::OpenSessions(_, model, _) | Load::Users(_, model) | Load::Locust(_, model) => {
                Some(model)
            }
            Load::Closed { .. } | Load::OpenRequests(_) => None,
        }
    }

    /// The load of `plan`'s model.
    pub fn of(plan: &Plan) -> Load {
        match &plan.model {
            Model::Closed { pipeline, .. } => Load::Closed {
                pipeline: *pipeline,
            },
            Model::Open {
                phases,
                arrival,
                seed,
                arrivals,
            } => {
                let end_s = plan
                    .stop
                    .duration
                    .map_or(f64::INFINITY, |d| d.as_secs_f64());
                let schedule = OpenSchedule {
                    curve: RateCurve::from_phases(phases, end_s),
                    arrival: *arrival,
                    seed: *seed,
                    shard: plan.shard.map_or((0, 1), |s| (s.index, s.count)),
                    slack: plan.pacing_slack,
                };
                match arrivals {
                    Arrivals::Requests { .. } => Load::OpenRequests(schedule),
                    Arrivals::Sessions { users, .. } => {
                        Load::OpenSessions(schedule, users.clone(), PhaseCaps::of(phases))
                    }
                }
            }
            Model::Users { phases, users } if users.locust.is_some() => {
                Load::Locust(phases.clone(), users.clone())
            }
            Model::Users { phases, users } => Load::Users(UserCurve::new(phases), users.clone()),
        }
    }
}

/// A thread's state in its mode: each mode holds what it runs on and nothing else.
pub enum Mode {
    /// Closed model: pooled connections drawing on the thread's budget, `depth` at a time.
    Closed(Rc<Pool<Budgeted>>),
    /// Open model, requests: the arrival clock, and pooled connections taking the released
    /// requests from the endpoint queues.
    OpenRequests {
        /// This thread's arrivals, shared with its pacer.
        clock: Rc<RefCell<ArrivalClock>>,
        /// The pacing slack.
        slack: Duration,
        /// The connections and their queues.
        pool: Rc<Pool<Queues>>,
    },
    /// Open model, sessions: the arrival clock, and the users it starts.
    OpenSessions {
        /// This thread's arrivals, shared with its pacer.
        clock: Rc<RefCell<ArrivalClock>>,
        /// The pacing slack.
        slack: Duration,
        /// The arriving users.
        arrivals: Rc<session::Arrivals>,
    },
    /// A locustfile's users: their phases, and what their requests share.
    Locust(Vec<UserPhase>, Rc<Locust>),
    /// User phases: the user curve, and the slots of users it keeps running.
    Users {
        /// The user count over time.
        curve: UserCurve,
        /// The user slots.
        slots: Rc<Slots>,
    },
}

impl Mode {
    /// The state of thread `thread.0` of `thread.1` that records with `rec` and connects with
    /// `dialer`; `expected` is its share of the run's count.
    pub fn new(
        plan: &Arc<Plan>,
        load: Load,
        (rec, dialer): (Recorder, Rc<Dialer>),
        thread: (usize, usize),
        expected: Option<u64>,
        max_connections_per_endpoint: usize,
        (hooks, helper): (Option<Rc<session::Hooks>>, Option<Rc<Helper>>),
    ) -> Mode {
        let wire = Wire::new(plan, rec, dialer);
        match load {
            Load::Closed { pipeline } => Mode::Closed(Rc::new(Pool {
                wire,
                work: Budgeted::new(plan, expected, pipeline),
            })),
            Load::OpenRequests(schedule) => Mode::OpenRequests {
                clock: Rc::new(RefCell::new(schedule.clock(thread, expected))),
                slack: schedule.slack,
                pool: Rc::new(Pool {
                    wire,
                    work: Queues::new(plan, max_connections_per_endpoint),
                }),
            },
            Load::OpenSessions(schedule, model, caps) => {
                let users = Users::new(plan.clone(), model, wire, hooks, thread);
                let cap = max_connections_per_endpoint * plan.endpoints.len();
                Mode::OpenSessions {
                    clock: Rc::new(RefCell::new(schedule.clock(thread, expected))),
                    slack: schedule.slack,
                    arrivals: Rc::new(session::Arrivals::new(users, cap, caps)),
                }
            }
            Load::Locust(phases, model) => {
                let helper = helper.expect("a locust load starts its helper first");
                Mode::Locust(
                    phases,
                    Rc::new(Locust::new(plan.clone(), &model, wire, helper)),
                )
            }
            Load::Users(curve, model) => Mode::Users {
                curve,
                slots: Rc::new(Slots::new(Users::new(
                    plan.clone(),
                    model,
                    wire,
                    hooks,
                    thread,
                ))),
            },
        }
    }

    /// What the thread's connections share, with its recorder.
    pub fn wire(&self) -> &Wire {
        match self {
            Mode::Closed(pool) => &pool.wire,
            Mode::OpenRequests { pool, .. } => &pool.wire,
            Mode::OpenSessions { arrivals, .. } => &arrivals.users.wire,
            Mode::Users { slots, .. } => &slots.users.wire,
            Mode::Locust(_, locust) => &locust.wire,
        }
    }

    /// Starts the mode's tasks: the initial connections (opened before the load), the pacer
    /// of the open model's arrivals, or the control of the user slots.
    pub fn start(&self, connections: Vec<Initial>, (index, threads): (usize, usize)) {
        match self {
            Mode::Closed(pool) => {
                hand_over(connections, |c| {
                    spawn_local(pool::drive(pool.clone(), c.ep, c.rotation, c.conn));
                });
            }
            Mode::OpenRequests { clock, slack, pool } => {
                hand_over(connections, |c| pool.open(c.ep, c.conn));
                let (clock, slack, pool) = (clock.clone(), *slack, pool.clone());
                spawn_local(async move {
                    let release = |intended, released, i| pool.release(intended, released, i);
                    let tend = |now, how| pool.tend(now, how);
                    let stripe = (index, threads);
                    let (time, rec) = (MachineClock::default(), &pool.wire.rec);
                    pace(&time, rec, &clock, stripe, slack, release, tend).await;
                });
            }
            Mode::OpenSessions {
                clock,
                slack,
                arrivals,
            } => {
                let (clock, slack, arrivals) = (clock.clone(), *slack, arrivals.clone());
                spawn_local(async move {
                    // A user let in early (within the slack) starts at once.
                    let arrive = |intended: Instant, released: Instant, i: usize| {
                        arrivals.arrive(intended.min(released), i as u64)
                    };
                    let rec = &arrivals.users.wire.rec;
                    let time = MachineClock::default();
                    pace(
                        &time,
                        rec,
                        &clock,
                        (index, threads),
                        slack,
                        arrive,
                        |_, _| {},
                    )
                    .await;
                });
            }
            Mode::Locust(phases, locust) => locust.start(phases.clone(), (index, threads)),
            Mode::Users { curve, slots } => {
                spawn_local(session::control(
                    slots.clone(),
                    curve.clone(),
                    index,
                    threads,
                ));
            }
        }
    }

    /// Open model: arrivals due before `end` that a late pacer never released were offered
    /// all the same; they count as offered and dropped, so the schedule's count stays exact.
    pub fn end_schedule(&self, end: Instant) {
        let (Mode::OpenRequests { clock, .. } | Mode::OpenSessions { clock, .. }) = self else {
            return;
        };
        let rec = &self.wire().rec;
        let mut overdue = 0;
        let end_offset = end.saturating_duration_since(rec.origin);
        clock.borrow_mut().release_due(end_offset, |_| overdue += 1);
        rec.rec_at(end).counts.offered += overdue;
        rec.record_dropped(overdue);
    }

    /// Open model: requests, or users' arrivals, still queued when the run stops; they count
    /// as dropped.
    pub fn drop_queued(&self) {
        match self {
            Mode::OpenRequests { pool, .. } => pool.drop_queued(),
            Mode::OpenSessions { arrivals, .. } => arrivals.drop_queued(),
            Mode::Closed(_) | Mode::Users { .. } | Mode::Locust(..) => {}
        }
    }

    /// A locustfile's users, when the mode runs them.
    pub fn locust(&self) -> Option<&Rc<Locust>> {
        match self {
            Mode::Locust(_, locust) => Some(locust),
            _ => None,
        }
    }

    /// Open model with sessions: the users, whose sessions may finish after the schedule.
    pub fn arrivals(&self) -> Option<&session::Arrivals> {
        match self {
            Mode::OpenSessions { arrivals, .. } => Some(arrivals),
            _ => None,
        }
    }

    /// The account of the users' sessions, with a user model.
    pub fn take_user_record(&self) -> Option<UserRecord> {
        let users = match self {
            Mode::OpenSessions { arrivals, .. } => &arrivals.users,
            Mode::Users { slots, .. } => &slots.users,
            Mode::Locust(_, locust) => return Some(locust.take_record()),
            Mode::Closed(_) | Mode::OpenRequests { .. } => return None,
        };
        let mut record = users.record.take();
        record.processor_cpu_s = users.hooks.as_ref().map(|h| h.cpu_s());
        record.suggested_exit_code = users.hooks.as_ref().and_then(|h| h.suggested_exit_code());
        Some(record)
    }
}

/// Hands each initial connection to `start`, last first, giving the list's memory back as it
/// empties: halving its capacity each time it is half empty keeps the list and the tasks
/// taking its connections from both being whole at once (a few hundred bytes a connection of
/// peak memory).
fn hand_over(mut connections: Vec<Initial>, mut start: impl FnMut(Initial)) {
    while let Some(c) = connections.pop() {
        start(c);
        if connections.len() <= connections.capacity() / 2 {
            connections.shrink_to_fit();
        }
    }
}
