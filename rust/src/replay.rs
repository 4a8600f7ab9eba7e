//! Replay in the engine: what every model call of a stored run would have
//! been sent under a policy, walked per session over the part table (the
//! sessions in parallel), as `replay_session` in
//! python/ctxcompact/tuning/replay.py walks the live lifecycle.
//!
//! This is the first step of issue 38's part 3: masking (`mask_first`, the
//! policy's prune at every call, the marks accumulating) runs here; a
//! proactive summary does not. At the first call where the live loop would
//! summarize (`CompactionLoop._proactive_reason`), the engine stops that
//! session and says so (`Fallback::Summary`), and the caller replays the
//! session with the live walk. A later step makes summaries resumable. The
//! run's own summaries and compaction markers are left out and its stored
//! prune marks ignored, as the live walk does.
//!
//! Incremental: every stored message keeps the estimates of the model
//! messages it is sent as (`messages::model_messages`), and only the
//! messages whose rendering changes (new marks, the `keep_thinking` window
//! moving past them) are estimated again. A call's prompt is the previous
//! prompt plus the new messages, less what changed; its cached part is the
//! longest common prefix with the previous prompt, model message by model
//! message.

use rayon::prelude::*;

use crate::codes::{flag, part_type, role, status};
use crate::error::{CoreError, Result};
use crate::estimate::Method;
use crate::messages::{model_messages, MessageEstimateConfig, Sent, SentKind};
use crate::part_json::pinned;
use crate::prune::{Acts, PrefixPrune, PruneConfig, PruneScratch};
use crate::render::{self, Render};
use crate::table::{Message, PartTable};

/// What a replay runs under.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// How the prompt is rendered and estimated (the config's policy).
    pub view: MessageEstimateConfig,
    /// The policy's prune without a summary, when its `acts` says (at every
    /// call: `mask_first` or a policy that acts per call; when a user turn
    /// ends: over the history before the next user message), or none.
    pub mask: Option<PruneConfig>,
    /// Tokens of the system prompt as the first chat message (0: none).
    pub system_tokens: u64,
    /// The proactive budget: a summary fires once the history (the prompt
    /// less the system message) reaches `threshold` tokens (`None`: never,
    /// auto compaction off or no limits).
    pub threshold: Option<u64>,
    /// The budget's tokens for the history (`TokenBudget.available`).
    pub available: u64,
    /// The usable input window (`None`: unlimited): a prompt over it is
    /// `over_window`, and pinned and system messages over it stop no call.
    pub usable: Option<u64>,
}

/// What the caller knows of each message (one entry per message, in table
/// order across sessions) from its JSON: when it was created, the output
/// tokens its usage records (0: none), and its API call id (a Claude Code
/// message's `message.id`: the messages of one call make one model call).
#[derive(Debug, Clone, Default)]
pub struct MessageFacts {
    pub created: Vec<Option<i64>>,
    pub output: Vec<u64>,
    pub call: Vec<Option<String>>,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub session: usize,
    pub call: usize,
    /// First row of the assistant message that makes the call.
    pub row: usize,
    pub prompt: u64,
    pub cached: u64,
    pub output: u64,
    pub baseline_prompt: u64,
    pub baseline_cached: u64,
    pub over_window: bool,
    /// Milliseconds since the session's previous call with a created time
    /// (`None`: this call or every earlier one has none). Whether a cache
    /// still held the previous prompt is the caller's rule (at pricing).
    pub since_previous_ms: Option<i64>,
    /// The prompt does not start with the previous prompt followed by the
    /// new messages as they were sent (masks, reasoning dropped, cut
    /// outputs): the caller scores what it removed (`tuning.retention`).
    pub changed: bool,
    /// Rows this call's mask cleared (newest first).
    pub cleared: Vec<usize>,
}

/// Why a session was left to the live walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// A proactive summary would fire at this call (its index).
    Summary(usize),
    /// The run's own summary or compaction marker holds a tool part (no
    /// reader writes one): the walk could not leave it out.
    Compacted,
}

/// The calls of one session, or why the engine left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReplay {
    pub calls: Vec<Call>,
    pub fallback: Option<Fallback>,
}

