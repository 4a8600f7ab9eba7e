//! Replay in the engine: what every model call of a stored run would have
//! been sent under a policy, walked per session over the part table (the
//! sessions in parallel), as `replay_session` in
//! python/ctxcompact/tuning/replay.py walks the live lifecycle.
//!
//! Issue 38's part 3: masking (`mask_first`, the policy's prune at every
//! call, the marks accumulating) runs here; a proactive summary does not.
//! At the call where the live loop would summarize
//! (`CompactionLoop._proactive_reason`), the engine stops that session and
//! says where, with its state (`Fallback::Summary`, `Stop`): the caller makes
//! that call (the summary written offline or by a model) and resumes the
//! session here (`resume`) from what the summary left visible. The run's own
//! summaries and compaction markers are left out and its stored prune marks
//! ignored, as the live walk does.
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

/// The calls of one session, or why the engine left it. A session
/// stopped for a summary keeps the calls before it, and `stop` says where
/// it stopped: the caller summarizes there and resumes (`resume`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReplay {
    pub calls: Vec<Call>,
    pub fallback: Option<Fallback>,
    pub stop: Option<Stop>,
}

/// Where a session stopped for a summary (`Fallback::Summary`): the walk's
/// state before that call, for the caller to make the call (summary
/// included) and resume after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// The call's index in the session.
    pub call: usize,
    /// First row of the assistant message that makes the call. Its mask is
    /// the caller's to make again (the live loop masks before it summarizes).
    pub row: usize,
    /// The prompt without compaction before the call (`baseline_prompt`).
    pub baseline: u64,
    /// The created time of the session's latest call with one.
    pub last_time: Option<i64>,
}

/// Where a session resumes after the caller made a summary's call: the
/// session (a table of its own) starts with the `head` messages the live
/// flow stores by then (the run's messages so far, each compaction marker,
/// summary and continue message; their marks kept, none left out as the
/// run's own), then the run's messages from the one that made the call
/// (appended, no call) on. The head messages not `hidden` are that call's
/// prompt (what the summaries left visible); the hidden ones are not sent,
/// but the policy's prune reads them as the live loop's does (the whole
/// stored session: the calls it counts, where its walk stops).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    pub head: usize,
    /// Per head message: not sent (before the newest summary's marker, not
    /// a system or pinned message). Empty: none hidden.
    pub hidden: Vec<bool>,
    /// The index of the summary's call: the next call is `first_call + 1`.
    pub first_call: usize,
    /// The prompt without compaction at the summary's call.
    pub baseline: u64,
    /// The created time of the session's latest call with one.
    pub last_time: Option<i64>,
    /// No summary fires any more (the live loop's guard after
    /// `max_attempts` compactions that all left the history too big).
    pub stalled: bool,
}

/// Replay every session of `table` (the sessions in parallel).
pub fn replay(
    table: &PartTable<'_>,
    facts: &MessageFacts,
    config: &ReplayConfig,
) -> Result<Vec<SessionReplay>> {
    replay_from(table, facts, config, &[])
}

/// `replay`, each session resumed after a summary (`Resume`, one per
/// session of `table`, in order; one with `head` 0 is walked from its start).
pub fn resume(
    table: &PartTable<'_>,
    facts: &MessageFacts,
    config: &ReplayConfig,
    states: &[Resume],
) -> Result<Vec<SessionReplay>> {
    if states.len() != table.sessions.len() {
        return Err(CoreError::Config(format!(
            "replay: {} resume states for {} sessions",
            states.len(),
            table.sessions.len()
        )));
    }
    replay_from(table, facts, config, states)
}

/// Token counts and call indices the walk adds to: none is a count past
/// 2^53 (no transcript holds that many tokens), so no sum overflows.
const MAX_COUNT: u64 = 1 << 53;

/// The caller's counts are counts (`MAX_COUNT`), else a config error naming
/// the one at fault.
fn check_counts(config: &ReplayConfig, states: &[Resume]) -> Result<()> {
    let over = |what: String, n: u64| match n > MAX_COUNT {
        true => Err(CoreError::Config(format!(
            "replay: {what} is {n}, over 2^53: not a count"
        ))),
        false => Ok(()),
    };
    over("system_tokens".into(), config.system_tokens)?;
    for (s, r) in states.iter().enumerate() {
        over(format!("session {s}'s resume baseline"), r.baseline)?;
        over(
            format!("session {s}'s resume first_call"),
            r.first_call as u64,
        )?;
    }
    Ok(())
}

