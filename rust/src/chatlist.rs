//! A chat list read by the engine: the list (an `openai-chat` session, one
//! JSON object, whose messages may also hold Anthropic content blocks) read
//! by the chat mapper in its chat-list mode (`Format::ChatList`,
//! `ingest/chat.rs` `chat_list`) into part rows (`read`), and its counts in
//! one call (`chat_counts`): each model message estimated
//! (`messages::sent_messages`) and its count given back to the chat message
//! it came from. The chat index of a message row is in its message id
//! (`<session>-m<index>`), that of a result in its tool part's
//! `result_source` under `chat::AT`: the caller tags each `tool` message
//! with its index under that key, the mapper a `tool_result` block's.

use serde_json::Value;

use crate::error::{CoreError, Location, Result};
use crate::ingest::{self, chat::AT, Format, Ingested, OnError, Options, Source};
use crate::messages::{sent_messages, MessageEstimateConfig, SentKind};
use crate::schema::{Columns, Scan};
use crate::table::PartTable;

/// What a chat list's errors call it (it has no file, nor lines).
const CHAT_LIST: &str = "chat list";

/// The part rows of a chat list (`data`: one `{"id", "messages"}` object),
/// read in the chat-list mode; a message it cannot read is its error
/// (`located`).
pub fn read(data: &[u8]) -> Result<Ingested> {
    let source = Source::new(CHAT_LIST, data, Format::ChatList);
    ingest::ingest(&[source], &Options::new(OnError::Raise)).map_err(located)
}

/// A chat list's `FormatError` where it is: "chat list, message N: ..."
/// with `row` the message's index in the list (a file's error reads
/// "<file>:<line>: ..."; the list's one JSON line is no place), and
/// `column` "content" when a content block is at fault (the text names
/// it, `content[j]`). The list's message ids and session id are the
/// mapper's names (`<session>-m<index>`), not the caller's: not kept.
fn located(error: CoreError) -> CoreError {
    let CoreError::Format { what, at } = error else {
        return error;
    };
    let line = format!("{CHAT_LIST}:{}: ", at.row.unwrap_or(1));
    let what = what.strip_prefix(&line).unwrap_or(&what);
    // the message's id (`<session>-m<index>`), else the text's `messages[i]`
    let index = at
        .message_id
        .as_deref()
        .and_then(|id| id.rsplit_once("-m"))
        .map(|(_, n)| n)
        .or_else(|| {
            what.strip_prefix("messages[")?
                .split_once(']')
                .map(|(n, _)| n)
        })
        .and_then(|n| n.parse::<usize>().ok());
    let Some(i) = index else {
        return CoreError::Format {
            what: format!("{CHAT_LIST}: {what}"),
            at: Location::default(),
        };
    };
    // "messages[i].content[j] ..." says again which message: "content[j] ..."
    let what = what
        .strip_prefix(&format!("messages[{i}]."))
        .unwrap_or(what);
    let block = what.starts_with("content[");
    CoreError::Format {
        what: format!("{CHAT_LIST}, message {i}: {what}"),
        at: Location {
            row: Some(i),
            column: block.then_some("content"),
            ..Location::default()
        },
    }
}

/// Per chat message of `data` (`size` messages), its estimate as sent: a
/// message's own model message, a call's result at the `tool` message that
/// answered it. A message not sent counts 0; a call no message answered
/// (sent as interrupted) counts nowhere.
pub fn chat_counts(
    data: &[u8],
    size: usize,
    session: &str,
    config: MessageEstimateConfig,
) -> Result<Vec<u64>> {
    let read = read(data)?;
    let mut counts = vec![0; size];
    if read.batches.is_empty() {
        return Ok(counts);
    }
    let columns = Columns::from_batches(&read.batches, Scan::Estimate)?;
    let table = PartTable::new(&columns)?;
    let prefix = format!("{session}-m");
    for sent in sent_messages(&table, config)?.into_iter().flatten() {
        let at = match sent.kind {
            SentKind::Message => table
                .message_id
                .get(sent.row)
                .and_then(|id| id.strip_prefix(&prefix))
                .and_then(|n| n.parse::<usize>().ok()),
            SentKind::Result | SentKind::Observation => result_at(&table, sent.row)?,
        };
        match at {
            Some(at) if at < size => counts[at] += sent.tokens,
            // The list holds more messages than the caller said (or a tool
            // message tagged past them): the caller's `size` is wrong.
            Some(at) => {
                return Err(CoreError::InvalidUsage(format!(
                    "chat_counts: the list has a message at index {at}, past the {size} \
                     messages given as its size"
                )))
            }
            None => {}
        }
    }
    Ok(counts)
}

/// The chat index of the message whose result answered the call at `row`
/// (`None`: none did).
fn result_at(table: &PartTable<'_>, row: usize) -> Result<Option<usize>> {
    let Some(text) = table.part_json.as_ref().and_then(|c| c.get(row)) else {
        return Ok(None);
    };
    let source: ResultSource = serde_json::from_str(text)
        .map_err(|e| CoreError::Internal(format!("the chat mapper's part_json: {e}")))?;
    Ok(source
        .0
        .as_ref()
        .and_then(|s| s.get(AT))
        .and_then(Value::as_u64)
        .map(|n| n as usize))
}

/// A part's `result_source` (the last, if named twice), read from its JSON
/// object without building the rest: the call's input and output, most of
/// its bytes, are skipped by the parser.
struct ResultSource(Option<Value>);

impl<'de> serde::Deserialize<'de> for ResultSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(ResultSourceVisitor)
    }
}

struct ResultSourceVisitor;

