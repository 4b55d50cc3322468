//! An experiment file (topologies, workloads, rounds) through its checks, and each workload
//! lowered as `lab` and `lab --check` lower them before the first cell.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use loadlab_input::experiment::from_text;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(exp) = from_text(text, Path::new("/nonexistent/lab.yaml")) {
        let _ = exp.check_workloads();
    }
});
