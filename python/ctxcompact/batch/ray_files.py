"""Parquet files for Ray tasks, each read whole and in its own row order.

Ray Data's reader does not keep a file's rows in order: Ray 2.60 was seen
to hand a file's last rows over before the rest of them, inside one block,
in about one run in ten. A session's messages in the wrong order are
compacted wrongly and silently, so the path entry points of
``ray_data`` and ``tuning.tune_dataset`` do not use it: they list the files
by ``batch.parquet``'s rule for a folder, group them by size, and give each
group to one task, which reads each file with pyarrow, first row to last.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxcompact._extras import from_extra
from ctxcompact._sources import PARQUET_SUFFIX, hidden
from ctxcompact.batch.parquet import _open, _plain, parquet_dataset
from ctxcompact.errors import ConfigError, DatasetError

#: The input bytes one task reads (the sum of its files' sizes, at least one
#: file): Ray Data's own target for a block.
GROUP_BYTES = 128 << 20


def ray_module() -> Any:
    """The ``ray`` package, its ``ray.data`` imported (``ConfigError`` naming
    the extra when it is not installed)."""
    from_extra("ray.data", "ray", "Ray Data is not installed", ConfigError)
    import ray

    return ray


@dataclass(frozen=True)
class SourceFile:
    """One Parquet file of a source: where it is (a local path or a URL) and
    its name relative to the folder it was found in (its own name for a file
    given by name), which an output mirroring the source writes it under."""

    path: str
    name: str
    size: int


def _is_url(path: str) -> bool:
    return "://" in path


def _remote_files(source: str) -> tuple[list[SourceFile], bool]:
    """A URL's files by ``parquet_dataset``'s rule: a file as given, a folder's
    ``*.parquet`` files in sorted order, no name starting with ``_`` or ``.``;
    and whether it is a folder."""
    import pyarrow.fs as pafs

    fs, where = pafs.FileSystem.from_uri(source)
    info = fs.get_file_info(where)
    scheme = source.split("://", 1)[0]
    if info.type == pafs.FileType.File:
        return [SourceFile(source, where.rsplit("/", 1)[-1], info.size or 0)], False
    if info.type != pafs.FileType.Directory:
        raise DatasetError(f"{source}: no such file or folder")
    found = []
    for entry in fs.get_file_info(pafs.FileSelector(where, recursive=True)):
        relative = entry.path[len(where.rstrip("/")) + 1 :]
        if entry.type != pafs.FileType.File or any(hidden(p) for p in relative.split("/")):
            continue
        if relative.endswith(PARQUET_SUFFIX):
            found.append(SourceFile(f"{scheme}://{entry.path}", relative, entry.size or 0))
    if not found:
        raise DatasetError(f"{source}: no .parquet files in this folder")
    return sorted(found, key=lambda f: f.name), True


Source = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


def source_files(source: Source) -> list[SourceFile]:
    """The files ``source`` (a file, a folder, a URL of either, or a list of
    them) is read from, in order; local ones by ``parquet_dataset``."""
    from ctxcompact.formats.reader import read_once

    sources = [source] if isinstance(source, str | os.PathLike) else list(source)
    files: list[SourceFile] = []
    for given in sources:
        text = os.fspath(given)
        if _is_url(text):
            found, folder_given = _remote_files(text)
        else:
            folder_given = os.path.isdir(text)
            found = [SourceFile(str(p), str(p.relative_to(text)) if folder_given else p.name,
                                p.stat().st_size) for p in parquet_dataset(text).files]  # fmt: skip
        if len(sources) > 1 and folder_given:  # each folder's files under its own name
            folder = text.rstrip("/").rsplit("/", 1)[-1]
            found = [SourceFile(f.path, f"{folder}/{f.name}", f.size) for f in found]
        files.extend(found)
    read_once(Path(f.path) for f in files if not _is_url(f.path))  # a file given twice
    seen: dict[str, str] = {}
    for f in files:  # two files of one name would overwrite each other's output
        if f.name in seen:
            raise DatasetError(f"{seen[f.name]} and {f.path} would both be written as "
                               f"{f.name!r} in each output: give them under different "
                               "names (or in one folder)")  # fmt: skip
        seen[f.name] = f.path
    return files


def groups(files: list[SourceFile], target: int = GROUP_BYTES) -> list[list[SourceFile]]:
    """``files`` in consecutive groups of about ``target`` bytes each (a file
    bigger than that alone), in order."""
    out: list[list[SourceFile]] = []
    size = 0
    for file in files:
        if out and size + file.size <= target:
            out[-1].append(file)
            size += file.size
        else:
            out.append([file])
            size = file.size
    return out


def read_file(path: str, columns: list[str] | None = None) -> pa.Table:
    """The rows of the Parquet file ``path`` (its ``columns``, default all),
    in its order (row group by row group): a file that is not Parquet is a
    ``DatasetError`` naming it, one missing the columns too."""
    if _is_url(path):
        import pyarrow.fs as pafs

        fs, where = pafs.FileSystem.from_uri(path)
        try:
            file = pq.ParquetFile(fs.open_input_file(where))
        except pa.ArrowInvalid as e:
            raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
    else:
        file = _open(Path(path))
    if columns is not None:
        missing = [c for c in columns if c not in file.schema_arrow.names]
        if missing:
            raise DatasetError(f"{path}: no column {missing[0]!r}")
    return file.read(columns=columns)


def files_dataset(batches: list[list[SourceFile]]) -> Any:
    """A Ray ``Dataset`` of one row per group of files (``groups``), one block
    per row: ``group`` (its index), ``paths`` and ``names``."""
    items = [{"group": i, "paths": [f.path for f in g], "names": [f.name for f in g]}
             for i, g in enumerate(batches)]  # fmt: skip
    return ray_module().data.from_items(items, override_num_blocks=len(items))


def write_file(table: pa.Table, root: str, name: str) -> None:
    """Write ``table`` as the Parquet file ``name`` (a relative path) under
    the folder ``root`` (a local path or a URL), making the folders it needs."""
    import pyarrow.fs as pafs

    if _is_url(root):
        fs, where = pafs.FileSystem.from_uri(root)
    else:
        fs, where = pafs.LocalFileSystem(), os.path.abspath(root)
    path = f"{where.rstrip('/')}/{name}"
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, path, filesystem=fs)


def each_file(batch: pa.Table) -> Iterable[tuple[int, str, str]]:
    """The (group, path, name) of each file of a batch of ``files_dataset``'s rows."""
    for group, paths, names in zip(batch["group"].to_pylist(), batch["paths"].to_pylist(),
                                   batch["names"].to_pylist(), strict=True):  # fmt: skip
        for path, name in zip(paths, names, strict=True):
            yield group, path, name


