"""A grid of policies replayed over a corpus, with the cost-vs-retention front.

``tune(corpus, grid)`` replays every session of the corpus under every point
of the grid (the cartesian product of its lists) and returns one row per call
and one per point. A corpus is sessions, a ``Transcript``/Arrow table, or
Parquet files of part rows streamed in batches of whole sessions (bounded
memory: one batch in flight). The batches run one after another in this
process, each replayed by the engine (``tuning.engine``) with its sessions
in parallel on the core's threads (the GIL released): nothing is pickled.
``tune_dataset`` does the same on a Ray ``Dataset`` through ``map_batches``.

Grid keys: any ``Policy`` field (``preset`` included), ``mask_first``, and the
window: ``context`` and ``output`` (each at least 1 token). A value is a list of
candidates (a scalar is one), each listed once. In a TOML file, the keys sit
at the top or under ``[grid]`` (then nothing else is in the file). What a
grid does not vary comes from ``config`` (the estimate method, thresholds)
and ``limits``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionError,
    ConfigError,
    DatasetError,
    InputTypeError,
    NonContiguousError,
)
from ctxcompact.models import Session
from ctxcompact.policy import Policy
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.transcript import Transcript, relocate, unique_sessions
from ctxcompact.transcript.schema import typed_columns
from ctxcompact.tuning.as_sent import AsSent, SentBaseline, choose_baseline, parse_as_sent
from ctxcompact.tuning.cache import Sheet, model_names
from ctxcompact.tuning.calibrated import recorded_breaks, recorded_calls
from ctxcompact.tuning.counts import count_label, with_run_method
from ctxcompact.tuning.engine import engine_calls, message_facts
from ctxcompact.tuning.prices import Price, PriceRow
from ctxcompact.tuning.recorded import recorded_lifetimes, recorded_usage, recorded_usage_table
from ctxcompact.tuning.replay import (
    CACHE_TTL_S,
    CALL_SCHEMA,
    check_config,
    check_number,
    priced_policy,
    sheets_for,
    summarize_calls,
)

#: Grid keys that are not policy fields.
WINDOW_KEYS = ("context", "output")
CONFIG_KEYS = ("mask_first",)

#: The per-call table of a grid: ``CALL_SCHEMA`` with the point's name first.
GRID_CALL_SCHEMA = pa.schema([pa.field("policy", pa.string()), *CALL_SCHEMA])

#: Columns of the per-point table.
POINT_SCHEMA = pa.schema([
    ("policy", pa.string()),
    *typed_columns(pa.int64(), "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
                   "cached_tokens", "compactions", "over_window"),
    # The share of the facts stated so far that a call still shows (the
    # front's), and kept / removed facts over the compactions (not comparable
    # between policies that remove different amounts).
    *typed_columns(pa.float64(), "retention", "compaction_retention", "cost", "baseline_cost"),
    # Every prompt fit the input window (over_window == 0): a point the model
    # would have refused prompts of is never on the front.
    *typed_columns(pa.bool_(), "feasible", "pareto"),
])  # fmt: skip

#: What the front weighs against retention: the cost when the calls are
#: priced (a model was named), else the prompt tokens.
FRONT_AXES = ("cost", "prompt_tokens")


@dataclass(frozen=True)
class Point:
    """One grid point: its name, the options it sets, the config and window."""

    name: str
    options: dict[str, Any]
    config: CompactionConfig
    limits: Limits


@dataclass(frozen=True)
class Tuning:
    """``calls``: one row per call and point (``GRID_CALL_SCHEMA``);
    ``points``: one row per point (``POINT_SCHEMA``, ``pareto`` marks the
    cost-vs-retention front, over the ``feasible`` points only);
    ``summaries``: per point, ``replay``'s totals; ``axis``: what the front
    weighs against retention, ``"cost"`` (priced) or ``"prompt_tokens"`` (no
    model named); ``price_row``: the price table's row that priced the calls
    (its name, source and date), ``None`` when not priced; ``recorded``: the
    usage each session recorded (``tuning.recorded.recorded_usage``, null
    where it recorded none), ``None`` when it was not read (``tune(...,
    recorded=True)`` reads it; ``tune_dataset`` does not); ``count``: which
    count the figures use (``"o200k exact"``, ``"estimate opencode"``:
    ``tuning.counts``); ``as_sent``: per run, the policy its baseline was
    replayed under and why (``tune(..., as_sent=...)``; ``None``: the stored
    history sent whole)."""

    calls: pa.Table
    points: pa.Table
    summaries: dict[str, dict[str, Any]]
    axis: str = "cost"
    price_row: PriceRow | None = None
    recorded: list[dict[str, Any]] | None = None
    count: str | None = None
    as_sent: list[dict[str, Any]] | None = None

    def front(self) -> pa.Table:
        """The feasible points (every prompt within the window) no other
        feasible point beats on both the ``axis`` and retention."""
        return self.points.filter(self.points["pareto"])


def read_toml_table(path: Path, table: str, what: str) -> Any:
    """The TOML file at ``path``: its ``[table]`` when it has one (no key may
    stand beside it), else its top level. A ``ConfigError`` (column ``table``)
    names the file, ``what`` it holds ("grid", "search space") and the fault."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e.strerror or e})",
                          column=table) from None  # fmt: skip
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not a TOML {what} ({e})", column=table) from None
    if not isinstance(data.get(table), Mapping):
        return data
    # Keys beside the table would be dropped: the table is what is read.
    if stray := sorted(k for k in data if k != table):
        raise ConfigError(
            f"{path}: {stray[0]} is outside the [{table}] table, which is what is read: "
            "move it into the table (or put every key at the top)",
            column=str(stray[0]),
        )  # fmt: skip
    return data[table]


