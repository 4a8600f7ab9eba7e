//! Retention of a replay, scored in the core: the rule of
//! python/ctxcompact/tuning/retention.py (the pure-Python reference, and the
//! oracle of tests/tuning/test_retention_core.py), over the chat messages the
//! core renders (`view`), so no call is rendered again in Python.
//!
//! Two scores, as docs/tuning.md describes them: per call, the share of the
//! facts the run stated so far that the prompt still shows (`RunRetention`,
//! the `retention` column), and per call whose prompt dropped messages, what
//! it kept of the facts they held (`score_compaction`: `removed_facts`,
//! `kept_facts`, `lost`). `score_session` walks one replayed session's calls
//! as `tuning.engine` walked them in Python: the messages appended since the
//! previous call as they were written, against the prompt the call sends.
//!
//! A replay resumed after each summary (`replay_resume`) is scored segment
//! by segment (`score_segment`), the run's state carried across (`Carried`).
//! The summary's text (the digest, or a model's) is in the stored session
//! the core resumes from: the summary's call sends it, so it enters the
//! prompt through `RunRetention::resend` and shows the facts it repeats, as
//! in the live walk (`LiveRun.call`); it states none.

mod classes;
pub mod scan;

use std::borrow::Cow;
use std::collections::{HashMap as StdMap, HashSet as StdSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

use memchr::memmem::Finder;
use rayon::prelude::*;
use serde_json::Value;

use crate::codes::{flag, role};
use crate::error::{CoreError, Result};
use crate::render::{Render, COMPACTION_QUESTION};
use crate::replay::{replayed, Fallback, Resume, SessionReplay};
use crate::table::{Message, PartTable};

/// A prose fact is kept when this share of its content words is still there
/// (`PROSE_KEPT`, as a ratio: kept * 2 >= words).
const PROSE_WORDS: usize = 40;
const SHOWN_CHARS: usize = 160;
const SPAN_CHARS: (usize, usize) = (3, 80);
const CONTINUE: &str = "continue if you have next steps";
#[cfg(test)]
const STOP_WORDS: &str = "that this with from have will would should could there their them then \
than what when which where while into about after before been being also only just very more \
most some such each other your yours please thanks need make sure like does done using used \
file files code line lines here were they these those";

/// The maps and sets of retention: keys are short or hashed once
/// (`Key`), and nothing depends on their order, so a fast fixed hasher.
type Hashing = foldhash::fast::FixedState;
type HashMap<K, V> = StdMap<K, V, Hashing>;
type HashSet<K> = StdSet<K, Hashing>;

/// A chat message's identity: its JSON as rendered (equal text, equal
/// messages), hashed once. Interned messages share the text, so equal keys
/// are mostly found equal by pointer; the text is compared otherwise.
#[derive(Debug, Clone)]
pub struct Key {
    hash: u64,
    text: Arc<str>,
}

impl Key {
    pub fn new(text: &str) -> Key {
        Key {
            hash: Hashing::default().hash_one(text),
            text: Arc::from(text),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.hash == other.hash && self.text == other.text)
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// One of `STOP_WORDS` (a match the compiler sorts by length, then bytes).
fn stop(word: &str) -> bool {
    matches!(
        word,
        "that"
            | "this"
            | "with"
            | "from"
            | "have"
            | "will"
            | "would"
            | "should"
            | "could"
            | "there"
            | "their"
            | "them"
            | "then"
            | "than"
            | "what"
            | "when"
            | "which"
            | "where"
            | "while"
            | "into"
            | "about"
            | "after"
            | "before"
            | "been"
            | "being"
            | "also"
            | "only"
            | "just"
            | "very"
            | "more"
            | "most"
            | "some"
            | "such"
            | "each"
            | "other"
            | "your"
            | "yours"
            | "please"
            | "thanks"
            | "need"
            | "make"
            | "sure"
            | "like"
            | "does"
            | "done"
            | "using"
            | "used"
            | "file"
            | "files"
            | "code"
            | "line"
            | "lines"
            | "here"
            | "were"
            | "they"
            | "these"
            | "those"
    )
}

/// The kinds of fact, in the reference's order (`KINDS`).
pub const KINDS: [&str; 6] = ["task", "directive", "plan", "path", "identifier", "error"];
const TASK: u8 = 0;
const DIRECTIVE: u8 = 1;
const PLAN: u8 = 2;
const PATH: u8 = 3;
const IDENTIFIER: u8 = 4;
const ERROR: u8 = 5;

/// One piece of information (`Fact`): kind, what is shown and looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub kind: u8,
    pub text: String,
    pub resolved: bool,
    /// Prose: the content words checked (empty: the text is looked for verbatim).
    pub words: Vec<String>,
}

impl Fact {
    fn verbatim(kind: u8, text: String) -> Fact {
        Fact {
            kind,
            text,
            resolved: false,
            words: Vec::new(),
        }
    }

    /// `Fact.label()`.
    pub fn label(&self) -> String {
        let suffix = if self.resolved {
            " (resolved later)"
        } else {
            ""
        };
        format!("{}: {}{suffix}", KINDS[self.kind as usize], self.text)
    }

    /// The searcher of the text a verbatim fact is looked for as, built
    /// once for the many messages it is looked for in (memchr's `memmem`:
    /// a byte search of UTF-8 text finds what `str::contains` finds).
    fn finder(&self) -> Finder<'static> {
        Finder::new(self.text.as_bytes()).into_owned()
    }

    /// `Fact.kept_in`: held by a message (its `Chat::text` and words);
    /// `finder`: this fact's (`Fact::finder`).
    fn kept_in(&self, finder: &Finder<'_>, chat: &Chat) -> bool {
        if self.words.is_empty() {
            return finder.find(chat.text.as_bytes()).is_some();
        }
        let words = chat.words();
        let kept = self.words.iter().filter(|w| words.contains(*w)).count();
        kept * 2 >= self.words.len()
    }
}

/// Python's `str()` of a JSON value where text is expected.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        other => other.to_string(),
    }
}

