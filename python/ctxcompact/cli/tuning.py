"""``replay`` and ``tune``: replaying runs under policies, and how the
results are shown."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.compute
import typer
from rich.table import Table

from ctxcompact import config as config_module
from ctxcompact.cli.display import _cell, _print_wide, _progress, _show_as_sent, _status
from ctxcompact.cli.failures import InputNotFound
from ctxcompact.cli.inputs import (
    Segments,
    _check_format,
    _check_parquet_sessions,
    _check_sources,
    _is_parquet,
    _load_many,
    _names,
    _report_files,
    _to_sessions,
)
from ctxcompact.cli.options import (
    CacheOption,
    ConfigOption,
    FormatOption,
    InputsArgument,
    JsonOption,
    MethodOption,
    ModelsOption,
    OnErrorOption,
    OutputLimitOption,
    _choice,
    _config,
    _limits,
    _overrides,
)
from ctxcompact.cli.outputs import (
    _check_output,
    _check_outputs,
    _parquet_name,
    _parquet_to,
    _text_to,
    _write_parquet,
    _write_together,
)
from ctxcompact.cli.searching import check_sheets, tune_search
from ctxcompact.config import CompactionConfig
from ctxcompact.policy import Policy
from ctxcompact.tuning.as_sent import parse_as_sent

commands = typer.Typer()


AsSentOption = Annotated[
    str | None,
    typer.Option("--as-sent", metavar="auto|POLICY",
                 help="Replay each run's baseline under the policy it was sent with, not its "
                 "history sent whole: 'auto' picks per run the nearest to its recorded usage "
                 "(none, last-N for N 1..10, every preset, own; with --calibrate the best "
                 "fit per call); 'none', 'last-N', 'own' (the run's own Claude Code "
                 "compactions), a preset or a policy file forces one. The choice per run is "
                 "reported."),
]  # fmt: skip


#: Per policy in ``replay --json`` and ``tune --json`` (and the table's columns).
POLICY_KEYS = ("name", "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
               "cached_tokens", "cost", "baseline_cost", "compactions", "over_window",
               "retention", "compaction_retention")  # fmt: skip


#: Per policy in ``replay``: the baseline's cache reads and writes, and the
#: usage the runs recorded beside it (null where they recorded none), with the gap.
RECORDED_KEYS = ("baseline_cached_tokens", "baseline_written_tokens", "recorded_sessions",
                 "recorded_prompt_tokens", "recorded_calls", "recorded_cached_tokens",
                 "recorded_written_tokens", "prompt_gap", "prompt_gap_ratio")  # fmt: skip


def _some(names: list[str], n: int = 4) -> str:
    """Up to ``n`` names, then how many more."""
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


#: Per policy: equal values mean the policies sent the same prompts.
_SAME_KEYS = ("sessions", "calls", "prompt_tokens", "cached_tokens", "compactions",
              "over_window", "retention", "compaction_retention")  # fmt: skip


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


def _every_call(row: dict[str, Any]) -> bool:
    """The row's policy pruned before every call (its ``acts``, or mask_first)."""
    return bool(row.get("masks_at", "call" if row.get("mask_first") else None) == "call")