def load_grid(grid: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, list[Any]]:
    """A grid from a dict or a TOML file, checked: every key known, every list non-empty."""
    where = ""
    data: Any = grid
    if isinstance(grid, (str, os.PathLike)):
        path = Path(grid)
        where = f"{path}: "
        data = read_toml_table(path, "grid", "grid")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}a grid is a dict of option -> list of values, or the path of "
                          f"a TOML file, got {type(data).__name__}", column="grid")  # fmt: skip
    if not data:
        raise ConfigError(f"{where}the grid is empty: give lists of option values", column="grid")
    known = set(Policy.model_fields) | {"preset", *WINDOW_KEYS, *CONFIG_KEYS}
    out: dict[str, list[Any]] = {}
    for key, values in data.items():
        if key not in known:
            raise ConfigError(
                f"{where}grid option {key!r} does not exist; options: {', '.join(sorted(known))}",
                column=str(key),
            )  # fmt: skip
        listed = list(values) if isinstance(values, (list, tuple)) else [values]
        if not listed:
            raise ConfigError(f"{where}grid option {key!r} has no values", column=str(key))
        for i, value in enumerate(listed):
            # A value listed twice would make two points of one name: their
            # calls would be counted twice under it.
            if (first := next((v for v in listed[:i] if v == value), _UNSET)) is not _UNSET:
                again = f"{first!r} twice" if repr(first) == repr(value) else (
                    f"{first!r} and {value!r}, one value")  # fmt: skip
                raise ConfigError(f"{where}grid option {key!r} lists {again}: list each "
                                  "value once", column=str(key))  # fmt: skip
        out[str(key)] = listed
    return out


_UNSET = object()


def _name(options: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items())


