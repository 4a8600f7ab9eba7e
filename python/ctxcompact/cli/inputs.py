"""Reading inputs: Parquet files and folders and session files and folders,
read as one transcript (or streamed into Parquet); every file left out and
every line rejected named on stderr."""

from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import typer

import ctxcompact as cc
from ctxcompact._atomic import beside, check_replaceable
from ctxcompact._outputs import _one_line, is_parquet_source
from ctxcompact._sources import SESSION_SUFFIXES, reads_as_parquet
from ctxcompact.cli.display import _status
from ctxcompact.cli.failures import InputNotFound
from ctxcompact.cli.options import READ_FORMATS, Reading, bundles
from ctxcompact.cli.outputs import _check_outputs, _no_stdio, _output_errors, _replace_outputs
from ctxcompact.errors import (
    DatasetError,
    DuplicateSessionError,
    MissingColumnError,
    SchemaError,
    TranscriptError,
)
from ctxcompact.formats.reader import FileReport, IngestResult, RejectedLine
from ctxcompact.scans import with_output_units
from ctxcompact.transcript import (
    OUTPUT_UNITS,
    TOOL_TARGET,
    code_names,
    count_exact_parts,
    mixed_codes,
    relocate,
    targets_as_dictionary,
)


def _is_parquet(path: Path) -> bool:
    """A .parquet file, or a folder with no session files in it. A folder
    holding both kinds is a usage error (exit 2): it is read as one kind, and
    the files of the other would be left out with only a "skipped:" line."""
    if path.is_dir():
        _one_kind(path)
    return is_parquet_source(path)


def _one_kind(folder: Path) -> None:
    """Refuse a folder holding Parquet files (by ``parquet_dataset``'s rule)
    and session files (.jsonl, .json, .traj) alike."""
    parquet: list[Path] = []
    sessions: list[Path] = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        if p.suffix in SESSION_SUFFIXES:
            sessions.append(p)
        elif reads_as_parquet(folder, p):
            parquet.append(p)
    if parquet and sessions:

        def some(paths: list[Path]) -> str:
            more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
            return f"{paths[0]}{more}"

        raise typer.BadParameter(
            f"{folder} holds both Parquet files ({some(parquet)}) and session files "
            f"({some(sessions)}): a folder is read as one kind, so the other would be left "
            "out; put them in separate folders (or `ctxcompact ingest` the session files "
            "into a Parquet file of their own)"
        )


def _check_inputs(inputs: list[Path], name: str = "INPUT") -> None:
    """Each input exists and is a file or a folder (exit 3 otherwise: a named
    pipe, socket or device given as an input cannot be read as one)."""
    from ctxcompact.formats.reader import _not_read

    for path in inputs:
        _no_stdio(path, name)
        if not path.exists():
            raise InputNotFound(f"{path}: no such file or directory")
        if not (path.is_file() or path.is_dir()):
            raise InputNotFound(f"{path}: cannot read {name}: {_not_read(path)}")


def _check_sources(inputs: list[Path], nothing: str = "") -> None:
    """Inputs of a command that reads Parquet or session files: each exists,
    and a folder holds one or the other (else it would be read as a Parquet
    dataset without a column, or without a file). ``nothing``: what the
    command cannot do without sessions, added to the error."""
    _check_inputs(inputs)
    for path in inputs:
        if path.is_dir() and not any(
            p.suffix in (*SESSION_SUFFIXES, ".parquet") and p.is_file() for p in path.rglob("*")
        ):
            suffixes = ", ".join(SESSION_SUFFIXES)
            then = f": {nothing}" if nothing else ""
            raise DatasetError(f"{path}: no sessions in this folder: no session files "
                               f"({suffixes}) and no .parquet files{then}")  # fmt: skip


def _check_format(inputs: list[Path], fmt: str | None) -> None:
    """``--format`` names the session files' format: with only Parquet inputs
    (part rows, read as such) it would be accepted and ignored, a usage error."""
    if fmt is not None and inputs and all(_is_parquet(p) for p in inputs):
        raise typer.BadParameter(
            f"--format {fmt} names the format of session files (.jsonl, .json, .traj), and "
            f"every input is Parquet part rows ({_label(inputs)}), read as such: leave "
            "--format out", param_hint="--format",
        )  # fmt: skip


