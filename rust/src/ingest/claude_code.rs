//! Claude Code session files: one event per line, grouped into sessions by
//! the last `sessionId` seen in the file (the file stem before the first
//! one), as `ctxcompact.formats.anthropic.claude_code_sessions` groups them.
//!
//! A `tool_result` completes a tool part read lines earlier, so a file is
//! mapped in line order: its lines are parsed in parallel chunks, then
//! grouped and mapped in one pass; files run in parallel. A line that cannot
//! be read is left out as if it were not in the file (later events keep
//! their positions among the kept ones). A session id read in an earlier
//! file rejects every line of that session in the later one.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use serde_json::Value;

use super::anthropic::Events;
use super::fast::{self, J};
use super::lines::Chunk;
use super::pyjson::{py_str, truthy};
use super::rows::{MessageRow, PartRow, Rows};
use super::{fast_claude, lines_of, opencode, parse, split, Problem, Source};

/// What a line became: its session and rows, and whether it opens the session.
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

type Line = At<Kept>;

type Message = (MessageRow, Vec<PartRow>);

pub(super) struct FileOut {
    pub rows: Rows,
    pub lines: Vec<Line>,
}

pub(super) fn read_file(source: &Source<'_>, chunk_bytes: usize) -> FileOut {
    let mut chunks = Vec::new();
    split(0, source.data, chunk_bytes, &mut chunks);
    // Path.stem: the name without its last suffix (or the base the caller gives).
    let stem = match source.id_base {
        Some(base) => base.to_owned(),
        None => Path::new(source.name)
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
    };
    if let Some(out) = read_fast(source.data, &chunks, &stem) {
        return out;
    }
    read_slow(source, &chunks, stem)
}

/// The file by serde_json values, `anthropic::Events` and `opencode::message`.
pub(super) fn read_slow(source: &Source<'_>, chunks: &[Chunk], stem: String) -> FileOut {
    let parsed: Vec<Vec<At<Value>>> = chunks
        .par_iter()
        .map(|chunk| {
            lines_of(source.data, chunk)
                .map(|(line, raw)| At {
                    line,
                    outcome: parse(&source.data[raw.clone()]),
                    raw,
                })
                .collect()
        })
        .collect();
    let mut sessions: Vec<Events> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut current = stem;
    // per line: the error, or the session its message went to (rows filled in below)
    let mut outcomes: Vec<At<usize>> = Vec::new();
    for At { line, raw, outcome } in parsed.into_iter().flatten() {
        let outcome = outcome.and_then(event_of).and_then(|event| {
            let sid = match event.get("sessionId") {
                Some(id) if event.is_object() && truthy(id) => py_str(id),
                _ => current.clone(),
            };
            let (index, new) = match by_id.get(&sid) {
                Some(&i) => (i, false),
                None => {
                    sessions.push(Events::new(sid.clone()));
                    (sessions.len() - 1, true)
                }
            };
            match sessions[index].push(event) {
                Ok(()) => {
                    if new {
                        by_id.insert(sid.clone(), index);
                    }
                    current = sid;
                    Ok(index)
                }
                Err(p) => {
                    if new {
                        sessions.pop();
                    }
                    Err(p.session(&sid))
                }
            }
        });
        outcomes.push(At { line, raw, outcome });
    }
    // Every message is final now: turn them into rows in parallel (the JSON
    // text is most of the work), then append session by session.
    let converted: Vec<(String, Vec<std::result::Result<Message, Problem>>)> = sessions
        .into_par_iter()
        .map(|events| {
            let messages = events.turns.messages.into_par_iter();
            let rows = messages
                .map(|m| opencode::message(m, "the event"))
                .collect();
            (events.turns.session_id, rows)
        })
        .collect();
    let mut rows = Rows::default();
    let mut placed: Vec<Vec<std::result::Result<Kept, Problem>>> =
        Vec::with_capacity(converted.len());
    for (sid, messages) in converted {
        let json = opencode::session_json(&sid);
        let mut first = true;
        let mut out = Vec::with_capacity(messages.len());
        for mapped in messages {
            out.push(
                mapped
                    .map(|(info, parts)| {
                        let start = rows.len();
                        let session_json = first.then_some(json.as_str());
                        opencode::emit_message(&mut rows, &sid, session_json, &info, &parts);
                        let kept = Kept {
                            session: sid.clone(),
                            rows: start..rows.len(),
                            first,
                        };
                        first = false;
                        kept
                    })
                    .map_err(|p| p.session(&sid)),
            );
        }
        placed.push(out);
    }
    let mut placed: Vec<std::vec::IntoIter<_>> = placed.into_iter().map(Vec::into_iter).collect();
    let lines = outcomes
        .into_iter()
        .map(|At { line, raw, outcome }| Line {
            line,
            raw,
            // a session's messages were placed in line order
            outcome: outcome.and_then(|s| placed[s].next().expect("one message per kept event")),
        })
        .collect();
    FileOut { rows, lines }
}

