"""Bad input gets a typed, specific error saying where, never a panic.

Every error is checked for its class and its location attributes (``row``,
``column``, ``session_id``, ``message_id``), and no pyo3 ``PanicException``
(nor an ``InternalError``, a panic caught at the boundary) may escape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ctxcompact as cc
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from ctxcompact.errors import (
    ColumnTypeError,
    ConfigError,
    DatasetError,
    InconsistentMessageError,
    InputTypeError,
    InternalError,
    MissingColumnError,
    NonContiguousError,
    NullValueError,
    SchemaError,
    TranscriptError,
    UnknownValueError,
)
from ctxcompact.scans import PruneResult, count_tokens_array, estimate_tokens_array, pivot_mask
from ctxcompact.transcript import SCAN_COLUMNS, SCHEMA

# Scan columns as plain strings (the builder below picks other layouts on purpose).
COLUMNS: dict[str, pa.DataType] = {
    f.name: pa.string() if pa.types.is_large_string(f.type) else f.type
    for f in SCHEMA
    if f.name in SCAN_COLUMNS
}


def row(sid: str | None, mid: str | None, role: str | None, ptype: str | None, **kw: Any) -> dict:
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(
        session_id=sid, message_id=mid, role=role, part_type=ptype, part_id=kw.pop("pid", None)
    )
    r.update(kw)
    return r


def text(sid: str | None, mid: str | None, role: str | None = "user", out: str = "hi") -> dict:
    return row(sid, mid, role, "text", pid=f"{sid}-{mid}-{out}", output=out)


def tool(sid: str, mid: str, status: str | None, out: str | None = "x" * 40) -> dict:
    return row(sid, mid, "assistant", "tool", pid=f"{mid}-t", tool="read", status=status,
               output=out)  # fmt: skip


def build(rows: list[dict], **types: pa.DataType) -> pa.Table:
    return pa.table(
        {
            name: pa.array([r[name] for r in rows], types.get(name, typ))
            for name, typ in COLUMNS.items()
        }
    )


def replace(table: pa.Table, name: str, values: Any) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def good_rows() -> list[dict]:
    return [
        text("s1", "u1"),
        tool("s1", "a1", "completed"),
        text("s1", "u2"),
        text("s1", "u3"),
        text("s2", "u1"),
    ]


def prune(data: Any, **kw: Any) -> Any:
    return cc.prune(data, **kw)


def pivot(data: Any, **kw: Any) -> Any:
    return cc.filter_pivot(data, **kw)


def mask(data: Any, **kw: Any) -> Any:
    return pivot_mask(data, **kw)


def estimate(data: Any, **kw: Any) -> Any:
    return cc.estimate_messages(data, **kw)


ALL_SCANS: list[Callable[..., Any]] = [prune, pivot, mask, estimate]
SCAN_IDS = ["prune", "filter_pivot", "pivot_mask", "estimate_messages"]


def expect(cls: type[BaseException], fn: Callable[[], Any]) -> Any:
    """Run ``fn``; it must raise ``cls`` and nothing that signals a crash."""
    try:
        fn()
    except BaseException as e:  # PanicException is a BaseException
        assert type(e).__name__ != "PanicException", f"panic escaped: {e!r}"
        assert not isinstance(e, InternalError), f"internal error: {e!r}"
        assert isinstance(e, cls), f"expected {cls.__name__}, got {type(e).__name__}: {e}"
        return e
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")


def no_crash(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; it must return normally."""
    try:
        return fn()
    except BaseException as e:
        assert type(e).__name__ != "PanicException", f"panic escaped: {e!r}"
        raise


def where(e: Any) -> tuple:
    return (e.session_id, e.message_id, e.row, e.column)


def test_good_rows_are_accepted_by_every_scan() -> None:
    table = build(good_rows())
    for scan in ALL_SCANS:
        no_crash(lambda scan=scan: scan(table))


# --- shape: missing and mistyped columns -----------------------------------------------


