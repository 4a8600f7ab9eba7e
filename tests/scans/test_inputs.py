"""Every scan on every input shape: polars, chunked tables, layouts, threads.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import polars as pl
import pyarrow as pa
import pytest
from ctxcompact.scans import (
    pivot_mask,
)
from tables import (
    PIVOT_MASK,
    Config,
    build,
    chunked,
    estimate_rows,
    pivot_rows,
    prune_rows,
)


def all_rows() -> list[dict]:
    return prune_rows() + pivot_rows() + estimate_rows()


def outcomes(data: Any, threads: int | None = None) -> tuple:
    result = cc.prune(data, Config(), threads=threads)
    est = cc.estimate_messages(data, threads=threads)
    filtered = cc.filter_pivot(data, threads=threads).to_arrow()
    return (
        result.rows.to_pylist(),
        result.part_ids,
        result.sessions.to_pylist(),
        pivot_mask(data, threads=threads).to_pylist(),
        filtered.num_rows,
        filtered.column("part_id").to_pylist(),
        est.messages.to_pylist(),
        est.sessions.to_pylist(),
    )


def test_multiple_sessions_at_once(all_table: pa.Table) -> None:
    result = cc.prune(all_table, Config())
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25]
    sessions = result.sessions["session_id"].to_pylist()
    assert sessions == ["s1", "s2", "s3", "s4", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
                        "e1", "e2", "e3"]  # fmt: skip
    n = len(prune_rows())
    assert pivot_mask(all_table).to_pylist()[n : n + len(PIVOT_MASK)] == PIVOT_MASK
    est = cc.estimate_messages(all_table)
    assert est.messages["tokens"].to_pylist()[-4:] == [12, 57, 0, 5]


def test_polars_input_matches_pyarrow(all_table: pa.Table) -> None:
    frame = pl.from_arrow(all_table)
    assert isinstance(frame, pl.DataFrame)
    assert pa.table(frame).schema.field("session_id").type == pa.string_view()
    assert outcomes(frame) == outcomes(all_table)


def test_chunked_input_matches_plain(all_table: pa.Table) -> None:
    pieces = chunked(all_table, [1, 2, 14, 15, 40, 41, 60])
    assert pieces.column("session_id").num_chunks == 8
    assert outcomes(pieces) == outcomes(all_table)


def test_dictionary_and_int8_layouts_match_plain(all_table: pa.Table) -> None:
    codes = {
        "role": {"user": 0, "assistant": 1, "system": 2, "tool": 3},
        "status": {"pending": 0, "running": 1, "completed": 2, "error": 3},
        "part_type": {"text": 0, "tool": 1, "compaction": 2, "reasoning": 4, "step-start": 5},
    }
    table = all_table
    for name, mapping in codes.items():
        values = [None if v is None else mapping[v] for v in table.column(name).to_pylist()]
        table = table.set_column(
            table.schema.get_field_index(name), name, pa.array(values, pa.int8())
        )
    for name in ("session_id", "message_id", "tool"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).dictionary_encode())
    for name in ("output", "input"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).cast(pa.large_string()))
    assert outcomes(table) == outcomes(all_table)
    assert outcomes(chunked(table, [3, 30])) == outcomes(all_table)


def test_threads_give_identical_results(all_table: pa.Table) -> None:
    assert outcomes(all_table, threads=1) == outcomes(all_table, threads=2)
    assert outcomes(all_table, threads=1) == outcomes(all_table)


def test_transcript_input(all_table: pa.Table) -> None:
    transcript = cc.Transcript.from_arrow(all_table)
    assert outcomes(transcript) == outcomes(all_table)
    assert cc.mark_pruned(transcript, cc.prune(transcript, Config()), now_ms=1).num_rows == (
        all_table.num_rows
    )


def test_mark_pruned_on_polars_frame(prune_table: pa.Table) -> None:
    frame = pl.from_arrow(prune_table)
    result = cc.prune(frame, Config())
    out = cc.mark_pruned(frame, result, now_ms=9).to_arrow()
    marked = [i for i, v in enumerate(out.column("compacted_at").to_pylist()) if v == 9]
    assert marked == [1, 2, 17, 18, 25]
    assert out.column("output").to_pylist() == prune_table.column("output").to_pylist()


@pytest.fixture
def all_table() -> pa.Table:
    return build(all_rows())
