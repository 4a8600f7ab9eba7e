"""JSONL session files straight into the part-row table (docs/schema.md).

``read_jsonl`` parses in Rust, on every core, with the GIL released, every
format ``ctxcompact.formats`` reads from JSONL: a session per line
(``opencode``, ``openai-chat``, ``openai-responses``, ``anthropic``,
``swe-agent``, ``openhands``), several per line (``tau-bench``: a list of
runs), a message per line (``opencode-messages``, a session's messages on
consecutive lines) or an event per line (``claude-code``, grouped into
sessions by ``sessionId`` within each file). The mapping is the Python
adapters' one, checked against them by the differential tests.

A line that cannot be read (not UTF-8, not JSON, not the format, a session
split across lines or read twice) either fails the run (``on_error="raise"``:
``FormatError`` naming the file and line) or is left out and reported
(``on_error="skip"``): in ``IngestResult.rejected`` and, with ``reject_path``,
in a JSONL file holding each line as it was. Nothing is dropped silently.
A file that cannot be read at all (missing, a folder, a named pipe, no
permission, a failing disk) is Python's ``OSError`` naming it, on the native
path as on the Python one, whatever ``on_error`` says: ``"skip"`` skips bad
lines, not unreadable files.
"""

from __future__ import annotations

import base64
import bisect
import errno
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
from ctxcompact._atomic import replacing
from ctxcompact._json import loads
from ctxcompact._sources import DOCUMENT_SUFFIXES, JSONL_SUFFIXES, SESSION_SUFFIXES
from ctxcompact.errors import ConfigError, FormatError, InputTypeError, TranscriptError
from ctxcompact.formats.detect import FORMATS, jsonl_format
from ctxcompact.formats.jsonl import UTF16, UTF16_BOMS
from ctxcompact.scans.estimate import check_threads
from ctxcompact.transcript import SCHEMA, Transcript, targets_as_dictionary

#: Formats parsed natively (in Rust) by ``read_jsonl``: every format ``formats`` reads.
NATIVE_FORMATS = FORMATS
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class RejectedLine:
    """A line left out of the table (``on_error="skip"``), as it was in the file."""

    path: str
    line: int
    error: str
    session_id: str | None
    message_id: str | None
    raw: bytes

    def to_json(self) -> dict[str, Any]:
        """The reject-file record: ``raw`` as text when it is UTF-8, else ``raw_base64``."""
        record: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "error": self.error,
            "session_id": self.session_id,
            "message_id": self.message_id,
        }
        try:
            record["raw"] = self.raw.decode("utf-8")
        except UnicodeDecodeError:
            record["raw_base64"] = base64.b64encode(self.raw).decode("ascii")
        return record


@dataclass(frozen=True)
class FileReport:
    """What became of one input file.

    ``status``: ``"read"`` (``format`` says how), ``"empty"`` (blank: no
    sessions), ``"skipped"`` (found in a folder and never read: not a session
    file by its extension, or not a regular file: a broken link, a pipe, a
    device, a link to a folder, which is not followed) or ``"rejected"`` (its
    format could not be told, or a document that cannot be read, under
    ``on_error="skip"``); ``reason`` says why.
    """

    path: str
    status: Literal["read", "empty", "skipped", "rejected"]
    format: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class IngestResult:
    """The part rows of every session read, and what was left out."""

    table: pa.Table
    rejected: list[RejectedLine] = field(default_factory=list)
    #: Records read (kept or rejected): non-blank JSONL lines, JSON documents.
    lines: int = 0
    sessions: int = 0
    #: The format read: one name, or the names of every format read joined by ", ".
    format: str = ""
    #: Every input file, in the order given (folders expanded), and what became of it.
    files: list[FileReport] = field(default_factory=list)

    @property
    def transcript(self) -> Transcript:
        return Transcript(self.table)

    @property
    def formats(self) -> dict[str, str]:
        """Path -> format of every file read."""
        return {f.path: f.format for f in self.files if f.status == "read" and f.format}

    @property
    def skipped(self) -> list[FileReport]:
        """Files not read: skipped for their extension, or rejected whole."""
        return [f for f in self.files if f.status in ("skipped", "rejected")]