def _located(path: str, text: str, line: int = 0) -> str:
    """``path:line: text`` (``path: text`` for a whole file), the place named
    once: a reader's message that starts with it already (``x.jsonl:1:
    cannot tell the format``) is not prefixed again; a file's message that
    names a line of it keeps the line."""
    found = re.match(re.escape(path) + r"(?::(\d+))?: ", text)
    named = found.group(1) if found else None
    if found and (not line or named is None or int(named) == line):
        text, line = text[found.end() :], line or int(named or 0)
    return f"{path}:{line}: {text}" if line else f"{path}: {text}"


def _report_files(files: list[FileReport]) -> None:
    """Name every input file left out on stderr."""
    for f in files:
        if f.status != "read":
            reason = _one_line(_cli_wording(f.reason)) if f.reason else ""
            typer.echo(f"{f.status}: {_located(f.path, reason) if reason else f.path}", err=True)


def _ingest(inputs: list[Path], fmt: str | None, **kwargs: Any) -> IngestResult:
    """Read session files and folders; every file left out is named on stderr."""
    from ctxcompact.formats.reader import read_sessions

    _check_inputs(inputs)
    result = read_sessions(inputs, fmt, **kwargs)
    _report_files(result.files)
    _report_rejected(_rejected_lines(result.rejected, result.files))
    return result


#: Rejected lines named on stderr before a count of the rest.
SHOWN_REJECTS = 5


def _rejected_lines(rejected: list[RejectedLine], files: list[FileReport]) -> list[RejectedLine]:
    """The lines ``--on-error skip`` left out that no file report names: a
    document rejected whole (line 0) and every line of a JSONL file rejected
    whole are named once, with the files."""
    whole = {f.path for f in files if f.status == "rejected"}
    return [r for r in rejected if r.line > 0 and r.path not in whole]


def _report_rejected(
    lines: list[RejectedLine], count: int | None = None, rejects: Path | None = None
) -> None:
    """Name the lines ``--on-error skip`` left out on stderr (``lines``: the
    first of them, ``count`` in all), then how many more and where every one
    is (``rejects``: the file ``ingest --rejects`` wrote them to)."""
    count = len(lines) if count is None else count
    for r in lines[:SHOWN_REJECTS]:
        text = _one_line(_cli_wording(r.error))
        typer.echo(f"rejected: {_located(r.path, text, r.line)}", err=True)
    if count > SHOWN_REJECTS:
        where = (f"{rejects} holds every one" if rejects is not None else
                 "`ctxcompact ingest --on-error skip --rejects FILE` writes every one")  # fmt: skip
        typer.echo(f"rejected: {count - SHOWN_REJECTS} more line(s) ({where})", err=True)


#: Rows ingest gathers before it writes a row group (unless the gathered
#: windows hold a window's bytes first), so a folder of small files does not
#: become a row group per file.
ROW_GROUP_ROWS = 1 << 16


@dataclass
class _Streamed:
    """What ``_ingest_to_parquet`` read: the last window's counts and reports."""

    last: IngestResult
    rows: int
    rejected: int


