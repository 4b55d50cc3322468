//! `summary.json`'s and `lab.json`'s schemas are contracts: fields are added, never renamed.
//! The committed `schemas/summary.v1.json` and `schemas/lab.v1.json` must match the types;
//! refresh them with `LOADLAB_UPDATE_SCHEMAS=1 cargo test -p loadlab-run --test schema` after
//! adding a field.

use std::path::PathBuf;

use loadlab_run::summary_schema;

/// Asserts that `schemas/<file>` holds `schema` (writing it first with
/// `LOADLAB_UPDATE_SCHEMAS`).
fn assert_committed(file: &str, schema: serde_json::Value) {
    let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas")
        .join(file);
    if std::env::var_os("LOADLAB_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("schemas/{file} exists"));
    assert_eq!(
        committed, generated,
        "the types behind {file} changed: refresh with LOADLAB_UPDATE_SCHEMAS=1 and check no \
         field was renamed"
    );
}

#[test]
fn the_committed_schema_matches_the_summary_types() {
    assert_committed("summary.v1.json", summary_schema());
}

#[test]
fn every_field_of_the_design_contract_is_required() {
    let schema = summary_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for key in [
        "schema",
        "complete",
        "model",
        "targets",
        "started_at",
        "duration_s",
        "requests",
        "throughput",
        "latency_ms",
        "service_latency_ms",
        "status",
        "errors",
        "generator",
        "phases",
    ] {
        assert!(required.contains(&key), "{key} is not required");
    }
}

#[test]
fn the_committed_lab_schema_matches_the_lab_types() {
    assert_committed("lab.v1.json", loadlab_run::lab::lab_schema());
}

#[test]
fn every_field_of_the_lab_contract_is_required_and_the_seeds_labs_still_read() {
    let schema = loadlab_run::lab::lab_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for key in ["schema", "name", "rounds", "cells", "verdicts"] {
        assert!(required.contains(&key), "{key} is not required");
    }
    // Every lab.json committed under bench/runs (written before this schema was generated)
    // reads as the types say.
    let runs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/runs");
    let mut read = 0;
    for seeds in std::fs::read_dir(&runs).unwrap().flatten() {
        for lab in std::fs::read_dir(seeds.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if lab.path().join("lab.json").exists() {
                let json = loadlab_run::lab::read_lab_json(&lab.path())
                    .unwrap()
                    .unwrap();
                assert_eq!(json.schema, loadlab_run::lab::LAB_SCHEMA);
                read += 1;
            }
        }
    }
    assert!(
        read >= 10,
        "only {read} committed labs found under {}",
        runs.display()
    );
}
