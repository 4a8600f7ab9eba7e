//! What a tool call works on: a file path, or else a command line, read
//! from its JSON arguments. Placeholders name it (`render.rs`) and
//! supersession compares it (`prune.rs`) through the `tool_target` column
//! worked out here once, at ingest or by `tool_targets` (docs/schema.md).

use std::borrow::Cow;

use arrow_array::builder::LargeStringBuilder;
use arrow_array::{Array, ArrayRef, LargeStringArray};
use rayon::prelude::*;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::columns::StrChunk;
use crate::error::{CoreError, Result};
use crate::jsontext::string_stop;

/// Input keys naming the file a call works on, first match wins.
pub const PATH_KEYS: [&str; 7] = [
    "filePath",
    "file_path",
    "path",
    "file",
    "filename",
    "target_file",
    "notebook_path",
];
/// Input keys holding a command line or code, when no path key is there.
pub const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "code"];

/// What a tool call works on, read from its JSON arguments: a file path, or
/// else a command. `None` when the input is not a JSON object or names neither.
/// Borrowed from the input where it has no escapes (supersession reads one
/// per tool part).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target<'a> {
    Path(Cow<'a, str>),
    Command(Cow<'a, str>),
}

impl<'a> Target<'a> {
    #[inline]
    pub fn of(input: Option<&'a str>) -> Option<Target<'a>> {
        let input = input?;
        flat_target(input).unwrap_or_else(|| parsed_target(input))
    }

    /// The path or the command line.
    pub fn text(&self) -> &str {
        match self {
            Target::Path(s) | Target::Command(s) => s,
        }
    }
}

/// The target of an input that is a flat object of plain strings (no
/// escapes, no control characters, no other value types), which is what most
/// tool calls send; `None` when the input is anything else and needs the JSON
/// parser. On the inputs it reads it agrees with the parser (the values are
/// the same borrowed slices); it exists because supersession reads one input
/// per tool part and serde's path cost several times the scan around it.
#[inline]
fn flat_target(input: &str) -> Option<Option<Target<'_>>> {
    let b = input.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    // A plain string starting at `i` (its opening quote): the slice inside.
    // A function, not a closure: inlined into the loop (as a closure it was
    // a call per key and per value).
    #[inline(always)]
    fn string<'s>(input: &'s str, i: &mut usize) -> Option<&'s str> {
        let b = input.as_bytes();
        if b.get(*i) != Some(&b'"') {
            return None;
        }
        let start = *i + 1;
        let end = start + string_stop(&b[start..])?;
        if b[end] != b'"' {
            return None;
        }
        *i = end + 1;
        // Quotes are ASCII, so both ends are char boundaries.
        Some(&input[start..end])
    }
    let mut path: [Option<&str>; PATH_KEYS.len()] = [None; PATH_KEYS.len()];
    let mut command: [Option<&str>; COMMAND_KEYS.len()] = [None; COMMAND_KEYS.len()];
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    ws(&mut i);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let key = string(input, &mut i)?;
            ws(&mut i);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
            ws(&mut i);
            let value = string(input, &mut i)?;
            // Literal arms (PATH_KEYS, COMMAND_KEYS) compile to a length switch
            // and word compares, where `position` called memcmp per key.
            let slot = match key {
                "filePath" => &mut path[0],
                "file_path" => &mut path[1],
                "path" => &mut path[2],
                "file" => &mut path[3],
                "filename" => &mut path[4],
                "target_file" => &mut path[5],
                "notebook_path" => &mut path[6],
                "command" => &mut command[0],
                "cmd" => &mut command[1],
                "code" => &mut command[2],
                _ => &mut None,
            };
            *slot = Some(value);
            ws(&mut i);
            match b.get(i) {
                Some(b',') => {
                    i += 1;
                    ws(&mut i);
                }
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    ws(&mut i);
    if i != b.len() {
        return None;
    }
    Some(
        first(&path)
            .map(|p| Target::Path(Cow::Borrowed(p)))
            .or_else(|| first(&command).map(|c| Target::Command(Cow::Borrowed(c)))),
    )
}

/// The first non-empty value of the slots, in key order.
fn first<T: AsRef<str> + Clone>(slots: &[Option<T>]) -> Option<T> {
    slots
        .iter()
        .flatten()
        .find(|v| !v.as_ref().is_empty())
        .cloned()
}

/// `Target::of` through the JSON parser: any input.
fn parsed_target(input: &str) -> Option<Target<'_>> {
    let mut de = serde_json::Deserializer::from_str(input);
    let keys = de.deserialize_any(KeysVisitor).ok()?;
    de.end().ok()?;
    first(&keys.path)
        .map(Target::Path)
        .or_else(|| first(&keys.command).map(Target::Command))
}

/// The string values of the `PATH_KEYS` and `COMMAND_KEYS` of a JSON object
/// (a repeated key: the last one, as Python's `json` reads it). Every other
/// value is skipped without being built.
#[derive(Default)]
struct Keys<'a> {
    path: [Option<Cow<'a, str>>; PATH_KEYS.len()],
    command: [Option<Cow<'a, str>>; COMMAND_KEYS.len()],
}

struct KeysVisitor;

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = Keys<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys<'de>, A::Error> {
        let mut keys = Keys::default();
        // `Text`, not `Cow<str>`: serde's Cow always allocates the key.
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = key.unwrap_or_default();
            let slot = if let Some(i) = PATH_KEYS.iter().position(|k| *k == key) {
                &mut keys.path[i]
            } else if let Some(i) = COMMAND_KEYS.iter().position(|k| *k == key) {
                &mut keys.command[i]
            } else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            *slot = map.next_value::<Text<'de>>()?.0;
        }
        Ok(keys)
    }
}