@dataclass(frozen=True)
class _Input:
    path: Path
    #: Names sessions without an id: the path relative to the folder given
    #: (suffix dropped), so ids stay unique across run folders; None for a
    #: file given by itself (named by its file name, as ``formats.read`` does).
    id_base: str | None
    in_folder: bool
    #: Why an entry found in a folder is not read though it is no plain file
    #: or folder (a broken link, a pipe, a linked folder); None otherwise.
    skip: str | None = None


def _not_read(path: Path) -> str:
    """Why a folder entry that is neither a regular file nor a folder is not read."""
    if path.is_symlink():
        if not path.exists():
            return f"a broken symbolic link (to {os.readlink(path)})"
        if path.is_dir():
            return "a symbolic link to a folder: not followed (give it as an input to read it)"
    if path.is_fifo():
        return "not a regular file (a named pipe)"
    if path.is_socket():
        return "not a regular file (a socket)"
    return "not a regular file (a device)"


def _inputs(paths: str | Path | Iterable[str | Path], suffixes: tuple[str, ...]) -> list[_Input]:
    if isinstance(paths, str | Path):
        items = [paths]
    elif isinstance(paths, bytes) or not isinstance(paths, Iterable):
        raise InputTypeError(f"paths must be a path or a list of paths, got {type(paths).__name__}")
    else:
        items = list(paths)
    out: list[_Input] = []
    for item in items:
        if not isinstance(item, str | os.PathLike):
            raise InputTypeError(f"a path must be a str or a Path, got {type(item).__name__}")
        path = Path(item)
        if path.is_dir():
            # rglob does not descend into a linked folder; what is neither a
            # file nor a folder is named (skip), never silently left out.
            for p in sorted(q for q in path.rglob("*") if q.is_symlink() or not q.is_dir()):
                if not p.is_file():
                    out.append(_Input(p, None, True, _not_read(p)))
                    continue
                rel = p.relative_to(path)
                base = rel.with_suffix("").as_posix() if p.suffix in suffixes else None
                out.append(_Input(p, base, True))
        else:
            out.append(_Input(path, None, False))
    read_once([i.path for i in out if _reads(i, suffixes)])
    return out


def _reads(i: _Input, suffixes: tuple[str, ...]) -> bool:
    """Whether ``i`` is read: given by itself, or a file of ``suffixes`` in a folder."""
    return not i.in_folder or (i.skip is None and i.path.suffix in suffixes)


def _not_found(path: Path) -> FileNotFoundError:
    """A missing input: the ``OSError`` naming it (README, Errors)."""
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))


def _not_regular(path: Path) -> OSError:
    """An input given by name that exists but is no regular file: the
    ``OSError`` naming it, as the native reader gives it (a folder:
    ``IsADirectoryError``; a named pipe, socket or device: ``EINVAL`` saying
    which). It is never opened: opening a named pipe waits for a writer."""
    if path.is_dir():
        return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return OSError(errno.EINVAL, _not_read(path), str(path))


def read_once(paths: Iterable[Path]) -> None:
    """``DuplicateSessionError`` for one file reached twice (a folder and a
    file in it, or a folder twice): it would be read twice, its sessions
    counted twice (under two names when one route names it by its folder).
    Session files and Parquet files alike."""
    from ctxcompact.errors import DuplicateSessionError

    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue  # a missing file is reported where it is read
        key = (st.st_dev, st.st_ino)
        if key in seen:
            also = "" if seen[key] == path else f" (also as {seen[key]})"
            raise DuplicateSessionError(
                f"{path}: this file is given twice{also}: its sessions would be read twice"
            )
        seen[key] = path


def jsonl_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The files to read: each path, with a directory expanded to its ``*.jsonl`` (sorted)."""
    return [i.path for i in _jsonl_inputs(paths)]


def _jsonl_inputs(paths: str | Path | Iterable[str | Path]) -> list[_Input]:
    """The JSONL files ``paths`` name, as inputs: each path, a folder's ``*.jsonl``."""
    return [i for i in _inputs(paths, JSONL_SUFFIXES) if _reads(i, JSONL_SUFFIXES)]


