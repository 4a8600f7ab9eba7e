"""Writing outputs: each checked before any work, written to a temporary file
and renamed into place (several all or none), an OSError exit 5 naming the
option."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import typer

from ctxcompact._atomic import (
    OutputNotWritableError,
    beside,
    check_replaceable,
    replace_together,
    replacing,
)
from ctxcompact._outputs import _one_line, check_outputs
from ctxcompact.cli.failures import OutputNotWritable
from ctxcompact.errors import OutputConflictError


def _no_stdio(path: Path | None, option: str, stream: str = "stdin") -> None:
    """``-`` is no file here: reading stdin / writing stdout is not supported
    (a file named ``-`` would be looked for, or created)."""
    if path is not None and str(path) == "-":
        raise typer.BadParameter(f"'-' ({stream}) is not supported: give a file path",
                                 param_hint=option)  # fmt: skip


def _check_output(path: Path | None, option: str, inputs: Iterable[Path] = ()) -> None:
    """Refuse an output that cannot be written, or that would replace one of
    ``inputs`` (the data being read), before any work is done."""
    _check_outputs({option: path}, inputs)


#: Suffixes of formats a Parquet output is not: a file of that name would
#: hold Parquet that its readers cannot open.
_NOT_PARQUET = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".txt", ".html", ".htm", ".xlsx",
                ".arrow", ".feather")  # fmt: skip


def _parquet_name(path: Path | None, option: str) -> None:
    """Refuse a Parquet output named as another format (``calls.csv``)."""
    if path is not None and path.suffix.lower() in _NOT_PARQUET:
        raise typer.BadParameter(
            f"{path}: {option} writes Parquet, not {path.suffix.lstrip('.').upper()}; name it "
            f"{path.with_suffix('.parquet').name} (pyarrow.parquet.read_table reads it; "
            "pandas' to_csv writes CSV from it)",
            param_hint=option,
        )


def _check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path] = ()) -> None:
    """The library's check of outputs (``_outputs.check_outputs``, which
    ``compact_parquet`` runs too) before any work: two outputs on one file or
    an output that is an input is a usage error (exit 2), an output that
    cannot be written exit 5."""
    for option, path in outputs.items():
        _no_stdio(path, option, "stdout")
    try:
        check_outputs(outputs, inputs)
    except OutputConflictError as e:
        raise typer.BadParameter(str(e), param_hint=e.column) from None
    except OutputNotWritableError as e:
        raise OutputNotWritable(str(e)) from None


@contextmanager
def _output_errors(path: Path, option: str) -> Iterator[None]:
    """An OSError while writing ``path`` becomes exit 5, naming the option."""
    try:
        yield
    except OSError as e:
        reason = e.strerror or _one_line(str(e))
        raise OutputNotWritable(f"{path}: cannot write {option}: {reason}") from None


@contextmanager
def _writing(path: Path, option: str, *, keep_suffix: bool = False) -> Iterator[Path]:
    """A temporary path renamed onto ``path`` on success; an OSError becomes exit 5."""
    _check_output(path, option)
    with _output_errors(path, option), replacing(path, keep_suffix=keep_suffix) as tmp:
        yield tmp


def _write_parquet(table: pa.Table, path: Path, option: str) -> None:
    with _writing(path, option) as tmp:
        pq.write_table(table, tmp)


def _replace_outputs(moves: list[tuple[Path, Path, str]]) -> None:
    """Rename finished temporary files onto their outputs (``(tmp, output,
    option)``), all or none (``_atomic.replace_together``); an OSError
    becomes exit 5 naming the option whose file it names (else the first)."""
    try:
        replace_together([(tmp, dest) for tmp, dest, _ in moves])
    except OSError as e:
        named = {str(e.filename), str(e.filename2)}
        dest, option = next(((d, o) for t, d, o in moves if named & {str(t), str(d)}),
                            (moves[0][1], moves[0][2]))  # fmt: skip
        reason = e.strerror or _one_line(str(e))
        raise OutputNotWritable(f"{dest}: cannot write {option}: {reason}") from None


def _write_parquets(outputs: list[tuple[pa.Table, Path | None, str]]) -> None:
    """Write each ``(table, path, option)`` with a path, all or none
    (``_write_together``)."""
    _write_together([(functools.partial(_parquet_to, table), path, option)
                     for table, path, option in outputs])  # fmt: skip


def _parquet_to(table: pa.Table, tmp: Path) -> None:
    pq.write_table(table, tmp)


def _text_to(text: str, tmp: Path) -> None:
    tmp.write_text(text, encoding="utf-8")


def _write_together(outputs: list[tuple[Callable[[Path], None], Path | None, str]]) -> None:
    """Write each ``(write, path, option)`` with a path, all or none: every
    file is written (``write(tmp)``) under a temporary name first, then all
    are renamed together (``_replace_outputs``); on any error no output has
    changed and no temporary file is left."""
    moves: list[tuple[Path, Path, str]] = []
    try:
        for write, path, option in outputs:
            if path is None:
                continue
            with _output_errors(path, option):
                dest = check_replaceable(path)  # a symlink's target is written (the link stays)
                moves.append((beside(dest), dest, option))
                write(moves[-1][0])
        _replace_outputs(moves)
    except BaseException:
        for tmp, _, _ in moves:
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise
