//! Anthropic Messages content blocks, request bodies and Claude Code events,
//! by the mapping of `ctxcompact.formats.anthropic` (docs/formats.md):
//! `text` -> text, `thinking` / `redacted_thinking` -> reasoning, `tool_use`
//! -> a tool part, `image` -> file; a `tool_result` completes the tool part of
//! its `tool_use_id` and stays in its turn as a `tool-result` part.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::claude_file::Known;
use super::export::{
    self, complete, info, object, str, str_or_null, text_part, tool_part, without,
};
use super::opencode::{kind, session, SessionRows};
use super::pyjson::{dumps, py_str, truthy, DEFAULT};
use super::types::Problem;

/// What a block does to the tool parts of its session, applied in block
/// order once the whole message has been read (so a bad message changes nothing).
pub(super) enum Op {
    /// A `tool_use` at this part index, under `str(id)`.
    Call(String, usize),
    /// A `tool_result` for `str(tool_use_id)`, block `block` of its content.
    Result {
        call: String,
        failed: bool,
        text: String,
        block: usize,
    },
}

impl Op {
    /// The first `tool_result` of `ops` (one message's) whose call neither
    /// `made` nor an earlier block of the message made: its call id and block.
    pub(super) fn orphan(ops: &[Op], made: impl Fn(&str) -> bool) -> Option<(&str, usize)> {
        let mut here: HashSet<&str> = HashSet::new();
        for op in ops {
            match op {
                Op::Call(call, _) => {
                    here.insert(call);
                }
                Op::Result { call, block, .. } if !here.contains(call.as_str()) && !made(call) => {
                    return Some((call, *block))
                }
                Op::Result { .. } => {}
            }
        }
        None
    }

    /// The error of a `tool_result` at `at` (`messages[i].content[j]`) that
    /// answers no earlier `tool_use`: counted nowhere, so refused.
    pub(super) fn orphan_problem(at: &str, call: &str) -> Problem {
        Problem::new(format!(
            "{at} holds the tool_result of tool_use_id {call:?}, which no earlier message called"
        ))
    }
}

/// The messages of one session so far, and its tool parts by call id.
pub struct Turns {
    pub session_id: String,
    pub messages: Vec<Value>,
    calls: HashMap<String, (usize, usize)>,
}

impl Turns {
    pub fn new(session_id: String) -> Self {
        Turns {
            session_id,
            messages: Vec::new(),
            calls: HashMap::new(),
        }
    }

    fn push(&mut self, message: Value, ops: Vec<Op>) {
        self.messages.push(message);
        self.apply(self.messages.len() - 1, ops);
    }

    /// Add `parts` to the end of message `index` (their ops' part indexes
    /// already count the parts it had).
    fn extend(&mut self, index: usize, parts: Vec<Value>, ops: Vec<Op>) {
        if let Some(Value::Array(have)) = self.messages[index].get_mut("parts") {
            have.extend(parts);
        }
        self.apply(index, ops);
    }

    fn apply(&mut self, index: usize, ops: Vec<Op>) {
        for op in ops {
            match op {
                Op::Call(call, part) => {
                    self.calls.insert(call, (index, part));
                }
                Op::Result {
                    call, failed, text, ..
                } => {
                    if let Some(&(m, p)) = self.calls.get(&call) {
                        complete(&mut self.messages[m]["parts"][p], failed, text);
                    }
                }
            }
        }
    }
}

/// `str(block.get("text", ""))` for each block of a tool result, joined by lines.
fn result_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b {
                Value::Object(block) => block.get("text").map(py_str).unwrap_or_default(),
                other => py_str(other),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => dumps(other, DEFAULT),
    }
}

/// The parts of a message's `content` (a string or a list of blocks).
fn parts(mid: &str, content: Option<Value>, what: &str) -> Result<(Vec<Value>, Vec<Op>), Problem> {
    parts_from(mid, 0, content, what)
}

