//! OpenAI Chat Completions message lists to OpenCode session exports, by the
//! mapping of `ctxcompact.formats.chat.from_openai_chat` (docs/formats.md):
//! the export is then turned into rows by `opencode::session`, so both
//! formats share one set of row rules.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::anthropic::{self, Op};
use super::export::{
    complete, info, iterate, message, object, str, text_part, tool_part, with_source, without,
};
use super::observations;
use super::opencode::{kind, session, SessionRows};
use super::pyjson::{dumps, py_str, truthy, DEFAULT};
use super::types::Problem;
use super::usage::{openai_usage, Api};

/// The key of a tool part's `result_source` that holds the chat index of
/// the message its result came from, in the chat-list mode
/// (`Format::ChatList`): the mapper puts a `tool_result` block's there; the
/// caller tags each `tool` message with its own (a key the mapper keeps in
/// `result_source`, so the fast path reads the message too).
pub const AT: &str = "ctxcompact_at";

/// How a chat list is read: as an `openai-chat` file (Anthropic blocks
/// refused), or as the list a runtime holds (`chat_list`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    File,
    List,
}

/// A JSONL line: `{"id" | "session_id", "messages": [...], ...}` or a bare message list.
/// `fallback_id` names sessions without an id (`<file stem>:<line>`).
pub fn line(value: Value, fallback_id: &str) -> Result<SessionRows, Problem> {
    read_line(value, fallback_id, Mode::File)
}

/// A chat list as `line` reads it, and messages holding Anthropic content
/// blocks (`text`, `tool_use`, `tool_result`, `thinking`,
/// `redacted_thinking`, `image`, `document`) read as the `anthropic` format
/// reads them: a `tool_use` is a tool part, a `tool_result` completes it and
/// stays in its turn as a `tool-result` part, its chat index in the tool
/// part's `result_source` under `AT` (as the caller tags a `tool` message),
/// so counts and fates map back to the caller's list. Another block in such a message, or a malformed
/// one, is refused, naming the message and the block.
pub fn chat_list(value: Value, fallback_id: &str) -> Result<SessionRows, Problem> {
    read_line(value, fallback_id, Mode::List)
}

fn read_line(value: Value, fallback_id: &str, mode: Mode) -> Result<SessionRows, Problem> {
    match value {
        bare @ (Value::Array(_) | Value::String(_)) => {
            let messages = iterate(bare, "the line")?;
            session(from_messages(messages, fallback_id.into(), None, mode)?)
        }
        Value::Object(mut obj) => {
            // a truthy "id" names the session, else "session_id"; when "id" does,
            // "session_id" is the document's own key, kept in its record
            let by_id = obj.get("id").is_some_and(truthy);
            let id = [obj.get("id"), obj.get("session_id")]
                .into_iter()
                .flatten()
                .find(|v| truthy(v))
                .map(py_str)
                .unwrap_or_else(|| fallback_id.to_owned());
            let messages = match obj.shift_remove("messages") {
                Some(items) => iterate(items, "messages").map_err(|p| p.session(&id))?,
                None => {
                    return Err(
                        Problem::new("an OpenAI chat session needs \"messages\"").session(&id)
                    )
                }
            };
            if obj.contains_key("system") {
                return Err(Problem::new(
                    "not an OpenAI chat session: it has a top-level 'system' (an Anthropic request?)",
                )
                .session(&id));
            }
            obj.shift_remove("id");
            if !by_id {
                obj.shift_remove("session_id");
            }
            let source = (!obj.is_empty()).then_some(Value::Object(obj));
            session(from_messages(messages, id, source, mode)?)
        }
        other => Err(Problem::new(format!(
            "an OpenAI chat line must be an object or an array, got {}",
            kind(&other)
        ))),
    }
}

