//! `config.payload`: CSV files whose rows are handed to virtual users, read relative to the
//! scenario file.

use std::path::Path;

use loadlab_run::users::{Payload, PayloadOrder};
use serde::Deserialize;

use super::error::PayloadError;

/// `config.payload`: a CSV file and the variables its columns fill.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PayloadSpec {
    /// The CSV file, relative to the scenario file; none when it comes at run time
    /// (`--payload`, Artillery's -p).
    #[serde(default)]
    pub path: Option<String>,
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
    /// Read every row into one list variable (`name`) instead of handing a row to each user.
    #[serde(default)]
    pub load_all: bool,
    /// The list variable's name, with `loadAll`.
    #[serde(default)]
    pub name: Option<String>,
    /// Artillery's csv-parse `cast` (numbers and booleans read as such); values stay text
    /// here, which a template renders the same.
    #[serde(default)]
    #[allow(dead_code)]
    pub cast: Option<bool>,
    /// Options Artillery hands its CSV parser (csv-parse's `quote`, `trim`…); warned about
    /// and not read.
    #[serde(default)]
    pub options: Option<serde_json::Value>,
    /// Artillery's `skipEmptyLines`: blank lines are skipped here always (its default).
    #[serde(default)]
    #[allow(dead_code)]
    pub skip_empty_lines: Option<bool>,
}

/// A payload read whole, as a list of rows, each an object of its fields.
pub fn rows_as_objects(p: &Payload) -> Vec<serde_json::Value> {
    p.rows
        .iter()
        .map(|row| {
            serde_json::Value::Object(
                p.fields
                    .iter()
                    .cloned()
                    .zip(row.iter().map(|v| serde_json::Value::String(v.clone())))
                    .collect(),
            )
        })
        .collect()
}

/// Most rows a payload file may have.
const MAX_PAYLOAD_ROWS: usize = 10_000_000;

/// Reads a payload CSV file, relative to the scenario file.
pub fn read_payload(spec: &PayloadSpec, scenario: &Path) -> Result<Payload, PayloadError> {
    let Some(path) = &spec.path else {
        return Err(PayloadError::NoPath(spec.fields.join(", ")));
    };
    // Artillery renders the config's templates in it (`{{ $environment }}`, `{{ $dirname }}`).
    let rendered = crate::config_templates::render(path, None).map_err(PayloadError::Template)?;
    let file = scenario.parent().unwrap_or(Path::new(".")).join(rendered);
    let delimiter = match spec.delimiter.as_deref() {
        None => b',',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => return Err(PayloadError::Delimiter(d.into())),
    };
    let order = match spec.order.as_deref() {
        None | Some("random") => PayloadOrder::Random,
        Some("sequence") => PayloadOrder::Sequence,
        Some(o) => return Err(PayloadError::Order(o.into())),
    };
    if spec.fields.is_empty() {
        return Err(PayloadError::NoFields(path.clone()));
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(spec.skip_header)
        .delimiter(delimiter)
        .flexible(true)
        .from_path(&file)
        .map_err(|error| PayloadError::Unreadable {
            file: file.clone(),
            error,
        })?;
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|error| PayloadError::Row {
            file: file.clone(),
            error,
        })?;
        if record.len() < spec.fields.len() {
            return Err(PayloadError::ShortRow {
                file,
                row: i + 1,
                columns: record.len(),
                fields: spec.fields.len(),
            });
        }
        rows.push(
            record
                .iter()
                .take(spec.fields.len())
                .map(str::to_string)
                .collect(),
        );
        if rows.len() > MAX_PAYLOAD_ROWS {
            return Err(PayloadError::TooManyRows {
                file,
                max: MAX_PAYLOAD_ROWS,
            });
        }
    }
    if rows.is_empty() {
        return Err(PayloadError::NoRows { file });
    }
    Ok(Payload {
        fields: spec.fields.clone(),
        rows,
        order,
    })
}
