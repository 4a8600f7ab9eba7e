//! The fast path of Claude Code files: every line parsed into the borrowed
//! tree of `fast`, grouped and mapped by the rules of `claude_code::read_slow`,
//! `anthropic::Events` and `opencode::message`, and written straight into the
//! row builders.
//!
//! A file's events interact (grouping, results completing earlier calls,
//! positional ids), so the decision is per window of a file (the file
//! whole, or a window `claude_plan` cut): `claude_code::read_file` asks
//! `claude_code::read_fast` first. It answers, and its rows and lines are
//! the window's, exactly when
//! - every line of the window (blank ones aside) is valid UTF-8 and one JSON
//!   value `fast::parse` is sure of (see `fast.rs`);
//! - every event is an object with a string `type`, its `sessionId` and
//!   `uuid` absent, null or strings, and the message id it gets (its `uuid`,
//!   or the positional `<session>-e<n>`) not given before in its session;
//! - an event's `message`, when an object, has `content` absent, null, a
//!   string or an array of blocks, each an object whose `type` is `text`
//!   (`text` absent or a string), `thinking` or `redacted_thinking`
//!   (`thinking` absent or a string), `tool_use` (string `id` and `name`,
//!   `input` absent, null or an object) or `tool_result` (string
//!   `tool_use_id`, `is_error` absent, null or a bool, `content` absent,
//!   null, a string or an array of objects whose `text` is absent or a
//!   string); an assistant's `parentUuid`, `stop_reason` and `model` are
//!   absent, null or strings, its `usage` absent, null, or an object whose
//!   counts are absent, null, bools or integers of up to 18 digits;
//! - an event without a `message` object has `summary` and `content` absent,
//!   null or strings;
//! - no call gets a second result.
//!
//! Otherwise `read_file` here returns `None` with nothing built and the
//! file's `Carry` unchanged, and `read_slow` (serde_json) reads the window:
//! its rows, and its errors, are that path's. `differential.rs` checks that
//! both give the same rows and line outcomes on every window this path
//! answers for, the sample files of `../shared/data` cut into one to three
//! windows among them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::claude_file::{is_aside, At, Carried, Carry, FileOut, Kept, Known};
use super::fast::{get, write_entries, write_json, Obj, J};
use super::opencode::session_json;
use super::pyjson::write_str;
use super::pyjson::COMPACT;
use super::rows::{MessageRef, PartRef, Rows};

struct Part<'a> {
    id: String,
    kind: &'static str,
    tool: Option<&'a str>,
    status: &'static str,
    input: Option<String>,
    output: Option<Cow<'a, str>>,
    json: String,
}

struct Message<'a> {
    session: usize,
    id: String,
    role: &'static str,
    parent_id: Option<&'a str>,
    finished: bool,
    json: String,
    parts: Vec<Part<'a>>,
}

impl<'a> Message<'a> {
    /// A system message of session `index` (its id is set once it is placed).
    fn system(session: usize, json: String, parts: Vec<Part<'a>>) -> Self {
        Message {
            session,
            id: String::new(),
            role: "system",
            parent_id: None,
            finished: false,
            json,
            parts,
        }
    }
}

/// `{k: v ...}` of `map` without `skip`, compact, appended to `out`.
fn write_without(out: &mut String, map: &Obj<'_>, skip: &[&str]) {
    let kept = map.iter().filter(|(key, _)| !skip.contains(&&**key));
    write_entries(out, kept, COMPACT);
}

/// A string that is truthy (`Some(Some)`), falsy or absent (`Some(None)`), or `None` for another type.
fn truthy_str<'m>(map: &'m Obj<'_>, key: &str) -> Option<Option<&'m str>> {
    match get(map, key) {
        None | Some(J::Null) => Some(None),
        Some(J::Str(s)) => Some((!s.is_empty()).then_some(&**s)),
        _ => None,
    }
}

/// A `str | None` field: `Some(None)` for absent or null, `None` for another type.
fn str_or_null<'m>(map: &'m Obj<'_>, key: &str) -> Option<Option<&'m str>> {
    match get(map, key) {
        None | Some(J::Null) => Some(None),
        Some(J::Str(s)) => Some(Some(s)),
        _ => None,
    }
}