@pytest.mark.parametrize(
    ("scan", "column"),
    [
        (prune, "status"),
        (prune, "compacted_at"),
        (prune, "summary"),
        (prune, "session_id"),
        (prune, "part_type"),
        (pivot, "parent_id"),
        (pivot, "finished"),
        (mask, "error"),
        (mask, "message_id"),
        (estimate, "input"),
        (estimate, "role"),
    ],
)
def test_missing_column(scan: Callable[..., Any], column: str) -> None:
    table = build(good_rows()).drop_columns([column])
    e = expect(MissingColumnError, lambda: scan(table))
    assert isinstance(e, cc.CompactionError)
    assert isinstance(e, SchemaError)
    assert isinstance(e, KeyError)
    assert e.column == column
    assert where(e) == (None, None, None, column)
    assert column in str(e)


def test_columns_a_scan_does_not_need_may_be_absent() -> None:
    table = build(good_rows()).drop_columns(["input", "auto", "part_id", "parent_id"])
    assert no_crash(lambda: cc.prune(table)).part_ids == []
    minimal = build(good_rows()).select(
        ["session_id", "message_id", "role", "part_type", "parent_id", "summary", "finished",
         "error"]
    )  # fmt: skip
    assert no_crash(lambda: pivot_mask(minimal)).to_pylist() == [True] * 5


@pytest.mark.parametrize(
    ("scan", "column", "values"),
    [
        (prune, "role", pa.array([1.0, 1.0, 0.0, 0.0, 0.0])),
        (pivot, "role", pa.array([0, 1, 0, 0, 0], pa.int64())),
        (mask, "part_type", pa.array([0, 1, 0, 0, 0], pa.int16())),
        (prune, "compacted_at", pa.array(["", "", "", "", ""])),
        (estimate, "compacted_at", pa.array([1.5] * 5)),
        (prune, "session_id", pa.array([1, 1, 1, 1, 2])),
        (pivot, "message_id", pa.array([1, 2, 3, 4, 5])),
        (pivot, "summary", pa.array([0, 0, 0, 0, 0])),
        (prune, "output", pa.array([b"x"] * 5, pa.binary())),
        (estimate, "tool", pa.array([1] * 5)),
        (prune, "status", pa.array([True] * 5)),
    ],
)
def test_column_of_wrong_type(scan: Callable[..., Any], column: str, values: pa.Array) -> None:
    table = replace(build(good_rows()), column, values)
    e = expect(ColumnTypeError, lambda: scan(table))
    assert isinstance(e, SchemaError)
    assert isinstance(e, TypeError)
    assert where(e) == (None, None, None, column)


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_missing_column_on_empty_table(scan: Callable[..., Any]) -> None:
    # A 0-row table still has a schema: a missing column is an error whatever
    # the number of rows (docs/schema.md: "A missing column raises MissingColumnError").
    empty = build([]).drop_columns(["role"])
    e = expect(MissingColumnError, lambda: scan(empty))
    assert e.column == "role"


def test_missing_session_id_on_empty_table() -> None:
    empty = build([]).drop_columns(["session_id"])
    e = expect(MissingColumnError, lambda: cc.prune(empty))
    assert e.column == "session_id"


def test_mistyped_column_on_empty_table() -> None:
    bad = replace(build([]), "role", pa.array([], pa.float64()))
    e = expect(ColumnTypeError, lambda: cc.prune(bad))
    assert e.column == "role"


# --- content: ordering rules -----------------------------------------------------------


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_session_rows_not_contiguous(scan: Callable[..., Any]) -> None:
    rows = [text("s1", "u1"), text("s2", "u1"), text("s2", "u2"), text("s1", "u2")]
    e = expect(NonContiguousError, lambda: scan(build(rows)))
    assert isinstance(e, TranscriptError)
    assert isinstance(e, ValueError)
    assert e.session_id == "s1"
    assert e.row == 3
    assert e.column == "session_id"


