"""Every option and argument several commands take, written once (an
``Annotated`` alias each), and the configuration they make."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxcompact.cli.failures import InputNotFound
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError
from ctxcompact.estimators import EXACT_METHODS, FAMILIES, METHODS
from ctxcompact.formats import FORMATS
from ctxcompact.scans import Limits

T = typing.TypeVar("T")

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


def value_option(name: str, metavar: str, help: str, **checks: Any) -> Any:
    """An option taking a value named ``metavar`` (``checks``: typer's
    ``callback``, ``min``...): ``Annotated[str | None, value_option(...)]``."""
    return typer.Option(name, metavar=metavar, help=help, **checks)


ConfigOption = Annotated[Path | None, value_option(
    "--config", "FILE",
    "A CompactionConfig TOML/JSON file (see `ctxcompact config`).")]  # fmt: skip
FormatOption = Annotated[str | None, value_option(
    "--format", "FORMAT", f"Input session format, one of: {', '.join(READ_FORMATS)} "
    "(default: detect).", callback=_choice(READ_FORMATS))]  # fmt: skip
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def flag_option(name: str, help: str) -> Any:
    """An on/off option (``Annotated[bool, flag_option(...)] = False``)."""
    return typer.Option(name, help=help)


def tokens_option(name: str, help: str, minimum: int = 0) -> Any:
    """An option holding a number of tokens, at least ``minimum``
    (``Annotated[int | None, tokens_option(...)]``)."""
    return typer.Option(name, min=minimum, metavar="TOKENS", help=help)


ProtectOption = Annotated[int | None, tokens_option(
    "--prune-protect",
    "Tokens of the newest tool outputs never pruned (config prune_protect).")]  # fmt: skip
MinimumOption = Annotated[int | None, tokens_option(
    "--prune-minimum", "Prune only when more than this many tokens would be freed "
    "(config prune_minimum).")]  # fmt: skip
ToolsOption = Annotated[str | None, value_option(
    "--prune-protected-tools", "TOOLS", "Comma-separated tools whose outputs are never "
    "pruned, '' for none (config prune_protected_tools).")]  # fmt: skip
PolicyOption = Annotated[str | None, value_option(
    "--policy", "NAME|FILE", "Prune policy: a preset (opencode, swe-agent, "
    "anthropic-clear-tool-uses, aggressive) or a TOML/JSON policy file (config policy; "
    "docs/policies.md).")]  # fmt: skip
OnErrorOption = Annotated[
    str,
    typer.Option(
        metavar="raise|skip",
        callback=_choice(("raise", "skip")),
        help="raise: stop at the first bad line; skip: reject it and go on.",
    ),
]
MethodOption = Annotated[str | None, value_option(
    "--method", "METHOD", "Token estimate (config estimate_method): opencode (default), "
    "ceil-bytes, or a tokenizer family's fitted estimate: o200k, cl100k, llama3, qwen, "
    "tekken, deepseek, each also as <family>-conservative; or <family>-exact, the family's "
    "exact counts (read from ingest --count's columns when there).",
    callback=_choice(METHODS + EXACT_METHODS))]  # fmt: skip
VerifyOption = Annotated[
    bool,
    typer.Option("--verify",
                 help="Re-count every output against its stored length (output_utf16, "
                 "output_units_<family>) and work out every tool_target again first; a "
                 "count that no longer matches its text, or a target its input (edited "
                 "after ingest), is an error naming the row."),
]  # fmt: skip
ContextOption = Annotated[int | None, tokens_option(
    "--context",
    "Model context window (0: unlimited); flags sessions over the limit.")]  # fmt: skip
OutputLimitOption = Annotated[int | None, tokens_option(
    "--output-limit", "Model output limit, at least 1 (with --context; without it, "
    "output_token_max tokens are reserved for the answer).", minimum=1)]  # fmt: skip


def file_option(help: str, *names: str) -> Any:
    """The option naming a file to write (``Annotated[Path | None, file_option(...)]``)."""
    return typer.Option(*names, metavar="FILE", help=help)


ReportOption = Annotated[Path | None, file_option("Per-session report (Parquet).")]
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
ThreadsOption = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Threads (default: all cores).")
]
#: The generated data of demo and bench (each its own default size).
SessionsOption = Annotated[int, typer.Option(min=1, metavar="N", help="Sessions to generate.")]
PartsOption = Annotated[int, typer.Option(min=10, metavar="N", help="Parts per session.")]


@dataclasses.dataclass(frozen=True)
class Reading:
    """--format and --on-error, the options of reading session files: a
    command parameter ``reading: Reading`` (with ``@bundles``) takes them."""

    fmt: FormatOption = None
    on_error: OnErrorOption = "raise"


@dataclasses.dataclass(frozen=True)
class Pruning:
    """--config and the options that adjust its prune policy (prune_protect,
    prune_minimum, prune_protected_tools, policy): a command parameter
    ``settings: Pruning`` (with ``@bundles``) takes them."""

    config: ConfigOption = None
    prune_protect: ProtectOption = None
    prune_minimum: MinimumOption = None
    prune_protected_tools: ToolsOption = None
    policy: PolicyOption = None

    def load(self) -> CompactionConfig:
        """The configuration these options make."""
        return _config(self.config, **self.overrides())

    def overrides(self) -> dict[str, Any]:
        return _overrides(self.prune_protect, self.prune_minimum, self.prune_protected_tools,
                          self.policy)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Compaction(Pruning):
    """``Pruning``'s options and --method: the configuration of a command
    that compacts."""

    method: MethodOption = None

    def overrides(self) -> dict[str, Any]:
        return {**super().overrides(), **_overrides(method=self.method)}


def bundles(command: Callable[..., T]) -> Callable[..., T]:
    """``command`` with each parameter typed as an option bundle (a dataclass
    of options: ``Reading``, ``Pruning``) turned into that bundle's options,
    in its place and order (so --help lists them as before); the command is
    called with the bundle made from them."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    bundled: dict[str, tuple[type[Any], list[str]]] = {}
    for param in signature.parameters.values():
        kind = param.annotation
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        hints = typing.get_type_hints(kind, include_extras=True)
        fields = dataclasses.fields(kind)
        bundled[param.name] = (kind, [f.name for f in fields])
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                     annotation=hints[f.name]) for f in fields]  # fmt: skip

    @functools.wraps(command)
    def run(**kwargs: Any) -> T:
        for name, (kind, fields) in bundled.items():
            kwargs[name] = kind(**{field: kwargs.pop(field) for field in fields})
        return command(**kwargs)

    run.__annotations__ = {p.name: p.annotation for p in params}
    setattr(run, "__signature__", signature.replace(parameters=params))  # noqa: B010
    return run


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
InputsArgument = Annotated[list[Path], typer.Argument(
    metavar="INPUT", help="Parquet files or folders of part rows, and session files (.jsonl, "
    ".json, .traj) or folders of them; several are read as one.")]  # fmt: skip
#: ``ingest``'s inputs: session files only (it makes the Parquet).
SessionInputsArgument = Annotated[list[Path], typer.Argument(
    metavar="INPUT", help="Session files (.jsonl, .json, .traj) or folders of them; several "
    "are read as one.")]  # fmt: skip