/// `x or ""` of a JSON value, as text (a string borrowed).
fn or_empty(value: Option<&Value>) -> Cow<'_, str> {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Cow::Borrowed(""),
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(Value::Array(a)) if a.is_empty() => Cow::Borrowed(""),
        Some(Value::Object(o)) if o.is_empty() => Cow::Borrowed(""),
        Some(v) => Cow::Owned(py_str(v)),
    }
}

/// `py_str` of a JSON value taken out of its message (a string moved).
fn into_str(value: Value) -> String {
    match value {
        Value::String(s) => s,
        other => py_str(&other),
    }
}

/// One chat message as retention reads it, worked out once.
#[derive(Debug)]
pub struct Chat {
    /// Its identity (equal keys, equal messages): the JSON as rendered.
    pub key: Key,
    pub role: String,
    /// `content_text`.
    pub content: String,
    /// `_written`: what the user or the agent wrote (texts, call arguments).
    pub written: String,
    /// `"\n".join([message_text, _written])`: where a fact is looked for.
    pub text: String,
    /// `is_request`.
    pub request: bool,
    /// (id, name) of each tool call, as `_error_facts` reads them.
    pub calls: Vec<(String, String)>,
    pub tool_call_id: String,
    words: OnceLock<HashSet<String>>,
}

impl Chat {
    /// A chat message (a JSON object) as retention reads it.
    pub fn new(value: Value) -> Chat {
        let key = Key::new(&value.to_string());
        Chat::keyed(value, key)
    }

    /// `new`, its key (`value` as text) already made; the message's
    /// strings are moved out of `value`, and each text is written once.
    fn keyed(value: Value, key: Key) -> Chat {
        let mut value = match value {
            Value::Object(o) => o,
            _ => serde_json::Map::new(),
        };
        let mut take = |k: &str| value.get_mut(k).map(Value::take);
        let role = take("role").map(into_str).unwrap_or_default();
        let content = match take("content") {
            Some(Value::String(s)) => s,
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.as_object().and_then(|o| o.get("text")))
                .map(py_str)
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        let tool_call_id = take("tool_call_id").map_or_else(|| "None".into(), into_str);
        let calls: Vec<&serde_json::Map<String, Value>> = match value.get("tool_calls") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_object).collect(),
            _ => Vec::new(),
        };
        fn function<'v>(c: &'v serde_json::Map<String, Value>, k: &str) -> Cow<'v, str> {
            or_empty(
                c.get("function")
                    .and_then(Value::as_object)
                    .and_then(|f| f.get(k)),
            )
        }
        let arguments: Vec<Cow<'_, str>> = calls.iter().map(|c| function(c, "arguments")).collect();
        let written = if role == "user" || role == "assistant" {
            // "\n".join([content, *plain(arguments)])
            let plains: Vec<String> = arguments.iter().map(|a| plain(a)).collect();
            let size = content.len() + plains.iter().map(|p| p.len() + 1).sum::<usize>();
            let mut w = String::with_capacity(size);
            w.push_str(&content);
            for p in &plains {
                w.push('\n');
                w.push_str(p);
            }
            w
        } else {
            String::new()
        };
        // "\n".join([message_text, written]), message_text the non-empty
        // of [content, "\n".join(arguments), *names] joined by "\n".
        let joined = arguments.join("\n");
        let names: Vec<Cow<'_, str>> = calls.iter().map(|c| function(c, "name")).collect();
        let parts = [content.as_str(), joined.as_str()]
            .into_iter()
            .chain(names.iter().map(|n| &**n))
            .filter(|p| !p.is_empty());
        let size = content.len() + joined.len() + written.len() + 2;
        let mut text =
            String::with_capacity(size + names.iter().map(|n| n.len() + 1).sum::<usize>());
        for (i, p) in parts.enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(p);
        }
        text.push('\n');
        text.push_str(&written);
        let stripped = scan::strip(&content);
        let request = role == "user"
            && !stripped.is_empty()
            && stripped != COMPACTION_QUESTION
            && stripped.to_lowercase() != CONTINUE;
        let calls = calls
            .iter()
            .map(|c| {
                let id = c.get("id").map_or_else(|| "None".into(), py_str);
                let name = match c.get("function").and_then(Value::as_object) {
                    Some(f) => f.get("name").map_or_else(|| "tool".into(), py_str),
                    None => "tool".into(),
                };
                (id, name)
            })
            .collect();
        Chat {
            key,
            role,
            content,
            written,
            text,
            request,
            calls,
            tool_call_id,
            words: OnceLock::new(),
        }
    }

    /// `_words` of `text`.
    fn words(&self) -> &HashSet<String> {
        self.words.get_or_init(|| {
            let mut out = HashSet::default();
            scan::words(&self.text.to_lowercase(), |w| {
                if !stop(w) {
                    out.insert(w.to_string());
                }
            });
            out
        })
    }
}

/// `_plain`: call arguments as their string values.
fn plain(args: &str) -> String {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v) => {
            let mut out = Vec::new();
            walk(&v, &mut out);
            out.join("\n")
        }
        Err(_) => args.to_string(),
    }
}

