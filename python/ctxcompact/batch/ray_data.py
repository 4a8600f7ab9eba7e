"""Scale-out on Ray Data (``pip install 'ctxcompact[ray]'``).

``compact_batch`` is a pure function of Arrow batches holding whole sessions,
so Ray runs it over Parquet files::

    compact_parquet_on_ray("s3://bucket/sessions/", "s3://bucket/compacted/",
                           report="s3://bucket/report/")
    report = compact_ray_dataset("s3://bucket/sessions/")  # a Dataset of the report

Each file must hold whole sessions (the usual layout when a platform
partitions by session or by day): a session found in two files is a
``NonContiguousError`` naming both (a ``DuplicateSessionError`` when they
hold the same part), never two half sessions compacted alone.

The path entry points read each file whole, in its own row order, in the
task that compacts it (``batch.ray_files``): Ray Data's reader does not keep
a file's rows in order (Ray 2.60 was seen to hand a file's last rows over
first), and a session's messages out of order would be compacted wrongly
without a sign. ``compact_dataset`` takes a ``Dataset`` you built: its rows
are taken in the order Ray gives them; a session out of place within a
block, or in two blocks, is a ``NonContiguousError``.

On a cluster, start Ray as usual (``ray start --head`` / ``ray.init(address=
"auto")``); every worker needs ``pip install ctxcompact``; the Rust scans
release the GIL and use the cores Ray gives each task (``num_cpus``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from functools import partial
from pathlib import Path
from typing import Any, Literal, NoReturn

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact._atomic import OutputNotWritableError, ReadOnlyFileError, keep_mode, read_only
from ctxcompact._outputs import check_outputs
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.parquet import _PART_KEY, _plain, part_read_twice, repeated_part
from ctxcompact.batch.ray_files import BLOCK, block_sessions, split_session, tag_block
from ctxcompact.batch.ray_files import ray_module as _ray
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionError,
    ConfigError,
    DatasetError,
    DuplicateSessionError,
    NonContiguousError,
)
from ctxcompact.scans.overflow import Limits, check_window


def _compact(batch: pa.Table, **kw: Any) -> Any:
    # A session out of place in a block is refused, never regrouped: Ray's
    # reader may hand a file's rows over out of order, so a block's order
    # cannot tell which piece of a session comes first.
    _no_part_twice(batch)
    try:
        return compact_batch(batch, **kw)
    except NonContiguousError as e:
        if type(e) is not NonContiguousError:  # a session given twice, a part read twice
            raise
        raise NonContiguousError(
            f"{e} (Ray Data's reader may hand a file's rows over out of order: read "
            "the files with compact_parquet_on_ray or compact_ray_dataset(path), which "
            "read each file whole, in order)",
            session_id=e.session_id,
            message_id=e.message_id,
            column=e.column,
            row=e.row,
        ) from None


def _no_part_in_two_files(batch: pa.Table, files: Any, sid: Any) -> None:
    """For a session whose rows are out of order (or in two files): a part
    of it read twice (overlapping or re-exported files) is a
    ``DuplicateSessionError`` naming it (and the files, when known)."""
    if sid is None or any(c not in batch.column_names for c in _PART_KEY):
        return
    columns = {
        "s": _plain(batch.column("session_id")).cast(pa.string()),
        "m": _plain(batch.column("message_id")).cast(pa.string()),
        "p": _plain(batch.column("part_id")).cast(pa.string()),
        "f": pa.array(range(batch.num_rows)) if files is None else _plain(files),
    }
    rows = pa.table(columns).filter(pc.equal(pc.field("s"), sid))
    per = rows.group_by(["m", "p"]).aggregate([("f", "distinct")])
    twice = per.filter(pc.greater(pc.list_value_length(per.column("f_distinct")), 1))
    twice = twice.filter(pc.is_valid(twice.column("p")))
    if len(twice):
        mid, pid = twice.column("m")[0].as_py(), twice.column("p")[0].as_py()
        both = ""
        if files is not None:
            both = f" (in {' and '.join(map(str, twice.column('f_distinct')[0].as_py()))})"
        raise DuplicateSessionError(
            f"part {pid!r} of message {mid!r} (session {sid!r}) is read twice{both}: "
            "overlapping or re-exported files? read each row once",
            session_id=sid, message_id=mid, column="part_id",
        )  # fmt: skip


def _no_part_twice(batch: pa.Table) -> None:
    """Refuse a part given twice in a block (the same session, message and
    part id: a block joining overlapping or re-exported files, or a file
    holding a row twice), which ``compact_batch`` would count as two parts:
    a ``DuplicateSessionError`` naming the part and the block's rows (Ray
    does not say a row's place in its file). Part ids are unique within a
    message (docs/schema.md); the check is ``batch.parquet.repeated_part``
    (exact, vectorised); a block without ``part_id`` is not compared."""
    found = repeated_part(batch)
    if found is None:
        return
    earlier, row = found
    sid, mid, pid = (batch.column(c)[row].as_py() for c in _PART_KEY)
    raise part_read_twice(
        f"part {pid!r} of message {mid!r} (session {sid!r}) is read twice, rows "
        f"{earlier} and {row} of a block: overlapping or re-exported files, or a row "
        "written twice? read each row once",
        sid, mid, row,
    )  # fmt: skip


def split_between(sid: Any, paths: list[str]) -> NoReturn:
    """Refuse session ``sid``, found in each file of ``paths`` (read again,
    only on this path): a part of it in two of them is a
    ``DuplicateSessionError`` naming the part and the files, otherwise a
    ``NonContiguousError`` naming the files."""
    from ctxcompact.batch.ray_files import read_file

    pieces = []
    for path in paths:
        rows = read_file(path)
        keys = [_plain(rows.column(c)).cast(pa.string()) for c in _PART_KEY
                if c in rows.column_names]  # fmt: skip
        if len(keys) == len(_PART_KEY):
            piece = pa.table(dict(zip(_PART_KEY, keys, strict=True)))
            piece = piece.filter(pc.equal(piece.column("session_id"), str(sid)))
            pieces.append(piece.append_column("file", pa.array([path] * piece.num_rows)))
    if len(pieces) == len(paths):
        rows = pa.concat_tables(pieces)
        _no_part_in_two_files(rows.drop_columns(["file"]), rows.column("file"), str(sid))
    raise NonContiguousError(
        f"session {sid!r} is split between files ({' and '.join(paths)}): write each file "
        "with whole sessions",
        session_id=str(sid), column="session_id",
    )  # fmt: skip


def _task(config: CompactionConfig | None, *, limits: Any, now_ms: int | None,
          num_cpus: float) -> dict[str, Any]:  # fmt: skip
    """``compact_batch``'s options for every task of one run, checked before
    any work: a window with no input room is refused at once, and one prune
    timestamp (``now_ms``; default: the time of the call) serves them all."""
    import time

    cfg = config or CompactionConfig()
    if limits is not None:
        check_window(Limits.coerce(limits), cfg)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return {"config": cfg, "limits": limits, "now_ms": now, "threads": max(1, int(num_cpus))}


def _report(batch: pa.Table, *, config: CompactionConfig, limits: Any, now_ms: int | None,
            threads: int | None) -> pa.Table:  # fmt: skip
    result = _compact(batch, config=config, now_ms=now_ms, limits=limits, threads=threads)
    assert isinstance(result, pa.Table)
    return result


def _parts(batch: pa.Table, *, config: CompactionConfig, limits: Any, now_ms: int | None,
           threads: int | None) -> pa.Table:  # fmt: skip
    del limits  # the parts do not depend on the window (the report's columns do)
    _, parts = _compact(batch, config=config, now_ms=now_ms, parts=True, threads=threads)
    return parts


def _typed(out: Any) -> Any:
    """``out`` raising the library's typed error of a bad batch (a
    ``ColumnTypeError``, an ``UnknownValueError``...), not Ray's
    ``UserCodeException`` around it."""
    context = getattr(out, "context", None)
    if context is not None and hasattr(context, "raise_original_map_exception"):
        context.raise_original_map_exception = True
    return out


def _check_blocks(out: Any, ray: Any) -> Any:
    """``out`` (``tag_block``'s output) materialized without its block ids,
    after checking that no session came from two input blocks. Only the
    (session, block) pairs come back to the driver, one task per stored block."""
    out = out.materialize()
    pairs = ray.remote(block_sessions)
    tables = ray.get([pairs.remote(ref) for ref in out.to_arrow_refs()])
    sid = split_session(pa.concat_tables(tables)) if tables else None
    if sid is not None:
        raise NonContiguousError(
            f"session {sid!r} was split between blocks: write each file with whole sessions",
            session_id=sid, column="session_id",
        )  # fmt: skip
    return out.drop_columns([BLOCK])


def compact_dataset(
    dataset: Any,
    config: CompactionConfig | None = None,
    *,
    limits: Any = None,
    now_ms: int | None = None,
    parts: bool = False,
    num_cpus: float = 1,
    check: bool = True,
) -> Any:
    """Run ``compact_batch`` over a Ray ``Dataset`` of part rows, each block
    holding whole sessions, in order (a block is one batch).

    Returns the per-session report dataset, or the compacted part rows with
    ``parts=True``. ``now_ms`` fixes the prune timestamp (one for the whole
    run; default: the time of the call). A session out of place within a
    block is a ``NonContiguousError``; ``check`` (both outputs): so is a
    session found in two blocks (the result is materialized to check it).
    Rows are taken in the order Ray gives them, and Ray Data's reader may
    reorder a file's rows: for Parquet files, ``compact_ray_dataset(path)``
    reads each file whole, in order.
    """
    ray = _ray()
    task = _task(config, limits=limits, now_ms=now_ms, num_cpus=num_cpus)
    fn: Any = partial(_parts if parts else _report, **task)
    if check:
        fn = tag_block(fn)
    out = _typed(dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True,
                                     batch_size=None, num_cpus=num_cpus))  # fmt: skip
    return _check_blocks(out, ray) if check else out


def _check_sessions(files: Any) -> None:
    """No session in two files of ``files`` (a ``files_dataset``), checked
    from their ``session_id`` columns alone before any work:
    ``split_between`` names the files of one found there."""
    from ctxcompact.batch.ray_files import file_sessions

    ray = _ray()
    refs = _typed(files.map_batches(file_sessions, batch_format="pyarrow",
                                    batch_size=1)).to_arrow_refs()  # fmt: skip
    pairs = pa.concat_tables([t for t in ray.get(refs) if t.num_rows])
    if not pairs.num_rows:
        return
    per = pairs.group_by("session_id", use_threads=False).aggregate([("file", "list")])
    split = per.filter(pc.greater(pc.list_value_length(per.column("file_list")), 1))
    if len(split):
        split_between(split.column("session_id")[0].as_py(), split.column("file_list")[0].as_py())


def _on_source(source: Any, fn: Any, *, num_cpus: float, whole_sessions: bool = True) -> Any:
    """``fn(rows, name)`` on each file of ``source``, read whole and in order
    by the task of its group (``batch.ray_files``), materialized. With
    ``whole_sessions``, a session in two files is refused first."""
    from ctxcompact.batch.ray_files import (
        GROUP_BYTES,
        files_dataset,
        groups,
        on_files,
        source_files,
    )

    found = source_files(source)
    # Groups of at most Ray Data's block size, and at least two per CPU of the
    # cluster when there are files enough, so a small source is spread too.
    cpus = max(1, int(_ray().cluster_resources().get("CPU", 1)))
    target = min(GROUP_BYTES, max(1, sum(f.size for f in found) // (2 * cpus)))
    files = files_dataset(groups(found, target))
    if whole_sessions:
        _check_sessions(files)
    task = partial(on_files, fn=fn)
    return _typed(files.map_batches(task, batch_format="pyarrow", batch_size=1,
                                    num_cpus=num_cpus)).materialize()  # fmt: skip


def _filesystem(path: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    if "://" in path:
        fs, where = pafs.FileSystem.from_uri(path)
        return fs, str(where)
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _exists(path: str) -> bool:
    import pyarrow.fs as pafs

    fs, where = _filesystem(path)
    return bool(fs.get_file_info(where).type != pafs.FileType.NotFound)


def _beside(path: str, tag: str) -> str:
    """A sibling of ``path`` (same folder, so same filesystem) named for this run."""
    head, _, name = path.rstrip("/").rpartition("/")
    sibling = f".{name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return f"{head}/{sibling}" if head else sibling


def _remove(path: str) -> None:
    import pyarrow.fs as pafs

    fs, where = _filesystem(path)
    kind = fs.get_file_info(where).type
    if kind == pafs.FileType.Directory:
        fs.delete_dir(where)
    elif kind == pafs.FileType.File:
        fs.delete_file(where)


def _our_error(error: BaseException) -> CompactionError | None:
    """The library's typed error a Ray task failed with (Ray wraps it in its
    own exceptions), so callers can catch what ``compact_parquet`` raises."""
    seen: BaseException | None = error
    for _ in range(16):  # a chain of causes, never a cycle in practice
        if seen is None:
            return None
        inner = getattr(seen, "cause", None)  # RayTaskError: the task's own error
        if isinstance(inner, CompactionError):
            return inner
        if isinstance(seen, CompactionError):
            return seen
        seen = seen.__cause__ or inner
    return None


def _local_files(path: str) -> list[Path]:
    """The existing local output ``path`` as its files: itself when it is a
    file, the files in it when it is a folder (Ray writes them flat); ``[]``
    for none, or for another filesystem (no permission bits to keep)."""
    if "://" in path:
        return []
    where = Path(path)
    if where.is_dir():
        return sorted(f for f in where.iterdir() if f.is_file())
    return [where] if where.is_file() else []


def _refuse_read_only(paths: list[str]) -> None:
    """A read-only file of an existing output (``_atomic.read_only``: no write
    permission bit, or none for this user) is never replaced, as in the CLI
    and ``compact_parquet``: ``ReadOnlyFileError`` naming it."""
    for path in paths:
        for file in _local_files(path):
            refused = read_only(file)
            if refused is not None:
                raise ReadOnlyFileError(errno.EACCES, f"{path}: cannot replace the output: "
                                        f"{file}: {refused}", str(file))  # fmt: skip


def _keep_modes(old: str, new: str) -> None:
    """Give the new local output ``new`` the modes of the one it replaces
    (moved aside to ``old``): each new file the mode of the old output's
    (its first file, ``_atomic.keep_mode``), and a new folder the old
    folder's permission bits (a private 0700 / 0600 output stays private)."""
    files = _local_files(old)
    if files:
        for file in _local_files(new):
            keep_mode(files[0], file)
    if "://" not in old and Path(old).is_dir() and Path(new).is_dir():
        os.chmod(new, stat.S_IMODE(Path(old).stat().st_mode))


