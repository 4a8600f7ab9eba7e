//! Soft compaction: choose old completed tool outputs to mark as compacted.
//!
//! The loop is OpenCode's, per session: walk messages newest to oldest,
//! skip everything until the second user turn back, stop at a summary
//! message or at an already-compacted tool part, protect the newest
//! `protect` tokens of tool output and select the rest, and keep the
//! selection only when it frees more than `minimum` tokens.
//!
//! The policy options generalise each step without changing the default:
//! the turn unit and count, a keep-the-newest-N rule, supersession, and the
//! `clear_at_least` / `trigger` gates (docs/policies.md).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::Array;
use rayon::prelude::*;

use crate::cache_aware::{selection_pays, CacheAware};
use crate::codes::{flag, part_type, role, status};
use crate::columns::{same_str, Keys, Members, Plain, StrChunk, StrCol};
use crate::error::{CoreError, Location, Result};
use crate::estimate::Method;
use crate::messages::{
    calls_ascii, estimates_of, may_ignore_texts, may_observe_calls, tokens_about, tokens_visible,
    tokens_within, MessageEstimateConfig, Span,
};
use crate::part_json::{pinned, pins_possible};
use crate::pivot::{pivot_start_in, visible_in, Visible};
use crate::render::Render;
use crate::schema::Scan;
use crate::table::{Message, PartTable};
use crate::target::{Target, TOOL_TARGET};

/// What counts as one turn when protecting the newest turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnUnit {
    /// A user message (OpenCode). A single-task autonomous run has one or two.
    #[default]
    User,
    /// An assistant message: one model call of an autonomous run.
    Step,
}

impl FromStr for TurnUnit {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(TurnUnit::User),
            "step" => Ok(TurnUnit::Step),
            other => Err(CoreError::Config(format!(
                "unknown turn unit {other:?}; expected \"user\" or \"step\""
            ))),
        }
    }
}

/// When a policy prunes without a summary asking (docs/policies.md): its
/// source's timing. The prune itself never reads it; the replay engine does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acts {
    /// Only as a summary runs.
    Summary,
    /// When a user turn ends, over the history before the next user message
    /// (OpenCode prunes as its agent loop exits).
    #[default]
    Turn,
    /// Before every model call (SWE-agent's history processor, Anthropic's
    /// context editing checking its trigger at each call; `mask_first`).
    Call,
}

impl FromStr for Acts {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "summary" => Ok(Acts::Summary),
            "turn" => Ok(Acts::Turn),
            "call" => Ok(Acts::Call),
            other => Err(CoreError::Config(format!(
                "unknown policy timing acts={other:?}; expected \"summary\", \"turn\" or \"call\""
            ))),
        }
    }
}

/// The prune policy: OpenCode's rule by default, and the options peers use
/// (docs/policies.md). Every field is data the facade's `Policy` sets.
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
    /// The unit of `protect_turns`.
    pub turn: TurnUnit,
    /// Messages after the `protect_turns`-th newest turn are never touched
    /// (OpenCode: 2 user turns, i.e. the newest exchange).
    pub protect_turns: u32,
    /// Keep the N newest counted outputs whatever their size (SWE-agent's
    /// `last_n_observations`, Anthropic's `keep`).
    pub keep_recent: Option<u32>,
    /// Count `keep_recent` per tool instead of over all tools.
    pub keep_recent_per_tool: bool,
    /// Prune only when at least this many tokens are freed (Anthropic's `clear_at_least`).
    pub clear_at_least: u64,
    /// Prune only when the session's visible context (estimated model input
    /// from the pivot on) is above this many tokens; 0 = always.
    pub trigger: u64,
    /// Per-message overhead of the `trigger` estimate (as `estimate_messages`).
    pub overhead: u64,
    /// An output a newer call makes stale (the same file path, or the same
    /// command of the same tool) is pruned first, whatever the windows say.
    pub supersede: bool,
    /// Outputs of fewer tokens are never pruned (a placeholder costs ~8).
    pub min_output_tokens: u64,
    /// How the model input shows tool parts (the `trigger` estimate uses it).
    pub render: Render,
    /// Clear only when it pays under the prompt cache's prices (`cache_aware`).
    pub cache_aware: Option<CacheAware>,
    /// When it prunes unasked (the replay engine reads it; a prune scan does not).
    pub acts: Acts,
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
            turn: TurnUnit::User,
            protect_turns: 2,
            keep_recent: None,
            keep_recent_per_tool: false,
            clear_at_least: 0,
            trigger: 0,
            overhead: MessageEstimateConfig::default().overhead,
            supersede: false,
            min_output_tokens: 0,
            render: Render::default(),
            cache_aware: None,
            acts: Acts::Turn,
        }
    }
}

impl PruneConfig {
    /// The message estimate this policy's trigger (and a batch report) uses.
    pub fn estimate_config(&self) -> MessageEstimateConfig {
        MessageEstimateConfig {
            method: self.method,
            overhead: self.overhead,
            render: self.render,
        }
    }

    /// Whether the policy estimates whole messages (a trigger, the cache gate).
    pub fn reads_messages(&self) -> bool {
        self.trigger > 0 || self.cache_aware.is_some()
    }

    /// The columns this policy reads: the message estimate's (and the
    /// pivot's) for a trigger, tool inputs for supersession.
    pub fn scan(&self) -> Scan {
        if self.reads_messages() {
            Scan::Compact
        } else if self.supersede {
            Scan::PruneInputs
        } else {
            Scan::Prune
        }
    }
}

/// Outcome for one session. `rows` is empty unless the policy acted.
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
    table.check_lengths(config.method, config.reads_messages())?;
    if !config.enabled {
        return Ok(vec![SessionPrune::default(); table.sessions.len()]);
    }
    let tool = table.tool.as_ref().expect("prune gathers the tool column");
    let protected = tool.members(&config.protected_tools);
    let ids = match config.supersede {
        true => table.tool_target.as_ref().and_then(TargetIds::new),
        false => None,
    };
    let ids = ids.as_ref();
    let tool_ids = match config.keep_recent_per_tool && config.keep_recent.is_some() {
        true => ToolIds::new(tool),
        false => None,
    };
    let by = By {
        protected: &protected,
        targets: ids,
        tools: tool_ids.as_ref(),
    };
    (0..table.sessions.len())
        .into_par_iter()
        .map_init(Scratch::default, |scratch, s| {
            // The message list goes back to the scratch whatever the outcome.
            let mut messages = std::mem::take(&mut scratch.messages);
            let result = prune_one(table, s, config, &by, &mut messages, scratch);
            scratch.messages = messages;
            result
        })
        .collect()
}

/// A prune of the first messages of a session at a time (`replay`: the
/// history before each model call), with what `prune` works out once per
/// table kept. The messages it prunes hold no summary (no pivot): a
/// `trigger` is measured over every message given (a caller may leave
/// messages out: their rows are not read, and they must hold no tool part).
pub struct PrefixPrune<'b, 'a> {
    config: &'b PruneConfig,
    protected: Members<'b, 'a>,
    targets: Option<TargetIds<'b, 'a>>,
    tools: Option<ToolIds<'b, 'a>>,
}

/// Buffers one thread reuses from prune to prune (`PrefixPrune::prune`).
#[derive(Default)]
pub struct PruneScratch<'a>(Scratch<'a>);

impl<'b, 'a> PrefixPrune<'b, 'a> {
    /// `table`: where the column-level work (protected tools, target and
    /// tool ids) is done; the prunes may read another `PartTable` over the
    /// same columns (one with its own flags).
    pub fn new(table: &'b PartTable<'a>, config: &'b PruneConfig) -> Result<Self> {
        table.check_lengths(config.method, config.reads_messages())?;
        let tool = table.tool.as_ref().ok_or(CoreError::MissingColumn {
            column: "tool",
            needed_by: "prune",
        })?;
        Ok(PrefixPrune {
            config,
            protected: tool.members(&config.protected_tools),
            targets: match config.supersede {
                true => table.tool_target.as_ref().and_then(TargetIds::new),
                false => None,
            },
            tools: match config.keep_recent_per_tool && config.keep_recent.is_some() {
                true => ToolIds::new(tool),
                false => None,
            },
        })
    }

    /// The policy's outcome over `messages` (a session's first messages, as
    /// `table` splits them), as `prune` decides it for a session that ends there.
    pub fn prune(
        &self,
        table: &PartTable<'a>,
        messages: &[Message],
        scratch: &mut PruneScratch<'a>,
    ) -> Result<SessionPrune> {
        let config = self.config;
        if !config.enabled {
            return Ok(SessionPrune::default());
        }
        let by = By {
            protected: &self.protected,
            targets: self.targets.as_ref(),
            tools: self.tools.as_ref(),
        };
        if config.trigger == 0 {
            return prune_session(table, messages, config, &by, &[], &mut scratch.0);
        }
        // Messages left out (a replay leaves a run's own summaries out):
        // those before the last gap are shown as pinned ones are.
        let Some(last) = messages.last() else {
            return Ok(SessionPrune::default());
        };
        let gap = messages
            .windows(2)
            .rposition(|w| w[0].rows.end != w[1].rows.start);
        let shown = match gap {
            None => Visible {
                start: messages[0].rows.start,
                end: last.rows.end,
                pinned: Vec::new(),
            },
            Some(g) => Visible {
                start: messages[g + 1].rows.start,
                end: last.rows.end,
                pinned: messages[..=g].iter().map(|m| m.rows.clone()).collect(),
            },
        };
        match above_trigger(table, messages, config, &shown)? {
            Some(known) => prune_session(table, messages, config, &by, &known, &mut scratch.0),
            None => Ok(SessionPrune::default()),
        }
    }
}

