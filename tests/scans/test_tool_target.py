"""Worked out once: every table the library makes carries ``tool_target``,
each tool call's supersession target, and supersession reads it instead of
parsing the inputs, with the same results as without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.errors import TranscriptError
from ctxcompact.policy import Policy
from ctxcompact.scans import prune, verify_output_units, with_tool_targets
from ctxcompact.testing.reference import call_target
from ctxcompact.testing.synthetic import generate_table
from ctxcompact.transcript import SCHEMA, TOOL_TARGET, Transcript

SUPERSEDE = Policy(supersede=True, protect=10**6, minimum=0, turn="step", protect_turns=0)


def reference_target(tool: str | None, input_json: str | None) -> str:
    """The column's value by its documented format, from the reference's target."""
    target = call_target(tool, input_json)
    if target is None:
        return ""
    if target[0] == "path":
        return f"file:{target[1]}"
    name = target[1]
    return f"cmd:{len(name.encode())}:{name}:{target[2]}"


def calls_table() -> pa.Table:
    """Sessions of repeated reads, edits and commands, some escaped, of tools
    whose names hold the separator."""
    inputs = [
        ("read", {"filePath": "src/a.py"}),
        ("edit", {"file_path": "src/a.py", "old": "x"}),
        ("bash", {"command": "pytest -q"}),
        ("bash", {"command": "pytest -q"}),
        ("sh:x", {"cmd": "y"}),
        ("sh", {"cmd": "x:y"}),
        ("read", {"path": "docs/é 😀.md"}),
        ("grep", {"pattern": "TODO"}),
        ("read", {"path": "docs/é 😀.md"}),
    ]
    table = generate_table(3, 60, seed=9, mean_output_chars=400)
    tools, calls = table["tool"].to_pylist(), table["input"].to_pylist()
    k = 0
    for row, kind in enumerate(table["part_type"].to_pylist()):
        if kind == "tool":
            tools[row], args = inputs[k % len(inputs)]
            calls[row] = json.dumps(args, ensure_ascii=k % 2 == 0)
            k += 1
    table = table.set_column(table.schema.get_field_index("tool"), "tool", pa.array(tools))
    index = table.schema.get_field_index("input")
    return table.set_column(index, "input", pa.array(calls, pa.large_string()))


def test_sessions_made_into_a_table_carry_their_targets() -> None:
    table = Transcript(calls_table()).to_arrow()
    sessions = Transcript(table).to_sessions()
    made = Transcript.from_sessions(sessions).to_arrow()
    assert made.schema.field(TOOL_TARGET).type == SCHEMA.field(TOOL_TARGET).type
    assert made[TOOL_TARGET].null_count == 0
    calls = zip(made["tool"].to_pylist(), made["input"].to_pylist(), strict=True)
    want = [reference_target(tool, input_json) for tool, input_json in calls]
    assert made[TOOL_TARGET].to_pylist() == want
    assert "cmd:4:sh:x:y" in want and "cmd:2:sh:x:y" in want  # kept apart by the length
    assert with_tool_targets(table).to_arrow()[TOOL_TARGET].equals(made[TOOL_TARGET])


@pytest.mark.parametrize("config", [SUPERSEDE, "aggressive"])
def test_supersession_with_the_column_selects_what_it_selects_without(config: object) -> None:
    table = calls_table()
    plain = prune(table, config)
    assert plain.pruned > 0
    targeted = with_tool_targets(table).to_arrow()
    # and with half the rows left to be worked out from their inputs
    values = targeted[TOOL_TARGET].to_pylist()
    half = [None if i % 2 else v for i, v in enumerate(values)]
    holed = targeted.set_column(targeted.schema.get_field_index(TOOL_TARGET),
                                TOOL_TARGET, pa.array(half, pa.large_string()))  # fmt: skip
    for t in (targeted, holed):
        got = prune(t, config)
        assert got.rows.equals(plain.rows) and got.sessions.equals(plain.sessions)


def test_the_scan_reads_the_column() -> None:
    # A column naming one target everywhere makes every older call stale:
    # what it selects differs, so the scan reads it and not the inputs.
    table = with_tool_targets(calls_table()).to_arrow()
    one = pa.array(["file:x"] * table.num_rows, pa.large_string())
    same = table.set_column(table.schema.get_field_index(TOOL_TARGET), TOOL_TARGET, one)
    assert prune(same, SUPERSEDE).pruned > prune(table, SUPERSEDE).pruned


def test_a_stale_target_is_caught_by_verify_and_new_inputs_work_it_out_again() -> None:
    transcript = with_tool_targets(calls_table())
    table = transcript.to_arrow()
    verify_output_units(table, sample=table.num_rows)
    inputs = table["input"].to_pylist()
    row = next(i for i, v in enumerate(inputs) if v and "pytest" in v)
    inputs[row] = json.dumps({"command": "make"})
    edited = table.set_column(table.schema.get_field_index("input"), "input",
                              pa.array(inputs, pa.large_string()))  # fmt: skip
    with pytest.raises(TranscriptError, match=rf"tool_target of row {row} is 'cmd:4:bash:pytest"):
        verify_output_units(edited, sample=table.num_rows)
    with pytest.raises(TranscriptError, match="stale") as caught:
        prune(edited, SUPERSEDE, verify=True)
    assert caught.value.row == row and caught.value.column == TOOL_TARGET
    # Replacing the inputs through the transcript works the targets out again.
    fresh = transcript.with_column("input", pa.array(inputs, pa.large_string())).to_arrow()
    assert fresh[TOOL_TARGET][row].as_py() == "cmd:4:bash:make"
    verify_output_units(fresh, sample=fresh.num_rows)


def test_a_malformed_target_is_an_error_naming_its_row() -> None:
    table = with_tool_targets(calls_table()).to_arrow()
    values = table[TOOL_TARGET].to_pylist()
    row = max(i for i, v in enumerate(values) if v)
    values[row] = "src/a.py"
    bad = table.set_column(table.schema.get_field_index(TOOL_TARGET), TOOL_TARGET,
                           pa.array(values, pa.large_string()))  # fmt: skip
    with pytest.raises(TranscriptError, match="unknown tool target") as caught:
        prune(bad, SUPERSEDE)
    assert caught.value.row == row and caught.value.column == TOOL_TARGET


def test_cli_verify_checks_the_targets(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    table = with_tool_targets(calls_table()).to_arrow()
    values = table[TOOL_TARGET].to_pylist()
    row = max(i for i, v in enumerate(values) if v)
    values[row] = "file:elsewhere.py"
    path = tmp_path / "stale.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index(TOOL_TARGET), TOOL_TARGET,
                                    pa.array(values, pa.large_string())), path)  # fmt: skip
    assert invoke(monkeypatch, capsys, "prune", str(path))[0] == 0  # trusted without --verify
    code, _, err = invoke(monkeypatch, capsys, "prune", str(path), "--verify")
    assert code == 1, err
    assert f"{path}: tool_target of row {row} is 'file:elsewhere.py'" in err