def _note_unchanged(rows: list[dict[str, Any]], cfg: CompactionConfig) -> bool:
    """When no policy changed a prompt, say why on stderr (equal columns look
    like a broken replay); whether it did."""
    if not rows or not all(not r.get("compactions") and r.get("prompt_tokens") == r.get(
        "baseline_prompt_tokens") for r in rows):  # fmt: skip
        return False
    masking = sum(_every_call(r) for r in rows)
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
        plain = any(not _every_call(r) for r in group)
        if not cfg.prune:
            typer.echo(f"note: {len(group)} policies replay identically "
                       f"({_some([str(r['name']) for r in group])}): pruning is disabled "
                       f"(prune = false, from {cfg.sources()['prune']}), so no policy prunes "
                       "or masks", err=True)  # fmt: skip
            continue
        if plain and first.get("compactions"):
            why.append("a policy that does not act at every call (without mask_first) prunes "
                       "only as a summary runs or a user turn ends, and the "
                       "offline digest summary reads the task, requests, paths and errors, "
                       "not the tool outputs pruning cleared, so the policy leaves no trace "
                       "in what is sent")  # fmt: skip
        elif plain:
            why.append("no session overflowed this context or ended a turn, so without "
                       "mask_first no policy acted")  # fmt: skip
        if any(_every_call(r) for r in group):
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
    _print_wide(table)
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
        elif key == "as_sent" and isinstance(value, list):
            _show_as_sent(value)
            continue
        elif key == "calibration" and isinstance(value, list):
            typer.echo(f"calibrated runs: {len(value)} (per-call error p50 / p95)")
            for fit in value:
                typer.echo(
                    f"  {fit['session_id']}: {fit['calibration_calls']} calls, reported ~ "
                    f"{fit['calibration_slope']:.3f} x estimate + "
                    f"{fit['calibration_intercept']:.0f}; error "
                    f"{fit['residual_before_p50']:.1%} / {fit['residual_before_p95']:.1%} "
                    f"-> {fit['residual_p50']:.1%} / {fit['residual_p95']:.1%}"
                )
            continue
        elif key == "cache_breaks" and isinstance(value, list):
            # tuning.cache.cache_breaks: every policy writes again at these calls
            typer.echo(f"cache breaks the runs recorded: {len(value)} run(s)")
            for b in value:
                typer.echo(f"  {b['session_id']}: {b['cache_breaks']} call(s) "
                           f"{b['cache_break_calls']}, {b['cache_break_tokens']:,} tokens "
                           "written again")  # fmt: skip
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


@commands.command(short_help="Replay runs call by call: tokens, cache, cost, retention.")
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
            "runs and when its acts says (opencode: a user turn ends; swe-agent, "
            "anthropic-clear-tool-uses: every call), at every call with --mask-first.",
        ),
    ] = None,
    method: MethodOption = None,
    on_error: OnErrorOption = "raise",
    as_json: JsonOption = False,
    as_sent: AsSentOption = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Fit each run's prompt estimates to the usage its "
            "calls recorded (slope and amount, Theil-Sen) and replay with the "
            "calibrated ones; report the fit and the per-call error before and after.",
        ),
    ] = False,
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
    check_sheets(models, cfg, cache)
    sent_as = parse_as_sent(as_sent, "--as-sent")  # before any input is read
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
    choices: list[dict[str, Any]] | None = None
    fits: list[dict[str, Any]] | None = None
    breaks: list[dict[str, Any]] | None = None
    bigger = _Bigger()
    counted: str | None = None
    method = cfg.estimate_method
    priced_by: dict[str, Any] | None = None  # the price table's row (name, source, date)
    price_rows: dict[str, Any] = {}  # every sheet's row, by model
    for label, policy in runs:
        with _status(f"replaying under {label}", as_json), bigger.collecting(label):
            result = run_replay(sessions, policy, limits=limits or {"context": 0}, config=cfg,
                                model=models, cache=cache, as_sent=sent_as,
                                calibrate=calibrate)  # fmt: skip
        s = result.summary
        choices = s.get("as_sent", choices)  # per run: the same under every policy
        fits = s.get("calibration", fits)  # per run: the same under every policy
        breaks = s.get("cache_breaks", breaks)  # per run: the same under every policy
        counted = s.get("count")  # which count the run got (tuning/counts.py)
        method = s.get("method", method)  # the method it counted with, not the config's
        priced_by, price_rows = s.get("price_row"), _price_rows(s)
        rows.append({"name": label, **{k: s.get(k) for k in POLICY_KEYS[1:]},
                     "mask_first": cfg.mask_first,
                     "masks_at": (cfg if policy is None else cfg.with_policy(policy)).masks_at(),
                     "removed_facts": s["removed_facts"],
                     "kept_facts": s["kept_facts"], "most_lost": s["most_lost"][:5],
                     **{k: s.get(k) for k in RECORDED_KEYS}, **_sheet_columns(s)})  # fmt: skip
        calls = result.calls
        tables.append(calls.add_column(0, "policy", pa.array([label] * calls.num_rows,
                                                              pa.string())))  # fmt: skip
    if out is not None:
        _write_parquet(pa.concat_tables(tables).cast(GRID_CALL_SCHEMA), out, "--out")
    # What the numbers depend on, so two results can be told apart.
    extra: dict[str, Any] = {
        "model": models[0] if models else None, "models": models or [],
        "price_row": priced_by, "price_rows": price_rows, "cache": cache if models else None,
        "context": context, "output_limit": output_limit,
        "output_reserved": context - (usable or 0),
        "method": method, "count": counted,
        "mask_first": cfg.mask_first}  # fmt: skip
    if choices is not None:
        extra["as_sent"] = choices
    if fits is not None:
        extra["calibration"] = fits
    if breaks:
        extra["cache_breaks"] = breaks
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