/// `_prose`: a task, directive or plan, by its first content words.
fn prose(kind: u8, text: &str) -> Option<Fact> {
    let mut first: Vec<String> = Vec::new();
    // The first PROSE_WORDS content words, each once (at most PROSE_WORDS
    // to compare): the scan stops there.
    let each = |w: &str| {
        if !stop(w) && !first.iter().any(|f| f == w) {
            first.push(w.to_string());
        }
        first.len() < PROSE_WORDS
    };
    match scan::words_lower_alone(text) {
        true => scan::ascii_words_until(text, each),
        false => scan::words_until(&text.to_lowercase(), each),
    }
    if first.is_empty() {
        return None;
    }
    Some(Fact {
        kind,
        text: scan::squeeze_head(text, SHOWN_CHARS),
        resolved: false,
        words: first,
    })
}

/// `_error_signatures`.
fn error_signatures(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    if scan::may_name_error(text) {
        let mut each = |name: String| {
            if !found.contains(&name) {
                found.push(name);
            }
        };
        if text.is_ascii() {
            scan::error_names(text.as_bytes(), |n| {
                each(n.iter().map(|&c| c as char).collect())
            });
        } else {
            let chars: Vec<char> = text.chars().collect();
            scan::error_names(&chars, |n| each(n.iter().collect()));
        }
    }
    if found.is_empty() {
        let line = scan::find_line(text, scan::is_error_line_str);
        if let Some(line) = line {
            found.push(scan::squeeze_head(line, 60));
        }
    }
    found
}

/// `_spans`: the backquoted code names of `text` and the text without them
/// (`text` itself when it has no backquote).
fn spans<C: scan::Ch>(text: &[C]) -> (Vec<String>, Cow<'_, [C]>) {
    if !text.iter().any(|&c| c.into() == '`') {
        return (Vec::new(), Cow::Borrowed(text));
    }
    let text = scan::without_fences(text);
    let (mut names, mut kept) = (Vec::new(), Vec::with_capacity(text.len()));
    let mut pos = 0;
    while let Some((start, end)) = scan::span(&text, pos) {
        let name = &text[start + 1..end - 1];
        let is_path = scan::is_path(name);
        let code = if is_path { Some(true) } else { code_span(name) };
        if code == Some(true) {
            if !is_path {
                names.push(scan::text(name));
            }
            kept.extend_from_slice(&text[pos..start]);
            kept.push(C::ascii(b' '));
            pos = end;
        } else if code.is_none() {
            kept.extend_from_slice(&text[pos..end - 1]);
            pos = end - 1;
        } else {
            kept.extend_from_slice(&text[pos..end]);
            pos = end;
        }
    }
    kept.extend_from_slice(&text[pos..]);
    (names, Cow::Owned(kept))
}

/// `_code_span`.
fn code_span<C: scan::Ch>(name: &[C]) -> Option<bool> {
    let text = scan::text(name);
    let words = scan::split(&text);
    if text != scan::strip(&text)
        || scan::has_sentence(name)
        || (words.len() >= 4 && words.iter().all(|w| scan::is_prose_word(w)))
    {
        return None;
    }
    Some((SPAN_CHARS.0..=SPAN_CHARS.1).contains(&name.len()))
}

/// Facts in order of appearance, each (kind, text) once.
#[derive(Default)]
struct Facts {
    list: Vec<Fact>,
    /// (kind, text) of each fact of `list` once it is longer than `FEW_FACTS`
    /// (the few before are compared one by one).
    seen: HashSet<(u8, String)>,
}

const FEW_FACTS: usize = 16;

impl Facts {
    fn add(&mut self, fact: Option<Fact>) {
        let Some(f) = fact else { return };
        if self.list.len() < FEW_FACTS {
            if !self
                .list
                .iter()
                .any(|g| g.kind == f.kind && g.text == f.text)
            {
                self.list.push(f);
            }
            return;
        }
        if self.seen.is_empty() {
            self.seen = self.list.iter().map(|g| (g.kind, g.text.clone())).collect();
        }
        if self.seen.insert((f.kind, f.text.clone())) {
            self.list.push(f);
        }
    }
}

/// `extract_facts(messages, task_index=task, context=...)`: `context` is the
/// history they are taken from (`messages` are its entries at `wanted`,
/// where an error's resolution is looked for); `None`: `messages` alone.
pub fn extract_facts(
    messages: &[&Chat],
    task: Option<usize>,
    context: Option<(&[Arc<Chat>], &[usize])>,
) -> Vec<Fact> {
    let mut facts = Facts::default();
    let requests: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i].request)
        .collect();
    for &i in &requests {
        let kind = if Some(i) == task { TASK } else { DIRECTIVE };
        facts.add(prose(kind, &messages[i].content));
    }
    let plan = messages.iter().rev().find(|m| {
        m.role == "assistant"
            && !m.content.is_empty()
            && if m.content.is_ascii() {
                scan::has_plan(m.content.as_bytes())
            } else {
                scan::has_plan(&m.content.chars().collect::<Vec<_>>())
            }
    });
    if let Some(m) = plan {
        facts.add(prose(PLAN, &m.content));
    }
    for m in messages {
        if m.written.is_empty() {
            continue;
        }
        if m.written.is_ascii() {
            written_facts(m.written.as_bytes(), &mut facts);
        } else {
            written_facts(&m.written.chars().collect::<Vec<_>>(), &mut facts);
        }
    }
    let errors = match context {
        Some((history, wanted)) => error_facts(history.iter().map(|m| &**m), Some(wanted)),
        None => error_facts(messages.iter().copied(), None),
    };
    for f in errors {
        facts.add(Some(f));
    }
    facts.list
}

