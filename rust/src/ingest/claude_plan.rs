//! Where a large Claude Code file can be cut into windows.
//!
//! A Claude Code file is mapped in line order with state that spans lines: a
//! `tool_result` completes a call read earlier, a session's events are
//! grouped wherever they sit in the file, and a `uuid` given again in a
//! session (at any distance) makes a positional id. Reading it whole bounds
//! memory by the file. A first pass here reads each line's session id,
//! `uuid` and tool call and result ids only (a scan that skips string
//! contents with `memchr`), then lists line ends that no state crosses:
//! - no call before the cut has a result after it;
//! - at most one session has events on both sides, and every session read
//!   before the cut is certainly grouped before it (so the windows' rows,
//!   each grouped by session, join into the rows of the whole file).
//!
//! and, for the second pass, the ids given on more than one line (with the
//! span of lines between), the only ones a window must pass on.
//!
//! Memory does not grow with the file: a call may be answered, an id given
//! again, anywhere, so the ids wait on disk (`spill`, 24 bytes a call,
//! result or uuid) and are grouped a bucket at a time at the end; the
//! blocked spans, in order, leave at most one cut a cell of `window / 64`
//! bytes (the first safe line end kept there), and the repeated ids are read
//! back in file order as the second pass reaches them. What stays in memory
//! is a few bytes a session, a cell, and a repeated id still ahead.
//!
//! The calls, results and uuids are a superset of what the mapper acts on
//! (any object typed `tool_use` at any depth is a call, a line the mapper
//! rejects still counts, ids of all sessions are one set). The sessions are
//! exact: a line's `sessionId` names the
//! session the lines without one join whether the mapper keeps its event or
//! not, and a line that is not JSON names one only if this scan reads it as
//! an event (`line_event`, which the mapper asks). Aside lines (titles,
//! file-history snapshots: `claude_file::is_aside`) without a session id
//! before the file's first other event join that event's session: no cut
//! between them and it. So a cut found here is
//! safe whichever lines the mapper keeps. A line the scan cannot vouch for
//! (a session id or uuid that is not a string, a key given twice) makes the
//! plan `None`: the file is read whole.

use std::collections::{HashMap, VecDeque};
use std::io::Read;

use rayon::prelude::*;

use super::claude_file::{hash, is_aside};
use super::lines::{lines_of, open_input, split_from};
use super::spill::{by_hash, Record, Spill};
use crate::error::{CoreError, Result};

/// What the first pass learnt of one line.
#[derive(Debug, PartialEq)]
enum Facts {
    /// Not an event the mapper can keep (not an object with a `"type"`
    /// string, or not JSON): it touches no session.
    Ignore,
    /// A line the scan cannot vouch for: the file is read whole.
    Unsure,
    /// An event: its session id (`None`: absent or falsy, it joins the
    /// session of the line before), whether it is an aside (`is_aside`), and the
    /// ids its calls and results use.
    Event {
        session: Option<Vec<u8>>,
        aside: bool,
        calls: Vec<u64>,
        results: Vec<u64>,
        /// The hash of its `uuid` (when a non-empty string), and whether it
        /// has the form of a positional id (`-e` and six or more digits).
        uuid: Option<(u64, bool)>,
    },
}

/// `py_str(None)`: what a null or absent call id becomes.
fn none_id() -> u64 {
    hash(b"None")
}

#[derive(Clone, Copy, PartialEq)]
enum Key {
    Other,
    SessionId,
    Type,
    Id,
    ToolUseId,
    Uuid,
    /// `"message"` at the top level: its value is the event's message body.
    Message,
}

#[derive(Clone, Copy, PartialEq)]
enum Slot {
    Absent,
    Null,
    Str(u64),
    Other,
}

struct Frame {
    object: bool,
    expect_key: bool,
    key: Key,
    /// `"type"`: `Some(true)` when it is a JSON string, with its value's kind.
    type_is_str: Option<bool>,
    kind: u8, // 0 other, 1 tool_use, 2 tool_result, 3 an aside (summary, file-history-snapshot)
    id: Slot,
    tool_use_id: Slot,
    session: Option<Option<Vec<u8>>>,
    /// `"uuid"` (top level): `Some(None)` when falsy.
    uuid: Option<Option<(u64, bool)>>,
    unsure: bool,
    /// The top-level `"message"` object: its `id` is a model call's.
    body: bool,
}

impl Frame {
    fn new(object: bool) -> Frame {
        Frame {
            object,
            expect_key: object,
            key: Key::Other,
            type_is_str: None,
            kind: 0,
            id: Slot::Absent,
            tool_use_id: Slot::Absent,
            session: None,
            uuid: None,
            unsure: false,
            body: false,
        }
    }
}

/// What a model call's id (`message.id`) is recorded as, among the calls
/// and results: a call from its first line to its last, so that no cut
/// parts the lines Claude Code writes for one call (a tag keeps it apart
/// from tool call ids; a collision would only make cuts rarer).
fn model_call(h: u64) -> u64 {
    h.rotate_left(17) ^ 0x6d65_7373_6167_6531
}