def points(grid: Mapping[str, Any] | str | os.PathLike[str], *,
           config: CompactionConfig | Mapping[str, Any] | None = None,
           limits: Limits | Mapping[str, int] | None = None) -> list[Point]:  # fmt: skip
    """Every point of the grid, each checked (a bad value raises ``ConfigError``
    naming the point and the option)."""
    lists = load_grid(grid)
    where = f"{grid}: " if isinstance(grid, (str, os.PathLike)) else ""
    base = check_config(config, "tune")
    base_window = Limits.coerce(limits) if limits is not None else None
    out: list[Point] = []
    for combo in itertools.product(*lists.values()):
        options = dict(zip(lists, combo, strict=True))
        name = _name(options)
        policy_opts = {k: v for k, v in options.items()
                       if k not in WINDOW_KEYS and k not in CONFIG_KEYS}  # fmt: skip
        try:
            for key in CONFIG_KEYS:
                if key in options and not isinstance(options[key], bool):
                    raise ConfigError(f"{key} takes true or false, not {options[key]!r}",
                                      column=key)  # fmt: skip
            # A point's policy options are replayed as given: the base config's
            # prune_protect etc. adjust only its own policy (a point without
            # policy options replays that one, as prune would run it).
            # Without a preset, the options change the configuration's policy
            # (what a grid does not vary comes from config), not OpenCode's.
            if not policy_opts:
                policy = base.prune_policy()
            else:
                # Without a preset, the options change the config's policy.
                start = {} if "preset" in policy_opts else base.policy.model_dump()
                policy = Policy.from_mapping({**start, **policy_opts}, where="")
            cfg = base.with_policy(policy).model_copy(
                update={k: options[k] for k in CONFIG_KEYS if k in options}
            )
            window = {
                "context": options.get("context", base_window.context if base_window else None),
                "output": options.get("output", base_window.output if base_window else 0),
            }
            if window["context"] is None or (window["context"] == 0 and "context" not in options):
                raise ConfigError("no context window: put 'context' in the grid or pass limits=",
                                  column="context")  # fmt: skip
            if "output" in options and options["output"] == 0:
                # 0 is "unknown" to the window: output_token_max would be reserved.
                raise ConfigError(
                    f"output 0 is no output limit: output_token_max ({base.output_token_max:,} "
                    "tokens) would be reserved for the answer; give the model's output limit "
                    "(at least 1 token), or leave output out of the grid",
                    column="output",
                )  # fmt: skip
            if isinstance(window["context"], int) and window["context"] == 0:
                # 0 is an unlimited window elsewhere: nothing would be tuned.
                raise ConfigError("context 0 is no window: a grid's context is at least 1 "
                                  "token, as tune --context", column="context")  # fmt: skip
            if any(p.name == name for p in out):  # "1" and 1: one name, counted twice
                raise ConfigError("another point has this name: list each value once",
                                  column="grid")  # fmt: skip
            out.append(Point(name, options, cfg, check_window(Limits.coerce(window), cfg)))
        except ConfigError as e:
            raise ConfigError(f"{where}grid point {name}: {e}", column=e.column) from None
        except ValueError as e:  # pydantic's
            raise ConfigError(f"{where}grid point {name}: {e}", column="grid") from None
    return out


def _replay_table(
    table: pa.Table,
    grid_points: list[Point],
    locate: Locate | None = None,
    threads: int | None = None,
    recorded: list[dict[str, Any]] | None = None,
    as_sent: AsSent | SentBaseline | None = None,
    choices: list[dict[str, Any]] | None = None,
) -> pa.Table:
    """Every session of ``table`` under every point: the per-call rows (priced
    on the driver, from the totals). ``locate``: the file and row in it of a
    row of ``table`` (a piece of a corpus), which an error about a row names;
    ``threads``: the engine's (default: the CPUs); ``recorded``: extended by
    the usage each session recorded; ``as_sent``: each run's baseline
    replayed as it was sent (``tuning.as_sent``), chosen once per run for
    every point, ``choices`` extended by the choice per run."""
    try:
        # The message facts once, every point over them in the engine.
        facts = message_facts(table)
        usage = recorded_usage_table(table, facts) if (
            recorded is not None or as_sent is not None) else []  # fmt: skip
        if recorded is not None:
            recorded.extend(usage)
        tables = [engine_calls(table, point.config, point.limits, summarizer=None, system=None,
                               schema=CALL_SCHEMA, threads=threads, facts=facts)
                  for point in grid_points]  # fmt: skip
        if as_sent is not None and tables:
            # The baseline does not depend on the point (not its policy, nor
            # its window: pruning never reads it): one choice per run.
            first = grid_points[0]
            if not isinstance(as_sent, SentBaseline):
                as_sent = choose_baseline(table, tables[0], usage, as_sent, first.config,
                                          first.limits, None)  # fmt: skip
            applied = [as_sent.apply(calls) for calls in tables]
            tables = [calls for calls, _ in applied]
            if choices is not None:
                choices.extend(applied[0][1])
        # The cache breaks the runs recorded, at the same calls for every point
        # and its baseline (tuning.cache.cache_breaks), as replay applies them.
        per_call = recorded_calls(table, facts)
        if any(read for _, read in per_call.values()):
            lifetimes = recorded_lifetimes(usage or recorded_usage_table(table, facts))
            tables = [recorded_breaks(table, facts, calls, per_call, lifetimes, False,
                                      CACHE_TTL_S)[0] for calls in tables]  # fmt: skip
    except CompactionError as e:
        if locate is None or e.row is None:
            raise
        raise relocate(e, *locate(e.row)) from None
    tables = [_with_policy(point.name, calls)
              for point, calls in zip(grid_points, tables, strict=True)]  # fmt: skip
    return pa.concat_tables(tables) if tables else GRID_CALL_SCHEMA.empty_table()


