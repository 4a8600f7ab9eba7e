//! Mutation fuzzing of the native readers and the engine's scans, on stable
//! Rust (no cargo-fuzz, no sanitizers): inputs are the sample files, mutated
//! byte-wise (bit flips, truncations, splices, bad UTF-8, NUL) and
//! JSON-wise (a node of a parsed line replaced by deep nesting, huge
//! numbers, lone surrogates, another node...). Every input goes through
//! `std::panic::catch_unwind`: a panic is a bug (the core's answer to bad
//! bytes is a typed `CoreError`), recorded with its input.
//!
//! Targets: `ingest:<format>` (`ingest::ingest` over the bytes in memory,
//! both `on_error` policies, small chunks), `stream` (`ingest::Stream` over
//! a file, small windows: the Claude Code plan and the window carries),
//! `scans` (every scan over what the ingest made) and `table` (the scans
//! over that table with columns replaced: arbitrary strings, bad codes,
//! wrong counted lengths, nulls). The engine's entry points over the same
//! tables: `plan` (`plan::plan`, each shape or none, random policies),
//! `replay` (`replay::replay`, message facts of the right or a wrong
//! length, masks acting per call or per turn, budgets), `resume`
//! (`replay::resume` with random resume states: heads past the end,
//! hidden flags of any length, huge baselines), `retention`
//! (`retention::score_replays` over what the replay made, and the chat
//! rules, `extract_facts`, `score_compaction`, `RunRetention`, over the
//! messages of a mutated chat list) and `chatlist` (`chatlist::chat_counts`
//! over a mutated `openai-chat` input with any size). For these an
//! internal error (`CoreError::Internal`, an `InternalError` in Python)
//! counts as a panic: it is a bug, not an answer to bad input.
//!
//! Run: `tools/fuzz/run.sh [seconds] [seed dirs...]` (see there), or
//! `cargo run --profile fuzz --example fuzz -- --seconds 60 --out DIR SEED_DIR...`.
//! Prints inputs tried and panics per target; exits 1 on any panic, with
//! each panicking input written to `--out`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, Int8Array, LargeStringArray, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use serde_json::Value;

use ctxcompact::chatlist::chat_counts;
use ctxcompact::compact::compact;
use ctxcompact::ingest::{self, Format, OnError, Options, Source, Stream, StreamFile};
use ctxcompact::messages::{estimate_messages, MessageEstimateConfig};
use ctxcompact::pivot::{pivot_mask, visible_ranges};
use ctxcompact::plan::{plan, PlanConfig};
use ctxcompact::prune::{prune, Acts, PruneConfig, TurnUnit};
use ctxcompact::render::Render;
use ctxcompact::replay::{replay, resume, MessageFacts, ReplayConfig, Resume};
use ctxcompact::retention::{extract_facts, score_compaction, score_replays, Chat, RunRetention};
use ctxcompact::shapes::Shape;
use ctxcompact::target::tool_target_array;
use ctxcompact::{Columns, CoreError, Method, PartTable, Scan};

/// Inputs larger than this are cut (mutations that duplicate would grow them).
const MAX_INPUT: usize = 1 << 20;
/// A seed file is cut to its first lines up to about this many bytes.
const SEED_BYTES: usize = 48 << 10;

// ---------------------------------------------------------------- randomness

/// xorshift64*: the fuzzer's only randomness, so a run is replayed by its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------- seeds

/// A seed input and the formats that read rows from it.
struct Seed {
    bytes: Vec<u8>,
    formats: Vec<Format>,
}

fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for entry in entries {
            files_under(&entry, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// The first lines of `bytes` up to about `SEED_BYTES`.
fn head_lines(bytes: &[u8]) -> Vec<u8> {
    if bytes.len() <= SEED_BYTES {
        return bytes.to_vec();
    }
    let cut = bytes[SEED_BYTES..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| SEED_BYTES + i + 1);
    bytes[..cut].to_vec()
}

/// Seed inputs from the files under `paths`: JSONL files as they are (their
/// head), JSON documents as one compact line each (a long top-level list,
/// as tau-bench's, as lines of a few of its items).
fn seed_inputs(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    for path in paths {
        files_under(path, &mut files);
    }
    let mut seeds = Vec::new();
    for file in files {
        let name = file.to_string_lossy();
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        if name.ends_with(".jsonl") {
            seeds.push(head_lines(&bytes));
        } else if name.ends_with(".json") || name.ends_with(".traj") {
            let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            match value {
                Value::Array(items) if items.len() > 4 => {
                    for group in items.chunks(2).take(12) {
                        let line = serde_json::to_vec(group).expect("a value");
                        seeds.push(head_lines(&line));
                    }
                }
                value => {
                    let line = serde_json::to_vec(&value).expect("a value");
                    if line.len() <= 4 * SEED_BYTES {
                        seeds.push(line);
                    }
                }
            }
        }
    }
    derived(&mut seeds);
    seeds
}

/// Seeds of the formats the sample files have none of, made from others:
/// an OpenCode export's messages one per line (`opencode-messages`), and a
/// Claude Code file's messages as one Anthropic request.
fn derived(seeds: &mut Vec<Vec<u8>>) {
    let mut more = Vec::new();
    for seed in seeds.iter() {
        let mut request = Vec::new();
        for line in seed.split(|&b| b == b'\n') {
            let Ok(Value::Object(value)) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            match (value.get("messages"), value.get("message")) {
                (Some(Value::Array(messages)), _) => {
                    let lines: Vec<Vec<u8>> = messages
                        .iter()
                        .filter(|m| m.get("info").is_some() && m.get("parts").is_some())
                        .map(|m| serde_json::to_vec(m).expect("a value"))
                        .collect();
                    if !lines.is_empty() {
                        more.push(head_lines(&lines.join(&b'\n')));
                    }
                }
                (_, Some(Value::Object(message))) if message.contains_key("content") => {
                    let mut kept = serde_json::Map::new();
                    for key in ["role", "content"] {
                        if let Some(v) = message.get(key) {
                            kept.insert(key.to_owned(), v.clone());
                        }
                    }
                    request.push(Value::Object(kept));
                }
                _ => {}
            }
        }
        if !request.is_empty() {
            let body = serde_json::json!({"system": "be brief", "messages": request});
            more.push(serde_json::to_vec(&body).expect("a value"));
        }
    }
    seeds.extend(more);
}

const FORMATS: [Format; 10] = Format::ALL;

fn format_name(format: Format) -> &'static str {
    Format::NAMES[FORMATS.iter().position(|f| *f == format).expect("listed")]
}

fn rows_of(out: &ingest::Ingested) -> usize {
    out.batches.iter().map(RecordBatch::num_rows).sum()
}

/// Each seed with the formats it gives rows in.
fn classify(inputs: Vec<Vec<u8>>) -> Vec<Seed> {
    inputs
        .into_iter()
        .map(|bytes| {
            let formats = FORMATS
                .iter()
                .copied()
                .filter(|&format| {
                    let source = Source::new("seed.jsonl", &bytes, format);
                    ingest::ingest(&[source], &Options::new(OnError::Skip))
                        .is_ok_and(|out| rows_of(&out) > 0)
                })
                .collect();
            Seed { bytes, formats }
        })
        .collect()
}

// ---------------------------------------------------------------- mutations

/// Tokens inserted or swapped in: JSON that parsers and mappers treat apart.
const TOKENS: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-0",
    "-1",
    "1.5",
    "1e999999",
    "-1e999999",
    "1e-400",
    "123456789012345678901234567890",
    "-9223372036854775809",
    "9223372036854775808",
    "18446744073709551616",
    "1E+2",
    "0.0000000000000000000001",
    "\"\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\ud800\\u0041\"",
    "\"\\udbff\\udfff\"",
    "\"\\u0000\"",
    "\"\\uZZZZ\"",
    "\"\\",
    "\"\\u",
    "\"a\\\"b\"",
    "\"\u{feff}\"",
    "\"\u{10ffff}\"",
    "\"\u{2028}\"",
    "{}",
    "[]",
    "[{}]",
    "{\"\":\"\"}",
    "{\"type\":null}",
    "\r\n",
    "\n",
    "\n\n",
    "\u{feff}",
    "\t",
    ",",
    ":",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "NaN",
    "Infinity",
];

/// Byte sequences that are not UTF-8, or are NUL.
const BAD_BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xfe",
    b"\xc0\x80",
    b"\x80",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82",
    b"\x00",
    b"\xf0\x9f\x98",
];

/// Keys and string values found in the seeds (short quoted strings).
fn dictionary(seeds: &[Seed]) -> Vec<Vec<u8>> {
    let mut words = std::collections::BTreeSet::new();
    for seed in seeds {
        let b = &seed.bytes;
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'"' {
                if let Some(len) = b[i + 1..].iter().take(40).position(|&c| c == b'"') {
                    let word = &b[i..i + len + 2];
                    if !word.contains(&b'\\') {
                        words.insert(word.to_vec());
                    }
                    i += len + 2;
                    continue;
                }
            }
            i += 1;
        }
    }
    words.into_iter().take(4000).collect()
}

struct Mutator {
    seeds: Vec<Seed>,
    words: Vec<Vec<u8>>,
}

