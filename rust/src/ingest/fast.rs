//! The fast path of OpenCode session lines: the line parsed into a tree of
//! borrowed text (no per-key `String`, no hashed maps, numbers as slices of
//! the line), mapped by the rules of `opencode::session`, and written
//! straight into the row builders. `parse` and the tree also serve the
//! chat (`fast_chat`) and Claude Code (`fast_claude`) fast paths.
//!
//! When it applies (`lines::read_chunk`): every line of an `opencode` file
//! that is valid UTF-8 goes to `opencode_line` first. It answers, and its
//! rows are the line's, exactly when
//! - the line is one JSON value `parse` is sure of: no key given twice in an
//!   object, no lone surrogate escape, no control character in a string,
//!   nesting under 100 deep;
//! - it is an object whose `info` is an object with a string `id`, and whose
//!   `messages` is an array;
//! - every message is an object whose `info` is an object with a string `id`,
//!   `role` one of `user`, `assistant`, `system`, and `parentID` absent, null
//!   or a string; its `parts` absent or an array;
//! - every part is an object with a string `id` and `type`, `text` and `tool`
//!   absent, null or strings, `auto` absent, null or a bool; a tool part's
//!   `state` absent, null, or an object with `status` one of `pending`,
//!   `running`, `completed`, `error`, `output` and `error` absent, null or
//!   strings, `input` absent, null or an object, and `time` absent, null or
//!   an object whose `compacted` is absent, null or an integer.
//!
//! Otherwise it returns `None` with nothing appended, and the line is read
//! by serde_json (`lines::parse`, `opencode::session`): its rows, or its
//! error, are that path's. No other format takes this path (`opencode-messages`
//! lines neither). `differential.rs` checks that both give the same rows on
//! every line this path answers for.

use std::borrow::Cow;

use super::pyjson::{write_number_text, write_str, Style, COMPACT};
use super::rows::{MessageRef, PartRef, Rows};
use crate::jsontext::string_stop;

/// A JSON value of borrowed text.
pub enum J<'a> {
    Null,
    Bool(bool),
    /// The number's text as written.
    Num(&'a str),
    Str(Cow<'a, str>),
    Arr(Vec<J<'a>>),
    /// Keys in order, each once.
    Obj(Vec<(Cow<'a, str>, J<'a>)>),
}

/// serde_json's nesting limit is 128; stay well below it.
const MAX_DEPTH: usize = 100;

/// `text` as one JSON value, or `None` when serde_json might read it
/// differently (or not at all).
pub fn parse(text: &str) -> Option<J<'_>> {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    p.ws();
    let value = p.value()?;
    p.ws();
    (p.i == p.b.len()).then_some(value)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn value(&mut self) -> Option<J<'a>> {
        match self.peek()? {
            b'"' => self.string().map(J::Str),
            b'{' => self.object(),
            b'[' => self.array(),
            b'n' => self.literal("null", J::Null),
            b't' => self.literal("true", J::Bool(true)),
            b'f' => self.literal("false", J::Bool(false)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &str, value: J<'a>) -> Option<J<'a>> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Some(value)
        } else {
            None
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Option<J<'a>> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            float = true;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            float = true;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        let text = &self.s[start..self.i];
        // A float beyond f64: left to serde_json.
        if float && !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return None;
        }
        Some(J::Num(text))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.b.get(self.i..self.i + 4)?;
        let mut n = 0;
        for &d in digits {
            n = n * 16 + (d as char).to_digit(16)?;
        }
        self.i += 4;
        Some(n)
    }

    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.i += 1;
        let start = self.i;
        // Eight bytes at a time to the first quote, backslash or control byte.
        self.i += string_stop(&self.b[self.i..])?;
        match self.b[self.i] {
            b'"' => {
                let text = &self.s[start..self.i];
                self.i += 1;
                return Some(Cow::Borrowed(text));
            }
            b'\\' => {}
            _ => return None, // a control character
        }
        let mut out = String::with_capacity(self.i - start + 16);
        out.push_str(&self.s[start..self.i]);
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    self.i += 1;
                    let e = self.peek()?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let n = self.hex4()?;
                            let c = match n {
                                0xD800..=0xDBFF => {
                                    // only a whole surrogate pair; serde_json decides the rest
                                    if !self.b[self.i..].starts_with(b"\\u") {
                                        return None;
                                    }
                                    self.i += 2;
                                    let low = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&low) {
                                        return None;
                                    }
                                    char::from_u32(0x10000 + ((n - 0xD800) << 10) + (low - 0xDC00))?
                                }
                                0xDC00..=0xDFFF => return None,
                                n => char::from_u32(n)?,
                            };
                            out.push(c);
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                _ => {
                    let run = self.i;
                    self.i += string_stop(&self.b[self.i..])?;
                    out.push_str(&self.s[run..self.i]);
                }
            }
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        self.i += 1;
        self.ws();
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn array(&mut self) -> Option<J<'a>> {
        self.enter()?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.i += 1;
        } else {
            loop {
                items.push(self.value()?);
                self.ws();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        self.ws();
                    }
                    b']' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(J::Arr(items))
    }

    fn object(&mut self) -> Option<J<'a>> {
        self.enter()?;
        let mut items: Vec<(Cow<'a, str>, J<'a>)> = Vec::new();
        if self.peek() == Some(b'}') {
            self.i += 1;
        } else {
            loop {
                if self.peek()? != b'"' {
                    return None;
                }
                let key = self.string()?;
                // Repeated keys (and serde_json's private number / raw value
                // keys) are left to serde_json; a long object is not searched.
                if items.len() >= 32
                    || key.starts_with("$serde_json::private::")
                    || items.iter().any(|(k, _)| *k == key)
                {
                    return None;
                }
                self.ws();
                if self.peek()? != b':' {
                    return None;
                }
                self.i += 1;
                self.ws();
                let value = self.value()?;
                items.push((key, value));
                self.ws();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        self.ws();
                    }
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(J::Obj(items))
    }
}

