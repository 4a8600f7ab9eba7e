//! Hard-compaction pivot: per session, the first row later model calls see.
//!
//! Walking messages newest to oldest, a finished, error-free summary
//! assistant message marks its parent as a completed compaction; the first
//! user message (going back) that is such a parent and carries a compaction
//! part is the pivot. Everything before it is hidden from the model (and
//! kept in storage), except system messages (the agent's instructions, which
//! a runtime sends at every call) and messages holding a pinned part, which
//! no policy removes: they stay visible, in order, ahead of the pivot.
//! Sessions without a completed pivot start at row 0.

use std::collections::HashSet;
use std::ops::Range;

use rayon::prelude::*;

use crate::codes::{flag, part_type, role};
use crate::error::Result;
use crate::table::{Message, PartTable};

/// First visible row of every session (its range start when there is no pivot).
pub fn pivot_starts(table: &PartTable<'_>) -> Result<Vec<usize>> {
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| pivot_start(table, s))
        .collect()
}

/// The rows of a session later model calls see: its system and pinned
/// messages before the pivot, then every row from the pivot (`start`) to the
/// session's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visible {
    pub start: usize,
    pub end: usize,
    /// Row ranges of the system and pinned messages before `start`, in order.
    pub pinned: Vec<Range<usize>>,
}

impl Visible {
    /// The visible rows as `[start, end)` ranges, oldest first.
    pub fn ranges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let pinned = self.pinned.iter().map(|r| (r.start, r.end));
        pinned.chain(std::iter::once((self.start, self.end)))
    }

    /// Does the message starting at `row` stay visible?
    pub fn shows(&self, row: usize) -> bool {
        row >= self.start || self.pinned.iter().any(|r| r.start == row)
    }

    pub fn rows(&self) -> usize {
        self.end - self.start + self.pinned.iter().map(|r| r.len()).sum::<usize>()
    }
}

/// What every session shows, given its pivot start.
pub fn visible(table: &PartTable<'_>, starts: &[usize]) -> Result<Vec<Visible>> {
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| session_visible(table, s, starts[s]))
        .collect()
}

/// What session `s` shows when its pivot starts at row `start`.
pub fn session_visible(table: &PartTable<'_>, s: usize, start: usize) -> Result<Visible> {
    if start == table.sessions[s].start {
        return visible_in(table, s, start, &[]);
    }
    visible_in(table, s, start, &table.messages(s)?)
}

/// `session_visible` over the session's messages already split.
pub fn visible_in(
    table: &PartTable<'_>,
    s: usize,
    start: usize,
    messages: &[Message],
) -> Result<Visible> {
    let mut pinned = Vec::new();
    if start > table.sessions[s].start {
        let may_pin = crate::part_json::pins_possible(table, table.sessions[s].start..start);
        for msg in messages {
            if msg.rows.start >= start {
                break;
            }
            let mut rows = msg.rows.clone();
            let holds_pin = || {
                Ok(may_pin
                    && rows.try_fold(false, |any, r| {
                        Ok::<bool, crate::error::CoreError>(
                            any || crate::part_json::pinned(table, r)?,
                        )
                    })?)
            };
            if kept_before_pivot(msg.role, holds_pin)? {
                pinned.push(msg.rows.clone());
            }
        }
    }
    Ok(Visible {
        start,
        end: table.sessions[s].end,
        pinned,
    })
}

/// Does a message before the pivot stay in the model input? A system
/// message (the agent's instructions) and one holding a pinned part
/// (`holds_pin`, asked only of the others) do.
pub fn kept_before_pivot<E>(
    role: u8,
    holds_pin: impl FnOnce() -> std::result::Result<bool, E>,
) -> std::result::Result<bool, E> {
    Ok(role == role::SYSTEM || holds_pin()?)
}