def _put_in_place(done: dict[str, str]) -> None:
    """Move each finished folder (``{destination: temporary}``) to its
    destination, replacing what was there: the old output is moved aside
    first and removed once every new one is in place; the new outputs keep
    the old ones' modes."""
    olds = []
    for dest, tmp in done.items():
        fs, where = _filesystem(dest)
        _, tmp_where = _filesystem(tmp)
        old = None
        if _exists(dest):
            old = _beside(dest, "old")
            fs.move(where, _filesystem(old)[1])
        fs.move(tmp_where, where)
        if old is not None:
            _keep_modes(old, dest)
        olds.append(old)
    for old in olds:
        if old is not None:
            _remove(old)


def _written(rows: pa.Table, name: str, *, fn: Any, roots: dict[str, str]) -> pa.Table:
    """``fn(rows)``'s outputs (``{key: table}``) written as the file ``name``
    under each key's folder (``roots``); only the file's name and row count
    go back to the driver."""
    from ctxcompact.batch.ray_files import write_file

    for key, table in fn(rows).items():
        write_file(table, roots[key], name)
    return pa.table({"file": [name], "rows": pa.array([rows.num_rows], pa.int64())})


def _make_dir(path: str, output: str) -> None:
    """Make the folder ``path`` (the temporary one of ``output``): one that
    cannot be made is the ``OutputNotWritableError`` naming ``output``, on
    the driver."""
    fs, where = _filesystem(path)
    try:
        fs.create_dir(where, recursive=True)
    except OSError as e:
        code = e.errno or errno.EACCES
        raise OutputNotWritableError(code, f"{output}: cannot write the output there "
                                     f"({os.strerror(code)})", output) from None  # fmt: skip


