//! One session of a virtual user (sessions layer): a new visitor with its own variables,
//! payload row, randomness and connections runs its scenario's flow or Markov chain, request
//! by request with think times between, and the session is recorded as completed or failed.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;

use loadlab_run::users::{Behaviour, RequestStep, Step, Think};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::record::{micros, Pending};
use crate::session::checks::{check, needs_response};
use crate::session::client::Client;
use crate::session::render::render;
use crate::session::state::Users;
use crate::session::statics;

/// How a user slot stops its session early: when the slot falls outside the target.
#[derive(Clone, Copy)]
pub struct SlotStop<'a> {
    /// The slot's number on its thread.
    pub slot: usize,
    /// Slots the thread should run now.
    pub target: &'a Cell<u64>,
    /// Signalled when the target changes.
    pub changed: &'a Notify,
}

/// How a session went, for its slot.
pub struct Ended {
    /// It ended by a transport error.
    pub transport_failure: bool,
    /// Requests it sent.
    pub sent: u64,
}

/// Why a session ended early.
enum End {
    /// A failure, with its reason for the report; `transport` when a connection failed.
    Failed { reason: String, transport: bool },
    /// The user's slot was stopped by a lower user count.
    Stopped,
}

/// Counts an arrival's user as active while its session runs, however it ends.
struct ActiveGuard<'a>(&'a Cell<u64>);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Runs one session of user `index` on `scenario` and records it: an arrival's session due at
/// `intended` (open model), or a session of a user slot that `slot` may stop early.
pub async fn session(
    users: &Users,
    index: u64,
    scenario: usize,
    intended: Option<Instant>,
    slot: Option<SlotStop<'_>>,
) -> Ended {
    let rec = &users.wire.rec;
    let start = Instant::now();
    rec.rec_at(start).counts.users_started += 1;
    // A slot's user stays active between its sessions; an arrival is active for its session.
    let active = slot.is_none().then(|| {
        let active = &rec.users_active;
        active.set(active.get() + 1);
        ActiveGuard(active)
    });
    let mut s = Session::new(users, index, intended, slot);
    let result = s.run(scenario).await;
    let sent = s.client.sent;
    drop(s);
    drop(active);
    let now = Instant::now();
    let length = micros(now.saturating_duration_since(intended.unwrap_or(start)));
    let mut record = users.record.borrow_mut();
    let transport_failure = match result {
        Ok(()) => {
            rec.rec_at(now).counts.users_completed += 1;
            record.sessions.saturating_record(length);
            false
        }
        Err(End::Failed { reason, transport }) => {
            rec.rec_at(now).counts.users_failed += 1;
            record.sessions.saturating_record(length);
            *record.failures.entry(reason).or_default() += 1;
            transport
        }
        Err(End::Stopped) => false,
    };
    Ended {
        transport_failure,
        sent,
    }
}

/// A user's state during one session.
struct Session<'a> {
    users: &'a Users,
    vars: HashMap<String, String>,
    rng: fastrand::Rng,
    /// The user's connections.
    client: Client,
    /// Pages whose static resources this user has fetched.
    visited: HashSet<usize>,
    /// Open model: when the next request is due (the arrival, then the end of a think).
    next_intended: Option<Instant>,
    open: bool,
    slot: Option<SlotStop<'a>>,
}

type Steps<'s> = Pin<Box<dyn Future<Output = Result<(), End>> + 's>>;

