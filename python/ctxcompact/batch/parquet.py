"""Stream compaction over Parquet datasets of any size, in bounded memory.

Files are read in order as record batches; the rows of the session that a
batch ends in are carried into the next batch (across files too), so every
``compact_batch`` call sees whole sessions. Memory is bounded by the batch
size plus the largest single session, not by the dataset (benches/memory.py
measures it). Outputs are
written to temporary files and renamed into place only when the whole run
succeeded: a failed run leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxcompact._atomic import check_replaceable, replace_together
from ctxcompact._outputs import check_outputs
from ctxcompact._sources import PARQUET_SUFFIX, hidden
from ctxcompact.batch.compact import REPORT_SCHEMA, compact_batch
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionError,
    DatasetError,
    DuplicateSessionError,
    MissingColumnError,
    NonContiguousError,
    SchemaError,
)
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.transcript import (
    CODES,
    OUTPUT_UNITS,
    SCAN_COLUMNS,
    TARGETS_DICTIONARY,
    TOOL_TARGET,
    code_names,
    count_output_units,
    encode_targets,
    mixed_codes,
    relocate,
    targets_as_dictionary,
    tool_targets,
)
from ctxcompact.transcript.schema import holds_names

#: Columns a Parquet input must have (``auto`` may be absent).
REQUIRED = [c for c in SCAN_COLUMNS if c != "auto"]


@dataclass
class BatchReport:
    #: Files read (the Parquet files; a folder's files left out are in ``skipped``).
    files: int = 0
    sessions: int = 0
    parts_in: int = 0
    #: Part rows written to the destination; ``None`` when there is none
    #: (a report-only run writes no part row).
    parts_out: int | None = 0
    #: Bytes of the Arrow columns read (decoded, in memory), not the files'
    #: size: a report-only run on counted rows reads no output text, so it
    #: reads fewer. Was ``bytes_in`` (still readable under that name).
    bytes_read: int = 0
    tokens_before: int = 0
    tokens_pruned: int = 0
    tokens_after: int = 0
    #: Record batches read (of at most ``batch_rows`` rows each).
    batches: int = 0
    #: Most part rows held in memory at once (batch + carried session rows).
    peak_rows: int = 0
    seconds: float = 0.0
    #: Files of the source's folders left out (``formats.reader.FileReport``:
    #: path, ``"skipped"``, reason), by ``parquet_dataset``'s rule.
    skipped: list[Any] = field(default_factory=list)

    @property
    def bytes_in(self) -> int:
        """``bytes_read``'s former name."""
        return self.bytes_read

    def to_dict(self) -> dict[str, Any]:
        """The counts (``skipped`` as the number of files left out)."""
        found = asdict(self)
        found["skipped"] = len(self.skipped)
        return found


@dataclass(frozen=True)
class ParquetFiles:
    """The files a Parquet source is read from, in order, and those of its
    folders left out (``FileReport``, status ``"skipped"``, with the reason)."""

    files: list[Path]
    skipped: list[Any]


def _walk(folder: Path) -> ParquetFiles:
    from ctxcompact.formats.reader import FileReport

    files: list[Path] = []
    skipped: list[Any] = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).parts
        if any(hidden(p) for p in relative[:-1]):
            continue  # inside a folder already named as skipped
        if hidden(path.name):
            what = "folder" if path.is_dir() else "file"
            skipped.append(FileReport(str(path), "skipped", reason=f"a {what} name starting "
                                      "with '_' or '.' (metadata, not data, in a Parquet "
                                      "dataset)"))  # fmt: skip
        elif path.is_dir() and not path.is_symlink():
            continue
        elif not path.is_file():
            skipped.append(FileReport(str(path), "skipped", reason="not a regular file"))
        elif not path.name.endswith(PARQUET_SUFFIX):
            skipped.append(FileReport(str(path), "skipped", reason="not a Parquet file by its "
                                      f"extension ({PARQUET_SUFFIX})"))  # fmt: skip
        else:
            files.append(path)
    return ParquetFiles(files, skipped)