/// The paths and code names of what a message wrote (`written`).
fn written_facts<C: scan::Ch>(written: &[C], facts: &mut Facts) {
    let paths = scan::paths(written);
    for &(a, b) in &paths {
        facts.add(Some(Fact::verbatim(PATH, scan::text(&written[a..b]))));
    }
    let (names, rest) = spans(written);
    for name in names {
        facts.add(Some(Fact::verbatim(IDENTIFIER, name)));
    }
    // Without code spans, the text is `written`, whose paths are found.
    let spanned;
    let rest = match rest {
        Cow::Borrowed(_) => scan::cut(written, &paths),
        Cow::Owned(rest) => {
            spanned = rest;
            scan::without_paths(&spanned)
        }
    };
    let mut found = Vec::new();
    scan::identifiers(&rest, |name| {
        if !scan::is_path(name) {
            found.push(scan::text(name));
        }
    });
    for name in found {
        facts.add(Some(Fact::verbatim(IDENTIFIER, name)));
    }
}

/// `_error_facts`: errors in the tool results (of `wanted` positions, else
/// all), resolved when a later result of the same tool had none.
fn error_facts<'c>(history: impl Iterator<Item = &'c Chat>, wanted: Option<&[usize]>) -> Vec<Fact> {
    let mut names: HashMap<&str, &str> = HashMap::default();
    let mut results: Vec<(&str, &str, bool)> = Vec::new();
    let wanted: Option<HashSet<usize>> = wanted.map(|w| w.iter().copied().collect());
    for (i, m) in history.enumerate() {
        for (id, name) in &m.calls {
            names.insert(id, name);
        }
        if m.role == "tool" {
            let tool = names
                .get(m.tool_call_id.as_str())
                .copied()
                .unwrap_or("tool");
            let asked = wanted.as_ref().is_none_or(|w| w.contains(&i));
            results.push((tool, &m.content, asked));
        }
    }
    let mut facts = Vec::new();
    // Whether each result had no error, worked out once (a later result of the same tool).
    let mut clean: Vec<Option<bool>> = vec![None; results.len()];
    for (i, &(tool, text, asked)) in results.iter().enumerate() {
        if !asked {
            continue;
        }
        let signatures = error_signatures(text);
        clean[i] = Some(signatures.is_empty());
        if signatures.is_empty() {
            continue;
        }
        let resolved = (i + 1..results.len()).any(|j| {
            let (t, x, _) = results[j];
            t == tool && *clean[j].get_or_insert_with(|| error_signatures(x).is_empty())
        });
        facts.extend(signatures.into_iter().map(|s| Fact {
            kind: ERROR,
            text: s,
            resolved,
            words: Vec::new(),
        }));
    }
    facts
}

/// What one compaction removed and what of it is gone (`Retention`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Removed {
    pub removed: u64,
    pub kept: u64,
    /// `Fact.label()` of each fact lost.
    pub lost: Vec<String>,
}

/// `score_compaction(before, after, task=task)`.
pub fn score_compaction(before: &[Arc<Chat>], after: &[Arc<Chat>], task: Option<&str>) -> Removed {
    let kept_keys: HashSet<&Key> = after.iter().map(|m| &m.key).collect();
    let gone: Vec<usize> = (0..before.len())
        .filter(|&i| !kept_keys.contains(&before[i].key))
        .collect();
    if gone.is_empty() {
        return Removed::default();
    }
    let messages: Vec<&Chat> = gone.iter().map(|&i| &*before[i]).collect();
    let task_index = task.and_then(|t| messages.iter().position(|m| m.request && m.content == t));
    let removed = extract_facts(&messages, task_index, Some((before, &gone)));
    let lost: Vec<String> = removed
        .iter()
        .filter(|f| !kept_in_all(f, after))
        .map(Fact::label)
        .collect();
    Removed {
        removed: removed.len() as u64,
        kept: (removed.len() - lost.len()) as u64,
        lost,
    }
}

/// A fact kept in the whole of `after` (prose: its words over all of it).
fn kept_in_all(fact: &Fact, after: &[Arc<Chat>]) -> bool {
    if fact.words.is_empty() {
        let finder = fact.finder();
        return after
            .iter()
            .any(|m| finder.find(m.text.as_bytes()).is_some());
    }
    let kept = fact
        .words
        .iter()
        .filter(|w| after.iter().any(|m| m.words().contains(*w)))
        .count();
    kept * 2 >= fact.words.len()
}

/// The comparable retention of one run, call by call, kept incrementally
/// (`RunRetention`: the same structure, so the same facts are found lost).
#[derive(Default)]
pub struct RunRetention {
    facts: Vec<Fact>,
    /// Each fact's `Fact::finder`, built the first time it is looked for
    /// (most facts never leave the prompt).
    finders: Vec<OnceLock<Finder<'static>>>,
    /// Per kind, each fact's text -> its index in `facts`.
    index: [HashMap<String, usize>; KINDS.len()],
    /// Messages in the prompt: key -> (copies, the message).
    prompt: HashMap<Key, (usize, Arc<Chat>)>,
    /// Prompt keys in the order they entered (where a fact is looked for first).
    order: Vec<Key>,
    states: HashMap<Key, Vec<usize>>,
    holder: HashMap<usize, Key>,
    holds: HashMap<Key, HashSet<usize>>,
    lost: HashSet<usize>,
    task_seen: bool,
}

impl RunRetention {
    pub fn stated(&self) -> usize {
        self.facts.len()
    }

    pub fn shown(&self) -> usize {
        self.facts.len() - self.lost.len()
    }

    /// shown / stated facts (1.0 while none are stated).
    pub fn score(&self) -> f64 {
        match self.stated() {
            0 => 1.0,
            n => self.shown() as f64 / n as f64,
        }
    }

    /// The stated facts the prompt no longer shows, in order of statement.
    pub fn lost(&self) -> Vec<&Fact> {
        (0..self.facts.len())
            .filter(|i| self.lost.contains(i))
            .map(|i| &self.facts[i])
            .collect()
    }

