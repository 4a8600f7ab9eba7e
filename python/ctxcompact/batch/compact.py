"""Batch compaction as a pure function over Arrow: the unit every engine runs.

``compact_batch(table)`` takes part rows of whole sessions (docs/schema.md)
and returns one row per session with what compaction does to it; with
``parts=True`` it also returns the compacted part rows (prune marks set,
pivot-filtered), which is what later model calls would read. It is
deterministic for a given ``now_ms``, holds no state between calls, and runs
unchanged inside a Parquet stream, Ray Data's ``map_batches`` or any engine
that hands over Arrow batches.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.config import CompactionConfig
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.parts import estimate_messages, filter_pivot, mark_pruned, prune
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT
from ctxcompact.transcript import Transcript

#: Columns of the per-session report, in order.
REPORT_SCHEMA = pa.schema(
    [
        ("session_id", pa.large_string()),
        ("parts", pa.int64()),
        ("tokens_before", pa.int64()),
        ("tokens_pruned", pa.int64()),
        ("pruned_parts", pa.int64()),
        ("tokens_after_prune", pa.int64()),
        ("tokens_after", pa.int64()),
        ("visible_parts", pa.int64()),
        ("overflow_before", pa.bool_()),
        ("overflow_after", pa.bool_()),
    ]
)


def _per_session(table: pa.Table, config: Any, threads: int | None) -> dict[str, int]:
    sessions = estimate_messages(table, config, threads=threads).sessions
    return dict(zip(sessions["session_id"].to_pylist(), sessions["tokens"].to_pylist()))


def _counts(table: pa.Table) -> dict[str, int]:
    if table.num_rows == 0:
        return {}
    counts = pc.value_counts(table.column("session_id").cast(pa.large_string()))
    return {str(c["values"]): int(c["counts"]) for c in counts.to_pylist()}


def compact_batch(
    data: Any,
    config: CompactionConfig | None = None,
    *,
    now_ms: int | None = None,
    limits: Any = None,
    parts: bool = False,
    model_input: bool = False,
    threads: int | None = None,
) -> pa.Table | tuple[pa.Table, pa.Table]:
    """Estimate, prune, pivot-filter and report every session of ``data``.

    ``data``: a pyarrow Table / RecordBatch (or anything Arrow) of part rows
    holding whole sessions. ``limits``: the model's limits, to flag sessions
    whose history overflows before/after. ``model_input``: add a
    ``model_input`` column with each session's OpenAI chat messages as JSON
    (placeholders applied; this step runs in Python and dominates the cost).
    Returns the report (``REPORT_SCHEMA``), or ``(report, compacted_parts)``
    with ``parts=True``.
    """
    cfg = config or CompactionConfig()
    table = Transcript.from_arrow(data).to_arrow()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    result = prune(table, cfg, threads=threads)
    marked = mark_pruned(table, result, now_ms=now).to_arrow() if len(result) else table
    visible = filter_pivot(marked, threads=threads).to_arrow()
    after_prune = _per_session(marked, cfg, threads)
    after = _per_session(visible, cfg, threads)
    rows, visible_rows = _counts(table), _counts(visible)
    sessions = result.sessions
    ids = [str(s) for s in sessions["session_id"].to_pylist()]
    # Estimates add up part by part, so the history before pruning is the
    # pruned one with each placeholder swapped back for its output: one
    # estimate pass fewer (tests/test_batch.py checks it against a real one).
    placeholder = estimate_tokens(CLEARED_TOOL_OUTPUT, cfg.estimate_method)
    before = {
        sid: after_prune.get(sid, 0) + pruned - parts * placeholder
        for sid, pruned, parts in zip(
            ids, sessions["pruned"].to_pylist(), sessions["parts"].to_pylist()
        )
    }
    usable = None if limits is None else Limits.coerce(limits).usable(cfg)
    columns: dict[str, Any] = {
        "session_id": ids,
        "parts": [rows.get(s, 0) for s in ids],
        "tokens_before": [before.get(s, 0) for s in ids],
        "tokens_pruned": sessions["pruned"].to_pylist(),
        "pruned_parts": sessions["parts"].to_pylist(),
        "tokens_after_prune": [after_prune.get(s, 0) for s in ids],
        "tokens_after": [after.get(s, 0) for s in ids],
        "visible_parts": [visible_rows.get(s, 0) for s in ids],
        "overflow_before": [None if usable is None else before.get(s, 0) > usable for s in ids],
        "overflow_after": [None if usable is None else after.get(s, 0) > usable for s in ids],
    }
    report = pa.table(columns, schema=REPORT_SCHEMA)
    if model_input:
        from ctxcompact.scans.view import to_model_messages

        by_id = {s.id: s for s in Transcript(visible).to_sessions()}
        payload = [
            json.dumps(to_model_messages(by_id[s]), ensure_ascii=False) if s in by_id else "[]"
            for s in ids
        ]
        report = report.append_column("model_input", pa.array(payload, pa.large_string()))
    if parts:
        return report, visible
    return report


__all__ = ["REPORT_SCHEMA", "compact_batch"]