def _with_policy(name: str, calls: pa.Table) -> pa.Table:
    return calls.add_column(0, GRID_CALL_SCHEMA.field("policy"),
                            pa.array([name] * calls.num_rows, pa.string()))  # fmt: skip


#: The file (``None``: a table in memory) and row of a row of a corpus's piece.
Locate = Callable[[int], tuple[Any, int]]


def _shifted(start: int, row: int) -> tuple[None, int]:
    return None, start + row


def _replay_sessions(
    sessions: list[Session], grid_points: list[Point], threads: int | None = None,
    recorded: list[dict[str, Any]] | None = None,
    as_sent: AsSent | SentBaseline | None = None,
    choices: list[dict[str, Any]] | None = None,
) -> pa.Table:  # fmt: skip
    if recorded is not None:
        recorded.extend(recorded_usage(s) for s in sessions)
    return _replay_table(Transcript.from_sessions(sessions).to_arrow(), grid_points,
                         threads=threads, as_sent=as_sent, choices=choices)  # fmt: skip


def _table_chunks(table: pa.Table, batch_rows: int) -> Iterator[tuple[pa.Table, Locate]]:
    """Zero-copy slices of about ``batch_rows`` rows, cut between sessions (a
    session is never split; one longer than that is a slice of its own)."""
    if table.num_rows == 0:
        return
    ids = table.column("session_id")
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(ids.type.value_type)
    changes = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
    starts = [0, *(int(i) + 1 for i in pc.indices_nonzero(changes).to_pylist())]
    runs = ids.take(pa.array(starts)).to_pylist()
    if len(set(runs)) != len(runs):  # cut apart, a session would be replayed twice
        first: dict[Any, int] = {}
        again, row = next((r, starts[i]) for i, r in enumerate(runs)
                          if first.setdefault(r, i) != i)  # fmt: skip
        raise NonContiguousError(
            f"session {again!r} appears again at row {row} after other sessions "
            "(sort the table by session first)",
            session_id=str(again), row=row, column="session_id",
        )  # fmt: skip
    start = 0
    for s in [*starts[1:], table.num_rows]:
        if s - start >= batch_rows or s == table.num_rows:
            yield table.slice(start, s - start), partial(_shifted, start)
            start = s


def _chunks(corpus: Any, batch_rows: int) -> Iterator[tuple[pa.Table, Locate] | list[Session]]:
    """The corpus in pieces of whole sessions."""
    if isinstance(corpus, Session):
        yield [corpus]
    elif isinstance(corpus, (Transcript, pa.Table)):
        yield from _table_chunks(Transcript.from_arrow(corpus).to_arrow(), batch_rows)
    elif isinstance(corpus, (str, os.PathLike)) or (
        isinstance(corpus, (list, tuple)) and corpus and isinstance(corpus[0], (str, os.PathLike))
    ):
        from ctxcompact.batch.parquet import located_session_tables

        yield from located_session_tables(corpus, batch_rows)
    elif corpus is None or isinstance(corpus, (Mapping, bytes)) or not isinstance(corpus, Iterable):
        raise InputTypeError(f"tune takes Sessions, a Transcript, an Arrow table or Parquet "
                             f"paths (corpus), got {type(corpus).__name__}",
                             column="corpus")  # fmt: skip
    else:
        sessions = list(corpus)
        if not all(isinstance(s, Session) for s in sessions):
            raise ConfigError("tune takes Sessions, a Transcript, an Arrow table or Parquet "
                              "paths", column="corpus")  # fmt: skip
        unique_sessions(sessions)
        for i in range(0, len(sessions), 64):
            yield sessions[i : i + 64]


