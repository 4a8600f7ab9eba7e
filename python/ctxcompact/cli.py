"""The ``ctxcompact`` command.

``ctxcompact demo`` runs the main job on embedded defaults: it generates a
large transcript set, estimates it, prunes old tool outputs, marks them,
filters every session to its latest pivot and reports what compaction saved
and how fast each step ran. No server, key or network.

Exit codes: 0 success, 1 a CompactionError (bad input), 2 usage error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

import ctxcompact as cc
from ctxcompact.synthetic import generate_table

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n\n")[0])
T = TypeVar("T")


def _timed(steps: list[dict[str, Any]], name: str, rows: int, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    steps.append({"step": name, "seconds": seconds, "rows_per_second": rows / seconds})
    return result


@app.command()
def demo(
    sessions: Annotated[int, typer.Option(min=1, help="Sessions to generate.")] = 500,
    parts: Annotated[int, typer.Option(min=10, help="Parts per session.")] = 1000,
    threads: Annotated[
        int | None, typer.Option(min=1, help="Threads (default: all cores).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Generate a transcript set, prune and pivot-filter it, report savings and speed."""
    console = Console(stderr=True)
    steps: list[dict[str, Any]] = []
    with console.status(f"generating {sessions} sessions x {parts} parts"):
        table = _timed(
            steps, "generate", sessions * parts, lambda: generate_table(sessions, parts, seed=seed)
        )
    rows = table.num_rows
    before = _timed(steps, "estimate", rows, lambda: cc.estimate_messages(table, threads=threads))
    pruned = _timed(steps, "prune", rows, lambda: cc.prune(table, threads=threads))
    marked = _timed(steps, "mark", rows, lambda: cc.mark_pruned(table, pruned))
    visible = _timed(steps, "filter_pivot", rows, lambda: cc.filter_pivot(marked, threads=threads))
    after = _timed(steps, "estimate", visible.num_rows, lambda: cc.estimate_messages(visible))
    summary = {
        "sessions": sessions,
        "parts": rows,
        "input_mb": round(table.nbytes / 1e6, 1),
        "tokens_before": before.total,
        "parts_pruned": len(pruned),
        "tokens_pruned": pruned.pruned,
        "sessions_pruned": sum(1 for p in pruned.sessions["parts"].to_pylist() if p),
        "rows_after_pivot": visible.num_rows,
        "tokens_after": after.total,
        "steps": steps,
    }
    if as_json:
        typer.echo(json.dumps(summary))
        return
    out = Console()
    report = Table(title="ctxcompact demo: what compaction did")
    report.add_column("measure")
    report.add_column("value", justify="right")
    for key in (
        "sessions",
        "parts",
        "input_mb",
        "tokens_before",
        "sessions_pruned",
        "parts_pruned",
        "tokens_pruned",
        "rows_after_pivot",
        "tokens_after",
    ):
        report.add_row(key.replace("_", " "), f"{summary[key]:,}")
    saved = 1 - after.total / before.total if before.total else 0.0
    report.add_row("model input saved", f"{saved:.1%}")
    out.print(report)
    timing = Table(title="speed (Rust core; generate is Python)")
    for col in ("step", "seconds", "rows/s"):
        timing.add_column(col, justify="right" if col != "step" else "left")
    for s in steps:
        timing.add_row(s["step"], f"{s['seconds']:.3f}", f"{s['rows_per_second']:,.0f}")
    out.print(timing)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(cc.__version__)


def main() -> None:
    try:
        app()
    except cc.CompactionError as e:
        Console(stderr=True).print(f"[red]error:[/red] {type(e).__name__}: {e}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
