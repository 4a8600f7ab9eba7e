//! Small builders for Rust unit tests: a transcript as a list of messages.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, DictionaryArray, Int64Array, LargeStringArray, RecordBatch, StringArray,
};

#[derive(Clone, Default)]
pub struct P {
    pub kind: &'static str,
    pub tool: Option<&'static str>,
    pub status: Option<&'static str>,
    pub output: Option<String>,
    pub input: Option<String>,
    pub compacted: Option<i64>,
    /// The rest of the part as JSON (`part_json`), e.g. `{"pinned":true}`.
    pub json: Option<String>,
}

pub fn tool(name: &'static str, chars: usize) -> P {
    P {
        kind: "tool",
        tool: Some(name),
        status: Some("completed"),
        output: Some("x".repeat(chars)),
        input: None,
        compacted: None,
        json: None,
    }
}

/// `part` marked pinned.
pub fn pin(part: P) -> P {
    P {
        json: Some(r#"{"pinned":true}"#.to_owned()),
        ..part
    }
}

/// A tool part whose input is `input` (JSON text).
pub fn call(name: &'static str, input: &str, chars: usize) -> P {
    P {
        input: Some(input.to_owned()),
        ..tool(name, chars)
    }
}

pub fn text(s: &str) -> P {
    P {
        kind: "text",
        output: Some(s.to_owned()),
        ..Default::default()
    }
}

pub fn compaction() -> P {
    P {
        kind: "compaction",
        ..Default::default()
    }
}

#[derive(Clone)]
pub struct M {
    pub id: String,
    pub role: &'static str,
    pub parent: Option<String>,
    pub summary: bool,
    pub finished: bool,
    pub error: bool,
    pub parts: Vec<P>,
}

pub fn user(id: &str, parts: Vec<P>) -> M {
    M {
        id: id.into(),
        role: "user",
        parent: None,
        summary: false,
        finished: false,
        error: false,
        parts,
    }
}

pub fn assistant(id: &str, parent: &str, parts: Vec<P>) -> M {
    M {
        id: id.into(),
        role: "assistant",
        parent: Some(parent.into()),
        summary: false,
        finished: true,
        error: false,
        parts,
    }
}

pub fn summary(id: &str, parent: &str) -> M {
    M {
        summary: true,
        ..assistant(id, parent, vec![text("summary")])
    }
}

/// One batch holding `sessions` (id, messages) in order.
pub fn batch(sessions: &[(&str, Vec<M>)]) -> RecordBatch {
    let mut s_id = vec![];
    let mut m_id = vec![];
    let (mut role, mut parent, mut kind, mut tool, mut status, mut output) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut input, mut json, mut part_id) = (vec![], vec![], vec![]);
    let (mut summ, mut fin, mut err, mut comp) = (vec![], vec![], vec![], vec![]);
    for (sid, msgs) in sessions {
        for m in msgs {
            let parts = if m.parts.is_empty() {
                vec![P {
                    kind: "",
                    ..Default::default()
                }]
            } else {
                m.parts.clone()
            };
            for p in parts {
                s_id.push(Some(sid.to_string()));
                m_id.push(Some(m.id.clone()));
                role.push(Some(m.role));
                parent.push(m.parent.clone());
                kind.push((!p.kind.is_empty()).then_some(p.kind));
                tool.push(p.tool);
                status.push(p.status);
                output.push(p.output.clone());
                input.push(p.input.clone());
                summ.push(m.summary);
                fin.push(m.finished);
                err.push(m.error);
                comp.push(p.compacted);
                json.push(p.json.clone());
                part_id.push((!p.kind.is_empty()).then(|| format!("p{}", part_id.len())));
            }
        }
    }
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("session_id", Arc::new(StringArray::from(s_id))),
        ("message_id", Arc::new(StringArray::from(m_id))),
        ("role", Arc::new(StringArray::from(role))),
        ("parent_id", Arc::new(StringArray::from(parent))),
        ("part_type", Arc::new(StringArray::from(kind))),
        ("tool", Arc::new(StringArray::from(tool))),
        ("status", Arc::new(StringArray::from(status))),
        ("output", Arc::new(StringArray::from(output))),
        ("input", Arc::new(StringArray::from(input))),
        ("summary", Arc::new(BooleanArray::from(summ))),
        ("finished", Arc::new(BooleanArray::from(fin))),
        ("error", Arc::new(BooleanArray::from(err))),
        ("compacted_at", Arc::new(Int64Array::from(comp))),
        ("part_id", Arc::new(StringArray::from(part_id))),
        ("part_json", Arc::new(StringArray::from(json))),
    ];
    RecordBatch::try_from_iter(cols).unwrap()
}