def _grid_points(grid: Any, config: CompactionConfig,
                 limits: Limits | Mapping[str, int] | None) -> list[Point]:  # fmt: skip
    """``tune``'s grid as points: points already made as they are (each holds
    its window, so ``limits`` beside them is refused), else ``points``."""
    if isinstance(grid, Sequence) and not isinstance(grid, str):
        made = [p for p in grid if isinstance(p, Point)]
        if made and len(made) == len(grid):
            if limits is not None:
                raise ConfigError("limits: each point made by points/policy_point holds its own "
                                  "window; leave limits out", column="limits")  # fmt: skip
            return made
    return points(grid, config=config, limits=limits)  # anything else is refused there


def tune(
    corpus: Any,
    grid: Mapping[str, Any] | str | os.PathLike[str] | Sequence[Point],
    *,
    limits: Limits | Mapping[str, int] | None = None,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    model: str | Sequence[str] | None = None,
    prices: Mapping[str, Any] | None = None,
    cache: str = "5m",
    workers: int | None = None,
    batch_rows: int = 65_536,
    progress: Callable[[int, int | None], None] | None = None,
    recorded: bool = False,
    as_sent: str | Policy | Mapping[str, Any] | AsSent | SentBaseline | None = None,
) -> Tuning:
    """Replay ``corpus`` under every point of ``grid`` (see the module doc):
    a grid (a mapping or a grid file), or points already made (``points``,
    ``policy_point``; ``limits`` is then each point's own, so leave it out).

    ``workers``: the engine's threads (default: the CPUs); the sessions a
    summary leaves to the live walk run one at a time, in this process.
    ``model``: price the calls (a list: under each, the first weighed on the
    front; ``cache`` as in ``replay``); without it the front is prompt tokens
    vs retention (``Tuning.axis``). The front holds only the points whose every
    prompt fit the window (``feasible``). ``progress(sessions_done, total or
    None)`` after each batch. ``recorded``: read the usage each session
    recorded too (``Tuning.recorded``, the report's recorded vs replayed).
    ``as_sent``: each run's baseline replayed under the policy it was sent
    with, as ``replay`` takes it (``"auto"``, ``"none"``, ``"last-N"``, a
    policy), chosen once per run for every point (``Tuning.as_sent``).
    """
    config = check_config(config, "tune")
    sent_as = parse_as_sent(as_sent, "as_sent")
    grid_points = _grid_points(grid, config, limits)
    # exact where the priced model's family is known, unless a method was set
    config = with_run_method(config, model_names(model), None)
    if workers is not None:
        check_number(workers, "workers", least=1, integer=True)
    check_number(batch_rows, "batch_rows", least=1, integer=True)
    price = sheets_for(model, config, prices, cache)
    grid_points = counted_and_priced(grid_points, model, price)
    if isinstance(sent_as, SentBaseline):  # chosen already: its count is every point's
        grid_points = [replace(p, config=sent_as.counted(p.config)) for p in grid_points]
    tables: list[pa.Table] = []
    usage: list[dict[str, Any]] = []  # returned when ``recorded``; its lifetimes priced
    choices: list[dict[str, Any]] | None = [] if sent_as is not None else None
    done = 0

    def collect(calls: pa.Table) -> None:
        nonlocal done
        tables.append(calls)
        done += len(pc.unique(calls["session_id"])) if calls.num_rows else 0
        if progress is not None:
            progress(done, None)

    for chunk in _chunks(corpus, batch_rows):
        collect(_run(chunk, grid_points, threads=workers, recorded=usage, as_sent=sent_as,
                     choices=choices))  # fmt: skip
    out = results(pa.concat_tables(tables) if tables else GRID_CALL_SCHEMA.empty_table(),
                  grid_points, price, lifetimes=recorded_lifetimes(usage))  # fmt: skip
    return dataclasses.replace(out, recorded=usage if recorded else None, as_sent=choices)


