//! OpenAI Responses items (`message`, `function_call`, `function_call_output`,
//! `reasoning`) to an OpenCode export, by the mapping of
//! `ctxcompact.formats.responses.from_openai_responses`: one message per
//! item; an output completes the tool part of its `call_id` and stays in
//! place as a `tool-result` part; unknown items are kept whole.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::chat::call_state;
use super::export::{self, complete, info, object, str, str_or_null, text_part, tool_part};
use super::opencode::{kind, session, SessionRows};
use super::pyjson::{dumps, py_str, truthy, DEFAULT};
use super::types::Problem;
use super::usage::{openai_usage, Api};

/// A line: the item list, or a request body `{"input": [...], ...}`.
pub fn line(value: Value, session_id: &str) -> Result<SessionRows, Problem> {
    let items = match value {
        Value::Object(mut body) => body.shift_remove("input"),
        other => Some(other),
    };
    let Some(Value::Array(items)) = items else {
        return Err(
            Problem::new("OpenAI Responses input must be a list of items").session(session_id),
        );
    };
    let messages = from_items(items, session_id).map_err(|p| p.session(session_id))?;
    let head = object([("id", str(session_id))]);
    session(object([
        ("info", head),
        ("messages", Value::Array(messages)),
    ]))
}

/// Items of another format are refused: each is an object with a `type`
/// string or a `role`, and one at least is an item this reader maps (unknown
/// item types are kept, so the type alone proves nothing).
fn check_items(items: &[Value]) -> Result<(), Problem> {
    let mut known = items.is_empty();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(item) = item else {
            return Err(Problem::new(format!("item {i} is not an object")));
        };
        let kind_ = match item.get("type") {
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => None,
            None if item.contains_key("role") => Some("message"),
            None => None,
        };
        if kind_.is_none() && !item.contains_key("role") {
            return Err(Problem::new(format!(
                "not an OpenAI Responses item: item {i} has no 'type' or 'role'"
            )));
        }
        known |= matches!(
            kind_,
            Some("message" | "function_call" | "function_call_output" | "reasoning")
        );
    }
    if known {
        Ok(())
    } else {
        Err(Problem::new(
            "not OpenAI Responses input: no item is a message, function_call, \
             function_call_output or reasoning",
        ))
    }
}