fn content_parts(mid: &str, content: Option<Value>, at: &str) -> Result<Vec<Value>, Problem> {
    let blocks = match content {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(text @ Value::String(_)) => {
            return Ok(vec![text_part(format!("{mid}-p00"), text, None)])
        }
        Some(other) => iterate(other, &format!("{at}.content"))?,
    };
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.into_iter().enumerate() {
        let pid = format!("{mid}-p{j:02}");
        let Value::Object(mut b) = block else {
            return Err(Problem::new(format!(
                "{at}.content[{j}] must be an object, got {}",
                kind(&block)
            )));
        };
        match b.get("type").and_then(Value::as_str) {
            Some(t @ ("tool_use" | "tool_result" | "thinking" | "redacted_thinking")) => {
                // an Anthropic request read in the wrong format: its calls would be lost
                return Err(Problem::new(format!(
                    "not an OpenAI chat message: {mid} content[{j}] is an Anthropic '{t}' block"
                )));
            }
            Some("text") => {
                let text = b.shift_remove("text").unwrap_or_else(|| json!(""));
                if !(text.is_string() || text.is_null()) {
                    return Err(Problem::new(format!(
                        "{at}.content[{j}].text must be a string or null"
                    )));
                }
                b.shift_remove("type");
                parts.push(text_part(
                    pid,
                    text,
                    (!b.is_empty()).then_some(Value::Object(b)),
                ));
            }
            Some("image_url") => {
                let url = match b.get("image_url") {
                    Some(image) if truthy(image) && !image.is_object() => {
                        return Err(Problem::new(format!(
                            "{at}.content[{j}].image_url must be an object, got {}",
                            kind(image)
                        )))
                    }
                    Some(image) if truthy(image) => match image.get("url") {
                        None => json!(""),
                        Some(url @ (Value::String(_) | Value::Null)) => url.clone(),
                        Some(_) => {
                            return Err(Problem::new(format!(
                                "{at}.content[{j}].image_url.url must be a string"
                            )))
                        }
                    },
                    _ => json!(""),
                };
                parts.push(object([
                    ("id", str(pid)),
                    ("type", str("file")),
                    ("mime", str("image/*")),
                    ("url", url),
                    ("source", Value::Object(b)),
                ]));
            }
            // another block (a refusal, a Responses input_text...) is kept whole,
            // and its text, if it has one, is the part's text (`block_text_key`)
            kind => {
                let key = match b.get("refusal") {
                    Some(Value::String(_)) if kind == Some("refusal") => "refusal",
                    _ => "text",
                };
                let text = match b.get(key) {
                    Some(text @ Value::String(_)) => text.clone(),
                    _ => json!(""),
                };
                parts.push(text_part(pid, text, Some(Value::Object(b))));
            }
        }
    }
    Ok(parts)
}

/// `(tool input, why the arguments could not be read)` of a call's
/// `arguments`, as the Python `call_input`: the object they hold, `{}` when
/// they are missing, null or blank; anything else (an array, a string, JSON
/// cut off by a `max_tokens` stop) is `{}` with the reason, kept with the raw
/// arguments in the tool state's `metadata` (`call_state`).
pub fn call_input(raw: Option<&Value>) -> (Value, Option<String>) {
    let text = match raw {
        None | Some(Value::Null) => return (json!({}), None),
        Some(obj @ Value::Object(_)) => return (obj.clone(), None),
        Some(Value::String(text)) if text.trim().is_empty() => return (json!({}), None),
        Some(Value::String(text)) => text,
        Some(other) => {
            let why = format!(
                "the arguments are {}, not a string holding a JSON object",
                kind(other)
            );
            return (json!({}), Some(why));
        }
    };
    match serde_json::from_str::<Value>(text) {
        Ok(parsed @ Value::Object(_)) => (parsed, None),
        Ok(parsed) => (
            json!({}),
            Some(format!(
                "the arguments hold {}, not a JSON object",
                kind(&parsed)
            )),
        ),
        Err(_) => (
            json!({}),
            Some("the arguments are not valid JSON (cut off?)".to_owned()),
        ),
    }
}