def _write_on_ray(source: str | list[str], outputs: dict[str, str | None], fn: Any, *,
                  num_cpus: float, if_exists: str, whole_sessions: bool) -> None:  # fmt: skip
    """Write ``fn(rows)``'s tables (``{key: table}``) for each file of
    ``source`` into the output folders ``outputs`` (``{key: folder}``;
    ``None``: not written), each file under its name in the source: the
    outputs mirror the source, file for file and row for row. The outputs'
    safety rules (refused before any work, written beside, moved into place
    together) are ``compact_parquet_on_ray``'s."""
    if if_exists not in ("overwrite", "error"):
        raise ConfigError(f"if_exists must be 'overwrite' or 'error', got {if_exists!r}")
    # before any work, as compact_parquet and the CLI: an output that is an
    # input, or inside an input folder (read as an input of it next time)
    local = [s for s in ([source] if isinstance(source, str) else source) if "://" not in s]
    check_outputs(outputs, local, folders=True)
    given = {key: path for key, path in outputs.items() if path is not None}
    if if_exists == "error":
        for path in given.values():
            if _exists(path):
                raise DatasetError(
                    f"{path}: already exists; remove it or pass if_exists='overwrite'"
                )
    _refuse_read_only(list(given.values()))  # before any work, as the CLI does
    done = {path: _beside(path, "tmp") for path in given.values()}
    roots = {key: done[path] for key, path in given.items()}
    try:
        for path, tmp in done.items():  # an output that cannot be written: before any work
            _make_dir(tmp, path)
        _on_source(source, partial(_written, fn=fn, roots=roots), num_cpus=num_cpus,
                   whole_sessions=whole_sessions)  # fmt: skip
        _refuse_read_only(list(given.values()))  # again: one may have become read-only
    except BaseException as e:
        for tmp in done.values():
            with contextlib.suppress(Exception):  # the run already failed: keep its error
                _remove(tmp)
        typed = _our_error(e)
        if typed is not None:
            raise typed from e
        raise
    _put_in_place(done)