@pytest.mark.parametrize("layout", ["plain", "dictionary", "chunked", "polars"])
def test_session_rows_not_contiguous_any_layout(layout: str) -> None:
    rows = [text("a", "m1"), text("b", "m1"), tool("b", "m2", "completed"), text("a", "m3")]
    table: Any = build(rows)
    if layout == "dictionary":
        table = replace(table, "session_id", table.column("session_id").dictionary_encode())
    elif layout == "chunked":
        table = pa.concat_tables([table.slice(0, 1), table.slice(1, 2), table.slice(3)])
    elif layout == "polars":
        table = pl.from_arrow(table)
    e = expect(NonContiguousError, lambda: cc.prune(table))
    assert (e.session_id, e.row, e.column) == ("a", 3, "session_id")


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_message_rows_not_contiguous(scan: Callable[..., Any]) -> None:
    rows = [
        text("s0", "only"),
        text("s1", "u1", out="a"),
        text("s1", "u2", out="b"),
        text("s1", "u1", out="c"),
    ]
    e = expect(NonContiguousError, lambda: scan(build(rows)))
    assert where(e) == ("s1", "u1", 3, "message_id")


def test_same_message_id_in_two_sessions_is_fine() -> None:
    rows = [text("s1", "u1"), text("s2", "u1"), text("s3", "u1")]
    assert no_crash(lambda: pivot_mask(build(rows))).to_pylist() == [True] * 3


# --- content: nulls --------------------------------------------------------------------


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_null_session_id(scan: Callable[..., Any]) -> None:
    rows = [text("s1", "u1"), text("s1", "u2"), text(None, "u3")]
    e = expect(NullValueError, lambda: scan(build(rows)))
    assert isinstance(e, TranscriptError)
    assert where(e) == (None, None, 2, "session_id")


def test_null_session_id_in_dictionary_column() -> None:
    rows = [text("s1", "u1"), text(None, "u2")]
    table = build(rows)
    table = replace(table, "session_id", table.column("session_id").dictionary_encode())
    e = expect(NullValueError, lambda: cc.prune(table))
    assert (e.row, e.column) == (1, "session_id")


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_null_message_id_in_multi_row_session(scan: Callable[..., Any]) -> None:
    rows = [text("s0", "m"), text("s1", "u1"), text("s1", None), text("s1", "u3")]
    e = expect(NullValueError, lambda: scan(build(rows)))
    assert where(e) == ("s1", None, 2, "message_id")


def test_null_message_id_alone_is_an_empty_session() -> None:
    rows = [row("s1", None, None, None), text("s2", "u1")]
    est = no_crash(lambda: cc.estimate_messages(build(rows)))
    assert est.messages["message_id"].to_pylist() == ["u1"]


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_null_role_of_a_message(scan: Callable[..., Any]) -> None:
    rows = [text("s1", "u1"), text("s1", "a1", role=None)]
    e = expect(NullValueError, lambda: scan(build(rows)))
    assert where(e) == ("s1", "a1", 1, "role")


def null_status_rows() -> list[dict[str, Any]]:
    """A session whose second tool part has a null status."""
    return [
        text("s1", "u1"),
        tool("s1", "a1", "completed"),
        tool("s1", "a2", None),
        text("s1", "u2"),
        text("s1", "u3"),
    ]


def test_tool_part_with_null_status_during_prune() -> None:
    table = build(null_status_rows())
    e = expect(NullValueError, lambda: cc.prune(table))
    assert where(e) == ("s1", "a2", 2, "status")
    # the other scans do not require a status: a null one reads as interrupted
    est = no_crash(lambda: cc.estimate_messages(table))
    # call 4 + "read" (1) + "{}" (1); result 4 + "[Tool execution was interrupted]" (8)
    assert est.messages["tokens"].to_pylist()[2] == 18


# --- content: unknown values and inconsistent messages --------------------------------


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_unknown_role_string(scan: Callable[..., Any]) -> None:
    rows = [text("s1", "u1"), text("s1", "m2", role="robot")]
    e = expect(UnknownValueError, lambda: scan(build(rows)))
    assert isinstance(e, TranscriptError)
    assert (e.row, e.column) == (1, "role")
    assert "robot" in str(e)


def test_unknown_role_in_dictionary() -> None:
    rows = [text("s1", "u1"), text("s1", "m2", role="User")]
    table = build(rows)
    table = replace(table, "role", table.column("role").dictionary_encode())
    e = expect(UnknownValueError, lambda: pivot_mask(table))
    assert (e.row, e.column) == (1, "role")


