//! What one thread's virtual users share, whichever way their sessions start (sessions
//! layer): the thread's connection state and recorder, the plan's requests, the user model,
//! the compiled capture queries, the processor's helper and the whole-run account of the
//! sessions.

use super::grpc::GrpcCalls;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use loadlab_run::users::UserModel;
use loadlab_run::{Plan, UserRecord};

use crate::conn::exchange::Wire;
use crate::session::checks::Queries;
use crate::session::client::SharedPool;
use crate::session::hooks::Hooks;

/// One thread's virtual users.
pub struct Users {
    /// The thread's connection state and recorder.
    pub wire: Wire,
    /// The plan: its requests and endpoints.
    pub plan: Arc<Plan>,
    /// What the users do.
    pub model: Arc<UserModel>,
    /// The model's checks' and captures' queries, compiled.
    pub queries: Queries,
    /// The methods of the model's gRPC steps.
    pub grpc: GrpcCalls,
    /// Whole-run account of the sessions.
    pub record: RefCell<UserRecord>,
    /// The thread's Node.js helper, when the model has a processor.
    pub hooks: Option<Rc<Hooks>>,
    /// The connections every user of the thread shares, when the script sets
    /// `config.http.pool`.
    pub pool: Option<Rc<SharedPool>>,
}

impl Users {
    /// The users of thread `thread.0` of `thread.1` that connects and records with `wire`,
    /// doing what `model` says, calling its processor's functions through `hooks`; with
    /// `config.http.pool` they share the thread's part of the pool.
    pub fn new(
        plan: Arc<Plan>,
        model: Arc<UserModel>,
        wire: Wire,
        hooks: Option<Rc<Hooks>>,
        thread: (usize, usize),
    ) -> Self {
        let pool = model.pool.map(|n| {
            let share = loadlab_run::shard::share_of(n as u64, thread.0, thread.1) as usize;
            Rc::new(SharedPool::new(share, plan.endpoints.len()))
        });
        Users {
            hooks,
            pool,
            wire,
            plan,
            queries: Queries::compile(&model),
            grpc: GrpcCalls::compile(&model),
            model,
            record: RefCell::new(UserRecord::new()),
        }
    }
}