/// Per row: does later model input include it (at or after its session's
/// pivot, or in a pinned message)?
pub fn pivot_mask(table: &PartTable<'_>) -> Result<Vec<bool>> {
    let mut mask = vec![false; table.rows()];
    for v in visible(table, &pivot_starts(table)?)? {
        for (a, b) in v.ranges() {
            mask[a..b].fill(true);
        }
    }
    Ok(mask)
}

/// The visible rows as merged `(start, length)` ranges, so a caller can build
/// the result from zero-copy slices of the input.
pub fn visible_ranges(table: &PartTable<'_>) -> Result<Vec<(usize, usize)>> {
    let shown = visible(table, &pivot_starts(table)?)?;
    Ok(merge_ranges(shown.iter().flat_map(Visible::ranges)))
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
    pivot_start_in(table, s, &table.messages(s)?)
}

/// `pivot_start` over the session's messages already split (a caller that
/// walks them anyway saves the split).
pub fn pivot_start_in(table: &PartTable<'_>, s: usize, messages: &[Message]) -> Result<usize> {
    let parent = table
        .parent_id
        .as_ref()
        .expect("pivot gathers the parent_id column");
    let found = pivot_index(messages.len(), |i| {
        let (msg, first) = (&messages[i], messages[i].rows.start);
        let f = table.flags[first];
        PivotFacts {
            role: msg.role,
            id: table.message_id.get(first),
            compaction: || {
                msg.rows
                    .clone()
                    .any(|r| table.part_type[r] == part_type::COMPACTION)
            },
            summary: f & flag::SUMMARY != 0,
            finished: f & flag::FINISHED != 0,
            error: f & flag::ERROR != 0,
            parent: parent.get(first),
        }
    });
    Ok(found.map_or(table.sessions[s].start, |i| messages[i].rows.start))
}

/// What the pivot reads of one message.
pub struct PivotFacts<'a, C: FnOnce() -> bool> {
    pub role: u8,
    pub id: Option<&'a str>,
    /// Does it hold a compaction part (asked of a user message only)?
    pub compaction: C,
    pub summary: bool,
    pub finished: bool,
    pub error: bool,
    pub parent: Option<&'a str>,
}

/// The pivot rule over `n` messages (oldest first, `facts(i)` of message
/// `i`): the newest user message holding a compaction part whose summary (a
/// finished, error-free summary assistant message naming it as its parent)
/// exists. `None`: no pivot, the whole session is shown.
pub fn pivot_index<'a, C: FnOnce() -> bool>(
    n: usize,
    facts: impl Fn(usize) -> PivotFacts<'a, C>,
) -> Option<usize> {
    let mut completed: HashSet<&str> = HashSet::new();
    for i in (0..n).rev() {
        let m = facts(i);
        if m.role == role::USER
            && !completed.is_empty()
            && m.id.is_some_and(|id| completed.contains(id))
            && (m.compaction)()
        {
            return Some(i);
        }
        if m.role == role::ASSISTANT && m.summary && m.finished && !m.error {
            if let Some(p) = m.parent {
                completed.insert(p);
            }
        }
    }
    None
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

    #[test]
    fn pinned_messages_before_the_pivot_stay_visible() {
        let mut pinned = compacted_session();
        pinned[0].parts[0] = pin(pinned[0].parts[0].clone()); // the task
        let batches = [batch(&[("a", pinned), ("b", compacted_session())])];
        let cols = Columns::from_batches(&batches, Scan::Pivot).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let mask = pivot_mask(&table).unwrap();
        let shown: Vec<usize> = (0..mask.len()).filter(|&r| mask[r]).collect();
        assert_eq!(shown, vec![0, 2, 3, 4, 7, 8, 9]);
        assert_eq!(
            visible_ranges(&table).unwrap(),
            vec![(0, 1), (2, 3), (7, 3)]
        );
        // the pivot itself does not move
        assert_eq!(pivot_starts(&table).unwrap(), vec![2, 7]);
    }
}
