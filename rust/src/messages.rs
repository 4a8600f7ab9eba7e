//! Message-level estimates of the model input: what `to_model_messages`
//! (python/ctxcompact/scans/view.py) sends for each stored message, estimated as
//! `estimate_chat_messages` (python/ctxcompact/scans/chat.py) estimates it. The two
//! paths are one definition and are tested equal message by message:
//!
//! - every *model* message costs `overhead`; an assistant message with N tool
//!   calls becomes N + 1 model messages (the call message and one `tool`
//!   result each), so it costs N + 1 overheads;
//! - a message's content is estimated once, over its texts joined as they are
//!   sent (`"\n\n"` between blocks, `"\n"` when a user message holds an image
//!   and is sent as a list of blocks), not part by part; an image costs
//!   `IMAGE_TOKENS`, whatever its URL (a data URL's base64 is not text the
//!   model reads);
//! - a tool call costs its name plus its arguments as compact JSON (the
//!   `input` column as stored, `{}` when there is none); its result is the
//!   output, the error text, or a placeholder (a pruned output counts as its
//!   placeholder, an unfinished tool as the interrupted error);
//! - a text-protocol step's tool part (`observed`: SWE-agent, mini-swe-agent)
//!   sends no call: its command is already in the assistant's text, and its
//!   result is the next user message (one overhead and the result, as a
//!   `tool` message costs); an assistant message with no text and no other
//!   call is not sent itself;
//! - a message with nothing to send (only reasoning or step markers, ignored
//!   text, ...) is not sent and costs 0.

use arrow_array::Array;
use std::borrow::Cow;

use rayon::prelude::*;

use crate::codes::{flag, part_type, role, status};
use crate::columns::{Keys, Lengths, Plain, StrChunk, StrCol};
use crate::error::{CoreError, Result};
use crate::estimate::{estimate, estimate_units, text_units, Method, Units};
use crate::part_json::{
    ignored, may_be_ignored, may_ignore, may_observe, observed, part_json, pinned,
};
use crate::pivot::Visible;
use crate::render::{
    self, Render, CLEARED_INPUT, CLEARED_TOOL_OUTPUT, COMPACTION_QUESTION, INTERRUPTED_TOOL,
};
use crate::table::{Message, PartTable};

/// What one image block is estimated to cost: about the most Anthropic (1.15
/// megapixels / 750), OpenAI (high detail, 85 + 170 per 512-pixel tile) and
/// Gemini (258 per 768-pixel tile) charge for a screenshot-sized image.
pub const IMAGE_TOKENS: u64 = 1600;

/// Part type code of a file part (docs/schema.md).
const FILE: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageEstimateConfig {
    pub method: Method,
    /// Tokens added per model message (role and separators).
    pub overhead: u64,
    /// How the policy renders tool parts (placeholders, cut outputs).
    pub render: Render,
}

impl Default for MessageEstimateConfig {
    fn default() -> Self {
        MessageEstimateConfig {
            method: Method::Opencode,
            overhead: 4,
            render: Render::default(),
        }
    }
}

/// First row of a message and its estimated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageTokens {
    pub row: usize,
    pub tokens: u64,
}

/// Tokens of the messages a session shows (from its pivot on, and its
/// pinned messages before it).
pub fn tokens_visible(messages: &[MessageTokens], visible: &Visible) -> u64 {
    messages
        .iter()
        .filter(|m| visible.shows(m.row))
        .map(|m| m.tokens)
        .sum()
}

/// Per session, the estimate of every message, oldest first.
pub fn estimate_messages(
    table: &PartTable<'_>,
    config: MessageEstimateConfig,
) -> Result<Vec<Vec<MessageTokens>>> {
    table.check_lengths(config.method, true)?;
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| session_estimates(table, s, config, &[]))
        .collect()
}

/// The estimate of every message of session `s`, oldest first. `known`:
/// (row, tokens) of outputs already estimated (a prune walk's), sorted by row;
/// they are not read again.
pub fn session_estimates(
    table: &PartTable<'_>,
    s: usize,
    config: MessageEstimateConfig,
    known: &[(usize, u64)],
) -> Result<Vec<MessageTokens>> {
    estimates_of(table, &table.messages(s)?, config, known, None)
}

/// `session_estimates` over a session's messages already split; with `only`,
/// the messages it does not show count 0 and are not read.
pub fn estimates_of(
    table: &PartTable<'_>,
    messages: &[Message],
    config: MessageEstimateConfig,
    known: &[(usize, u64)],
    only: Option<&Visible>,
) -> Result<Vec<MessageTokens>> {
    let thinking = sends_thinking(messages, config.render.keep_thinking);
    // `known` is sorted by row, as are the messages: each message gets its
    // own slice of it, found by a cursor instead of a search per part.
    let mut k = 0;
    messages
        .iter()
        .zip(thinking)
        .map(|(msg, thinking)| {
            while k < known.len() && known[k].0 < msg.rows.start {
                k += 1;
            }
            let from = k;
            while k < known.len() && known[k].0 < msg.rows.end {
                k += 1;
            }
            // Messages the model does not see (behind the pivot) are not read.
            let tokens = match only {
                Some(v) if !v.shows(msg.rows.start) => 0,
                _ => message_tokens(table, msg, config, thinking, &known[from..k])?,
            };
            Ok(MessageTokens {
                row: msg.rows.start,
                tokens,
            })
        })
        .collect()
}

/// Per message, whether it sends its reasoning: only the newest `keep`
/// assistant messages do (`reasoning_content`).
fn sends_thinking(messages: &[Message], keep: u32) -> Vec<bool> {
    let mut steps = messages
        .iter()
        .filter(|m| m.role == role::ASSISTANT)
        .count();
    messages
        .iter()
        .map(|msg| {
            if msg.role == role::ASSISTANT {
                steps -= 1;
            }
            (steps as u64) < u64::from(keep)
        })
        .collect()
}

/// Per session, every model message its stored messages are sent as
/// (`model_messages`), oldest first: `estimate_messages` split by model
/// message (an assistant's call message and each of its results), so a
/// chat list read as a session gets one count per chat message.
pub fn sent_messages(
    table: &PartTable<'_>,
    config: MessageEstimateConfig,
) -> Result<Vec<Vec<Sent>>> {
    table.check_lengths(config.method, true)?;
    (0..table.sessions.len())
        .into_par_iter()
        .map(|s| session_sent(table, &table.messages(s)?, config))
        .collect()
}

/// `sent_messages` of one session's messages, already split.
pub fn session_sent(
    table: &PartTable<'_>,
    messages: &[Message],
    config: MessageEstimateConfig,
) -> Result<Vec<Sent>> {
    let thinking = sends_thinking(messages, config.render.keep_thinking);
    let mut out = Vec::new();
    for (msg, thinking) in messages.iter().zip(thinking) {
        model_messages(table, msg, config, thinking, &[], &mut |sent| {
            out.push(sent)
        })?;
    }
    Ok(out)
}

/// Lower and upper bounds of a length in an additive method's units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub lo: u64,
    pub hi: u64,
}

impl Span {
    fn exact(n: u64) -> Self {
        Span { lo: n, hi: n }
    }

