//! A batch compaction in one pass over one `PartTable`: prune, mark, pivot
//! and the per-session estimates a batch report needs.
//!
//! The same results as calling `prune`, `mark_rows`, `pivot_starts` and
//! `estimate_messages` (on the marked and on the visible table) one after
//! another, without building the column views five times: the prune marks
//! go straight into the table's flags, and one estimate pass gives both the
//! after-prune total (every message) and the visible one (messages at or
//! after the pivot).

use crate::codes::flag;
use crate::error::Result;
use crate::estimate::estimate;
use crate::messages::{estimate_messages, tokens_visible, MessageEstimateConfig};
use crate::pivot::{pivot_starts, visible, Visible};
use crate::prune::{prune, PruneConfig, SessionPrune};
use crate::render::{Render, CLEARED_TOOL_OUTPUT};
use crate::table::PartTable;

/// What compaction does to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCompaction {
    /// The session's first row and row count.
    pub start: usize,
    pub rows: usize,
    /// The prune scan's outcome (selected rows, newest first).
    pub prune: SessionPrune,
    /// Estimated model input before the prune.
    pub tokens_before: u64,
    /// Estimated model input after the selected outputs are marked.
    pub tokens_after_prune: u64,
    /// The same, over the rows later calls see (from the pivot on, and the
    /// pinned messages before it).
    pub tokens_after: u64,
    /// The rows later calls see.
    pub visible: Visible,
}

