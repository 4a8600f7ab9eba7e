"""Transcript.from_arrow and the transcript's accessors.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

import ctxcompact as cc
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from ctxcompact.errors import ColumnTypeError, InputTypeError, SchemaError
from ctxcompact.models import Session


def test_transcript_from_arrow_sources(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    assert t.to_arrow() is prune_table
    assert t.num_rows == 29
    assert cc.Transcript.from_arrow(t) is t

    batch = prune_table.to_batches()[0]
    assert cc.Transcript.from_arrow(batch).to_arrow().equals(prune_table)

    reader = pa.RecordBatchReader.from_batches(prune_table.schema, prune_table.to_batches())
    assert cc.Transcript.from_arrow(reader).to_arrow().equals(prune_table)

    frame = pl.from_arrow(prune_table)
    from_polars = cc.Transcript.from_arrow(frame).to_arrow()
    assert from_polars.num_rows == 29
    assert from_polars.to_pylist() == prune_table.to_pylist()


def test_transcript_from_arrow_rejects_plain_python() -> None:
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow([{"session_id": "s"}])
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow({"session_id": ["s"]})
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow("not a table")
    with pytest.raises(TypeError):
        cc.Transcript(pa.record_batch({"a": [1]}))  # type: ignore[arg-type]


@pytest.mark.parametrize("given", [pa.record_batch({"a": [1]}), [{"session_id": "s"}], None])
def test_transcript_init_names_what_it_takes(given: object) -> None:
    # was a plain TypeError
    with pytest.raises(InputTypeError, match=r"Transcript wraps a pyarrow\.Table .*from_arrow"):
        cc.Transcript(given)  # type: ignore[arg-type]


def test_transcript_session_ids(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    assert t.session_ids() == ["s1", "s2", "s3", "s4"]
    assert len(t) == 4
    assert len(cc.Transcript.from_arrow(pl.from_arrow(prune_table))) == 4


def test_transcript_with_column(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    replaced = t.with_column("output", pa.array([None] * 29, pa.string()))
    assert replaced.to_arrow().column("output").null_count == 29
    assert t.to_arrow().column("output").null_count < 29
    added = t.with_column("extra", pa.array(range(29)))
    assert added.to_arrow().column_names[-1] == "extra"


@pytest.mark.parametrize(
    ("sessions", "match"),
    [
        ([1], r"item 0 of sessions is not a Session \(got int\)"),
        ([None, None], r"item 0 .*\(got NoneType\)"),
        ([{"id": "x"}], r"item 0 .*\(got dict\).*Session\.model_validate"),
        (5, r"a list of Sessions, got int"),
        ("s1", r"a list of Sessions, got str"),
    ],
)
def test_from_sessions_names_the_bad_item(sessions: object, match: str) -> None:
    # was AttributeError: 'int' object has no attribute 'id'
    with pytest.raises(InputTypeError, match=match):
        cc.Transcript.from_sessions(sessions)  # type: ignore[arg-type]


def test_from_sessions_names_the_index_of_the_bad_item(prune_table: pa.Table) -> None:
    good = cc.Transcript.from_arrow(prune_table).to_sessions()
    with pytest.raises(InputTypeError, match=r"item 2 of sessions .*dict") as caught:
        cc.Transcript.from_sessions([*good[:2], {"id": "x"}])  # type: ignore[list-item]
    assert caught.value.row == 2
    with pytest.raises(InputTypeError, match=r"one Session: pass \[session\]"):
        cc.Transcript.from_sessions(good[0])  # type: ignore[arg-type]
    assert len(cc.Transcript.from_sessions(iter(good))) == 4  # any iterable of Sessions


def test_with_column_refuses_bad_arguments_with_typed_errors(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    # was pyarrow's ArrowInvalid (a length mismatch)
    with pytest.raises(SchemaError, match=r"1 values for 'output', but .* 29 rows") as caught:
        t.with_column("output", pa.array(["a"]))
    assert caught.value.column == "output"
    with pytest.raises(SchemaError, match="3 values"):
        t.with_column("output", ["a", "b", "c"])
    # was TypeError from pyarrow
    with pytest.raises(InputTypeError, match=r"name is a column name \(str\), got int"):
        t.with_column(5, pa.array(["x"] * 29))  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"values for 'output' .* got dict"):
        t.with_column("output", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"values for 'output' cannot be made an Arrow"):
        t.with_column("output", [1] * 29)  # type: ignore[arg-type]


@pytest.mark.parametrize("values", [pa.array(range(29)), pa.array([b"x"] * 29)])
def test_with_column_names_the_output_column_of_the_wrong_type(
    prune_table: pa.Table, values: pa.Array
) -> None:
    # was ColumnTypeError: column "values" has type Int64 (the core's argument name)
    t = cc.Transcript.from_sessions(cc.Transcript.from_arrow(prune_table).to_sessions())
    assert "output_utf16" in t.to_arrow().column_names  # the outputs are counted again
    with pytest.raises(ColumnTypeError, match=rf"column 'output' has type {values.type}") as e:
        t.with_column("output", values)
    assert e.value.column == "output" and "values" not in str(e.value)


def test_with_column_takes_a_list_of_python_values(prune_table: pa.Table) -> None:
    # was AttributeError: 'list' object has no attribute 'type'
    t = cc.Transcript.from_arrow(prune_table)
    replaced = t.with_column("output", ["x"] * 29)  # type: ignore[arg-type]
    table = replaced.to_arrow()
    assert table.schema.field("output").type == pa.large_string()  # the schema's type
    assert table.column("output").to_pylist() == ["x"] * 29
    if "output_utf16" in table.column_names:  # counted again, as with an Arrow array
        assert table.column("output_utf16").to_pylist() == [1] * 29
    added = t.with_column("extra", list(range(29)))  # type: ignore[arg-type]
    assert added.to_arrow().column("extra").to_pylist() == list(range(29))


def test_table_without_message_json_keeps_its_flags_through_sessions() -> None:
    # A table of scan columns only (the demo's data): its finished / error /
    # summary flags must survive to_sessions, or completed summaries stop
    # being pivots after a convert.
    from ctxcompact.batch.synthetic import generate_table

    table = generate_table(50, 100, seed=1)
    assert "message_json" not in table.column_names
    # Some assistant messages failed (the error flag is per message).
    ids = pc.unique(table.column("message_id")).to_pylist()
    failed = {m for i, m in enumerate(ids) if i % 13 == 5}
    roles = table.column("role").to_pylist()
    messages = table.column("message_id").to_pylist()
    errored = pa.array(
        [r == "assistant" and m in failed for r, m in zip(roles, messages, strict=True)]
    )
    table = table.set_column(table.schema.get_field_index("error"), "error", errored)
    back = cc.Transcript.from_sessions(cc.Transcript(table).to_sessions()).to_arrow()
    for column in ("role", "parent_id", "summary", "finished", "error", "part_type", "output"):
        assert back.column(column).to_pylist() == table.column(column).to_pylist(), column
    assert cc.filter_pivot(back).num_rows == cc.filter_pivot(table).num_rows
    assert cc.estimate_messages(back).total == cc.estimate_messages(table).total


def test_scan_flags_win_over_message_json() -> None:
    from ctxcompact.batch.synthetic import generate_table

    table = cc.Transcript.from_sessions(
        cc.Transcript(generate_table(3, 40, seed=2)).to_sessions()
    ).to_arrow()
    flipped = pc.invert(table.column("finished"))
    edited = table.set_column(table.schema.get_field_index("finished"), "finished", flipped)
    assistant = [r == "assistant" for r in table.column("role").to_pylist()]
    back = cc.Transcript.from_sessions(cc.Transcript(edited).to_sessions()).to_arrow()
    want = [f for f, a in zip(flipped.to_pylist(), assistant, strict=True)]
    got = back.column("finished").to_pylist()
    assert [g for g, a in zip(got, assistant, strict=True) if a] == [
        w for w, a in zip(want, assistant, strict=True) if a
    ]


def test_a_user_message_follows_the_parent_id_column_as_an_assistant_does() -> None:
    """parent_id is where a message sits in the thread, for every role: the
    column wins over message_json's parentID (it was kept for user messages)
    and a user message without one takes the column's; a null column leaves
    message_json's."""
    session = Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "u1", "role": "user"}, "parts": [{"id": "p1", "type": "text"}]},
        {"info": {"id": "a1", "role": "assistant", "parentID": "u1"},
         "parts": [{"id": "p2", "type": "text"}]},
        {"info": {"id": "u2", "role": "user", "parentID": "a1"},
         "parts": [{"id": "p3", "type": "text"}]},
        {"info": {"id": "u3", "role": "user", "parentID": "a1"},
         "parts": [{"id": "p4", "type": "text"}]},
    ]})  # fmt: skip
    table = cc.Transcript.from_sessions([session]).to_arrow()
    assert table.column("parent_id").to_pylist() == [None, "u1", "a1", "a1"]
    edited = table.set_column(table.schema.get_field_index("parent_id"), "parent_id",
                              pa.array(["x", "y", "z", None]))  # fmt: skip
    back = cc.Transcript(edited).to_sessions()[0]
    assert [m.info.model_dump().get("parentID") for m in back.messages] == ["x", "y", "z", "a1"]
    again = cc.Transcript.from_sessions([back]).to_arrow()
    assert again.column("parent_id").to_pylist() == ["x", "y", "z", "a1"]