/// Random JSON of small depth, from the token list and the dictionary.
fn random_value(rng: &mut Rng, words: &[Vec<u8>], depth: usize) -> Value {
    match rng.below(if depth > 2 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => {
            let numbers = [
                "-0",
                "1e300",
                "123456789012345678901234567890",
                "-1",
                "0",
                "2.5",
            ];
            let number = numbers[rng.below(numbers.len())];
            serde_json::from_str(number).expect("a number")
        }
        3 => Value::String(String::new()),
        4 | 5 => match words.is_empty() {
            true => Value::String("x".into()),
            false => {
                let word: &Vec<u8> = rng.pick(words);
                serde_json::from_slice(word).unwrap_or(Value::Null)
            }
        },
        6 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_value(rng, words, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                let key = match random_value(rng, words, 3) {
                    Value::String(s) => s,
                    _ => "type".into(),
                };
                map.insert(key, random_value(rng, words, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// Number of nodes of `value` (itself included).
fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(a) => a.iter().map(count_nodes).sum(),
        Value::Object(m) => m.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// The `n`-th node of `value` in pre-order (0: `value`).
fn nth_node<'v>(value: &'v mut Value, n: &mut usize) -> Option<&'v mut Value> {
    if *n == 0 {
        return Some(value);
    }
    *n -= 1;
    match value {
        Value::Array(a) => a.iter_mut().find_map(|v| nth_node(v, n)),
        Value::Object(m) => m.values_mut().find_map(|v| nth_node(v, n)),
        _ => None,
    }
}

fn nested(depth: usize, leaf: Value, object: bool) -> Value {
    (0..depth).fold(leaf, |v, _| match object {
        true => Value::Object([("a".to_owned(), v)].into_iter().collect()),
        false => Value::Array(vec![v]),
    })
}

impl Mutator {
    /// One JSON-aware change to a parsed line: a node replaced, removed,
    /// duplicated or nested deep.
    fn mutate_value(&self, rng: &mut Rng, value: &mut Value) {
        let total = count_nodes(value);
        let copy = {
            let mut m = rng.below(total);
            let other = value_clone_at(value, &mut m);
            match count_nodes(&other) > 2000 {
                true => Value::Null,
                false => other,
            }
        };
        let mut n = rng.below(total);
        let Some(node) = nth_node(value, &mut n) else {
            return;
        };
        match rng.below(10) {
            0 => *node = copy,
            1 => *node = nested(rng.below(300) + 1, node.take(), rng.chance(2)),
            2 => match node {
                Value::Object(m) if !m.is_empty() => {
                    let k = rng.below(m.len());
                    let key = m.keys().nth(k).cloned().expect("k < len");
                    m.shift_remove(&key);
                }
                Value::Array(a) if !a.is_empty() => {
                    let k = rng.below(a.len());
                    a.remove(k);
                }
                _ => *node = Value::Null,
            },
            3 => match node {
                Value::Array(a) if !a.is_empty() && a.len() < 64 => {
                    let k = rng.below(a.len());
                    let dup = a[k].clone();
                    a.insert(k, dup);
                }
                Value::Object(m) => {
                    let key = match random_value(rng, &self.words, 3) {
                        Value::String(s) => s,
                        _ => "id".into(),
                    };
                    m.insert(key, random_value(rng, &self.words, 1));
                }
                _ => *node = random_value(rng, &self.words, 0),
            },
            4 => match node {
                Value::String(s) => {
                    let cut = rng.below(s.len() + 1);
                    let cut = (0..=cut)
                        .rev()
                        .find(|&i| s.is_char_boundary(i))
                        .unwrap_or(0);
                    s.truncate(cut);
                }
                _ => *node = Value::String(String::new()),
            },
            5 => match node {
                Value::String(s) => {
                    let insert = rng.pick(&[
                        "\u{0}",
                        "\u{feff}",
                        "\n",
                        "\r",
                        "\"",
                        "\\",
                        "\u{10ffff}",
                        "é",
                        "\u{2028}",
                        "{",
                        "}",
                        "[]",
                        "\t",
                    ]);
                    let at = rng.below(s.len() + 1);
                    let at = (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.insert_str(at, insert);
                }
                _ => *node = Value::String("\u{0}".into()),
            },
            6 => {
                let number = rng.pick(&[
                    "1e999999",
                    "-0",
                    "123456789012345678901234567890",
                    "-9223372036854775809",
                    "18446744073709551615",
                    "1.7976931348623157e308",
                    "4.9e-324",
                    "-1",
                    "0.5",
                ]);
                // arbitrary_precision keeps the text; a float beyond f64 may not parse
                *node = serde_json::from_str(number).unwrap_or(Value::Null);
            }
            7 => {
                // a value of another type
                *node = match node {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Array(vec![])),
                    Value::Array(a) => Value::Object(
                        a.drain(..)
                            .enumerate()
                            .map(|(i, v)| (i.to_string(), v))
                            .collect(),
                    ),
                    Value::Object(m) => {
                        Value::Array(std::mem::take(m).into_iter().map(|(_, v)| v).collect())
                    }
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::Bool(b) => Value::String(b.to_string()),
                    Value::Null => Value::Object(Default::default()),
                }
            }
            _ => *node = random_value(rng, &self.words, 0),
        }
    }

    /// One byte-level change.
    fn mutate_bytes(&self, rng: &mut Rng, data: &mut Vec<u8>) {
        let len = data.len();
        let at = |rng: &mut Rng| rng.below(len + 1);
        match rng.below(12) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = *rng.pick(b"\0\xff\x80\"\\\n{}[],: \x7fa0\xc3");
            }
            2 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64.min(len - a))).min(len);
                data.drain(a..b);
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(256.min(len - a))).min(len);
                let piece = data[a..b].to_vec();
                let i = at(rng);
                data.splice(i..i, piece);
            }
            4 => data.truncate(at(rng)),
            5 => {
                let other = &rng.pick(&self.seeds).bytes;
                let i = at(rng);
                let j = rng.below(other.len() + 1);
                data.truncate(i);
                data.extend_from_slice(&other[j..]);
            }
            6 => {
                let token = rng.pick(TOKENS).as_bytes();
                let i = at(rng);
                data.splice(i..i, token.iter().copied());
            }
            7 => {
                let bad = rng.pick(BAD_BYTES);
                let i = at(rng);
                data.splice(i..i, bad.iter().copied());
            }
            8 if !self.words.is_empty() => {
                let word = rng.pick(&self.words).clone();
                let i = at(rng);
                data.splice(i..i, word);
            }
            9 => {
                // a quoted string's content replaced by a token
                let quotes: Vec<usize> = data
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'"')
                    .map(|(i, _)| i)
                    .collect();
                if quotes.len() >= 2 {
                    let k = rng.below(quotes.len() - 1);
                    let (a, b) = (quotes[k], quotes[k + 1]);
                    let token = rng.pick(TOKENS).as_bytes().to_vec();
                    data.splice(a..=b, token);
                }
            }
            10 => {
                // lines swapped, repeated, removed, or blank
                let mut lines: Vec<Vec<u8>> =
                    data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let n = lines.len();
                let (i, j) = (rng.below(n), rng.below(n));
                match rng.below(4) {
                    0 => lines.swap(i, j),
                    1 => {
                        let line = lines[i].clone();
                        lines.insert(j, line);
                    }
                    2 if n > 1 => {
                        lines.remove(i);
                    }
                    _ => lines.insert(i, Vec::new()),
                }
                *data = lines.join(&b'\n');
            }
            _ => {
                let depth = 100 + rng.below(200);
                let open = if rng.chance(2) { "[" } else { "{\"a\":" };
                let i = at(rng);
                data.splice(i..i, open.repeat(depth).into_bytes());
            }
        }
    }

    /// A mutant of a seed for `format` (its own seeds mostly), and its seed.
    fn input(&self, rng: &mut Rng, format: Option<Format>) -> Vec<u8> {
        let own: Vec<&Seed> = match format {
            Some(f) => self
                .seeds
                .iter()
                .filter(|s| s.formats.contains(&f))
                .collect(),
            None => self
                .seeds
                .iter()
                .filter(|s| !s.formats.is_empty())
                .collect(),
        };
        let seed = if own.is_empty() || rng.chance(10) {
            rng.pick(&self.seeds)
        } else {
            *rng.pick(&own)
        };
        let mut data = seed.bytes.clone();
        if rng.chance(20) {
            return data;
        }
        let changes = 1 + rng.below(4);
        for _ in 0..changes {
            if rng.chance(2) {
                // JSON-aware: one line parsed, changed and written back
                let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
                let k = rng.below(lines.len());
                if let Ok(mut value) = serde_json::from_slice::<Value>(lines[k]) {
                    self.mutate_value(rng, &mut value);
                    let line = serde_json::to_vec(&value).expect("a value");
                    let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
                    out[k] = line;
                    data = out.join(&b'\n');
                    continue;
                }
            }
            self.mutate_bytes(rng, &mut data);
        }
        data.truncate(MAX_INPUT);
        data
    }
}