def _ingest_to_parquet(
    inputs: list[Path], fmt: str | None, out: Path, option: str = "--output", *,
    on_error: str = "raise", threads: int | None = None, count_units: bool = True,
    count_methods: tuple[str, ...] = (), count_exact: tuple[str, ...] = (),
    rejects: Path | None = None,
    window_bytes: int = 64 << 20, verify: bool = False,
) -> _Streamed:  # fmt: skip
    """Stream session files into the Parquet file ``out`` (and the skipped
    lines into ``rejects``) a window of lines at a time, so memory is bounded
    by a window, not by the files. Both files appear whole at the end or not
    at all; a write error names its option, a read error its input; every
    file left out is named on stderr. ``verify``: the file written is read
    back and every counted column checked (``_verify_parquet``: the exact
    ones at a sample of rows) before it replaces ``out``; a count wrong for
    its text is a ``TranscriptError`` naming ``out``, its column and row,
    and nothing is written."""
    from ctxcompact.formats.reader import iter_sessions

    _check_inputs(inputs)
    _check_outputs({option: out, "--rejects": rejects}, inputs)
    # a symlink's target is written (the link stays), as every output is
    with _output_errors(out, option):
        out = check_replaceable(out)
    if rejects is not None:
        with _output_errors(rejects, "--rejects"):
            rejects = check_replaceable(rejects)
    out_tmp = beside(out)
    rejects_tmp = beside(rejects) if rejects is not None else None
    rows = rejected = pending_rows = pending_bytes = bad_lines = 0
    shown: list[RejectedLine] = []  # the first rejected lines, named at the end
    pending: list[pa.Table] = []
    last: IngestResult | None = None
    writer: pq.ParquetWriter | None = None
    reject_file = None
    try:
        if rejects is not None and rejects_tmp is not None:
            with _output_errors(rejects, "--rejects"):
                reject_file = rejects_tmp.open("w", encoding="utf-8")
        for window in iter_sessions(inputs, fmt, on_error=on_error,  # type: ignore[arg-type]
                                    threads=threads, window_bytes=window_bytes):  # fmt: skip
            table = window.table  # the readers count output_utf16 (and tool_target) already
            if not count_units:
                table = table.drop_columns([OUTPUT_UNITS, TOOL_TARGET])
            for method in count_methods:
                table = with_output_units(table, method=method, threads=threads).to_arrow()
            for family in count_exact:
                table = count_exact_parts(table, family, threads)
            with _output_errors(out, option):
                if writer is None:
                    writer = pq.ParquetWriter(out_tmp, table.schema)
                pending.append(table.cast(writer.schema))
                pending_rows += table.num_rows
                pending_bytes += table.nbytes
                # Small windows (a folder of small files) gather into one row group.
                if pending_rows >= ROW_GROUP_ROWS or pending_bytes >= window_bytes:
                    writer.write_table(pa.concat_tables(pending))
                    pending, pending_rows, pending_bytes = [], 0, 0
            rows += table.num_rows
            if reject_file is not None:
                with _output_errors(rejects or out, "--rejects"):
                    for r in window.rejected:
                        reject_file.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
            rejected += len(window.rejected)
            lines = _rejected_lines(window.rejected, window.files)
            shown += lines[: SHOWN_REJECTS - len(shown)]
            bad_lines += len(lines)
            last = window
        assert last is not None and writer is not None  # iter_sessions yields at least once
        with _output_errors(out, option):
            if pending:
                writer.write_table(pa.concat_tables(pending))
            writer.close()
        if verify:
            _verify_written(out_tmp, out)
        moves = [(out_tmp, out, option)]
        if reject_file is not None and rejects is not None and rejects_tmp is not None:
            with _output_errors(rejects, "--rejects"):
                reject_file.close()
            moves.append((rejects_tmp, rejects, "--rejects"))
        # both files or neither: a failed second rename puts the first one back
        _replace_outputs(moves)
    except BaseException:
        for handle in (writer, reject_file):
            with suppress(Exception):
                if handle is not None:
                    handle.close()
        for tmp in (out_tmp, rejects_tmp):
            with suppress(OSError):
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
        raise
    _report_files(last.files)
    _report_rejected(shown, bad_lines, rejects)
    return _Streamed(last, rows, rejected)


#: Where the rows of a transcript read from files come from: (file, rows,
#: whether the file's rows are the table's, i.e. Parquet), in table order.
Segments = list[tuple[Path, int, bool]]


def _read(path: Path, segments: Segments | None = None) -> cc.Transcript:
    """The transcript of the Parquet file or folder ``path`` (read whole: a
    bad file or row is always an error; ``segments``: where each file's rows
    are is added to it). Session files are read by ``_load_many``."""
    return cc.Transcript(_read_parquet(path, segments))


