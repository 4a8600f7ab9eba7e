"""The ctxcompact command: compaction of stored agent transcripts.

`ctxcompact demo` runs the main job on embedded defaults: it generates a
large transcript set, estimates it, prunes old tool outputs, marks them,
filters every session to its latest pivot and reports what compaction saved
and how fast each step ran. No server, key or network.

Inputs: Parquet of part rows (docs/schema.md), or any session format
`ctxcompact.formats` reads (.json / .jsonl / .traj; `--format` to force).
`ingest` turns JSONL session files into Parquet with the native reader.
Every output is written to a temporary file and renamed into place, so a
failed run leaves no partial file.

Exit codes: see EXIT_CODES (also printed by `ctxcompact --help`).
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import typer
from rich.console import Console
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

import ctxcompact as cc
from ctxcompact import config as config_module
from ctxcompact._atomic import (
    OutputNotWritableError,
    beside,
    check_replaceable,
    replace_together,
    replacing,
)
from ctxcompact._outputs import _one_line, check_outputs, is_parquet_source
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    ConfigError,
    DatasetError,
    DuplicateSessionError,
    FormatError,
    MissingColumnError,
    OutputConflictError,
    SchemaError,
    TranscriptError,
)
from ctxcompact.estimators import FAMILIES, METHODS
from ctxcompact.formats import FORMATS
from ctxcompact.formats.reader import (
    DOCUMENT_SUFFIXES,
    JSONL_SUFFIXES,
    FileReport,
    IngestResult,
    RejectedLine,
)
from ctxcompact.policy import Policy
from ctxcompact.scans import Limits, pivot_mask, with_output_units
from ctxcompact.transcript import (
    OUTPUT_UNITS,
    TOOL_TARGET,
    code_names,
    mixed_codes,
    relocate,
    targets_as_dictionary,
)

#: Exit status of every failure class (documented in --help and docs/config.md).
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INPUT, EXIT_CONFIG, EXIT_OUTPUT = 0, 1, 2, 3, 4, 5
EXIT_CODES = (
    "Exit codes: 0 ok; 1 bad data (names the file, session, row or column); "
    "2 usage error (unknown option or value); 3 input missing or unreadable "
    "(also a --config file); 4 invalid configuration (a bad value, or a "
    "--context with no usable window); 5 output not writable (missing folder, "
    "a directory, no permission; nothing is left half-written)."
)
#: The values of --format (read) and --to (write): one place for each.
READ_FORMATS: tuple[str, ...] = tuple(FORMATS)
WRITE_FORMATS: tuple[str, ...] = (*FORMATS, "parquet")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # Plain help: no RST/markdown markup and no "<bool>" after flags.
    rich_markup_mode=None,
    help="ctxcompact: compaction of stored agent transcripts "
    "(estimate, prune, pivot-filter, convert, ingest).",
    epilog=EXIT_CODES,
)
T = TypeVar("T")


class InputNotFound(Exception):
    """Exit code 3."""


class OutputNotWritable(Exception):
    """Exit code 5."""


def _version(value: bool) -> None:
    if value:
        typer.echo(cc.__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version,
                     help="Print the version and exit."),
    ] = False,
) -> None:  # fmt: skip
    pass


# --- options shared by several commands ---------------------------------------------


def _choice(values: tuple[str, ...]) -> Callable[[str | None], str | None]:
    def check(value: str | None) -> str | None:
        if value is not None and value not in values:
            raise typer.BadParameter(f"{value!r} is not one of: {', '.join(values)}")
        return value

    return check


def _count_methods(values: list[str] | None) -> list[str] | None:
    """--count-method: a tokenizer family (``<family>-conservative`` counts the
    same column); anything else is a usage error, as for --method."""
    for value in values or ():
        if value not in FAMILIES and value.removesuffix("-conservative") not in FAMILIES:
            why = {
                "opencode": " (opencode's counts are output_utf16, kept by --count-units)",
                "ceil-bytes": " (ceil-bytes reads the texts' byte lengths: nothing to count)",
            }.get(value, "")
            raise typer.BadParameter(f"{value!r} is not a tokenizer family, one of: "
                                     f"{', '.join(FAMILIES)}{why}")  # fmt: skip
    return values


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE",
                 help="A CompactionConfig TOML/JSON file (see `ctxcompact config`)."),
]  # fmt: skip
FormatOption = Annotated[
    str | None,
    typer.Option("--format", metavar="FORMAT", callback=_choice(READ_FORMATS),
                 help=f"Input session format, one of: {', '.join(READ_FORMATS)} "
                 "(default: detect)."),
]  # fmt: skip
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
ProtectOption = Annotated[
    int | None,
    typer.Option("--prune-protect", min=0, metavar="TOKENS",
                 help="Tokens of the newest tool outputs never pruned (config prune_protect)."),
]  # fmt: skip
MinimumOption = Annotated[
    int | None,
    typer.Option("--prune-minimum", min=0, metavar="TOKENS",
                 help="Prune only when more than this many tokens would be freed "
                 "(config prune_minimum)."),
]  # fmt: skip
ToolsOption = Annotated[
    str | None,
    typer.Option("--prune-protected-tools", metavar="TOOLS",
                 help="Comma-separated tools whose outputs are never pruned, '' for none "
                 "(config prune_protected_tools)."),
]  # fmt: skip
PolicyOption = Annotated[
    str | None,
    typer.Option("--policy", metavar="NAME|FILE",
                 help="Prune policy: a preset (opencode, swe-agent, anthropic-clear-tool-uses, "
                 "aggressive) or a TOML/JSON policy file (config policy; docs/policies.md)."),
]  # fmt: skip
OnErrorOption = Annotated[
    str,
    typer.Option(
        metavar="raise|skip",
        callback=_choice(("raise", "skip")),
        help="raise: stop at the first bad line; skip: reject it and go on.",
    ),
]
MethodOption = Annotated[
    str | None,
    typer.Option("--method", metavar="METHOD", callback=_choice(METHODS),
                 help="Token estimate (config estimate_method): opencode (default), ceil-bytes, "
                 "or a tokenizer family's fitted estimate: o200k, cl100k, llama3, qwen, tekken, "
                 "deepseek, each also as <family>-conservative."),
]  # fmt: skip
VerifyOption = Annotated[
    bool,
    typer.Option("--verify",
                 help="Re-count every output against its stored length (output_utf16, "
                 "output_units_<family>) and work out every tool_target again first; a "
                 "count that no longer matches its text, or a target its input (edited "
                 "after ingest), is an error naming the row."),
]  # fmt: skip
ContextOption = Annotated[
    int | None,
    typer.Option("--context", min=0, metavar="TOKENS",
                 help="Model context window (0: unlimited); flags sessions over the limit."),
]  # fmt: skip
ModelsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        "--price",
        metavar="NAME",
        help="Price the calls from this row of the price table (docs/config.md, Prices), "
        "under its provider's cache rules; repeat for a cost column per model (the first is "
        "'cost').",
    ),
]
CacheOption = Annotated[
    str,
    typer.Option(
        "--cache",
        metavar="5m|1h|off",
        callback=_choice(("5m", "1h", "off")),
        help="The prompt cache priced: the providers' default (5m), Anthropic's 1-hour cache "
        "(1h), or none (off: every prompt token at the input price).",
    ),
]
OutputLimitOption = Annotated[
    int | None,
    typer.Option("--output-limit", min=1, metavar="TOKENS",
                 help="Model output limit, at least 1 (with --context; without it, "
                 "output_token_max tokens are reserved for the answer)."),
]  # fmt: skip


def _overrides(
    protect: int | None = None,
    minimum: int | None = None,
    tools: str | None = None,
    policy: str | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if method is not None:
        values["estimate_method"] = method
    if policy is not None:
        if policy.strip().endswith((".toml", ".json")) and not Path(policy.strip()).is_file():
            # A missing input, as a missing --config file is (exit 3).
            raise InputNotFound(f"{policy}: no such policy file (--policy)")
        values["policy"] = policy
    if protect is not None:
        values["prune_protect"] = protect
    if minimum is not None:
        values["prune_minimum"] = minimum
    if tools is not None:
        values["prune_protected_tools"] = [t.strip() for t in tools.split(",") if t.strip()]
    return values


def _config(path: Path | None, **overrides: Any) -> CompactionConfig:
    if path is None:
        return CompactionConfig.load(**overrides)
    if not path.exists():
        raise InputNotFound(f"{path}: no such configuration file (--config)")
    if not path.is_file() or not os.access(path, os.R_OK):
        raise InputNotFound(f"{path}: cannot read the configuration file (--config)")
    return CompactionConfig.from_file(path, **overrides)


def _limits(
    context: int | None, output_limit: int | None, cfg: CompactionConfig
) -> tuple[dict[str, int] | None, int | None]:
    """The model limits and their usable input window (``None``: no limit)."""
    if context is None:
        if output_limit is not None:
            raise typer.BadParameter("needs --context", param_hint="--output-limit")
        return None, None
    limits = {"context": context, "output": output_limit or 0}
    if context == 0:
        return limits, None
    # The library's overflow rule decides how much of the window is input.
    usable = Limits(context=context, output=output_limit or 0).usable(cfg) or 0
    if usable <= 0:
        raise ConfigError(
            f"--context {context} leaves no usable input window ({usable:,} tokens): "
            f"{context - usable:,} tokens are reserved for the answer "
            f"(--output-limit, else output_token_max = {cfg.output_token_max:,}); "
            "pass the model's --output-limit or a larger --context",
            column="context",
        )
    return limits, usable


# --- writing outputs ------------------------------------------------------------------


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


# --- progress and display -------------------------------------------------------------


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


# --- commands ---------------------------------------------------------------------------


@app.command(short_help="Run the whole job on generated data; report savings, speed.")
def demo(
    sessions: Annotated[int, typer.Option(min=1, metavar="N", help="Sessions to generate.")] = 500,
    parts: Annotated[int, typer.Option(min=10, metavar="N", help="Parts per session.")] = 1000,
    threads: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Threads (default: all cores).")
    ] = None,
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


SESSION_SUFFIXES = JSONL_SUFFIXES + DOCUMENT_SUFFIXES  # what read_sessions reads
#: The inputs of every command that reads part rows: several files and
#: folders, read as one (``_load_many``'s rules: each folder one kind, each
#: file read once, a session in one input only).
InputsArgument = Annotated[
    list[Path],
    typer.Argument(metavar="INPUT",
                   help="Parquet files or folders of part rows, and session files (.jsonl, "
                   ".json, .traj) or folders of them; several are read as one."),
]  # fmt: skip
#: ``ingest``'s inputs: session files only (it makes the Parquet).
SessionInputsArgument = Annotated[
    list[Path],
    typer.Argument(metavar="INPUT",
                   help="Session files (.jsonl, .json, .traj) or folders of them; several are "
                   "read as one."),
]  # fmt: skip


def _is_parquet(path: Path) -> bool:
    """A .parquet file, or a folder with no session files in it. A folder
    holding both kinds is a usage error (exit 2): it is read as one kind, and
    the files of the other would be left out with only a "skipped:" line."""
    if path.is_dir():
        _one_kind(path)
    return is_parquet_source(path)


def _one_kind(folder: Path) -> None:
    """Refuse a folder holding Parquet files (by ``parquet_dataset``'s rule)
    and session files (.jsonl, .json, .traj) alike."""
    from ctxcompact.batch.parquet import reads_as_parquet

    parquet: list[Path] = []
    sessions: list[Path] = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        if p.suffix in SESSION_SUFFIXES:
            sessions.append(p)
        elif reads_as_parquet(folder, p):
            parquet.append(p)
    if parquet and sessions:

        def some(paths: list[Path]) -> str:
            more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
            return f"{paths[0]}{more}"

        raise typer.BadParameter(
            f"{folder} holds both Parquet files ({some(parquet)}) and session files "
            f"({some(sessions)}): a folder is read as one kind, so the other would be left "
            "out; put them in separate folders (or `ctxcompact ingest` the session files "
            "into a Parquet file of their own)"
        )


def _check_inputs(inputs: list[Path], name: str = "INPUT") -> None:
    """Each input exists and is a file or a folder (exit 3 otherwise: a named
    pipe, socket or device given as an input cannot be read as one)."""
    from ctxcompact.formats.reader import _not_read

    for path in inputs:
        _no_stdio(path, name)
        if not path.exists():
            raise InputNotFound(f"{path}: no such file or directory")
        if not (path.is_file() or path.is_dir()):
            raise InputNotFound(f"{path}: cannot read {name}: {_not_read(path)}")


def _check_sources(inputs: list[Path], nothing: str = "") -> None:
    """Inputs of a command that reads Parquet or session files: each exists,
    and a folder holds one or the other (else it would be read as a Parquet
    dataset without a column, or without a file). ``nothing``: what the
    command cannot do without sessions, added to the error."""
    _check_inputs(inputs)
    for path in inputs:
        if path.is_dir() and not any(
            p.suffix in (*SESSION_SUFFIXES, ".parquet") and p.is_file() for p in path.rglob("*")
        ):
            suffixes = ", ".join(SESSION_SUFFIXES)
            then = f": {nothing}" if nothing else ""
            raise DatasetError(f"{path}: no sessions in this folder: no session files "
                               f"({suffixes}) and no .parquet files{then}")  # fmt: skip


def _located(path: str, text: str, line: int = 0) -> str:
    """``path:line: text`` (``path: text`` for a whole file), the place named
    once: a reader's message that starts with it already (``x.jsonl:1:
    cannot tell the format``) is not prefixed again; a file's message that
    names a line of it keeps the line."""
    found = re.match(re.escape(path) + r"(?::(\d+))?: ", text)
    named = found.group(1) if found else None
    if found and (not line or named is None or int(named) == line):
        text, line = text[found.end() :], line or int(named or 0)
    return f"{path}:{line}: {text}" if line else f"{path}: {text}"


def _report_files(files: list[FileReport]) -> None:
    """Name every input file left out on stderr."""
    for f in files:
        if f.status != "read":
            reason = _one_line(_cli_wording(f.reason)) if f.reason else ""
            typer.echo(f"{f.status}: {_located(f.path, reason) if reason else f.path}", err=True)


def _ingest(inputs: list[Path], fmt: str | None, **kwargs: Any) -> IngestResult:
    """Read session files and folders; every file left out is named on stderr."""
    from ctxcompact.formats.reader import read_sessions

    _check_inputs(inputs)
    result = read_sessions(inputs, fmt, **kwargs)
    _report_files(result.files)
    _report_rejected(_rejected_lines(result.rejected, result.files))
    return result


#: Rejected lines named on stderr before a count of the rest.
SHOWN_REJECTS = 5


def _rejected_lines(rejected: list[RejectedLine], files: list[FileReport]) -> list[RejectedLine]:
    """The lines ``--on-error skip`` left out that no file report names: a
    document rejected whole (line 0) and every line of a JSONL file rejected
    whole are named once, with the files."""
    whole = {f.path for f in files if f.status == "rejected"}
    return [r for r in rejected if r.line > 0 and r.path not in whole]


def _report_rejected(
    lines: list[RejectedLine], count: int | None = None, rejects: Path | None = None
) -> None:
    """Name the lines ``--on-error skip`` left out on stderr (``lines``: the
    first of them, ``count`` in all), then how many more and where every one
    is (``rejects``: the file ``ingest --rejects`` wrote them to)."""
    count = len(lines) if count is None else count
    for r in lines[:SHOWN_REJECTS]:
        text = _one_line(_cli_wording(r.error))
        typer.echo(f"rejected: {_located(r.path, text, r.line)}", err=True)
    if count > SHOWN_REJECTS:
        where = (f"{rejects} holds every one" if rejects is not None else
                 "`ctxcompact ingest --on-error skip --rejects FILE` writes every one")  # fmt: skip
        typer.echo(f"rejected: {count - SHOWN_REJECTS} more line(s) ({where})", err=True)


#: Rows ingest gathers before it writes a row group (unless the gathered
#: windows hold a window's bytes first), so a folder of small files does not
#: become a row group per file.
ROW_GROUP_ROWS = 1 << 16


@dataclass
class _Streamed:
    """What ``_ingest_to_parquet`` read: the last window's counts and reports."""

    last: IngestResult
    rows: int
    rejected: int


