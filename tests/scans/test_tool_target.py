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
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import TranscriptError
from ctxcompact.policy import Policy
from ctxcompact.scans import prune, verify_output_units, with_tool_targets
from ctxcompact.scans.reference import call_target
from ctxcompact.transcript import (
    SCHEMA,
    TARGETS_DICTIONARY,
    TOOL_TARGET,
    Transcript,
    encode_targets,
    targets_as_dictionary,
)

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
    targeted = with_tool_targets(table).to_arrow()[TOOL_TARGET]
    assert pa.types.is_dictionary(targeted.type)
    assert targeted.to_pylist() == made[TOOL_TARGET].to_pylist()


def duplicated(values: list[str | None]) -> pa.DictionaryArray:
    """A dictionary holding each value twice (rows alternate between the
    copies) and a malformed value no row uses."""
    distinct = sorted({v for v in values if v is not None})
    keys = [None if v is None else 1 + 2 * distinct.index(v) + i % 2 for i, v in enumerate(values)]
    dictionary = ["not a target", *(v for v in distinct for _ in range(2))]
    return pa.DictionaryArray.from_arrays(pa.array(keys, pa.int16()), pa.array(dictionary))


def encodings(values: list[str | None]) -> dict[str, pa.ChunkedArray]:
    """The column as plain strings, one dictionary, two chunks with a
    dictionary each (the second holding every value twice)."""
    mid = len(values) // 2
    first = pa.array(values[:mid], pa.large_string()).dictionary_encode()
    return {
        "plain": pa.chunked_array([pa.array(values, pa.large_string())]),
        "dictionary": pa.chunked_array([pa.array(values, pa.string()).dictionary_encode()]),
        "duplicated": pa.chunked_array([duplicated(values)]),
        "two dictionaries": pa.chunked_array([first, duplicated(values[mid:]).cast(first.type)]),
    }