impl<'a> Session<'a> {
    fn new(
        users: &'a Users,
        index: u64,
        intended: Option<Instant>,
        slot: Option<SlotStop<'a>>,
    ) -> Self {
        let model = &users.model;
        // Each user's randomness depends only on the seed and its index, whatever thread runs it.
        let mut rng =
            fastrand::Rng::with_seed(model.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut vars = HashMap::new();
        for (name, values) in &model.variables {
            if !values.is_empty() {
                vars.insert(name.clone(), values[rng.usize(..values.len())].clone());
            }
        }
        for p in &model.payloads {
            for (field, value) in p.fields.iter().zip(p.row(index, &mut rng)) {
                vars.insert(field.clone(), value.clone());
            }
        }
        Session {
            users,
            vars,
            rng,
            client: Client::new(&users.wire),
            visited: HashSet::new(),
            next_intended: intended,
            open: intended.is_some(),
            slot,
        }
    }

    async fn run(&mut self, scenario: usize) -> Result<(), End> {
        let scenario = &self.users.model.scenarios[scenario];
        match &scenario.behaviour {
            Behaviour::Flow(steps) => self.steps(steps).await,
            Behaviour::Chain(chain) => {
                let mut state = Some(chain.start);
                while let Some(s) = state {
                    self.check_stop()?;
                    let st = &chain.states[s];
                    if let Some(r) = &st.request {
                        self.request(r).await?;
                    }
                    if let Some(t) = &st.think {
                        self.think(t).await?;
                    }
                    state = chain.next(s, &mut self.rng);
                    tokio::task::yield_now().await;
                }
                Ok(())
            }
        }
    }

    fn steps<'s>(&'s mut self, steps: &'s [Step]) -> Steps<'s> {
        Box::pin(async move {
            for step in steps {
                match step {
                    Step::Request(r) => self.request(r).await?,
                    Step::Think(t) => self.think(t).await?,
                    Step::Log(t) => {
                        let mut line = String::new();
                        let lookup = |k: &str| self.vars.get(k).map(String::as_str);
                        t.render(lookup, &mut self.rng, &mut line);
                        eprintln!("{line}");
                    }
                    Step::Loop { count, steps, over } if !over.is_empty() => {
                        for (k, item) in over.iter().enumerate() {
                            self.vars.insert("$loopCount".into(), (k + 1).to_string());
                            self.vars
                                .extend(loadlab_run::users::loop_element_vars(item));
                            self.steps(steps).await?;
                            tokio::task::yield_now().await;
                        }
                        let _ = count;
                    }
                    Step::Loop { count, steps, .. } => {
                        let mut k = 0;
                        while count.is_none_or(|c| k < c) {
                            self.vars.insert("$loopCount".into(), (k + 1).to_string());
                            self.steps(steps).await?;
                            k += 1;
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }
            Ok(())
        })
    }

    fn check_stop(&self) -> Result<(), End> {
        match self.slot {
            Some(s) if s.slot as u64 >= s.target.get() => Err(End::Stopped),
            _ => Ok(()),
        }
    }

    async fn think(&mut self, think: &Think) -> Result<(), End> {
        let until = Instant::now() + think.sample(&mut self.rng);
        if self.open {
            self.next_intended = Some(until);
        }
        let Some(slot) = self.slot else {
            sleep_until(until).await;
            return Ok(());
        };
        loop {
            tokio::select! {
                _ = sleep_until(until) => return self.check_stop(),
                _ = slot.changed.notified() => self.check_stop()?,
            }
        }
    }

    /// Sends one request step, then checks, captures and fetches what it says.
    async fn request(&mut self, step: &RequestStep) -> Result<(), End> {
        self.check_stop()?;
        let users = self.users;
        let t = &users.plan.requests[step.request];
        let authority = &users.plan.endpoints[t.endpoint].authority;
        let (bytes, path) =
            render(step, t, authority, &self.vars, &mut self.rng).map_err(|reason| {
                End::Failed {
                    reason: format!("{reason} on {}", t.name),
                    transport: false,
                }
            })?;
        let intended = if self.open {
            Some(self.next_intended.take().unwrap_or_else(Instant::now))
        } else {
            None
        };
        let pending = Pending {
            intended,
            template: step.request,
        };
        let answer = self
            .client
            .send(&users.wire, &pending, &bytes, needs_response(step))
            .await
            .map_err(|failed| End::Failed {
                reason: format!("{} on {}", failed.kind().as_str(), t.name),
                transport: true,
            })?;
        check(step, &t.name, &answer, &mut self.vars, &users.json_paths).map_err(|reason| {
            End::Failed {
                reason,
                transport: false,
            }
        })?;
        if let Some(page_statics) = step.static_resources {
            if self.visited.insert(step.request) {
                let base = format!("http://{authority}{path}");
                statics::fetch(users, &mut self.client, page_statics, &base, &answer.body).await;
            }
        }
        Ok(())
    }
}