/// `(tool input, state metadata)` of a call's `arguments`: the metadata is
/// `{"arguments": raw, "error": why}` when they could not be read.
pub fn call_state(raw: Option<&Value>) -> (Value, Option<Value>) {
    let (input, why) = call_input(raw);
    let metadata = why.map(|why| {
        object([
            ("arguments", raw.cloned().unwrap_or(Value::Null)),
            ("error", str(why)),
        ])
    });
    (input, metadata)
}

/// `(tool input, state metadata, what to keep to write the raw arguments back exactly)`.
fn arguments(raw: Option<&Value>) -> (Value, Option<Value>, Map<String, Value>) {
    let (input, metadata) = call_state(raw);
    let exact = metadata.is_none()
        && matches!(raw, Some(Value::String(text)) if dumps(&input, DEFAULT) == *text);
    let mut keep = Map::new();
    if !exact {
        keep.insert("arguments".into(), raw.cloned().unwrap_or(Value::Null));
    }
    (input, metadata, keep)
}

/// The keys of an OpenAI chat message (`CHAT_KEYS` in formats/chat.py).
const CHAT_KEYS: &[&str] = &[
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "refusal",
    "audio",
    "function_call",
];

/// A SWE-agent history message with its keys that are not chat keys under
/// `SWE_AGENT_KEY`, in the place of the first of them (as `_nest_agent_keys`),
/// so the chat writer leaves them out and the SWE-agent writer puts them back.
fn nest_agent_keys(message: Map<String, Value>) -> Map<String, Value> {
    if message.keys().all(|k| CHAT_KEYS.contains(&k.as_str())) {
        return message;
    }
    let mut out = Map::with_capacity(message.len());
    let mut agent = Map::new();
    for (key, value) in message {
        if CHAT_KEYS.contains(&key.as_str()) {
            out.insert(key, value);
        } else {
            if agent.is_empty() {
                out.insert(observations::SWE_AGENT_KEY.into(), Value::Null);
            }
            agent.insert(key, value);
        }
    }
    out.insert(observations::SWE_AGENT_KEY.into(), Value::Object(agent));
    out
}

/// A SWE-agent trajectory per line (`from_swe_agent`): `history` is chat
/// messages; a tool result names its call in `tool_call_ids` when it has no
/// `tool_call_id`.
pub fn swe_agent(value: Value, session_id: &str) -> Result<SessionRows, Problem> {
    let fail = |what: String| Problem::new(what).session(session_id);
    let Value::Object(mut traj) = value else {
        return Err(fail(format!(
            "a trajectory must be an object, got {}",
            kind(&value)
        )));
    };
    let Some(Value::Array(history)) = traj.shift_remove("history") else {
        return Err(fail("a .traj needs a 'history' list".into()));
    };
    let mut messages = Vec::with_capacity(history.len());
    for (i, m) in history.into_iter().enumerate() {
        let Value::Object(mut m) = m else {
            return Err(fail(format!(
                "history[{i}] must be an object, got {}",
                kind(&m)
            )));
        };
        if m.get("role").and_then(Value::as_str) == Some("tool") && !m.contains_key("tool_call_id")
        {
            let first = match m.get("tool_call_ids") {
                Some(ids) if !truthy(ids) => None,
                None => None,
                Some(Value::Array(ids)) => ids.first().cloned(),
                Some(Value::String(ids)) => ids.chars().next().map(|c| json!(c.to_string())),
                Some(other) => {
                    return Err(fail(format!(
                        "history[{i}].tool_call_ids must be a list, got {}",
                        kind(other)
                    )))
                }
            };
            if let Some(first) = first {
                m.insert("tool_call_id".into(), first);
            }
        }
        messages.push(Value::Object(nest_agent_keys(m)));
    }
    let traj = Some(Value::Object(traj));
    let mut value = from_messages(messages, session_id.to_owned(), traj, Mode::File)?;
    observations::pair(&mut value, observations::swe_agent_command);
    session(value)
}

