"""Outputs checked before any work: the one rule the CLI and the Python API share.

An output that would replace one of the run's inputs (the file itself, a
link to it, or a file an input folder is read from), a new output inside an
input folder that the folder's reader would read as one of its inputs next
time or that would leave the folder holding both Parquet and session files
(``reads_next_time``), or another output of the same run, is an
``OutputConflictError``; one that cannot be written (a
folder, a device, a read-only file, a missing or read-only folder, /proc) an ``OSError``
naming it (``OutputNotWritableError``) — before anything is read, so a
refused run leaves every file as it was.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from ctxcompact._atomic import (
    NotRegularFileError,
    OutputNotWritableError,
    ReadOnlyFileError,
    read_only,
)
from ctxcompact._sources import SESSION_SUFFIXES, reads_as_parquet
from ctxcompact.errors import OutputConflictError

PathLike = str | os.PathLike[str]


def _one_line(text: str) -> str:
    """``text`` on one line (an OS or Arrow message may span several)."""
    return " ".join(str(text).split())


def is_parquet_source(path: Path) -> bool:
    """Parquet of part rows: a ``.parquet`` file, or a folder with no session
    file (``.jsonl``, ``.json``, ``.traj``) in it."""
    if path.is_dir():
        return not any(p.suffix in SESSION_SUFFIXES for p in path.rglob("*") if p.is_file())
    return path.suffix == ".parquet"


def _one_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def replaces_input(output: Path, input: Path) -> bool:
    """Whether writing ``output`` would replace a file that reading ``input``
    reads: the input itself, or a file an input folder is read from (its
    Parquet files by ``batch.parquet.parquet_dataset``'s rule, or its session
    files); symlinks and ``..`` followed."""
    try:
        if not output.is_file():
            return False
        if input.is_file():
            return output.samefile(input)
        return reads_next_time(output, input)
    except OSError:
        return False


def _places(output: Path) -> list[Path]:
    """Where ``output`` lands in a folder listing: its own name (a link in the
    folder is listed there) and the file it is written to (a link's target)."""
    here = output.parent.resolve() / output.name
    return list(dict.fromkeys([here, output.resolve()]))


def reads_next_time(output: Path, input: Path) -> bool:
    """Whether ``output``, once written, would be taken by the next read of
    the folder ``input``: a name one of its readers takes, whatever the
    folder holds now. A folder is read as Parquet part rows (every
    ``*.parquet`` file whose name does not start with ``_`` or ``.``:
    ``parquet_dataset``'s rule) or as session files (every ``.jsonl``,
    ``.json`` and ``.traj`` file), never both: a Parquet file written into a
    folder of session files (or a session file into a Parquet folder) would
    not be read but would leave the folder holding both kinds, which every
    later run on it refuses. So either name is refused inside any input
    folder, however the run reads it. ``False`` for an input that is no
    folder."""
    try:
        if not input.is_dir() or output.is_dir():
            return False
        folder = input.resolve()
        return any(place.is_relative_to(folder)
                   and (reads_as_parquet(folder, place) or place.suffix in SESSION_SUFFIXES)
                   for place in _places(output))  # fmt: skip
    except OSError:
        return False


def _read_next_time(output: Path, input: Path) -> str:
    """Why ``output`` may not be written inside the folder ``input``."""
    if any(p.suffix in SESSION_SUFFIXES for p in _places(output)):
        written, skipped = "session", f"a name not ending in {', '.join(SESSION_SUFFIXES)}"
    else:
        written = "Parquet"
        skipped = "a name starting with '_' or '.', which a Parquet folder's reader skips"
    held = "session files" if not is_parquet_source(input) else "Parquet files"
    if held.startswith(written):
        why = (f"it would be read as an input of {input} next time (every later run on the "
               "folder would read it too)")  # fmt: skip
    else:
        why = (f"{input} holds {held}, so a {written} file in it would leave the folder "
               "holding both Parquet files and session files, which every later run on it "
               "refuses")  # fmt: skip
    return (f"{output} is inside the input folder {input}: {why}; write it outside the "
            f"folder, or give it {skipped}")  # fmt: skip


def _cannot_create_in(path: Path) -> str | None:
    """Why a file cannot be created beside ``path`` (where the temporary file
    is written), found by creating one: the permission bits do not tell
    (root, a read-only mount, /proc); ``None`` when it can."""
    folder = (path.resolve() if path.is_symlink() else path).parent
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ctxcompact-probe-"):
            return None  # removed on leaving
    except OSError as e:
        return f"no file can be created in folder {folder} ({e.strerror or _one_line(str(e))})"


def _unwritable(path: Path, option: str) -> OutputNotWritableError | None:
    parent = path.parent
    kind: type[OutputNotWritableError] = OutputNotWritableError
    if path.is_dir():
        reason, kind = "it is a directory", NotRegularFileError
    elif path.exists() and not path.is_file():
        reason = "it is not a regular file (a device, pipe or socket is never replaced)"
        kind = NotRegularFileError
    elif (locked := read_only(path)) is not None:
        reason, kind = locked, ReadOnlyFileError
    elif not parent.exists():
        reason = f"folder {parent} does not exist"
    elif not parent.is_dir():
        reason = f"{parent} is not a folder"
    elif not os.access(parent, os.W_OK | os.X_OK):
        reason = f"folder {parent} is not writable"
    elif (refused := _cannot_create_in(path)) is not None:
        reason = refused
    else:
        return None
    return kind(errno.EINVAL if kind is NotRegularFileError else errno.EACCES,
                f"{path}: cannot write {option}: {reason}", str(path))  # fmt: skip


def check_outputs(
    outputs: Mapping[str, PathLike | None], inputs: Iterable[PathLike] = (), *,
    folders: bool = False,
) -> None:  # fmt: skip
    """Refuse, before any work, outputs (keyed by the argument or option that
    names them; ``None``: not written) that cannot be written, that would
    replace an input or each other, or that an input folder would read as
    one of its inputs next time, or that would leave an input folder holding
    both Parquet and session files (``reads_next_time``). ``folders``: each output
    is a folder of Parquet files replaced whole (Ray Data's): refused when it
    is an input or holds one, or when an input folder would read the files
    written in it; whether it can be written is left to its writer (a URL,
    ``scheme://...``, is not checked)."""
    ins = [Path(i) for i in inputs]
    given = [(option, Path(path)) for option, path in outputs.items()
             if path is not None and not (folders and "://" in str(path))]  # fmt: skip
    what = "folder" if folders else "file"
    for i, (option, path) in enumerate(given):
        for other, earlier in given[:i]:
            if _one_file(path, earlier):
                raise OutputConflictError(f"{path} is also the {other} output: give each "
                                          f"output its own {what}", column=option)  # fmt: skip
    for option, path in given:
        if folders:  # replaced whole: an input inside it goes with it
            if any(_one_file(path, i) or i.resolve().is_relative_to(path.resolve())
                   for i in ins):  # fmt: skip
                raise OutputConflictError(f"{path} is also an input (or holds one): it would "
                                          "be replaced", column=option)  # fmt: skip
        elif any(replaces_input(path, i) for i in ins):
            raise OutputConflictError(f"{path} is also an input: it would be replaced",
                                      column=option)  # fmt: skip
        written = path / "part.parquet" if folders else path  # a file the writer puts there
        inside = next((i for i in ins if reads_next_time(written, i)), None)
        if inside is not None:
            raise OutputConflictError(_read_next_time(path, inside), column=option)
        if folders:
            continue  # whether a folder can be written is left to its writer
        refused = _unwritable(path, option)
        if refused is not None:
            raise refused