fn from_items(items: Vec<Value>, sid: &str) -> Result<Vec<Value>, Problem> {
    check_items(&items)?;
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    let mut calls: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.into_iter().enumerate() {
        let at = |field: &str| format!("item {i}: {field}");
        let Value::Object(item) = item else {
            return Err(Problem::new(format!("item {i} is not an object")));
        };
        let mid = format!("{sid}-i{i:06}");
        // a logged reply's usage on an item of it, kept in the item too
        let tokens = openai_usage(item.get("usage"), &at("usage"), Api::Responses)
            .map_err(|p| p.message(&mid))?;
        let assistant = |mut head: Map<String, Value>| {
            if !tokens.is_null() {
                head.insert("tokens".into(), tokens.clone());
            }
            head
        };
        let kind_ = match item.get("type") {
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => None,
            None => item.contains_key("role").then_some("message"),
        };
        match kind_ {
            Some("message") => {
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("user") => "user",
                    Some("assistant") => "assistant",
                    Some("system" | "developer") => "system",
                    _ => {
                        let raw = item.get("role").map_or("None".into(), py_str);
                        return Err(
                            Problem::new(format!("item {i} has an unknown role {raw:?}"))
                                .message(&mid),
                        );
                    }
                };
                let mut rest = item;
                let content = rest.shift_remove("content");
                let is_text = matches!(content, Some(Value::String(_)));
                rest.insert("content_is_text".into(), Value::Bool(is_text));
                let parts = blocks(&mid, content, i).map_err(|p| p.message(&mid))?;
                let mut head = info(&mid, sid, role);
                if role == "assistant" {
                    head = assistant(head);
                }
                head.insert("source".into(), Value::Object(rest));
                out.push(export::message(head, Some(parts)));
            }
            Some("function_call") => {
                // a falsy value is no arguments, as in the Python reader
                let raw = item.get("arguments").filter(|raw| truthy(raw));
                let (input, metadata) = call_state(raw);
                let name =
                    str_or_null(item.get("name"), &at("name")).map_err(|p| p.message(&mid))?;
                let call_id = str_or_null(item.get("call_id"), &at("call_id"))
                    .map_err(|p| p.message(&mid))?;
                calls.insert(py_str(&call_id), out.len());
                let mut part = tool_part(
                    format!("{mid}-t00"),
                    call_id,
                    name,
                    input,
                    Some(Value::Object(item)),
                );
                if let Some(metadata) = metadata {
                    part["state"]["metadata"] = metadata;
                }
                out.push(export::message(
                    assistant(info(&mid, sid, "assistant")),
                    Some(vec![part]),
                ));
            }
            Some("function_call_output") => {
                let call_id = str_or_null(item.get("call_id"), &at("call_id"))
                    .map_err(|p| p.message(&mid))?;
                if let Some(&m) = calls.get(&py_str(&call_id)) {
                    let text = match item.get("output") {
                        Some(Value::String(text)) => text.clone(),
                        other => dumps(other.unwrap_or(&Value::Null), DEFAULT),
                    };
                    complete(&mut out[m]["parts"][0], false, text);
                }
                let part = object([
                    ("id", str(format!("{mid}-p00"))),
                    ("type", str("tool-result")),
                    ("callID", call_id),
                    ("source", Value::Object(item)),
                ]);
                out.push(export::message(info(&mid, sid, "user"), Some(vec![part])));
            }
            Some("reasoning") => {
                let mut texts = Vec::new();
                let summary = export::items(item.get("summary").cloned(), &at("summary"))
                    .map_err(|p| p.message(&mid))?;
                for (j, s) in summary.iter().enumerate() {
                    match s.get("text") {
                        _ if !s.is_object() => {
                            return Err(Problem::new(format!(
                                "{} must be an object",
                                at(&format!("summary[{j}]"))
                            ))
                            .message(&mid))
                        }
                        None => texts.push(String::new()),
                        Some(Value::String(t)) => texts.push(t.clone()),
                        Some(other) => {
                            return Err(Problem::new(format!(
                                "{} must be a string, got {}",
                                at(&format!("summary[{j}].text")),
                                kind(other)
                            ))
                            .message(&mid))
                        }
                    }
                }
                let part = object([
                    ("id", str(format!("{mid}-p00"))),
                    ("type", str("reasoning")),
                    ("text", str(texts.join("\n"))),
                    ("source", Value::Object(item)),
                ]);
                out.push(export::message(
                    assistant(info(&mid, sid, "assistant")),
                    Some(vec![part]),
                ));
            }
            _ => {
                // An item type this version does not know: kept, not sent to models.
                let mut head = info(&mid, sid, "system");
                head.insert("source".into(), object([("raw", Value::Object(item))]));
                out.push(export::message(head, None));
            }
        }
    }
    Ok(out)
}

/// A message's content: a string, or blocks (`text` ones become text parts,
/// the rest file parts keeping the block).
fn blocks(mid: &str, content: Option<Value>, i: usize) -> Result<Vec<Value>, Problem> {
    if let Some(text @ Value::String(_)) = content {
        return Ok(vec![text_part(format!("{mid}-p00"), text, None)]);
    }
    let what = format!("item {i}: content");
    let mut parts = Vec::new();
    for (j, block) in export::items(content, &what)?.into_iter().enumerate() {
        let pid = format!("{mid}-p{j:02}");
        let Value::Object(mut block) = block else {
            return Err(Problem::new(format!(
                "{what}[{j}] must be an object, got {}",
                kind(&block)
            )));
        };
        match block.shift_remove("text") {
            Some(text) => {
                let text = str_or_null(Some(&text), &format!("{what}[{j}].text"))?;
                parts.push(text_part(pid, text, Some(Value::Object(block))));
            }
            None => parts.push(object([
                ("id", str(pid)),
                ("type", str("file")),
                ("source", Value::Object(block)),
            ])),
        }
    }
    Ok(parts)
}
