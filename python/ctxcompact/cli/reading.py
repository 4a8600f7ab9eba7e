"""``estimate``, ``convert`` and ``ingest``: commands that read sessions and
report or rewrite them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import typer
from rich.table import Table

import ctxcompact as cc
from ctxcompact.cli.display import _print_wide, _show, _status
from ctxcompact.cli.inputs import (
    Segments,
    _check_inputs,
    _check_sources,
    _cli_wording,
    _ingest_to_parquet,
    _is_parquet,
    _label,
    _load_all,
    _load_verified,
    _names,
    _to_sessions,
)
from ctxcompact.cli.options import (
    READ_FORMATS,
    WRITE_FORMATS,
    ConfigOption,
    FormatOption,
    InputsArgument,
    JsonOption,
    MethodOption,
    OnErrorOption,
    Reading,
    SessionInputsArgument,
    ThreadsOption,
    VerifyOption,
    _choice,
    _config,
    _count_methods,
    _overrides,
    flag_option,
    value_option,
)
from ctxcompact.cli.outputs import _check_output, _check_outputs, _no_stdio, _writing
from ctxcompact.errors import DatasetError, FormatError
from ctxcompact.estimators import FAMILIES, count_label

commands = typer.Typer()

CountMethodsOption = Annotated[list[str] | None, value_option(
    "--count-method", "FAMILY", "Also count each output under a tokenizer family's estimate "
    "(output_units_<family>), for prune with that --method (or <family>-conservative); "
    f"repeatable. One of: {', '.join(FAMILIES)}.", callback=_count_methods)]  # fmt: skip
CountOption = Annotated[list[str] | None, value_option(
    "--count", "FAMILY", "Count each part's exact tokens under a tokenizer family once "
    "(output_tokens_<family>, input_tokens_<family> for call arguments, and their texts' "
    "hashes), in parallel: every scan, estimate and replay under <family>-exact (the family "
    "a run's model counts in) reads them; repeatable. "
    f"One of: {', '.join(FAMILIES)}.")]  # fmt: skip


@commands.command(short_help="Estimate the model-input tokens of every session.")
@_names("inputs")
def estimate(
    inputs: InputsArgument,
    *,
    reading: Reading,
    config: ConfigOption = None,
    method: MethodOption = None,
    verify: VerifyOption = False,
    per_session: Annotated[
        bool,
        flag_option("--per-session", "Also a row per session (with --json: a per_session list)."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Estimate the model-input tokens of every session (placeholders applied)."""
    cfg = _config(config, **_overrides(method=method))
    # no session read is "nothing to estimate" (exit 1), an empty folder or an empty file alike
    _check_sources(inputs, "nothing to estimate")
    read_as: list[str] = []
    transcript = _load_verified(inputs, reading, as_json, verify, read_as)
    if not transcript.num_rows:
        if len(inputs) > 1:
            where = "these inputs"
        else:
            where = "this folder" if inputs[0].is_dir() else "this file"
        raise DatasetError(f"{_label(inputs)}: no sessions in {where}: nothing to estimate")
    with _status(f"estimating {transcript.num_rows:,} rows", as_json):
        est = cc.estimate_messages(transcript, cfg)
        visible = cc.estimate_messages(cc.filter_pivot(transcript), cfg)
    totals: dict[str, Any] = {
        "sessions": len(transcript.session_ids()), "parts": transcript.num_rows,
        "messages": est.messages.num_rows, "tokens": est.total,
        "tokens_after_pivot": visible.total, "method": cfg.estimate_method,
        "count": count_label(cfg.estimate_method), "format": ", ".join(read_as),
    }  # fmt: skip
    if not per_session:
        _show("token estimate", totals, as_json)
        return
    rows = _estimate_rows(transcript, est, visible)
    if as_json:
        typer.echo(json.dumps({**totals, "per_session": rows}, default=str))
        return
    _show("token estimate", totals, False)
    table = Table(title="per session")
    for key in rows[0] if rows else ():
        table.add_column(key.replace("_", " "), justify="left" if key == "session_id" else "right")
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
    _print_wide(table)


