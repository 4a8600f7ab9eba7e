"""A part row given twice inside one Parquet file (or one Ray block) is
refused, not counted twice: part ids are unique within a message
(docs/schema.md). The joins of files are tested in test_batch_paths.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import compact_parquet
from ctxcompact.batch.parquet import session_tables
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import DuplicateSessionError
from ctxcompact.scans import with_output_units


def _with_repeat(table: pa.Table, adjacent: bool) -> tuple[pa.Table, int, int]:
    """``table`` with the first part of a message of 3+ parts given again
    (right after it, or after the message's second part): the table, the
    original row and the row of the repeat."""
    mids = table["message_id"].to_pylist()
    first = next(i for i in range(len(mids) - 2) if mids[i] == mids[i + 1] == mids[i + 2])
    at = first + 1 if adjacent else first + 2
    order = [*range(at), first, *range(at, table.num_rows)]
    return table.take(pa.array(order)), first, at


def _file(tmp_path: Path, adjacent: bool = False) -> tuple[Path, pa.Table, int, int]:
    table = with_output_units(generate_table(4, 80, seed=3)).to_arrow()
    bad, first, again = _with_repeat(table, adjacent)
    path = tmp_path / "dup.parquet"
    pq.write_table(bad, path, row_group_size=50)
    return path, bad, first, again


def _names_the_repeat(e: DuplicateSessionError, bad: pa.Table, first: int, again: int) -> None:
    text = str(e)
    assert "dup.parquet" in text and f"row {again} repeats row {first}" in text
    assert e.row == again and e.column == "part_id"
    assert e.session_id == bad["session_id"][again].as_py()
    assert e.message_id == bad["message_id"][again].as_py()
    assert repr(bad["part_id"][again].as_py()) in text


@pytest.mark.parametrize("adjacent", [True, False])
@pytest.mark.parametrize("batch_rows", [7, 65_536])
def test_compact_parquet_refuses_a_part_twice_in_one_file(
    tmp_path: Path, adjacent: bool, batch_rows: int
) -> None:
    path, bad, first, again = _file(tmp_path, adjacent)
    # the report alone reads a projection of the columns (the counts, not the text)
    for dest in (None, tmp_path / "out.parquet"):
        with pytest.raises(DuplicateSessionError) as e:
            compact_parquet(path, dest, report_path=tmp_path / "r.parquet",
                            batch_rows=batch_rows, now_ms=5)  # fmt: skip
        _names_the_repeat(e.value, bad, first, again)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.parquet"]  # nothing written
    with pytest.raises(DuplicateSessionError, match=f"row {again} repeats row {first}"):
        list(session_tables(path, batch_rows=batch_rows))


@pytest.mark.parametrize(
    "command",
    [["estimate"], ["prune"], ["filter"], ["compact"], ["batch", "--report", "REPORT"]],
)
def test_the_commands_refuse_a_part_twice_in_one_file(
    tmp_path: Path, command: list[str], monkeypatch: Any, capsys: Any
) -> None:
    path, bad, first, again = _file(tmp_path)
    # the report is written inside the folder read: under a name its reader skips
    args = [str(tmp_path / "_r.parquet") if a == "REPORT" else a for a in command]
    for source in (path, tmp_path):  # the file, and its folder
        code, _, err = invoke(monkeypatch, capsys, *args, str(source))
        assert code == 1, err
        assert "DuplicateSessionError" in err and "dup.parquet" in err
        assert f"row {again} repeats row {first}" in err
        assert repr(bad["part_id"][again].as_py()) in err


def test_a_part_twice_in_a_ray_block_is_refused() -> None:
    from ctxcompact.batch.ray_data import _compact

    table = generate_table(3, 60, seed=2)
    bad, first, again = _with_repeat(table, adjacent=False)
    with pytest.raises(DuplicateSessionError) as e:
        _compact(bad, now_ms=5)
    assert f"rows {first} and {again} of a block" in str(e.value)
    assert e.value.message_id == bad["message_id"][again].as_py()


def test_part_ids_in_any_order_are_read(tmp_path: Path) -> None:
    """Unique part ids that do not ascend (random ids) are no repeat."""
    from ctxcompact.batch.parquet import repeated_part

    table = generate_table(4, 80, seed=3)
    rng = np.random.default_rng(1)
    ids = pa.array([f"{x:016x}" for x in rng.integers(0, 2**62, table.num_rows)])
    shuffled = table.set_column(table.schema.get_field_index("part_id"), "part_id", ids)
    assert pc.any(pc.less(ids.slice(1), ids.slice(0, len(ids) - 1))).as_py()
    assert repeated_part(shuffled) is None
    pq.write_table(shuffled, tmp_path / "ok.parquet")
    stats = compact_parquet(tmp_path / "ok.parquet", None, report_path=tmp_path / "r.parquet")
    assert stats.parts_in == table.num_rows
    # the same id in two messages is two parts
    same = pa.array(["p"] * table.num_rows)
    one_id = table.set_column(table.schema.get_field_index("part_id"), "part_id", same)
    mids = table["message_id"].to_pylist()
    singles = [i for i in range(len(mids)) if mids.count(mids[i]) == 1]
    assert repeated_part(one_id.take(pa.array(singles))) is None


# --- compact_parquet's two outputs: both replaced or neither -----------------------------


@pytest.mark.parametrize("links", [True, False])
@pytest.mark.parametrize("existed", [True, False])
def test_a_failed_report_rename_leaves_the_destination_as_it_was(
    tmp_path: Path, monkeypatch: Any, existed: bool, links: bool
) -> None:
    import os

    source = tmp_path / "rows.parquet"
    pq.write_table(generate_table(3, 40, seed=4), source)
    dest, report = tmp_path / "out.parquet", tmp_path / "report.parquet"
    if existed:
        dest.write_bytes(b"old parts")
        report.write_bytes(b"old report")
    rename = os.replace

    def failing(src: Any, dst: Any) -> None:
        if ".report-tmp-" in str(src):
            raise PermissionError(13, "Permission denied", str(dst))
        rename(src, dst)

    def no_link(src: Any, dst: Any) -> None:
        raise OSError(1, "Operation not permitted", str(src))

    monkeypatch.setattr(os, "replace", failing)
    if not links:
        monkeypatch.setattr(os, "link", no_link)
    with pytest.raises(PermissionError):
        compact_parquet(source, dest, report_path=report, now_ms=5)
    names = ["out.parquet", "report.parquet", "rows.parquet"] if existed else ["rows.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names  # no temporary file left
    if existed:
        assert dest.read_bytes() == b"old parts" and report.read_bytes() == b"old report"
    monkeypatch.setattr(os, "replace", rename)
    stats = compact_parquet(source, dest, report_path=report, now_ms=5)
    assert pq.read_table(dest).num_rows == stats.parts_out
    assert pq.read_table(report).num_rows == stats.sessions
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out.parquet", "report.parquet", "rows.parquet"
    ]  # fmt: skip


@pytest.mark.parametrize("to", ["openai-chat", "parquet"])
def test_convert_refuses_a_part_twice_in_one_file(
    tmp_path: Path, to: str, monkeypatch: Any, capsys: Any
) -> None:
    folder = tmp_path / "in"  # the output outside it: the folder would read it next time
    folder.mkdir()
    path, bad, first, again = _file(folder)
    out = tmp_path / "out" / f"converted.{'parquet' if to == 'parquet' else 'jsonl'}"
    out.parent.mkdir()
    for source in (path, folder):  # the file, and its folder
        code, _, err = invoke(monkeypatch, capsys, "convert", str(source), str(out), "--to", to)
        assert code == 1, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "DuplicateSessionError" in err and "dup.parquet" in err
        assert f"row {again} repeats row {first}" in err
        assert repr(bad["part_id"][again].as_py()) in err
        assert bad["session_id"][again].as_py() in err
        assert not out.exists() and list(out.parent.iterdir()) == []  # nothing written
