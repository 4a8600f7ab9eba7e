//! Hard-compaction pivot: per session, the first row later model calls see.
//!
//! Walking messages newest to oldest, a finished, error-free summary
//! assistant message marks its parent as a completed compaction; the first
//! user message (going back) that is such a parent and carries a compaction
//! part is the pivot. Everything before it is hidden from the model (and
//! kept in storage). Sessions without a completed pivot start at row 0.

use std::collections::HashSet;

use rayon::prelude::*;

use crate::error::Result;
use crate::table::{flag, part_type, role, PartTable};

/// First visible row of every session (its range start when there is no pivot).
pub fn pivot_starts(table: &PartTable<'_>) -> Result<Vec<usize>> {
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| pivot_start(table, s))
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
