//! Builders for the OpenCode export values the foreign-format mappers make.
//!
//! The Python adapters build pydantic models and dump them with
//! `exclude_unset`, which writes declared fields in declaration order and then
//! the extras (`source`). The `*_json` columns keep key order, so these
//! builders insert keys in that same order.

use serde_json::{Map, Value};

use super::opencode::kind;
use super::types::Problem;

/// A message's `info`: `{"id", "sessionID", "role"}` (the first declared fields).
pub fn info(id: &str, session_id: &str, role: &str) -> Map<String, Value> {
    let mut info = Map::new();
    info.insert("id".into(), Value::String(id.to_owned()));
    info.insert("sessionID".into(), Value::String(session_id.to_owned()));
    info.insert("role".into(), Value::String(role.to_owned()));
    info
}

/// `{"info", "parts"}`; `None` leaves `parts` unset, as a model built without it.
pub fn message(info: Map<String, Value>, parts: Option<Vec<Value>>) -> Value {
    let mut message = Map::new();
    message.insert("info".into(), Value::Object(info));
    if let Some(parts) = parts {
        message.insert("parts".into(), Value::Array(parts));
    }
    Value::Object(message)
}

/// A JSON object of owned values, in order. (`json!` would deep-copy every
/// value through `Serialize`, which costs more than the rest of the mapping.)
pub fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// `object`, with `source` last when there is one.
pub fn with_source<const N: usize>(pairs: [(&str, Value); N], source: Option<Value>) -> Value {
    let mut value = object(pairs);
    if let (Some(source), Value::Object(map)) = (source, &mut value) {
        map.insert("source".into(), source);
    }
    value
}

pub fn str(text: impl Into<String>) -> Value {
    Value::String(text.into())
}

pub fn text_part(id: String, text: Value, source: Option<Value>) -> Value {
    with_source(
        [("id", str(id)), ("type", str("text")), ("text", text)],
        source,
    )
}

/// A tool part waiting for its result (`Part(id, type, callID, tool, state, source)`).
pub fn tool_part(
    id: String,
    call_id: Value,
    tool: Value,
    input: Value,
    source: Option<Value>,
) -> Value {
    let state = object([("status", str("pending")), ("input", input)]);
    let pairs = [
        ("id", str(id)),
        ("type", str("tool")),
        ("callID", call_id),
        ("tool", tool),
        ("state", state),
    ];
    with_source(pairs, source)
}

/// Complete a tool part with its result: `status` and `output` (or `error`
/// when it failed), keeping the declared order status, input, output, error.
pub fn complete(part: &mut Value, failed: bool, text: String) {
    let Some(Value::Object(state)) = part.get_mut("state") else {
        return;
    };
    let (status, field) = if failed {
        ("error", "error")
    } else {
        ("completed", "output")
    };
    state.insert("status".into(), str(status));
    state.insert(field.into(), Value::String(text));
    if let Some(error) = state.shift_remove("error") {
        state.insert("error".into(), error);
    }
}

/// A `str | None` model field: the value (null when absent), or why it does not fit.
pub fn str_or_null(value: Option<&Value>, what: &str) -> Result<Value, Problem> {
    match value {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(text @ Value::String(_)) => Ok(text.clone()),
        Some(other) => Err(Problem::new(format!(
            "{what} must be a string or null, got {}",
            kind(other)
        ))),
    }
}

/// `map` without `keys`, in order (the adapters' `{k: v ... if k not in keys}`).
pub fn without(map: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What a Python `for x in value` over a JSON value yields: a list's items,
/// an object's keys, a string's characters; other values cannot be iterated.
pub fn iterate(value: Value, what: &str) -> Result<Vec<Value>, Problem> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(map) => Ok(map.into_iter().map(|(k, _)| Value::String(k)).collect()),
        Value::String(text) => Ok(text.chars().map(|c| Value::String(c.into())).collect()),
        other => Err(Problem::new(format!(
            "{what} must be a list, got {}",
            kind(&other)
        ))),
    }
}

/// The items of a list the adapters iterate as `x or []` (falsy is empty).
pub fn items(value: Option<Value>, what: &str) -> Result<Vec<Value>, Problem> {
    match value {
        Some(v) if super::pyjson::truthy(&v) => iterate(v, what),
        _ => Ok(Vec::new()),
    }
}