    /// A text of `bytes` UTF-8 bytes: one UTF-16 unit per 1 to 3 bytes (a
    /// 4-byte character is 2), exactly its bytes for `ceil-bytes`.
    fn of_bytes(bytes: usize, method: Method) -> Self {
        let hi = bytes as u64;
        match method {
            Method::Opencode => Span {
                lo: hi.div_ceil(3),
                hi,
            },
            // a token is at least one byte (and a text of bytes at least one token)
            Method::Exact { .. } => Span { lo: hi.min(1), hi },
            _ => Span::exact(hi),
        }
    }

    fn add(&mut self, other: Span) {
        self.lo += other.lo;
        self.hi += other.hi;
    }

    /// The estimate of each end (estimates are monotone in the length).
    fn tokens(self, method: Method) -> Span {
        Span {
            lo: estimate_units(self.lo, method),
            hi: estimate_units(self.hi, method),
        }
    }
}

/// Bounds of what `estimates_of` sums over `messages` (with `only`, over
/// the messages it shows), for a decision that rarely needs the estimate
/// itself (a trigger). Every length is taken from byte offsets, no text
/// read, as a `Span`, but the outputs in `known` (a walk's estimates) and,
/// given `outputs`, every other output: those are read, and each output's
/// (row, tokens) goes to `outputs` by row, so that an estimate that follows
/// need not read them again. A text that may be ignored, or reasoning a
/// step may not send, counts in the upper bound only. `None` when the
/// method is not additive or a rendering needs the text (file parts,
/// described placeholders, cut outputs).
pub fn tokens_within(
    table: &PartTable<'_>,
    messages: &[Message],
    config: MessageEstimateConfig,
    known: &[(usize, u64)],
    only: Option<&Visible>,
    outputs: Option<&mut Vec<(usize, u64)>>,
) -> Option<Within> {
    let method = config.method;
    if !method.additive() || config.render.truncate_output.is_some() {
        return None;
    }
    let output = |row: usize| output_span(table, row, method);
    // Content of `units` in `blocks` blocks joined by "\n\n", as `Content::tokens`.
    let joined = |mut units: Span, blocks: u64| {
        units.add(Span::exact(
            text_units(b"\n\n", method) * blocks.saturating_sub(1),
        ));
        units.tokens(method)
    };
    let mut total = Span::default();
    let mut tools = ToolBounds {
        known,
        k: 0,
        outputs,
        bounded: false,
    };
    // Text parts marked ignored are rare: one search rules them out.
    let may_ignore = match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => may_ignore(table, first.rows.start..last.rows.end),
        _ => false,
    };
    // So are text-protocol steps (`observed`) outside their formats.
    let may_observe = match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => may_observe(table, first.rows.start..last.rows.end),
        _ => false,
    };
    // Only the newest `keep_thinking` steps send their reasoning (as `estimates_of`).
    let mut steps = messages
        .iter()
        .filter(|m| m.role == role::ASSISTANT)
        .count();
    for msg in messages {
        if msg.role == role::ASSISTANT {
            steps -= 1;
        }
        if only.is_some_and(|v| !v.shows(msg.rows.start)) {
            continue;
        }
        // The content's units and blocks: at least (`lo`, `sure`), at most (`hi`, `blocks`).
        let (mut units, mut blocks, mut sure) = (Span::default(), 0u64, 0u64);
        // A text that may be ignored: in the upper bound only.
        let maybe = |units: &mut Span, blocks: &mut u64, n: Span| {
            units.hi += n.hi;
            *blocks += u64::from(n.hi > 0);
        };
        // A text part: sent for sure unless its JSON mentions `ignored`.
        let text_part = |units: &mut Span, blocks: &mut u64, sure: &mut u64, row: usize| {
            let n = output(row);
            if may_ignore && may_be_ignored(table, row) {
                maybe(units, blocks, n);
            } else {
                units.add(n);
                *sure += u64::from(n.hi > 0);
                *blocks += u64::from(n.hi > 0);
            }
        };
        match msg.role {
            role::ASSISTANT => {
                let thinking = (steps as u64) < u64::from(config.render.keep_thinking);
                let (mut reasoning, mut thoughts) = (Span::default(), 0u64);
                let (mut calls, mut sent) = (Span::default(), 0u64);
                for row in msg.rows.clone() {
                    match table.part_type[row] {
                        part_type::TEXT => text_part(&mut units, &mut blocks, &mut sure, row),
                        part_type::REASONING if thinking => {
                            let n = output(row);
                            reasoning.add(n);
                            thoughts += u64::from(n.hi > 0);
                        }
                        part_type::TOOL => {
                            sent += tools.add(table, row, config, may_observe, &mut calls)?;
                        }
                        _ => {}
                    }
                }
                // Sent for sure with a call or a text that cannot be ignored;
                // its results (observations included) are sent either way.
                let mut message = calls;
                if blocks > 0 || sent > 0 {
                    message.hi += config.overhead
                        + joined(units, blocks).hi
                        + if thoughts > 0 {
                            joined(reasoning, thoughts).hi
                        } else {
                            0
                        };
                }
                if sent > 0 || sure > 0 {
                    let part = |units, blocks| match blocks {
                        0 => 0,
                        _ => joined(units, blocks).lo,
                    };
                    message.lo += config.overhead + part(units, sure) + part(reasoning, thoughts);
                }
                total.add(message);
                continue;
            }
            role::SYSTEM => {
                for row in msg.rows.clone() {
                    if table.part_type[row] == part_type::TEXT {
                        text_part(&mut units, &mut blocks, &mut sure, row);
                    }
                }
            }
            _ => {
                for row in msg.rows.clone() {
                    match table.part_type[row] {
                        part_type::TEXT => text_part(&mut units, &mut blocks, &mut sure, row),
                        // A marker a hook cancelled (ignored) is not sent.
                        part_type::COMPACTION if ignored(table, row).unwrap_or(true) => maybe(
                            &mut units,
                            &mut blocks,
                            Span::of_bytes(COMPACTION_QUESTION.len(), method),
                        ),
                        part_type::COMPACTION => {
                            units.add(Span::of_bytes(COMPACTION_QUESTION.len(), method));
                            sure += 1;
                            blocks += 1;
                        }
                        FILE => return None,
                        _ => {}
                    }
                }
            }
        }
        if blocks > 0 {
            total.hi += config.overhead + joined(units, blocks).hi;
        }
        if sure > 0 {
            total.lo += config.overhead + joined(units, sure).lo;
        }
    }
    Some(Within {
        span: total,
        outputs_bounded: tools.bounded,
    })
}

/// What `tokens_within` reads of the tool parts: the outputs `known` (a
/// cursor over them by row), those it reads and hands on (`outputs`), and
/// whether an output's bounds were left apart (`bounded`).
struct ToolBounds<'k, 'o> {
    known: &'k [(usize, u64)],
    k: usize,
    outputs: Option<&'o mut Vec<(usize, u64)>>,
    bounded: bool,
}

