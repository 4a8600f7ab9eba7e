//! JSONL ingest: session files parsed straight into the part-row table.
//!
//! Files are cut into chunks on line boundaries; chunks are parsed and
//! mapped in parallel (one Arrow batch each), then one cheap pass in line
//! order checks what spans lines (a session's lines must be contiguous, a
//! session or message id read twice) and applies `on_error`. Every bad line
//! is either the error of the run or a `Rejected` entry with its file, line
//! and raw bytes: nothing is dropped silently.

mod anthropic;
mod chat;
mod claude_code;
mod export;
mod opencode;
mod openhands;
pub mod pyjson;
mod responses;
pub mod rows;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, LargeStringArray, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_select::filter::filter_record_batch;
use rayon::prelude::*;
use serde_json::Value;

use crate::error::{CoreError, Location, Result};
use opencode::SessionRows;
use rows::Rows;

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
    /// tau-bench results per line: a list of runs, one session each.
    TauBench,
    /// OpenHands per line: a resolver record `{"history", ...}` or an event list.
    OpenHands,
}

impl Format {
    pub const NAMES: [&'static str; 9] = [
        "opencode",
        "opencode-messages",
        "openai-chat",
        "openai-responses",
        "anthropic",
        "claude-code",
        "swe-agent",
        "tau-bench",
        "openhands",
    ];
    const ALL: [Format; 9] = [
        Format::OpenCode,
        Format::OpenCodeMessages,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::SweAgent,
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
    what: String,
    session_id: Option<String>,
    message_id: Option<String>,
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

struct Chunk {
    source: usize,
    first_line: usize,
    bytes: Range<usize>,
}

/// What a chunk made of one line.
struct Line {
    line: usize,
    raw: Range<usize>,
    outcome: std::result::Result<Mapped, Problem>,
}

struct Mapped {
    rows: Range<usize>,
    /// The sessions the line holds, each with the message ids it gives
    /// (checked for repeats within a session).
    sessions: Vec<(String, Vec<String>)>,
}

struct ChunkOut {
    rows: Rows,
    lines: Vec<Line>,
}

/// Parse `sources` in parallel on the current rayon pool.
/// Read `paths` (one format and optional id base each) and ingest them.
pub fn ingest_files(
    paths: &[String],
    formats: &[Format],
    id_bases: &[Option<String>],
    options: &Options,
) -> Result<Ingested> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let data = std::fs::read(path).map_err(|e| CoreError::Format {
            what: format!("{path}: cannot read: {e}"),
            at: Default::default(),
        })?;
        files.push(data);
    }
    let sources: Vec<Source<'_>> = (0..paths.len())
        .map(|i| Source {
            name: &paths[i],
            data: &files[i],
            format: formats[i],
            id_base: id_bases[i].as_deref(),
        })
        .collect();
    ingest(&sources, options)
}