/// A mini-swe-agent trajectory per line (`from_mini_swe_agent`): a message
/// list, or `{"messages": [...], ...}` with the rest kept as the session's
/// source; each command block and its observation become a tool part.
pub fn mini_swe_agent(value: Value, session_id: &str) -> Result<SessionRows, Problem> {
    let (messages, source) = match value {
        Value::Object(traj) if traj.contains_key("system") => return Err(Problem::new(
            "not a mini-swe-agent trajectory: it has a top-level 'system' (an Anthropic request?)",
        )
        .session(session_id)),
        Value::Object(mut traj) => match traj.shift_remove("messages") {
            Some(Value::Array(messages)) => {
                (messages, (!traj.is_empty()).then_some(Value::Object(traj)))
            }
            _ => {
                return Err(
                    Problem::new("a mini-swe-agent trajectory needs a 'messages' list")
                        .session(session_id),
                )
            }
        },
        other => (iterate(other, "a mini-swe-agent trajectory")?, None),
    };
    let mut value = from_messages(messages, session_id.to_owned(), source, Mode::File)?;
    observations::pair(&mut value, observations::mini_swe_agent_command);
    session(value)
}

/// tau-bench results per line (`from_tau_bench`): a list of runs, one session
/// each, named `tau-<task_id>-<trial>`.
pub fn tau_bench(value: Value) -> Result<Vec<SessionRows>, Problem> {
    let runs = iterate(value, "a tau-bench line (a list of runs)")?;
    let mut out = Vec::with_capacity(runs.len());
    for (i, run) in runs.into_iter().enumerate() {
        let Value::Object(mut run) = run else {
            return Err(Problem::new(format!("run {i} has no 'traj'")));
        };
        let task = run.get("task_id").map_or_else(|| i.to_string(), py_str);
        let trial = run.get("trial").map_or_else(|| "0".to_owned(), py_str);
        let sid = format!("tau-{task}-{trial}");
        let traj = match run.shift_remove("traj") {
            Some(traj) => iterate(traj, &format!("run {i}: traj")).map_err(|p| p.session(&sid))?,
            None => return Err(Problem::new(format!("run {i} has no 'traj'"))),
        };
        out.push(session(from_messages(
            traj,
            sid,
            Some(Value::Object(run)),
            Mode::File,
        )?)?);
    }
    Ok(out)
}

fn from_messages(
    messages: Vec<Value>,
    sid: String,
    source: Option<Value>,
    mode: Mode,
) -> Result<Value, Problem> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    // call id -> (message, part) of its tool part, for the results that follow
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, raw) in messages.into_iter().enumerate() {
        let at = format!("messages[{i}]");
        let fail = |p: Problem| p.session(&sid);
        let (role, msg) = role_of(raw, &at).map_err(fail)?;
        let mid = match msg.get("id") {
            Some(id) if truthy(id) => py_str(id),
            _ => format!("{sid}-m{i:06}"),
        };
        if role == "tool" {
            result(msg, &mid, &sid, &mut out, &calls);
            continue;
        }
        let index = out.len();
        // a chat list's error names its message (`chat-m<index>`: the caller's index)
        let (turn, ops) =
            turn(msg, &role, &mid, &sid, &at, index, &mut calls, mode).map_err(|p| {
                fail(if mode == Mode::List {
                    p.message(&mid)
                } else {
                    p
                })
            })?;
        out.push(turn);
        // an Anthropic message's blocks, as the `anthropic` reader applies them
        for op in ops {
            match op {
                Op::Call(call, part) => {
                    calls.insert(call, (index, part));
                }
                Op::Result {
                    call,
                    failed,
                    text,
                    block,
                } => {
                    // an orphaned result would be counted nowhere: refused
                    let Some(&(m, p)) = calls.get(&call) else {
                        let at = format!("{at}.content[{block}]");
                        return Err(fail(Op::orphan_problem(&at, &call).message(&mid)));
                    };
                    let part = &mut out[m]["parts"][p];
                    complete(part, failed, text);
                    part["result_source"] = object([(AT, Value::from(i))]);
                }
            }
        }
    }
    let session_info = with_source([("id", str(sid))], source);
    Ok(object([
        ("info", session_info),
        ("messages", Value::Array(out)),
    ]))
}