def policy_point(name: str, policy: Policy, *, limits: Limits | Mapping[str, int],
                 config: CompactionConfig | Mapping[str, Any] | None = None) -> Point:  # fmt: skip
    """A point of one policy, replayed as given (a preset, a searched policy)
    in ``limits``, the rest from ``config``."""
    cfg = check_config(config, "tune").with_policy(policy)
    return Point(name, {}, cfg, check_window(Limits.coerce(limits), cfg))


def counted_and_priced(grid_points: Sequence[Point], model: str | Sequence[str] | None,
                       price: list[Sheet]) -> list[Point]:  # fmt: skip
    """Each point counting exactly in the priced model's family unless it set
    a method (``with_run_method``), a cache-aware policy priced by the first
    sheet (``priced_policy``): what ``tune`` and ``tune_dataset`` replay."""
    names = model_names(model)
    return [replace(p, config=priced_policy(with_run_method(p.config, names, None), price))
            for p in grid_points]  # fmt: skip


def _run(chunk: tuple[pa.Table, Locate] | list[Session], grid_points: list[Point],
         threads: int | None = None, recorded: list[dict[str, Any]] | None = None,
         as_sent: AsSent | SentBaseline | None = None,
         choices: list[dict[str, Any]] | None = None) -> pa.Table:  # fmt: skip
    if isinstance(chunk, tuple):
        return _replay_table(chunk[0], grid_points, chunk[1], threads=threads,
                             recorded=recorded, as_sent=as_sent, choices=choices)  # fmt: skip
    return _replay_sessions(chunk, grid_points, threads=threads, recorded=recorded,
                            as_sent=as_sent, choices=choices)  # fmt: skip


def results(calls: pa.Table, grid_points: Iterable[Point],
            price: Sequence[Sheet] | Price | PriceRow | None,
            model: str | None = None,
            lifetimes: Mapping[str, float] | None = None) -> Tuning:  # fmt: skip
    """The per-point table and the front from a grid's per-call table
    (``price``: the price sheets, the first weighed on the front and its row
    named in ``Tuning.price_row``; a ``Price`` or ``PriceRow`` is one;
    ``lifetimes``: per run, its cache's lifetime, ``tuning.cache.price_calls``)."""
    if calls.num_rows == 0:
        raise DatasetError("nothing to replay: the corpus has no assistant message (model call)",
                           column="role")  # fmt: skip
    grid_points = list(grid_points)
    names = [p.name for p in grid_points]
    if len(set(names)) < len(names):  # their calls could not be told apart
        twice = next(n for i, n in enumerate(names) if n in names[:i])
        raise ConfigError(f"two grid points are named {twice!r}", column="grid")
    summaries: dict[str, dict[str, Any]] = {}
    for point in grid_points:
        mine = calls.filter(pc.equal(calls["policy"], point.name))
        summaries[point.name] = {"policy": point.name, **point.options,
                                 **summarize_calls(mine, price, model, lifetimes),
                                 "method": point.config.estimate_method,
                                 "count": count_label(point.config.estimate_method)}  # fmt: skip
    counts = sorted({s["count"] for s in summaries.values()})
    rows = []
    for name, s in summaries.items():
        rows.append({
            "policy": name, "sessions": s["sessions"], "calls": s["calls"],
            "prompt_tokens": s["prompt_tokens"],
            "baseline_prompt_tokens": s["baseline_prompt_tokens"],
            "cached_tokens": s["cached_tokens"], "compactions": s["compactions"],
            "over_window": s["over_window"], "retention": s["retention"],
            "compaction_retention": s["compaction_retention"], "cost": s.get("cost"),
            "baseline_cost": s.get("baseline_cost"), "feasible": not s["over_window"],
            "pareto": False,
        })  # fmt: skip

    # The front: no other point is at least as good on both axes and better on
    # one. Only feasible points: one whose prompts the model would refuse is
    # no option, however cheap, and must not push a feasible point off.
    priced = any("cost" in s for s in summaries.values())
    key = "cost" if priced else "prompt_tokens"

    def axis(r: dict[str, Any]) -> float:
        return float(r[key])

    marks = pareto([axis(r) for r in rows], [r["retention"] for r in rows],
                   [r["feasible"] for r in rows])  # fmt: skip
    for r, on in zip(rows, marks, strict=True):
        r["pareto"] = on
    first = price[0].row if isinstance(price, Sequence) and price else price
    return Tuning(calls=calls, points=pa.Table.from_pylist(rows, schema=POINT_SCHEMA),
                  summaries=summaries, axis=key,
                  price_row=first if isinstance(first, PriceRow) else None,
                  count=", ".join(counts))  # fmt: skip