/// A JSON string's bytes between its quotes, unescaped when needed; `None`
/// for an escape serde_json would refuse (the line is then not JSON).
fn unescaped(raw_with_quotes: &[u8], escaped: bool) -> Option<Vec<u8>> {
    if !escaped {
        return Some(raw_with_quotes[1..raw_with_quotes.len() - 1].to_vec());
    }
    serde_json::from_slice::<String>(raw_with_quotes)
        .ok()
        .map(String::into_bytes)
}

/// Python truthiness of a JSON scalar's text (`null`, `false`, a zero number).
fn scalar_truthy(text: &[u8]) -> Option<bool> {
    match text {
        b"null" | b"false" => Some(false),
        b"true" => Some(true),
        _ => {
            let s = std::str::from_utf8(text).ok()?;
            s.parse::<f64>().ok().map(|f| f != 0.0)
        }
    }
}

/// The facts of one line (without its line break).
fn scan_line(line: &[u8]) -> Facts {
    let mut scan = Scan::default();
    match scan.tokens(line) {
        Ok(()) => scan.facts(),
        Err(stop) => stop,
    }
}

/// The scan of one line: the objects and arrays open, the ids of the calls
/// and results read, the top-level value once closed. A line that stops the
/// scan early is `Err(Facts::Ignore)` or `Err(Facts::Unsure)`.
#[derive(Default)]
struct Scan {
    stack: Vec<Frame>,
    calls: Vec<u64>,
    results: Vec<u64>,
    top: Option<Frame>,
}

impl Scan {
    fn tokens(&mut self, line: &[u8]) -> std::result::Result<(), Facts> {
        let n = line.len();
        let mut i = 0;
        while i < n {
            let b = line[i];
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => i += 1,
                b'{' | b'[' => {
                    self.open(b)?;
                    i += 1;
                }
                b'}' | b']' => {
                    self.close(b)?;
                    i += 1;
                }
                b'"' => {
                    let (j, escaped) = string_end(line, i).ok_or(Facts::Ignore)?;
                    let raw = &line[i..=j];
                    i = j + 1;
                    self.string(raw, escaped)?;
                }
                b':' => {
                    match self.stack.last_mut() {
                        Some(f) if f.object => f.expect_key = false,
                        _ => return Err(Facts::Ignore),
                    }
                    i += 1;
                }
                b',' => {
                    if let Some(f) = self.stack.last_mut() {
                        if f.object {
                            f.expect_key = true;
                            f.key = Key::Other;
                        }
                    }
                    i += 1;
                }
                _ => {
                    // a number or literal, up to the next delimiter
                    let end = line[i..]
                        .iter()
                        .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r'))
                        .map_or(n, |p| i + p);
                    let text = &line[i..end];
                    i = end;
                    self.scalar(text)?;
                }
            }
        }
        Ok(())
    }

    /// `{` or `[`.
    fn open(&mut self, b: u8) -> std::result::Result<(), Facts> {
        if let Some(f) = self.stack.last_mut() {
            if matches!(f.key, Key::SessionId | Key::Uuid) {
                f.unsure = true; // an object or list as the session id or uuid
            }
            match f.key {
                Key::Id => f.id = Slot::Other,
                Key::ToolUseId => f.tool_use_id = Slot::Other,
                _ => {}
            }
        } else if b == b'[' || self.top.is_some() {
            return Err(Facts::Ignore); // not one object: not an event
        }
        let body = b == b'{'
            && self.stack.len() == 1
            && self.stack.last().is_some_and(|f| f.key == Key::Message);
        self.stack.push(Frame::new(b == b'{'));
        if let Some(f) = self.stack.last_mut() {
            f.body = body;
        }
        Ok(())
    }

    /// `}` or `]`: a closed call or result gives its id.
    fn close(&mut self, b: u8) -> std::result::Result<(), Facts> {
        let Some(f) = self.stack.pop() else {
            return Err(Facts::Ignore);
        };
        if f.object != (b == b'}') {
            return Err(Facts::Ignore);
        }
        if f.unsure {
            return Err(Facts::Unsure);
        }
        let slot = match f.kind {
            1 => Some((f.id, &mut self.calls)),
            2 => Some((f.tool_use_id, &mut self.results)),
            _ => None,
        };
        if let Some((slot, into)) = slot {
            match slot {
                Slot::Absent | Slot::Null => into.push(none_id()),
                Slot::Str(h) => into.push(h),
                Slot::Other => {} // the mapper rejects the line
            }
        }
        if let (true, Slot::Str(h)) = (f.body, f.id) {
            // each line of a model call both opens and closes it
            self.calls.push(model_call(h));
            self.results.push(model_call(h));
        }
        if self.stack.is_empty() {
            self.top = Some(f);
        }
        Ok(())
    }

    /// A string, quotes included: a key, or the value of the key before.
    fn string(&mut self, raw: &[u8], escaped: bool) -> std::result::Result<(), Facts> {
        let depth = self.stack.len();
        let Some(f) = self.stack.last_mut() else {
            return Err(Facts::Ignore); // a bare string
        };
        if f.object && f.expect_key {
            let key = match unescaped(raw, escaped) {
                Some(k) => k,
                None => return Err(Facts::Ignore),
            };
            f.key = match key.as_slice() {
                b"sessionId" if depth == 1 => Key::SessionId,
                b"uuid" if depth == 1 => Key::Uuid,
                b"message" if depth == 1 => Key::Message,
                b"type" => Key::Type,
                b"id" => Key::Id,
                b"tool_use_id" => Key::ToolUseId,
                _ => Key::Other,
            };
            // a repeated key: which value wins is the parser's call
            let repeated = match f.key {
                Key::SessionId => f.session.is_some(),
                Key::Uuid => f.uuid.is_some(),
                Key::Type => f.type_is_str.is_some(),
                Key::Id => f.id != Slot::Absent,
                Key::ToolUseId => f.tool_use_id != Slot::Absent,
                Key::Other | Key::Message => false,
            };
            if repeated {
                return Err(Facts::Unsure);
            }
            return Ok(());
        }
        if !f.object {
            return Ok(());
        }
        let Some(value) = unescaped(raw, escaped) else {
            return Err(Facts::Ignore);
        };
        match f.key {
            Key::SessionId => {
                f.session = Some((!value.is_empty()).then_some(value));
            }
            Key::Type => {
                f.type_is_str = Some(true);
                f.kind = match value.as_slice() {
                    b"tool_use" => 1,
                    b"tool_result" => 2,
                    v if is_aside(v) => 3,
                    _ => 0,
                };
            }
            Key::Uuid => {
                f.uuid = Some((!value.is_empty()).then(|| (hash(&value), positional(&value))));
            }
            Key::Id => f.id = Slot::Str(hash(&value)),
            Key::ToolUseId => f.tool_use_id = Slot::Str(hash(&value)),
            Key::Other | Key::Message => {}
        }
        Ok(())
    }

    /// A number or a literal (`null`, `true`, `false`).
    fn scalar(&mut self, text: &[u8]) -> std::result::Result<(), Facts> {
        let Some(f) = self.stack.last_mut() else {
            return Err(Facts::Ignore);
        };
        if !f.object {
            return Ok(());
        }
        let null = text == b"null";
        match f.key {
            Key::SessionId => match scalar_truthy(text) {
                Some(false) => f.session = Some(None),
                Some(true) => return Err(Facts::Unsure), // py_str of a number or true
                None => return Err(Facts::Ignore),
            },
            Key::Uuid => match scalar_truthy(text) {
                Some(false) => f.uuid = Some(None),
                Some(true) => return Err(Facts::Unsure), // py_str of a number or true
                None => return Err(Facts::Ignore),
            },
            Key::Type => f.type_is_str = Some(false),
            Key::Id => f.id = if null { Slot::Null } else { Slot::Other },
            Key::ToolUseId => f.tool_use_id = if null { Slot::Null } else { Slot::Other },
            Key::Other | Key::Message => {}
        }
        Ok(())
    }

    /// The line read to its end: an event if it was one object with a `type` string.
    fn facts(self) -> Facts {
        match self.top {
            Some(event)
                if self.stack.is_empty() && event.object && event.type_is_str == Some(true) =>
            {
                Facts::Event {
                    session: event.session.flatten(),
                    aside: event.kind == 3,
                    calls: self.calls,
                    results: self.results,
                    uuid: event.uuid.flatten(),
                }
            }
            _ => Facts::Ignore,
        }
    }
}

