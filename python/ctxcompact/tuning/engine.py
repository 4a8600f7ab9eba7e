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
``message_json`` (created time, recorded output, Claude Code call id), and
the retention of the calls whose prompt is not the previous one with the new
messages appended (scored as the live walk scores them, only for those calls).
"""

from __future__ import annotations

import bisect
import json
from typing import Any, NamedTuple

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
from ctxcompact.tuning.resume import resume_summaries
from ctxcompact.tuning.retention import RunRetention, content_text, score_compaction
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
    starts, created, output, call, _ = facts if facts is not None else message_facts(table)
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
        (ids, calls, rows, prompt, cached, out, base_prompt, base_cached, over, changed, since,
         offsets, cleared, fallback_ids, fallback_calls) = _core.replay(
            table, view, mask, created, output, call, system_tokens=system_tokens,
            threshold=threshold, available=available, usable=usable, threads=threads,
        )  # fmt: skip
    except CompactionError as e:
        raise _named(e, table) from None
    n = len(ids)
    message_ids = plain_strings(table.column("message_id")).take(rows)
    changed_at = pc.indices_nonzero(changed) if retention else pa.array([], pa.uint64())
    shown = [1.0] * n  # a session no call changed shows every fact it stated
    fallback = fallback_ids.to_pylist()
    needed = sorted(set(ids.take(changed_at).to_pylist()) | set(fallback))
    sessions: dict[str, Session] = {}
    if needed:
        sid = plain_strings(table.column("session_id"))
        subset = table.filter(pc.is_in(sid, pa.array(needed, pa.string())))
        sessions = {s.id: s for s in Transcript(subset).to_sessions()}
    if len(changed_at):
        scores: list[tuple[int, int, list[str]]] = [(0, 0, [])] * n
        core = {"ids": ids.to_pylist(), "rows": rows.to_pylist(),
                "offsets": offsets.to_pylist(), "cleared": cleared.to_pylist(),
                "changed": changed.to_pylist()}  # fmt: skip
        _score(table, starts, sessions, core, config, system, scores, shown)
        removed = pa.array([r for r, _, _ in scores], pa.int64())
        kept = pa.array([k for _, k, _ in scores], pa.int64())
        lost = pa.array([lost for _, _, lost in scores], pa.list_(pa.string()))
    else:  # nothing removed: no call to score
        removed = kept = pa.repeat(pa.scalar(0, pa.int64()), n)
        lost = pa.ListArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n + 1),
                                        pa.array([], pa.string()))  # fmt: skip
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
        "removed_facts": removed,
        "kept_facts": kept,
        "lost": lost,
        "retention": pa.array(shown, pa.float64()),
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


def _score(table: pa.Table, starts: list[int], sessions: dict[str, Session],
           core: dict[str, list[Any]], config: CompactionConfig, system: str | None,
           scores: list[tuple[int, int, list[str]]], shown: list[float]) -> None:  # fmt: skip
    """Retention of the calls the core says changed what the previous prompt
    held (and only those), into ``scores`` by call, and the comparable
    retention of every call of their sessions into ``shown``: see
    ``_score_session``."""
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
                           config, system, scores, shown)  # fmt: skip
        i = j


def _score_session(session: Session, base: int, starts: list[int], core: dict[str, list[Any]],
                   part_ids: Any, calls: range, config: CompactionConfig, system: str | None,
                   scores: list[tuple[int, int, list[str]]],
                   shown: list[float]) -> None:  # fmt: skip
    """``replay_session``'s retention for the changed calls of one session
    (and the comparable retention of each of its calls, into ``shown``):
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
    facts = RunRetention()
    for c in calls:
        # the call's message among the session's messages replayed
        at = kept_before[bisect.bisect_left(starts, rows[c]) - base]
        # The messages since the previous call as they were appended,
        # before this call's mask.
        appended: list[dict[str, Any]] = []
        for m in messages[last:at]:
            appended += to_model_messages(session.model_copy(update={"messages": [m]}))
        facts.append(appended)
        before = previous + appended if changed[c] else []
        for r in cleared[offsets[c] : offsets[c + 1]]:
            part = parts.get(part_ids[r].as_py() if part_ids is not None else "")
            if part is not None:
                part.mark_compacted(1)
        if not (changed[c] or (c + 1 < calls.stop and changed[c + 1])):
            previous, last, shown[c] = [], at, facts.score
            continue
        prefix = Session(info=session.info, messages=messages[:at])
        sent = to_model_messages(prefix, system=system, policy=config.policy)
        if changed[c]:
            task = task if task is not None else _task(session, messages[:at])
            if common_prefix(before, sent) < len(before):
                result = score_compaction(before, sent, task=task)
                scores[c] = (len(result.removed), result.kept, [f.label() for f in result.lost])
            facts.resend(before, sent)
        previous, last, shown[c] = sent, at, facts.score


def _task(session: Session, messages: list[MessageWithParts]) -> str | None:
    """The run's first request: the first user message's text, as the live walk reads it."""
    for m in messages:
        if isinstance(m.info, UserMessage):
            alone = to_model_messages(session.model_copy(update={"messages": [m]}))
            text = next((content_text(x) for x in alone if x.get("role") == "user"), None)
            if text is not None:
                return text
    return None