fn write_opt_str(out: &mut String, value: Option<&str>) {
    match value {
        Some(s) => write_str(out, s, false),
        None => out.push_str("null"),
    }
}

/// A usage count as `anthropic::usage` writes it, for the values it is sure of.
fn count(usage: &Obj<'_>, key: &str, out: &mut String) -> Option<()> {
    match get(usage, key) {
        None | Some(J::Null) | Some(J::Bool(false)) => out.push('0'),
        Some(J::Bool(true)) => out.push('1'),
        Some(J::Num(text)) if text.len() <= 18 && text.bytes().all(|b| b.is_ascii_digit()) => {
            let digits = text.trim_start_matches('0');
            out.push_str(if digits.is_empty() { "0" } else { digits });
        }
        _ => return None,
    }
    Some(())
}

fn write_usage(out: &mut String, usage: Option<&J<'_>>) -> Option<()> {
    let usage = match usage {
        Some(J::Obj(usage)) => usage,
        None | Some(J::Null) => {
            out.push_str("null");
            return Some(());
        }
        // anything else is null to `usage` too, but stay with the plain shapes
        _ => return None,
    };
    out.push_str("{\"input\":");
    count(usage, "input_tokens", out)?;
    out.push_str(",\"output\":");
    count(usage, "output_tokens", out)?;
    out.push_str(",\"cache\":{\"read\":");
    count(usage, "cache_read_input_tokens", out)?;
    out.push_str(",\"write\":");
    count(usage, "cache_creation_input_tokens", out)?;
    out.push_str("}}");
    Some(())
}

/// `result_text` of a tool result's content, for the shapes it is sure of.
pub(super) fn result_text<'m>(content: Option<&'m J<'_>>) -> Option<Cow<'m, str>> {
    match content {
        None | Some(J::Null) => Some(Cow::Borrowed("")),
        Some(J::Str(text)) => Some(Cow::Borrowed(&**text)),
        Some(J::Arr(blocks)) => {
            let mut out = String::new();
            for (i, b) in blocks.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                let J::Obj(block) = b else { return None };
                match get(block, "text") {
                    None => {}
                    Some(J::Str(text)) => out.push_str(text),
                    Some(_) => return None,
                }
            }
            Some(Cow::Owned(out))
        }
        Some(_) => None,
    }
}

/// What a block does to the session's tool parts (`anthropic::Op`).
enum Op<'a> {
    Call(&'a str, usize),
    Result(&'a str, bool, Cow<'a, str>),
}

fn text_row<'a>(id: String, text: Cow<'a, str>) -> Part<'a> {
    Part {
        id,
        kind: "text",
        tool: None,
        status: "",
        input: None,
        output: Some(text),
        json: "{}".to_owned(),
    }
}

