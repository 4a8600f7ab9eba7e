"""A part-row table whose ``role``, ``part_type`` and ``status`` hold the int8
codes docs/schema.md allows, turned back into sessions (``to_sessions`` and
the commands built on it: replay, tune, convert) and read by the reference:
the same as its string table; a code that stands for nothing is the core's
typed error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import formats
from ctxcompact.errors import UnknownValueError
from ctxcompact.testing import reference as ref
from ctxcompact.transcript import code_names, sessions_to_table
from ctxcompact.tuning import replay, tune

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
#: Real runs whose part types all have a code (text and tool parts, statuses).
RUNS = (
    DATA / "mini-swe-agent" / "github_issue.traj.json",
    DATA / "swe-agent" / "tests" / "test_data" / "trajectories" / "ctf" / "crypto" / "katy.traj",
)
#: A run with a part type outside the codes (``tool-result``: code 127).
OPENHANDS = DATA / "openhands" / "tests_runtime_trajs_basic.json"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")

#: docs/schema.md's codes, written out here (not read from the library).
SCHEMA_CODES = {
    "role": ["user", "assistant", "system", "tool"],
    "part_type": ["text", "tool", "compaction", "file", "reasoning", "step-start",
                  "step-finish", "subtask", "snapshot", "patch", "agent", "retry"],
    "status": ["pending", "running", "completed", "error"],
}  # fmt: skip
LIMITS = {"context": 8_000, "output": 1_000}


def _sessions(*paths: Path) -> list[cc.Session]:
    return [s for path in paths for s in formats.read(path)]


def _coded(table: pa.Table, chunks: int = 1) -> pa.Table:
    """``table`` with role, part_type and status as int8 codes (127: a part
    type outside the list), in ``chunks`` chunks."""
    for column, names in SCHEMA_CODES.items():
        codes = [None if v is None else names.index(v) if v in names else 127
                 for v in table.column(column).to_pylist()]  # fmt: skip
        size = -(-len(codes) // chunks)
        pieces = [pa.array(codes[i : i + size], pa.int8()) for i in range(0, len(codes), size)]
        index = table.schema.get_field_index(column)
        table = table.set_column(index, pa.field(column, pa.int8()), pa.chunked_array(pieces))
    return table


def _dumped(sessions: list[cc.Session]) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json") for s in sessions]


@pytest.fixture(scope="module")
def strings() -> pa.Table:
    return sessions_to_table(_sessions(*RUNS))


@pytest.mark.parametrize("chunks", [1, 3])
def test_a_coded_table_gives_the_same_sessions(strings: pa.Table, chunks: int) -> None:
    coded = _coded(strings, chunks)
    assert coded.schema.field("role").type == pa.int8()
    assert {2} <= set(coded.column("status").to_pylist())  # completed tools are coded
    want = _dumped(cc.Transcript(strings).to_sessions())
    assert _dumped(cc.Transcript(coded).to_sessions()) == want
    assert _dumped(cc.Transcript(coded).to_sessions()) == _dumped(_sessions(*RUNS))
    # code_names gives the string table's columns back
    for column in SCHEMA_CODES:
        assert code_names(coded).column(column).to_pylist() == strings.column(column).to_pylist()


def test_a_coded_table_replays_and_tunes_alike(strings: pa.Table, tmp_path: Path) -> None:
    coded = _coded(strings)
    plain = replay(cc.Transcript(strings), "opencode", limits=LIMITS)
    again = replay(cc.Transcript(coded), "opencode", limits=LIMITS)
    assert plain.summary["calls"] > 0
    assert again.summary == plain.summary
    assert again.calls.equals(plain.calls) and again.sessions.equals(plain.sessions)
    for name, table in (("s", strings), ("c", coded)):
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "runs.parquet")
    grid = {"preset": ["opencode", "swe-agent"]}
    a = tune(tmp_path / "s", grid, limits=LIMITS, workers=1)
    b = tune(tmp_path / "c", grid, limits=LIMITS, workers=1)
    assert b.points.equals(a.points)


def test_the_commands_give_a_coded_table_the_string_tables_output(
    strings: pa.Table, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    outputs = {}
    for name, table in (("s", strings), ("c", _coded(strings))):
        src = tmp_path / f"{name}.parquet"
        pq.write_table(table, src)
        converted = tmp_path / f"{name}.jsonl"
        code, _, err = invoke(monkeypatch, capsys, "convert", str(src), str(converted),
                              "--to", "opencode")  # fmt: skip
        assert code == 0, err
        code, out, err = invoke(monkeypatch, capsys, "replay", str(src), "--context", "8000",
                                "--output-limit", "1000", "--json")  # fmt: skip
        assert code == 0, err
        outputs[name] = (converted.read_bytes(), json.loads(out)["policies"])
    assert outputs["c"] == outputs["s"]
    assert outputs["s"][1][0]["calls"] > 0


def test_part_type_127_reads_back_as_other() -> None:
    """A type outside the list is coded 127 (``other``): its name is not in
    the table, so the part comes back as type ``other``, the rest the same."""
    sessions = _sessions(OPENHANDS)
    strings = sessions_to_table(sessions)
    assert "tool-result" in strings.column("part_type").to_pylist()
    got = _dumped(cc.Transcript(_coded(strings)).to_sessions())
    want = _dumped(sessions)
    for session in want:
        for message in session["messages"]:
            for part in message["parts"]:
                if part["type"] not in SCHEMA_CODES["part_type"]:
                    part["type"] = "other"
    assert got == want


def _one_code(strings: pa.Table, column: str, code: int) -> tuple[pa.Table, int]:
    """The coded table with the first non-null ``column`` value of an
    assistant message's row (row > 0) made ``code``."""
    coded = _coded(strings)
    values = coded.column(column).to_pylist()
    row = next(i for i, v in enumerate(values) if i > 0 and v is not None)
    values[row] = code
    index = coded.schema.get_field_index(column)
    return coded.set_column(index, coded.schema.field(index), pa.array(values, pa.int8())), row


