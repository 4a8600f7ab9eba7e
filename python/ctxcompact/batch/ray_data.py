"""Scale-out on Ray Data (``pip install 'ctxcompact[ray]'``).

``compact_batch`` is a pure function of Arrow batches holding whole sessions,
so Ray Data runs it as it is::

    ds = ray.data.read_parquet("s3://bucket/sessions/")  # files hold whole sessions
    report = compact_dataset(ds)  # map_batches, zero copy
    report.write_parquet("s3://bucket/report/")

Sessions must not be split between blocks: write the dataset so each file
holds whole sessions (the usual layout when a platform partitions by session
or by day); a block is one batch (``batch_size=None``). No shuffle is needed:
when Ray joins fragments of several files into one block out of order, the
batch is regrouped by session (stable, so message order is kept).
``check=True`` (default) verifies it afterwards: a session id seen in two
blocks raises ``NonContiguousError``; ``compact_parquet_on_ray`` also knows
each row's file, and a session in pieces from two files is an error even
within one block.

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
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact._atomic import ReadOnlyFileError, keep_mode, read_only
from ctxcompact._extras import from_extra
from ctxcompact._outputs import check_outputs
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.parquet import _PART_KEY, _plain, part_read_twice, repeated_part
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionError,
    ConfigError,
    DatasetError,
    DuplicateSessionError,
    NonContiguousError,
)
from ctxcompact.scans.overflow import Limits, check_window


def _ray() -> Any:
    """The ``ray`` package, its ``ray.data`` imported."""
    from_extra("ray.data", "ray", "Ray Data is not installed", ConfigError)
    import ray

    return ray


def _regroup(batch: pa.Table) -> pa.Table:
    """Rows of each session together, in their order (Arrow's sort is stable)."""
    keys = batch.column("session_id")
    if pa.types.is_dictionary(keys.type):
        keys = keys.cast(keys.type.value_type)
    return batch.take(pc.sort_indices(keys))


#: The column Ray Data's ``include_paths`` adds: which file each row came from.
_PATH = "path"


def _compact(batch: pa.Table, *, paths: bool = False, **kw: Any) -> Any:
    # Ray may join the fragments of several files into one block in any
    # order: a session then arrives in pieces. Zero copy when it did not,
    # one stable regrouping (a copy) when it did. With the rows' files known
    # (``paths``), a session whose pieces come from two files is split
    # between files, which no regrouping can put back in order: an error.
    files = None
    if paths:
        files = batch.column(_PATH)
        batch = batch.drop_columns([_PATH])
    _no_part_twice(batch, files)
    try:
        return compact_batch(batch, **kw)
    except NonContiguousError:
        if files is not None:
            _one_file_per_session(batch, files)
        regrouped = _regroup(batch)
        _no_part_twice(regrouped, None)
        try:
            return compact_batch(regrouped, **kw)
        except NonContiguousError as e:  # a part read twice is named as such
            _no_part_in_two_files(regrouped, None, e.session_id)
            raise


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


def _no_part_twice(batch: pa.Table, files: Any) -> None:
    """Refuse a part given twice in a block (the same session, message and
    part id: a block joining overlapping or re-exported files, or a file
    holding a row twice), which ``compact_batch`` would count as two parts:
    a ``DuplicateSessionError`` naming the part, the block's rows (Ray does
    not say a row's place in its file) and, when the rows' files are known,
    their files. Part ids are unique within a message (docs/schema.md); the
    check is ``batch.parquet.repeated_part`` (exact, vectorised); a block
    without ``part_id`` is not compared."""
    found = repeated_part(batch)
    if found is None:
        return
    earlier, row = found
    sid, mid, pid = (batch.column(c)[row].as_py() for c in _PART_KEY)
    where = ""
    if files is not None:
        first, then = files[earlier].as_py(), files[row].as_py()
        where = f" in {first}" if first == then else f" (in {first} and {then})"
    raise part_read_twice(
        f"part {pid!r} of message {mid!r} (session {sid!r}) is read twice{where}, rows "
        f"{earlier} and {row} of a block: overlapping or re-exported files, or a row "
        "written twice? read each row once",
        sid, mid, row,
    )  # fmt: skip


def _one_file_per_session(batch: pa.Table, files: Any) -> None:
    pairs = pa.table({"s": batch.column("session_id").cast(pa.string()), "f": files})
    per = pairs.group_by("s").aggregate([("f", "count_distinct")])
    split = per.filter(pc.greater(per.column("f_count_distinct"), 1))
    if len(split):
        sid = split.column("s")[0].as_py()
        _no_part_in_two_files(batch, files, sid)
        raise NonContiguousError(
            f"session {sid!r} is split between files: write each file with whole sessions",
            session_id=sid, column="session_id",
        )  # fmt: skip


def _report(batch: pa.Table, *, config: CompactionConfig, limits: Any, now_ms: int | None,
            threads: int | None, paths: bool = False) -> pa.Table:  # fmt: skip
    result = _compact(batch, config=config, now_ms=now_ms, limits=limits, threads=threads,
                      paths=paths)  # fmt: skip
    assert isinstance(result, pa.Table)
    return result


def _parts(batch: pa.Table, *, config: CompactionConfig, now_ms: int | None,
           threads: int | None, paths: bool = False) -> pa.Table:  # fmt: skip
    _, parts = _compact(batch, config=config, now_ms=now_ms, parts=True, threads=threads,
                        paths=paths)  # fmt: skip
    return parts


def _block_sessions(batch: pa.Table) -> pa.Table:
    """The distinct session ids of one block (a session in two blocks was split)."""
    ids = batch.column("session_id")
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(ids.type.value_type)
    return pa.table({"session_id": pc.unique(ids)})


def _check_blocks(out: Any, ray: Any) -> Any:
    """``out`` materialized, after checking that no session id is in two of its
    blocks (the report has a row per session and block, the parts their rows)."""
    out = out.materialize()
    # One task per stored block (map_batches could join blocks and hide a split);
    # only the ids come back to the driver.
    unique = ray.remote(_block_sessions)
    tables = ray.get([unique.remote(ref) for ref in out.to_arrow_refs()])
    ids = pa.concat_tables(tables).column("session_id")
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):
        sid = repeated.field("values")[0].as_py()
        raise NonContiguousError(
            f"session {sid!r} was split between blocks: write each file with whole sessions",
            session_id=sid, column="session_id",
        )  # fmt: skip
    return out


