"""Which files a folder read takes: the one rule the readers and the output
checks share (``_outputs`` refuses an output a later read of an input folder
would take).

A folder is read as session files (``formats.reader``: every ``.jsonl``,
``.json`` and ``.traj`` file) or as Parquet part rows
(``batch.parquet.parquet_dataset``: every ``*.parquet`` file whose name, and
whose folders' names below it, do not start with ``_`` or ``.``), never both.
"""

from __future__ import annotations

from pathlib import Path

#: Extensions read as sessions: JSONL (natively), JSON documents (``formats.read``).
JSONL_SUFFIXES = (".jsonl",)
DOCUMENT_SUFFIXES = (".json", ".traj")
SESSION_SUFFIXES = JSONL_SUFFIXES + DOCUMENT_SUFFIXES

#: The files a Parquet folder is read from: every file named ``*.parquet`` in
#: it or in a folder below it, except names starting with ``_`` or ``.``
#: (``_SUCCESS``, ``_metadata``, ``.crc`` files, ``_temporary/``: not data by
#: the convention Spark, Hive and pyarrow share). Every other file found is
#: left out and named in ``ParquetFiles.skipped``.
PARQUET_SUFFIX = ".parquet"


def hidden(name: str) -> bool:
    """A file or folder name a Parquet folder's reader skips (metadata, not data)."""
    return name.startswith(("_", "."))


def reads_as_parquet(folder: Path, path: Path) -> bool:
    """Whether reading the Parquet folder ``folder`` reads the file ``path``
    (both resolved by the caller): the rule of ``parquet_dataset``."""
    try:
        parts = path.relative_to(folder).parts
    except ValueError:
        return False
    return bool(parts) and not any(map(hidden, parts)) and path.name.endswith(PARQUET_SUFFIX)
