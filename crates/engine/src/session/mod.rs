//! Virtual users (the sessions layer: above the connections, below the thread loop): users
//! that run a scenario's flow or Markov chain on connections of their own. The open model's
//! arrivals start sessions ([`Arrivals`]); user phases keep slots of users running session
//! after session ([`Slots`]).
//!
//! By job: `state` is what a thread's users share, `arrivals` and `slots` start sessions,
//! `runner` runs one, `client` holds a user's connections, `render` builds requests from
//! templates (JSON bodies included), `checks` holds expectations and captures, and `statics`
//! fetches a page's static resources, which the `html` scanner finds; `hooks` calls the
//! script's processor functions through a Node.js helper; `websocket` holds a ws scenario's
//! socket, and `socketio` speaks Socket.IO over one.

mod arrivals;
mod checks;
pub(crate) mod client;
mod grpc;
pub(crate) mod hooks;
mod html;
mod render;
mod runner;
mod slots;
mod socketio;
mod state;
mod statics;
mod websocket;

pub use arrivals::{Arrivals, PhaseCaps};
pub use hooks::Hooks;
pub use slots::{control, Slots};
pub use state::Users;