impl ToolBounds<'_, '_> {
    /// A tool part's call and result, added to its message's `calls`: 1 if
    /// the call is sent, 0 for a text-protocol step (its result a user
    /// message); `None` when the rendering needs the text.
    fn add(
        &mut self,
        table: &PartTable<'_>,
        row: usize,
        config: MessageEstimateConfig,
        may_observe: bool,
        calls: &mut Span,
    ) -> Option<u64> {
        let method = config.method;
        let constant = |text: &str| Span::exact(estimate(text, method));
        let bytes = |n: usize| Span::of_bytes(n, method).tokens(method);
        let cleared = table.flags[row] & flag::COMPACTED != 0;
        let known = self.known;
        while self.k < known.len() && known[self.k].0 < row {
            self.k += 1;
        }
        let result = match (finished(table, row), cleared) {
            (false, _) => constant(INTERRUPTED_TOOL),
            (true, true) if config.render.describe => return None,
            (true, true) => constant(CLEARED_TOOL_OUTPUT),
            _ => match (known.get(self.k), self.outputs.as_deref_mut()) {
                (Some(&(r, tokens)), outputs) if r == row => {
                    if let Some(outputs) = outputs {
                        outputs.push((row, tokens));
                    }
                    Span::exact(tokens)
                }
                (_, Some(outputs)) => {
                    let tokens = table.output_tokens(row, method);
                    outputs.push((row, tokens));
                    Span::exact(tokens)
                }
                (_, None) => {
                    let n = output_span(table, row, method);
                    self.bounded |= n.lo != n.hi;
                    n.tokens(method)
                }
            },
        };
        // A text-protocol step's result is a user message (none when empty:
        // its overhead in the upper bound only, unless it costs a token); no call.
        if may_observe && observed(table, row).unwrap_or(false) {
            calls.hi += config.overhead + result.hi;
            if result.lo > 0 {
                calls.lo += config.overhead + result.lo;
            }
            return Some(0);
        }
        calls.add(Span::exact(config.overhead));
        calls.add(result);
        // Lengths only: no string is read.
        let tool = table.tool.as_ref().and_then(|c| c.byte_len(row));
        calls.add(bytes(tool.unwrap_or(0)));
        calls.add(bytes(sent_input_len(table, row, config)));
        Some(1)
    }
}

/// A text of the output column: its length counted once, or its bytes.
fn output_span(table: &PartTable<'_>, row: usize, method: Method) -> Span {
    match (method, table.output_utf16.as_ref()) {
        (Method::Opencode, Some(lengths)) if lengths.get(row) != crate::columns::NO_LENGTH => {
            Span::exact(lengths.get(row))
        }
        _ => Span::of_bytes(table.output_text(row).len(), method),
    }
}

/// Coarse bounds of what `estimates_of` sums over the messages `only`
/// shows, from sums over their rows in tight passes, no work per message
/// and no branch per row: for the opencode method on a table with
/// `output_utf16` and tool names dictionary-encoded, for sessions where
/// every call is in an assistant message, finished and not cleared (`None`
/// otherwise, or where a row needs more than lengths: a file part, an
/// uncounted text). Outputs count exactly, from their counts; inputs from
/// their byte lengths (exact when ASCII, see `About`); names between the
/// shortest and the longest name of the dictionary; texts, reasoning and
/// the messages' overheads in the upper bound with a separator per block
/// and the rounding per message, and texts alone in `About::texts`.
pub fn tokens_about(
    table: &PartTable<'_>,
    messages: &[Message],
    config: MessageEstimateConfig,
    only: &Visible,
) -> Option<About> {
    let render = config.render;
    if config.method != Method::Opencode || render.truncate_output.is_some() {
        return None;
    }
    let statuses = table.status.as_deref()?;
    let lengths = table.output_utf16.as_ref()?;
    let tok = |units: u64| (units + 2) / 4;
    // Messages the model does not see (behind the pivot) are not read.
    let from = messages.partition_point(|m| m.rows.start < only.start);
    let m = (messages.len() - from + only.pinned.len()) as u64;
    let mut sums = Sums::default();
    // Bytes of the calls' names and inputs: exact (ASCII) and at least.
    let (mut exact, mut least, mut hi) = (0u64, 0u64, 0u64);
    for (a, b) in only.ranges() {
        if a == b {
            continue;
        }
        let rows = a..b;
        let pt = &table.part_type[rows.clone()];
        let codes = Codes {
            part_type: pt,
            role: &table.role[rows.clone()],
            status: &statuses[rows.clone()],
            flags: &table.flags[rows.clone()],
        };
        let tools = sums.tools;
        let n = rows.len();
        match lengths {
            Lengths::InPlace {
                values,
                nulls: None,
            } => {
                let values = &values[rows.clone()];
                about_rows(&codes, n, |j| values[j] as u64, &mut sums)
            }
            Lengths::InPlace { .. } => about_rows(&codes, n, |j| lengths.get(a + j), &mut sums),
            Lengths::Owned(values) => {
                let values = &values[rows.clone()];
                about_rows(&codes, n, |j| values[j], &mut sums)
            }
        }
        if sums.off {
            return None;
        }
        let tools = sums.tools - tools;
        let others = rows.len() as u64 - tools;
        // Calls with a value: at least the values there are, less the rows
        // that are not calls.
        let valued = |nulls: Option<&arrow_buffer::NullBuffer>, at: usize| {
            let values = match nulls {
                None => rows.len(),
                Some(n) => n.inner().slice(at, rows.len()).count_set_bits(),
            };
            (values as u64).saturating_sub(others).min(tools)
        };
        // Names: between the dictionary's shortest and longest value.
        match table.tool.as_ref() {
            None => {}
            Some(c) => match c.chunk_of(rows.clone())? {
                (
                    StrChunk::Dict {
                        keys: Keys::I32(k),
                        values,
                    },
                    local,
                ) if values.len() <= 256 => {
                    let lens = (0..values.len()).map(|v| values.byte_len(v).unwrap_or(0) as u64);
                    let (short, long) = lens.fold((u64::MAX, 0), |(s, l), n| (s.min(n), l.max(n)));
                    let short = short.min(long);
                    let named = valued(k.nulls(), local.start);
                    hi += tools * tok(long);
                    exact += named * tok(short);
                    least += named * tok(short.div_ceil(3));
                }
                _ => return None,
            },
        }
        // Inputs: a call without one sends `{}`.
        let (bytes, null_calls) = match table.input.as_ref() {
            None => ((0, 0), tools),
            Some(c) => match c.chunk_of(rows.clone())? {
                (StrChunk::Plain(Plain::Large(a)), local) => (
                    call_bytes(pt, a, local.clone()),
                    tools - valued(a.nulls(), local.start),
                ),
                (StrChunk::Plain(Plain::Utf8(a)), local) => (
                    call_bytes(pt, a, local.clone()),
                    tools - valued(a.nulls(), local.start),
                ),
                _ => return None,
            },
        };
        let (input_tokens, input_bytes) = bytes;
        hi += input_tokens + null_calls * tok(2);
        // A null slot's bytes are not the call's: none may be counted.
        if null_calls == 0 {
            exact += input_tokens;
            // floor((ceil(b / 3) + 2) / 4) >= (b / 3 - 1) / 4 per call.
            least += (input_bytes / 3).saturating_sub(tools) / 4;
        }
    }
    let overhead = config.overhead;
    // A text-protocol step's empty observation is not sent (nor its
    // overhead): the calls' overheads are in `About::calls`.
    let calls = sums.tools * overhead + sums.results;
    // Each message: its overhead, and two blocks (content and reasoning)
    // each rounded up by at most 2 units, 2 units of separator per block.
    let mut units = sums.text_units + 2 * sums.texts + 4 * m;
    units += (COMPACTION_QUESTION.len() as u64 + 2) * sums.compactions;
    if render.keep_thinking > 0 {
        units += sums.thought_units + 2 * sums.thoughts;
    }
    Some(About {
        span: Span {
            lo: sums.results,
            hi: calls + hi + m * overhead + units / 4,
        },
        calls: sums.tools * overhead + least,
        ascii: exact.saturating_sub(least),
        // Each message's content rounds down by at most 1 unit.
        texts: sums.text_units.saturating_sub(m) / 4,
    })
}

