//! The example experiment files of `examples/` (the seeds' experiments, full and short, which
//! `bench/seeds.py` runs) read as experiments: each workload's flags parse, each topology is
//! ready to deploy, and each scenario file a workload runs is there.

use std::path::Path;

use loadlab_input::experiment::{self, Load};

#[test]
fn every_example_experiment_reads_and_names_scenario_files_that_exist() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        let exp = experiment::load(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!exp.topologies.is_empty() && !exp.workloads.is_empty());
        for w in &exp.workloads {
            if let Load::Run(flags) = &w.load {
                if flags.is_scenario() {
                    let scenario = dir.join(&flags.urls[0]);
                    assert!(
                        scenario.is_file(),
                        "{}: workload {} runs {}, which is not there",
                        file.display(),
                        w.name,
                        scenario.display()
                    );
                }
            }
        }
    }
}
