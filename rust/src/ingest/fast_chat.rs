//! The fast path of OpenAI chat lines (`chat::line`): the line parsed into
//! the borrowed tree of `fast`, mapped by the rules of `chat::from_messages`
//! and `opencode::session`, and written straight into the row builders.
//!
//! When it applies (`lines::read_chunk`): every line of an `openai-chat`
//! file that is valid UTF-8 goes to `chat_line` first (SWE-agent,
//! mini-swe-agent and tau-bench lines, read by `chat.rs` too, never do). It
//! answers, and its rows are the line's, exactly when
//! - the line is one JSON value `fast::parse` is sure of (see `fast.rs`);
//! - it is an array of messages, or an object with `messages` an array, no
//!   `system` key, and `id` and `session_id` absent, null or strings;
//! - every message is an object with `role` one of `system`, `developer`,
//!   `user`, `assistant`, `tool`, `id` absent, null or a string, and
//!   `content` absent, null, a string or an array of content blocks (below);
//! - an assistant message has no `usage` (a logged reply's, which
//!   `chat::turn` reads as its tokens);
//! - an assistant's `tool_calls` is absent, null or an array of objects
//!   without a top-level `arguments`, each with `id` absent, null or a
//!   string and `function` absent, null or an object whose `name` is absent,
//!   null or a string and whose `arguments` is absent, null, an object, or
//!   a string `fast::parse` reads as an object;
//! - a `tool` message's `tool_call_id` (absent or null: `"None"`, as Python's
//!   `str`) names a call of an earlier message still pending (the latest
//!   call of that id), and its `content` is a string.
//!
//! - content blocks, each an object with a string `type`: in a list holding
//!   none of `chat::ANTHROPIC_ONLY`, only `text` blocks (`text` absent or a
//!   string; `chat::content_parts`); in one holding one, read in the
//!   chat-list mode only (`list`; `chat::check_blocks` and
//!   `anthropic::parts_from`): `text` (`text` absent or a string), `thinking`
//!   and `redacted_thinking` (`thinking` absent or a string) and `tool_use`
//!   (non-empty string `id` and `name`, `input` absent, null or an object) in
//!   an assistant message, `tool_result` in a user message (non-empty string
//!   `tool_use_id` naming a call of an earlier message still pending,
//!   `is_error` absent, null or a bool, `content` absent, null, a string or
//!   an array of objects whose `text` is absent or a string), `image`
//!   (`source` absent, null or an object whose `media_type` is absent, null
//!   or a string) and `document` in any; an assistant message holding a
//!   `tool_use` has no `tool_calls`;
//! - in the chat-list mode, no call says `"type": "custom"` (`chat::check_custom`).
//!
//! Otherwise (an orphaned or second result, other content parts, an id that is not
//! a string, any line the mapping rejects) it returns `None` with nothing
//! appended, and the line is read by serde_json and `chat::line`: its rows,
//! or its error, are that path's. `differential.rs` checks that both give
//! the same rows on every line this path answers for.

use std::borrow::Cow;

use super::chat::{ANTHROPIC_ONLY, AT};
use super::fast::{
    get, parse, remove, write_entries, write_json, write_object, write_span, Obj, Span, J,
};
use super::fast_claude::result_text;
use super::pyjson::{write_str, COMPACT, DEFAULT};
use super::rows::{MessageRef, PartRef, Rows};

struct Message<'a> {
    id: String,
    role: &'static str,
    json: Span,
    parts: Vec<Part<'a>>,
}

struct Part<'a> {
    id: String,
    /// The row's part type: `tool` (its JSON written once the line is
    /// read), `text`, `reasoning`, `tool-result`, `file`, `document`.
    kind: &'static str,
    /// A text or reasoning part's text; a tool part's result (`None`: still
    /// pending), its error when `failed`.
    output: Option<Cow<'a, str>>,
    failed: bool,
    /// The tool's name (`None`: null).
    name: Option<Cow<'a, str>>,
    /// The call id (`None`: null).
    call_id: Option<Cow<'a, str>>,
    input: Span,
    source: Option<Obj<'a>>,
    result_source: Option<Obj<'a>>,
    /// The chat index of the message whose `tool_result` block completed
    /// it (its `result_source`, `{AT: index}`).
    result_at: Option<usize>,
    /// The part's `*_json` in the line's buffer (empty: `{}`).
    json: Span,
}