def _ingest_to_parquet(
    inputs: list[Path], fmt: str | None, out: Path, option: str = "--output", *,
    on_error: str = "raise", threads: int | None = None, count_units: bool = True,
    count_methods: tuple[str, ...] = (), rejects: Path | None = None,
    window_bytes: int = 64 << 20,
) -> _Streamed:  # fmt: skip
    """Stream session files into the Parquet file ``out`` (and the skipped
    lines into ``rejects``) a window of lines at a time, so memory is bounded
    by a window, not by the files. Both files appear whole at the end or not
    at all; a write error names its option, a read error its input; every
    file left out is named on stderr."""
    from ctxcompact.formats.reader import iter_sessions

    _check_inputs(inputs)
    _check_outputs({option: out, "--rejects": rejects}, inputs)
    # a symlink's target is written (the link stays), as every output is
    with _output_errors(out, option):
        out = check_replaceable(out)
    if rejects is not None:
        with _output_errors(rejects, "--rejects"):
            rejects = check_replaceable(rejects)
    out_tmp = beside(out)
    rejects_tmp = beside(rejects) if rejects is not None else None
    rows = rejected = pending_rows = pending_bytes = bad_lines = 0
    shown: list[RejectedLine] = []  # the first rejected lines, named at the end
    pending: list[pa.Table] = []
    last: IngestResult | None = None
    writer: pq.ParquetWriter | None = None
    reject_file = None
    try:
        if rejects is not None and rejects_tmp is not None:
            with _output_errors(rejects, "--rejects"):
                reject_file = rejects_tmp.open("w", encoding="utf-8")
        for window in iter_sessions(inputs, fmt, on_error=on_error,  # type: ignore[arg-type]
                                    threads=threads, window_bytes=window_bytes):  # fmt: skip
            table = window.table  # the readers count output_utf16 (and tool_target) already
            if not count_units:
                table = table.drop_columns([OUTPUT_UNITS, TOOL_TARGET])
            for method in count_methods:
                table = with_output_units(table, method=method, threads=threads).to_arrow()
            with _output_errors(out, option):
                if writer is None:
                    writer = pq.ParquetWriter(out_tmp, table.schema)
                pending.append(table.cast(writer.schema))
                pending_rows += table.num_rows
                pending_bytes += table.nbytes
                # Small windows (a folder of small files) gather into one row group.
                if pending_rows >= ROW_GROUP_ROWS or pending_bytes >= window_bytes:
                    writer.write_table(pa.concat_tables(pending))
                    pending, pending_rows, pending_bytes = [], 0, 0
            rows += table.num_rows
            if reject_file is not None:
                with _output_errors(rejects or out, "--rejects"):
                    for r in window.rejected:
                        reject_file.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
            rejected += len(window.rejected)
            lines = _rejected_lines(window.rejected, window.files)
            shown += lines[: SHOWN_REJECTS - len(shown)]
            bad_lines += len(lines)
            last = window
        assert last is not None and writer is not None  # iter_sessions yields at least once
        with _output_errors(out, option):
            if pending:
                writer.write_table(pa.concat_tables(pending))
            writer.close()
        moves = [(out_tmp, out, option)]
        if reject_file is not None and rejects is not None and rejects_tmp is not None:
            with _output_errors(rejects, "--rejects"):
                reject_file.close()
            moves.append((rejects_tmp, rejects, "--rejects"))
        # both files or neither: a failed second rename puts the first one back
        _replace_outputs(moves)
    except BaseException:
        for handle in (writer, reject_file):
            with suppress(Exception):
                if handle is not None:
                    handle.close()
        for tmp in (out_tmp, rejects_tmp):
            with suppress(OSError):
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
        raise
    _report_files(last.files)
    _report_rejected(shown, bad_lines, rejects)
    return _Streamed(last, rows, rejected)


