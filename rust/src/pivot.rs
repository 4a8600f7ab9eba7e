//! Hard-compaction pivot: per session, the first row later model calls see.
//!
//! Walking messages newest to oldest, a finished, error-free summary
//! assistant message marks its parent as a completed compaction; the first
//! user message (going back) that is such a parent and carries a compaction
//! part is the pivot. Everything before it is hidden from the model (and
//! kept in storage). Sessions without a completed pivot start at row 0.

use std::collections::HashSet;

use rayon::prelude::*;

use crate::codes::{flag, part_type, role};
use crate::error::Result;
use crate::table::PartTable;

/// First visible row of every session (its range start when there is no pivot).
pub fn pivot_starts(table: &PartTable<'_>) -> Result<Vec<usize>> {
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| pivot_start(table, s))
        .collect()
}

/// Per row: is it at or after its session's pivot (does later model input include it)?
pub fn pivot_mask(table: &PartTable<'_>) -> Result<Vec<bool>> {
    let mut mask = Vec::with_capacity(table.rows());
    for (range, start) in table.sessions.iter().zip(pivot_starts(table)?) {
        mask.resize(mask.len() + (start - range.start), false);
        mask.resize(mask.len() + (range.end - start), true);
    }
    Ok(mask)
}

/// The visible rows as merged `(start, length)` ranges: a session's visible
/// rows are contiguous, so a caller can build the result from zero-copy
/// slices of the input.
pub fn visible_ranges(table: &PartTable<'_>) -> Result<Vec<(usize, usize)>> {
    Ok(merge_ranges(
        table
            .sessions
            .iter()
            .zip(pivot_starts(table)?)
            .map(|(session, start)| (start, session.end)),
    ))
}

/// Adjacent `[start, end)` ranges merged, empty ones dropped, as `(start, length)`.
pub fn merge_ranges(ranges: impl IntoIterator<Item = (usize, usize)>) -> Vec<(usize, usize)> {
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => merged.push((start, end)),
        }
    }
    merged
        .into_iter()
        .filter(|r| r.1 > r.0)
        .map(|(a, b)| (a, b - a))
        .collect()
}

fn pivot_start(table: &PartTable<'_>, s: usize) -> Result<usize> {
    let parent = table
        .parent_id
        .as_ref()
        .expect("pivot gathers the parent_id column");
    let mut completed: HashSet<&str> = HashSet::new();
    for msg in table.messages(s)?.iter().rev() {
        let first = msg.rows.start;
        if msg.role == role::USER
            && !completed.is_empty()
            && table
                .message_id
                .get(first)
                .is_some_and(|id| completed.contains(id))
            && msg
                .rows
                .clone()
                .any(|r| table.part_type[r] == part_type::COMPACTION)
        {
            return Ok(first);
        }
        let f = table.flags[first];
        let done = f & flag::SUMMARY != 0 && f & flag::FINISHED != 0 && f & flag::ERROR == 0;
        if msg.role == role::ASSISTANT && done {
            if let Some(p) = parent.get(first) {
                completed.insert(p);
            }
        }
    }
    Ok(table.sessions[s].start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;

    fn starts(sessions: &[(&str, Vec<M>)]) -> Vec<usize> {
        let batches = [batch(sessions)];
        let cols = Columns::from_batches(&batches, Scan::Pivot).unwrap();
        pivot_starts(&PartTable::new(&cols).unwrap()).unwrap()
    }

    fn compacted_session() -> Vec<M> {
        vec![
            user("u1", vec![text("task")]),
            assistant("a1", "u1", vec![tool("read", 10)]),
            user("u2", vec![compaction()]),
            summary("a2", "u2"),
            user("u3", vec![text("Continue if you have next steps")]),
        ]
    }

    #[test]
    fn keeps_from_the_completed_compaction_marker() {
        assert_eq!(starts(&[("s", compacted_session())]), vec![2]);
    }

    #[test]
    fn no_pivot_without_finished_error_free_summary() {
        let mut unfinished = compacted_session();
        unfinished[3].finished = false;
        let mut errored = compacted_session();
        errored[3].error = true;
        let mut no_marker = compacted_session();
        no_marker[2].parts = vec![text("plain")];
        let r = starts(&[("a", unfinished), ("b", errored), ("c", no_marker)]);
        assert_eq!(r, vec![0, 5, 10]);
    }

    #[test]
    fn mask_and_ranges_follow_the_starts() {
        let batches = [batch(&[
            ("a", compacted_session()),
            ("b", compacted_session()),
        ])];
        let cols = Columns::from_batches(&batches, Scan::Pivot).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let mask = pivot_mask(&table).unwrap();
        let visible: Vec<usize> = (0..mask.len()).filter(|&r| mask[r]).collect();
        assert_eq!(visible, vec![2, 3, 4, 7, 8, 9]);
        assert_eq!(visible_ranges(&table).unwrap(), vec![(2, 3), (7, 3)]);
    }

    #[test]
    fn ranges_merge_when_adjacent_and_drop_when_empty() {
        let merged = merge_ranges([(0, 3), (3, 5), (5, 5), (7, 9)]);
        assert_eq!(merged, vec![(0, 5), (7, 2)]);
    }

    #[test]
    fn latest_pivot_wins_and_sessions_are_independent() {
        let mut msgs = compacted_session();
        msgs.push(user("u4", vec![compaction()]));
        msgs.push(summary("a4", "u4"));
        let r = starts(&[("x", vec![user("only", vec![])]), ("y", msgs)]);
        assert_eq!(r, vec![0, 1 + 5]);
    }
}