impl<'a> Part<'a> {
    /// A part other than a tool: its row's text and JSON.
    fn block(id: String, kind: &'static str, output: Option<Cow<'a, str>>, json: Span) -> Self {
        Part {
            id,
            kind,
            output,
            failed: false,
            name: None,
            call_id: None,
            input: 0..0,
            source: None,
            result_source: None,
            result_at: None,
            json,
        }
    }

    fn text(id: String, text: Cow<'a, str>) -> Self {
        Part::block(id, "text", Some(text), 0..0)
    }

    fn is_tool(&self) -> bool {
        self.kind == "tool"
    }
}

/// A string that is absent or falsy (`None`), a non-empty string, or `Err`
/// for any other value (left to the serde_json path).
fn truthy_str<'m>(map: &'m Obj<'_>, key: &str) -> Result<Option<&'m str>, ()> {
    match get(map, key) {
        None | Some(J::Null) => Ok(None),
        Some(J::Str(s)) if s.is_empty() => Ok(None),
        Some(J::Str(s)) => Ok(Some(s)),
        Some(_) => Err(()),
    }
}

/// A chat line, appended to `rows` as `chat::line` (`list`: as
/// `chat::chat_list`, Anthropic blocks read) and `SessionRows::emit` would
/// (a session without an id is `<stem>:<number>`); `(session id, message
/// ids)`, or `None` (and nothing appended) for the serde_json path.
pub fn chat_line(
    text: &str,
    stem: &str,
    number: usize,
    list: bool,
    rows: &mut Rows,
    buf: &mut String,
) -> Option<(String, Vec<String>)> {
    buf.clear();
    let (messages, sid, source) = session_of(parse(text)?, stem, number)?;
    let session_json = write_span(buf, |b| {
        b.push_str("{\"id\":");
        write_str(b, &sid, false);
        if let Some(source) = &source {
            b.push_str(",\"source\":");
            write_object(b, source);
        }
        b.push('}');
    });
    let mut read = Read {
        out: Vec::with_capacity(messages.len()),
        calls: Vec::new(),
        scratch: String::new(),
        list,
    };
    for (i, raw) in messages.into_iter().enumerate() {
        let J::Obj(msg) = raw else {
            return None;
        };
        match role_of(&msg)? {
            "tool" => read.result(msg)?,
            role => read.message(msg, role, i, &sid, buf)?,
        }
    }
    // Everything checked: the tool parts' JSON (their results are in), then the rows.
    let mut out = read.out;
    for p in out
        .iter_mut()
        .flat_map(|m| &mut m.parts)
        .filter(|p| p.is_tool())
    {
        p.json = write_span(buf, |b| write_tool_json(b, p));
    }
    emit(rows, &sid, &buf[session_json], &out, buf);
    let ids = out.into_iter().map(|m| m.id).collect();
    Some((sid, ids))
}

/// The line's messages, its session id (`<stem>:<number>` without one) and
/// its other keys (`None` when it has none); `None` for the serde_json path.
fn session_of<'a>(
    line: J<'a>,
    stem: &str,
    number: usize,
) -> Option<(Vec<J<'a>>, String, Option<Obj<'a>>)> {
    match line {
        J::Arr(items) => Some((items, format!("{stem}:{number}"), None)),
        J::Obj(mut obj) => {
            // a truthy "id" names the session, else "session_id" (kept when "id" does)
            let own_id = truthy_str(&obj, "id").ok()?;
            let by_id = own_id.is_some();
            let id = match own_id {
                Some(id) => Some(id),
                None => truthy_str(&obj, "session_id").ok()?,
            };
            let sid = id.map_or_else(|| format!("{stem}:{number}"), str::to_owned);
            let J::Arr(items) = remove(&mut obj, "messages")? else {
                return None;
            };
            if get(&obj, "system").is_some() {
                return None;
            }
            remove(&mut obj, "id");
            if !by_id {
                remove(&mut obj, "session_id");
            }
            Some((items, sid, (!obj.is_empty()).then_some(obj)))
        }
        _ => None,
    }
}