pub fn ingest(sources: &[Source<'_>], options: &Options) -> Result<Ingested> {
    let target = options.chunk_bytes.max(1);
    // Events of a Claude Code session span lines: those files are mapped
    // whole (see claude_code); the others chunk by chunk.
    let (whole, lined): (Vec<usize>, Vec<usize>) =
        (0..sources.len()).partition(|&i| sources[i].format == Format::ClaudeCode);
    let mut chunks = Vec::new();
    for &index in &lined {
        split(index, sources[index].data, target, &mut chunks);
    }
    let (outs, files) = rayon::join(
        || {
            chunks
                .par_iter()
                .map(|chunk| read_chunk(&sources[chunk.source], chunk))
                .collect::<Vec<ChunkOut>>()
        },
        || {
            whole
                .par_iter()
                .map(|&i| claude_code::read_file(&sources[i], target))
                .collect::<Vec<_>>()
        },
    );
    // One pass in file and line order over every file, whatever its format.
    let mut settle = Settle::new(sources, options);
    let mut outs = chunks.iter().zip(outs).peekable();
    let mut files = files.into_iter();
    for (index, source) in sources.iter().enumerate() {
        if source.format == Format::ClaudeCode {
            let file = files.next().expect("one output per Claude Code file");
            settle.file(index, file)?;
        } else {
            while let Some((chunk, out)) = outs.next_if(|(c, _)| c.source == index) {
                settle.chunk(chunk, out)?;
            }
        }
    }
    Ok(settle.done())
}

/// Cut a source into chunks of whole lines, numbering lines from 1.
fn split(index: usize, data: &[u8], target: usize, chunks: &mut Vec<Chunk>) {
    // A UTF-8 byte order mark is not part of the first line.
    let mut start = if data.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let mut line = 1;
    while start < data.len() {
        let mut end = (start + target).min(data.len());
        end = match data[end..].iter().position(|&b| b == b'\n') {
            Some(pos) if end < data.len() => end + pos + 1,
            _ => data.len(),
        };
        chunks.push(Chunk {
            source: index,
            first_line: line,
            bytes: start..end,
        });
        line += data[start..end].iter().filter(|&&b| b == b'\n').count();
        start = end;
    }
}

/// The non-blank lines of a chunk: `(1-based number, bytes without the line break)`.
fn lines_of<'a>(data: &'a [u8], chunk: &Chunk) -> impl Iterator<Item = (usize, Range<usize>)> + 'a {
    let end = chunk.bytes.end;
    let mut pos = chunk.bytes.start;
    let mut number = chunk.first_line;
    std::iter::from_fn(move || {
        while pos < end {
            let stop = data[pos..end]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(end, |p| pos + p);
            let mut raw = pos..stop;
            if data[raw.clone()].ends_with(b"\r") {
                raw.end -= 1;
            }
            let line = number;
            pos = stop + 1;
            number += 1;
            if !data[raw.clone()].iter().all(u8::is_ascii_whitespace) {
                return Some((line, raw));
            }
        }
        None
    })
}

/// The file name up to its first dot: what names a session without an id
/// (`<stem>:<line>`), as the Python adapters do.
fn short_stem(name: &str) -> &str {
    let file = std::path::Path::new(name)
        .file_name()
        .and_then(|f| f.to_str());
    file.unwrap_or(name).split('.').next().unwrap_or("")
}

fn read_chunk(source: &Source<'_>, chunk: &Chunk) -> ChunkOut {
    let mut rows = Rows::default();
    let mut lines = Vec::new();
    let format = source.format;
    let stem = source.id_base.unwrap_or_else(|| short_stem(source.name));
    for (number, raw) in lines_of(source.data, chunk) {
        let outcome = parse(&source.data[raw.clone()])
            .and_then(|value| read_line(value, format, &format!("{stem}:{number}")))
            .map(|sessions| emit(&sessions, &mut rows));
        lines.push(Line {
            line: number,
            raw,
            outcome,
        });
    }
    ChunkOut { rows, lines }
}

/// A line's bytes as JSON.
fn parse(bytes: &[u8]) -> std::result::Result<Value, Problem> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::new(format!(
            "not valid UTF-8 (invalid byte at byte {})",
            e.valid_up_to()
        ))
    })?;
    serde_json::from_str(text).map_err(|e| Problem::new(format!("not valid JSON ({e})")))
}

fn read_line(
    value: Value,
    format: Format,
    fallback_id: &str,
) -> std::result::Result<Vec<SessionRows>, Problem> {
    let one = |rows: SessionRows| vec![rows];
    match format {
        Format::OpenCode => opencode::session(value).map(one),
        Format::OpenAiChat => chat::line(value, fallback_id).map(one),
        Format::SweAgent => chat::swe_agent(value, fallback_id).map(one),
        Format::TauBench => chat::tau_bench(value),
        Format::OpenAiResponses => responses::line(value, fallback_id).map(one),
        Format::Anthropic => anthropic::request(value, fallback_id).map(one),
        Format::OpenHands => openhands::line(value, fallback_id).map(one),
        Format::ClaudeCode => unreachable!("claude-code is read file by file"),
        Format::OpenCodeMessages => {
            let session_id = match value.get("info").and_then(|info| info.get("sessionID")) {
                Some(Value::String(id)) => id.clone(),
                _ => {
                    return Err(Problem::new(
                        "an OpenCode message line needs info.sessionID (a string)",
                    ))
                }
            };
            let message =
                opencode::message(value, "the message").map_err(|p| p.session(&session_id))?;
            Ok(one(SessionRows {
                json: opencode::session_json(&session_id),
                id: session_id,
                messages: vec![message],
            }))
        }
    }
}