    /// The run's messages as it wrote them, appended to the prompt.
    pub fn append(&mut self, messages: &[Arc<Chat>]) {
        for m in messages {
            if !self.states.contains_key(&m.key) {
                let first = !self.task_seen && m.request;
                self.task_seen |= first;
                let stated = extract_facts(&[&**m], if first { Some(0) } else { None }, None);
                let mut keys = Vec::with_capacity(stated.len());
                for f in stated {
                    let index = &mut self.index[f.kind as usize];
                    let at = match index.get(f.text.as_str()) {
                        Some(&at) => at,
                        None => {
                            index.insert(f.text.clone(), self.facts.len());
                            self.finders.push(OnceLock::new());
                            self.facts.push(f);
                            self.facts.len() - 1
                        }
                    };
                    keys.push(at);
                }
                self.states.insert(m.key.clone(), keys);
            }
            self.enter(m);
        }
    }

    /// The prompt held `before` and the call sends `sent`: what is gone
    /// leaves, what is new (placeholders, a summary) enters.
    pub fn resend(&mut self, before: &[Arc<Chat>], sent: &[Arc<Chat>]) {
        let n = before
            .iter()
            .zip(sent)
            .take_while(|(x, y)| x.key == y.key)
            .count();
        if n == before.len() && n == sent.len() {
            return;
        }
        let mut gone: HashMap<&Key, usize> = HashMap::default();
        let mut gone_order: Vec<&Key> = Vec::new();
        for m in &before[n..] {
            let e = gone.entry(&m.key).or_insert(0);
            // 0: the key just entered `gone` (its counts are 1 or more after)
            if *e == 0 {
                gone_order.push(&m.key);
            }
            *e += 1;
        }
        let mut new = Vec::new();
        for m in &sent[n..] {
            match gone.get_mut(&m.key) {
                Some(times) if *times > 0 => *times -= 1,
                _ => new.push(m.clone()),
            }
        }
        let mut orphans: Vec<usize> = Vec::new();
        let mut left = false;
        for key in gone_order {
            for _ in 0..gone[&key] {
                let (last, held) = self.leave(key);
                left |= last;
                orphans.extend(held);
            }
        }
        if left {
            // the keys that left the prompt leave its order, at once
            let prompt = &self.prompt;
            self.order.retain(|k| prompt.contains_key(k));
        }
        for m in &new {
            self.enter(m);
        }
        for fact in orphans {
            if !self.holder.contains_key(&fact) {
                self.find(fact);
            }
        }
    }

    /// Whether message `m` holds fact `fact` (`Fact::kept_in`).
    fn kept_in(&self, fact: usize, m: &Chat) -> bool {
        let f = &self.facts[fact];
        f.kept_in(self.finders[fact].get_or_init(|| f.finder()), m)
    }

    fn enter(&mut self, m: &Arc<Chat>) {
        if let Some(slot) = self.prompt.get_mut(&m.key) {
            slot.0 += 1;
            return;
        }
        self.prompt.insert(m.key.clone(), (1, m.clone()));
        self.order.push(m.key.clone());
        let mut holds = self.holds.remove(&m.key).unwrap_or_default();
        for &fact in self.states.get(&m.key).map_or(&[][..], Vec::as_slice) {
            if let std::collections::hash_map::Entry::Vacant(e) = self.holder.entry(fact) {
                e.insert(m.key.clone());
                holds.insert(fact);
                self.lost.remove(&fact);
            }
        }
        let mut found: Vec<usize> = self
            .lost
            .iter()
            .copied()
            .filter(|&f| self.kept_in(f, m))
            .collect();
        found.sort_unstable();
        for fact in found {
            self.holder.insert(fact, m.key.clone());
            holds.insert(fact);
            self.lost.remove(&fact);
        }
        self.holds.insert(m.key.clone(), holds);
    }

    /// One copy of `key` leaves: whether it was the last (then the key
    /// left the prompt, and leaves `order` to the caller), and the facts it
    /// held then.
    fn leave(&mut self, key: &Key) -> (bool, Vec<usize>) {
        let slot = self.prompt.get_mut(key).expect("a message in the prompt");
        slot.0 -= 1;
        if slot.0 > 0 {
            return (false, Vec::new());
        }
        self.prompt.remove(key);
        let mut orphans: Vec<usize> = self
            .holds
            .remove(key)
            .unwrap_or_default()
            .into_iter()
            .collect();
        orphans.sort_unstable();
        for fact in &orphans {
            self.holder.remove(fact);
        }
        (true, orphans)
    }

    fn find(&mut self, fact: usize) {
        for key in &self.order {
            let (_, m) = &self.prompt[key];
            let states = self.states.get(key).is_some_and(|s| s.contains(&fact));
            if states || self.kept_in(fact, m) {
                self.holder.insert(fact, key.clone());
                self.holds.entry(key.clone()).or_default().insert(fact);
                return;
            }
        }
        self.lost.insert(fact);
    }
}

/// Each call's retention (`RETENTION` columns of the per-call table).
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub removed: Removed,
    pub retention: f64,
}

impl Scored {
    /// Nothing removed, every fact shown.
    pub fn whole() -> Scored {
        Scored {
            removed: Removed::default(),
            retention: 1.0,
        }
    }
}

/// What a session's calls are scored from: per call, the message that
/// makes it (its index among `messages`), whether its prompt is not the
/// previous one plus the new messages as appended, and the rows its mask
/// cleared.
pub struct CallMarks<'c> {
    pub at: usize,
    pub changed: bool,
    pub cleared: &'c [usize],
}

/// The chat messages one stored message is sent as.
type Chats = Vec<Arc<Chat>>;

/// Chat messages interned by key in one session (a message rendered alike
/// twice is read once, and is one `Arc`: its key compares by pointer).
#[derive(Default)]
struct Interned {
    /// The chat messages by their key's hash (`Key::hash`; those of one
    /// hash told apart by their text).
    chats: HashMap<u64, Vec<Arc<Chat>>>,
}

