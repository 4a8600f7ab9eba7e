"""``config`` and ``version``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import ctxcompact as cc
from ctxcompact import config as config_module
from ctxcompact.cli.options import JsonOption, Pruning, bundles
from ctxcompact.config import CompactionConfig
from ctxcompact.policy import Policy

commands = typer.Typer()


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


@commands.command("config", short_help="Show the effective configuration and its sources.")
@bundles
def config_cmd(
    *,
    show: Annotated[
        bool, typer.Option("--show", help="Print every field's value and source (the default).")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the reference table of docs/config.md.")
    ] = False,
    settings: Pruning,
    as_json: JsonOption = False,
) -> None:
    """Show the effective configuration: each field, its value and where it came from."""
    if markdown and show:
        raise typer.BadParameter("cannot be combined with --show", param_hint="--markdown")
    if markdown:
        typer.echo(config_module.reference_markdown(), nl=False)
        return
    cfg = settings.load()
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


@commands.command()
def version() -> None:
    """Print the version."""
    typer.echo(cc.__version__)
