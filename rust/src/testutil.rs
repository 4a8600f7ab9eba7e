//! Small builders for Rust unit tests: a transcript as a list of messages.

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};

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