/// Over the calls among `local` (part types `pt`) of a string column: the
/// sum of each value's tokens from its bytes, and the sum of bytes.
#[inline(always)]
fn call_bytes<O: arrow_array::OffsetSizeTrait>(
    pt: &[u8],
    a: &arrow_array::GenericStringArray<O>,
    local: std::ops::Range<usize>,
) -> (u64, u64) {
    let offsets = &a.value_offsets()[local.start..local.end + 1];
    let (mut tokens, mut bytes) = (0u64, 0u64);
    for (t, w) in pt.iter().zip(offsets.windows(2)) {
        let call = u64::from(*t == part_type::TOOL).wrapping_neg();
        let n = (w[1] - w[0]).as_usize() as u64 & call;
        tokens += ((n + 2) / 4) & call;
        bytes += n;
    }
    (tokens, bytes)
}

/// The code columns over a range of rows.
struct Codes<'a> {
    part_type: &'a [u8],
    role: &'a [u8],
    status: &'a [u8],
    flags: &'a [u8],
}

/// What `about_rows` sums.
#[derive(Default)]
struct Sums {
    tools: u64,
    results: u64,
    texts: u64,
    text_units: u64,
    thoughts: u64,
    thought_units: u64,
    compactions: u64,
    /// A row the bounds cannot take (`tokens_about`).
    off: bool,
}

/// `tokens_about`'s pass over one range of rows: no branch per row.
#[inline(always)]
fn about_rows(codes: &Codes<'_>, n: usize, units: impl Fn(usize) -> u64, sums: &mut Sums) {
    let mask = |b: bool| u64::from(b).wrapping_neg();
    let tok = |units: u64| (units + 2) / 4;
    let mut s = Sums::default();
    let mut off = false;
    // Indexed: `units` reads the lengths as their layout holds them.
    #[allow(clippy::needless_range_loop)]
    for j in 0..n {
        let t = codes.part_type[j];
        let u = units(j);
        let is_tool = t == part_type::TOOL;
        let is_text = t == part_type::TEXT;
        let is_thought = t == part_type::REASONING;
        let sure = (codes.status[j] & !1 == status::COMPLETED)
            & (codes.flags[j] & flag::COMPACTED == 0)
            & (codes.role[j] == role::ASSISTANT);
        let missing = u == crate::columns::NO_LENGTH;
        off |= (t == FILE) | (is_tool & !sure) | (missing & (is_tool | is_text | is_thought));
        let u = u & mask(!missing);
        s.tools += u64::from(is_tool);
        s.results += tok(u) & mask(is_tool);
        s.texts += u64::from(is_text);
        s.text_units += u & mask(is_text);
        s.thoughts += u64::from(is_thought);
        s.thought_units += u & mask(is_thought);
        s.compactions += u64::from(t == part_type::COMPACTION);
    }
    sums.tools += s.tools;
    sums.results += s.results;
    sums.texts += s.texts;
    sums.text_units += s.text_units;
    sums.thoughts += s.thoughts;
    sums.thought_units += s.thought_units;
    sums.compactions += s.compactions;
    sums.off |= off;
}

/// The calls' names and inputs among the rows `only` shows are ASCII (their
/// bytes are their units: `About::ascii` counts).
pub fn calls_ascii(table: &PartTable<'_>, only: &Visible) -> bool {
    let ascii = |c: &Option<StrCol<'_>>| {
        c.as_ref()
            .is_none_or(|c| only.ranges().all(|(a, b)| c.all_ascii(a..b)))
    };
    ascii(&table.tool) && ascii(&table.input)
}

/// What `tokens_about` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The bounds, the lower one with the results only (no texts, names,
    /// inputs or overheads).
    pub span: Span,
    /// What the calls' overheads, names and inputs (at a third of their
    /// bytes) add to the lower bound unless a call may be a text-protocol
    /// step's, which sends no call, nor an empty observation
    /// (`may_observe_calls`): a search left to the sessions that need it.
    pub calls: u64,
    /// What the lower bound gains besides `calls` when names and inputs are
    /// ASCII (`calls_ascii`): their bytes are their units.
    pub ascii: u64,
    /// What the texts add to the lower bound unless a text may be ignored
    /// (`may_ignore_texts`): a search left to the sessions that need it.
    pub texts: u64,
}

/// A tool part of the session's `messages` may be a text-protocol step's,
/// which sends no call (`observed`; `false` is exact: none is).
pub fn may_observe_calls(table: &PartTable<'_>, messages: &[Message]) -> bool {
    match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => may_observe(table, first.rows.start..last.rows.end),
        _ => false,
    }
}

/// A text part of the session's `messages` may be marked ignored (`false`
/// is exact: none is).
pub fn may_ignore_texts(table: &PartTable<'_>, messages: &[Message]) -> bool {
    match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => may_ignore(table, first.rows.start..last.rows.end),
        _ => false,
    }
}

/// What `tokens_within` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Within {
    pub span: Span,
    /// Some output was bounded from its bytes, not counted: reading the
    /// outputs could narrow `span` (on a counted table it cannot).
    pub outputs_bounded: bool,
}

/// Blocks of one message's content. Additive methods sum their length units
/// as they come (a length counted once is enough); the others keep the
/// blocks and read them joined once the separator is known.
struct Content<'a> {
    method: Method,
    units: u64,
    /// Every block, images included.
    blocks: u64,
    images: u64,
    pieces: Vec<Cow<'a, str>>,
}

impl<'a> Content<'a> {
    fn new(method: Method) -> Self {
        Content {
            method,
            units: 0,
            blocks: 0,
            images: 0,
            pieces: Vec::new(),
        }
    }

    /// An image block: `IMAGE_TOKENS`, not the length of its URL.
    fn push_image(&mut self) {
        self.images += 1;
        self.blocks += 1;
    }

    fn push(&mut self, text: Cow<'a, str>) {
        match self.method.additive() {
            true => self.units += text_units(text.as_bytes(), self.method),
            false => self.pieces.push(text),
        }
        self.blocks += 1;
    }

    /// The output column's text at `row` (empty when null), counted once
    /// when the table has its length. Returns whether anything was added.
    fn push_output(&mut self, table: &PartTable<'a>, row: usize) -> bool {
        if self.method.additive() {
            let units = table.output_units(row, self.method);
            self.units += units;
            self.blocks += u64::from(units > 0);
            return units > 0;
        }
        let text = table.output_text(row);
        if !text.is_empty() {
            self.push(Cow::Borrowed(text));
        }
        !text.is_empty()
    }

