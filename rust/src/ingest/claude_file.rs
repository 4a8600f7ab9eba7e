//! A Claude Code file as its readers share it: which events are asides,
//! the hash of an id (the first pass's, `claude_plan`, and the carried ids'),
//! what reading a window of the file gives back, and what a window carries
//! to the next. The serde_json reader (`claude_code`), the fast path
//! (`fast_claude`) and the first pass all read these; none of them is read here.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::ops::Range;
use std::path::Path;

use super::rows::Rows;
use super::types::Problem;

/// Whether an event `type` is one Claude Code writes beside the conversation,
/// never model input: a title (`summary`, for /resume) or a file-history
/// snapshot. Without a `sessionId` before the file's first other event such
/// lines wait and join that event's session (never a session of their own).
pub(super) fn is_aside(kind: &[u8]) -> bool {
    matches!(kind, b"summary" | b"file-history-snapshot")
}

/// The 64-bit hash of an id (a session id, a call or result id, a `uuid`).
pub(super) fn hash(bytes: &[u8]) -> u64 {
    // SipHash with fixed keys: the same id hashes alike in every run. A
    // collision only merges two ids' spans, which makes cuts rarer.
    BuildHasherDefault::<DefaultHasher>::default().hash_one(bytes)
}

/// The message ids of a session's earlier windows that a later one may ask
/// for, kept as 128-bit hashes rather than text (16 bytes an id). Two ids
/// of a session of `n` messages share a hash with odds of about n² / 2^129
/// (1e-25 for ten million). The high half is the first pass's hash of the
/// id (`hash`), by which `retain` drops the ids it rules out.
#[derive(Default)]
pub struct Known(HashSet<u128>);

impl Known {
    fn hash(id: &str) -> u128 {
        let sip = BuildHasherDefault::<DefaultHasher>::default();
        // two independent 64-bit hashes: the first pass's, and of the id after a tag
        let (a, b) = (hash(id.as_bytes()), sip.hash_one((0x5eed_u16, id)));
        (u128::from(a) << 64) | u128::from(b)
    }

    pub fn contains(&self, id: &str) -> bool {
        !self.0.is_empty() && self.0.contains(&Known::hash(id))
    }

    pub fn extend(&mut self, ids: impl IntoIterator<Item = String>) {
        self.0.extend(ids.into_iter().map(|id| Known::hash(&id)));
    }

    /// Keep the ids whose first-pass hash `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        self.0.retain(|&h| keep((h >> 64) as u64));
        self.0.shrink_to_fit();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// What a line became: its session and rows, and whether it opens the session.
#[derive(Clone)]
pub(super) struct Kept {
    pub session: String,
    pub rows: Range<usize>,
    pub first: bool,
}

/// A line of the file and what became of it.
pub(super) struct At<T> {
    pub line: usize,
    pub raw: Range<usize>,
    pub outcome: std::result::Result<T, Problem>,
}

pub(super) type Line = At<Kept>;

/// A window's rows, and what became of each of its lines.
pub(super) struct FileOut {
    pub rows: Rows,
    pub lines: Vec<Line>,
}

/// What a file's later windows need of its earlier ones (a file read whole
/// is one window): the sessions that may go on, in the order they were
/// first read, and the session a line without a `sessionId` joins.
pub(super) struct Carry {
    pub sessions: Vec<Carried>,
    pub current: String,
    /// An event other than an aside (`is_aside`) without a `sessionId` was read:
    /// such lines no longer wait for the session of the next one.
    pub started: bool,
    /// More windows follow: keep the message ids (a file read whole does not).
    pub windowed: bool,
    /// A subagent's file (`subagent_suffix`): what every `sessionId` it
    /// names is suffixed with, so the agent is a session of its own.
    pub agent: Option<String>,
}

/// A session of earlier windows: its id, how many messages it has, and their ids.
pub(super) struct Carried {
    pub id: String,
    pub messages: usize,
    pub ids: Known,
}

impl Carry {
    /// Nothing read yet: lines before any `sessionId` join the `stem` session.
    pub fn new(stem: String) -> Carry {
        Carry {
            sessions: Vec::new(),
            current: stem,
            started: false,
            windowed: false,
            agent: None,
        }
    }

    /// The session a line naming `sid` joins: `sid`, suffixed in a subagent's file.
    pub fn named(&self, sid: String) -> String {
        match &self.agent {
            Some(suffix) => sid + suffix,
            None => sid,
        }
    }

    /// What the first window of the file `name` starts from (`id_base`:
    /// the name its sessions without an id take, as the caller gives it).
    pub fn of(name: &str, id_base: Option<&str>) -> Carry {
        // Path.stem: the name without its last suffix (or the base the caller gives).
        let mut carry = Carry::new(match id_base {
            Some(base) => base.to_owned(),
            None => Path::new(name)
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
        });
        carry.agent = subagent_suffix(name);
        carry
    }
}

/// Claude Code keeps each subagent of session `<id>` (a Task agent, the
/// compaction agent `agent-acompact-*`) in `<id>/subagents/agent-<agent>.jsonl`,
/// its lines naming the parent's `sessionId`. Read from there, its sessions
/// are `<sessionId>/subagents/agent-<agent>`: the agent is a session of its
/// own, named by its parent and itself, so a folder holding both reads as
/// one input (`ctxcompact.formats.source.subagent_parent` reads the parent
/// back). `None` for any other file.
pub fn subagent_suffix(name: &str) -> Option<String> {
    let path = Path::new(name);
    let stem = path.file_stem()?.to_str()?;
    let folder = path.parent()?.file_name()?.to_str()?;
    (folder == "subagents" && stem.len() > "agent-".len() && stem.starts_with("agent-"))
        .then(|| format!("/subagents/{stem}"))
}
