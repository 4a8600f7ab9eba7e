//! Soft compaction: choose old completed tool outputs to mark as compacted.
//!
//! The loop is OpenCode's, per session: walk messages newest to oldest,
//! skip everything until the second user turn back, stop at a summary
//! message or at an already-compacted tool part, protect the newest
//! `protect` tokens of tool output and select the rest, and keep the
//! selection only when it frees more than `minimum` tokens.

use rayon::prelude::*;

use crate::codes::{flag, part_type, role, status};
use crate::error::{CoreError, Location, Result};
use crate::estimate::{estimate, Method};
use crate::table::PartTable;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneConfig {
    pub enabled: bool,
    /// Newest tool-output tokens that are never pruned (OpenCode: 40 000).
    pub protect: u64,
    /// Prune only when more than this many tokens would be freed (20 000).
    pub minimum: u64,
    /// Tools whose outputs are never pruned (OpenCode: `skill`).
    pub protected_tools: Vec<String>,
    /// Walk past an already-compacted part instead of ending the scan there.
    pub continue_past_compacted: bool,
    pub method: Method,
}

impl Default for PruneConfig {
    fn default() -> Self {
        PruneConfig {
            enabled: true,
            protect: 40_000,
            minimum: 20_000,
            protected_tools: vec!["skill".to_owned()],
            continue_past_compacted: false,
            method: Method::Opencode,
        }
    }
}

/// Outcome for one session. `rows` is empty unless `pruned > minimum`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPrune {
    /// Estimated tokens of every tool output the scan counted.
    pub total: u64,
    /// Estimated tokens of the selected outputs (0 when nothing is selected).
    pub pruned: u64,
    /// Rows of the selected tool parts, newest first.
    pub rows: Vec<usize>,
}

pub fn prune(table: &PartTable<'_>, config: &PruneConfig) -> Result<Vec<SessionPrune>> {
    if !config.enabled {
        return Ok(vec![SessionPrune::default(); table.sessions.len()]);
    }
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| prune_session(table, s, config))
        .collect()
}