def unique_sessions(table: pa.Table) -> pa.Array:
    """The distinct session ids of ``table`` (a dictionary column decoded)."""
    return pc.unique(_plain(table.column("session_id")))


#: A column each task of a user's ``Dataset`` adds to its output: one id per
#: input block. Ray splits a large output into several blocks, so a session in
#: two output blocks proves nothing; a session under two input blocks' ids was
#: split between them (each piece worked on alone).
BLOCK = "_ctxcompact_block"


def tag_block(fn: Callable[[pa.Table], pa.Table]) -> Callable[[pa.Table], pa.Table]:
    """``fn`` on one input block, its output carrying the block's id (``BLOCK``)."""

    def tagged(block: pa.Table) -> pa.Table:
        out = fn(block)
        tag = pa.array([uuid.uuid4().hex] * out.num_rows, pa.string())
        return out.append_column(BLOCK, tag)

    return tagged


def block_sessions(table: pa.Table) -> pa.Table:
    """The distinct (session id, input block id) pairs of ``tag_block``'s output."""
    pairs = pa.table({"session_id": _plain(table.column("session_id")),
                      BLOCK: _plain(table.column(BLOCK))})  # fmt: skip
    return pairs.group_by(["session_id", BLOCK]).aggregate([])


def split_session(pairs: pa.Table) -> Any:
    """A session id found under two input blocks in ``block_sessions``' pairs
    (the least such id, for a stable message), or ``None``."""
    per = pairs.group_by("session_id").aggregate([(BLOCK, "count_distinct")])
    split = per.filter(pc.greater(per.column(f"{BLOCK}_count_distinct"), 1))
    return min(split.column("session_id").to_pylist()) if len(split) else None


def file_sessions(batch: pa.Table) -> pa.Table:
    """The distinct (session id, file) pairs of each file of a batch of
    ``files_dataset``'s rows (only their ``session_id`` column read)."""
    found = []
    for _, path, _ in each_file(batch):
        ids = sorted(map(str, unique_sessions(read_file(path, ["session_id"])).to_pylist()))
        found.append(pa.table({"session_id": pa.array(ids, pa.string()),
                               "file": pa.array([path] * len(ids), pa.string())}))  # fmt: skip
    return pa.concat_tables(found)


def on_files(batch: pa.Table, fn: Callable[[pa.Table, str], pa.Table]) -> pa.Table:
    """``fn(rows, name)`` on each file of a batch of ``files_dataset``'s rows,
    read whole, its results joined in file order."""
    results = [fn(read_file(path), name) for _, path, name in each_file(batch)]
    return pa.concat_tables(results, promote_options="default")


__all__ = [
    "BLOCK",
    "GROUP_BYTES",
    "SourceFile",
    "block_sessions",
    "each_file",
    "file_sessions",
    "files_dataset",
    "groups",
    "on_files",
    "ray_module",
    "read_file",
    "source_files",
    "split_session",
    "tag_block",
    "unique_sessions",
    "write_file",
]
