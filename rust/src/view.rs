//! The model input itself: what a model call is sent for every stored message
//! of a part-row table, in the OpenAI Chat Completions shape, as JSON bytes.
//!
//! The same walk as the message estimates (`messages::model_messages`), with
//! the same rules read from the same places (`render` for placeholders and
//! cut outputs, `part_json` for ignored, pinned and text-protocol parts), so
//! what is sent and what is estimated cannot drift apart. Per stored message:
//! a JSON array of its model messages (`[]` when it sends nothing): the
//! message itself, then each call's `tool` result, then each text-protocol
//! step's non-empty result as a `user` message.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::codes::{flag, part_type, role};
use crate::error::{CoreError, Result};
use crate::messages::MessageEstimateConfig;
use crate::messages::{finished, output_text, sent_input, value, FilePart, FileShown};
use crate::part_json::{call_id, ignored, may_observe, observed, pinned};
use crate::render::{self, Render, COMPACTION_QUESTION, INTERRUPTED_TOOL};
use crate::shapes::{reshape, Shape};
use crate::table::{Message, PartTable};

/// Part type code of a file part (docs/schema.md).
const FILE: u8 = 3;

/// Every message of every session, in table order, as the JSON array of the
/// model messages it is sent as. `thinking`: per message, whether it sends
/// its reasoning (`None`: the newest `render.keep_thinking` assistant
/// messages of each session do, `Render::thinking`).
pub fn render_chat(
    table: &PartTable<'_>,
    render: Render,
    thinking: Option<&[bool]>,
) -> Result<Vec<Vec<u8>>> {
    render_shape(table, render, thinking, Shape::Chat)
}

