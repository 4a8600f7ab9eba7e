"""A part-row table with one bad column turned back into sessions
(``Transcript.to_sessions``, and the commands built on it: replay, tune,
convert): a typed error naming the column and the session and row, before
any session is built or output written, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.errors import (
    ColumnTypeError,
    CompactionError,
    FormatError,
    InconsistentMessageError,
    UnknownValueError,
)
from ctxcompact.transcript import sessions_to_table

FIXTURE = Path(__file__).parent / "fixtures" / "opencode_session.json"
SID = "ses_fixture01"


def _table() -> pa.Table:
    return sessions_to_table([cc.Session.model_validate(json.loads(FIXTURE.read_text()))])


def _renamed(table: pa.Table, sid: str) -> pa.Table:
    """``table`` (one session) as the session ``sid``: its ``session_id``
    column and the session ids its ``*_json`` columns repeat."""

    def ids(column: str, key: str) -> pa.Array:
        texts = table.column(column).to_pylist()
        return pa.array([None if t is None else json.dumps({**json.loads(t), key: sid})
                         for t in texts], table.schema.field(column).type)  # fmt: skip

    for column, values in (("session_id", pa.array([sid] * table.num_rows, pa.string())),
                           ("session_json", ids("session_json", "id")),
                           ("message_json", ids("message_json", "sessionID")),
                           ("part_json", ids("part_json", "sessionID"))):  # fmt: skip
        index = table.schema.get_field_index(column)
        table = table.set_column(index, table.schema.field(index).with_type(values.type), values)
    return table


def _first(table: pa.Table, column: str) -> int:
    """The first row holding a value in ``column``."""
    values = table.column(column).to_pylist()
    return next(i for i, v in enumerate(values) if v is not None)


def _put(table: pa.Table, column: str, change: Callable[[list[Any], int], None]) -> pa.Table:
    """``table`` with ``column``'s first value changed (in a list of its values)."""
    values = table.column(column).to_pylist()
    change(values, _first(table, column))
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pa.array(values, table[column].type))


def _set(column: str, value: Any) -> Callable[[pa.Table], tuple[pa.Table, int | None]]:
    def make(table: pa.Table) -> tuple[pa.Table, int | None]:
        row = _first(table, column)
        return _put(table, column, lambda v, i: v.__setitem__(i, value)), row

    return make


def _output_int(table: pa.Table) -> tuple[pa.Table, int | None]:
    lengths = pc.binary_length(pc.cast(table["output"], pa.binary()))
    index = table.schema.get_field_index("output")
    return table.set_column(index, "output", pc.cast(lengths, pa.int32())), None


def _json_key(column: str, key: str, value: Any) -> Callable[[pa.Table], tuple[pa.Table, int]]:
    """``column``'s first JSON object (a tool part's, for ``part_json``)
    with ``key`` set to ``value``."""

    def make(table: pa.Table) -> tuple[pa.Table, int]:
        row = _first(table, "status" if column == "part_json" else column)
        texts = table.column(column).to_pylist()
        texts[row] = json.dumps({**json.loads(texts[row]), key: value})
        index = table.schema.get_field_index(column)
        return table.set_column(index, table.schema.field(index),
                                pa.array(texts, table[column].type)), row  # fmt: skip

    return make


#: (column, how the table is altered, the error class, whether one row is named)
CASES = {
    "output-int32": ("output", _output_int, ColumnTypeError),
    "status-unknown": ("status", _set("status", "weird"), UnknownValueError),
    "part_json-not-json": ("part_json", _set("part_json", "{bad"), FormatError),
    "message_json-array": ("message_json", _set("message_json", "[1]"), FormatError),
    "session_json-not-json": ("session_json", _set("session_json", "nope"), FormatError),
    "input-array": ("input", _set("input", "[1, 2]"), FormatError),
    "part_json-state-number": ("part_json", None, FormatError),
    "part_json-bad-field": ("part_json", None, FormatError),
    "message_json-bad-field": ("message_json", None, FormatError),
    "message_json-other-role": ("message_json", None, InconsistentMessageError),
    "part_json-other-id": ("part_json", _json_key("part_json", "id", "prt_x"),
                           InconsistentMessageError),
    "part_json-other-type": ("part_json", _json_key("part_json", "type", "text"),
                             InconsistentMessageError),
    "message_json-other-id": ("message_json", _json_key("message_json", "id", "msg_x"),
                              InconsistentMessageError),
}  # fmt: skip