@commands.command(short_help="Replay a policy grid: cost vs retention, HTML report.")
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
        int | None, typer.Option(min=1, metavar="N", help="Engine threads (default: CPUs).")
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
    as_sent: AsSentOption = None,
) -> None:
    """Replay every run under every point of a grid of policies (in parallel;
    Parquet is streamed in bounded memory) and show the points, the front of
    cost against retention, and optionally the HTML report. With --search:
    search the policy space instead (docs/tuning.md)."""
    from ctxcompact.tuning import tune as run_tune
    from ctxcompact.tuning.grid import CONFIG_KEYS, WINDOW_KEYS, load_grid

    if search:
        if grid is not None or workers is not None:
            bad = "--grid" if grid is not None else "--workers"
            raise typer.BadParameter("not with --search", param_hint=bad)
        tune_search(inputs, space=space, objective=objective, min_retention=min_retention,
                     budget=budget, method=search_method, seed=seed, mask_first=mask_first,
                     context=context, output_limit=output_limit, out=out, models=models,
                     cache=cache, fmt=fmt, config=config, method_estimate=method,
                     on_error=on_error, as_json=as_json, report=report,
                     as_sent=as_sent)  # fmt: skip
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
    check_sheets(models, cfg, cache)
    sent_as = parse_as_sent(as_sent, "--as-sent")  # before any input is read
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
    _check_format(inputs, fmt)
    parquet = all(_is_parquet(p) for p in inputs)
    if parquet:
        from ctxcompact.batch.parquet import parquet_dataset

        found = parquet_dataset(inputs)
        _report_files(found.skipped)
        _check_parquet_sessions(found.files)
    corpus: Any = inputs if parquet else _load_many(inputs, fmt, on_error)
    total = None if parquet else len(corpus.session_ids())
    with _progress(as_json) as bar:
        task = bar.add_task("replaying sessions", total=total)

        def tick(done: int, _total: int | None) -> None:
            bar.update(task, completed=done)

        result = run_tune(corpus, grid, limits=window, config=cfg, model=models, cache=cache,
                          workers=workers, progress=tick,
                          recorded=report is not None, as_sent=sent_as)  # fmt: skip
    page = None
    if report is not None:
        from ctxcompact.tuning.report import grid_marks, render_report

        marks = grid_marks(
            corpus, grid, limits=window, config=cfg, model=models, cache=cache, workers=workers
        )  # every preset marked beside the grid's points
        page = render_report(result, marks=marks)
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
                             "front_axis": result.axis,
                             # the methods the points counted with (not the config's)
                             "method": ", ".join(sorted({o.get("method", cfg.estimate_method)
                                                         for o in options.values()})),
                             "count": result.count,
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
    if result.as_sent is not None:
        extra["as_sent"] = result.as_sent

    def point_calls(i: int) -> pa.Table:
        return result.calls.filter(pyarrow.compute.equal(result.calls["policy"], rows[i]["name"]))

    _show_policies("tune", rows, extra, as_json, cfg, windows, point_calls)