/// A chat message's role (one of the five) and its keys.
fn role_of(raw: Value, at: &str) -> Result<(String, Map<String, Value>), Problem> {
    let role = match &raw {
        Value::Object(msg) => msg.get("role").map(|r| r.as_str().unwrap_or("").to_owned()),
        _ => None,
    };
    let (Some(role), Value::Object(msg)) = (role, raw) else {
        return Err(Problem::new(format!(
            "{at} is not a chat message (no role)"
        )));
    };
    if !matches!(
        role.as_str(),
        "system" | "developer" | "user" | "assistant" | "tool"
    ) {
        let raw = msg.get("role").unwrap_or(&Value::Null);
        return Err(Problem::new(format!(
            "{at} has an unknown role {}",
            dumps(raw, DEFAULT)
        )));
    }
    Ok((role, msg))
}

/// A `tool` message: its result completes the pending tool part of its
/// call; an orphaned (or second) result is kept as its own message.
fn result(
    mut msg: Map<String, Value>,
    mid: &str,
    sid: &str,
    out: &mut Vec<Value>,
    calls: &HashMap<String, (usize, usize)>,
) {
    let key = py_str(msg.get("tool_call_id").unwrap_or(&Value::Null));
    let pending = calls
        .get(&key)
        .copied()
        .filter(|&(m, p)| out[m]["parts"][p]["state"]["status"] == json!("pending"));
    let Some((m, p)) = pending else {
        // An orphaned (or second) result: kept as its own message, never dropped.
        let content = msg.get("content").filter(|c| truthy(c));
        let text = content.map(py_str).unwrap_or_default();
        let mut head = info(mid, sid, "user");
        head.insert("source".into(), Value::Object(msg));
        let part = object([
            ("id", str(format!("{mid}-p00"))),
            ("type", str("text")),
            ("text", str(text)),
            ("synthetic", Value::Bool(true)),
        ]);
        out.push(message(head, Some(vec![part])));
        return;
    };
    msg.shift_remove("role");
    msg.shift_remove("tool_call_id");
    // What stays in `msg` is kept to write the result back exactly
    // (a content that is not text stays, in its place).
    let output = match msg.get("content") {
        Some(Value::String(_)) => match msg.shift_remove("content") {
            Some(Value::String(text)) => text,
            _ => unreachable!("checked above"),
        },
        Some(content) => dumps(content, DEFAULT),
        None => {
            msg.insert("content".into(), Value::Null);
            "null".to_owned()
        }
    };
    let part = &mut out[m]["parts"][p];
    part["state"]["status"] = json!("completed");
    part["state"]["output"] = Value::String(output);
    if !msg.is_empty() {
        part["result_source"] = Value::Object(msg);
    }
}