/// Replay every session of `table` (the sessions in parallel).
pub fn replay(
    table: &PartTable<'_>,
    facts: &MessageFacts,
    config: &ReplayConfig,
) -> Result<Vec<SessionReplay>> {
    table.check_lengths(config.view.method, true)?;
    let prefix = config
        .mask
        .as_ref()
        .map(|m| PrefixPrune::new(table, m))
        .transpose()?;
    let messages: Vec<Vec<Message>> = (0..table.sessions.len())
        .into_par_iter()
        .map(|s| table.messages(s))
        .collect::<Result<_>>()?;
    let mut offsets = Vec::with_capacity(messages.len());
    let mut n = 0;
    for m in &messages {
        offsets.push(n);
        n += m.len();
    }
    if facts.created.len() != n || facts.output.len() != n || facts.call.len() != n {
        return Err(CoreError::Config(format!(
            "replay: the message facts have {}, {} and {} entries for {n} messages",
            facts.created.len(),
            facts.output.len(),
            facts.call.len()
        )));
    }
    (0..table.sessions.len())
        .into_par_iter()
        .map_init(
            // Each thread marks its own copy of the flags.
            || (table.clone(), PruneScratch::default()),
            |(own, scratch), s| {
                let walk = Walk {
                    table: own,
                    messages: &messages[s],
                    facts,
                    first: offsets[s],
                    config,
                    prefix: prefix.as_ref(),
                };
                walk.run(s, scratch)
            },
        )
        .collect()
}

/// One stored message as the prompt holds it.
#[derive(Default, Clone)]
struct Shown {
    /// Per model message: its identity and rendering state (`key`) and tokens.
    sent: Vec<(u64, u64)>,
    total: u64,
    thinking: bool,
}

struct Walk<'w, 't, 'a> {
    table: &'w mut PartTable<'a>,
    messages: &'w [Message],
    facts: &'w MessageFacts,
    first: usize,
    config: &'w ReplayConfig,
    prefix: Option<&'w PrefixPrune<'t, 'a>>,
}

/// The bits of a key that hold the rendering state (0: as OpenCode's view sends it).
const STATE: u64 = (1 << 22) - 1;

/// The identity and state of a model message: equal keys, equal messages.
fn key(sent: &Sent, state: u64) -> u64 {
    let kind = match sent.kind {
        SentKind::Message => 0u64,
        SentKind::Result => 1,
        SentKind::Observation => 2,
    };
    (kind << 62) | ((sent.row as u64) << 22) | (state & STATE)
}

