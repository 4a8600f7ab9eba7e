"""``demo`` and ``bench``: the whole job, and a speed check, on generated data."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import ctxcompact as cc
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.cli.display import T, _progress, _show, _timed
from ctxcompact.cli.options import JsonOption, PartsOption, SessionsOption, ThreadsOption
from ctxcompact.scans import pivot_mask

commands = typer.Typer()


@commands.command(short_help="Run the whole job on generated data; report savings, speed.")
def demo(
    sessions: SessionsOption = 500,
    parts: PartsOption = 1000,
    threads: ThreadsOption = None,
    seed: Annotated[int, typer.Option(metavar="N", help="Generator seed.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Generate a transcript set, prune and pivot-filter it, report savings and speed."""
    steps: list[dict[str, Any]] = []
    table = _timed(steps, "generate", sessions * parts,
                   lambda: generate_table(sessions, parts, seed=seed), as_json)  # fmt: skip
    rows = table.num_rows

    def step(name: str, n: int, fn: Callable[[], T]) -> T:
        return _timed(steps, name, n, fn, as_json)

    before = step("estimate (all)", rows, lambda: cc.estimate_messages(table, threads=threads))
    pruned = step("prune", rows, lambda: cc.prune(table, threads=threads))
    marked = step("mark", rows, lambda: cc.mark_pruned(table, pruned))
    with_marks = step("estimate (marked)", rows,
                      lambda: cc.estimate_messages(marked, threads=threads))  # fmt: skip
    visible = step("filter pivot", rows, lambda: cc.filter_pivot(marked, threads=threads))
    after = step("estimate (after pivot)", visible.num_rows,
                 lambda: cc.estimate_messages(visible, threads=threads))  # fmt: skip
    # before - pruned + placeholders - dropped by the pivot filter = after
    placeholders = with_marks.total - (before.total - pruned.pruned)
    summary = {
        "sessions": sessions,
        "parts": rows,
        "input_mb": round(table.nbytes / 1e6, 1),
        "tokens_before": before.total,
        "parts_pruned": len(pruned),
        "tokens_pruned": pruned.pruned,
        "tokens_placeholders": placeholders,
        "sessions_pruned": sum(1 for p in pruned.sessions["parts"].to_pylist() if p),
        "rows_after_pivot": visible.num_rows,
        "tokens_dropped_by_pivot": with_marks.total - after.total,
        "tokens_after": after.total,
        "steps": steps,
    }
    if as_json:
        typer.echo(json.dumps(summary))
        return
    out = Console()
    report = Table(title="ctxcompact demo")
    report.add_column("measure")
    report.add_column("value", justify="right")
    for label, key in (
        ("sessions", "sessions"),
        ("parts", "parts"),
        ("input MB", "input_mb"),
        ("sessions pruned", "sessions_pruned"),
        ("parts pruned", "parts_pruned"),
        ("rows after pivot filter", "rows_after_pivot"),
        ("tokens before", "tokens_before"),
        ("- pruned tool outputs", "tokens_pruned"),
        ("+ placeholders for them", "tokens_placeholders"),
        ("- dropped by the pivot filter", "tokens_dropped_by_pivot"),
        ("= tokens after", "tokens_after"),
    ):
        report.add_row(label, f"{summary[key]:,}")
    saved = 1 - after.total / before.total if before.total else 0.0
    report.add_row("model input saved", f"{saved:.1%}")
    out.print(report)
    out.print(
        "Pivot filter: drops what precedes each session's latest summary.",
        soft_wrap=False,
    )
    timing = Table(title="speed (Rust; generate is Python)")
    for col in ("step", "seconds", "rows/s"):
        timing.add_column(col, justify="right" if col != "step" else "left")
    for s in steps:
        timing.add_row(s["step"], f"{s['seconds']:.3f}", f"{s['rows_per_second']:,.0f}")
    out.print(timing)


@commands.command(short_help="Quick speed check: Rust against the Python reference.")
def bench(
    sessions: SessionsOption = 200,
    parts: PartsOption = 500,
    as_json: JsonOption = False,
) -> None:
    """Quick self-check of speed: Rust scans against the pure-Python reference."""
    import ctxcompact.scans.reference as ref

    with _progress(as_json, elapsed=True) as bar:
        task = bar.add_task(f"generating {sessions} x {parts} parts", total=5)
        table = generate_table(sessions, parts, seed=7)
        rows = table.to_pylist()
        bar.advance(task)
        results: dict[str, Any] = {"parts": table.num_rows, "mb": round(table.nbytes / 1e6, 1)}
        for name, rust, python in (
            ("prune", lambda: cc.prune(table), lambda: ref.prune(rows)),
            ("pivot", lambda: pivot_mask(table), lambda: ref.pivot_starts(rows)),
        ):
            timings = []
            for impl, fn in (("Rust", rust), ("Python reference", python)):
                bar.update(task, description=f"{name}: {impl}")
                start = time.perf_counter()
                fn()
                timings.append(time.perf_counter() - start)
                bar.advance(task)
            results[f"{name}_rust_ms"] = round(timings[0] * 1000, 1)
            results[f"{name}_reference_ms"] = round(timings[1] * 1000, 1)
            results[f"{name}_speedup"] = f"{timings[1] / timings[0]:.1f}x"
    _show("bench (one run each)", results, as_json)
    if not as_json:
        typer.echo(
            "One run of each, a rough check: raise --sessions / --parts for steadier\n"
            "numbers; `ctxcompact demo` times the whole pipeline."
        )