/// `parts`, numbered from `first` (the parts a message already has).
pub(super) fn parts_from(
    mid: &str,
    first: usize,
    content: Option<Value>,
    what: &str,
) -> Result<(Vec<Value>, Vec<Op>), Problem> {
    if let Some(text @ Value::String(_)) = content {
        return Ok((
            vec![text_part(format!("{mid}-p{first:02}"), text, None)],
            Vec::new(),
        ));
    }
    let blocks = export::items(content, &format!("{what}.content"))?;
    let mut out = Vec::with_capacity(blocks.len());
    let mut ops = Vec::new();
    for (j, block) in blocks.into_iter().enumerate() {
        let pid = format!("{mid}-p{:02}", first + j);
        let at = |field: &str| format!("{what}.content[{j}].{field}");
        let Value::Object(b) = block else {
            out.push(object([
                ("id", str(pid)),
                ("type", str("unknown")),
                ("source", object([("raw", block)])),
            ]));
            continue;
        };
        let part = match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = match b.get("text") {
                    None => json!(""),
                    some => str_or_null(some, &at("text"))?,
                };
                let rest = without(&b, &["type", "text", "thinking"]);
                text_part(pid, text, (!rest.is_empty()).then_some(Value::Object(rest)))
            }
            Some(kind @ ("thinking" | "redacted_thinking")) => {
                let text = match b.get("thinking") {
                    None => json!(""),
                    some => str_or_null(some, &at("thinking"))?,
                };
                let mut source = Map::new();
                source.insert("type".into(), str(kind));
                source.extend(without(&b, &["type", "text", "thinking"]));
                object([
                    ("id", str(pid)),
                    ("type", str("reasoning")),
                    ("text", text),
                    ("source", Value::Object(source)),
                ])
            }
            Some("tool_use") => {
                let name = str_or_null(b.get("name"), &at("name"))?;
                let id = str_or_null(b.get("id"), &at("id"))?;
                let input = match b.get("input") {
                    Some(input @ Value::Object(_)) => input.clone(),
                    Some(input) if truthy(input) => {
                        return Err(Problem::new(format!(
                            "{} must be an object, got {}",
                            at("input"),
                            kind(input)
                        )))
                    }
                    _ => json!({}),
                };
                ops.push(Op::Call(py_str(&id), first + out.len()));
                tool_part(pid, id, name, input, Some(Value::Object(b)))
            }
            Some("tool_result") => {
                let call = str_or_null(b.get("tool_use_id"), &at("tool_use_id"))?;
                ops.push(Op::Result {
                    call: py_str(&call),
                    failed: b.get("is_error").is_some_and(truthy),
                    text: result_text(b.get("content")),
                    block: j,
                });
                object([
                    ("id", str(pid)),
                    ("type", str("tool-result")),
                    ("callID", call),
                    ("source", Value::Object(b)),
                ])
            }
            Some("image") => {
                let mime = match b.get("source") {
                    Some(Value::Object(source)) => {
                        str_or_null(source.get("media_type"), &at("source.media_type"))?
                    }
                    Some(source) if truthy(source) => {
                        return Err(Problem::new(format!(
                            "{} must be an object, got {}",
                            at("source"),
                            kind(source)
                        )))
                    }
                    _ => Value::Null,
                };
                // an image block is an image even when it names no media type
                let mime = match mime {
                    Value::String(m) if !m.is_empty() => Value::String(m),
                    _ => str("image/*"),
                };
                // the image's URL on the part (base64 data as a data: URL), as
                // the Python reader: the model view sends it as an image
                let inner = b.get("source");
                let url = match inner.and_then(|s| s.get("type")).and_then(Value::as_str) {
                    Some("base64") => inner
                        .and_then(|s| s.get("data"))
                        .and_then(Value::as_str)
                        .map(|data| {
                            let media = match inner.and_then(|s| s.get("media_type")) {
                                Some(Value::String(m)) if !m.is_empty() => m.as_str(),
                                _ => "application/octet-stream",
                            };
                            format!("data:{media};base64,{data}")
                        }),
                    Some("url") => inner
                        .and_then(|s| s.get("url"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    _ => None,
                };
                let mut part = object([("id", str(pid)), ("type", str("file")), ("mime", mime)]);
                if let (Some(url), Value::Object(p)) = (url, &mut part) {
                    p.insert("url".into(), str(url));
                }
                part["source"] = Value::Object(b);
                part
            }
            _ => {
                let kind = match b.get("type") {
                    Some(t) if truthy(t) => py_str(t),
                    _ => "unknown".to_owned(),
                };
                object([
                    ("id", str(pid)),
                    ("type", str(kind)),
                    ("source", Value::Object(b)),
                ])
            }
        };
        out.push(part);
    }
    Ok((out, ops))
}