def compact_dataset(
    dataset: Any,
    config: CompactionConfig | None = None,
    *,
    limits: Any = None,
    now_ms: int | None = None,
    parts: bool = False,
    num_cpus: float = 1,
    check: bool = True,
    _paths: bool = False,
) -> Any:
    """Run ``compact_batch`` over a Ray ``Dataset`` of part rows.

    Returns the per-session report dataset, or the compacted part rows with
    ``parts=True``. ``now_ms`` fixes the prune timestamp (one for the whole
    run; default: the time of the call). ``check`` (both outputs): a session
    found in two blocks raises ``NonContiguousError`` (the result is
    materialized to check it).
    """
    import time

    ray = _ray()
    cfg = config or CompactionConfig()
    if limits is not None:  # before any work: a window with no input room (compact_batch's)
        check_window(Limits.coerce(limits), cfg)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    threads = max(1, int(num_cpus))
    fn = (
        partial(_parts, config=cfg, now_ms=now, threads=threads, paths=_paths)
        if parts
        else partial(_report, config=cfg, limits=limits, now_ms=now, threads=threads, paths=_paths)
    )
    out = dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True, batch_size=None,
                              num_cpus=num_cpus)  # fmt: skip
    # A bad batch raises the library's typed error (a ColumnTypeError, an
    # UnknownValueError...), not Ray's UserCodeException around it.
    context = getattr(out, "context", None)
    if context is not None and hasattr(context, "raise_original_map_exception"):
        context.raise_original_map_exception = True
    if check:
        out = _check_blocks(out, ray)
    return out


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