/// The closing quote of the string opening at `i` (the next unescaped one)
/// and whether the string has escapes; `None` when it is not terminated.
fn string_end(line: &[u8], i: usize) -> Option<(usize, bool)> {
    let n = line.len();
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        match memchr::memchr2(b'"', b'\\', &line[j..]) {
            None => return None, // unterminated: not JSON
            Some(p) if line[j + p] == b'\\' => {
                escaped = true;
                j += p + 2;
                if j > n {
                    return None;
                }
            }
            Some(p) => return Some((j + p, escaped)),
        }
    }
}

/// Whether an id has the form of a positional one (`{session}-e{n:06}`):
/// `-e` and six or more ASCII digits at its end.
fn positional(id: &[u8]) -> bool {
    let digits = id.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    digits >= 6 && id[..id.len() - digits].ends_with(b"-e")
}

/// What the mapper asks of a line it cannot parse: `None` unless the scan
/// reads it as an event, else the session it names (its `sessionId` when a
/// non-empty string) and whether it is an aside (`is_aside`).
pub(super) fn line_event(line: &[u8]) -> Option<(Option<String>, bool)> {
    match scan_line(line) {
        Facts::Event { session, aside, .. } => {
            Some((session.and_then(|id| String::from_utf8(id).ok()), aside))
        }
        _ => None,
    }
}

/// Where a file can be cut, and which message ids a window passes on.
pub(super) struct Plan {
    /// Line ends where the file may be cut, ascending: the first such end
    /// the scan kept in each cell of its grid (a safe cut no more than
    /// about two cells past the first one).
    points: Vec<u64>,
    /// The end of the last line each session may have, by id hash.
    ends: HashMap<u64, u64>,
    /// How many bytes of the file were scanned: the second pass reads no
    /// more, and fewer means the file changed in between.
    pub len: u64,
    repeats: Repeats,
}