impl Interned {
    /// The chat messages `msg` is sent as (`view::message_json`), each read
    /// the first time its rendering is seen.
    fn render(
        &mut self,
        table: &PartTable<'_>,
        msg: &Message,
        render: Render,
        thinking: bool,
    ) -> Result<Vec<Arc<Chat>>> {
        let mut out = Vec::new();
        crate::view::message_json(table, msg, render, thinking, &mut out)?;
        let bad = |why: String| CoreError::Config(format!("retention: a rendered message: {why}"));
        // The rendering is checked as text once (simdutf8: serde_json's
        // slice reader would check each string with std's slower check).
        let text = simdutf8::basic::from_utf8(&out).map_err(|_| bad("not UTF-8".into()))?;
        let elements = scan::json_elements(text).ok_or_else(|| bad("not a JSON array".into()))?;
        let mut chats = Vec::with_capacity(elements.len());
        for element in elements {
            chats.push(self.rendered(element).map_err(|e| bad(e.to_string()))?);
        }
        Ok(chats)
    }

    /// The chat message of one element of a rendering, as written: `view`
    /// writes serde_json's compact form (its escaping, keys in order, no
    /// spaces), the text `Value::to_string` would give, so the element is
    /// its key as it is, and is read only the first time it is seen.
    fn rendered(&mut self, element: &str) -> serde_json::Result<Arc<Chat>> {
        let hash = Hashing::default().hash_one(element);
        if let Some(c) = self.find(hash, element) {
            return Ok(c);
        }
        let value: Value = serde_json::from_str(element)?;
        debug_assert_eq!(
            value.to_string(),
            element,
            "a rendering not in compact form"
        );
        let key = Key {
            hash,
            text: Arc::from(element),
        };
        Ok(self.insert(Chat::keyed(value, key)))
    }

    fn chat(&mut self, value: Value) -> Arc<Chat> {
        let key = Key::new(&value.to_string());
        if let Some(c) = self.find(key.hash, &key.text) {
            return c;
        }
        self.insert(Chat::keyed(value, key))
    }

    /// The message of key `text` (`hash`: its `Key::hash`), if read before.
    fn find(&self, hash: u64, text: &str) -> Option<Arc<Chat>> {
        self.chats
            .get(&hash)?
            .iter()
            .find(|c| &*c.key.text == text)
            .cloned()
    }

    fn insert(&mut self, chat: Chat) -> Arc<Chat> {
        let c = Arc::new(chat);
        self.chats.entry(c.key.hash).or_default().push(c.clone());
        c
    }
}

/// A session's retention across a summary's call, from the segment the
/// core walked before it to the one it resumes (`replay_resume`): the run's
/// `RunRetention`, its task, the chat messages read so far, and `before`:
/// what the summary's call would send had nothing been removed (the
/// previous call's prompt and the run's messages since, as appended), which
/// the summary's prompt is scored against, as the live walk scores it
/// (`LiveRun.call`).
#[derive(Default)]
pub struct Carried {
    facts: RunRetention,
    chats: Interned,
    task: Option<String>,
    before: Vec<Arc<Chat>>,
}

impl Carried {
    /// Append the run's `messages` as the live walk does (each alone, as
    /// written): their facts stated; the task is the first user message's
    /// text. The chat messages they are.
    /// `alone`: each message's chat messages (as `Prompt::sent` would
    /// render it under the default view, without its reasoning).
    fn append(
        &mut self,
        table: &PartTable<'_>,
        messages: &[Message],
    ) -> Result<(Vec<Arc<Chat>>, Vec<Chats>)> {
        let mut appended = Vec::new();
        let mut each = Vec::with_capacity(messages.len());
        for msg in messages {
            let alone = self.chats.render(table, msg, Render::default(), false)?;
            if self.task.is_none() && msg.role == role::USER {
                self.task = alone
                    .iter()
                    .find(|m| m.role == "user")
                    .map(|m| m.content.clone());
            }
            appended.extend(alone.iter().cloned());
            each.push(alone);
        }
        self.facts.append(&appended);
        Ok((appended, each))
    }
}

/// Where a segment of a session starts and stops: the first `head` messages
/// are the stored session at a summary's call (those `hidden` not sent; 0:
/// the run from its start, no summary before), and the walk stopped at the
/// call of message `stop` (a summary's; `None`: the run's end).
#[derive(Debug, Clone, Copy, Default)]
pub struct Segment<'h> {
    pub head: usize,
    pub hidden: &'h [bool],
    pub stop: Option<usize>,
}

/// A segment's retention: the summary's call at its head (`head` > 0), its
/// calls, and at a stop, the state the next segment resumes from and the
/// prompt of the last call before it (a JSON array of chat messages: the
/// summary's call's cache prefix is counted against it).
pub struct Segmented {
    pub summary: Option<Scored>,
    pub calls: Vec<Scored>,
    pub carried: Option<Carried>,
    pub previous: Option<String>,
}