/// What a prune call works out once for every session.
struct By<'b, 'a> {
    /// Rows of the protected tools.
    protected: &'b Members<'b, 'a>,
    /// Supersession's targets by id (`TargetIds`).
    targets: Option<&'b TargetIds<'b, 'a>>,
    /// The tool names by id, for a per-tool `keep_recent` (`ToolIds`).
    tools: Option<&'b ToolIds<'b, 'a>>,
}

/// Buffers one pool thread reuses from session to session.
#[derive(Default)]
struct Scratch<'a> {
    /// Supersession's targets seen so far (borrowed from the table).
    seen: HashSet<Key<'a>, BuildHasherDefault<Prehashed>>,
    /// Supersession by target id (`TargetIds`): `stamp[id] == epoch` when
    /// a newer call of the current session has the target `id`.
    stamp: Vec<u32>,
    epoch: u32,
    messages: Vec<Message>,
    tools: Vec<usize>,
    /// Rows of the counted tool outputs, newest first.
    counted: Vec<usize>,
    estimates: Vec<u64>,
    /// A per-tool `keep_recent` by tool id (`ToolIds`): `(session, count)`,
    /// the count good only where `session` is the current one's number.
    ranks: Vec<(u32, u32)>,
    session: u32,
}

/// The policy's outcome for session `s` (its messages read into `messages`).
fn prune_one<'a>(
    table: &PartTable<'a>,
    s: usize,
    config: &PruneConfig,
    by: &By<'_, 'a>,
    messages: &mut Vec<Message>,
    scratch: &mut Scratch<'a>,
) -> Result<SessionPrune> {
    table.messages_into(s, messages)?;
    if config.trigger == 0 {
        return prune_session(table, messages, config, by, &[], scratch);
    }
    // Decided before the walk (as the reference does): a session below the
    // trigger is never walked, and one above reuses the outputs read.
    let start = pivot_start_in(table, s, messages)?;
    let shown = visible_in(table, s, start, messages)?;
    match above_trigger(table, messages, config, &shown)? {
        Some(known) => prune_session(table, messages, config, by, &known, scratch),
        None => Ok(SessionPrune::default()),
    }
}

/// Whether a session's visible context (its messages that `shown` shows) is
/// above the trigger: `Some` of the outputs read on the way, by row, or
/// `None`. Decided in steps, each only where the one before could not:
/// bounds from lengths, no text read (exact but for tool inputs where the
/// outputs are counted); the same with every output read; the estimate of
/// the messages, reusing the outputs read.
fn above_trigger(
    table: &PartTable<'_>,
    messages: &[Message],
    config: &PruneConfig,
    shown: &Visible,
) -> Result<Option<Vec<(usize, u64)>>> {
    let estimate = config.estimate_config();
    let decided = |span: Option<Span>| match span {
        Some(span) if span.hi <= config.trigger => Some(false),
        Some(span) if span.lo > config.trigger => Some(true),
        _ => None,
    };
    // Most sessions are decided by coarse bounds from sums over the rows
    // (`tokens_about`); their lower bound gains, each only where the one
    // before leaves it open, the names and inputs (none is sent by a
    // text-protocol step), those read as ASCII, then texts.
    if let Some(about) = tokens_about(table, messages, estimate, shown) {
        let (span, trigger) = (about.span, config.trigger);
        let above = decided(Some(span)).or_else(|| {
            let most = span.lo + about.calls + about.ascii + about.texts;
            let calls = most > trigger && !may_observe_calls(table, messages);
            let lo = span.lo + if calls { about.calls } else { 0 };
            let ascii =
                calls && lo + about.ascii + about.texts > trigger && calls_ascii(table, shown);
            let lo = lo + if ascii { about.ascii } else { 0 };
            let texts = || lo + about.texts > trigger && !may_ignore_texts(table, messages);
            (lo > trigger || texts()).then_some(true)
        });
        if let Some(above) = above {
            return Ok(above.then(Vec::new));
        }
    }
    let bounds = |outputs| tokens_within(table, messages, estimate, &[], Some(shown), outputs);
    let first = bounds(None);
    if let Some(above) = decided(first.map(|w| w.span)) {
        return Ok(above.then(Vec::new));
    }
    // Reading the outputs narrows the bounds only where one was bounded
    // from its bytes (never on a table whose outputs are counted).
    let mut outputs = Vec::new();
    let second = match first {
        Some(w) if w.outputs_bounded => bounds(Some(&mut outputs)),
        _ => None,
    };
    if let Some(above) = decided(second.map(|w| w.span)) {
        return Ok(above.then_some(outputs));
    }
    let estimates = estimates_of(table, messages, estimate, &outputs, Some(shown))?;
    Ok((tokens_visible(&estimates, shown) > config.trigger).then_some(outputs))
}

/// What makes an older output stale: a newer call on the same file (any
/// tool), or the same command of the same tool.
#[derive(Debug, Clone)]
enum Stale<'a> {
    Path(Cow<'a, str>),
    Command(&'a str, Cow<'a, str>),
}

// Compared inline (`same_str`): a set insert compares on every repeated target.
impl PartialEq for Stale<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stale::Path(a), Stale::Path(b)) => same_str(a, b),
            (Stale::Command(t, a), Stale::Command(u, b)) => same_str(t, u) && same_str(a, b),
            _ => false,
        }
    }
}

/// A target with its hash, worked out inline once per tool part (the set
/// then hashes one word: hashing the strings through `Hasher` was a call
/// per part and a `memcpy` per tail).
#[derive(Debug)]
struct Key<'a> {
    hash: u64,
    stale: Stale<'a>,
}

impl<'a> Key<'a> {
    #[inline(always)]
    fn new(stale: Stale<'a>) -> Self {
        let mut h = Fx::default();
        match &stale {
            Stale::Path(path) => h.bytes(path.as_bytes()),
            Stale::Command(tool, command) => {
                h.add(1);
                h.bytes(tool.as_bytes());
                h.bytes(command.as_bytes());
            }
        }
        // The set indexes by the low bits, which a product mixes least.
        Key {
            hash: h.0.rotate_left(26),
            stale,
        }
    }
}

impl PartialEq for Key<'_> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.stale == other.stale
    }
}

impl Eq for Key<'_> {}

impl Hash for Key<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// A multiply-rotate hash over 8-byte words (FxHash's): the targets are short
/// strings hashed once per tool part, where SipHash's per-call cost dominated
/// the supersession scan. Not DoS-resistant, which a per-session set of the
/// session's own paths does not need.
#[derive(Default)]
struct Fx(u64);

impl Fx {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    /// The length, the whole words, then the last 8 bytes (overlapping the
    /// words) or, when shorter, the bytes one by one.
    #[inline]
    fn bytes(&mut self, b: &[u8]) {
        let n = b.len();
        self.add(n as u64);
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if n >= 8 {
            for k in 0..n / 8 {
                self.add(word(8 * k));
            }
            if n % 8 != 0 {
                self.add(word(n - 8));
            }
        } else {
            self.add(b.iter().fold(0, |w, &c| (w << 8) | u64::from(c)));
        }
    }
}

/// The set's hasher: the key's hash is already worked out, so it is taken
/// as it is (`Key` writes one `u64`).
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = Fx(self.0);
        h.bytes(bytes);
        self.0 = h.0;
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
}

/// A `tool_target` read back (borrowing from it); `Err` when it is not one.
#[inline]
fn stale_of_target(value: &str) -> std::result::Result<Option<Stale<'_>>, ()> {
    if value.is_empty() {
        return Ok(None);
    }
    if let Some(path) = value.strip_prefix("file:") {
        return match path.is_empty() {
            true => Err(()),
            false => Ok(Some(Stale::Path(Cow::Borrowed(path)))),
        };
    }
    let rest = value.strip_prefix("cmd:").ok_or(())?;
    let (n, rest) = rest.split_once(':').ok_or(())?;
    if n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) {
        return Err(());
    }
    let n: usize = n.parse().map_err(|_| ())?;
    let tool = rest.get(..n).ok_or(())?;
    let command = rest[n..].strip_prefix(':').ok_or(())?;
    match command.is_empty() {
        true => Err(()),
        false => Ok(Some(Stale::Command(tool, Cow::Borrowed(command)))),
    }
}