def _read_parquet(source: Path | list[Path], segments: Segments | None = None) -> pa.Table:
    """The part rows of Parquet files and folders, read as ``batch`` reads
    them (``parquet_dataset``: a folder's ``*.parquet`` files, names starting
    with ``_`` or ``.`` left out; every file left out named on stderr)."""
    from ctxcompact.batch.parquet import check_parts_once, check_readable, parquet_dataset

    found = parquet_dataset(source)
    _report_files(found.skipped)
    if len(found.files) > 1:
        _check_parquet_sessions(found.files)
    tables = []
    for path in found.files:
        check_readable(path)  # an unreadable file: its OSError (exit 3), not bad data
        try:
            tables.append(pq.read_table(path))
        except (pa.ArrowInvalid, OSError) as e:
            check_readable(path)
            raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
        # a part twice within the file (check_file_joins compared the joins)
        check_parts_once(tables[-1], functools.partial(_in_path, path))
        if segments is not None:
            segments.append((path, tables[-1].num_rows, True))
    # tool_target comes back as dictionary<int32, string> per row group (or
    # plain, from other writers): one TARGETS_DICTIONARY over every file
    if len(tables) == 1:
        return targets_as_dictionary(tables[0])
    # role / part_type / status as int8 codes in some files, names in others
    # (docs/schema.md allows both): the codes read as names, so they join
    tables = _codes_as_names(tables, [[(path, t.num_rows, True)] for path, t
                                      in zip(found.files, tables, strict=True)])  # fmt: skip
    tables = _plain_where_mixed(tables)
    try:
        tables = [targets_as_dictionary(t) for t in tables]
        return targets_as_dictionary(pa.concat_tables(tables, promote_options="permissive"))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SchemaError(f"{source}: the files' columns do not agree "
                          f"({_one_line(str(e))})") from None  # fmt: skip


def _in_path(path: Path, row: int) -> tuple[Path, int]:
    return path, row


def _codes_as_names(tables: list[pa.Table], where: list[Segments]) -> list[pa.Table]:
    """``tables``, to be joined, with each column that holds int8 codes in
    some and names in others (``mixed_codes``) read as names in all: a code
    that stands for nothing is an ``UnknownValueError`` naming the file
    (``where``: each table's segments) and its row there."""
    mixed = mixed_codes(t.schema for t in tables)
    if not mixed:
        return tables
    named = []
    for table, segments in zip(tables, where, strict=True):
        try:
            named.append(code_names(table, mixed))
        except cc.CompactionError as e:
            _relocate_in(e, segments)
            raise
    return named


def _plain_where_mixed(tables: list[pa.Table]) -> list[pa.Table]:
    """``tables``, to be joined, with each column that is dictionary-encoded
    in some and plain in others (a ``session_id`` written as a category by
    polars or the demo's generator, beside an ingested file's strings) read
    as its plain values in all: the same column, encoded two ways, which
    Arrow will not join (``tool_target`` is made one dictionary afterwards)."""
    types: dict[str, set[pa.DataType]] = {}
    for t in tables:
        for f in t.schema:
            types.setdefault(f.name, set()).add(f.type)
    mixed = {name for name, kinds in types.items() if name != "tool_target" and len(kinds) > 1
             and any(pa.types.is_dictionary(k) for k in kinds)}  # fmt: skip
    if not mixed:
        return tables
    out = []
    for t in tables:
        for name in mixed & set(t.schema.names):
            i = t.schema.get_field_index(name)
            kind = t.schema.field(i).type
            if pa.types.is_dictionary(kind):
                t = t.set_column(i, pa.field(name, kind.value_type), t.column(i).cast(
                    kind.value_type))  # fmt: skip
        out.append(t)
    return out


def _relocate_in(error: cc.CompactionError, segments: Segments) -> None:
    """``error``, about a row of the table ``segments`` make up, made to name
    the file it is in (and, for Parquet, the row in that file)."""
    start = 0
    for path, rows, parquet in segments:
        if error.row is not None and error.row < start + rows:
            relocate(error, path, error.row - start if parquet else error.row)
            return
        start += rows