def pareto(xs: Sequence[float], ys: Sequence[float], feasible: Sequence[bool]) -> list[bool]:
    """Which points are on the front of ``xs`` (less is better) against ``ys``
    (more is better): feasible, and no other feasible point at least as good
    on both and better on one."""
    ok = [i for i, f in enumerate(feasible) if f]
    return [
        bool(feasible[i]) and not any(
            xs[o] <= xs[i] and ys[o] >= ys[i] and (xs[o] < xs[i] or ys[o] > ys[i]) for o in ok
        )
        for i in range(len(xs))
    ]  # fmt: skip


#: The column a Ray task adds to its calls: its run's as-sent choice (JSON).
_CHOICE = "as_sent_choice"

#: The column a Ray task adds to its calls: its run's cache lifetime
#: (``recorded.recorded_lifetimes``; null: the default), read where the run is.
_LIFETIME = "cache_lifetime_s"


def _ray_replay(batch: pa.Table, *, grid_points: list[Point], threads: int,
                as_sent: AsSent | SentBaseline | None = None) -> pa.Table:  # fmt: skip
    # A block holds whole sessions, in order (a session out of place is the
    # engine's NonContiguousError, never regrouped: Ray's reader may reorder
    # a file's rows), and the choice and the lifetime are per run: each task
    # reads them for its own runs and hands them back beside the calls.
    choices: list[dict[str, Any]] = []
    usage: list[dict[str, Any]] = []
    calls = _replay_table(batch, grid_points, threads=threads, recorded=usage,
                          as_sent=as_sent, choices=choices)  # fmt: skip
    sids = calls["session_id"].to_pylist()
    lifetimes = recorded_lifetimes(usage)
    calls = calls.append_column(_LIFETIME, pa.array([lifetimes.get(s) for s in sids],
                                                    pa.float64()))  # fmt: skip
    if as_sent is None:
        return calls
    by_id = {c["session_id"]: json.dumps(c) for c in choices}
    return calls.append_column(_CHOICE, pa.array([by_id[s] for s in sids], pa.string()))


def _one_block_per_session(tables: list[pa.Table]) -> list[pa.Table]:
    """``tables`` (``tag_block``'s output) without their block ids, after
    checking that no session's calls come from two input blocks (each piece
    replayed alone): such a session is a ``NonContiguousError`` naming it."""
    from ctxcompact.batch.ray_files import BLOCK, block_sessions, split_session

    sid = split_session(pa.concat_tables([block_sessions(t) for t in tables])) if tables else (
        None)  # fmt: skip
    if sid is not None:
        raise NonContiguousError(
            f"session {sid!r} was split between blocks: write each file with whole "
            "sessions, or pass the Parquet path to read each file whole",
            session_id=sid, column="session_id",
        )  # fmt: skip
    return [t.drop_columns([BLOCK]) for t in tables]