#: Where the rows of a transcript read from files come from: (file, rows,
#: whether the file's rows are the table's, i.e. Parquet), in table order.
Segments = list[tuple[Path, int, bool]]


def _read(path: Path, segments: Segments | None = None) -> cc.Transcript:
    """The transcript of the Parquet file or folder ``path`` (read whole: a
    bad file or row is always an error; ``segments``: where each file's rows
    are is added to it). Session files are read by ``_load_many``."""
    return cc.Transcript(_read_parquet(path, segments))


def _read_parquet(source: Path | list[Path], segments: Segments | None = None) -> pa.Table:
    """The part rows of Parquet files and folders, read as ``batch`` reads
    them (``parquet_dataset``: a folder's ``*.parquet`` files, names starting
    with ``_`` or ``.`` left out; every file left out named on stderr)."""
    from ctxcompact.batch.parquet import check_parts_once, check_readable, parquet_dataset

    found = parquet_dataset(source)
    _report_files(found.skipped)
    if len(found.files) > 1:
        _check_parquet_sessions(found.files)
    tables = []
    for path in found.files:
        check_readable(path)  # an unreadable file: its OSError (exit 3), not bad data
        try:
            tables.append(pq.read_table(path))
        except (pa.ArrowInvalid, OSError) as e:
            check_readable(path)
            raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
        # a part twice within the file (check_file_joins compared the joins)
        check_parts_once(tables[-1], functools.partial(_in_path, path))
        if segments is not None:
            segments.append((path, tables[-1].num_rows, True))
    # tool_target comes back as dictionary<int32, string> per row group (or
    # plain, from other writers): one TARGETS_DICTIONARY over every file
    if len(tables) == 1:
        return targets_as_dictionary(tables[0])
    # role / part_type / status as int8 codes in some files, names in others
    # (docs/schema.md allows both): the codes read as names, so they join
    tables = _codes_as_names(tables, [[(path, t.num_rows, True)] for path, t
                                      in zip(found.files, tables, strict=True)])  # fmt: skip
    try:
        tables = [targets_as_dictionary(t) for t in tables]
        return targets_as_dictionary(pa.concat_tables(tables, promote_options="permissive"))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SchemaError(f"{source}: the files' columns do not agree "
                          f"({_one_line(str(e))})") from None  # fmt: skip


def _in_path(path: Path, row: int) -> tuple[Path, int]:
    return path, row


def _codes_as_names(tables: list[pa.Table], where: list[Segments]) -> list[pa.Table]:
    """``tables``, to be joined, with each column that holds int8 codes in
    some and names in others (``mixed_codes``) read as names in all: a code
    that stands for nothing is an ``UnknownValueError`` naming the file
    (``where``: each table's segments) and its row there."""
    mixed = mixed_codes(t.schema for t in tables)
    if not mixed:
        return tables
    named = []
    for table, segments in zip(tables, where, strict=True):
        try:
            named.append(code_names(table, mixed))
        except cc.CompactionError as e:
            _relocate_in(e, segments)
            raise
    return named


def _relocate_in(error: cc.CompactionError, segments: Segments) -> None:
    """``error``, about a row of the table ``segments`` make up, made to name
    the file it is in (and, for Parquet, the row in that file)."""
    start = 0
    for path, rows, parquet in segments:
        if error.row is not None and error.row < start + rows:
            relocate(error, path, error.row - start if parquet else error.row)
            return
        start += rows


def _label(inputs: list[Path]) -> str:
    """The inputs, named in a message."""
    return ", ".join(map(str, inputs))


def _load_all(
    inputs: list[Path], fmt: str | None, on_error: str, as_json: bool, segments: Segments,
    read_as: list[str] | None = None,
) -> cc.Transcript:  # fmt: skip
    """``_load_many`` under a "reading" status line."""
    with _status(f"reading {_label(inputs)}", as_json):
        return _load_many(inputs, fmt, on_error, segments, read_as)


def _verify_read(transcript: cc.Transcript, inputs: list[Path], segments: Segments) -> None:
    """``--verify`` on what ``_load_many`` read: an error about a row names
    the file it came from when there are several."""
    try:
        _verify(transcript.to_arrow(), inputs[0] if len(inputs) == 1 else Path(_label(inputs)))
    except cc.CompactionError as e:
        if len(inputs) > 1:
            _relocate_in(e, segments)
        raise


def _verify(table: pa.Table, path: Path, offset: int = 0) -> None:
    """``--verify``: every counted column of ``table`` matches its text, and
    every ``tool_target`` its tool and input (all rows, not a sample: one
    stale row gives wrong numbers). ``offset``: the table's first row in
    ``path``."""
    from ctxcompact.scans import verify_output_units
    from ctxcompact.transcript import counted_columns

    counted = counted_columns(table.schema)
    if not counted and TOOL_TARGET not in table.column_names:
        return
    if counted and "output" not in table.column_names:
        raise MissingColumnError(
            f"{path}: --verify needs the output text (no column 'output') to check "
            f"{', '.join(counted)}", column="output",
        )  # fmt: skip
    try:
        verify_output_units(table, sample=table.num_rows)
    except TranscriptError as e:
        if offset and e.row is not None:
            e.args = (re.sub(rf"\brow {e.row}\b", f"row {e.row + offset}", str(e), count=1),)
            e.row += offset
        raise


def _verify_parquet(source: list[Path], batch_rows: int) -> None:
    """``_verify`` over Parquet files a batch at a time (bounded memory)."""
    from ctxcompact.batch.parquet import parquet_files
    from ctxcompact.transcript import counted_columns

    for path in parquet_files(source):
        try:
            file = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError):
            return  # left to the reader, which names it
        counted = counted_columns(file.schema_arrow)
        targets = [TOOL_TARGET, "tool", "input"] if TOOL_TARGET in file.schema_arrow.names else []
        if not counted and not targets:
            continue
        names = [c for c in ("session_id", "message_id", "output", *counted, *targets)
                 if c in file.schema_arrow.names]  # fmt: skip
        offset = 0
        with _naming(path):
            for batch in file.iter_batches(batch_size=batch_rows, columns=names):
                table = pa.Table.from_batches([batch])
                _verify(table, path, offset)
                offset += table.num_rows