fn replay_from(
    table: &PartTable<'_>,
    facts: &MessageFacts,
    config: &ReplayConfig,
    states: &[Resume],
) -> Result<Vec<SessionReplay>> {
    table.check_lengths(config.view.method, true)?;
    check_counts(config, states)?;
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
                // head 0: nothing before, the session is walked from its start
                walk.run(s, states.get(s).filter(|r| r.head > 0), scratch)
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
    fn run(
        self,
        s: usize,
        resume: Option<&Resume>,
        scratch: &mut PruneScratch<'a>,
    ) -> Result<SessionReplay> {
        let Walk {
            table,
            messages,
            facts,
            first,
            config,
            prefix,
        } = self;
        let head = resume.map_or(0, |r| r.head.min(messages.len()));
        let Some((kept, index)) = replayed(table, messages, first, head) else {
            return Ok(SessionReplay {
                calls: Vec::new(),
                fallback: Some(Fallback::Compacted),
                stop: None,
            });
        };
        // The run's stored prune marks are not replayed: the policy decides
        // (the marks of a resumed session's head are the live flow's).
        let rows = messages
            .get(head)
            .map_or(table.sessions[s].end, |m| m.rows.start)
            ..table.sessions[s].end;
        for f in &mut table.flags[rows] {
            *f &= !flag::COMPACTED;
        }
        let mut session = Session {
            table,
            messages: &kept,
            index: &index,
            facts,
            config,
            prefix,
            scratch,
            session: s,
            shown: Vec::with_capacity(kept.len()),
            assistants: Vec::new(),
            buffer: Vec::new(),
            calls: Vec::new(),
            history: 0,
            previous: None,
            previous_prompt: 0,
            changed: None,
            baseline: config.system_tokens,
            baseline_previous: 0,
            last_time: None,
            last_call: None,
            pending_differs: false,
            pending_any: false,
            turns: TurnEnd::default(),
            first_call: 0,
            stalled: false,
            stop: None,
            hidden: Vec::new(),
        };
        let mut from = 0;
        if let Some(r) = resume {
            session.restore(r)?;
            from = head + 1;
        }
        for j in from..kept.len() {
            if let Some(fallback) = session.step(j)? {
                return Ok(SessionReplay {
                    calls: session.calls,
                    fallback: Some(fallback),
                    stop: session.stop,
                });
            }
        }
        Ok(SessionReplay {
            calls: session.calls,
            fallback: None,
            stop: None,
        })
    }
}

/// The messages of a session the walk replays, each with its index in the
/// facts: the run's own summaries and compaction markers are not replayed
/// (the policy decides compactions), as the live walk leaves them out.
/// `None`: one of them holds a tool part (no reader writes one), left to the
/// live walk.
pub(crate) fn replayed(
    table: &PartTable<'_>,
    messages: &[Message],
    first: usize,
    head: usize,
) -> Option<(Vec<Message>, Vec<usize>)> {
    let own = |m: &Message| {
        (m.role == role::ASSISTANT && table.flags[m.rows.start] & flag::SUMMARY != 0)
            || m.rows
                .clone()
                .any(|r| table.part_type[r] == part_type::COMPACTION)
    };
    let (mut kept, mut index) = (Vec::with_capacity(messages.len()), Vec::new());
    for (j, m) in messages.iter().enumerate() {
        if j < head || !own(m) {
            kept.push(m.clone());
            index.push(first + j);
        } else if m
            .rows
            .clone()
            .any(|r| table.part_type[r] == part_type::TOOL)
        {
            return None;
        }
    }
    Some((kept, index))
}

/// One session's walk, message by message: the prompt each model call sends.
struct Session<'r, 't, 'a> {
    table: &'r mut PartTable<'a>,
    /// The messages replayed (see `replayed`) and each one's index in `facts`.
    messages: &'r [Message],
    index: &'r [usize],
    facts: &'r MessageFacts,
    config: &'r ReplayConfig,
    prefix: Option<&'r PrefixPrune<'t, 'a>>,
    scratch: &'r mut PruneScratch<'a>,
    session: usize,
    /// Each message appended so far, as the prompt holds it.
    shown: Vec<Shown>,
    /// The assistant messages appended (the `keep_thinking` window).
    assistants: Vec<usize>,
    buffer: Vec<Sent>,
    calls: Vec<Call>,
    /// The history's tokens (system message apart).
    history: u64,
    /// The previous call's state: the messages in its prompt, its tokens.
    previous: Option<usize>,
    previous_prompt: u64,
    /// The first model message (message, position) changed since the previous call.
    changed: Option<(usize, usize)>,
    /// The prompt and the previous prompt without compaction, as OpenCode's view sends it.
    baseline: u64,
    baseline_previous: u64,
    last_time: Option<i64>,
    last_call: Option<&'r str>,
    /// Messages appended since the previous call whose rendering is not
    /// the one they were appended with (`pending` in the live walk).
    pending_differs: bool,
    pending_any: bool,
    /// A policy that acts when a user turn ends: where one ended.
    turns: TurnEnd,
    /// The index of the session's first call made here (`Resume`).
    first_call: usize,
    /// No summary fires (`Resume::stalled`).
    stalled: bool,
    /// Where the walk stopped for a summary.
    stop: Option<Stop>,
    /// The head messages not sent (`Resume::hidden`).
    hidden: Vec<bool>,
}

