"""The ``ctxcompact`` command: compaction of stored agent transcripts.

``ctxcompact demo`` runs the main job on embedded defaults: it generates a
large transcript set, estimates it, prunes old tool outputs, marks them,
filters every session to its latest pivot and reports what compaction saved
and how fast each step ran. No server, key or network.

Inputs: Parquet of part rows (docs/schema.md), or any session format
``ctxcompact.formats`` reads (.json / .jsonl / .traj; ``--format`` to force).
``ingest`` turns JSONL session files into Parquet with the native reader.

Exit codes: 0 success; 1 bad data (a CompactionError, which names the file,
session, row or column); 2 usage error; 3 an input that does not exist or
cannot be read; 4 invalid configuration.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

import ctxcompact as cc
from ctxcompact.atomic import replacing
from ctxcompact.batch import compact_batch
from ctxcompact.config import CompactionConfig
from ctxcompact.ingest import IngestResult
from ctxcompact.parquet import compact_parquet
from ctxcompact.synthetic import generate_table

EXIT_CODES = (
    "Exit codes: 0 ok; 1 bad data (names the file, session, row or column); "
    "2 usage error; 3 input missing or unreadable; 4 invalid configuration."
)
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__.split("\n\n")[0],
    epilog=EXIT_CODES,
)
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


ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A CompactionConfig TOML/JSON file.")
]
FormatOption = Annotated[
    str | None, typer.Option("--format", help="Input session format (default: detect).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _config(path: Path | None) -> CompactionConfig:
    return CompactionConfig.from_file(path) if path else CompactionConfig.load()


SESSION_SUFFIXES = (".jsonl", ".json", ".traj")
INPUT_HELP = "Parquet of part rows, or a session file or folder (.jsonl, .json, .traj)."


def _is_parquet(path: Path) -> bool:
    """Parquet of part rows: a .parquet file, or a folder with no session files in it."""
    if path.is_dir():
        return not any(p.suffix in SESSION_SUFFIXES for p in path.rglob("*") if p.is_file())
    return path.suffix == ".parquet"


def _ingest(inputs: list[Path], fmt: str | None, **kwargs: Any) -> IngestResult:
    """Read session files and folders; every file left out is named on stderr."""
    from ctxcompact.ingest import read_sessions

    for path in inputs:
        if not path.exists():
            raise InputNotFound(f"{path}: no such file or directory")
    result = read_sessions(inputs, fmt, **kwargs)
    for f in result.files:
        if f.status != "read":
            typer.echo(f"{f.status}: {f.path}{f': {f.reason}' if f.reason else ''}", err=True)
    return result


def _read(path: Path, fmt: str | None) -> tuple[cc.Transcript, str]:
    """The transcript at ``path`` and the format(s) it was read in."""
    if not path.exists():
        raise InputNotFound(f"{path}: no such file")
    if _is_parquet(path):
        try:
            return cc.Transcript(pq.read_table(path)), "parquet"
        except (pa.ArrowInvalid, OSError) as e:
            raise cc.DatasetError(f"{path}: not a readable Parquet file ({e})") from None
    result = _ingest([path], fmt)
    return result.transcript, result.format


def _load(path: Path, fmt: str | None) -> cc.Transcript:
    return _read(path, fmt)[0]


def _parquet_source(path: Path) -> tuple[Path, str]:
    """A Parquet path for ``path``: itself, or its sessions ingested into a
    temporary folder, removed when the process exits (success or not)."""
    if _is_parquet(path):
        return path, "parquet"
    ingested = _ingest([path], None)
    scratch = tempfile.mkdtemp(prefix="ctxcompact-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    out = Path(scratch) / "ingested.parquet"
    pq.write_table(ingested.table, out)
    return out, ingested.format


class InputNotFound(Exception):
    """Exit code 3."""


def _show(title: str, rows: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, default=str))
        return
    table = Table(title=title)
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        shown = f"{value:,}" if isinstance(value, int) else str(value)
        table.add_row(key.replace("_", " "), shown)
    Console().print(table)


@app.command()
def estimate(
    input: Annotated[Path, typer.Argument(help=INPUT_HELP)],
    fmt: FormatOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate the model-input tokens of every session (placeholders applied)."""
    cfg = _config(config)
    transcript, read_as = _read(input, fmt)
    est = cc.estimate_messages(transcript, cfg)
    visible = cc.estimate_messages(cc.filter_pivot(transcript), cfg)
    _show("token estimate", {
        "sessions": len(transcript.session_ids()), "parts": transcript.num_rows,
        "messages": est.messages.num_rows, "tokens": est.total,
        "tokens_after_pivot": visible.total, "method": cfg.estimate_method,
        "format": read_as,
    }, as_json)  # fmt: skip