/// Append a line's rows (the cross-line checks may take them out again).
fn emit(sessions: &[SessionRows], rows: &mut Rows) -> Mapped {
    let start = rows.len();
    for session in sessions {
        session.emit(rows, true);
    }
    Mapped {
        rows: start..rows.len(),
        sessions: sessions
            .iter()
            .map(|s| {
                let ids = s.messages.iter().map(|(m, _)| m.id.clone()).collect();
                (s.id.clone(), ids)
            })
            .collect(),
    }
}

/// The pass in file and line order: cross-line checks, `on_error`, and the batches.
struct Settle<'s, 'a> {
    sources: &'s [Source<'a>],
    options: &'s Options,
    rejected: Vec<Rejected>,
    /// Where each session was first read: (source, line).
    first_seen: HashMap<String, (usize, usize)>,
    /// opencode-messages: the session the last line continued, and its message ids.
    current: Option<String>,
    messages: HashSet<String>,
    batches: Vec<RecordBatch>,
    lines: usize,
}

impl<'s, 'a> Settle<'s, 'a> {
    fn new(sources: &'s [Source<'a>], options: &'s Options) -> Self {
        Settle {
            sources,
            options,
            rejected: Vec::new(),
            first_seen: HashMap::new(),
            current: None,
            messages: HashSet::new(),
            batches: Vec::new(),
            lines: 0,
        }
    }

    fn done(self) -> Ingested {
        Ingested {
            batches: self.batches,
            rejected: self.rejected,
            lines: self.lines,
            sessions: self.first_seen.len(),
        }
    }

    fn bad(&mut self, source: usize, line: usize, raw: Range<usize>, p: Problem) -> Result<()> {
        let r = reject(self.sources, source, line, raw, p, self.options)?;
        self.rejected.push(r);
        Ok(())
    }

    /// A chunk of a file with sessions (or OpenCode messages) on lines.
    fn chunk(&mut self, chunk: &Chunk, out: ChunkOut) -> Result<()> {
        let per_line = self.sources[chunk.source].format != Format::OpenCodeMessages;
        if per_line {
            // a message line never continues a session across another format's file
            self.current = None;
        }
        let mut keep = vec![true; out.rows.len()];
        let mut drop_session_json = Vec::new();
        for line in out.lines {
            self.lines += 1;
            let problem = match line.outcome {
                Err(problem) => Some(problem),
                Ok(mapped) if !per_line => {
                    // opencode-messages: one session, maybe continued from the line before
                    let (sid, ids) = mapped.sessions.into_iter().next().unwrap_or_default();
                    let continues = self.current.as_deref() == Some(sid.as_str());
                    let problem = if continues {
                        repeated(&ids, &mut self.messages).map(|mid| {
                            Problem::new(format!(
                                "message {mid:?} was already read in this session"
                            ))
                            .message(&mid)
                        })
                    } else if let Some(&(src, at)) = self.first_seen.get(&sid) {
                        Some(already_read(&sid, self.sources[src].name, at))
                    } else {
                        self.messages.clear();
                        repeated(&ids, &mut self.messages).map(twice)
                    };
                    match problem {
                        Some(p) => {
                            keep[mapped.rows].iter_mut().for_each(|k| *k = false);
                            Some(p.session(&sid))
                        }
                        None => {
                            if continues {
                                drop_session_json.push(mapped.rows.start);
                            } else {
                                self.first_seen
                                    .insert(sid.clone(), (chunk.source, line.line));
                                self.current = Some(sid);
                            }
                            None
                        }
                    }
                }
                Ok(mapped) => {
                    // whole sessions: each id new, its message ids unique
                    let mut on_line = HashSet::new();
                    let problem = mapped.sessions.iter().find_map(|(sid, ids)| {
                        let problem = if let Some(&(src, at)) = self.first_seen.get(sid) {
                            Some(already_read(sid, self.sources[src].name, at))
                        } else if !on_line.insert(sid.as_str()) {
                            Some(Problem::new(format!(
                                "session {sid:?} appears twice on this line"
                            )))
                        } else {
                            self.messages.clear();
                            repeated(ids, &mut self.messages).map(twice)
                        };
                        problem.map(|p| p.session(sid))
                    });
                    match problem {
                        Some(p) => {
                            keep[mapped.rows].iter_mut().for_each(|k| *k = false);
                            Some(p)
                        }
                        None => {
                            for (sid, _) in mapped.sessions {
                                self.first_seen.insert(sid, (chunk.source, line.line));
                            }
                            None
                        }
                    }
                }
            };
            if let Some(p) = problem {
                self.bad(chunk.source, line.line, line.raw, p)?;
            }
        }
        self.batches
            .extend(finish(out.rows, keep, &drop_session_json)?);
        Ok(())
    }

    /// A Claude Code file, mapped whole: a session id read in an earlier file
    /// rejects every line of that session here.
    fn file(&mut self, index: usize, file: claude_code::FileOut) -> Result<()> {
        self.current = None;
        let mut keep = vec![true; file.rows.len()];
        let mut repeated: HashMap<String, Problem> = HashMap::new();
        for line in file.lines {
            self.lines += 1;
            let problem = match line.outcome {
                Err(problem) => Some(problem),
                Ok(kept) => {
                    let problem = if kept.first {
                        match self.first_seen.get(&kept.session) {
                            Some(&(src, at)) => {
                                let p = already_read(&kept.session, self.sources[src].name, at);
                                repeated.insert(kept.session.clone(), p.clone());
                                Some(p)
                            }
                            None => {
                                self.first_seen
                                    .insert(kept.session.clone(), (index, line.line));
                                None
                            }
                        }
                    } else {
                        repeated.get(&kept.session).cloned()
                    };
                    if problem.is_some() {
                        keep[kept.rows].iter_mut().for_each(|k| *k = false);
                    }
                    problem.map(|p| p.session(&kept.session))
                }
            };
            if let Some(p) = problem {
                self.bad(index, line.line, line.raw, p)?;
            }
        }
        self.batches.extend(finish(file.rows, keep, &[])?);
        Ok(())
    }
}