/// `b` with `column` as its column `name` (replaced, or added at the end).
pub fn set_column(b: &RecordBatch, name: &str, column: ArrayRef) -> RecordBatch {
    let mut cols: Vec<(String, ArrayRef)> = b
        .schema()
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| (f.name().clone(), c.clone()))
        .collect();
    match cols.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = column,
        None => cols.push((name.to_owned(), column)),
    }
    RecordBatch::try_from_iter(cols).unwrap()
}

fn strings<'b>(b: &'b RecordBatch, name: &str) -> &'b StringArray {
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("a column `batch` built")
}

/// `b` (as `batch` builds it) with its `tool` column dictionary encoded
/// with int32 keys, as ingest writes it.
pub fn with_dictionary_tools(b: &RecordBatch) -> RecordBatch {
    let tools: DictionaryArray<Int32Type> = strings(b, "tool").iter().collect();
    set_column(b, "tool", Arc::new(tools))
}

/// `b` (as `batch` builds it) with its `input` column as large strings.
pub fn with_large_inputs(b: &RecordBatch) -> RecordBatch {
    let inputs: LargeStringArray = strings(b, "input").iter().collect();
    set_column(b, "input", Arc::new(inputs))
}

/// `b` (as `batch` builds it) with an empty input, not a null one, on
/// every row that is not a tool call (which no estimate reads).
pub fn with_inputs_everywhere(b: &RecordBatch) -> RecordBatch {
    let kinds = strings(b, "part_type");
    let inputs: StringArray = strings(b, "input")
        .iter()
        .zip(kinds.iter())
        .map(|(input, kind)| match kind {
            Some("tool") => input,
            _ => Some(input.unwrap_or("")),
        })
        .collect();
    set_column(b, "input", Arc::new(inputs))
}

/// `b` (as `batch` builds it) with `output_utf16`: each output's UTF-16
/// length counted, as ingest counts it; where the output is null, 0, or
/// null when `nulls` (a row without a text then has no count).
pub fn with_counts(b: &RecordBatch, nulls: bool) -> RecordBatch {
    let counts: Int64Array = strings(b, "output")
        .iter()
        .map(|o| match o {
            Some(o) => Some(o.encode_utf16().count() as i64),
            None => (!nulls).then_some(0),
        })
        .collect();
    set_column(b, "output_utf16", Arc::new(counts))
}

/// A small deterministic generator for generated tests (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A text of about `max` characters or fewer, ASCII, accented letters,
/// characters outside the BMP (two UTF-16 units) and newlines mixed.
pub fn random_text(rng: &mut Rng, max: u64) -> String {
    let pieces = [
        "a",
        "the ",
        "é",
        "ü✓",
        "🙂",
        "\n",
        "fn x() {}",
        "\"q\"",
        "日本",
    ];
    let n = rng.below(max + 1);
    let mut out = String::new();
    while (out.chars().count() as u64) < n {
        out.push_str(rng.pick(&pieces));
    }
    out
}