def _assistant_row(table: pa.Table) -> int:
    """The first row of the first assistant message."""
    roles, infos = table.column("role").to_pylist(), table.column("message_json").to_pylist()
    return next(i for i, (r, m) in enumerate(zip(roles, infos, strict=True))
                if r == "assistant" and m is not None)  # fmt: skip


def _bad(case: str) -> tuple[pa.Table, int | None]:
    table = _table()
    column, make, _ = CASES[case]
    if make is not None:
        return make(table)
    # values a session cannot hold, in otherwise valid JSON (the model's check)
    tool_row = _first(table, "status")
    if case == "part_json-state-number":
        values = table.column("part_json").to_pylist()
        values[tool_row] = json.dumps({**json.loads(values[tool_row]), "state": 5})
    elif case == "part_json-bad-field":
        values = table.column("part_json").to_pylist()
        values[tool_row] = json.dumps({**json.loads(values[tool_row]), "pinned": "maybe"})
    elif case == "message_json-other-role":
        values = table.column("message_json").to_pylist()
        tool_row = _assistant_row(table)
        values[tool_row] = json.dumps({**json.loads(values[tool_row]), "role": "user"})
    else:
        values = table.column("message_json").to_pylist()
        tool_row = _first(table, "message_json")
        values[tool_row] = json.dumps({**json.loads(values[tool_row]), "time": 5})
    index = table.schema.get_field_index(column)
    changed = pa.array(values, table[column].type)
    return table.set_column(index, table.schema.field(index), changed), tool_row


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_column_is_a_typed_error_naming_it_and_its_row(case: str) -> None:
    column, _, kind = CASES[case]
    table, row = _bad(case)
    with pytest.raises(kind) as e:
        cc.Transcript(table).to_sessions()
    assert isinstance(e.value, CompactionError) and e.value.column == column
    text = str(e.value)
    assert f'column "{column}"' in text, text
    if row is not None:  # one value: its session and row are named too
        assert e.value.row == row and e.value.session_id == SID
        assert f"row {row}" in text and f'session "{SID}"' in text, text
        assert e.value.message_id is not None and e.value.message_id in text


@pytest.mark.parametrize("case", ["output-int32", "status-unknown", "part_json-not-json",
                                  "message_json-array", "part_json-bad-field",
                                  "message_json-other-role", "part_json-other-id",
                                  "part_json-other-type", "message_json-other-id"])  # fmt: skip
