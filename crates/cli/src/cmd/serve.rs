//! `loadlab serve`: the reference service on a port, until Ctrl-C.

use anyhow::{Context, Result};

use crate::args::ServeArgs;
use crate::cmd::Outcome;

/// Runs `loadlab serve`.
pub fn main(a: ServeArgs) -> Result<Outcome> {
    let config = loadlab_target::ServiceConfig {
        bbox_delay: a.bbox_delay,
        bbox_workers: a.bbox_workers,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.threads)
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
        println!(
            "loadlab serve: listening on http://{addr} (pid {}, {} worker thread(s)); Ctrl-C stops",
            std::process::id(),
            a.threads
        );
        tokio::select! {
            r = loadlab_target::serve(listener, config) => r.context("the service stopped")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(Outcome::Done)
    })
}
