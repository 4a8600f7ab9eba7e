//! The model input in the Anthropic Messages and OpenAI Responses shapes,
//! converted from the chat shape `view::render_chat` renders, so that the
//! three shapes carry the same per-message decisions (placeholders, cut
//! outputs, cleared inputs, the pivot, pins) and never disagree on what is
//! shown: only the envelope differs.
//!
//! Per stored message, one JSON array, as in the chat shape:
//! - Anthropic: a `system` message stays `{"role":"system","content":..}`
//!   (the caller lifts it into the request's `system`); a user message is
//!   `user` with a string or `text`/`image` blocks (a `data:` URL as a
//!   base64 `source`, any other as a `url` source); an assistant step is
//!   `assistant` with `text` then `tool_use` {id,name,input} blocks, then
//!   ONE `user` message gathering its `tool_result` {tool_use_id,content}
//!   blocks and its text-protocol results as `text` blocks.
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

fn anthropic(messages: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let mut after_step = false;
    for message in messages {
        match message["role"].as_str().unwrap_or("") {
            "system" => out.push(message),
            "assistant" => {
                after_step = true;
                let mut blocks = Vec::new();
                if let Some(text) = text_of(&message) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": input_object(arguments),
                    }));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            "tool" => {
                after_step = true;
                results.push(json!({
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
                }))
            }
            // user: after an assistant step, a text-protocol result
            _ if after_step => {
                if let Some(text) = text_of(&message) {
                    results.push(json!({"type": "text", "text": text}));
                }
            }
            _ => out.push(match &message["content"] {
                Value::Array(blocks) => {
                    let blocks: Vec<Value> = blocks
                        .iter()
                        .map(|b| match b["type"].as_str() {
                            Some("image_url") => {
                                json!({"type": "image", "source": image_source(image_url(b))})
                            }
                            _ => json!({"type": "text", "text": b["text"]}),
                        })
                        .collect();
                    json!({"role": "user", "content": blocks})
                }
                _ => message,
            }),
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    out
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
