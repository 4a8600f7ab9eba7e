//! `transcript.sessions_to_table`'s mapper: session exports, one JSON object
//! per line as the pydantic `Session` serializes itself, to part rows by
//! the OpenCode rules (`fast::opencode_line`, else `opencode::session`),
//! chunks mapped in parallel. Unlike a JSONL file, nothing is checked
//! across lines: sessions are mapped as given (a repeated id included), and
//! the first bad one is the error.

use arrow_array::RecordBatch;
use rayon::prelude::*;

use super::lines::{read_chunk, split, ChunkOut};
use super::types::{Format, Source};
use crate::error::{CoreError, Location, Result};

/// The part rows of `data`, session exports one per line (line `i + 1` is
/// session `i`), in line order: one batch per chunk of about `chunk_bytes`.
/// A session the rules refuse is a `Format` error naming it as
/// `sessions[i]`, with its session and message ids.
pub fn exports_to_rows(data: &[u8], chunk_bytes: usize) -> Result<Vec<RecordBatch>> {
    let source = Source::new("sessions", data, Format::OpenCode);
    let mut chunks = Vec::new();
    split(0, data, chunk_bytes.max(1), &mut chunks);
    let outs: Vec<ChunkOut> = chunks
        .par_iter()
        .map(|chunk| read_chunk(&source, chunk))
        .collect();
    let mut batches = Vec::with_capacity(outs.len());
    for out in outs {
        if let Some((line, p)) = out
            .lines
            .iter()
            .find_map(|l| l.outcome.as_ref().err().map(|p| (l.line, p)))
        {
            return Err(CoreError::Format {
                what: format!("sessions[{}]: {}", line - 1, p.what),
                at: Location::default()
                    .session(p.session_id.as_deref())
                    .message(p.message_id.as_deref()),
            });
        }
        if !out.rows.is_empty() {
            batches.push(out.rows.finish());
        }
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, LargeStringArray, StringArray};

    fn strings(batches: &[RecordBatch], name: &str) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for batch in batches {
            let column = batch.column_by_name(name).unwrap();
            if let Some(a) = column.as_any().downcast_ref::<StringArray>() {
                out.extend(a.iter().map(|v| v.map(str::to_owned)));
            } else {
                let a = column.as_any().downcast_ref::<LargeStringArray>().unwrap();
                out.extend(a.iter().map(|v| v.map(str::to_owned)));
            }
        }
        out
    }

    #[test]
    fn sessions_map_in_order_across_chunks_and_a_repeated_id_is_kept() {
        let one = |s: &str| {
            format!(
                r#"{{"info":{{"id":"{s}"}},"messages":[{{"info":{{"id":"m","role":"user"}},"parts":[{{"id":"p","type":"text","text":"hi {s}"}}]}},{{"info":{{"id":"n","role":"assistant"}}}}]}}"#
            )
        };
        let data = [
            one("a"),
            one("b"),
            one("a"),
            r#"{"info":{"id":"e"},"messages":[]}"#.into(),
        ]
        .join("\n");
        for chunk in [1, 64, 1 << 20] {
            let batches = exports_to_rows(data.as_bytes(), chunk).unwrap();
            let ids = strings(&batches, "session_id");
            let ids: Vec<_> = ids.iter().flatten().map(String::as_str).collect();
            assert_eq!(ids, ["a", "a", "b", "b", "a", "a", "e"], "{chunk}");
            assert_eq!(strings(&batches, "output")[4].as_deref(), Some("hi a"));
            assert!(batches.iter().all(|b| b.num_rows() > 0));
        }
        assert!(exports_to_rows(b"", 1).unwrap().is_empty());
    }

    #[test]
    fn a_session_the_rules_refuse_is_named_by_its_index_and_ids() {
        let data = concat!(
            r#"{"info":{"id":"a"},"messages":[]}"#,
            "\n",
            r#"{"info":{"id":"b"},"messages":[{"info":{"id":"m","role":"user","parentID":5}}]}"#
        );
        let err = exports_to_rows(data.as_bytes(), 1).unwrap_err();
        assert_eq!(err.class_name(), "FormatError");
        assert!(
            err.to_string()
                .starts_with("sessions[1]: messages[0].info.parentID must be a string"),
            "{err}"
        );
        let at = err.location();
        assert_eq!(
            (at.session_id.as_deref(), at.message_id.as_deref(), at.row),
            (Some("b"), Some("m"), None)
        );
    }
}