@pytest.mark.parametrize("code", [4, -1, 127])
def test_role_int8_code_out_of_range(code: int) -> None:
    table = build([text("s1", "u1"), text("s1", "u2")])
    table = replace(table, "role", pa.array([0, code], pa.int8()))
    for scan in ALL_SCANS:
        e = expect(UnknownValueError, lambda scan=scan: scan(table))
        assert (e.row, e.column) == (1, "role")
        assert str(code) in str(e)


def test_role_int8_codes_in_range() -> None:
    table = build([text("s1", "u1"), text("s1", "a1"), text("s1", "y"), text("s1", "t")])
    table = replace(table, "role", pa.array([0, 1, 2, 3], pa.int8()))
    assert no_crash(lambda: cc.estimate_messages(table)).messages.num_rows == 4


@pytest.mark.parametrize(("code", "ok"), [(11, True), (127, True), (12, False), (-1, False)])
def test_part_type_int8_codes(code: int, ok: bool) -> None:
    table = build([text("s1", "u1"), text("s1", "u2")])
    table = replace(table, "part_type", pa.array([0, code], pa.int8()))
    if ok:
        assert no_crash(lambda: pivot_mask(table)).to_pylist() == [True, True]
    else:
        e = expect(UnknownValueError, lambda: pivot_mask(table))
        assert (e.row, e.column) == (1, "part_type")


def test_unknown_part_type_string_is_accepted_as_other() -> None:
    rows = [text("s1", "u1"), row("s1", "u1", "user", "hologram", pid="h", output="x" * 400)]
    est = no_crash(lambda: cc.estimate_messages(build(rows)))
    assert est.messages["tokens"].to_pylist() == [5]  # 4 + "hi" (1); "other" parts count 0


@pytest.mark.parametrize("status", ["done", "COMPLETED"])
def test_unknown_status_string(status: str) -> None:
    rows = [text("s1", "u1"), tool("s1", "a1", status)]
    e = expect(UnknownValueError, lambda: cc.prune(build(rows)))
    assert (e.row, e.column) == (1, "status")


def test_status_int8_out_of_range() -> None:
    table = build([text("s1", "u1"), tool("s1", "a1", "completed")])
    table = replace(table, "status", pa.array([None, 4], pa.int8()))
    e = expect(UnknownValueError, lambda: cc.estimate_messages(table))
    assert (e.row, e.column) == (1, "status")


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
def test_inconsistent_role_within_message(scan: Callable[..., Any]) -> None:
    rows = [
        text("s1", "u1"),
        text("s1", "m2", role="assistant", out="a"),
        text("s1", "m2", role="assistant", out="b"),
        text("s1", "m2", role="user", out="c"),
    ]
    e = expect(InconsistentMessageError, lambda: scan(build(rows)))
    assert isinstance(e, TranscriptError)
    assert where(e) == ("s1", "m2", 3, "role")


# --- configuration ---------------------------------------------------------------------


class BadMethod:
    estimate_method = "tiktoken"


@pytest.mark.parametrize(
    "call",
    [
        lambda t: cc.estimate_tokens("abc", "tiktoken"),  # type: ignore[arg-type]
        lambda t: cc.estimate_tokens("abc", ""),  # type: ignore[arg-type]
        lambda t: estimate_tokens_array(pa.array(["a"]), "words"),  # type: ignore[arg-type]
        lambda t: cc.prune(t, BadMethod()),
        lambda t: cc.estimate_messages(t, BadMethod()),
    ],
)
def test_unknown_estimate_method(call: Callable[[pa.Table], Any]) -> None:
    e = expect(ConfigError, lambda: call(build(good_rows())))
    assert isinstance(e, ValueError)
    assert where(e) == (None, None, None, None)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: cc.prune(t, threads=0),
        lambda t: cc.filter_pivot(t, threads=0),
        lambda t: pivot_mask(t, threads=0),
        lambda t: cc.estimate_messages(t, threads=0),
        lambda t: estimate_tokens_array(pa.array(["a"]), threads=0),
    ],
)
def test_zero_threads(call: Callable[[pa.Table], Any]) -> None:
    e = expect(ConfigError, lambda: call(build(good_rows())))
    assert "thread" in str(e)