/// A message's role, or `None` for one this path does not take.
fn role_of(msg: &Obj<'_>) -> Option<&'static str> {
    match get(msg, "role") {
        Some(J::Str(role)) => match &**role {
            "system" => Some("system"),
            "developer" => Some("developer"),
            "user" => Some("user"),
            "assistant" => Some("assistant"),
            "tool" => Some("tool"),
            _ => None,
        },
        _ => None,
    }
}

/// A line's messages as they are read.
struct Read<'a> {
    out: Vec<Message<'a>>,
    /// call id (`None` for null, as Python's str) -> (message, part), latest last
    calls: Vec<(Cow<'a, str>, usize, usize)>,
    /// A call's arguments written again, to compare with their text.
    scratch: String,
    /// The chat-list mode (`chat::chat_list`): Anthropic blocks are read.
    list: bool,
}

impl<'a> Read<'a> {
    /// A tool message: its result completes the latest call of its id.
    fn result(&mut self, mut msg: Obj<'a>) -> Option<()> {
        let key = match get(&msg, "tool_call_id") {
            None | Some(J::Null) => "None",
            Some(J::Str(s)) => s,
            Some(_) => return None,
        };
        // The latest call of that id, if it still waits for its result;
        // an orphaned (or second) result is left to the serde_json path.
        let &(_, m, p) = self.calls.iter().rev().find(|(k, _, _)| k == key)?;
        if self.out[m].parts[p].output.is_some() {
            return None;
        }
        remove(&mut msg, "role");
        remove(&mut msg, "tool_call_id");
        let Some(J::Str(output)) = remove(&mut msg, "content") else {
            return None;
        };
        let part = &mut self.out[m].parts[p];
        part.output = Some(output);
        part.result_source = (!msg.is_empty()).then_some(msg);
        Some(())
    }

    /// Any other message, the `i`th of the line: its text part, and an
    /// assistant's tool calls (pending until their results are read).
    fn message(
        &mut self,
        mut msg: Obj<'a>,
        role: &'static str,
        i: usize,
        sid: &str,
        buf: &mut String,
    ) -> Option<()> {
        let mid = match truthy_str(&msg, "id").ok()? {
            Some(id) => id.to_owned(),
            None => format!("{sid}-m{i:06}"),
        };
        let content = remove(&mut msg, "content");
        let tool_calls = remove(&mut msg, "tool_calls");
        remove(&mut msg, "role");
        remove(&mut msg, "tool_call_id");
        let mut parts = Vec::new();
        let calls_before = self.calls.len();
        let had_content = match content {
            None | Some(J::Null) => false,
            Some(J::Str(text)) => {
                parts.push(Part::text(format!("{mid}-p00"), text));
                true
            }
            Some(J::Arr(blocks)) => {
                self.blocks(blocks, role, &mid, i, &mut parts, buf)?;
                true
            }
            Some(_) => return None,
        };
        // a message's `tool_use` blocks and `tool_calls` of one id: the
        // serde_json path notes the blocks' calls last
        let block_calls = self.calls.len() > calls_before;
        let mut extra = msg;
        let canonical = match role {
            "user" => "user",
            "assistant" => "assistant",
            _ => "system",
        };
        if role == "developer" {
            extra.push((Cow::Borrowed("role"), J::Str(Cow::Borrowed("developer"))));
        }
        if role == "assistant" {
            if extra.iter().any(|(k, _)| k == "usage") {
                return None; // a logged reply's usage: read by `chat::turn`
            }
            if !had_content {
                extra.push((Cow::Borrowed("content"), J::Null));
            }
            let tool_calls = match tool_calls {
                None | Some(J::Null) => Vec::new(),
                Some(J::Arr(items)) if !block_calls || items.is_empty() => items,
                Some(_) => return None,
            };
            for (j, call) in tool_calls.into_iter().enumerate() {
                let J::Obj(call) = call else {
                    return None;
                };
                if self.list && matches!(get(&call, "type"), Some(J::Str(t)) if t == "custom") {
                    return None; // a chat list refuses it (`chat::check_custom`)
                }
                let part = tool_call(call, format!("{mid}-t{j:02}"), buf, &mut self.scratch)?;
                let key = part.call_id.clone().unwrap_or(Cow::Borrowed("None"));
                self.calls.push((key, self.out.len(), parts.len()));
                parts.push(part);
            }
        }
        let json = write_span(buf, |b| {
            b.push_str("{\"id\":");
            write_str(b, &mid, false);
            b.push_str(",\"sessionID\":");
            write_str(b, sid, false);
            b.push_str(",\"role\":\"");
            b.push_str(canonical);
            b.push('"');
            if !extra.is_empty() {
                b.push_str(",\"source\":");
                write_object(b, &extra);
            }
            b.push('}');
        });
        self.out.push(Message {
            id: mid,
            role: canonical,
            json,
            parts,
        });
        Some(())
    }

    /// A message's content blocks (`role`, the raw role; `mid`, the `i`th
    /// message of the line) as `chat::content_parts`, or, when one is
    /// Anthropic's (`chat::ANTHROPIC_ONLY`) in the chat-list mode, as
    /// `chat::check_blocks` and `anthropic::parts_from` read them: their
    /// parts, a `tool_use` pending, a `tool_result` completing its call.
    fn blocks(
        &mut self,
        blocks: Vec<J<'a>>,
        role: &str,
        mid: &str,
        i: usize,
        parts: &mut Vec<Part<'a>>,
        buf: &mut String,
    ) -> Option<()> {
        let anthropic = blocks.iter().any(|b| {
            matches!(b, J::Obj(b) if matches!(get(b, "type"),
                Some(J::Str(t)) if ANTHROPIC_ONLY.contains(&&**t)))
        });
        if anthropic && !self.list {
            return None; // an openai-chat file refuses them
        }
        // the keys a text part's source leaves out
        let plain: &[&str] = if anthropic {
            &["type", "text", "thinking"]
        } else {
            &["type", "text"]
        };
        for (j, block) in blocks.into_iter().enumerate() {
            let J::Obj(b) = block else {
                return None;
            };
            let kind = match get(&b, "type") {
                Some(J::Str(t)) if &**t == "text" => "text",
                Some(J::Str(t)) if anthropic => *ANTHROPIC_ONLY.iter().find(|k| **k == &**t)?,
                _ => return None,
            };
            // each in a message of the role that sends it
            let sender = match kind {
                "tool_use" | "thinking" | "redacted_thinking" => "assistant",
                "tool_result" => "user",
                _ => role,
            };
            if sender != role {
                return None;
            }
            let pid = format!("{mid}-p{j:02}");
            let part = match kind {
                "text" => {
                    let text = text_of(&b, "text")?;
                    let json = if b.iter().any(|(k, _)| !plain.contains(&&**k)) {
                        write_span(buf, |o| {
                            o.push_str("{\"source\":");
                            let kept = b.iter().filter(|(k, _)| !plain.contains(&&**k));
                            write_entries(o, kept, COMPACT);
                            o.push('}');
                        })
                    } else {
                        0..0
                    };
                    Part::block(pid, "text", Some(text), json)
                }
                "thinking" | "redacted_thinking" => {
                    let text = text_of(&b, "thinking")?;
                    let json = write_span(buf, |o| {
                        o.push_str("{\"source\":{\"type\":");
                        write_str(o, kind, false);
                        for (key, item) in &b {
                            if !matches!(&**key, "type" | "text" | "thinking") {
                                o.push(',');
                                write_str(o, key, false);
                                o.push(':');
                                write_json(o, item, COMPACT);
                            }
                        }
                        o.push_str("}}");
                    });
                    Part::block(pid, "reasoning", Some(text), json)
                }
                "tool_use" => {
                    let (Some(name), Some(id)) = (non_empty(&b, "name"), non_empty(&b, "id"))
                    else {
                        return None;
                    };
                    let input = match get(&b, "input") {
                        Some(input @ J::Obj(_)) => {
                            write_span(buf, |o| write_json(o, input, COMPACT))
                        }
                        None | Some(J::Null) => write_span(buf, |o| o.push_str("{}")),
                        Some(_) => return None,
                    };
                    self.calls.push((id.clone(), self.out.len(), parts.len()));
                    Part {
                        id: pid,
                        kind: "tool",
                        output: None,
                        failed: false,
                        name: Some(name),
                        call_id: Some(id),
                        input,
                        source: Some(b),
                        result_source: None,
                        result_at: None,
                        json: 0..0,
                    }
                }
                "tool_result" => {
                    let call = non_empty(&b, "tool_use_id")?;
                    let failed = match get(&b, "is_error") {
                        None | Some(J::Null) => false,
                        Some(J::Bool(failed)) => *failed,
                        Some(_) => return None,
                    };
                    let text = match get(&b, "content") {
                        Some(J::Str(text)) => text.clone(),
                        other => Cow::Owned(result_text(other)?.into_owned()),
                    };
                    // the latest call of that id, still pending (an orphaned
                    // result is refused, a second one keeps both: serde_json)
                    let &(_, m, p) = self.calls.iter().rev().find(|(k, _, _)| *k == call)?;
                    let done = &mut self.out[m].parts[p];
                    if done.output.is_some() {
                        return None;
                    }
                    done.output = Some(text);
                    done.failed = failed;
                    done.result_at = Some(i);
                    let json = write_span(buf, |o| {
                        o.push_str("{\"callID\":");
                        write_str(o, &call, false);
                        o.push_str(",\"source\":");
                        write_object(o, &b);
                        o.push('}');
                    });
                    Part::block(pid, "tool-result", None, json)
                }
                "image" => {
                    let json = image_json(&b, buf)?;
                    Part::block(pid, "file", None, json)
                }
                _ => {
                    // a document: kept whole
                    let json = write_span(buf, |o| {
                        o.push_str("{\"source\":");
                        write_object(o, &b);
                        o.push('}');
                    });
                    Part::block(pid, kind, None, json)
                }
            };
            parts.push(part);
        }
        Some(())
    }
}

/// A block's text field: absent (`""`) or a string.
fn text_of<'a>(b: &Obj<'a>, key: &str) -> Option<Cow<'a, str>> {
    match get(b, key) {
        None => Some(Cow::Borrowed("")),
        Some(J::Str(s)) => Some(s.clone()),
        Some(_) => None,
    }
}

