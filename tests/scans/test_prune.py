"""prune and mark_pruned on hand-built tables, against rows computed by hand.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.errors import ConfigError
from tables import (
    Config,
    build,
    chunked,
    tool,
    user,
    x,
)


def test_prune_selects_hand_computed_rows(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25]
    assert result.part_ids == ["p2", "p1", "q4", "q3", "c3"]
    assert len(result) == 5
    assert result.sessions.column_names == ["session_id", "total", "pruned", "parts"]
    assert result.sessions.to_pydict() == {
        "session_id": ["s1", "s2", "s3", "s4"],
        "total": [26, 40, 20, 0],
        "pruned": [20, 40, 20, 0],
        "parts": [2, 2, 1, 0],
    }
    assert result.total == 86
    assert result.pruned == 80


def test_prune_minimum_is_strict(prune_table: pa.Table) -> None:
    # s1 and s3 free exactly 20 tokens: not more than a minimum of 20.
    result = cc.prune(prune_table, Config(prune_minimum=20))
    assert result.rows.to_pylist() == [18, 17]
    assert result.sessions["pruned"].to_pylist() == [0, 40, 0, 0]
    assert result.sessions["total"].to_pylist() == [26, 40, 20, 0]
    assert result.pruned == 40


def test_prune_protect_is_strict(prune_table: pa.Table) -> None:
    # protect 16: in s1 row 2 brings the total to exactly 16 (kept), row 1 to 26.
    result = cc.prune(prune_table, Config(prune_protect=16))
    assert result.part_ids[:1] == ["p1"]
    assert result.sessions["pruned"].to_pylist()[0] == 10


def test_prune_continue_past_compacted(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config(prune_continue_past_compacted=True))
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25, 23]
    assert result.sessions["total"].to_pylist() == [26, 40, 40, 0]
    assert result.sessions["pruned"].to_pylist() == [20, 40, 40, 0]


def test_prune_protected_tools_and_disabled(prune_table: pa.Table) -> None:
    # Protecting nothing: s1's skill output (100) is counted after the read (6).
    result = cc.prune(prune_table, Config(prune_protected_tools=[]))
    assert result.rows.to_pylist()[:4] == [5, 4, 2, 1]
    assert result.sessions["total"].to_pylist()[0] == 126
    off = cc.prune(prune_table, Config(prune=False))
    assert off.rows.to_pylist() == []
    assert off.part_ids == []
    assert off.total == 0 and off.pruned == 0
    assert off.sessions["session_id"].to_pylist() == ["s1", "s2", "s3", "s4"]


def test_prune_defaults_select_nothing_on_small_outputs(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table)
    assert len(result) == 0
    assert result.sessions["total"].to_pylist() == [26, 40, 20, 0]
    assert result.pruned == 0


def test_prune_method_ceil_bytes() -> None:
    # 5 bytes: opencode round(1.25) = 1, ceil-bytes 2.
    rows = [
        user("s", "u1", "a"),
        tool("s", "a1", "t1", "read", "completed", "xxxxx"),
        tool("s", "a1", "t2", "read", "completed", "xxxxx"),
        user("s", "u2", "b"),
        user("s", "u3", "c"),
    ]
    table = build(rows)
    assert cc.prune(table, Config(prune_protect=0, prune_minimum=0)).total == 2
    result = cc.prune(table, Config(prune_protect=0, prune_minimum=0, estimate_method="ceil-bytes"))
    assert result.total == 4
    assert result.part_ids == ["t2", "t1"]


def test_mark_pruned_sets_only_selected_rows(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    marked = cc.mark_pruned(prune_table, result, now_ms=5_000)
    assert isinstance(marked, cc.Transcript)
    out = marked.to_arrow()
    want = [None] * prune_table.num_rows
    for r in (1, 2, 17, 18, 25):
        want[r] = 5_000
    want[24] = 1_000  # already compacted before
    assert out.column("compacted_at").to_pylist() == want
    assert out.schema == prune_table.schema
    for name in prune_table.column_names:
        if name != "compacted_at":
            assert out.column(name).equals(prune_table.column(name)), name
    # the input table itself is unchanged
    assert prune_table.column("compacted_at").null_count == prune_table.num_rows - 1


def test_second_prune_after_marking_selects_nothing(prune_table: pa.Table) -> None:
    marked = cc.mark_pruned(prune_table, cc.prune(prune_table, Config()), now_ms=5_000)
    again = cc.prune(marked, Config())
    assert again.rows.to_pylist() == []
    assert again.part_ids == []
    # s1 counts a2's read (6), then stops at the compacted row 2.
    assert again.sessions["total"].to_pylist() == [6, 0, 0, 0]
    assert again.pruned == 0


def test_mark_pruned_adds_missing_column_and_keeps_chunks(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    without = prune_table.drop_columns(["compacted_at"])
    out = cc.mark_pruned(without, result, now_ms=7).to_arrow()
    assert out.column("compacted_at").type == pa.int64()
    assert [i for i, v in enumerate(out.column("compacted_at").to_pylist()) if v] == [
        1, 2, 17, 18, 25,
    ]  # fmt: skip
    pieces = chunked(prune_table, [5, 17])
    out = cc.mark_pruned(pieces, result, now_ms=7).to_arrow()
    assert out.column("compacted_at").num_chunks == 3
    assert out.column("compacted_at").to_pylist()[17] == 7


def test_mark_pruned_rejects_bad_timestamp_and_other_table(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    with pytest.raises(ConfigError):
        cc.mark_pruned(prune_table, result, now_ms=0)
    with pytest.raises(ValueError):
        cc.mark_pruned(prune_table.slice(0, 10), result, now_ms=1)


def test_mark_pruned_default_timestamp_is_now(prune_table: pa.Table) -> None:
    import time

    before = int(time.time() * 1000)
    out = cc.mark_pruned(prune_table, cc.prune(prune_table, Config())).to_arrow()
    after = int(time.time() * 1000)
    stamp = out.column("compacted_at").to_pylist()[1]
    assert before <= stamp <= after


def test_the_cores_prune_defaults_are_the_configs() -> None:
    """The native call's own defaults (for direct callers) agree with
    CompactionConfig's, which the facade always passes."""
    from ctxcompact import _core
    from ctxcompact.config import default

    table = build([
        user("s", "u1", "p0"),
        *(tool("s", f"a{i}", f"t{i}", "read", "completed", x(9_000)) for i in range(8)),
        tool("s", "a9", "t9", "skill", "completed", x(9_000)),
        user("s", "u2", "p1"), user("s", "u3", "p2"),
    ])  # fmt: skip
    explicit = default("policy").scan_options(
        method=default("estimate_method"), overhead=default("message_overhead")
    )
    got = [pa.array(a).to_pylist() for a in _core.prune(table)]
    want = [pa.array(a).to_pylist() for a in _core.prune(table, explicit)]
    assert got == want and got[0]  # something is pruned, the same way