/// Where a user turn ended since the last model call: the first user
/// message with text after the newest assistant message (the history before
/// it is the turn that ended), or none (no assistant message yet, or none
/// since). A policy that acts on turns prunes there (`Acts::Turn`); the live
/// loop asks the same rule (`turn_end`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnEnd {
    answered: bool,
    end: Option<usize>,
}

impl TurnEnd {
    /// Message `j` is a user message; `has_text`: does it hold a text part.
    pub fn user(&mut self, j: usize, has_text: impl FnOnce() -> bool) {
        if self.answered && self.end.is_none() && has_text() {
            self.end = Some(j);
        }
    }

    /// An assistant message: a turn ends only after it.
    pub fn answered(&mut self) {
        self.answered = true;
        self.end = None;
    }

    pub fn end(&self) -> Option<usize> {
        self.end
    }
}

/// `TurnEnd` over a whole session: (role, has a text part) per message, oldest first.
pub fn turn_end(messages: impl IntoIterator<Item = (u8, bool)>) -> Option<usize> {
    let mut turns = TurnEnd::default();
    for (j, (r, has_text)) in messages.into_iter().enumerate() {
        match r {
            role::ASSISTANT => turns.answered(),
            role::USER => turns.user(j, || has_text),
            _ => {}
        }
    }
    turns.end()
}