@pytest.mark.parametrize("config", [SUPERSEDE, "aggressive"])
def test_supersession_with_the_column_selects_what_it_selects_without(config: object) -> None:
    table = calls_table()
    plain = prune(table, config)
    assert plain.pruned > 0
    targeted = with_tool_targets(table).to_arrow()
    assert pa.types.is_dictionary(targeted.schema.field(TOOL_TARGET).type)
    values = targeted[TOOL_TARGET].to_pylist()
    # in full, and with half the rows or the oldest left to be worked out
    # from their inputs (a session read by id until its first null row)
    for holes in ([], range(1, len(values), 2), range(len(values) // 3)):
        column = [None if i in holes else v for i, v in enumerate(values)]
        for how, encoded in encodings(column).items():
            t = targeted.set_column(targeted.schema.get_field_index(TOOL_TARGET), TOOL_TARGET,
                                    encoded)  # fmt: skip
            got = prune(t, config)
            assert got.rows.equals(plain.rows), how
            assert got.sessions.equals(plain.sessions), how


def test_the_dictionary_survives_parquet(tmp_path: Path) -> None:
    table = with_tool_targets(calls_table()).to_arrow()
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    back = pq.read_table(path)
    assert pa.types.is_dictionary(back.schema.field(TOOL_TARGET).type)
    assert back[TOOL_TARGET].to_pylist() == table[TOOL_TARGET].to_pylist()
    assert prune(back, SUPERSEDE).rows.equals(prune(table, SUPERSEDE).rows)


def test_a_file_with_plain_targets_joins_one_with_a_dictionary(tmp_path: Path) -> None:
    from ctxcompact.cli.inputs import _load_many

    table = with_tool_targets(calls_table()).to_arrow()
    sessions = table["session_id"].to_pylist()
    cut = sessions.index(sessions[-1])  # the last session in a file of its own
    old, new = tmp_path / "old.parquet", tmp_path / "new.parquet"
    head = table.slice(0, cut)
    index = head.schema.get_field_index(TOOL_TARGET)
    plain = head.set_column(index, TOOL_TARGET, head[TOOL_TARGET].cast(pa.large_string()))
    pq.write_table(plain, old)  # as Transcript.from_sessions and ingest make it
    pq.write_table(table.slice(cut), new)
    joined = _load_many([old, new], None).to_arrow()
    assert pa.types.is_dictionary(joined.schema.field(TOOL_TARGET).type)
    assert joined[TOOL_TARGET].to_pylist() == table[TOOL_TARGET].to_pylist()


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
    assert pa.types.is_dictionary(fresh.schema.field(TOOL_TARGET).type)  # as it was
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


@pytest.mark.parametrize("first", ["plain", "dictionary", "absent"])
def test_parquet_files_with_the_column_in_either_form_compact_as_one(
    tmp_path: Path, first: str
) -> None:
    from ctxcompact.batch import compact_parquet
    from ctxcompact.config import CompactionConfig

    table = with_tool_targets(calls_table()).to_arrow()
    sessions = table["session_id"].to_pylist()
    cut = sessions.index(sessions[-1])
    head, tail = table.slice(0, cut), table.slice(cut)
    index = head.schema.get_field_index(TOOL_TARGET)
    if first == "plain":
        head = head.set_column(index, TOOL_TARGET, head[TOOL_TARGET].cast(pa.large_string()))
    elif first == "dictionary":  # then the second file lacks it
        tail = tail.drop_columns([TOOL_TARGET])
    else:
        head = head.drop_columns([TOOL_TARGET])
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(head, paths[0])
    pq.write_table(tail, paths[1])
    whole = tmp_path / "whole.parquet"
    pq.write_table(table, whole)
    config = CompactionConfig(policy=SUPERSEDE)
    want = compact_parquet(whole, None, config, report_path=tmp_path / "want.parquet")
    got = compact_parquet(paths, None, config, report_path=tmp_path / "got.parquet")
    assert got.tokens_pruned == want.tokens_pruned > 0
    assert pq.read_table(tmp_path / "got.parquet").equals(pq.read_table(tmp_path / "want.parquet"))


def one_dictionary(column: pa.ChunkedArray) -> bool:
    """``TARGETS_DICTIONARY`` with every chunk sharing one dictionary."""
    if column.type != TARGETS_DICTIONARY.type:
        return False
    dictionaries = {tuple(b.address for b in c.dictionary.buffers() if b) for c in column.chunks}
    return len(dictionaries) <= 1


def test_every_table_the_library_makes_holds_the_targets_as_one_dictionary(
    tmp_path: Path,
) -> None:
    from ctxcompact import formats
    from ctxcompact.formats import iter_sessions, read_jsonl, read_sessions

    sessions = Transcript(calls_table()).to_sessions()
    made = Transcript.from_sessions(sessions).to_arrow()
    assert made.schema.field(TOOL_TARGET) == TARGETS_DICTIONARY == SCHEMA.field(TOOL_TARGET)
    assert one_dictionary(made[TOOL_TARGET])
    formats.write(sessions, tmp_path / "s.jsonl", "opencode")
    # small chunks read on one thread or two: chunked differently, equal all the same
    reads = [read_jsonl(tmp_path, threads=t, chunk_bytes=4096).table for t in (1, 2)]
    assert reads[0][TOOL_TARGET].num_chunks > 1
    assert all(one_dictionary(r[TOOL_TARGET]) for r in reads)
    assert reads[0].equals(reads[1])
    assert reads[0][TOOL_TARGET].to_pylist() == made[TOOL_TARGET].to_pylist()
    # windows, and JSONL sessions joined with a document's
    windows = list(iter_sessions(tmp_path, window_bytes=1 << 12))
    assert len(windows) > 1 and all(one_dictionary(w.table[TOOL_TARGET]) for w in windows)
    doc = sessions[0].model_copy(update={"info": sessions[0].info.model_copy(update={"id": "d"})})
    formats.write([doc], tmp_path / "doc.json", "openai-chat")
    mixed = read_sessions(tmp_path, on_error="skip").table
    assert len(pa.compute.unique(mixed["session_id"])) > len(sessions)
    assert one_dictionary(mixed[TOOL_TARGET])
    # added to a table without it, and worked out again for new inputs
    assert one_dictionary(with_tool_targets(calls_table()).to_arrow()[TOOL_TARGET])
    edited = Transcript(made).with_column("input", made["input"])
    assert edited.to_arrow().equals(made)


def test_targets_given_in_any_form_become_the_one_dictionary() -> None:
    values = with_tool_targets(calls_table()).to_arrow()[TOOL_TARGET].to_pylist()
    want = encode_targets(pa.array(values, pa.large_string()))
    assert one_dictionary(want) and want.to_pylist() == values
    mid = len(values) // 2
    forms = {
        "plain, two chunks": pa.chunked_array([pa.array(values[:mid]), pa.array(values[mid:])]),
        "a Parquet read's": pa.chunked_array(
            [pa.array(values[:mid]).dictionary_encode(), pa.array(values[mid:]).dictionary_encode()]
        ),
        "duplicated values": pa.chunked_array([duplicated(values)]),
        "a view": pa.chunked_array([pa.array(values, pa.string_view())]),
    }
    for how, column in forms.items():
        assert encode_targets(column).equals(want), how
        table = pa.table({"x": pa.array(range(len(values))), TOOL_TARGET: column})
        table = targets_as_dictionary(table)
        assert table.schema.field(TOOL_TARGET) == TARGETS_DICTIONARY, how
        assert table[TOOL_TARGET].equals(want), how
        given = Transcript(calls_table()).with_column(TOOL_TARGET, column).to_arrow()
        assert given[TOOL_TARGET].equals(want), how
    # not strings: left for the scans to name
    numbers = pa.table({TOOL_TARGET: pa.array([1, 2])})
    assert targets_as_dictionary(numbers) is numbers
    assert encode_targets(pa.chunked_array([], pa.large_string())).type == TARGETS_DICTIONARY.type


@pytest.mark.parametrize("written", ["dictionary", "plain"])
def test_parquet_reads_give_back_the_table_written(tmp_path: Path, written: str) -> None:
    from ctxcompact.batch.parquet import session_tables
    from ctxcompact.cli.inputs import _read

    table = Transcript.from_sessions(Transcript(calls_table()).to_sessions()).to_arrow()
    path = tmp_path / "t.parquet"
    index = table.schema.get_field_index(TOOL_TARGET)
    plain = table.set_column(index, TOOL_TARGET, table[TOOL_TARGET].cast(pa.large_string()))
    # several row groups: a dictionary<int32, string> each when read back
    pq.write_table(table if written == "dictionary" else plain, path, row_group_size=40)
    assert pq.ParquetFile(path).num_row_groups > 1
    back = _read(path, None).to_arrow()
    assert one_dictionary(back[TOOL_TARGET])
    assert back.equals(table)
    batches = list(session_tables(path, batch_rows=50))
    assert len(batches) > 1
    for batch in batches:
        assert batch.schema.field(TOOL_TARGET) == TARGETS_DICTIONARY
    joined = targets_as_dictionary(pa.concat_tables(batches))  # a dictionary per batch
    assert joined.equals(table)
    # supersession selects the same in every form (the plain one by its strings)
    want = prune(table, SUPERSEDE).rows
    assert want.equals(prune(plain, SUPERSEDE).rows)
    assert want.equals(prune(back, SUPERSEDE).rows)
    assert want.equals(prune(Transcript.from_arrow(plain), SUPERSEDE).rows)
