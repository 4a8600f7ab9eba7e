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

use rayon::prelude::*;
use serde_json::Value;

use super::anthropic::Events;
use super::claude_file::{is_aside, At, Carried, Carry, FileOut, Kept, Known, Line};
use super::fast::{self, J};
use super::lines::{lines_of, parse, split_from, Chunk};
use super::pyjson::{py_str, truthy};
use super::rows::{MessageRow, PartRow, Rows};
use super::types::{Problem, Source};
use super::{claude_plan, fast_claude, opencode};

type Message = (MessageRow, Vec<PartRow>);

/// Where a kept event went: its session, its message among the session's
/// in this window, and whether it made that message (not a later line of
/// the same model call).
#[derive(Clone, Copy)]
struct Placed {
    session: usize,
    message: usize,
    opens: bool,
}

impl Placed {
    /// An aside line waiting for the session of the next event.
    const HELD: Placed = Placed {
        session: usize::MAX,
        message: usize::MAX,
        opens: true,
    };
}

/// Map a window of whole lines of a Claude Code file (its first line numbered
/// `first_line`), continuing `carry`, which it updates. Sessions continued
/// from earlier windows come first, in the order they were first read.
pub(super) fn read_file(
    source: &Source<'_>,
    chunk_bytes: usize,
    first_line: usize,
    carry: &mut Carry,
) -> FileOut {
    let mut chunks = Vec::new();
    split_from(0, source.data, chunk_bytes, first_line, &mut chunks);
    if let Some(out) = read_fast(source.data, &chunks, carry) {
        return out;
    }
    read_slow(source, &chunks, carry)
}

/// The file by serde_json values, `anthropic::Events` and `opencode::message`.
pub(super) fn read_slow(source: &Source<'_>, chunks: &[Chunk], carry: &mut Carry) -> FileOut {
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
    let (sessions, outcomes) = group(source, parsed, carry);
    let (rows, placed) = rows_of(sessions, carry);
    // A line that added its blocks to an earlier line's message (one model
    // call) has that message's rows; only the line that made it opens the session.
    let lines = outcomes
        .into_iter()
        .map(|At { line, raw, outcome }| Line {
            line,
            raw,
            outcome: outcome.and_then(|at| {
                let mut kept = placed[at.session][at.message].clone()?;
                kept.first &= at.opens;
                Ok(kept)
            }),
        })
        .collect();
    FileOut { rows, lines }
}

/// The parsed lines' events grouped into sessions (those `carry` continues
/// first), in line order; per line, the error or where its event went.
fn group(
    source: &Source<'_>,
    parsed: Vec<Vec<At<Value>>>,
    carry: &mut Carry,
) -> (Vec<Events>, Vec<At<Placed>>) {
    let mut sessions: Vec<Events> = std::mem::take(&mut carry.sessions)
        .into_iter()
        .map(|c| Events::resume(c.id, c.messages, c.ids))
        .collect();
    let mut by_id: HashMap<String, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, e)| (e.turns.session_id.clone(), i))
        .collect();
    let mut current = std::mem::take(&mut carry.current);
    // per line: the error, or where its event went (rows filled in below)
    let mut outcomes: Vec<At<Placed>> = Vec::new();
    // Aside lines without a session id before the file's first other event
    // (their places in `outcomes`): they join that event's session.
    let mut held: Vec<(usize, Value)> = Vec::new();
    for At { line, raw, outcome } in parsed.into_iter().flatten() {
        let event = match outcome.and_then(event_of) {
            Ok(event) => event,
            Err(p) => {
                // Not JSON: a line that still reads as an event of a session
                // (to the first pass's scan) switches to it, and one that
                // reads as an event other than an aside releases the
                // held ones, so that the scan alone tells where the file can be cut.
                if let Some((sid, aside)) = claude_plan::line_event(&source.data[raw.clone()]) {
                    let holds = aside && sid.is_none();
                    if let Some(sid) = sid {
                        current = carry.named(sid);
                    }
                    if !carry.started && !holds {
                        carry.started = true;
                        release(
                            &mut held,
                            &current,
                            &mut sessions,
                            &mut by_id,
                            &mut outcomes,
                        );
                    }
                }
                outcomes.push(At {
                    line,
                    raw,
                    outcome: Err(p),
                });
                continue;
            }
        };
        let sid = match event.get("sessionId") {
            Some(id) if truthy(id) => carry.named(py_str(id)),
            _ if !carry.started
                && (event.get("type").and_then(Value::as_str))
                    .is_some_and(|t| is_aside(t.as_bytes())) =>
            {
                held.push((outcomes.len(), event));
                outcomes.push(At {
                    line,
                    raw,
                    outcome: Ok(Placed::HELD), // its session once released
                });
                continue;
            }
            _ => current.clone(),
        };
        if !carry.started {
            carry.started = true;
            release(&mut held, &sid, &mut sessions, &mut by_id, &mut outcomes);
        }
        let (index, new) = match by_id.get(&sid) {
            Some(&i) => (i, false),
            None => {
                sessions.push(Events::new(sid.clone()));
                (sessions.len() - 1, true)
            }
        };
        // The line's session is the current one now, whether its event is
        // kept or rejected (as `claude_code_sessions` groups events).
        let outcome = match sessions[index].push(event) {
            Ok((message, opens)) => {
                if new {
                    by_id.insert(sid.clone(), index);
                }
                Ok(Placed {
                    session: index,
                    message,
                    opens,
                })
            }
            Err(p) => {
                if new {
                    sessions.pop();
                }
                Err(p.session(&sid))
            }
        };
        current = sid;
        outcomes.push(At { line, raw, outcome });
    }
    // a file of nothing but aside lines so far: they join the current session
    release(
        &mut held,
        &current,
        &mut sessions,
        &mut by_id,
        &mut outcomes,
    );
    carry.current = current;
    (sessions, outcomes)
}