def _label(inputs: list[Path]) -> str:
    """The inputs, named in a message."""
    return ", ".join(map(str, inputs))


def _load_all(
    inputs: list[Path], fmt: str | None, on_error: str, as_json: bool, segments: Segments,
    read_as: list[str] | None = None,
) -> cc.Transcript:  # fmt: skip
    """``_load_many`` under a "reading" status line."""
    with _status(f"reading {_label(inputs)}", as_json):
        return _load_many(inputs, fmt, on_error, segments, read_as)


def _load_verified(
    inputs: list[Path], reading: Reading, as_json: bool, verify: bool,
    read_as: list[str] | None = None,
) -> cc.Transcript:  # fmt: skip
    """``_load_all`` of a command's ``reading`` options, then (``--verify``)
    ``_verify_read`` of what it read."""
    segments: Segments = []
    transcript = _load_all(inputs, reading.fmt, reading.on_error, as_json, segments, read_as)
    if verify:
        _verify_read(transcript, inputs, segments)
    return transcript


def _verify_read(transcript: cc.Transcript, inputs: list[Path], segments: Segments) -> None:
    """``--verify`` on what ``_load_many`` read: an error about a row names
    the file it came from when there are several."""
    try:
        _verify(transcript.to_arrow(), inputs[0] if len(inputs) == 1 else Path(_label(inputs)))
    except cc.CompactionError as e:
        if len(inputs) > 1:
            _relocate_in(e, segments)
        raise


#: ``--verify``: the rows of each exact count column (``Transcript.count``)
#: counted again, at random, per table or batch read (the other counted
#: columns are checked at every row: counting them again is cheap).
EXACT_VERIFY_SAMPLE = 1000


def _verify(table: pa.Table, path: Path, offset: int = 0) -> None:
    """``--verify``: every counted column of ``table`` matches its text, and
    every ``tool_target`` its tool and input (all rows, not a sample: one
    stale row gives wrong numbers); the exact counts at a sample of
    ``EXACT_VERIFY_SAMPLE`` rows (a changed text's count is never read; a
    count wrong for its text is an error naming its column and row).
    ``offset``: the table's first row in ``path``."""
    from ctxcompact.scans import verify_output_units
    from ctxcompact.transcript import counted_columns, exact_columns

    counted = counted_columns(table.schema)
    exact = exact_columns(table.schema)
    if not counted and not exact and TOOL_TARGET not in table.column_names:
        return
    for name, (_family, text, _hashes) in exact.items():
        if text not in table.column_names:
            raise MissingColumnError(
                f"{path}: --verify needs the {text} text (no column {text!r}) to check {name}",
                column=text,
            )
    if counted and "output" not in table.column_names:
        raise MissingColumnError(
            f"{path}: --verify needs the output text (no column 'output') to check "
            f"{', '.join(counted)}", column="output",
        )  # fmt: skip
    try:
        verify_output_units(table, sample=table.num_rows, exact_sample=EXACT_VERIFY_SAMPLE)
    except TranscriptError as e:
        if offset and e.row is not None:
            e.args = (re.sub(rf"\brow {e.row}\b", f"row {e.row + offset}", str(e), count=1),)
            e.row += offset
        raise


def _verify_parquet(source: list[Path], batch_rows: int) -> None:
    """``_verify`` over Parquet files a batch at a time (bounded memory)."""
    from ctxcompact.batch.parquet import parquet_files
    from ctxcompact.transcript import counted_columns, exact_columns

    for path in parquet_files(source):
        try:
            file = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError):
            return  # left to the reader, which names it
        counted = counted_columns(file.schema_arrow)
        targets = [TOOL_TARGET, "tool", "input"] if TOOL_TARGET in file.schema_arrow.names else []
        exact = [c for name, (_, text, hashes) in exact_columns(file.schema_arrow).items()
                 for c in (name, text, hashes)]  # fmt: skip
        if not counted and not targets and not exact:
            continue
        wanted = ("session_id", "message_id", "output", *counted, *targets, *exact)
        names = [c for c in dict.fromkeys(wanted) if c in file.schema_arrow.names]
        offset = 0
        with _naming(path):
            for batch in file.iter_batches(batch_size=batch_rows, columns=names):
                table = pa.Table.from_batches([batch])
                _verify(table, path, offset)
                offset += table.num_rows


