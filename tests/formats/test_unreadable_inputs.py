"""A session file that cannot be read (gone, a folder, a named pipe, no
permission) is Python's own ``OSError`` naming it (README, Errors), never a
``FormatError``: on the native path (the Rust reader behind ``read_jsonl``,
``iter_jsonl``, ``read_sessions``, ``iter_sessions``) as on the Python one
(``formats.read``, the checks before the native read), the same class for
the same condition, and under ``on_error="skip"`` too, which skips bad
lines, not unreadable files. The CLI names the file and exits 3, one line,
no traceback."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from builders import UNREADABLE, check_unreadable, make_unreadable, unreadable_after
from cli_run import invoke
from ctxcompact import _core, formats
from ctxcompact.formats import iter_jsonl, iter_sessions, read_jsonl, read_sessions, reader
from test_ingest import GOOD, claude_file, write_lines

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes (POSIX)")


@contextmanager
def never_waiting(path: Path) -> Iterator[None]:
    """While in the block, whatever opens the named pipe at ``path`` for
    reading gets an empty file at once, so a reader that opens it (as one
    that should not would) fails the test instead of waiting forever."""
    stop = threading.Event()

    def unblock() -> None:
        while not stop.wait(0.02):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader waiting (ENXIO), or no pipe (yet)
                continue
            os.close(fd)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def session_file(path: Path, fmt: str) -> Path:
    """A file of one format with sessions in it."""
    if fmt == "claude-code":
        return claude_file(path)
    return write_lines(path, [GOOD])


def after_listing(monkeypatch: pytest.MonkeyPatch, path: Path, kind: str) -> None:
    """``path`` made unreadable once the readers have listed the files and
    told their formats (in Python), before the native reader opens them: a
    file deleted or replaced between the two."""
    unreadable_after(monkeypatch, reader, "_choose", path, kind)


READERS: dict[str, Callable[..., object]] = {
    "read_jsonl": read_jsonl,
    "iter_jsonl": lambda *a, **k: list(iter_jsonl(*a, **k)),
    "read_sessions": read_sessions,
    "iter_sessions": lambda *a, **k: list(iter_sessions(*a, **k)),
}


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("fmt", ["opencode", "claude-code"])
@pytest.mark.parametrize("kind", list(UNREADABLE))
@pytest.mark.parametrize("route", list(READERS))
def test_a_file_made_unreadable_after_listing_is_the_oserror_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str, kind: str, fmt: str,
    on_error: str,
) -> None:  # fmt: skip
    # The native reader said "FormatError: <path>: cannot read: ... (os
    # error 21)", as if the file's lines were bad; a pipe was opened, and
    # the read waited for a writer.
    first = session_file(tmp_path / "a.jsonl", "opencode")
    path = session_file(tmp_path / "b.jsonl", fmt)
    after_listing(monkeypatch, path, kind)
    windows = {"window_bytes": 64} if route.startswith("iter") else {}
    with never_waiting(path), pytest.raises(OSError) as info:
        READERS[route]([first, path], on_error=on_error, **windows)
    check_unreadable(info.value, path, kind)
    # the Python path, on the same file: the same class
    if kind != "pipe":  # formats.read opens what it is given (it would wait on a pipe)
        with pytest.raises(OSError) as python:
            formats.read(path, fmt)
        check_unreadable(python.value, path, kind)


@pytest.mark.parametrize("kind", ["gone", "folder"])
def test_a_file_made_unreadable_while_the_stream_reads_the_one_before(
    tmp_path: Path, kind: str
) -> None:
    """A real race: ``iter_jsonl`` opens each file when the one before is
    done, so a file can go away while the windows before it are used."""
    first = write_lines(
        tmp_path / "a.jsonl", [GOOD, json.loads(json.dumps(GOOD).replace("s1", "s2"))]
    )
    path = claude_file(tmp_path / "b.jsonl")
    windows = iter_jsonl([first, path], on_error="skip", window_bytes=1)
    assert next(windows).table.num_rows > 0
    make_unreadable(path, kind)
    with pytest.raises(OSError) as info:
        list(windows)
    check_unreadable(info.value, path, kind)


#: (reader, suffix): the JSONL readers read any file given by name as JSONL,
#: so a ``.json`` pipe is the ``.jsonl`` case again for them.
PIPES = [(r, s) for r in READERS for s in (".jsonl", ".json")
         if not (s == ".json" and r.endswith("jsonl"))]  # fmt: skip


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize(("route", "suffix"), PIPES)
def test_a_named_pipe_given_by_name_is_an_oserror_and_never_opened(
    tmp_path: Path, route: str, suffix: str, on_error: str
) -> None:
    # read_jsonl said FormatError "not a regular file" where the CLI says
    # exit 3 (cannot be read); read_sessions opened a .json pipe and waited.
    path = tmp_path / f"pipe{suffix}"
    os.mkfifo(path)
    with never_waiting(path), pytest.raises(OSError) as info:
        READERS[route](path, on_error=on_error)
    check_unreadable(info.value, path, "pipe")
    assert "named pipe" in str(info.value)


@pytest.mark.parametrize("fmt", ["opencode", "claude-code"])
def test_the_native_reader_and_formats_read_agree_on_a_folder_and_a_missing_file(
    tmp_path: Path, fmt: str
) -> None:
    """Given straight to the Rust reader (read_jsonl expands a folder into
    its files, so only a race brings it one), a folder and a missing file
    are the errors Python's own ``open`` gives, word for word."""
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    for path, kind in ((folder, "folder"), (tmp_path / "missing.jsonl", "gone")):
        for on_error in ("raise", "skip"):
            with pytest.raises(OSError) as native:
                _core.ingest_jsonl([str(path)], [fmt], on_error)
            check_unreadable(native.value, path, kind)
        with pytest.raises(OSError) as python:
            formats.read(path, fmt)
        assert type(python.value) is type(native.value)
        assert str(python.value) == str(native.value)


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads a file whatever its permission bits say",
)
def test_a_file_without_read_permission_is_a_permission_error_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "locked.jsonl", "opencode")
    path.chmod(0)
    try:
        for read in (lambda: read_jsonl(path, on_error="skip"), lambda: formats.read(path),
                     lambda: _core.ingest_jsonl([str(path)], ["opencode"], "skip")):  # fmt: skip
            with pytest.raises(PermissionError) as info:
                read()
            assert info.value.filename == str(path)
        # locked after listing: the native reader's own open fails
        path.chmod(0o644)
        choose = reader._choose

        def then_locked(*args: Any, **kwargs: Any) -> Any:
            out = choose(*args, **kwargs)
            path.chmod(0)
            return out

        monkeypatch.setattr(reader, "_choose", then_locked)
        with pytest.raises(PermissionError) as info:
            read_jsonl(path, on_error="skip")
        assert info.value.filename == str(path)
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("kind", ["gone", "folder", "pipe"])
@pytest.mark.parametrize(
    "command",
    ["ingest", "ingest --on-error skip", "estimate", "convert", "convert --to parquet"],
)
def test_the_cli_names_an_unreadable_input_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    command: str, kind: str,
) -> None:  # fmt: skip
    # Exit 1, "FormatError: <path>: cannot read: ...": bad data, as if the
    # file's lines were at fault.
    path = session_file(tmp_path / "in.jsonl", "opencode")
    out = tmp_path / ("out.parquet" if "parquet" in command or "ingest" in command else "out.json")
    name, *options = command.split()
    argv = {"ingest": [str(path), "-o", str(out)], "estimate": [str(path)],
            "convert": [str(path), str(out)]}[name] + options  # fmt: skip
    after_listing(monkeypatch, path, kind)
    with never_waiting(path):
        code, stdout, err = invoke(monkeypatch, capsys, name, *argv)
    assert code == 3, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert f"{path}: cannot read: " in err and "Traceback" not in err
    assert {"gone": "No such file", "folder": "Is a directory", "pipe": "named pipe"}[kind] in err
    assert not out.exists() and not stdout
    left = {p.name for p in tmp_path.iterdir()}
    assert left == (set() if kind == "gone" else {"in.jsonl"})  # no temporary file left