/// The part rows of a message's blocks and what they do to tool parts.
fn blocks<'m, 'a>(
    mid: &str,
    content: &'m [J<'a>],
    out: &mut Vec<Part<'m>>,
    ops: &mut Vec<Op<'m>>,
) -> Option<()> {
    // after the parts the message has (a later line of its model call)
    let first = out.len();
    for (j, block) in content.iter().enumerate() {
        let pid = format!("{mid}-p{:02}", first + j);
        let J::Obj(b) = block else { return None };
        let part = match truthy_str(b, "type")? {
            Some("text") => {
                let text = match get(b, "text") {
                    None => Cow::Borrowed(""),
                    Some(J::Str(s)) => Cow::Borrowed(&**s),
                    Some(_) => return None,
                };
                let mut row = text_row(pid, text);
                if b.iter()
                    .any(|(k, _)| !matches!(&**k, "type" | "text" | "thinking"))
                {
                    row.json.clear();
                    row.json.push_str("{\"source\":");
                    write_without(&mut row.json, b, &["type", "text", "thinking"]);
                    row.json.push('}');
                }
                row
            }
            Some(kind @ ("thinking" | "redacted_thinking")) => {
                let text = match get(b, "thinking") {
                    None => Cow::Borrowed(""),
                    Some(J::Str(s)) => Cow::Borrowed(&**s),
                    Some(_) => return None,
                };
                let mut json = String::from("{\"source\":{\"type\":");
                write_str(&mut json, kind, false);
                for (key, item) in b {
                    if matches!(&**key, "type" | "text" | "thinking") {
                        continue;
                    }
                    json.push(',');
                    write_str(&mut json, key, false);
                    json.push(':');
                    write_json(&mut json, item, COMPACT);
                }
                json.push_str("}}");
                Part {
                    id: pid,
                    kind: "reasoning",
                    tool: None,
                    status: "",
                    input: None,
                    output: Some(text),
                    json,
                }
            }
            Some("tool_use") => {
                let (Some(J::Str(name)), Some(J::Str(id))) = (get(b, "name"), get(b, "id")) else {
                    return None;
                };
                let input = match get(b, "input") {
                    Some(input @ J::Obj(_)) => {
                        let mut text = String::new();
                        write_json(&mut text, input, COMPACT);
                        text
                    }
                    None | Some(J::Null) => "{}".to_owned(),
                    _ => return None,
                };
                ops.push(Op::Call(id, out.len()));
                let mut json = String::from("{\"callID\":");
                write_str(&mut json, id, false);
                json.push_str(",\"state\":{},\"source\":");
                write_json(&mut json, block, COMPACT);
                json.push('}');
                Part {
                    id: pid,
                    kind: "tool",
                    tool: Some(name),
                    status: "pending",
                    input: Some(input),
                    output: None,
                    json,
                }
            }
            Some("tool_result") => {
                let Some(J::Str(call)) = get(b, "tool_use_id") else {
                    return None;
                };
                let failed = match get(b, "is_error") {
                    None | Some(J::Null) => false,
                    Some(J::Bool(failed)) => *failed,
                    _ => return None,
                };
                ops.push(Op::Result(call, failed, result_text(get(b, "content"))?));
                let mut json = String::from("{\"callID\":");
                write_str(&mut json, call, false);
                json.push_str(",\"source\":");
                write_json(&mut json, block, COMPACT);
                json.push('}');
                Part {
                    id: pid,
                    kind: "tool-result",
                    tool: None,
                    status: "",
                    input: None,
                    output: None,
                    json,
                }
            }
            _ => return None,
        };
        out.push(part);
    }
    Some(())
}

/// The messages of one session so far (`anthropic::Events`).
struct Session<'m> {
    id: &'m str,
    /// Messages of earlier windows, and their ids.
    base: usize,
    known: Option<&'m Known>,
    messages: usize,
    /// The ids given in this window.
    ids: HashSet<String>,
    calls: HashMap<&'m str, (usize, usize)>,
    /// Its assistant messages of this window by API message id (`anthropic::call_id`).
    models: HashMap<&'m str, usize>,
}

impl<'m> Session<'m> {
    /// A session read `base` messages into (their ids `known`).
    fn new(id: &'m str, base: usize, known: Option<&'m Known>) -> Self {
        Session {
            id,
            base,
            known,
            messages: base,
            ids: HashSet::new(),
            calls: HashMap::new(),
            models: HashMap::new(),
        }
    }

    fn has(&self, id: &str) -> bool {
        self.ids.contains(id) || self.known.is_some_and(|k| k.contains(id))
    }
}

/// What a window read by the fast path changes in the file's `Carry`.
pub(super) struct Update {
    /// Per session (the carried ones first): its message count and new ids.
    sessions: Vec<(String, usize, HashSet<String>)>,
    current: String,
    started: bool,
}

impl Update {
    pub(super) fn apply(self, carry: &mut Carry) {
        let carried = carry.sessions.len();
        for (k, (id, messages, ids)) in self.sessions.into_iter().enumerate() {
            // the ids matter only if another window follows
            let ids = ids.into_iter().filter(|_| carry.windowed);
            if k < carried {
                let session = &mut carry.sessions[k];
                session.messages = messages;
                session.ids.extend(ids);
            } else {
                let mut known = Known::default();
                known.extend(ids);
                carry.sessions.push(Carried {
                    id,
                    messages,
                    ids: known,
                });
            }
        }
        carry.current = self.current;
        carry.started = self.started;
    }
}