def parquet_dataset(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> ParquetFiles:
    """The files of ``source`` (a file, a folder searched recursively, or a
    list of them), in order, and what its folders hold that is not read.

    The one rule for a Parquet folder, in every command and API that reads
    one: its ``*.parquet`` files, in sorted path order, without names (of
    files or folders) starting with ``_`` or ``.``; every other file is left
    out and listed in ``skipped``. A file given by name is read whatever its
    extension. A folder with no file to read is a ``DatasetError``; a file
    given twice too (``read_once``).
    """
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            found = _walk(path)
            if not found.files:
                left = f" ({len(found.skipped)} other file(s) left out)" if found.skipped else ""
                raise DatasetError(f"{path}: no .parquet files in this directory{left}")
            return found
        check_readable(path)  # a missing file is the OSError naming it, as for session files
        return ParquetFiles([path], [])
    from ctxcompact.formats.reader import read_once

    each = [parquet_dataset(s) for s in source]
    files = [p for d in each for p in d.files]
    read_once(files)  # a file given twice is named, not a session that "appears again"
    return ParquetFiles(files, [f for d in each for f in d.skipped])


def _given(source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The paths ``source`` names (its folders as folders)."""
    if isinstance(source, str | os.PathLike):
        return [Path(source)]
    return [Path(s) for s in source]


def parquet_files(source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files ``parquet_dataset`` reads from ``source``, in order (what it
    leaves out is in ``parquet_dataset(source).skipped``)."""
    return parquet_dataset(source).files


def check_readable(path: Path) -> None:
    """A Parquet input that cannot be read as a file (gone, a folder, a named
    pipe, no permission) is Python's ``OSError`` naming it, as a session file
    is (README, Errors; exit 3 on the command line); only what its content
    holds is a ``DatasetError``. Decided from the path itself, never from
    pyarrow's error (whose errno does not say which). A named pipe is never
    opened (that waits for a writer)."""
    from ctxcompact.formats.reader import _not_regular

    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path)
    if not os.access(path, os.R_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))


def _open(path: Path) -> pq.ParquetFile:
    check_readable(path)
    try:
        # pre_buffer would keep the coalesced reads of the whole file alive
        # while iterating (memory growing with the file): read column chunks
        # through a small buffer instead.
        return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowInvalid, OSError) as e:
        check_readable(path)  # gone (or replaced) since: still the file's OSError
        raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None


def _check_schema(path: Path, schema: pa.Schema, columns: list[str] | None = None) -> None:
    """The columns a run needs are in ``path``; a report-only run reading
    ``columns`` (the counts, never the text) needs no ``output``."""
    for column in REQUIRED:
        if column == "output" and columns is not None and "output" not in columns:
            continue
        if column not in schema.names:
            raise MissingColumnError(f"{path}: no column {column!r}", column=column)