def _verify_written(written: Path, out: Path) -> None:
    """``_verify_parquet`` of the temporary file ``written``, its errors
    naming the file it becomes (``out``)."""
    try:
        _verify_parquet([written], ROW_GROUP_ROWS)
    except (TranscriptError, DatasetError, SchemaError) as e:
        e.args = (str(e).replace(str(written), str(out)), *e.args[1:])
        raise


def _names(param: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command whose data errors name its input ``param`` (``_naming``),
    its option bundles put in place (``bundles``)."""

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        command = bundles(command)

        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            with _naming(kwargs[param]):
                command(**kwargs)

        return run

    return wrap


@contextmanager
def _naming(inputs: Path | list[Path]) -> Iterator[None]:
    """A data error about a single input names it (a scan's error says the
    row and column, not the file), as batch's do."""
    paths = inputs if isinstance(inputs, list) else [inputs]
    try:
        yield
    except (SchemaError, TranscriptError, DatasetError) as e:
        text = str(e)
        if len(paths) == 1 and e.args and str(paths[0]) not in text:
            e.args = (f"{paths[0]}: {text}", *e.args[1:])
        raise


def _parquet_sources(
    inputs: list[Path], on_error: str = "raise"
) -> tuple[list[Path], str, list[FileReport], int]:
    """Parquet paths for ``inputs``: the Parquet ones as given, the session
    files and folders ingested into one temporary file, removed when the
    process exits (success or not); the formats read, the session files
    found, as ingest reports them (none for Parquet only), and the lines
    ``on_error="skip"`` left out (``ingest``'s ``--on-error``). A session in
    two of them is a ``DuplicateSessionError`` naming both (the session files
    by their own names, not the temporary file's)."""
    from ctxcompact.batch.parquet import parquet_files

    _check_sources(inputs)
    parquet = [p for p in inputs if _is_parquet(p)]
    sessions = [p for p in inputs if not _is_parquet(p)]
    found: list[FileReport] = []
    rejected = 0
    formats = ["parquet"] if parquet else []
    sources = list(parquet)
    if sessions:
        scratch = tempfile.mkdtemp(prefix="ctxcompact-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        out = Path(scratch) / "ingested.parquet"
        streamed = _ingest_to_parquet(sessions, None, out, "the temporary Parquet",
                                      on_error=on_error)  # fmt: skip
        found, rejected = streamed.last.files, streamed.rejected
        formats.append(streamed.last.format)
        sources.append(out)
    if len(inputs) > 1:
        try:
            _check_parquet_sessions(parquet_files(sources))
        except DuplicateSessionError as e:
            if sessions:
                e.args = (str(e).replace(str(out), f"the session files ({_label(sessions)})"),)
            raise
    return sources, ", ".join(f for f in formats if f), found, rejected


def _check_parquet_sessions(files: list[Path]) -> None:
    """A session in two Parquet files is a ``DuplicateSessionError`` naming both,
    unless its rows follow on (it ends one file and starts the next): the same
    runs in two files would otherwise be rows "not contiguous", naming no file;
    and so is a part repeated where one file ends and the next begins
    (``check_file_joins``). A file that cannot be read is left to the reader
    that reports it."""
    from ctxcompact.batch.parquet import check_file_joins

    seen: dict[Any, Path] = {}
    last: Any = None
    for path in files:
        try:
            ids = pq.read_table(path, columns=["session_id"]).column("session_id")
        except (pa.ArrowException, OSError, KeyError):
            return
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        if pa.types.is_dictionary(ids.type):
            ids = ids.cast(ids.type.value_type)
        if len(ids) == 0:
            continue
        changes = pyarrow.compute.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
        starts = [0, *(int(i) + 1 for i in pyarrow.compute.indices_nonzero(changes).to_pylist())]
        for sid in ids.take(pa.array(starts)).to_pylist():
            if sid != last and seen.setdefault(sid, path) != path:
                raise DuplicateSessionError(
                    f"session id {sid!r} is in {seen[sid]} and in {path}: the same runs "
                    "given twice? (a session may continue from one file into the next, "
                    "not come back in another): read each run once",
                    session_id=None if sid is None else str(sid),
                )
            last = sid
    check_file_joins(files)  # a part read twice where one file ends and the next begins


def _load_many(
    inputs: list[Path], fmt: str | None, on_error: str = "raise", segments: Segments | None = None,
    read_as: list[str] | None = None,
) -> cc.Transcript:  # fmt: skip
    """Parquet files/folders and session files/folders as one transcript
    (``segments``: where each file's rows are is added to it; ``read_as``:
    the formats read, "parquet" first)."""
    _check_sources(inputs)
    _check_format(inputs, fmt)
    parquet = [p for p in inputs if _is_parquet(p)]
    sessions = [p for p in inputs if not _is_parquet(p)]
    if len(parquet) > 1:
        from ctxcompact.batch.parquet import parquet_files

        _check_parquet_sessions(parquet_files(parquet))  # a file given twice is named as such
    # each table's segments: where the rows of it come from
    where: list[Segments] = [[] for _ in parquet]
    tables = [_read(p, segments=w).to_arrow() for p, w in zip(parquet, where, strict=True)]
    if parquet and read_as is not None:
        read_as.append("parquet")
    if sessions:
        result = _ingest(sessions, fmt, on_error=on_error)
        ingested = result.table
        if read_as is not None and result.format:
            read_as.append(result.format)
        where.append([(sessions[0], ingested.num_rows, False)])
        # The same runs given as session files and as Parquet would surface as
        # non-contiguous rows (a session may span Parquet files, so those are
        # not compared with each other).
        read = set(pyarrow.compute.unique(ingested.column("session_id")).to_pylist())
        for table, path in zip(tables, parquet, strict=True):
            for sid in pyarrow.compute.unique(table.column("session_id")).to_pylist():
                if sid in read:
                    raise DuplicateSessionError(
                        f"session id {sid!r} is in {path} and in the session files "
                        f"({', '.join(map(str, sessions))}): read each run once",
                        session_id=sid,
                    )
        tables.append(ingested)
    if segments is not None:
        segments.extend(s for w in where for s in w)
    if len(tables) == 1:
        return cc.Transcript(tables[0])
    tables = _codes_as_names(tables, where)  # coded Parquet beside names: names
    tables = _plain_where_mixed(tables)  # a column dictionary-encoded in some only
    try:
        # tool_target: one dictionary over the whole table, not one per input
        joined = pa.concat_tables(tables, promote_options="permissive")
        return cc.Transcript(targets_as_dictionary(joined))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise DatasetError(f"the inputs' columns do not agree ({_one_line(str(e))})") from None


def _to_sessions(transcript: cc.Transcript, segments: Segments) -> list[cc.Session]:
    """``transcript.to_sessions()``; an error about a row names the file it
    was read from (and, for Parquet, the row in that file)."""
    try:
        return transcript.to_sessions()
    except cc.CompactionError as e:
        _relocate_in(e, segments)
        raise


def _cli_wording(message: str) -> str:
    # Library messages name keyword arguments; on the command line it is --format.
    from ctxcompact.tuning.prices import UNKNOWN_HINT

    message = message.replace(
        UNKNOWN_HINT,
        'give its price in a --config file ([compaction.prices."<model>"] with input and '
        "output, USD per million tokens) or in CTXCOMPACT_PRICES (JSON)",
    )
    return re.sub(r"\bpass format=", f"pass --format (one of: {', '.join(READ_FORMATS)})", message)
