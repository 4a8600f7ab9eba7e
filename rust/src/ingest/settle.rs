//! The settle pass, in file and line order: what spans lines (a session's
//! lines contiguous, an id read twice), `on_error`, and the final batches.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, LargeStringArray, RecordBatch};
use arrow_buffer::NullBuffer;

use super::claude_file;
use super::lines::{Chunk, ChunkOut};
use super::rows::Rows;
use super::types::{Format, Ingested, OnError, Options, Problem, Rejected, Source};
use crate::error::{CoreError, Location, Result};

/// The pass in file and line order: cross-line checks, `on_error`, and the batches.
pub(super) struct Settle<'s, 'a> {
    pub(super) sources: &'s [Source<'a>],
    pub(super) options: &'s Options,
    pub(super) rejected: Vec<Rejected>,
    /// Each source's name, shared by the sessions first read in it.
    names: Vec<Arc<str>>,
    /// Where each session was first read: (file name, line).
    pub(super) first_seen: HashMap<String, (Arc<str>, usize)>,
    /// opencode-messages: the session the last line continued, and its message ids.
    pub(super) current: Option<String>,
    /// A Claude Code file read in windows: the sessions refused as read in
    /// an earlier file, and the session of its last rows.
    claude: ClaudeChecks,
    pub(super) messages: HashSet<String>,
    pub(super) batches: Vec<RecordBatch>,
    pub(super) lines: usize,
}

/// What the settle pass carries from one streamed window to the next: the
/// checks that span lines (sessions read, the session a message line
/// continued), without the window's bytes.
#[derive(Default)]
pub(super) struct Carried {
    first_seen: HashMap<String, (Arc<str>, usize)>,
    current: Option<String>,
    claude: ClaudeChecks,
    messages: HashSet<String>,
    lines: usize,
}