impl<'a> Walk<'_, '_, 'a> {
    fn run(self, s: usize, scratch: &mut PruneScratch<'a>) -> Result<SessionReplay> {
        let Walk {
            table,
            messages,
            facts,
            first,
            config,
            prefix,
        } = self;
        let rows = table.sessions[s].clone();
        // The run's own summaries and compaction markers are not replayed
        // (the policy decides compactions): the walk leaves them out, as the
        // live walk does. One holding a tool part (no reader writes one) is
        // left to the live walk.
        let own = |m: &Message| {
            (m.role == role::ASSISTANT && table.flags[m.rows.start] & flag::SUMMARY != 0)
                || m.rows
                    .clone()
                    .any(|r| table.part_type[r] == part_type::COMPACTION)
        };
        let (mut kept, mut index) = (Vec::with_capacity(messages.len()), Vec::new());
        for (j, m) in messages.iter().enumerate() {
            if !own(m) {
                kept.push(m.clone());
                index.push(first + j);
            } else if m
                .rows
                .clone()
                .any(|r| table.part_type[r] == part_type::TOOL)
            {
                return Ok(SessionReplay {
                    calls: Vec::new(),
                    fallback: Some(Fallback::Compacted),
                });
            }
        }
        let messages = &kept[..];
        // The run's stored prune marks are not replayed: the policy decides.
        for f in &mut table.flags[rows] {
            *f &= !flag::COMPACTED;
        }
        let view = config.view;
        let default = MessageEstimateConfig {
            render: Render::default(),
            ..view
        };
        let keep = view.render.keep_thinking as usize;
        let mut shown: Vec<Shown> = Vec::with_capacity(messages.len());
        let mut assistants: Vec<usize> = Vec::new();
        let mut buffer: Vec<Sent> = Vec::new();
        let mut calls = Vec::new();
        // The history's tokens (system message apart), and the previous call's state.
        let mut history = 0u64;
        let mut previous: Option<usize> = None; // messages in the previous prompt
        let mut previous_prompt = 0u64;
        // The first model message (message, position) changed since the previous call.
        let mut changed: Option<(usize, usize)> = None;
        let mut baseline = config.system_tokens;
        let mut baseline_previous = 0u64;
        let mut last_time: Option<i64> = None;
        let mut last_call: Option<&str> = None;
        // Messages appended since the previous call whose rendering is not
        // the one they were appended with (`pending` in the live walk).
        let mut pending_differs = false;
        let mut pending_any = false;
        // A policy that acts when a user turn ends: the first user message
        // (one with text) after the newest assistant message, if any.
        let acts = config.mask.as_ref().map(|m| m.acts);
        let mut turn_end: Option<usize> = None;
        let mut answered = false;
        // Re-render message `j` and note where it first differs.
        let rerender = |table: &PartTable<'a>,
                        j: usize,
                        shown: &mut Vec<Shown>,
                        buffer: &mut Vec<Sent>,
                        history: &mut u64,
                        changed: &mut Option<(usize, usize)>,
                        previous: Option<usize>|
         -> Result<()> {
            let fresh = render_keys(table, &messages[j], view, shown[j].thinking, buffer)?;
            let old = &shown[j];
            let at = old
                .sent
                .iter()
                .zip(&fresh.sent)
                .position(|(a, b)| a != b)
                .or((old.sent.len() != fresh.sent.len())
                    .then(|| old.sent.len().min(fresh.sent.len())));
            if let (Some(p), Some(n)) = (at, previous) {
                if j < n && changed.is_none_or(|c| (j, p) < c) {
                    *changed = Some((j, p));
                }
            }
            *history = *history - old.total + fresh.total;
            shown[j] = fresh;
            Ok(())
        };
        for (j, msg) in messages.iter().enumerate() {
            let m = index[j];
            let assistant = msg.role == role::ASSISTANT;
            let call_id = facts.call[m].as_deref().filter(|_| assistant);
            let same_call = call_id.is_some() && call_id == last_call;
            if assistant {
                last_call = call_id;
            } else if msg.role == role::USER
                && answered
                && turn_end.is_none()
                && msg
                    .rows
                    .clone()
                    .any(|r| table.part_type[r] == part_type::TEXT)
            {
                turn_end = Some(j);
            }
            // The message alone, as OpenCode's view sends it (the baseline's
            // message, and the reply's estimate when no usage is recorded).
            buffer.clear();
            model_messages(table, msg, default, false, &[], &mut |x| buffer.push(x))?;
            let alone: u64 = buffer.iter().map(|x| x.tokens).sum();
            let reply = buffer.first().map_or(0, |x| x.tokens);
            if assistant && !same_call {
                let mut cleared = Vec::new();
                let upto = match acts {
                    Some(Acts::Call) => Some(j),
                    Some(Acts::Turn) => turn_end,
                    _ => None,
                };
                if let (Some(prefix), Some(upto)) = (prefix, upto) {
                    let result = prefix.prune(table, &messages[..upto], scratch)?;
                    for &row in &result.rows {
                        table.flags[row] |= flag::COMPACTED;
                    }
                    let mut touched: Vec<usize> = result
                        .rows
                        .iter()
                        .map(|&row| messages.partition_point(|m| m.rows.end <= row))
                        .collect();
                    touched.sort_unstable();
                    touched.dedup();
                    for k in touched {
                        rerender(
                            table,
                            k,
                            &mut shown,
                            &mut buffer,
                            &mut history,
                            &mut changed,
                            previous,
                        )?;
                    }
                    cleared = result.rows;
                }
                // The new messages' own renderings count as changed too.
                for entry in &shown[previous.unwrap_or(0)..j] {
                    pending_any |= !entry.sent.is_empty();
                    pending_differs |= entry.sent.iter().any(|(key, _)| key & STATE != 0);
                }
                let prompt = config.system_tokens + history;
                if let Some(threshold) = config.threshold {
                    if history >= threshold
                        && !spared(table, messages, &shown[..j], config, history)?
                    {
                        return Ok(SessionReplay {
                            calls: Vec::new(),
                            fallback: Some(Fallback::Summary(calls.len())),
                        });
                    }
                }
                let created = facts.created[m];
                let since_previous_ms = created.zip(last_time).map(|(now, last)| now - last);
                if created.is_some() {
                    last_time = created;
                }
                // The raw common prefix: a cache's lifetime is applied at pricing.
                let cached = match (previous, changed) {
                    (None, _) => 0,
                    (Some(_), None) => previous_prompt,
                    (Some(_), Some((k, p))) => {
                        config.system_tokens
                            + shown[..k].iter().map(|x| x.total).sum::<u64>()
                            + shown[k].sent[..p.min(shown[k].sent.len())]
                                .iter()
                                .map(|x| x.1)
                                .sum::<u64>()
                    }
                };
                // The live walk scores a call whose prompt does not start with
                // the previous prompt and the new messages as appended (the
                // first call: the system message is not among them).
                let first_call_with_system = previous.is_none() && config.system_tokens > 0;
                let rescore =
                    changed.is_some() || pending_differs || (first_call_with_system && pending_any);
                let output = match facts.output[m] {
                    0 => reply,
                    n => n,
                };
                calls.push(Call {
                    session: s,
                    call: calls.len(),
                    row: msg.rows.start,
                    prompt,
                    cached,
                    output,
                    baseline_prompt: baseline,
                    baseline_cached: baseline_previous,
                    over_window: config.usable.is_some_and(|u| prompt > u),
                    since_previous_ms,
                    changed: rescore,
                    cleared,
                });
                previous = Some(j);
                previous_prompt = prompt;
                baseline_previous = baseline;
                changed = None;
                pending_differs = false;
                pending_any = false;
            }
            // Appended: the newest step sends its reasoning; the step
            // `keep_thinking` back no longer does.
            baseline += alone;
            let thinking = assistant && keep > 0;
            let mut entry = render_keys(table, msg, view, thinking, &mut buffer)?;
            entry.thinking = thinking;
            history += entry.total;
            shown.push(entry);
            if assistant {
                answered = true;
                turn_end = None;
                assistants.push(j);
                if keep > 0 && assistants.len() > keep {
                    let k = assistants[assistants.len() - 1 - keep];
                    if shown[k].thinking {
                        shown[k].thinking = false;
                        if has_reasoning(table, &messages[k], view.method) {
                            rerender(
                                table,
                                k,
                                &mut shown,
                                &mut buffer,
                                &mut history,
                                &mut changed,
                                previous,
                            )?;
                        }
                    }
                }
            }
        }
        Ok(SessionReplay {
            calls,
            fallback: None,
        })
    }
}

