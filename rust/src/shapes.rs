//! The model input in the Anthropic Messages and OpenAI Responses shapes,
//! converted from the chat shape `view::render_chat` renders, so that the
//! three shapes carry the same per-message decisions (placeholders, cut
//! outputs, cleared inputs, the pivot, pins) and never disagree on what is
//! shown: only the envelope differs.
//!
//! Per stored message, one JSON array, as in the chat shape:
//! - Anthropic: a `system` message stays `{"role":"system","content":..}`
//!   (`anthropic_body` lifts it into the request's `system`); a user message
//!   is `user` with a string or `text`/`image` blocks (a `data:` URL as a
//!   base64 `source`, any other as a `url` source); an assistant step is
//!   `assistant` with `text` then `tool_use` {id,name,input} blocks; each
//!   result a `tool_result` {tool_use_id,content} block in a `user` turn.
//!   Consecutive turns of one role are merged into one message, so a step's
//!   results and its text-protocol results are ONE `user` message (and so
//!   are a step's results and the next stored user message, in the whole
//!   list `anthropic_body` converts). The same rule converts a runtime's
//!   chat list (`clients.anthropic.to_anthropic_messages`).
//! - Responses: `message` items (roles system/user/assistant), each call a
//!   `function_call` {call_id,name,arguments}, each result a
//!   `function_call_output` {call_id,output}, images `input_image`.
//!
//! Reasoning is sent only in the chat shape (`reasoning_content`): an
//! Anthropic `thinking` block needs the provider's signature and a Responses
//! `reasoning` item the provider's id, and the store keeps neither.

use serde_json::{json, Map, Value};

use crate::error::{CoreError, Result};

/// The shape the model input is rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Chat,
    Anthropic,
    Responses,
}

impl Shape {
    /// `"chat"`, `"anthropic"` or `"responses"`; anything else a config error.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "chat" => Ok(Shape::Chat),
            "anthropic" => Ok(Shape::Anthropic),
            "responses" => Ok(Shape::Responses),
            other => Err(CoreError::Config(format!(
                "unknown shape {other:?}; expected \"chat\", \"anthropic\" or \"responses\""
            ))),
        }
    }
}

/// One stored message's chat-shaped JSON array in `shape`.
pub fn reshape(chat: Vec<u8>, shape: Shape) -> Result<Vec<u8>> {
    if shape == Shape::Chat {
        return Ok(chat);
    }
    let messages: Vec<Value> = serde_json::from_slice(&chat)
        .map_err(|e| CoreError::Internal(format!("the chat render is not JSON: {e}")))?;
    let out = match shape {
        Shape::Anthropic => anthropic(messages),
        _ => responses(messages),
    };
    Ok(serde_json::to_vec(&out).expect("a JSON value serializes"))
}

fn text_of(message: &Value) -> Option<&str> {
    message.get("content").and_then(Value::as_str)
}

/// A call's arguments as the Anthropic `input` object: the arguments when
/// they are a JSON object, other JSON as `{"value": ..}`, text that is not
/// JSON as `{"arguments": <the text>}` (nothing is lost; as
/// `clients.anthropic.to_anthropic_messages` does for a runtime's list).
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(other) => json!({ "value": other }),
        Err(_) => json!({ "arguments": arguments }),
    }
}

/// An image URL as an Anthropic image `source`.
fn image_source(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media, data)) = rest.split_once(";base64,") {
            return json!({"type": "base64", "media_type": media, "data": data});
        }
    }
    json!({"type": "url", "url": url})
}

fn image_url(block: &Value) -> &str {
    block["image_url"]["url"].as_str().unwrap_or("")
}

