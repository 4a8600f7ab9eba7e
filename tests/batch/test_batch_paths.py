"""Batch paths found by a new-user pass: outputs checked as the CLI checks
them, one rule for a Parquet folder (files left out are named), report-only
runs without the output text, errors naming the file and row of the repeat,
and a part read twice where files join refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import compact_parquet
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import (
    DuplicateSessionError,
    MissingColumnError,
    NonContiguousError,
    OutputConflictError,
    UnknownValueError,
)
from ctxcompact.scans import with_output_units


@pytest.fixture
def rows(tmp_path: Path) -> Path:
    path = tmp_path / "rows.parquet"
    pq.write_table(with_output_units(generate_table(6, 100, seed=2)).to_arrow(), path)
    return path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- 1. an output that is an input ------------------------------------------------------


def test_an_input_is_never_replaced_by_the_python_api(tmp_path: Path, rows: Path) -> None:
    before = rows.read_bytes()
    link = tmp_path / "link.parquet"
    link.symlink_to(rows)
    folder = tmp_path / "shards"
    folder.mkdir()
    shutil.copy(rows, folder / "part-0.parquet")
    inside = (folder / "part-0.parquet").read_bytes()
    for source, dest in [(rows, rows), (rows, link), ([rows], rows), (folder,
                         folder / "part-0.parquet")]:  # fmt: skip
        with pytest.raises(OutputConflictError, match="is also an input: it would be replaced"):
            compact_parquet(source, dest)
        with pytest.raises(OutputConflictError) as e:
            compact_parquet(source, None, report_path=dest)
        assert e.value.column == "report_path"
    assert rows.read_bytes() == before and (folder / "part-0.parquet").read_bytes() == inside
    # a file the folder's rule does not read is no input: it may be written
    compact_parquet(folder, folder / "_report.parquet")


def test_an_output_the_source_folder_would_read_next_time_is_refused(
    tmp_path: Path, rows: Path
) -> None:
    # A new output named as the folder's data would poison it: every later run
    # on the folder would read it (pass 36, F1). Refused before any work.
    folder = tmp_path / "shards"
    (folder / "day=1").mkdir(parents=True)
    shutil.copy(rows, folder / "part-0.parquet")
    before = _files(folder)
    for name in ("compacted.parquet", "day=1/report.parquet"):
        with pytest.raises(OutputConflictError, match="would be read as an input of") as e:
            compact_parquet(folder, folder / name)
        assert e.value.column == "destination" and "'_' or '.'" in str(e.value)
        with pytest.raises(OutputConflictError) as e:
            compact_parquet([folder], tmp_path / "out.parquet", report_path=folder / name)
        assert e.value.column == "report_path"
    # a link outside the folder to a new file in it is refused too
    link = tmp_path / "link.parquet"
    link.symlink_to(folder / "new.parquet")
    with pytest.raises(OutputConflictError, match="next time"):
        compact_parquet(folder, link)
    assert _files(folder) == before and not (tmp_path / "out.parquet").exists()
    # names the folder's reader skips may be written, and the folder reads as before
    first = compact_parquet(folder, folder / "_compacted.parquet",
                            report_path=folder / ".report.parquet")  # fmt: skip
    again = compact_parquet(folder, folder / "_compacted.parquet",
                            report_path=folder / ".report.parquet")  # fmt: skip
    assert (first.files, first.sessions) == (again.files, again.sessions) == (1, 6)


def test_a_report_only_run_writes_no_part_and_says_so(tmp_path: Path, rows: Path) -> None:
    lean = compact_parquet(rows, None, report_path=tmp_path / "r.parquet")
    full = compact_parquet(rows, tmp_path / "o.parquet")
    assert lean.parts_out is None and lean.to_dict()["parts_out"] is None
    assert full.parts_out == pq.read_metadata(tmp_path / "o.parquet").num_rows
    # bytes_read: the Arrow columns read (the old name still reads it)
    assert 0 < lean.bytes_read < full.bytes_read and full.bytes_in == full.bytes_read
    assert "bytes_in" not in full.to_dict()


# --- 2. one file for both outputs ------------------------------------------------------


def test_one_file_for_both_outputs_is_refused_before_any_work(tmp_path: Path, rows: Path) -> None:
    out = tmp_path / "z.parquet"
    with pytest.raises(OutputConflictError, match="give each output its own file") as e:
        compact_parquet(rows, out, report_path=out)
    assert e.value.column == "report_path" and "destination" in str(e.value)
    assert not out.exists()
    assert _files(tmp_path) == ["rows.parquet"]


def test_a_failed_run_leaves_no_output_nor_temporary_file(tmp_path: Path, rows: Path) -> None:
    bad = generate_table(2, 50, seed=4)
    roles = bad["role"].cast(pa.string()).to_pylist()
    roles[-1] = "robot"
    bad = bad.set_column(bad.schema.get_field_index("role"), "role", pa.array(roles))
    sids = ["z" + s for s in bad["session_id"].cast(pa.string()).to_pylist()]  # sessions of its own
    bad = bad.set_column(bad.schema.get_field_index("session_id"), "session_id", pa.array(sids))
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(rows, folder / "a.parquet")
    pq.write_table(bad, folder / "b.parquet")
    with pytest.raises(UnknownValueError, match=r"b\.parquet"):
        compact_parquet(folder, tmp_path / "out.parquet", report_path=tmp_path / "r.parquet",
                        batch_rows=64)  # fmt: skip
    assert _files(tmp_path) == ["in", "rows.parquet"]


# --- 9. an output that cannot be written -------------------------------------------------


def test_an_unwritable_destination_is_named_before_any_work(tmp_path: Path, rows: Path) -> None:
    with pytest.raises(OSError) as e:
        compact_parquet(rows, "/proc/x")
    assert "/proc/x" in str(e.value) and "tmp" not in str(e.value)
    with pytest.raises(OSError, match="does not exist"):
        compact_parquet(rows, tmp_path / "no" / "out.parquet")


# --- 3. one rule for a Parquet folder ----------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Path, pa.Table]:
    """A folder holding: two shards read, and files the rule leaves out."""
    table = generate_table(6, 100, seed=5)
    half = table.num_rows // 2
    ids = table["session_id"].cast(pa.string()).to_pylist()
    while ids[half] == ids[half - 1]:
        half += 1
    folder = tmp_path / "ds"
    (folder / "day=1").mkdir(parents=True)
    pq.write_table(table.slice(0, half), folder / "day=1" / "part-0.parquet")
    pq.write_table(table.slice(half), folder / "day=1" / "part-1.parquet")
    pq.write_table(table.slice(0, 10), folder / "_part-2.parquet")  # metadata by convention
    pq.write_table(table.slice(0, 10), folder / "part-3.pq")  # not the extension
    (folder / "_SUCCESS").write_text("")
    (folder / "README.md").write_text("notes")
    return folder, table


LEFT_OUT = {"_part-2.parquet", "part-3.pq", "_SUCCESS", "README.md"}


def test_every_path_reads_the_same_files_of_a_folder_and_names_the_rest(
    tmp_path: Path, mixed: tuple[Path, pa.Table], monkeypatch: Any, capsys: Any
) -> None:
    folder, table = mixed
    want = compact_batch(table, now_ms=1)
    stats = compact_parquet(folder, None, report_path=tmp_path / "r.parquet", now_ms=1)
    assert stats.sessions == want.num_rows and stats.files == 2
    assert {Path(f.path).name for f in stats.skipped} == LEFT_OUT
    assert all(f.status == "skipped" and f.reason for f in stats.skipped)
    sessions = []
    for command in (["estimate"], ["compact"], ["prune"], ["batch", "--report",
                    str(tmp_path / "r2.parquet")]):  # fmt: skip
        code, out, err = invoke(monkeypatch, capsys, *command, str(folder), "--json")
        assert code == 0, err
        sessions.append(__import__("json").loads(out)["sessions"])
        assert {Path(line.split(": ")[1]).name for line in err.splitlines()
                if line.startswith("skipped: ")} == LEFT_OUT, (command, err)  # fmt: skip
    assert sessions == [want.num_rows] * 4
    # no column from the folder names (day=1): the same columns as batch writes
    code, _, err = invoke(monkeypatch, capsys, "compact", str(folder), "--output",
                          str(tmp_path / "c.parquet"))  # fmt: skip
    assert code == 0, err
    assert "day" not in pq.read_schema(tmp_path / "c.parquet").names


# --- 5. a report-only run without the output text ----------------------------------------


def test_a_report_only_run_needs_no_output_column_when_counted(tmp_path: Path) -> None:
    table = with_output_units(generate_table(5, 150, seed=8)).to_arrow()
    pq.write_table(table.drop_columns(["output"]), tmp_path / "counts.parquet")
    compact_parquet(tmp_path / "counts.parquet", None, report_path=tmp_path / "r.parquet",
                    now_ms=1)  # fmt: skip
    want = compact_batch(table, now_ms=1)
    got = pq.read_table(tmp_path / "r.parquet")
    assert got["tokens_after"].to_pylist() == want["tokens_after"].to_pylist()
    # the compacted rows carry the text: a destination still needs it
    with pytest.raises(MissingColumnError) as e:
        compact_parquet(tmp_path / "counts.parquet", tmp_path / "out.parquet")
    assert e.value.column == "output"


def test_a_report_only_batch_command_needs_no_output_column(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    table = with_output_units(generate_table(5, 150, seed=8)).to_arrow()
    pq.write_table(table.drop_columns(["output"]), tmp_path / "counts.parquet")
    code, _, err = invoke(monkeypatch, capsys, "batch", str(tmp_path / "counts.parquet"),
                          "--report", str(tmp_path / "r.parquet"))  # fmt: skip
    assert code == 0, err


# --- 7 (#7). a message repeated in another file ------------------------------------------


def test_a_message_repeated_in_the_next_file_is_named_there(tmp_path: Path) -> None:
    table = generate_table(4, 100, seed=6)
    ids = table["session_id"].cast(pa.string())
    last = ids[-1].as_py()
    folder = tmp_path / "dup"
    folder.mkdir()
    pq.write_table(table, folder / "a.parquet")
    pq.write_table(table.filter(pc.equal(ids, last)), folder / "b.parquet")
    with pytest.raises(NonContiguousError) as e:
        compact_parquet(folder, None, report_path=tmp_path / "r.parquet")
    assert "b.parquet" in str(e.value) and "a.parquet" not in str(e.value)
    assert e.value.row == 0 and "row 0" in str(e.value)


# --- 4. a part read twice where two files join ---------------------------------------------


@pytest.mark.parametrize("overlap", [1, 3])
def test_a_part_repeated_across_a_file_join_is_refused(
    tmp_path: Path, overlap: int, monkeypatch: Any, capsys: Any
) -> None:
    table = generate_table(3, 100, seed=9)
    folder = tmp_path / "dup"
    folder.mkdir()
    # the last message of the first file, again at the start of the next
    mids = table["message_id"].cast(pa.string()).to_pylist()
    tail = table.num_rows - 1
    while tail > 0 and mids[tail - 1] == mids[-1]:
        tail -= 1
    assert table.num_rows - tail >= 1
    start = max(tail, table.num_rows - overlap)
    pq.write_table(table, folder / "a.parquet")
    pq.write_table(table.slice(start), folder / "b.parquet")
    for dest in (None, tmp_path / "out.parquet"):
        with pytest.raises(DuplicateSessionError) as e:
            compact_parquet(folder, dest, report_path=tmp_path / "r.parquet")
        text = str(e.value)
        assert "a.parquet" in text and "b.parquet" in text and e.value.column == "part_id"
        assert e.value.session_id == table["session_id"][-1].as_py()
        assert e.value.message_id == mids[-1] and table["part_id"][start].as_py() in text
    assert _files(tmp_path) == ["dup"]
    for command in (["estimate"], ["batch", "--report", str(tmp_path / "r.parquet")]):
        code, _, err = invoke(monkeypatch, capsys, *command, str(folder))
        assert code == 1 and "DuplicateSessionError" in err and "b.parquet" in err


def test_a_message_continued_into_the_next_file_is_read(tmp_path: Path) -> None:
    """A message's parts split between two files (no part twice) are one message."""
    table = generate_table(3, 100, seed=9)
    mids = table["message_id"].cast(pa.string()).to_pylist()
    cut = next(i for i in range(1, len(mids)) if mids[i] == mids[i - 1])
    folder = tmp_path / "split"
    folder.mkdir()
    pq.write_table(table.slice(0, cut), folder / "a.parquet")
    pq.write_table(table.slice(cut), folder / "b.parquet")
    stats = compact_parquet(folder, None, report_path=tmp_path / "r.parquet", now_ms=1)
    assert stats.parts_in == table.num_rows
    assert os.path.exists(tmp_path / "r.parquet")