impl<'s, 'a> Settle<'s, 'a> {
    /// The pass over a window, resuming what the previous windows left.
    pub(super) fn resume(sources: &'s [Source<'a>], options: &'s Options, c: Carried) -> Self {
        Settle {
            first_seen: c.first_seen,
            current: c.current,
            claude: c.claude,
            messages: c.messages,
            lines: c.lines,
            ..Settle::new(sources, options)
        }
    }

    /// The window's batches and rejected lines, and what the next window needs.
    pub(super) fn suspend(self) -> (Ingested, Carried) {
        let out = Ingested {
            batches: self.batches,
            rejected: self.rejected,
            lines: self.lines,
            sessions: self.first_seen.len(),
        };
        let carried = Carried {
            first_seen: self.first_seen,
            current: self.current,
            claude: self.claude,
            messages: self.messages,
            lines: self.lines,
        };
        (out, carried)
    }

    pub(super) fn new(sources: &'s [Source<'a>], options: &'s Options) -> Self {
        Settle {
            sources,
            options,
            rejected: Vec::new(),
            names: sources.iter().map(|s| Arc::from(s.name)).collect(),
            first_seen: HashMap::new(),
            current: None,
            claude: ClaudeChecks::default(),
            messages: HashSet::new(),
            batches: Vec::new(),
            lines: 0,
        }
    }

    pub(super) fn done(self) -> Ingested {
        Ingested {
            batches: self.batches,
            rejected: self.rejected,
            lines: self.lines,
            sessions: self.first_seen.len(),
        }
    }

    pub(super) fn bad(
        &mut self,
        source: usize,
        line: usize,
        raw: Range<usize>,
        p: Problem,
    ) -> Result<()> {
        let r = reject(self.sources, source, line, raw, p, self.options)?;
        self.rejected.push(r);
        Ok(())
    }

    /// A chunk of a file with sessions (or OpenCode messages) on lines.
    pub(super) fn chunk(&mut self, chunk: &Chunk, out: ChunkOut) -> Result<()> {
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
                    } else if let Some((file, at)) = self.first_seen.get(&sid) {
                        Some(already_read(&sid, file, *at))
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
                                let file = self.names[chunk.source].clone();
                                self.first_seen.insert(sid.clone(), (file, line.line));
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
                        let problem = if let Some((file, at)) = self.first_seen.get(sid) {
                            Some(already_read(sid, file, *at))
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
                                let file = self.names[chunk.source].clone();
                                self.first_seen.insert(sid, (file, line.line));
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

    /// A window of a Claude Code file (the whole file, or a window that
    /// `continued` earlier ones): a session id read in an earlier file
    /// rejects every line of that session here.
    pub(super) fn file(
        &mut self,
        index: usize,
        file: claude_file::FileOut,
        continued: bool,
    ) -> Result<()> {
        self.current = None;
        if !continued {
            self.claude = ClaudeChecks::default();
        }
        let mut keep = vec![true; file.rows.len()];
        let repeated = &mut self.claude.repeated;
        // The windows' rows join into the file's only if a session continued
        // from the last window is the one its rows ended with.
        // (A first window continues nothing: every session starts in it.)
        let started: HashSet<&str> = (file.lines.iter())
            .filter(|_| continued)
            .filter_map(|l| l.outcome.as_ref().ok().filter(|k| k.first))
            .map(|k| k.session.as_str())
            .collect();
        let mut last: Option<(usize, &str)> = None;
        for line in &file.lines {
            let Ok(kept) = &line.outcome else { continue };
            let session = kept.session.as_str();
            if continued
                && !started.contains(session)
                && self.claude.last.as_deref() != Some(session)
            {
                return Err(CoreError::Internal(format!(
                    "a Claude Code window continued session {session:?} after another \
                     session's rows (line {})",
                    line.line
                )));
            }
            if last.is_none_or(|(end, _)| kept.rows.end > end) {
                last = Some((kept.rows.end, session));
            }
        }
        if let Some((_, session)) = last {
            self.claude.last = Some(session.to_owned());
        }
        for line in file.lines {
            self.lines += 1;
            let problem = match line.outcome {
                Err(problem) => Some(problem),
                Ok(kept) => {
                    let problem = if kept.first {
                        match self.first_seen.get(&kept.session) {
                            Some((file, at)) => {
                                let p = already_read(&kept.session, file, *at);
                                repeated.insert(kept.session.clone(), p.clone());
                                Some(p)
                            }
                            None => {
                                let file = self.names[index].clone();
                                self.first_seen
                                    .insert(kept.session.clone(), (file, line.line));
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
                let r = reject(self.sources, index, line.line, line.raw, p, self.options)?;
                self.rejected.push(r);
            }
        }
        self.batches.extend(finish(file.rows, keep, &[])?);
        Ok(())
    }
}

/// What the checks of a Claude Code file carry from window to window.
#[derive(Default)]
pub(super) struct ClaudeChecks {
    repeated: HashMap<String, Problem>,
    last: Option<String>,
}

/// The batch of a chunk's rows: rejected rows out, `session_json` nulled where
/// a session continues; `None` when no row is left.
pub(super) fn finish(
    rows: Rows,
    keep: Vec<bool>,
    drop_session_json: &[usize],
) -> Result<Option<RecordBatch>> {
    let mut batch = rows.finish();
    if !drop_session_json.is_empty() {
        batch = without_session_json(batch, drop_session_json)?;
    }
    if keep.iter().any(|k| !k) {
        batch = crate::select::filter_batch(&batch, &keep)?;
    }
    Ok((batch.num_rows() > 0).then_some(batch))
}

pub(super) fn already_read(sid: &str, file: &str, line: usize) -> Problem {
    Problem::new(format!(
        "session {sid:?} was already read at {file}:{line}; a session's lines must be \
         consecutive and its id unique"
    ))
}

pub(super) fn twice(mid: String) -> Problem {
    Problem::new(format!("message {mid:?} appears twice in this session")).message(&mid)
}

/// A bad line: the error of the run (`raise`) or its `Rejected` entry (`skip`).
pub(super) fn reject(
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
pub(super) fn repeated(ids: &[String], seen: &mut HashSet<String>) -> Option<String> {
    let mut found = None;
    for id in ids {
        if !seen.insert(id.clone()) && found.is_none() {
            found = Some(id.clone());
        }
    }
    found
}

/// Null `session_json` on `rows` (a session continued from an earlier line).
pub(super) fn without_session_json(batch: RecordBatch, rows: &[usize]) -> Result<RecordBatch> {
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