/// A copy of the `n`-th node (pre-order).
fn value_clone_at(value: &Value, n: &mut usize) -> Value {
    fn find<'v>(value: &'v Value, n: &mut usize) -> Option<&'v Value> {
        if *n == 0 {
            return Some(value);
        }
        *n -= 1;
        match value {
            Value::Array(a) => a.iter().find_map(|v| find(v, n)),
            Value::Object(m) => m.values().find_map(|v| find(v, n)),
            _ => None,
        }
    }
    find(value, n).cloned().unwrap_or(Value::Null)
}

// ---------------------------------------------------------------- targets

/// The message and place of the last panic (set by the panic hook, on
/// whichever thread panicked).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn ingest_bytes(
    data: &[u8],
    format: Format,
    rng: &mut Rng,
) -> ctxcompact::Result<ingest::Ingested> {
    let source = Source::new("fuzz.jsonl", data, format);
    let on_error = if rng.chance(2) {
        OnError::Skip
    } else {
        OnError::Raise
    };
    let options = Options {
        on_error,
        chunk_bytes: *rng.pick(&[1, 7, 64, 512, 4096, 1 << 20]),
    };
    ingest::ingest(&[source], &options)
}

fn methods() -> Vec<Method> {
    let mut all = vec![Method::Opencode, Method::CeilBytes];
    for family in ctxcompact::bigram::Family::ALL {
        all.push(Method::Bigram {
            family,
            conservative: false,
        });
        all.push(Method::Bigram {
            family,
            conservative: true,
        });
    }
    all
}

fn prune_config(rng: &mut Rng) -> PruneConfig {
    let methods = methods();
    let mut config = PruneConfig::default();
    if rng.chance(2) {
        config.protect = rng.below(200) as u64;
        config.minimum = rng.below(50) as u64;
        config.protect_turns = rng.below(3) as u32;
        config.turn = if rng.chance(2) {
            TurnUnit::Step
        } else {
            TurnUnit::User
        };
        config.keep_recent = rng.chance(2).then(|| rng.below(3) as u32);
        config.keep_recent_per_tool = rng.chance(2);
        config.continue_past_compacted = rng.chance(2);
        config.supersede = rng.chance(2);
        config.trigger = *rng.pick(&[0, 1, 1000]);
        config.min_output_tokens = rng.below(10) as u64;
        config.clear_at_least = rng.below(10) as u64;
        config.method = *rng.pick(&methods);
        config.render = Render {
            clear_inputs: rng.chance(2),
            truncate_output: rng.chance(2).then(|| rng.below(20) as u64),
            describe: rng.chance(2),
            keep_thinking: rng.below(3) as u32,
        };
    }
    config
}

/// Every scan over `batches` (a table the ingest made, or one changed from
/// it). Errors are the scans' right answers; only panics count.
fn run_scans(schema: &Schema, batches: &[RecordBatch], rng: &mut Rng) {
    let config = prune_config(rng);
    if let Ok(columns) = Columns::new(schema, batches, config.scan()) {
        if let Ok(table) = PartTable::new(&columns) {
            let _ = prune(&table, &config);
        }
    }
    if let Ok(columns) = Columns::new(schema, batches, Scan::Pivot) {
        if let Ok(table) = PartTable::new(&columns) {
            let _ = pivot_mask(&table);
            let _ = visible_ranges(&table);
        }
    }
    if let Ok(columns) = Columns::new(schema, batches, Scan::Sessions) {
        if let Ok(table) = PartTable::new(&columns) {
            let mut messages = Vec::new();
            for s in 0..table.sessions.len() {
                if table.messages_into(s, &mut messages).is_err() {
                    break;
                }
            }
        }
    }
    let estimate = MessageEstimateConfig {
        method: *rng.pick(&methods()),
        overhead: rng.below(8) as u64,
        render: config.render,
    };
    if let Ok(columns) = Columns::new(schema, batches, Scan::Estimate) {
        if let Ok(table) = PartTable::new(&columns) {
            let _ = estimate_messages(&table, estimate);
        }
    }
    if let Ok(columns) = Columns::new(schema, batches, Scan::Compact) {
        if let Ok(mut table) = PartTable::new(&columns) {
            let _ = compact(&mut table, &config, estimate);
        }
    }
    let column = |name: &str| schema.index_of(name).ok();
    for batch in batches {
        if let (Some(tool), Some(input)) = (column("tool"), column("input")) {
            let _ = tool_target_array(batch.column(tool), batch.column(input));
        }
        for name in ["output", "input", "part_json"] {
            if let Some(i) = column(name) {
                let values = batch.column(i);
                let method = *rng.pick(&methods());
                let _ = ctxcompact::estimate::estimate_array(values, method);
                let _ = ctxcompact::estimate::units_array(values, method);
                if rng.chance(8) {
                    let family = if rng.chance(2) { "o200k" } else { "cl100k" };
                    let tokenizer = ctxcompact::tokens::Tokenizer::named(family).expect("built in");
                    let _ = tokenizer.count_array(values);
                }
            }
        }
    }
    for name in ["output", "part_json", "session_id"] {
        if let Some(i) = column(name) {
            let chunks: Vec<ArrayRef> = batches.iter().map(|b| b.column(i).clone()).collect();
            let total: usize = chunks.iter().map(|c| c.len()).sum();
            let rows: Vec<u64> = (0..rng.below(8))
                .map(|_| rng.below(total + 2) as u64)
                .collect();
            let _ = ctxcompact::columns::take_strings(&chunks, &rows);
        }
    }
    if let Some(i) = column("compacted_at") {
        let chunks: Vec<ArrayRef> = batches.iter().map(|b| b.column(i).clone()).collect();
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        let rows: Vec<u64> = (0..rng.below(8))
            .map(|_| rng.below(total + 2) as u64)
            .collect();
        let _ = ctxcompact::mark::mark_rows(&chunks, &rows, rng.next() as i64);
    }
}

