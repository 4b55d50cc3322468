//! `loadlab completions SHELL` and `loadlab man`: the command line's own description, from
//! clap's definition of it, as a shell's completion script or as manual pages.

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::cmd::Outcome;

/// Prints the completion script of `a.shell`.
pub fn completions(a: CompletionsArgs) -> Result<Outcome> {
    let mut cli = Cli::command();
    clap_complete::generate(a.shell, &mut cli, "loadlab", &mut std::io::stdout());
    Ok(Outcome::Done)
}

/// Prints `loadlab.1`, or writes it and a page per subcommand into `a.out`.
pub fn man(a: ManArgs) -> Result<Outcome> {
    let cli = Cli::command();
    match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cli, dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
            println!("manual pages in {}", dir.display());
        }
        None => clap_mangen::Man::new(cli)
            .render(&mut std::io::stdout())
            .context("cannot print the manual page")?,
    }
    Ok(Outcome::Done)
}
