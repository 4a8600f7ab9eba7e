"""Replay in the engine (``_core.replay``): the per-call table of
``tuning.replay`` worked out over the part table, the sessions in parallel.

The first step of issue 38's part 3. The core walks each session call by
call, masking as the live loop does (``mask_first``), and keeps every
message's estimate, re-estimating only what a mask or the ``keep_thinking``
window changes; a run's own summaries and markers are left out and its
stored prune marks ignored, as the live walk does. Where the loop would
write a proactive summary, the core stops the session and says so: those
sessions are resumed in the core after each summary (``tuning.resume``, the
summary's call made by the live lifecycle). A run whose own summary or
marker holds a tool part (no reader writes one) is left to the live walk
(``replay_session``), whole.
Python adds what the core does not know: each message's facts from its
``message_json`` (created time, recorded output, Claude Code call id). The
core scores retention too (rust/src/retention, the rule of
``tuning.retention``): the calls whose prompt is not the previous one with
the new messages appended, as the live walk scores them.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionError, FormatError
from ctxcompact.estimators import reply_priming
from ctxcompact.formats.source import claude_code_call_id, claude_code_created_ms
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import Session
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import Limits, TokenBudget
from ctxcompact.scans.parts import _prune_options
from ctxcompact.transcript import Transcript
from ctxcompact.tuning.resume import resume_summaries
from ctxcompact.tuning.walk import (
    replay_session,
)


def plain_strings(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def message_starts(table: pa.Table) -> list[int]:
    """The first row of every message, in table order (a session's rows
    first: the order the core splits them in)."""
    n = table.num_rows
    if n == 0:
        return []
    sid = plain_strings(table.column("session_id"))
    mid = plain_strings(table.column("message_id"))
    new = pc.or_(
        pc.fill_null(pc.not_equal(sid.slice(1), sid.slice(0, n - 1)), True),
        pc.fill_null(pc.not_equal(mid.slice(1), mid.slice(0, n - 1)), True),
    )
    first = pa.concat_arrays([pa.array([True]), *new.chunks]) if new.num_chunks else pa.array(
        [True])  # fmt: skip
    starts = pc.and_(first, pc.is_valid(mid).combine_chunks())
    return pc.indices_nonzero(starts).to_pylist()  # type: ignore[no-any-return]


class Facts(NamedTuple):
    """Per message (``message_starts``), what its ``message_json`` says, read
    once: its first row, created time (ms), recorded output tokens, call id,
    and the JSON object itself (``None``: no JSON) for the other readers of
    the record (``tuning.recorded``)."""

    starts: list[int]
    created: list[int | None]
    output: list[int]
    call: list[str | None]
    infos: list[dict[str, Any] | None]


def message_facts(table: pa.Table) -> Facts:
    """Every message's ``Facts``, each ``message_json`` parsed once."""
    starts = message_starts(table)
    n = len(starts)
    created: list[int | None] = [None] * n
    output = [0] * n
    call: list[str | None] = [None] * n
    infos: list[dict[str, Any] | None] = [None] * n
    if "message_json" not in table.column_names or not n:
        return Facts(starts, created, output, call, infos)
    index = pa.array(starts, pa.int64())
    texts = table.column("message_json").take(index).to_pylist()
    roles = plain_strings(table.column("role")).take(index).to_pylist()
    for i, text in enumerate(texts):
        if not text:
            continue
        try:
            info = json.loads(text)
        except ValueError as e:
            raise FormatError(f"message_json is not JSON: {e}", row=starts[i],
                              column="message_json") from None  # fmt: skip
        if not isinstance(info, dict):
            raise FormatError("message_json is not a JSON object", row=starts[i],
                              column="message_json")  # fmt: skip
        infos[i] = info
        time = info.get("time")
        if isinstance(time, dict):
            created[i] = _whole(time.get("created"), starts[i], "time.created")
        elif (source := info.get("source")) is not None:  # Claude Code: the event's time
            created[i] = claude_code_created_ms(source)
        tokens = info.get("tokens")
        if roles[i] in ("assistant", 1) and isinstance(tokens, dict):
            output[i] = _whole(tokens.get("output"), starts[i], "tokens.output") or 0
            if output[i] < 0:
                raise FormatError(f"tokens.output is negative ({output[i]})", row=starts[i],
                                  column="message_json")  # fmt: skip
        source = info.get("source")
        if roles[i] in ("assistant", 1) and source is not None:
            call[i] = claude_code_call_id(source)
    return Facts(starts, created, output, call, infos)


