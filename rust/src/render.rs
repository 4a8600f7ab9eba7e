//! How a policy renders tool parts in the model input, without changing what
//! is stored: a cleared output's placeholder (OpenCode's constant, or one that
//! names the tool, its target, the size and the part id so the agent can run
//! the call again or recall it), a cleared call's arguments, and an oversized
//! output cut to its head and tail.
//!
//! `python/ctxcompact/scans/view.py` calls these same functions, so the model
//! input and the batch estimate (`messages.rs`) cannot drift apart.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::jsontext::string_stop;
use crate::messages::CLEARED_TOOL_OUTPUT;

/// Arguments a cleared call is sent with when `clear_inputs` is set.
pub const CLEARED_INPUT: &str = "{}";

/// A cleared call's target is cut to this many characters in its placeholder.
const TARGET_CHARS: usize = 80;

/// The rendering options of a policy. The default is OpenCode's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Render {
    /// Send a cleared call's arguments as `{}` (Anthropic's `clear_tool_inputs`).
    pub clear_inputs: bool,
    /// Send an output of more than 4 x N characters as its first and last
    /// 2 x N characters around a marker (N = a token budget, ~N tokens sent).
    pub truncate_output: Option<u64>,
    /// A cleared output's placeholder says what it was (`describe`).
    pub describe: bool,
    /// The newest N assistant messages send their reasoning
    /// (`reasoning_content`); older reasoning is cleared. 0: never sent.
    pub keep_thinking: u32,
}

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

    fn text(&self) -> &str {
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

/// The target as a placeholder shows it: its first line, at most 80 characters.
fn short(target: &str) -> String {
    let line = target.split('\n').next().unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut out: String = line.chars().take(TARGET_CHARS).collect();
    if out != target {
        out.push_str("...");
    }
    out
}

/// The placeholder of a cleared output. OpenCode's constant unless `describe`:
/// then it names the tool, its target, the output's size in characters and
/// the part id (`recall` in the stores gives the text back).
pub fn cleared(
    describe: bool,
    tool: &str,
    input: Option<&str>,
    output: &str,
    part_id: &str,
) -> String {
    if !describe {
        return CLEARED_TOOL_OUTPUT.to_owned();
    }
    // A text-protocol action's target is its command line, which starts with
    // the tool's name ("create x.py"): shown once, not "create create x.py".
    let call = match Target::of(input).map(|t| short(t.text())) {
        Some(line) if line.strip_prefix(tool).is_some_and(|r| r.starts_with(' ')) => line,
        Some(line) => format!("{tool} {line}"),
        None => tool.to_owned(),
    };
    let size = output.chars().count();
    format!(
        "[Old tool result content cleared: {call} returned {size} characters; \
         call the tool again, or recall part {part_id}, to see it]"
    )
}

/// An output cut to its head and tail, or `None` when it is within the budget
/// or the cut would not be longer than its marker: (head, marker, tail).
pub fn truncated(output: &str, budget: u64) -> Option<(&str, String, &str)> {
    let keep = usize::try_from(budget.saturating_mul(2)).unwrap_or(usize::MAX);
    let chars = output.chars().count();
    if chars <= keep.saturating_mul(2) {
        return None;
    }
    let cut = chars - 2 * keep;
    let marker = marker(cut);
    if cut <= marker.len() {
        return None; // the marker would cost as much as what it replaces
    }
    let head_end = output
        .char_indices()
        .nth(keep)
        .map_or(output.len(), |(i, _)| i);
    let tail_start = output[head_end..]
        .char_indices()
        .nth(cut)
        .map_or(output.len(), |(i, _)| head_end + i);
    Some((&output[..head_end], marker, &output[tail_start..]))
}

/// What stands where an output was cut.
pub fn marker(cut: usize) -> String {
    format!("\n\n[... {cut} characters cut ...]\n\n")
}

/// `truncated` joined into one string (the Python view's call).
pub fn truncate(output: &str, budget: u64) -> String {
    match truncated(output, budget) {
        Some((head, marker, tail)) => format!("{head}{marker}{tail}"),
        None => output.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_placeholder_is_opencodes() {
        assert_eq!(cleared(false, "read", None, "x", "p"), CLEARED_TOOL_OUTPUT);
    }

    #[test]
    fn a_described_placeholder_names_tool_target_size_and_part() {
        let got = cleared(
            true,
            "read",
            Some(r#"{"filePath":"src/a.py"}"#),
            "héllo",
            "prt_1",
        );
        assert_eq!(
            got,
            "[Old tool result content cleared: read src/a.py returned 5 characters; \
             call the tool again, or recall part prt_1, to see it]"
        );
        let long = format!("{{\"command\":\"{}\\nsecond line\"}}", "x".repeat(100));
        let got = cleared(true, "bash", Some(&long), "", "p");
        assert!(got.contains(&format!(" {}... returned 0", "x".repeat(80))));
        let got = cleared(true, "bash", Some("not json"), "", "p");
        assert!(got.starts_with("[Old tool result content cleared: bash returned 0"));
        // a text-protocol action's command line names its tool: said once
        let action = r#"{"command":"create reproduce_bug.py"}"#;
        let got = cleared(true, "create", Some(action), "", "p");
        assert!(
            got.starts_with("[Old tool result content cleared: create reproduce_bug.py returned")
        );
        let got = cleared(true, "creates", Some(action), "", "p");
        assert!(got.contains(": creates create reproduce_bug.py returned"));
    }

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

    #[test]
    fn truncation_keeps_head_and_tail_and_counts_the_cut() {
        // budget 2 tokens: 4 chars each side
        assert_eq!(truncate("abcdefgh", 2), "abcdefgh");
        let long = format!("abcd{}ghij", "é".repeat(40));
        assert_eq!(
            truncate(&long, 2),
            "abcd\n\n[... 40 characters cut ...]\n\nghij"
        );
        assert_eq!(truncate("", 0), "");
        // a cut no longer than its marker (31 characters here) is not made
        let short = "x".repeat(31);
        assert_eq!(truncate(&short, 0), short);
        assert_eq!(
            truncate(&"x".repeat(32), 0),
            "\n\n[... 32 characters cut ...]\n\n"
        );
    }
}