/// `tuning.engine._score_session` in the core: the retention of every call
/// of one replayed session (`messages`: the messages replayed; the table's
/// flags as the walk started, no row marked), marking `table`'s flags call
/// by call as the mask did. `view`: the policy's rendering; `keep_thinking`
/// assistant messages send their reasoning. `system`: the system prompt.
pub fn score_session(
    table: &mut PartTable<'_>,
    messages: &[Message],
    calls: &[CallMarks<'_>],
    view: Render,
    system: Option<&str>,
) -> Result<Vec<Scored>> {
    if !calls.iter().any(|c| c.changed) {
        return Ok(vec![Scored::whole(); calls.len()]);
    }
    let segment = Segment::default();
    Ok(score_segment(table, messages, calls, view, system, segment, None)?.calls)
}

/// `score_session` of one segment of a session the caller resumes after
/// each summary (`Segment`): the state of the segment before (`carried`;
/// `None` for a run walked from its start) scores the summary's call at the
/// head (what the summary left sent against what the call would have sent
/// without it), then the segment's calls go on from it, as the live walk
/// (`LiveRun`) scores them across its summaries.
pub fn score_segment(
    table: &mut PartTable<'_>,
    messages: &[Message],
    calls: &[CallMarks<'_>],
    view: Render,
    system: Option<&str>,
    segment: Segment<'_>,
    carried: Option<Carried>,
) -> Result<Segmented> {
    let mut state = carried.unwrap_or_default();
    let system = system.filter(|s| !s.is_empty()).map(|s| {
        state
            .chats
            .chat(serde_json::json!({"role": "system", "content": s}))
    });
    let hidden = |k: usize| segment.hidden.get(k).copied().unwrap_or(false);
    // Assistant messages sent before each message (where the keep_thinking window is).
    let mut before_count = Vec::with_capacity(messages.len() + 1);
    before_count.push(0usize);
    for (k, m) in messages.iter().enumerate() {
        let sent = m.role == role::ASSISTANT && !hidden(k);
        before_count.push(before_count.last().unwrap() + usize::from(sent));
    }
    let mut prompt = Prompt {
        messages,
        view,
        system,
        hidden: segment.hidden,
        before_count,
        shown: vec![None; messages.len()],
    };
    let head = segment.head.min(messages.len());
    let mut previous: Vec<Arc<Chat>> = Vec::new();
    let mut summary = None;
    if head > 0 {
        // The summary's call: scored as the live walk scores every call.
        let sent = prompt.sent(table, head, &mut state.chats)?;
        let before = std::mem::take(&mut state.before);
        let removed = match common(&before, &sent) < before.len() {
            true => score_compaction(&before, &sent, state.task.as_deref()),
            false => Removed::default(),
        };
        state.facts.resend(&before, &sent);
        summary = Some(Scored {
            removed,
            retention: state.facts.score(),
        });
        previous = sent;
    }
    let mut out = Vec::with_capacity(calls.len());
    let mut last = head;
    for (c, call) in calls.iter().enumerate() {
        let at = call.at;
        let (appended, alone) = state.append(table, &messages[last..at])?;
        if view == Render::default() {
            // What the prompt sends of them until a mark or the reasoning
            // window changes it: rendered alike (same view, same flags).
            for (k, chats) in (last..at).zip(alone) {
                prompt.shown[k] = Some((false, chats));
            }
        }
        let before: Vec<Arc<Chat>> = match call.changed {
            true => previous.iter().chain(&appended).cloned().collect(),
            false => Vec::new(),
        };
        for &row in call.cleared {
            table.flags[row] |= flag::COMPACTED;
            let k = messages.partition_point(|m| m.rows.end <= row);
            if k < prompt.shown.len() {
                prompt.shown[k] = None;
            }
        }
        // The prompt is read when this call or the next changed it (the
        // summary's call at a stop is scored against it).
        let next_changed = calls
            .get(c + 1)
            .map_or(segment.stop.is_some(), |n| n.changed);
        last = at;
        if !(call.changed || next_changed) {
            previous = Vec::new();
            out.push(Scored {
                removed: Removed::default(),
                retention: state.facts.score(),
            });
            continue;
        }
        let sent = prompt.sent(table, at, &mut state.chats)?;
        let mut removed = Removed::default();
        if call.changed {
            if common(&before, &sent) < before.len() {
                removed = score_compaction(&before, &sent, state.task.as_deref());
            }
            state.facts.resend(&before, &sent);
        }
        previous = sent;
        out.push(Scored {
            removed,
            retention: state.facts.score(),
        });
    }
    let Some(stop) = segment.stop else {
        return Ok(Segmented {
            summary,
            calls: out,
            carried: None,
            previous: None,
        });
    };
    let (appended, _) = state.append(table, &messages[last..stop.max(last)])?;
    let keys: Vec<&str> = previous.iter().map(|m| m.key.as_str()).collect();
    let json = format!("[{}]", keys.join(","));
    state.before = previous.into_iter().chain(appended).collect();
    Ok(Segmented {
        summary,
        calls: out,
        carried: Some(state),
        previous: Some(json),
    })
}

/// How many messages `before` and `sent` start alike.
fn common(before: &[Arc<Chat>], sent: &[Arc<Chat>]) -> usize {
    before
        .iter()
        .zip(sent)
        .take_while(|(x, y)| x.key == y.key)
        .count()
}

/// A call's prompt as the policy sends it: the system message, then each
/// message not hidden, rendered once until a mark or the `keep_thinking`
/// window changes it.
struct Prompt<'m> {
    messages: &'m [Message],
    view: Render,
    system: Option<Arc<Chat>>,
    hidden: &'m [bool],
    before_count: Vec<usize>,
    /// Per message: (whether its reasoning is sent, its chat messages).
    shown: Vec<Option<(bool, Vec<Arc<Chat>>)>>,
}

impl Prompt<'_> {
    /// The prompt of the call message `at` makes.
    fn sent(
        &mut self,
        table: &PartTable<'_>,
        at: usize,
        chats: &mut Interned,
    ) -> Result<Vec<Arc<Chat>>> {
        let keep = self.view.keep_thinking as usize;
        let mut sent: Vec<Arc<Chat>> = self.system.iter().cloned().collect();
        for k in 0..at {
            if self.hidden.get(k).copied().unwrap_or(false) {
                continue;
            }
            let msg = &self.messages[k];
            let thinking = msg.role == role::ASSISTANT
                && self.before_count[at] - self.before_count[k + 1] < keep;
            if self.shown[k].as_ref().is_none_or(|(t, _)| *t != thinking) {
                let chats = chats.render(table, msg, self.view, thinking)?;
                self.shown[k] = Some((thinking, chats));
            }
            sent.extend(self.shown[k].as_ref().unwrap().1.iter().cloned());
        }
        Ok(sent)
    }
}