/// The sessions' messages as rows, session by session (the JSON text is
/// most of the work: made in parallel), and what each message became; what
/// the next window needs goes to `carry`.
fn rows_of(
    sessions: Vec<Events>,
    carry: &mut Carry,
) -> (Rows, Vec<Vec<std::result::Result<Kept, Problem>>>) {
    // Every message is final now: turn them into rows in parallel (the JSON
    // text is most of the work), then append session by session.
    let mut bases = Vec::with_capacity(sessions.len());
    let converted: Vec<(String, Vec<std::result::Result<Message, Problem>>)> = sessions
        .into_iter()
        .map(|mut events| {
            bases.push(events.base);
            carry.sessions.push(Carried {
                id: events.turns.session_id.clone(),
                messages: events.base + events.events,
                ids: match carry.windowed {
                    true => events.known_ids(),
                    false => Known::default(),
                },
            });
            (events.turns.session_id, events.turns.messages)
        })
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|(sid, messages)| {
            let rows = messages
                .into_par_iter()
                .map(|m| opencode::message(m, "the event"))
                .collect();
            (sid, rows)
        })
        .collect();
    let mut rows = Rows::default();
    let mut placed: Vec<Vec<std::result::Result<Kept, Problem>>> =
        Vec::with_capacity(converted.len());
    for ((sid, messages), base) in converted.into_iter().zip(bases) {
        let json = opencode::session_json(&sid);
        let mut first = base == 0;
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
    (rows, placed)
}

/// Push the `held` summary lines into session `sid` (made if new, dropped
/// again if none of them is kept), noting where each went in `outcomes`.
fn release(
    held: &mut Vec<(usize, Value)>,
    sid: &str,
    sessions: &mut Vec<Events>,
    by_id: &mut HashMap<String, usize>,
    outcomes: &mut [At<Placed>],
) {
    if held.is_empty() {
        return;
    }
    let index = match by_id.get(sid) {
        Some(&i) => i,
        None => {
            sessions.push(Events::new(sid.to_owned()));
            sessions.len() - 1
        }
    };
    let mut kept = false;
    for (k, event) in held.drain(..) {
        outcomes[k].outcome = match sessions[index].push(event) {
            Ok((message, opens)) => {
                kept = true;
                Ok(Placed {
                    session: index,
                    message,
                    opens,
                })
            }
            Err(p) => Err(p.session(sid)),
        };
    }
    if !by_id.contains_key(sid) {
        match kept {
            true => drop(by_id.insert(sid.to_owned(), index)),
            false => drop(sessions.pop()),
        }
    }
}

