//! Python bindings (`ctxcompact._core`). The only module that knows PyO3
//! (its `arrow` submodule moves Arrow data in and out through the C Data
//! Interface): it extracts Arrow input, releases the GIL around every scan, and turns
//! `CoreError` into the matching `ctxcompact.errors` class in one place.

use std::sync::Arc;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, FieldRef, SchemaRef};
use pyo3::prelude::*;
use pyo3::types::PyDict;

mod arrow;
mod chat_json;
use arrow::{AnyArray, AnyRecordBatch, PyArray, PyChunkedArray, PyTable};

use crate::cache_aware::CacheAware;
use crate::compact::{compact, SessionCompaction};
use crate::error::CoreError;
use crate::estimate::{estimate, estimate_array, Method};
use crate::ingest::{self, OnError, Options};
use crate::messages::{
    estimate_messages as estimate_messages_core, sent_messages as sent_messages_core,
    MessageEstimateConfig, SentKind,
};
use crate::overflow::{self, ModelLimits, OverflowConfig, TokenUsage};
use crate::parallel;
use crate::pivot::{merge_ranges, pivot_mask, visible_ranges};
use crate::prune::{prune as prune_core, PruneConfig};
use crate::render::Render;
use crate::replay::{
    replay as replay_core, resume as resume_core, Call, Fallback, MessageFacts, ReplayConfig,
    Resume,
};
use crate::retention::{score_replays, Scored};
use crate::schema::{Columns, Scan};
use crate::table::PartTable;