impl Plan {
    /// A safe cut at or after `at` (a line end): the first point at or past it.
    pub(super) fn cut(&self, at: u64) -> u64 {
        let i = self.points.partition_point(|&p| p < at);
        // past the last point: the file's end, where nothing is open
        self.points.get(i).copied().unwrap_or(at.max(self.len))
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.points.len()
    }

    /// Whether session `id` may have events after the cut at `at`.
    pub(super) fn continues(&self, id: &str, at: u64) -> bool {
        // a session the scan did not see (none should be) is kept
        let end = self.ends.get(&hash(id.as_bytes())).copied();
        end.unwrap_or(u64::MAX) > at
    }

    /// Move on to the cut at `at` (cuts in file order): from then on
    /// `repeats` tells the ids that may be asked for after it.
    pub(super) fn advance(&mut self, at: u64) -> std::io::Result<()> {
        self.repeats.advance(at)
    }

    /// Whether a message id (by `hash`) given before the cut last passed to
    /// `advance` may be asked for after it: the file has it as a `uuid`
    /// again past the cut, or it has the form of a positional id that a
    /// `uuid` of the file takes. Any other id is never asked for again.
    pub(super) fn repeats(&self, key: u64) -> bool {
        self.repeats.open.contains_key(&key)
    }

    /// The first pass over the file at `path`, read `window` bytes at a time,
    /// each window's lines scanned in parallel chunks of `chunk` bytes.
    /// `None`: a line the scan cannot vouch for (read the file whole).
    pub(super) fn scan(
        path: &str,
        size: u64,
        stem: &str,
        window: usize,
        chunk: usize,
    ) -> Result<Option<Plan>> {
        // the input itself unreadable: the OSError naming it
        let io = |e: std::io::Error| CoreError::unreadable(&e, path);
        // the temporary files' folder (full, missing, not writable) is no
        // fault of the input: an OSError naming the folder, not a format error
        let spill = |e: std::io::Error| {
            let folder = std::env::temp_dir().display().to_string();
            let what =
                format!("{path}: the first pass cannot use its temporary files in {folder}: {e}");
            CoreError::os(&e, what, folder)
        };
        // Only the first `size` bytes: what is appended later (a session
        // being written) is not read by the second pass either.
        let mut file = open_input(path)?.0.take(size);
        // a few points a window: windows stay within a few percent of `window`
        let cell = (window as u64 / 64).max(1);
        let mut builder = Builder::new(stem, size, cell).map_err(spill)?;
        let mut data: Vec<u8> = Vec::new();
        let mut base = 0u64; // file offset of data[0]
        loop {
            let before = data.len();
            let want = window.max(1 << 16) as u64;
            let got = (&mut file).take(want).read_to_end(&mut data).map_err(io)?;
            let eof = got == 0;
            let cut = match eof {
                true => data.len(),
                false => match memchr::memrchr(b'\n', &data[before..]) {
                    Some(p) => before + p + 1,
                    None => continue, // a line longer than the window: read on
                },
            };
            if !builder.lines(&data[..cut], base, chunk).map_err(spill)? {
                return Ok(None);
            }
            base += cut as u64;
            data.drain(..cut);
            if eof {
                break;
            }
        }
        builder.finish(base).map(Some).map_err(spill)
    }
}

/// The message ids given more than once in the file (a superset: by hash,
/// in any session), each with the span of lines from its first `uuid` to
/// its last, read in file order from their spill as the second pass goes.
struct Repeats {
    /// `[first, last, hash]` by the region of `first`.
    spill: Spill,
    region: u64,
    /// The next region to read, and those read whose `first` is ahead.
    next: usize,
    pending: VecDeque<Record>,
    /// Those around the last cut: hash to `last`.
    open: HashMap<u64, u64>,
}

impl Repeats {
    fn advance(&mut self, at: u64) -> std::io::Result<()> {
        while self.next < self.spill.len() && self.next as u64 * self.region <= at {
            let mut records = self.spill.take(self.next)?;
            records.sort_unstable();
            self.pending.extend(records);
            self.next += 1;
        }
        while let Some(&[first, last, key]) = self.pending.front() {
            if first > at {
                break;
            }
            self.pending.pop_front();
            let end = self.open.entry(key).or_insert(last);
            *end = (*end).max(last);
        }
        self.open.retain(|_, last| *last > at);
        Ok(())
    }
}

// What the first pass spills of an id, by kind.
const CALL: u64 = 0;
const RESULT: u64 = 1;
const UUID: u64 = 2;
/// A `uuid` of the form of a positional id: it may meet one at any distance.
const POSITIONAL: u64 = 3;