/// A block's field that is a non-empty string.
fn non_empty<'a>(b: &Obj<'a>, key: &str) -> Option<Cow<'a, str>> {
    match get(b, key) {
        Some(J::Str(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// An image block's file part JSON (`anthropic::parts_from`): its media
/// type (`image/*` when it names none), its URL (base64 data as a `data:`
/// URL), the block.
fn image_json(b: &Obj<'_>, buf: &mut String) -> Option<Span> {
    let inner = match get(b, "source") {
        None | Some(J::Null) => None,
        Some(J::Obj(inner)) => Some(inner),
        Some(_) => return None,
    };
    let media = match inner.and_then(|s| get(s, "media_type")) {
        None | Some(J::Null) => None,
        Some(J::Str(m)) => Some(&**m).filter(|m| !m.is_empty()),
        Some(_) => return None,
    };
    let field = |key: &str| match inner.and_then(|s| get(s, key)) {
        Some(J::Str(s)) => Some(&**s),
        _ => None,
    };
    let url = match field("type") {
        Some("base64") => field("data").map(|data| {
            let media = media.unwrap_or("application/octet-stream");
            Cow::Owned(format!("data:{media};base64,{data}"))
        }),
        Some("url") => field("url").map(Cow::Borrowed),
        _ => None,
    };
    Some(write_span(buf, |o| {
        o.push_str("{\"mime\":");
        write_str(o, media.unwrap_or("image/*"), false);
        if let Some(url) = &url {
            o.push_str(",\"url\":");
            write_str(o, url, false);
        }
        o.push_str(",\"source\":");
        write_object(o, b);
        o.push('}');
    }))
}

/// A tool call of an assistant message: its pending tool part `id`.
fn tool_call<'a>(
    mut c: Obj<'a>,
    id: String,
    buf: &mut String,
    scratch: &mut String,
) -> Option<Part<'a>> {
    // the kept raw arguments would replace it in place; a custom call is
    // read by `chat::tool_call`
    if get(&c, "arguments").is_some() || get(&c, "custom").is_some() {
        return None;
    }
    let mut function = match remove(&mut c, "function") {
        None | Some(J::Null) => Vec::new(),
        Some(J::Obj(f)) => f,
        Some(_) => return None,
    };
    let name = match remove(&mut function, "name") {
        None | Some(J::Null) => None,
        Some(J::Str(s)) => Some(s),
        Some(_) => return None,
    };
    let call_id = match remove(&mut c, "id") {
        None | Some(J::Null) => None,
        Some(J::Str(s)) => Some(s),
        Some(_) => return None,
    };
    let (input, keep) = arguments(remove(&mut function, "arguments"), buf, scratch)?;
    match remove(&mut c, "type") {
        None => {}
        Some(J::Str(t)) if t == "function" => {}
        Some(t) => c.push((Cow::Borrowed("type"), t)),
    }
    if let Some(keep) = keep {
        c.push((Cow::Borrowed("arguments"), keep));
    }
    Some(Part {
        id,
        kind: "tool",
        output: None,
        failed: false,
        name,
        call_id,
        input,
        source: (!c.is_empty()).then_some(c),
        result_source: None,
        result_at: None,
        json: 0..0,
    })
}

/// A call's `arguments`: its input (an object's JSON in `buf`) and what
/// the part keeps of them (`None`: their text is the input's, exactly).
fn arguments<'a>(
    arguments: Option<J<'a>>,
    buf: &mut String,
    scratch: &mut String,
) -> Option<(Span, Option<J<'a>>)> {
    Some(match arguments {
        Some(J::Str(raw)) => {
            let (input, exact) = match parse(&raw)? {
                J::Obj(parsed) => {
                    let input = write_span(buf, |b| write_object(b, &parsed));
                    scratch.clear();
                    write_entries(scratch, &parsed, DEFAULT);
                    (input, *scratch == *raw)
                }
                // not an object: the serde_json path keeps it with why (metadata)
                _ => return None,
            };
            (input, (!exact).then_some(J::Str(raw)))
        }
        Some(J::Obj(raw)) => {
            let input = write_span(buf, |b| write_object(b, &raw));
            (input, Some(J::Obj(raw)))
        }
        None => (write_span(buf, |b| b.push_str("{}")), Some(J::Null)),
        Some(J::Null) => (write_span(buf, |b| b.push_str("{}")), Some(J::Null)),
        Some(_) => return None,
    })
}