/// Per chunk of a dictionary-encoded column, per key: `id_of(value)`
/// (`None`: give up). Each dictionary is read once: consecutive chunks of the
/// very same dictionary (one `dictionary_encode`, slices of one array) share
/// one map. `None` unless every chunk is dictionary encoded.
fn ids_per_key<'a>(
    column: &StrCol<'a>,
    mut id_of: impl FnMut(Option<&'a str>) -> Option<u32>,
) -> Option<Vec<Arc<[u32]>>> {
    let mut per_key: Vec<Arc<[u32]>> = Vec::new();
    let mut last: Option<Plain<'a>> = None;
    for (_, chunk) in column.chunks() {
        let StrChunk::Dict { values, .. } = chunk else {
            return None;
        };
        if let (Some(prev), Some(map)) = (last, per_key.last()) {
            if prev.is_same(*values) {
                per_key.push(Arc::clone(map));
                continue;
            }
        }
        last = Some(*values);
        let of_key = (0..values.len())
            .map(|k| id_of(values.value(k)))
            .collect::<Option<Vec<u32>>>()?;
        per_key.push(of_key.into());
    }
    Some(per_key)
}

/// A dictionary column's ids over one session's rows, read in place: the
/// int32 keys, nulls and map from key to id of the one chunk holding them
/// (`key_view`), so an id costs a load or two and a lookup, no chunk
/// located per row.
#[derive(Clone, Copy)]
struct KeyView<'v> {
    keys: &'v [i32],
    nulls: Option<&'v arrow_buffer::NullBuffer>,
    /// The row of the chunk's first key.
    first: usize,
    map: &'v [u32],
}

impl KeyView<'_> {
    /// The id of `row` (one of the view's rows); `missing` where it is null
    /// or its key is past the map.
    #[inline(always)]
    fn id(&self, row: usize, missing: u32) -> u32 {
        let i = row - self.first;
        if self.nulls.is_some_and(|n| n.is_null(i)) {
            return missing;
        }
        self.map
            .get(self.keys[i] as usize)
            .copied()
            .unwrap_or(missing)
    }
}

/// The `KeyView` of `rows` in `column` (ids by key `per_key`, as
/// `ids_per_key` makes them): `None` unless one chunk holds every row and
/// its keys are int32.
fn key_view<'v>(
    column: &'v StrCol<'_>,
    per_key: &'v [Arc<[u32]>],
    rows: std::ops::Range<usize>,
) -> Option<KeyView<'v>> {
    let (c, i) = column.locate(rows.start);
    let StrChunk::Dict {
        keys: Keys::I32(keys),
        ..
    } = column.chunk(c)
    else {
        return None;
    };
    (i + rows.len() <= keys.len()).then(|| KeyView {
        keys: keys.values(),
        nulls: keys.nulls(),
        first: rows.start - i,
        map: &per_key[c],
    })
}

/// `tool_target` as integer ids, when every chunk of it is dictionary
/// encoded: each dictionary value is read and hashed once, and a scan then
/// tests a row's target by its key (`StaleIds` marks the ids of the newer calls)
/// with no string read. Equal values have equal ids whichever chunk or key
/// holds them, so the selection is the one the strings give.
pub(crate) struct TargetIds<'c, 'a> {
    column: &'c StrCol<'a>,
    /// Per chunk, per dictionary key: the value's id (one map shared by
    /// consecutive chunks of the very same dictionary).
    per_key: Vec<Arc<[u32]>>,
    /// Ids below this (`NO_TARGET` and the targets).
    count: usize,
}

/// `""`: the call has no target.
const NO_TARGET: u32 = 0;
/// A malformed value: the scan reads it from the string (and names its row).
const BAD_ID: u32 = u32::MAX - 1;
/// A null row (or a key past the dictionary): worked out from its input.
const NULL_ID: u32 = u32::MAX;

impl<'c, 'a> TargetIds<'c, 'a> {
    /// `None` unless every chunk is dictionary encoded.
    fn new(column: &'c StrCol<'a>) -> Option<Self> {
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let per_key = ids_per_key(column, |value| {
            Some(match value {
                None => NULL_ID,
                Some("") => NO_TARGET,
                Some(v) if stale_of_target(v).is_err() => BAD_ID,
                Some(v) => {
                    let next = u32::try_from(ids.len() + 1).ok().filter(|&n| n < BAD_ID)?;
                    *ids.entry(v).or_insert(next)
                }
            })
        })?;
        Some(TargetIds {
            column,
            per_key,
            count: ids.len() + 1,
        })
    }

    #[inline(always)]
    fn id(&self, row: usize) -> u32 {
        let (c, i) = self.column.locate(row);
        match self.column.chunk(c).key(i) {
            Some(k) => self.per_key[c].get(k).copied().unwrap_or(NULL_ID),
            None => NULL_ID,
        }
    }
}

/// The `tool` column as integer ids, when every chunk of it is dictionary
/// encoded: each dictionary value is read once per dictionary, and a
/// per-tool rank goes by a row's key with no name read or compared. Equal
/// names have equal ids whichever chunk or key holds them; a null (read as
/// `""`, as the names are) has the id of `""`.
pub(crate) struct ToolIds<'c, 'a> {
    column: &'c StrCol<'a>,
    /// Per chunk, per dictionary key: the name's id (one map shared by
    /// consecutive chunks of the very same dictionary).
    per_key: Vec<Arc<[u32]>>,
    /// Ids below this.
    count: usize,
}

impl<'c, 'a> ToolIds<'c, 'a> {
    /// `None` unless every chunk is dictionary encoded.
    fn new(column: &'c StrCol<'a>) -> Option<Self> {
        let mut ids: HashMap<&str, u32> = HashMap::from([("", 0)]);
        let per_key = ids_per_key(column, |value| {
            let next = u32::try_from(ids.len()).ok()?;
            Some(*ids.entry(value.unwrap_or("")).or_insert(next))
        })?;
        Some(ToolIds {
            column,
            per_key,
            count: ids.len(),
        })
    }

    #[inline(always)]
    fn id(&self, row: usize) -> u32 {
        let (c, i) = self.column.locate(row);
        match self.column.chunk(c).key(i) {
            Some(k) => self.per_key[c].get(k).copied().unwrap_or(0),
            None => 0,
        }
    }
}

/// Supersession by id for one session, worked out on demand as
/// `Superseded` does from the strings: the ids of the tool rows newer than
/// the one asked about (`tools`, newest first) are stamped as far as that
/// row and no further (`stamp[id] == epoch`: a newer call has target `id`),
/// so the rows the selection never asks about are never read.
struct StaleIds<'s> {
    ids: &'s TargetIds<'s, 's>,
    /// The session's ids read in place, where its rows allow.
    view: Option<KeyView<'s>>,
    tools: &'s [usize],
    /// `tools[next..]` are not stamped yet.
    next: usize,
    stamp: &'s mut [u32],
    epoch: u32,
}

impl<'s> StaleIds<'s> {
    /// The session over `rows` (`tools`: its tool rows, newest first), under
    /// a new `epoch`: the stamps of earlier sessions are never cleared (but
    /// when the epoch wraps).
    fn new(
        ids: &'s TargetIds<'s, 's>,
        tools: &'s [usize],
        stamp: &'s mut Vec<u32>,
        epoch: &mut u32,
        rows: std::ops::Range<usize>,
    ) -> Self {
        if stamp.len() < ids.count {
            stamp.resize(ids.count, 0);
        }
        if *epoch == u32::MAX {
            stamp.fill(0);
            *epoch = 0;
        }
        *epoch += 1;
        StaleIds {
            ids,
            view: key_view(ids.column, &ids.per_key, rows),
            tools,
            next: 0,
            stamp,
            epoch: *epoch,
        }
    }

    #[inline(always)]
    fn id(&self, row: usize) -> u32 {
        match &self.view {
            Some(view) => view.id(row, NULL_ID),
            None => self.ids.id(row),
        }
    }

    /// Whether a newer call has the target of `row` (a tool row older than
    /// every row asked about before); `None` when a row on the way has a
    /// target the ids cannot decide (null or malformed): the session then
    /// goes by the strings.
    #[inline]
    fn of(&mut self, row: usize) -> Option<bool> {
        while self.tools[self.next] != row {
            let id = self.id(self.tools[self.next]);
            if id >= BAD_ID {
                return None;
            }
            self.stamp[id as usize] = self.epoch;
            self.next += 1;
        }
        let id = self.id(row);
        if id >= BAD_ID {
            return None;
        }
        self.next += 1;
        let seen = std::mem::replace(&mut self.stamp[id as usize], self.epoch) == self.epoch;
        Some(id != NO_TARGET && seen)
    }
}

/// Whether a newer call superseded an output, worked out on demand from the
/// target strings (when the ids cannot decide a session): the targets of the
/// tool rows newer than the one asked about (`tools`, newest first) go into
/// `seen` as far as that row and no further, so the rows the selection never
/// asks about are never parsed or hashed.
struct Superseded<'s, 'a> {
    table: &'s PartTable<'a>,
    tools: &'s [usize],
    /// `tools[next..]` are not in `seen` yet.
    next: usize,
    seen: &'s mut HashSet<Key<'a>, BuildHasherDefault<Prehashed>>,
    tool: &'s StrCol<'a>,
    input: &'s StrCol<'a>,
}