/// `render_chat` in `shape` (`shapes::reshape` of each message's chat
/// render: the same decisions, another envelope).
pub fn render_shape(
    table: &PartTable<'_>,
    render: Render,
    thinking: Option<&[bool]>,
    shape: Shape,
) -> Result<Vec<Vec<u8>>> {
    let messages: Vec<Vec<Message>> = (0..table.sessions.len())
        .into_par_iter()
        .map(|s| table.messages(s))
        .collect::<Result<_>>()?;
    let count: usize = messages.iter().map(Vec::len).sum();
    if let Some(given) = thinking {
        if given.len() != count {
            return Err(CoreError::InvalidUsage(format!(
                "thinking gives {} flags for {count} messages",
                given.len()
            )));
        }
    }
    let mut offset = 0;
    let per_session: Vec<(usize, &Vec<Message>)> = messages
        .iter()
        .map(|m| {
            let at = offset;
            offset += m.len();
            (at, m)
        })
        .collect();
    let rendered: Vec<Vec<Vec<u8>>> = per_session
        .into_par_iter()
        .map(|(at, msgs)| {
            let flags = match thinking {
                Some(given) => given[at..at + msgs.len()].to_vec(),
                None => {
                    let assistant: Vec<bool> =
                        msgs.iter().map(|m| m.role == role::ASSISTANT).collect();
                    render.thinking(&assistant)
                }
            };
            msgs.iter()
                .zip(flags)
                .map(|(msg, thinks)| render_message(table, msg, render, thinks, shape))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    Ok(rendered.into_iter().flatten().collect())
}

/// The JSON array of the model messages one stored message is sent as, in
/// `shape` (`thinking`: it sends its reasoning).
pub fn render_message(
    table: &PartTable<'_>,
    msg: &Message,
    render: Render,
    thinking: bool,
    shape: Shape,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    message_json(table, msg, render, thinking, &mut out)?;
    reshape(out, shape)
}

/// A JSON string (serde_json's escaping: what `json.loads` reads back):
/// the same bytes `serde_json::to_writer` writes, the runs that need no
/// escape copied whole (found 16 bytes at a time) rather than byte by byte.
fn string(out: &mut Vec<u8>, text: &str) {
    /// A byte JSON escapes: a control character, `"` or `\`.
    fn escaped(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        // Whole chunks with nothing to escape are skipped at once.
        if let Some(chunk) = bytes.get(i..i + 16) {
            if !chunk.iter().fold(false, |any, &b| any | escaped(b)) {
                i += 16;
                continue;
            }
        }
        let b = bytes[i];
        if !escaped(b) {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// `{"role":<role>,"content":<text>}` (with `,` before it unless first).
fn plain(out: &mut Vec<u8>, role: &str, text: &str) {
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(b"{\"role\":\"");
    out.extend_from_slice(role.as_bytes());
    out.extend_from_slice(b"\",\"content\":");
    string(out, text);
    out.push(b'}');
}

/// Texts joined as they are sent, `"\n\n"` between them.
fn joined(texts: &[Cow<'_, str>]) -> String {
    texts.join("\n\n")
}

/// The JSON array of the model messages of `msg`.
pub(crate) fn message_json(
    table: &PartTable<'_>,
    msg: &Message,
    render: Render,
    thinking: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.push(b'[');
    match msg.role {
        role::ASSISTANT => assistant_json(table, msg, render, thinking, out)?,
        role::SYSTEM => {
            let texts = sent_texts(table, msg)?;
            if !texts.is_empty() {
                plain(out, "system", &joined(&texts));
            }
        }
        // user, and anything else sent in the user's place
        _ => user_json(table, msg, out)?,
    }
    out.push(b']');
    Ok(())
}

/// The text the part at `row` sends: a text part's, when it is non-empty
/// and not ignored (the one rule every role's texts follow).
fn sent_text<'a>(table: &PartTable<'a>, row: usize) -> Result<Option<Cow<'a, str>>> {
    if table.part_type[row] != part_type::TEXT {
        return Ok(None);
    }
    let text = table.output_text(row);
    Ok((!text.is_empty() && !ignored(table, row)?).then_some(Cow::Borrowed(text)))
}

/// The text parts a system or assistant message sends (`sent_text`).
fn sent_texts<'a>(table: &PartTable<'a>, msg: &Message) -> Result<Vec<Cow<'a, str>>> {
    let mut texts = Vec::new();
    for row in msg.rows.clone() {
        texts.extend(sent_text(table, row)?);
    }
    Ok(texts)
}

/// A user message: its texts, compaction question and files joined as one
/// string, or a list of blocks when it holds an image.
fn user_json(table: &PartTable<'_>, msg: &Message, out: &mut Vec<u8>) -> Result<()> {
    enum Block<'a> {
        Text(Cow<'a, str>),
        Image(String),
    }
    let mut blocks = Vec::new();
    for row in msg.rows.clone() {
        match table.part_type[row] {
            part_type::TEXT => blocks.extend(sent_text(table, row)?.map(Block::Text)),
            // A marker a hook cancelled (ignored) is not sent.
            part_type::COMPACTION if !ignored(table, row)? => {
                blocks.push(Block::Text(Cow::Borrowed(COMPACTION_QUESTION)));
            }
            FILE => blocks.push(match FilePart::read(table, row)?.shown() {
                FileShown::Image(url) => Block::Image(url),
                FileShown::Text(text) => Block::Text(Cow::Owned(text)),
            }),
            _ => {}
        }
    }
    if blocks.is_empty() {
        return Ok(());
    }
    if blocks.iter().all(|b| matches!(b, Block::Text(_))) {
        let texts: Vec<Cow<'_, str>> = blocks
            .into_iter()
            .map(|b| match b {
                Block::Text(t) => t,
                Block::Image(_) => unreachable!("every block is a text"),
            })
            .collect();
        plain(out, "user", &joined(&texts));
        return Ok(());
    }
    out.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match block {
            Block::Text(text) => {
                out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
                string(out, text);
                out.push(b'}');
            }
            Block::Image(url) => {
                out.extend_from_slice(b"{\"type\":\"image_url\",\"image_url\":{\"url\":");
                string(out, url);
                out.extend_from_slice(b"}}");
            }
        }
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

/// An assistant message: itself (its text, its reasoning when `thinking`,
/// its calls) unless it has neither text nor call, then each call's result
/// as a `tool` message, then each text-protocol step's non-empty result as a
/// `user` message (its command is in the text: it adds no call).
fn assistant_json(
    table: &PartTable<'_>,
    msg: &Message,
    render: Render,
    thinking: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    let texts = sent_texts(table, msg)?;
    let may_observe = may_observe(table, msg.rows.clone());
    let (mut calls, mut observations) = (Vec::new(), Vec::new());
    for row in msg.rows.clone() {
        if table.part_type[row] == part_type::TOOL {
            match may_observe && observed(table, row)? {
                true => observations.push(row),
                false => calls.push(row),
            }
        }
    }
    let config = MessageEstimateConfig {
        render,
        ..Default::default()
    };
    let ids = calls
        .iter()
        .map(|&row| call_id_of(table, row))
        .collect::<Result<Vec<_>>>()?;
    if !texts.is_empty() || !calls.is_empty() {
        out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":");
        match texts.is_empty() {
            true => out.extend_from_slice(b"null"),
            false => string(out, &joined(&texts)),
        }
        if thinking {
            let reasoning: Vec<Cow<'_, str>> = msg
                .rows
                .clone()
                .filter(|&r| table.part_type[r] == part_type::REASONING)
                .map(|r| Cow::Borrowed(table.output_text(r)))
                .filter(|t| !t.is_empty())
                .collect();
            if !reasoning.is_empty() {
                out.extend_from_slice(b",\"reasoning_content\":");
                string(out, &joined(&reasoning));
            }
        }
        if !calls.is_empty() {
            out.extend_from_slice(b",\"tool_calls\":[");
            for (i, (&row, id)) in calls.iter().zip(&ids).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"id\":");
                string(out, id);
                out.extend_from_slice(b",\"type\":\"function\",\"function\":{\"name\":");
                string(out, value(&table.tool, row).unwrap_or(""));
                out.extend_from_slice(b",\"arguments\":");
                string(out, sent_input(table, row, config));
                out.extend_from_slice(b"}}");
            }
            out.push(b']');
        }
        out.push(b'}');
    }
    // Every call is followed by its result, so no call is left without one.
    for (&row, id) in calls.iter().zip(&ids) {
        out.push(b',');
        out.extend_from_slice(b"{\"role\":\"tool\",\"tool_call_id\":");
        string(out, id);
        out.extend_from_slice(b",\"content\":");
        string(out, &tool_result(table, row, render)?);
        out.push(b'}');
    }
    // An empty observation is not sent, as no empty user turn is.
    for row in observations {
        let text = tool_result(table, row, render)?;
        if !text.is_empty() {
            plain(out, "user", &text);
        }
    }
    Ok(())
}