def _both(rows: pa.Table, *, report: bool, **task: Any) -> dict[str, pa.Table]:
    sessions, parts = _compact(rows, parts=True, **task)
    return {"destination": parts, "report": sessions} if report else {"destination": parts}


def compact_parquet_on_ray(
    source: str | list[str],
    destination: str,
    config: CompactionConfig | None = None,
    *,
    report: str | None = None,
    limits: Any = None,
    now_ms: int | None = None,
    num_cpus: float = 1,
    if_exists: Literal["overwrite", "error"] = "overwrite",
) -> None:
    """Compact Parquet files on Ray: write the compacted parts (and the report).

    ``destination`` and ``report`` are folders of Parquet files mirroring
    ``source``: each source file (read whole and in order by one task, with
    the other files of its group) gives the file of the same name in each.
    Each file must hold whole sessions: a session in two files is a
    ``NonContiguousError`` naming them (a ``DuplicateSessionError`` when
    both hold one of its parts), and nothing is written.

    Like ``compact_parquet``, a rerun replaces the outputs
    (``if_exists="overwrite"``, the default); with ``if_exists="error"`` an
    existing one raises ``DatasetError`` before any work. Each output is
    written into a temporary folder beside it and moved into place once every
    output is written, so a run that fails leaves the previous outputs as they
    were (and no temporary folder behind). A replaced local output keeps its
    modes (the folder's permission bits, and its files' for the new files);
    one holding a read-only file is refused with ``ReadOnlyFileError`` before
    any work, as the CLI refuses a read-only output.
    """
    task = _task(config, limits=limits, now_ms=now_ms, num_cpus=num_cpus)
    _write_on_ray(source, {"destination": destination, "report": report},
                  partial(_both, report=report is not None, **task), num_cpus=num_cpus,
                  if_exists=if_exists, whole_sessions=True)  # fmt: skip