BAD_CODES = [("role", 4, "role"), ("role", -1, "role"), ("role", 127, "role"),
             ("part_type", 12, "part type"), ("part_type", -128, "part type"),
             ("status", 4, "tool status"), ("status", 127, "tool status")]  # fmt: skip


@pytest.mark.parametrize(("column", "code", "what"), BAD_CODES)
def test_a_code_outside_the_list_is_a_typed_error(
    strings: pa.Table, column: str, code: int, what: str
) -> None:
    table, row = _one_code(strings, column, code)
    ids = strings.slice(row, 1).select(["session_id", "message_id"]).to_pylist()[0]
    where = f'(session "{ids["session_id"]}", message "{ids["message_id"]}", row {row}, '
    # to_sessions (the core's check) and code_names (the library's own) alike
    for read in (lambda: cc.Transcript(table).to_sessions(), lambda: code_names(table)):
        with pytest.raises(UnknownValueError) as e:
            read()
        assert (e.value.column, e.value.row) == (column, row)
        assert (e.value.session_id, e.value.message_id) == (ids["session_id"], ids["message_id"])
        assert str(e.value) == f'unknown {what} "{code}" {where}column "{column}")'
    with pytest.raises(UnknownValueError):
        replay(cc.Transcript(table), "opencode", limits=LIMITS)
    with pytest.raises(UnknownValueError) as e:
        ref.prune(table.to_pylist())
    assert (e.value.column, e.value.row, e.value.session_id) == (column, row, ids["session_id"])


@pytest.mark.parametrize("command", ["convert", "replay"])
def test_the_cli_names_a_bad_code_in_one_line(
    strings: pa.Table, command: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    table, row = _one_code(strings, "role", 9)
    src = tmp_path / "bad.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.jsonl"
    args = (["convert", str(src), str(out), "--to", "opencode"] if command == "convert" else
            ["replay", str(src), "--context", "8000", "--output-limit", "1000"])  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, *args)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f'error: UnknownValueError: {src}: unknown role "9"'), err
    assert f'row {row}, column "role"' in err and not out.exists()


def test_the_reference_reads_codes_as_names(strings: pa.Table) -> None:
    rows, coded = strings.to_pylist(), _coded(strings, 3).to_pylist()
    assert isinstance(coded[0]["role"], int)
    assert ref.pivot_starts(coded) == ref.pivot_starts(rows)
    assert ref.estimate_messages(coded) == ref.estimate_messages(rows)
    options = {"protect": 100, "minimum": 0, "protect_turns": 0}
    pruned = ref.prune(rows, **options)
    assert ref.prune(coded, **options) == pruned and any(p.pruned for p in pruned)
    assert [(s.id, len(s.messages)) for s in ref.group(coded)] == [
        (s.id, len(s.messages)) for s in ref.group(rows)
    ]