def _names(param: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command whose data errors name its input ``param`` (``_naming``)."""

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            with _naming(kwargs[param]):
                command(**kwargs)

        return run

    return wrap


@contextmanager
def _naming(inputs: Path | list[Path]) -> Iterator[None]:
    """A data error about a single input names it (a scan's error says the
    row and column, not the file), as batch's do."""
    paths = inputs if isinstance(inputs, list) else [inputs]
    try:
        yield
    except (SchemaError, TranscriptError, DatasetError) as e:
        text = str(e)
        if len(paths) == 1 and e.args and str(paths[0]) not in text:
            e.args = (f"{paths[0]}: {text}", *e.args[1:])
        raise


def _parquet_sources(
    inputs: list[Path], on_error: str = "raise"
) -> tuple[list[Path], str, list[FileReport], int]:
    """Parquet paths for ``inputs``: the Parquet ones as given, the session
    files and folders ingested into one temporary file, removed when the
    process exits (success or not); the formats read, the session files
    found, as ingest reports them (none for Parquet only), and the lines
    ``on_error="skip"`` left out (``ingest``'s ``--on-error``). A session in
    two of them is a ``DuplicateSessionError`` naming both (the session files
    by their own names, not the temporary file's)."""
    from ctxcompact.batch.parquet import parquet_files

    _check_sources(inputs)
    parquet = [p for p in inputs if _is_parquet(p)]
    sessions = [p for p in inputs if not _is_parquet(p)]
    found: list[FileReport] = []
    rejected = 0
    formats = ["parquet"] if parquet else []
    sources = list(parquet)
    if sessions:
        scratch = tempfile.mkdtemp(prefix="ctxcompact-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        out = Path(scratch) / "ingested.parquet"
        streamed = _ingest_to_parquet(sessions, None, out, "the temporary Parquet",
                                      on_error=on_error)  # fmt: skip
        found, rejected = streamed.last.files, streamed.rejected
        formats.append(streamed.last.format)
        sources.append(out)
    if len(inputs) > 1:
        try:
            _check_parquet_sessions(parquet_files(sources))
        except DuplicateSessionError as e:
            if sessions:
                e.args = (str(e).replace(str(out), f"the session files ({_label(sessions)})"),)
            raise
    return sources, ", ".join(f for f in formats if f), found, rejected


@app.command(short_help="Estimate the model-input tokens of every session.")
@_names("inputs")
def estimate(
    inputs: InputsArgument,
    fmt: FormatOption = None,
    on_error: OnErrorOption = "raise",
    config: ConfigOption = None,
    method: MethodOption = None,
    verify: VerifyOption = False,
    per_session: Annotated[
        bool,
        typer.Option(
            "--per-session",
            help="Also a row per session (with --json: a per_session list).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Estimate the model-input tokens of every session (placeholders applied)."""
    cfg = _config(config, **_overrides(method=method))
    # no session read is "nothing to estimate" (exit 1), an empty folder or an empty file alike
    _check_sources(inputs, "nothing to estimate")
    segments: Segments = []
    read_as: list[str] = []
    transcript = _load_all(inputs, fmt, on_error, as_json, segments, read_as)
    if not transcript.num_rows:
        if len(inputs) > 1:
            where = "these inputs"
        else:
            where = "this folder" if inputs[0].is_dir() else "this file"
        raise DatasetError(f"{_label(inputs)}: no sessions in {where}: nothing to estimate")
    if verify:
        _verify_read(transcript, inputs, segments)
    with _status(f"estimating {transcript.num_rows:,} rows", as_json):
        est = cc.estimate_messages(transcript, cfg)
        visible = cc.estimate_messages(cc.filter_pivot(transcript), cfg)
    totals: dict[str, Any] = {
        "sessions": len(transcript.session_ids()), "parts": transcript.num_rows,
        "messages": est.messages.num_rows, "tokens": est.total,
        "tokens_after_pivot": visible.total, "method": cfg.estimate_method,
        "format": ", ".join(read_as),
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
    console = Console()
    if not console.is_terminal:  # a pipe or a file: do not fold the session ids
        console = Console(width=200)
    console.print(table)


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


@app.command("prune", short_help="Select old tool outputs to prune (--output: mark them).")
@_names("inputs")
def prune_cmd(
    inputs: InputsArgument,
    output: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the marked rows (Parquet).")
    ] = None,
    fmt: FormatOption = None,
    on_error: OnErrorOption = "raise",
    config: ConfigOption = None,
    prune_protect: ProtectOption = None,
    prune_minimum: MinimumOption = None,
    prune_protected_tools: ToolsOption = None,
    policy: PolicyOption = None,
    method: MethodOption = None,
    verify: VerifyOption = False,
    as_json: JsonOption = False,
) -> None:
    """Select old tool outputs to prune; with --output, write them marked."""
    cfg = _config(config, **_overrides(prune_protect, prune_minimum, prune_protected_tools, policy,
                                       method))  # fmt: skip
    _check_output(output, "--output", inputs)
    _note_prune_off(cfg)
    segments: Segments = []
    transcript = _load_all(inputs, fmt, on_error, as_json, segments)
    if verify:
        _verify_read(transcript, inputs, segments)
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


@app.command("filter", short_help="Keep each session from its latest summary pivot on.")
@_names("inputs")
def filter_cmd(
    inputs: InputsArgument,
    output: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the visible rows (Parquet).")
    ] = None,
    fmt: FormatOption = None,
    on_error: OnErrorOption = "raise",
    as_json: JsonOption = False,
) -> None:
    """Keep each session from its latest completed compaction pivot on."""
    _check_output(output, "--output", inputs)
    transcript = _load_all(inputs, fmt, on_error, as_json, [])
    visible = cc.filter_pivot(transcript)
    if output is not None:
        _write_parquet(visible.to_arrow(), output, "--output")
    _show("pivot filter", {
        "sessions": len(transcript.session_ids()), "rows_before": transcript.num_rows,
        "rows_after": visible.num_rows, "written": str(output) if output else "-",
    }, as_json)  # fmt: skip


@app.command(short_help="Prune, mark and pivot-filter; report each session.")
@_names("inputs")
def compact(
    inputs: InputsArgument,
    output: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Compacted part rows (Parquet).")
    ] = None,
    report: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Per-session report (Parquet).")
    ] = None,
    context: ContextOption = None,
    output_limit: OutputLimitOption = None,
    fmt: FormatOption = None,
    on_error: OnErrorOption = "raise",
    config: ConfigOption = None,
    prune_protect: ProtectOption = None,
    prune_minimum: MinimumOption = None,
    prune_protected_tools: ToolsOption = None,
    policy: PolicyOption = None,
    method: MethodOption = None,
    verify: VerifyOption = False,
    as_json: JsonOption = False,
) -> None:
    """Prune, mark and pivot-filter every session; report what each one keeps."""
    cfg = _config(config, **_overrides(prune_protect, prune_minimum, prune_protected_tools, policy,
                                       method))  # fmt: skip
    limits, usable = _limits(context, output_limit, cfg)
    _check_outputs({"--output": output, "--report": report}, inputs)
    _note_prune_off(cfg)
    segments: Segments = []
    transcript = _load_all(inputs, fmt, on_error, as_json, segments)
    if verify:
        _verify_read(transcript, inputs, segments)
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


def _check_parquet_sessions(files: list[Path]) -> None:
    """A session in two Parquet files is a ``DuplicateSessionError`` naming both,
    unless its rows follow on (it ends one file and starts the next): the same
    runs in two files would otherwise be rows "not contiguous", naming no file;
    and so is a part repeated where one file ends and the next begins
    (``check_file_joins``). A file that cannot be read is left to the reader
    that reports it."""
    from ctxcompact.batch.parquet import check_file_joins

    seen: dict[Any, Path] = {}
    last: Any = None
    for path in files:
        try:
            ids = pq.read_table(path, columns=["session_id"]).column("session_id")
        except (pa.ArrowException, OSError, KeyError):
            return
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        if pa.types.is_dictionary(ids.type):
            ids = ids.cast(ids.type.value_type)
        if len(ids) == 0:
            continue
        changes = pyarrow.compute.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
        starts = [0, *(int(i) + 1 for i in pyarrow.compute.indices_nonzero(changes).to_pylist())]
        for sid in ids.take(pa.array(starts)).to_pylist():
            if sid != last and seen.setdefault(sid, path) != path:
                raise DuplicateSessionError(
                    f"session id {sid!r} is in {seen[sid]} and in {path}: the same runs "
                    "given twice? (a session may continue from one file into the next, "
                    "not come back in another): read each run once",
                    session_id=None if sid is None else str(sid),
                )
            last = sid
    check_file_joins(files)  # a part read twice where one file ends and the next begins


def _load_many(
    inputs: list[Path], fmt: str | None, on_error: str = "raise", segments: Segments | None = None,
    read_as: list[str] | None = None,
) -> cc.Transcript:  # fmt: skip
    """Parquet files/folders and session files/folders as one transcript
    (``segments``: where each file's rows are is added to it; ``read_as``:
    the formats read, "parquet" first)."""
    _check_sources(inputs)
    parquet = [p for p in inputs if _is_parquet(p)]
    sessions = [p for p in inputs if not _is_parquet(p)]
    if len(parquet) > 1:
        from ctxcompact.batch.parquet import parquet_files

        _check_parquet_sessions(parquet_files(parquet))  # a file given twice is named as such
    # each table's segments: where the rows of it come from
    where: list[Segments] = [[] for _ in parquet]
    tables = [_read(p, segments=w).to_arrow() for p, w in zip(parquet, where, strict=True)]
    if parquet and read_as is not None:
        read_as.append("parquet")
    if sessions:
        result = _ingest(sessions, fmt, on_error=on_error)
        ingested = result.table
        if read_as is not None and result.format:
            read_as.append(result.format)
        where.append([(sessions[0], ingested.num_rows, False)])
        # The same runs given as session files and as Parquet would surface as
        # non-contiguous rows (a session may span Parquet files, so those are
        # not compared with each other).
        read = set(pyarrow.compute.unique(ingested.column("session_id")).to_pylist())
        for table, path in zip(tables, parquet, strict=True):
            for sid in pyarrow.compute.unique(table.column("session_id")).to_pylist():
                if sid in read:
                    raise DuplicateSessionError(
                        f"session id {sid!r} is in {path} and in the session files "
                        f"({', '.join(map(str, sessions))}): read each run once",
                        session_id=sid,
                    )
        tables.append(ingested)
    if segments is not None:
        segments.extend(s for w in where for s in w)
    if len(tables) == 1:
        return cc.Transcript(tables[0])
    tables = _codes_as_names(tables, where)  # coded Parquet beside names: names
    try:
        # tool_target: one dictionary over the whole table, not one per input
        joined = pa.concat_tables(tables, promote_options="permissive")
        return cc.Transcript(targets_as_dictionary(joined))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise DatasetError(f"the inputs' columns do not agree ({_one_line(str(e))})") from None


def _to_sessions(transcript: cc.Transcript, segments: Segments) -> list[cc.Session]:
    """``transcript.to_sessions()``; an error about a row names the file it
    was read from (and, for Parquet, the row in that file)."""
    try:
        return transcript.to_sessions()
    except cc.CompactionError as e:
        _relocate_in(e, segments)
        raise


#: Per policy in ``replay --json`` and ``tune --json`` (and the table's columns).
POLICY_KEYS = ("name", "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
               "cached_tokens", "cost", "baseline_cost", "compactions", "over_window",
               "retention")  # fmt: skip


#: Per policy in ``replay``: the baseline's cache reads and writes, and the
#: usage the runs recorded beside it (null where they recorded none), with the gap.
RECORDED_KEYS = ("baseline_cached_tokens", "baseline_written_tokens", "recorded_sessions",
                 "recorded_prompt_tokens", "recorded_calls", "recorded_cached_tokens",
                 "recorded_written_tokens", "prompt_gap", "prompt_gap_ratio")  # fmt: skip


def _some(names: list[str], n: int = 4) -> str:
    """Up to ``n`` names, then how many more."""
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if key.endswith("_ratio"):
            return f"{v:+.1%}"
        return f"{v:.3f}" if key == "retention" else f"${v:,.4f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


#: Per policy: equal values mean the policies sent the same prompts.
_SAME_KEYS = ("sessions", "calls", "prompt_tokens", "cached_tokens", "compactions",
              "over_window", "retention")  # fmt: skip


class _Bigger(logging.Handler):
    """Collects the lifecycle's "compaction of session ... left it bigger"
    warnings during a replay, for one ``note:`` line instead of one stderr
    line per session."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[tuple[str, str, int, int]] = []
        self.label = ""

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if str(record.msg).startswith("compaction of session") and isinstance(args, tuple):
            sid, before, after = (*args, None, None, None)[:3]
            before = before if isinstance(before, int) else 0
            after = after if isinstance(after, int) else 0
            self.seen.append((self.label, str(sid), before, after))

    @contextmanager
    def collecting(self, label: str) -> Iterator[None]:
        self.label = label
        logger = logging.getLogger("ctxcompact")
        logger.addHandler(self)
        try:
            yield
        finally:
            logger.removeHandler(self)

    def note(self) -> None:
        if not self.seen:
            return
        _, sid, before, after = self.seen[0]
        by_label: dict[str, int] = {}
        for label, *_ in self.seen:
            by_label[label] = by_label.get(label, 0) + 1
        where = ", ".join(f"{label}: {n:,}" for label, n in by_label.items())
        sessions = len({s for _, s, _, _ in self.seen})
        typer.echo(f"note: {len(self.seen):,} compaction(s) in {sessions:,} session(s) left "
                   f"the session bigger than before ({where}): the summary, or what stays "
                   f"pinned, outweighed what it replaced (e.g. {sid}: {before:,} -> {after:,} "
                   "tokens)", err=True)  # fmt: skip


def _note_prune_off(cfg: CompactionConfig) -> None:
    """Say on stderr that nothing will be pruned when pruning is switched off
    (``prune = false``, ``CTXCOMPACT_DISABLE_PRUNE=1``): a run that prunes
    nothing looks like a broken one."""
    if not cfg.prune:
        typer.echo(f"note: pruning is switched off (prune = false, from {cfg.sources()['prune']}): "
                   "no tool output is pruned", err=True)  # fmt: skip


def _note_unchanged(rows: list[dict[str, Any]], cfg: CompactionConfig) -> bool:
    """When no policy changed a prompt, say why on stderr (equal columns look
    like a broken replay); whether it did."""
    if not rows or not all(not r.get("compactions") and r.get("prompt_tokens") == r.get(
        "baseline_prompt_tokens") for r in rows):  # fmt: skip
        return False
    masking = sum(bool(r.get("mask_first")) for r in rows)
    if not cfg.prune:
        typer.echo("note: no policy changed a prompt: pruning is disabled "
                   f"(prune = false, from {cfg.sources()['prune']}), so no policy masks, "
                   "with --mask-first (a grid's mask_first) or not; only a summary changes "
                   "a prompt, when a session overflows its context, and no session "
                   "did", err=True)  # fmt: skip
    elif not masking:
        typer.echo("note: no policy changed a prompt: policies act when a session "
                   "overflows its context, and no session did; --mask-first (a grid's "
                   "mask_first) masks at every step", err=True)  # fmt: skip
    else:
        which = "with mask_first no policy" if masking == len(rows) else (
            "no point with mask_first")  # fmt: skip
        typer.echo("note: no policy changed a prompt: policies summarize when a session "
                   f"overflows its context, and no session did; {which} found an output to "
                   "clear (every output is within what the policy protects: its protect, "
                   "keep_recent, minimum)", err=True)  # fmt: skip
    return True


def _calls_key(calls: pa.Table) -> bytes:
    """What each call of one policy sent, in a fixed order (by session and
    call): two policies with equal totals replay identically only if these
    are equal too."""
    ordered = calls.sort_by([("session_id", "ascending"), ("call", "ascending")])
    digest = hashlib.sha256()
    for name in ("session_id", "call", "prompt_tokens", "cached_tokens", "compacted",
                 "summary_input_tokens", "summary_output_tokens"):  # fmt: skip
        digest.update(json.dumps(ordered.column(name).to_pylist()).encode())
    return digest.digest()


def _note_equal(rows: list[dict[str, Any]], cfg: CompactionConfig,
                windows: list[Any] | None = None, shown: int = 3,
                calls: Callable[[int], pa.Table] | None = None) -> None:  # fmt: skip
    """Say on stderr which policies (of one window) replayed identically, and
    why. ``calls(i)``: row ``i``'s calls, asked for only where the totals are
    equal (without them, equal totals count as identical)."""
    totals: dict[tuple[Any, ...], list[int]] = {}
    for i, row in enumerate(rows):
        window = windows[i] if windows is not None else None
        totals.setdefault((window, *(row.get(k) for k in _SAME_KEYS)), []).append(i)
    same: list[list[dict[str, Any]]] = []
    for members in totals.values():
        if len(members) < 2:
            continue
        split: dict[bytes | None, list[dict[str, Any]]] = {}
        for i in members:
            split.setdefault(_calls_key(calls(i)) if calls else None, []).append(rows[i])
        same += [g for g in split.values() if len(g) > 1]
    for group in same[:shown]:
        first, why = group[0], []
        plain = any(not r.get("mask_first") for r in group)
        if not cfg.prune:
            typer.echo(f"note: {len(group)} policies replay identically "
                       f"({_some([str(r['name']) for r in group])}): pruning is disabled "
                       f"(prune = false, from {cfg.sources()['prune']}), so no policy prunes "
                       "or masks", err=True)  # fmt: skip
            continue
        if plain and first.get("compactions"):
            why.append("without mask_first a policy prunes only as a summary runs, and the "
                       "offline digest summary reads the task, requests, paths and errors, "
                       "not the tool outputs pruning cleared, so the policy leaves no trace "
                       "in what is sent")  # fmt: skip
        elif plain:
            why.append("no session overflowed this context, so without mask_first no policy "
                       "acted")  # fmt: skip
        if any(r.get("mask_first") for r in group):
            why.append("with mask_first they cleared the same outputs" if first.get(
                "prompt_tokens") != first.get("baseline_prompt_tokens") or first.get(
                "compactions") else "with mask_first no output was outside what the "
                "policy protects")  # fmt: skip
        hint = ("; to tell policies apart offline, use --mask-first (a grid's mask_first), "
                "or real summaries (in Python: tuning.replay(..., summarizer=Summarizer("
                "client, config)))") if plain else ""  # fmt: skip
        typer.echo(f"note: {len(group)} policies replay identically "
                   f"({_some([str(r['name']) for r in group])}): {'; '.join(why)}{hint}",
                   err=True)  # fmt: skip
    if len(same) > shown:
        typer.echo(f"note: {len(same) - shown} more group(s) of policies replay identically "
                   "(equal rows below)", err=True)  # fmt: skip


def _show_policies(title: str, rows: list[dict[str, Any]], extra: dict[str, Any],
                   as_json: bool, cfg: CompactionConfig,
                   windows: list[Any] | None = None,
                   calls: Callable[[int], pa.Table] | None = None) -> None:  # fmt: skip
    """A column per policy (a few) or a row per policy (a grid), then ``extra``.
    ``windows``: each row's window (policies are compared within one);
    ``calls(i)``: row ``i``'s calls (policies are identical only if these are)."""
    if not _note_unchanged(rows, cfg):
        _note_equal(rows, cfg, windows, calls=calls)
    for row in rows:
        if row.get("over_window"):
            typer.echo(f"warning: {row['name']}: {row['over_window']:,} call(s) sent a prompt "
                       "over the input window (context less the answer's reserve), which the "
                       "model would refuse: compaction did not keep those sessions under it "
                       "(over_window per call in --out)", err=True)  # fmt: skip
    if as_json:
        typer.echo(json.dumps({**extra, "policies": rows}, default=str))
        return
    table = Table(title=title)
    sheets = [k for k in rows[0] if k.startswith(("cost ", "baseline cost "))]
    recorded = [k for k in RECORDED_KEYS if k in rows[0]]
    keys = [k for k in POLICY_KEYS if k != "name"] + sheets + recorded + (
        ["front"] if "front" in rows[0] else [])  # fmt: skip

    def cell(key: str, row: dict[str, Any]) -> str:
        if key == "front" and row.get("feasible") is False:
            return "no: over window"
        return _cell(key, row.get(key))

    def label(row: dict[str, Any]) -> str:
        return str(row.get("label", row["name"]))

    if len(rows) <= 4:
        table.add_column("measure")
        for row in rows:
            table.add_column(label(row), justify="right")
        for key in keys:
            table.add_row(key.replace("_", " "), *(cell(key, r) for r in rows))
    else:
        table.add_column("policy")
        for key in keys:
            table.add_column(key.replace("_", " "), justify="right")
        for row in rows:
            table.add_row(label(row), *(cell(key, row) for key in keys))
    console = Console()
    if not console.is_terminal:  # a pipe or a file: do not squeeze the columns to 80
        console = Console(width=200)
    console.print(table)
    if any("label" in row for row in rows):  # what each short label stands for
        typer.echo("legend:")
        for row in rows:
            typer.echo(f"  {label(row)}: {row['name']}")
    for key, value in extra.items():
        if key == "price_row":
            from ctxcompact.tuning.prices import describe_row

            key = "priced by"
            value = describe_row(value) if value else "- (no --model: not priced)"
        elif key == "price_rows":  # the sheets after the first (the first is price_row's)
            from ctxcompact.tuning.prices import describe_row

            for model, row in list(value.items())[1:]:
                typer.echo(f"{model} priced by: {describe_row(row)}")
            continue
        elif key == "models":
            continue
        elif key == "front" and isinstance(value, list):
            value = ", ".join(_labels(rows).get(str(v), str(v)) for v in value) or "-"
        typer.echo(f"{key.replace('_', ' ')}: {value}")


def _labels(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each row's name -> its short label (a grid's ``p1``, ``p2``...)."""
    return {str(r["name"]): str(r.get("label", r["name"])) for r in rows}


def _note_prune_fields(cfg: CompactionConfig, what: str) -> None:
    """Say on stderr that the prune_* fields set in the configuration are not
    applied to a policy given on its own (they adjust the config's policy)."""
    sources = cfg.sources()
    set_here = [f"{name} ({sources[name]})" for name in config_module.PRUNE_FIELDS
                if name != "prune" and sources.get(name, "default") != "default"]  # fmt: skip
    if set_here:
        typer.echo(f"note: {what}: {', '.join(set_here)} adjust only the configuration's "
                   "own policy, not applied here", err=True)  # fmt: skip


def _check_sheets(models: list[str] | None, cfg: CompactionConfig, cache: str) -> None:
    """Each --model/--price has a price row (and a 1-hour cache with --cache
    1h), checked before any input is read: a ConfigError naming the option."""
    from ctxcompact.tuning.replay import sheets_for

    for name in models or []:
        try:
            sheets_for(name, cfg, None, cache)
        except ConfigError as e:
            raise ConfigError(f"--price/--model {name}: {e}", column=e.column) from None
    if models and len(set(models)) < len(models):
        twice = next(m for i, m in enumerate(models) if m in models[:i])
        raise typer.BadParameter(f"{twice!r} is given twice: give each model once",
                                 param_hint="--price/--model")  # fmt: skip


def _sheet_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """Per price sheet after the first, its cost and baseline cost (a column
    each in the table), and every sheet's costs and billed tokens (``costs``
    in --json)."""
    costs = summary.get("costs") or {}
    out: dict[str, Any] = {}
    for model, sheet in list(costs.items())[1:]:
        out[f"cost {model}"] = sheet["cost"]
        out[f"baseline cost {model}"] = sheet["baseline_cost"]
    if costs:
        out["costs"] = {m: {k: v for k, v in c.items() if k != "price_row"}
                        for m, c in costs.items()}  # fmt: skip
    return out


def _price_rows(summary: dict[str, Any]) -> dict[str, Any]:
    """Each price sheet's row (name, prices, source, cache rule), by model."""
    return {m: c["price_row"] for m, c in (summary.get("costs") or {}).items()}


@app.command(short_help="Replay runs call by call: tokens, cache, cost, retention.")
@_names("inputs")
def replay(
    inputs: InputsArgument,
    context: Annotated[
        int, typer.Option(min=1, metavar="TOKENS", help="The model's context window.")
    ],
    output_limit: OutputLimitOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "--calls", metavar="FILE", help="One row per model call and policy (Parquet)."
        ),
    ] = None,
    models: ModelsOption = None,
    cache: CacheOption = "5m",
    mask_first: Annotated[
        bool, typer.Option("--mask-first", help="Mask every step, summarize only when needed.")
    ] = False,
    fmt: FormatOption = None,
    config: ConfigOption = None,
    policies: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            metavar="NAME|FILE",
            help="A policy to replay under (repeat for several): a preset or a "
            "TOML/JSON policy file. Default: the config's. It prunes when a compaction "
            "runs, and at every step with --mask-first.",
        ),
    ] = None,
    method: MethodOption = None,
    on_error: OnErrorOption = "raise",
    as_json: JsonOption = False,
) -> None:
    """Replay every run call by call under each policy (offline digest summaries):
    prompt tokens, cache reads and writes, compactions, retention, and the cost
    against the run without compaction."""
    from ctxcompact.tuning import replay as run_replay
    from ctxcompact.tuning.grid import GRID_CALL_SCHEMA

    for i, name in enumerate(policies or []):
        if name in (policies or [])[:i]:  # its rows would be counted twice under one label
            raise typer.BadParameter(f"{name!r} is given twice: give each policy once",
                                     param_hint="--policy")  # fmt: skip
    overrides = _overrides(method=method)
    if mask_first:
        overrides["mask_first"] = True
    cfg = _config(config, **overrides)
    _check_sheets(models, cfg, cache)
    # Each --policy is replayed as given; without one, the config's policy with
    # its prune_* fields applied (what prune runs), labelled by what it is.
    # A run that masks at every step says so in its label (and in --out's rows).
    masked = " + mask_first" if cfg.mask_first else ""
    runs: list[tuple[str, Policy | None]] = [
        (name + masked, Policy.load(_overrides(policy=name)["policy"])) for name in policies or []
    ] or [(cfg.prune_policy().describe() + masked, None)]
    if policies:
        _note_prune_fields(cfg, "each --policy is replayed as given")
    limits, usable = _limits(context, output_limit, cfg)
    _parquet_name(out, "--out")
    _check_output(out, "--out", inputs)
    segments: Segments = []
    with _status(f"reading {len(inputs)} input(s)", as_json):
        # turned into sessions once, for every policy; a bad value fails here
        sessions = _to_sessions(_load_many(inputs, fmt, on_error, segments), segments)
    rows: list[dict[str, Any]] = []
    tables: list[pa.Table] = []
    bigger = _Bigger()
    priced_by: dict[str, Any] | None = None  # the price table's row (name, source, date)
    price_rows: dict[str, Any] = {}  # every sheet's row, by model
    for label, policy in runs:
        with _status(f"replaying under {label}", as_json), bigger.collecting(label):
            result = run_replay(sessions, policy, limits=limits or {"context": 0}, config=cfg,
                                model=models, cache=cache)  # fmt: skip
        s = result.summary
        priced_by, price_rows = s.get("price_row"), _price_rows(s)
        rows.append({"name": label, **{k: s.get(k) for k in POLICY_KEYS[1:]},
                     "mask_first": cfg.mask_first, "removed_facts": s["removed_facts"],
                     "kept_facts": s["kept_facts"], "most_lost": s["most_lost"][:5],
                     **{k: s.get(k) for k in RECORDED_KEYS}, **_sheet_columns(s)})  # fmt: skip
        calls = result.calls
        tables.append(calls.add_column(0, "policy", pa.array([label] * calls.num_rows,
                                                              pa.string())))  # fmt: skip
    if out is not None:
        _write_parquet(pa.concat_tables(tables).cast(GRID_CALL_SCHEMA), out, "--out")
    # What the numbers depend on, so two results can be told apart.
    extra = {"model": models[0] if models else None, "models": models or [],
             "price_row": priced_by, "price_rows": price_rows, "cache": cache if models else None,
             "context": context, "output_limit": output_limit,
             "output_reserved": context - (usable or 0),
             "method": cfg.estimate_method, "mask_first": cfg.mask_first}  # fmt: skip
    _show_policies("replay", rows, extra, as_json, cfg, calls=tables.__getitem__)
    bigger.note()


