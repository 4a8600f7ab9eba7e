//! Which columns each scan reads, and the Arrow types each may have
//! (docs/schema.md): checked against the schema before a row is read.

use std::collections::HashMap;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema};

use crate::bigram::Family;
use crate::error::{CoreError, Result};
use crate::estimate::{Method, UNITS_KEY};

/// Which scan is reading the table: decides the columns it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    Prune,
    /// A prune that reads tool inputs too (supersession).
    PruneInputs,
    Pivot,
    Estimate,
    /// The model input rendered (`view::render_chat`): what the estimate reads.
    Render,
    /// Prune, mark, pivot and estimate in one pass (`compact::compact`).
    Compact,
    /// A policy's whole plan (`plan::plan`): what `Compact` reads.
    Plan,
    /// The table turned back into sessions (`Transcript.to_sessions`): every
    /// column it reads is checked when present, none but the base needed.
    Sessions,
}

impl Scan {
    fn name(self) -> &'static str {
        match self {
            Scan::Prune | Scan::PruneInputs => "prune",
            Scan::Pivot => "filter_pivot",
            Scan::Estimate => "estimate_messages",
            Scan::Render => "to_model_messages",
            Scan::Compact => "compact_batch",
            Scan::Plan => "plan",
            Scan::Sessions => "to_sessions",
        }
    }

    fn extra_columns(self) -> &'static [&'static str] {
        match self {
            Scan::Prune => &["summary", "tool", "status", "output", "compacted_at"],
            Scan::PruneInputs => &[
                "summary",
                "tool",
                "status",
                "input",
                "output",
                "compacted_at",
            ],
            Scan::Pivot => &["parent_id", "summary", "finished", "error"],
            Scan::Estimate | Scan::Render => &["tool", "status", "input", "output", "compacted_at"],
            Scan::Compact | Scan::Plan => &[
                "parent_id",
                "summary",
                "finished",
                "error",
                "tool",
                "status",
                "input",
                "output",
                "compacted_at",
            ],
            Scan::Sessions => &[],
        }
    }

    /// Columns read when present.
    fn optional_columns(self) -> &'static [&'static str] {
        match self {
            // `ignored` text and file parts (name, mime, url) live in part_json;
            // a described placeholder names the part id.
            // and supersession reads the calls' targets worked out once
            Scan::Compact | Scan::Plan => &["part_json", "part_id", "tool_target"],
            Scan::Estimate | Scan::Render => &["part_json", "part_id"],
            // a part marked `pinned` in its part_json is never cleared
            Scan::Prune => &["part_json"],
            Scan::PruneInputs => &["part_json", "tool_target"],
            // pinned parts: kept visible by the pivot filter
            Scan::Pivot => &["part_json"],
            Scan::Sessions => &[
                "parent_id",
                "summary",
                "finished",
                "error",
                "part_id",
                "tool",
                "status",
                "input",
                "output",
                "compacted_at",
                "auto",
                "session_json",
                "message_json",
                "part_json",
            ],
        }
    }
}

const BASE_COLUMNS: [&str; 4] = ["session_id", "message_id", "role", "part_type"];

fn is_string(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => {
            matches!(
                v.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            )
        }
        _ => false,
    }
}

/// The Arrow types each column may have (docs/schema.md).
fn check_type(name: &'static str, dt: &DataType) -> Result<()> {
    let (ok, expected) = match name {
        "role" | "part_type" | "status" => (
            is_string(dt) || *dt == DataType::Int8,
            "int8 codes or a string type",
        ),
        "summary" | "finished" | "error" | "auto" => {
            (matches!(dt, DataType::Boolean | DataType::Null), "bool")
        }
        // a timestamp, and the counted columns (`counted_columns`)
        _ if name == "compacted_at"
            || name.starts_with("output_u")
            || name.starts_with("output_tokens_")
            || name == crate::tokens::OUTPUT_HASH
            || name.starts_with("input_tokens_")
            || name == crate::tokens::INPUT_HASH =>
        {
            (matches!(dt, DataType::Int64 | DataType::Null), "int64")
        }
        _ => (is_string(dt), crate::columns::STRING_TYPES),
    };
    if ok {
        Ok(())
    } else {
        Err(CoreError::ColumnType {
            column: name,
            found: dt.to_string(),
            expected,
        })
    }
}

/// Every counted column and the metadata it must carry (`Method::counted_column`).
fn counted_columns() -> impl Iterator<Item = (&'static str, Option<&'static str>)> {
    std::iter::once(Method::Opencode)
        .chain(Family::ALL.map(|family| Method::Bigram {
            family,
            conservative: false,
        }))
        .chain(Family::ALL.map(|family| Method::Exact { family }))
        .filter_map(Method::counted_column)
}

/// The Arrow chunks of every column a scan needs, gathered from record batches.
pub struct Columns {
    by_name: HashMap<&'static str, Vec<ArrayRef>>,
}