/// The model messages of `msg` under `view`, each with its key (see `key`):
/// the rendering state is whether its reasoning is sent and how many of its
/// calls are sent cleared (the message), whether the output is cleared or
/// cut (a result).
fn render_keys(
    table: &PartTable<'_>,
    msg: &Message,
    view: MessageEstimateConfig,
    thinking: bool,
    buffer: &mut Vec<Sent>,
) -> Result<Shown> {
    buffer.clear();
    model_messages(table, msg, view, thinking, &[], &mut |x| buffer.push(x))?;
    let mut shown = Shown {
        sent: Vec::with_capacity(buffer.len()),
        total: 0,
        thinking,
    };
    for sent in buffer.iter() {
        let state = match sent.kind {
            SentKind::Message if msg.role == role::ASSISTANT => {
                let reasoning = thinking && has_reasoning(table, msg, view.method);
                let cleared = match view.render.clear_inputs {
                    true => msg
                        .rows
                        .clone()
                        .filter(|&r| {
                            table.part_type[r] == part_type::TOOL
                                && table.flags[r] & flag::COMPACTED != 0
                        })
                        .count() as u64,
                    false => 0,
                };
                u64::from(reasoning) | (cleared << 1)
            }
            SentKind::Message => 0,
            SentKind::Result | SentKind::Observation => {
                let row = sent.row;
                let cleared = table.flags[row] & flag::COMPACTED != 0;
                let finished = matches!(
                    table.status.as_ref().map(|s| s[row]),
                    Some(status::COMPLETED) | Some(status::ERROR)
                );
                let cut = match view.render.truncate_output {
                    Some(budget) if finished && !cleared => {
                        render::truncated(table.output_text(row), budget).is_some()
                            && !pinned(table, row)?
                    }
                    _ => false,
                };
                u64::from(cleared) | (u64::from(cut) << 1)
            }
        };
        shown.sent.push((key(sent, state), sent.tokens));
        shown.total += sent.tokens;
    }
    Ok(shown)
}