# --- tune --search: the search path of `tune` (tuning/search.py) ------------------------

SearchOption = Annotated[
    bool,
    typer.Option("--search", help="Search the policy space on a training split of the runs "
                 "(not a grid); report the chosen policy and every preset on the held-out "
                 "split, and write the policy with --out FILE.toml."),
]  # fmt: skip
SpaceOption = Annotated[
    Path | None,
    typer.Option("--space", metavar="FILE", help="With --search: a TOML search space "
                 "(policy options with their values or {low, high} ranges; default: "
                 "docs/tuning.md, A tuner that searches)."),
]  # fmt: skip
ObjectiveOption = Annotated[
    str | None,
    typer.Option("--objective", metavar="cost|tokens", callback=_choice(("cost", "tokens")),
                 help="With --search: what to minimize (default: cost with --model, else "
                 "tokens)."),
]  # fmt: skip
MinRetentionOption = Annotated[
    float,
    typer.Option("--min-retention", min=0.0, max=1.0, metavar="R",
                 help="With --search: a policy of lower retention is infeasible."),
]  # fmt: skip
BudgetOption = Annotated[
    int, typer.Option("--budget", min=1, metavar="K", help="With --search: replays to spend.")
]
MethodSearchOption = Annotated[
    str,
    typer.Option("--search-method", metavar="random|halving|tpe",
                 callback=_choice(("random", "halving", "tpe")),
                 help="With --search: random candidates (default), successive halving (less "
                 "work, worse choices), or Optuna's TPE (pip install 'ctxcompact[search]')."),
]  # fmt: skip
SeedOption = Annotated[
    int, typer.Option("--seed", min=0, metavar="N", help="With --search: the split's and "
                      "the sampling's seed.")
]  # fmt: skip
MaskFirstSearchOption = Annotated[
    bool,
    typer.Option("--mask-first", help="With --search: replay with mask_first (prune at every "
                 "step); without it, policies differ only when a summary runs."),
]  # fmt: skip