fn to_pyerr(py: Python<'_>, err: CoreError) -> PyErr {
    if let CoreError::Os { errno, what, path } = err {
        // Python's OSError picks its subclass by errno (FileNotFoundError...)
        return pyo3::exceptions::PyOSError::new_err((errno, what, path));
    }
    let build = || -> PyResult<PyErr> {
        let module = py.import("ctxcompact.errors")?;
        let class = module.getattr(err.class_name())?;
        let at = err.location();
        let kwargs = PyDict::new(py);
        kwargs.set_item("session_id", at.session_id)?;
        kwargs.set_item("message_id", at.message_id)?;
        kwargs.set_item("row", at.row)?;
        kwargs.set_item("column", at.column)?;
        let exc = class.call((err.to_string(),), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

fn parse_method(py: Python<'_>, method: &str) -> PyResult<Method> {
    method.parse().map_err(|e| to_pyerr(py, e))
}

/// `placeholder = "opencode" | "describe"`: whether cleared outputs are described.
fn parse_placeholder(py: Python<'_>, placeholder: &str) -> PyResult<bool> {
    match placeholder {
        "opencode" => Ok(false),
        "describe" => Ok(true),
        other => Err(to_pyerr(
            py,
            CoreError::Config(format!(
                "unknown placeholder {other:?}; expected \"opencode\" or \"describe\""
            )),
        )),
    }
}

fn batches(py: Python<'_>, table: AnyRecordBatch) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let reader = table.into_reader()?;
    let schema = reader.schema();
    let batches = py
        .detach(|| reader.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            let err = CoreError::Dataset(format!("cannot read the Arrow input: {e}"));
            to_pyerr(py, err)
        })?;
    Ok((schema, batches))
}

/// A chunked array from `chunks`, which may be empty (then typed by `field`).
fn chunked(chunks: Vec<ArrayRef>, field: FieldRef) -> PyResult<PyChunkedArray> {
    let field = match chunks.first() {
        Some(c) => Arc::new(field.as_ref().clone().with_data_type(c.data_type().clone())),
        None => field,
    };
    PyChunkedArray::try_new(chunks, field)
}

/// Row numbers from a uint64 Arrow array (what the scans return), without nulls.
fn row_indices(py: Python<'_>, rows: PyArray) -> PyResult<Vec<u64>> {
    use arrow_array::Array;
    let array = rows.array();
    match array.as_any().downcast_ref::<UInt64Array>() {
        Some(a) if a.null_count() == 0 => Ok(a.values().to_vec()),
        _ => Err(to_pyerr(
            py,
            CoreError::Config(format!(
                "row numbers must be a uint64 array without nulls, got {}",
                array.data_type()
            )),
        )),
    }
}

fn u64_array(values: Vec<u64>) -> PyArray {
    PyArray::from_array_ref(Arc::new(UInt64Array::from(values)) as ArrayRef)
}

/// The rows of `batches`, for `parallel::run_sized`.
fn rows_of(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Run a scan over a table without the GIL, on `threads` threads (a small
/// table: on the calling thread, `parallel::run_sized`).
fn scan<R: Send>(
    py: Python<'_>,
    table: AnyRecordBatch,
    kind: Scan,
    threads: Option<usize>,
    f: impl FnOnce(&PartTable<'_>) -> crate::Result<R> + Send,
) -> PyResult<R> {
    let (schema, batches) = batches(py, table)?;
    let rows = rows_of(&batches);
    py.detach(|| {
        parallel::run_sized(threads, rows, false, || {
            let columns = Columns::new(&schema, &batches, kind)?;
            let table = PartTable::new(&columns)?;
            f(&table)
        })
    })
    .map_err(|e| to_pyerr(py, e))
}

#[pyfunction]
#[pyo3(signature = (text, method = "opencode"))]
fn estimate_tokens(py: Python<'_>, text: &str, method: &str) -> PyResult<u64> {
    Ok(estimate(text, parse_method(py, method)?))
}

/// A family's built-in estimator table as stored (header and weights), for
/// the pure-Python reference and for inspection.
#[pyfunction]
fn estimator_table(py: Python<'_>, family: &str) -> PyResult<Py<pyo3::types::PyBytes>> {
    let family: crate::bigram::Family = family.parse().map_err(|e| to_pyerr(py, e))?;
    Ok(pyo3::types::PyBytes::new(py, family.raw()).unbind())
}

/// `f` over every chunk of a string column on the thread pool (on the
/// calling thread with `threads` 1: `parallel::run_small`), the GIL
/// released: one int64 chunk per input chunk, named as the input.
fn map_chunks(
    py: Python<'_>,
    values: AnyArray,
    threads: Option<usize>,
    f: impl Fn(&ArrayRef) -> crate::Result<arrow_array::Int64Array> + Sync,
) -> PyResult<PyChunkedArray> {
    let (chunks, field) = values.into_chunks();
    let out = py
        .detach(|| {
            // one thread: on this one (a small column, the live store's)
            parallel::run_small(threads, || {
                chunks
                    .iter()
                    .map(|c| f(c).map(|a| Arc::new(a) as ArrayRef))
                    .collect::<crate::Result<Vec<_>>>()
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    let field = Field::new(field.name(), DataType::Int64, true);
    chunked(out, Arc::new(field))
}

#[pyfunction]
#[pyo3(signature = (values, method = "opencode", threads = None))]
fn estimate_tokens_array(
    py: Python<'_>,
    values: AnyArray,
    method: &str,
    threads: Option<usize>,
) -> PyResult<PyChunkedArray> {
    let method = parse_method(py, method)?;
    map_chunks(py, values, threads, |c| estimate_array(c, method))
}

/// Each string's length units under `method`: what its counted column holds.
#[pyfunction]
#[pyo3(signature = (values, method = "opencode", threads = None))]
fn count_units(
    py: Python<'_>,
    values: AnyArray,
    method: &str,
    threads: Option<usize>,
) -> PyResult<PyChunkedArray> {
    let method = parse_method(py, method)?;
    map_chunks(py, values, threads, |c| {
        crate::estimate::units_array(c, method)
    })
}

/// Each string's `tokens::text_hash` (what `output_hash` holds beside the
/// exact counts; nulls hash as the empty text, 0).
#[pyfunction]
#[pyo3(signature = (values, threads = None))]
fn text_hashes(
    py: Python<'_>,
    values: AnyArray,
    threads: Option<usize>,
) -> PyResult<PyChunkedArray> {
    map_chunks(py, values, threads, crate::tokens::hash_array)
}

/// The name of the method `method` parses as (`Method::name`): what a report
/// says it counted with.
#[pyfunction]
fn method_name(py: Python<'_>, method: &str) -> PyResult<String> {
    Ok(parse_method(py, method)?.name())
}

/// `calibration_fit`'s answer: slope, intercept, calls, then the residual's
/// p50 and p95 before and after.
type FitTuple = (f64, f64, usize, f64, f64, f64, f64);

/// The calibration of estimates from recorded usage (`calibrate::fit`):
/// `(slope, intercept, calls, before_p50, before_p95, after_p50, after_p95)`
/// of the (estimated, reported) pairs, or `None` when no pair has both.
#[pyfunction]
fn calibration_fit(estimated: Vec<u64>, reported: Vec<u64>) -> PyResult<Option<FitTuple>> {
    if estimated.len() != reported.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "calibration_fit: {} estimates for {} reported counts",
            estimated.len(),
            reported.len()
        )));
    }
    let points: Vec<(u64, u64)> = estimated.into_iter().zip(reported).collect();
    Ok(crate::calibrate::fit(&points).map(|f| {
        (
            f.slope,
            f.intercept,
            f.calls,
            f.before_p50,
            f.before_p95,
            f.after_p50,
            f.after_p95,
        )
    }))
}

/// Each row's `tool_target` (supersession's target, `target::tool_target`)
/// from a table's `tool` and `input` columns: one large-string chunk per
/// batch, worked out on the thread pool without the GIL.
#[pyfunction]
#[pyo3(signature = (table, threads = None))]
fn tool_targets(
    py: Python<'_>,
    table: AnyRecordBatch,
    threads: Option<usize>,
) -> PyResult<PyChunkedArray> {
    let (schema, batches) = batches(py, table)?;
    let column = |name: &'static str| {
        schema.index_of(name).map_err(|_| {
            to_pyerr(
                py,
                CoreError::MissingColumn {
                    column: name,
                    needed_by: "tool_targets",
                },
            )
        })
    };
    let (tool, input) = (column("tool")?, column("input")?);
    let rows = rows_of(&batches);
    let out = py
        .detach(|| {
            parallel::run_sized(threads, rows, false, || {
                batches
                    .iter()
                    .map(|b| {
                        crate::target::tool_target_array(b.column(tool), b.column(input))
                            .map(|a| Arc::new(a) as ArrayRef)
                    })
                    .collect::<crate::Result<Vec<_>>>()
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    let field = Field::new(crate::target::TOOL_TARGET, DataType::LargeUtf8, true);
    chunked(out, Arc::new(field))
}

/// The counted column of `method` and the `ctxcompact.units` metadata it
/// must carry, or `None` when the method has no counted column.
#[pyfunction]
fn counted_column(
    py: Python<'_>,
    method: &str,
) -> PyResult<Option<(&'static str, Option<&'static str>)>> {
    Ok(parse_method(py, method)?.counted_column())
}

fn tokenizer(py: Python<'_>, name: &str) -> PyResult<crate::tokens::Tokenizer> {
    crate::tokens::Tokenizer::named(name).map_err(|e| to_pyerr(py, e))
}

#[pyfunction]
fn count_tokens(py: Python<'_>, text: &str, tokenizer: &str) -> PyResult<u64> {
    let tokenizer = self::tokenizer(py, tokenizer)?;
    Ok(py.detach(|| tokenizer.count(text)))
}

/// Build an encoder of a tiktoken-format vocabulary (the file's text) with a
/// known split (a name) or a chain of Hugging Face `Split` patterns (a list),
/// kept under `name` for `count_tokens*` unless `tokens` is given and the
/// vocabulary has another number of tokens. Returns the number it has. The
/// GIL is released.
#[pyfunction]
#[pyo3(signature = (name, tiktoken, split, tokens = None))]
fn load_vocabulary(
    py: Python<'_>,
    name: &str,
    tiktoken: &str,
    split: &Bound<'_, PyAny>,
    tokens: Option<usize>,
) -> PyResult<usize> {
    let patterns: Option<Vec<String>> = match split.extract::<String>() {
        Ok(_) => None,
        Err(_) => Some(split.extract()?),
    };
    let known = match &patterns {
        None => Some(
            crate::tokens::split_pattern(&split.extract::<String>()?)
                .map_err(|e| to_pyerr(py, e))?,
        ),
        Some(_) => None,
    };
    py.detach(|| {
        let split = match (&patterns, known) {
            (Some(patterns), _) => crate::tokens::Split::Isolated(patterns),
            (None, Some(pattern)) => crate::tokens::Split::Tiktoken(pattern),
            (None, None) => unreachable!("a name or a list"),
        };
        crate::tokens::load(name, tiktoken, split, tokens)
    })
    .map_err(|e| to_pyerr(py, e))
}

#[pyfunction]
fn vocabulary_loaded(name: &str) -> bool {
    crate::tokens::loaded(name)
}

#[pyfunction]
#[pyo3(signature = (values, tokenizer, threads = None))]
fn count_tokens_array(
    py: Python<'_>,
    values: AnyArray,
    tokenizer: &str,
    threads: Option<usize>,
) -> PyResult<PyChunkedArray> {
    let tokenizer = self::tokenizer(py, tokenizer)?;
    map_chunks(py, values, threads, |c| tokenizer.count_array(c))
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (
    input, output, reasoning, cache_read, cache_write, context, limit_input, limit_output, *,
    auto = true, output_token_max = 32_000, reserved = None, reserved_default = false,
    inclusive = false, count_cache_write = false, clamp_usable = false
))]
fn overflow_check(
    py: Python<'_>,
    input: i64,
    output: i64,
    reasoning: i64,
    cache_read: i64,
    cache_write: i64,
    context: i64,
    limit_input: i64,
    limit_output: i64,
    auto: bool,
    output_token_max: i64,
    reserved: Option<i64>,
    reserved_default: bool,
    inclusive: bool,
    count_cache_write: bool,
    clamp_usable: bool,
) -> PyResult<(bool, i64, i64)> {
    let usage = TokenUsage {
        input,
        output,
        reasoning,
        cache_read,
        cache_write,
    };
    let limits = ModelLimits {
        context,
        input: limit_input,
        output: limit_output,
    };
    let reserved = match (reserved, reserved_default) {
        (Some(r), _) => Some(Some(r)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let config = OverflowConfig {
        auto,
        output_token_max,
        reserved,
        inclusive,
        count_cache_write,
        clamp_usable,
    };
    let over = overflow::is_overflow(&usage, &limits, &config).map_err(|e| to_pyerr(py, e))?;
    Ok((
        over,
        overflow::context_count(&usage, &config),
        limits.usable(&config),
    ))
}

/// A prune policy from the facade's dict (`Policy.scan_options()`): any key
/// left out takes the core's default (OpenCode's); an unknown key or a value
/// of the wrong type is a `ConfigError` naming it.
fn prune_config(py: Python<'_>, policy: Option<&Bound<'_, PyDict>>) -> PyResult<PruneConfig> {
    let mut config = PruneConfig::default();
    let Some(policy) = policy else {
        return Ok(config);
    };
    // The cache gate's options, put together once all are read.
    let (mut cache_aware, mut rule) = (false, CacheAware::default());
    for (key, value) in policy.iter() {
        let key: String = key.extract()?;
        let wrong = |e: PyErr| {
            to_pyerr(
                py,
                CoreError::Config(format!("policy option {key:?}: {}", e.value(py))),
            )
        };
        match key.as_str() {
            "enabled" => config.enabled = value.extract().map_err(wrong)?,
            "protect" => config.protect = value.extract().map_err(wrong)?,
            "minimum" => config.minimum = value.extract().map_err(wrong)?,
            "protected_tools" => config.protected_tools = value.extract().map_err(wrong)?,
            "continue_past_compacted" => {
                config.continue_past_compacted = value.extract().map_err(wrong)?
            }
            "method" => {
                config.method = parse_method(py, &value.extract::<String>().map_err(wrong)?)?
            }
            "turn" => {
                let turn: String = value.extract().map_err(wrong)?;
                config.turn = turn.parse().map_err(|e| to_pyerr(py, e))?;
            }
            "acts" => {
                let acts: String = value.extract().map_err(wrong)?;
                config.acts = acts.parse().map_err(|e| to_pyerr(py, e))?;
            }
            "protect_turns" => config.protect_turns = value.extract().map_err(wrong)?,
            "keep_recent" => config.keep_recent = value.extract().map_err(wrong)?,
            "keep_recent_per_tool" => {
                config.keep_recent_per_tool = value.extract().map_err(wrong)?
            }
            "clear_at_least" => config.clear_at_least = value.extract().map_err(wrong)?,
            "trigger" => config.trigger = value.extract().map_err(wrong)?,
            "overhead" => config.overhead = value.extract().map_err(wrong)?,
            "supersede" => config.supersede = value.extract().map_err(wrong)?,
            "min_output_tokens" => config.min_output_tokens = value.extract().map_err(wrong)?,
            "clear_inputs" => config.render.clear_inputs = value.extract().map_err(wrong)?,
            "truncate_output" => config.render.truncate_output = value.extract().map_err(wrong)?,
            "keep_thinking" => config.render.keep_thinking = value.extract().map_err(wrong)?,
            "placeholder" => {
                config.render.describe =
                    parse_placeholder(py, &value.extract::<String>().map_err(wrong)?)?
            }
            "cache_aware" => cache_aware = value.extract().map_err(wrong)?,
            "cache_read" => rule.read = value.extract().map_err(wrong)?,
            "cache_write" => rule.write = value.extract().map_err(wrong)?,
            "expected_calls" => rule.expected_calls = value.extract().map_err(wrong)?,
            _ => {
                return Err(to_pyerr(
                    py,
                    CoreError::Config(format!("unknown policy option {key:?}")),
                ))
            }
        }
    }
    if !(rule.read.is_finite() && rule.read >= 0.0) {
        return Err(to_pyerr(
            py,
            CoreError::Config(format!(
                "policy option \"cache_read\": a price ratio of at least 0, got {}",
                rule.read
            )),
        ));
    }
    if !(rule.write.is_finite() && rule.write >= rule.read) {
        return Err(to_pyerr(
            py,
            CoreError::Config(format!(
                "policy option \"cache_write\": a price ratio of at least cache_read ({}), got {}",
                rule.read, rule.write
            )),
        ));
    }
    config.cache_aware = cache_aware.then_some(rule);
    Ok(config)
}

/// Returns (marked rows, per-session id, total, pruned, marked count).
#[pyfunction]
#[pyo3(signature = (table, policy = None, *, threads = None))]
fn prune(
    py: Python<'_>,
    table: AnyRecordBatch,
    policy: Option<&Bound<'_, PyDict>>,
    threads: Option<usize>,
) -> PyResult<(PyArray, PyArray, PyArray, PyArray, PyArray)> {
    let config = prune_config(py, policy)?;
    let (rows, ids, totals, pruned, counts) = scan(py, table, config.scan(), threads, |t| {
        let sessions = prune_core(t, &config)?;
        let mut rows = Vec::new();
        let (mut totals, mut pruned, mut counts) = (Vec::new(), Vec::new(), Vec::new());
        // The ids come from the table already viewed (no second import of
        // the column to take them from Python).
        let ids: StringArray = t
            .sessions
            .iter()
            .map(|range| t.session_id.get(range.start))
            .collect();
        rows.reserve_exact(sessions.iter().map(|r| r.rows.len()).sum());
        for result in sessions {
            totals.push(result.total);
            pruned.push(result.pruned);
            counts.push(result.rows.len() as u64);
            rows.extend(result.rows.into_iter().map(|r| r as u64));
        }
        Ok((rows, ids, totals, pruned, counts))
    })?;
    Ok((
        u64_array(rows),
        PyArray::from_array_ref(Arc::new(ids)),
        u64_array(totals),
        u64_array(pruned),
        u64_array(counts),
    ))
}

/// Check a table before it is turned back into sessions
/// (`Transcript.to_sessions`): the type of every column it reads, the role,
/// part type and status values, and each session's messages (contiguous,
/// rows of a message agreeing), as the scans check them.
#[pyfunction]
#[pyo3(signature = (table, *, threads = None))]
fn check_table(py: Python<'_>, table: AnyRecordBatch, threads: Option<usize>) -> PyResult<()> {
    scan(py, table, Scan::Sessions, threads, |t| {
        let mut messages = Vec::new();
        for s in 0..t.sessions.len() {
            t.messages_into(s, &mut messages)?;
        }
        Ok(())
    })
}

/// The rendering options of a policy (`Policy.render_options()`).
fn render_options(
    py: Python<'_>,
    clear_inputs: bool,
    truncate_output: Option<u64>,
    placeholder: &str,
    keep_thinking: u32,
) -> PyResult<Render> {
    Ok(Render {
        clear_inputs,
        truncate_output,
        describe: parse_placeholder(py, placeholder)?,
        keep_thinking,
    })
}

/// The model input of every message of `table` (`view::render_chat`), in
/// table order: per message the JSON array of its OpenAI chat messages.
/// `thinking`: per message, whether it sends its reasoning (default: the
/// newest `keep_thinking` assistant messages of each session). `shape`:
/// "chat", "anthropic" or "responses" (`shapes::Shape`).
#[pyfunction]
#[pyo3(signature = (
    table, *, clear_inputs = false, truncate_output = None, placeholder = "opencode",
    keep_thinking = 0, thinking = None, threads = None, shape = "chat",
))]
#[allow(clippy::too_many_arguments)]
fn render_chat(
    py: Python<'_>,
    table: AnyRecordBatch,
    clear_inputs: bool,
    truncate_output: Option<u64>,
    placeholder: &str,
    keep_thinking: u32,
    thinking: Option<Vec<bool>>,
    threads: Option<usize>,
    shape: &str,
) -> PyResult<Vec<Py<pyo3::types::PyBytes>>> {
    let shape = parse_shape(py, shape)?;
    let render = render_options(
        py,
        clear_inputs,
        truncate_output,
        placeholder,
        keep_thinking,
    )?;
    let rendered = scan(py, table, Scan::Render, threads, |t| {
        crate::view::render_shape(t, render, thinking.as_deref(), shape)
    })?;
    Ok(rendered
        .iter()
        .map(|b| pyo3::types::PyBytes::new(py, b).unbind())
        .collect())
}

/// A model-input shape argument (`shapes::Shape::parse`), its error naming
/// the argument (`column="shape"`).
fn parse_shape(py: Python<'_>, shape: &str) -> PyResult<crate::shapes::Shape> {
    crate::shapes::Shape::parse(shape).map_err(|e| {
        let err = to_pyerr(py, e);
        // the ConfigError names the argument, as a column names the input's value
        match err.value(py).setattr("column", "shape") {
            Ok(()) => err,
            Err(failed) => failed,
        }
    })
}

/// A chat list (JSON bytes of an array of OpenAI chat messages) as an
/// Anthropic Messages request body, JSON bytes of `{"system"?, "messages"}`
/// (`shapes::anthropic_body`): the one conversion of `to_model_messages(...,
/// shape="anthropic")` and `clients.anthropic.to_anthropic_messages`.
#[pyfunction]
fn anthropic_body(py: Python<'_>, chat: &[u8]) -> PyResult<Py<pyo3::types::PyBytes>> {
    let messages: Vec<serde_json::Value> = serde_json::from_slice(chat).map_err(|e| {
        to_pyerr(
            py,
            CoreError::InvalidUsage(format!("the chat list is no JSON array of messages: {e}")),
        )
    })?;
    let body = crate::shapes::anthropic_body(messages);
    let bytes = serde_json::to_vec(&body).expect("a JSON value serializes");
    Ok(pyo3::types::PyBytes::new(py, &bytes).unbind())
}

/// Per message (is it an assistant message), whether it sends its
/// reasoning under `keep_thinking` (`Render::thinking`).
#[pyfunction]
fn thinking_flags(assistant: Vec<bool>, keep_thinking: u32) -> Vec<bool> {
    Render {
        keep_thinking,
        ..Default::default()
    }
    .thinking(&assistant)
}

fn role_code(py: Python<'_>, name: &str) -> PyResult<u8> {
    crate::codes::role::parse(name).ok_or_else(|| {
        to_pyerr(
            py,
            CoreError::InvalidUsage(format!("unknown message role {name:?}")),
        )
    })
}

/// What the pivot reads of one message of a live `Session` (its pydantic
/// `info`): role, id, and for an assistant message whether it is a
/// summary (`summary is True`), finished, errored, and its parent.
struct SessionFacts {
    role: u8,
    id: String,
    done: Option<(bool, bool, bool, Option<String>)>,
}

fn session_facts(py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<SessionFacts> {
    use pyo3::intern;
    let info = message.getattr(intern!(py, "info"))?;
    let role = role_code(py, &info.getattr(intern!(py, "role"))?.extract::<String>()?)?;
    let id: String = info.getattr(intern!(py, "id"))?.extract()?;
    let done = match role {
        crate::codes::role::ASSISTANT => Some((
            // `summary is True`
            info.getattr(intern!(py, "summary"))?
                .is(pyo3::types::PyBool::new(py, true)),
            !info.getattr(intern!(py, "finish"))?.is_none(),
            !info.getattr(intern!(py, "error"))?.is_none(),
            info.getattr(intern!(py, "parentID"))?.extract()?,
        )),
        _ => None,
    };
    Ok(SessionFacts { role, id, done })
}

/// Does any part of `message` satisfy `test` on its attribute `name`?
fn any_part(
    py: Python<'_>,
    message: &Bound<'_, PyAny>,
    name: &Bound<'_, pyo3::types::PyString>,
    test: impl Fn(&Bound<'_, PyAny>) -> PyResult<bool>,
) -> PyResult<bool> {
    for part in message.getattr(pyo3::intern!(py, "parts"))?.try_iter()? {
        if test(&part?.getattr(name)?)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What later calls see of a live `Session`'s messages (pydantic objects,
/// oldest first), by the core's rules read off the objects themselves:
/// `None` when message ids repeat (the table scan then decides and
/// reports), else the pivot's index (`pivot::pivot_index`; 0 without one)
/// and the indices of the messages before it that stay
/// (`pivot::kept_before_pivot`: system messages, pinned parts). The walk
/// goes back from the newest message and stops at the pivot; a message's
/// parts are read only when the rule asks.
#[pyfunction]
fn session_pivot(
    py: Python<'_>,
    messages: Vec<Bound<'_, PyAny>>,
) -> PyResult<Option<(usize, Vec<usize>)>> {
    let facts = messages
        .iter()
        .map(|m| session_facts(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    let mut ids = std::collections::HashSet::with_capacity(facts.len());
    if !facts.iter().all(|f| ids.insert(f.id.as_str())) {
        return Ok(None);
    }
    let failed: std::cell::RefCell<Option<PyErr>> = std::cell::RefCell::new(None);
    let kind = pyo3::intern!(py, "type");
    let all = &messages;
    let found = crate::pivot::pivot_index(facts.len(), |i| {
        let (f, failed) = (&facts[i], &failed);
        let (summary, finished, error, parent) = match &f.done {
            Some((s, fin, e, p)) => (*s, *fin, *e, p.as_deref()),
            None => (false, false, false, None),
        };
        crate::pivot::PivotFacts {
            role: f.role,
            id: Some(f.id.as_str()),
            compaction: move || {
                let holds = any_part(py, &all[i], kind, |t| {
                    Ok(t.extract::<&str>().is_ok_and(|t| t == "compaction"))
                });
                holds.unwrap_or_else(|e| {
                    failed.borrow_mut().get_or_insert(e);
                    false
                })
            },
            summary,
            finished,
            error,
            parent,
        }
    });
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    let start = found.unwrap_or(0);
    let pinned = pyo3::intern!(py, "pinned");
    let mut kept = Vec::new();
    for (i, (message, f)) in messages.iter().zip(&facts).take(start).enumerate() {
        let holds_pin = || any_part(py, message, pinned, |p| p.is_truthy());
        if crate::pivot::kept_before_pivot(f.role, holds_pin)? {
            kept.push(i);
        }
    }
    Ok(Some((start, kept)))
}

/// Where a user turn ended since the last model call (`replay::turn_end`):
/// per message (role, holds a text part), oldest first.
#[pyfunction]
fn turn_end(py: Python<'_>, messages: Vec<(String, bool)>) -> PyResult<Option<usize>> {
    let facts = messages
        .iter()
        .map(|(r, text)| Ok((role_code(py, r)?, *text)))
        .collect::<PyResult<Vec<(u8, bool)>>>()?;
    Ok(crate::replay::turn_end(facts))
}

/// Row mask of what later model calls see (rows at or after their session's pivot).
#[pyfunction]
#[pyo3(signature = (table, *, threads = None))]
fn pivot(py: Python<'_>, table: AnyRecordBatch, threads: Option<usize>) -> PyResult<PyArray> {
    let mask = scan(py, table, Scan::Pivot, threads, pivot_mask)?;
    Ok(PyArray::from_array_ref(Arc::new(BooleanArray::from(mask))))
}

/// The rows at or after each session's pivot, as merged (starts, lengths).
#[pyfunction]
#[pyo3(signature = (table, *, threads = None))]
fn pivot_ranges(
    py: Python<'_>,
    table: AnyRecordBatch,
    threads: Option<usize>,
) -> PyResult<(PyArray, PyArray)> {
    let ranges = scan(py, table, Scan::Pivot, threads, visible_ranges)?;
    Ok(ranges_arrays(ranges))
}

fn ranges_arrays(ranges: Vec<(usize, usize)>) -> (PyArray, PyArray) {
    let (starts, lengths): (Vec<u64>, Vec<u64>) = ranges
        .into_iter()
        .map(|(a, n)| (a as u64, n as u64))
        .unzip();
    (u64_array(starts), u64_array(lengths))
}

/// One batch compaction in one pass (`compact::compact`). Returns per
/// session (first row, rows, total, pruned, pruned parts, tokens after prune,
/// tokens after, visible rows), the pruned rows, the visible row ranges and,
/// with `now_ms`, the marked `compacted_at` column.
/// (report columns, pruned rows, visible (starts, lengths), marked `compacted_at`).
type CompactOutput = (
    Vec<PyArray>,
    PyArray,
    (PyArray, PyArray),
    Option<PyChunkedArray>,
);

#[pyfunction]
#[pyo3(signature = (table, policy = None, *, now_ms = None, threads = None))]
fn compact_batch(
    py: Python<'_>,
    table: AnyRecordBatch,
    policy: Option<&Bound<'_, PyDict>>,
    now_ms: Option<i64>,
    threads: Option<usize>,
) -> PyResult<CompactOutput> {
    let prune_config = prune_config(py, policy)?;
    let estimate_config = prune_config.estimate_config();
    let (schema, batches) = batches(py, table)?;
    let (sessions, marked) = py
        .detach(|| {
            parallel::run(threads, || {
                let columns = Columns::new(&schema, &batches, Scan::Compact)?;
                let mut table = PartTable::new(&columns)?;
                let sessions = compact(&mut table, &prune_config, estimate_config)?;
                let marked = match now_ms {
                    Some(now) => {
                        let rows: Vec<u64> = pruned_rows(&sessions);
                        let column = columns.get("compacted_at").expect("gathered by the scan");
                        Some(crate::mark::mark_rows(column, &rows, now)?)
                    }
                    None => None,
                };
                Ok((sessions, marked))
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    let column =
        |f: &dyn Fn(&SessionCompaction) -> u64| u64_array(sessions.iter().map(f).collect());
    let report = vec![
        column(&|s| s.start as u64),
        column(&|s| s.rows as u64),
        column(&|s| s.prune.total),
        column(&|s| s.prune.pruned),
        column(&|s| s.prune.rows.len() as u64),
        column(&|s| s.tokens_after_prune),
        column(&|s| s.tokens_after),
        column(&|s| s.visible.rows() as u64),
        column(&|s| s.tokens_before),
    ];
    let rows = u64_array(pruned_rows(&sessions));
    let ranges = merge_ranges(sessions.iter().flat_map(|s| s.visible.ranges()));
    let marked = marked
        .map(|chunks| {
            let field = Arc::new(Field::new("compacted_at", DataType::Int64, true));
            chunked(chunks, field)
        })
        .transpose()?;
    Ok((report, rows, ranges_arrays(ranges), marked))
}

/// A policy's plan (`plan::plan`): (per part columns: message index in
/// its session (null for a session without messages),
/// hidden (0 shown, 1 before the pivot), fate (0 kept, 1 cleared, 2 cut),
/// pruned now, tokens; per session columns: first row, rows, total, pruned,
/// pruned parts, tokens, visible tokens (`SessionPlan::visible_tokens`);
/// the model input: `None` without a shape, else per session
/// the JSON array of its visible model messages (`output="json"`), or the
/// columns session index, message index, stored message index, role, JSON
/// of one model message per row (`output="arrow"`)).
type PlanOutput = (Vec<PyArray>, Vec<PyArray>, Option<Py<PyAny>>);

#[pyfunction]
#[pyo3(signature = (table, policy = None, *, shape = None, output = "json", threads = None))]
fn plan(
    py: Python<'_>,
    table: AnyRecordBatch,
    policy: Option<&Bound<'_, PyDict>>,
    shape: Option<&str>,
    output: &str,
    threads: Option<usize>,
) -> PyResult<PlanOutput> {
    use crate::plan::{plan as plan_core, PlanConfig};
    use arrow_array::{BooleanArray, UInt32Array, UInt8Array};
    let arrow = match output {
        "json" => false,
        "arrow" => true,
        other => {
            let why = format!("unknown output {other:?}; expected \"json\" or \"arrow\"");
            return Err(to_pyerr(py, CoreError::Config(why)));
        }
    };
    let shape = shape.map(|s| parse_shape(py, s)).transpose()?;
    let config = PlanConfig {
        prune: prune_config(py, policy)?,
        shape,
    };
    let (schema, batches) = batches(py, table)?;
    let rows = rows_of(&batches);
    let sessions = py
        .detach(|| {
            parallel::run_sized(threads, rows, false, || {
                let columns = Columns::new(&schema, &batches, Scan::Plan)?;
                let mut table = PartTable::new(&columns)?;
                plan_core(&mut table, &config)
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    let (mut message, mut hidden, mut fate, mut pruned, mut tokens) = (
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
        vec![false; rows],
        Vec::with_capacity(rows),
    );
    for p in &sessions {
        message.extend(p.message.iter().copied());
        hidden.extend(p.hidden.iter().map(|&h| h as u8));
        fate.extend(p.fate.iter().map(|&f| f as u8));
        tokens.extend(p.tokens.iter().copied());
        for &row in &p.prune.rows {
            pruned[row] = true;
        }
    }
    let parts = vec![
        PyArray::from_array_ref(Arc::new(UInt32Array::from(message))),
        PyArray::from_array_ref(Arc::new(UInt8Array::from(hidden))),
        PyArray::from_array_ref(Arc::new(UInt8Array::from(fate))),
        PyArray::from_array_ref(Arc::new(BooleanArray::from(pruned))),
        u64_array(tokens),
    ];
    let column =
        |f: &dyn Fn(&crate::plan::SessionPlan) -> u64| u64_array(sessions.iter().map(f).collect());
    let per_session = vec![
        column(&|p| p.start as u64),
        column(&|p| p.tokens.len() as u64),
        column(&|p| p.prune.total),
        column(&|p| p.prune.pruned),
        column(&|p| p.prune.rows.len() as u64),
        column(&|p| p.tokens.iter().sum()),
        column(&crate::plan::SessionPlan::visible_tokens),
    ];
    let model = match shape {
        None => None,
        Some(_) if arrow => Some(model_columns(py, &sessions)?),
        Some(_) => {
            let list = sessions.iter().map(|p| {
                let joined = joined_arrays(p.model.as_deref().unwrap_or(&[]));
                pyo3::types::PyBytes::new(py, &joined)
            });
            Some(pyo3::types::PyList::new(py, list)?.into_any().unbind())
        }
    };
    Ok((parts, per_session, model))
}

/// The JSON arrays of `arrays` as one array of their elements.
fn joined_arrays(arrays: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(arrays.iter().map(Vec::len).sum::<usize>() + 2);
    out.push(b'[');
    for array in arrays {
        let inner = &array[1..array.len() - 1];
        if inner.is_empty() {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(inner);
    }
    out.push(b']');
    out
}

/// The model input as columns, one row per model message: session index,
/// index in the session's input, its stored message's index, role (null
/// for a Responses item without one), its JSON.
fn model_columns(py: Python<'_>, sessions: &[crate::plan::SessionPlan]) -> PyResult<Py<PyAny>> {
    use arrow_array::UInt32Array;
    let (mut session, mut index, mut stored) = (Vec::new(), Vec::new(), Vec::new());
    let (mut roles, mut texts): (Vec<Option<String>>, Vec<String>) = (Vec::new(), Vec::new());
    for (s, p) in sessions.iter().enumerate() {
        let mut i = 0u32;
        let visible = p
            .message
            .iter()
            .zip(&p.hidden)
            .filter_map(|(m, h)| (*h == crate::plan::Hidden::Shown).then_some(*m).flatten());
        let mut owners: Vec<u32> = visible.collect();
        owners.dedup();
        for (array, owner) in p.model.as_deref().unwrap_or(&[]).iter().zip(owners) {
            let values: Vec<serde_json::Value> = serde_json::from_slice(array).map_err(|e| {
                to_pyerr(
                    py,
                    CoreError::Internal(format!("the render is not JSON: {e}")),
                )
            })?;
            for value in values {
                session.push(s as u64);
                index.push(i);
                stored.push(owner);
                roles.push(
                    value
                        .get("role")
                        .and_then(|r| r.as_str())
                        .map(str::to_owned),
                );
                texts.push(serde_json::to_string(&value).expect("a JSON value serializes"));
                i += 1;
            }
        }
    }
    let columns = vec![
        u64_array(session),
        PyArray::from_array_ref(Arc::new(UInt32Array::from(index))),
        PyArray::from_array_ref(Arc::new(UInt32Array::from(stored))),
        PyArray::from_array_ref(Arc::new(StringArray::from(roles))),
        PyArray::from_array_ref(Arc::new(StringArray::from(texts))),
    ];
    let list = columns
        .into_iter()
        .map(|c| c.into_pyobject(py).map(|o| o.into_any().unbind()))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(pyo3::types::PyTuple::new(py, list)?.into_any().unbind())
}

fn pruned_rows(sessions: &[SessionCompaction]) -> Vec<u64> {
    sessions
        .iter()
        .flat_map(|s| s.prune.rows.iter().map(|&r| r as u64))
        .collect()
}

/// What `estimate_messages` and `sent_messages` count with; `render`:
/// (clear_inputs, truncate_output, placeholder, keep_thinking).
fn message_config(
    py: Python<'_>,
    method: &str,
    overhead: u64,
    render: (bool, Option<u64>, &str, u32),
) -> PyResult<MessageEstimateConfig> {
    let (clear_inputs, truncate_output, placeholder, keep_thinking) = render;
    Ok(MessageEstimateConfig {
        method: parse_method(py, method)?,
        overhead,
        render: Render {
            clear_inputs,
            truncate_output,
            describe: parse_placeholder(py, placeholder)?,
            keep_thinking,
        },
    })
}

/// Returns (first row of each message, its tokens, its session index).
#[pyfunction]
#[pyo3(signature = (
    table, *, method = "opencode", overhead = 4, clear_inputs = false,
    truncate_output = None, placeholder = "opencode", keep_thinking = 0, threads = None,
))]
#[allow(clippy::too_many_arguments)]
fn estimate_messages(
    py: Python<'_>,
    table: AnyRecordBatch,
    method: &str,
    overhead: u64,
    clear_inputs: bool,
    truncate_output: Option<u64>,
    placeholder: &str,
    keep_thinking: u32,
    threads: Option<usize>,
) -> PyResult<(PyArray, PyArray, PyArray)> {
    let render = (clear_inputs, truncate_output, placeholder, keep_thinking);
    let config = message_config(py, method, overhead, render)?;
    let (rows, tokens, sessions) = scan(py, table, Scan::Estimate, threads, |t| {
        let per_session = estimate_messages_core(t, config)?;
        let (mut rows, mut tokens, mut sessions) = (Vec::new(), Vec::new(), Vec::new());
        for (s, msgs) in per_session.into_iter().enumerate() {
            for m in msgs {
                rows.push(m.row as u64);
                tokens.push(m.tokens);
                sessions.push(s as u64);
            }
        }
        Ok((rows, tokens, sessions))
    })?;
    Ok((u64_array(rows), u64_array(tokens), u64_array(sessions)))
}

/// Returns, per model message (`messages::sent_messages`: an assistant's
/// call message, each result), its row (the message's first row, or the
/// tool part's for a result), its tokens, its kind (0: the message, 1: a
/// `tool` result, 2: a text-protocol step's result) and its session index.
#[pyfunction]
#[pyo3(signature = (
    table, *, method = "opencode", overhead = 4, clear_inputs = false,
    truncate_output = None, placeholder = "opencode", keep_thinking = 0, threads = None,
))]
#[allow(clippy::too_many_arguments)]
fn sent_messages(
    py: Python<'_>,
    table: AnyRecordBatch,
    method: &str,
    overhead: u64,
    clear_inputs: bool,
    truncate_output: Option<u64>,
    placeholder: &str,
    keep_thinking: u32,
    threads: Option<usize>,
) -> PyResult<(PyArray, PyArray, PyArray, PyArray)> {
    let render = (clear_inputs, truncate_output, placeholder, keep_thinking);
    let config = message_config(py, method, overhead, render)?;
    let columns = scan(py, table, Scan::Estimate, threads, |t| {
        let mut columns: [Vec<u64>; 4] = Default::default();
        for (s, sent) in sent_messages_core(t, config)?.into_iter().enumerate() {
            for m in sent {
                let kind = match m.kind {
                    SentKind::Message => 0,
                    SentKind::Result => 1,
                    SentKind::Observation => 2,
                };
                for (column, value) in
                    columns
                        .iter_mut()
                        .zip([m.row as u64, m.tokens, kind, s as u64])
                {
                    column.push(value);
                }
            }
        }
        Ok(columns)
    })?;
    let [rows, tokens, kinds, sessions] = columns.map(u64_array);
    Ok((rows, tokens, kinds, sessions))
}

/// `replay`'s and `replay_resume`'s config (the view and mask policy dicts,
/// the budget numbers) and message facts.
type Budget = (u64, Option<u64>, u64, Option<u64>);
type Facts = (Vec<Option<i64>>, Vec<u64>, Vec<Option<String>>);
fn replay_inputs(
    py: Python<'_>,
    (view, mask): (&Bound<'_, PyDict>, Option<&Bound<'_, PyDict>>),
    (created, output, call): Facts,
    (system_tokens, threshold, available, usable): Budget,
) -> PyResult<(ReplayConfig, MessageFacts)> {
    let mask = mask.map(|m| prune_config(py, Some(m))).transpose()?;
    let config = ReplayConfig {
        view: prune_config(py, Some(view))?.estimate_config(),
        mask,
        system_tokens,
        threshold,
        available,
        usable,
    };
    Ok((
        config,
        MessageFacts {
            created,
            output,
            call,
        },
    ))
}

/// Replay every session of `table` call by call (`replay::replay`): the
/// view and the mask are policy dicts (as `prune` takes), the message facts
/// one entry per message in table order. Returns the per-call columns
/// (session id, call, row, prompt, cached, output, baseline prompt and
/// cached, over_window, changed, seconds since the previous call), the cleared rows of every call (offsets
/// into them, one more than the calls) and the sessions left to the live
/// walk with the call where a summary fires (-1: the run compacted itself).
#[pyfunction]
#[pyo3(signature = (
    table, view, mask, created, output, call, *, system_tokens, threshold, available,
    usable, threads = None, retention = false, system = None,
))]
#[allow(clippy::too_many_arguments)]
fn replay(
    py: Python<'_>,
    table: AnyRecordBatch,
    view: &Bound<'_, PyDict>,
    mask: Option<&Bound<'_, PyDict>>,
    created: Vec<Option<i64>>,
    output: Vec<u64>,
    call: Vec<Option<String>>,
    system_tokens: u64,
    threshold: Option<u64>,
    available: u64,
    usable: Option<u64>,
    threads: Option<usize>,
    retention: bool,
    system: Option<String>,
) -> PyResult<Vec<PyArray>> {
    let (config, facts) = replay_inputs(
        py,
        (view, mask),
        (created, output, call),
        (system_tokens, threshold, available, usable),
    )?;
    let (calls, fallback) = scan(py, table, Scan::Compact, threads, |t| {
        let sessions = replay_core(t, &facts, &config)?;
        // Retention of every call, scored here (`retention` module) when asked.
        let scores = match retention {
            true => Some(score_replays(
                t,
                &sessions,
                config.view.render,
                system.as_deref(),
            )?),
            false => None,
        };
        let mut scored: Vec<Scored> = Vec::new();
        let id = |s: usize| t.session_id.get(t.sessions[s].start);
        let mut fallback: (Vec<Option<&str>>, Vec<i64>) = Default::default();
        let mut out: Vec<Call> = Vec::new();
        for (s, session) in sessions.into_iter().enumerate() {
            match session.fallback {
                Some(why) => {
                    fallback.0.push(id(s));
                    fallback.1.push(match why {
                        Fallback::Summary(call) => call as i64,
                        Fallback::Compacted => -1,
                    });
                }
                None => {
                    if let Some(scores) = &scores {
                        scored.extend(scores[s].iter().cloned());
                    }
                    out.extend(session.calls)
                }
            }
        }
        let ids: StringArray = out.iter().map(|c| id(c.session)).collect();
        let fallback_ids: StringArray = fallback.0.into_iter().collect();
        Ok(((ids, out, scored), (fallback_ids, fallback.1)))
    })?;
    let (ids, calls, scored) = calls;
    let mut out = call_columns(ids, &calls);
    out.extend([
        PyArray::from_array_ref(Arc::new(fallback.0)),
        PyArray::from_array_ref(Arc::new(arrow_array::Int64Array::from(fallback.1))),
        // Retention (empty unless asked): removed and kept facts, the labels
        // of the lost ones, the share of the stated facts the prompt shows.
        u64_array(scored.iter().map(|x| x.removed.removed).collect()),
        u64_array(scored.iter().map(|x| x.removed.kept).collect()),
        lost_labels(&scored),
        PyArray::from_array_ref(Arc::new(arrow_array::Float64Array::from(
            scored.iter().map(|x| x.retention).collect::<Vec<f64>>(),
        ))),
    ]);
    Ok(out)
}

/// The per-call columns `replay` returns: session id, call, row, prompt,
/// cached, output, baseline prompt and cached, over_window, changed,
/// seconds since the previous call, then the cleared rows' offsets and rows.
fn call_columns(ids: StringArray, calls: &[Call]) -> Vec<PyArray> {
    let column = |f: &dyn Fn(&Call) -> u64| u64_array(calls.iter().map(f).collect());
    let flag = |f: &dyn Fn(&Call) -> bool| {
        PyArray::from_array_ref(Arc::new(
            calls.iter().map(|c| Some(f(c))).collect::<BooleanArray>(),
        ))
    };
    let mut offsets = vec![0u64];
    let mut cleared = Vec::new();
    for c in calls {
        cleared.extend(c.cleared.iter().map(|&r| r as u64));
        offsets.push(cleared.len() as u64);
    }
    vec![
        PyArray::from_array_ref(Arc::new(ids)),
        column(&|c| c.call as u64),
        column(&|c| c.row as u64),
        column(&|c| c.prompt),
        column(&|c| c.cached),
        column(&|c| c.output),
        column(&|c| c.baseline_prompt),
        column(&|c| c.baseline_cached),
        flag(&|c| c.over_window),
        flag(&|c| c.changed),
        PyArray::from_array_ref(Arc::new(
            calls
                .iter()
                .map(|c| c.since_previous_ms.map(|ms| ms as f64 / 1000.0))
                .collect::<arrow_array::Float64Array>(),
        )),
        u64_array(offsets),
        u64_array(cleared),
    ]
}

/// The retention `replay_resume` carries from each session it stopped for a
/// summary to the segment that resumes it (`retention::Carried`, by session
/// id): opaque to Python, passed back as `carried`.
#[pyclass(module = "ctxcompact._core", frozen)]
struct ResumeRetention(
    std::sync::Mutex<std::collections::HashMap<String, crate::retention::Carried>>,
);

/// The per-session resume states of `replay_resume`'s lists (each as long
/// as `heads`, or a `ConfigError` naming their lengths).
fn resume_states(
    py: Python<'_>,
    heads: Vec<usize>,
    hidden: Vec<Vec<bool>>,
    first_calls: Vec<usize>,
    baselines: Vec<u64>,
    last_times: Vec<Option<i64>>,
    stalled: Vec<bool>,
) -> PyResult<Vec<Resume>> {
    let n = heads.len();
    let lengths = [
        hidden.len(),
        first_calls.len(),
        baselines.len(),
        last_times.len(),
        stalled.len(),
    ];
    if lengths != [n; 5] {
        return Err(to_pyerr(
            py,
            CoreError::Config(format!(
                "replay_resume: heads, hidden, first_calls, baselines, last_times and stalled \
                 have {n}, {}, {}, {}, {} and {} entries",
                hidden.len(),
                first_calls.len(),
                baselines.len(),
                last_times.len(),
                stalled.len()
            )),
        ));
    }
    Ok((0..n)
        .zip(hidden)
        .map(|(s, hidden)| Resume {
            head: heads[s],
            hidden,
            first_call: first_calls[s],
            baseline: baselines[s],
            last_time: last_times[s],
            stalled: stalled[s],
        })
        .collect())
}

/// The retention state `carried` holds (taken out of it: a handle resumes
/// once), or an `InvalidUsageError` naming what was passed instead.
fn take_carried(
    py: Python<'_>,
    carried: Option<&Bound<'_, PyAny>>,
) -> PyResult<std::collections::HashMap<String, crate::retention::Carried>> {
    let Some(handle) = carried else {
        return Ok(Default::default());
    };
    let handle = handle
        .extract::<PyRef<'_, ResumeRetention>>()
        .map_err(|_| {
            let kind = handle
                .get_type()
                .name()
                .map_or("?".into(), |n| n.to_string());
            to_pyerr(
                py,
                CoreError::InvalidUsage(format!(
                    "replay_resume: carried is a {kind}, not what replay_resume returned"
                )),
            )
        })?;
    let mut map = handle.0.lock().unwrap_or_else(|e| e.into_inner());
    Ok(std::mem::take(&mut *map))
}

/// `replay` of sessions the caller resumes after a summary (`replay::resume`;
/// a session with `heads` 0, `first_calls` 0, `baselines` 0 and no last
/// time is walked from its start). `table` holds each session as the live
/// flow left it: its first `heads` messages are the stored session at the
/// summary's call (call `first_calls`; those not `hidden` its prompt), then
/// the run's messages from the one that made it. `carried`: what the
/// previous call returned last (a session with `heads` > 0 resumes from
/// its retention; `None` in the first). Returns `replay`'s per-call columns
/// (the calls before a stop included), then per session stopped for a
/// summary: its id, the call, its message's first row, the baseline before
/// it, the created time (ms) of the latest call with one (`replay::Stop`)
/// and the prompt of its last call before the stop (a JSON array of chat
/// messages); then the calls' retention (removed and kept facts, the lost
/// facts' labels, the share shown), the retention of each session's
/// summary call at its head (the same four, one entry per session; 0
/// removed and 1.0 where `heads` is 0), and the `carried` of the next call.
#[pyfunction]
#[pyo3(signature = (
    table, view, mask, created, output, call, heads, hidden, first_calls, baselines,
    last_times, stalled, *, system_tokens, threshold, available, usable, threads = None,
    system = None, carried = None,
))]
#[allow(clippy::too_many_arguments)]
fn replay_resume(
    py: Python<'_>,
    table: AnyRecordBatch,
    view: &Bound<'_, PyDict>,
    mask: Option<&Bound<'_, PyDict>>,
    created: Vec<Option<i64>>,
    output: Vec<u64>,
    call: Vec<Option<String>>,
    heads: Vec<usize>,
    hidden: Vec<Vec<bool>>,
    first_calls: Vec<usize>,
    baselines: Vec<u64>,
    last_times: Vec<Option<i64>>,
    stalled: Vec<bool>,
    system_tokens: u64,
    threshold: Option<u64>,
    available: u64,
    usable: Option<u64>,
    threads: Option<usize>,
    system: Option<String>,
    carried: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Py<PyAny>>> {
    let states = resume_states(
        py,
        heads,
        hidden,
        first_calls,
        baselines,
        last_times,
        stalled,
    )?;
    let mut carried = take_carried(py, carried)?;
    let (config, facts) = replay_inputs(
        py,
        (view, mask),
        (created, output, call),
        (system_tokens, threshold, available, usable),
    )?;
    type Stops<'t> = (
        Vec<Option<&'t str>>,
        Vec<i64>,
        Vec<u64>,
        Vec<u64>,
        Vec<Option<i64>>,
        Vec<String>,
    );
    type Scores = (Vec<Scored>, Vec<Scored>);
    let (calls, stops, scores, next) = scan(py, table, Scan::Compact, threads, |t| {
        let sessions = resume_core(t, &facts, &config, &states)?;
        let id = |s: usize| t.session_id.get(t.sessions[s].start);
        let mine = (0..sessions.len())
            .map(|s| id(s).and_then(|sid| carried.remove(sid)))
            .collect();
        let render = config.view.render;
        let segments = crate::retention::score_resumed(
            t,
            &sessions,
            &states,
            mine,
            render,
            system.as_deref(),
        )?;
        let mut stops: Stops<'_> = Default::default();
        let mut scores: Scores = Default::default();
        let mut next = std::collections::HashMap::new();
        let mut out: Vec<Call> = Vec::new();
        for (s, (session, segment)) in sessions.into_iter().zip(segments).enumerate() {
            out.extend(session.calls);
            scores.0.extend(segment.calls);
            scores.1.push(segment.summary.unwrap_or_else(Scored::whole));
            let (call, row, baseline, last) = match (session.fallback, session.stop) {
                (Some(Fallback::Summary(_)), Some(stop)) => (
                    stop.call as i64,
                    stop.row as u64,
                    stop.baseline,
                    stop.last_time,
                ),
                (Some(_), _) => (-1, 0, 0, None),
                (None, _) => continue,
            };
            if let (Some(sid), Some(state)) = (id(s), segment.carried) {
                next.insert(sid.to_string(), state);
            }
            stops.0.push(id(s));
            stops.1.push(call);
            stops.2.push(row);
            stops.3.push(baseline);
            stops.4.push(last);
            stops
                .5
                .push(segment.previous.unwrap_or_else(|| "[]".into()));
        }
        let ids: StringArray = out.iter().map(|c| id(c.session)).collect();
        let stop_ids: StringArray = stops.0.iter().copied().collect();
        let previous: StringArray = stops.5.iter().map(|p| Some(p.as_str())).collect();
        Ok((
            (ids, out),
            (stop_ids, stops.1, stops.2, stops.3, stops.4, previous),
            scores,
            next,
        ))
    })?;
    let (ids, calls) = calls;
    let mut out = call_columns(ids, &calls);
    out.extend([
        PyArray::from_array_ref(Arc::new(stops.0)),
        PyArray::from_array_ref(Arc::new(arrow_array::Int64Array::from(stops.1))),
        u64_array(stops.2),
        u64_array(stops.3),
        PyArray::from_array_ref(Arc::new(arrow_array::Int64Array::from(stops.4))),
        PyArray::from_array_ref(Arc::new(stops.5)),
    ]);
    for scored in [&scores.0, &scores.1] {
        out.extend([
            u64_array(scored.iter().map(|x| x.removed.removed).collect()),
            u64_array(scored.iter().map(|x| x.removed.kept).collect()),
            lost_labels(scored),
            PyArray::from_array_ref(Arc::new(arrow_array::Float64Array::from(
                scored.iter().map(|x| x.retention).collect::<Vec<f64>>(),
            ))),
        ]);
    }
    let mut result = out
        .into_iter()
        .map(|a| a.into_pyobject(py).map(|o| o.unbind()))
        .collect::<PyResult<Vec<Py<PyAny>>>>()?;
    let handle = ResumeRetention(std::sync::Mutex::new(next));
    result.push(Py::new(py, handle)?.into_any());
    Ok(result)
}

/// Chat messages (a JSON array) as the retention rule reads them.
fn chats(py: Python<'_>, messages: &str) -> PyResult<Vec<Arc<crate::retention::Chat>>> {
    let values: Vec<serde_json::Value> = serde_json::from_str(messages).map_err(|e| {
        to_pyerr(
            py,
            CoreError::InvalidUsage(format!("messages are not a JSON array of objects: {e}")),
        )
    })?;
    Ok(values
        .into_iter()
        .map(|v| Arc::new(crate::retention::Chat::new(v)))
        .collect())
}

/// A fact as (kind, text, resolved, its content words).
type FactTuple = (String, String, bool, Vec<String>);

fn fact_tuple(f: &crate::retention::Fact) -> FactTuple {
    (
        crate::retention::KINDS[f.kind as usize].to_string(),
        f.text.clone(),
        f.resolved,
        f.words.clone(),
    )
}

/// `tuning.retention.extract_facts` of chat `messages` (a JSON array), in
/// the core: `task_index` as there (`None`: the first request; negative: none).
/// The token columns `price_calls` reads, in `billing::Calls`' order.
const BILLED_COLUMNS: [&str; 7] = [
    "prompt_tokens",
    "cached_tokens",
    "baseline_prompt_tokens",
    "baseline_cached_tokens",
    "output_tokens",
    "summary_input_tokens",
    "summary_output_tokens",
];

/// The column `name` of each of `batches` as an `A` (an `expected` Arrow
/// type): the cache billing's columns, read whole.
fn typed_chunks<'a, A: arrow_array::Array + 'static>(
    schema: &SchemaRef,
    batches: &'a [RecordBatch],
    name: &'static str,
    expected: &'static str,
) -> crate::Result<Vec<&'a A>> {
    let index = schema
        .index_of(name)
        .map_err(|_| CoreError::MissingColumn {
            column: name,
            needed_by: "the cache billing",
        })?;
    batches
        .iter()
        .map(|batch| {
            let column = batch.column(index);
            column
                .as_any()
                .downcast_ref::<A>()
                .ok_or_else(|| CoreError::ColumnType {
                    column: name,
                    found: column.data_type().to_string(),
                    expected,
                })
        })
        .collect()
}

/// The float64 column `name` of `batches` whole, nulls kept.
fn float_column(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    name: &'static str,
) -> crate::Result<Vec<Option<f64>>> {
    let chunks = typed_chunks::<arrow_array::Float64Array>(schema, batches, name, "float64")?;
    Ok(chunks.into_iter().flat_map(|c| c.iter()).collect())
}

/// The int64 token column `name` of `batches` whole: a null or a negative
/// count is refused, naming the column and the row.
fn token_column(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    name: &'static str,
) -> crate::Result<Vec<i64>> {
    let chunks = typed_chunks::<arrow_array::Int64Array>(schema, batches, name, "int64")?;
    let mut out = Vec::with_capacity(rows_of(batches));
    for value in chunks.into_iter().flat_map(|c| c.iter()) {
        let at = crate::error::Location::column(name).row(out.len());
        match value {
            Some(v) if v >= 0 => out.push(v),
            Some(v) => {
                let (what, value) = ("token count (negative)", v.to_string());
                return Err(CoreError::UnknownValue { what, value, at });
            }
            None => {
                return Err(CoreError::NullValue {
                    what: "a token count",
                    at,
                })
            }
        }
    }
    Ok(out)
}

type PricedTuple = (f64, f64, i64, i64, i64, i64, i64, i64);

/// `tuning.cache.price_calls`' rule in the core (`billing.rs`): a per-call
/// table's token columns (`BILLED_COLUMNS` and `since_previous_s`, with
/// `ttl_s` each call's cache lifetime) priced under `rule` (enabled,
/// min_tokens, step, writes) and `prices` (input, cached input, cache
/// write, output; USD per million): (cost, baseline cost, then the
/// tokens read, written and sent fresh, the policy's and the baseline's).
#[pyfunction]
fn price_calls(
    py: Python<'_>,
    calls: AnyRecordBatch,
    rule: (bool, i64, i64, bool),
    prices: (f64, f64, f64, f64),
) -> PyResult<PricedTuple> {
    let (schema, batches) = batches(py, calls)?;
    py.detach(|| {
        let rule = crate::billing::CacheRule::new(rule.0, rule.1, rule.2, rule.3)?;
        let prices = crate::billing::Prices {
            input: prices.0,
            cached_input: prices.1,
            write: prices.2,
            output: prices.3,
        };
        let tokens = BILLED_COLUMNS
            .iter()
            .map(|name| token_column(&schema, &batches, name))
            .collect::<crate::Result<Vec<_>>>()?;
        let since_s = float_column(&schema, &batches, "since_previous_s")?;
        let ttl = float_column(&schema, &batches, "ttl_s")?;
        let ttl_s = ttl
            .iter()
            .enumerate()
            .map(|(row, t)| {
                t.ok_or_else(|| CoreError::NullValue {
                    what: "a cache lifetime",
                    at: crate::error::Location::column("ttl_s").row(row),
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        let calls = crate::billing::Calls {
            prompt: &tokens[0],
            cached: &tokens[1],
            baseline_prompt: &tokens[2],
            baseline_cached: &tokens[3],
            output: &tokens[4],
            summary_input: &tokens[5],
            summary_output: &tokens[6],
            since_s: &since_s,
            ttl_s: &ttl_s,
        };
        let p = crate::billing::price_calls(&calls, &rule, &prices)?;
        Ok((
            p.cost,
            p.baseline_cost,
            p.cached,
            p.written,
            p.input,
            p.baseline_cached,
            p.baseline_written,
            p.baseline_input,
        ))
    })
    .map_err(|e| to_pyerr(py, e))
}

/// The string column `name` of `batches` whole, a null refused naming the row.
fn text_column<'a>(
    schema: &SchemaRef,
    batches: &'a [RecordBatch],
    name: &'static str,
) -> crate::Result<Vec<&'a str>> {
    let chunks = typed_chunks::<StringArray>(schema, batches, name, "string")?;
    let mut out = Vec::with_capacity(rows_of(batches));
    for value in chunks.into_iter().flat_map(|c| c.iter()) {
        let at = crate::error::Location::column(name).row(out.len());
        out.push(value.ok_or(CoreError::NullValue { what: "an id", at })?);
    }
    Ok(out)
}

type BreaksTuple = (PyArray, PyArray, PyArray, Vec<(String, i64, i64, Vec<i64>)>);

/// `tuning.cache.cache_breaks`' rule in the core (`billing::cache_breaks`):
/// the per-call table's `cached_tokens`, `baseline_cached_tokens` and
/// `written_tokens` with the recorded breaks applied, and per run that
/// recorded a cache read (session id, breaks, tokens, the calls' indices).
#[pyfunction]
fn cache_breaks(
    py: Python<'_>,
    calls: AnyRecordBatch,
    recorded: std::collections::HashMap<(String, String), (i64, i64)>,
    lifetimes: std::collections::HashMap<String, f64>,
    prefixes: std::collections::HashMap<String, i64>,
    ttl_s: f64,
) -> PyResult<BreaksTuple> {
    let (schema, batches) = batches(py, calls)?;
    let (cached, baseline_cached, written, runs) = py
        .detach(|| {
            let ints = |name| token_column(&schema, &batches, name);
            let (mut cached, mut baseline_cached) =
                (ints("cached_tokens")?, ints("baseline_cached_tokens")?);
            let mut written = ints("written_tokens")?;
            let (prompt, baseline_prompt, call) = (
                ints("prompt_tokens")?,
                ints("baseline_prompt_tokens")?,
                ints("call")?,
            );
            let session_id = text_column(&schema, &batches, "session_id")?;
            let message_id = text_column(&schema, &batches, "message_id")?;
            let since_s = float_column(&schema, &batches, "since_previous_s")?;
            let mut table = crate::billing::BreakCalls {
                session_id: &session_id,
                message_id: &message_id,
                call: &call,
                prompt: &prompt,
                baseline_prompt: &baseline_prompt,
                since_s: &since_s,
                cached: &mut cached,
                baseline_cached: &mut baseline_cached,
                written: &mut written,
            };
            let given = crate::billing::Recorded {
                calls: &recorded,
                lifetimes: &lifetimes,
                prefixes: &prefixes,
                ttl_s,
            };
            let runs = crate::billing::cache_breaks(&mut table, &given)?;
            Ok::<_, CoreError>((cached, baseline_cached, written, runs))
        })
        .map_err(|e| to_pyerr(py, e))?;
    let array = |v: Vec<i64>| PyArray::from_array_ref(Arc::new(arrow_array::Int64Array::from(v)));
    let mut runs: Vec<_> = runs
        .into_iter()
        .map(|(sid, r)| (sid, r.breaks, r.tokens, r.calls))
        .collect();
    runs.sort();
    Ok((array(cached), array(baseline_cached), array(written), runs))
}

#[pyfunction]
#[pyo3(signature = (messages, task_index = None))]
fn retention_facts(
    py: Python<'_>,
    messages: &str,
    task_index: Option<i64>,
) -> PyResult<Vec<FactTuple>> {
    let chats = chats(py, messages)?;
    let refs: Vec<&crate::retention::Chat> = chats.iter().map(|c| &**c).collect();
    let task = match task_index {
        None => refs.iter().position(|m| m.request),
        Some(i) if i < 0 => None,
        Some(i) => Some(i as usize),
    };
    let facts = crate::retention::extract_facts(&refs, task, None);
    Ok(facts.iter().map(fact_tuple).collect())
}

/// `tuning.retention.score_compaction(before, after, task=task)` in the
/// core: (removed facts, kept facts, the lost facts' labels).
#[pyfunction]
#[pyo3(signature = (before, after, task = None))]
fn retention_compaction(
    py: Python<'_>,
    before: &str,
    after: &str,
    task: Option<&str>,
) -> PyResult<(u64, u64, Vec<String>)> {
    let r = crate::retention::score_compaction(&chats(py, before)?, &chats(py, after)?, task);
    Ok((r.removed, r.kept, r.lost))
}

/// `tuning.retention.RunRetention` in the core, fed `steps`: `("append",
/// messages)` or `("resend", before, sent)` (JSON arrays); its score after
/// each step, and the labels of the facts lost at the end.
#[pyfunction]
fn retention_run(py: Python<'_>, steps: Vec<Vec<String>>) -> PyResult<(Vec<f64>, Vec<String>)> {
    let mut run = crate::retention::RunRetention::default();
    let mut scores = Vec::with_capacity(steps.len());
    for step in &steps {
        match step
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["append", messages] => run.append(&chats(py, messages)?),
            ["resend", before, sent] => run.resend(&chats(py, before)?, &chats(py, sent)?),
            _ => {
                let why = "a step is (\"append\", messages) or (\"resend\", before, sent)";
                return Err(to_pyerr(py, CoreError::InvalidUsage(why.into())));
            }
        }
        scores.push(run.score());
    }
    Ok((scores, run.lost().iter().map(|f| f.label()).collect()))
}

/// Each call's lost facts' labels, as a list array.
fn lost_labels(scored: &[Scored]) -> PyArray {
    let values: StringArray = scored
        .iter()
        .flat_map(|x| x.removed.lost.iter().map(|l| Some(l.as_str())))
        .collect();
    let offsets =
        arrow_buffer::OffsetBuffer::from_lengths(scored.iter().map(|x| x.removed.lost.len()));
    let field = Arc::new(Field::new("item", DataType::Utf8, true));
    PyArray::from_array_ref(Arc::new(arrow_array::ListArray::new(
        field,
        offsets,
        Arc::new(values),
        None,
    )))
}

/// The placeholder of a cleared tool output (`placeholder = "describe"`).
#[pyfunction]
#[pyo3(signature = (tool, input, output, part_id, *, describe = true))]
fn cleared_placeholder(
    tool: &str,
    input: Option<&str>,
    output: &str,
    part_id: &str,
    describe: bool,
) -> String {
    crate::render::cleared(describe, tool, input, output, part_id)
}

/// `output` cut to its head and tail for a budget of `budget` tokens.
#[pyfunction]
fn truncate_output(output: &str, budget: u64) -> String {
    crate::render::truncate(output, budget)
}

/// A new `compacted_at` column (same chunks) with `now_ms` set at `rows`.
#[pyfunction]
fn mark_rows(
    py: Python<'_>,
    compacted_at: AnyArray,
    rows: PyArray,
    now_ms: i64,
) -> PyResult<PyChunkedArray> {
    let rows = row_indices(py, rows)?;
    let (chunks, _field) = compacted_at.into_chunks();
    let field = Arc::new(Field::new("compacted_at", DataType::Int64, true));
    let out = py
        .detach(|| {
            let size = chunks.iter().map(|c| c.len()).sum();
            parallel::run_sized(None, size, false, || {
                crate::mark::mark_rows(&chunks, &rows, now_ms)
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    chunked(out, field)
}

/// Strings of `column` (any string type, chunked) at `rows`, as one utf8 array.
#[pyfunction]
fn take_strings(py: Python<'_>, column: AnyArray, rows: PyArray) -> PyResult<PyArray> {
    let rows = row_indices(py, rows)?;
    let (chunks, _field) = column.into_chunks();
    let out = py
        .detach(|| {
            let size = chunks.iter().map(|c| c.len()).sum();
            parallel::run_sized(None, size, false, || {
                crate::columns::take_strings(&chunks, &rows)
            })
        })
        .map_err(|e| to_pyerr(py, e))?;
    Ok(PyArray::from_array_ref(Arc::new(out)))
}

/// A rejected line: (file index, 1-based line, error, session id, message id, raw bytes).
type RejectedLine = (
    usize,
    usize,
    String,
    Option<String>,
    Option<String>,
    Py<pyo3::types::PyBytes>,
);

/// What `ingest_jsonl` and `JsonlStream` return: (table, rejected lines,
/// lines read, sessions read).
type IngestOut = (PyTable, Vec<RejectedLine>, usize, usize);

/// The files and options of an ingest call, checked: one format and one id
/// base per file (`names`: one for every file, or one per file).
fn ingest_args(
    paths: Vec<String>,
    names: Vec<String>,
    on_error: &str,
    chunk_bytes: usize,
    id_bases: Option<Vec<Option<String>>>,
) -> Result<(Vec<ingest::StreamFile>, Options), CoreError> {
    let files = paths.len();
    let names = match names.len() {
        1 => vec![names[0].clone(); files],
        _ => names,
    };
    let id_bases = id_bases.unwrap_or_else(|| vec![None; files]);
    if names.len() != files || id_bases.len() != files {
        return Err(CoreError::Config(format!(
            "{} formats and {} id bases given for {files} files",
            names.len(),
            id_bases.len(),
        )));
    }
    let formats = names
        .iter()
        .map(|name| name.parse::<ingest::Format>())
        .collect::<Result<Vec<_>, _>>()?;
    let options = Options {
        chunk_bytes,
        ..Options::new(on_error.parse::<OnError>()?)
    };
    let files = paths
        .into_iter()
        .zip(formats)
        .zip(id_bases)
        .map(|((path, format), id_base)| ingest::StreamFile {
            path,
            format,
            id_base,
        })
        .collect();
    Ok((files, options))
}

/// Rows and rejected lines to Python.
fn ingest_out(py: Python<'_>, out: ingest::Ingested) -> PyResult<IngestOut> {
    let table = PyTable::try_new(out.batches, ingest::rows::schema())?;
    let rejected = out
        .rejected
        .into_iter()
        .map(|r| {
            let raw = pyo3::types::PyBytes::new(py, &r.raw).unbind();
            (r.source, r.line, r.error, r.session_id, r.message_id, raw)
        })
        .collect();
    Ok((table, rejected, out.lines, out.sessions))
}

#[pyfunction]
#[pyo3(signature = (paths, format, on_error = "raise", threads = None, chunk_bytes = 1_048_576, id_bases = None))]
fn ingest_jsonl(
    py: Python<'_>,
    paths: Vec<String>,
    format: &Bound<'_, PyAny>,
    on_error: &str,
    threads: Option<usize>,
    chunk_bytes: usize,
    id_bases: Option<Vec<Option<String>>>,
) -> PyResult<IngestOut> {
    // one format for every file, or one per file
    let names: Vec<String> = match format.extract::<String>() {
        Ok(one) => vec![one],
        Err(_) => format.extract()?,
    };
    let (files, options) =
        ingest_args(paths, names, on_error, chunk_bytes, id_bases).map_err(|e| to_pyerr(py, e))?;
    let out = py
        .detach(|| parallel::run(threads, || ingest::ingest_files(files, options)))
        .map_err(|e| to_pyerr(py, e))?;
    ingest_out(py, out)
}

/// JSONL lines in memory (`data`, read as the file `name` would be) to part
/// rows: `ingest_jsonl` without a file (a chat list a runtime holds).
#[pyfunction]
#[pyo3(signature = (data, format, name = "<memory>", on_error = "raise"))]
fn ingest_bytes(
    py: Python<'_>,
    data: &[u8],
    format: &str,
    name: &str,
    on_error: &str,
) -> PyResult<IngestOut> {
    let read = || -> Result<ingest::Ingested, CoreError> {
        let source = ingest::Source::new(name, data, format.parse::<ingest::Format>()?);
        let options = Options::new(on_error.parse::<OnError>()?);
        // under one chunk: one task, on the calling thread
        parallel::run_sized(None, data.len(), true, || {
            ingest::ingest(&[source], &options)
        })
    };
    let out = read().map_err(|e| to_pyerr(py, e))?;
    ingest_out(py, out)
}

/// Per chat message of a chat list (`chatlist::chat_counts`): `data` the
/// list as one session named `session` (`chat_rows`); `size` messages.
#[pyfunction]
#[pyo3(signature = (data, size, *, session, method = "opencode", overhead = 4))]
fn chat_counts(
    py: Python<'_>,
    data: &[u8],
    size: usize,
    session: &str,
    method: &str,
    overhead: u64,
) -> PyResult<Vec<u64>> {
    let config = message_config(py, method, overhead, (false, None, "opencode", 0))?;
    py.detach(|| {
        parallel::run_sized(None, data.len(), true, || {
            crate::chatlist::chat_counts(data, size, session, config)
        })
    })
    .map_err(|e| to_pyerr(py, e))
}

/// A chat list (`messages`: the caller's list of dicts) as the JSON the
/// chat mapper reads (`chat_counts`, `chat_rows`): one session named
/// `session`, no message's own `id`, each `tool` message tagged with its
/// index; `None` when it holds a value only `json.dumps` writes (a subclass,
/// a lone surrogate, a NaN...; `python/chat_json.rs`).
#[pyfunction]
#[pyo3(signature = (messages, *, session))]
fn chat_list_json<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
    session: &str,
) -> PyResult<Option<Bound<'py, pyo3::types::PyBytes>>> {
    Ok(chat_json::chat_list_json(messages, session)?
        .map(|data| pyo3::types::PyBytes::new(py, &data)))
}

/// The part rows of a chat list (`chatlist::read`): `data` one
/// `{"id", "messages"}` object, read as `ingest_bytes` reads an
/// `openai-chat` line, messages holding Anthropic content blocks too; each
/// result's chat index in its tool part's `result_source["ctxcompact_at"]`.
#[pyfunction]
fn chat_rows(py: Python<'_>, data: &[u8]) -> PyResult<IngestOut> {
    let read = || parallel::run_sized(None, data.len(), true, || crate::chatlist::read(data));
    let out = read().map_err(|e| to_pyerr(py, e))?;
    ingest_out(py, out)
}

/// The part rows of session exports, one JSON object per line as a
/// pydantic `Session` serializes itself (`transcript.sessions_to_table`),
/// mapped by the OpenCode rules in chunks of about `chunk_bytes` on
/// `threads` threads; `tool_target` as plain strings.
#[pyfunction]
#[pyo3(signature = (data, *, threads = None, chunk_bytes = 1_048_576))]
fn session_rows(
    py: Python<'_>,
    data: &[u8],
    threads: Option<usize>,
    chunk_bytes: usize,
) -> PyResult<PyTable> {
    let batches = py
        .detach(|| parallel::run(threads, || ingest::exports_to_rows(data, chunk_bytes)))
        .map_err(|e| to_pyerr(py, e))?;
    PyTable::try_new(batches, ingest::rows::schema())
}

/// JSONL files read window by window (`ingest::Stream`): each `next` maps
/// about `window_bytes` of whole lines with the GIL released and returns
/// `(table, rejected, lines, sessions)`, the counts of everything so far.
#[pyclass(module = "ctxcompact._core")]
struct JsonlStream {
    stream: ingest::Stream,
    threads: Option<usize>,
}

#[pymethods]
impl JsonlStream {
    #[new]
    #[pyo3(signature = (paths, formats, on_error = "raise", threads = None, chunk_bytes = 1_048_576, window_bytes = 67_108_864, id_bases = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: Vec<String>,
        formats: Vec<String>,
        on_error: &str,
        threads: Option<usize>,
        chunk_bytes: usize,
        window_bytes: usize,
        id_bases: Option<Vec<Option<String>>>,
    ) -> PyResult<Self> {
        let (files, options) = ingest_args(paths, formats, on_error, chunk_bytes, id_bases)
            .map_err(|e| to_pyerr(py, e))?;
        Ok(JsonlStream {
            stream: ingest::Stream::new(files, options, window_bytes),
            threads,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(mut slf: PyRefMut<'_, Self>, py: Python<'_>) -> PyResult<Option<IngestOut>> {
        let threads = slf.threads;
        let stream = &mut slf.stream;
        let window = py
            .detach(|| parallel::run(threads, || stream.next_window()))
            .map_err(|e| to_pyerr(py, e))?;
        window.map(|out| ingest_out(py, out)).transpose()
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ERROR_CLASSES", crate::error::CLASS_NAMES.to_vec())?;
    m.add("CACHE_BREAK_SHARE", crate::billing::BREAK_SHARE)?;
    m.add("CACHE_BREAK_MIN_TOKENS", crate::billing::BREAK_MIN_TOKENS)?;
    m.add(
        "FORMATS",
        pyo3::types::PyTuple::new(m.py(), ingest::Format::NAMES)?,
    )?;
    m.add("CLEARED_TOOL_OUTPUT", crate::render::CLEARED_TOOL_OUTPUT)?;
    m.add("INTERRUPTED_TOOL", crate::render::INTERRUPTED_TOOL)?;
    m.add("COMPACTION_QUESTION", crate::render::COMPACTION_QUESTION)?;
    m.add("IMAGE_TOKENS", crate::messages::IMAGE_TOKENS)?;
    m.add_function(wrap_pyfunction!(estimate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_tokens_array, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(load_vocabulary, m)?)?;
    m.add_function(wrap_pyfunction!(vocabulary_loaded, m)?)?;
    m.add_function(wrap_pyfunction!(count_units, m)?)?;
    m.add_function(wrap_pyfunction!(counted_column, m)?)?;
    m.add_function(wrap_pyfunction!(text_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(method_name, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_fit, m)?)?;
    m.add_function(wrap_pyfunction!(tool_targets, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_array, m)?)?;
    m.add_function(wrap_pyfunction!(overflow_check, m)?)?;
    m.add_function(wrap_pyfunction!(prune, m)?)?;
    m.add_class::<JsonlStream>()?;
    m.add_function(wrap_pyfunction!(estimator_table, m)?)?;
    m.add_function(wrap_pyfunction!(pivot, m)?)?;
    m.add_function(wrap_pyfunction!(check_table, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_messages, m)?)?;
    m.add_function(wrap_pyfunction!(mark_rows, m)?)?;
    m.add_function(wrap_pyfunction!(take_strings, m)?)?;
    m.add_function(wrap_pyfunction!(pivot_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(sent_messages, m)?)?;
    m.add_function(wrap_pyfunction!(session_rows, m)?)?;
    m.add_function(wrap_pyfunction!(compact_batch, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(chat_counts, m)?)?;
    m.add_function(wrap_pyfunction!(chat_rows, m)?)?;
    m.add_function(wrap_pyfunction!(chat_list_json, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(replay_resume, m)?)?;
    m.add_function(wrap_pyfunction!(retention_facts, m)?)?;
    m.add_function(wrap_pyfunction!(retention_compaction, m)?)?;
    m.add_function(wrap_pyfunction!(retention_run, m)?)?;
    m.add_function(wrap_pyfunction!(price_calls, m)?)?;
    m.add_function(wrap_pyfunction!(cache_breaks, m)?)?;
    m.add_function(wrap_pyfunction!(cleared_placeholder, m)?)?;
    m.add_function(wrap_pyfunction!(truncate_output, m)?)?;
    m.add_function(wrap_pyfunction!(render_chat, m)?)?;
    m.add_function(wrap_pyfunction!(thinking_flags, m)?)?;
    m.add_function(wrap_pyfunction!(anthropic_body, m)?)?;
    m.add_function(wrap_pyfunction!(session_pivot, m)?)?;
    m.add_function(wrap_pyfunction!(turn_end, m)?)?;
    Ok(())
}