/// What the blocks of message `at` do to the session's tool parts; `None`
/// for a second result of a call (the slow path keeps both texts).
fn apply<'m>(
    session: &mut Session<'m>,
    messages: &mut [Message<'m>],
    at: usize,
    ops: &mut Vec<Op<'m>>,
) -> Option<()> {
    for op in ops.drain(..) {
        match op {
            Op::Call(call, part) => {
                session.calls.insert(call, (at, part));
            }
            Op::Result(call, failed, text) => {
                if let Some(&(m, p)) = session.calls.get(call) {
                    let part = &mut messages[m].parts[p];
                    if part.status != "pending" {
                        // a second result leaves both texts in the state
                        return None;
                    }
                    part.status = if failed { "error" } else { "completed" };
                    part.output = Some(text);
                }
            }
        }
    }
    Some(())
}

/// A window of a Claude Code file, appended as `claude_code::read_file`
/// would, and what it changes in `carry`; `None` (nothing built) for the
/// serde_json path to read.
pub fn read_file<'t>(
    lines: &[(usize, Range<usize>)],
    trees: &'t [J<'t>],
    carry: &'t Carry,
) -> Option<(FileOut, Update)> {
    let carried = carry.sessions.iter();
    let mut window = Window {
        sessions: carried
            .map(|c| Session::new(&c.id, c.messages, Some(&c.ids)))
            .collect(),
        by_id: HashMap::new(),
        messages: Vec::with_capacity(trees.len()),
        placed: Vec::with_capacity(trees.len()),
        ops: Vec::new(),
    };
    window.by_id = (window.sessions.iter().enumerate())
        .map(|(i, s)| (s.id, i))
        .collect();
    let mut current: &str = &carry.current;
    let (held, target, started) = held_asides(trees, current, carry.started)?;
    for (k, tree) in trees.iter().enumerate() {
        let J::Obj(event) = tree else { return None };
        let Some(J::Str(_)) = get(event, "type") else {
            return None;
        };
        let given = truthy_str(event, "sessionId")?;
        let sid = if k < held {
            target
        } else {
            given.unwrap_or(current)
        };
        let index = window.session(sid);
        current = sid;
        window.event(event, index)?;
    }
    // Everything checked: the rows, session by session.
    let (rows, kept) = window.rows();
    let lines = lines
        .iter()
        .zip(window.placed)
        .map(|((line, raw), (at, opens))| {
            let mut kept = kept[at].clone().expect("every message is placed");
            kept.first &= opens;
            At {
                line: *line,
                raw: raw.clone(),
                outcome: Ok(kept),
            }
        })
        .collect();
    let update = Update {
        started,
        current: current.to_owned(),
        sessions: (window.sessions.into_iter())
            .map(|s| (s.id.to_owned(), s.messages, s.ids))
            .collect(),
    };
    Some((FileOut { rows, lines }, update))
}

/// Aside lines (titles, file snapshots) without a session id before the
/// file's first other event join that event's session: how many lines lead
/// the window so (`held`), the session they join, and whether an event other
/// than an aside has been read (`Carry::started`).
fn held_asides<'t>(
    trees: &'t [J<'t>],
    current: &'t str,
    started: bool,
) -> Option<(usize, &'t str, bool)> {
    let (mut held, mut target, mut started) = (0, current, started);
    for tree in trees {
        if started {
            break;
        }
        let J::Obj(event) = tree else { return None };
        let given = truthy_str(event, "sessionId")?;
        match given {
            None if matches!(get(event, "type"), Some(J::Str(t)) if is_aside(t.as_bytes())) => {
                held += 1
            }
            _ => {
                target = given.unwrap_or(current);
                started = true;
            }
        }
    }
    Some((held, target, started))
}