def test_estimate_array_of_non_strings() -> None:
    e = expect(ColumnTypeError, lambda: estimate_tokens_array(pa.array([1, 2])))
    assert e.column == "values"


@pytest.mark.parametrize("fn", [estimate_tokens_array, count_tokens_array])
@pytest.mark.parametrize(
    "values",
    [["a", "b"], "hello", b"hello", np.array(["a", "b"]), np.array(["a", None], dtype=object)],
    ids=["list", "str", "bytes", "numpy-str", "numpy-object"],
)
def test_an_array_function_given_no_arrow_is_an_input_type_error(fn: Any, values: Any) -> None:
    # was the core's plain ValueError ("Expected object with __arrow_c_array__ ...")
    e = expect(InputTypeError, lambda: fn(values))
    assert f"{fn.__name__} takes an Arrow string array" in str(e)
    assert type(values).__name__ in str(e)


# --- all-null dictionaries -------------------------------------------------------------


def all_null_dictionary(n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(
        pa.array([None] * n, pa.int32()), pa.array([], pa.string())
    )


@pytest.mark.parametrize("column", ["tool", "parent_id", "input", "status", "part_id", "output"])
def test_all_null_dictionary_column(column: str) -> None:
    rows = [
        text("s1", "u1"),
        text("s1", "a1", role="assistant"),
        text("s1", "u2"),
        text("s1", "u3"),
    ]
    table = replace(build(rows), column, all_null_dictionary(4))
    for scan in ALL_SCANS:
        no_crash(lambda scan=scan: scan(table))
    assert pivot_mask(table).to_pylist() == [True] * 4
    est = cc.estimate_messages(table)
    want = [0, 0, 0, 0] if column == "output" else [5, 5, 5, 5]  # no text: nothing is sent
    assert est.messages["tokens"].to_pylist() == want
    assert cc.prune(table).sessions["total"].to_pylist() == [0]


def test_all_null_dictionary_values_for_estimates() -> None:
    got = no_crash(lambda: estimate_tokens_array(all_null_dictionary(3)))
    assert got.to_pylist() == [None, None, None]
    encoded = pa.array([None, None], pa.string()).dictionary_encode()
    assert no_crash(lambda: estimate_tokens_array(encoded)).to_pylist() == [None, None]
    empty = pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), pa.array([], pa.string()))
    assert no_crash(lambda: estimate_tokens_array(empty)).to_pylist() == []


def test_null_status_is_checked_only_in_a_session_the_trigger_lets_act() -> None:
    table = build(null_status_rows())
    # above the trigger the session is walked: the null status is an error
    e = expect(NullValueError, lambda: cc.prune(table, {"trigger": 1}))
    assert where(e) == ("s1", "a2", 2, "status")
    # at or below it the session is never walked (as the reference): no selection
    result = no_crash(lambda: cc.prune(table, {"trigger": 10**6}))
    assert result.sessions.to_pylist() == [
        {"session_id": "s1", "total": 0, "pruned": 0, "parts": 0}
    ]


def test_all_null_dictionary_session_id_is_a_null_error() -> None:
    table = replace(build(good_rows()), "session_id", all_null_dictionary(5))
    e = expect(NullValueError, lambda: cc.prune(table))
    assert (e.row, e.column) == (0, "session_id")


def test_all_null_dictionary_role_is_a_null_error() -> None:
    table = replace(build(good_rows()), "role", all_null_dictionary(5))
    e = expect(NullValueError, lambda: cc.filter_pivot(table))
    assert where(e) == ("s1", "u1", 0, "role")


def test_dictionary_with_null_value_slot() -> None:
    # The key is valid but the dictionary value it points at is null.
    sid = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["s1", None]))
    table = replace(build([text("s1", "u1"), text("s1", "u2")]), "session_id", sid)
    e = expect(NullValueError, lambda: pivot_mask(table))
    assert (e.row, e.column) == (1, "session_id")