/// `json.dumps(v, ensure_ascii=False, separators=(",", ":"))` of an object's
/// entries (the `*_json` columns), appended to `out`.
pub(super) fn write_object(out: &mut String, map: &[(Cow<'_, str>, J<'_>)]) {
    write_entries(out, map, COMPACT)
}

/// `json.dumps` of `value` in `style` (pyjson's `dumps` of the same value), appended to `out`.
pub(super) fn write_json(out: &mut String, value: &J<'_>, style: Style) {
    let comma = if style.spaced { ", " } else { "," };
    match value {
        J::Null => out.push_str("null"),
        J::Bool(true) => out.push_str("true"),
        J::Bool(false) => out.push_str("false"),
        J::Num(text) => write_number_text(out, text),
        J::Str(s) => write_str(out, s, style.ascii),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                write_json(out, item, style);
            }
            out.push(']');
        }
        J::Obj(map) => write_entries(out, map, style),
    }
}

/// `write_json` of an object's entries.
pub(super) fn write_entries<'m, 'a: 'm>(
    out: &mut String,
    map: impl IntoIterator<Item = &'m (Cow<'a, str>, J<'a>)>,
    style: Style,
) {
    out.push('{');
    for (i, (key, item)) in map.into_iter().enumerate() {
        if i > 0 {
            out.push_str(if style.spaced { ", " } else { "," });
        }
        write_str(out, key, style.ascii);
        out.push_str(if style.spaced { ": " } else { ":" });
        write_json(out, item, style);
    }
    out.push('}');
}

pub(super) type Obj<'a> = Vec<(Cow<'a, str>, J<'a>)>;

pub(super) fn get<'m, 'a>(map: &'m Obj<'a>, key: &str) -> Option<&'m J<'a>> {
    map.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

pub(super) fn remove<'a>(map: &mut Obj<'a>, key: &str) -> Option<J<'a>> {
    let at = map.iter().position(|(k, _)| k == key)?;
    Some(map.remove(at).1)
}

/// A string field (`Some(None)`: absent or null; `None`: another type).
fn optional_str<'m>(map: &'m Obj<'_>, key: &str) -> Option<Option<&'m str>> {
    match get(map, key) {
        None | Some(J::Null) => Some(None),
        Some(J::Str(s)) => Some(Some(s)),
        Some(_) => None,
    }
}

