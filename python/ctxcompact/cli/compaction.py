"""``prune``, ``filter``, ``compact`` and ``batch``: the compaction commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.compute
import typer

import ctxcompact as cc
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.cli.display import _progress, _show, _status
from ctxcompact.cli.inputs import (
    _check_inputs,
    _is_parquet,
    _load_all,
    _load_verified,
    _names,
    _parquet_sources,
    _report_files,
    _verify_parquet,
)
from ctxcompact.cli.options import (
    Compaction,
    ContextOption,
    InputsArgument,
    JsonOption,
    OnErrorOption,
    OutputLimitOption,
    Reading,
    ReportOption,
    VerifyOption,
    _limits,
    bundles,
    file_option,
)
from ctxcompact.cli.outputs import (
    _check_output,
    _check_outputs,
    _no_stdio,
    _write_parquet,
    _write_parquets,
)
from ctxcompact.config import CompactionConfig

commands = typer.Typer()


@commands.command("prune", short_help="Select old tool outputs to prune (--output: mark them).")
@_names("inputs")
def prune_cmd(
    inputs: InputsArgument,
    *,
    output: Annotated[Path | None, file_option("Write the marked rows (Parquet).")] = None,
    reading: Reading,
    settings: Compaction,
    verify: VerifyOption = False,
    as_json: JsonOption = False,
) -> None:
    """Select old tool outputs to prune; with --output, write them marked."""
    cfg = settings.load()
    _check_output(output, "--output", inputs)
    _note_prune_off(cfg)
    transcript = _load_verified(inputs, reading, as_json, verify)
    with _status(f"pruning {transcript.num_rows:,} rows", as_json):
        result = cc.prune(transcript, cfg)
    if output is not None:
        _write_parquet(cc.mark_pruned(transcript, result).to_arrow(), output, "--output")
    _show("prune", {
        "sessions": len(transcript.session_ids()), "parts_pruned": len(result),
        "tokens_counted": result.total, "tokens_pruned": result.pruned,
        "sessions_pruned": sum(1 for p in result.sessions["parts"].to_pylist() if p),
        "written": str(output) if output else "-",
    }, as_json)  # fmt: skip


@commands.command("filter", short_help="Keep each session from its latest summary pivot on.")
@_names("inputs")
def filter_cmd(
    inputs: InputsArgument,
    *,
    output: Annotated[Path | None, file_option("Write the visible rows (Parquet).")] = None,
    reading: Reading,
    as_json: JsonOption = False,
) -> None:
    """Keep each session from its latest completed compaction pivot on."""
    _check_output(output, "--output", inputs)
    transcript = _load_all(inputs, reading.fmt, reading.on_error, as_json, [])
    visible = cc.filter_pivot(transcript)
    if output is not None:
        _write_parquet(visible.to_arrow(), output, "--output")
    _show("pivot filter", {
        "sessions": len(transcript.session_ids()), "rows_before": transcript.num_rows,
        "rows_after": visible.num_rows, "written": str(output) if output else "-",
    }, as_json)  # fmt: skip


@commands.command(short_help="Prune, mark and pivot-filter; report each session.")
@_names("inputs")
def compact(
    inputs: InputsArgument,
    *,
    output: Annotated[Path | None, file_option("Compacted part rows (Parquet).")] = None,
    report: ReportOption = None,
    context: ContextOption = None,
    output_limit: OutputLimitOption = None,
    reading: Reading,
    settings: Compaction,
    verify: VerifyOption = False,
    as_json: JsonOption = False,
) -> None:
    """Prune, mark and pivot-filter every session; report what each one keeps."""
    cfg, limits, usable = _settings(settings, context, output_limit, output, report, inputs)
    transcript = _load_verified(inputs, reading, as_json, verify)
    with _status(f"compacting {transcript.num_rows:,} rows", as_json):
        stats, parts = compact_batch(transcript, cfg, limits=limits, parts=True)
    # both outputs or neither: a failed second rename puts the first one back
    _write_parquets([(parts, output, "--output"), (stats, report, "--report")])
    total = {k: int(pa.compute.sum(stats[k]).as_py() or 0)
             for k in ("tokens_before", "tokens_pruned", "tokens_after")}  # fmt: skip
    over = [x for x in stats["overflow_after"].to_pylist() if x]
    _show("compact", {
        "sessions": stats.num_rows, **total,
        "usable_context": usable if limits is None or usable is not None else "unlimited",
        "sessions_still_over_limit": None if usable is None else len(over),
    }, as_json)  # fmt: skip


def _settings(
    settings: Compaction,
    context: int | None,
    output_limit: int | None,
    output: Path | None,
    report: Path | None,
    inputs: list[Path],
) -> tuple[CompactionConfig, dict[str, int] | None, int | None]:
    """A compaction's config and window (``_limits``), its --output and
    --report checked, the note when pruning is off (compact and batch)."""
    cfg = settings.load()
    limits, usable = _limits(context, output_limit, cfg)
    _check_outputs({"--output": output, "--report": report}, inputs)
    _note_prune_off(cfg)
    return cfg, limits, usable


def _note_prune_off(cfg: CompactionConfig) -> None:
    """Say on stderr that nothing will be pruned when pruning is switched off
    (``prune = false``, ``CTXCOMPACT_DISABLE_PRUNE=1``): a run that prunes
    nothing looks like a broken one."""
    if not cfg.prune:
        typer.echo(f"note: pruning is switched off (prune = false, from {cfg.sources()['prune']}): "
                   "no tool output is pruned", err=True)  # fmt: skip


@commands.command(short_help="Stream-compact a Parquet dataset in bounded memory.")
@bundles
def batch(
    inputs: InputsArgument,
    *,
    output: Annotated[
        Path | None,
        file_option(
            "Compacted part rows (Parquet); omit it for a report-only run (--report).",
            "--output",
            "-o",
        ),
    ] = None,
    report: ReportOption = None,
    batch_rows: Annotated[
        int, typer.Option(min=1, metavar="N", help="Rows per record batch.")
    ] = 65_536,
    context: ContextOption = None,
    output_limit: OutputLimitOption = None,
    settings: Compaction,
    verify: VerifyOption = False,
    on_error: OnErrorOption = "raise",
    as_json: JsonOption = False,
) -> None:
    """Stream-compact a Parquet dataset of any size in bounded memory.

    Session files are ingested into a temporary Parquet file first. Without
    --output only the --report is written; when the rows hold their
    outputs' lengths (ingest counts them) the output text is never read.
    """
    _check_inputs(inputs)
    _no_stdio(output, "--output", "stdout")
    if output is None and report is None:
        raise typer.BadParameter("nothing to write: give an --output (-o), a --report, or both")
    cfg, limits, usable = _settings(settings, context, output_limit, output, report, inputs)
    # session files: a Parquet first
    sources, read_as, found, rejected = _parquet_sources(inputs, on_error)
    ingested = [f for f in found if f.status == "read"]
    # what ingest has just read it counted itself: the Parquet inputs are checked
    if verify and (given := [p for p in inputs if _is_parquet(p)]):
        _verify_parquet(given, batch_rows)
    with _progress(as_json) as bar:
        task = bar.add_task("compacting rows", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        stats = compact_parquet(sources, output, cfg, report_path=report,
                                batch_rows=batch_rows, limits=limits,
                                progress=tick)  # fmt: skip
    _report_files(stats.skipped)  # files of a folder left out, named as ingest names them
    rows = {"format": read_as, **stats.to_dict()}
    if found:  # the counts are of the Parquet made from them: say what was read
        rows["files"] = len(ingested)
        # files of the folder left out, as ingest's files_skipped counts them
        rows["skipped"] = sum(f.status == "skipped" for f in found)
        rows["session_bytes"] = sum(Path(f.path).stat().st_size for f in ingested)
        rows["rejected"] = rejected  # lines --on-error skip left out, as ingest counts them
    # of the Arrow columns read (bytes_read), not of the files
    rows["mb_per_second"] = round(stats.bytes_read / 1e6 / stats.seconds, 1) if stats.seconds else 0
    rows["seconds"] = round(stats.seconds, 3)
    if limits is not None:
        rows["usable_context"] = usable if usable is not None else "unlimited"
    _show("batch", rows, as_json)
