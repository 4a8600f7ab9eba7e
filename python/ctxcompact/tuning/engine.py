"""Replay in the engine (``_core.replay``): the per-call table of
``tuning.replay`` worked out over the part table, the sessions in parallel.

The first step of issue 38's part 3. The core walks each session call by
call, masking as the live loop does (``mask_first``), and keeps every
message's estimate, re-estimating only what a mask or the ``keep_thinking``
window changes; a run's own summaries and markers are left out and its
stored prune marks ignored, as the live walk does. It leaves two kinds of
session to the live walk (``replay_session``), whole: one where the loop
would write a proactive summary (the core stops there and says so), and a
run whose own summary or marker holds a tool part (no reader writes one).
Python adds what the core does not know: each message's facts from its
``message_json`` (created time, recorded output, Claude Code call id), and
the retention of the calls whose prompt is not the previous one with the new
messages appended (scored as the live walk scores them, only for those calls).
"""

from __future__ import annotations

import bisect
import json
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionError, FormatError
from ctxcompact.estimators import reply_priming
from ctxcompact.formats.source import claude_code_call_id
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import MessageWithParts, Session, UserMessage
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import Limits, TokenBudget
from ctxcompact.scans.parts import _prune_options
from ctxcompact.scans.view import to_model_messages
from ctxcompact.transcript import Transcript
from ctxcompact.tuning.retention import content_text, score_compaction
from ctxcompact.tuning.walk import (
    common_prefix,
    is_original_compaction,
    replay_session,
    without_prune_marks,
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


#: Every message's first row, created time, recorded output and call id.
Facts = tuple[list[int], list[int | None], list[int], list[str | None]]


def message_facts(table: pa.Table) -> Facts:
    """Per message (``message_starts``): its first row, created time (ms),
    recorded output tokens and call id, read from its ``message_json``."""
    starts = message_starts(table)
    n = len(starts)
    created: list[int | None] = [None] * n
    output = [0] * n
    call: list[str | None] = [None] * n
    if "message_json" not in table.column_names or not n:
        return starts, created, output, call
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
        time = info.get("time")
        if isinstance(time, dict):
            created[i] = _whole(time.get("created"), starts[i], "time.created")
        tokens = info.get("tokens")
        if roles[i] in ("assistant", 1) and isinstance(tokens, dict):
            output[i] = _whole(tokens.get("output"), starts[i], "tokens.output") or 0
            if output[i] < 0:
                raise FormatError(f"tokens.output is negative ({output[i]})", row=starts[i],
                                  column="message_json")  # fmt: skip
        source = info.get("source")
        if roles[i] in ("assistant", 1) and source is not None:
            call[i] = claude_code_call_id(source)
    return starts, created, output, call


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
    cache_ttl_s: float | None = None,
    threads: int | None = None,
    facts: Facts | None = None,
) -> pa.Table:
    """The per-call table (``schema``: ``CALL_SCHEMA``) of every session of
    ``table``, in table order: the core's calls, the live walk's for the
    sessions it leaves. ``facts``: ``message_facts(table)``, when the caller
    replays the table under several policies."""
    starts, created, output, call = facts if facts is not None else message_facts(table)
    method, overhead = config.estimate_method, config.message_overhead
    view = config.policy.scan_options(method=method, overhead=overhead)
    mask = _prune_options(config) if config.mask_first and config.prune else None
    threshold, available, usable = budget_numbers(config, limits, system)
    system_tokens = (
        chat_tokens([{"role": "system", "content": system}], method=method, overhead=overhead)
        if system else 0
    ) + reply_priming(method)  # fmt: skip
    try:
        (ids, calls, rows, prompt, cached, out, base_prompt, base_cached, over, changed, offsets,
         cleared, fallback_ids, _fallback_calls) = _core.replay(
            table, view, mask, created, output, call, system_tokens=system_tokens,
            threshold=threshold, available=available, usable=usable,
            cache_ttl_s=math.inf if cache_ttl_s is None else float(cache_ttl_s),
            threads=threads,
        )  # fmt: skip
    except CompactionError as e:
        raise _named(e, table) from None
    n = len(ids)
    message_ids = plain_strings(table.column("message_id")).take(rows)
    scores: list[tuple[int, int, list[str]]] = [(0, 0, [])] * n
    changed_at = pc.indices_nonzero(changed).to_pylist()
    fallback = fallback_ids.to_pylist()
    core = {"ids": ids.to_pylist(), "rows": rows.to_pylist(), "offsets": offsets.to_pylist(),
            "cleared": cleared.to_pylist(), "changed": changed.to_pylist()}  # fmt: skip
    needed = sorted({core["ids"][i] for i in changed_at} | set(fallback))
    sessions: dict[str, Session] = {}
    if needed:
        sid = plain_strings(table.column("session_id"))
        subset = table.filter(pc.is_in(sid, pa.array(needed, pa.string())))
        sessions = {s.id: s for s in Transcript(subset).to_sessions()}
    if changed_at:
        _score(table, starts, sessions, core, config, system, scores)
    engine = pa.table({
        "session_id": ids.cast(pa.string()),
        "call": calls.cast(pa.int64()),
        "message_id": message_ids,
        "prompt_tokens": prompt.cast(pa.int64()),
        "cached_tokens": cached.cast(pa.int64()),
        "written_tokens": pc.subtract(prompt, cached).cast(pa.int64()),
        "output_tokens": out.cast(pa.int64()),
        "compacted": pa.array([False] * n),
        "reason": pa.nulls(n, pa.string()),
        "summary_input_tokens": pa.array([0] * n, pa.int64()),
        "summary_output_tokens": pa.array([0] * n, pa.int64()),
        "baseline_prompt_tokens": base_prompt.cast(pa.int64()),
        "baseline_cached_tokens": base_cached.cast(pa.int64()),
        "removed_facts": pa.array([r for r, _, _ in scores], pa.int64()),
        "kept_facts": pa.array([k for _, k, _ in scores], pa.int64()),
        "lost": pa.array([lost for _, _, lost in scores], pa.list_(pa.string())),
        "over_window": over,
        "since_previous_s": _since_previous(ids.to_pylist(), rows.to_pylist(), starts, created),
    }, schema=schema)  # fmt: skip
    if not fallback:
        return engine
    walked: list[dict[str, Any]] = []
    for s in fallback:
        walked += replay_session(sessions[s], config, limits, summarizer=summarizer,
                                 system=system, cache_ttl_s=cache_ttl_s)  # fmt: skip
    both = pa.concat_tables([engine, pa.Table.from_pylist(walked, schema=schema)])
    # Back in table order: sessions as the table holds them, calls in order.
    order = {s: i for i, s in enumerate(_session_order(table))}
    rank = pa.array([order[s] for s in both.column("session_id").to_pylist()], pa.int64())
    indices = pc.sort_indices(pa.table({"s": rank, "c": both.column("call")}),
                              sort_keys=[("s", "ascending"), ("c", "ascending")])  # fmt: skip
    return both.take(indices)