    /// Tokens of the text blocks joined by `sep` (ASCII), plus the images.
    fn tokens(&self, sep: &str) -> u64 {
        let images = self.images * IMAGE_TOKENS;
        if self.method.additive() {
            let texts = self.blocks - self.images;
            let seps = text_units(sep.as_bytes(), self.method) * texts.saturating_sub(1);
            return estimate_units(self.units + seps, self.method) + images;
        }
        let mut units = Units::new(self.method);
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                units.push(sep.as_bytes());
            }
            units.push(piece.as_bytes());
        }
        units.tokens() + images
    }
}

/// A text part as every message sends it: non-empty and not ignored.
fn push_sent_text<'a>(table: &PartTable<'a>, row: usize, content: &mut Content<'a>) -> Result<()> {
    // The length is all an additive estimate needs (counted once when
    // output_utf16 is there), and it is read once.
    if content.method.additive() {
        let units = table.output_units(row, content.method);
        if units > 0 && !ignored(table, row)? {
            content.units += units;
            content.blocks += 1;
        }
        return Ok(());
    }
    let text = table.output_text(row);
    if !text.is_empty() && !ignored(table, row)? {
        content.push(Cow::Borrowed(text));
    }
    Ok(())
}

/// What one model message of a stored message is (`to_model_messages` in
/// python/ctxcompact/scans/view.py sends them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentKind {
    /// The message itself: a user or system message, or an assistant's text,
    /// reasoning and calls.
    Message,
    /// A `tool` message: the result of the call at `row`.
    Result,
    /// A text-protocol step's result, sent as a user message (`row`: its tool part).
    Observation,
}

/// One model message of a stored message and its estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub kind: SentKind,
    /// The message's first row (`Message`), else the tool part's row.
    pub row: usize,
    pub tokens: u64,
}

/// `thinking`: the message is one of the newest `keep_thinking` steps, so
/// its reasoning is sent (`reasoning_content`).
fn message_tokens(
    table: &PartTable<'_>,
    msg: &Message,
    config: MessageEstimateConfig,
    thinking: bool,
    known: &[(usize, u64)],
) -> Result<u64> {
    let mut total = 0;
    model_messages(table, msg, config, thinking, known, &mut |sent| {
        total += sent.tokens
    })?;
    Ok(total)
}

/// Every model message the stored message `msg` is sent as, in order, to
/// `emit`: an assistant message (unless it has no text and no call), then
/// each call's result, then each text-protocol step's non-empty result; a
/// user or system message with anything to send. `message_tokens` is their sum.
pub fn model_messages(
    table: &PartTable<'_>,
    msg: &Message,
    config: MessageEstimateConfig,
    thinking: bool,
    known: &[(usize, u64)],
    emit: &mut impl FnMut(Sent),
) -> Result<()> {
    let method = config.method;
    let mut content = Content::new(method);
    let first = msg.rows.start;
    match msg.role {
        role::ASSISTANT => {
            let (mut calls, mut sent) = (0u64, 0u64);
            let mut reasoning = Content::new(method);
            let may_observe = may_observe(table, msg.rows.clone());
            let is_observed = |row| Ok::<_, CoreError>(may_observe && observed(table, row)?);
            for row in msg.rows.clone() {
                match table.part_type[row] {
                    part_type::TEXT => push_sent_text(table, row, &mut content)?,
                    part_type::REASONING if thinking => {
                        reasoning.push_output(table, row);
                    }
                    // A text-protocol step's command is in the text: no call.
                    part_type::TOOL if !is_observed(row)? => {
                        calls += estimate(value(&table.tool, row).unwrap_or(""), method)
                            + input_tokens(table, row, config);
                        sent += 1;
                    }
                    _ => {}
                }
            }
            if content.blocks > 0 || sent > 0 {
                let reasoning = match reasoning.blocks {
                    0 => 0,
                    _ => reasoning.tokens("\n\n"),
                };
                emit(Sent {
                    kind: SentKind::Message,
                    row: first,
                    tokens: config.overhead + content.tokens("\n\n") + reasoning + calls,
                });
            }
            let tools = msg
                .rows
                .clone()
                .filter(|&row| table.part_type[row] == part_type::TOOL);
            if sent > 0 {
                for row in tools.clone() {
                    if !is_observed(row)? {
                        let tokens =
                            config.overhead + tool_result_tokens(table, row, config, known)?;
                        emit(Sent {
                            kind: SentKind::Result,
                            row,
                            tokens,
                        });
                    }
                }
            }
            // A text-protocol step's result is a user message (none when empty).
            if may_observe {
                for row in tools {
                    if observed(table, row)? && !empty_result(table, row, config) {
                        let tokens =
                            config.overhead + tool_result_tokens(table, row, config, known)?;
                        emit(Sent {
                            kind: SentKind::Observation,
                            row,
                            tokens,
                        });
                    }
                }
            }
            Ok(())
        }
        role::SYSTEM => {
            for row in msg.rows.clone() {
                if table.part_type[row] == part_type::TEXT {
                    push_sent_text(table, row, &mut content)?;
                }
            }
            if content.blocks > 0 {
                emit(Sent {
                    kind: SentKind::Message,
                    row: first,
                    tokens: sent_content(&content, "\n\n", config),
                });
            }
            Ok(())
        }
        // user, and anything else sent in the user's place
        _ => {
            let mut image = false;
            for row in msg.rows.clone() {
                match table.part_type[row] {
                    part_type::TEXT => push_sent_text(table, row, &mut content)?,
                    // A marker a hook cancelled (ignored) is not sent.
                    part_type::COMPACTION if ignored(table, row)? => {}
                    part_type::COMPACTION => content.push(Cow::Borrowed(COMPACTION_QUESTION)),
                    FILE => match FilePart::read(table, row)?.shown() {
                        FileShown::Image(_) => {
                            image = true;
                            content.push_image();
                        }
                        FileShown::Text(text) => content.push(Cow::Owned(text)),
                    },
                    _ => {}
                }
            }
            if content.blocks > 0 {
                // With an image the content is a list of blocks, whose text is joined by "\n".
                let sep = if image { "\n" } else { "\n\n" };
                emit(Sent {
                    kind: SentKind::Message,
                    row: first,
                    tokens: sent_content(&content, sep, config),
                });
            }
            Ok(())
        }
    }
}

/// A tool part's arguments as its call sends them: `{}` when there are none,
/// the cleared marker when the policy clears the inputs of cleared calls.
pub(crate) fn sent_input<'a>(
    table: &PartTable<'a>,
    row: usize,
    config: MessageEstimateConfig,
) -> &'a str {
    let cleared = table.flags[row] & flag::COMPACTED != 0;
    match value(&table.input, row) {
        _ if cleared && config.render.clear_inputs => CLEARED_INPUT,
        Some(input) => input,
        None => "{}",
    }
}

