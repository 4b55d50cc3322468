//! The sockets of scenarios that are not HTTP, as lowering knows them: the engine a scenario
//! names with its settings (`config.ws`, `config.socketio`), and the socket its steps go over.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `config.ws`: what every user's WebSocket sends when it opens.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WsSettings {
    /// Headers of the upgrade request.
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// Subprotocols offered.
    #[serde(default)]
    pub(super) subprotocols: Vec<String>,
}

/// The WebSocket of the scenario being lowered: the path its messages' results are named by,
/// and the request a reply's round trip is recorded under, once a step awaits one.
#[derive(Debug, Clone)]
pub struct Socket {
    pub(super) upgrade: usize,
    pub(super) endpoint: usize,
    pub(super) url: String,
    pub(super) path: String,
    pub(super) reply: Option<usize>,
    pub(super) socketio: bool,
}

impl Socket {
    /// True for a socketio scenario's socket.
    pub fn socketio(&self) -> bool {
        self.socketio
    }
}

/// The engine of a scenario that is not HTTP, with its settings.
pub enum Engine<'s> {
    /// `engine: ws`.
    Ws(&'s WsSettings),
    /// `engine: socketio`.
    SocketIo(&'s SioSettings),
}

/// `config.socketio`: how every user's Socket.IO connection opens (socket.io-client's
/// options that loadlab reads).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SioSettings {
    /// Engine.IO's path on the server (`/socket.io`).
    #[serde(default)]
    pub(super) path: Option<String>,
    /// Query parameters added to the connection's URL.
    #[serde(default)]
    pub(super) query: BTreeMap<String, serde_json::Value>,
    /// Headers of the upgrade request.
    #[serde(default, rename = "extraHeaders")]
    pub(super) extra_headers: BTreeMap<String, String>,
    /// The transports allowed: loadlab uses `websocket`.
    #[serde(default)]
    pub(super) transports: Option<Vec<String>>,
}
