"""``_atomic``: a replaced file keeps its mode (and, as root, its owner), and
a read-only file (no write permission bit) is never replaced: by every writer
built on it (``replacing``, ``replace_together``, ``check_replaceable``) and
the Python API writers that use them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ctxcompact import formats
from ctxcompact._atomic import (
    OutputNotWritableError,
    ReadOnlyFileError,
    check_replaceable,
    replace_together,
    replacing,
)
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.formats.reader import write_rejects
from ctxcompact.transcript import Transcript

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def existing(path: Path, text: str, bits: int) -> Path:
    path.write_text(text)
    path.chmod(bits)
    return path


def test_replacing_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    private = existing(tmp_path / "private.json", "old", 0o600)
    with replacing(private) as tmp:
        tmp.write_text("new")
    assert private.read_text() == "new" and mode(private) == 0o600
    shared = existing(tmp_path / "shared.json", "old", 0o664)
    with replacing(shared) as tmp:
        tmp.write_text("new")
    assert mode(shared) == 0o664
    # A new file gets the umask's mode, as any created file does.
    fresh = tmp_path / "fresh.json"
    with replacing(fresh) as tmp:
        tmp.write_text("new")
    umask = os.umask(0)
    os.umask(umask)
    assert mode(fresh) == 0o666 & ~umask


def test_a_link_target_keeps_its_mode(tmp_path: Path) -> None:
    target = existing(tmp_path / "target.json", "old", 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with replacing(link) as tmp:
        tmp.write_text("new")
    assert link.is_symlink() and target.read_text() == "new" and mode(target) == 0o640


@pytest.mark.skipif(not ROOT, reason="only root gives a file to another user")
def test_as_root_the_owner_and_group_are_kept(tmp_path: Path) -> None:
    theirs = existing(tmp_path / "theirs.json", "old", 0o600)
    os.chown(theirs, 4321, 4322)
    with replacing(theirs) as tmp:
        tmp.write_text("new")
    st = theirs.stat()
    assert (st.st_uid, st.st_gid, mode(theirs)) == (4321, 4322, 0o600)
    pair = [existing(tmp_path / f"{n}.parquet", "old", 0o640) for n in ("a", "b")]
    os.chown(pair[1], 4321, 4322)
    moves = []
    for dest in pair:
        tmp = dest.with_name(f".{dest.name}.tmp")
        tmp.write_text("new")
        moves.append((tmp, dest))
    replace_together(moves)
    assert [(p.stat().st_uid, mode(p)) for p in pair] == [(0, 0o640), (4321, 0o640)]


@pytest.mark.parametrize("bits", [0o444, 0o400, 0o000])
def test_a_read_only_file_is_never_replaced(tmp_path: Path, bits: int) -> None:
    """Checked by the bits: root may write anything (os.access says yes)."""
    locked = existing(tmp_path / "locked.json", "old", bits)
    with pytest.raises(ReadOnlyFileError) as e, replacing(locked) as tmp:
        tmp.write_text("new")
    assert isinstance(e.value, OutputNotWritableError)
    assert str(locked) in str(e.value) and "read-only" in str(e.value)
    assert locked.read_text() == "old" and mode(locked) == bits
    assert [p.name for p in tmp_path.iterdir()] == ["locked.json"]  # no temporary left


def test_a_file_this_user_may_not_write_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    """For a user other than root the permission itself counts (a 0644 file
    of someone else): os.access is asked too."""
    theirs = existing(tmp_path / "theirs.json", "old", 0o644)
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    with pytest.raises(ReadOnlyFileError, match="for this user"):
        check_replaceable(theirs)


def test_replace_together_refuses_a_read_only_destination_before_any_rename(
    tmp_path: Path,
) -> None:
    first = existing(tmp_path / "first.parquet", "old first", 0o600)
    second = existing(tmp_path / "second.parquet", "old second", 0o444)
    moves = []
    for dest in (first, second):
        tmp = dest.with_name(f".{dest.name}.tmp")
        tmp.write_text("new")
        moves.append((tmp, dest))
    with pytest.raises(ReadOnlyFileError):
        replace_together(moves)
    assert first.read_text() == "old first" and second.read_text() == "old second"
    second.chmod(0o644)
    replace_together(moves)
    assert first.read_text() == second.read_text() == "new"
    assert (mode(first), mode(second)) == (0o600, 0o644)


def test_the_python_writers_keep_the_mode_and_refuse_read_only_files(tmp_path: Path) -> None:
    table = generate_table(2, 20, seed=3)
    source = tmp_path / "rows.parquet"
    pq.write_table(table, source)
    sessions = Transcript(table).to_sessions()

    out = existing(tmp_path / "out.jsonl", "old", 0o600)
    formats.write(sessions, out, "openai-chat")
    assert mode(out) == 0o600 and len(formats.read(out)) == 2
    out.chmod(0o444)
    before = out.read_bytes()
    with pytest.raises(OutputNotWritableError, match="read-only"):
        formats.write(sessions, out, "anthropic")
    assert out.read_bytes() == before

    rejects = existing(tmp_path / "rejects.jsonl", "old", 0o600)
    write_rejects([], rejects)
    assert mode(rejects) == 0o600 and rejects.read_text() == ""

    dest = existing(tmp_path / "compacted.parquet", "old", 0o600)
    report = existing(tmp_path / "report.parquet", "old", 0o640)
    compact_parquet(source, dest, report_path=report)
    assert (mode(dest), mode(report)) == (0o600, 0o640)
    assert pq.read_table(dest).num_rows > 0
    report.chmod(0o444)
    dest.write_text("old")
    with pytest.raises(OutputNotWritableError, match=r"report_path.*read-only"):
        compact_parquet(source, dest, report_path=report)
    assert dest.read_text() == "old"  # refused before any work: neither written