/// Tokens of the arguments the call at `row` sends (`sent_input`): its
/// exact count kept in the table when the stored input is what is sent and
/// still the text counted, else counted now.
fn input_tokens(table: &PartTable<'_>, row: usize, config: MessageEstimateConfig) -> u64 {
    let input = sent_input(table, row, config);
    let stored = value(&table.input, row).is_some_and(|text| std::ptr::eq(text, input));
    match stored.then(|| table.input_counted(row, config.method)) {
        Some(Some(n)) => n,
        _ => estimate(input, config.method),
    }
}

/// `sent_input(..).len()`, from the column's offsets.
fn sent_input_len(table: &PartTable<'_>, row: usize, config: MessageEstimateConfig) -> usize {
    let cleared = table.flags[row] & flag::COMPACTED != 0;
    match table.input.as_ref().and_then(|c| c.byte_len(row)) {
        _ if cleared && config.render.clear_inputs => CLEARED_INPUT.len(),
        Some(n) => n,
        None => "{}".len(),
    }
}

/// The result of the tool part at `row` is sent as an empty text: it ran to
/// an end, was not cleared and has no output (a cut one is empty only then).
fn empty_result(table: &PartTable<'_>, row: usize, config: MessageEstimateConfig) -> bool {
    if !finished(table, row) || table.flags[row] & flag::COMPACTED != 0 {
        return false;
    }
    match config.method.additive() {
        true => table.output_units(row, config.method) == 0,
        false => table.output_text(row).is_empty(),
    }
}

/// The tool at `row` ran to an end (its result is its output or error text).
pub(crate) fn finished(table: &PartTable<'_>, row: usize) -> bool {
    matches!(
        table.status.as_ref().map(|s| s[row]),
        Some(status::COMPLETED) | Some(status::ERROR)
    )
}

/// The string of an optional column at `row`.
pub(crate) fn value<'a>(column: &Option<StrCol<'a>>, row: usize) -> Option<&'a str> {
    column.as_ref().and_then(|c| c.get(row))
}

fn sent_content(content: &Content<'_>, sep: &str, config: MessageEstimateConfig) -> u64 {
    if content.blocks == 0 {
        0
    } else {
        config.overhead + content.tokens(sep)
    }
}

/// Tokens of what the model sees as the result of the tool part at `row`:
/// the output or error text (cut to head and tail when the policy says so and
/// the part is not pinned), a placeholder when it was cleared, the
/// interrupted error when the tool never finished.
fn tool_result_tokens(
    table: &PartTable<'_>,
    row: usize,
    config: MessageEstimateConfig,
    known: &[(usize, u64)],
) -> Result<u64> {
    let method = config.method;
    if !finished(table, row) {
        return Ok(estimate(INTERRUPTED_TOOL, method));
    }
    let cleared = table.flags[row] & flag::COMPACTED != 0;
    if !cleared && config.render.truncate_output.is_none() {
        if let Ok(i) = known.binary_search_by_key(&row, |&(r, _)| r) {
            return Ok(known[i].1);
        }
    }
    if cleared {
        if !config.render.describe {
            return Ok(estimate(CLEARED_TOOL_OUTPUT, method));
        }
        let part_id = table.part_id.as_ref().ok_or(CoreError::MissingColumn {
            column: "part_id",
            needed_by: "a described placeholder (placeholder = \"describe\")",
        })?;
        let text = render::cleared(
            true,
            value(&table.tool, row).unwrap_or(""),
            value(&table.input, row),
            output_text(
                table,
                row,
                "a described placeholder (placeholder = \"describe\")",
            )?,
            part_id.get(row).unwrap_or(""),
        );
        return Ok(estimate(&text, method));
    }
    match config.render.truncate_output {
        Some(budget) => {
            let output = output_text(table, row, "truncate_output")?;
            Ok(match render::truncated(output, budget) {
                Some(_) if pinned(table, row)? => estimate(output, method),
                Some((head, marker, tail)) => {
                    let mut units = Units::new(method);
                    for piece in [head, marker.as_str(), tail] {
                        units.push(piece.as_bytes());
                    }
                    units.tokens()
                }
                None => estimate(output, method),
            })
        }
        None => Ok(table.output_tokens(row, method)),
    }
}

/// The output text at `row`, for a rendering that needs the text itself (a
/// table read without its outputs, lengths counted once, cannot do it).
pub(crate) fn output_text<'a>(
    table: &PartTable<'a>,
    row: usize,
    needed_by: &'static str,
) -> Result<&'a str> {
    let column = table.output.as_ref().ok_or(CoreError::MissingColumn {
        column: "output",
        needed_by,
    })?;
    Ok(column.get(row).unwrap_or(""))
}

/// The fields of a file part the model input shows.
pub(crate) struct FilePart {
    pub(crate) mime: Option<String>,
    pub(crate) filename: Option<String>,
    pub(crate) url: Option<String>,
}

/// How a file part is sent: an image block (an image with a URL), else a line naming it.
pub(crate) enum FileShown {
    Image(String),
    Text(String),
}

impl FilePart {
    pub(crate) fn shown(self) -> FileShown {
        let url = self.url.filter(|u| !u.is_empty());
        if let Some(url) = url.as_ref() {
            if self.mime.as_deref().unwrap_or("").starts_with("image/") {
                return FileShown::Image(url.clone());
            }
        }
        let name = [self.filename.as_deref(), url.as_deref()]
            .into_iter()
            .flatten()
            .find(|s| !s.is_empty())
            .unwrap_or("file");
        // As Python formats it: a missing mime reads "None".
        let mime = self.mime.as_deref().unwrap_or("None");
        FileShown::Text(format!("[file: {name} ({mime})]"))
    }