/// A string of arbitrary text: a mutated dictionary word or seed piece,
/// made valid UTF-8 (Arrow's strings are).
fn random_string(rng: &mut Rng, mutator: &Mutator) -> String {
    let mut bytes = match rng.below(4) {
        0 => rng.pick(&mutator.words).clone(),
        1 => {
            let seed = &rng.pick(&mutator.seeds).bytes;
            let a = rng.below(seed.len() + 1);
            let b = (a + rng.below(2000)).min(seed.len());
            seed[a..b].to_vec()
        }
        2 => serde_json::to_vec(&random_value(rng, &mutator.words, 0)).expect("a value"),
        _ => rng.pick(TOKENS).as_bytes().to_vec(),
    };
    for _ in 0..rng.below(3) {
        mutator.mutate_bytes(rng, &mut bytes);
    }
    bytes.truncate(1 << 16);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The batch with some columns replaced: arbitrary strings, role / part
/// type / status as int8 codes of any value, wrong counted lengths, nulls,
/// a counted column of a bigram family with random counts.
fn changed_table(
    schema: &Schema,
    batches: &[RecordBatch],
    rng: &mut Rng,
    mutator: &Mutator,
) -> Option<(Schema, Vec<RecordBatch>)> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<Vec<ArrayRef>> = (0..fields.len())
        .map(|i| batches.iter().map(|b| b.column(i).clone()).collect())
        .collect();
    let lengths: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
    let changes = 1 + rng.below(4);
    for _ in 0..changes {
        let i = rng.below(fields.len() + 1);
        if i == fields.len() {
            // a bigram family's counted column, with its fingerprint
            let family = *rng.pick(&ctxcompact::bigram::Family::ALL);
            let name = family.counted_column();
            if schema.index_of(name).is_ok() || fields.iter().any(|f| f.name() == name) {
                continue;
            }
            let metadata = [(
                ctxcompact::estimate::UNITS_KEY.to_owned(),
                family.fingerprint().to_owned(),
            )]
            .into_iter()
            .collect();
            fields.push(Field::new(name, DataType::Int64, true).with_metadata(metadata));
            columns.push(
                lengths
                    .iter()
                    .map(|&n| Arc::new(random_ints(rng, n)) as ArrayRef)
                    .collect(),
            );
            continue;
        }
        let name = fields[i].name().clone();
        let data_type = fields[i].data_type().clone();
        let new: Vec<ArrayRef> = match (name.as_str(), data_type) {
            ("role" | "part_type" | "status", _) if rng.chance(2) => {
                fields[i] = Field::new(&name, DataType::Int8, true);
                lengths
                    .iter()
                    .map(|&n| {
                        let codes: Int8Array = (0..n)
                            .map(|_| match rng.below(4) {
                                0 => None,
                                1 => Some(rng.next() as i8),
                                _ => Some(rng.below(6) as i8),
                            })
                            .collect();
                        Arc::new(codes) as ArrayRef
                    })
                    .collect()
            }
            (_, DataType::Int64) => lengths
                .iter()
                .map(|&n| Arc::new(random_ints(rng, n)) as ArrayRef)
                .collect(),
            (_, DataType::Boolean) => lengths
                .iter()
                .map(|&n| {
                    let flags: BooleanArray = (0..n)
                        .map(|_| match rng.below(3) {
                            0 => None,
                            k => Some(k == 1),
                        })
                        .collect();
                    Arc::new(flags) as ArrayRef
                })
                .collect(),
            (_, data_type) => {
                let old = &columns[i];
                let values = |rng: &mut Rng, c: &ArrayRef| -> Vec<Option<String>> {
                    (0..c.len())
                        .map(|r| {
                            let kept = string_at(c, r);
                            match rng.below(4) {
                                0 => Some(random_string(rng, mutator)),
                                1 if rng.chance(4) => None,
                                _ => kept,
                            }
                        })
                        .collect()
                };
                old.iter()
                    .map(|c| match data_type {
                        DataType::LargeUtf8 => {
                            Arc::new(LargeStringArray::from(values(rng, c))) as ArrayRef
                        }
                        _ => Arc::new(StringArray::from(values(rng, c))) as ArrayRef,
                    })
                    .collect()
            }
        };
        columns[i] = new;
    }
    let schema = Schema::new(fields);
    let batches = (0..batches.len())
        .map(|b| {
            let arrays = columns.iter().map(|c| c[b].clone()).collect();
            RecordBatch::try_new(Arc::new(schema.clone()), arrays)
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some((schema, batches))
}

fn string_at(array: &ArrayRef, row: usize) -> Option<String> {
    if array.is_null(row) {
        return None;
    }
    if let Some(a) = array.as_any().downcast_ref::<StringArray>() {
        return Some(a.value(row).to_owned());
    }
    if let Some(a) = array.as_any().downcast_ref::<LargeStringArray>() {
        return Some(a.value(row).to_owned());
    }
    None
}

fn random_ints(rng: &mut Rng, n: usize) -> Int64Array {
    (0..n)
        .map(|_| match rng.below(6) {
            0 => None,
            1 => Some(rng.next() as i64),
            2 => Some(*rng.pick(&[i64::MIN, i64::MAX, -1, 0, u32::MAX as i64])),
            _ => Some(rng.below(5000) as i64),
        })
        .collect()
}

/// `f` over the part table of `batches` as `scan` reads it.
fn with_table<T>(
    schema: &Schema,
    batches: &[RecordBatch],
    scan: Scan,
    f: impl FnOnce(&mut PartTable<'_>) -> ctxcompact::Result<T>,
) -> ctxcompact::Result<T> {
    let columns = Columns::new(schema, batches, scan)?;
    let mut table = PartTable::new(&columns)?;
    f(&mut table)
}

/// An engine target's outcome: an internal error is a bug.
fn engine<T>(result: &ctxcompact::Result<T>, rows: impl Fn(&T) -> bool) -> Outcome {
    match result {
        Err(CoreError::Internal(why)) => Outcome::Bug(format!("internal error: {why}")),
        result => outcome(result, rows),
    }
}

/// A number of tokens: small, large, or at the type's end.
fn random_tokens(rng: &mut Rng) -> u64 {
    *rng.pick(&[0, 1, 100, 5_000, 200_000, 1 << 40, u64::MAX])
}

/// A replay's config: a policy's view, a mask acting at any time, budgets.
fn replay_config(rng: &mut Rng) -> ReplayConfig {
    let policy = prune_config(rng);
    let mask = rng.chance(2).then(|| {
        let mut mask = prune_config(rng);
        mask.acts = *rng.pick(&[Acts::Call, Acts::Turn, Acts::Summary]);
        mask
    });
    ReplayConfig {
        view: MessageEstimateConfig {
            overhead: rng.below(8) as u64,
            ..policy.estimate_config()
        },
        mask,
        system_tokens: random_tokens(rng),
        threshold: rng.chance(2).then(|| random_tokens(rng)),
        available: random_tokens(rng),
        usable: rng.chance(2).then(|| random_tokens(rng)),
    }
}

/// Message facts for `table` (mostly one per message, sometimes a wrong
/// number), and each session's number of messages.
fn message_facts(table: &PartTable<'_>, rng: &mut Rng) -> (MessageFacts, Vec<usize>) {
    let sessions: Vec<usize> = (0..table.sessions.len())
        .map(|s| table.messages(s).map_or(0, |m| m.len()))
        .collect();
    let total: usize = sessions.iter().sum();
    let n = |rng: &mut Rng| match rng.below(8) {
        0 => rng.below(total + 2),
        _ => total,
    };
    let (a, b, c) = (n(rng), n(rng), n(rng));
    let created = (0..a)
        .map(|i| match rng.below(5) {
            0 => None,
            1 => Some(*rng.pick(&[i64::MIN, i64::MAX, -1, 0])),
            _ => Some(1_700_000_000_000 + 1000 * i as i64),
        })
        .collect();
    let output = (0..b)
        .map(|_| match rng.below(3) {
            0 => random_tokens(rng),
            _ => rng.below(500) as u64,
        })
        .collect();
    let call = (0..c)
        .map(|_| rng.chance(2).then(|| rng.pick(&["a", "b", ""]).to_string()))
        .collect();
    let facts = MessageFacts {
        created,
        output,
        call,
    };
    (facts, sessions)
}

/// Resume states, one per session (sometimes a wrong number): heads up to
/// past the end, hidden flags of any length, any call and baseline.
fn resume_states(rng: &mut Rng, sessions: &[usize]) -> Vec<Resume> {
    let n = match rng.below(8) {
        0 => rng.below(sessions.len() + 2),
        _ => sessions.len(),
    };
    (0..n)
        .map(|s| {
            let messages = sessions.get(s).copied().unwrap_or(0);
            Resume {
                head: match rng.below(6) {
                    0 => usize::MAX,
                    _ => rng.below(messages + 3),
                },
                hidden: (0..rng.below(messages + 3))
                    .map(|_| rng.chance(2))
                    .collect(),
                first_call: match rng.below(6) {
                    0 => usize::MAX,
                    _ => rng.below(6),
                },
                baseline: random_tokens(rng),
                last_time: rng
                    .chance(2)
                    .then(|| *rng.pick(&[i64::MIN, i64::MAX, 0, 1_700_000_000_000])),
                stalled: rng.chance(4),
            }
        })
        .collect()
}

/// The messages of a chat list input (its first line's `messages`, or the
/// line itself when it is a list).
fn chat_list(data: &[u8]) -> Option<Vec<Value>> {
    let line = data.split(|&b| b == b'\n').next()?;
    match serde_json::from_slice::<Value>(line).ok()? {
        Value::Array(messages) => Some(messages),
        Value::Object(mut o) => match o.shift_remove("messages")? {
            Value::Array(messages) => Some(messages),
            _ => None,
        },
        _ => None,
    }
}

/// What a reader made of an input (the scans' outcome is not told apart).
enum Outcome {
    Rows,
    NoRows,
    Error,
    Scanned,
    /// A bug that is not a panic: an internal error of an engine target.
    Bug(String),
}

fn outcome<T>(result: &ctxcompact::Result<T>, rows: impl Fn(&T) -> bool) -> Outcome {
    match result {
        Ok(out) if rows(out) => Outcome::Rows,
        Ok(_) => Outcome::NoRows,
        Err(_) => Outcome::Error,
    }
}

#[derive(Default)]
struct Tally {
    inputs: u64,
    /// Inputs that gave rows, none, or a typed error.
    rows: u64,
    empty: u64,
    errors: u64,
    panics: u64,
}

struct Fuzzer {
    mutator: Mutator,
    out: PathBuf,
    tally: BTreeMap<String, Tally>,
    /// Messages of the panics found, each once, with the file of its first input.
    found: BTreeMap<String, PathBuf>,
}

impl Fuzzer {
    /// Run `f` on `data` for `target`, catching a panic.
    fn attempt<F: FnOnce() -> Outcome>(&mut self, target: &str, data: &[u8], f: F) {
        let tally = self.tally.entry(target.to_owned()).or_default();
        tally.inputs += 1;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(Outcome::Rows) => tally.rows += 1,
            Ok(Outcome::NoRows) => tally.empty += 1,
            Ok(Outcome::Error) => tally.errors += 1,
            Ok(Outcome::Scanned) => {}
            result => {
                tally.panics += 1;
                let message = match result {
                    Ok(Outcome::Bug(why)) => why,
                    _ => LAST_PANIC
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .unwrap_or_else(|| "unknown panic".into()),
                };
                if !self.found.contains_key(&message) {
                    let name = format!("{}-{}.bin", target.replace(':', "-"), self.found.len());
                    let path = self.out.join(name);
                    let _ = std::fs::create_dir_all(&self.out);
                    let _ = std::fs::write(&path, data);
                    eprintln!("PANIC in {target}: {message}\n  input: {}", path.display());
                    self.found.insert(message, path);
                }
            }
        }
    }

    fn ingest_target(&mut self, rng: &mut Rng, format: Format) {
        let data = self.mutator.input(rng, Some(format));
        let target = format!("ingest:{}", format_name(format));
        let mut seed = Rng::new(rng.next());
        let mut scan_input = None;
        self.attempt(&target, &data, || {
            let out = ingest_bytes(&data, format, &mut seed);
            if let Ok(out) = &out {
                if rows_of(out) > 0 {
                    scan_input = Some(out.batches.clone());
                }
            }
            outcome(&out, |o| rows_of(o) > 0)
        });
        // the scans over what was read, and over it changed
        if let Some(batches) = scan_input {
            let schema = ingest::rows::schema();
            self.attempt("scans", &data, || {
                run_scans(&schema, &batches, &mut seed);
                Outcome::Scanned
            });
            self.engine_targets(&data, &schema, &batches, &mut seed);
            let changed = changed_table(&schema, &batches, &mut seed, &self.mutator);
            if let Some((schema, batches)) = changed {
                self.attempt("table", &data, || {
                    run_scans(&schema, &batches, &mut seed);
                    Outcome::Scanned
                });
                self.engine_targets(&data, &schema, &batches, &mut seed);
            }
        }
    }

    /// The plan, the replay, its resume and the retention scorer over a table.
    fn engine_targets(
        &mut self,
        data: &[u8],
        schema: &Schema,
        batches: &[RecordBatch],
        rng: &mut Rng,
    ) {
        let config = PlanConfig {
            prune: prune_config(rng),
            shape: *rng.pick(&[
                None,
                Some(Shape::Chat),
                Some(Shape::Anthropic),
                Some(Shape::Responses),
            ]),
        };
        self.attempt("plan", data, || {
            let planned = with_table(schema, batches, Scan::Plan, |t| plan(t, &config));
            engine(&planned, |p| !p.is_empty())
        });
        let config = replay_config(rng);
        let facts = with_table(schema, batches, Scan::Compact, |t| {
            Ok(message_facts(t, rng))
        });
        let Ok((facts, sessions)) = facts else {
            return;
        };
        let mut replayed = None;
        self.attempt("replay", data, || {
            let out = with_table(schema, batches, Scan::Compact, |t| {
                replay(t, &facts, &config)
            });
            let result = engine(&out, |r| r.iter().any(|s| !s.calls.is_empty()));
            replayed = out.ok();
            result
        });
        if let Some(replayed) = replayed {
            let system = rng.chance(2).then(|| random_string(rng, &self.mutator));
            self.attempt("retention", data, || {
                let scored = with_table(schema, batches, Scan::Compact, |t| {
                    score_replays(t, &replayed, config.view.render, system.as_deref())
                });
                engine(&scored, |s| !s.is_empty())
            });
        }
        let states = resume_states(rng, &sessions);
        self.attempt("resume", data, || {
            let out = with_table(schema, batches, Scan::Compact, |t| {
                resume(t, &facts, &config, &states)
            });
            engine(&out, |r| r.iter().any(|s| !s.calls.is_empty()))
        });
    }

    /// `chat_counts` over a chat list as `scans/chatrows.py` writes one (an
    /// `openai-chat` seed's messages, each `tool` message tagged with its
    /// index), mutated; and the retention rules over its messages.
    fn chat_target(&mut self, rng: &mut Rng) {
        let mut data = self.mutator.input(rng, Some(Format::OpenAiChat));
        let messages = chat_list(&data);
        if let Some(messages) = &messages {
            if rng.chance(2) {
                let mut tagged: Vec<Value> = messages.clone();
                for (i, m) in tagged.iter_mut().enumerate() {
                    if let Value::Object(o) = m {
                        o.shift_remove("id");
                        if o.get("role").and_then(Value::as_str) == Some("tool") {
                            o.insert("ctxcompact_at".into(), i.into());
                        }
                    }
                }
                let mut list = serde_json::json!({"id": "chat", "messages": tagged});
                if rng.chance(2) {
                    self.mutator.mutate_value(rng, &mut list);
                }
                data = serde_json::to_vec(&list).expect("a value");
                if rng.chance(3) {
                    self.mutator.mutate_bytes(rng, &mut data);
                }
            }
        }
        let n = messages.as_ref().map_or(0, Vec::len);
        let size = match rng.below(4) {
            0 => rng.below(n + 3),
            _ => n,
        };
        let config = MessageEstimateConfig {
            method: *rng.pick(&methods()),
            overhead: rng.below(8) as u64,
            render: Render::default(),
        };
        self.attempt("chatlist", &data, || {
            engine(&chat_counts(&data, size, "chat", config), |c| {
                c.iter().any(|&x| x > 0)
            })
        });
        let Some(messages) = messages else {
            return;
        };
        self.attempt("retention", &data, || {
            let chats: Vec<Arc<Chat>> = messages
                .iter()
                .map(|v| Arc::new(Chat::new(v.clone())))
                .collect();
            let refs: Vec<&Chat> = chats.iter().map(|c| &**c).collect();
            let task = rng.chance(2).then(|| rng.below(refs.len() + 2));
            let facts = extract_facts(&refs, task, None);
            let kept: Vec<Arc<Chat>> = chats.iter().filter(|_| rng.chance(2)).cloned().collect();
            let task = chats.first().map(|c| c.content.clone());
            let _ = score_compaction(&chats, &kept, task.as_deref());
            let mut run = RunRetention::default();
            run.append(&chats);
            run.resend(&chats, &kept);
            let _ = (run.score(), run.lost().len());
            match facts.is_empty() {
                true => Outcome::NoRows,
                false => Outcome::Rows,
            }
        });
    }

    fn stream_target(&mut self, rng: &mut Rng, dir: &Path) {
        let format = *rng.pick(&FORMATS);
        let data = self.mutator.input(rng, Some(format));
        let path = dir.join("stream.jsonl");
        if std::fs::write(&path, &data).is_err() {
            return;
        }
        let window = *rng.pick(&[1, 100, 1000, 4096, 1 << 16]);
        let chunk = *rng.pick(&[1, 64, 1024, 1 << 20]);
        let on_error = if rng.chance(2) {
            OnError::Skip
        } else {
            OnError::Raise
        };
        let file = StreamFile {
            path: path.to_string_lossy().into_owned(),
            format,
            id_base: None,
        };
        let target = format!("stream:{}", format_name(format));
        self.attempt(&target, &data, || {
            let options = Options {
                on_error,
                chunk_bytes: chunk,
            };
            let mut stream = Stream::new(vec![file], options, window);
            let mut rows = 0;
            loop {
                match stream.next_window() {
                    Ok(Some(out)) => rows += rows_of(&out),
                    Ok(None) => return outcome(&Ok(rows), |&n| n > 0),
                    Err(e) => return outcome::<usize>(&Err(e), |_| false),
                }
            }
        });
    }
}

fn main() {
    let mut seconds = 60.0;
    let mut seed = 1u64;
    let mut out = PathBuf::from("target/fuzz-crashes");
    let mut seed_paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds N")
            }
            "--seed" => seed = args.next().and_then(|s| s.parse().ok()).expect("--seed N"),
            "--out" => out = args.next().map(PathBuf::from).expect("--out DIR"),
            _ => seed_paths.push(PathBuf::from(arg)),
        }
    }
    let inputs = seed_inputs(&seed_paths);
    if inputs.is_empty() {
        eprintln!("no seed files under {seed_paths:?}");
        std::process::exit(2);
    }
    let seeds = classify(inputs);
    for format in FORMATS {
        let n = seeds.iter().filter(|s| s.formats.contains(&format)).count();
        println!("seeds read as {:<18} {n}", format_name(format));
    }
    let words = dictionary(&seeds);
    println!(
        "{} seeds, {} dictionary words, seed {seed}, {seconds} s",
        seeds.len(),
        words.len()
    );
    std::panic::set_hook(Box::new(|info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{place}: {message}"));
    }));
    let dir = std::env::temp_dir().join(format!("ctxcompact-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let mut fuzzer = Fuzzer {
        mutator: Mutator { seeds, words },
        out,
        tally: BTreeMap::new(),
        found: BTreeMap::new(),
    };
    let mut rng = Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut round = 0usize;
    while Instant::now() < deadline {
        // the ten formats in turn, and a stream every third round
        let format = FORMATS[round % FORMATS.len()];
        fuzzer.ingest_target(&mut rng, format);
        if round % 3 == 0 {
            fuzzer.stream_target(&mut rng, &dir);
        }
        if round % 3 == 1 {
            fuzzer.chat_target(&mut rng);
        }
        round += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::panic::take_hook();
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "target", "inputs", "rows", "no rows", "error", "panics"
    );
    let mut panics = 0;
    for (target, t) in &fuzzer.tally {
        println!(
            "{target:<26} {:>8} {:>8} {:>8} {:>8} {:>7}",
            t.inputs, t.rows, t.empty, t.errors, t.panics
        );
        panics += t.panics;
    }
    let inputs: u64 = fuzzer.tally.values().map(|t| t.inputs).sum();
    println!(
        "total: {inputs} inputs, {panics} panics ({} distinct)",
        fuzzer.found.len()
    );
    for (message, path) in &fuzzer.found {
        println!("  {message}\n    input: {}", path.display());
    }
    if panics > 0 {
        std::process::exit(1);
    }
}