fn prune_session(table: &PartTable<'_>, s: usize, config: &PruneConfig) -> Result<SessionPrune> {
    let status_col = table
        .status
        .as_ref()
        .expect("prune gathers the status column");
    let output = table
        .output
        .as_ref()
        .expect("prune gathers the output column");
    let tool = table.tool.as_ref().expect("prune gathers the tool column");
    // Pass 1, newest to oldest without reading any output: the rows the walk
    // counts, in walk order. Only these are estimated (skipped turns, text and
    // everything behind a stop point never are).
    let mut counted: Vec<usize> = Vec::new();
    let mut turns = 0u32;
    'messages: for msg in table.messages(s)?.iter().rev() {
        if msg.role == role::USER {
            turns += 1;
        }
        if turns < 2 {
            continue;
        }
        if msg.role == role::ASSISTANT && table.flags[msg.rows.start] & flag::SUMMARY != 0 {
            break;
        }
        for row in msg.rows.clone().rev() {
            if table.part_type[row] != part_type::TOOL {
                continue;
            }
            match status_col[row] {
                status::COMPLETED => {}
                crate::columns::NULL_CODE => {
                    return Err(CoreError::NullValue {
                        what: "status of a tool part",
                        at: Location::column("status")
                            .row(row)
                            .session(table.session_id.get(row))
                            .message(table.message_id.get(row)),
                    })
                }
                _ => continue,
            }
            if tool
                .get(row)
                .is_some_and(|t| config.protected_tools.iter().any(|p| p == t))
            {
                continue;
            }
            if table.flags[row] & flag::COMPACTED != 0 {
                if config.continue_past_compacted {
                    continue;
                }
                break 'messages;
            }
            counted.push(row);
        }
    }
    // Pass 2: estimate them oldest first (forward memory order, which the
    // prefetcher follows on large outputs), then accumulate newest first.
    let estimates: Vec<u64> = counted
        .iter()
        .rev()
        .map(|&row| output.get(row).map_or(0, |o| estimate(o, config.method)))
        .collect();
    let (mut total, mut pruned, mut rows) = (0u64, 0u64, Vec::new());
    for (&row, &tokens) in counted.iter().zip(estimates.iter().rev()) {
        total += tokens;
        if total > config.protect {
            pruned += tokens;
            rows.push(row);
        }
    }
    if pruned <= config.minimum {
        return Ok(SessionPrune {
            total,
            pruned: 0,
            rows: Vec::new(),
        });
    }
    Ok(SessionPrune {
        total,
        pruned,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;

    fn run(msgs: Vec<crate::testutil::M>, config: &PruneConfig) -> SessionPrune {
        let batches = [batch(&[("s", msgs)])];
        let cols = Columns::from_batches(&batches, Scan::Prune).unwrap();
        let table = PartTable::new(&cols).unwrap();
        prune(&table, config).unwrap().remove(0)
    }

    /// 10 turns, each an assistant reply with one 40 000-char (10 000-token) read.
    fn long_session() -> Vec<crate::testutil::M> {
        let mut msgs = vec![];
        for t in 0..10 {
            msgs.push(user(&format!("u{t}"), vec![text("go")]));
            msgs.push(assistant(
                &format!("a{t}"),
                &format!("u{t}"),
                vec![tool("read", 40_000)],
            ));
        }
        msgs
    }

    #[test]
    fn recent_two_turns_are_never_pruned() {
        // The seed case: one 2 500-token output, then two user turns.
        let msgs = vec![
            user("1", vec![]),
            assistant("2", "1", vec![tool("read", 10_000)]),
            user("3", vec![]),
            user("4", vec![]),
        ];
        let r = run(msgs, &PruneConfig::default());
        assert_eq!((r.pruned, r.rows.len()), (0, 0));
    }

    #[test]
    fn prunes_beyond_protect_window_including_the_crossing_part() {
        let r = run(long_session(), &PruneConfig::default());
        // Everything from the second user message back is skipped, so a9 and a8 are
        // not counted: a7..a0 give 8 x 10 000 tokens.
        assert_eq!(r.total, 80_000);
        // a7..a4 fill the 40 000 window (strict >); a3 crosses it and is pruned with the rest.
        assert_eq!(r.pruned, 40_000);
        // Newest first: rows of a3, a2, a1, a0 (message k is row k; a_t is row 2t + 1).
        assert_eq!(r.rows, vec![7, 5, 3, 1]);
    }

    #[test]
    fn nothing_marked_unless_strictly_over_minimum() {
        let config = PruneConfig {
            minimum: 40_000,
            ..Default::default()
        };
        let r = run(long_session(), &config);
        assert_eq!((r.pruned, r.rows.len(), r.total), (0, 0, 80_000));
        let config = PruneConfig {
            minimum: 39_999,
            ..Default::default()
        };
        assert_eq!(run(long_session(), &config).pruned, 40_000);
    }

    #[test]
    fn summary_message_ends_the_scan() {
        let mut msgs = long_session();
        msgs.insert(8, summary("sum", "u3")); // between turn 3 and turn 4
        let r = run(msgs, &PruneConfig::default());
        // Only a7..a4 are counted: 40 000 tokens, none beyond the window.
        assert_eq!(r.total, 40_000);
        assert_eq!((r.pruned, r.rows.len()), (0, 0));
    }

    #[test]
    fn compacted_part_ends_the_scan_unless_configured() {
        let mut msgs = long_session();
        msgs[9].parts[0].compacted = Some(1); // a4
        let r = run(msgs.clone(), &PruneConfig::default());
        assert_eq!(r.total, 30_000); // a7..a5 only
        let config = PruneConfig {
            continue_past_compacted: true,
            ..Default::default()
        };
        let r = run(msgs, &config);
        assert_eq!(r.total, 70_000); // a4 skipped, not counted
        assert_eq!(r.rows, vec![5, 3, 1]);
        assert_eq!(r.pruned, 30_000);
    }

    #[test]
    fn protected_tools_and_unfinished_tools_are_skipped() {
        let mut msgs = long_session();
        for m in msgs.iter_mut().filter(|m| m.id == "a0" || m.id == "a1") {
            m.parts[0].tool = Some("skill");
        }
        msgs[5].parts[0].status = Some("running"); // a2
        let r = run(msgs.clone(), &PruneConfig::default());
        assert_eq!(r.total, 50_000); // a7..a3
        assert_eq!((r.pruned, r.rows.len()), (0, 0)); // a3 alone: 10 000 <= 20 000
        let r = run(
            msgs,
            &PruneConfig {
                minimum: 5_000,
                ..Default::default()
            },
        );
        assert_eq!((r.pruned, r.rows.clone()), (10_000, vec![7]));
    }

    #[test]
    fn disabled_prunes_nothing() {
        let r = run(
            long_session(),
            &PruneConfig {
                enabled: false,
                ..Default::default()
            },
        );
        assert_eq!(r, SessionPrune::default());
    }

    #[test]
    fn tool_part_without_status_is_an_error() {
        let mut msgs = long_session();
        msgs[1].parts[0].status = None;
        let batches = [batch(&[("s", msgs)])];
        let cols = Columns::from_batches(&batches, Scan::Prune).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let err = prune(&table, &PruneConfig::default()).unwrap_err();
        assert!(
            matches!(err, CoreError::NullValue { at, .. } if at.row == Some(1) && at.session_id.as_deref() == Some("s"))
        );
    }
}
