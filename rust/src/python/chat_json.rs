//! A chat list as the chat mapper reads it, written by the binding straight
//! from the caller's Python objects (no `json.dumps` in Python): one
//! `{"id": <session>, "messages": [...]}` object, each message without its
//! own `id`, each `tool` message tagged with its chat index under
//! `chat::AT` (what `chatrows._chat_json` writes; it is the fallback).
//!
//! Only plain JSON values are written here: exact `dict` (string keys),
//! `list`, `tuple`, `str`, `int`, finite `float`, `bool` and `None`. Anything
//! else (a subclass, another key type, a lone surrogate, a NaN, a nesting
//! deeper than `MAX_DEPTH`: what `json.dumps` would write differently or
//! refuse) answers `None`, and the caller writes the list with `json.dumps`
//! as before, so the bytes the core reads mean the same either way.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::ingest::chat::AT;
use crate::ingest::pyjson::write_str;

/// Deeper than this, the list goes to `json.dumps` (which refuses a cycle).
const MAX_DEPTH: usize = 64;

/// `{"id": session, "messages": messages}` as JSON bytes, or `None` when a
/// value is not one this writer takes (see the module's docs).
pub fn chat_list_json(messages: &Bound<'_, PyAny>, session: &str) -> PyResult<Option<Vec<u8>>> {
    let Ok(list) = messages.cast_exact::<PyList>() else {
        return Ok(None);
    };
    let mut out = String::with_capacity(256);
    out.push_str("{\"id\":");
    write_str(&mut out, session, false);
    out.push_str(",\"messages\":[");
    for (i, message) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Ok(dict) = message.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        if !write_message(&mut out, dict, i)? {
            return Ok(None);
        }
    }
    out.push_str("]}");
    Ok(Some(out.into_bytes()))
}

/// One message: its keys but `id`, a `tool` message's `AT` set to `index`
/// (where the message has the key, else last, as a dict assignment puts it).
fn write_message(out: &mut String, dict: &Bound<'_, PyDict>, index: usize) -> PyResult<bool> {
    let tool = match dict.get_item("role")? {
        Some(role) => role
            .cast_exact::<PyString>()
            .is_ok_and(|r| r.to_str().is_ok_and(|r| r == "tool")),
        None => false,
    };
    out.push('{');
    let mut first = true;
    let mut tagged = false;
    for (key, value) in dict.iter() {
        let Ok(key) = key.cast_exact::<PyString>() else {
            return Ok(false);
        };
        let Ok(key) = key.to_str() else {
            return Ok(false);
        };
        if key == "id" {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_str(out, key, false);
        out.push(':');
        if tool && key == AT {
            out.push_str(&index.to_string());
            tagged = true;
        } else if !write_value(out, &value, 1)? {
            return Ok(false);
        }
    }
    if tool && !tagged {
        if !first {
            out.push(',');
        }
        write_str(out, AT, false);
        out.push(':');
        out.push_str(&index.to_string());
    }
    out.push('}');
    Ok(true)
}

fn write_value(out: &mut String, value: &Bound<'_, PyAny>, depth: usize) -> PyResult<bool> {
    if depth > MAX_DEPTH {
        return Ok(false);
    }
    if let Ok(s) = value.cast_exact::<PyString>() {
        let Ok(s) = s.to_str() else {
            return Ok(false); // a lone surrogate: json.dumps's path names the message
        };
        write_str(out, s, false);
    } else if value.is_none() {
        out.push_str("null");
    } else if let Ok(b) = value.cast_exact::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if let Ok(dict) = value.cast_exact::<PyDict>() {
        out.push('{');
        for (i, (key, item)) in dict.iter().enumerate() {
            let Ok(key) = key.cast_exact::<PyString>() else {
                return Ok(false);
            };
            let Ok(key) = key.to_str() else {
                return Ok(false);
            };
            if i > 0 {
                out.push(',');
            }
            write_str(out, key, false);
            out.push(':');
            if !write_value(out, &item, depth + 1)? {
                return Ok(false);
            }
        }
        out.push('}');
    } else if let Ok(list) = value.cast_exact::<PyList>() {
        out.push('[');
        for (i, item) in list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if !write_value(out, &item, depth + 1)? {
                return Ok(false);
            }
        }
        out.push(']');
    } else if let Ok(tuple) = value.cast_exact::<PyTuple>() {
        out.push('[');
        for (i, item) in tuple.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if !write_value(out, &item, depth + 1)? {
                return Ok(false);
            }
        }
        out.push(']');
    } else if let Ok(int) = value.cast_exact::<PyInt>() {
        match int.extract::<i64>() {
            Ok(n) => out.push_str(&n.to_string()),
            Err(_) => out.push_str(int.str()?.to_str()?), // beyond 64 bits: its digits
        }
    } else if let Ok(float) = value.cast_exact::<PyFloat>() {
        if !float.value().is_finite() {
            return Ok(false); // json.dumps writes NaN / Infinity
        }
        out.push_str(float.repr()?.to_str()?); // float.__repr__, as json.dumps
    } else {
        return Ok(false); // json.dumps's default=str, or its error
    }
    Ok(true)
}