/// A JSON value kept only when it is a string.
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_unit<E>(self) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Text<'de>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Text<'de>, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The optional column of each tool call's supersession target, worked out
/// once (at ingest, as `output_utf16` is) so the scan reads a short string
/// instead of parsing the call's input (docs/schema.md).
pub const TOOL_TARGET: &str = "tool_target";

/// A call's `tool_target`: `file:<path>`, `cmd:<n>:<tool>:<command>` (`n`
/// the tool name's byte length, so every name reads back exactly), or `""`
/// when it has none. Two calls supersede one another exactly when their
/// values are equal.
pub fn tool_target(tool: Option<&str>, input: Option<&str>) -> String {
    let mut out = String::new();
    write_tool_target(&mut out, tool, input).expect("a String takes every write");
    out
}

/// `tool_target` written to `out` (an Arrow string builder's current value).
pub fn write_tool_target(
    out: &mut impl std::fmt::Write,
    tool: Option<&str>,
    input: Option<&str>,
) -> std::fmt::Result {
    match Target::of(input) {
        None => Ok(()),
        Some(Target::Path(path)) => write!(out, "file:{path}"),
        Some(Target::Command(command)) => {
            let tool = tool.unwrap_or("");
            write!(out, "cmd:{}:{tool}:{command}", tool.len())
        }
    }
}

/// The `tool_target` column of a batch's `tool` and `input` columns (any
/// string layouts), worked out in parallel blocks.
pub fn tool_target_array(tool: &ArrayRef, input: &ArrayRef) -> Result<LargeStringArray> {
    let (tool, input) = (StrChunk::new("tool", tool)?, StrChunk::new("input", input)?);
    let rows = input.len();
    if tool.len() != rows {
        return Err(CoreError::Config(format!(
            "tool has {} rows and input {rows}: they must be columns of one table",
            tool.len()
        )));
    }
    const BLOCK: usize = 16_384;
    let blocks: Vec<LargeStringArray> = (0..rows.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let mut out = LargeStringBuilder::new();
            for row in b * BLOCK..rows.min((b + 1) * BLOCK) {
                write_tool_target(&mut out, tool.value(row), input.value(row))
                    .expect("a string builder takes every write");
                out.append_value("");
            }
            out.finish()
        })
        .collect();
    let parts: Vec<&dyn Array> = blocks.iter().map(|a| a as &dyn Array).collect();
    Ok(match parts.len() {
        0 => LargeStringArray::from(Vec::<&str>::new()),
        _ => crate::select::concat(&parts)?
            .as_any()
            .downcast_ref::<LargeStringArray>()
            .expect("large strings joined")
            .clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_lists_the_keys_in_order() {
        for (i, key) in PATH_KEYS.iter().enumerate() {
            let mut input = String::from("{");
            for (j, k) in PATH_KEYS.iter().enumerate().rev() {
                input.push_str(&format!("\"{k}\":\"{}\",", if j < i { "" } else { k }));
            }
            input.push_str(r#""command":"c"}"#);
            assert_eq!(
                flat_target(&input),
                Some(Some(Target::Path(Cow::Borrowed(key)))),
                "{input}"
            );
        }
        for (i, key) in COMMAND_KEYS.iter().enumerate() {
            let mut input = String::from("{");
            for (j, k) in COMMAND_KEYS.iter().enumerate().rev() {
                input.push_str(&format!("\"{k}\":\"{}\",", if j < i { "" } else { k }));
            }
            input.push_str(r#""x":"y"}"#);
            assert_eq!(
                flat_target(&input),
                Some(Some(Target::Command(Cow::Borrowed(key)))),
                "{input}"
            );
        }
    }

    /// The fast path and serde agree on every input the fast path takes, and
    /// the fast path declines what it cannot read.
    #[test]
    fn flat_inputs_read_as_the_parser_reads_them() {
        let taken = [
            r#"{"filePath":"src/a.py"}"#,
            " {\t\"path\" :\r\n \"a\" , \"command\":\"ls\"}\n",
            r#"{"command":"ls","cmd":"pwd"}"#,
            r#"{"path":"","command":"ls"}"#,
            r#"{"path":"a","path":"b"}"#,
            r#"{"other":"x"}"#,
            "{}",
            r#"{"file":"é/ü"}"#,
        ];
        for input in taken {
            assert_eq!(flat_target(input), Some(parsed_target(input)), "{input}");
        }
        let declined = [
            r#"{"path":"a\"b"}"#,
            r#"{"path":1}"#,
            r#"{"path":"a","n":null}"#,
            r#"{"path":"a"} x"#,
            r#"{"path":"a",}"#,
            "{\"path\":\"a\tb\"}",
            r#"["path"]"#,
            r#"{"path":"a""#,
            "",
        ];
        for input in declined {
            assert_eq!(flat_target(input), None, "{input}");
        }
        assert_eq!(
            Target::of(Some(r#"{"path":"a\nb"}"#)),
            Some(Target::Path(Cow::Borrowed("a\nb")))
        );
        assert_eq!(Target::of(Some(r#"{"path":"a"} x"#)), None);
    }
}