def _first_record(path: Path) -> tuple[int, Any] | None:
    """The first non-blank line of a JSONL file, parsed; None when it has none."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
                if raw.startswith(UTF16_BOMS):
                    raise FormatError(f"{path}:1: {UTF16}", row=1)
            if raw.strip():
                try:
                    return n, loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as e:
                    raise FormatError(f"{path}:{n}: cannot tell the format: {e}", row=n) from None
    return None


def _has_lines(path: Path) -> bool:
    with open(path, "rb") as f:
        return any(raw.removeprefix(b"\xef\xbb\xbf").strip() for raw in f)


def detect_jsonl_format(path: str | Path) -> str | None:
    """The format of a JSONL file, from its own first non-blank line; ``None``
    when it has none (an empty file holds no sessions)."""
    first = _first_record(Path(path))
    if first is None:
        return None
    n, record = first
    try:
        return jsonl_format(record)
    except FormatError as e:
        raise FormatError(f"{path}:{n}: {e}", row=n) from None


def _check(on_error: str, chunk_bytes: int, threads: int | None) -> int | None:
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if not isinstance(chunk_bytes, int) or isinstance(chunk_bytes, bool) or chunk_bytes < 1:
        raise ConfigError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    return check_threads(threads)


def _reject_file(path: Path, reason: str) -> list[RejectedLine]:
    """Every non-blank line of a file rejected whole, so none is lost."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    return [RejectedLine(str(path), n, reason, None, None, raw.removesuffix(b"\r"))
            for n, raw in enumerate(data.split(b"\n"), 1) if raw.strip()]  # fmt: skip


def _listed(paths: str | Path | Iterable[str | Path]) -> str | Path | Iterable[str | Path]:
    """``paths`` with an iterator turned into a list, so it can be read twice
    (a bad argument is left to ``_inputs``, which names it)."""
    if isinstance(paths, str | os.PathLike | bytes) or not isinstance(paths, Iterable):
        return paths
    return list(paths)


def _checked(
    on_error: str, chunk_bytes: int, threads: int | None, reject_path: str | Path | None,
    paths: str | Path | Iterable[str | Path],
) -> tuple[int | None, str | Path | Iterable[str | Path]]:  # fmt: skip
    """A reader's arguments checked before any work (``_check``, then
    ``_check_rejects``): the thread count, and ``paths`` listed once."""
    threads = _check(on_error, chunk_bytes, threads)
    paths = _listed(paths)
    _check_rejects(reject_path, paths)
    return threads, paths


def _check_rejects(
    reject_path: str | Path | None, paths: str | Path | Iterable[str | Path]
) -> None:
    """Refuse, before any work, a ``reject_path`` that cannot be written, that
    is an input, or that an input folder would read next time (``check_outputs``)."""
    from ctxcompact._outputs import check_outputs

    if reject_path is None:
        return
    given = [paths] if isinstance(paths, str | os.PathLike) else paths
    if isinstance(given, Iterable) and all(isinstance(p, str | os.PathLike) for p in given):
        check_outputs({"reject_path": reject_path}, given)


def _format_names(files: list[FileReport]) -> str:
    return ", ".join(dict.fromkeys(f.format for f in files if f.status == "read" and f.format))


def read_jsonl(
    paths: str | Path | Iterable[str | Path],
    format: str | None = None,
    *,
    on_error: OnError = "raise",
    reject_path: str | Path | None = None,
    threads: int | None = None,
    chunk_bytes: int = 1 << 20,
) -> IngestResult:
    """Read JSONL session files into one part-row table (``transcript`` for the scans).

    ``format=None`` detects each file's format from its own first non-blank
    line (``IngestResult.files`` says which); a file whose format cannot be
    told fails the run, or under ``on_error="skip"`` is rejected whole. A
    file with no lines holds no sessions (reported ``"empty"``). ``threads``:
    ``None`` = one per core. ``chunk_bytes`` is the unit of parallel work
    (whole lines). With ``reject_path`` the rejected lines are written there
    (JSONL, written atomically, also when empty) so a rerun can pick them up.
    """
    threads, paths = _checked(on_error, chunk_bytes, threads, reject_path, paths)
    inputs = _jsonl_inputs(paths)
    result = _read_jsonl(inputs, format, on_error, threads, chunk_bytes)
    if reject_path is not None:
        write_rejects(result.rejected, reject_path)
    return result