def test_all_null_polars_categorical_column() -> None:
    table = build(good_rows())
    frame = pl.from_arrow(table).with_columns(pl.lit(None, pl.Categorical).alias("parent_id"))
    assert no_crash(lambda: pivot_mask(frame)).to_pylist() == [True] * 5


# --- empty tables ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["table", "no-batches", "polars", "dictionary", "int8"])
def test_empty_table(layout: str) -> None:
    table: Any = build([])
    if layout == "no-batches":
        table = pa.Table.from_batches([], table.schema)
    elif layout == "polars":
        table = pl.from_arrow(table)
    elif layout == "dictionary":
        table = replace(table, "session_id", table.column("session_id").dictionary_encode())
    elif layout == "int8":
        table = build([], role=pa.int8(), status=pa.int8(), part_type=pa.int8())

    result = no_crash(lambda: cc.prune(table))
    assert len(result) == 0
    assert result.part_ids == []
    assert result.sessions.num_rows == 0
    assert (result.total, result.pruned) == (0, 0)

    assert no_crash(lambda: pivot_mask(table)).to_pylist() == []
    filtered = no_crash(lambda: cc.filter_pivot(table)).to_arrow()
    assert filtered.num_rows == 0
    assert filtered.schema == cc.Transcript.from_arrow(table).to_arrow().schema

    est = no_crash(lambda: cc.estimate_messages(table))
    assert est.messages.num_rows == 0
    assert est.sessions.num_rows == 0
    assert est.total == 0

    assert len(cc.Transcript.from_arrow(table)) == 0


@pytest.mark.parametrize("layout", ["table", "no-batches", "polars"])
def test_mark_pruned_on_empty_table(layout: str) -> None:
    table: Any = build([])
    if layout == "no-batches":
        table = pa.Table.from_batches([], table.schema)
    elif layout == "polars":
        table = pl.from_arrow(table)
    result = cc.prune(table)
    marked = no_crash(lambda: cc.mark_pruned(table, result, now_ms=1))
    assert marked.num_rows == 0
    assert marked.to_arrow().column("compacted_at").type == pa.int64()


def test_empty_estimate_array_inputs() -> None:
    empty = pa.array([], pa.string_view())
    assert no_crash(lambda: estimate_tokens_array(empty)).to_pylist() == []
    series = pl.Series([], dtype=pl.String)
    assert no_crash(lambda: estimate_tokens_array(series)).to_pylist() == []
    one_empty_chunk = pa.chunked_array([pa.array([], pa.string())])
    assert no_crash(lambda: estimate_tokens_array(one_empty_chunk)).to_pylist() == []


def test_estimate_array_of_chunked_array_without_chunks() -> None:
    chunked = pa.chunked_array([], pa.string())
    assert chunked.num_chunks == 0
    got = no_crash(lambda: estimate_tokens_array(chunked))
    assert isinstance(got, pa.ChunkedArray)
    assert got.to_pylist() == []


# --- other inputs ----------------------------------------------------------------------


def test_scans_reject_plain_python() -> None:
    for scan in ALL_SCANS:
        expect(TypeError, lambda scan=scan: scan([{"session_id": "s"}]))


def test_mark_pruned_out_of_range_rows() -> None:
    table = build(good_rows())
    bad = PruneResult(
        rows=pa.array([99], pa.uint64()),
        part_ids=["x"],
        sessions=pa.table({"session_id": ["s1"]}),
        total=0,
        pruned=0,
    )
    e = expect(ConfigError, lambda: cc.mark_pruned(table, bad, now_ms=1))
    assert "99" in str(e)


def test_mark_pruned_mistyped_compacted_at() -> None:
    table = build(good_rows())
    result = cc.prune(table)
    bad = replace(table, "compacted_at", pa.array(["1"] * 5))
    e = expect(ColumnTypeError, lambda: cc.mark_pruned(bad, result, now_ms=1))
    assert e.column == "compacted_at"


# --- message-level fields, threads, ids, registry files, unencodable text --------------


@pytest.mark.parametrize("column", ["summary", "finished", "error"])
def test_rows_of_one_message_disagree_on_a_flag(column: str) -> None:
    rows = good_rows()
    rows.insert(2, tool("s1", "a1", "completed"))  # a second part of a1
    rows[2]["part_id"] = "a1-t2"
    rows[2][column] = True
    e = expect(InconsistentMessageError, lambda: pivot(build(rows)))
    assert where(e) == ("s1", "a1", 2, column)