def test_output_lengths_counted_once_are_read_instead_of_the_text() -> None:
    import pyarrow.compute as pc
    from ctxcompact.batch.synthetic import generate_table
    from ctxcompact.errors import TranscriptError
    from ctxcompact.scans import estimate_messages, verify_output_units, with_output_units

    table = generate_table(20, 300, seed=4, mean_output_chars=3000)
    counted = with_output_units(table)
    assert counted.to_arrow()["output_utf16"].to_pylist() == [
        0 if o is None else len(o.encode("utf-16-le")) // 2 for o in table["output"].to_pylist()
    ]
    assert cc.prune(counted, verify=True).rows.equals(cc.prune(table).rows)
    assert estimate_messages(counted).total == estimate_messages(table).total
    # A stale column is what the scans read (so they must trust it); verify catches it.
    stale = counted.to_arrow()
    index = stale.schema.get_field_index("output_utf16")
    stale = stale.set_column(index, "output_utf16", pc.multiply(stale["output_utf16"], 3))
    assert cc.prune(stale).pruned > cc.prune(table).pruned
    stale_row = r"output_utf16 of row \d+ is \d+, but its output is \d+ UTF-16 units long"
    with pytest.raises(TranscriptError, match=stale_row):
        verify_output_units(stale)
    with pytest.raises(TranscriptError, match="stale"):
        cc.prune(stale, verify=True)
    # marks keep the column; a negative length is refused with its row
    marked = cc.mark_pruned(counted, cc.prune(counted))
    assert "output_utf16" in marked.to_arrow().column_names
    negative = stale.set_column(index, "output_utf16", pc.negate(stale["output_utf16"]))
    with pytest.raises(TranscriptError, match="output_utf16 of row 0 is negative"):
        cc.prune(negative)