def _choose(
    inputs: list[_Input], format: str | None, on_error: OnError
) -> tuple[list[FileReport], list[RejectedLine], list[tuple[_Input, str]]]:
    """Each file's format (detected from its own first line unless forced):
    the report of every file, the rejected files' lines, and the files to read."""
    for i in inputs:
        if not i.path.exists():
            raise _not_found(i.path)
        if not i.path.is_file():
            raise _not_regular(i.path)
    reports: list[FileReport] = []
    rejected: list[RejectedLine] = []
    chosen: list[tuple[_Input, str]] = []
    for i in inputs:
        try:
            # a forced format's bad first line is a bad line like any other
            fmt = detect_jsonl_format(i.path) if format is None else format
            if format is not None and not _has_lines(i.path):
                fmt = None
        except FormatError as e:
            if on_error == "raise":
                raise
            reason = str(e)
            reports.append(FileReport(str(i.path), "rejected", None, reason))
            rejected += _reject_file(i.path, reason)
            continue
        if fmt is None:
            reports.append(FileReport(str(i.path), "empty", format))
        else:
            reports.append(FileReport(str(i.path), "read", fmt))
            chosen.append((i, fmt))
    return reports, rejected, chosen


def _read_jsonl(
    inputs: list[_Input], format: str | None, on_error: OnError, threads: int | None,
    chunk_bytes: int,
) -> IngestResult:  # fmt: skip
    reports, rejected, chosen = _choose(inputs, format, on_error)
    lines = len(rejected)
    if not chosen:
        table, sessions = SCHEMA.empty_table(), 0
    else:
        names = [str(i.path) for i, _ in chosen]
        raw_table, raw_rejects, read_lines, sessions = _core.ingest_jsonl(
            names, [fmt for _, fmt in chosen], on_error, threads=threads,
            chunk_bytes=chunk_bytes, id_bases=[i.id_base for i, _ in chosen],
        )  # fmt: skip
        table = targets_as_dictionary(pa.table(raw_table))  # one dictionary, not per chunk
        lines += read_lines
        rejected += [RejectedLine(names[k], line, error, sid, mid, raw)
                     for k, line, error, sid, mid, raw in raw_rejects]  # fmt: skip
    return IngestResult(table, rejected, lines, sessions,
                        format or _format_names(reports), reports)  # fmt: skip


def _check_window(window_bytes: int) -> None:
    if isinstance(window_bytes, bool) or not isinstance(window_bytes, int) or window_bytes < 1:
        raise ConfigError(f"window_bytes must be a positive integer, got {window_bytes!r}",
                          column="window_bytes")  # fmt: skip


def iter_jsonl(
    paths: str | Path | Iterable[str | Path],
    format: str | None = None,
    *,
    on_error: OnError = "raise",
    threads: int | None = None,
    chunk_bytes: int = 1 << 20,
    window_bytes: int = 64 << 20,
) -> Iterator[IngestResult]:
    """``read_jsonl`` in bounded memory: the files are read one after another,
    ``window_bytes`` of whole lines at a time, and each window's rows come
    back as soon as they are mapped, one ``IngestResult`` per window (its
    table and rejected lines; ``lines`` and ``sessions`` count everything so
    far; ``files`` reports every file). Peak memory is about a window and its
    rows, whatever the files' sizes. The checks that span lines hold across
    windows and files (a session read twice, a session's lines contiguous),
    and the rows, concatenated, are those ``read_jsonl`` gives, in order. A
    Claude Code file larger than a window is scanned first and cut only at a
    line end that no session or tool call spans (a window then runs to the
    first such end past ``window_bytes``); the scan keeps the ids it reads
    (tool calls, ``uuid``) in temporary files, so its memory does not grow
    with the file. A file whose scan finds a ``sessionId`` or ``uuid`` that
    is not a string is read whole. At least one
    result comes back, empty when nothing was read. Under ``on_error="raise"``
    a bad line raises when its window is read, after the earlier windows were
    yielded: write them somewhere temporary (as ``ctxcompact ingest`` does)
    where a half-read input must not be kept.
    """
    threads = _check(on_error, chunk_bytes, threads)
    _check_window(window_bytes)
    inputs = _jsonl_inputs(paths)
    yield from _iter_jsonl(inputs, format, on_error, threads, chunk_bytes, window_bytes)


