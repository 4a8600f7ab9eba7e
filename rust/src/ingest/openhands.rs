//! OpenHands event streams to an OpenCode export, by the mapping of
//! `ctxcompact.formats.openhands`: one message per event, each keeping the
//! event under `source`; agent actions with `tool_call_metadata` are tool
//! parts, completed by the observation that answers them (same tool call id,
//! or `cause` = the action's id). Actions without it (the resolver's flat
//! events) pair by event: `cause`, else the oldest unanswered action of the
//! observation's name; an answered one is a tool part after its `thought`.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::export::{
    self, complete, info, object, str, str_or_null, text_part, tool_part, with_source,
};
use super::opencode::{kind, session, SessionRows};
use super::pyjson::{py_str, truthy};
use super::types::Problem;
use super::usage::{openai_usage, Api};

/// A line: a resolver record `{"history": [...], ...}` or a bare event list.
pub fn line(value: Value, session_id: &str) -> Result<SessionRows, Problem> {
    let fail = |what: String| Problem::new(what).session(session_id);
    let (events, source) = match value {
        // The record is kept but its history (the messages hold it), whose
        // place is kept by an empty list (as `from_openhands_output`).
        Value::Object(mut record) => match record.get_mut("history") {
            Some(Value::Array(events)) => (std::mem::take(events), Some(Value::Object(record))),
            _ => return Err(fail(format!("{session_id}: no 'history' list"))),
        },
        bare @ (Value::Array(_) | Value::String(_)) => (export::iterate(bare, "the line")?, None),
        other => {
            return Err(fail(format!(
                "an OpenHands line must be a record or an event list, got {}",
                kind(&other)
            )))
        }
    };
    let messages = from_events(events, session_id).map_err(|p| p.session(session_id))?;
    let head = with_source([("id", str(session_id))], source);
    session(object([
        ("info", head),
        ("messages", Value::Array(messages)),
    ]))
}

/// `str(x or "")`.
fn text_of(value: Option<&Value>) -> String {
    value.filter(|v| truthy(v)).map(py_str).unwrap_or_default()
}

/// What an event says: `args.content` when it is non-empty text, else its
/// `message` or `content`.
fn event_text(event: &serde_json::Map<String, Value>) -> String {
    if let Some(Value::String(text)) = event.get("args").and_then(|a| a.get("content")) {
        if !text.is_empty() && event["args"].is_object() {
            return text.clone();
        }
    }
    let message = event.get("message").filter(|v| truthy(v));
    text_of(message.or(event.get("content")))
}

/// Event fields that are bookkeeping, not a call's input (as `ACTION_META`).
const ACTION_META: [&str; 19] = [
    "id",
    "source",
    "timestamp",
    "message",
    "cause",
    "action",
    "thought",
    "tool_call_metadata",
    "llm_metrics",
    "security_risk",
    "action_risk",
    "is_confirmed",
    "confirmation_state",
    "hidden",
    "wait_for_response",
    "images_urls",
    "content",
    "observation",
    "extras",
];

fn metadata(event: &serde_json::Map<String, Value>) -> bool {
    event.get("tool_call_metadata").is_some_and(truthy)
}

/// An agent action without tool_call_metadata that an observation may answer.
fn flat_action(event: &Value) -> bool {
    let Value::Object(event) = event else {
        return false;
    };
    event.contains_key("action")
        && !event.contains_key("observation")
        && !metadata(event)
        && match event.get("source") {
            None => true,
            Some(source) => source.as_str() == Some("agent"),
        }
        && event.get("action").and_then(Value::as_str) != Some("message")
}

/// Observation index -> the flat action index it answers.
fn answered_actions(events: &[Value]) -> HashMap<usize, usize> {
    let mut answers = HashMap::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (i, event) in events.iter().enumerate() {
        if flat_action(event) {
            pending.push(i);
            if let Some(id) = event.get("id").filter(|v| !v.is_null()) {
                by_id.insert(py_str(id), i);
            }
            continue;
        }
        let Value::Object(obs) = event else { continue };
        if !obs.contains_key("observation") || metadata(obs) {
            continue;
        }
        let target = match obs.get("cause").filter(|v| !v.is_null()) {
            Some(cause) => by_id.get(&py_str(cause)).copied(),
            None => {
                let name = obs.get("observation").filter(|v| !v.is_null());
                pending
                    .iter()
                    .copied()
                    .find(|&a| events[a].get("action").filter(|v| !v.is_null()) == name)
            }
        };
        if let Some(at) = target.and_then(|t| pending.iter().position(|&a| a == t)) {
            answers.insert(i, pending.remove(at));
        }
    }
    answers
}