/// The message has reasoning to send (a non-empty reasoning part).
fn has_reasoning(table: &PartTable<'_>, msg: &Message, method: Method) -> bool {
    msg.rows.clone().any(|r| {
        table.part_type[r] == part_type::REASONING
            && match table.output.is_some() {
                true => !table.output_text(r).is_empty(),
                false => table.output_units(r, method) > 0,
            }
    })
}

/// The live loop's guards before any compaction (`_proactive_reason`):
/// the pinned and system messages alone over the usable window (no
/// compaction could help: the call is sent as it is), or over the threshold
/// while the history fits (a summary could not bring it under).
fn spared(
    table: &PartTable<'_>,
    messages: &[Message],
    shown: &[Shown],
    config: &ReplayConfig,
    history: u64,
) -> Result<bool> {
    let mut fixed = 0u64;
    for (msg, entry) in messages.iter().zip(shown) {
        let stays = msg.role == role::SYSTEM
            || msg
                .rows
                .clone()
                .try_fold(false, |any, r| Ok::<_, CoreError>(any || pinned(table, r)?))?;
        if stays {
            fixed += entry.total;
        }
    }
    if config
        .usable
        .is_some_and(|u| fixed + config.system_tokens > u)
    {
        return Ok(true);
    }
    let threshold = config.threshold.unwrap_or(0);
    Ok(fixed >= threshold && history <= config.available)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;

    fn config(mask: bool) -> ReplayConfig {
        ReplayConfig {
            view: MessageEstimateConfig::default(),
            mask: mask.then(|| PruneConfig {
                protect: 100,
                minimum: 0,
                acts: Acts::Call,
                ..PruneConfig::default()
            }),
            system_tokens: 0,
            threshold: None,
            available: 0,
            usable: None,
        }
    }

    fn run(sessions: &[(&str, Vec<M>)], config: &ReplayConfig) -> Vec<SessionReplay> {
        run_at(sessions, config, |_| None)
    }

    /// `run` with each message created at `created(its index)`.
    fn run_at(
        sessions: &[(&str, Vec<M>)],
        config: &ReplayConfig,
        created: impl Fn(usize) -> Option<i64>,
    ) -> Vec<SessionReplay> {
        let batches = [batch(sessions)];
        let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let n: usize = (0..table.sessions.len())
            .map(|s| table.messages(s).unwrap().len())
            .sum();
        let facts = MessageFacts {
            created: (0..n).map(created).collect(),
            output: vec![0; n],
            call: vec![None; n],
        };
        replay(&table, &facts, config).unwrap()
    }

    /// Each step reads a big output; users ask between steps.
    fn long_run(steps: usize) -> Vec<M> {
        let mut run = vec![user("u0", vec![text("task")])];
        for i in 0..steps {
            run.push(assistant(&format!("a{i}"), "u0", vec![tool("read", 4_000)]));
            run.push(user(&format!("u{}", i + 1), vec![text("next")]));
        }
        run
    }

    /// The prompt of each call, estimated from scratch over the history.
    fn from_scratch(sessions: &[(&str, Vec<M>)]) -> Vec<u64> {
        let batches = [batch(sessions)];
        let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let messages = table.messages(0).unwrap();
        let mut out = Vec::new();
        for (j, m) in messages.iter().enumerate() {
            if m.role == role::ASSISTANT {
                let e = crate::messages::estimates_of(
                    &table,
                    &messages[..j],
                    MessageEstimateConfig::default(),
                    &[],
                    None,
                )
                .unwrap();
                out.push(e.iter().map(|x| x.tokens).sum());
            }
        }
        out
    }

    #[test]
    fn without_masks_the_prompt_is_the_history_and_all_of_it_cached() {
        let sessions = [("s", long_run(4))];
        let got = run(&sessions, &config(false));
        assert_eq!(got[0].fallback, None);
        let prompts: Vec<u64> = got[0].calls.iter().map(|c| c.prompt).collect();
        assert_eq!(prompts, from_scratch(&sessions));
        for pair in got[0].calls.windows(2) {
            assert_eq!(pair[1].cached, pair[0].prompt);
            assert!(!pair[1].changed && pair[1].cleared.is_empty());
        }
        assert_eq!(got[0].calls[0].cached, 0);
        assert!(got[0].calls.iter().all(|c| c.prompt == c.baseline_prompt));
    }

    #[test]
    fn each_call_has_the_gap_since_the_last_call_with_a_time_and_its_raw_cached_prefix() {
        // Calls are messages 1, 3, 5 and 7: the second has no time, the
        // fourth comes an hour after the third.
        let mut times = [None; 9];
        times[1] = Some(1_000);
        times[5] = Some(2_500);
        times[7] = Some(3_602_500);
        let got = run_at(&[("s", long_run(4))], &config(false), |m| times[m]);
        let gaps: Vec<Option<i64>> = got[0].calls.iter().map(|c| c.since_previous_ms).collect();
        assert_eq!(gaps, [None, None, Some(1_500), Some(3_600_000)]);
        // However long the gap, the cached part is the common prefix (a
        // cache's lifetime is applied at pricing).
        let last = &got[0].calls[3];
        assert_eq!(last.cached, got[0].calls[2].prompt);
        assert_eq!(last.baseline_cached, got[0].calls[2].baseline_prompt);
    }

    #[test]
    fn masks_accumulate_and_cut_the_cached_prefix_where_they_clear() {
        let got = run(&[("s", long_run(6))], &config(true));
        let calls = &got[0].calls;
        let masked: Vec<&Call> = calls.iter().filter(|c| !c.cleared.is_empty()).collect();
        assert!(!masked.is_empty());
        for c in &masked {
            assert!(c.changed);
            assert!(c.cached < calls[c.call - 1].prompt);
            assert!(c.prompt < c.baseline_prompt);
        }
        // Every cleared row is cleared once.
        let mut rows: Vec<usize> = calls.iter().flat_map(|c| c.cleared.clone()).collect();
        let n = rows.len();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), n);
    }

    #[test]
    fn a_summary_falls_back_and_a_runs_own_compaction_is_left_out() {
        let mut c = config(false);
        c.threshold = Some(5_000);
        c.available = 10_000;
        c.usable = Some(10_000);
        let got = run(&[("s", long_run(6))], &c);
        assert!(matches!(got[0].fallback, Some(Fallback::Summary(k)) if k > 0));
        assert!(got[0].calls.is_empty());
        // The same run, compacted by itself halfway: the same calls.
        let mut own = long_run(6);
        own.insert(5, user("c1", vec![compaction()]));
        own.insert(6, summary("c2", "c1"));
        let plain = run(&[("s", long_run(6))], &config(true));
        let compacted = run(&[("s", own)], &config(true));
        let strip = |r: &SessionReplay| -> Vec<(u64, u64, u64, usize)> {
            r.calls
                .iter()
                .map(|c| (c.prompt, c.cached, c.baseline_prompt, c.cleared.len()))
                .collect()
        };
        assert_eq!(compacted[0].fallback, None);
        assert_eq!(strip(&compacted[0]), strip(&plain[0]));
    }

    #[test]
    fn a_policy_that_acts_on_turns_masks_only_when_a_user_turn_ends() {
        // Two user turns of three steps each, then a third turn.
        let mut msgs = vec![user("u0", vec![text("task")])];
        for t in 0..3 {
            if t > 0 {
                msgs.push(user(&format!("u{t}"), vec![text("next")]));
            }
            for i in 0..3 {
                msgs.push(assistant(
                    &format!("a{t}{i}"),
                    "u0",
                    vec![tool("read", 4_000)],
                ));
            }
        }
        let mut c = config(true);
        c.mask.as_mut().unwrap().acts = Acts::Turn;
        c.mask.as_mut().unwrap().turn = crate::prune::TurnUnit::Step;
        c.mask.as_mut().unwrap().protect_turns = 0;
        let got = run(&[("s", msgs.clone())], &c);
        let masked: Vec<usize> = got[0]
            .calls
            .iter()
            .filter(|c| !c.cleared.is_empty())
            .map(|c| c.call)
            .collect();
        // Only the first call of the second and third turns (calls 3 and 6).
        assert_eq!(masked, vec![3, 6]);
        // At every call, the same policy masks more often.
        let every = run(&[("s", msgs)], &config_steps());
        let each: usize = every[0]
            .calls
            .iter()
            .filter(|c| !c.cleared.is_empty())
            .count();
        assert!(each > masked.len());
    }

    fn config_steps() -> ReplayConfig {
        let mut c = config(true);
        c.mask.as_mut().unwrap().turn = crate::prune::TurnUnit::Step;
        c.mask.as_mut().unwrap().protect_turns = 0;
        c
    }
}