/// Anthropic's own block types: a chat list a runtime holds may carry them
/// as they are (kept as they are).
const ANTHROPIC_BLOCKS: &[&str] = &[
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// A chat content block as an Anthropic block: an `image_url` as an `image`,
/// an Anthropic block as it is, any other with a non-empty `text` as a
/// `text` block; an empty text (which the API refuses) or a block with no
/// text is left out.
fn anthropic_block(block: &Value) -> Option<Value> {
    match block["type"].as_str() {
        Some("image_url") => {
            Some(json!({"type": "image", "source": image_source(image_url(block))}))
        }
        Some(kind) if ANTHROPIC_BLOCKS.contains(&kind) => Some(block.clone()),
        _ => match block["text"].as_str() {
            Some(text) if !text.is_empty() => Some(json!({"type": "text", "text": text})),
            _ => None,
        },
    }
}

/// A message's content as Anthropic content: a non-empty string as it is,
/// a list as its blocks (`anthropic_block`); `None` when nothing is left.
fn anthropic_content(content: &Value) -> Option<Value> {
    match content {
        Value::String(text) if !text.is_empty() => Some(content.clone()),
        Value::Array(blocks) => {
            let blocks: Vec<Value> = blocks.iter().filter_map(anthropic_block).collect();
            (!blocks.is_empty()).then_some(Value::Array(blocks))
        }
        _ => None,
    }
}

/// Content as a list of blocks (a string as one `text` block).
fn into_blocks(content: Value) -> Vec<Value> {
    match content {
        Value::Array(blocks) => blocks,
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// A call's arguments as the Anthropic `input` object (`input_object`; an
/// object given as is, none as `{}`).
fn call_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(text) => input_object(text),
        Value::Null => json!({}),
        other => json!({ "value": other }),
    }
}

/// A chat message's Anthropic turn: its role and content (`None`: nothing
/// to send). An assistant message: its text, then a `tool_use` block per
/// call; a `tool` message: a user turn holding its `tool_result`.
fn turn(message: &Value) -> (&'static str, Option<Value>) {
    match message["role"].as_str().unwrap_or("") {
        "assistant" => {
            let mut blocks = anthropic_content(&message["content"])
                .map(into_blocks)
                .unwrap_or_default();
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": call_input(&call["function"]["arguments"]),
                }));
            }
            (
                "assistant",
                (!blocks.is_empty()).then_some(Value::Array(blocks)),
            )
        }
        "tool" => {
            let content = match &message["content"] {
                Value::String(_) => message["content"].clone(),
                other => anthropic_content(other).unwrap_or_else(|| json!("")),
            };
            let result = json!({
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": content,
            });
            ("user", Some(json!([result])))
        }
        // user, and anything else sent in the user's place
        _ => ("user", anthropic_content(&message["content"])),
    }
}

fn is_system(message: &Value) -> bool {
    matches!(message["role"].as_str(), Some("system" | "developer"))
}

/// Chat messages as Anthropic messages, the one rule of both the model
/// input's shape (`reshape`, `anthropic_body`) and a runtime's list
/// (`clients.anthropic.to_anthropic_messages`): each message's turn
/// (`turn`), consecutive turns of one role merged into one message (so a
/// step's `tool_result` blocks and its text-protocol results are one user
/// message, and the API is never sent two turns of one role in a row). A
/// system message stays where it is (`anthropic_body` lifts it), a turn
/// with nothing to send is left out.
fn anthropic(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        if is_system(&message) {
            out.push(message);
            continue;
        }
        let (role, Some(content)) = turn(&message) else {
            continue;
        };
        match out.last_mut() {
            Some(last) if !is_system(last) && last["role"] == role => {
                let mut blocks = into_blocks(last["content"].take());
                blocks.extend(into_blocks(content));
                last["content"] = Value::Array(blocks);
            }
            _ => out.push(json!({"role": role, "content": content})),
        }
    }
    out
}

/// A session's Anthropic messages rendered one stored message at a time
/// (`reshape`), with `anthropic_body`'s merge applied across the messages: a
/// turn of the role of the last non-system turn before it is merged into
/// that turn (so into the stored message it began in; a message whose every
/// turn merged keeps an empty array). System messages stay where they are,
/// so lifting them gives `anthropic_body`'s request (`plan::plan`).
pub fn merge_turns(per_message: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
    let mut owned: Vec<Vec<Value>> = Vec::with_capacity(per_message.len());
    let mut last: Option<(usize, usize)> = None; // the last non-system turn
    for bytes in per_message {
        let turns: Vec<Value> = serde_json::from_slice(&bytes)
            .map_err(|e| CoreError::Internal(format!("the Anthropic render is not JSON: {e}")))?;
        let mut mine: Vec<Value> = Vec::with_capacity(turns.len());
        for turn in turns {
            if is_system(&turn) {
                mine.push(turn);
                continue;
            }
            if let Some((owner, at)) = last {
                let prev = match owner == owned.len() {
                    true => &mut mine[at],
                    false => &mut owned[owner][at],
                };
                if prev["role"] == turn["role"] {
                    let mut blocks = into_blocks(prev["content"].take());
                    blocks.extend(into_blocks(turn["content"].clone()));
                    prev["content"] = Value::Array(blocks);
                    continue;
                }
            }
            mine.push(turn);
            last = Some((owned.len(), mine.len() - 1));
        }
        owned.push(mine);
    }
    Ok(owned
        .iter()
        .map(|turns| serde_json::to_vec(turns).expect("a JSON value serializes"))
        .collect())
}