fn required_str<'m>(map: &'m Obj<'_>, key: &str) -> Option<&'m str> {
    match get(map, key) {
        Some(J::Str(s)) => Some(s),
        _ => None,
    }
}

fn present(map: &Obj<'_>, key: &str) -> bool {
    !matches!(get(map, key), None | Some(J::Null))
}

/// A range of the shared text buffer.
pub(super) type Span = std::ops::Range<usize>;

pub(super) fn write_span(buf: &mut String, write: impl FnOnce(&mut String)) -> Span {
    let start = buf.len();
    write(buf);
    start..buf.len()
}

struct Message<'a> {
    id: Cow<'a, str>,
    role: Cow<'a, str>,
    parent_id: Option<Cow<'a, str>>,
    summary: bool,
    finished: bool,
    error: bool,
    json: Span,
    parts: Vec<Part<'a>>,
}

#[derive(Default)]
struct Part<'a> {
    id: Cow<'a, str>,
    kind: Cow<'a, str>,
    tool: Option<Cow<'a, str>>,
    status: Option<Cow<'a, str>>,
    input: Option<Span>,
    output: Option<Cow<'a, str>>,
    compacted_at: Option<i64>,
    auto: Option<bool>,
    json: Span,
}

/// A session export line, appended to `rows` as `opencode::session` and
/// `SessionRows::emit` would; `(session id, message ids)`, or `None` (and
/// nothing appended) for the serde_json path to read.
pub fn opencode_line(
    text: &str,
    rows: &mut Rows,
    buf: &mut String,
) -> Option<(String, Vec<String>)> {
    buf.clear();
    let J::Obj(mut export) = parse(text)? else {
        return None;
    };
    let J::Obj(info) = remove(&mut export, "info")? else {
        return None;
    };
    let id = required_str(&info, "id")?.to_owned();
    let J::Arr(raw_messages) = remove(&mut export, "messages")? else {
        return None;
    };
    let session_json = write_span(buf, |b| write_object(b, &info));
    let mut messages = Vec::with_capacity(raw_messages.len());
    for raw in raw_messages {
        messages.push(message(raw, buf)?);
    }
    // Everything checked: the rows.
    let mut json = Some(&buf[session_json]);
    if messages.is_empty() {
        rows.push_ref(&id, json, None, None);
    }
    for m in &messages {
        let head = MessageRef {
            id: &m.id,
            role: &m.role,
            parent_id: m.parent_id.as_deref(),
            summary: m.summary,
            finished: m.finished,
            error: m.error,
            json: &buf[m.json.clone()],
        };
        if m.parts.is_empty() {
            rows.push_ref(&id, json.take(), Some(&(head, true)), None);
            continue;
        }
        let mut head = (head, true);
        for p in &m.parts {
            let part = PartRef {
                id: &p.id,
                kind: &p.kind,
                tool: p.tool.as_deref(),
                status: p.status.as_deref(),
                input: p.input.clone().map(|s| &buf[s]),
                output: p.output.as_deref(),
                compacted_at: p.compacted_at,
                auto: p.auto,
                json: &buf[p.json.clone()],
            };
            rows.push_ref(&id, json.take(), Some(&head), Some(&part));
            head.1 = false;
        }
    }
    let ids = messages.into_iter().map(|m| m.id.into_owned()).collect();
    Some((id, ids))
}

fn message<'a>(value: J<'a>, buf: &mut String) -> Option<Message<'a>> {
    let J::Obj(mut raw) = value else {
        return None;
    };
    let J::Obj(mut info) = remove(&mut raw, "info")? else {
        return None;
    };
    required_str(&info, "id")?;
    let role = required_str(&info, "role")?;
    if !matches!(role, "user" | "assistant" | "system") {
        return None;
    }
    optional_str(&info, "parentID")?;
    let summary = matches!(get(&info, "summary"), Some(J::Bool(true)));
    let finished = present(&info, "finish");
    let error = present(&info, "error");
    let json = write_span(buf, |b| write_object(b, &info));
    // The checked fields, taken out of `info` (already written) without copies.
    let mut take = |key: &str| match get(&info, key) {
        Some(J::Str(_)) => match remove(&mut info, key) {
            Some(J::Str(s)) => Some(s),
            _ => None,
        },
        _ => None,
    };
    let id = take("id")?;
    let role = take("role")?;
    let parent_id = take("parentID");
    let parts = match remove(&mut raw, "parts") {
        None => Vec::new(),
        Some(J::Arr(items)) => items,
        Some(_) => return None,
    };
    let mut out = Vec::with_capacity(parts.len());
    for raw in parts {
        out.push(part(raw, buf)?);
    }
    Some(Message {
        id,
        role,
        parent_id,
        summary,
        finished,
        error,
        json,
        parts: out,
    })
}