@pytest.mark.parametrize("command", ["replay", "convert"])
def test_the_cli_names_the_file_and_column_in_one_line(
    case: str, command: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    column, _, kind = CASES[case]
    table, row = _bad(case)
    src = tmp_path / "bad.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.parquet"
    if command == "replay":
        args = ["replay", str(src), "--context", "8000", "--output-limit", "1000",
                "--out", str(out)]  # fmt: skip
    else:
        out = tmp_path / "out.json"
        args = ["convert", str(src), str(out), "--to", "opencode"]
    code, stdout, err = invoke(monkeypatch, capsys, *args)
    assert code == 1, err  # the bad-data exit code, as estimate's
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {kind.__name__}: {src}: "), err
    assert f'column "{column}"' in err
    if row is not None:
        assert f"row {row}" in err and SID in err
    assert not out.exists() and stdout == ""


def test_estimate_and_to_sessions_name_a_mistyped_column_alike(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """The same check as the scans': estimate's message and to_sessions' agree."""
    table, _ = _bad("output-int32")
    src = tmp_path / "bad.parquet"
    pq.write_table(table, src)
    _, _, estimate = invoke(monkeypatch, capsys, "estimate", str(src))
    _, _, replay = invoke(monkeypatch, capsys, "replay", str(src), "--context", "8000",
                       "--output-limit", "1000")  # fmt: skip
    assert estimate.strip() == replay.strip()


def _roles(table: pa.Table, change: Callable[[dict[str, Any]], None]) -> pa.Table:
    """``table`` with every ``message_json`` object changed by ``change``."""
    values = []
    for text in table.column("message_json").to_pylist():
        info = None if text is None else json.loads(text)
        if info is not None:
            change(info)
        values.append(None if info is None else json.dumps(info))
    index = table.schema.get_field_index("message_json")
    return table.set_column(index, table.schema.field(index), pa.array(values, pa.large_string()))


@pytest.mark.parametrize("coded", [False, True])
def test_message_jsons_role_against_the_role_column(coded: bool) -> None:
    """The role column is the message's role (what the scans read):
    ``message_json`` saying another is an ``InconsistentMessageError`` naming
    both, never a silent win; one without a role takes the column's."""
    table = _table()
    if coded:  # the role column as docs/schema.md's int8 codes
        codes = {"user": 0, "assistant": 1, "system": 2}
        roles = [codes[r] for r in table.column("role").to_pylist()]
        table = table.set_column(table.schema.get_field_index("role"), "role",
                                 pa.array(roles, pa.int8()))  # fmt: skip
    want = [m.info.role for m in cc.Transcript(table).to_sessions()[0].messages]
    assert "assistant" in want and "user" in want
    row = _assistant_row(_table())
    mid = _table().column("message_id")[row].as_py()
    bad = _roles(table, lambda info: info.update(role="system") if info["id"] == mid else None)
    with pytest.raises(InconsistentMessageError) as e:
        cc.Transcript(bad).to_sessions()
    assert (e.value.session_id, e.value.message_id, e.value.row) == (SID, mid, row)
    assert e.value.column == "message_json"
    assert str(e.value) == (
        f'message_json\'s role "system" disagrees with the role column\'s "assistant" (the '
        f'column is the message\'s role) (session "{SID}", message "{mid}", row {row}, '
        'column "message_json")'
    )
    # the info minus the columns (docs/schema.md): the role comes from the column
    bare = _roles(table, lambda info: info.pop("role"))
    assert [m.info.role for m in cc.Transcript(bare).to_sessions()[0].messages] == want
    assert cc.Transcript(bare).to_sessions() == cc.Transcript(table).to_sessions()


#: The keys of a ``*_json`` object that repeat a column: (JSON column, key,
#: the column, what the column is), as the error says it.
REPEATED = [
    ("part_json", "id", "part_id", "part's id"),
    ("part_json", "type", "part_type", "part's type"),
    ("message_json", "id", "message_id", "message's id"),
]

#: The keys that say where a row belongs: (JSON column, key, the column).
FOLLOWED = [
    ("part_json", "messageID", "message_id"),
    ("part_json", "sessionID", "session_id"),
    ("message_json", "sessionID", "session_id"),
    ("session_json", "id", "session_id"),
]


def _objects(
    table: pa.Table, column: str, row: int, change: Callable[[dict[str, Any]], None]
) -> pa.Table:
    """``table`` with the JSON object of ``column`` at ``row`` changed by ``change``."""
    texts = table.column(column).to_pylist()
    value = json.loads(texts[row])
    change(value)
    texts[row] = json.dumps(value)
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pa.array(texts, table[column].type))


@pytest.mark.parametrize(("json_column", "key", "column", "what"), REPEATED)
def test_a_json_key_that_repeats_a_column_must_agree_with_it(
    json_column: str, key: str, column: str, what: str
) -> None:
    """The id, type and session columns say which part (message, session) a
    row is and where it belongs, what the scans read; a ``*_json`` object
    saying another is an ``InconsistentMessageError`` naming both values,
    never a silent win. Saying the same, or nothing, reads as the column."""
    table = _table()
    row = _first(table, "status" if json_column == "part_json" else json_column)
    truth = table.column(column)[row].as_py()
    sid, mid = SID, table.column("message_id")[row].as_py()
    want = cc.Transcript(table).to_sessions()

    bad = _objects(table, json_column, row, lambda o: o.update({key: "other"}))
    with pytest.raises(InconsistentMessageError) as e:
        cc.Transcript(bad).to_sessions()
    assert (e.value.session_id, e.value.message_id, e.value.row) == (sid, mid, row)
    assert e.value.column == json_column
    assert str(e.value) == (
        f'{json_column}\'s {key} "other" disagrees with the {column} column\'s "{truth}" '
        f'(the column is the {what}) (session "{sid}", message "{mid}", row {row}, '
        f'column "{json_column}")'
    )
    # the same value again, a null, or none: the column's
    same = _objects(table, json_column, row, lambda o: o.update({key: truth}))
    assert cc.Transcript(same).to_sessions() == want
    null = _objects(table, json_column, row, lambda o: o.update({key: None}))
    absent = _objects(table, json_column, row, lambda o: o.pop(key, None))
    for variant in (null, absent):
        got = cc.Transcript(variant).to_sessions()[0]
        if json_column == "session_json":
            assert got.id == truth
        else:
            message = next(m for m in got.messages if m.id == mid)
            if json_column == "message_json":
                thing = message.info
            else:
                thing = next(p for p in message.parts if p.id == table["part_id"][row].as_py())
            if key in ("id", "type"):  # a required field: the column's
                assert getattr(thing, key) == truth
            else:  # an optional one stays as the JSON has it: absent, or null
                assert getattr(thing, key) is None


def test_a_part_coded_other_keeps_part_jsons_type() -> None:
    """Part type 127 (``other``) stands for any type the codes do not list: a
    ``part_json`` naming such a type agrees with it (and is the part's type);
    one naming a listed type contradicts the code."""
    table = _table()
    row = table.column("part_type").to_pylist().index("step-start")
    names = ["text", "tool", "compaction", "file", "reasoning", "step-start", "step-finish",
             "subtask", "snapshot", "patch", "agent", "retry"]  # fmt: skip
    kinds = table.column("part_type").to_pylist()
    kinds[row] = "new-kind"  # a type newer than the codes
    strings = table.set_column(table.schema.get_field_index("part_type"), "part_type",
                               pa.array(kinds, pa.string()))  # fmt: skip
    codes = pa.array([None if k is None else names.index(k) if k in names else 127
                      for k in kinds], pa.int8())  # fmt: skip
    coded = strings.set_column(strings.schema.get_field_index("part_type"), "part_type", codes)
    named = _objects(coded, "part_json", row, lambda o: o.update(type="new-kind"))
    assert cc.Transcript(named).to_sessions() == cc.Transcript(strings).to_sessions()
    # without the name the part is "other"; a listed type is a contradiction
    parts = [p for m in cc.Transcript(coded).to_sessions()[0].messages for p in m.parts]
    assert [p.type for p in parts if p.type not in names] == ["other"]
    listed = _objects(coded, "part_json", row, lambda o: o.update(type="text"))
    with pytest.raises(InconsistentMessageError) as e:
        cc.Transcript(listed).to_sessions()
    assert e.value.row == row and e.value.column == "part_json"
    assert 'part_json\'s type "text" disagrees with the part_type column\'s "other"' in str(e.value)
    # a string column says the type itself: "other" there is a type named so
    other = _objects(strings, "part_json", row, lambda o: o.update(type="other"))
    with pytest.raises(InconsistentMessageError):
        cc.Transcript(other).to_sessions()


def test_a_minimal_table_still_reads() -> None:
    """Only the base columns are needed; the others are checked when present."""
    table = _table()
    minimal = table.select(["session_id", "message_id", "role", "part_type", "status", "output"])
    sessions = cc.Transcript(minimal).to_sessions()
    assert [s.id for s in sessions] == [SID]
    # a tool part's state needs its status: the model's complaint names the column
    with pytest.raises(FormatError) as e:
        cc.Transcript(minimal.drop_columns(["status"])).to_sessions()
    assert e.value.column == "status" and e.value.row == _first(table, "status")
    assert 'column "status"' in str(e.value) and f'session "{SID}"' in str(e.value)


@pytest.mark.parametrize("workers", [1, 2])
def test_tune_names_the_file_and_its_row_of_a_bad_value(tmp_path: Path, workers: int) -> None:
    """tune reads Parquet in pieces (of a few sessions, on workers): the error
    names the file the value is in and its row there, not the piece's."""
    from ctxcompact.tuning import tune

    good = _table()
    bad, row = _bad("status-unknown")

    pq.write_table(_renamed(good, "ses_a"), tmp_path / "a.parquet")
    # b.parquet: another session, then the bad one (its rows follow the other's)
    pq.write_table(pa.concat_tables([_renamed(good, "ses_b"), bad]), tmp_path / "b.parquet")
    row += good.num_rows
    grid = {"preset": ["opencode"]}
    with pytest.raises(UnknownValueError) as e:
        tune(tmp_path, grid, limits={"context": 8_000, "output": 1_000}, workers=workers,
             batch_rows=4)  # fmt: skip
    text = str(e.value)
    assert text.startswith(f"{tmp_path / 'b.parquet'}: ") and f"row {row}," in text, text
    assert e.value.row == row and f'session "{SID}"' in text


def test_replay_names_the_file_of_several_and_its_row(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Several Parquet inputs (or a folder) are read as one table: the error
    names the file the bad value is in and its row there."""
    good = _renamed(_table(), "ses_a")
    bad, row = _bad("part_json-not-json")
    pq.write_table(good, tmp_path / "a.parquet")
    pq.write_table(bad, tmp_path / "b.parquet")
    for inputs in ([tmp_path / "a.parquet", tmp_path / "b.parquet"], [tmp_path]):
        code, _, err = invoke(monkeypatch, capsys, "replay", *map(str, inputs),
                              "--context", "8000", "--output-limit", "1000")  # fmt: skip
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert f"error: FormatError: {tmp_path / 'b.parquet'}: " in err, err
        assert f"row {row}," in err and 'column "part_json"' in err, err


@pytest.mark.parametrize(("json_column", "key", "column"), FOLLOWED)
def test_where_a_row_belongs_follows_its_column(json_column: str, key: str, column: str) -> None:
    """A table whose sessions were renamed (its ``session_id`` column made
    unique, the ids inside the ``*_json`` columns left) reads as renamed: the
    session and message a row belongs to are the columns the scans group by."""
    table = _table()
    row = _first(table, "status" if json_column == "part_json" else json_column)
    want = cc.Transcript(table).to_sessions()
    moved = _objects(table, json_column, row, lambda o: o.update({key: "elsewhere"}))
    assert cc.Transcript(moved).to_sessions() == want
    # a whole session renamed in its session_id column only
    ids = pa.array(["renamed"] * table.num_rows, pa.string())
    index = table.schema.get_field_index("session_id")
    renamed = cc.Transcript(table.set_column(index, "session_id", ids)).to_sessions()[0]
    assert renamed.id == "renamed"
    assert {m.info.sessionID for m in renamed.messages} == {"renamed"}
    assert {p.sessionID for m in renamed.messages for p in m.parts} <= {"renamed", None}