def _search_verdict(result: Any) -> str:
    """Whether the goal holds, said plainly: no preset cheaper on the held-out
    split at retention >= R, else which are (or why the policy is out)."""
    floor = f"retention >= {result.min_retention:g}"
    if result.goal_met:
        return f"met: no preset is cheaper on the held-out split at {floor}"
    if not result.feasible(result.held_out):
        return (
            f"NOT met: on the held-out split the chosen policy is under {floor} or sent "
            "prompts over the window"
        )
    return f"NOT met: cheaper on the held-out split at {floor}: " + ", ".join(
        result.cheaper_presets()
    )


def _tune_search(inputs: list[Path], *, space: Path | None, objective: str | None,
                 min_retention: float, budget: int, method: str, seed: int, mask_first: bool,
                 context: int | None, output_limit: int | None, out: Path | None,
                 models: list[str] | None, cache: str, fmt: str | None, config: Path | None,
                 method_estimate: str | None, on_error: str, as_json: bool) -> None:  # fmt: skip
    """`tune --search`: every option checked, then --out, before any replay."""
    from ctxcompact.tuning.search import check_search_options, load_space
    from ctxcompact.tuning.search import search as run_search

    overrides = _overrides(method=method_estimate)
    if mask_first:
        overrides["mask_first"] = True
    cfg = _config(config, **overrides)
    _check_sheets(models, cfg, cache)
    if models and len(models) > 1:
        raise typer.BadParameter("--search weighs one price sheet: give one --model",
                                 param_hint="--price/--model")  # fmt: skip
    try:
        objective = check_search_options(objective, min_retention, budget, method, models or [])
    except ConfigError as e:
        raise ConfigError(f"--{(e.column or 'objective').replace('_', '-')}: {e}",
                          column=e.column) from None  # fmt: skip
    if space is not None:
        if not space.exists():
            raise InputNotFound(f"{space}: no such search space file (--space)")
        if not space.is_file() or not os.access(space, os.R_OK):
            raise InputNotFound(f"{space}: cannot read the search space file (--space)")
    load_space(space, cfg.policy)  # a bad space fails before any input is read
    if context is None:
        raise typer.BadParameter("--search needs the context window", param_hint="--context")
    limits, _ = _limits(context, output_limit, cfg)
    if out is not None and out.suffix.lower() != ".toml":
        raise typer.BadParameter(f"{out}: with --search, --out writes the policy as TOML; "
                                 f"name it {out.with_suffix('.toml').name}",
                                 param_hint="--out")  # fmt: skip
    _check_output(out, "--out", inputs)
    segments: Segments = []
    sessions = _to_sessions(_load_many(inputs, fmt, on_error, segments), segments)
    console = _stderr()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console,
                  disable=as_json or not console.is_terminal) as bar:  # fmt: skip
        task = bar.add_task("searching", total=budget)

        def tick(done: int, _total: int) -> None:
            bar.update(task, completed=min(done, budget))

        result = run_search(sessions, limits=limits or {"context": context}, space=space,
                            objective=objective, min_retention=min_retention, budget=budget,
                            model=models[0] if models else None, config=cfg, cache=cache,
                            method=method, seed=seed, progress=tick)  # fmt: skip
    if out is not None:
        with _output_errors(out, "--out"):
            result.write(out)
    key = result.key()
    verdict = _search_verdict(result)
    info = {"policy": result.policy.describe(), "options": result.policy.model_dump(),
            "objective": objective, "min_retention": min_retention, "method": method,
            "budget": budget, "replays": len(result.trials), "seed": seed,
            "train_sessions": len(result.train_ids),
            "held_out_sessions": len(result.held_out_ids), "train": result.train,
            "held_out": result.held_out, "presets": result.presets, "goal_met": result.goal_met,
            "goal": verdict, "model": models[0] if models else None,
            "cache": cache if models else None, "context": context,
            "output_limit": output_limit, "method_estimate": cfg.estimate_method,
            "mask_first": cfg.mask_first, "out": str(out) if out else None}  # fmt: skip
    if as_json:
        typer.echo(json.dumps(info, default=str))
        return
    typer.echo(f"chosen policy: {info['policy']}")
    typer.echo(f"searched: {method}, {len(result.trials)} replays on {len(result.train_ids)} "
               f"training sessions; held out: {len(result.held_out_ids)} sessions")  # fmt: skip
    table = Table(title=f"held-out split: {key} at retention >= {min_retention:g}")
    for col in ("policy", key, "retention", "over window", "feasible"):
        table.add_column(col, justify="left" if col == "policy" else "right")

    def add(name: str, f: dict[str, Any]) -> None:
        value = f"${f[key]:,.4f}" if key == "cost" else f"{f[key]:,}"
        table.add_row(name, value, f"{f['retention']:.3f}", str(f["over_window"]),
                      "yes" if result.feasible(f) else "no")  # fmt: skip

    add("chosen (train)", result.train)
    add("chosen", result.held_out)
    for name, f in result.presets.items():
        add(name, f)
    Console().print(table)
    typer.echo(f"goal {verdict}")
    if out is not None:
        typer.echo(f"wrote {out} (use it with --policy {out})")


