//! `loadlab validate SCENARIO.yaml`: checks a scenario without running it and shows the load
//! it describes: phase by phase, and what each scenario's users do.

use anyhow::Result;
use loadlab_input::Overrides;

use crate::args::ValidateArgs;
use crate::cmd::Outcome;

/// Runs `loadlab validate`.
pub fn main(a: ValidateArgs) -> Result<Outcome> {
    let plan = loadlab_input::lower::scenario(&a.file, &Overrides::default())?;
    println!("{}: valid", a.file.display());
    print!("{}", loadlab_report::plan::render_plan(&plan));
    Ok(Outcome::Done)
}
