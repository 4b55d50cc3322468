//! `summary.json`'s schema is a contract: fields are added, never renamed. The committed
//! `schemas/summary.v1.json` must match the types; refresh it with
//! `LOADLAB_UPDATE_SCHEMAS=1 cargo test -p loadlab-run --test schema` after adding a field.

use std::path::PathBuf;

use loadlab_run::summary_schema;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/summary.v1.json")
}

#[test]
fn the_committed_schema_matches_the_summary_types() {
    let generated = serde_json::to_string_pretty(&summary_schema()).unwrap() + "\n";
    let path = committed_path();
    if std::env::var_os("LOADLAB_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).expect("schemas/summary.v1.json exists");
    assert_eq!(
        committed, generated,
        "summary types changed: refresh with LOADLAB_UPDATE_SCHEMAS=1 and check no field was renamed"
    );
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
