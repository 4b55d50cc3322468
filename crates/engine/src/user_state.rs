//! One thread's virtual users as data: sessions and slots counted, arrivals waiting, the
//! compiled capture queries and the sessions' record (below the connections and the
//! sessions that use it).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use loadlab_run::users::{Behaviour, CaptureSource, RequestStep, Step, UserModel};
use loadlab_run::{Plan, UserRecord};
use serde_json_path::JsonPath;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One thread's virtual users.
pub struct UsersState {
    pub(crate) plan: Arc<Plan>,
    /// Compiled JSONPath queries of the captures, by their text.
    pub(crate) json_paths: HashMap<String, JsonPath>,
    /// Users now: sessions running (open model), or user slots running (user phases).
    pub active: Cell<u64>,
    /// Open model: session tasks alive (running or about to), bounded by `cap`.
    pub(crate) tasks: Cell<u64>,
    /// Open model: most sessions at once; later arrivals wait in `queue`.
    pub(crate) cap: u64,
    /// Open model: arrivals waiting for a session to end (intended start, user index).
    pub(crate) queue: RefCell<VecDeque<(Instant, u64)>>,
    /// User phases: slots this thread should run now.
    pub(crate) target: Cell<u64>,
    /// User phases: which slots have a task.
    pub(crate) alive: RefCell<Vec<bool>>,
    /// User phases: sessions begun by this thread, for user indices.
    pub(crate) begun: Cell<u64>,
    /// Wakes thinking users when the target drops.
    pub(crate) changed: Notify,
    /// Open model: signalled when the last session task ends.
    pub(crate) idle: Notify,
    /// Whole-run account of the sessions.
    pub record: RefCell<UserRecord>,
}

impl UsersState {
    /// The state of one thread, allowed `cap` sessions at once in the open model.
    pub fn new(plan: Arc<Plan>, cap: usize) -> Self {
        let mut json_paths = HashMap::new();
        if let Some(model) = plan.model.users() {
            for step in request_steps(model) {
                for c in &step.captures {
                    if let CaptureSource::Json(q) = &c.source {
                        // The plan was checked when it was built; a query that still fails to
                        // parse makes its capture fail, with its text as the reason.
                        if let Ok(path) = JsonPath::parse(q) {
                            json_paths.insert(q.clone(), path);
                        }
                    }
                }
            }
        }
        UsersState {
            plan,
            json_paths,
            active: Cell::new(0),
            tasks: Cell::new(0),
            cap: cap.max(1) as u64,
            queue: RefCell::new(VecDeque::new()),
            target: Cell::new(0),
            alive: RefCell::new(Vec::new()),
            begun: Cell::new(0),
            changed: Notify::new(),
            idle: Notify::new(),
            record: RefCell::new(UserRecord::new()),
        }
    }

    pub(crate) fn model(&self) -> &UserModel {
        self.plan
            .model
            .users()
            .expect("users run only with a user model")
    }

    /// Open model: resolves once no session is running or waiting.
    pub async fn drained(&self) {
        while self.tasks.get() > 0 {
            self.idle.notified().await;
        }
    }

    /// Open model: arrivals still waiting when the run stops.
    pub fn take_queued(&self) -> u64 {
        let mut q = self.queue.borrow_mut();
        let n = q.len() as u64;
        q.clear();
        n
    }
}

/// Every request step of a model, loops and chains included.
pub fn request_steps(model: &UserModel) -> Vec<&RequestStep> {
    fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a RequestStep>) {
        for s in steps {
            match s {
                Step::Request(r) => out.push(r),
                Step::Think(_) => {}
                Step::Loop { steps, .. } => walk(steps, out),
            }
        }
    }
    let mut out = Vec::new();
    for sc in &model.scenarios {
        match &sc.behaviour {
            Behaviour::Flow(steps) => walk(steps, &mut out),
            Behaviour::Chain(chain) => {
                out.extend(chain.states.iter().filter_map(|s| s.request.as_ref()))
            }
        }
    }
    out
}
