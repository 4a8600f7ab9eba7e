//! Soft compaction: choose old completed tool outputs to mark as compacted.
//!
//! The loop is OpenCode's, per session: walk messages newest to oldest,
//! skip everything until the second user turn back, stop at a summary
//! message or at an already-compacted tool part, protect the newest
//! `protect` tokens of tool output and select the rest, and keep the
//! selection only when it frees more than `minimum` tokens.

use rayon::prelude::*;

use crate::error::{CoreError, Location, Result};
use crate::estimate::{estimate, Method};
use crate::table::{flag, part_type, role, status, PartTable};

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
    let (mut total, mut pruned, mut rows) = (0u64, 0u64, Vec::new());
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
            let tokens = output.get(row).map_or(0, |o| estimate(o, config.method));
            total += tokens;
            if total > config.protect {
                pruned += tokens;
                rows.push(row);
            }
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