impl Session<'_, '_, '_> {
    /// The state after the summary's call of `r`: the head appended (in
    /// that call's prompt, as the live view renders it), then the message
    /// that made the call appended.
    fn restore(&mut self, r: &Resume) -> Result<()> {
        let head = r.head.min(self.messages.len());
        self.hidden = r.hidden.clone();
        for j in 0..head {
            self.continues_call(j);
            if self.hidden(j) {
                // Not sent: nothing in the prompt, still a turn's answer.
                self.shown.push(Shown::default());
                if self.messages[j].role == role::ASSISTANT {
                    self.turns.answered();
                }
            } else {
                self.append(j, 0)?;
            }
        }
        self.first_call = r.first_call + 1;
        self.stalled = r.stalled;
        self.baseline = r.baseline;
        self.baseline_previous = r.baseline;
        self.last_time = r.last_time;
        self.previous = Some(head);
        self.previous_prompt = self.config.system_tokens + self.history;
        if head < self.messages.len() {
            // The summary's call is made: its message is appended.
            self.continues_call(head);
            let alone = self.alone(head)?.0;
            self.append(head, alone)?;
        }
        Ok(())
    }

    /// Message `j` is not sent (`Resume::hidden`).
    fn hidden(&self, j: usize) -> bool {
        self.hidden.get(j).copied().unwrap_or(false)
    }

    /// The tokens of message `j` alone as OpenCode's view sends it (the
    /// baseline's message), and of its first model message (the reply's
    /// estimate when no usage is recorded).
    fn alone(&mut self, j: usize) -> Result<(u64, u64)> {
        let default = MessageEstimateConfig {
            render: Render::default(),
            ..self.config.view
        };
        let buffer = &mut self.buffer;
        buffer.clear();
        model_messages(
            self.table,
            &self.messages[j],
            default,
            false,
            &[],
            &mut |x| buffer.push(x),
        )?;
        let alone: u64 = buffer.iter().map(|x| x.tokens).sum();
        Ok((alone, buffer.first().map_or(0, |x| x.tokens)))
    }

    /// Walk message `j`: the call it makes (an assistant message starting a
    /// new API call), then its appending. `Some`: the engine stops here.
    fn step(&mut self, j: usize) -> Result<Option<Fallback>> {
        let assistant = self.messages[j].role == role::ASSISTANT;
        let same_call = self.continues_call(j);
        let (alone, reply) = self.alone(j)?;
        if assistant && !same_call {
            if let Some(fallback) = self.call(j, reply)? {
                return Ok(Some(fallback));
            }
        }
        self.append(j, alone)?;
        Ok(None)
    }

    /// Whether message `j` is an assistant message of the previous
    /// assistant message's API call; notes where a user turn ends.
    fn continues_call(&mut self, j: usize) -> bool {
        let (msg, facts) = (&self.messages[j], self.facts);
        let assistant = msg.role == role::ASSISTANT;
        let call_id = facts.call[self.index[j]].as_deref().filter(|_| assistant);
        let same_call = call_id.is_some() && call_id == self.last_call;
        if assistant {
            self.last_call = call_id;
        } else if msg.role == role::USER {
            let rows = msg.rows.clone();
            let table = &*self.table;
            self.turns.user(j, || {
                rows.into_iter()
                    .any(|r| table.part_type[r] == part_type::TEXT)
            });
        }
        same_call
    }

    /// The model call assistant message `j` makes (`reply`: its estimate
    /// without recorded usage): the mask, then the call, unless a proactive
    /// summary would fire first.
    fn call(&mut self, j: usize, reply: u64) -> Result<Option<Fallback>> {
        let cleared = self.mask(j)?;
        self.note_pending(j);
        let config = self.config;
        let prompt = config.system_tokens + self.history;
        if self.summary_due(j)? {
            let call = self.first_call + self.calls.len();
            self.stop = Some(Stop {
                call,
                row: self.messages[j].rows.start,
                baseline: self.baseline,
                last_time: self.last_time,
            });
            return Ok(Some(Fallback::Summary(call)));
        }
        let m = self.index[j];
        let created = self.facts.created[m];
        let since_previous_ms = match created.zip(self.last_time) {
            Some((now, last)) => Some(now.checked_sub(last).ok_or_else(|| {
                CoreError::InvalidUsage(format!(
                    "replay: message {m} was created at {now} ms, too far from the previous \
                     call's {last} ms for a gap in milliseconds"
                ))
            })?),
            None => None,
        };
        if created.is_some() {
            self.last_time = created;
        }
        let output = match self.facts.output[m] {
            0 => reply,
            n => n,
        };
        self.calls.push(Call {
            session: self.session,
            call: self.first_call + self.calls.len(),
            row: self.messages[j].rows.start,
            prompt,
            cached: self.cached(),
            output,
            baseline_prompt: self.baseline,
            baseline_cached: self.baseline_previous,
            over_window: config.usable.is_some_and(|u| prompt > u),
            since_previous_ms,
            changed: self.rescore(),
            cleared,
        });
        self.previous = Some(j);
        self.previous_prompt = prompt;
        self.baseline_previous = self.baseline;
        self.changed = None;
        self.pending_differs = false;
        self.pending_any = false;
        Ok(None)
    }

    /// The policy's prune before the call of message `j`, when its `acts`
    /// says (every call: the history so far; a user turn ended: the history
    /// before its user message): marks what it clears and re-renders those
    /// messages. The rows cleared (newest first).
    fn mask(&mut self, j: usize) -> Result<Vec<usize>> {
        let upto = match self.config.mask.as_ref().map(|m| m.acts) {
            Some(Acts::Call) => Some(j),
            Some(Acts::Turn) => self.turns.end(),
            _ => None,
        };
        let (Some(prefix), Some(upto)) = (self.prefix, upto) else {
            return Ok(Vec::new());
        };
        let messages = self.messages;
        let result = prefix.prune(self.table, &messages[..upto], self.scratch)?;
        for &row in &result.rows {
            self.table.flags[row] |= flag::COMPACTED;
        }
        let mut touched: Vec<usize> = result
            .rows
            .iter()
            .map(|&row| messages.partition_point(|m| m.rows.end <= row))
            .collect();
        touched.sort_unstable();
        touched.dedup();
        for k in touched {
            self.rerender(k)?;
        }
        Ok(result.rows)
    }

    /// Re-render message `j` and note where it first differs (a hidden
    /// one stays unsent).
    fn rerender(&mut self, j: usize) -> Result<()> {
        if self.hidden(j) {
            return Ok(());
        }
        let (msg, view) = (&self.messages[j], self.config.view);
        let fresh = render_keys(
            self.table,
            msg,
            view,
            self.shown[j].thinking,
            &mut self.buffer,
        )?;
        let old = &self.shown[j];
        let at = old
            .sent
            .iter()
            .zip(&fresh.sent)
            .position(|(a, b)| a != b)
            .or((old.sent.len() != fresh.sent.len()).then(|| old.sent.len().min(fresh.sent.len())));
        if let (Some(p), Some(n)) = (at, self.previous) {
            if j < n && self.changed.is_none_or(|c| (j, p) < c) {
                self.changed = Some((j, p));
            }
        }
        self.history = self.history - old.total + fresh.total;
        self.shown[j] = fresh;
        Ok(())
    }

    /// The new messages' own renderings (since the previous call, up to
    /// message `j`) count as changed too.
    fn note_pending(&mut self, j: usize) {
        for entry in &self.shown[self.previous.unwrap_or(0)..j] {
            self.pending_any |= !entry.sent.is_empty();
            self.pending_differs |= entry.sent.iter().any(|(key, _)| key & STATE != 0);
        }
    }

    /// The live loop would summarize before the call of message `j`: the
    /// history reaches the threshold and no guard (`spared`) holds.
    fn summary_due(&self, j: usize) -> Result<bool> {
        if self.stalled {
            return Ok(false);
        }
        match self.config.threshold {
            Some(threshold) if self.history >= threshold => Ok(!spared(
                self.table,
                self.messages,
                &self.shown[..j],
                self.config,
                self.history,
            )?),
            _ => Ok(false),
        }
    }

    /// The raw common prefix with the previous prompt: a cache's lifetime
    /// is applied at pricing.
    fn cached(&self) -> u64 {
        match (self.previous, self.changed) {
            (None, _) => 0,
            (Some(_), None) => self.previous_prompt,
            (Some(_), Some((k, p))) => {
                let shown = &self.shown;
                self.config.system_tokens
                    + shown[..k].iter().map(|x| x.total).sum::<u64>()
                    + shown[k].sent[..p.min(shown[k].sent.len())]
                        .iter()
                        .map(|x| x.1)
                        .sum::<u64>()
            }
        }
    }

    /// The live walk scores a call whose prompt does not start with the
    /// previous prompt and the new messages as appended (the first call:
    /// the system message is not among them).
    fn rescore(&self) -> bool {
        let first_call_with_system = self.previous.is_none() && self.config.system_tokens > 0;
        self.changed.is_some()
            || self.pending_differs
            || (first_call_with_system && self.pending_any)
    }

    /// Append message `j` (`alone`: its baseline tokens). The newest step
    /// sends its reasoning; the step `keep_thinking` back no longer does.
    fn append(&mut self, j: usize, alone: u64) -> Result<()> {
        let (msg, view) = (&self.messages[j], self.config.view);
        let assistant = msg.role == role::ASSISTANT;
        let keep = view.render.keep_thinking as usize;
        self.baseline += alone;
        let thinking = assistant && keep > 0;
        let mut entry = render_keys(self.table, msg, view, thinking, &mut self.buffer)?;
        entry.thinking = thinking;
        self.history += entry.total;
        self.shown.push(entry);
        if assistant {
            self.turns.answered();
            self.assistants.push(j);
            if keep > 0 && self.assistants.len() > keep {
                let k = self.assistants[self.assistants.len() - 1 - keep];
                if self.shown[k].thinking {
                    self.shown[k].thinking = false;
                    if has_reasoning(self.table, &self.messages[k], view.method) {
                        self.rerender(k)?;
                    }
                }
            }
        }
        Ok(())
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
        with_facts(sessions, created, |table, facts| {
            replay(table, facts, config).unwrap()
        })
    }

    /// `walk` over the sessions' table and their message facts (each
    /// message created at `created(its index)`, no output, no call).
    fn with_facts<R>(
        sessions: &[(&str, Vec<M>)],
        created: impl Fn(usize) -> Option<i64>,
        walk: impl FnOnce(&PartTable<'_>, &MessageFacts) -> R,
    ) -> R {
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
        walk(&table, &facts)
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
        let Some(Fallback::Summary(k)) = got[0].fallback else {
            panic!("no summary: {:?}", got[0].fallback)
        };
        assert!(k > 0);
        // The calls before the summary are kept, and where it stopped said.
        assert_eq!(got[0].calls.len(), k);
        let stop = got[0].stop.as_ref().unwrap();
        assert_eq!(stop.call, k);
        assert_eq!(stop.row, got[0].calls[k - 1].row + 2);
        assert!(stop.baseline > got[0].calls[k - 1].baseline_prompt);
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

    /// `sessions` resumed with `states` (one per session).
    fn resumed(
        sessions: &[(&str, Vec<M>)],
        config: &ReplayConfig,
        states: &[Resume],
    ) -> Vec<SessionReplay> {
        with_facts(
            sessions,
            |_| None,
            |table, facts| resume(table, facts, config, states).unwrap(),
        )
    }

    #[test]
    fn counts_past_2_53_and_times_too_far_apart_are_typed_errors() {
        // Found by tools/fuzz/fuzz.rs: each overflowed (a panic, an internal error in Python).
        let sessions = [("s", long_run(2))];
        let mut big = config(false);
        big.system_tokens = u64::MAX;
        let got = with_facts(&sessions, |_| None, |t, f| replay(t, f, &big));
        assert!(
            matches!(&got, Err(CoreError::Config(w)) if w.contains("system_tokens")),
            "{got:?}"
        );
        // the calls' messages (1 and 3) created at the two ends of time
        let got = with_facts(
            &sessions,
            |i| Some(if i == 1 { i64::MIN } else { i64::MAX }),
            |t, f| replay(t, f, &config(false)),
        );
        assert!(
            matches!(&got, Err(CoreError::InvalidUsage(w)) if w.contains("too far")),
            "{got:?}"
        );
        for (baseline, first_call) in [(u64::MAX, 0), (0, usize::MAX)] {
            let state = Resume {
                head: 1,
                baseline,
                first_call,
                ..Resume::default()
            };
            let got = with_facts(
                &sessions,
                |_| None,
                |t, f| resume(t, f, &config(false), &[state]),
            );
            assert!(
                matches!(&got, Err(CoreError::Config(w)) if w.contains("resume")),
                "{got:?}"
            );
        }
    }

    #[test]
    fn a_resumed_session_starts_from_its_head_as_the_previous_prompt() {
        // What a summary left visible (the task, the marker, the summary, the
        // continue turn), then the step that made the summary's call and two more.
        let head = vec![
            user("u0", vec![text("task")]),
            user("c1", vec![compaction()]),
            summary("c2", "c1"),
            user("c3", vec![text("continue")]),
        ];
        let mut session = head.clone();
        for i in 0..3 {
            session.push(assistant(&format!("a{i}"), "u0", vec![tool("read", 4_000)]));
            session.push(user(&format!("n{i}"), vec![text("next")]));
        }
        let state = Resume {
            head: head.len(),
            hidden: Vec::new(),
            first_call: 7,
            baseline: 50_000,
            last_time: None,
            stalled: false,
        };
        let got = resumed(
            &[("s", session.clone())],
            &config(false),
            std::slice::from_ref(&state),
        );
        let calls = &got[0].calls;
        // The summary's call (7) was the caller's: the two after it are made here.
        assert_eq!(calls.iter().map(|c| c.call).collect::<Vec<_>>(), [8, 9]);
        // Its prompt is the whole head (the run's own marker and summary are
        // not left out), cached whole by the next call; nothing changed.
        // (from_scratch: a prompt per assistant message, the summary's first.)
        let prompts = from_scratch(&[("s", session.clone())]);
        assert_eq!(calls[0].prompt, prompts[2]);
        assert_eq!(calls[1].prompt, prompts[3]);
        assert_eq!(calls[1].cached, calls[0].prompt);
        assert_eq!(calls[0].cached, prompts[1]);
        assert!(calls.iter().all(|c| !c.changed));
        // The baseline goes on from the caller's.
        assert!(calls[0].baseline_prompt > state.baseline);
        assert_eq!(calls[0].baseline_cached, state.baseline);
        // A summary fires again at the first call where it is due, unless stalled.
        let mut c = config(false);
        c.threshold = Some(1);
        c.available = 1_000_000;
        c.usable = Some(1_000_000);
        let again = resumed(&[("s", session.clone())], &c, std::slice::from_ref(&state));
        assert_eq!(again[0].fallback, Some(Fallback::Summary(8)));
        assert!(again[0].calls.is_empty());
        let stalled = Resume {
            stalled: true,
            ..state
        };
        let on = resumed(&[("s", session)], &c, &[stalled]);
        assert_eq!((on[0].fallback.as_ref(), on[0].calls.len()), (None, 2));
    }

    fn config_steps() -> ReplayConfig {
        let mut c = config(true);
        c.mask.as_mut().unwrap().turn = crate::prune::TurnUnit::Step;
        c.mask.as_mut().unwrap().protect_turns = 0;
        c
    }
}