# --- end of tune --search -------------------------------------------------------------


@app.command(short_help="Replay a policy grid: cost vs retention, HTML report.")
@_names("inputs")
def tune(
    inputs: InputsArgument,
    grid: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="TOML grid: lists of option values (or --search)."),
    ] = None,
    context: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="TOKENS", help="The context window, unless the grid lists 'context'."
        ),
    ] = None,
    output_limit: OutputLimitOption = None,
    report: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the HTML report here.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(metavar="FILE", help="One row per call and point (Parquet).")
    ] = None,
    models: ModelsOption = None,
    cache: CacheOption = "5m",
    workers: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Worker processes (default: CPUs).")
    ] = None,
    fmt: FormatOption = None,
    config: ConfigOption = None,
    method: MethodOption = None,
    on_error: OnErrorOption = "raise",
    as_json: JsonOption = False,
    search: SearchOption = False,
    space: SpaceOption = None,
    objective: ObjectiveOption = None,
    min_retention: MinRetentionOption = 0.0,
    budget: BudgetOption = 64,
    search_method: MethodSearchOption = "random",
    seed: SeedOption = 0,
    mask_first: MaskFirstSearchOption = False,
) -> None:
    """Replay every run under every point of a grid of policies (in parallel;
    Parquet is streamed in bounded memory) and show the points, the front of
    cost against retention, and optionally the HTML report. With --search:
    search the policy space instead (docs/tuning.md)."""
    from ctxcompact.tuning import tune as run_tune
    from ctxcompact.tuning.grid import CONFIG_KEYS, WINDOW_KEYS, load_grid

    if search:
        if grid is not None or report is not None or workers is not None:
            bad = "--grid" if grid is not None else "--report" if report else "--workers"
            raise typer.BadParameter("not with --search", param_hint=bad)
        _tune_search(inputs, space=space, objective=objective, min_retention=min_retention,
                     budget=budget, method=search_method, seed=seed, mask_first=mask_first,
                     context=context, output_limit=output_limit, out=out, models=models,
                     cache=cache, fmt=fmt, config=config, method_estimate=method,
                     on_error=on_error, as_json=as_json)  # fmt: skip
        return
    search_only = {"--space": space is not None, "--objective": objective is not None,
                   "--min-retention": min_retention != 0.0, "--budget": budget != 64,
                   "--search-method": search_method != "random", "--seed": seed != 0,
                   "--mask-first": mask_first}  # fmt: skip
    if given := next((o for o, on in search_only.items() if on), None):
        raise typer.BadParameter("takes --search", param_hint=given)
    if grid is None:
        raise typer.BadParameter("give a --grid FILE, or --search", param_hint="--grid")
    cfg = _config(config, **_overrides(method=method))
    _check_sheets(models, cfg, cache)
    if not grid.exists():
        raise InputNotFound(f"{grid}: no such grid file (--grid)")
    if not grid.is_file() or not os.access(grid, os.R_OK):  # an unreadable input: exit 3
        raise InputNotFound(f"{grid}: cannot read the grid file (--grid)")
    points = load_grid(grid)  # a bad grid fails before any input is read
    if set(points) - {*WINDOW_KEYS, *CONFIG_KEYS}:
        _note_prune_fields(cfg, "a grid point's policy options are replayed as given")
    if context is None and "context" not in points:
        # Without one the runs would replay in an unlimited window: nothing to tune.
        raise typer.BadParameter("give the context window, or list 'context' in the grid",
                                 param_hint="--context")  # fmt: skip
    window = {"context": context or 0, "output": output_limit or 0}
    _parquet_name(out, "--out")
    _check_outputs({"--out": out, "--report": report}, inputs)
    if report is not None:
        from ctxcompact.tuning.report import pyplot

        pyplot()  # the report's dependency, checked before the work
    _check_sources(inputs)
    parquet = all(_is_parquet(p) for p in inputs)
    if parquet:
        from ctxcompact.batch.parquet import parquet_dataset

        found = parquet_dataset(inputs)
        _report_files(found.skipped)
        _check_parquet_sessions(found.files)
    corpus: Any = inputs if parquet else _load_many(inputs, fmt, on_error)
    total = None if parquet else len(corpus.session_ids())
    console = _stderr()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console,
                  disable=as_json or not console.is_terminal) as bar:  # fmt: skip
        task = bar.add_task("replaying sessions", total=total)

        def tick(done: int, _total: int | None) -> None:
            bar.update(task, completed=done)

        result = run_tune(corpus, grid, limits=window, config=cfg, model=models, cache=cache,
                          workers=workers, progress=tick)  # fmt: skip
    page = None
    if report is not None:
        from ctxcompact.tuning.report import render_report

        page = render_report(result)
    # both files or neither (a failed second rename puts the first one back)
    _write_together([(functools.partial(_parquet_to, result.calls), out, "--out"),
                     (functools.partial(_text_to, page or ""), report, "--report")])  # fmt: skip
    options = result.summaries
    # A point's name lists its options (preset=...,context=32000): the table
    # shows a short label per point, and a legend under it.
    rows = [{"name": r["policy"], "label": f"p{i}", **{k: r[k] for k in POLICY_KEYS[1:]},
             "mask_first": options[r["policy"]].get("mask_first", cfg.mask_first),
             "feasible": r["feasible"], "front": r["pareto"],
             **_sheet_columns(options[r["policy"]])}
            for i, r in enumerate(result.points.to_pylist(), 1)]  # fmt: skip
    windows = [(options[r["name"]].get("context", context),
                options[r["name"]].get("output", output_limit)) for r in rows]  # fmt: skip
    # What the grid does not vary, so two results can be told apart.
    extra: dict[str, Any] = {"model": models[0] if models else None, "models": models or [],
                             "price_row": result.price_row and result.price_row.as_dict(),
                             "price_rows": _price_rows(next(iter(options.values()))),
                             "cache": cache if models else None, "points": len(rows),
                             "front": [r["name"] for r in rows if r["front"]],
                             "front_axis": result.axis, "method": cfg.estimate_method,
                             "context": points.get("context", context),
                             "output_limit": points.get("output", output_limit),
                             "mask_first": points.get("mask_first", cfg.mask_first)}  # fmt: skip
    if over := [r["name"] for r in rows if not r["feasible"]]:
        typer.echo(f"note: {len(over)} point(s) sent prompts over the input window and are "
                   "left off the front (the model would refuse those prompts): "
                   f"{_some(over)}", err=True)  # fmt: skip
    if not extra["front"]:
        typer.echo("note: the front is empty: every point sent prompts over the input window; "
                   "give a larger context or a smaller output limit", err=True)  # fmt: skip
    if result.axis != "cost":  # the front weighs the cost only when the calls are priced
        typer.echo("note: no --model, so the calls are not priced: the front is prompt "
                   "tokens against retention, not cost", err=True)  # fmt: skip
    if report is not None:
        extra["report"] = str(report)

    def point_calls(i: int) -> pa.Table:
        return result.calls.filter(pyarrow.compute.equal(result.calls["policy"], rows[i]["name"]))

    _show_policies("tune", rows, extra, as_json, cfg, windows, point_calls)


