//! The process-wide stop signal that Ctrl-C raises, shared by every job of one command.

use loadlab_engine::StopSignal;

use crate::{HarnessError, Result};

/// The process-wide stop signal, raised by the first Ctrl-C; a second Ctrl-C exits at once.
pub fn interrupt_signal() -> Result<StopSignal> {
    static SIGNAL: std::sync::OnceLock<StopSignal> = std::sync::OnceLock::new();
    if let Some(s) = SIGNAL.get() {
        return Ok(s.clone());
    }
    let stop = StopSignal::default();
    let handler_stop = stop.clone();
    ctrlc::set_handler(move || {
        if handler_stop.is_stopped() {
            std::process::exit(130);
        }
        handler_stop.stop();
    })
    .map_err(|e| {
        HarnessError::system(
            "cannot install the Ctrl-C handler",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(SIGNAL.get_or_init(|| stop).clone())
}