impl<'a> Superseded<'_, 'a> {
    /// `row` (a tool row older than every row asked about before) is stale.
    fn of(&mut self, row: usize) -> Result<bool> {
        while self.tools[self.next] != row {
            self.insert(self.tools[self.next])?;
            self.next += 1;
        }
        self.next += 1;
        Ok(self.insert(row)? == Some(false))
    }

    /// Puts the row's target in `seen`: `Some(true)` when no newer call had
    /// it, `None` when the row has none. The target: from `tool_target`
    /// when worked out there (not null), else from its input. Inserted
    /// where it is made (no key handed back through a `Result`).
    #[inline(always)]
    fn insert(&mut self, row: usize) -> Result<Option<bool>> {
        if let Some(value) = self.table.tool_target.as_ref().and_then(|c| c.get(row)) {
            return match stale_of_target(value) {
                Ok(stale) => Ok(stale.map(|stale| self.seen.insert(Key::new(stale)))),
                Err(()) => Err(self.malformed(row, value)),
            };
        }
        let key = match Target::of(self.input.get(row)) {
            None => return Ok(None),
            Some(Target::Path(path)) => Key::new(Stale::Path(path)),
            // `tool` is read only for a command (most targets are paths).
            Some(Target::Command(command)) => {
                Key::new(Stale::Command(self.tool.get(row).unwrap_or(""), command))
            }
        };
        Ok(Some(self.seen.insert(key)))
    }

    #[cold]
    #[inline(never)]
    fn malformed(&self, row: usize, value: &str) -> CoreError {
        CoreError::UnknownValue {
            what: "tool target (expected \"\", file:<path> or cmd:<n>:<tool>:<command>)",
            value: value.to_owned(),
            at: Location::column(TOOL_TARGET)
                .row(row)
                .session(self.table.session_id.get(row))
                .message(self.table.message_id.get(row)),
        }
    }
}

/// Where the walk of a session's messages (newest first) works: the
/// session's rows, the first row of its protected turns (the newest
/// `protect_turns` turns), and the end of the newest summary before them,
/// where the walk stops (the session's first row when there is none).
fn walk_bounds(
    table: &PartTable<'_>,
    messages: &[Message],
    config: &PruneConfig,
) -> (std::ops::Range<usize>, usize, usize) {
    let turn_role = match config.turn {
        TurnUnit::User => role::USER,
        TurnUnit::Step => role::ASSISTANT,
    };
    let session_rows = match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => first.rows.start..last.rows.end,
        _ => 0..0,
    };
    let (mut protected_from, mut stop) = (session_rows.start, session_rows.start);
    let mut turns = 0u32;
    for msg in messages.iter().rev() {
        if msg.role == turn_role {
            turns += 1;
        }
        if turns < config.protect_turns {
            continue;
        }
        if protected_from == session_rows.start {
            protected_from = msg.rows.end;
        }
        if msg.role == role::ASSISTANT && table.flags[msg.rows.start] & flag::SUMMARY != 0 {
            stop = msg.rows.end;
            break;
        }
    }
    (session_rows, protected_from, stop)
}

/// The tool rows among `rows`, newest first, gathered without a branch per
/// row (part types alternate unpredictably).
fn tool_rows(table: &PartTable<'_>, rows: std::ops::Range<usize>, tools: &mut Vec<usize>) {
    tools.clear();
    tools.resize(rows.len(), 0);
    let mut n = 0;
    for row in rows.rev() {
        tools[n] = row;
        n += usize::from(table.part_type[row] == part_type::TOOL);
    }
    tools.truncate(n);
}

/// The walked tool rows (newest first) the walk counts, into `counted`:
/// completed, not protected or pinned, up to the first compacted one
/// (past it with `continue_past_compacted`).
fn count(
    table: &PartTable<'_>,
    config: &PruneConfig,
    protected: &Members<'_, '_>,
    may_pin: bool,
    walked: &[usize],
    counted: &mut Vec<usize>,
) -> Result<()> {
    let status_col = table
        .status
        .as_ref()
        .expect("prune gathers the status column");
    for &row in walked {
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
        if protected.contains(row) || (may_pin && pinned(table, row)?) {
            continue;
        }
        if table.flags[row] & flag::COMPACTED != 0 {
            if config.continue_past_compacted {
                continue;
            }
            break;
        }
        counted.push(row);
    }
    Ok(())
}

/// The counted outputs' estimates, oldest first (forward memory order,
/// which the prefetcher follows on large outputs); `known` ones are not read again.
fn estimate(
    table: &PartTable<'_>,
    config: &PruneConfig,
    counted: &[usize],
    known: &[(usize, u64)],
    estimates: &mut Vec<u64>,
) {
    estimates.clear();
    let mut k = 0;
    estimates.extend(counted.iter().rev().map(|&c| {
        // Both by row: a cursor, not a search per output.
        while k < known.len() && known[k].0 < c {
            k += 1;
        }
        match known.get(k) {
            Some(&(row, tokens)) if row == c => tokens,
            _ => table.output_tokens(c, config.method),
        }
    }));
}

/// The per-tool `keep_recent` counts by tool id, where the names have ids
/// (no name read per output): the ids, the session's view of them, and the
/// counts, each stamped with the session's number `session` (so none is
/// cleared between sessions).
#[allow(clippy::type_complexity)]
fn tool_ranks<'s, 'b, 'a>(
    tools: &'b ToolIds<'b, 'a>,
    ranks: &'s mut Vec<(u32, u32)>,
    session: &mut u32,
    rows: std::ops::Range<usize>,
) -> (
    &'b ToolIds<'b, 'a>,
    Option<KeyView<'b>>,
    &'s mut Vec<(u32, u32)>,
    u32,
) {
    if ranks.len() < tools.count {
        ranks.resize(tools.count, (0, 0));
    }
    if *session == u32::MAX {
        ranks.fill((0, 0));
        *session = 0;
    }
    *session += 1;
    let view = key_view(tools.column, &tools.per_key, rows);
    (tools, view, ranks, *session)
}

/// The count of newer kept outputs of `row`'s tool that it ranks behind:
/// by tool id (`tool_ranks`), else by name (a session uses a handful of
/// tools: a scan beats hashing).
#[allow(clippy::type_complexity)]
fn tool_rank<'r, 'a>(
    row: usize,
    ranks: &'r mut Option<(
        &ToolIds<'_, '_>,
        Option<KeyView<'_>>,
        &mut Vec<(u32, u32)>,
        u32,
    )>,
    tool: &StrCol<'a>,
    by_name: &'r mut Vec<(&'a str, u32)>,
) -> &'r mut u32 {
    if let Some((tools, view, ranks, session)) = ranks {
        let id = match view {
            Some(view) => view.id(row, 0),
            None => tools.id(row),
        };
        let slot = &mut ranks[id as usize];
        if slot.0 != *session {
            *slot = (*session, 0);
        }
        return &mut slot.1;
    }
    let name = tool.get(row).unwrap_or("");
    match by_name.iter_mut().position(|(t, _)| same_str(t, name)) {
        Some(i) => &mut by_name[i].1,
        None => {
            by_name.push((name, 0));
            &mut by_name.last_mut().expect("pushed").1
        }
    }
}

/// Whether a selection (`rows`, freeing `pruned` tokens) stands: it frees
/// more than `minimum`, at least `clear_at_least`, and pays under the
/// prompt cache's prices where the policy is `cache_aware`.
fn selection_stands(
    table: &PartTable<'_>,
    messages: &[Message],
    config: &PruneConfig,
    rows: &[usize],
    pruned: u64,
) -> Result<bool> {
    if pruned <= config.minimum || pruned < config.clear_at_least {
        return Ok(false);
    }
    let gate = config
        .cache_aware
        .map(|rule| (rule, config.estimate_config()));
    selection_pays(table, messages, gate, rows, pruned)
}