/// Any other message (`at`, the `index`th of the session): its content's
/// parts and an assistant's tool calls, each noted in `calls`; what its
/// Anthropic blocks do to the session's tool parts (`Mode::List`).
#[allow(clippy::too_many_arguments)]
fn turn(
    mut msg: Map<String, Value>,
    role: &str,
    mid: &str,
    sid: &str,
    at: &str,
    index: usize,
    calls: &mut HashMap<String, (usize, usize)>,
    mode: Mode,
) -> Result<(Value, Vec<Op>), Problem> {
    let content = msg.shift_remove("content");
    let tool_calls = msg.shift_remove("tool_calls");
    let had_content = !matches!(content, None | Some(Value::Null));
    msg.shift_remove("role");
    msg.shift_remove("tool_call_id");
    let mut extra = msg;
    let canonical = match role {
        "user" | "assistant" => role,
        _ => "system",
    };
    let mut head = info(mid, sid, canonical);
    let (mut parts, ops) = match mode {
        Mode::List if has_blocks(content.as_ref()) => {
            check_blocks(content.as_ref(), role, at)?;
            anthropic::parts_from(mid, 0, content, at)?
        }
        _ => (content_parts(mid, content, at)?, Vec::new()),
    };
    match role {
        "system" | "developer" | "user" => {
            if role == "developer" {
                extra.insert("role".into(), str("developer"));
            }
            if !extra.is_empty() {
                head.insert("source".into(), Value::Object(extra));
            }
        }
        "assistant" => {
            // a logged reply's usage: read, and kept in the source to write back
            let tokens = openai_usage(extra.get("usage"), &format!("{at}.usage"), Api::Chat)
                .map_err(|p| p.message(mid))?;
            if !tokens.is_null() {
                head.insert("tokens".into(), tokens);
            }
            if !had_content {
                extra.insert("content".into(), Value::Null);
            }
            if !extra.is_empty() {
                head.insert("source".into(), Value::Object(extra));
            }
            let tool_calls = match tool_calls {
                Some(Value::Array(calls)) => calls,
                Some(v) if truthy(&v) => {
                    return Err(Problem::new(format!(
                        "{at}.tool_calls must be a list, got {}",
                        kind(&v)
                    )))
                }
                _ => Vec::new(),
            };
            for (j, call) in tool_calls.into_iter().enumerate() {
                if mode == Mode::List {
                    check_custom(&call, &format!("{at}.tool_calls[{j}]"))?;
                }
                let (key, part) = tool_call(
                    call,
                    &format!("{at}.tool_calls[{j}]"),
                    format!("{mid}-t{j:02}"),
                )?;
                calls.insert(key, (index, parts.len()));
                parts.push(part);
            }
        }
        _ => unreachable!("roles were checked above"),
    }
    Ok((message(head, Some(parts)), ops))
}

/// The content blocks a chat list may hold that only Anthropic's Messages
/// API has: a content list holding one is read as Anthropic blocks.
pub(super) const ANTHROPIC_ONLY: &[&str] = &[
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
];

/// The content is a list holding an Anthropic block (`ANTHROPIC_ONLY`).
fn has_blocks(content: Option<&Value>) -> bool {
    let Some(Value::Array(blocks)) = content else {
        return false;
    };
    blocks.iter().any(|b| {
        b.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| ANTHROPIC_ONLY.contains(&t))
    })
}