    pub(crate) fn read(table: &PartTable<'_>, row: usize) -> Result<Self> {
        let map = part_json(table, row)?.unwrap_or_default();
        let get = |key: &str| map.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        Ok(FilePart {
            mime: get("mime"),
            filename: get("filename"),
            url: get("url"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;

    fn run(msgs: Vec<M>) -> Vec<u64> {
        run_with(msgs, MessageEstimateConfig::default())
    }

    fn run_with(msgs: Vec<M>, config: MessageEstimateConfig) -> Vec<u64> {
        let batches = [batch(&[("s", msgs)])];
        let cols = Columns::from_batches(&batches, Scan::Estimate).unwrap();
        let table = PartTable::new(&cols).unwrap();
        estimate_messages(&table, config).unwrap()[0]
            .iter()
            .map(|m| m.tokens)
            .collect()
    }

    fn render(render: Render) -> MessageEstimateConfig {
        MessageEstimateConfig {
            render,
            ..Default::default()
        }
    }

    #[test]
    fn the_render_options_change_what_a_tool_part_costs() {
        let input = r#"{"path":"a.txt","pad":"0123456789012345678901234567890123456789"}"#;
        let cleared = P {
            compacted: Some(1),
            ..call("read", input, 400)
        };
        let msgs = || {
            vec![assistant(
                "a",
                "u",
                vec![cleared.clone(), call("read", input, 400)],
            )]
        };
        let base = run(msgs())[0];
        // cleared inputs: the cleared call's 64-char arguments cost "{}" instead
        let got = run_with(
            msgs(),
            render(Render {
                clear_inputs: true,
                ..Default::default()
            }),
        );
        assert_eq!(base - got[0], 16 - 1);
        // a 400-char output cut to 2 x 40 chars plus the marker "\n\n[... 320 characters cut ...]\n\n"
        let budget = Render {
            truncate_output: Some(20),
            ..Default::default()
        };
        let got = run_with(msgs(), render(budget));
        assert_eq!(base - got[0], 100 - (80 + 33 + 2) / 4);
        // a pinned output is never cut
        let pinned_msgs = vec![assistant(
            "a",
            "u",
            vec![cleared.clone(), pin(call("read", input, 400))],
        )];
        assert_eq!(run_with(pinned_msgs, render(budget))[0], base);
        // the described placeholder costs its own length
        let text = render::cleared(true, "read", Some(input), &"x".repeat(400), "p0");
        let described = Render {
            describe: true,
            ..Default::default()
        };
        let got = run_with(msgs(), render(described));
        assert_eq!(
            got[0] - base,
            estimate(&text, Method::Opencode) - estimate(CLEARED_TOOL_OUTPUT, Method::Opencode)
        );
    }

    /// `tokens_within` and the exact sum over a session's messages (all
    /// shown, no output known), and with every output known.
    fn within_and_exact(msgs: Vec<M>, config: MessageEstimateConfig) -> (Option<Span>, u64) {
        let batches = [batch(&[("s", msgs)])];
        let cols = Columns::from_batches(&batches, Scan::Estimate).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let messages = table.messages(0).unwrap();
        let exact: u64 = estimates_of(&table, &messages, config, &[], None)
            .unwrap()
            .iter()
            .map(|m| m.tokens)
            .sum();
        // Known outputs are taken as they are (a walk's estimates).
        let known: Vec<(usize, u64)> = (0..table.part_type.len())
            .filter(|&r| table.part_type[r] == part_type::TOOL)
            .map(|r| (r, table.output_tokens(r, config.method)))
            .collect();
        let mut outputs = Vec::new();
        let with_known = tokens_within(&table, &messages, config, &known, None, Some(&mut outputs))
            .map(|w| w.span);
        // Every finished output that was not cleared, by row, as estimated.
        assert!(outputs.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(outputs.iter().all(|o| known.contains(o)));
        let within = tokens_within(&table, &messages, config, &[], None, Some(&mut Vec::new()))
            .map(|w| w.span);
        // Without reading the outputs the bounds only widen.
        let unread = tokens_within(&table, &messages, config, &[], None, None);
        if let (Some(a), Some(b)) = (unread, within) {
            assert!(a.span.lo <= b.lo && b.hi <= a.span.hi);
            // Reading the outputs narrows nothing when none was bounded
            // (what lets a trigger skip that step on a counted table).
            if !a.outputs_bounded {
                assert_eq!(a.span, b);
            }
        }
        if let (Some(a), Some(b)) = (within, with_known) {
            assert!(
                b.lo >= a.lo && b.hi <= a.hi,
                "known outputs only narrow the bounds"
            );
            assert!(b.lo <= exact && exact <= b.hi);
        }
        (within, exact)
    }

    #[test]
    fn the_length_bounds_hold_the_estimate() {
        let cleared = P {
            compacted: Some(1),
            ..call("read", r#"{"path":"a.txt"}"#, 400)
        };
        let running = P {
            status: Some("running"),
            ..tool("bash", 50)
        };
        let ignored = P {
            json: Some(r#"{"ignored":true}"#.into()),
            ..text("not sent")
        };
        let reasoning = P {
            kind: "reasoning",
            output: Some("hmm".into()),
            ..Default::default()
        };
        let session = |t: &str| {
            vec![
                M {
                    role: "system",
                    ..user("s", vec![text("be brief"), text(t)])
                },
                user("u", vec![text(t), ignored.clone(), compaction()]),
                assistant(
                    "a",
                    "u",
                    vec![
                        text(t),
                        reasoning.clone(),
                        cleared.clone(),
                        running.clone(),
                        tool("read", 999),
                    ],
                ),
                assistant("b", "u", vec![text(""), reasoning.clone()]),
                assistant("c", "u", vec![call("grep", r#"{"pattern":"x"}"#, 7)]),
                user("v", vec![ignored.clone()]),
                summary("d", "u"),
            ]
        };
        for clear_inputs in [false, true] {
            let render = Render {
                clear_inputs,
                ..Default::default()
            };
            for text in ["fix the bug", "réparer le bogue ✓ 🙂"] {
                // ceil-bytes counts bytes: the bounds meet, up to ignored
                // text and unsent reasoning (here: 8 + 3 + 3 bytes).
                let config = MessageEstimateConfig {
                    method: Method::CeilBytes,
                    render,
                    ..Default::default()
                };
                let (span, exact) = within_and_exact(session(text), config);
                let span = span.unwrap();
                assert!(span.lo <= exact && exact <= span.hi, "{span:?} {exact}");
                // UTF-16 units: between a third of the bytes and the bytes.
                let config = MessageEstimateConfig {
                    render,
                    ..Default::default()
                };
                let (span, exact) = within_and_exact(session(text), config);
                let span = span.unwrap();
                assert!(span.lo <= exact && exact <= span.hi, "{span:?} {exact}");
                assert!(span.lo < span.hi);
            }
        }
        // Without ignored text or reasoning, ceil-bytes is exact at the top;
        // and a message whose only content is a call is sent for sure.
        let plain = vec![
            user("u", vec![text("go"), compaction()]),
            assistant(
                "c",
                "u",
                vec![call("grep", r#"{"pattern":"x"}"#, 7), tool("read", 99)],
            ),
        ];
        let bytes = MessageEstimateConfig {
            method: Method::CeilBytes,
            ..Default::default()
        };
        let (span, exact) = within_and_exact(plain, bytes);
        assert_eq!(span.unwrap().hi, exact);
        assert!(span.unwrap().lo >= 4 + 1 + 2 + 4 + 2 + 4 + 25);
        // Renderings that need the text have no bounds; nor has a bigram table.
        let none = |config| within_and_exact(session("x"), config).0;
        for render in [
            Render {
                describe: true,
                ..Default::default()
            },
            Render {
                truncate_output: Some(10),
                ..Default::default()
            },
        ] {
            assert_eq!(
                none(MessageEstimateConfig {
                    render,
                    ..Default::default()
                }),
                None
            );
        }
        let file = P {
            kind: "file",
            json: Some(r#"{"url":"a.png","mime":"image/png"}"#.into()),
            ..Default::default()
        };
        let with_file = vec![user("u", vec![text("see"), file])];
        assert_eq!(within_and_exact(with_file, Default::default()).0, None);
        let bigram = MessageEstimateConfig {
            method: "o200k".parse().unwrap(),
            ..Default::default()
        };
        assert_eq!(none(bigram), None);
    }

    /// Text that cannot be ignored and the reasoning of the steps that send
    /// it are in both ends of the bounds: with bytes as units (ceil-bytes)
    /// and no ignored text, they meet at the estimate whatever `keep_thinking`.
    #[test]
    fn sure_text_and_sent_reasoning_are_in_the_lower_bound() {
        let think = |t: &str| P {
            kind: "reasoning",
            output: Some(t.into()),
            ..Default::default()
        };
        let maybe = P {
            json: Some(r#"{"ignored":false}"#.into()),
            ..text("mentions the key")
        };
        let session = |ignorable: bool| {
            let mut first = vec![text("fix it"), think("first thought")];
            if ignorable {
                first.push(maybe.clone());
            }
            vec![
                user("u", vec![text("the task")]),
                assistant("a", "u", first),
                assistant("b", "u", vec![think("only thinking")]),
                assistant("c", "u", vec![text("done"), think("why"), think("so")]),
            ]
        };
        for keep_thinking in [0, 1, 2, 3, 9] {
            let render = Render {
                keep_thinking,
                ..Default::default()
            };
            let bytes = MessageEstimateConfig {
                method: Method::CeilBytes,
                render,
                ..Default::default()
            };
            let (span, exact) = within_and_exact(session(false), bytes);
            assert_eq!(
                span,
                Some(Span::exact(exact)),
                "keep_thinking {keep_thinking}"
            );
            // A text whose JSON mentions `ignored` is in the upper end only.
            let (span, exact) = within_and_exact(session(true), bytes);
            let span = span.unwrap();
            assert!(span.lo < exact && exact == span.hi, "{span:?} {exact}");
            let utf16 = MessageEstimateConfig {
                render,
                ..Default::default()
            };
            let (span, exact) = within_and_exact(session(false), utf16);
            let span = span.unwrap();
            assert!(span.lo <= exact && exact <= span.hi, "{span:?} {exact}");
        }
    }

    #[test]
    fn a_tool_result_is_its_own_model_message_and_texts_are_joined() {
        let reasoning = P {
            kind: "reasoning",
            output: Some("thinking".into()),
            ..Default::default()
        };
        let got = run(vec![
            // "ab\n\ncd": 6 units -> 2 (part by part it would be 1 + 1)
            user("u", vec![text("ab"), text("cd")]),
            // call: "read" 1 + "{}" 1; result message: 4 + 100 / 4
            assistant("a", "u", vec![text(""), tool("read", 100)]),
            // only reasoning: nothing is sent
            assistant("b", "u", vec![reasoning]),
            user("c", vec![compaction()]),
        ]);
        assert_eq!(got, vec![4 + 2, 4 + 1 + 1 + 4 + 25, 0, 4 + 6]);
    }

    #[test]
    fn sent_messages_split_each_message_estimate_by_model_message() {
        let reasoning = P {
            kind: "reasoning",
            output: Some("thinking".into()),
            ..Default::default()
        };
        let msgs = vec![
            user("u", vec![text("ab"), text("cd")]),
            assistant(
                "a",
                "u",
                vec![reasoning.clone(), tool("read", 100), tool("ls", 8)],
            ),
            assistant("b", "u", vec![reasoning, text("done")]),
        ];
        let config = render(Render {
            keep_thinking: 1,
            ..Render::default()
        });
        let batches = [batch(&[("s", msgs.clone())])];
        let cols = Columns::from_batches(&batches, Scan::Estimate).unwrap();
        let table = PartTable::new(&cols).unwrap();
        let sent = sent_messages(&table, config).unwrap().remove(0);
        let kinds: Vec<SentKind> = sent.iter().map(|s| s.kind).collect();
        use SentKind::{Message as M, Result as R};
        assert_eq!(kinds, vec![M, M, R, R, M]);
        // per stored message, the model messages sum to its estimate
        let per_message = run_with(msgs, config);
        let starts = table.messages(0).unwrap();
        let summed: Vec<u64> = starts
            .iter()
            .map(|m| {
                sent.iter()
                    .filter(|s| m.rows.contains(&s.row))
                    .map(|s| s.tokens)
                    .sum()
            })
            .collect();
        assert_eq!(summed, per_message);
        // a result's row is its tool part's; only the newest step's reasoning is sent
        assert_eq!(sent[3].tokens, 4 + 2);
        assert!(sent[4].tokens > 4 + 1);
    }

    #[test]
    fn a_text_protocol_step_sends_its_text_and_its_observation_only() {
        // SWE-agent / mini-swe-agent: the command is in the reply's text, the
        // result was the next user turn; the part's source keeps that turn.
        let step = |json: &str| P {
            input: Some(r#"{"command":"ls -la"}"#.into()),
            json: Some(json.into()),
            ..tool("ls", 100)
        };
        let observed = step(r#"{"source":{"observation":{"agent":"primary"}}}"#);
        let said = "run ```ls -la```"; // 16 characters: 4 tokens
        let msgs = |p: P| {
            vec![
                user("u", vec![text("go")]),
                assistant("a", "u", vec![text(said), p]),
                // no text: only its observation is sent
                assistant("b", "u", vec![step(r#"{"source":{"observation":{}}}"#)]),
            ]
        };
        // the text, then the observation as a user message: 4 + 100 / 4
        assert_eq!(
            run(msgs(observed.clone())),
            vec![4 + 1, 4 + 4 + 4 + 25, 4 + 25]
        );
        // a call whose JSON only mentions the word is a call ("ls" 1, input 5)
        let called = step(r#"{"source":{"x":"observation"}}"#);
        assert_eq!(run(msgs(called))[1], 4 + 4 + 1 + 5 + 4 + 25);
        // an empty observation is not sent (as no empty user turn is)
        let empty = P {
            output: Some(String::new()),
            ..observed.clone()
        };
        let quiet = vec![assistant("a", "u", vec![text(said), empty])];
        assert_eq!(run(quiet.clone()), vec![4 + 4]);
        let (span, exact) = within_and_exact(quiet, MessageEstimateConfig::default());
        let span = span.unwrap();
        assert!(span.lo <= exact && exact <= span.hi, "{span:?} {exact}");
        // the bounds hold the estimate (a call's name and input are not in them)
        let (span, exact) = within_and_exact(msgs(observed), MessageEstimateConfig::default());
        let span = span.unwrap();
        assert!(span.lo <= exact && exact <= span.hi, "{span:?} {exact}");
    }

    #[test]
    fn only_the_newest_steps_send_their_reasoning() {
        let reasoning = |t: &str| P {
            kind: "reasoning",
            output: Some(t.into()),
            ..Default::default()
        };
        let msgs = || {
            vec![
                user("u", vec![text("go")]),
                assistant(
                    "a",
                    "u",
                    vec![reasoning("x".repeat(40).as_str()), text("ab")],
                ),
                assistant(
                    "b",
                    "u",
                    vec![reasoning("y".repeat(40).as_str()), text("cd")],
                ),
                // only reasoning: not sent, whatever keep_thinking says
                assistant("c", "u", vec![reasoning("z".repeat(40).as_str())]),
            ]
        };
        let keep = |n| {
            render(Render {
                keep_thinking: n,
                ..Default::default()
            })
        };
        assert_eq!(run(msgs()), vec![4 + 1, 4 + 1, 4 + 1, 0]);
        assert_eq!(run_with(msgs(), keep(1)), vec![4 + 1, 4 + 1, 4 + 1, 0]);
        assert_eq!(run_with(msgs(), keep(2)), vec![4 + 1, 4 + 1, 4 + 1 + 10, 0]);
        assert_eq!(
            run_with(msgs(), keep(9)),
            vec![4 + 1, 4 + 1 + 10, 4 + 1 + 10, 0]
        );
    }
}
