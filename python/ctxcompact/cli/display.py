"""What the commands print: status spinners, timings and the measure/value
table."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

T = TypeVar("T")


def _stderr() -> Console:
    return Console(stderr=True)


@contextmanager
def _status(label: str, quiet: bool = False) -> Iterator[None]:
    """A spinner on stderr while a long step runs (only on a terminal, never with --json)."""
    console = _stderr()
    if quiet or not console.is_terminal:
        yield
        return
    with console.status(label):
        yield


def _timed(
    steps: list[dict[str, Any]], name: str, rows: int, fn: Callable[[], T], quiet: bool = False
) -> T:
    with _status(f"{name}: {rows:,} rows", quiet):
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
    steps.append({"step": name, "seconds": seconds, "rows_per_second": rows / seconds})
    return result


def _show(title: str, rows: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, default=str))
        return
    table = Table(title=title)
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        if value is None:
            shown = "-"
        elif isinstance(value, int) and not isinstance(value, bool):
            shown = f"{value:,}"
        else:
            shown = str(value)
        table.add_row(key.replace("_", " "), shown)
    Console().print(table)