/// A Messages API request body per line: `{"system"?, "messages": [...], ...}`.
pub fn request(value: Value, session_id: &str) -> Result<SessionRows, Problem> {
    let fail = |p: Problem| p.session(session_id);
    let Value::Object(mut body) = value else {
        return Err(fail(Problem::new(format!(
            "an Anthropic request must be an object, got {}",
            kind(&value)
        ))));
    };
    let Some(Value::Array(messages)) = body.shift_remove("messages") else {
        return Err(fail(Problem::new(
            "an Anthropic request needs a 'messages' list",
        )));
    };
    let mut turns = Turns::new(session_id.to_owned());
    match body.shift_remove("system") {
        None | Some(Value::Null) => {}
        Some(system) => {
            let sid = format!("{session_id}-system");
            let (parts, ops) = parts(&sid, Some(system), "system").map_err(fail)?;
            if let Some((call, j)) = Op::orphan(&ops, |_| false) {
                let at = format!("system.content[{j}]");
                return Err(fail(Op::orphan_problem(&at, call).message(&sid)));
            }
            let message = export::message(info(&sid, session_id, "system"), Some(parts));
            turns.push(message, ops);
        }
    }
    for (i, m) in messages.into_iter().enumerate() {
        let mid = format!("{session_id}-m{i:06}");
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "assistant") {
            return Err(fail(Problem::new(format!(
                "messages[{i}] is not a user or assistant turn"
            ))));
        }
        let role = role.to_owned();
        let Value::Object(mut m) = m else {
            unreachable!("a message with a role is an object")
        };
        let content = m.shift_remove("content");
        if !matches!(content, Some(Value::String(_) | Value::Array(_))) {
            let got = content.as_ref().map_or("nothing", kind);
            return Err(fail(
                Problem::new(format!(
                    "messages[{i}].content must be a list of blocks or a string, got {got}"
                ))
                .message(&mid),
            ));
        }
        m.shift_remove("role");
        if matches!(content, Some(Value::String(_))) {
            m.insert("content_is_text".into(), Value::Bool(true));
        }
        let mut head = info(&mid, session_id, &role);
        if !m.is_empty() {
            head.insert("source".into(), Value::Object(m));
        }
        let (parts, ops) =
            parts(&mid, content, &format!("messages[{i}]")).map_err(|p| fail(p.message(&mid)))?;
        // a result no earlier tool_use called would be counted nowhere: refused,
        // as a chat list's is (`chat::chat_list`)
        if let Some((call, j)) = Op::orphan(&ops, |c| turns.calls.contains_key(c)) {
            let at = format!("messages[{i}].content[{j}]");
            return Err(fail(Op::orphan_problem(&at, call).message(&mid)));
        }
        turns.push(export::message(head, Some(parts)), ops);
    }
    let mut session_info = Map::new();
    session_info.insert("id".into(), str(session_id));
    if !body.is_empty() {
        session_info.insert("source".into(), Value::Object(body));
    }
    session(object([
        ("info", Value::Object(session_info)),
        ("messages", Value::Array(turns.messages)),
    ]))
}

/// Claude Code events of one session, one message each (`from_claude_code`).
pub struct Events {
    pub turns: Turns,
    /// Messages of the session mapped in earlier windows of its file, and their ids.
    pub base: usize,
    known: Known,
    /// Every message id given in this window: a repeated `uuid` keeps the
    /// positional id, and an id given twice is refused (a positional id can
    /// meet an earlier `uuid` of the same text).
    ids: HashSet<String>,
    /// Events kept in this window (a positional id counts events, merged
    /// ones too, as `from_claude_code` does).
    pub events: usize,
    /// The assistant messages of this window by their API message id
    /// (`message.id`): a later line of the same id adds its blocks to it.
    calls: HashMap<String, usize>,
}

/// The API message id of an assistant event (`message.id`, a non-empty
/// string): Claude Code writes one line per content block of a model call,
/// every line with the call's id (and its usage, repeated).
pub fn call_id(event: &Value) -> Option<&str> {
    let body = event.get("message").filter(|m| m.is_object())?;
    if body.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    body.get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
}