/// A call's id: the provider's (`callID`), else the part's id.
fn call_id_of(table: &PartTable<'_>, row: usize) -> Result<String> {
    if let Some(id) = call_id(table, row)? {
        return Ok(id);
    }
    let part_id = table.part_id.as_ref().ok_or(CoreError::MissingColumn {
        column: "part_id",
        needed_by: "a tool call's id (a part without callID)",
    })?;
    Ok(part_id.get(row).unwrap_or("").to_owned())
}

/// What the model sees as the result of the tool part at `row`: its output
/// or error text (cut to head and tail by `truncate_output` unless pinned),
/// a placeholder when it was cleared, the interrupted error when unfinished.
pub fn tool_result<'a>(table: &PartTable<'a>, row: usize, render: Render) -> Result<Cow<'a, str>> {
    if !finished(table, row) {
        return Ok(Cow::Borrowed(INTERRUPTED_TOOL));
    }
    let needed_by = "the model input (to_model_messages)";
    let text = output_text(table, row, needed_by)?;
    let fate = fate(table, row, render)?;
    if fate == Fate::Cleared {
        let part_id = match render.describe {
            true => table
                .part_id
                .as_ref()
                .ok_or(CoreError::MissingColumn {
                    column: "part_id",
                    needed_by: "a described placeholder (placeholder = \"describe\")",
                })?
                .get(row)
                .unwrap_or(""),
            false => "",
        };
        let tool = value(&table.tool, row).unwrap_or("");
        let input = value(&table.input, row);
        return Ok(Cow::Owned(render::cleared(
            render.describe,
            tool,
            input,
            text,
            part_id,
        )));
    }
    match (fate, render.truncate_output) {
        (Fate::Cut, Some(budget)) => Ok(Cow::Owned(render::truncate(text, budget))),
        _ => Ok(Cow::Borrowed(text)),
    }
}