def _estimate_rows(transcript: cc.Transcript, est: Any, visible: Any) -> list[dict[str, Any]]:
    """Per session, in the input's order: its parts, messages, estimated
    tokens, and tokens from its latest summary pivot on."""
    ids = transcript.to_arrow()["session_id"]
    parts: dict[str, int] = {}
    for sid in ids.to_pylist():
        parts[str(sid)] = parts.get(str(sid), 0) + 1

    def by_session(table: pa.Table, column: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in zip(table["session_id"].to_pylist(),
                                               table[column].to_pylist(), strict=True)}  # fmt: skip

    tokens, messages = by_session(est.sessions, "tokens"), by_session(est.sessions, "messages")
    after = by_session(visible.sessions, "tokens")
    return [{"session_id": sid, "parts": n, "messages": messages.get(sid, 0),
             "tokens": tokens.get(sid, 0), "tokens_after_pivot": after.get(sid, 0)}
            for sid, n in parts.items()]  # fmt: skip


@commands.command(short_help="Convert sessions between formats.")
@_names("inputs")
def convert(
    inputs: InputsArgument,
    output: Annotated[
        Path, typer.Argument(metavar="OUTPUT", help="File to write (.jsonl: one per line).")
    ],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="FORMAT",
            callback=_choice(WRITE_FORMATS),
            help=f"Output format, one of: {', '.join(WRITE_FORMATS)}.",
        ),
    ] = "openai-chat",
    fmt: FormatOption = None,
    old_format: Annotated[
        str | None,  # --format's old name, still read
        typer.Option("--from", hidden=True, callback=_choice(READ_FORMATS)),
    ] = None,
    on_error: OnErrorOption = "raise",
    view: Annotated[
        str,
        typer.Option(
            "--view",
            metavar="full|model",
            callback=_choice(("full", "model")),
            help="full: the stored history, as read (prune marks only opencode holds); "
            "model: what the model is sent (cleared outputs as placeholders, from the "
            "latest compaction on).",
        ),
    ] = "full",
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            metavar="NAME|FILE",
            help="With --view model: the policy whose placeholder, clear_inputs, "
            "truncate_output and keep_thinking render the view (default: OpenCode's).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Convert sessions between formats (opencode, openai-chat, anthropic, claude-code, ...,
    or parquet: the part rows the other commands read)."""
    from ctxcompact import formats
    from ctxcompact.formats.views import viewed
    from ctxcompact.policy import Policy

    if old_format is not None:
        if fmt is not None and fmt != old_format:
            raise typer.BadParameter(f"--from is --format's old name: give one format, not "
                                     f"{fmt} and {old_format}", param_hint="--format")  # fmt: skip
        fmt = old_format
    _check_inputs(inputs)
    _no_stdio(output, "OUTPUT", "stdout")
    if view == "model" and to == "parquet":
        raise typer.BadParameter("parquet holds the stored part rows: --view model writes a "
                                 "session format", param_hint="--view")  # fmt: skip
    if policy is not None and view != "model":
        raise typer.BadParameter("--policy renders --view model: add --view model",
                                 param_hint="--policy")  # fmt: skip
    rendering = Policy.load(policy) if policy is not None else None
    if output.suffix == ".parquet" and to != "parquet":
        raise typer.BadParameter(f"{output} is a .parquet file: add --to parquet to write part "
                                 f"rows (--to {to} writes JSON)", param_hint="OUTPUT")  # fmt: skip
    _check_output(output, "OUTPUT", inputs)
    _check_sources(inputs)
    lost: list[str] = []  # what the output cannot hold: in --json too, not only on stderr
    if to == "parquet" and not any(map(_is_parquet, inputs)):  # streamed, as ingest does
        with _status(f"reading {_label(inputs)}", as_json):
            streamed = _ingest_to_parquet(inputs, fmt, output, "OUTPUT", on_error=on_error).last
        count, read_as = streamed.sessions, streamed.format
    else:
        # Parquet part rows (as the other commands read them) or session files.
        segments: Segments = []
        formats_read: list[str] = []
        transcript = _load_all(inputs, fmt, on_error, as_json, segments, formats_read)
        read_as = ", ".join(formats_read)
        if to == "parquet":
            with _writing(output, "OUTPUT", keep_suffix=True) as tmp:
                pq.write_table(transcript.to_arrow(), tmp)
            count = len(transcript)
        else:
            sessions = _to_sessions(transcript, segments)
            count = len(sessions)
            if view == "model":  # what the model is sent: the marks are applied, none lost
                sessions = [viewed(s, view, rendering) for s in sessions]
            lost = formats.losses(sessions, to)
            try:
                with _writing(output, "OUTPUT", keep_suffix=True) as tmp:
                    formats.write(sessions, tmp, to)
            except UnicodeEncodeError as e:
                bad = e.object[e.start : e.end]
                raise FormatError(
                    f"{_label(inputs)}: a string holds {bad!r}, a lone surrogate (from a \\u "
                    f"escape) that UTF-8 cannot encode; {output} was not written"
                ) from None
            if lost:  # written, but a reader of it will not see all that was read
                typer.echo(f"warning: {to} cannot hold all of {_label(inputs)}: {'; '.join(lost)} "
                           "(docs/formats.md, Limits)", err=True)  # fmt: skip
    _show("convert", {"sessions": count, "from": read_as, "to": to,
                      "written": str(output), "lost": lost}, as_json)  # fmt: skip


def _check_count_family(family: str) -> None:
    """--count: a family the core counts exactly, its vocabulary at hand (a
    ``ConfigError`` naming --count otherwise, before any file is read)."""
    from ctxcompact.errors import ConfigError
    from ctxcompact.scans.vocabularies import core_name

    try:
        core_name(family)
    except ConfigError as e:
        raise ConfigError(f"--count {family}: {e}", column="--count") from None


@commands.command(short_help="Read JSONL session files into Parquet part rows.")
def ingest(
    inputs: SessionInputsArgument,
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="FILE", help="Parquet file of part rows.")
    ],
    source_format: FormatOption = None,
    on_error: OnErrorOption = "raise",
    rejects: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="JSONL file for skipped lines (with --on-error skip)."),
    ] = None,
    threads: ThreadsOption = None,
    count_units: Annotated[
        bool,
        typer.Option(
            "--count-units/--no-count-units",
            help="Keep output_utf16 and tool_target: each output's length and each tool "
            "call's supersession target, worked out once at ingest so later scans (prune, "
            "report-only runs) need not read the text or parse the inputs.",
        ),
    ] = True,
    count_methods: CountMethodsOption = None,
    count_exact: CountOption = None,
    window_mb: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="MB",
            help="JSONL read this many MB of lines at a time: memory is bounded by it.",
        ),
    ] = 64,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Read the written file back before it replaces --output and check its "
            "counted columns against their texts (output_utf16, tool_target; the exact "
            "--count columns at a sample of rows): a count wrong for its text is an error "
            "naming the file, column and row, and nothing is written.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Read session files into a Parquet file of part rows (JSONL natively, all cores).

    JSONL is streamed: a window of --window-mb of lines is read, mapped and
    written before the next, so a file of any size ingests in bounded memory
    (a Claude Code file is first scanned for where no session or tool call
    spans a cut; one the scan cannot vouch for is read whole).

    Each file's format is detected from its own content and reported; files of
    other kinds found in a folder are listed as skipped.
    """
    if rejects is not None and on_error != "skip":
        raise typer.BadParameter("needs --on-error skip: only skipped lines are written to it "
                                 "(with --on-error raise the first bad line stops the run)",
                                 param_hint="--rejects")  # fmt: skip
    _check_outputs({"--output": output, "--rejects": rejects}, inputs)
    families = tuple(dict.fromkeys(count_methods or ()))  # checked by _count_methods
    exact = tuple(dict.fromkeys(count_exact or ()))
    for family in exact:
        _check_count_family(family)
    start = time.perf_counter()
    with _status("reading session files", as_json):
        streamed = _ingest_to_parquet(inputs, source_format, output, on_error=on_error,
                                      threads=threads, count_units=count_units,
                                      count_methods=families, count_exact=exact,
                                      rejects=rejects, verify=verify,
                                      window_bytes=window_mb << 20)  # fmt: skip
    result = streamed.last
    seconds = time.perf_counter() - start
    size = sum(Path(p).stat().st_size for p in result.formats)
    by_format: dict[str, int] = {}
    for f in result.files:
        key = f.format if f.status == "read" and f.format else f.status
        by_format[key] = by_format.get(key, 0) + 1
    summary: dict[str, Any] = {
        "format": result.format, "files": len(result.files),
        **{f"files_{k}": v for k, v in by_format.items()},
        "lines": result.lines, "sessions": result.sessions, "rows": streamed.rows,
        "rejected": streamed.rejected,
        "count": [count_label(f"{f}-exact") for f in exact] + [count_label(m) for m in families],
        "verified": verify,
        "seconds": round(seconds, 3),
        "mb_per_second": round(size / 1e6 / seconds, 1) if seconds else 0,
        "written": str(output),
    }  # fmt: skip
    if as_json:
        summary["per_file"] = [{"path": f.path, "status": f.status, "format": f.format,
                                "reason": _cli_wording(f.reason) if f.reason else f.reason}
                               for f in result.files]  # fmt: skip
    _show("ingest", summary, as_json)