impl Columns {
    /// Gather the columns `scan` needs, checking names and types against
    /// `schema` (so an empty table with a wrong schema is still an error).
    ///
    /// Every lookup is `column_with_name`: arrow's `index_of` and
    /// `field_with_name` build their error for an absent name by formatting
    /// every field's name, which was half the cost of a small table's scan.
    pub fn new(schema: &Schema, batches: &[RecordBatch], scan: Scan) -> Result<Self> {
        let mut by_name = HashMap::new();
        // Each output's length counted once under a method (`output_utf16`,
        // `output_units_<family>`): read instead of the text wherever the
        // estimate needs only its length. A family's counts are read only if
        // they were made with this very table (its fingerprint).
        let mut counted = false;
        let mut exact = false;
        // (the sessions are rebuilt from the text: counts are not read)
        if !matches!(scan, Scan::Pivot | Scan::Sessions) {
            for (name, fingerprint) in counted_columns() {
                let Some((index, field)) = schema.column_with_name(name) else {
                    continue;
                };
                check_type(name, field.data_type())?;
                if fingerprint
                    .is_some_and(|f| field.metadata().get(UNITS_KEY).map(String::as_str) != Some(f))
                {
                    continue;
                }
                by_name.insert(
                    name,
                    batches.iter().map(|b| b.column(index).clone()).collect(),
                );
                counted = true;
                exact |= name.starts_with("output_tokens_");
            }
            // the hashes that tell which exact counts still hold
            if let (true, Some((index, _))) =
                (exact, schema.column_with_name(crate::tokens::OUTPUT_HASH))
            {
                check_type(crate::tokens::OUTPUT_HASH, schema.field(index).data_type())?;
                by_name.insert(
                    crate::tokens::OUTPUT_HASH,
                    batches.iter().map(|b| b.column(index).clone()).collect(),
                );
            }
            // the call arguments' exact counts (`input_tokens_<family>`), each
            // read only beside the hashes of the inputs they counted
            if let Some((index, _)) = schema.column_with_name(crate::tokens::INPUT_HASH) {
                let mut any = false;
                for family in Family::ALL {
                    let name = crate::tokens::input_exact_column(family);
                    let Some((at, field)) = schema.column_with_name(name) else {
                        continue;
                    };
                    check_type(name, field.data_type())?;
                    let stamp = field.metadata().get(UNITS_KEY).map(String::as_str);
                    if stamp != Some(crate::tokens::exact_stamp(family)) {
                        continue;
                    }
                    by_name.insert(name, batches.iter().map(|b| b.column(at).clone()).collect());
                    any = true;
                }
                if any {
                    check_type(crate::tokens::INPUT_HASH, schema.field(index).data_type())?;
                    by_name.insert(
                        crate::tokens::INPUT_HASH,
                        batches.iter().map(|b| b.column(index).clone()).collect(),
                    );
                }
            }
        }
        // With the lengths counted the text is needed only to cut or describe
        // an output: a report can be read without it.
        for &name in BASE_COLUMNS.iter().chain(scan.extra_columns()) {
            let found = schema.column_with_name(name);
            if name == "output" && counted && found.is_none() {
                continue;
            }
            let (index, field) = found.ok_or(CoreError::MissingColumn {
                column: name,
                needed_by: scan.name(),
            })?;
            check_type(name, field.data_type())?;
            by_name.insert(
                name,
                batches.iter().map(|b| b.column(index).clone()).collect(),
            );
        }
        for &name in scan.optional_columns() {
            if let Some((index, field)) = schema.column_with_name(name) {
                check_type(name, field.data_type())?;
                by_name.insert(
                    name,
                    batches.iter().map(|b| b.column(index).clone()).collect(),
                );
            }
        }
        Ok(Columns { by_name })
    }

    /// `new` with the schema of the first batch (at least one batch needed).
    pub fn from_batches(batches: &[RecordBatch], scan: Scan) -> Result<Self> {
        let schema = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| CoreError::Config("no record batches: pass the schema".into()))?;
        Columns::new(&schema, batches, scan)
    }

    pub fn get(&self, name: &'static str) -> Option<&[ArrayRef]> {
        self.by_name.get(name).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::Int64Array;
    use arrow_schema::Field;

    use super::*;
    use crate::testutil::{batch, tool, user};

    /// The test batch plus a family's counted column carrying `units` metadata,
    /// with or without its output text.
    fn with_counts(units: &str, keep_output: bool) -> RecordBatch {
        let base = batch(&[("s", vec![user("u", vec![tool("read", 40)])])]);
        let mut fields: Vec<Field> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for (field, column) in base.schema().fields().iter().zip(base.columns()) {
            if keep_output || field.name() != "output" {
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
        }
        let metadata = HashMap::from([(UNITS_KEY.to_string(), units.to_string())]);
        fields
            .push(Field::new("output_units_o200k", DataType::Int64, true).with_metadata(metadata));
        columns.push(Arc::new(Int64Array::from(vec![Some(7); base.num_rows()])));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    #[test]
    fn a_familys_counts_are_read_only_when_made_with_this_table() {
        let current = Family::O200k.fingerprint();
        let b = with_counts(current, true);
        let cols = Columns::from_batches(&[b], Scan::Prune).unwrap();
        assert!(cols.get("output_units_o200k").is_some() && cols.get("output").is_some());
        // Without the text, the counts alone are enough to gather the scan.
        let b = with_counts(current, false);
        let cols = Columns::from_batches(&[b], Scan::Prune).unwrap();
        assert!(cols.get("output_units_o200k").is_some() && cols.get("output").is_none());
        // Another table version's counts are not read; without the text, the
        // scan then has nothing to estimate outputs from.
        let b = with_counts("o200k:0000000000000000", true);
        let cols = Columns::from_batches(&[b], Scan::Prune).unwrap();
        assert!(cols.get("output_units_o200k").is_none() && cols.get("output").is_some());
        let b = with_counts("o200k:0000000000000000", false);
        let err = Columns::from_batches(&[b], Scan::Prune).err().unwrap();
        assert!(matches!(
            err,
            CoreError::MissingColumn {
                column: "output",
                ..
            }
        ));
        // The pivot filter reads no counts.
        let b = with_counts(current, true);
        let cols = Columns::from_batches(&[b], Scan::Pivot).unwrap();
        assert!(cols.get("output_units_o200k").is_none());
    }
}
