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
    if a.file.extension().is_some_and(|e| e == "py") {
        return locustfile(&a);
    }
    crate::cmd::load_dotenv(a.script.dotenv.as_deref())?;
    let flags = loadlab_input::flags::LoadFlags {
        target: a.target,
        // What the file leaves to run time (a target, a payload's file, an environment
        // variable) is a warning here.
        script: loadlab_input::flags::ScriptFlags {
            checking: true,
            ..a.script
        },
        ..Default::default()
    };
    let overrides = Overrides {
        flags: &flags,
        lookup: Lookup::Skip,
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

/// A locustfile: imported by a Python helper that runs nothing, its user classes shown with
/// their weights, hosts, wait times and tasks.
fn locustfile(a: &ValidateArgs) -> Result<Outcome> {
    let args = crate::args::LocustArgs::for_file(&a.file.display().to_string());
    let spec = crate::cmd::locust::spec(&args)?;
    let (classes, shape) = loadlab_engine::locustfile::describe(&spec)?;
    println!(
        "{}: valid (a locustfile; run it with loadlab locust -f FILE)",
        a.file.display()
    );
    let number = |n: Option<f64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    for c in &classes {
        println!(
            "  user class {}: weight {}, fixed count {}, host {}, wait {}",
            c.name,
            number(c.weight),
            number(c.fixed_count),
            c.host.as_deref().unwrap_or("-"),
            c.wait_time.as_deref().unwrap_or("-")
        );
        for t in &c.tasks {
            println!("    task {} (weight {})", t.name, t.weight);
        }
    }
    if shape {
        println!("  a LoadTestShape sets the users over time");
    }
    Ok(Outcome::Done)
}
