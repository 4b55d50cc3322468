//! `loadlab validate SCENARIO.yaml`: checks a scenario without running it and shows the load
//! it describes: phase by phase, and what each scenario's users do. It needs no network: host
//! names are looked up when a run starts.

use anyhow::Result;
use loadlab_input::target::Lookup;
use loadlab_input::Overrides;

use crate::args::ValidateArgs;
use crate::cmd::Outcome;

/// Runs `loadlab validate`.
pub fn main(a: ValidateArgs) -> Result<Outcome> {
    crate::cmd::load_dotenv(a.script.dotenv.as_deref())?;
    let overrides = Overrides {
        target: a.target,
        lookup: Lookup::Skip,
        // What the file leaves to run time (a target, a payload's file, an environment
        // variable) is a warning here.
        script: loadlab_input::flags::ScriptFlags {
            checking: true,
            ..a.script
        },
        ..Overrides::default()
    };
    let checked = loadlab_input::lower::scenario_checked(&a.file, &overrides)?;
    for w in &checked.warnings {
        eprintln!("warning: {w}");
    }
    println!("{}: valid", a.file.display());
    for n in &checked.notes {
        println!("  {n}");
    }
    for w in &checked.warnings {
        println!("  warning: {w}");
    }
    if !checked.plan.thresholds.is_empty() {
        let all: Vec<String> = checked
            .plan
            .thresholds
            .iter()
            .map(|t| {
                if t.strict {
                    t.to_string()
                } else {
                    format!("{t} (reported only)")
                }
            })
            .collect();
        println!(
            "  ensure (exit code 1 when one fails, as Artillery's): {}",
            all.join(", ")
        );
    }
    print!("{}", loadlab_report::plan::render_plan(&checked.plan));
    Ok(Outcome::Done)
}
