//! Marking pruned parts: a new `compacted_at` column with `now_ms` at the
//! given rows. Only that column changes; outputs are never touched.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array};
use arrow_schema::DataType;

use crate::error::{CoreError, Result};

/// `chunks` is the current `compacted_at` column (int64 or all-null), `rows`
/// the global rows to mark. Chunk boundaries are kept.
pub fn mark_rows(chunks: &[ArrayRef], rows: &[u64], now_ms: i64) -> Result<Vec<ArrayRef>> {
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let mut marked = vec![false; total];
    for &r in rows {
        let r = r as usize;
        if r >= total {
            return Err(CoreError::Config(format!(
                "row {r} to mark is out of range: the transcript has {total} rows"
            )));
        }
        marked[r] = true;
    }
    let mut out = Vec::with_capacity(chunks.len());
    let mut base = 0;
    for chunk in chunks {
        let n = chunk.len();
        let mark = &marked[base..base + n];
        let new: Int64Array = match chunk.data_type() {
            DataType::Int64 => {
                let old = chunk.as_primitive::<Int64Type>();
                (0..n)
                    .map(|i| {
                        if mark[i] {
                            Some(now_ms)
                        } else {
                            old.is_valid(i).then(|| old.value(i))
                        }
                    })
                    .collect()
            }
            DataType::Null => mark.iter().map(|&m| m.then_some(now_ms)).collect(),
            other => {
                return Err(CoreError::ColumnType {
                    column: "compacted_at",
                    found: other.to_string(),
                    expected: "int64",
                })
            }
        };
        out.push(Arc::new(new) as ArrayRef);
        base += n;
    }
    Ok(out)
}
