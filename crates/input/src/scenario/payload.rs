//! `config.payload`: CSV files whose rows are handed to virtual users, read relative to the
//! scenario file.

use std::path::Path;

use anyhow::{bail, Context, Result};
use loadlab_run::users::{Payload, PayloadOrder};
use serde::Deserialize;

/// `config.payload`: a CSV file and the variables its columns fill.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PayloadSpec {
    /// The CSV file, relative to the scenario file.
    pub path: String,
    /// Variable names, one per column.
    pub fields: Vec<String>,
    /// `random` (default) or `sequence`.
    #[serde(default)]
    pub order: Option<String>,
    /// Skip the first line (a header).
    #[serde(default)]
    pub skip_header: bool,
    /// Column separator (default `,`).
    #[serde(default)]
    pub delimiter: Option<String>,
}

/// Most rows a payload file may have.
const MAX_PAYLOAD_ROWS: usize = 10_000_000;

/// Reads a payload CSV file, relative to the scenario file.
pub fn read_payload(spec: &PayloadSpec, scenario: &Path) -> Result<Payload> {
    let file = scenario.parent().unwrap_or(Path::new(".")).join(&spec.path);
    let delimiter = match spec.delimiter.as_deref() {
        None => b',',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => bail!("payload delimiter {d:?} must be one character"),
    };
    let order = match spec.order.as_deref() {
        None | Some("random") => PayloadOrder::Random,
        Some("sequence") => PayloadOrder::Sequence,
        Some(o) => bail!("payload order {o:?}: use random or sequence"),
    };
    if spec.fields.is_empty() {
        bail!(
            "payload {}: fields names the variables of its columns",
            spec.path
        );
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(spec.skip_header)
        .delimiter(delimiter)
        .flexible(true)
        .from_path(&file)
        .with_context(|| format!("cannot read the payload file {}", file.display()))?;
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("payload {}", file.display()))?;
        if record.len() < spec.fields.len() {
            bail!(
                "payload {} row {}: {} columns, fields names {}",
                file.display(),
                i + 1,
                record.len(),
                spec.fields.len()
            );
        }
        rows.push(
            record
                .iter()
                .take(spec.fields.len())
                .map(str::to_string)
                .collect(),
        );
        if rows.len() > MAX_PAYLOAD_ROWS {
            bail!(
                "payload {} has more than {MAX_PAYLOAD_ROWS} rows",
                file.display()
            );
        }
    }
    if rows.is_empty() {
        bail!("payload {} has no rows", file.display());
    }
    Ok(Payload {
        fields: spec.fields.clone(),
        rows,
        order,
    })
}