/// The calls `replay` walked in a session as `score_session` reads them
/// (`kept`: the messages it replayed).
fn call_marks<'c>(kept: &[Message], replay: &'c SessionReplay) -> Vec<CallMarks<'c>> {
    replay
        .calls
        .iter()
        .map(|c| CallMarks {
            at: kept.partition_point(|m| m.rows.start < c.row),
            changed: c.changed,
            cleared: &c.cleared,
        })
        .collect()
}

/// The retention of every call of every session `replay` walked (sessions
/// left to the live walk, and those no call changed, score 1.0 throughout
/// and remove nothing), the sessions in parallel.
pub fn score_replays(
    table: &PartTable<'_>,
    sessions: &[SessionReplay],
    view: Render,
    system: Option<&str>,
) -> Result<Vec<Vec<Scored>>> {
    (0..sessions.len())
        .into_par_iter()
        .map_init(
            || table.clone(),
            |own, s| {
                let replay = &sessions[s];
                let whole = vec![Scored::whole(); replay.calls.len()];
                if replay.fallback.is_some() || !replay.calls.iter().any(|c| c.changed) {
                    return Ok(whole);
                }
                let messages = own.messages(s)?;
                let Some((kept, _)) = replayed(own, &messages, 0, 0) else {
                    return Ok(whole);
                };
                let rows = own.sessions[s].clone();
                // The walk's marks, undone: they are made again call by call.
                for f in &mut own.flags[rows] {
                    *f &= !flag::COMPACTED;
                }
                score_session(own, &kept, &call_marks(&kept, replay), view, system)
            },
        )
        .collect()
}

/// The retention of every segment `resume` walked (one per session, each
/// resumed from its `Resume` state with the `carried` retention of its
/// segment before: `None` where `head` is 0), the sessions in parallel.
pub fn score_resumed(
    table: &PartTable<'_>,
    sessions: &[SessionReplay],
    states: &[Resume],
    carried: Vec<Option<Carried>>,
    view: Render,
    system: Option<&str>,
) -> Result<Vec<Segmented>> {
    if carried.len() != sessions.len() || states.len() != sessions.len() {
        return Err(CoreError::Config(format!(
            "retention: {} carried states and {} resume states for {} sessions",
            carried.len(),
            states.len(),
            sessions.len()
        )));
    }
    carried
        .into_par_iter()
        .enumerate()
        .map_init(
            || table.clone(),
            |own, (s, carried)| {
                let replay = &sessions[s];
                let state = &states[s];
                if state.head > 0 && carried.is_none() {
                    let id = own
                        .session_id
                        .get(own.sessions[s].start)
                        .unwrap_or_default();
                    return Err(CoreError::InvalidUsage(format!(
                        "replay_resume: session {id:?} resumes after a summary (head {}) \
                         without the retention its previous segment carried",
                        state.head
                    )));
                }
                let messages = own.messages(s)?;
                let head = state.head.min(messages.len());
                let kept = match replay.fallback {
                    Some(Fallback::Compacted) => None,
                    _ => replayed(own, &messages, 0, head).map(|(kept, _)| kept),
                };
                let Some(kept) = kept else {
                    // A run the core left (it compacted itself with a tool part).
                    return Ok(Segmented {
                        summary: None,
                        calls: vec![Scored::whole(); replay.calls.len()],
                        carried: None,
                        previous: None,
                    });
                };
                // The walk's marks after the head, undone (the head's are the
                // live flow's): they are made again call by call.
                let from = messages
                    .get(head)
                    .map_or(own.sessions[s].end, |m| m.rows.start);
                for f in &mut own.flags[from..own.sessions[s].end] {
                    *f &= !flag::COMPACTED;
                }
                let stop = replay
                    .stop
                    .as_ref()
                    .map(|st| kept.partition_point(|m| m.rows.start < st.row));
                let segment = Segment {
                    head,
                    hidden: &state.hidden,
                    stop,
                };
                let marks = call_marks(&kept, replay);
                score_segment(own, &kept, &marks, view, system, segment, carried)
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_stop_is_a_word_of_stop_words() {
        let words: Vec<&str> = STOP_WORDS.split(' ').collect();
        for w in &words {
            assert!(stop(w), "{w:?}");
        }
        // near misses: each word cut, lengthened, changed in case
        for w in &words {
            for other in [
                &w[1..],
                &w[..w.len() - 1],
                &format!("{w}s"),
                &w.to_uppercase(),
            ] {
                assert_eq!(stop(other), words.contains(&other), "{other:?}");
            }
        }
        assert!(!stop("") && !stop("the") && !stop("thatt"));
    }

    #[test]
    fn retention_facts_are_each_kind_and_text_once_past_the_few() {
        let mut facts = Facts::default();
        for round in 0..3 {
            for i in 0..40 {
                facts.add(Some(Fact::verbatim(PATH, format!("p{i}"))));
                facts.add(Some(Fact::verbatim(IDENTIFIER, format!("p{i}"))));
            }
            assert_eq!(facts.list.len(), 80, "round {round}");
        }
        let texts: Vec<(u8, &str)> = facts
            .list
            .iter()
            .map(|f| (f.kind, f.text.as_str()))
            .collect();
        assert_eq!(texts[..3], [(PATH, "p0"), (IDENTIFIER, "p0"), (PATH, "p1")]);
        assert_eq!(texts[79], (IDENTIFIER, "p39"));
    }
}