/// The file by `fast_claude` when every line is of a shape it is sure of.
pub(super) fn read_fast(data: &[u8], chunks: &[Chunk], stem: &str) -> Option<FileOut> {
    type Lines = Vec<(usize, Range<usize>)>;
    let parsed: Vec<(Lines, Vec<J<'_>>)> = chunks
        .par_iter()
        .map(|chunk| {
            let mut lines = Vec::new();
            let mut trees = Vec::new();
            for (line, raw) in lines_of(data, chunk) {
                let text = simdutf8::basic::from_utf8(&data[raw.clone()]).ok()?;
                trees.push(fast::parse(text)?);
                lines.push((line, raw));
            }
            Some((lines, trees))
        })
        .collect::<Option<_>>()?;
    let (mut lines, mut trees) = (Vec::new(), Vec::new());
    for (l, t) in parsed {
        lines.extend(l);
        trees.extend(t);
    }
    fast_claude::read_file(&lines, &trees, stem)
}

/// Every Claude Code line is an event: an object with a string `type`. Any
/// other line (another format's session, a bare value) is a bad line, never
/// an empty message.
fn event_of(value: Value) -> std::result::Result<Value, Problem> {
    match value.get("type") {
        Some(Value::String(_)) => Ok(value),
        _ if value.is_object() => Err(Problem::new(
            "not a Claude Code event: it has no \"type\" string (is this file in another format?)",
        )),
        _ => Err(Problem::new(format!(
            "not a Claude Code event: got {}, not an object with a \"type\"",
            opencode::kind(&value)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::column;
    use super::super::{ingest, Format, Ingested, OnError, Options};
    use super::*;
    use crate::error::Result;

    const FILE: &str = r#"{"type":"summary","summary":"before","leafUuid":"x"}
{"type":"assistant","uuid":"a1","sessionId":"s","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}
{"type":"assistant","uuid":"a2","sessionId":"s","message":{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":[1]}]}}
{"type":"user","uuid":"b1","sessionId":"r","message":{"role":"user","content":"elsewhere"}}
{"type":"user","uuid":"a1","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true}]}}
"#;

    fn run(on_error: OnError, chunk_bytes: usize) -> Result<Ingested> {
        let sources = [Source::new(
            "dir/cc.v1.jsonl",
            FILE.as_bytes(),
            Format::ClaudeCode,
        )];
        let options = Options {
            on_error,
            chunk_bytes,
        };
        ingest(&sources, &options)
    }

    #[test]
    fn events_group_by_session_and_results_complete_earlier_calls() {
        let err = run(OnError::Raise, 1).err().unwrap();
        assert!(
            err.to_string()
                .starts_with("dir/cc.v1.jsonl:3: message.content[0].input must be an object"),
            "{err}"
        );
        for chunk_bytes in [1, 40, 1 << 20] {
            let out = run(OnError::Skip, chunk_bytes).unwrap();
            assert_eq!((out.lines, out.sessions), (5, 3));
            let lines: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
            assert_eq!(lines, [3]);
            assert_eq!(
                column(&out, "session_id"),
                ["cc.v1", "s", "s", "r"].map(|s| Some(s.to_owned()))
            );
            // a1 is taken, so the result keeps its position among the kept events of s
            assert_eq!(
                column(&out, "message_id"),
                ["cc.v1-e000000", "a1", "s-e000001", "b1"].map(|s| Some(s.to_owned()))
            );
            assert_eq!(column(&out, "status")[1].as_deref(), Some("error"));
            assert_eq!(column(&out, "output")[1].as_deref(), Some("a\nb"));
            assert_eq!(column(&out, "part_type")[2].as_deref(), Some("tool-result"));
        }
    }
}