impl Events {
    pub fn new(session_id: String) -> Self {
        Events::resume(session_id, 0, Known::default())
    }

    /// A session continued from earlier windows: `base` messages, their ids.
    pub fn resume(session_id: String, base: usize, known: Known) -> Self {
        Events {
            turns: Turns::new(session_id),
            base,
            known,
            ids: HashSet::new(),
            events: 0,
            calls: HashMap::new(),
        }
    }

    fn has(&self, id: &str) -> bool {
        self.ids.contains(id) || self.known.contains(id)
    }

    /// Every id given so far, for the next window.
    pub fn known_ids(&mut self) -> Known {
        let mut known = std::mem::take(&mut self.known);
        known.extend(self.ids.drain());
        known
    }

    /// Map one event; on error nothing of the session changes. `Ok`: the
    /// index of its message among this window's, and whether the event made
    /// it (`false`: it added its blocks to the message of an earlier line of
    /// the same model call, `call_id`).
    pub fn push(&mut self, event: Value) -> Result<(usize, bool), Problem> {
        let index = self.turns.messages.len();
        if let Some(&at) = call_id(&event).and_then(|id| self.calls.get(id)) {
            self.merge(at, event)?;
            self.events += 1;
            return Ok((at, false));
        }
        let call = call_id(&event).map(str::to_owned);
        self.map(event)?;
        self.events += 1;
        if let Some(call) = call {
            self.calls.insert(call, index);
        }
        Ok((index, true))
    }