@app.command(short_help="Stream-compact a Parquet dataset in bounded memory.")
def batch(
    inputs: InputsArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Compacted part rows (Parquet); omit it for a report-only run (--report).",
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Per-session report (Parquet).")
    ] = None,
    batch_rows: Annotated[
        int, typer.Option(min=1, metavar="N", help="Rows per record batch.")
    ] = 65_536,
    context: ContextOption = None,
    output_limit: OutputLimitOption = None,
    config: ConfigOption = None,
    prune_protect: ProtectOption = None,
    prune_minimum: MinimumOption = None,
    prune_protected_tools: ToolsOption = None,
    policy: PolicyOption = None,
    method: MethodOption = None,
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
    cfg = _config(config, **_overrides(prune_protect, prune_minimum, prune_protected_tools, policy,
                                       method))  # fmt: skip
    limits, usable = _limits(context, output_limit, cfg)
    _check_outputs({"--output": output, "--report": report}, inputs)
    _note_prune_off(cfg)
    console = _stderr()
    # session files: a Parquet first
    sources, read_as, found, rejected = _parquet_sources(inputs, on_error)
    ingested = [f for f in found if f.status == "read"]
    # what ingest has just read it counted itself: the Parquet inputs are checked
    if verify and (given := [p for p in inputs if _is_parquet(p)]):
        _verify_parquet(given, batch_rows)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console,
                  disable=as_json or not console.is_terminal) as bar:  # fmt: skip
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


@app.command(short_help="Convert sessions between formats.")
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
                      "written": str(output)}, as_json)  # fmt: skip


@app.command(short_help="Read JSONL session files into Parquet part rows.")
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
    threads: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Threads (default: all cores).")
    ] = None,
    count_units: Annotated[
        bool,
        typer.Option(
            "--count-units/--no-count-units",
            help="Keep output_utf16 and tool_target: each output's length and each tool "
            "call's supersession target, worked out once at ingest so later scans (prune, "
            "report-only runs) need not read the text or parse the inputs.",
        ),
    ] = True,
    count_methods: Annotated[
        list[str] | None,
        typer.Option(
            "--count-method",
            metavar="FAMILY",
            callback=_count_methods,
            help=f"Also count each output under a tokenizer family's estimate "
            f"(output_units_<family>), for prune with that --method (or "
            f"<family>-conservative); repeatable. One of: {', '.join(FAMILIES)}.",
        ),
    ] = None,
    window_mb: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="MB",
            help="JSONL read this many MB of lines at a time: memory is bounded by it.",
        ),
    ] = 64,
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
    start = time.perf_counter()
    with _status("reading session files", as_json):
        streamed = _ingest_to_parquet(inputs, source_format, output, on_error=on_error,
                                      threads=threads, count_units=count_units,
                                      count_methods=families, rejects=rejects,
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
        "rejected": streamed.rejected, "seconds": round(seconds, 3),
        "mb_per_second": round(size / 1e6 / seconds, 1) if seconds else 0,
        "written": str(output),
    }  # fmt: skip
    if as_json:
        summary["per_file"] = [{"path": f.path, "status": f.status, "format": f.format,
                                "reason": _cli_wording(f.reason) if f.reason else f.reason}
                               for f in result.files]  # fmt: skip
    _show("ingest", summary, as_json)


@app.command(short_help="Quick speed check: Rust against the Python reference.")
def bench(
    sessions: Annotated[int, typer.Option(min=1, metavar="N", help="Sessions to generate.")] = 200,
    parts: Annotated[int, typer.Option(min=10, metavar="N", help="Parts per session.")] = 500,
    as_json: JsonOption = False,
) -> None:
    """Quick self-check of speed: Rust scans against the pure-Python reference."""
    from ctxcompact.scans import reference as ref

    console = _stderr()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  disable=as_json or not console.is_terminal,
                  transient=True) as bar:  # fmt: skip
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


def _plain(value: Any) -> Any:
    """A config value as JSON data (a policy: its preset name, else its options)."""
    if isinstance(value, Policy):
        return value.name() or value.model_dump()
    return value


def _effective(cfg: CompactionConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """Each field's value as a run uses it, and its source. OpenCode's prune
    fields (``prune_protect``...) not set anywhere take the policy's values
    (``prune_policy()``): with a policy given, those are the policy's, shown
    with the source ``policy (<where the policy came from>)``."""
    from ctxcompact.config import DEFAULT, PRUNE_FIELDS

    values = {name: getattr(cfg, name) for name in type(cfg).model_fields}
    sources = cfg.sources()
    runs = cfg.prune_policy()
    for name, option in PRUNE_FIELDS.items():
        if sources[name] == DEFAULT and sources["policy"] != DEFAULT:
            values[name] = getattr(runs, option)
            sources[name] = f"policy ({sources['policy']})"
    return values, sources


@app.command("config", short_help="Show the effective configuration and its sources.")
def config_cmd(
    show: Annotated[
        bool, typer.Option("--show", help="Print every field's value and source (the default).")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the reference table of docs/config.md.")
    ] = False,
    config: ConfigOption = None,
    prune_protect: ProtectOption = None,
    prune_minimum: MinimumOption = None,
    prune_protected_tools: ToolsOption = None,
    policy: PolicyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the effective configuration: each field, its value and where it came from."""
    if markdown and show:
        raise typer.BadParameter("cannot be combined with --show", param_hint="--markdown")
    if markdown:
        typer.echo(config_module.reference_markdown(), nl=False)
        return
    cfg = _config(config, **_overrides(prune_protect, prune_minimum, prune_protected_tools, policy))
    values, sources = _effective(cfg)
    rows = [
        {"field": f["field"], "value": _plain(values[f["field"]]),
         "source": sources[f["field"]], "environment": f["environment"],
         "type": f["type"], "meaning": f["meaning"]}
        for f in config_module.fields()
    ]  # fmt: skip
    if as_json:
        typer.echo(json.dumps({r["field"]: {k: v for k, v in r.items() if k != "field"}
                               for r in rows}))  # fmt: skip
        return
    table = Table(title="ctxcompact configuration")
    for col in ("field", "value", "source"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["field"], config_module.format_value(row["value"]), row["source"])
    Console().print(table)
    typer.echo("Reference (types, environment variables, meaning): docs/config.md "
               "or `ctxcompact config --markdown`.")  # fmt: skip


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(cc.__version__)


def _cli_wording(message: str) -> str:
    # Library messages name keyword arguments; on the command line it is --format.
    from ctxcompact.tuning.prices import UNKNOWN_HINT

    message = message.replace(
        UNKNOWN_HINT,
        'give its price in a --config file ([compaction.prices."<model>"] with input and '
        "output, USD per million tokens) or in CTXCOMPACT_PRICES (JSON)",
    )
    return re.sub(r"\bpass format=", f"pass --format (one of: {', '.join(READ_FORMATS)})", message)


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}

#: The OSError of a Claude Code file's first pass whose temporary folder
#: (missing, full, not writable) cannot be written: named by the folder, its
#: message naming the input, the folder again and the cause (the core's words).
_TEMPORARY = re.compile(
    r"(?P<input>.+): the first pass cannot use its temporary files in (?P<folder>.+?): "
    r"(?P<why>.+?)(?: \(os error \d+\))?",
    re.DOTALL,
)


def _where(error: cc.CompactionError) -> str:
    """Where the error is (session, message, row, column), as far as its
    message does not already say it."""
    text = str(error)
    found = [
        f"{label} {value!r}" if isinstance(value, str) else f"{label} {value}"
        for label, value in (("session", error.session_id), ("message", error.message_id),
                             ("row", error.row), ("column", error.column))
        if value is not None and str(value) not in text
    ]  # fmt: skip
    return f" ({', '.join(found)})" if found else ""


def _fail(code: int, message: str) -> None:
    typer.secho("error: ", fg="red", err=True, nl=False)
    typer.echo(_one_line(message), err=True)
    raise SystemExit(code)


def main() -> None:
    try:
        app()
    except InputNotFound as e:
        _fail(EXIT_INPUT, str(e))
    except OutputNotWritable as e:
        _fail(EXIT_OUTPUT, str(e))
    except ConfigError as e:
        _fail(EXIT_CONFIG, f"ConfigError: {_cli_wording(str(e))}")
    except cc.CompactionError as e:
        _fail(EXIT_DATA, f"{type(e).__name__}: {_cli_wording(str(e))}{_where(e)}")
    except OSError as e:  # outputs are checked up front; what is left is mostly reading
        where = f"{e.filename}: " if e.filename else ""
        spill = _TEMPORARY.fullmatch(e.strerror or "")
        if spill and e.filename == spill["folder"]:  # the folder is named once, with its cause
            _fail(EXIT_OUTPUT, f"{where}cannot write the temporary files of the first pass over "
                               f"{spill['input']}: {spill['why']}")  # fmt: skip
        if e.errno in _FULL:
            _fail(EXIT_OUTPUT, f"{where}cannot write: {e.strerror}")
        _fail(EXIT_INPUT, f"{where}cannot read: {e.strerror or _one_line(str(e))}")


if __name__ == "__main__":
    main()