/// What the first pass gathers, line by line in file order.
struct Builder {
    stem: u64,
    /// The session a line without a `sessionId` joins.
    current: u64,
    /// Per session: the end of its first line (0 for the stem, which the
    /// lines before any session id join) and of its last.
    sessions: HashMap<u64, (u64, u64)>,
    /// The ends of the first and last aside lines without a session id
    /// read before any other event (they join the next event's session).
    held: Option<(u64, u64)>,
    /// An event other than those was read.
    started: bool,
    /// Cut positions no state may cross besides calls and sessions: `[lo, hi)`.
    blocked: Vec<(u64, u64)>,
    /// Every call, result and `uuid` as `[hash, line end, kind]`, by hash:
    /// on disk, so that memory does not grow with the file (a call may be
    /// answered, an id repeated, at any distance).
    ids: Spill,
    /// The first line end of each cell of `cell` bytes (the cut candidates).
    points: Vec<u64>,
    cell: u64,
    /// Bytes of the file per bucket of the spills ordered by position.
    region: u64,
}

/// File bytes per spill bucket: a bucket is read into memory whole. At most
/// 64 buckets a spill (three spills are open at once at the end of the pass:
/// 192 files, within the usual limit of open files); past 16 GB a bucket
/// holds more of the file.
const BUCKET_BYTES: u64 = 256 << 20;
const BUCKETS: u64 = 64;

impl Builder {
    fn new(stem: &str, size: u64, cell: u64) -> std::io::Result<Builder> {
        let stem = hash(stem.as_bytes());
        let buckets = (size / BUCKET_BYTES + 1).min(BUCKETS);
        Ok(Builder {
            stem,
            current: stem,
            sessions: HashMap::new(),
            held: None,
            started: false,
            blocked: Vec::new(),
            ids: Spill::new(buckets as usize)?,
            points: Vec::new(),
            cell: cell.max(1),
            region: size.div_ceil(buckets).max(1),
        })
    }