/// Compact every session of `table`. The prune marks are applied to the
/// table's flags, so the table reads as the marked transcript afterwards.
pub fn compact(
    table: &mut PartTable<'_>,
    prune_config: &PruneConfig,
    estimate_config: MessageEstimateConfig,
) -> Result<Vec<SessionCompaction>> {
    table.check_lengths(estimate_config.method, true)?;
    let pruned = prune(table, prune_config)?;
    // Before the marks: with OpenCode's view, estimates add up part by part, so
    // the pruned total with each placeholder swapped back for its output is
    // it (one estimate pass fewer). Other views (described placeholders,
    // cleared inputs, cut outputs) are estimated for real.
    let before: Option<Vec<u64>> = if estimate_config.render == Render::default() {
        None
    } else {
        Some(
            estimate_messages(table, estimate_config)?
                .iter()
                .map(|m| m.iter().map(|t| t.tokens).sum())
                .collect(),
        )
    };
    let placeholder = estimate(CLEARED_TOOL_OUTPUT, estimate_config.method);
    for session in &pruned {
        for &row in &session.rows {
            table.flags[row] |= flag::COMPACTED;
        }
    }
    let shown = visible(table, &pivot_starts(table)?)?;
    let messages = estimate_messages(table, estimate_config)?;
    Ok(pruned
        .into_iter()
        .zip(shown)
        .zip(messages)
        .zip(&table.sessions)
        .enumerate()
        .map(|(s, (((prune, shown), messages), range))| {
            let all: u64 = messages.iter().map(|m| m.tokens).sum();
            let after = tokens_visible(&messages, &shown);
            let tokens_before = match &before {
                Some(before) => before[s],
                None => all + prune.pruned - prune.rows.len() as u64 * placeholder,
            };
            SessionCompaction {
                start: range.start,
                rows: range.len(),
                prune,
                tokens_before,
                tokens_after_prune: all,
                tokens_after: after,
                visible: shown,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mark::mark_rows;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;
    use arrow_array::RecordBatch;

    /// The separate scans, one after another, as the batch path used to run them.
    fn separately(batch: &RecordBatch, p: &PruneConfig, e: MessageEstimateConfig) -> Vec<u64> {
        let batches = [batch.clone()];
        let cols = Columns::from_batches(&batches, Scan::Prune).unwrap();
        let pruned = prune(&PartTable::new(&cols).unwrap(), p).unwrap();
        let rows: Vec<u64> = pruned
            .iter()
            .flat_map(|s| s.rows.iter().map(|&r| r as u64))
            .collect();
        let index = batch.schema().index_of("compacted_at").unwrap();
        let marked_col = mark_rows(&[batch.column(index).clone()], &rows, 7).unwrap();
        let mut columns = batch.columns().to_vec();
        columns[index] = marked_col[0].clone();
        let marked = [RecordBatch::try_new(batch.schema(), columns).unwrap()];
        let cols = Columns::from_batches(&marked, Scan::Estimate).unwrap();
        let estimates = estimate_messages(&PartTable::new(&cols).unwrap(), e).unwrap();
        let cols = Columns::from_batches(&marked, Scan::Pivot).unwrap();
        let starts = pivot_starts(&PartTable::new(&cols).unwrap()).unwrap();
        let mut out = Vec::new();
        for ((s, msgs), start) in pruned.iter().zip(&estimates).zip(starts) {
            out.push(s.pruned);
            out.push(msgs.iter().map(|m| m.tokens).sum());
            out.push(
                msgs.iter()
                    .filter(|m| m.row >= start)
                    .map(|m| m.tokens)
                    .sum(),
            );
            out.push(start as u64);
        }
        out
    }

    #[test]
    fn one_pass_equals_the_separate_scans() {
        let batch = batch(&long_short_quiet());
        for (protect, minimum) in [(40_000, 20_000), (0, 0), (1_000_000, 0)] {
            let p = PruneConfig {
                protect,
                minimum,
                ..PruneConfig::default()
            };
            let e = MessageEstimateConfig::default();
            let batches = [batch.clone()];
            let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
            let mut table = PartTable::new(&cols).unwrap();
            let got = compact(&mut table, &p, e).unwrap();
            let flat: Vec<u64> = got
                .iter()
                .flat_map(|s| {
                    [
                        s.prune.pruned,
                        s.tokens_after_prune,
                        s.tokens_after,
                        s.visible.start as u64,
                    ]
                })
                .collect();
            assert_eq!(flat, separately(&batch, &p, e), "protect {protect}");
            assert_eq!(got.iter().map(|s| s.rows).sum::<usize>(), batch.num_rows());
        }
    }

    #[test]
    fn the_default_policy_prunes_the_long_session_and_hides_before_the_pivot() {
        let batches = [batch(&long_short_quiet())];
        let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
        let mut table = PartTable::new(&cols).unwrap();
        let got = compact(&mut table, &PruneConfig::default(), Default::default()).unwrap();
        assert!(got[0].prune.pruned > 20_000 && !got[0].prune.rows.is_empty());
        assert!(got[0].tokens_after_prune < got[0].prune.total);
        assert_eq!(got[1].visible.start - got[1].start, 2);
        assert!(got[1].tokens_after < got[1].tokens_after_prune);
        assert_eq!((got[2].rows, got[2].tokens_after), (1, 0));
    }

    #[test]
    fn tokens_before_is_the_estimate_before_the_marks() {
        let batches = [batch(&long_short_quiet())];
        let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
        let other = Render {
            clear_inputs: true,
            truncate_output: Some(1_000),
            describe: true,
            keep_thinking: 2,
        };
        for render in [Render::default(), other] {
            let e = MessageEstimateConfig {
                render,
                ..Default::default()
            };
            let real: Vec<u64> = estimate_messages(&PartTable::new(&cols).unwrap(), e)
                .unwrap()
                .iter()
                .map(|m| m.iter().map(|t| t.tokens).sum())
                .collect();
            let mut table = PartTable::new(&cols).unwrap();
            let got = compact(&mut table, &PruneConfig::default(), e).unwrap();
            let before: Vec<u64> = got.iter().map(|s| s.tokens_before).collect();
            assert_eq!(before, real, "{render:?}");
            assert!(got[0].tokens_before > got[0].tokens_after_prune);
        }
    }
}
