//! The line pipeline: input files opened (`open_input`), cut into chunks
//! of whole lines, each line parsed and mapped to rows by its format's
//! mapper (`read_chunk`: the fast path first where one applies).

use std::ops::Range;

use serde_json::Value;

use super::opencode::SessionRows;
use super::rows::Rows;
use super::types::{Format, Problem, Source};
use super::{anthropic, chat, fast, fast_chat, opencode, openhands, responses};
use crate::error::{CoreError, Result};
use crate::jsontext::json_error;

pub(super) struct Chunk {
    pub(super) source: usize,
    pub(super) first_line: usize,
    pub(super) bytes: Range<usize>,
}

/// What a chunk made of one line.
pub(super) struct Line {
    pub(super) line: usize,
    pub(super) raw: Range<usize>,
    pub(super) outcome: std::result::Result<Mapped, Problem>,
}

pub(super) struct Mapped {
    pub(super) rows: Range<usize>,
    /// The sessions the line holds, each with the message ids it gives
    /// (checked for repeats within a session).
    pub(super) sessions: Vec<(String, Vec<String>)>,
}

pub(super) struct ChunkOut {
    pub(super) rows: Rows,
    pub(super) lines: Vec<Line>,
}

/// The input file at `path` opened for reading, and its size; what cannot
/// be opened (missing, not a regular file, no permission) is the `Os` error
/// naming it. The path is looked at before it is opened: opening a named
/// pipe would wait until something writes to it.
pub(super) fn open_input(path: &str) -> Result<(std::fs::File, u64)> {
    let io = |e: std::io::Error| CoreError::unreadable(&e, path);
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(CoreError::not_regular(&meta, path));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    Ok((file, size))
}

/// Cut a source into chunks of whole lines, numbering lines from 1.
pub(super) fn split(index: usize, data: &[u8], target: usize, chunks: &mut Vec<Chunk>) {
    split_from(index, data, target, 1, chunks);
}

/// `split` of a piece of a file whose first line is `first_line` (a
/// streamed window: only the file's first window can start with a BOM).
/// Returns the number of the line after the piece.
pub(super) fn split_from(
    index: usize,
    data: &[u8],
    target: usize,
    first_line: usize,
    chunks: &mut Vec<Chunk>,
) -> usize {
    // A UTF-8 byte order mark is not part of the first line.
    let mut start = if first_line == 1 && data.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let mut line = first_line;
    while start < data.len() {
        let mut end = (start + target).min(data.len());
        end = match memchr::memchr(b'\n', &data[end..]) {
            Some(pos) if end < data.len() => end + pos + 1,
            _ => data.len(),
        };
        chunks.push(Chunk {
            source: index,
            first_line: line,
            bytes: start..end,
        });
        line += memchr::memchr_iter(b'\n', &data[start..end]).count();
        start = end;
    }
    line
}

/// The non-blank lines of a chunk: `(1-based number, bytes without the line break)`.
pub(super) fn lines_of<'a>(
    data: &'a [u8],
    chunk: &Chunk,
) -> impl Iterator<Item = (usize, Range<usize>)> + 'a {
    let end = chunk.bytes.end;
    let mut pos = chunk.bytes.start;
    let mut number = chunk.first_line;
    std::iter::from_fn(move || {
        while pos < end {
            let stop = memchr::memchr(b'\n', &data[pos..end]).map_or(end, |p| pos + p);
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
pub(super) fn short_stem(name: &str) -> &str {
    let file = std::path::Path::new(name)
        .file_name()
        .and_then(|f| f.to_str());
    file.unwrap_or(name).split('.').next().unwrap_or("")
}

pub(super) fn read_chunk(source: &Source<'_>, chunk: &Chunk) -> ChunkOut {
    let mut rows = Rows::for_bytes(chunk.bytes.len());
    let mut lines = Vec::new();
    let format = source.format;
    let stem = source.id_base.unwrap_or_else(|| short_stem(source.name));
    // the text of the fast path's *_json values, reused line after line
    let mut buf = String::new();
    for (number, raw) in lines_of(source.data, chunk) {
        if matches!(
            format,
            Format::OpenCode | Format::OpenAiChat | Format::ChatList
        ) {
            let start = rows.len();
            let text = simdutf8::basic::from_utf8(&source.data[raw.clone()]).ok();
            let fast = text.and_then(|t| match format {
                Format::OpenCode => fast::opencode_line(t, &mut rows, &mut buf),
                _ => {
                    let list = format == Format::ChatList;
                    fast_chat::chat_line(t, stem, number, list, &mut rows, &mut buf)
                }
            });
            if let Some(session) = fast {
                let sessions = vec![session];
                let outcome = Ok(Mapped {
                    rows: start..rows.len(),
                    sessions,
                });
                lines.push(Line {
                    line: number,
                    raw,
                    outcome,
                });
                continue;
            }
        }
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
pub(super) fn parse(bytes: &[u8]) -> std::result::Result<Value, Problem> {
    // simdutf8 checks valid text several times faster than std on non-ASCII;
    // std's error (the same check) says where a bad line breaks.
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return serde_json::from_str(text)
            .map_err(|e| Problem::new(format!("not valid JSON ({})", json_error(&e))));
    }
    if bytes.starts_with(b"\xff\xfe") || bytes.starts_with(b"\xfe\xff") {
        // as the Python readers say it (formats.jsonl.UTF16)
        return Err(Problem::new(
            "UTF-16 text (convert to UTF-8): it starts with a UTF-16 byte order mark",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::new(format!(
            "not valid UTF-8 (invalid byte at byte {})",
            e.valid_up_to()
        ))
    })?;
    serde_json::from_str(text)
        .map_err(|e| Problem::new(format!("not valid JSON ({})", json_error(&e))))
}

pub(super) fn read_line(
    value: Value,
    format: Format,
    fallback_id: &str,
) -> std::result::Result<Vec<SessionRows>, Problem> {
    let one = |rows: SessionRows| vec![rows];
    match format {
        Format::OpenCode => opencode::session(value).map(one),
        Format::OpenAiChat => chat::line(value, fallback_id).map(one),
        Format::ChatList => chat::chat_list(value, fallback_id).map(one),
        Format::SweAgent => chat::swe_agent(value, fallback_id).map(one),
        Format::MiniSweAgent => chat::mini_swe_agent(value, fallback_id).map(one),
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
pub(super) fn emit(sessions: &[SessionRows], rows: &mut Rows) -> Mapped {
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