impl<'de> serde::de::Visitor<'de> for ResultSourceVisitor {
    type Value = ResultSource;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a part's JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<ResultSource, A::Error> {
        let mut source = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "result_source" {
                source = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(ResultSource(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum of every model message of `data` read as one `format` line.
    fn total(data: &[u8], format: Format) -> u64 {
        let read = ingest::ingest(
            &[Source::new("x", data, format)],
            &Options::new(OnError::Raise),
        )
        .unwrap();
        let columns = Columns::from_batches(&read.batches, Scan::Estimate).unwrap();
        let table = PartTable::new(&columns).unwrap();
        sent_messages(&table, MessageEstimateConfig::default()).unwrap()[0]
            .iter()
            .map(|s| s.tokens)
            .sum()
    }

    #[test]
    fn anthropic_blocks_count_as_the_anthropic_format_and_map_back() {
        let messages = r#"[{"role":"user","content":"fix it"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},
             {"type":"text","text":"reading"},
             {"type":"tool_use","id":"t1","name":"read","input":{"path":"a"}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
             "content":[{"type":"text","text":"the whole file, long enough to count"}]}]},
            {"role":"assistant","content":"done"}]"#
            .replace('\n', "");
        let list = format!(r#"{{"id":"chat","messages":{messages}}}"#);
        let got =
            chat_counts(list.as_bytes(), 4, "chat", MessageEstimateConfig::default()).unwrap();
        // the result counts at the turn holding its block, not with its call
        assert!(got[2] > got[1], "{got:?}");
        let stored = format!(r#"{{"messages":{messages}}}"#);
        assert_eq!(
            got.iter().sum::<u64>(),
            total(stored.as_bytes(), Format::Anthropic)
        );
        // openai-chat keeps refusing them
        let refused = ingest::ingest(
            &[Source::new("x", list.as_bytes(), Format::OpenAiChat)],
            &Options::new(OnError::Raise),
        );
        assert!(refused.is_err());
        let bad = list.replace(r#""tool_use_id":"t1""#, r#""tool_use_id":"t9""#);
        let err = chat_counts(bad.as_bytes(), 4, "chat", MessageEstimateConfig::default());
        let Err(CoreError::Format { what, at }) = err else {
            panic!("{err:?}")
        };
        // where in the list, not a file's line ("chat list:1:")
        assert_eq!(
            what,
            "chat list, message 2: content[0] holds the tool_result of tool_use_id \"t9\", \
             which no earlier message called"
        );
        let want = Location {
            row: Some(2),
            column: Some("content"),
            ..Location::default()
        };
        assert_eq!(at, want);
    }

    #[test]
    fn a_list_longer_than_its_size_is_the_callers_error() {
        let data = br#"{"id":"chat","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}"#;
        let got = chat_counts(data, 1, "chat", MessageEstimateConfig::default());
        assert!(
            matches!(&got, Err(CoreError::InvalidUsage(why)) if why.contains("index 1, past the 1")),
            "{got:?}"
        );
        // a tool message tagged past the list
        let data = br#"{"id":"chat","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"read","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x","ctxcompact_at":7}]}"#;
        let got = chat_counts(data, 2, "chat", MessageEstimateConfig::default());
        assert!(
            matches!(&got, Err(CoreError::InvalidUsage(why)) if why.contains("index 7")),
            "{got:?}"
        );
    }

    #[test]
    fn a_call_that_says_custom_without_its_custom_object_is_refused_on_every_path() {
        // the fast chat reader took it as a function call (a silent count)
        let data = br#"{"id":"chat","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"custom","function":{"name":"read","arguments":"{}"}}]}]}"#;
        let got = chat_counts(data, 1, "chat", MessageEstimateConfig::default());
        let Err(CoreError::Format { what, at }) = got else {
            panic!("{got:?}")
        };
        assert!(
            what.starts_with("chat list, message 0: tool_calls[0] has a 'custom' key"),
            "{what}"
        );
        assert_eq!(at.row, Some(0));
    }

    #[test]
    fn the_result_index_is_the_parts_own_not_a_nested_key() {
        // the output and input hold the key too (skipped, not read)
        let data = br#"{"id":"chat","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"read","arguments":"{\"result_source\":{\"ctxcompact_at\":0}}"}}]},{"role":"user","content":"between"},{"role":"tool","tool_call_id":"c","content":"{\"result_source\":{\"ctxcompact_at\":1}}","ctxcompact_at":2}]}"#;
        let got = chat_counts(data, 3, "chat", MessageEstimateConfig::default()).unwrap();
        let read = read(data).unwrap();
        let columns = Columns::from_batches(&read.batches, Scan::Estimate).unwrap();
        let table = PartTable::new(&columns).unwrap();
        let row = (0..table.part_type.len())
            .find(|&r| table.tool.as_ref().and_then(|c| c.get(r)) == Some("read"));
        assert_eq!(result_at(&table, row.unwrap()).unwrap(), Some(2));
        assert!(got[2] > 4, "{got:?}");
    }

    #[test]
    fn each_count_goes_back_to_its_chat_message() {
        let text = r#"{"id":"chat","messages":[
            {"role":"user","content":"fix it"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
             "function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"the file","ctxcompact_at":2},
            {"role":"assistant","content":"done"}]}"#
            .replace('\n', ""); // one JSON line
        let data = text.as_bytes();
        let got = chat_counts(data, 4, "chat", MessageEstimateConfig::default()).unwrap();
        assert!(got.iter().all(|&n| n > 4), "{got:?}");
        assert_eq!(got.iter().sum::<u64>(), total(data, Format::OpenAiChat));
    }
}
