//! JSON text exactly as Python's `json.dumps` writes it.
//!
//! The `input` column is a scan column (its length feeds the token estimate)
//! and the Python adapters fill it with `json.dumps(..., ensure_ascii=False,
//! separators=(",", ":"))`; the native ingest must write the same bytes, so
//! floats follow `float.__repr__` (`1e-05`, `1e+16`, `100.0`) rather than
//! Rust's formatting, and integers keep the text they were read with.

use crate::jsontext::string_stop;
use serde_json::{Number, Value};

/// `json.dumps` options that matter here.
#[derive(Clone, Copy)]
pub struct Style {
    /// `ensure_ascii=True`: escape everything outside printable ASCII.
    pub ascii: bool,
    /// The default separators `", "` and `": "` instead of `","` and `":"`.
    pub spaced: bool,
}

/// `json.dumps(v, ensure_ascii=False, separators=(",", ":"))`.
pub const COMPACT: Style = Style {
    ascii: false,
    spaced: false,
};
/// `json.dumps(v)` with every default.
pub const DEFAULT: Style = Style {
    ascii: true,
    spaced: true,
};

pub fn dumps(value: &Value, style: Style) -> String {
    let mut out = String::new();
    write_value(&mut out, value, style);
    out
}

fn write_value(out: &mut String, value: &Value, style: Style) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s, style.ascii),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if style.spaced { ", " } else { "," });
                }
                write_value(out, item, style);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(if style.spaced { ", " } else { "," });
                }
                write_str(out, key, style.ascii);
                out.push_str(if style.spaced { ": " } else { ":" });
                write_value(out, item, style);
            }
            out.push('}');
        }
    }
}

/// True when the number was written as an integer (Python reads it as `int`).
pub fn is_integer(n: &Number) -> bool {
    !n.as_str().contains(['.', 'e', 'E'])
}

fn write_number(out: &mut String, n: &Number) {
    write_number_text(out, n.as_str())
}

/// `write_number` of a number's text as the parser read it.
pub(super) fn write_number_text(out: &mut String, text: &str) {
    if !text.contains(['.', 'e', 'E']) {
        // Python's int drops the sign of zero; JSON forbids leading zeros.
        out.push_str(if text == "-0" { "0" } else { text });
    } else {
        // The grammar was checked by the parser, so this cannot fail; a huge
        // exponent becomes inf like float() makes it.
        let value: f64 = text.parse().unwrap_or(f64::NAN);
        out.push_str(&float_repr(value));
    }
}

/// Python's choice where two shortest digit strings are equally near the
/// value (it lies exactly halfway, e.g. 8796093022208.5625 between .562 and
/// .563): the one whose last digit is even, as repr (David Gay's dtoa)
/// rounds; Rust's shortest formatting may pick the other.
fn half_even(value: f64, digits: String, exp: i32) -> String {
    let n = digits.len();
    if n == 0 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits;
    }
    // The value's exact decimal digits (Rust formats with a precision exactly).
    let exact = format!("{:.*e}", n + 30, value);
    let Some((mantissa, _)) = exact.split_once('e') else {
        return digits;
    };
    let exact: Vec<u8> = mantissa.bytes().filter(|b| *b != b'.').collect();
    // Halfway: the next digit is 5 and every digit after it is 0.
    if exact.len() <= n || exact[n] != b'5' || exact[n + 1..].iter().any(|&b| b != b'0') {
        return digits;
    }
    let lower = &exact[..n];
    let pick: Vec<u8> = if (lower[n - 1] - b'0') % 2 == 0 {
        lower.to_vec()
    } else {
        let mut up = lower.to_vec(); // the last digit is odd: no carry
        up[n - 1] += 1;
        up
    };
    let pick = String::from_utf8(pick).unwrap_or_default();
    // Kept only when it reads back as the same value (it does at a tie).
    let text = format!("{}.{}e{}", &pick[..1], &pick[1..], exp);
    if pick.len() == n && text.parse::<f64>() == Ok(value) {
        pick
    } else {
        digits
    }
}