/// An Anthropic content list (`at`, a `role` message) the `anthropic`
/// reader can read whole: every block an object of a known type, each in a
/// message of the role that sends it, a call with its id and name, a result
/// naming its call.
fn check_blocks(content: Option<&Value>, role: &str, at: &str) -> Result<(), Problem> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(());
    };
    for (j, block) in blocks.iter().enumerate() {
        let here = format!("{at}.content[{j}]");
        let Value::Object(b) = block else {
            return Err(Problem::new(format!(
                "{here} must be an object (an Anthropic content block), got {}",
                kind(block)
            )));
        };
        let t = match b.get("type") {
            Some(Value::String(t)) if t == "text" || ANTHROPIC_ONLY.contains(&t.as_str()) => {
                t.as_str()
            }
            other => {
                return Err(Problem::new(format!(
                    "{here} is not an Anthropic content block: its type is {} (one of text, {})",
                    other.map_or_else(|| "missing".to_owned(), |t| dumps(t, DEFAULT)),
                    ANTHROPIC_ONLY.join(", ")
                )))
            }
        };
        let sender = match t {
            "tool_use" | "thinking" | "redacted_thinking" => Some("an assistant"),
            "tool_result" => Some("a user"),
            _ => None,
        };
        if let Some(sender) = sender.filter(|s| !s.ends_with(&format!(" {role}"))) {
            let a = if role.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            return Err(Problem::new(format!(
                "{here} is a '{t}' block in {a} {role} message (only {sender} message sends one)"
            )));
        }
        let needs: &[&str] = match t {
            "tool_use" => &["id", "name"],
            "tool_result" => &["tool_use_id"],
            _ => &[],
        };
        for key in needs {
            if !matches!(b.get(*key), Some(Value::String(s)) if !s.is_empty()) {
                return Err(Problem::new(format!(
                    "{here}.{key} must be a non-empty string (a '{t}' block)"
                )));
            }
        }
        if t == "tool_result" {
            match b.get("content") {
                None | Some(Value::Null | Value::String(_)) => {}
                Some(Value::Array(inner)) => {
                    if let Some(k) = inner.iter().position(|x| !x.is_object()) {
                        return Err(Problem::new(format!(
                            "{here}.content[{k}] must be an object (a content block), got {}",
                            kind(&inner[k])
                        )));
                    }
                }
                Some(other) => {
                    return Err(Problem::new(format!(
                        "{here}.content must be a string or a list of blocks, got {}",
                        kind(other)
                    )))
                }
            }
        }
    }
    Ok(())
}