fn take_str<'a>(map: &mut Obj<'a>, key: &str) -> Option<Cow<'a, str>> {
    match remove(map, key)? {
        J::Str(s) => Some(s),
        _ => None,
    }
}

fn part<'a>(value: J<'a>, buf: &mut String) -> Option<Part<'a>> {
    let J::Obj(mut rest) = value else {
        return None;
    };
    required_str(&rest, "id")?;
    required_str(&rest, "type")?;
    let mut row = Part {
        id: take_str(&mut rest, "id")?,
        kind: take_str(&mut rest, "type")?,
        ..Default::default()
    };
    for key in ["text", "tool"] {
        optional_str(&rest, key)?;
    }
    if matches!(&*row.kind, "text" | "reasoning") {
        if let Some(J::Str(_)) = get(&rest, "text") {
            row.output = take_str(&mut rest, "text");
        }
    }
    match get(&rest, "auto") {
        None | Some(J::Null) => {}
        Some(J::Bool(auto)) => {
            if row.kind == "compaction" {
                row.auto = Some(*auto);
                remove(&mut rest, "auto");
            }
        }
        Some(_) => return None,
    }
    if row.kind == "tool" {
        if let Some(J::Str(_)) = get(&rest, "tool") {
            row.tool = take_str(&mut rest, "tool");
        }
        let state = rest.iter_mut().find(|(k, _)| k == "state");
        match state.map(|(_, v)| v) {
            None | Some(J::Null) => {}
            Some(J::Obj(state)) => tool_state(state, &mut row, buf)?,
            Some(_) => return None,
        }
    }
    row.json = write_span(buf, |b| write_object(b, &rest));
    Some(row)
}