/// `json.dumps(float)`: `float.__repr__`, with JavaScript names for the specials.
pub fn float_repr(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as Python's repr.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = half_even(value.abs(), digits, exp);
    let point = exp + 1; // digits are 0.d1d2... * 10^point
    let mut out = String::new();
    if value.is_sign_negative() {
        out.push('-');
    }
    if !(-4 < point && point <= 16) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = point - 1;
        out.push_str(&format!("e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()));
    } else if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-point) as usize));
        out.push_str(&digits);
    } else {
        let point = point as usize;
        if digits.len() <= point {
            out.push_str(&digits);
            out.push_str(&"0".repeat(point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

pub(crate) fn write_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    if ascii && s.bytes().any(|b| !(b' '..=b'~').contains(&b)) {
        write_str_ascii(out, s);
    } else {
        // Only ASCII bytes need escaping here (quote, backslash, control
        // characters: what `string_stop` finds, eight bytes at a time), so
        // every cut is at a char boundary.
        out.reserve(s.len() + 1);
        let bytes = s.as_bytes();
        let mut start = 0;
        while let Some(k) = string_stop(&bytes[start..]) {
            let at = start + k;
            out.push_str(&s[start..at]);
            escape_ascii(out, bytes[at]);
            start = at + 1;
        }
        out.push_str(&s[start..]);
    }
    out.push('"');
}

fn escape_ascii(out: &mut String, b: u8) {
    match b {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        b => out.push_str(&format!("\\u{b:04x}")),
    }
}

/// `ensure_ascii=True`: everything outside printable ASCII as `\uXXXX` (UTF-16 units).
fn write_str_ascii(out: &mut String, s: &str) {
    for c in s.chars() {
        if c.is_ascii() && c != '\u{7f}' {
            if c < ' ' || c == '"' || c == '\\' {
                escape_ascii(out, c as u8);
            } else {
                out.push(c);
            }
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
}

/// Python's `str(value)` for what `json.loads` returns, where the adapters
/// turn a JSON value into text (ids, orphaned tool results).
pub fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => {
            let mut out = String::new();
            write_number(&mut out, n);
            match out.as_str() {
                "Infinity" => "inf".into(),
                "-Infinity" => "-inf".into(),
                "NaN" => "nan".into(),
                _ => out,
            }
        }
        Value::String(s) => {
            // repr picks single quotes unless the text has ' and no ".
            let quote = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::from(quote);
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c if (c as u32) < 0x20 || c == '\u{7f}' => {
                        out.push_str(&format!("\\x{:02x}", c as u32))
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&Value::String(k.clone())), py_repr(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// Python truthiness of a JSON value (`x or default`).
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => {
            if is_integer(n) {
                !n.as_str()
                    .trim_start_matches('-')
                    .trim_start_matches('0')
                    .is_empty()
            } else {
                !matches!(n.as_f64(), Some(f) if f == 0.0)
            }
        }
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (-0.0, "-0.0"),
            (123456.789, "123456.789"),
            (1e300, "1e+300"),
            (f64::INFINITY, "Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_repr(value), expected, "{value}");
        }
    }

    #[test]
    fn strings_and_layout_follow_json_dumps() {
        let v: Value = serde_json::from_str(r#"{"a":"é\n\u0001\"","b":[1,2.0,-0,1E2]}"#).unwrap();
        assert_eq!(
            dumps(&v, COMPACT),
            r#"{"a":"é\n\u0001\"","b":[1,2.0,0,100.0]}"#
        );
        assert_eq!(
            dumps(&v, DEFAULT),
            r#"{"a": "\u00e9\n\u0001\"", "b": [1, 2.0, 0, 100.0]}"#
        );
        let astral: Value = serde_json::from_str(r#""😀\u007f""#).unwrap();
        assert_eq!(dumps(&astral, DEFAULT), r#""\ud83d\ude00\u007f""#);
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap();
        assert_eq!(dumps(&big, COMPACT), "123456789012345678901234567890");
    }

    #[test]
    fn str_and_truthiness_follow_python() {
        let v: Value = serde_json::from_str(r#"[1, "it's", {"k": null, "t": true}]"#).unwrap();
        assert_eq!(py_str(&v), r#"[1, "it's", {'k': None, 't': True}]"#);
        for (text, truth) in [("0", false), ("-0", false), ("0.0", false), ("7", true)] {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(truthy(&v), truth, "{text}");
        }
        assert!(!truthy(&Value::String(String::new())));
    }
}