/// A tool call (`at`) as the tool part `id`, and the call id its result gives.
fn tool_call(call: Value, at: &str, id: String) -> Result<(String, Value), Problem> {
    let Value::Object(c) = call else {
        return Err(Problem::new(format!("{at} must be an object")));
    };
    let function = c.get("function").filter(|f| truthy(f));
    if function.is_some_and(|f| !f.is_object()) {
        return Err(Problem::new(format!("{at}.function must be an object")));
    }
    if let Some(custom) = custom_call(&c) {
        return custom_tool_call(&c, custom, at, id);
    }
    let name = function
        .and_then(|f| f.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let call_id = c.get("id").cloned().unwrap_or(Value::Null);
    for (field, value) in [("function.name", &name), ("id", &call_id)] {
        if !(value.is_null() || value.is_string()) {
            return Err(Problem::new(format!("{at}.{field} must be a string")));
        }
    }
    let (input, metadata, keep) = arguments(function.and_then(|f| f.get("arguments")));
    let mut rest = without(&c, &["id", "function", "type"]);
    match c.get("type") {
        None => {}
        Some(t) if t == "function" => {}
        Some(t) => {
            rest.insert("type".into(), t.clone());
        }
    }
    rest.extend(keep);
    let key = py_str(&call_id);
    let source = (!rest.is_empty()).then_some(Value::Object(rest));
    let mut part = tool_part(id, call_id, name, input, source);
    if let Some(metadata) = metadata {
        part["state"]["metadata"] = metadata;
    }
    Ok((key, part))
}

/// A call that says it is a custom one (`"type": "custom"`, or a `custom`
/// key and no `function`) is one `custom_call` reads: another (no type, as
/// a streamed delta; no `custom` object) would be read as a call without a
/// name or input, so a chat list refuses it.
fn check_custom(call: &Value, at: &str) -> Result<(), Problem> {
    match call {
        Value::Object(c)
            if custom_call(c).is_none()
                && (c.get("type").and_then(Value::as_str) == Some("custom")
                    || (c.contains_key("custom") && !c.get("function").is_some_and(truthy))) =>
        {
            Err(Problem::new(format!(
                "{at} has a 'custom' key but is not a custom tool call \
                 ({{\"type\": \"custom\", \"custom\": {{\"name\", \"input\"}}}}, no 'function')"
            )))
        }
        _ => Ok(()),
    }
}

/// The `custom` object of an OpenAI custom (freeform) tool call
/// (`{"type": "custom", "custom": {"name", "input"}}`, no `function`).
fn custom_call(c: &Map<String, Value>) -> Option<&Map<String, Value>> {
    let custom = c.get("custom")?.as_object()?;
    let function = c.get("function").is_some_and(truthy);
    (c.get("type").and_then(Value::as_str) == Some("custom") && !function).then_some(custom)
}

/// A custom tool call (`at`) as the tool part `id`: its name, and its text
/// as the input `{"input": text}` (what the Responses reader makes of a
/// `custom_tool_call`; no text or "" is `{}`); the call is kept whole in the
/// source, to be written back as it was.
fn custom_tool_call(
    c: &Map<String, Value>,
    custom: &Map<String, Value>,
    at: &str,
    id: String,
) -> Result<(String, Value), Problem> {
    let name = custom.get("name").cloned().unwrap_or(Value::Null);
    let call_id = c.get("id").cloned().unwrap_or(Value::Null);
    let text = custom.get("input").cloned().unwrap_or(Value::Null);
    for (field, value) in [
        ("custom.name", &name),
        ("id", &call_id),
        ("custom.input", &text),
    ] {
        if !(value.is_null() || value.is_string()) {
            return Err(Problem::new(format!("{at}.{field} must be a string")));
        }
    }
    // no text (a cleared input: masking writes "") is no input, as `{}` is
    let input = match text {
        Value::String(t) if !t.is_empty() => object([("input", Value::String(t))]),
        _ => json!({}),
    };
    let rest = without(c, &["id"]);
    let key = py_str(&call_id);
    Ok((
        key,
        tool_part(id, call_id, name, input, Some(Value::Object(rest))),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_an_object_are_kept_with_why_not_refused() {
        for (raw, why) in [
            (
                json!("[1, 2]"),
                "the arguments hold an array, not a JSON object",
            ),
            (
                json!("\"ls\""),
                "the arguments hold a string, not a JSON object",
            ),
            (json!("3"), "the arguments hold a number, not a JSON object"),
            (
                json!("{\"p\": \"/cut"),
                "the arguments are not valid JSON (cut off?)",
            ),
            (
                json!(["a"]),
                "the arguments are an array, not a string holding a JSON object",
            ),
        ] {
            let (input, metadata) = call_state(Some(&raw));
            assert_eq!(input, json!({}));
            assert_eq!(metadata, Some(json!({"arguments": raw, "error": why})));
        }
        for (raw, want) in [
            (None, json!({})),
            (Some(json!(null)), json!({})),
            (Some(json!(" ")), json!({})),
            (Some(json!("{\"a\": 1}")), json!({"a": 1})),
            (Some(json!({"b": 2})), json!({"b": 2})),
        ] {
            assert_eq!(call_state(raw.as_ref()), (want, None));
        }
    }

    #[test]
    fn a_custom_call_is_read_with_its_name_and_text() {
        let call = json!({"id": "c", "type": "custom",
                          "custom": {"name": "apply_patch", "input": "*** x"}});
        let (key, part) = tool_call(call.clone(), "m.tool_calls[0]", "p".into()).unwrap();
        assert_eq!(key, "c");
        assert_eq!(part["tool"], json!("apply_patch"));
        assert_eq!(part["state"]["input"], json!({"input": "*** x"}));
        assert_eq!(
            part["source"],
            json!({"type": "custom", "custom": call["custom"]})
        );
        let empty = json!({"id": "c", "type": "custom", "custom": {"name": "p", "input": ""}});
        let (_, part) = tool_call(empty, "m", "p".into()).unwrap();
        assert_eq!(part["state"]["input"], json!({}));
        let bad = json!({"id": "c", "type": "custom", "custom": {"input": 5}});
        let why = tool_call(bad, "m.tool_calls[0]", "p".into()).unwrap_err();
        assert_eq!(why.what, "m.tool_calls[0].custom.input must be a string");
    }
}