def _iter_jsonl(
    inputs: list[_Input], format: str | None, on_error: OnError, threads: int | None,
    chunk_bytes: int, window_bytes: int,
) -> Iterator[IngestResult]:  # fmt: skip
    reports, rejected, chosen = _choose(inputs, format, on_error)
    name = format or _format_names(reports)
    names = [str(i.path) for i, _ in chosen]
    stream = _core.JsonlStream(
        names, [fmt for _, fmt in chosen], on_error, threads=threads, chunk_bytes=chunk_bytes,
        window_bytes=window_bytes, id_bases=[i.id_base for i, _ in chosen],
    )  # fmt: skip
    lines = len(rejected)
    # Files rejected whole come first, as read_jsonl lists them.
    if rejected:
        yield IngestResult(SCHEMA.empty_table(), rejected, lines, 0, name, reports)
    yielded = bool(rejected)
    sessions = 0
    for raw_table, raw_rejects, read_lines, sessions in stream:
        window_rejects = [RejectedLine(names[k], line, error, sid, mid, raw)
                          for k, line, error, sid, mid, raw in raw_rejects]  # fmt: skip
        table = targets_as_dictionary(pa.table(raw_table))
        yield IngestResult(table, window_rejects, lines + read_lines, sessions, name, reports)
        yielded = True
    if not yielded:  # nothing to read, or only blank lines
        yield IngestResult(SCHEMA.empty_table(), [], lines, sessions, name, reports)


def read_sessions(
    paths: str | Path | Iterable[str | Path],
    format: str | None = None,
    *,
    on_error: OnError = "raise",
    reject_path: str | Path | None = None,
    threads: int | None = None,
    chunk_bytes: int = 1 << 20,
) -> IngestResult:
    """Read any supported session input into one part-row table: files,
    folders (searched recursively) or a list of both.

    ``.jsonl`` files are read natively (``read_jsonl``: each file's format
    detected from its own first line); ``.json`` / ``.traj`` documents (SWE-agent
    trajectories, tau-bench results, OpenHands streams, chat exports) by
    ``formats.read``. A session without an id of its own is named by its path
    relative to the folder given (suffix dropped: ``run1/pydicom__pydicom-1458``),
    so one task run in several folders stays several sessions; a file given by
    itself is named as ``formats.read`` names it. Every file is in
    ``IngestResult.files``: the format it was read in, or why not (a file in a
    folder with another extension is ``"skipped"``; a file given by name must
    be a session file). A repeated session id fails the run
    (``DuplicateSessionError``) or, under ``on_error="skip"``, rejects the later
    file (a document) or line (JSONL). JSONL sessions come first in the table,
    then documents, each in path order. A document rejected whole is reported
    as one ``RejectedLine`` with ``line=0`` holding the file's bytes.
    ``iter_sessions`` reads the same in bounded memory.
    """
    threads, paths = _checked(on_error, chunk_bytes, threads, reject_path, paths)
    order, reports, jsonl, documents = _plan(paths)
    result = _read_jsonl(jsonl, format, on_error, threads, chunk_bytes)
    reports += result.files
    rejected = list(result.rejected)
    lines, sessions = result.lines, result.sessions
    seen = _session_ids(result.table) if documents else set()
    tables = [result.table]
    for d in _read_documents(documents, format, on_error, seen, result.table.schema):
        reports.append(d.report)
        lines += 1
        sessions += d.sessions
        rejected += d.rejected
        if d.rows is not None:
            tables.append(d.rows)
    # one tool_target dictionary for the whole table, not one per document
    table = targets_as_dictionary(pa.concat_tables(tables)) if len(tables) > 1 else tables[0]
    reports.sort(key=lambda f: order.get(f.path, len(order)))
    out = IngestResult(table, rejected, lines, sessions, format or _format_names(reports), reports)
    if reject_path is not None:
        write_rejects(out.rejected, reject_path)
    return out