@pytest.mark.parametrize(
    ("message", "want"),
    [
        # the core's row errors: "row N" in a sentence, and in the place it is
        ("output_utf16 of row 150 is negative (-1)", "output_utf16 of row 17 is negative (-1)"),
        ('part_json of row 150 (session "s", message "m") is not JSON',
         'part_json of row 17 (session "s", message "m") is not JSON'),
        ('unknown role "robot" (session "s", row 150, column "role")',
         'unknown role "robot" (session "s", row 17, column "role")'),
        # another row number is left alone
        ("row 1500 and row 150", "row 1500 and row 17"),
    ],
)  # fmt: skip
def test_relocate_names_the_file_and_its_row(message: str, want: str) -> None:
    """One helper for the CLI, tune and compact_parquet: an error about a row
    of a piece of a table names the file and the row in it, wherever the
    message says "row N"; the same error, its class and place kept."""
    from ctxcompact.errors import FormatError
    from ctxcompact.transcript import relocate

    error = FormatError(message, session_id="s", row=150, column="part_json")
    again = relocate(error, "s", 17)  # a path that is also a word of the message
    assert again is error and isinstance(again, FormatError)
    assert str(again) == f"s: {want}"
    assert (again.row, again.session_id, again.column) == (17, "s", "part_json")
    # a message already led by the file is not led by it twice
    assert str(relocate(again, "s", 17)) == f"s: {want}"
    # no row known in the file: the message keeps its row, the error has none
    kept = relocate(FormatError(message, row=150), "data/in.parquet")
    assert str(kept) == f"data/in.parquet: {message}" and kept.row is None
