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

import errno
import re
from typing import Annotated

import typer

import ctxcompact as cc
from ctxcompact._outputs import _one_line
from ctxcompact.cli import compaction, demo, reading, settings, tuning
from ctxcompact.cli.failures import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_DATA,
    EXIT_INPUT,
    EXIT_OUTPUT,
    InputNotFound,
    OutputNotWritable,
)
from ctxcompact.cli.inputs import _cli_wording
from ctxcompact.errors import ConfigError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # Plain help: no RST/markdown markup and no "<bool>" after flags.
    rich_markup_mode=None,
    help="ctxcompact: compaction of stored agent transcripts "
    "(estimate, prune, pivot-filter, convert, ingest).",
    epilog=EXIT_CODES,
)
#: Every command, in the order ``ctxcompact --help`` lists them (each group
#: module declares its own on a ``commands`` Typer).
COMMANDS = (demo.demo, reading.estimate, compaction.prune_cmd, compaction.filter_cmd,
            compaction.compact, tuning.replay, tuning.tune, compaction.batch, reading.convert,
            reading.ingest, demo.bench, settings.config_cmd, settings.version)  # fmt: skip
_declared = {info.callback: info for group in (demo, reading, compaction, tuning, settings)
             for info in group.commands.registered_commands}  # fmt: skip
assert set(_declared) == set(COMMANDS), "a command is declared but not listed, or listed twice"
app.registered_commands += [_declared[command] for command in COMMANDS]


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