def iter_sessions(
    paths: str | Path | Iterable[str | Path],
    format: str | None = None,
    *,
    on_error: OnError = "raise",
    threads: int | None = None,
    chunk_bytes: int = 1 << 20,
    window_bytes: int = 64 << 20,
) -> Iterator[IngestResult]:
    """``read_sessions`` in bounded memory: the JSONL files as ``iter_jsonl``
    reads them (a result per window of ``window_bytes``), then one result per
    document. Concatenated, the tables and rejected lines are those
    ``read_sessions`` gives, in its order; ``lines`` and ``sessions`` count
    everything so far. ``files`` is one list shared by every result, kept in
    the order given and growing as files are read: complete once the
    iteration ends. What stays in memory across windows is the session ids
    read (for the repeated-session check) and the file reports.
    """
    threads = _check(on_error, chunk_bytes, threads)
    _check_window(window_bytes)
    order, skipped, jsonl, documents = _plan(paths)
    # One list of reports, kept in the order given, shared by every result:
    # a result costs no copy or sort of it, whatever the number of files.
    files: list[FileReport] = []
    first: dict[str, int] = {}  # each format read: its first file's position

    def position(report: FileReport) -> int:
        return order.get(report.path, len(order))

    def add(report: FileReport) -> None:
        bisect.insort(files, report, key=position)
        if report.status == "read" and report.format:
            at = position(report)
            first[report.format] = min(first.get(report.format, at), at)

    def name() -> str:  # _format_names(files), without a pass over the files
        return format or ", ".join(sorted(first, key=first.__getitem__))

    for report in skipped:
        add(report)
    seen: set[str] = set()
    last = None
    for window in _iter_jsonl(jsonl, format, on_error, threads, chunk_bytes, window_bytes):
        if last is None:  # every JSONL file's report comes with the first window
            for report in window.files:
                add(report)
        if documents:  # only documents are checked against the JSONL sessions here
            seen |= _session_ids(window.table)
        yield IngestResult(window.table, window.rejected, window.lines, window.sessions, name(),
                           files)  # fmt: skip
        last = window
    assert last is not None  # _iter_jsonl yields at least once
    lines, sessions = last.lines, last.sessions
    schema = SCHEMA.empty_table().schema
    for d in _read_documents(documents, format, on_error, seen, schema):
        add(d.report)
        lines += 1
        sessions += d.sessions
        yield IngestResult(d.rows if d.rows is not None else SCHEMA.empty_table(), d.rejected,
                           lines, sessions, name(), files)  # fmt: skip


def _plan(
    paths: str | Path | Iterable[str | Path],
) -> tuple[dict[str, int], list[FileReport], list[_Input], list[_Input]]:
    """The inputs in the order given (path -> position), the files skipped for
    their extension, and the JSONL files and documents to read."""
    supported = SESSION_SUFFIXES
    inputs = _inputs(paths, supported)
    order = {str(i.path): k for k, i in enumerate(inputs)}
    reports: list[FileReport] = []
    jsonl: list[_Input] = []
    documents: list[_Input] = []
    for i in inputs:
        if not i.in_folder and not i.path.exists():
            raise _not_found(i.path)
        if not i.in_folder and not i.path.is_file():
            raise _not_regular(i.path)  # a named pipe: never opened (it would wait)
        if i.skip is not None:
            reports.append(FileReport(str(i.path), "skipped", None, i.skip))
        elif i.path.suffix in JSONL_SUFFIXES:
            jsonl.append(i)
        elif i.path.suffix in DOCUMENT_SUFFIXES:
            documents.append(i)
        elif i.in_folder:
            reports.append(FileReport(str(i.path), "skipped", None,
                                      f"not a session file ({i.path.suffix or 'no extension'}; "
                                      f"read: {', '.join(supported)})"))  # fmt: skip
        else:
            raise FormatError(
                f"{i.path}: not a session file: ctxcompact reads {', '.join(supported)} "
                "(or Parquet of part rows where a command takes Parquet)"
            )
    if not jsonl and not documents:
        where = ", ".join(str(p) for p in ([paths] if isinstance(paths, str | Path) else paths))
        others = f" ({len(reports)} other files skipped)" if reports else ""
        raise FormatError(f"no session files ({', '.join(supported)}) in {where}{others}")
    return order, reports, jsonl, documents