@app.command("prune")
def prune_cmd(
    input: Annotated[Path, typer.Argument(help=INPUT_HELP)],
    output: Annotated[Path | None, typer.Option(help="Write the marked rows (Parquet).")] = None,
    fmt: FormatOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Select old tool outputs to prune; with --output, write them marked."""
    cfg = _config(config)
    transcript = _load(input, fmt)
    result = cc.prune(transcript, cfg)
    if output is not None:
        pq.write_table(cc.mark_pruned(transcript, result).to_arrow(), output)
    _show("prune", {
        "sessions": len(transcript.session_ids()), "parts_pruned": len(result),
        "tokens_counted": result.total, "tokens_pruned": result.pruned,
        "sessions_pruned": sum(1 for p in result.sessions["parts"].to_pylist() if p),
        "written": str(output) if output else "-",
    }, as_json)  # fmt: skip


@app.command("filter")
def filter_cmd(
    input: Annotated[Path, typer.Argument(help=INPUT_HELP)],
    output: Annotated[Path | None, typer.Option(help="Write the visible rows (Parquet).")] = None,
    fmt: FormatOption = None,
    as_json: JsonOption = False,
) -> None:
    """Keep each session from its latest completed compaction pivot on."""
    transcript = _load(input, fmt)
    visible = cc.filter_pivot(transcript)
    if output is not None:
        pq.write_table(visible.to_arrow(), output)
    _show("pivot filter", {
        "sessions": len(transcript.session_ids()), "rows_before": transcript.num_rows,
        "rows_after": visible.num_rows, "written": str(output) if output else "-",
    }, as_json)  # fmt: skip


def _limits(context: int | None, output_limit: int | None) -> dict[str, int] | None:
    return None if context is None else {"context": context, "output": output_limit or 0}


@app.command()
def compact(
    input: Annotated[Path, typer.Argument(help=INPUT_HELP)],
    output: Annotated[Path | None, typer.Option(help="Compacted part rows (Parquet).")] = None,
    report: Annotated[Path | None, typer.Option(help="Per-session report (Parquet).")] = None,
    context: Annotated[int | None, typer.Option(min=0, help="Model context window.")] = None,
    output_limit: Annotated[int | None, typer.Option(min=0, help="Model output limit.")] = None,
    fmt: FormatOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prune, mark and pivot-filter every session; report what each one keeps."""
    cfg = _config(config)
    transcript = _load(input, fmt)
    stats, parts = compact_batch(transcript, cfg, limits=_limits(context, output_limit),
                                 parts=True)  # fmt: skip
    if output is not None:
        pq.write_table(parts, output)
    if report is not None:
        pq.write_table(stats, report)
    total = {k: int(pa.compute.sum(stats[k]).as_py() or 0)
             for k in ("tokens_before", "tokens_pruned", "tokens_after")}  # fmt: skip
    over = [x for x in stats["overflow_after"].to_pylist() if x]
    _show("compact", {"sessions": stats.num_rows, **total,
                      "sessions_still_over_limit": len(over)}, as_json)  # fmt: skip


@app.command()
def batch(
    source: Annotated[
        Path,
        typer.Argument(
            help="Parquet file or directory, or session files "
            "(.jsonl, .json, .traj; ingested first)."
        ),
    ],
    destination: Annotated[Path, typer.Argument(help="Output Parquet file.")],
    report: Annotated[Path | None, typer.Option(help="Per-session report (Parquet).")] = None,
    batch_rows: Annotated[int, typer.Option(min=1, help="Rows per record batch.")] = 65_536,
    context: Annotated[int | None, typer.Option(min=0, help="Model context window.")] = None,
    output_limit: Annotated[int | None, typer.Option(min=0, help="Model output limit.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stream-compact a Parquet dataset of any size in bounded memory."""
    if not source.exists():
        raise InputNotFound(f"{source}: no such file or directory")
    cfg = _config(config)
    source, read_as = _parquet_source(source)  # session files: a temporary Parquet first
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True),
                  disable=as_json) as bar:  # fmt: skip
        task = bar.add_task("compacting rows", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        stats = compact_parquet(source, destination, cfg, report_path=report,
                                batch_rows=batch_rows, limits=_limits(context, output_limit),
                                progress=tick)  # fmt: skip
    rows = {"format": read_as, **stats.to_dict()}
    rows["mb_per_second"] = round(stats.bytes_in / 1e6 / stats.seconds, 1) if stats.seconds else 0
    rows["seconds"] = round(stats.seconds, 3)
    _show("batch", rows, as_json)


@app.command()
def convert(
    input: Annotated[Path, typer.Argument(help="Session file or folder to read.")],
    output: Annotated[Path, typer.Argument(help="File to write (.jsonl: one per line).")],
    to: Annotated[str, typer.Option("--to", help="Output format, or 'parquet' (part rows).")] = (
        "openai-chat"
    ),
    source_format: Annotated[
        str | None, typer.Option("--from", help="Input format (default: detect).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Convert sessions between formats (opencode, openai-chat, anthropic, claude-code, ...,
    or parquet: the part rows the other commands read)."""
    from ctxcompact import formats

    if not input.exists():
        raise InputNotFound(f"{input}: no such file")
    result = _ingest([input], source_format)
    if to == "parquet":
        with replacing(output) as tmp:
            pq.write_table(result.table, tmp)
        count = result.sessions
    else:
        sessions = result.transcript.to_sessions()
        formats.write(sessions, output, to)
        count = len(sessions)
    _show("convert", {"sessions": count, "from": result.format, "to": to,
                      "written": str(output)}, as_json)  # fmt: skip


@app.command()
def ingest(
    inputs: Annotated[
        list[Path], typer.Argument(help="Session files (.jsonl, .json, .traj) or folders of them.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Parquet file of part rows.")],
    source_format: Annotated[
        str | None, typer.Option("--format", help="Input format (default: detect per file).")
    ] = None,
    on_error: Annotated[
        str, typer.Option(help="'raise': stop at the first bad line; 'skip': reject it.")
    ] = "raise",
    rejects: Annotated[
        Path | None, typer.Option(help="JSONL file for skipped lines (with --on-error skip).")
    ] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="Threads (default: all cores).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Read session files into a Parquet file of part rows (JSONL natively, all cores).

    Each file's format is detected from its own content and reported; files of
    other kinds found in a folder are listed as skipped.
    """
    if on_error not in ("raise", "skip"):
        raise cc.ConfigError(f"--on-error must be 'raise' or 'skip', got {on_error!r}")
    start = time.perf_counter()
    result = _ingest(inputs, source_format, on_error=on_error, reject_path=rejects,
                     threads=threads)  # fmt: skip
    with replacing(output) as tmp:
        pq.write_table(result.table, tmp)
    seconds = time.perf_counter() - start
    size = sum(Path(p).stat().st_size for p in result.formats)
    by_format: dict[str, int] = {}
    for f in result.files:
        key = f.format if f.status == "read" and f.format else f.status
        by_format[key] = by_format.get(key, 0) + 1
    summary: dict[str, Any] = {
        "format": result.format, "files": len(result.files),
        **{f"files_{k}": v for k, v in by_format.items()},
        "lines": result.lines, "sessions": result.sessions, "rows": result.table.num_rows,
        "rejected": len(result.rejected), "seconds": round(seconds, 3),
        "mb_per_second": round(size / 1e6 / seconds, 1) if seconds else 0,
        "written": str(output),
    }  # fmt: skip
    if as_json:
        summary["per_file"] = [{"path": f.path, "status": f.status, "format": f.format,
                                "reason": f.reason} for f in result.files]  # fmt: skip
    _show("ingest", summary, as_json)


@app.command()
def bench(
    sessions: Annotated[int, typer.Option(min=1, help="Sessions to generate.")] = 200,
    parts: Annotated[int, typer.Option(min=10, help="Parts per session.")] = 500,
    as_json: JsonOption = False,
) -> None:
    """Quick self-benchmark: Rust scans against the pure-Python reference."""
    from ctxcompact import reference as ref

    table = generate_table(sessions, parts, seed=7)
    rows = table.to_pylist()
    results: dict[str, Any] = {"parts": table.num_rows, "mb": round(table.nbytes / 1e6, 1)}
    for name, rust, python in (
        ("prune", lambda: cc.prune(table), lambda: ref.prune(rows)),
        ("pivot", lambda: cc.pivot_mask(table), lambda: ref.pivot_starts(rows)),
    ):
        timings = []
        for fn in (rust, python):
            start = time.perf_counter()
            fn()
            timings.append(time.perf_counter() - start)
        results[f"{name}_rust_ms"] = round(timings[0] * 1000, 1)
        results[f"{name}_reference_ms"] = round(timings[1] * 1000, 1)
        results[f"{name}_speedup"] = f"{timings[1] / timings[0]:.1f}x"
    _show("bench (one run each; see benches/ for the real numbers)", results, as_json)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(cc.__version__)


def main() -> None:
    err = Console(stderr=True)
    try:
        app()
    except InputNotFound as e:
        err.print(f"[red]error:[/red] {e}")
        raise SystemExit(3) from None
    except cc.ConfigError as e:
        err.print(f"[red]error:[/red] ConfigError: {e}")
        raise SystemExit(4) from None
    except cc.CompactionError as e:
        err.print(f"[red]error:[/red] {type(e).__name__}: {e}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
