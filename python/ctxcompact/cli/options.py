"""Every option and argument several commands take, written once (an
``Annotated`` alias each), and the configuration they make."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxcompact.cli.failures import InputNotFound
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    ConfigError,
)
from ctxcompact.estimators import FAMILIES, METHODS
from ctxcompact.formats import FORMATS
from ctxcompact.scans import Limits

#: The values of --format (read) and --to (write): one place for each.
READ_FORMATS: tuple[str, ...] = tuple(FORMATS)


WRITE_FORMATS: tuple[str, ...] = (*FORMATS, "parquet")


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
