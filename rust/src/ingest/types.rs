//! The ingest's vocabulary: formats, error policy, sources, options and what
//! a run returns (rows, rejected lines, problems).

use std::str::FromStr;

use arrow_array::RecordBatch;

use crate::error::{CoreError, Result};

/// What one JSONL line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An OpenCode session export per line: `{"info", "messages"}`.
    OpenCode,
    /// An OpenCode message per line: `{"info": {"sessionID", ...}, "parts"}`;
    /// a session's messages are consecutive lines.
    OpenCodeMessages,
    /// An OpenAI chat session per line: `{"id", "messages"}` or a bare message list.
    OpenAiChat,
    /// OpenAI Responses items per line: a list, or `{"input": [...]}`.
    OpenAiResponses,
    /// An Anthropic Messages request body per line: `{"system"?, "messages"}`.
    Anthropic,
    /// Claude Code session files: one event per line, grouped by `sessionId`.
    ClaudeCode,
    /// A SWE-agent trajectory per line: `{"history": [...], ...}`.
    SweAgent,
    /// A mini-swe-agent trajectory per line: a message list, or `{"messages", ...}`.
    MiniSweAgent,
    /// tau-bench results per line: a list of runs, one session each.
    TauBench,
    /// OpenHands per line: a resolver record `{"history", ...}` or an event list.
    OpenHands,
    /// A chat list a runtime or integration holds (`chatlist.rs`): an
    /// `openai-chat` session whose messages may also hold Anthropic content
    /// blocks, each result tagged with its chat index. Internal: not in
    /// `NAMES`, so `openai-chat` keeps refusing Anthropic blocks.
    ChatList,
}

impl Format {
    pub const NAMES: [&'static str; 10] = [
        "opencode",
        "opencode-messages",
        "openai-chat",
        "openai-responses",
        "anthropic",
        "claude-code",
        "swe-agent",
        "mini-swe-agent",
        "tau-bench",
        "openhands",
    ];
    /// Every format, in the order of `NAMES`.
    pub const ALL: [Format; 10] = [
        Format::OpenCode,
        Format::OpenCodeMessages,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::SweAgent,
        Format::MiniSweAgent,
        Format::TauBench,
        Format::OpenHands,
    ];
}

impl FromStr for Format {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self> {
        match Format::NAMES.iter().position(|name| *name == s) {
            Some(i) => Ok(Format::ALL[i]),
            None => Err(CoreError::Config(format!(
                "unknown format {s:?}; one of {}",
                Format::NAMES.join(", ")
            ))),
        }
    }
}

/// What to do with a line that cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Fail the run with the first bad line (in file and line order).
    Raise,
    /// Leave the line out of the table and report it in `Ingested::rejected`.
    Skip,
}

impl FromStr for OnError {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "raise" => Ok(OnError::Raise),
            "skip" => Ok(OnError::Skip),
            other => Err(CoreError::Config(format!(
                "on_error must be 'raise' or 'skip', got {other:?}"
            ))),
        }
    }
}

/// One input file: its name (for messages), bytes and format (a property of
/// the file: files of several formats are read in one run).
pub struct Source<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
    pub format: Format,
    /// What names a session without an id of its own (`<id_base>:<line>`, a
    /// Claude Code file's first session); `None`: the file name, as
    /// `formats.read` names a single file. Reading a folder, the caller gives
    /// the path relative to it so ids stay unique.
    pub id_base: Option<&'a str>,
}

impl<'a> Source<'a> {
    pub fn new(name: &'a str, data: &'a [u8], format: Format) -> Self {
        Source {
            name,
            data,
            format,
            id_base: None,
        }
    }
}

pub struct Options {
    pub on_error: OnError,
    /// Target bytes per parallel chunk (a chunk always holds whole lines).
    pub chunk_bytes: usize,
}

impl Options {
    pub fn new(on_error: OnError) -> Self {
        Options {
            on_error,
            chunk_bytes: 1 << 20,
        }
    }
}

/// A line left out of the table, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Index into the sources.
    pub source: usize,
    /// 1-based line number.
    pub line: usize,
    pub error: String,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    /// The line as it was in the file (without its line break).
    pub raw: Vec<u8>,
}

#[derive(Debug)]
pub struct Ingested {
    /// Part rows (`rows::schema()`), one batch per chunk that kept rows.
    pub batches: Vec<RecordBatch>,
    pub rejected: Vec<Rejected>,
    /// Non-blank lines read.
    pub lines: usize,
    pub sessions: usize,
}

/// Why a line cannot be read; the line and file are added by the caller.
#[derive(Debug, Clone)]
pub struct Problem {
    pub(super) what: String,
    pub(super) session_id: Option<String>,
    pub(super) message_id: Option<String>,
}

impl Problem {
    pub fn new(what: impl Into<String>) -> Self {
        Problem {
            what: what.into(),
            session_id: None,
            message_id: None,
        }
    }

    pub fn session(mut self, id: &str) -> Self {
        self.session_id.get_or_insert_with(|| id.to_owned());
        self
    }

    pub fn message(mut self, id: &str) -> Self {
        self.message_id.get_or_insert_with(|| id.to_owned());
        self
    }
}