/// What the model input does with a part's output (`tool_result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Sent as it is (every part but a finished tool's cleared or cut
    /// output; an unfinished tool is sent as the interrupted error).
    Kept = 0,
    /// A placeholder stands for it (the part is marked compacted).
    Cleared = 1,
    /// Sent as its head and tail around a marker (`truncate_output`).
    Cut = 2,
}

/// The fate of the part at `row` under `render`: a finished tool part
/// marked compacted is cleared; one whose output `truncate_output` cuts
/// (`render::truncated`; a pinned part is never cut) is cut.
pub fn fate(table: &PartTable<'_>, row: usize, render: Render) -> Result<Fate> {
    if table.part_type[row] != part_type::TOOL || !finished(table, row) {
        return Ok(Fate::Kept);
    }
    if table.flags[row] & flag::COMPACTED != 0 {
        return Ok(Fate::Cleared);
    }
    match render.truncate_output {
        Some(budget) if !pinned(table, row)? => {
            let text = output_text(table, row, "truncate_output")?;
            Ok(match render::truncated(text, budget) {
                Some(_) => Fate::Cut,
                None => Fate::Kept,
            })
        }
        _ => Ok(Fate::Kept),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Columns, Scan};
    use crate::testutil::*;

    fn think(t: &str) -> P {
        P {
            kind: "reasoning",
            output: Some(t.into()),
            ..Default::default()
        }
    }

    fn rendered(msgs: Vec<M>, render: Render) -> Vec<serde_json::Value> {
        let batches = [batch(&[("s", msgs)])];
        let cols = Columns::from_batches(&batches, Scan::Render).unwrap();
        let table = PartTable::new(&cols).unwrap();
        render_chat(&table, render, None)
            .unwrap()
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect()
    }

    #[test]
    fn an_assistant_step_is_its_call_then_the_result() {
        let msgs = vec![
            user("u", vec![text("task")]),
            assistant("a", "u", vec![text("looking"), call("read", "{}", 8)]),
        ];
        let got = rendered(msgs, Render::default());
        assert_eq!(
            got[0],
            serde_json::json!([{"role": "user", "content": "task"}])
        );
        let sent = got[1].as_array().unwrap();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0]["content"], "looking");
        assert_eq!(sent[0]["tool_calls"][0]["function"]["name"], "read");
        assert_eq!(sent[1]["role"], "tool");
        assert_eq!(sent[1]["tool_call_id"], sent[0]["tool_calls"][0]["id"]);
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut every: String = (0u8..128).map(char::from).collect();
        every.push_str("é\u{2028}😀\u{7f}");
        let long = format!(
            "{}\"{}\\{}\n",
            "a".repeat(40),
            "b".repeat(17),
            "c".repeat(15)
        );
        for text in ["", "plain", every.as_str(), long.as_str(), "\"", "x\u{1}y"] {
            // every head and tail: each byte at each place in a chunk
            for n in (0..=text.len()).filter(|&n| text.is_char_boundary(n)) {
                for cut in [&text[..n], &text[n..]] {
                    let mut ours = Vec::new();
                    string(&mut ours, cut);
                    assert_eq!(ours, serde_json::to_vec(cut).unwrap(), "{cut:?}");
                }
            }
        }
    }

    #[test]
    fn a_message_with_nothing_to_send_is_an_empty_array() {
        let msgs = vec![assistant("a", "u", vec![think("only thinking")])];
        assert_eq!(rendered(msgs, Render::default())[0], serde_json::json!([]));
    }

    #[test]
    fn the_newest_steps_send_their_reasoning() {
        let step = |id: &str| assistant(id, "u", vec![think("why"), text("done")]);
        let keep = Render {
            keep_thinking: 1,
            ..Default::default()
        };
        let got = rendered(vec![step("a"), step("b")], keep);
        assert!(got[0][0].get("reasoning_content").is_none());
        assert_eq!(got[1][0]["reasoning_content"], "why");
        assert_eq!(
            keep.thinking(&[true, false, true]),
            vec![false, false, true]
        );
    }
}
