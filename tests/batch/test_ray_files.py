"""The files a Ray run reads and the names its mirrored outputs take
(``batch.ray_files``; no Ray needed)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.ray_files import SourceFile, groups, source_files
from ctxcompact.errors import DatasetError


def _write(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"session_id": ["s"]}), path)


def test_a_folders_files_in_order_under_their_names_in_it(tmp_path: Path) -> None:
    for name in ("b.parquet", "a.parquet", "day/c.parquet", "_meta.parquet", ".x/d.parquet"):
        _write(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not data")
    files = source_files(tmp_path)
    assert [f.name for f in files] == ["a.parquet", "b.parquet", "day/c.parquet"]
    assert [f.path for f in files] == [str(tmp_path / f.name) for f in files]


def test_several_folders_keep_each_files_name_apart(tmp_path: Path) -> None:
    """Two days' folders holding files of the same names: each folder's files
    go under its own name, so no output file is written twice."""
    for day in ("mon", "tue"):
        _write(tmp_path / day / "part-0.parquet")
    files = source_files([tmp_path / "mon", tmp_path / "tue"])
    assert [f.name for f in files] == ["mon/part-0.parquet", "tue/part-0.parquet"]


def test_two_files_of_one_name_are_refused(tmp_path: Path) -> None:
    for day in ("mon", "tue"):
        _write(tmp_path / day / "part-0.parquet")
    with pytest.raises(DatasetError, match=r"would both be written as 'part-0\.parquet'") as e:
        source_files([tmp_path / "mon" / "part-0.parquet", tmp_path / "tue" / "part-0.parquet"])
    assert "mon" in str(e.value) and "tue" in str(e.value)


def test_groups_keep_the_order_and_hold_a_big_file_alone() -> None:
    files = [SourceFile(f"/{n}", n, size) for n, size in zip("abcde", (4, 4, 9, 1, 1))]
    assert [[f.name for f in g] for g in groups(files, 8)] == [["a", "b"], ["c"], ["d", "e"]]
