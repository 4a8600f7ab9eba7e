"""`tune --search`: the policy search on a training split, reported on the
held-out one; and the price-sheet check `replay` and `tune` make first."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ctxcompact.cli.display import _print_wide, _progress, _show_as_sent
from ctxcompact.cli.failures import InputNotFound
from ctxcompact.cli.inputs import (
    Segments,
    _load_many,
    _to_sessions,
)
from ctxcompact.cli.options import (
    _config,
    _limits,
    _overrides,
)
from ctxcompact.cli.outputs import (
    _check_outputs,
    _text_to,
    _write_together,
)
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError
from ctxcompact.tuning.as_sent import parse_as_sent
from ctxcompact.tuning.retention import shown_score


def check_sheets(models: list[str] | None, cfg: CompactionConfig, cache: str) -> None:
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


def search_verdict(result: Any) -> str:
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


def tune_search(inputs: list[Path], *, space: Path | None, objective: str | None,
                 min_retention: float, budget: int, method: str, seed: int, mask_first: bool,
                 context: int | None, output_limit: int | None, out: Path | None,
                 models: list[str] | None, cache: str, fmt: str | None, config: Path | None,
                 method_estimate: str | None, on_error: str, as_json: bool,
                 report: Path | None = None, as_sent: str | None = None) -> None:  # fmt: skip
    """`tune --search`: every option checked, then --out, before any replay."""
    from ctxcompact.tuning.search import check_search_options, load_space
    from ctxcompact.tuning.search import search as run_search

    overrides = _overrides(method=method_estimate)
    if mask_first:
        overrides["mask_first"] = True
    cfg = _config(config, **overrides)
    check_sheets(models, cfg, cache)
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
    sent_as = parse_as_sent(as_sent, "--as-sent")
    if context is None:
        raise typer.BadParameter("--search needs the context window", param_hint="--context")
    limits, _ = _limits(context, output_limit, cfg)
    if out is not None and out.suffix.lower() != ".toml":
        raise typer.BadParameter(f"{out}: with --search, --out writes the policy as TOML; "
                                 f"name it {out.with_suffix('.toml').name}",
                                 param_hint="--out")  # fmt: skip
    _check_outputs({"--out": out, "--report": report}, inputs)
    if report is not None:
        from ctxcompact.tuning.report import pyplot

        pyplot()  # the report's dependency, checked before the work
    segments: Segments = []
    sessions = _to_sessions(_load_many(inputs, fmt, on_error, segments), segments)
    with _progress(as_json) as bar:
        task = bar.add_task("searching", total=budget)

        def tick(done: int, _total: int) -> None:
            bar.update(task, completed=min(done, budget))

        result = run_search(sessions, limits=limits or {"context": context}, space=space,
                            objective=objective, min_retention=min_retention, budget=budget,
                            model=models[0] if models else None, config=cfg, cache=cache,
                            method=method, seed=seed, progress=tick,
                            as_sent=sent_as)  # fmt: skip
    page = None
    if report is not None:  # the held-out split under every preset and the tuned policy
        from ctxcompact.tuning.report import render_report, search_tuning

        held, marks = search_tuning(result, sessions, limits=limits or {"context": context},
                                    config=cfg, model=models, cache=cache)  # fmt: skip
        page = render_report(held, title="ctxcompact policy search: the held-out split",
                             marks=marks)  # fmt: skip

    def policy_to(tmp: Path) -> None:
        result.write(tmp)

    # both files or neither
    _write_together([(policy_to, out, "--out"),
                     (functools.partial(_text_to, page or ""), report, "--report")])  # fmt: skip
    key = result.key()
    verdict = search_verdict(result)
    info = {"policy": result.policy.describe(), "options": result.policy.model_dump(),
            "objective": objective, "min_retention": min_retention, "method": method,
            "budget": budget, "replays": len(result.trials), "seed": seed,
            "train_sessions": len(result.train_ids),
            "held_out_sessions": len(result.held_out_ids), "train": result.train,
            "held_out": result.held_out, "presets": result.presets, "goal_met": result.goal_met,
            "goal": verdict, "model": models[0] if models else None,
            "cache": cache if models else None, "context": context,
            "output_limit": output_limit, "method_estimate": cfg.estimate_method,
            "count": result.count, "mask_first": cfg.mask_first,
            "out": str(out) if out else None,
            "report": str(report) if report else None}  # fmt: skip
    if result.as_sent is not None:
        info["as_sent"] = result.as_sent
    if as_json:
        typer.echo(json.dumps(info, default=str))
        return
    typer.echo(f"chosen policy: {info['policy']}")
    typer.echo(f"searched: {method}, {len(result.trials)} replays on {len(result.train_ids)} "
               f"training sessions; held out: {len(result.held_out_ids)} sessions")  # fmt: skip
    table = Table(title=f"held-out split: {key} at retention >= {min_retention:g}")
    for col in ("policy", key, "retention", "compaction retention", "over window", "feasible"):
        table.add_column(col, justify="left" if col == "policy" else "right")

    def add(name: str, f: dict[str, Any]) -> None:
        value = f"${f[key]:,.4f}" if key == "cost" else f"{f[key]:,}"
        table.add_row(name, value, shown_score(f["retention"]),
                      shown_score(f["compaction_retention"]), str(f["over_window"]),
                      "yes" if result.feasible(f) else "no")  # fmt: skip

    add("chosen (train)", result.train)
    add("chosen", result.held_out)
    for name, f in result.presets.items():
        add(name, f)
    _print_wide(table)
    typer.echo(f"count: {result.count}")
    if result.as_sent is not None:
        _show_as_sent(result.as_sent)
    typer.echo(f"goal {verdict}")
    if out is not None:
        typer.echo(f"wrote {out} (use it with --policy {out})")


# --- end of tune --search -------------------------------------------------------------