def _on_rows(rows: pa.Table, name: str, *, fn: Any) -> pa.Table:
    del name  # the output is a dataset: no file named after the source
    result = fn(rows)
    assert isinstance(result, pa.Table)
    return result


def compact_ray_dataset(
    ds_or_path: Any,
    config: CompactionConfig | None = None,
    *,
    limits: Any = None,
    now_ms: int | None = None,
    parts: bool = False,
    num_cpus: float = 1,
    check: bool = True,
) -> Any:
    """``compact_dataset`` on a Ray ``Dataset``, or on Parquet file(s) and
    folder(s) (a path, a URL or a list of them): each file read whole and in
    order by one task (with the other files of its group); a session in two
    files is refused, whatever ``check`` says."""
    if not isinstance(ds_or_path, (str, os.PathLike, list)):
        return compact_dataset(ds_or_path, config, limits=limits, now_ms=now_ms, parts=parts,
                               num_cpus=num_cpus, check=check)  # fmt: skip
    task = _task(config, limits=limits, now_ms=now_ms, num_cpus=num_cpus)
    fn = partial(_on_rows, fn=partial(_parts if parts else _report, **task))
    source = [os.fspath(p) for p in ds_or_path] if isinstance(ds_or_path, list) else (
        os.fspath(ds_or_path))  # fmt: skip
    return _on_source(source, fn, num_cpus=num_cpus)


