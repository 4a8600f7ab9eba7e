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
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxcompact._atomic import check_replaceable
from ctxcompact.batch.compact import REPORT_SCHEMA, compact_batch
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionError,
    DatasetError,
    MissingColumnError,
    NonContiguousError,
    SchemaError,
)
from ctxcompact.transcript import (
    OUTPUT_UNITS,
    SCAN_COLUMNS,
    TARGETS_DICTIONARY,
    TOOL_TARGET,
    count_output_units,
    encode_targets,
    targets_as_dictionary,
    tool_targets,
)

#: Columns a Parquet input must have (``auto`` may be absent).
REQUIRED = [c for c in SCAN_COLUMNS if c != "auto"]


@dataclass
class BatchReport:
    files: int = 0
    sessions: int = 0
    parts_in: int = 0
    parts_out: int = 0
    bytes_in: int = 0
    tokens_before: int = 0
    tokens_pruned: int = 0
    tokens_after: int = 0
    batches: int = 0
    #: Most part rows held in memory at once (batch + carried session rows).
    peak_rows: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parquet_files(source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files of ``source`` (a file, a directory searched recursively, or a list), in order."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
            if not files:
                raise DatasetError(f"{path}: no .parquet files in this directory")
            return files
        if not path.exists():
            raise DatasetError(f"{path}: no such file or directory")
        return [path]
    from ctxcompact.formats.reader import read_once

    files = [p for s in source for p in parquet_files(s)]
    read_once(files)  # a file given twice is named, not a session that "appears again"
    return files


def _open(path: Path) -> pq.ParquetFile:
    try:
        # pre_buffer would keep the coalesced reads of the whole file alive
        # while iterating (memory growing with the file): read column chunks
        # through a small buffer instead.
        return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowInvalid, OSError) as e:
        raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None


def _check_schema(path: Path, schema: pa.Schema) -> None:
    for column in REQUIRED:
        if column not in schema.names:
            raise MissingColumnError(f"{path}: no column {column!r}", column=column)


