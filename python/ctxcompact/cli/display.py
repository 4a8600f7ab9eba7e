"""What the commands print: status spinners, timings and the measure/value
table."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ctxcompact.tuning.retention import shown_score

T = TypeVar("T")


def _stderr() -> Console:
    return Console(stderr=True)


def _progress(quiet: bool = False, *, elapsed: bool = False) -> Progress:
    """A progress bar on stderr (only on a terminal, never with --json): the
    step, a bar, how many done and the time left (``elapsed``: a spinner
    first, the time taken instead, and gone when done)."""
    console = _stderr()
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn() if elapsed else TimeRemainingColumn()]  # fmt: skip
    return Progress(*([SpinnerColumn()] if elapsed else []), *columns, console=console,
                    disable=quiet or not console.is_terminal, transient=elapsed)  # fmt: skip


def _print_wide(table: RenderableType) -> None:
    """Print ``table`` on stdout; into a pipe or a file 200 columns wide (so
    session ids are not folded nor columns squeezed to 80)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)


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


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if key.endswith("_ratio"):
            return f"{v:+.1%}"
        return shown_score(v) if key.endswith("retention") else f"${v:,.4f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _show_as_sent(choices: list[dict[str, Any]]) -> None:
    """The as-sent baseline per run: the policy chosen, why, its prompt
    tokens beside the recorded ones and the gap."""
    table = Table(title="as sent (the baseline of each run)")
    for name in ("run", "as sent", "why", "prompt tokens", "recorded", "gap"):
        table.add_column(name, justify="left" if name in ("run", "as sent", "why") else "right")
    for c in choices:
        sent, recorded = c["as_sent_prompt_tokens"], c["recorded_prompt_tokens"]
        gap = (sent - recorded) / recorded if recorded else None
        table.add_row(str(c["session_id"]), str(c["as_sent"]), str(c["as_sent_reason"]),
                      f"{sent:,}", _cell("recorded", recorded),
                      _cell("gap_ratio", gap))  # fmt: skip
    _print_wide(table)
