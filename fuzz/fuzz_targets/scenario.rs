//! An Artillery script (YAML, or JSON, which YAML reads) through parsing, validation and
//! lowering into a plan, as `run` and `validate` take it; host names are not looked up.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use loadlab_input::lower::{scenario_text, Overrides};
use loadlab_input::target::Lookup;
use loadlab_input::LoadFlags;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let flags = LoadFlags {
        urls: vec!["fuzz.yml".into()],
        ..LoadFlags::default()
    };
    let overrides = Overrides {
        flags: &flags,
        lookup: Lookup::Skip,
    };
    // Every error is a message, never a panic; an accepted script is a checked plan.
    if let Ok(checked) = scenario_text(text, Path::new("/nonexistent/fuzz.yml"), &overrides) {
        let _ = checked.plan.scheduled_duration();
    }
});
