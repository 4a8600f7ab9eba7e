"""A Parquet input that cannot be read as a file (gone, a folder, a named
pipe) is Python's ``OSError`` naming it, as a session file is (README,
Errors; tests/formats/test_unreadable_inputs.py): only a file whose content
is not Parquet is a ``DatasetError``. The CLI names it and exits 3."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from builders import UNREADABLE, check_unreadable, unreadable_after
from cli_run import invoke
from ctxcompact import compact_parquet
from ctxcompact.batch import parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import DatasetError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes (POSIX)")

#: How a listed file is made unreadable, and the (class, errno) reading it gives.
KINDS = {k: UNREADABLE[k] for k in ("gone", "folder", "pipe")}


def after_listing(monkeypatch: pytest.MonkeyPatch, path: Path, kind: str) -> None:
    """``path`` is listed as a Parquet file, then made unreadable before it is read."""
    unreadable_after(monkeypatch, parquet, "parquet_dataset", path, kind)


def rows(path: Path) -> Path:
    pq.write_table(generate_table(2, 20, seed=1), path)
    return path


def test_a_missing_parquet_file_is_the_file_not_found_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    for call in (lambda: compact_parquet(missing, tmp_path / "o.parquet"),
                 lambda: compact_parquet([rows(tmp_path / "a.parquet"), missing], None,
                                         report_path=tmp_path / "r.parquet")):  # fmt: skip
        with pytest.raises(FileNotFoundError) as info:
            call()
        check_unreadable(info.value, missing, "gone")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet"]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_parquet_file_made_unreadable_after_listing_is_the_oserror_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, where: str
) -> None:
    (tmp_path / "in").mkdir()
    path = rows(tmp_path / "in" / "a.parquet")
    after_listing(monkeypatch, path, kind)
    with pytest.raises(OSError) as info:
        compact_parquet(path if where == "file" else tmp_path / "in", tmp_path / "o.parquet")
    check_unreadable(info.value, path, kind)
    assert not (tmp_path / "o.parquet").exists()


def test_a_named_pipe_given_by_name_is_never_opened(tmp_path: Path) -> None:
    pipe = tmp_path / "p.parquet"
    os.mkfifo(pipe)  # opening it would wait for a writer: the test would hang
    with pytest.raises(OSError) as info:
        compact_parquet(pipe, tmp_path / "o.parquet")
    check_unreadable(info.value, pipe, "pipe")


def test_a_file_that_is_not_parquet_stays_a_dataset_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        compact_parquet(bad, tmp_path / "o.parquet")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("command", ["estimate", "batch", "convert"])
def test_the_cli_names_an_unreadable_parquet_input_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    command: str, kind: str,
) -> None:  # fmt: skip
    # Exit 1, "DatasetError: <path>: not a readable Parquet file (...)": bad
    # data, as if the file's content were at fault.
    path = rows(tmp_path / "in.parquet")
    out = tmp_path / "out.parquet"
    argv = {"estimate": [str(path)], "batch": [str(path), "-o", str(out)],
            "convert": [str(path), str(tmp_path / "out.jsonl")]}[command]  # fmt: skip
    after_listing(monkeypatch, path, kind)
    code, stdout, err = invoke(monkeypatch, capsys, command, *argv)
    assert code == 3, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert f"{path}: cannot read: " in err and "Error" not in err, err
    assert {"gone": "No such file", "folder": "Is a directory", "pipe": "named pipe"}[kind] in err
    assert not stdout
    assert {p.name for p in tmp_path.iterdir()} <= {"in.parquet"}


@pytest.mark.parametrize("command", ["estimate", "batch"])
def test_the_cli_on_a_missing_parquet_file_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:  # fmt: skip
    missing = tmp_path / "x.parquet"
    argv = [str(missing)] + (["-o", str(tmp_path / "o.parquet")] if command == "batch" else [])
    code, _, err = invoke(monkeypatch, capsys, command, *argv)
    assert code == 3 and f"{missing}: no such file" in err and "Error" not in err, err