    /// The lines of `data` (whole lines; `base` its file offset); false for
    /// a line the scan cannot vouch for.
    fn lines(&mut self, data: &[u8], base: u64, chunk: usize) -> std::io::Result<bool> {
        // The mapper's chunks and lines (`split_from`, `lines_of`): the same
        // byte order mark, line breaks and blank lines.
        let mut chunks = Vec::new();
        let first_line = if base == 0 { 1 } else { 2 };
        split_from(0, data, chunk.max(1), first_line, &mut chunks);
        let facts: Vec<Vec<(u64, Facts)>> = chunks
            .par_iter()
            .map(|chunk| {
                let mut out = Vec::new();
                for (_, raw) in lines_of(data, chunk) {
                    let facts = scan_line(&data[raw.clone()]);
                    // the line ends after its break (a `\r` may stand before it)
                    let end = memchr::memchr(b'\n', &data[raw.end..])
                        .map_or(data.len(), |p| raw.end + p + 1);
                    out.push((base + end as u64, facts));
                }
                out
            })
            .collect();
        for (end, facts) in facts.into_iter().flatten() {
            if !self.line(end, facts)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One line's facts, its end at `end`; false when the scan is unsure of it.
    fn line(&mut self, end: u64, facts: Facts) -> std::io::Result<bool> {
        if self
            .points
            .last()
            .is_none_or(|&p| p / self.cell != end / self.cell)
        {
            self.points.push(end);
        }
        let Facts::Event {
            session,
            aside,
            calls,
            results,
            uuid,
        } = facts
        else {
            return Ok(facts == Facts::Ignore);
        };
        if !self.started && aside && session.is_none() {
            self.held.get_or_insert((end, end)).1 = end;
        } else {
            if let Some(id) = session {
                self.current = hash(&id);
            }
            // held aside lines join this line's session: no cut from the first of them
            let mut first = end;
            if let (false, Some((lo, _))) = (self.started, self.held.take()) {
                self.blocked.push((lo, end));
                first = lo;
            }
            self.started = true;
            // (a line without one joins the session of the line before, the stem before any)
            self.sessions.entry(self.current).or_insert((first, end)).1 = end;
        }
        let n = self.ids.len();
        let ids = calls.into_iter().map(|id| (id, CALL));
        let ids = ids.chain(results.into_iter().map(|id| (id, RESULT)));
        let ids = ids.chain(uuid.map(|(id, p)| (id, if p { POSITIONAL } else { UUID })));
        for (id, kind) in ids {
            self.ids.push(by_hash(id, n), [id, end, kind])?;
        }
        Ok(true)
    }

    /// The plan of the `len` bytes scanned.
    fn finish(self, len: u64) -> std::io::Result<Plan> {
        let Builder {
            stem,
            mut sessions,
            held,
            blocked: blocked_before,
            mut ids,
            points: recorded,
            cell,
            region,
            ..
        } = self;
        let n = ids.len();
        let bucket = |pos: u64| (pos / region) as usize;
        // Each id's records together (sorted by hash, then line): a call
        // blocks from its id's first call to the last result after it (a
        // result before any call completes nothing), and an id given twice
        // is a repeat from its first line to its last.
        let mut spans = Spill::new(n)?;
        let mut repeats = Spill::new(n)?;
        for k in 0..n {
            let mut records = ids.take(k)?;
            records.sort_unstable();
            for group in records.chunk_by(|a, b| a[0] == b[0]) {
                let key = group[0][0];
                let (mut call, mut result) = (None, 0);
                let (mut seen, mut first, mut last, mut positional) = (0, u64::MAX, 0, false);
                for &[_, end, kind] in group {
                    match kind {
                        CALL => drop(call.get_or_insert(end)),
                        RESULT if call.is_some() => result = end,
                        RESULT => {}
                        _ => {
                            seen += 1;
                            first = first.min(end);
                            last = end;
                            positional |= kind == POSITIONAL;
                        }
                    }
                }
                if let Some(call) = call.filter(|&c| result > c) {
                    spans.push(bucket(call), [call, result, 0])?;
                }
                if positional {
                    // a positional id may be given before or after it: all along
                    repeats.push(0, [0, u64::MAX, key])?;
                } else if seen > 1 {
                    repeats.push(bucket(first), [first, last, key])?;
                }
            }
        }
        drop(ids);
        // aside lines and nothing else: they join the stem
        if let Some((_, last)) = held {
            sessions.entry(stem).or_insert((0, last)).1 = last;
        }
        // The stem is where the mapper starts: it is current before any line.
        if let Some(span) = sessions.get_mut(&stem) {
            span.0 = 0;
        }
        let mut blocked = blocked_before;
        let mut order: Vec<(u64, u64)> = sessions.values().copied().collect();
        order.sort_unstable();
        let mut reach = 0; // the latest end of the sessions begun before
        for (k, &(first, end)) in order.iter().enumerate() {
            // Another session read after this one began, before the cut,
            // while this one goes on past it: its rows would split this one's.
            if let Some(&(next, _)) = order.get(k + 1) {
                if next < end {
                    blocked.push((next, end));
                }
            }
            // The mapper groups sessions in the order of their first kept
            // event: a session read around this one's first line, whose
            // earlier events may all be rejected, may come after it. No cut
            // inside this one then.
            if end > first && reach > first {
                blocked.push((first, end));
            }
            reach = reach.max(end);
        }
        for (lo, hi) in blocked {
            spans.push(bucket(lo), [lo, hi, 0])?;
        }
        // The blocked spans in order, merged, leave the recorded line ends
        // outside them and each span's end (never inside another: touching
        // spans merge); the first of those in each cell is kept.
        let mut points: Vec<u64> = Vec::new();
        let mut recorded = recorded.into_iter().peekable();
        let keep = |p: u64, points: &mut Vec<u64>| {
            if points.last().is_none_or(|&q| q / cell != p / cell) {
                points.push(p);
            }
        };
        let mut emit = |(lo, hi): (u64, u64), points: &mut Vec<u64>| {
            while let Some(p) = recorded.next_if(|&p| p < hi) {
                if p < lo {
                    keep(p, points);
                }
            }
            keep(hi, points);
        };
        let mut open: Option<(u64, u64)> = None;
        for k in 0..n {
            let mut records = spans.take(k)?;
            records.sort_unstable();
            for [lo, hi, _] in records {
                match &mut open {
                    Some(span) if lo <= span.1 => span.1 = span.1.max(hi),
                    _ => {
                        if let Some(span) = open.replace((lo, hi)) {
                            emit(span, &mut points);
                        }
                    }
                }
            }
        }
        if let Some(span) = open {
            emit(span, &mut points);
        }
        emit((len, len), &mut points); // the rest, and the file's end
        points.shrink_to_fit(); // kept for the whole read
        let ends = sessions.into_iter().map(|(id, s)| (id, s.1)).collect();
        Ok(Plan {
            points,
            ends,
            len,
            repeats: Repeats {
                spill: repeats,
                region,
                next: 0,
                pending: VecDeque::new(),
                open: HashMap::new(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(session: Option<&str>, calls: &[&str], results: &[&str]) -> Facts {
        Facts::Event {
            session: session.map(|s| s.as_bytes().to_vec()),
            aside: false,
            calls: calls.iter().map(|c| hash(c.as_bytes())).collect(),
            results: results.iter().map(|c| hash(c.as_bytes())).collect(),
            uuid: None,
        }
    }

    #[test]
    fn the_scan_reads_session_calls_and_results_at_any_depth() {
        let line = br#"{"type":"assistant","sessionId":"s\u0031","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"x":"\"}"}},{"id":"t2","type":"tool_use"},{"type":"tool_result","tool_use_id":"r\"1"},{"type":"tool_result"}]}}"#;
        assert_eq!(
            scan_line(line),
            event(Some("s1"), &["t1", "t2"], &["r\"1", "None"])
        );
        // falsy session ids join the line before
        assert_eq!(
            scan_line(br#"{"type":"user","sessionId":""}"#),
            event(None, &[], &[])
        );
        assert_eq!(
            scan_line(br#"{ "sessionId" : null , "type" : "user" }"#),
            event(None, &[], &[])
        );
        assert_eq!(
            scan_line(br#"{"type":"user","sessionId":0.0}"#),
            event(None, &[], &[])
        );
        // keys may be escaped too
        assert_eq!(
            scan_line(br#"{"t\u0079pe":"user","session\u0049d":"k"}"#),
            event(Some("k"), &[], &[])
        );
    }

    #[test]
    fn lines_the_mapper_rejects_are_ignored_and_odd_ids_are_unsure() {
        for line in [
            &br#"{"type":"user","sessionId":"s","message":{"content":"unterminated}}"#[..],
            br#"{"type":"user","sessionId":"s""#,
            br#"[{"type":"user","sessionId":"s"}]"#,
            br#"{"sessionId":"s"}"#,
            br#"{"type":1,"sessionId":"s"}"#,
            br#""text""#,
            br#"{"type":"user"}{"type":"user"}"#,
        ] {
            assert_eq!(
                scan_line(line),
                Facts::Ignore,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        for line in [
            &br#"{"type":"user","sessionId":7}"#[..],
            br#"{"type":"user","sessionId":true}"#,
            br#"{"type":"user","sessionId":{"a":1}}"#,
            br#"{"type":"user","sessionId":"a","sessionId":"b"}"#,
            br#"{"type":"user","message":{"content":[{"type":"tool_use","id":"a","id":"b"}]}}"#,
        ] {
            assert_eq!(
                scan_line(line),
                Facts::Unsure,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    fn title(session: Option<&str>) -> Facts {
        match event(session, &[], &[]) {
            Facts::Event {
                session,
                calls,
                results,
                ..
            } => Facts::Event {
                session,
                aside: true,
                calls,
                results,
                uuid: None,
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn summary_lines_before_the_first_event_are_not_cut_from_it() {
        let line = br#"{"type":"summary","summary":"t","leafUuid":"u","message":{"type":"x"}}"#;
        assert_eq!(scan_line(line), title(None));
        assert_eq!(line_event(line), Some((None, true)));
        let inner = br#"{"type":"user","message":{"content":[{"type":"summary"}]}}"#;
        assert_eq!(line_event(inner), Some((None, false)));
        // a file-history snapshot (no session id) waits as a title does
        let snapshot = br#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#;
        assert_eq!(scan_line(snapshot), title(None));
        assert_eq!(line_event(snapshot), Some((None, true)));
        let p = plan(vec![
            title(None),                // 10: waits for the first other event
            title(None),                // 20
            event(Some("a"), &[], &[]), // 30: a, with both summary lines
            title(None),                // 40: a, the line before's
            event(Some("b"), &[], &[]), // 50
        ]);
        let cuts: Vec<u64> = (1..=5).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [30, 30, 30, 40, 50]);
        assert!(p.continues("a", 30) && !p.continues("a", 40));
        // a summary line with a session id is that session's, at once
        let p = plan(vec![
            title(Some("a")),
            title(None),
            event(Some("b"), &[], &[]),
        ]);
        let cuts: Vec<u64> = (1..=3).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [10, 20, 30]);
        // summary lines only: the stem's, cut anywhere
        let p = plan(vec![title(None), title(None)]);
        assert_eq!([p.cut(10), p.cut(20)], [10, 20]);
        assert!(p.continues("stem", 10) && !p.continues("stem", 20));
    }

    fn plan(lines: Vec<Facts>) -> Plan {
        let n = lines.len() as u64;
        let mut b = Builder::new("stem", 10 * n, 1).unwrap();
        for (k, facts) in lines.into_iter().enumerate() {
            // each line ends at 10 * its number
            assert!(b.line(10 * (k as u64 + 1), facts).unwrap());
        }
        b.finish(10 * n).unwrap()
    }

    fn with_uuid(facts: Facts, id: &str) -> Facts {
        match facts {
            Facts::Event {
                session,
                aside,
                calls,
                results,
                ..
            } => Facts::Event {
                session,
                aside,
                calls,
                results,
                uuid: Some((hash(id.as_bytes()), positional(id.as_bytes()))),
            },
            other => other,
        }
    }

    #[test]
    fn the_scan_reads_a_top_level_uuid_and_whether_it_looks_positional() {
        let line = br#"{"type":"user","uuid":"u\u0031","message":{"uuid":"inner"}}"#;
        assert_eq!(scan_line(line), with_uuid(event(None, &[], &[]), "u1"));
        let line = br#"{"type":"user","sessionId":"s","uuid":"s-e000012"}"#;
        assert_eq!(
            scan_line(line),
            with_uuid(event(Some("s"), &[], &[]), "s-e000012")
        );
        assert!(positional(b"x-e1234567") && !positional(b"x-e12345") && !positional(b"e000001"));
        // falsy: no uuid (the mapper gives a positional id)
        for line in [
            &br#"{"type":"user","uuid":""}"#[..],
            br#"{"type":"user","uuid":null}"#,
            br#"{"type":"user","uuid":0}"#,
        ] {
            assert_eq!(scan_line(line), event(None, &[], &[]));
        }
        // a uuid the mapper would turn into text some other way: read whole
        for line in [
            &br#"{"type":"user","uuid":7}"#[..],
            br#"{"type":"user","uuid":["a"]}"#,
            br#"{"type":"user","uuid":"a","uuid":"b"}"#,
        ] {
            assert_eq!(scan_line(line), Facts::Unsure);
        }
    }

    #[test]
    fn ids_repeated_at_any_distance_stay_known_across_cuts_until_their_last_line() {
        let e = |id: &str| with_uuid(event(Some("s"), &[], &[]), id);
        let mut p = plan(vec![
            e("a"),         // 10
            e("b"),         // 20
            e("c"),         // 30
            e("s-e000009"), // 40: may meet a positional id anywhere
            e("a"),         // 50: a again
            e("d"),         // 60
        ]);
        let open = |p: &Plan, id: &str| p.repeats(hash(id.as_bytes()));
        p.advance(10).unwrap();
        assert!(open(&p, "a") && open(&p, "s-e000009") && !open(&p, "b"));
        p.advance(30).unwrap();
        assert!(open(&p, "a") && !open(&p, "c"));
        p.advance(50).unwrap(); // past a's last line
        assert!(!open(&p, "a") && open(&p, "s-e000009") && !open(&p, "d"));
    }

    #[test]
    fn the_lines_of_one_model_call_are_never_cut_apart() {
        let call = model_call(hash(b"msg_1"));
        let line = br#"{"type":"assistant","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t1"}]}}"#;
        let Facts::Event { calls, results, .. } = scan_line(line) else {
            panic!("not an event")
        };
        assert_eq!(calls, [hash(b"t1"), call]);
        assert_eq!(results, [call]);
        // an "id" elsewhere is no model call's
        let Facts::Event { calls, .. } =
            scan_line(br#"{"type":"user","id":"msg_1","message":{"content":[{"id":"x"}]}}"#)
        else {
            panic!("not an event")
        };
        assert!(calls.is_empty());
        let of_call = |session| Facts::Event {
            session: Some(b"s".to_vec()).filter(|_| session),
            aside: false,
            calls: vec![call],
            results: vec![call],
            uuid: None,
        };
        let p = plan(vec![
            event(Some("s"), &[], &[]), // 10
            of_call(true),              // 20: the call's first line
            event(None, &[], &[]),      // 30: a result between
            of_call(false),             // 40: its last line
            event(None, &[], &[]),      // 50
        ]);
        let cuts: Vec<u64> = (1..=5).map(|k| p.cut(10 * k)).collect();
        // was [10, 20, 30, 40, 50]: a cut between the call's lines split its message
        assert_eq!(cuts, [10, 40, 40, 40, 50]);
    }

    #[test]
    fn a_coarse_grid_keeps_one_safe_cut_a_cell() {
        let lines = || {
            vec![
                event(Some("a"), &["t"], &[]), // 10
                event(Some("a"), &[], &["t"]), // 20
                event(Some("a"), &[], &[]),    // 30
                event(Some("a"), &["u"], &[]), // 40
                event(Some("a"), &[], &[]),    // 50
                event(Some("a"), &[], &["u"]), // 60
                event(Some("a"), &[], &[]),    // 70
            ]
        };
        let mut b = Builder::new("stem", 70, 25).unwrap();
        for (k, facts) in lines().into_iter().enumerate() {
            assert!(b.line(10 * (k as u64 + 1), facts).unwrap());
        }
        let p = b.finish(70).unwrap();
        // kept: the first line end of each 25-byte cell (10, 30, 50) unless
        // blocked (10, 50), and the blocked spans' ends (20, 60), one a cell
        assert_eq!(p.points, [20, 30, 60]);
        let cuts: Vec<u64> = (1..=7).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [20, 20, 30, 60, 60, 60, 70]);
    }

    #[test]
    fn cuts_skip_open_calls_and_interleaved_sessions() {
        let p = plan(vec![
            event(None, &[], &[]),            // 10: the stem
            event(Some("a"), &["t"], &[]),    // 20
            event(Some("a"), &[], &["x"]),    // 30: a result of no call
            event(Some("a"), &[], &["t"]),    // 40: t closes
            event(Some("b"), &[], &[]),       // 50
            event(Some("a"), &[], &[]),       // 60: a resumes after b began
            event(Some("c"), &[], &[]),       // 70
            event(Some("c"), &["u"], &["u"]), // 80: call and result in one event
        ]);
        let cuts: Vec<u64> = (1..=8).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [10, 40, 40, 40, 60, 60, 70, 80]);
        assert!(p.continues("a", 50) && !p.continues("a", 60) && !p.continues("stem", 10));
        // a line without a session id joins the session of the line before
        let p = plan(vec![
            event(None, &[], &[]),         // 10: the stem
            event(Some("a"), &[], &[]),    // 20
            event(None, &[], &["x"]),      // 30: a
            event(Some("b"), &[], &[]),    // 40
            event(None, &[], &[]),         // 50: b
            event(Some("stem"), &[], &[]), // 60: the stem again, around a and b
        ]);
        let cuts: Vec<u64> = (1..=6).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [10, 60, 60, 60, 60, 60]);
        let p = plan(vec![
            event(None, &[], &[]),
            event(Some("a"), &[], &[]),
            event(None, &[], &[]),
            event(Some("b"), &[], &[]),
            event(None, &[], &[]),
        ]);
        let cuts: Vec<u64> = (1..=5).map(|k| p.cut(10 * k)).collect();
        assert_eq!(cuts, [10, 20, 30, 40, 50]);
        assert!(p.continues("a", 20) && !p.continues("a", 30) && !p.continues("b", 50));
    }
}
