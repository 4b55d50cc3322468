//! `loadlab consume`: the visits application's counter consumer, until Ctrl-C.

use anyhow::{Context, Result};
use loadlab_service::consumer::{consume, ConsumerConfig};

use crate::args::ConsumeArgs;
use crate::cmd::Outcome;

/// Runs `loadlab consume`.
pub fn main(a: ConsumeArgs) -> Result<Outcome> {
    crate::cmd::name_process("loadlab-consume");
    let config = ConsumerConfig {
        redis_url: a.redis_url,
        name: a.name,
        shards: a.shards,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the consumer's runtime")?;
    println!(
        "loadlab consume: counting visits from {} as {} into {} shards per page (pid {}); Ctrl-C stops",
        config.redis_url,
        config.name,
        config.shards,
        std::process::id()
    );
    let counted = rt.block_on(consume(&config, async {
        let _ = tokio::signal::ctrl_c().await;
    }))?;
    println!("loadlab consume: counted {counted} visits");
    Ok(Outcome::Done)
}
