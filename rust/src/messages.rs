//! Message-level estimates: what each message costs once serialized for the
//! model, with the same placeholder rules as `to_model_messages` (a pruned
//! output counts as its placeholder, an interrupted tool as its error text).

use rayon::prelude::*;

use crate::error::Result;
use crate::estimate::{estimate, Method};
use crate::table::{flag, part_type, status, PartTable};

/// Protocol strings other runtimes read; they are not prose.
pub const CLEARED_TOOL_OUTPUT: &str = "[Old tool result content cleared]";
pub const INTERRUPTED_TOOL: &str = "[Tool execution was interrupted]";
pub const COMPACTION_QUESTION: &str = "What did we do so far?";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageEstimateConfig {
    pub method: Method,
    /// Tokens added per message for role and separators.
    pub overhead: u64,
}

impl Default for MessageEstimateConfig {
    fn default() -> Self {
        MessageEstimateConfig {
            method: Method::Opencode,
            overhead: 4,
        }
    }
}

/// First row of a message and its estimated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageTokens {
    pub row: usize,
    pub tokens: u64,
}

/// Per session, the estimate of every message, oldest first.
pub fn estimate_messages(
    table: &PartTable<'_>,
    config: MessageEstimateConfig,
) -> Result<Vec<Vec<MessageTokens>>> {
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| {
            Ok(table
                .messages(s)?
                .into_iter()
                .map(|msg| MessageTokens {
                    row: msg.rows.start,
                    tokens: config.overhead
                        + msg
                            .rows
                            .map(|r| part_tokens(table, r, config.method))
                            .sum::<u64>(),
                })
                .collect())
        })
        .collect()
}

fn part_tokens(table: &PartTable<'_>, row: usize, method: Method) -> u64 {
    let est = |col: &Option<crate::columns::StrCol<'_>>| {
        col.as_ref()
            .and_then(|c| c.get(row))
            .map_or(0, |s| estimate(s, method))
    };
    match table.part_type[row] {
        part_type::TEXT => est(&table.output),
        part_type::COMPACTION => estimate(COMPACTION_QUESTION, method),
        part_type::TOOL => {
            let result = if table.flags[row] & flag::COMPACTED != 0 {
                estimate(CLEARED_TOOL_OUTPUT, method)
            } else {
                match table.status.as_ref().map(|s| s[row]) {
                    Some(status::COMPLETED) | Some(status::ERROR) => est(&table.output),
                    _ => estimate(INTERRUPTED_TOOL, method),
                }
            };
            est(&table.tool) + est(&table.input) + result
        }
        // Reasoning, step markers, files and snapshots are not sent as text.
        _ => 0,
    }
}
