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
from ctxcompact.scans import reference as ref
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


def _halves(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``table`` cut between two sessions: the first session, then the rest."""
    sids = table.column("session_id").to_pylist()
    cut = sids.index(next(s for s in sids if s != sids[0]))
    return table.slice(0, cut), table.slice(cut)


def _outputs(folder: Path, monkeypatch: Any, capsys: Any, tmp_path: Path) -> dict[str, Any]:
    """What estimate, replay, convert and batch make of ``folder``."""
    got: dict[str, Any] = {}
    for name, args in (("estimate", ["estimate", str(folder), "--json"]),
                       ("replay", ["replay", str(folder), "--context", "8000",
                                   "--output-limit", "1000", "--json"])):  # fmt: skip
        code, out, err = invoke(monkeypatch, capsys, *args)
        assert code == 0, err
        got[name] = json.loads(out)
    converted = tmp_path / f"{folder.name}.jsonl"
    code, _, err = invoke(monkeypatch, capsys, "convert", str(folder), str(converted),
                          "--to", "opencode")  # fmt: skip
    assert code == 0, err
    got["convert"] = converted.read_bytes()
    report = tmp_path / f"{folder.name}-report.parquet"
    code, _, err = invoke(monkeypatch, capsys, "batch", str(folder), "--report", str(report),
                          "--batch-rows", "7")  # fmt: skip
    assert code == 0, err
    got["batch"] = pq.read_table(report)
    return got


def test_a_folder_of_coded_and_string_files_reads_as_its_strings(
    strings: pa.Table, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """docs/schema.md allows role / part_type / status as names or int8
    codes: a folder with a file of each is read as the all-strings one
    (the codes read as names before the files are joined), by the commands
    that join the files (estimate, replay, convert) and by batch, which
    streams them; either file coded, both coded."""
    first, rest = _halves(strings)
    folders = {"strings": (first, rest), "second-coded": (first, _coded(rest)),
               "first-coded": (_coded(first), rest),
               "both-coded": (_coded(first), _coded(rest))}  # fmt: skip
    got = {}
    for name, (a, b) in folders.items():
        (tmp_path / name).mkdir()
        pq.write_table(a, tmp_path / name / "a.parquet")
        pq.write_table(b, tmp_path / name / "b.parquet")
        got[name] = _outputs(tmp_path / name, monkeypatch, capsys, tmp_path)
    assert got["strings"]["estimate"]["sessions"] == 2
    assert got["strings"]["replay"]["policies"][0]["calls"] > 0
    for name in folders:
        for what, value in got[name].items():
            want = got["strings"][what]
            assert value.equals(want) if what == "batch" else value == want, (name, what)


def test_a_coded_parquet_beside_session_files_reads_as_names(
    strings: pa.Table, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Parquet and session files given together are joined too."""
    first, _ = _halves(strings)
    pq.write_table(first, tmp_path / "s.parquet")
    pq.write_table(_coded(first), tmp_path / "c.parquet")
    run = str(RUNS[1])
    replays = []
    for name in ("s", "c"):
        src = str(tmp_path / f"{name}.parquet")
        code, out, err = invoke(monkeypatch, capsys, "replay", src, run, "--context", "8000",
                                "--output-limit", "1000", "--json")  # fmt: skip
        assert code == 0, err
        replays.append(json.loads(out))
    assert replays[0] == replays[1] and replays[0]["policies"][0]["sessions"] == 2


@pytest.mark.parametrize("command", ["estimate", "replay", "batch"])
def test_a_mixed_folder_names_a_bad_code_by_file_and_row(
    strings: pa.Table, command: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    first, rest = _halves(strings)
    bad, row = _one_code(rest, "role", 9)
    pq.write_table(first, tmp_path / "a.parquet")
    pq.write_table(bad, tmp_path / "b.parquet")
    args = {"estimate": ["estimate", str(tmp_path)],
            "replay": ["replay", str(tmp_path), "--context", "8000", "--output-limit", "1000"],
            "batch": ["batch", str(tmp_path), "--report", str(tmp_path / "_r.parquet"),
                      "--batch-rows", "7"]}[command]  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, *args)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f'error: UnknownValueError: {tmp_path / "b.parquet"}: unknown role "9"')
    assert f'row {row}, column "role"' in err, err


def test_a_column_of_another_type_still_disagrees(
    strings: pa.Table, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Only codes beside names are read alike: a role of int32 (no form
    docs/schema.md gives) beside strings is still refused by the join."""
    first, rest = _halves(strings)
    codes = _coded(rest).column("role").cast(pa.int32())
    rest = rest.set_column(rest.schema.get_field_index("role"), "role", codes)
    pq.write_table(first, tmp_path / "a.parquet")
    pq.write_table(rest, tmp_path / "b.parquet")
    code, _, err = invoke(monkeypatch, capsys, "estimate", str(tmp_path))
    assert code == 1, err
    assert "SchemaError" in err and "columns do not agree" in err and "int32" in err, err
    # batch streams the files: it casts each to the first's schema, never codes to names
    code, _, err = invoke(monkeypatch, capsys, "batch", str(tmp_path), "--report",
                          str(tmp_path / "_r.parquet"))  # fmt: skip
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(
        f"error: SchemaError: {tmp_path / 'b.parquet'}: its schema does not "
        "match the first file's (column 'role' is int32, not string)"
    ), err