/// The API message id of an assistant event and its content (`anthropic::call_id`).
fn model_call<'m, 'a>(event: &'m Obj<'a>) -> Option<(&'m str, Option<&'m J<'a>>)> {
    match get(event, "message") {
        Some(J::Obj(body)) if matches!(get(body, "role"), Some(J::Str(r)) if r == "assistant") => {
            match get(body, "id") {
                Some(J::Str(id)) if !id.is_empty() => Some((&**id, get(body, "content"))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The sessions and messages of a window as its lines are read.
struct Window<'m> {
    sessions: Vec<Session<'m>>,
    by_id: HashMap<&'m str, usize>,
    messages: Vec<Message<'m>>,
    /// per line: its message, and whether the line made it
    placed: Vec<(usize, bool)>,
    ops: Vec<Op<'m>>,
}

impl<'m> Window<'m> {
    /// The index of session `sid`, made if new.
    fn session(&mut self, sid: &'m str) -> usize {
        match self.by_id.get(sid) {
            Some(&i) => i,
            None => {
                self.sessions.push(Session::new(sid, 0, None));
                self.by_id.insert(sid, self.sessions.len() - 1);
                self.sessions.len() - 1
            }
        }
    }

    /// One event of session `index`: a later line of a model call adds its
    /// blocks to the call's message, any other makes a message.
    fn event(&mut self, event: &'m Obj<'m>, index: usize) -> Option<()> {
        self.ops.clear();
        let call = model_call(event);
        let session = &mut self.sessions[index];
        if let Some(&at) = call.and_then(|(id, _)| session.models.get(id)) {
            let message = &mut self.messages[at];
            match call.and_then(|(_, content)| content) {
                None | Some(J::Null) => {}
                Some(J::Str(text)) => {
                    let pid = format!("{}-p{:02}", message.id, message.parts.len());
                    message.parts.push(text_row(pid, Cow::Borrowed(&**text)));
                }
                Some(J::Arr(items)) => {
                    blocks(&message.id, items, &mut message.parts, &mut self.ops)?
                }
                _ => return None,
            }
            session.messages += 1;
            self.placed.push((at, false));
            return apply(session, &mut self.messages, at, &mut self.ops);
        }
        let mut mid = format!("{}-e{:06}", session.id, session.messages);
        if let Some(uuid) = truthy_str(event, "uuid")? {
            if !session.has(uuid) {
                mid = uuid.to_owned();
            }
        }
        if session.has(&mid) {
            return None;
        }
        let message = event_message(event, &mid, session.id, index, &mut self.ops)?;
        let at = self.messages.len();
        self.messages.push(Message { id: mid, ..message });
        session.messages += 1;
        session.ids.insert(self.messages[at].id.clone());
        if let Some((id, _)) = call {
            session.models.insert(id, at);
        }
        self.placed.push((at, true));
        apply(session, &mut self.messages, at, &mut self.ops)
    }

    /// The rows, session by session, and what each message became.
    fn rows(&self) -> (Rows, Vec<Option<Kept>>) {
        let mut order: Vec<Vec<usize>> = vec![Vec::new(); self.sessions.len()];
        for (i, m) in self.messages.iter().enumerate() {
            order[m.session].push(i);
        }
        let mut rows = Rows::default();
        let mut kept: Vec<Option<Kept>> = (0..self.messages.len()).map(|_| None).collect();
        for (s, session) in self.sessions.iter().enumerate() {
            let json = session_json(session.id);
            let mut session_json = (session.base == 0).then_some(json.as_str());
            for (k, &i) in order[s].iter().enumerate() {
                let m = &self.messages[i];
                let start = rows.len();
                let head = MessageRef {
                    id: &m.id,
                    role: m.role,
                    parent_id: m.parent_id,
                    summary: false,
                    finished: m.finished,
                    error: false,
                    json: &m.json,
                };
                let mut head = (head, true);
                if m.parts.is_empty() {
                    rows.push_ref(session.id, session_json.take(), Some(&head), None);
                }
                for p in &m.parts {
                    let part = PartRef {
                        id: &p.id,
                        kind: p.kind,
                        tool: p.tool,
                        status: (!p.status.is_empty()).then_some(p.status),
                        input: p.input.as_deref(),
                        output: p.output.as_deref(),
                        compacted_at: None,
                        auto: None,
                        json: &p.json,
                    };
                    rows.push_ref(session.id, session_json.take(), Some(&head), Some(&part));
                    head.1 = false;
                }
                kept[i] = Some(Kept {
                    session: session.id.to_owned(),
                    rows: start..rows.len(),
                    first: k == 0 && session.base == 0,
                });
            }
        }
        (rows, kept)
    }
}

/// The message an event makes (`mid` of session `sid`, the `index`th of the
/// window): an assistant's or user's message body, a title, or another
/// event's text; its blocks' calls and results go to `ops`.
fn event_message<'m>(
    event: &'m Obj<'m>,
    mid: &str,
    sid: &str,
    index: usize,
    ops: &mut Vec<Op<'m>>,
) -> Option<Message<'m>> {
    let mut json = String::with_capacity(256);
    json.push_str("{\"id\":");
    write_str(&mut json, mid, false);
    json.push_str(",\"sessionID\":");
    write_str(&mut json, sid, false);
    let mut parts = Vec::new();
    Some(match get(event, "message") {
        Some(J::Obj(body)) => body_message(event, body, mid, index, json, ops)?,
        _ if matches!(get(event, "type"), Some(J::Str(t)) if t == "summary") => {
            // a conversation's title, never model input: the event whole, no part
            json.push_str(",\"role\":\"system\",\"source\":{\"event\":");
            write_without(&mut json, event, &[]);
            json.push_str(",\"text_key\":null}}");
            Message::system(index, json, parts)
        }
        _ => {
            // system and other events without a message body
            let summary = truthy_str(event, "summary")?;
            let text = summary.or(truthy_str(event, "content")?);
            json.push_str(",\"role\":\"system\",\"source\":{\"event\":");
            write_without(&mut json, event, &["summary"]);
            json.push_str(",\"text_key\":");
            json.push_str(if get(event, "summary").is_some() {
                "\"summary\""
            } else {
                "null"
            });
            json.push_str("}}");
            if let Some(text) = text {
                let mut part = text_row(format!("{mid}-p00"), Cow::Borrowed(text));
                if matches!(get(event, "type"), Some(J::Str(t)) if t == "system") {
                    // shown to the user (hooks, local commands, retries), never sent
                    part.json = "{\"ignored\":true}".to_owned();
                }
                parts.push(part);
            }
            Message::system(index, json, parts)
        }
    })
}

/// The message of an event with a message `body` (an assistant's or a
/// user's), its JSON begun in `json`.
fn body_message<'m>(
    event: &'m Obj<'m>,
    body: &'m Obj<'m>,
    mid: &str,
    index: usize,
    mut json: String,
    ops: &mut Vec<Op<'m>>,
) -> Option<Message<'m>> {
    let mut parts = Vec::new();
    let assistant = matches!(get(body, "role"), Some(J::Str(r)) if r == "assistant");
    let mut parent_id = None;
    let mut finished = false;
    if assistant {
        json.push_str(",\"role\":\"assistant\",\"parentID\":");
        parent_id = str_or_null(event, "parentUuid")?;
        write_opt_str(&mut json, parent_id);
        json.push_str(",\"finish\":");
        let finish = str_or_null(body, "stop_reason")?;
        finished = finish.is_some();
        write_opt_str(&mut json, finish);
        json.push_str(",\"tokens\":");
        write_usage(&mut json, get(body, "usage"))?;
        json.push_str(",\"modelID\":");
        write_opt_str(&mut json, str_or_null(body, "model")?);
    } else {
        json.push_str(",\"role\":\"user\"");
    }
    let content = get(body, "content");
    match content {
        None | Some(J::Null) => {}
        Some(J::Str(text)) => parts.push(text_row(format!("{mid}-p00"), Cow::Borrowed(&**text))),
        Some(J::Arr(items)) => blocks(mid, items, &mut parts, ops)?,
        _ => return None,
    }
    json.push_str(",\"source\":{\"event\":");
    write_without(&mut json, event, &["message"]);
    json.push_str(",\"message\":");
    write_without(&mut json, body, &["content"]);
    json.push_str(",\"content_is_text\":");
    json.push_str(if matches!(content, Some(J::Str(_))) {
        "true"
    } else {
        "false"
    });
    json.push_str(",\"has_content\":");
    json.push_str(if content.is_some() { "true" } else { "false" });
    json.push_str("}}");
    Some(Message {
        session: index,
        id: String::new(),
        role: if assistant { "assistant" } else { "user" },
        parent_id,
        finished,
        json,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::super::claude_code::{read_fast, read_slow};
    use super::super::lines::split;
    use super::super::{Format, Source};
    use super::*;

    type Outcomes = Vec<(
        usize,
        Range<usize>,
        Result<(String, Range<usize>, bool), String>,
    )>;

    fn outcomes(out: &FileOut) -> Outcomes {
        out.lines
            .iter()
            .map(|l| {
                let o = match &l.outcome {
                    Ok(k) => Ok((k.session.clone(), k.rows.clone(), k.first)),
                    Err(p) => Err(format!("{p:?}")),
                };
                (l.line, l.raw.clone(), o)
            })
            .collect()
    }

    /// Both paths on `text`: the fast one's answer (if any) and the slow one's.
    fn both(text: &str) -> (Option<FileOut>, FileOut) {
        let source = Source::new("dir/cc.v1.jsonl", text.as_bytes(), Format::ClaudeCode);
        let mut chunks = Vec::new();
        split(0, source.data, 64, &mut chunks);
        let fast = read_fast(source.data, &chunks, &mut Carry::new("cc.v1".into()));
        let slow = read_slow(&source, &chunks, &mut Carry::new("cc.v1".into()));
        (fast, slow)
    }

    fn same(text: &str) {
        let (fast, slow) = both(text);
        let fast = fast.unwrap_or_else(|| panic!("no fast path for {text}"));
        assert_eq!(outcomes(&fast), outcomes(&slow), "{text}");
        assert_eq!(fast.rows.finish(), slow.rows.finish(), "{text}");
    }

    const FILE: &str = r#"{"type":"summary","summary":"before \u00e9","leafUuid":"x"}
{"type":"user","uuid":"u1","sessionId":"s","cwd":"/x","message":{"role":"user","content":"fix it \ud83d\ude00\n"}}
{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","message":{"id":"msg","role":"assistant","model":"claude","stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":0,"cache_read_input_tokens":true,"cache_creation_input_tokens":70},"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"ok","citations":null},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls","n":1.50}},{"type":"tool_use","id":"t2","name":"Read","input":null},{"type":"tool_use","id":"t3","name":"Read"}]}}
{"type":"user","uuid":"b1","sessionId":"r","message":{"role":"user","content":[]}}
{"type":"user","uuid":"a1","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}],"is_error":true},{"type":"tool_result","tool_use_id":"t2","content":"out"},{"type":"tool_result","tool_use_id":"zz"},{"type":"text"}]}}
{"type":"system","content":"compacted","level":"info"}
{"type":"assistant","sessionId":"s","message":{"role":"assistant","content":null}}
{"type":"user","uuid":"","sessionId":"","message":{"role":"user"}}

{"type":"user","uuid":"u2","sessionId":"r","message":{"role":"user","content":[{"type":"tool_use","id":"t9","name":"x","input":{}},{"type":"tool_result","tool_use_id":"t9","content":"same message","is_error":false}]}}
{"type":"assistant","uuid":"a9","sessionId":"s","message":{"role":"assistant","content":"plain","usage":null,"model":null}}
{"type":"x","message":"not an object","summary":null}
"#;

    #[test]
    fn claude_code_files_make_the_rows_of_the_serde_json_path() {
        same(FILE);
        same("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n");
        // the stem as a session id joins the session of the lines without one
        same("{\"type\":\"summary\"}\n{\"type\":\"user\",\"sessionId\":\"cc.v1\",\"uuid\":\"cc.v1-e000000\",\"message\":{\"role\":\"user\"}}\n");
        // summary lines before the first other event wait for its session
        same("{\"type\":\"summary\"}\n{\"type\":\"summary\",\"sessionId\":\"\",\"uuid\":\"k\"}\n{\"type\":\"user\",\"message\":{\"role\":\"user\"}}\n{\"type\":\"summary\",\"summary\":\"t\"}\n");
        same("{\"type\":\"summary\",\"summary\":\"a\"}\n{\"type\":\"summary\",\"uuid\":\"k\"}\n");
        // so do file-history snapshots
        same("{\"type\":\"file-history-snapshot\",\"messageId\":\"m\",\"snapshot\":{}}\n{\"type\":\"summary\"}\n{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\"}}\n{\"type\":\"file-history-snapshot\",\"snapshot\":{}}\n");
        same("{\"type\":\"file-history-snapshot\",\"snapshot\":{}}\n");
    }

    /// One model call written a block a line (text, tool_use, its result,
    /// the next tool_use), its result, and the next call.
    const CALL: &str = r#"{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"list"}}
{"type":"assistant","uuid":"a1","sessionId":"s","message":{"id":"msg_1","role":"assistant","usage":{"input_tokens":10},"content":[{"type":"text","text":"look"}]}}
{"type":"assistant","uuid":"a2","sessionId":"s","message":{"id":"msg_1","role":"assistant","usage":{"input_tokens":10},"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}
{"type":"user","uuid":"r1","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a"}]}}
{"type":"assistant","uuid":"a3","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":"more"}}
{"type":"assistant","uuid":"a4","sessionId":"r","message":{"id":"msg_1","role":"assistant","content":"another session"}}
{"type":"assistant","uuid":"a5","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}
{"type":"user","uuid":"r2","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"b"}]}}
{"type":"assistant","uuid":"a6","sessionId":"s","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"done"}]}}
{"type":"assistant","uuid":"a7","sessionId":"s","message":{"id":"","role":"assistant","content":"no id"}}
{"type":"assistant","uuid":"a8","sessionId":"s","message":{"id":"","role":"assistant","content":"no id"}}
"#;

    #[test]
    fn the_lines_of_one_model_call_make_one_message_on_both_paths() {
        same(CALL);
        let (fast, _) = both(CALL);
        let fast = fast.unwrap();
        let batch = fast.rows.finish();
        let ids = batch
            .column_by_name("part_id")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        let ids: Vec<_> = ids.iter().map(Option::unwrap).collect();
        // was a part a line: a1-p00, a2-p00, r1-p00, a3-p00...
        assert_eq!(
            ids,
            [
                "u1-p00", "a1-p00", "a1-p01", "a1-p02", "a1-p03", "r1-p00", "r2-p00", "a6-p00",
                "a7-p00", "a8-p00", "a4-p00"
            ]
        );
        // the later lines of a call have its message's rows, and open nothing (the
        // session opened at line 1)
        let got: Vec<_> = fast
            .lines
            .iter()
            .map(|l| {
                l.outcome
                    .as_ref()
                    .map(|k| (k.rows.clone(), k.first))
                    .unwrap()
            })
            .collect();
        assert_eq!(got[1], (1..5, false));
        assert_eq!(got[2], (1..5, false));
        assert_eq!(got[4], got[1]);
        assert_eq!(got[0], (0..1, true));
    }

    #[test]
    fn files_with_a_line_it_is_unsure_of_are_left_to_serde_json() {
        for line in [
            r#"[1]"#,
            r#"{"message":{"role":"user","content":"no type"}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":null}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":["bare"]}}"#,
            r#"{"type":"user","message":{"role":"user","content":{"a":1}}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":[1]}]}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","usage":{"input_tokens":1.5},"content":[]}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","stop_reason":1,"content":[]}}"#,
            r#"{"type":"user","uuid":5,"message":{"role":"user"}}"#,
            r#"{"type":"user","sessionId":7,"message":{"role":"user"}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":"again"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":{"x":1}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":1}]}}"#,
            r#"{"type":"user","type":"user"}"#,
            "not json",
        ] {
            // the file holds a call, its result, an event u1 of the stem session, then the line
            let text = format!(
                "{}\n{}\n{line}\n",
                r#"{"type":"assistant","uuid":"u1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t0","name":"n"}]}}"#,
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":"first"}]}}"#,
            );
            assert!(both(&text).0.is_none(), "{line}");
        }
    }
}
