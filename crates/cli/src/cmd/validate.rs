//! `loadlab validate SCENARIO.yaml`: checks a scenario without running it and shows the load
//! it describes, phase by phase.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use loadlab_run::Model;

use crate::args::{Cli, Command, ValidateArgs};
use crate::cmd::Outcome;

/// Runs `loadlab validate`.
pub fn main(a: ValidateArgs) -> Result<Outcome> {
    let path: PathBuf = a.file;
    let shown = path.display().to_string();
    let Command::Run(run_args) = Cli::try_parse_from(["loadlab", "run", shown.as_str()])?.command
    else {
        unreachable!("parsed as a run");
    };
    let plan = crate::scenario::plan_from_scenario(&path, &run_args)?;
    println!("{shown}: valid");
    let urls = plan.target_urls();
    println!(
        "  requests (round robin, weights as repetitions): {}",
        urls.len()
    );
    let mut distinct: Vec<&String> = urls.iter().collect();
    distinct.dedup();
    for u in distinct {
        let n = urls.iter().filter(|x| *x == u).count();
        println!("    {u} × {n}");
    }
    if let Model::Open { phases, .. } = &plan.model {
        println!(
            "  {:<24}{:>9}{:>9}{:>10}{:>10}{:>11}",
            "phase", "start s", "length s", "from/s", "to/s", "arrivals"
        );
        let (mut start, mut total) = (0.0, 0.0);
        for p in phases {
            let len = p.duration.map_or(0.0, |d| d.as_secs_f64());
            let arrivals = (p.start_rps + p.end_rps) / 2.0 * len;
            println!(
                "  {:<24}{:>9.1}{:>9.1}{:>10.1}{:>10.1}{:>11.0}",
                p.name, start, len, p.start_rps, p.end_rps, arrivals
            );
            start += len;
            total += arrivals;
        }
        println!(
            "  total: {total:.0} arrivals over {start:.1} s; timeout {:?}",
            plan.timeout
        );
    }
    Ok(Outcome::Done)
}
