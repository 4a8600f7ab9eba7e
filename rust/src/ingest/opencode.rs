//! OpenCode session exports (`{"info", "messages": [{"info", "parts"}]}`) to
//! part rows (also `transcript.sessions_to_table`'s, through `sessions.rs`;
//! `scans/reference.py`'s `session_rows` states them in Python):
//! the scan columns are taken out of each object and the rest is kept as
//! JSON. Fields the scans read are type-checked like the pydantic models
//! check them; everything else passes through untouched.

use serde_json::{Map, Value};

use super::pyjson::{dumps, is_integer, COMPACT};
use super::rows::{MessageRow, PartRow, Rows};
use super::types::Problem;

/// One session's rows, checked and ready to append.
pub struct SessionRows {
    pub id: String,
    pub json: String,
    pub messages: Vec<(MessageRow, Vec<PartRow>)>,
}

impl SessionRows {
    /// Append the rows; `session_json` goes on the first one when asked
    /// (a session continued from the previous line has it already).
    pub fn emit(&self, rows: &mut Rows, with_session_json: bool) -> usize {
        let start = rows.len();
        let mut json = with_session_json.then_some(self.json.as_str());
        if self.messages.is_empty() {
            rows.push(&self.id, json, None, None);
        }
        for (message, parts) in &self.messages {
            emit_message(rows, &self.id, json.take(), message, parts);
        }
        rows.len() - start
    }
}

/// Append one message's rows (one placeholder row when it has no parts);
/// `session_json` goes on the first.
pub fn emit_message(
    rows: &mut Rows,
    session_id: &str,
    mut session_json: Option<&str>,
    message: &MessageRow,
    parts: &[PartRow],
) {
    if parts.is_empty() {
        rows.push(session_id, session_json, Some((message, true)), None);
    }
    for (i, part) in parts.iter().enumerate() {
        rows.push(
            session_id,
            session_json.take(),
            Some((message, i == 0)),
            Some(part),
        );
    }
}

fn object(value: Value, what: &str) -> Result<Map<String, Value>, Problem> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(Problem::new(format!(
            "{what} must be a JSON object, got {}",
            kind(&other)
        ))),
    }
}

pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A required string field, left in the map.
fn required_str(map: &Map<String, Value>, key: &str, what: &str) -> Result<String, Problem> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(Problem::new(format!(
            "{what}.{key} must be a string, got {}",
            kind(other)
        ))),
        None => Err(Problem::new(format!("{what} has no {key:?}"))),
    }
}

/// An optional field that must be a string when present and not null.
fn optional_str(
    map: &Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<String>, Problem> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Problem::new(format!(
            "{what}.{key} must be a string or null, got {}",
            kind(other)
        ))),
    }
}

fn present(map: &Map<String, Value>, key: &str) -> bool {
    !matches!(map.get(key), None | Some(Value::Null))
}

/// `session_json` of a session known only by its id (`SessionInfo(id=...)`).
pub fn session_json(id: &str) -> String {
    let mut info = Map::new();
    info.insert("id".into(), Value::String(id.to_owned()));
    dumps(&Value::Object(info), COMPACT)
}

/// A session export.
pub fn session(value: Value) -> Result<SessionRows, Problem> {
    let mut export = object(value, "a session export")?;
    let info = match export.shift_remove("info") {
        Some(Value::Object(info)) => info,
        Some(other) => {
            return Err(Problem::new(format!(
                "session info must be an object, got {}",
                kind(&other)
            )))
        }
        None => {
            return Err(Problem::new(
                "a session export needs \"info\" and \"messages\"",
            ))
        }
    };
    let id = required_str(&info, "id", "info")?;
    let messages = match export.shift_remove("messages") {
        // without this an OpenCode message (`{"info", "parts"}`) reads as an empty session
        None => {
            return Err(
                Problem::new("not an OpenCode session export: no 'messages' list").session(&id),
            )
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(
                Problem::new(format!("messages must be an array, got {}", kind(&other)))
                    .session(&id),
            )
        }
    };
    let json = dumps(&Value::Object(info), COMPACT);
    let mut out = Vec::with_capacity(messages.len());
    for (i, raw) in messages.into_iter().enumerate() {
        let row = message(raw, &format!("messages[{i}]")).map_err(|p| p.session(&id))?;
        out.push(row);
    }
    Ok(SessionRows {
        id,
        json,
        messages: out,
    })
}

