"""Token estimates: one text, an Arrow array, per message; against values computed by hand.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

from types import SimpleNamespace

import ctxcompact as cc
import polars as pl
import pyarrow as pa
import pytest
from ctxcompact.errors import FormatError
from ctxcompact.scans import (
    estimate_tokens_array,
)
from tables import (
    build,
    estimate_rows,
    x,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 100, 25)],
)
def test_ceil_bytes_seed_cases(text: str, want: int) -> None:
    assert cc.estimate_tokens(text, "ceil-bytes") == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", 0),
        ("a", 0),  # 0.25 -> 0
        ("ab", 1),  # 0.5 rounds half up (JS Math.round), not to even
        ("abc", 1),
        ("abcd", 1),
        ("abcdef", 2),  # 1.5 -> 2
        ("abcdefghij", 3),  # 2.5 -> 3
        ("x" * 100, 25),
    ],
)
def test_opencode_estimate_ascii(text: str, want: int) -> None:
    assert cc.estimate_tokens(text, "opencode") == want
    assert cc.estimate_tokens(text) == want  # opencode is the default


@pytest.mark.parametrize(
    ("text", "opencode", "ceil_bytes"),
    [
        # UTF-16 units / UTF-8 bytes, computed by hand:
        ("é", 0, 1),  # 1 unit, 2 bytes
        ("😀", 1, 1),  # 2 units (surrogate pair) -> 0.5 -> 1; 4 bytes
        ("😀😀😀", 2, 3),  # 6 units -> 1.5 -> 2; 12 bytes
        ("👍🏽", 1, 2),  # two astral code points: 4 units; 8 bytes
        ("日本", 1, 2),  # 2 units -> 0.5 -> 1; 6 bytes
        ("日本語テキスト", 2, 6),  # 7 units -> 1.75 -> 2; 21 bytes
        ("𝔘𝔫𝔦", 2, 3),  # 6 units; 12 bytes
        ("a😀b", 1, 2),  # 4 units; 6 bytes
    ],
)
def test_estimate_non_ascii(text: str, opencode: int, ceil_bytes: int) -> None:
    assert cc.estimate_tokens(text, "opencode") == opencode
    assert cc.estimate_tokens(text, "ceil-bytes") == ceil_bytes


def test_estimate_messages_reads_file_parts_and_refuses_a_broken_part_json() -> None:
    # The model sees a file part as "[file: name (mime)]": the batch scan counts it too.
    file = {"id": "p", "type": "file", "mime": "text/plain", "filename": "notes.txt"}
    session = cc.Session.model_validate(
        {"info": {"id": "s"}, "messages": [{"info": {"id": "m", "role": "user"}, "parts": [file]}]}
    )
    text = "[file: notes.txt (text/plain)]"
    assert cc.to_model_messages(session) == [{"role": "user", "content": text}]
    assert cc.estimate_messages(session).total == 4 + cc.estimate_tokens(text)
    table = cc.Transcript.from_sessions([session]).to_arrow()
    column = table.schema.get_field_index("part_json")
    broken = table.set_column(column, "part_json", pa.array(["{nope"], pa.large_string()))
    with pytest.raises(FormatError, match="part_json of row 0") as info:
        cc.estimate_messages(broken)
    assert info.value.column == "part_json"
    assert info.value.session_id == "s"


VALUES = ["abcd", None, "", "abcdef", "😀😀😀", None, "日本語テキスト"]


WANT_OPENCODE = [1, None, 0, 2, 2, None, 2]


WANT_CEIL = [1, None, 0, 2, 3, None, 6]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.string_view()])
def test_estimate_array_string_types(typ: pa.DataType) -> None:
    arr = pa.array(VALUES, typ)
    got = estimate_tokens_array(arr)
    assert isinstance(got, pa.Array)
    assert got.type == pa.int64()
    assert got.to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(arr, "ceil-bytes").to_pylist() == WANT_CEIL


@pytest.mark.parametrize("value_type", [pa.string(), pa.large_string()])
def test_estimate_array_dictionary(value_type: pa.DataType) -> None:
    arr = pa.array(VALUES, value_type).dictionary_encode()
    assert pa.types.is_dictionary(arr.type)
    assert estimate_tokens_array(arr).to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(arr, "ceil-bytes").to_pylist() == WANT_CEIL


def test_estimate_array_dictionary_with_repeated_values() -> None:
    arr = pa.DictionaryArray.from_arrays(
        pa.array([1, 0, None, 1, 1], pa.int32()), pa.array(["ab", "x" * 40])
    )
    assert estimate_tokens_array(arr).to_pylist() == [10, 1, None, 10, 10]


def test_estimate_array_chunked_gives_chunked() -> None:
    arr = pa.chunked_array([pa.array(VALUES[:3]), pa.array(VALUES[3:])])
    got = estimate_tokens_array(arr)
    assert isinstance(got, pa.ChunkedArray)
    assert got.num_chunks == 2
    assert [len(c) for c in got.chunks] == [3, 4]
    assert got.to_pylist() == WANT_OPENCODE


def test_estimate_array_polars_series() -> None:
    series = pl.Series("text", VALUES)
    got = estimate_tokens_array(series)
    assert isinstance(got, pa.Array)
    assert got.to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(series, "ceil-bytes").to_pylist() == WANT_CEIL


def test_estimate_array_multi_chunk_polars_series() -> None:
    series = pl.concat([pl.Series(VALUES[:3]), pl.Series(VALUES[3:])], rechunk=False)
    assert series.n_chunks() == 2
    got = estimate_tokens_array(series)
    assert isinstance(got, pa.Array)
    assert got.to_pylist() == WANT_OPENCODE


def test_estimate_array_nulls_keep_validity() -> None:
    got = estimate_tokens_array(pa.array([None, None, "abcd"]))
    assert got.null_count == 2
    assert got.is_null().to_pylist() == [True, True, False]


def test_estimate_array_empty_and_threads() -> None:
    assert estimate_tokens_array(pa.array([], pa.string())).to_pylist() == []
    big = pa.array([x(3), "ab", None] * 20_000)
    one = estimate_tokens_array(big, threads=1)
    two = estimate_tokens_array(big, threads=2)
    assert one.equals(two)
    assert one.to_pylist()[:4] == [3, 1, None, 3]


def test_estimate_messages_hand_computed() -> None:
    table = build(estimate_rows())
    est = cc.estimate_messages(table)
    assert est.messages.to_pydict() == {
        "session_id": ["e1", "e1", "e1", "e3"],
        "message_id": ["e1-u1", "e1-a1", "e1-a2", "e3-u1"],
        "tokens": [12, 57, 0, 5],
    }
    assert est.sessions.to_pydict() == {
        "session_id": ["e1", "e3"],
        "tokens": [69, 5],
        "messages": [3, 1],
    }
    assert est.total == 74


def test_estimate_messages_overhead_and_method() -> None:
    table = build(estimate_rows())
    none = cc.estimate_messages(table, SimpleNamespace(message_overhead=0))
    assert none.messages["tokens"].to_pylist() == [8, 37, 0, 1]
    # ceil-bytes: u1 = ceil(32/4) = 8; a1 = 1 + calls (1+2 + 1+1 + 1+1 + 1+1)
    # + results (10 + 8 + ceil(33/4)=9 + 1) = 38; "ab" -> 1
    ceil = cc.estimate_messages(
        table, SimpleNamespace(estimate_method="ceil-bytes", message_overhead=0)
    )
    assert ceil.messages["tokens"].to_pylist() == [8, 38, 0, 1]


@pytest.mark.parametrize(
    ("text", "opencode", "ceil_bytes"),
    [("a\ud800b", 1, 2), ("\udc00" * 6, 2, 5), ("ab\ud83d", 1, 2)],
)
def test_lone_surrogates_count_like_javascript(text: str, opencode: int, ceil_bytes: int) -> None:
    # JavaScript: "a\ud800b".length == 3 -> round(0.75) == 1; WTF-8 bytes for ceil-bytes.
    assert cc.estimate_tokens(text) == opencode
    assert cc.estimate_tokens(text, "ceil-bytes") == ceil_bytes


@pytest.mark.parametrize("method", [None, 5, ["o200k"]])
def test_a_method_that_is_not_a_name_is_a_config_error_naming_it(method: object) -> None:
    # Was a bare TypeError from the binding ("'None' is not an instance of 'str'").
    from ctxcompact.errors import ConfigError

    for call in (lambda: cc.estimate_tokens("hi", method),  # type: ignore[arg-type]
                 lambda: estimate_tokens_array(pa.array(["x"]), method)):  # type: ignore[arg-type]  # fmt: skip
        with pytest.raises(ConfigError, match=r"method takes an estimate method's name") as err:
            call()
        assert err.value.column == "method"
