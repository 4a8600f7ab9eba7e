"""The pivot filter on hand-built tables, against rows computed by hand.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pyarrow as pa
from ctxcompact.scans import (
    pivot_mask,
)
from tables import (
    PIVOT_MASK,
    chunked,
)


def test_pivot_mask_hand_computed(pivot_table: pa.Table) -> None:
    mask = pivot_mask(pivot_table)
    assert mask.type == pa.bool_()
    assert mask.to_pylist() == PIVOT_MASK


def test_filter_pivot_keeps_rows_from_the_pivot(pivot_table: pa.Table) -> None:
    out = cc.filter_pivot(pivot_table)
    assert isinstance(out, cc.Transcript)
    table = out.to_arrow()
    assert table.schema == pivot_table.schema
    want = pivot_table.filter(pa.array(PIVOT_MASK))
    assert table.num_rows == 19
    assert table.equals(want)
    assert table.column("message_id").to_pylist()[:4] == ["v1-u2", "v1-a2", "v1-u3", "v1-a3"]


def test_filter_pivot_result_is_a_valid_transcript(pivot_table: pa.Table) -> None:
    once = cc.filter_pivot(pivot_table)
    twice = cc.filter_pivot(once)
    assert twice.to_arrow().equals(once.to_arrow())
    assert pivot_mask(once).to_pylist() == [True] * once.num_rows


def test_filter_pivot_preserves_layouts_and_chunks(pivot_table: pa.Table) -> None:
    table = pivot_table.set_column(
        0, "session_id", pivot_table.column("session_id").dictionary_encode()
    )
    table = table.set_column(
        table.schema.get_field_index("output"),
        "output",
        table.column("output").cast(pa.large_string()),
    )
    pieces = chunked(table, [3, 12, 13])
    out = cc.filter_pivot(pieces).to_arrow()
    assert out.schema == table.schema
    assert out.to_pylist() == table.filter(pa.array(PIVOT_MASK)).to_pylist()


def test_system_messages_before_the_pivot_stay_visible() -> None:
    """A stored system message is the agent's instructions, sent at every
    call: the pivot keeps it (in order, ahead of the pivot), as a pinned one,
    on a Session and on a table alike."""

    def msg(mid: str, role: str, kind: str = "text", **info: Any) -> dict[str, Any]:
        part = {"id": f"p{mid}", "type": kind} | ({"text": mid} if kind == "text" else {})
        return {"info": {"id": mid, "role": role, **info}, "parts": [part]}

    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        msg("m0", "system"),
        msg("m1", "user"),
        msg("m2", "assistant", parentID="m1"),
        msg("m3", "user", "compaction"),
        msg("m4", "assistant", parentID="m3", summary=True, finish="stop"),
        msg("m5", "user"),
    ]})  # fmt: skip
    assert [m.id for m in cc.filter_pivot(session).messages] == ["m0", "m3", "m4", "m5"]
    table = cc.Transcript.from_sessions([session]).to_arrow()
    assert pivot_mask(table).to_pylist() == [True, False, False, True, True, True]
    kept = cc.filter_pivot(table).to_arrow().column("message_id").to_pylist()
    assert kept == ["m0", "m3", "m4", "m5"]
    roles = [m["role"] for m in cc.to_model_messages(cc.filter_pivot(session))]
    assert roles[0] == "system"