def test_rows_of_a_summary_disagree_on_the_parent() -> None:
    rows = good_rows()
    rows.insert(2, tool("s1", "a1", "completed"))
    rows[2]["part_id"] = "a1-t2"
    for r, parent in ((rows[1], "u1"), (rows[2], "u2")):
        r.update(summary=True, parent_id=parent)
    e = expect(InconsistentMessageError, lambda: mask(build(rows)))
    assert where(e) == ("s1", "a1", 2, "parent_id")


@pytest.mark.parametrize("scan", ALL_SCANS, ids=SCAN_IDS)
@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_bad_thread_counts(scan: Callable[..., Any], threads: Any) -> None:
    expect(ConfigError, lambda: scan(build(good_rows()), threads=threads))


def test_bad_thread_count_for_estimate_array() -> None:
    expect(ConfigError, lambda: estimate_tokens_array(pa.array(["a"]), threads=-1))


def test_part_ids_need_the_part_id_column_and_values() -> None:
    session = [text("s", "u1"), *[tool("s", f"a{i}", "completed", "x" * 100_000) for i in range(3)]]
    session += [text("s", "u2"), text("s", "u3")]
    table = build(session)
    assert cc.prune(table).part_ids == ["a1-t", "a0-t"]  # a2 sits in the protected 40k
    nulls = replace(table, "part_id", pa.nulls(table.num_rows, pa.string()))
    e = expect(NullValueError, lambda: cc.prune(nulls).part_ids)
    assert e.column == "part_id"
    without = table.drop_columns(["part_id"])
    expect(MissingColumnError, lambda: cc.prune(without).part_ids)


def test_registry_file_that_cannot_be_read(tmp_path: Any) -> None:
    e = expect(ConfigError, lambda: cc.ModelRegistry.from_file(tmp_path / "missing.json"))
    assert "missing.json" in str(e)
    binary = tmp_path / "limits.json"
    binary.write_bytes(b"\xff\xfe\x00")
    expect(ConfigError, lambda: cc.ModelRegistry.from_file(binary))


def test_lone_surrogate_cannot_enter_arrow_and_says_where() -> None:
    session = cc.Session.model_validate(
        {
            "info": {"id": "s1"},
            "messages": [
                {"info": {"id": "m1", "role": "user"}, "parts": [{"id": "p1", "type": "text",
                                                                   "text": "ok"}]},
                {"info": {"id": "m2", "role": "user"}, "parts": [{"id": "p2", "type": "text",
                                                                   "text": "x\ud800"}]},
            ],
        }
    )  # fmt: skip
    e = expect(TranscriptError, lambda: cc.Transcript.from_sessions([session]))
    assert where(e) == ("s1", "m2", 1, "output")


def test_every_core_error_class_is_a_compaction_error() -> None:
    from ctxcompact import _core, errors

    assert "DatasetError" in _core.ERROR_CLASSES
    for name in _core.ERROR_CLASSES:
        assert issubclass(getattr(errors, name), errors.CompactionError), name


def test_a_core_class_missing_from_errors_fails_at_import() -> None:
    from ctxcompact.errors import check_core_classes

    with pytest.raises(ImportError, match="RenamedError"):
        check_core_classes(["FormatError", "RenamedError"])
    with pytest.raises(ImportError, match="check_core_classes"):  # not an error class
        check_core_classes(["check_core_classes"])


def test_an_arrow_stream_that_fails_is_a_dataset_error() -> None:
    import pyarrow as pa

    schema = pa.schema([("session_id", pa.string())])

    def broken() -> Any:
        yield pa.record_batch([pa.array(["s"])], schema=schema)
        raise RuntimeError("disk went away")

    from ctxcompact import _core

    # The core reads streams as they come (the facade may materialize them first).
    reader = pa.RecordBatchReader.from_batches(schema, broken())
    with pytest.raises(DatasetError, match="cannot read the Arrow input"):
        _core.pivot(reader)