def _since_previous(ids: list[str], rows: list[int], starts: list[int],
                    created: list[int | None]) -> pa.Array:  # fmt: skip
    """Per call, the seconds since the session's previous call with a created
    time (null without one), as ``replay_session`` reports them."""
    at = dict(zip(starts, created, strict=True))
    out: list[float | None] = []
    session, last = None, None
    for sid, row in zip(ids, rows, strict=True):
        if sid != session:
            session, last = sid, None
        now = at.get(row)
        out.append((now - last) / 1000 if now is not None and last is not None else None)
        last = now if now is not None else last
    return pa.array(out, pa.float64())


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


def _score(table: pa.Table, starts: list[int], sessions: dict[str, Session],
           core: dict[str, list[Any]], config: CompactionConfig, system: str | None,
           scores: list[tuple[int, int, list[str]]]) -> None:  # fmt: skip
    """Retention of the calls the core says changed what the previous prompt
    held (and only those), into ``scores`` by call: see ``_score_session``."""
    part_ids = table.column("part_id") if "part_id" in table.column_names else None
    # Each session's first message (its index among every message's first row).
    first: dict[str, int] = {}
    at_starts = plain_strings(table.column("session_id")).take(pa.array(starts, pa.int64()))
    for k, sid in enumerate(at_starts.to_pylist()):
        first.setdefault(sid, k)
    ids, changed = core["ids"], core["changed"]
    i, n = 0, len(ids)
    while i < n:
        j = i
        while j < n and ids[j] == ids[i]:
            j += 1
        if any(changed[i:j]):
            _score_session(sessions[ids[i]], first[ids[i]], starts, core, part_ids, range(i, j),
                           config, system, scores)  # fmt: skip
        i = j


def _score_session(session: Session, base: int, starts: list[int], core: dict[str, list[Any]],
                   part_ids: Any, calls: range, config: CompactionConfig, system: str | None,
                   scores: list[tuple[int, int, list[str]]]) -> None:  # fmt: skip
    """``replay_session``'s retention for the changed calls of one session:
    the previous prompt and the messages since as they were appended, against
    this prompt, each rendered with the marks the core made up to its call."""
    # The run's own summaries and markers are left out, as the core leaves them.
    kept_before = [0]
    for m in session.messages:
        kept_before.append(kept_before[-1] + (not is_original_compaction(m)))
    messages = [without_prune_marks(m) for m in session.messages
                if not is_original_compaction(m)]  # fmt: skip
    parts = {p.id: p for m in messages for p in m.parts}
    rows, offsets, cleared, changed = (
        core["rows"],
        core["offsets"],
        core["cleared"],
        core["changed"],
    )
    previous: list[dict[str, Any]] = []
    last = 0  # messages in the previous prompt
    task: str | None = None
    for c in calls:
        # the call's message among the session's messages replayed
        at = kept_before[bisect.bisect_left(starts, rows[c]) - base]
        before: list[dict[str, Any]] = []
        if changed[c]:
            # The messages since the previous call as they were appended,
            # before this call's mask.
            before = list(previous)
            for m in messages[last:at]:
                before += to_model_messages(session.model_copy(update={"messages": [m]}))
        for r in cleared[offsets[c] : offsets[c + 1]]:
            part = parts.get(part_ids[r].as_py() if part_ids is not None else "")
            if part is not None:
                part.mark_compacted(1)
        if not (changed[c] or (c + 1 < calls.stop and changed[c + 1])):
            previous, last = [], at
            continue
        prefix = Session(info=session.info, messages=messages[:at])
        sent = to_model_messages(prefix, system=system, policy=config.policy)
        if changed[c]:
            task = task if task is not None else _task(session, messages[:at])
            if common_prefix(before, sent) < len(before):
                result = score_compaction(before, sent, task=task)
                scores[c] = (len(result.removed), result.kept, [f.label() for f in result.lost])
        previous, last = sent, at


def _task(session: Session, messages: list[MessageWithParts]) -> str | None:
    """The run's first request: the first user message's text, as the live walk reads it."""
    for m in messages:
        if isinstance(m.info, UserMessage):
            alone = to_model_messages(session.model_copy(update={"messages": [m]}))
            text = next((content_text(x) for x in alone if x.get("role") == "user"), None)
            if text is not None:
                return text
    return None
