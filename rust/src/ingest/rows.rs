//! Builders for the part-row table of docs/schema.md, with the same Arrow
//! schema as `ctxcompact.columnar.SCHEMA` (what `Transcript.from_sessions` makes).

use std::sync::{Arc, OnceLock};

use arrow_array::builder::{BooleanBuilder, Int64Builder, LargeStringBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::estimate::utf16_len;
use crate::target::write_tool_target;

pub fn schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let s = |name| Field::new(name, DataType::Utf8, true);
            let large = |name| Field::new(name, DataType::LargeUtf8, true);
            let flag = |name| Field::new(name, DataType::Boolean, true);
            Arc::new(Schema::new(vec![
                s("session_id"),
                s("message_id"),
                s("role"),
                s("parent_id"),
                flag("summary"),
                flag("finished"),
                flag("error"),
                s("part_id"),
                s("part_type"),
                s("tool"),
                s("status"),
                large("input"),
                large("output"),
                Field::new("compacted_at", DataType::Int64, true),
                flag("auto"),
                large("session_json"),
                large("message_json"),
                large("part_json"),
                // Each output's length counted once, while its bytes are hot:
                // later scans read it instead of the text (docs/schema.md).
                Field::new("output_utf16", DataType::Int64, true),
                // Each tool call's supersession target, worked out once too
                // (`target::tool_target`): "" where there is none.
                large("tool_target"),
            ]))
        })
        .clone()
}

/// Message-level values, repeated on every row of the message.
#[derive(Default, Clone)]
pub struct MessageRow {
    pub id: String,
    pub role: String,
    pub parent_id: Option<String>,
    pub summary: bool,
    pub finished: bool,
    pub error: bool,
    /// Written on the message's first row only.
    pub json: String,
}

/// Part-level values; `None` fields are null.
#[derive(Default)]
pub struct PartRow {
    pub id: String,
    pub kind: String,
    pub tool: Option<String>,
    pub status: Option<String>,
    pub input: Option<String>,
    pub output: Option<String>,
    pub compacted_at: Option<i64>,
    pub auto: Option<bool>,
    pub json: String,
}

/// A `MessageRow` of borrowed text.
pub struct MessageRef<'r> {
    pub id: &'r str,
    pub role: &'r str,
    pub parent_id: Option<&'r str>,
    pub summary: bool,
    pub finished: bool,
    pub error: bool,
    pub json: &'r str,
}

/// A `PartRow` of borrowed text.
pub struct PartRef<'r> {
    pub id: &'r str,
    pub kind: &'r str,
    pub tool: Option<&'r str>,
    pub status: Option<&'r str>,
    pub input: Option<&'r str>,
    pub output: Option<&'r str>,
    pub compacted_at: Option<i64>,
    pub auto: Option<bool>,
    pub json: &'r str,
}

pub struct Rows {
    session_id: StringBuilder,
    message_id: StringBuilder,
    role: StringBuilder,
    parent_id: StringBuilder,
    summary: BooleanBuilder,
    finished: BooleanBuilder,
    error: BooleanBuilder,
    part_id: StringBuilder,
    part_type: StringBuilder,
    tool: StringBuilder,
    status: StringBuilder,
    input: LargeStringBuilder,
    output: LargeStringBuilder,
    compacted_at: Int64Builder,
    auto: BooleanBuilder,
    session_json: LargeStringBuilder,
    message_json: LargeStringBuilder,
    part_json: LargeStringBuilder,
    output_utf16: Int64Builder,
    tool_target: LargeStringBuilder,
    len: usize,
}

impl Default for Rows {
    fn default() -> Self {
        Rows {
            session_id: StringBuilder::new(),
            message_id: StringBuilder::new(),
            role: StringBuilder::new(),
            parent_id: StringBuilder::new(),
            summary: BooleanBuilder::new(),
            finished: BooleanBuilder::new(),
            error: BooleanBuilder::new(),
            part_id: StringBuilder::new(),
            part_type: StringBuilder::new(),
            tool: StringBuilder::new(),
            status: StringBuilder::new(),
            input: LargeStringBuilder::new(),
            output: LargeStringBuilder::new(),
            compacted_at: Int64Builder::new(),
            auto: BooleanBuilder::new(),
            session_json: LargeStringBuilder::new(),
            message_json: LargeStringBuilder::new(),
            part_json: LargeStringBuilder::new(),
            output_utf16: Int64Builder::new(),
            tool_target: LargeStringBuilder::new(),
            len: 0,
        }
    }
}

