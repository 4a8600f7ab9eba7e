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

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.scans.parts import compact_pass
from ctxcompact.transcript import Transcript
from ctxcompact.transcript.schema import typed_columns

#: Columns of the per-session report, in order. ``tokens_before`` /
#: ``tokens_after_prune`` / ``tokens_after``: the estimated model input as the
#: policy sends it (its placeholder, cut outputs, kept reasoning) before the
#: prune, after it, and after it from the pivot on (pinned messages included).
#: ``tokens_pruned``: the estimate of the cleared outputs in full, the measure
#: the policy's ``minimum`` / ``clear_at_least`` compare against; so
#: ``before - after_prune`` is less than it by the placeholders' cost (and by
#: what ``truncate_output`` had already cut).
REPORT_SCHEMA = pa.schema([
    ("session_id", pa.large_string()),
    *typed_columns(pa.int64(), "parts", "tokens_before", "tokens_pruned", "pruned_parts",
                   "tokens_after_prune", "tokens_after", "visible_parts"),
    *typed_columns(pa.bool_(), "overflow_before", "overflow_after"),
])  # fmt: skip


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
    whose history overflows before/after (a ``ConfigError`` when they leave no
    input window after the output reserve, as the ``Compactor`` says). ``model_input``: add a
    ``model_input`` column with each session's OpenAI chat messages as JSON
    (placeholders applied; this step runs in Python and dominates the cost).
    Returns the report (``REPORT_SCHEMA``), or ``(report, compacted_parts)``
    with ``parts=True``.
    """
    cfg = config or CompactionConfig()
    # a window with no input room would flag every session (the Compactor's refusal)
    window = None if limits is None else check_window(Limits.coerce(limits), cfg)
    table = Transcript.from_arrow(data).to_arrow()
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    if now <= 0:
        # 0 would read as "not compacted" (OpenCode tests the timestamp's
        # truthiness); refused whether or not this batch marks anything.
        raise ConfigError(f"now_ms must be a positive millisecond timestamp, got {now_ms}")
    # One native pass: prune, mark, pivot and both estimates over one table view.
    found = compact_pass(table, cfg, now_ms=now if parts or model_input else None,
                         threads=threads)  # fmt: skip
    ids, pruned, pruned_parts = found.session_ids, found.pruned, found.pruned_parts
    after_prune, after = found.tokens_after_prune, found.tokens_after
    before = found.tokens_before
    usable = None if window is None else window.usable(cfg)
    columns = {
        "session_id": ids,
        "parts": found.parts,
        "tokens_before": before,
        "tokens_pruned": pruned,
        "pruned_parts": pruned_parts,
        "tokens_after_prune": after_prune,
        "tokens_after": after,
        "visible_parts": found.visible_parts,
        "overflow_before": [None if usable is None else b > usable for b in before],
        "overflow_after": [None if usable is None else a > usable for a in after],
    }
    report = pa.table(columns, schema=REPORT_SCHEMA)
    if not (parts or model_input):
        return report
    marked = table
    if len(found.rows):
        marked = Transcript(table).with_column("compacted_at", found.marked).to_arrow()
    pieces = [marked.slice(start, n) for start, n in found.visible]
    visible = pa.concat_tables(pieces) if pieces else marked.slice(0, 0)
    if model_input:
        from ctxcompact.scans.view import to_model_messages

        by_id = {s.id: s for s in Transcript(visible).to_sessions()}
        payload = [
            json.dumps(to_model_messages(by_id[s], policy=cfg.policy), ensure_ascii=False)
            if s in by_id
            else "[]"
            for s in ids
        ]
        report = report.append_column("model_input", pa.array(payload, pa.large_string()))
    if parts:
        return report, visible
    return report


__all__ = ["REPORT_SCHEMA", "compact_batch"]
