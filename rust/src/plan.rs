//! A policy's whole plan for a part-row table in one pass: per part, its
//! message, whether later model calls see it, its fate and its tokens; per
//! session, the prune's outcome and, when a shape is asked, the model input.
//!
//! Nothing here decides anything: the prune (`prune.rs`) selects, its
//! selection is marked into the table's flags (as `compact::compact` does),
//! the pivot (`pivot.rs`) says what is shown, `view::fate` what a part's
//! output becomes, `messages::session_sent` what each model message costs
//! and `view::render_message` what it is. The same answers as calling
//! `prune`, `mark_pruned`, `filter_pivot`, `sent_messages` and
//! `render_chat` one after another (tests/scans/test_plan.py).

use rayon::prelude::*;

use crate::codes::{flag, role};
use crate::error::Result;
use crate::messages::{session_sent, MessageEstimateConfig};
use crate::pivot::{pivot_starts, visible_in};
use crate::prune::{prune, PruneConfig, SessionPrune};
use crate::shapes::{merge_turns, Shape};
use crate::table::PartTable;
use crate::view::{fate, render_message, Fate};

/// Why a part is not in the model input (`Hidden::Shown`: it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    Shown = 0,
    /// Its message is before the session's latest completed pivot (and is
    /// neither a system message nor one holding a pinned part).
    BeforePivot = 1,
}

/// What the plan asks besides the per-part answers.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    /// The policy (its render options and estimate method are the plan's).
    pub prune: PruneConfig,
    /// Render the model input in this shape (`None`: not rendered).
    pub shape: Option<Shape>,
}

/// One session's plan; the per-part vectors hold one value per row of the
/// session, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlan {
    /// The session's first row.
    pub start: usize,
    /// Per part: its message's index in the session (`None`: the row of a
    /// session without messages).
    pub message: Vec<Option<u32>>,
    pub hidden: Vec<Hidden>,
    pub fate: Vec<Fate>,
    /// Per part: the estimate of the model messages it is sent as (a
    /// message's own model message at its first row, a call's result at its
    /// tool part; `messages::sent_messages`, so a session's parts add up to
    /// `estimate_messages`' total, hidden messages included).
    pub tokens: Vec<u64>,
    /// The prune's outcome (its rows are the parts this plan cleared).
    pub prune: SessionPrune,
    /// The model input of the visible messages: per message, the JSON array
    /// of its model messages in the shape asked (`view::render_message`;
    /// reasoning for the newest `keep_thinking` visible assistant messages;
    /// in the Anthropic shape a turn continuing the previous turn's role is
    /// merged into it, `shapes::merge_turns`).
    pub model: Option<Vec<Vec<u8>>>,
}

impl SessionPlan {
    /// The tokens of the parts the next model call is sent (the visible
    /// ones), before any system prompt of the runtime's own.
    pub fn visible_tokens(&self) -> u64 {
        self.tokens
            .iter()
            .zip(&self.hidden)
            .filter(|(_, h)| **h == Hidden::Shown)
            .map(|(t, _)| t)
            .sum()
    }
}

/// The plan of every session of `table` under `config`. The prune's
/// selection is marked into the table's flags, so the table reads as the
/// marked transcript afterwards (as after `compact::compact`).
pub fn plan(table: &mut PartTable<'_>, config: &PlanConfig) -> Result<Vec<SessionPlan>> {
    let estimate = config.prune.estimate_config();
    table.check_lengths(estimate.method, true)?;
    let pruned = prune(table, &config.prune)?;
    for session in &pruned {
        for &row in &session.rows {
            table.flags[row] |= flag::COMPACTED;
        }
    }
    let table = &*table;
    let starts = pivot_starts(table)?;
    pruned
        .into_par_iter()
        .enumerate()
        .map(|(s, prune)| session_plan(table, s, starts[s], prune, estimate, config.shape))
        .collect()
}