/// A flat action's input: its `args` object, or its own fields minus bookkeeping.
fn flat_input(event: &serde_json::Map<String, Value>) -> Value {
    match event.get("args") {
        Some(args @ Value::Object(_)) => args.clone(),
        _ => Value::Object(
            event
                .iter()
                .filter(|(k, _)| !ACTION_META.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
    }
}

/// The message of one event, keeping it under `source`; an assistant one is
/// finished (`"stop"`).
fn event_message(
    mid: &str,
    sid: &str,
    role: &str,
    event: serde_json::Map<String, Value>,
    parts: Option<Vec<Value>>,
) -> Value {
    let mut head = info(mid, sid, role);
    if role == "assistant" {
        head.insert("finish".into(), str("stop"));
    }
    head.insert("source".into(), object([("event", Value::Object(event))]));
    export::message(head, parts)
}

/// The usage and model of the response an agent action came from, once per
/// response (its tool calls are separate events repeating it): a Chat
/// Completions usage (`usage::openai_usage`).
fn response_usage(
    meta: Option<&serde_json::Map<String, Value>>,
    seen: &mut std::collections::HashSet<String>,
    at: &str,
) -> Result<(Value, Value), Problem> {
    let Some(Value::Object(response)) = meta.and_then(|m| m.get("model_response")) else {
        return Ok((Value::Null, Value::Null));
    };
    if let Some(id) = response.get("id").filter(|v| !v.is_null()) {
        if !seen.insert(py_str(id)) {
            return Ok((Value::Null, Value::Null));
        }
    }
    let model = match response.get("model") {
        Some(Value::String(m)) => str(m.clone()),
        _ => Value::Null,
    };
    let at = format!("{at}.model_response.usage");
    let tokens = openai_usage(response.get("usage"), &at, Api::Chat)?;
    Ok((tokens, model))
}

fn from_events(events: Vec<Value>, sid: &str) -> Result<Vec<Value>, Problem> {
    let answers = answered_actions(&events);
    let mut read = Read {
        out: Vec::with_capacity(events.len()),
        by_call: HashMap::new(),
        by_action: HashMap::new(),
        answered: answers.values().copied().collect(),
        answers,
        flat_parts: HashMap::new(),
        responses: HashSet::new(),
    };
    let mut agent_seen = false;
    for (i, event) in events.into_iter().enumerate() {
        let event = event_of(i, event)?;
        let mid = format!("{sid}-e{i:06}");
        let meta = event
            .get("tool_call_metadata")
            .filter(|m| truthy(m))
            .and_then(Value::as_object);
        let call_id = meta
            .and_then(|m| m.get("tool_call_id"))
            .cloned()
            .unwrap_or(Value::Null);
        if event.contains_key("observation") {
            read.observation(i, &mid, sid, event, &call_id)?;
            continue;
        }
        let out = &mut read.out;
        let sourceless = !event.contains_key("source");
        let is_message = event.get("action").and_then(Value::as_str) == Some("message");
        if read.answered.contains(&i) {
            agent_seen = true;
            let mut parts = Vec::new();
            if let Some(Value::String(thought)) = event.get("thought") {
                if !thought.is_empty() {
                    let text = Value::String(thought.clone());
                    parts.push(text_part(format!("{mid}-p00"), text, None));
                }
            }
            let name = event
                .get("action")
                .filter(|v| truthy(v))
                .map_or_else(|| "tool".to_owned(), py_str);
            let input = flat_input(&event);
            read.flat_parts.insert(i, (out.len(), parts.len()));
            let call = str(format!("{mid}-call"));
            parts.push(tool_part(
                format!("{mid}-t00"),
                call,
                str(name),
                input,
                None,
            ));
            out.push(event_message(&mid, sid, "assistant", event, Some(parts)));
            continue;
        }
        if sourceless && is_message && !agent_seen {
            let text = event_text(&event);
            let part = text_part(format!("{mid}-p00"), Value::String(text), None);
            out.push(event_message(&mid, sid, "user", event, Some(vec![part])));
            continue;
        }
        if sourceless && event.contains_key("action") {
            agent_seen = true;
            let mut text = event_text(&event);
            if text.is_empty() {
                if let Some(Value::String(thought)) = event.get("thought") {
                    text = thought.clone();
                }
            }
            let parts = if text.is_empty() {
                vec![]
            } else {
                vec![text_part(format!("{mid}-p00"), Value::String(text), None)]
            };
            out.push(event_message(&mid, sid, "assistant", event, Some(parts)));
            continue;
        }
        match event.get("source").and_then(Value::as_str) {
            Some("user") => {
                let text = event_text(&event);
                let part = text_part(format!("{mid}-p00"), Value::String(text), None);
                out.push(event_message(&mid, sid, "user", event, Some(vec![part])));
            }
            Some("agent") => {
                agent_seen = true;
                let message = read.agent(i, &mid, sid, event, &call_id)?;
                read.out.push(message);
            }
            _ => {
                out.push(event_message(&mid, sid, "system", event, None));
            }
        }
    }
    Ok(read.out)
}

/// Event `i` as an object, if it is an OpenHands event: one with a
/// `source`, `action` or `observation` and no `role`.
fn event_of(i: usize, event: Value) -> Result<Map<String, Value>, Problem> {
    let Value::Object(event) = event else {
        return Err(Problem::new(format!("event {i} is not an object")));
    };
    // what tells an event from a chat message or another format's record
    if !["source", "action", "observation"]
        .iter()
        .any(|k| event.contains_key(*k))
    {
        return Err(Problem::new(format!(
            "not an openhands event: event {i} has no 'source', 'action' or 'observation' key"
        )));
    }
    if event.contains_key("role") {
        return Err(Problem::new(format!(
            "not an openhands event: event {i} has a 'role' (a chat message?)"
        )));
    }
    Ok(event)
}

/// A session's messages as its events are read, and what later events look
/// up: the tool part (message index) of each call id and action id, the
/// actions answered by observations (`answered_actions`) and their tool
/// parts, the model responses whose usage was counted.
struct Read {
    out: Vec<Value>,
    by_call: HashMap<String, usize>,
    by_action: HashMap<String, usize>,
    answers: HashMap<usize, usize>,
    answered: HashSet<usize>,
    /// flat action index -> (message index, part index) of its tool part
    flat_parts: HashMap<usize, (usize, usize)>,
    responses: HashSet<String>,
}

impl Read {
    /// An observation: it completes the tool part of its action or call,
    /// and stays as a `tool-result` message of its own.
    fn observation(
        &mut self,
        i: usize,
        mid: &str,
        sid: &str,
        event: Map<String, Value>,
        call_id: &Value,
    ) -> Result<(), Problem> {
        let call = str_or_null(
            Some(call_id),
            &format!("event {i}: tool_call_metadata.tool_call_id"),
        )
        .map_err(|p| p.message(mid))?;
        let by_event = self
            .by_call
            .get(&py_str(&call))
            .or_else(|| {
                self.by_action
                    .get(&py_str(event.get("cause").unwrap_or(&Value::Null)))
            })
            .map(|&m| (m, 0));
        let target = match self.answers.get(&i) {
            Some(action) => Some(self.flat_parts[action]),
            None => by_event,
        };
        if let Some((m, p)) = target {
            let failed = event.get("success") == Some(&Value::Bool(false))
                || event.get("observation").and_then(Value::as_str) == Some("error");
            complete(
                &mut self.out[m]["parts"][p],
                failed,
                text_of(event.get("content")),
            );
        }
        let part = object([
            ("id", str(format!("{mid}-p00"))),
            ("type", str("tool-result")),
            ("callID", call),
        ]);
        self.out
            .push(event_message(mid, sid, "user", event, Some(vec![part])));
        Ok(())
    }

    /// An event the agent wrote: a tool call (with the usage of its model
    /// response), or a text.
    fn agent(
        &mut self,
        i: usize,
        mid: &str,
        sid: &str,
        event: Map<String, Value>,
        call_id: &Value,
    ) -> Result<Value, Problem> {
        let meta = event
            .get("tool_call_metadata")
            .filter(|m| truthy(m))
            .and_then(Value::as_object);
        let at = format!("event {i}: tool_call_metadata");
        let (tokens, model) =
            response_usage(meta, &mut self.responses, &at).map_err(|p| p.message(mid))?;
        let mut parts = Vec::new();
        if !call_id.is_null() {
            let call = str_or_null(
                Some(call_id),
                &format!("event {i}: tool_call_metadata.tool_call_id"),
            )
            .map_err(|p| p.message(mid))?;
            let name = [
                meta.and_then(|m| m.get("function_name")),
                event.get("action"),
            ]
            .into_iter()
            .flatten()
            .find(|v| truthy(v))
            .map_or_else(|| "tool".to_owned(), py_str);
            let input = match event.get("args") {
                Some(args @ Value::Object(_)) => args.clone(),
                _ => json!({}),
            };
            self.by_call.insert(py_str(&call), self.out.len());
            self.by_action.insert(
                py_str(event.get("id").unwrap_or(&Value::Null)),
                self.out.len(),
            );
            parts.push(tool_part(
                format!("{mid}-t00"),
                call,
                str(name),
                input,
                None,
            ));
        } else {
            let text = event_text(&event);
            if !text.is_empty() {
                parts.push(text_part(format!("{mid}-p00"), Value::String(text), None));
            }
        }
        let mut message = event_message(mid, sid, "assistant", event, Some(parts));
        if let Some(Value::Object(info)) = message.get_mut("info") {
            // after `finish`, before `source`, as the Python adapter orders them
            let source = info.shift_remove("source");
            if !tokens.is_null() {
                info.insert("tokens".into(), tokens);
            }
            if !model.is_null() {
                info.insert("modelID".into(), model);
            }
            if let Some(source) = source {
                info.insert("source".into(), source);
            }
        }
        Ok(message)
    }
}