def _session_ids(table: pa.Table) -> set[str]:
    """The session ids of a part-row table (for the documents' repeat check)."""
    return {str(v) for v in pc.unique(table.column("session_id")).to_pylist()}


def _read_twice(i: _Input, sid: str, fmt: str | None = None) -> str:
    """Why the session ``sid`` of ``i`` is refused: read before. When its id
    was made from the file's name, or from a tau-bench run's task and trial
    (unique within one results file only), say how, and what to give instead."""
    text = f"{i.path}: session id {sid!r} was already read (ids must be unique)"
    if fmt == "tau-bench":
        return (f"{text}: a tau-bench run is named tau-<task_id>-<trial>, which is unique "
                "within one results file only (another domain's or model's file numbers its "
                "tasks alike): read each results file in a run of its own, or the same file "
                "once")  # fmt: skip
    base = i.id_base if i.id_base is not None else i.path.name.split(".")[0]
    if sid != base and not sid.startswith(f"{base}:"):
        return f"{text}: the same run given twice? read each run once"
    if i.id_base is not None:
        how = (
            "its file's path relative to the folder given, suffix dropped, so two folders "
            "holding files of the same names (runA/trajs and runB/trajs) give the same ids"
        )
    else:
        how = "its file's name up to the first dot, so two files of one name give the same ids"
    return (f"{text}: a session without an id of its own is named by {how}; give the folder "
            "that holds them both instead (runs/, holding runA/ and runB/: its sessions are "
            "named runA/trajs/..., runB/trajs/...), or read each in a run of its own")  # fmt: skip


@dataclass(frozen=True)
class _Document:
    """One document read: its report, its rows (None when it holds no
    sessions or was rejected), its sessions, and its reject (at most one)."""

    report: FileReport
    rows: pa.Table | None
    sessions: int
    rejected: list[RejectedLine]


def _read_documents(
    documents: list[_Input], format: str | None, on_error: OnError, seen: set[str],
    schema: pa.Schema,
) -> Iterator[_Document]:  # fmt: skip
    """Each document's rows (cast to ``schema``); ``seen`` (session ids read
    before) grows by each document's sessions."""
    from ctxcompact.errors import DuplicateSessionError
    from ctxcompact.formats.documents import read_document

    for i in documents:
        where = str(i.path)
        fmt: str | None = None  # known once the document parses
        try:
            fmt, read = read_document(i.path, format, name=i.id_base)
            ids = [s.id for s in read]
            repeated = next((sid for k, sid in enumerate(ids) if sid in seen or sid in ids[:k]),
                            None)  # fmt: skip
            if repeated is not None:
                raise DuplicateSessionError(_read_twice(i, repeated, fmt), session_id=repeated)
            try:  # per document, so a value Arrow cannot hold names its file
                rows = None
                if read:
                    rows = Transcript.from_sessions(read).to_arrow().cast(schema)
            except TranscriptError as e:
                raise FormatError(f"{where}: {e}", session_id=e.session_id,
                                  message_id=e.message_id, column=e.column) from None  # fmt: skip
        except (FormatError, DuplicateSessionError) as e:  # the latter is no FormatError
            if on_error == "raise":
                raise
            sid = e.session_id if isinstance(e, DuplicateSessionError) else None
            report = FileReport(where, "rejected", fmt if sid else None, str(e))
            yield _Document(report, None, 0, [RejectedLine(where, 0, str(e), sid, None,
                                                           i.path.read_bytes())])  # fmt: skip
            continue
        seen.update(ids)
        yield _Document(FileReport(where, "read" if read else "empty", fmt or None), rows,
                        len(read), [])  # fmt: skip


def write_rejects(rejected: Sequence[RejectedLine], path: str | Path) -> None:
    """Write rejected lines as JSONL, atomically (a temporary file renamed into place)."""
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")


__all__ = [
    "NATIVE_FORMATS",
    "FileReport",
    "IngestResult",
    "RejectedLine",
    "detect_jsonl_format",
    "iter_jsonl",
    "iter_sessions",
    "jsonl_files",
    "read_jsonl",
    "read_sessions",
    "write_rejects",
]