fn session_plan(
    table: &PartTable<'_>,
    s: usize,
    pivot: usize,
    prune: SessionPrune,
    estimate: MessageEstimateConfig,
    shape: Option<Shape>,
) -> Result<SessionPlan> {
    let range = table.sessions[s].clone();
    let start = range.start;
    let n = range.len();
    let messages = table.messages(s)?;
    let shown = visible_in(table, s, pivot, &messages)?;
    let mut plan = SessionPlan {
        start,
        message: vec![None; n],
        hidden: vec![Hidden::Shown; n],
        fate: vec![Fate::Kept; n],
        tokens: vec![0; n],
        prune,
        model: None,
    };
    for (i, msg) in messages.iter().enumerate() {
        let hidden = match shown.shows(msg.rows.start) {
            true => Hidden::Shown,
            false => Hidden::BeforePivot,
        };
        for row in msg.rows.clone() {
            plan.message[row - start] = Some(i as u32);
            plan.hidden[row - start] = hidden;
            plan.fate[row - start] = fate(table, row, estimate.render)?;
        }
    }
    for sent in session_sent(table, &messages, estimate)? {
        plan.tokens[sent.row - start] += sent.tokens;
    }
    if let Some(shape) = shape {
        let visible: Vec<_> = messages
            .iter()
            .filter(|m| shown.shows(m.rows.start))
            .collect();
        let assistant: Vec<bool> = visible.iter().map(|m| m.role == role::ASSISTANT).collect();
        let thinking = estimate.render.thinking(&assistant);
        let rendered: Vec<Vec<u8>> = visible
            .iter()
            .zip(thinking)
            .map(|(msg, thinks)| render_message(table, msg, estimate.render, thinks, shape))
            .collect::<Result<_>>()?;
        plan.model = Some(match shape {
            Shape::Anthropic => merge_turns(rendered)?,
            _ => rendered,
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::sent_messages;
    use crate::pivot::pivot_mask;
    use crate::render::Render;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;
    use crate::view::render_shape;

    #[test]
    fn the_plan_is_the_separate_scans() {
        let batches = [batch(&long_short_quiet())];
        let render = Render {
            truncate_output: Some(1_000),
            ..Render::default()
        };
        let config = PlanConfig {
            prune: PruneConfig {
                render,
                ..PruneConfig::default()
            },
            shape: Some(Shape::Chat),
        };
        let cols = Columns::from_batches(&batches, Scan::Plan).unwrap();
        let mut table = PartTable::new(&cols).unwrap();
        let got = plan(&mut table, &config).unwrap();
        // the separate scans, on the table the plan marked
        let mask = pivot_mask(&table).unwrap();
        let sent = sent_messages(&table, config.prune.estimate_config()).unwrap();
        let rendered = render_shape(&table, render, None, Shape::Chat).unwrap();
        let mut offset = 0;
        for (s, plan) in got.iter().enumerate() {
            let n = plan.hidden.len();
            let shown: Vec<bool> = plan.hidden.iter().map(|h| *h == Hidden::Shown).collect();
            assert_eq!(shown, mask[plan.start..plan.start + n]);
            let total: u64 = sent[s].iter().map(|m| m.tokens).sum();
            assert_eq!(plan.tokens.iter().sum::<u64>(), total);
            let messages = table.messages(s).unwrap();
            let want: Vec<&Vec<u8>> = messages
                .iter()
                .enumerate()
                .filter(|(_, m)| mask[m.rows.start])
                .map(|(i, _)| &rendered[offset + i])
                .collect();
            let model = plan.model.as_ref().unwrap();
            assert_eq!(model.iter().collect::<Vec<_>>(), want, "session {s}");
            offset += messages.len();
        }
        // the long session's old outputs are cleared, the recent ones cut
        let fates = &got[0].fate;
        assert!(fates.contains(&Fate::Cleared) && fates.contains(&Fate::Cut));
        assert_eq!(got[1].hidden[0], Hidden::BeforePivot);
        assert_eq!(got[2].message, vec![Some(0)]);
    }
}
