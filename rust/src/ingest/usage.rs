//! A recorded OpenAI `usage` object as the canonical `TokenUsage`: one rule
//! for every reader that keeps one (an OpenAI chat log's assistant message,
//! a Responses item, OpenHands' `model_response.usage`), as
//! `ctxcompact.formats.usage.openai_usage` (its doc has the rule): the
//! prompt split into uncached input and cache reads and writes, and the
//! output's reasoning tokens.

use serde_json::{Map, Value};

use super::export::object;
use super::opencode::kind;
use super::types::Problem;

/// Which API's usage: their keys differ, not their meaning.
#[derive(Clone, Copy)]
pub enum Api {
    Chat,
    Responses,
}

/// A non-negative integer count of a usage object (0 when missing or null).
pub fn count(usage: &Map<String, Value>, key: &str, at: &str) -> Result<u64, Problem> {
    match usage.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().ok_or_else(|| {
            let shown = match v {
                Value::Number(n) => n.to_string(),
                Value::String(s) => format!("{s:?}"),
                other => kind(other).to_owned(),
            };
            Problem::new(format!(
                "{at}.{key} must be a non-negative integer, got {shown}"
            ))
        }),
    }
}

/// `usage` (at `at`, for errors) as a `TokenUsage` object; null when it is
/// no object.
pub fn openai_usage(usage: Option<&Value>, at: &str, api: Api) -> Result<Value, Problem> {
    let Some(Value::Object(usage)) = usage else {
        return Ok(Value::Null);
    };
    let (input_key, output_key, details_key, output_details_key) = match api {
        Api::Chat => (
            "prompt_tokens",
            "completion_tokens",
            "prompt_tokens_details",
            "completion_tokens_details",
        ),
        Api::Responses => (
            "input_tokens",
            "output_tokens",
            "input_tokens_details",
            "output_tokens_details",
        ),
    };
    // a details object that is absent, null or no object counts 0
    let detail = |key: &str, name: &str| match usage.get(key) {
        Some(Value::Object(details)) => count(details, name, &format!("{at}.{key}")),
        _ => Ok(0),
    };
    let cached = detail(details_key, "cached_tokens")?;
    let written = detail(details_key, "cache_write_tokens")?;
    let read = match count(usage, "cache_read_input_tokens", at)? {
        0 => cached,
        n => n,
    };
    let write = match count(usage, "cache_creation_input_tokens", at)? {
        0 => written,
        n => n,
    };
    let prompt = count(usage, input_key, at)?;
    let output = count(usage, output_key, at)?;
    let reasoning = detail(output_details_key, "reasoning_tokens")?;
    Ok(object([
        (
            "input",
            Value::from(prompt.saturating_sub(read.saturating_add(write))),
        ),
        ("output", Value::from(output)),
        ("reasoning", Value::from(reasoning)),
        (
            "cache",
            object([("read", Value::from(read)), ("write", Value::from(write))]),
        ),
    ]))
}