/// The file by `fast_claude` when every line is of a shape it is sure of;
/// `carry` changes only then.
pub(super) fn read_fast(data: &[u8], chunks: &[Chunk], carry: &mut Carry) -> Option<FileOut> {
    if carry.agent.is_some() {
        return None; // a subagent's ids are renamed: the general reader does it
    }
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
    let (out, update) = fast_claude::read_file(&lines, &trees, carry)?;
    update.apply(carry);
    Some(out)
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
    use super::super::tests::{column, streamed, temp_file};
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
            // the summary line before any session joins the first one, s
            assert_eq!((out.lines, out.sessions), (5, 2));
            let lines: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
            assert_eq!(lines, [3]);
            assert_eq!(
                column(&out, "session_id"),
                ["s", "s", "s", "r"].map(|s| Some(s.to_owned()))
            );
            // a1 is taken, so the result keeps its position among the kept events of s
            assert_eq!(
                column(&out, "message_id"),
                ["s-e000000", "a1", "s-e000002", "b1"].map(|s| Some(s.to_owned()))
            );
            // the title is no part: nothing of it is model input
            assert_eq!(column(&out, "part_type")[0], None);
            assert_eq!(column(&out, "status")[1].as_deref(), Some("error"));
            assert_eq!(column(&out, "output")[1].as_deref(), Some("a\nb"));
            assert_eq!(column(&out, "part_type")[2].as_deref(), Some("tool-result"));
        }
    }

    #[test]
    fn a_leading_file_history_snapshot_joins_the_first_session() {
        let text = concat!(
            r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#,
            "\n",
            r#"{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"file-history-snapshot","messageId":"n","snapshot":{}}"#,
            "\n",
        );
        let sources = [Source::new(
            "dir/cc.v1.jsonl",
            text.as_bytes(),
            Format::ClaudeCode,
        )];
        for chunk_bytes in [1, 1 << 20] {
            let options = Options {
                on_error: OnError::Raise,
                chunk_bytes,
            };
            let out = ingest(&sources, &options).unwrap();
            // was 2 sessions: the snapshot alone in one named by the file
            assert_eq!((out.lines, out.sessions), (3, 1));
            assert_eq!(
                column(&out, "session_id"),
                ["s", "s", "s"].map(|s| Some(s.to_owned()))
            );
        }
    }

    /// A pseudo-random Claude Code file: sessions that run on and sometimes
    /// interleave, calls answered soon, late, twice or never, lines without a
    /// session id, repeated uuids, and lines the mapper rejects.
    fn random_file(seed: u64, lines: usize, chaos: bool) -> String {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005) | 1;
        let mut next = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let mut text = String::from(if seed % 2 == 0 { "\u{feff}" } else { "" });
        let mut session = "s0".to_owned();
        let mut calls: Vec<String> = Vec::new();
        let mut model = "m".to_owned();
        for k in 0..lines {
            if next(12) == 0 {
                session = match chaos {
                    true => format!("s{}", next(4)), // a new session, or one read before
                    false => format!("s{k}"),
                };
            }
            let sid = match next(15) {
                0 => String::new(), // joins the session of the line before
                1 => ",\"sessionId\":\"\"".to_owned(),
                _ => format!(",\"sessionId\":\"{session}\""),
            };
            let uuid = match next(10) {
                0 => String::new(),
                1 => ",\"uuid\":\"u1\"".to_owned(), // repeated: a positional id instead
                // an id of any line before, or one a positional id takes before or after
                2 if chaos => format!(",\"uuid\":\"u{}\"", next(k as u64 + 1)),
                3 if chaos => format!(",\"uuid\":\"{session}-e{:06}\"", next(k as u64 + 3)),
                _ => format!(",\"uuid\":\"u{k}\""),
            };
            let pad = "x".repeat(next(120) as usize);
            let line = match next(9) {
                0 if k % 2 == 0 => format!("{{\"type\":\"summary\",\"summary\":\"s{k} {pad}\"}}"),
                0 => format!("{{\"type\":\"file-history-snapshot\",\"messageId\":\"m{k}\",\"snapshot\":{{\"p\":\"{pad}\"}}}}"),
                1 | 2 => {
                    let id = match next(6) {
                        0 if chaos && !calls.is_empty() => calls[next(calls.len() as u64) as usize].clone(),
                        _ => format!("t{k}"),
                    };
                    calls.push(id.clone());
                    // one model call's blocks a line: often the call of the line before
                    if next(3) > 0 {
                        model = format!("m{k}");
                    }
                    format!(
                        "{{\"type\":\"assistant\"{sid}{uuid},\"message\":{{\"id\":\"{model}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{pad}\"}},{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"Bash\",\"input\":{{\"n\":{k}}}}}]}}}}"
                    )
                }
                3..=5 if !calls.is_empty() => {
                    // mostly the latest call, sometimes one long ago or none at all
                    let id = match next(5) {
                        0 if chaos => calls[next(calls.len() as u64) as usize].clone(),
                        1 => "nowhere".to_owned(),
                        2 if chaos => format!("t{}", k as u64 + 1 + next(30)), // before its call
                        _ => calls[calls.len() - 1].clone(),
                    };
                    let error = if next(4) == 0 { "true" } else { "false" };
                    format!(
                        "{{\"type\":\"user\"{sid}{uuid},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"{id}\",\"content\":\"out {k} {pad}\",\"is_error\":{error}}}]}}}}"
                    )
                }
                6 => match next(if chaos { 5 } else { 4 }) {
                    0 => "{not json".to_owned(),
                    // a session id the first pass cannot vouch for: the file is read whole
                    4 => "{\"type\":\"user\",\"sessionId\":7,\"message\":{\"role\":\"user\"}}".to_owned(),
                    1 => format!("{{\"type\":\"assistant\"{sid},\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"t{k}\",\"name\":\"n\",\"input\":[1]}}]}}}}"),
                    2 => format!("{{\"message\":{{\"role\":\"user\"}}{sid}}}"),
                    _ => format!("{{\"type\":\"user\",\"sessionId\":\"s{}\",\"message\":{{\"role\":\"user\",\"content\":\"{pad}\"}}", next(4)),
                },
                _ => format!(
                    "{{\"type\":\"user\"{sid}{uuid},\"message\":{{\"role\":\"user\",\"content\":\"line {k} {pad}\"}}}}"
                ),
            };
            text.push_str(&line);
            text.push_str(if next(10) == 0 { "\r\n\n" } else { "\n" });
        }
        text
    }

    fn table(out: &Ingested) -> arrow_array::RecordBatch {
        let schema = out.batches[0].schema();
        arrow_select::concat::concat_batches(&schema, &out.batches).unwrap()
    }

    fn rejected(out: &Ingested) -> Vec<(usize, String, Vec<u8>)> {
        (out.rejected.iter())
            .map(|r| (r.line, r.error.clone(), r.raw.clone()))
            .collect()
    }

    #[test]
    fn a_file_read_in_windows_gives_the_rows_and_rejects_of_the_whole_file() {
        for seed in 0..40 {
            let chaos = seed % 2 == 1;
            let text = random_file(seed, 150, chaos);
            let path = temp_file(&format!("claude-{seed}.jsonl"), text.as_bytes());
            let sources = [Source {
                name: &path,
                data: text.as_bytes(),
                format: Format::ClaudeCode,
                id_base: Some("base"),
            }];
            for on_error in [OnError::Skip, OnError::Raise] {
                let options = Options {
                    on_error,
                    chunk_bytes: 64,
                };
                let whole = ingest(&sources, &options);
                for window in [1, 300, 2_000, 1 << 20] {
                    let parts = streamed(&path, Format::ClaudeCode, on_error, window);
                    match (&whole, &parts) {
                        (Ok(whole), Ok(parts)) => {
                            assert_eq!(table(whole), table(parts), "seed {seed} window {window}");
                            assert_eq!(rejected(whole), rejected(parts), "seed {seed}");
                            assert_eq!(
                                (whole.lines, whole.sessions),
                                (parts.lines, parts.sessions)
                            );
                            // a file without far results or resumed sessions is cut often
                            if !chaos && window == 1 {
                                assert!(
                                    parts.batches.len() > 20,
                                    "seed {seed}: {}",
                                    parts.batches.len()
                                );
                            }
                        }
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        _ => panic!("seed {seed} window {window}: {:?}", parts.as_ref().err()),
                    }
                }
            }
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn a_long_session_carries_only_the_ids_a_later_window_can_ask_for() {
        use super::super::{Stream, StreamFile};
        // one session, calls answered on the next line, every uuid distinct
        // but one given again far on (twice), and one of the form of the
        // positional id the last repeat takes
        let mut text = String::new();
        for k in 0..4_000 {
            let uuid = match k {
                3_500 | 3_900 => "u7".to_owned(),
                100 => "s-e003900".to_owned(),
                _ => format!("u{k}"),
            };
            let pad = "x".repeat(k % 50);
            text.push_str(&match k % 2 {
                0 => format!("{{\"type\":\"assistant\",\"sessionId\":\"s\",\"uuid\":\"{uuid}\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"t{k}\",\"name\":\"Bash\",\"input\":{{}}}}]}}}}\n"),
                _ => format!("{{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"{uuid}\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"t{}\",\"content\":\"{pad}\"}}]}}}}\n", k - 1),
            });
        }
        let path = temp_file("claude-ids.jsonl", text.as_bytes());
        let window = 20_000;
        let options = Options {
            on_error: OnError::Skip,
            chunk_bytes: 4096,
        };
        let file = StreamFile {
            path: path.clone(),
            format: Format::ClaudeCode,
            id_base: None,
        };
        let mut stream = Stream::new(vec![file], options, window);
        let (mut batches, mut rejects) = (Vec::new(), Vec::new());
        let mut windows = 0;
        while let Some(w) = stream.next_window().unwrap() {
            windows += 1;
            batches.extend(w.batches);
            rejects.extend(w.rejected.iter().map(|r| (r.line, r.error.clone())));
            let Some(carry) = &stream.claude else { break };
            let held: usize = carry.sessions.iter().map(|s| s.ids.len()).sum();
            // was every id read so far: u7 (until line 3,501) and s-e003900 (all along)
            assert!(held <= 2, "window {windows}: {held} ids carried");
            let plan = stream.plan.as_ref().unwrap();
            // one cut point a cell of window / 64 bytes at most, not a span a call
            let cells = text.len() / (window / 64) + 2;
            assert!(plan.kept() <= cells, "{} > {cells}", plan.kept());
        }
        assert!(windows > 10, "{windows}");
        let whole = ingest(
            &[Source::new(&path, text.as_bytes(), Format::ClaudeCode)],
            &Options {
                on_error: OnError::Skip,
                chunk_bytes: 4096,
            },
        )
        .unwrap();
        let got = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(got, table(&whole));
        let want: Vec<_> = (whole.rejected.iter())
            .map(|r| (r.line, r.error.clone()))
            .collect();
        assert_eq!(rejects, want);
        // the first repeat took a positional id; the second's was line 101's uuid
        assert!(column(&whole, "message_id").contains(&Some("s-e003500".to_owned())));
        assert_eq!(want.len(), 1);
        assert!(
            want[0].0 == 3_901 && want[0].1.contains("appears twice"),
            "{want:?}"
        );
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_file_written_to_while_it_is_read_is_read_as_scanned_or_refused() {
        use super::super::{Stream, StreamFile};
        // larger than the reader's 1 MiB buffer, so a change shows
        let text = random_file(2, 30_000, false);
        assert!(text.len() > 3 << 20, "{}", text.len());
        let path = temp_file("claude-live.jsonl", text.as_bytes());
        let options = || Options {
            on_error: OnError::Skip,
            chunk_bytes: 64,
        };
        let file = || StreamFile {
            path: path.clone(),
            format: Format::ClaudeCode,
            id_base: Some("base".into()),
        };
        let whole = streamed(&path, Format::ClaudeCode, OnError::Skip, 1 << 30).unwrap();
        // appended after the scan (a session being written): not read
        let mut stream = Stream::new(vec![file()], options(), 200_000);
        let mut parts = vec![stream.next_window().unwrap().unwrap()];
        let more = r#"{"type":"user","sessionId":"s0","message":{"role":"user","content":"late"}}"#;
        std::fs::write(&path, format!("{text}{more}\n")).unwrap();
        while let Some(w) = stream.next_window().unwrap() {
            parts.push(w);
        }
        let batches: Vec<_> = parts.iter().flat_map(|w| w.batches.clone()).collect();
        let got = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(got, table(&whole));
        assert!(parts.len() > 5);
        // cut short after the scan: an error, never a silent half
        std::fs::write(&path, &text).unwrap();
        let mut stream = Stream::new(vec![file()], options(), 200_000);
        stream.next_window().unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        let err = loop {
            match stream.next_window() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("read to the end of a file cut short"),
                Err(e) => break e,
            }
        };
        assert!(
            err.to_string().contains("changed while it was read"),
            "{err}"
        );
        std::fs::remove_file(path).unwrap();
    }
}