def _count(batch: pa.Table, *, family: str, threads: int) -> pa.Table:
    from ctxcompact.transcript import count_exact_parts

    return count_exact_parts(batch, family, threads)


def _counted(rows: pa.Table, *, family: str, threads: int) -> dict[str, pa.Table]:
    return {"destination": _count(rows, family=family, threads=threads)}


def count_parquet_on_ray(
    source: str | list[str],
    destination: str,
    family: str,
    *,
    num_cpus: float = 1,
    if_exists: Literal["overwrite", "error"] = "overwrite",
) -> None:
    """Count Parquet files of part rows exactly under ``family`` on Ray:
    ``destination`` mirrors ``source`` file for file and row for row, each
    row with ``Transcript.count``'s columns (``output_tokens_<family>``,
    ``input_tokens_<family>`` and their texts' hashes), so every scan,
    estimate and replay under ``<family>-exact`` reads it at column speed.
    Each file is read whole and in order by one task (with the other files
    of its group), counted in Rust on the ``num_cpus`` cores the task has;
    counts already there whose text is unchanged are kept. A session may
    span files (a row is counted alone). The outputs' rules are
    ``compact_parquet_on_ray``'s (replaced whole, or ``if_exists="error"``;
    nothing half-written). An unknown family is a ``ConfigError`` before any
    work."""
    from ctxcompact.scans.vocabularies import core_name

    core_name(family)  # ConfigError for an unknown family, on the driver
    fn = partial(_counted, family=family, threads=max(1, int(num_cpus)))
    _write_on_ray(source, {"destination": destination}, fn, num_cpus=num_cpus,
                  if_exists=if_exists, whole_sessions=False)  # fmt: skip


def count_dataset(dataset: Any, family: str, *, num_cpus: float = 1) -> Any:
    """A Ray ``Dataset`` of part rows with each part's exact tokens under
    ``family`` (``Transcript.count``'s columns: ``output_tokens_<family>``,
    ``input_tokens_<family>`` and their texts' hashes), counted block by
    block across the cluster, each block in Rust on the ``num_cpus`` cores
    its task has. A row is counted alone, so blocks need not hold whole
    sessions, and counts already there whose text is unchanged are kept.
    The rows come out in the order Ray gives them, and Ray Data's reader may
    reorder a file's rows: to write a folder the scans read (each session's
    rows together and in order), use ``count_parquet_on_ray``. An unknown
    family is a ``ConfigError`` before any work."""
    from ctxcompact.scans.vocabularies import core_name

    core_name(family)  # ConfigError for an unknown family, on the driver
    fn = partial(_count, family=family, threads=max(1, int(num_cpus)))
    return _typed(dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True,
                                      batch_size=None, num_cpus=num_cpus))  # fmt: skip


__all__ = [
    "compact_dataset",
    "compact_parquet_on_ray",
    "compact_ray_dataset",
    "count_dataset",
    "count_parquet_on_ray",
    "split_between",
]