/// The policy's selection in a session (its `messages`). `known`: outputs
/// already estimated, (row, tokens) by row, which are not read again.
fn prune_session<'a>(
    table: &PartTable<'a>,
    messages: &[Message],
    config: &PruneConfig,
    by: &By<'_, 'a>,
    known: &[(usize, u64)],
    scratch: &mut Scratch<'a>,
) -> Result<SessionPrune> {
    let (protected, ids) = (by.protected, by.targets);
    let tool = table.tool.as_ref().expect("prune gathers the tool column");
    let input = (config.supersede)
        .then(|| (table.input.as_ref()).expect("supersession gathers the input column"));
    // Targets of the newer tool calls, protected turns included (filled on
    // demand by `Superseded`).
    let seen = &mut scratch.seen;
    seen.clear();
    // Pass 1, newest to oldest without reading any output: the rows the walk
    // counts, in walk order. Only these are estimated (skipped turns, text and
    // everything behind a stop point never are).
    let (session_rows, protected_from, stop) = walk_bounds(table, messages, config);
    // Then per row: the tool rows, gathered without a branch per row (part
    // types alternate unpredictably). A protected turn's parts matter only
    // as newer calls for supersession.
    let scan_to = match input {
        Some(_) => session_rows.end,
        None => protected_from,
    };
    let tools = &mut scratch.tools;
    tool_rows(table, stop..scan_to, tools);
    let counted = &mut scratch.counted;
    counted.clear();
    let may_pin = pins_possible(table, stop..protected_from);
    // The tool rows of the protected turns (newest first) are read only as
    // newer calls, by supersession.
    let walked = tools.partition_point(|&row| row >= protected_from);
    count(table, config, protected, may_pin, &tools[walked..], counted)?;
    // Pass 2: estimate them oldest first (forward memory order, which the
    // prefetcher follows on large outputs), then select newest first.
    let estimates = &mut scratch.estimates;
    estimate(table, config, counted, known, estimates);
    // What is selected is part of the total: a session whose total cannot
    // pass the gates selects nothing, and no target is read for it.
    let all: u64 = estimates.iter().sum();
    if all <= config.minimum || all < config.clear_at_least {
        return Ok(SessionPrune {
            total: all,
            ..SessionPrune::default()
        });
    }
    // At most every counted output is selected: one allocation, not one per doubling.
    let mut rows = Vec::with_capacity(counted.len());
    let (mut total, mut window, mut pruned) = (0u64, 0u64, 0u64);
    let mut recent_all = 0u32;
    // Per-tool counts: a session uses a handful of tools, a scan beats hashing.
    let mut recent_by_tool: Vec<(&str, u32)> = Vec::new();
    // By tool id, where the names have ids: no name read per output.
    let mut ranks = match by.tools {
        Some(tools) if config.keep_recent_per_tool => Some(tool_ranks(
            tools,
            &mut scratch.ranks,
            &mut scratch.session,
            session_rows.clone(),
        )),
        _ => None,
    };
    // Supersession, on demand: by target id where the table has them, else
    // (or from a target the ids cannot decide on) by the target strings.
    let mut by_id = match (input, ids) {
        (Some(_), Some(ids)) => Some(StaleIds::new(
            ids,
            tools,
            &mut scratch.stamp,
            &mut scratch.epoch,
            session_rows.clone(),
        )),
        _ => None,
    };
    let mut seen = Some(seen);
    let by_string = |seen: &mut Option<_>| {
        input.map(|input| Superseded {
            table,
            tools,
            next: 0,
            seen: seen.take().expect("the strings are taken up once"),
            tool,
            input,
        })
    };
    let mut stale = match by_id {
        Some(_) => None,
        None => by_string(&mut seen),
    };
    for (&row, &tokens) in counted.iter().zip(estimates.iter().rev()) {
        total += tokens;
        let small = tokens < config.min_output_tokens;
        // The count of newer kept outputs (of this tool) this one ranks behind.
        let rank = match config.keep_recent_per_tool {
            true => tool_rank(row, &mut ranks, tool, &mut recent_by_tool),
            false => &mut recent_all,
        };
        let recent = config.keep_recent.is_some_and(|n| *rank < n);
        // Staleness decides only a large output that the windows would keep:
        // past the token window and the recent ones, a stale output and a
        // kept-counted one are both pruned, and neither window looks back.
        let asked = !small && (window <= config.protect || recent);
        let superseded = if !asked {
            false
        } else if let Some(stale) = &mut stale {
            stale.of(row)?
        } else if let Some(ids) = &mut by_id {
            match ids.of(row) {
                Some(superseded) => superseded,
                None => {
                    by_id = None;
                    stale = by_string(&mut seen);
                    stale
                        .as_mut()
                        .expect("supersession reads the inputs")
                        .of(row)?
                }
            }
        } else {
            false
        };
        if superseded {
            // Stale: goes first, and takes no room in the windows.
            pruned += tokens;
            rows.push(row);
            continue;
        }
        window += tokens;
        *rank += 1;
        if window > config.protect && !recent && !small {
            pruned += tokens;
            rows.push(row);
        }
    }
    if !selection_stands(table, messages, config, &rows, pruned)? {
        (pruned, rows) = (0, Vec::new());
    }
    Ok(SessionPrune {
        total,
        pruned,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::{Int16Type, Int32Type};
    use arrow_array::{DictionaryArray, Int16Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::target::{tool_target, tool_target_array};
    use crate::testutil::*;
    use arrow_array::{ArrayRef, LargeStringArray};

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
    fn pinned_outputs_are_never_counted_or_cleared() {
        let mut msgs = long_session();
        // a0 (the oldest read, row 1) pinned: a3..a1 are cleared around it.
        msgs[1].parts[0] = pin(msgs[1].parts[0].clone());
        let r = run(msgs, &PruneConfig::default());
        assert_eq!((r.total, r.pruned), (70_000, 30_000));
        assert_eq!(r.rows, vec![7, 5, 3]);
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

    /// A single-task autonomous run: one user message, then `steps` assistant
    /// steps each with one 4 000-char (1 000-token) tool output.
    fn autonomous_run(steps: usize) -> Vec<crate::testutil::M> {
        let mut msgs = vec![user("task", vec![text("fix the bug")])];
        for t in 0..steps {
            msgs.push(assistant(
                &format!("a{t}"),
                "task",
                vec![tool("bash", 4_000)],
            ));
        }
        msgs
    }

    fn steps(protect_turns: u32) -> PruneConfig {
        PruneConfig {
            turn: TurnUnit::Step,
            protect_turns,
            protect: 0,
            minimum: 0,
            ..Default::default()
        }
    }

    #[test]
    fn user_turns_protect_a_whole_autonomous_run() {
        let r = run(autonomous_run(10), &PruneConfig::default());
        assert_eq!(r, SessionPrune::default());
        let tight = PruneConfig {
            protect: 0,
            minimum: 0,
            ..Default::default()
        };
        assert_eq!(run(autonomous_run(10), &tight), SessionPrune::default());
    }

    #[test]
    fn step_turns_reach_an_autonomous_run() {
        // a9 is the newest step (turn 1): protect_turns 2 skips only what is newer
        // than a8, so a9 is protected and a8..a0 are pruned.
        let r = run(autonomous_run(10), &steps(2));
        assert_eq!((r.total, r.pruned), (9_000, 9_000));
        assert_eq!(r.rows, vec![9, 8, 7, 6, 5, 4, 3, 2, 1]);
        // Three steps protected: a9, a8 skipped, a7 is the third turn.
        assert_eq!(run(autonomous_run(10), &steps(3)).pruned, 8_000);
    }

    #[test]
    fn keep_recent_keeps_the_newest_outputs() {
        let config = PruneConfig {
            keep_recent: Some(5),
            ..steps(0)
        };
        let r = run(autonomous_run(10), &config);
        // a9..a5 kept, a4..a0 (rows 5..1) pruned.
        assert_eq!(
            (r.total, r.pruned, r.rows),
            (10_000, 5_000, vec![5, 4, 3, 2, 1])
        );
        // The token window and the count both protect: a part is pruned only
        // beyond both.
        let config = PruneConfig {
            protect: 7_000,
            ..config
        };
        assert_eq!(run(autonomous_run(10), &config).rows, vec![3, 2, 1]);
    }

    #[test]
    fn keep_recent_per_tool_counts_each_tool() {
        let mut msgs = vec![user("task", vec![])];
        for t in 0..6 {
            let name = if t % 2 == 0 { "read" } else { "bash" };
            msgs.push(assistant(&format!("a{t}"), "task", vec![tool(name, 4_000)]));
        }
        let all = PruneConfig {
            keep_recent: Some(2),
            ..steps(0)
        };
        // Over all tools the newest two (a5, a4) stay.
        assert_eq!(run(msgs.clone(), &all).rows, vec![4, 3, 2, 1]);
        let per_tool = PruneConfig {
            keep_recent_per_tool: true,
            ..all
        };
        // Per tool: a5, a3 (bash) and a4, a2 (read) stay.
        assert_eq!(run(msgs, &per_tool).rows, vec![2, 1]);
    }

    /// `b` with its `tool` column replaced by `column`.
    fn with_tool(b: &RecordBatch, column: ArrayRef) -> RecordBatch {
        let i = b.schema().index_of("tool").unwrap();
        let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
        fields[i] = Arc::new(Field::new("tool", column.data_type().clone(), true));
        let mut columns = b.columns().to_vec();
        columns[i] = column;
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    #[test]
    fn tool_ids_rank_per_tool_as_the_names_do() {
        // Tools interleaved, one call without a name and one named "" (the
        // same tool to a per-tool count), newest last.
        let names = [
            Some("read"),
            Some("bash"),
            None,
            Some("read"),
            Some(""),
            Some("bash"),
            Some("read"),
            None,
            Some("bash"),
            Some("read"),
        ];
        let mut msgs = vec![user("task", vec![])];
        for (t, name) in names.iter().enumerate() {
            let mut part = tool("x", 4_000);
            part.tool = *name;
            msgs.push(assistant(&format!("a{t}"), "task", vec![part]));
        }
        let config = PruneConfig {
            keep_recent: Some(1),
            keep_recent_per_tool: true,
            ..steps(0)
        };
        let b = batch(&[("s", msgs)]);
        let by_name = prune_batch(b.clone(), &config).unwrap();
        // Newest of each: a9 (read), a8 (bash), a7 (no name: "" too) stay.
        assert_eq!(by_name.rows, vec![7, 6, 5, 4, 3, 2, 1]);
        let mut values: Vec<Option<&str>> = vec![None];
        values.extend(names);
        let mid = values.len() / 2;
        let halves = [0..mid, mid..values.len()]
            .map(|r| with_tool(&b.slice(r.start, r.len()), dictionary(&values[r])));
        for (how, got) in [
            (
                "dictionary",
                prune_batch(with_tool(&b, dictionary(&values)), &config),
            ),
            (
                "duplicated",
                prune_batch(with_tool(&b, duplicated_dictionary(&values)), &config),
            ),
            ("two dictionaries", prune_batches(&halves, &config)),
        ] {
            assert_eq!(got.unwrap(), by_name, "{how}");
        }
        let chunks = [
            dictionary(&values[..mid]),
            duplicated_dictionary(&values[mid..]),
        ];
        let column = StrCol::new("tool", &chunks).unwrap();
        let ids = ToolIds::new(&column).expect("every chunk a dictionary");
        for (r, v) in values.iter().enumerate() {
            for (q, w) in values.iter().enumerate() {
                let same = v.unwrap_or("") == w.unwrap_or("");
                assert_eq!(ids.id(r) == ids.id(q), same, "rows {r} and {q}");
            }
        }
        // "", read, bash ("not a target" is a name no row has).
        assert_eq!(ids.count, 4);
    }

    #[test]
    fn clear_at_least_is_inclusive_and_minimum_strict() {
        let at = |n| PruneConfig {
            clear_at_least: n,
            ..steps(2)
        };
        assert_eq!(run(autonomous_run(10), &at(9_000)).pruned, 9_000);
        assert_eq!(run(autonomous_run(10), &at(9_001)).pruned, 0);
    }

    #[test]
    fn trigger_acts_only_above_the_visible_context() {
        // The task in ASCII (its bounds meet) and not (only the estimate decides),
        // and 10 outputs of 1 000 tokens each.
        for task in ["fix the bug", "répare le bogue ✓ 🙂 — vite, s'il te plaît"] {
            let session = || {
                let mut msgs = autonomous_run(10);
                msgs[0].parts[0] = text(&task.repeat(20));
                msgs
            };
            let batches = [batch(&[("s", session())])];
            let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
            let table = PartTable::new(&cols).unwrap();
            let messages = table.messages(0).unwrap();
            let config = steps(2).estimate_config();
            let visible: u64 = estimates_of(&table, &messages, config, &[], None)
                .unwrap()
                .iter()
                .map(|m| m.tokens)
                .sum();
            assert!(visible > 10_000 && visible < 10_400, "{visible}");
            let trig = |t| PruneConfig {
                trigger: t,
                ..steps(2)
            };
            let run_compact = |config: &PruneConfig| {
                let batches = [batch(&[("s", session())])];
                let cols = Columns::from_batches(&batches, config.scan()).unwrap();
                let table = PartTable::new(&cols).unwrap();
                prune(&table, config).unwrap().remove(0)
            };
            assert_eq!(run_compact(&trig(visible)).pruned, 0, "{task}");
            assert_eq!(run_compact(&trig(visible - 1)).pruned, 9_000, "{task}");
            // Far below and far above: the bounds alone decide, the same way.
            assert_eq!(run_compact(&trig(9_000)).pruned, 9_000);
            assert_eq!(run_compact(&trig(20_000)).pruned, 0);
        }
    }

    #[test]
    fn outputs_the_model_input_does_not_send_do_not_set_off_the_trigger() {
        // A tool part in a user message is counted by the walk but not sent
        // (only assistant messages send tool calls): the context stays small.
        let msgs = vec![
            user("u", vec![text("go"), tool("read", 4_000)]),
            assistant("a", "u", vec![text("ok")]),
        ];
        let config = PruneConfig {
            trigger: 100,
            ..steps(0)
        };
        let batches = [batch(&[("s", msgs.clone())])];
        let cols = Columns::from_batches(&batches, config.scan()).unwrap();
        let table = PartTable::new(&cols).unwrap();
        for method in ["opencode", "o200k"] {
            let config = PruneConfig {
                method: method.parse().unwrap(),
                ..config.clone()
            };
            assert_eq!(prune(&table, &config).unwrap()[0], SessionPrune::default());
            let without = PruneConfig {
                trigger: 0,
                ..config
            };
            assert_eq!(prune(&table, &without).unwrap()[0].rows, vec![1]);
        }
    }

    #[test]
    fn small_outputs_stay_when_asked() {
        let mut msgs = autonomous_run(4);
        msgs[2].parts[0].output = Some("x".repeat(20)); // a1: 5 tokens
        let config = PruneConfig {
            min_output_tokens: 6,
            ..steps(0)
        };
        let r = run(msgs.clone(), &config);
        // a1 is counted (and takes its place in the windows) but stays
        assert_eq!((r.total, r.rows), (3_005, vec![4, 3, 1]));
        assert_eq!(run(msgs, &steps(0)).rows, vec![4, 3, 2, 1]);
    }

    #[test]
    fn superseded_outputs_go_first() {
        let read = |path: &str| call("read", &format!(r#"{{"filePath":"{path}"}}"#), 4_000);
        let msgs = vec![
            user("u0", vec![]),
            assistant("a0", "u0", vec![read("a.py")]),
            assistant("a1", "u0", vec![read("b.py")]),
            // calls with no target (the same input twice) supersede nothing
            assistant("n0", "u0", vec![call("todo", r#"{"n":1}"#, 4_000)]),
            assistant("n1", "u0", vec![call("todo", r#"{"n":1}"#, 4_000)]),
            // edited: a0's read of a.py is stale
            assistant(
                "a2",
                "u0",
                vec![call("edit", r#"{"file_path":"a.py"}"#, 40)],
            ),
            assistant(
                "a3",
                "u0",
                vec![call("bash", r#"{"command":"pytest"}"#, 4_000)],
            ),
            assistant(
                "a4",
                "u0",
                vec![call("bash", r#"{"command":"pytest"}"#, 4_000)],
            ),
            // the same command of another tool supersedes nothing
            assistant(
                "a5",
                "u0",
                vec![call("shell", r#"{"command":"pytest"}"#, 40)],
            ),
            user("u1", vec![]),
            user("u2", vec![]),
        ];
        let config = PruneConfig {
            supersede: true,
            protect: 100_000,
            minimum: 0,
            ..Default::default()
        };
        let r = run_scan(msgs, &config);
        // Inside a 100k window only the stale ones go: the older pytest run and a0.
        assert_eq!((r.rows, r.pruned), (vec![6, 1], 2_000));
    }

    /// `b`'s `tool_target` values worked out from it, null at the rows
    /// `null` names (those the scan works out from the input).
    fn target_values(b: &RecordBatch, null: impl Fn(usize) -> bool) -> Vec<Option<String>> {
        let column = |name| b.column(b.schema().index_of(name).unwrap()).clone();
        let all = tool_target_array(&column("tool"), &column("input")).unwrap();
        (0..all.len())
            .map(|r| (!null(r)).then(|| all.value(r).to_owned()))
            .collect()
    }

    /// `b` with `column` as its `tool_target`.
    fn with_column(b: &RecordBatch, column: ArrayRef) -> RecordBatch {
        let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
        let field = Field::new(TOOL_TARGET, column.data_type().clone(), true);
        fields.push(Arc::new(field));
        let mut columns = b.columns().to_vec();
        columns.push(column);
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn dictionary(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(
            values
                .iter()
                .copied()
                .collect::<DictionaryArray<Int32Type>>(),
        )
    }

    /// A dictionary (int16 keys) holding every value twice, a null value and
    /// a malformed one no row uses: rows alternate between the two copies,
    /// and a null row points at the null value.
    fn duplicated_dictionary(values: &[Option<&str>]) -> ArrayRef {
        let mut distinct: Vec<&str> = values.iter().flatten().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let mut dict: Vec<Option<&str>> = vec![Some("not a target"), None];
        dict.extend(distinct.iter().flat_map(|&v| [Some(v), Some(v)]));
        let keys: Int16Array = values
            .iter()
            .enumerate()
            .map(|(r, v)| match v {
                None => Some(1),
                Some(v) => {
                    let k = distinct.binary_search(v).unwrap();
                    Some(i16::try_from(2 + 2 * k + r % 2).unwrap())
                }
            })
            .collect();
        let dict = arrow_array::StringArray::from(dict);
        Arc::new(DictionaryArray::<Int16Type>::try_new(keys, Arc::new(dict)).unwrap())
    }

    fn prune_batches(batches: &[RecordBatch], config: &PruneConfig) -> Result<SessionPrune> {
        let cols = Columns::from_batches(batches, config.scan())?;
        let table = PartTable::new(&cols)?;
        Ok(prune(&table, config)?.remove(0))
    }

    fn prune_batch(b: RecordBatch, config: &PruneConfig) -> Result<SessionPrune> {
        prune_batches(&[b], config)
    }

    /// `msgs` pruned under `config` (its own scan, supersession's inputs too),
    /// the same with the targets worked out once (`tool_target`), in full or
    /// in part, as plain strings, a dictionary (read by id), one
    /// holding each value twice, and two chunks with a dictionary each.
    fn run_scan(msgs: Vec<crate::testutil::M>, config: &PruneConfig) -> SessionPrune {
        let b = batch(&[("s", msgs)]);
        let plain = prune_batch(b.clone(), config).unwrap();
        // Null on every other row, or on the oldest (read by id until then).
        let nulls: [fn(usize) -> bool; 3] = [|_| false, |r| r % 2 == 0, |r| r < 3];
        for null in nulls {
            let owned = target_values(&b, null);
            let values: Vec<Option<&str>> = owned.iter().map(Option::as_deref).collect();
            let large: ArrayRef = Arc::new(LargeStringArray::from(values.clone()));
            let columns = [
                ("plain", large),
                ("dictionary", dictionary(&values)),
                ("duplicated", duplicated_dictionary(&values)),
            ];
            for (how, column) in columns {
                let targeted = prune_batch(with_column(&b, column), config).unwrap();
                assert_eq!(targeted, plain, "with the target column ({how})");
            }
            let mid = b.num_rows() / 2;
            let halves = [0..mid, mid..b.num_rows()]
                .map(|r| with_column(&b.slice(r.start, r.len()), dictionary(&values[r])));
            let targeted = prune_batches(&halves, config).unwrap();
            assert_eq!(
                targeted, plain,
                "with the target column in two dictionaries"
            );
        }
        plain
    }

    #[test]
    fn target_ids_are_equal_exactly_for_equal_values() {
        let first = ["file:a.py", "", "cmd:4:bash:ls", "file:a.py", "bad"].map(Some);
        let second = [
            Some("cmd:4:bash:ls"),
            None,
            Some("file:b.py"),
            Some("file:a.py"),
        ];
        let chunks = [dictionary(&first), duplicated_dictionary(&second)];
        let column = StrCol::new(TOOL_TARGET, &chunks).unwrap();
        let ids = TargetIds::new(&column).expect("every chunk a dictionary");
        let values: Vec<Option<&str>> = first.iter().chain(&second).copied().collect();
        for (r, v) in values.iter().enumerate() {
            let id = ids.id(r);
            match v {
                None => assert_eq!(id, NULL_ID),
                Some("") => assert_eq!(id, NO_TARGET),
                Some("bad") => assert_eq!(id, BAD_ID),
                Some(_) => assert!((1..ids.count as u32).contains(&id), "{r}"),
            }
            for (q, w) in values.iter().enumerate() {
                if id < BAD_ID && ids.id(q) < BAD_ID {
                    assert_eq!(id == ids.id(q), v == w, "rows {r} and {q}");
                }
            }
        }
        // Three targets and no target: "not a target" is never read.
        assert_eq!(ids.count, 4);
        let plain = [Arc::new(arrow_array::StringArray::from(vec!["file:a.py"])) as ArrayRef];
        let plain = StrCol::new(TOOL_TARGET, &plain).unwrap();
        assert!(
            TargetIds::new(&plain).is_none(),
            "a plain column is read as strings"
        );
    }

    #[test]
    fn target_ids_read_a_shared_dictionary_once() {
        let values = [
            Some("file:a.py"),
            Some(""),
            Some("cmd:4:bash:ls"),
            Some("file:a.py"),
            None,
            Some("file:b.py"),
            Some("cmd:4:bash:ls"),
        ];
        // Slices of one dictionary array share its dictionary (as the chunks
        // of pyarrow's dictionary_encode do); the last chunk has an equal
        // dictionary of its own.
        let whole = dictionary(&values);
        let chunks = [
            whole.slice(0, 3),
            whole.slice(3, 2),
            whole.slice(5, 2),
            dictionary(&values[5..]),
        ];
        let column = StrCol::new(TOOL_TARGET, &chunks).unwrap();
        let ids = TargetIds::new(&column).expect("every chunk a dictionary");
        assert!(Arc::ptr_eq(&ids.per_key[0], &ids.per_key[1]));
        assert!(Arc::ptr_eq(&ids.per_key[1], &ids.per_key[2]));
        assert!(
            !Arc::ptr_eq(&ids.per_key[2], &ids.per_key[3]),
            "an equal dictionary elsewhere is read again"
        );
        let rows: Vec<Option<&str>> = values.iter().chain(&values[5..]).copied().collect();
        for (r, v) in rows.iter().enumerate() {
            for (q, w) in rows.iter().enumerate() {
                match (v, w) {
                    (None, _) | (_, None) => {}
                    _ => assert_eq!(ids.id(r) == ids.id(q), v == w, "rows {r} and {q}"),
                }
            }
        }
        assert_eq!(ids.count, 4, "no target and three targets");
        // A shared dictionary costs the same as one chunk: the map is built once.
        let mut seen = Vec::new();
        for map in &ids.per_key {
            if !seen.iter().any(|m: &&Arc<[u32]>| Arc::ptr_eq(m, map)) {
                seen.push(map);
            }
        }
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn plain_arrays_are_the_same_only_by_address() {
        let large: ArrayRef = Arc::new(LargeStringArray::from(vec!["a", "b", "c"]));
        let small: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a", "b", "c"]));
        let view: ArrayRef = Arc::new(arrow_array::StringViewArray::from(vec!["a", "b", "c"]));
        for array in [large, small, view] {
            let copy = array.to_data();
            let copy: ArrayRef = arrow_array::make_array(copy);
            let chunks = [
                array.clone(),
                copy,
                array.slice(0, 3),
                array.slice(1, 2),
                array.slice(0, 2),
            ];
            let col = StrCol::new(TOOL_TARGET, &chunks).unwrap();
            let plains = plain_chunks(&col);
            assert!(plains[0].is_same(plains[1]) && plains[0].is_same(plains[2]));
            assert!(!plains[0].is_same(plains[3]), "another offset");
            assert!(!plains[0].is_same(plains[4]), "another length");
        }
        let a: ArrayRef = Arc::new(LargeStringArray::from(vec!["a", "b", "c"]));
        let b: ArrayRef = Arc::new(LargeStringArray::from(vec!["a", "b", "c"]));
        let chunks = [a, b];
        let col = StrCol::new(TOOL_TARGET, &chunks).unwrap();
        let plains = plain_chunks(&col);
        assert!(!plains[0].is_same(plains[1]), "equal values, other buffers");
    }

    fn plain_chunks<'a>(col: &StrCol<'a>) -> Vec<Plain<'a>> {
        col.chunks()
            .map(|(_, c)| match c {
                StrChunk::Plain(p) => *p,
                StrChunk::Dict { .. } => unreachable!("plain chunks only"),
            })
            .collect()
    }

    #[test]
    fn tool_targets_name_each_target_exactly() {
        let t = |tool, input| tool_target(tool, Some(input));
        assert_eq!(t(Some("read"), r#"{"filePath":"a.py"}"#), "file:a.py");
        assert_eq!(t(Some("edit"), r#"{"path":"src\/a.py"}"#), "file:src/a.py");
        assert_eq!(t(Some("bash"), r#"{"command":"ls"}"#), "cmd:4:bash:ls");
        assert_eq!(t(None, r#"{"command":"ls"}"#), "cmd:0::ls");
        assert_eq!(tool_target(Some("bash"), None), "");
        assert_eq!(t(Some("bash"), r#"{"n":1}"#), "");
        // The length keeps a tool name holding the separator apart.
        let (a, b) = (
            t(Some("a:b"), r#"{"cmd":"c"}"#),
            t(Some("a"), r#"{"cmd":"b:c"}"#),
        );
        assert_ne!(a, b);
        for value in [a, b, "file:a.py".into(), "cmd:0::ls".into()] {
            let back = stale_of_target(&value).unwrap().unwrap();
            let again = match back {
                Stale::Path(p) => format!("file:{p}"),
                Stale::Command(tool, c) => format!("cmd:{}:{tool}:{c}", tool.len()),
            };
            assert_eq!(again, value);
        }
        assert!(matches!(stale_of_target(""), Ok(None)));
        for bad in [
            "a.py",
            "file:",
            "cmd:4:bash",
            "cmd:9:bash:ls",
            "cmd:+4:bash:ls",
            "cmd:4:bash:",
        ] {
            assert!(stale_of_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_malformed_tool_target_is_an_error_naming_its_row() {
        let read = |path: &str| call("read", &format!(r#"{{"filePath":"{path}"}}"#), 4_000);
        let msgs = vec![
            user("u0", vec![]),
            assistant("a0", "u0", vec![read("a.py")]),
            assistant("a1", "u0", vec![read("a.py")]),
        ];
        let b = batch(&[("s", msgs)]);
        let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(TOOL_TARGET, DataType::Utf8, true)));
        let mut columns = b.columns().to_vec();
        columns.push(Arc::new(arrow_array::StringArray::from(vec![
            Some(""),
            Some("a.py"),
            None,
        ])));
        let b = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let config = PruneConfig {
            supersede: true,
            protect: 100_000,
            ..steps(0)
        };
        let err = prune_batch(b, &config).unwrap_err();
        assert!(
            matches!(&err, CoreError::UnknownValue { value, at, .. }
                if value == "a.py" && at.row == Some(1) && at.column == Some(TOOL_TARGET)),
            "{err}"
        );
    }

    #[test]
    fn a_target_skipped_as_irrelevant_still_supersedes_an_older_call() {
        // Newest first: read a.py (read's kept one), read b.py (past read's
        // keep: pruned without asking whether it is stale), edit b.py (edit's
        // first: kept unless stale, and it is, by that newer read).
        let msgs = vec![
            user("u0", vec![]),
            assistant(
                "a0",
                "u0",
                vec![call("edit", r#"{"file_path":"b.py"}"#, 4_000)],
            ),
            assistant("a1", "u0", vec![call("read", r#"{"path":"b.py"}"#, 4_000)]),
            assistant("a2", "u0", vec![call("read", r#"{"path":"a.py"}"#, 4_000)]),
        ];
        let config = PruneConfig {
            keep_recent: Some(1),
            keep_recent_per_tool: true,
            supersede: true,
            ..steps(0)
        };
        let r = run_scan(msgs.clone(), &config);
        assert_eq!((r.rows, r.pruned), (vec![2, 1], 2_000));
        // Not stale, edit's newest output stays.
        let without = PruneConfig {
            supersede: false,
            ..config
        };
        assert_eq!(run_scan(msgs, &without).rows, vec![2]);
    }

    #[test]
    fn escaped_and_plain_inputs_name_the_same_target() {
        // The fast path declines the escapes, the parser reads them: the same
        // path and the same key as the plain inputs that supersede them.
        for (old, new) in [
            (r#"{"path":"src\/a.py"}"#, r#"{"path":"src/a.py"}"#),
            (r#"{"p\u0061th":"src/a.py"}"#, r#"{"path":"src/a.py"}"#),
            (r#"{"path":"src/a.py"}"#, r#"{"path":"src\u002fa.py"}"#),
            (r#"{"command":"ls \"x\""}"#, r#"{"cmd":"ls \"x\"","n":1}"#),
        ] {
            let msgs = vec![
                user("u0", vec![]),
                assistant("a0", "u0", vec![call("bash", old, 4_000)]),
                assistant("a1", "u0", vec![call("bash", new, 4_000)]),
            ];
            let config = PruneConfig {
                supersede: true,
                protect: 100_000,
                ..steps(0)
            };
            assert_eq!(run_scan(msgs, &config).rows, vec![1], "{old} {new}");
        }
    }

    #[test]
    fn a_session_below_the_gates_reports_its_total() {
        let config = |minimum, clear_at_least| PruneConfig {
            minimum,
            clear_at_least,
            supersede: true,
            protect: 0,
            ..Default::default()
        };
        for c in [config(80_000, 0), config(0, 80_001)] {
            let r = run_scan(long_session(), &c);
            assert_eq!((r.total, r.pruned, r.rows.len()), (80_000, 0, 0));
        }
        assert_eq!(run_scan(long_session(), &config(0, 80_000)).pruned, 80_000);
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

    /// Generated transcripts in the layouts `tokens_about` reads (counted,
    /// tool names in an int32 dictionary; counts with nulls; large-string
    /// inputs; two chunks, the counts then copied) and two it declines
    /// (plain tool names, no counts): the coarse bounds hold the exact
    /// estimate of every session they bound, each of the lower bounds
    /// `above_trigger` uses too, and the trigger decides as the estimate
    /// does at every threshold near the estimate and the bounds.
    #[test]
    fn the_coarse_bounds_hold_the_estimate_and_decide_as_it_does() {
        let (mut bounded, mut sessions_seen, mut asciis) = (0, 0, 0);
        // Names and inputs in ASCII (the names' dictionary too), or not.
        for ascii in [true, false] {
            coarse_bounds_in(ascii, &mut bounded, &mut sessions_seen, &mut asciis);
        }
        // Most sessions of the layouts it reads are bounded (the others
        // hold a running, pending, cleared or misplaced call).
        assert!(bounded * 2 > sessions_seen, "{bounded} of {sessions_seen}");
        assert!(asciis * 5 > sessions_seen, "{asciis} of {sessions_seen}");
    }

    fn coarse_bounds_in(
        ascii: bool,
        bounded: &mut usize,
        sessions_seen: &mut usize,
        asciis: &mut usize,
    ) {
        let mut rng = Rng(0x5eed_1234 + u64::from(ascii));
        let sessions: Vec<(String, Vec<crate::testutil::M>)> = (0..60)
            .map(|i| (format!("s{i}"), random_session(&mut rng, ascii)))
            .collect();
        let named: Vec<(&str, Vec<crate::testutil::M>)> = sessions
            .iter()
            .map(|(n, m)| (n.as_str(), m.clone()))
            .collect();
        let b = batch(&named);
        let split = batch(&named[..30]).num_rows();
        let counted = with_counts(&with_dictionary_tools(&b), false);
        let n = b.num_rows();
        let layouts = [
            ("counted, tools a dictionary", vec![counted.clone()], true),
            (
                "counts with nulls",
                vec![with_counts(&with_dictionary_tools(&b), true)],
                true,
            ),
            ("large inputs", vec![with_large_inputs(&counted)], true),
            (
                "inputs on every row",
                vec![with_inputs_everywhere(&counted)],
                true,
            ),
            (
                "two chunks",
                vec![counted.slice(0, split), counted.slice(split, n - split)],
                true,
            ),
            ("plain tool names", vec![with_counts(&b, false)], false),
            ("no counts", vec![with_dictionary_tools(&b)], false),
        ];
        for (name, batches, bounds) in layouts {
            let cols = Columns::from_batches(&batches, Scan::Compact).unwrap();
            let table = PartTable::new(&cols).unwrap();
            for (overhead, keep_thinking) in [(4, 0), (0, 1), (7, 3)] {
                let config = PruneConfig {
                    overhead,
                    render: Render {
                        keep_thinking,
                        ..Default::default()
                    },
                    protect: 0,
                    minimum: 0,
                    ..Default::default()
                };
                let estimate = config.estimate_config();
                let mut exacts = Vec::new();
                for s in 0..table.sessions.len() {
                    *sessions_seen += usize::from(bounds);
                    let messages = table.messages(s).unwrap();
                    let start = pivot_start_in(&table, s, &messages).unwrap();
                    let shown = visible_in(&table, s, start, &messages).unwrap();
                    let each = estimates_of(&table, &messages, estimate, &[], Some(&shown));
                    let exact = tokens_visible(&each.unwrap(), &shown);
                    exacts.push(exact);
                    let mut triggers = vec![1, exact.saturating_sub(1), exact, exact + 1];
                    let about = tokens_about(&table, &messages, estimate, &shown);
                    assert!(bounds || about.is_none(), "{name}: no coarse bounds");
                    if let Some(a) = about {
                        *bounded += 1;
                        let at = format!("{name}, session {s}, {estimate:?}: {a:?}, exact {exact}");
                        assert!(a.span.lo <= exact && exact <= a.span.hi, "{at}");
                        let calls = !may_observe_calls(&table, &messages);
                        let ascii = calls && calls_ascii(&table, &shown);
                        let lo = a.span.lo
                            + if calls { a.calls } else { 0 }
                            + if ascii { a.ascii } else { 0 };
                        assert!(lo <= exact, "names and inputs as ASCII: {at}");
                        *asciis += usize::from(ascii);
                        if !may_ignore_texts(&table, &messages) {
                            assert!(lo + a.texts <= exact, "with the texts: {at}");
                        }
                        let (l, h) = (a.span.lo, a.span.hi);
                        triggers.extend([l.saturating_sub(1), l, h, h + 1, lo, lo + a.texts]);
                    }
                    for trigger in triggers.into_iter().filter(|&t| t > 0) {
                        let config = PruneConfig {
                            trigger,
                            ..config.clone()
                        };
                        let above = above_trigger(&table, &messages, &config, &shown).unwrap();
                        assert_eq!(
                            above.is_some(),
                            exact > trigger,
                            "{name}, session {s}, trigger {trigger}, exact {exact}"
                        );
                    }
                }
                // The whole prune: as without a trigger where the estimate
                // is above it, nothing elsewhere.
                let open = prune(&table, &config).unwrap();
                for trigger in [500, 3_000, 12_000] {
                    let config = PruneConfig {
                        trigger,
                        ..config.clone()
                    };
                    let got = prune(&table, &config).unwrap();
                    for (s, exact) in exacts.iter().enumerate() {
                        let want = match *exact > trigger {
                            true => open[s].clone(),
                            false => SessionPrune::default(),
                        };
                        assert_eq!(got[s], want, "{name}, session {s}, trigger {trigger}");
                    }
                }
            }
        }
    }

    #[test]
    fn outputs_hidden_by_the_pivot_do_not_set_off_the_trigger() {
        // The summary is inside the two protected user turns, so the walk goes on
        // past it and counts a0's 10 000 tokens: hidden by the pivot, they must
        // not count towards the visible context the trigger measures.
        let msgs = vec![
            user("u0", vec![text("task")]),
            assistant("a0", "u0", vec![tool("read", 40_000)]),
            user("u1", vec![compaction()]),
            summary("a1", "u1"),
            user("u2", vec![text("go on")]),
            assistant("a2", "u2", vec![tool("read", 40)]),
        ];
        let config = PruneConfig {
            protect: 0,
            minimum: 0,
            trigger: 5_000,
            ..PruneConfig::default()
        };
        let batches = [batch(&[("s", msgs.clone())])];
        let cols = Columns::from_batches(&batches, config.scan()).unwrap();
        let table = PartTable::new(&cols).unwrap();
        assert_eq!(prune(&table, &config).unwrap()[0], SessionPrune::default());
        // Without the trigger the walk does select it (OpenCode's rule).
        let open = PruneConfig {
            trigger: 0,
            ..config
        };
        assert_eq!(run(msgs, &open).pruned, 10_000);
    }
}
