//! A virtual user's connections (sessions layer): one per endpoint, opened on first use, and
//! the send of one rendered request on them through the shared send step; or, with
//! `config.http.pool`, the connections of the thread's pool that every user shares.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::Either;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::conn::exchange::{Answer, Failed, Rendered, Wire};
use crate::conn::{self, Conn};
use crate::record::Pending;

/// How long a user's connection may sit idle before it is closed, as Artillery's user agent
/// closes it (agentkeepalive's free-socket timeout, 4 s): after a longer think the next request
/// opens a new connection, and the server sees Artillery's churn.
pub const IDLE_CLOSE: Duration = Duration::from_secs(4);

/// The connections a thread's users share when the script sets `config.http.pool`, as
/// Artillery's engine hands every user one agent of that many sockets per host: a request
/// takes an idle connection, else opens one while fewer than the cap are open, else waits for
/// one to come back. An idle connection closes past [`IDLE_CLOSE`], as the agent's do.
pub struct SharedPool {
    /// Most connections open at once to each endpoint (this thread's share of the pool).
    cap: usize,
    /// Per endpoint, its connections.
    endpoints: RefCell<Vec<EndpointConns>>,
    /// Signalled when a connection comes back or closes.
    freed: Notify,
}

/// A shared pool's connections to one endpoint.
#[derive(Default)]
struct EndpointConns {
    /// The idle ones, with when they went idle.
    idle: Vec<(Conn, Instant)>,
    /// How many are open (idle or sending).
    open: usize,
}

impl SharedPool {
    /// A pool of at most `cap` connections to each of `endpoints` endpoints.
    pub fn new(cap: usize, endpoints: usize) -> Self {
        SharedPool {
            cap: cap.max(1),
            endpoints: RefCell::new((0..endpoints).map(|_| EndpointConns::default()).collect()),
            freed: Notify::new(),
        }
    }

    /// A connection to endpoint `ep` to send on: an idle one, or `None` with the right to open
    /// one; waits while the endpoint's connections are all busy.
    async fn take(&self, ep: usize) -> Option<Conn> {
        loop {
            {
                let mut all = self.endpoints.borrow_mut();
                let e = &mut all[ep];
                let now = Instant::now();
                while let Some((conn, since)) = e.idle.pop() {
                    if now.saturating_duration_since(since) <= IDLE_CLOSE {
                        return Some(conn);
                    }
                    e.open -= 1;
                }
                if e.open < self.cap {
                    e.open += 1;
                    return None;
                }
            }
            self.freed.notified().await;
        }
    }

    /// Hands back what a send left of the connection taken for endpoint `ep`: still open, it
    /// waits idle for the next request; closed (or never opened), its place is free.
    fn give_back(&self, ep: usize, conn: Option<Conn>) {
        {
            let mut all = self.endpoints.borrow_mut();
            let e = &mut all[ep];
            match conn {
                Some(c) => e.idle.push((c, Instant::now())),
                None => e.open = e.open.saturating_sub(1),
            }
        }
        self.freed.notify_one();
    }
}

/// One user's connections during a session.
pub struct Client {
    /// One connection per endpoint, opened on first use.
    conns: Vec<Option<Conn>>,
    /// The thread's pool every user shares, when the script sets `config.http.pool`.
    shared: Option<Rc<SharedPool>>,
    /// Requests sent so far.
    pub sent: u64,
    /// When the user's last request ended: its connections have been idle since.
    pub idle_since: Option<Instant>,
}

impl Client {
    /// A user with no connection yet to any of `wire`'s endpoints, who sends over `shared`
    /// when the thread's users share a pool.
    pub fn new(wire: &Wire, shared: Option<Rc<SharedPool>>) -> Self {
        Client {
            conns: (0..wire.endpoints()).map(|_| None).collect(),
            shared,
            sent: 0,
            idle_since: None,
        }
    }

    /// Closes the user's connections when they have been idle past [`IDLE_CLOSE`] at `now`.
    pub fn close_idle(&mut self, now: Instant) {
        if self
            .idle_since
            .is_some_and(|t| now.saturating_duration_since(t) > IDLE_CLOSE)
        {
            self.conns.iter_mut().for_each(|c| *c = None);
        }
    }

    /// Sends `bytes`, rendered for `pending`, on the connection to its endpoint and records the
    /// outcome; the answer has the status and, when `keep`, the response's headers and body.
    ///
    /// It hands back the shared step's future itself rather than awaiting it in a future of
    /// its own, which would add a frame to every session's state.
    pub fn send<'s>(
        &'s mut self,
        wire: &'s Wire,
        pending: &'s Pending,
        bytes: &'s [u8],
        keep: bool,
    ) -> impl Future<Output = Result<Answer, Failed>> + 's {
        let ep = wire.requests[pending.template].endpoint;
        self.sent += 1;
        let rendered = Some(Rendered { bytes, keep });
        match &self.shared {
            None => Either::Left(conn::send(
                wire,
                &mut self.conns[ep],
                ep,
                std::slice::from_ref(pending),
                rendered,
            )),
            Some(pool) => {
                let pool = pool.clone();
                Either::Right(Box::pin(async move {
                    let mut conn = pool.take(ep).await;
                    let answer =
                        conn::send(wire, &mut conn, ep, std::slice::from_ref(pending), rendered)
                            .await;
                    pool.give_back(ep, conn);
                    answer
                }))
            }
        }
    }
}