def _split_choices(parts: list[pa.Table]) -> tuple[list[pa.Table], list[dict[str, Any]],
                                                   dict[str, float]]:  # fmt: skip
    """The Ray tasks' calls without their ``_CHOICE`` and ``_LIFETIME``
    columns, each run's choice once, in the order the tasks' calls give them,
    and each run's cache lifetime where it has one."""
    seen: dict[str, dict[str, Any]] = {}
    lifetimes: dict[str, float] = {}
    out = []
    for t in parts:
        if _LIFETIME in t.column_names:
            kept = t.filter(pc.is_valid(t[_LIFETIME]))
            lifetimes |= dict(zip(kept["session_id"].to_pylist(), kept[_LIFETIME].to_pylist(),
                                  strict=True))  # fmt: skip
            t = t.drop_columns([_LIFETIME])
        if _CHOICE in t.column_names:
            for text in pc.unique(t[_CHOICE]).to_pylist():
                choice = json.loads(text)
                seen.setdefault(choice["session_id"], choice)
            t = t.drop_columns([_CHOICE])
        out.append(t)
    return out, list(seen.values()), lifetimes


def tune_dataset(
    dataset: Any,
    grid: Mapping[str, Any] | str | os.PathLike[str],
    *,
    limits: Limits | Mapping[str, int] | None = None,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    model: str | Sequence[str] | None = None,
    prices: Mapping[str, Any] | None = None,
    cache: str = "5m",
    num_cpus: float = 1,
    as_sent: str | Policy | Mapping[str, Any] | AsSent | SentBaseline | None = None,
) -> Tuning:
    """``tune`` on Ray, over Parquet file(s) and folder(s) of part rows (a
    path, a URL or a list of them: each file read whole and in order by one
    task, a session in two files refused before any work) or over a Ray
    ``Dataset`` (``map_batches``; blocks hold whole sessions, in order, as
    for ``batch.compact_dataset``: a session in two blocks is a
    ``NonContiguousError``). Each task asks
    Ray for ``num_cpus`` CPUs and its engine runs on that many threads
    (``int(num_cpus)``, at least 1), not on every core of the node: tasks
    side by side on a node do not oversubscribe it. ``as_sent``: as ``tune``
    takes it, each run's choice made in the task that holds the run (the
    choice is per run), all of them in ``Tuning.as_sent``."""
    from functools import partial

    from ctxcompact.batch.ray_data import _on_rows, _on_source, _typed
    from ctxcompact.batch.ray_files import ray_module as _ray
    from ctxcompact.batch.ray_files import tag_block

    ray = _ray()
    config = check_config(config, "tune_dataset")
    sent_as = parse_as_sent(as_sent, "as_sent")
    grid_points = points(grid, config=config, limits=limits)
    price = sheets_for(model, config, prices, cache)
    grid_points = counted_and_priced(grid_points, model, price)
    if isinstance(sent_as, SentBaseline):  # chosen already: its count is every point's
        grid_points = [replace(p, config=sent_as.counted(p.config)) for p in grid_points]
    threads = max(1, int(num_cpus))  # the cores the task is given, as compact_dataset's
    fn = partial(_ray_replay, grid_points=grid_points, threads=threads, as_sent=sent_as)
    if isinstance(dataset, str | os.PathLike | list):
        source = [os.fspath(p) for p in dataset] if isinstance(dataset, list) else (
            os.fspath(dataset))  # fmt: skip
        out = _on_source(source, partial(_on_rows, fn=fn), num_cpus=num_cpus)
        tables = [t for t in ray.get(out.to_arrow_refs()) if t.num_rows]
    else:
        out = dataset.map_batches(tag_block(fn), batch_format="pyarrow", batch_size=None,
                                  num_cpus=num_cpus)  # fmt: skip
        tables = [t for t in ray.get(_typed(out).to_arrow_refs()) if t.num_rows]
        tables = _one_block_per_session(tables)
    parts, choices, lifetimes = _split_choices(tables)
    calls = pa.concat_tables([t.cast(GRID_CALL_SCHEMA) for t in parts]) if parts else (
        GRID_CALL_SCHEMA.empty_table())  # fmt: skip
    tuned = results(calls, grid_points, price, lifetimes=lifetimes)
    return dataclasses.replace(tuned, as_sent=choices) if sent_as is not None else tuned


__all__ = [
    "FRONT_AXES",
    "GRID_CALL_SCHEMA",
    "POINT_SCHEMA",
    "Point",
    "Tuning",
    "load_grid",
    "pareto",
    "points",
    "policy_point",
    "results",
    "tune",
    "tune_dataset",
]