/// The batch of a chunk's rows: rejected rows out, `session_json` nulled where
/// a session continues; `None` when no row is left.
fn finish(rows: Rows, keep: Vec<bool>, drop_session_json: &[usize]) -> Result<Option<RecordBatch>> {
    let mut batch = rows.finish();
    if !drop_session_json.is_empty() {
        batch = without_session_json(batch, drop_session_json)?;
    }
    if keep.iter().any(|k| !k) {
        batch = filter_record_batch(&batch, &BooleanArray::from(keep))
            .map_err(|e| CoreError::Internal(format!("filtering rejected rows: {e}")))?;
    }
    Ok((batch.num_rows() > 0).then_some(batch))
}

fn already_read(sid: &str, file: &str, line: usize) -> Problem {
    Problem::new(format!(
        "session {sid:?} was already read at {file}:{line}; a session's lines must be \
         consecutive and its id unique"
    ))
}

fn twice(mid: String) -> Problem {
    Problem::new(format!("message {mid:?} appears twice in this session")).message(&mid)
}

/// A bad line: the error of the run (`raise`) or its `Rejected` entry (`skip`).
fn reject(
    sources: &[Source<'_>],
    source: usize,
    line: usize,
    raw: Range<usize>,
    p: Problem,
    options: &Options,
) -> Result<Rejected> {
    if options.on_error == OnError::Raise {
        return Err(CoreError::Format {
            what: format!("{}:{}: {}", sources[source].name, line, p.what),
            at: Location::default()
                .session(p.session_id.as_deref())
                .message(p.message_id.as_deref())
                .row(line),
        });
    }
    Ok(Rejected {
        source,
        line,
        error: p.what,
        session_id: p.session_id,
        message_id: p.message_id,
        raw: sources[source].data[raw].to_vec(),
    })
}

/// The first id of `ids` already in `seen` (all of them are added).
fn repeated(ids: &[String], seen: &mut HashSet<String>) -> Option<String> {
    let mut found = None;
    for id in ids {
        if !seen.insert(id.clone()) && found.is_none() {
            found = Some(id.clone());
        }
    }
    found
}

/// Null `session_json` on `rows` (a session continued from an earlier line).
fn without_session_json(batch: RecordBatch, rows: &[usize]) -> Result<RecordBatch> {
    let index = batch
        .schema()
        .index_of("session_json")
        .map_err(|e| CoreError::Internal(e.to_string()))?;
    let column = batch
        .column(index)
        .as_any()
        .downcast_ref::<LargeStringArray>()
        .ok_or_else(|| CoreError::Internal("session_json is not large_utf8".into()))?
        .clone();
    let mut valid: Vec<bool> = (0..column.len()).map(|i| column.is_valid(i)).collect();
    for &row in rows {
        valid[row] = false;
    }
    let (offsets, values, _) = column.into_parts();
    let array = LargeStringArray::new(offsets, values, Some(NullBuffer::from(valid)));
    let mut columns = batch.columns().to_vec();
    columns[index] = Arc::new(array);
    RecordBatch::try_new(batch.schema(), columns).map_err(|e| CoreError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;

    fn run(text: &str, format: Format, on_error: OnError, chunk_bytes: usize) -> Result<Ingested> {
        run_bytes(text.as_bytes(), format, on_error, chunk_bytes)
    }

    fn run_bytes(
        data: &[u8],
        format: Format,
        on_error: OnError,
        chunk_bytes: usize,
    ) -> Result<Ingested> {
        let source = Source::new("dir/file.jsonl", data, format);
        let options = Options {
            on_error,
            chunk_bytes,
        };
        ingest(&[source], &options)
    }

    pub(super) fn column(ingested: &Ingested, name: &str) -> Vec<Option<String>> {
        ingested
            .batches
            .iter()
            .flat_map(|b| {
                let col = b.column_by_name(name).unwrap();
                match col.data_type() {
                    arrow_schema::DataType::LargeUtf8 => col
                        .as_string::<i64>()
                        .iter()
                        .map(|v| v.map(str::to_owned))
                        .collect::<Vec<_>>(),
                    _ => col
                        .as_string::<i32>()
                        .iter()
                        .map(|v| v.map(str::to_owned))
                        .collect(),
                }
            })
            .collect()
    }

    const SESSION: &str = r#"{"info":{"id":"s1","title":"t"},"messages":[{"info":{"id":"m1","role":"user"},"parts":[{"id":"p1","type":"text","text":"hi"}]},{"info":{"id":"m2","role":"assistant","parentID":"m1","finish":"stop"},"parts":[{"id":"p2","type":"tool","tool":"read","callID":"c","state":{"status":"completed","input":{"path":"a.py","n":1.0e-5},"output":"body","time":{"start":1,"compacted":7}}},{"id":"p3","type":"step-finish"}]},{"info":{"id":"m3","role":"user"}}]}"#;

    #[test]
    fn an_opencode_session_becomes_part_rows() {
        let out = run(SESSION, Format::OpenCode, OnError::Raise, 1 << 20).unwrap();
        assert_eq!(out.lines, 1);
        assert_eq!(out.sessions, 1);
        let ids = column(&out, "part_id");
        assert_eq!(
            ids,
            [
                Some("p1".into()),
                Some("p2".into()),
                Some("p3".into()),
                None
            ]
        );
        let input = column(&out, "input");
        assert_eq!(input[1].as_deref(), Some(r#"{"path":"a.py","n":1e-05}"#));
        let output = column(&out, "output");
        assert_eq!(output[..2], [Some("hi".into()), Some("body".into())]);
        let json = column(&out, "part_json");
        let tool_json = r#"{"callID":"c","state":{"time":{"start":1}}}"#;
        assert_eq!(json[1].as_deref(), Some(tool_json));
        let compacted = out.batches[0].column_by_name("compacted_at").unwrap();
        assert_eq!(compacted.as_primitive::<Int64Type>().value(1), 7);
        let session_json = column(&out, "session_json");
        assert_eq!(
            session_json[0].as_deref(),
            Some(r#"{"id":"s1","title":"t"}"#)
        );
        assert!(session_json[1..].iter().all(Option::is_none));
        let message_json = column(&out, "message_json");
        assert_eq!(message_json.iter().filter(|m| m.is_some()).count(), 3);
    }

    #[test]
    fn chunk_size_does_not_change_the_table() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&SESSION.replace("\"s1\"", &format!("\"s{i}\"")));
            text.push_str(if i % 3 == 0 { "\r\n\n" } else { "\n" });
        }
        let whole = run(&text, Format::OpenCode, OnError::Raise, 1 << 20).unwrap();
        let small = run(&text, Format::OpenCode, OnError::Raise, 10).unwrap();
        assert!(small.batches.len() > 1);
        for name in [
            "session_id",
            "part_id",
            "input",
            "session_json",
            "message_json",
            "part_json",
        ] {
            assert_eq!(column(&whole, name), column(&small, name), "{name}");
        }
        assert_eq!((whole.lines, whole.sessions), (40, 40));
    }

    #[test]
    fn bad_lines_name_file_and_line_or_are_rejected_with_their_bytes() {
        let text = format!(
            "\u{feff}{SESSION}\n\n{{not json\n{}\n\u{0}\n",
            SESSION.replace("s1", "s2")
        );
        let mut bytes = text.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = 0xff; // invalid UTF-8 on line 5
        let err = run_bytes(&bytes, Format::OpenCode, OnError::Raise, 1 << 20)
            .err()
            .unwrap();
        assert_eq!(err.class_name(), "FormatError");
        assert!(
            err.to_string()
                .starts_with("dir/file.jsonl:3: not valid JSON"),
            "{err}"
        );
        assert_eq!(err.location().row, Some(3));
        let out = run_bytes(&bytes, Format::OpenCode, OnError::Skip, 7).unwrap();
        assert_eq!(out.sessions, 2);
        let lines: Vec<_> = out
            .rejected
            .iter()
            .map(|r| (r.line, r.raw.clone()))
            .collect();
        assert_eq!(lines, [(3, b"{not json".to_vec()), (5, vec![0xff])]);
        assert!(out.rejected[1].error.contains("UTF-8"));
    }

    #[test]
    fn a_session_read_twice_is_an_error_at_its_second_line() {
        let text = format!("{SESSION}\n{SESSION}\n");
        let err = run(&text, Format::OpenCode, OnError::Raise, 1)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("file.jsonl:2: session \"s1\" was already read at dir/file.jsonl:1"),
            "{err}"
        );
        let out = run(&text, Format::OpenCode, OnError::Skip, 1).unwrap();
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(column(&out, "session_id").len(), 4);
    }

    #[test]
    fn message_lines_group_into_contiguous_sessions() {
        let line = |s: &str, m: &str| {
            format!(
                r#"{{"info":{{"id":"{m}","sessionID":"{s}","role":"user"}},"parts":[{{"id":"{m}p","type":"text","text":"x"}}]}}"#
            )
        };
        let text = [
            line("a", "1"),
            line("a", "2"),
            line("b", "3"),
            line("a", "4"),
            line("b", "3"),
        ]
        .join("\n");
        let out = run(&text, Format::OpenCodeMessages, OnError::Skip, 1).unwrap();
        assert_eq!(out.sessions, 2);
        let rejected: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(rejected, [4, 5]);
        assert!(out.rejected[0].error.contains("consecutive"));
        assert!(out.rejected[1]
            .error
            .contains("already read in this session"));
        let json = column(&out, "session_json");
        assert_eq!(
            json,
            [
                Some(r#"{"id":"a"}"#.into()),
                None,
                Some(r#"{"id":"b"}"#.into())
            ]
        );
    }

    #[test]
    fn chat_sessions_map_tool_calls_and_results() {
        let text = r#"{"id":"c1","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"ls","arguments":"{\"path\": \".\"}"}}]},{"role":"tool","tool_call_id":"t1","content":"a b"}]}
[{"role":"user","content":"bare"}]"#;
        let out = run(text, Format::OpenAiChat, OnError::Raise, 1 << 20).unwrap();
        assert_eq!(
            column(&out, "session_id"),
            [Some("c1".into()), Some("c1".into()), Some("file:2".into())]
        );
        assert_eq!(column(&out, "status")[1].as_deref(), Some("completed"));
        assert_eq!(column(&out, "input")[1].as_deref(), Some(r#"{"path":"."}"#));
        assert_eq!(column(&out, "output")[1].as_deref(), Some("a b"));
        assert_eq!(column(&out, "message_id")[1].as_deref(), Some("c1-m000001"));
    }

    #[test]
    fn each_file_is_read_in_its_own_format_in_one_run() {
        let chat = r#"{"id":"c1","messages":[{"role":"user","content":"go"}]}"#;
        let claude = r#"{"type":"user","uuid":"u1","sessionId":"k","message":{"role":"user","content":"hi"}}"#;
        let sources = [
            Source::new("a.jsonl", chat.as_bytes(), Format::OpenAiChat),
            Source::new("b.jsonl", claude.as_bytes(), Format::ClaudeCode),
            Source {
                id_base: Some("run2/a"),
                ..Source::new(
                    "run2/a.jsonl",
                    b"[{\"role\":\"user\",\"content\":\"x\"}]",
                    Format::OpenAiChat,
                )
            },
            Source::new("c.jsonl", SESSION.as_bytes(), Format::OpenCode),
        ];
        let out = ingest(&sources, &Options::new(OnError::Raise)).unwrap();
        assert_eq!((out.lines, out.sessions), (4, 4));
        let ids = column(&out, "session_id");
        let ids: Vec<_> = ids.iter().flatten().map(String::as_str).collect();
        assert_eq!(ids, ["c1", "k", "run2/a:1", "s1", "s1", "s1", "s1"]);
        // a session id read in a file of another format is still read twice
        let again = [
            Source::new("a.jsonl", SESSION.as_bytes(), Format::OpenCode),
            Source::new(
                "b.jsonl",
                r#"{"type":"user","uuid":"u","sessionId":"s1","message":{"role":"user","content":"x"}}"#.as_bytes(),
                Format::ClaudeCode,
            ),
        ];
        let err = ingest(&again, &Options::new(OnError::Raise)).err().unwrap();
        assert!(
            err.to_string()
                .contains("b.jsonl:1: session \"s1\" was already read at a.jsonl:1"),
            "{err}"
        );
    }

    #[test]
    fn a_line_that_is_not_a_claude_code_event_is_a_bad_line() {
        let text = r#"{"id":"c1","messages":[{"role":"user","content":"go"}]}
7
{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}
"#;
        let err = run(text, Format::ClaudeCode, OnError::Raise, 1 << 20)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("dir/file.jsonl:1: not a Claude Code event"),
            "{err}"
        );
        let out = run(text, Format::ClaudeCode, OnError::Skip, 1 << 20).unwrap();
        let lines: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 2]);
        assert_eq!(column(&out, "message_id"), [Some("u1".to_owned())]);
    }
}