    /// The blocks of a later line of a model call, after those of message
    /// `at` (the call's first line): its envelope (uuid, usage, stop reason)
    /// is the first line's, which Claude Code repeats.
    fn merge(&mut self, at: usize, event: Value) -> Result<(), Problem> {
        let message = &self.turns.messages[at];
        let mid = message["info"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let have = message["parts"].as_array().map_or(0, Vec::len);
        let Value::Object(mut event) = event else {
            unreachable!("an event with a call id is an object")
        };
        let Some(Value::Object(mut body)) = event.shift_remove("message") else {
            unreachable!("an event with a call id has a message")
        };
        let (parts, ops) = parts_from(&mid, have, body.shift_remove("content"), "message")
            .map_err(|p| p.message(&mid))?;
        self.turns.extend(at, parts, ops);
        Ok(())
    }

    fn map(&mut self, event: Value) -> Result<(), Problem> {
        let sid = self.turns.session_id.clone();
        let mut mid = format!("{sid}-e{:06}", self.base + self.events);
        if let Some(uuid) = event.get("uuid").filter(|u| event.is_object() && truthy(u)) {
            let uuid = py_str(uuid);
            if !self.has(&uuid) {
                mid = uuid;
            }
        }
        if self.has(&mid) {
            return Err(
                Problem::new(format!("message id {mid:?} appears twice in this session"))
                    .message(&mid),
            );
        }
        let Value::Object(mut event) = event else {
            // JSON that is not an event: kept as it is, never dropped.
            let mut head = info(&mid, &sid, "system");
            head.insert("source".into(), object([("raw", event)]));
            self.ids.insert(mid);
            self.turns.push(export::message(head, None), Vec::new());
            return Ok(());
        };
        let fail = |p: Problem| p.message(&mid);
        if is_title(&event) {
            // a conversation's title for /resume, never sent to the model:
            // kept whole in the event, with no part (as a file-history snapshot)
            let mut head = info(&mid, &sid, "system");
            let source = object([("event", Value::Object(event)), ("text_key", Value::Null)]);
            head.insert("source".into(), source);
            self.ids.insert(mid);
            self.turns
                .push(export::message(head, Some(Vec::new())), Vec::new());
            return Ok(());
        }
        if !matches!(event.get("message"), Some(Value::Object(_))) {
            // summary, system and other events without a message body
            let text = [event.get("summary"), event.get("content")]
                .into_iter()
                .flatten()
                .find(|v| truthy(v))
                .map(py_str)
                .unwrap_or_default();
            let key = event.contains_key("summary").then(|| str("summary"));
            // A system event (a hook's or local command's note, a retry) is
            // shown to the user, never sent to the model: its text is ignored.
            let aside = event.get("type").and_then(Value::as_str) == Some("system");
            event.shift_remove("summary");
            let mut head = info(&mid, &sid, "system");
            head.insert(
                "source".into(),
                object([
                    ("event", Value::Object(event)),
                    ("text_key", key.unwrap_or(Value::Null)),
                ]),
            );
            let parts = if text.is_empty() {
                Vec::new()
            } else {
                let mut part = text_part(format!("{mid}-p00"), Value::String(text), None);
                if let (true, Value::Object(fields)) = (aside, &mut part) {
                    fields.insert("ignored".into(), Value::Bool(true));
                }
                vec![part]
            };
            self.ids.insert(mid.clone());
            self.turns
                .push(export::message(head, Some(parts)), Vec::new());
            return Ok(());
        }
        let Some(Value::Object(mut body)) = event.shift_remove("message") else {
            unreachable!("checked above")
        };
        let content = body.shift_remove("content");
        let assistant = body.get("role").and_then(Value::as_str) == Some("assistant");
        let mut head = info(&mid, &sid, if assistant { "assistant" } else { "user" });
        if assistant {
            let parent = str_or_null(event.get("parentUuid"), "parentUuid").map_err(fail)?;
            let finish =
                str_or_null(body.get("stop_reason"), "message.stop_reason").map_err(fail)?;
            let tokens = usage(body.get("usage")).map_err(fail)?;
            let model = str_or_null(body.get("model"), "message.model").map_err(fail)?;
            head.insert("parentID".into(), parent);
            head.insert("finish".into(), finish);
            head.insert("tokens".into(), tokens);
            head.insert("modelID".into(), model);
        }
        let content_is_text = matches!(content, Some(Value::String(_)));
        let has_content = content.is_some();
        let (parts, ops) = parts(&mid, content, "message").map_err(fail)?;
        head.insert(
            "source".into(),
            object([
                ("event", Value::Object(event)),
                ("message", Value::Object(body)),
                ("content_is_text", Value::Bool(content_is_text)),
                ("has_content", Value::Bool(has_content)),
            ]),
        );
        self.ids.insert(mid);
        self.turns.push(export::message(head, Some(parts)), ops);
        Ok(())
    }
}

/// A `summary` line: a conversation's title (for /resume), never model input.
fn is_title(event: &Map<String, Value>) -> bool {
    event.get("type").and_then(Value::as_str) == Some("summary")
        && !matches!(event.get("message"), Some(Value::Object(_)))
}

/// `TokenUsage` from a Messages `usage` object; null when there is none.
fn usage(value: Option<&Value>) -> Result<Value, Problem> {
    let Some(Value::Object(usage)) = value else {
        return Ok(Value::Null);
    };
    let count = |key: &str| -> Result<Value, Problem> {
        let v = usage.get(key).filter(|v| truthy(v));
        match v.map(token_count) {
            None => Ok(Value::from(0)),
            Some(Some(n)) => Ok(n),
            Some(None) => Err(Problem::new(format!(
                "message.usage.{key} must be a non-negative integer, got {}",
                match v {
                    Some(Value::Number(n)) => n.as_str().to_owned(),
                    Some(other) => kind(other).to_owned(),
                    None => "nothing".to_owned(),
                }
            ))),
        }
    };
    let cache = object([
        ("read", count("cache_read_input_tokens")?),
        ("write", count("cache_creation_input_tokens")?),
    ]);
    Ok(object([
        ("input", count("input_tokens")?),
        ("output", count("output_tokens")?),
        ("cache", cache),
    ]))
}

/// A `NonNegativeInt` as pydantic reads it in lax mode: an integer, an
/// integral float, `true`, or a string holding one of those.
fn token_count(value: &Value) -> Option<Value> {
    let text = match value {
        Value::Bool(true) => return Some(Value::from(1)),
        Value::Number(n) => n.as_str().to_owned(),
        Value::String(s) => s.trim().to_owned(),
        _ => return None,
    };
    let digits = text.strip_prefix('+').unwrap_or(&text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return serde_json::from_str(digits.trim_start_matches('0'))
            .ok()
            .or(Some(Value::from(0)));
    }
    match text.parse::<f64>() {
        // `int(f)`: the exact integer the float holds
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 => {
            serde_json::from_str(&format!("{f:.0}")).ok()
        }
        _ => None,
    }
}
