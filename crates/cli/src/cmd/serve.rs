//! `loadlab serve`: the reference service on a port, until Ctrl-C.

use anyhow::{Context, Result};

use crate::args::ServeArgs;
use crate::cmd::Outcome;

/// Runs `loadlab serve`.
pub fn main(a: ServeArgs) -> Result<Outcome> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("cannot start the service's runtime")?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind((a.host.as_str(), a.port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {}:{} (is the port in use? try --port 0 for a free one)",
                    a.host, a.port
                )
            })?;
        let addr = listener.local_addr()?;
        println!("loadlab serve: listening on http://{addr} (endpoints /ping /delay?ms=N /stall /health); Ctrl-C stops");
        tokio::select! {
            r = loadlab_target::serve(listener) => r.context("the service stopped")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(Outcome::Done)
    })
}