def _batches(
    path: Path, batch_rows: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    file = _open(path)
    _check_schema(path, file.schema_arrow, columns)
    try:
        yield from file.iter_batches(batch_size=batch_rows, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:  # truncated or corrupt row groups
        raise DatasetError(f"{path}: cannot read it to the end ({e})") from None


#: What names a part row: two rows with these equal are the same part.
_PART_KEY = ("session_id", "message_id", "part_id")


@dataclass(frozen=True)
class _Edge:
    """A file's message at one end: its (session, message) and the part ids
    of its rows there, with the file row of each."""

    message: tuple[Any, Any]
    parts: dict[Any, int]


def _message_run(ids: pa.Table, from_end: bool) -> tuple[tuple[Any, Any], dict[Any, int], int]:
    rows = ids.to_pydict()
    n = ids.num_rows
    order = range(n - 1, -1, -1) if from_end else range(n)
    key = None
    parts: dict[Any, int] = {}
    for i in order:
        here = (rows["session_id"][i], rows["message_id"][i])
        if key is None:
            key = here
        elif here != key:
            break
        parts.setdefault(rows["part_id"][i], i)
    assert key is not None
    return key, parts, n


def _edges(path: Path) -> tuple[_Edge, _Edge] | None:
    """The messages ``path`` starts and ends with (from its first and last
    row groups, three id columns); ``None`` for a file without rows or
    without ``part_id`` (then nothing is compared)."""
    file = _open(path)
    meta = file.metadata
    if any(c not in file.schema_arrow.names for c in _PART_KEY) or meta.num_rows == 0:
        return None
    nonempty = [g for g in range(meta.num_row_groups) if meta.row_group(g).num_rows]
    try:
        head = file.read_row_group(nonempty[0], columns=list(_PART_KEY))
        tail = file.read_row_group(nonempty[-1], columns=list(_PART_KEY))
    except (pa.ArrowInvalid, OSError) as e:
        raise DatasetError(f"{path}: cannot read it to the end ({e})") from None
    first, first_parts, _ = _message_run(head, from_end=False)
    last, last_parts, n = _message_run(tail, from_end=True)
    before = meta.num_rows - n  # file row of the last row group's first row
    return (_Edge(first, first_parts),
            _Edge(last, {p: before + i for p, i in last_parts.items()}))  # fmt: skip


def check_file_joins(files: list[Path]) -> None:
    """Refuse a part read twice where one file ends and the next begins: a
    message continued from one file into the next whose part id is already
    in the first (overlapping or re-exported shards), which would otherwise
    be read as another part and counted twice. A ``DuplicateSessionError``
    naming both files and the rows. Part ids are unique within a message
    (docs/schema.md); only the joins are compared, which costs a row group's
    three id columns per file, before any work (a repeat inside a file is
    ``check_parts_once``'s, as the rows are read)."""
    previous: tuple[Path, _Edge] | None = None
    for path in files:
        edges = _edges(path)
        if edges is None:
            continue
        first, last = edges
        if previous is not None and first.message == previous[1].message:
            again = [p for p in first.parts if p is not None and p in previous[1].parts]
            if again:
                (sid, mid), pid = first.message, again[0]
                row, earlier = first.parts[pid], previous[1].parts[pid]
                raise part_read_twice(
                    f"{path}: row {row} repeats row {earlier} of {previous[0]} (session "
                    f"{sid!r}, message {mid!r}, part {pid!r}): the same part read twice "
                    "(overlapping or re-exported files?); read each row once",
                    sid, mid, row,
                )  # fmt: skip
        previous = (path, last)


def _plain(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One array of the values (a dictionary column decoded)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def repeated_part(rows: pa.Table) -> tuple[int, int] | None:
    """The first pair of rows of ``rows`` that are one part twice (the same
    session, message and part id: ``(earlier, later)``), or ``None``;
    ``None`` too for rows without ``part_id``.

    Exact, and vectorised: rows of a message are contiguous (a message that
    reappears is the scans' ``NonContiguousError``), so each run of rows with
    the same session and message is compared. Part ids that ascend within
    every run (OpenCode's, the library's own) prove it in one comparison of
    each row with the one before (about 20 ms a million rows); otherwise the
    rows are sorted by (run, part id) and each compared with the one before
    (about 0.3 s a million rows of random ids)."""
    n = rows.num_rows
    if n < 2 or any(c not in rows.column_names for c in _PART_KEY):
        return None
    sid, mid, pid = (_plain(rows.column(c)) for c in _PART_KEY)

    def follows(column: pa.Array) -> pa.Array:
        return pc.equal(column.slice(1), column.slice(0, n - 1))

    same = pc.fill_null(pc.and_(follows(sid), follows(mid)), False)  # row i+1 continues row i
    ascends = pc.fill_null(pc.greater(pid.slice(1), pid.slice(0, n - 1)), False)
    if not pc.any(pc.and_(same, pc.invert(ascends))).as_py():
        return None
    starts = pc.cast(pc.invert(same), pa.int64())  # row i+1 starts a run
    run = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(starts)])
    # a stable sort by (run, part id): a repeat follows the part it repeats
    order = pc.sort_indices(pa.table({"run": run, "part": pid}),
                            sort_keys=[("run", "ascending"), ("part", "ascending")])  # fmt: skip
    runs, parts = run.take(order), pid.take(order)
    twice = pc.fill_null(pc.and_(follows(runs), follows(parts)), False)
    found = pc.indices_nonzero(twice)
    if not len(found):
        return None
    # the repeat met first in row order, and the part it repeats (its first row)
    laters = order.take(pc.add(found, 1))
    k = int(pc.index(laters, pc.min(laters)).as_py())
    return int(order[int(found[k].as_py())].as_py()), int(laters[k].as_py())


def check_parts_once(
    rows: pa.Table, locate: Callable[[int], tuple[Path | None, int]] | None = None
) -> None:
    """Refuse a part given twice within ``rows`` (``repeated_part``): a
    ``DuplicateSessionError`` naming the file (when known) and the rows of
    both, the session, message and part. ``locate(row)``: the file a row of
    ``rows`` comes from and its row there (default: no file, the row as is)."""
    found = repeated_part(rows)
    if found is None:
        return
    earlier, later = found
    sid, mid, pid = (rows.column(c)[later].as_py() for c in _PART_KEY)
    where = locate or (lambda i: (None, i))
    (path, row), (first_path, first) = where(later), where(earlier)
    at = f"row {row}" if path is None else f"{path}: row {row}"
    of = "" if first_path == path else f" of {first_path}"
    raise part_read_twice(
        f"{at} repeats row {first}{of} (session {sid!r}, message {mid!r}, part {pid!r}): "
        "the same part twice in one message (part ids are unique within a message); "
        "read each row once",
        sid, mid, row,
    )  # fmt: skip


def part_read_twice(
    message: str, session_id: Any, message_id: Any, row: int
) -> DuplicateSessionError:
    """The error for a part read twice (``check_file_joins``, ``check_parts_once``,
    a Ray block's check): the ids as strings where known, ``row`` the later one's."""
    return DuplicateSessionError(
        message,
        session_id=None if session_id is None else str(session_id),
        message_id=None if message_id is None else str(message_id),
        row=row,
        column="part_id",
    )


def _tail_start(session_ids: pa.ChunkedArray | pa.Array) -> int:
    """First row of the trailing run of the last session id."""
    last = session_ids[-1]
    differs = pc.not_equal(session_ids, last)
    idx = pc.indices_nonzero(differs)
    return 0 if len(idx) == 0 else int(idx[-1].as_py()) + 1


def _new_sessions(rows: pa.Table, done: set[str], where: Path) -> set[str]:
    """The session ids of ``rows``; ``NonContiguousError`` naming ``where`` for
    one already finished (``done``)."""
    ids = pc.unique(rows.column("session_id").cast(pa.large_string())).to_pylist()
    again = next((s for s in ids if s in done), None)
    if again is not None:
        raise NonContiguousError(
            f"{where}: session {again!r} appears again after other sessions "
            "(sort the dataset by session first)",
            session_id=again, column="session_id",
        )  # fmt: skip
    return set(ids)


#: Where rows of a chunk come from: (file, its first row in the file, rows).
_Segment = tuple[Path, int, int]


def _split(segments: list[_Segment], n: int) -> tuple[list[_Segment], list[_Segment]]:
    """``segments`` cut after their first ``n`` rows."""
    head: list[_Segment] = []
    tail: list[_Segment] = []
    for path, start, rows in segments:
        take = max(0, min(rows, n))
        if take:
            head.append((path, start, take))
        if rows > take:
            tail.append((path, start + take, rows - take))
        n -= take
    return head, tail


def _locate(segments: list[_Segment], row: int) -> tuple[Path, int]:
    """The file and the row in it of a chunk's row ``row``."""
    for path, start, rows in segments:
        if row < rows:
            return path, start + row
        row -= rows
    path, start, rows = segments[-1]
    return path, start + rows - 1 + row + 1


def _segment_sessions(
    rows: pa.Table, segments: list[_Segment], done: set[str]
) -> list[tuple[set[str], Path]]:
    """The session ids of each segment of ``rows``, with its file;
    ``NonContiguousError`` naming the file for one already finished."""
    seen = []
    at = 0
    for path, _, n in segments:
        seen.append((_new_sessions(rows.slice(at, n), done, path), path))
        at += n
    return seen


@dataclass
class _Chunk:
    """Whole sessions cut from the stream of files; ``segments`` say which
    file (and rows of it) each stretch of ``rows`` comes from: a session
    carried over from earlier batches may span several files. ``read``: the
    batch just read (``None`` for the last carry)."""

    rows: pa.Table
    segments: list[_Segment]
    read: pa.Table | None
    held: int


def _chunks(
    files: list[Path], batch_rows: int, columns: list[str] | None = None
) -> Iterator[_Chunk]:
    """One chunk of whole sessions per batch read (possibly empty: the batch
    continued one session), then the last carry. Files whose schema differs
    from the first's raise ``SchemaError``, but for ``role``, ``part_type``
    and ``status`` held as int8 codes in some files and names in others
    (docs/schema.md allows both): those codes are read as names."""
    schema: pa.Schema | None = None
    carry: pa.Table | None = None
    carry_segments: list[_Segment] = []
    mixed = mixed_codes(_open(path).schema_arrow for path in files) if len(files) > 1 else []
    for path in files:
        offset = 0
        for batch in _batches(path, batch_rows, columns):
            # tool_target reads back as dictionary<int32, string> (or plain,
            # from other writers): the library's TARGETS_DICTIONARY, per batch
            table = targets_as_dictionary(pa.Table.from_batches([batch]))
            if mixed:
                try:
                    table = code_names(table, mixed)
                except CompactionError as e:  # a code standing for nothing
                    raise relocate(e, path, None if e.row is None else offset + e.row) from None
            if schema is None:
                schema = table.schema
            if OUTPUT_UNITS in schema.names and OUTPUT_UNITS not in table.column_names:
                # a file written without the counts, after one with them: count its own
                table = table.append_column(schema.field(OUTPUT_UNITS), count_output_units(table))
            if TOOL_TARGET in schema.names and TOOL_TARGET not in table.column_names:
                # a file written without the targets, after one with them: work out its own
                table = table.append_column(TARGETS_DICTIONARY, encode_targets(tool_targets(table)))
            for column in CODES:  # codes (of any int) and names never cast to one another
                if column not in table.column_names or column not in schema.names:
                    continue
                want, got = schema.field(column).type, table.schema.field(column).type
                if pa.null() not in (want, got) and holds_names(want) != holds_names(got):
                    raise SchemaError(
                        f"{path}: its schema does not match the first file's (column "
                        f"{column!r} is {got}, not {want})", column=column,
                    )  # fmt: skip
            try:
                table = table.select(schema.names).cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as e:
                raise SchemaError(
                    f"{path}: its schema does not match the first file's ({e})"
                ) from None
            combined = table if carry is None else pa.concat_tables([carry, table])
            segments = [*carry_segments, (path, offset, table.num_rows)]
            cut = _tail_start(combined.column("session_id"))
            done, carry_segments = _split(segments, cut)
            yield _Chunk(combined.slice(0, cut), done, table, combined.num_rows)
            carry = combined.slice(cut)
            offset += table.num_rows
    if carry is not None:
        yield _Chunk(carry, carry_segments, None, carry.num_rows)


#: What the one-pass scan reads for a report when the outputs' lengths are
#: counted (schema.rs, Scan::Compact, without output and part_id), before the
#: counted column itself.
_REPORT_COLUMNS = (
    "session_id", "message_id", "role", "part_type", "parent_id", "summary", "finished",
    "error", "tool", "status", "input", "compacted_at", "part_json",
)  # fmt: skip


def _report_columns(metas: list[pq.FileMetaData], cfg: CompactionConfig) -> list[str] | None:
    """The columns a report-only run reads: only those the scan reads, never
    the output text, when every file holds the outputs' UTF-16 lengths
    counted once (``output_utf16``) for every output (the column statistics'
    null counts equal the output's), the estimate is opencode's (a family's
    table reads a message's texts joined: its counts serve prune only), and
    nothing the report needs reads the text (no cut or described outputs);
    ``None`` (all) otherwise."""
    policy = cfg.policy
    if (
        cfg.estimate_method != "opencode"
        or policy.truncate_output is not None
        or policy.placeholder == "describe"
    ):
        return None
    for meta in metas:
        schema = meta.schema.to_arrow_schema()
        if OUTPUT_UNITS not in schema.names or not _counted_everywhere(meta, OUTPUT_UNITS):
            return None
    names = metas[0].schema.to_arrow_schema().names
    # supersession's targets, when every file has them (else each is worked out)
    everywhere = all(TOOL_TARGET in m.schema.to_arrow_schema().names for m in metas)
    # part_id: not read by the scan, but a part given twice is refused (check_parts_once)
    wanted = (*_REPORT_COLUMNS, "part_id", OUTPUT_UNITS, *([TOOL_TARGET] if everywhere else []))
    return [c for c in wanted if c in names]


def _counted_everywhere(meta: pq.FileMetaData, name: str) -> bool:
    """Whether, by the row groups' statistics, ``name`` has no null: a null
    count means "measure the text", and equal null counts of the two columns
    would not prove the nulls are in the same rows (the library writes 0 for
    a null output, so its columns have none)."""
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if "output" not in paths:
        return True  # written without its text: the counts are all there is
    counts = paths.index(name)
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(counts).statistics
        if stats is None or not stats.has_null_count or stats.null_count != 0:
            return False
    return True


def compact_parquet(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    destination: str | os.PathLike[str] | None,
    config: CompactionConfig | None = None,
    *,
    report_path: str | os.PathLike[str] | None = None,
    batch_rows: int = 65_536,
    limits: Any = None,
    now_ms: int | None = None,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BatchReport:
    """Compact every session of ``source`` into ``destination`` (Parquet).

    ``destination`` receives the compacted part rows (prune marks set,
    pivot-filtered); ``report_path`` (optional) one row per session
    (``batch.REPORT_SCHEMA``). ``destination=None`` writes the report only;
    then, when the outputs' lengths were counted once (``output_utf16``, see
    ``scans.with_output_units``), the output text is never read. Sessions
    must be contiguous in file order (they may span files); a session seen
    again later raises
    ``NonContiguousError`` naming it and the file, a part given twice
    ``DuplicateSessionError`` naming the file and rows (``check_parts_once``). ``progress(rows_done,
    rows_total)`` is called after every batch.
    """
    if batch_rows < 1:
        raise DatasetError("batch_rows must be at least 1")
    if destination is None and report_path is None:
        raise DatasetError("nothing to write: pass a destination, a report_path, or both")
    start = time.perf_counter()
    cfg = config or CompactionConfig()
    if limits is not None:  # before any work: a window with no input room (compact_batch's)
        check_window(Limits.coerce(limits), cfg)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if not isinstance(source, str | os.PathLike):
        source = list(source)  # read twice below
    # Before any work, so no output is half-replaced and no input replaced:
    # the CLI's rule (an output that is an input or that the source folder
    # would read next time, two outputs on one file).
    check_outputs({"destination": destination, "report_path": report_path}, _given(source))
    found = parquet_dataset(source)
    files = found.files
    metas = [_open(f).metadata for f in files]
    check_file_joins(files)
    total = sum(m.num_rows for m in metas)
    # a symlink's target is written (the link stays)
    dest = None if destination is None else check_replaceable(Path(destination))
    rp = None if report_path is None else check_replaceable(Path(report_path))
    # each output its own temporary name (the check above refused one file for both)
    tmp_dest = None if dest is None else dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    tmp_report = None if rp is None else rp.with_name(f".{rp.name}.report-tmp-{os.getpid()}")
    columns = None
    if dest is None and files:
        columns = _report_columns(metas, cfg)
    stats = BatchReport(files=len(files), skipped=found.skipped,
                        parts_out=None if dest is None else 0)  # fmt: skip
    done: set[str] = set()  # finished sessions: ~70 bytes each, the only per-session state
    writer: pq.ParquetWriter | None = None
    report_writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    rows_read = 0

    def process(rows: pa.Table, segments: list[_Segment]) -> None:
        """Compact ``rows``, which come from ``segments``: an error names the
        file its row comes from, and the row in it."""
        nonlocal writer, report_writer
        if rows.num_rows == 0:
            return
        seen = _segment_sessions(rows, segments, done)
        check_parts_once(rows, partial(_locate, segments))
        try:
            parts: pa.Table | None = None
            if tmp_dest is None:
                report = compact_batch(rows, cfg, now_ms=now, limits=limits, threads=threads)
            else:
                report, parts = compact_batch(rows, cfg, now_ms=now, limits=limits, parts=True,
                                              threads=threads)  # fmt: skip
            assert isinstance(report, pa.Table)
        except CompactionError as e:
            # The row, when the core names one, says which file; else the session's
            # last file (a reappearing session is wrong where it reappears).
            if e.row is not None:
                raise relocate(e, *_locate(segments, e.row)) from None
            where = next((w for ids, w in reversed(seen) if e.session_id in ids), segments[-1][0])
            raise relocate(e, where) from None
        for ids, _ in seen:
            done.update(ids)
        if parts is not None and tmp_dest is not None:
            if writer is None:
                writer = pq.ParquetWriter(tmp_dest, parts.schema)
            writer.write_table(parts.cast(writer.schema))
            stats.parts_out = (stats.parts_out or 0) + parts.num_rows
        if tmp_report is not None:
            if report_writer is None:
                report_writer = pq.ParquetWriter(tmp_report, REPORT_SCHEMA)
            report_writer.write_table(report)
        stats.sessions += report.num_rows
        stats.tokens_before += int(pc.sum(report["tokens_before"]).as_py() or 0)
        stats.tokens_pruned += int(pc.sum(report["tokens_pruned"]).as_py() or 0)
        stats.tokens_after += int(pc.sum(report["tokens_after"]).as_py() or 0)

    try:
        for chunk in _chunks(files, batch_rows, columns):
            if chunk.read is not None:
                if schema is None:
                    schema = chunk.read.schema
                rows_read += chunk.read.num_rows
                stats.batches += 1  # batches read, not compact calls (the last carry is one more)
                stats.parts_in += chunk.read.num_rows
                stats.bytes_read += chunk.read.nbytes
            stats.peak_rows = max(stats.peak_rows, chunk.held)
            process(chunk.rows, chunk.segments)
            if chunk.read is not None and progress is not None:
                progress(rows_read, total)
        if writer is None and tmp_dest is not None:  # an empty dataset: a valid empty output
            empty = schema.empty_table() if schema is not None else pa.table({})
            writer = pq.ParquetWriter(tmp_dest, empty.schema)
        if writer is not None:
            writer.close()
        if report_writer is None and tmp_report is not None:
            report_writer = pq.ParquetWriter(tmp_report, REPORT_SCHEMA)
        if report_writer is not None:
            report_writer.close()
        # both outputs or neither: a failed second rename puts the first one back
        moves = [(tmp, out) for tmp, out in ((tmp_dest, dest), (tmp_report, rp))
                 if tmp is not None and out is not None]  # fmt: skip
        replace_together(moves)
    except BaseException:
        for w in (writer, report_writer):
            if w is not None:
                with contextlib.suppress(Exception):  # the run already failed: keep its error
                    w.close()
        for tmp in (tmp_dest, tmp_report):
            if tmp is not None and tmp.exists():
                tmp.unlink()
        raise
    stats.seconds = time.perf_counter() - start
    return stats


def session_tables(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], batch_rows: int = 65_536
) -> Iterator[pa.Table]:
    """``located_session_tables`` without the places."""
    for table, _ in located_session_tables(source, batch_rows):
        yield table


def located_session_tables(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], batch_rows: int = 65_536
) -> Iterator[tuple[pa.Table, Callable[[int], tuple[Path, int]]]]:
    """The rows of ``source`` as tables of whole sessions, in file order, about
    ``batch_rows`` rows each (the session a batch ends in is carried into the
    next one, across files too). A session that reappears after another one
    raises ``NonContiguousError`` naming it and the file, a part given twice
    ``DuplicateSessionError`` naming the file and rows; files whose schema
    differs from the first's raise ``SchemaError``. Each table comes with the
    function giving the file, and the row in it, of a row of the table."""
    if batch_rows < 1:
        raise DatasetError("batch_rows must be at least 1")
    done: set[str] = set()
    for chunk in _chunks(parquet_files(source), batch_rows):
        if chunk.rows.num_rows:
            for ids, _ in _segment_sessions(chunk.rows, chunk.segments, done):
                done |= ids
            locate = partial(_locate, chunk.segments)
            check_parts_once(chunk.rows, locate)
            yield chunk.rows, locate


__all__ = [
    "REQUIRED",
    "BatchReport",
    "ParquetFiles",
    "check_file_joins",
    "check_parts_once",
    "compact_parquet",
    "located_session_tables",
    "parquet_dataset",
    "parquet_files",
    "session_tables",
]