/// A generated session: an optional system message, then user turns, each
/// with assistant steps of texts, reasoning, step markers and tool calls
/// (completed mostly; some errors, running or pending calls, cleared or
/// pinned outputs; inputs ASCII, non-ASCII or absent; with `ascii`, names
/// and inputs ASCII, every call with an input; a call now and then
/// in a user message), texts that are empty or marked ignored, and
/// compactions answered by a summary (finished, unfinished or failed),
/// which move the pivot.
pub fn random_session(rng: &mut Rng, ascii: bool) -> Vec<M> {
    const TOOLS: [&str; 6] = ["read", "bash", "édit", "grep", "write_file", "x"];
    let mut msgs = vec![];
    // Some sessions of ASCII calls are nothing else, where the coarse
    // lower bound is at its tightest: a user's "go" and finished calls of
    // four-letter tools.
    let calls_only = ascii && rng.chance(25);
    let maybe_text = |rng: &mut Rng, max| {
        let json = match rng.below(12) {
            0 => Some(r#"{"ignored":true}"#.to_owned()),
            1 => Some(r#"{"ignored":false}"#.to_owned()),
            2 => Some(r#"{"pinned":true}"#.to_owned()),
            _ => None,
        };
        let t = if rng.chance(8) {
            String::new()
        } else {
            random_text(rng, max)
        };
        P { json, ..text(&t) }
    };
    let call_part = |rng: &mut Rng| {
        let name = match rng.pick(&TOOLS) {
            _ if calls_only => rng.pick(&["read", "bash", "edit", "grep"]),
            "édit" if ascii => "edit",
            "x" if ascii => "ls",
            name => name,
        };
        let input = match rng.below(8) {
            0 if !ascii => None,
            1 if !ascii => Some(format!(r#"{{"path":"é/ü🙂{}.py"}}"#, rng.below(9))),
            2 => Some(r#"{}"#.to_owned()),
            _ => Some(format!(
                r#"{{"path":"src/{}.py","pad":"{}"}}"#,
                rng.below(9),
                "p".repeat(rng.below(120) as usize)
            )),
        };
        let status = match rng.below(100) {
            _ if calls_only => "completed",
            0 => "running",
            1 => "pending",
            2..=9 => "error",
            _ => "completed",
        };
        P {
            kind: "tool",
            tool: (calls_only || !rng.chance(3)).then_some(name),
            status: Some(status),
            output: Some(random_text(rng, 3_000)),
            input,
            compacted: (!calls_only && rng.chance(1)).then_some(1),
            // Pinned, or a text-protocol step's (its call is not sent).
            json: match rng.below(100) {
                0..=3 if !calls_only => Some(r#"{"pinned":true}"#.to_owned()),
                4..=9 => Some(r#"{"source":{"observation":{}}}"#.to_owned()),
                _ => None,
            },
        }
    };
    if !calls_only && rng.chance(30) {
        let parts = (0..1 + rng.below(2))
            .map(|_| maybe_text(rng, 200))
            .collect();
        msgs.push(M {
            role: "system",
            ..user("sys", parts)
        });
    }
    let turns = 1 + rng.below(6);
    for t in 0..turns {
        let u = format!("u{t}");
        if calls_only {
            msgs.push(user(&u, vec![text("go")]));
            for k in 0..rng.below(4) {
                let parts = (0..1 + rng.below(3)).map(|_| call_part(rng)).collect();
                msgs.push(assistant(&format!("a{t}.{k}"), &u, parts));
            }
            continue;
        }
        let mut parts: Vec<P> = (0..rng.below(3)).map(|_| maybe_text(rng, 300)).collect();
        let compacts = rng.chance(25);
        if compacts {
            let json = rng.chance(10).then(|| r#"{"ignored":true}"#.to_owned());
            parts.push(P {
                json,
                ..compaction()
            });
        }
        if rng.chance(1) {
            parts.push(call_part(rng));
        }
        msgs.push(user(&u, parts));
        if compacts && rng.chance(80) {
            let mut s = summary(&format!("s{t}"), &u);
            s.finished = !rng.chance(10);
            s.error = rng.chance(10);
            msgs.push(s);
        }
        for k in 0..rng.below(5) {
            let mut parts = vec![];
            for _ in 0..rng.below(6) {
                parts.push(match rng.below(10) {
                    0..=1 => maybe_text(rng, 400),
                    2 => P {
                        kind: "reasoning",
                        output: Some(random_text(rng, 300)),
                        ..Default::default()
                    },
                    3 => P {
                        kind: "step-start",
                        ..Default::default()
                    },
                    _ => call_part(rng),
                });
            }
            let mut a = assistant(&format!("a{t}.{k}"), &u, parts);
            a.error = rng.chance(5);
            msgs.push(a);
        }
    }
    msgs
}

/// Three sessions the compaction tests share: a long one whose outputs the
/// prune clears, one already compacted (marker, summary, continue), one quiet.
pub fn long_short_quiet() -> Vec<(&'static str, Vec<M>)> {
    let mut long = vec![user("u0", vec![text("task")])];
    for i in 0..6 {
        long.push(assistant(
            &format!("a{i}"),
            "u0",
            vec![tool("read", 90_000)],
        ));
        long.push(user(&format!("u{}", i + 1), vec![text("next")]));
    }
    let compacted = vec![
        user("u1", vec![text("task")]),
        assistant("a1", "u1", vec![tool("read", 10)]),
        user("u2", vec![compaction()]),
        summary("a2", "u2"),
        user("u3", vec![text("Continue if you have next steps")]),
    ];
    vec![
        ("long", long),
        ("short", compacted),
        ("quiet", vec![user("q", vec![])]),
    ]
}