impl Rows {
    /// Builders sized for the rows of about `bytes` of JSONL: the tool
    /// outputs are most of a line's text, so their buffer is reserved whole
    /// (growing it by doubling copied and faulted in each size on the way).
    pub fn for_bytes(bytes: usize) -> Self {
        Rows {
            output: LargeStringBuilder::with_capacity(bytes / 1024 + 16, bytes),
            ..Rows::default()
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One row: a part of a message, a message without parts (`part` None),
    /// or a session without messages (`message` None). `first_of_message`
    /// puts the message JSON on this row.
    pub fn push(
        &mut self,
        session_id: &str,
        session_json: Option<&str>,
        message: Option<(&MessageRow, bool)>,
        part: Option<&PartRow>,
    ) {
        let message = message.map(|(m, first)| {
            let m = MessageRef {
                id: &m.id,
                role: &m.role,
                parent_id: m.parent_id.as_deref(),
                summary: m.summary,
                finished: m.finished,
                error: m.error,
                json: &m.json,
            };
            (m, first)
        });
        let part = part.map(|p| PartRef {
            id: &p.id,
            kind: &p.kind,
            tool: p.tool.as_deref(),
            status: p.status.as_deref(),
            input: p.input.as_deref(),
            output: p.output.as_deref(),
            compacted_at: p.compacted_at,
            auto: p.auto,
            json: &p.json,
        });
        self.push_ref(session_id, session_json, message.as_ref(), part.as_ref());
    }

    /// `push` of borrowed values.
    pub fn push_ref(
        &mut self,
        session_id: &str,
        session_json: Option<&str>,
        message: Option<&(MessageRef<'_>, bool)>,
        part: Option<&PartRef<'_>>,
    ) {
        self.len += 1;
        self.session_id.append_value(session_id);
        self.session_json.append_option(session_json);
        match message {
            Some((m, first)) => {
                self.message_id.append_value(m.id);
                self.role.append_value(m.role);
                self.parent_id.append_option(m.parent_id);
                self.summary.append_value(m.summary);
                self.finished.append_value(m.finished);
                self.error.append_value(m.error);
                self.message_json.append_option(first.then_some(m.json));
            }
            None => {
                self.message_id.append_null();
                self.role.append_null();
                self.parent_id.append_null();
                self.summary.append_null();
                self.finished.append_null();
                self.error.append_null();
                self.message_json.append_null();
            }
        }
        match part {
            Some(p) => {
                self.part_id.append_value(p.id);
                self.part_type.append_value(p.kind);
                self.tool.append_option(p.tool);
                self.status.append_option(p.status);
                self.input.append_option(p.input);
                self.output.append_option(p.output);
                // 0 for a null output (as it is measured): no null in the
                // column, so its statistics prove every row counted.
                self.output_utf16
                    .append_value(p.output.map_or(0, |o| utf16_len(o.as_bytes()) as i64));
                write_tool_target(&mut self.tool_target, p.tool, p.input)
                    .expect("a string builder takes every write");
                self.tool_target.append_value("");
                self.compacted_at.append_option(p.compacted_at);
                self.auto.append_option(p.auto);
                self.part_json.append_value(p.json);
            }
            None => {
                self.part_id.append_null();
                self.part_type.append_null();
                self.tool.append_null();
                self.status.append_null();
                self.input.append_null();
                self.output.append_null();
                self.output_utf16.append_value(0);
                self.tool_target.append_value("");
                self.compacted_at.append_null();
                self.auto.append_null();
                self.part_json.append_null();
            }
        }
    }

    pub fn finish(mut self) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.session_id.finish()),
            Arc::new(self.message_id.finish()),
            Arc::new(self.role.finish()),
            Arc::new(self.parent_id.finish()),
            Arc::new(self.summary.finish()),
            Arc::new(self.finished.finish()),
            Arc::new(self.error.finish()),
            Arc::new(self.part_id.finish()),
            Arc::new(self.part_type.finish()),
            Arc::new(self.tool.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.input.finish()),
            Arc::new(self.output.finish()),
            Arc::new(self.compacted_at.finish()),
            Arc::new(self.auto.finish()),
            Arc::new(self.session_json.finish()),
            Arc::new(self.message_json.finish()),
            Arc::new(self.part_json.finish()),
            Arc::new(self.output_utf16.finish()),
            Arc::new(self.tool_target.finish()),
        ];
        // Every builder got exactly one value per row, in schema order.
        RecordBatch::try_new(schema(), columns).expect("row builders stay aligned with the schema")
    }
}
