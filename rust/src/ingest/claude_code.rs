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

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use serde_json::Value;

use super::anthropic::Events;
use super::pyjson::{dumps, py_str, truthy, COMPACT};
use super::rows::Rows;
use super::{
    already_read, finish, lines_of, opencode, parse, reject, split, Ingested, Options, Problem,
    Source,
};
use crate::error::Result;

/// What a line became: its session and rows, and whether it opens the session.
struct Kept {
    session: String,
    rows: Range<usize>,
    first: bool,
}

/// A line of the file and what became of it.
struct At<T> {
    line: usize,
    raw: Range<usize>,
    outcome: std::result::Result<T, Problem>,
}

type Line = At<Kept>;

struct FileOut {
    rows: Rows,
    lines: Vec<Line>,
}

pub fn ingest(sources: &[Source<'_>], options: &Options) -> Result<Ingested> {
    let files: Vec<FileOut> = sources
        .par_iter()
        .map(|source| read_file(source, options.chunk_bytes.max(1)))
        .collect();
    let mut first_seen: HashMap<String, (usize, usize)> = HashMap::new();
    let mut rejected = Vec::new();
    let mut batches = Vec::new();
    let mut lines = 0;
    for (index, file) in files.into_iter().enumerate() {
        let mut keep = vec![true; file.rows.len()];
        // sessions of this file already read from an earlier one
        let mut repeated: HashMap<String, Problem> = HashMap::new();
        for line in file.lines {
            lines += 1;
            let problem = match line.outcome {
                Err(problem) => Some(problem),
                Ok(kept) => {
                    let problem = if kept.first {
                        match first_seen.get(&kept.session) {
                            Some(&(src, at)) => {
                                let p = already_read(&kept.session, sources[src].name, at);
                                repeated.insert(kept.session.clone(), p);
                                repeated.get(&kept.session).cloned()
                            }
                            None => {
                                first_seen.insert(kept.session.clone(), (index, line.line));
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
                rejected.push(reject(sources, index, line.line, line.raw, p, options)?);
            }
        }
        batches.extend(finish(file.rows, keep, &[])?);
    }
    Ok(Ingested {
        batches,
        rejected,
        lines,
        sessions: first_seen.len(),
    })
}

fn read_file(source: &Source<'_>, chunk_bytes: usize) -> FileOut {
    let chunks = split(std::slice::from_ref(source), chunk_bytes);
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
    // Path.stem: the name without its last suffix.
    let stem = Path::new(source.name)
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let mut sessions: Vec<Events> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut current = stem;
    // per line: the error, or the session its message went to (rows filled in below)
    let mut outcomes: Vec<At<usize>> = Vec::new();
    for At { line, raw, outcome } in parsed.into_iter().flatten() {
        let outcome = outcome.and_then(|event| {
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
    // Rows session by session; each line learns its row range.
    let mut rows = Rows::default();
    let mut placed: Vec<Vec<std::result::Result<Kept, Problem>>> =
        Vec::with_capacity(sessions.len());
    for events in sessions {
        let sid = events.turns.session_id;
        let json = dumps(&serde_json::json!({ "id": sid }), COMPACT);
        let mut ids = HashSet::new();
        let mut first = true;
        let mut out = Vec::with_capacity(events.turns.messages.len());
        for message in events.turns.messages {
            let mapped = opencode::message(message, "the event").and_then(|(info, parts)| {
                if ids.insert(info.id.clone()) {
                    Ok((info, parts))
                } else {
                    Err(Problem::new(format!(
                        "message id {:?} appears twice in this session",
                        info.id
                    ))
                    .message(&info.id))
                }
            });
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
