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
mod observations;
mod opencode;
mod openhands;
pub mod pyjson;
mod responses;
pub mod rows;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, LargeStringArray, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_select::filter::filter_record_batch;
use rayon::prelude::*;
use serde_json::Value;

use crate::error::{CoreError, Location, Result};
use opencode::SessionRows;
use rows::Rows;
mod lines;
mod settle;
mod types;

use lines::*;
use settle::*;
pub use types::{Format, Ingested, OnError, Options, Problem, Rejected, Source};

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

/// Parse `sources` in parallel on the current rayon pool.
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
