//! A chat list's counts in one call: the list (an `openai-chat` session,
//! one JSON object) read by the chat mapper (`ingest/chat.rs`) into part
//! rows, each model message estimated (`messages::sent_messages`) and its
//! count given back to the chat message it came from. The chat index of a
//! message row is in its message id (`<session>-m<index>`), that of a
//! `tool` result in the tag the caller put on the tool message (kept by the
//! mapper under the part's `result_source`). What
//! `scans/chatrows.py` did with `ingest_bytes`, a table and `sent_messages`,
//! without the table crossing into Python and back.

use serde_json::Value;

use crate::error::{CoreError, Result};
use crate::ingest::{self, Format, OnError, Options, Source};
use crate::messages::{sent_messages, MessageEstimateConfig, SentKind};
use crate::schema::{Columns, Scan};
use crate::table::PartTable;

/// How the caller tagged the list: the session id it gave it, and the key
/// each tool message carries with its own chat index.
#[derive(Debug, Clone, Copy)]
pub struct Tags<'a> {
    pub session: &'a str,
    pub at: &'a str,
}

/// Per chat message of `data` (`size` messages), its estimate as sent: a
/// message's own model message, a call's result at the `tool` message that
/// answered it. A message not sent counts 0; a call no message answered
/// (sent as interrupted) counts nowhere.
pub fn chat_counts(
    data: &[u8],
    size: usize,
    tags: Tags<'_>,
    config: MessageEstimateConfig,
) -> Result<Vec<u64>> {
    let source = Source::new("chat list", data, Format::OpenAiChat);
    let read = ingest::ingest(&[source], &Options::new(OnError::Raise))?;
    let mut counts = vec![0; size];
    if read.batches.is_empty() {
        return Ok(counts);
    }
    let columns = Columns::from_batches(&read.batches, Scan::Estimate)?;
    let table = PartTable::new(&columns)?;
    let prefix = format!("{}-m", tags.session);
    for sent in sent_messages(&table, config)?.into_iter().flatten() {
        let at = match sent.kind {
            SentKind::Message => table
                .message_id
                .get(sent.row)
                .and_then(|id| id.strip_prefix(&prefix))
                .and_then(|n| n.parse::<usize>().ok()),
            SentKind::Result | SentKind::Observation => result_at(&table, sent.row, tags.at)?,
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

/// The chat index of the `tool` message that answered the call at `row`
/// (`None`: none did).
fn result_at(table: &PartTable<'_>, row: usize, key: &str) -> Result<Option<usize>> {
    let Some(text) = table.part_json.as_ref().and_then(|c| c.get(row)) else {
        return Ok(None);
    };
    let part: Value = serde_json::from_str(text)
        .map_err(|e| CoreError::Internal(format!("the chat mapper's part_json: {e}")))?;
    Ok(part
        .get("result_source")
        .and_then(|s| s.get(key))
        .and_then(Value::as_u64)
        .map(|n| n as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_longer_than_its_size_is_the_callers_error() {
        let data = br#"{"id":"chat","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}"#;
        let tags = Tags {
            session: "chat",
            at: "ctxcompact_at",
        };
        let got = chat_counts(data, 1, tags, MessageEstimateConfig::default());
        assert!(
            matches!(&got, Err(CoreError::InvalidUsage(why)) if why.contains("index 1, past the 1")),
            "{got:?}"
        );
        // a tool message tagged past the list
        let data = br#"{"id":"chat","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"read","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x","ctxcompact_at":7}]}"#;
        let got = chat_counts(data, 2, tags, MessageEstimateConfig::default());
        assert!(
            matches!(&got, Err(CoreError::InvalidUsage(why)) if why.contains("index 7")),
            "{got:?}"
        );
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
        let tags = Tags {
            session: "chat",
            at: "ctxcompact_at",
        };
        let got = chat_counts(data, 4, tags, MessageEstimateConfig::default()).unwrap();
        assert!(got.iter().all(|&n| n > 4), "{got:?}");
        assert_eq!(got.iter().sum::<u64>(), {
            let read = ingest::ingest(
                &[Source::new("x", data, Format::OpenAiChat)],
                &Options::new(OnError::Raise),
            )
            .unwrap();
            let columns = Columns::from_batches(&read.batches, Scan::Estimate).unwrap();
            let table = PartTable::new(&columns).unwrap();
            sent_messages(&table, MessageEstimateConfig::default()).unwrap()[0]
                .iter()
                .map(|s| s.tokens)
                .sum::<u64>()
        });
    }
}