def _write_parquet(dataset: Any, path: str) -> None:
    """Write ``dataset`` into the folder ``path``, which does not exist yet."""
    ray = _ray()
    save_mode = getattr(ray.data, "SaveMode", None)
    if save_mode is not None:
        dataset.write_parquet(path, mode=save_mode.OVERWRITE)
    else:  # Ray releases before SaveMode (< 2.46) append, to an empty folder here
        dataset.write_parquet(path)


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
    """Read Parquet with Ray Data, write the compacted parts (and the report).

    ``destination`` and ``report`` are folders of Parquet files. Like
    ``compact_parquet``, a rerun replaces them (``if_exists="overwrite"``,
    the default: Ray Data alone would append, doubling the report); with
    ``if_exists="error"`` an existing one raises ``DatasetError`` before any
    work. Each output is written into a temporary folder beside it and moved
    into place once every output is written, so a run that fails leaves the
    previous outputs as they were (and no temporary folder behind). A
    replaced local output keeps its modes (the folder's permission bits, and
    its files' for the new files); one holding a read-only file is refused
    with ``ReadOnlyFileError`` before any work, as the CLI refuses a read-only
    output.
    """
    if if_exists not in ("overwrite", "error"):
        raise ConfigError(f"if_exists must be 'overwrite' or 'error', got {if_exists!r}")
    # before any work, as compact_parquet and the CLI: an output that is an
    # input, or inside an input folder (read as an input of it next time)
    local = [s for s in ([source] if isinstance(source, str) else source) if "://" not in s]
    check_outputs({"destination": destination, "report": report}, local, folders=True)
    ray = _ray()
    outputs = [destination] if report is None else [destination, report]
    if if_exists == "error":
        for path in outputs:
            if _exists(path):
                raise DatasetError(
                    f"{path}: already exists; remove it or pass if_exists='overwrite'"
                )
    _refuse_read_only(outputs)  # before any work, as the CLI does
    # Each row's file: a session in pieces from two files is an error, not regrouped.
    dataset = ray.data.read_parquet(source, include_paths=True)
    done: dict[str, str] = {}
    try:
        parts = compact_dataset(dataset, config, now_ms=now_ms, parts=True,
                                num_cpus=num_cpus, _paths=True)  # fmt: skip
        done[destination] = _beside(destination, "tmp")
        _write_parquet(parts, done[destination])
        if report is not None:
            sessions = compact_dataset(dataset, config, limits=limits, now_ms=now_ms,
                                       num_cpus=num_cpus, _paths=True)  # fmt: skip
            done[report] = _beside(report, "tmp")
            _write_parquet(sessions, done[report])
        _refuse_read_only(outputs)  # again: one may have become read-only meanwhile
    except BaseException as e:
        for tmp in done.values():
            with contextlib.suppress(Exception):  # the run already failed: keep its error
                _remove(tmp)
        typed = _our_error(e)
        if typed is not None:
            raise typed from e
        raise
    _put_in_place(done)


def compact_ray_dataset(
    ds_or_path: Any, config: CompactionConfig | None = None, **options: Any
) -> Any:
    """``compact_dataset`` on a Ray ``Dataset`` or on Parquet path(s) read with Ray Data."""
    if isinstance(ds_or_path, (str, list)):
        ds_or_path = _ray().data.read_parquet(ds_or_path)
    return compact_dataset(ds_or_path, config, **options)


def _count(batch: pa.Table, *, family: str, threads: int) -> pa.Table:
    from ctxcompact.transcript import count_exact_parts

    return count_exact_parts(batch, family, threads)


def count_dataset(dataset: Any, family: str, *, num_cpus: float = 1) -> Any:
    """A Ray ``Dataset`` of part rows with each part's exact tokens under
    ``family`` (``Transcript.count``'s columns: ``output_tokens_<family>``,
    ``input_tokens_<family>`` and their texts' hashes), counted block by
    block across the cluster, each block in Rust on the ``num_cpus`` cores
    its task has. A row is counted alone, so blocks need not hold whole
    sessions, and counts already there whose text is unchanged are kept.
    Write it (``write_parquet``) to make a folder every scan, estimate and
    replay under ``<family>-exact`` reads at column speed. An unknown family
    is a ``ConfigError`` before any work."""
    from ctxcompact.scans.vocabularies import core_name

    core_name(family)  # ConfigError for an unknown family, on the driver
    fn = partial(_count, family=family, threads=max(1, int(num_cpus)))
    out = dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True, batch_size=None,
                              num_cpus=num_cpus)  # fmt: skip
    context = getattr(out, "context", None)
    if context is not None and hasattr(context, "raise_original_map_exception"):
        context.raise_original_map_exception = True
    if context is not None and hasattr(context, "execution_options"):
        # blocks leave in the input's order, so the written files (named by
        # write task) read back with each session's rows together and in order
        context.execution_options.preserve_order = True
    return out


__all__ = ["compact_dataset", "compact_parquet_on_ray", "compact_ray_dataset", "count_dataset"]