/// One message with its parts (`{"info", "parts"}`); `what` names it in errors.
pub fn message(value: Value, what: &str) -> Result<(MessageRow, Vec<PartRow>), Problem> {
    let mut raw = object(value, what)?;
    let info = match raw.shift_remove("info") {
        Some(Value::Object(info)) => info,
        Some(other) => {
            return Err(Problem::new(format!(
                "{what}.info must be an object, got {}",
                kind(&other)
            )))
        }
        None => return Err(Problem::new(format!("{what} has no \"info\""))),
    };
    let id = required_str(&info, "id", &format!("{what}.info"))?;
    let fail = |p: Problem| p.message(&id);
    let role = required_str(&info, "role", &format!("{what}.info")).map_err(fail)?;
    if !matches!(role.as_str(), "user" | "assistant" | "system") {
        return Err(Problem::new(format!(
            "{what}.info.role is {role:?}; an OpenCode message is user, assistant or system"
        ))
        .message(&id));
    }
    let parent_id = optional_str(&info, "parentID", &format!("{what}.info")).map_err(fail)?;
    let row = MessageRow {
        id: id.clone(),
        role,
        parent_id,
        summary: info.get("summary") == Some(&Value::Bool(true)),
        finished: present(&info, "finish"),
        error: present(&info, "error"),
        json: dumps(&Value::Object(info), COMPACT),
    };
    let parts = match raw.shift_remove("parts") {
        None => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Problem::new(format!(
                "{what}.parts must be an array, got {}",
                kind(&other)
            ))
            .message(&id))
        }
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, raw) in parts.into_iter().enumerate() {
        out.push(part(raw, &format!("{what}.parts[{j}]")).map_err(fail)?);
    }
    Ok((row, out))
}

fn part(value: Value, what: &str) -> Result<PartRow, Problem> {
    let mut rest = object(value, what)?;
    let id = required_str(&rest, "id", what)?;
    let kind_ = required_str(&rest, "type", what)?;
    rest.shift_remove("id");
    rest.shift_remove("type");
    let mut row = PartRow {
        id,
        kind: kind_,
        ..Default::default()
    };
    for key in ["text", "tool"] {
        optional_str(&rest, key, what)?;
    }
    if matches!(row.kind.as_str(), "text" | "reasoning") {
        if let Some(Value::String(_)) = rest.get("text") {
            if let Some(Value::String(text)) = rest.shift_remove("text") {
                row.output = Some(text);
            }
        }
    }
    match rest.get("auto") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(auto)) => {
            if row.kind == "compaction" {
                row.auto = Some(*auto);
                rest.shift_remove("auto");
            }
        }
        Some(other) => {
            return Err(Problem::new(format!(
                "{what}.auto must be a boolean or null, got {}",
                kind(other)
            )))
        }
    }
    if row.kind == "tool" {
        if let Some(Value::String(_)) = rest.get("tool") {
            if let Some(Value::String(tool)) = rest.shift_remove("tool") {
                row.tool = Some(tool);
            }
        }
        match rest.get_mut("state") {
            None | Some(Value::Null) => {}
            Some(Value::Object(state)) => tool_state(state, &mut row, &format!("{what}.state"))?,
            Some(other) => {
                return Err(Problem::new(format!(
                    "{what}.state must be an object or null, got {}",
                    kind(other)
                )))
            }
        }
    }
    row.json = dumps(&Value::Object(rest), COMPACT);
    Ok(row)
}

/// Take status, input, the output the model sees and `time.compacted` out of a tool state.
fn tool_state(
    state: &mut Map<String, Value>,
    row: &mut PartRow,
    what: &str,
) -> Result<(), Problem> {
    let status = required_str(state, "status", what)?;
    if !matches!(
        status.as_str(),
        "pending" | "running" | "completed" | "error"
    ) {
        return Err(Problem::new(format!(
            "{what}.status is {status:?}; one of pending, running, completed, error"
        )));
    }
    for key in ["output", "error"] {
        optional_str(state, key, what)?;
    }
    state.shift_remove("status");
    match state.get("input") {
        None | Some(Value::Null) => {}
        Some(input @ Value::Object(_)) => {
            row.input = Some(dumps(input, COMPACT));
            state.shift_remove("input");
        }
        Some(other) => {
            return Err(Problem::new(format!(
                "{what}.input must be an object or null, got {}",
                kind(other)
            )))
        }
    }
    // The model sees the output of a completed tool and the error of a failed one.
    let field = if status == "completed" {
        "output"
    } else {
        "error"
    };
    if let Some(Value::String(_)) = state.get(field) {
        if let Some(Value::String(text)) = state.shift_remove(field) {
            row.output = Some(text);
        }
    }
    match state.get_mut("time") {
        None | Some(Value::Null) => {}
        Some(Value::Object(time)) => match time.get("compacted") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if is_integer(n) && n.as_i64().is_some() => {
                row.compacted_at = n.as_i64();
                time.shift_remove("compacted");
            }
            Some(other) => {
                return Err(Problem::new(format!(
                    "{what}.time.compacted must be an integer ms timestamp, got {}",
                    match other {
                        Value::Number(n) => n.as_str().to_owned(),
                        other => kind(other).to_owned(),
                    }
                )))
            }
        },
        Some(other) => {
            return Err(Problem::new(format!(
                "{what}.time must be an object or null, got {}",
                kind(other)
            )))
        }
    }
    row.status = Some(status);
    Ok(())
}