/// A whole chat list as an Anthropic Messages request body:
/// `{"system": [text blocks], "messages": [...]}` (`system` left out when
/// there is none). Every system (or developer) message is lifted into
/// `system`, a text block per text, and the rest is `anthropic`'s messages,
/// merged across the lifted system messages.
pub fn anthropic_body(chat: Vec<Value>) -> Value {
    let (system, rest): (Vec<Value>, Vec<Value>) = chat.into_iter().partition(is_system);
    let lifted: Vec<Value> = system
        .iter()
        .filter_map(|m| anthropic_content(&m["content"]))
        .flat_map(into_blocks)
        .filter(|b| b["type"] == "text")
        .collect();
    let mut body = Map::new();
    if !lifted.is_empty() {
        body.insert("system".into(), Value::Array(lifted));
    }
    body.insert("messages".into(), Value::Array(anthropic(rest)));
    Value::Object(body)
}

fn responses(messages: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or("").to_owned();
        match role.as_str() {
            "assistant" => {
                if let Some(text) = text_of(&message) {
                    out.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    out.push(json!({
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }));
                }
            }
            "tool" => out.push(json!({
                "type": "function_call_output",
                "call_id": message["tool_call_id"],
                "output": message["content"],
            })),
            _ => {
                let content = match &message["content"] {
                    Value::Array(blocks) => Value::Array(
                        blocks
                            .iter()
                            .map(|b| match b["type"].as_str() {
                                Some("image_url") => json!({
                                    "type": "input_image",
                                    "image_url": image_url(b),
                                    "detail": "auto",
                                }),
                                _ => json!({"type": "input_text", "text": b["text"]}),
                            })
                            .collect(),
                    ),
                    other => other.clone(),
                };
                let mut item = Map::new();
                item.insert("type".into(), json!("message"));
                item.insert("role".into(), json!(role));
                item.insert("content".into(), content);
                out.push(Value::Object(item));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step() -> Vec<u8> {
        serde_json::to_vec(&json!([
            {"role": "assistant", "content": "looking", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "sh", "arguments": "ls"}},
                {"id": "c3", "type": "function", "function": {"name": "n", "arguments": "[1]"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
        ]))
        .unwrap()
    }

    #[test]
    fn anthropic_gathers_the_results_of_a_step_into_one_user_message() {
        let got: Value =
            serde_json::from_slice(&reshape(step(), Shape::Anthropic).unwrap()).unwrap();
        assert_eq!(got.as_array().unwrap().len(), 2);
        assert_eq!(got[0]["content"][1]["input"], json!({"p": 1}));
        assert_eq!(got[0]["content"][2]["input"], json!({"arguments": "ls"}));
        assert_eq!(got[0]["content"][3]["input"], json!({"value": [1]}));
        assert_eq!(got[1]["role"], "user");
        assert_eq!(got[1]["content"][1]["tool_use_id"], "c2");
    }

    #[test]
    fn anthropic_merges_consecutive_turns_of_one_role_across_lifted_system_messages() {
        let chat = json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": {"p": 2}}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "developer", "content": "mid"},
            {"role": "user", "content": [{"type": "text", "text": "next"}, {"type": "text", "text": ""}]},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": null},
        ]);
        let body = anthropic_body(serde_json::from_value(chat).unwrap());
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "sys"}, {"type": "text", "text": "mid"}])
        );
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(messages[0]["content"], "task");
        assert_eq!(messages[1]["content"][1]["input"], json!({"p": 2}));
        assert_eq!(
            messages[2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
                {"type": "text", "text": "next"},
            ])
        );
    }

    #[test]
    fn responses_has_one_item_per_call_and_result() {
        let got: Value =
            serde_json::from_slice(&reshape(step(), Shape::Responses).unwrap()).unwrap();
        let kinds: Vec<&str> = got
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "function_call",
                "function_call",
                "function_call",
                "function_call_output",
                "function_call_output"
            ]
        );
    }

    #[test]
    fn an_unknown_shape_is_a_config_error() {
        assert!(matches!(Shape::parse("gemini"), Err(CoreError::Config(_))));
        assert_eq!(
            image_source("data:image/png;base64,AAA")["media_type"],
            "image/png"
        );
    }
}