def _whole(value: Any, row: int, key: str) -> int | None:
    """An integer field of a message's JSON, read as the message model reads it."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise FormatError(f"message_json's {key} is not a whole number: {value!r}", row=row,
                      column="message_json")  # fmt: skip


def budget_numbers(config: CompactionConfig, limits: Limits,
                   system: str | None) -> tuple[int | None, int, int | None]:  # fmt: skip
    """(threshold, available, usable): the proactive budget as the live loop
    sees it before any compaction (``CompactionLoop.budget``, no calibrator)."""
    usable = limits.usable(config)
    if not config.auto:
        return None, 0, usable
    system_tokens = estimate_tokens(system or "", config.estimate_method)
    budget = TokenBudget.for_limits(limits, history_tokens=0, system_tokens=system_tokens,
                                    config=config)  # fmt: skip
    if budget is None or budget.context == 0:
        return None, 0, usable
    return budget.threshold_tokens, budget.available, usable


def engine_calls(
    table: pa.Table,
    config: CompactionConfig,
    limits: Limits,
    *,
    summarizer: Summarizer | None,
    system: str | None,
    schema: pa.Schema,
    threads: int | None = None,
    facts: Facts | None = None,
    retention: bool = True,
) -> pa.Table:
    """The per-call table (``schema``: ``CALL_SCHEMA``) of every session of
    ``table``, in table order: the core's calls, the live walk's for the
    sessions it leaves. ``facts``: ``message_facts(table)``, when the caller
    replays the table under several policies. ``retention=False``: no call
    is scored (the as-sent baseline reads the prompts only)."""
    _, created, output, call, _ = facts if facts is not None else message_facts(table)
    method, overhead = config.estimate_method, config.message_overhead
    view = config.policy.scan_options(method=method, overhead=overhead)
    # The policy's prune without a summary, when it acts (config.masks_at()).
    masks_at = config.masks_at()
    mask = {**_prune_options(config), "acts": masks_at} if masks_at else None
    threshold, available, usable = budget_numbers(config, limits, system)
    system_tokens = (
        chat_tokens([{"role": "system", "content": system}], method=method, overhead=overhead)
        if system else 0
    ) + reply_priming(method)  # fmt: skip
    try:
        (ids, calls, rows, prompt, cached, out, base_prompt, base_cached, over, _changed, since,
         _offsets, _cleared, fallback_ids, fallback_calls, removed, kept, lost,
         shown) = _core.replay(
            table, view, mask, created, output, call, system_tokens=system_tokens,
            threshold=threshold, available=available, usable=usable, threads=threads,
            retention=retention, system=system,
        )  # fmt: skip
    except CompactionError as e:
        raise _named(e, table) from None
    n = len(ids)
    message_ids = plain_strings(table.column("message_id")).take(rows)
    if not retention:  # no call scored: every fact shown, none removed
        removed = kept = pa.repeat(pa.scalar(0, pa.int64()), n)
        lost = pa.ListArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n + 1),
                                        pa.array([], pa.string()))  # fmt: skip
        shown = pa.repeat(pa.scalar(1.0), n)
    fallback = fallback_ids.to_pylist()
    sessions: dict[str, Session] = {}
    if fallback:
        sid = plain_strings(table.column("session_id"))
        subset = table.filter(pc.is_in(sid, pa.array(fallback, pa.string())))
        sessions = {s.id: s for s in Transcript(subset).to_sessions()}
    engine = pa.table({
        "session_id": ids.cast(pa.string()),
        "call": calls.cast(pa.int64()),
        "message_id": message_ids,
        "prompt_tokens": prompt.cast(pa.int64()),
        "cached_tokens": cached.cast(pa.int64()),
        "written_tokens": pc.subtract(prompt, cached).cast(pa.int64()),
        "output_tokens": out.cast(pa.int64()),
        "compacted": pa.repeat(pa.scalar(False), n),
        "reason": pa.nulls(n, pa.string()),
        "summary_input_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
        "summary_output_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
        "baseline_prompt_tokens": base_prompt.cast(pa.int64()),
        "baseline_cached_tokens": base_cached.cast(pa.int64()),
        "removed_facts": removed.cast(pa.int64()),
        "kept_facts": kept.cast(pa.int64()),
        "lost": lost,
        "retention": shown,
        "over_window": over,
        "since_previous_s": since,
    }, schema=schema)  # fmt: skip
    if not fallback:
        return engine
    walked: list[dict[str, Any]] = []
    # A summary's sessions: resumed in the core after each summary
    # (``tuning.resume``); a run that compacted itself with a tool part: walked.
    summary = [s for s, at in zip(fallback, fallback_calls.to_pylist(), strict=True) if at >= 0]
    if summary:
        core = {"view": view, "mask": mask, "system_tokens": system_tokens,
                "threshold": threshold, "available": available, "usable": usable,
                "threads": threads}  # fmt: skip
        walked += resume_summaries([sessions[s] for s in summary], config, limits,
                                   summarizer=summarizer, system=system, core=core,
                                   facts=message_facts)  # fmt: skip
    resumed = set(summary)
    for s in fallback:
        if s not in resumed:
            walked += replay_session(sessions[s], config, limits, summarizer=summarizer,
                                     system=system)  # fmt: skip
    both = pa.concat_tables([engine, pa.Table.from_pylist(walked, schema=schema)])
    # Back in table order: sessions as the table holds them, calls in order.
    order = {s: i for i, s in enumerate(_session_order(table))}
    rank = pa.array([order[s] for s in both.column("session_id").to_pylist()], pa.int64())
    indices = pc.sort_indices(pa.table({"s": rank, "c": both.column("call")}),
                              sort_keys=[("s", "ascending"), ("c", "ascending")])  # fmt: skip
    return both.take(indices)


def _named(error: CompactionError, table: pa.Table) -> CompactionError:
    """``error`` about a row (a value the core could not read) made to name
    the row's session and message too, as turning the table into sessions does."""
    row = error.row
    if row is None or error.session_id is not None or not 0 <= row < table.num_rows:
        return error
    sid = table.column("session_id")[row].as_py()
    mid = table.column("message_id")[row].as_py()
    where = ", ".join(f"{label} {json.dumps(value, ensure_ascii=False)}"
                      for label, value in (("session", sid), ("message", mid))
                      if isinstance(value, str))  # fmt: skip
    if where:
        error.args = (str(error).replace(f"(row {row}", f"({where}, row {row}", 1),
                      *error.args[1:])  # fmt: skip
    error.session_id, error.message_id = sid, mid
    return error


def _session_order(table: pa.Table) -> list[str]:
    sid = plain_strings(table.column("session_id"))
    return pc.unique(sid).to_pylist()  # type: ignore[no-any-return]
