//! A virtual user's connections (sessions layer): one per endpoint, opened on first use, and
//! the send of one rendered request on them through the shared send step.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::conn::exchange::{Answer, Failed, Rendered, Wire};
use crate::conn::{self, Conn};
use crate::record::Pending;

/// How long a user's connection may sit idle before it is closed, as Artillery's user agent
/// closes it (agentkeepalive's free-socket timeout, 4 s): after a longer think the next request
/// opens a new connection, and the server sees Artillery's churn.
pub const IDLE_CLOSE: Duration = Duration::from_secs(4);

/// One user's connections during a session.
pub struct Client {
    /// One connection per endpoint, opened on first use.
    conns: Vec<Option<Conn>>,
    /// Requests sent so far.
    pub sent: u64,
    /// When the user's last request ended: its connections have been idle since.
    pub idle_since: Option<Instant>,
}

impl Client {
    /// A user with no connection yet to any of `wire`'s endpoints.
    pub fn new(wire: &Wire) -> Self {
        Client {
            conns: (0..wire.endpoints()).map(|_| None).collect(),
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
        conn::send(
            wire,
            &mut self.conns[ep],
            ep,
            std::slice::from_ref(pending),
            Some(Rendered { bytes, keep }),
        )
    }
}