def _batches(
    path: Path, batch_rows: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    file = _open(path)
    _check_schema(path, file.schema_arrow)
    try:
        yield from file.iter_batches(batch_size=batch_rows, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:  # truncated or corrupt row groups
        raise DatasetError(f"{path}: cannot read it to the end ({e})") from None


def _in_file(error: CompactionError, path: Path, row: int | None = None) -> CompactionError:
    """The same error, with the file named and, when known, the row counted
    in that file (the core counts it in the batch)."""
    message = str(error)
    if row is not None and error.row is not None:
        message = re.sub(rf"\brow {error.row}\b", f"row {row}", message, count=1)
    again = type(error)(
        f"{path}: {message}", session_id=error.session_id, message_id=error.message_id,
        column=error.column, row=row,
    )  # fmt: skip
    return again


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


@dataclass
class _Chunk:
    """Whole sessions cut from the stream of files: the first ``carried`` rows
    come from ``carry_path`` (carried over from earlier batches), the rest from
    ``path``. ``read``: the batch just read (``None`` for the last carry)."""

    rows: pa.Table
    carried: int
    carry_path: Path
    path: Path
    read: pa.Table | None
    held: int
    #: File rows of the carry's first row (in ``carry_path``) and the read's (in ``path``).
    carry_row: int = 0
    row: int = 0


def _chunks(
    files: list[Path], batch_rows: int, columns: list[str] | None = None
) -> Iterator[_Chunk]:
    """One chunk of whole sessions per batch read (possibly empty: the batch
    continued one session), then the last carry. Files whose schema differs
    from the first's raise ``SchemaError``."""
    schema: pa.Schema | None = None
    carry: pa.Table | None = None
    carry_path = files[0] if files else Path()  # the file of the carry's first row
    carry_row, offset = 0, 0
    path = carry_path
    for path in files:
        offset = 0
        for batch in _batches(path, batch_rows, columns):
            # tool_target reads back as dictionary<int32, string> (or plain,
            # from other writers): the library's TARGETS_DICTIONARY, per batch
            table = targets_as_dictionary(pa.Table.from_batches([batch]))
            if schema is None:
                schema = table.schema
            if OUTPUT_UNITS in schema.names and OUTPUT_UNITS not in table.column_names:
                # a file written without the counts, after one with them: count its own
                table = table.append_column(schema.field(OUTPUT_UNITS), count_output_units(table))
            if TOOL_TARGET in schema.names and TOOL_TARGET not in table.column_names:
                # a file written without the targets, after one with them: work out its own
                table = table.append_column(TARGETS_DICTIONARY, encode_targets(tool_targets(table)))
            try:
                table = table.select(schema.names).cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as e:
                raise SchemaError(
                    f"{path}: its schema does not match the first file's ({e})"
                ) from None
            combined = table if carry is None else pa.concat_tables([carry, table])
            cut = _tail_start(combined.column("session_id"))
            carried = 0 if carry is None else carry.num_rows
            yield _Chunk(combined.slice(0, cut), min(cut, carried), carry_path, path, table,
                         combined.num_rows, carry_row, offset)  # fmt: skip
            if cut >= carried:
                carry_path, carry_row = path, offset + cut - carried
            carry = combined.slice(cut)
            offset += table.num_rows
    if carry is not None:
        yield _Chunk(carry, carry.num_rows, carry_path, path, None, carry.num_rows, carry_row,
                     offset)  # fmt: skip


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
    wanted = (*_REPORT_COLUMNS, OUTPUT_UNITS, *([TOOL_TARGET] if everywhere else []))
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
    ``NonContiguousError`` naming it and the file. ``progress(rows_done,
    rows_total)`` is called after every batch.
    """
    if batch_rows < 1:
        raise DatasetError("batch_rows must be at least 1")
    if destination is None and report_path is None:
        raise DatasetError("nothing to write: pass a destination, a report_path, or both")
    start = time.perf_counter()
    cfg = config or CompactionConfig()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    files = parquet_files(source)
    metas = [_open(f).metadata for f in files]
    total = sum(m.num_rows for m in metas)
    dest = None if destination is None else Path(destination)
    for target in (dest, report_path):
        if target is not None:
            check_replaceable(Path(target))  # before any work, so no output is half-replaced
    tmp_dest = None if dest is None else dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    columns = None
    if dest is None and files:
        columns = _report_columns(metas, cfg)
    tmp_report = None
    if report_path is not None:
        rp = Path(report_path)
        tmp_report = rp.with_name(f".{rp.name}.tmp-{os.getpid()}")
    stats = BatchReport(files=len(files))
    done: set[str] = set()  # finished sessions: ~70 bytes each, the only per-session state
    writer: pq.ParquetWriter | None = None
    report_writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    rows_read = 0

    def process(rows: pa.Table, carried: int, carry_path: Path, path: Path,
                carry_row: int = 0, row: int = 0) -> None:  # fmt: skip
        """Compact ``rows``: the first ``carried`` come from ``carry_path`` (from
        its row ``carry_row``), the rest from ``path`` (from its row ``row``);
        an error names the file its rows come from, and the row in it."""
        nonlocal writer, report_writer
        if rows.num_rows == 0:
            return
        segments = [(rows.slice(0, carried), carry_path), (rows.slice(carried), path)]
        seen = [(_new_sessions(segment, done, where), where) for segment, where in segments]
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
                where, at = ((carry_path, carry_row + e.row) if e.row < carried
                             else (path, row + e.row - carried))  # fmt: skip
                raise _in_file(e, where, at) from e
            where = next((w for ids, w in reversed(seen) if e.session_id in ids), path)
            raise _in_file(e, where) from e
        for ids, _ in seen:
            done.update(ids)
        if parts is not None and tmp_dest is not None:
            if writer is None:
                writer = pq.ParquetWriter(tmp_dest, parts.schema)
            writer.write_table(parts.cast(writer.schema))
            stats.parts_out += parts.num_rows
        if tmp_report is not None:
            if report_writer is None:
                report_writer = pq.ParquetWriter(tmp_report, REPORT_SCHEMA)
            report_writer.write_table(report)
        stats.batches += 1
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
                stats.parts_in += chunk.read.num_rows
                stats.bytes_in += chunk.read.nbytes
            stats.peak_rows = max(stats.peak_rows, chunk.held)
            process(chunk.rows, chunk.carried, chunk.carry_path, chunk.path, chunk.carry_row,
                    chunk.row)  # fmt: skip
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
        if tmp_dest is not None and dest is not None:
            os.replace(tmp_dest, dest)
        if tmp_report is not None and report_path is not None:
            os.replace(tmp_report, report_path)
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
    """The rows of ``source`` as tables of whole sessions, in file order, about
    ``batch_rows`` rows each (the session a batch ends in is carried into the
    next one, across files too). A session that reappears after another one
    raises ``NonContiguousError`` naming it and the file; files whose schema
    differs from the first's raise ``SchemaError``."""
    if batch_rows < 1:
        raise DatasetError("batch_rows must be at least 1")
    done: set[str] = set()
    for chunk in _chunks(parquet_files(source), batch_rows):
        if chunk.rows.num_rows:
            done |= _new_sessions(chunk.rows, done, chunk.path)
            yield chunk.rows


__all__ = ["REQUIRED", "BatchReport", "compact_parquet", "parquet_files", "session_tables"]
