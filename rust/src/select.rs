//! Joining arrays and dropping rows, over arrow-data's `MutableArrayData`.
//!
//! The core needs two of arrow-select's kernels (concat, filter); written here
//! on arrow-data, which arrow-array already builds, they save the install
//! compiling arrow-select (about 15% of a cold build's crate time,
//! docs/building.md).

use arrow_array::{make_array, Array, ArrayRef, RecordBatch};
use arrow_data::transform::MutableArrayData;

use crate::error::{CoreError, Result};

/// The arrays, one after the other (all of one type; at least one).
pub fn concat(arrays: &[&dyn Array]) -> Result<ArrayRef> {
    let first = arrays
        .first()
        .ok_or_else(|| CoreError::Internal("joining no arrays".into()))?;
    if let Some(other) = arrays.iter().find(|a| a.data_type() != first.data_type()) {
        return Err(CoreError::Internal(format!(
            "joining a {} array to a {} array",
            other.data_type(),
            first.data_type()
        )));
    }
    let data: Vec<_> = arrays.iter().map(|a| a.to_data()).collect();
    let rows = data.iter().map(|d| d.len()).sum();
    let mut out = MutableArrayData::new(data.iter().collect(), false, rows);
    for (i, d) in data.iter().enumerate() {
        out.try_extend(i, 0, d.len())
            .map_err(|e| CoreError::Internal(format!("joining arrays: {e}")))?;
    }
    Ok(make_array(out.freeze()))
}

/// The batch's rows where `keep` is true, in order (`keep` has one flag a row).
pub fn filter_batch(batch: &RecordBatch, keep: &[bool]) -> Result<RecordBatch> {
    if keep.len() != batch.num_rows() {
        return Err(CoreError::Internal(format!(
            "filtering {} rows with {} flags",
            batch.num_rows(),
            keep.len()
        )));
    }
    let runs = kept_runs(keep);
    let rows = runs.iter().map(|(s, e)| e - s).sum();
    let columns = batch
        .columns()
        .iter()
        .map(|column| {
            let data = column.to_data();
            let mut out = MutableArrayData::new(vec![&data], false, rows);
            for &(start, end) in &runs {
                out.try_extend(0, start, end)
                    .map_err(|e| CoreError::Internal(format!("filtering rows: {e}")))?;
            }
            Ok(make_array(out.freeze()))
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(batch.schema(), columns)
        .map_err(|e| CoreError::Internal(format!("filtering rows: {e}")))
}

/// The `[start, end)` runs of true flags.
fn kept_runs(keep: &[bool]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, &k) in keep.iter().enumerate() {
        match (k, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, keep.len()));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, LargeStringArray, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    Some(4),
                    Some(5),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    None,
                    Some("d"),
                    Some("e"),
                ])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn filter_keeps_the_flagged_rows_with_their_nulls() {
        let b = batch();
        for keep in [
            vec![true, false, true, false, true],
            vec![false, true, true, true, false],
            vec![false; 5],
            vec![true; 5],
        ] {
            let got = filter_batch(&b, &keep).unwrap();
            let want = arrow_select::filter::filter_record_batch(
                &b,
                &arrow_array::BooleanArray::from(keep.clone()),
            )
            .unwrap();
            assert_eq!(got, want, "{keep:?}");
        }
        assert!(filter_batch(&b, &[true]).is_err());
    }

    #[test]
    fn concat_joins_in_order_and_refuses_mixed_types() {
        let a = LargeStringArray::from(vec![Some("x"), None]);
        let b = LargeStringArray::from(vec!["y"]);
        let got = concat(&[&a, &b]).unwrap();
        let want = arrow_select::concat::concat(&[&a, &b]).unwrap();
        assert_eq!(got.to_data(), want.to_data());
        let c = Int64Array::from(vec![1]);
        assert!(concat(&[&a, &c]).is_err());
        assert!(concat(&[]).is_err());
    }
}