/// A tool part's `*_json`: its call id, a null tool, what its call and result kept.
fn write_tool_json(b: &mut String, p: &Part<'_>) {
    b.push_str("{\"callID\":");
    match &p.call_id {
        Some(id) => write_str(b, id, false),
        None => b.push_str("null"),
    }
    if p.name.is_none() {
        b.push_str(",\"tool\":null");
    }
    b.push_str(",\"state\":{}");
    if let Some(source) = &p.source {
        b.push_str(",\"source\":");
        write_object(b, source);
    }
    if let Some(result) = &p.result_source {
        b.push_str(",\"result_source\":");
        write_object(b, result);
    }
    if let Some(at) = p.result_at {
        b.push_str(",\"result_source\":{");
        write_str(b, AT, false);
        b.push(':');
        b.push_str(&at.to_string());
        b.push('}');
    }
    b.push('}');
}

/// The session's rows: one per part (a message without parts, a session
/// without messages: one row), the session's JSON on its first.
fn emit(rows: &mut Rows, sid: &str, session_json: &str, out: &[Message<'_>], buf: &str) {
    let mut json = Some(session_json);
    if out.is_empty() {
        rows.push_ref(sid, json, None, None);
    }
    for m in out {
        let head = MessageRef {
            id: &m.id,
            role: m.role,
            parent_id: None,
            summary: false,
            finished: false,
            error: false,
            json: &buf[m.json.clone()],
        };
        let mut head = (head, true);
        if m.parts.is_empty() {
            rows.push_ref(sid, json.take(), Some(&head), None);
            continue;
        }
        for p in &m.parts {
            let part = if p.is_tool() {
                PartRef {
                    id: &p.id,
                    kind: "tool",
                    tool: p.name.as_deref(),
                    status: Some(match (&p.output, p.failed) {
                        (None, _) => "pending",
                        (Some(_), true) => "error",
                        (Some(_), false) => "completed",
                    }),
                    input: Some(&buf[p.input.clone()]),
                    output: p.output.as_deref(),
                    compacted_at: None,
                    auto: None,
                    json: &buf[p.json.clone()],
                }
            } else {
                PartRef {
                    id: &p.id,
                    kind: p.kind,
                    tool: None,
                    status: None,
                    input: None,
                    output: p.output.as_deref(),
                    compacted_at: None,
                    auto: None,
                    json: if p.json.is_empty() {
                        "{}"
                    } else {
                        &buf[p.json.clone()]
                    },
                }
            };
            rows.push_ref(sid, json.take(), Some(&head), Some(&part));
            head.1 = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{chat, lines};

    /// The rows and sessions of the serde_json path.
    fn slow(text: &str) -> (arrow_array::RecordBatch, Vec<(String, Vec<String>)>) {
        let mut rows = Rows::default();
        let value = lines::parse(text.as_bytes()).unwrap();
        let session = chat::line(value, "file:7").unwrap();
        let mapped = lines::emit(&[session], &mut rows);
        (rows.finish(), mapped.sessions)
    }

    #[test]
    fn the_fast_path_makes_the_rows_of_the_serde_json_path() {
        let docs = [
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"}]"#,
            r#"[]"#,
            r#"{"id":"s1","messages":[],"meta":{"a":[1,2.50,1e5]}}"#,
            r#"{"id":"","session_id":"s2","messages":[{"role":"system","content":"be \"brief\"\n\u00e9\ud83d\ude00"}]}"#,
            r#"{"id":"r1","session_id":"s3","messages":[],"model":"m"}"#,
            r#"[{"role":"user","content":[{"type":"text","text":"parts"},{"type":"text","cache_control":{"type":"ephemeral"},"thinking":1}]}]"#,
            r#"[{"role":"developer","content":null,"name":"x"},{"role":"user","content":"ü","tool_calls":5,"tool_call_id":"z"}]"#,
            r#"[{"role":"user","content":"run ls"},
                {"role":"assistant","content":null,"tool_calls":[
                    {"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\": \"ls\", \"n\": 1.0}"}},
                    {"id":"c2","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"},"index":0},
                    {"id":"c3","type":"custom","function":{"name":"é","arguments":"{\"p\": \"\\u00e9\"}"}},
                    {"id":null,"function":{"arguments":"{}"}},
                    {"function":{"name":"x","arguments":{"k":"v"}}},
                    {"id":"c4","function":{"name":"y"}}]},
                {"role":"tool","tool_call_id":"c1","content":"a\nb 数据"},
                {"role":"tool","tool_call_id":"c2","content":"","name":"read","id":7},
                {"role":"tool","content":"for the null id"},
                {"role":"assistant","id":"m-own","content":"done 🚀"}]"#,
        ];
        for doc in docs {
            let (want, sessions) = slow(doc);
            let mut rows = Rows::default();
            let mut buf = String::new();
            let got = chat_line(doc, "file", 7, false, &mut rows, &mut buf).expect(doc);
            assert_eq!(vec![got], sessions, "{doc}");
            assert_eq!(rows.finish(), want, "{doc}");
        }
    }

    #[test]
    fn unusual_lines_are_left_to_serde_json() {
        for doc in [
            r#"[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]"#,
            r#"[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"a","input":{}}]}]"#,
            r#"[{"role":"tool","tool_call_id":"nope","content":"orphan"}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c","content":"one"},
                {"role":"tool","tool_call_id":"c","content":"two"}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a"}}]},
                {"role":"tool","tool_call_id":"c","content":{"not":"text"}}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"z","arguments":"not json"}}]}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"z","arguments":"[1]"}}]}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"z","arguments":["a"]}}]}]"#,
            r#"[{"role":"robot","content":"x"}]"#,
            r#"[{"role":"user","id":3,"content":"x"}]"#,
            r#"{"id":"s","messages":[],"system":"x"}"#,
            r#"{"id":"s"}"#,
            r#""text""#,
            r#"[{"role":"user","content":"a","content":"b"}]"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","arguments":"x","function":{"name":"a"}}]}]"#,
            r#"[{"role":"assistant","content":"ok","usage":{"prompt_tokens":9,"completion_tokens":2}}]"#,
        ] {
            let mut rows = Rows::default();
            let mut buf = String::new();
            assert!(
                chat_line(doc, "file", 7, false, &mut rows, &mut buf).is_none(),
                "{doc}"
            );
            assert!(rows.is_empty(), "{doc}");
        }
    }
}