fn tool_state<'a>(state: &mut Obj<'a>, row: &mut Part<'a>, buf: &mut String) -> Option<()> {
    let status = required_str(state, "status")?;
    if !matches!(status, "pending" | "running" | "completed" | "error") {
        return None;
    }
    for key in ["output", "error"] {
        optional_str(state, key)?;
    }
    let status = take_str(state, "status")?;
    match get(state, "input") {
        None | Some(J::Null) => {}
        Some(J::Obj(input)) => {
            row.input = Some(write_span(buf, |b| write_object(b, input)));
            remove(state, "input");
        }
        Some(_) => return None,
    }
    let field = if status == "completed" {
        "output"
    } else {
        "error"
    };
    if let Some(J::Str(_)) = get(state, field) {
        row.output = take_str(state, field);
    }
    let time = state.iter_mut().find(|(k, _)| k == "time");
    match time.map(|(_, v)| v) {
        None | Some(J::Null) => {}
        Some(J::Obj(time)) => match get(time, "compacted") {
            None | Some(J::Null) => {}
            Some(J::Num(n)) if !n.contains(['.', 'e', 'E']) && n.parse::<i64>().is_ok() => {
                row.compacted_at = n.parse::<i64>().ok();
                remove(time, "compacted");
            }
            Some(_) => return None,
        },
        Some(_) => return None,
    }
    row.status = Some(status);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pyjson::{dumps, COMPACT};

    #[test]
    fn the_tree_writes_as_serde_json_values_do() {
        let docs = [
            r#"{"a":"é\n\u0001\"\/","b":[1,2.0,-0,1E2,1e-5,-0.0,123456789012345678901234567890]}"#,
            r#" [ {} , [] , null , true , false , "😀\ud83d\ude00" , {"x" : {"y" : [1.5e300]}} ] "#,
            r#""plain""#,
            r#"{"k":"\u00e9\u20ac","n":1.0}"#,
        ];
        for doc in docs {
            let value: serde_json::Value = serde_json::from_str(doc).unwrap();
            let mut out = String::new();
            write_json(&mut out, &parse(doc).unwrap(), COMPACT);
            assert_eq!(out, dumps(&value, COMPACT), "{doc}");
        }
    }

    /// The rows and sessions of the serde_json path.
    fn slow(text: &str) -> (arrow_array::RecordBatch, Vec<(String, Vec<String>)>) {
        let mut rows = Rows::default();
        let value = crate::ingest::lines::parse(text.as_bytes()).unwrap();
        let session = crate::ingest::opencode::session(value).unwrap();
        let mapped = crate::ingest::lines::emit(&[session], &mut rows);
        (rows.finish(), mapped.sessions)
    }

    #[test]
    fn opencode_lines_make_the_rows_of_the_serde_json_path() {
        let docs = [
            r#"{"info":{"id":"s0"},"messages":[]}"#,
            r#"{"info":{"id":"s1","title":"t \"q\" \u00e9","n":[1,2.50,-0,1E3]},"extra":1,"messages":[
                {"info":{"id":"m1","role":"user","time":{"created":1}},"parts":[
                    {"id":"p1","type":"text","text":"fix it \ud83d\ude00\n","synthetic":false}]},
                {"info":{"id":"m2","role":"assistant","parentID":"m1","summary":true,"finish":"stop","error":null},"parts":[
                    {"id":"p2","type":"reasoning","text":"hmm"},
                    {"id":"p3","type":"tool","tool":"read","callID":"c1","state":{"status":"completed",
                        "input":{"filePath":"a.py","n":12345678901234567890},"output":"data 数据",
                        "time":{"start":1,"end":2,"compacted":1700000000000},"title":"x"}},
                    {"id":"p4","type":"tool","tool":"bash","state":{"status":"error","error":"boom","input":null}},
                    {"id":"p5","type":"tool","tool":"bash","state":{"status":"running","time":null}},
                    {"id":"p6","type":"compaction","auto":true},
                    {"id":"p7","type":"step-finish","tokens":{"input":3.0}}]},
                {"info":{"id":"m3","role":"system"}}]}"#,
        ];
        for doc in docs {
            let (want, sessions) = slow(doc);
            let mut rows = Rows::default();
            let mut buf = String::new();
            let got = opencode_line(doc, &mut rows, &mut buf).expect(doc);
            assert_eq!(vec![got], sessions, "{doc}");
            assert_eq!(rows.finish(), want, "{doc}");
        }
    }

    #[test]
    fn opencode_lines_the_mapping_rejects_are_left_to_serde_json() {
        for doc in [
            r#"{"info":{"id":"s"}}"#,
            r#"{"info":{"id":5},"messages":[]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"robot"}}]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"user","parentID":3}}]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"user"},"parts":[{"id":"p","type":"tool","state":{"status":"done"}}]}]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"user"},"parts":[{"id":"p","type":"tool","state":{"status":"completed","time":{"compacted":1.5}}}]}]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"user"},"parts":[{"id":"p","type":"compaction","auto":"yes"}]}]}"#,
            r#"{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"user"},"parts":[{"id":"p","type":"text","text":1}]}]}"#,
            r#"{"info":{"id":"s","id":"t"},"messages":[]}"#,
        ] {
            let mut rows = Rows::default();
            let mut buf = String::new();
            assert!(opencode_line(doc, &mut rows, &mut buf).is_none(), "{doc}");
            assert!(rows.is_empty(), "{doc}");
        }
    }

    #[test]
    fn what_it_is_unsure_of_is_left_to_serde_json() {
        for doc in [
            r#"{"a":1,"a":2}"#,
            r#""\ud800""#,
            r#""\udc00x""#,
            "01",
            "1.",
            "[1,]",
            "{\"a\":1}x",
            "\"tab\there\"",
            "1e400",
            "nul",
            r#"{"$serde_json::private::Number":"1"}"#,
            &"[".repeat(120),
        ] {
            assert!(parse(doc).is_none(), "{doc}");
        }
    }
}
