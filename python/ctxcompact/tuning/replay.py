"""Replay stored runs under a policy: what each model call would have been sent.

``replay`` (and ``tune``) run in the engine (``tuning.engine``, the core's
``replay``), which gives the rows described here without the lifecycle; a
summary's call alone is made by the live lifecycle, and the core resumes
after it (``tuning.resume``). ``replay_session`` is the live walk, the
definition the engine is tested equal to (tests/tuning/test_engine_replay.py).

``replay_session`` re-walks a run call by call through the live lifecycle
(``Compactor`` and ``CompactionLoop`` over an in-memory store): before each assistant
message, the loop prepares the context exactly as it would in production
(masking with ``mask_first``, a proactive summary when the estimated context
crosses the threshold, the pivot filter), and the run's own message is then
appended. The run's later actions stay fixed: this is a counterfactual of the
context, not of the agent (an agent that saw less might have acted
differently). The recorded usage belongs to the original run, so only the
proactive check on the estimated context decides compactions. What the run
compacted itself is not replayed: its summaries and compaction markers are
skipped and its stored prune marks (``state.time.compacted``, the
``compacted_at`` column) removed, so a run gives the same baseline and the
same calls whether or not it was pruned or compacted before.

Per call it records the prompt, the part of it identical to the previous
call's prompt prefix (what a cache could serve: each provider's rules, its
lifetime among them, are applied at pricing, ``tuning.cache``), the rest,
the seconds since the previous call, the output, and
whether a compaction ran and why, and whether the prompt was over the input
window (``over_window``: the model would have refused it); the same for the
run without any
compaction (the full history every call, append-only, so every call reads the
previous prompt from the cache). Offline by default: summaries are the
deterministic digest, which costs nothing; with a ``Summarizer`` holding a
client they are real, and their input and output are counted.

Every call whose prompt no longer holds, as they were, messages the previous
prompt held (a summary, a masked output) is scored by
``tuning.retention``: the facts of what it removed, and which of them the
prompt still carries (``removed_facts``, ``kept_facts``, ``lost``; over the
calls, ``compaction_retention``). Every call gets ``retention``: the share of
the facts the run stated so far that its prompt still shows
(``tuning.retention.RunRetention``); ``summary["retention"]`` is its mean
over each session's calls, averaged over the sessions.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, DatasetError, InputTypeError
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import Session
from ctxcompact.policy import Policy
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.transcript import Transcript, unique_sessions
from ctxcompact.transcript.schema import typed_columns
from ctxcompact.tuning.as_sent import (
    AsSent,
    SentBaseline,
    as_sent_baseline,
    choose_baseline,
    parse_as_sent,
)
from ctxcompact.tuning.cache import CACHE_BREAK, Sheet, check_cache, model_names, price_calls
from ctxcompact.tuning.calibrated import (
    CALIBRATION_SCHEMA,
    calibrate_calls,
    recorded_breaks,
    recorded_calls,
)
from ctxcompact.tuning.counts import count_label, with_run_method
from ctxcompact.tuning.engine import engine_calls, message_facts
from ctxcompact.tuning.prices import Price, PriceRow, row_for
from ctxcompact.tuning.recorded import (
    RECORDED_KEYS,
    recorded_lifetimes,
    recorded_totals,
    recorded_usage_table,
)
from ctxcompact.tuning.retention import ranked
from ctxcompact.tuning.walk import replay_session

#: Columns of the per-call table, in order.
CALL_SCHEMA = pa.schema([
    ("session_id", pa.string()),
    ("call", pa.int64()),
    ("message_id", pa.string()),
    *typed_columns(pa.int64(), "prompt_tokens", "cached_tokens", "written_tokens",
                   "output_tokens"),
    ("compacted", pa.bool_()),
    ("reason", pa.string()),
    *typed_columns(pa.int64(), "summary_input_tokens", "summary_output_tokens",
                   "baseline_prompt_tokens", "baseline_cached_tokens", "removed_facts",
                   "kept_facts"),
    ("lost", pa.list_(pa.string())),
    # The share of the facts the run stated so far that this prompt still
    # shows (tuning.retention.RunRetention): comparable between policies.
    ("retention", pa.float64()),
    # The prompt is over the input window (context less the answer's reserve):
    # the model would have refused it (the compactions could not keep up).
    ("over_window", pa.bool_()),
    # Seconds since the session's previous call (null: no timestamps): whether
    # the cache still held the previous prompt is decided at pricing.
    ("since_previous_s", pa.float64()),
])  # fmt: skip

#: The cache lifetime of Anthropic's default cache and OpenAI's (5 minutes).
CACHE_TTL_S = 300.0


@dataclass(frozen=True)
class Replay:
    """One row per model call (``CALL_SCHEMA``), one per session, and totals
    (with costs when a model was named)."""

    calls: pa.Table
    sessions: pa.Table
    summary: dict[str, Any]


def _sessions(data: Session | Transcript | Iterable[Session]) -> list[Session]:
    if isinstance(data, Session):
        return [data]
    if isinstance(data, Transcript):
        return data.to_sessions()
    if isinstance(data, pa.Table):
        return Transcript(data).to_sessions()
    if isinstance(data, (str, bytes, os.PathLike)):
        raise InputTypeError(
            f"replay takes sessions, not a path ({data!r}): read session files with "
            "ctxcompact.formats.read(path), Parquet with pyarrow.parquet.read_table(path), "
            "or run `ctxcompact replay PATH`",
            column="data",
        )  # fmt: skip
    if isinstance(data, Mapping):
        raise InputTypeError("replay takes Sessions, not a dict: Session.model_validate(d) "
                             "reads one", column="data")  # fmt: skip
    if not isinstance(data, Iterable):
        raise InputTypeError(f"replay takes a Session, a list of Sessions, a Transcript or an "
                             f"Arrow table (data), got {type(data).__name__}",
                             column="data")  # fmt: skip
    sessions = list(data)
    for i, s in enumerate(sessions):
        if not isinstance(s, Session):
            raise ConfigError(f"replay takes Sessions or a Transcript; item {i} is a "
                              f"{type(s).__name__}", column="sessions")  # fmt: skip
    return unique_sessions(sessions)


def _table(data: Session | Transcript | Iterable[Session]) -> pa.Table:
    """``data`` as the part-row table (sessions are checked as ``_sessions`` checks them)."""
    if isinstance(data, Transcript):
        return data.to_arrow()
    if isinstance(data, pa.Table):
        return data
    return Transcript.from_sessions(_sessions(data)).to_arrow()


def check_config(config: Any, call: str) -> CompactionConfig:
    """``config`` as a ``CompactionConfig``: one, a dict of its fields, or
    ``None`` (the defaults and the environment)."""
    if config is None:
        return CompactionConfig()
    if isinstance(config, CompactionConfig):
        return config
    if isinstance(config, Mapping):
        options = sorted(str(k) for k in config if k in Policy.model_fields)
        if options and options[0] not in CompactionConfig.model_fields:
            raise ConfigError(f"{call}: config: {options[0]} is a policy option, not a "
                              "CompactionConfig field: pass the policy (policy= or a grid "
                              "key), or config={'policy': {...}}", column=options[0])  # fmt: skip
        try:
            return CompactionConfig.load(**{str(k): v for k, v in config.items()})
        except ConfigError as e:
            said = str(e).removeprefix("configuration: ")
            raise ConfigError(f"{call}: config: {said}", column=e.column or "config") from None
    raise ConfigError(f"{call}: config takes a CompactionConfig or a dict of its fields "
                      "(CompactionConfig.from_file(path) reads a file), got "
                      f"{type(config).__name__}", column="config")  # fmt: skip


def check_number(value: Any, name: str, *, least: float = 0, integer: bool = False) -> None:
    """``ConfigError`` naming ``name`` unless ``value`` is a number (an int when
    ``integer``) of at least ``least``."""
    what = "an integer" if integer else "a number"
    number = isinstance(value, int) or (not integer and isinstance(value, float))
    if isinstance(value, bool) or not number or not float(value) >= least:
        raise ConfigError(f"{name} must be {what} of at least {least:g}, got "
                          f"{type(value).__name__} {value!r}", column=name)  # fmt: skip


def replay(
    data: Session | Transcript | Iterable[Session],
    policy: Policy | str | Mapping[str, Any] | None = None,
    *,
    limits: Limits | Mapping[str, int],
    config: CompactionConfig | Mapping[str, Any] | None = None,
    model: str | Sequence[str] | None = None,
    prices: Mapping[str, Any] | None = None,
    summarizer: Summarizer | None = None,
    system: str | None = None,
    cache: str = "5m",
    cache_ttl_s: float | None = None,
    as_sent: str | Policy | Mapping[str, Any] | AsSent | SentBaseline | None = None,
    calibrate: bool = False,
) -> Replay:
    """Replay every run of ``data`` under ``policy`` (default: the config's).

    A ``policy`` given here is replayed exactly as given; without one, the
    config's policy is, with its ``prune_protect`` / ``prune_minimum`` /
    ``prune_protected_tools`` / ``prune_continue_past_compacted`` applied
    (``CompactionConfig.prune_policy()``, what ``prune`` runs).
    ``summary["policy"]`` is what ran: a preset's name, else its options.

    ``config``: a ``CompactionConfig`` or a dict of its fields.
    ``limits``: the model's window (``{"context": ..., "output": ...}``).
    ``model``: price the calls (``tuning.prices``; the config's ``prices``,
    then ``prices``, override or add models), under each provider's cache
    rules (``tuning.cache``); a list of models prices them under each
    (``summary["costs"]``, one per model; the first is ``summary["cost"]``).
    ``cache``: ``"5m"`` (the providers' default cache), ``"1h"`` (Anthropic's
    1-hour cache) or ``"off"`` (every prompt token at the input price).
    ``cache_ttl_s``: the cache's lifetime in seconds (default: the
    provider's). ``summarizer``: real summaries (default: the offline digest).
    ``as_sent``: the baseline of each run replayed under the policy it was
    sent with (``tuning.as_sent``): ``"auto"`` picks per run the candidate
    nearest its recorded prompt total, ``"none"``, ``"last-N"`` or a policy
    forces one; the choice per run is in ``sessions`` (``as_sent``,
    ``as_sent_reason``) and ``summary["as_sent"]``; a ``SentBaseline``
    (``sent_baseline``) is a choice already made, applied as it is. Default:
    the stored history sent whole. ``calibrate``: each run's prompt estimates
    (baseline and replayed) fitted to the usage its calls recorded
    (``tuning.calibrated``); the fit and the residual per run are in
    ``sessions`` and ``summary["calibration"]``.
    """
    if not isinstance(calibrate, bool):
        raise InputTypeError(f"calibrate must be a bool, got {type(calibrate).__name__}",
                             column="calibrate")  # fmt: skip
    cfg = check_config(config, "replay")
    sent_as = parse_as_sent(as_sent, "as_sent")
    if policy is not None:
        # Replayed as given: the config's prune_protect etc. adjust its own policy only.
        cfg = cfg.with_policy(Policy.load(policy))
    window = check_window(Limits.coerce(limits), cfg)
    if cache_ttl_s is not None:
        check_number(cache_ttl_s, "cache_ttl_s")
    if system is not None and not isinstance(system, str):
        raise InputTypeError(f"system must be a str (the system prompt), got "
                             f"{type(system).__name__}", column="system")  # fmt: skip
    if summarizer is not None and not isinstance(summarizer, Summarizer):
        raise InputTypeError(f"summarizer must be a Summarizer (Summarizer(client, config)), "
                             f"got {type(summarizer).__name__}", column="summarizer")  # fmt: skip
    sheets = sheets_for(model, cfg, prices, cache, cache_ttl_s)
    cfg = priced_policy(cfg, sheets)
    table = _table(data)
    # exact where the model's family is known, unless a method was set
    # (tuning/counts.py); a baseline chosen already says how it was counted
    if isinstance(sent_as, SentBaseline):
        cfg = sent_as.counted(cfg)
    else:
        cfg = with_run_method(cfg, model_names(model), table)
    # The engine walks every session, stopping at each summary's call for the
    # live lifecycle to make it. cached_tokens is the raw common prefix: the cache's
    # lifetime is applied at pricing (since_previous_s).
    facts = message_facts(table)  # each message's record read once, for both
    calls = engine_calls(table, cfg, window, summarizer=summarizer, system=system,
                         schema=CALL_SCHEMA, facts=facts)  # fmt: skip
    if calls.num_rows == 0:
        sessions = Transcript(table).session_ids()
        ids = ", ".join(repr(s) for s in sessions[:3]) + (", ..." if len(sessions) > 3 else "")
        raise DatasetError(f"nothing to replay: no assistant message (model call) in "
                           f"{len(sessions)} session(s) [{ids}]", column="role")  # fmt: skip
    recorded = recorded_usage_table(table, facts)
    choices: list[dict[str, Any]] | None = None
    if sent_as is not None:
        calls, choices = as_sent_baseline(table, calls, recorded, sent_as, cfg, window, system,
                                          calibrate)  # fmt: skip
    fits: dict[str, dict[str, Any]] | None = None
    per_call = recorded_calls(table, facts)
    if calibrate:
        calls, fits = calibrate_calls(table, calls, facts, window.usable(cfg), per_call)
    lifetimes = recorded_lifetimes(recorded)
    # The cache breaks the runs recorded, for the baseline and the policy alike
    # (tuning.cache.cache_breaks).
    calls, breaks = recorded_breaks(table, facts, calls, per_call, lifetimes, calibrate,
                                    CACHE_TTL_S)  # fmt: skip
    ran = cfg.prune_policy()  # what pruned: the label names it, not cfg.policy
    summary = {"policy": ran.name() or ran.model_dump(),
               **summarize_calls(calls, sheets, lifetimes=lifetimes),
               "method": cfg.estimate_method,  # the method counted with (tuning/counts.py)
               "count": count_label(cfg.estimate_method)}  # fmt: skip
    per_session = per_session_table(calls, recorded)
    per_session = per_session.append_column(
        "count", pa.array([summary["count"]] * per_session.num_rows, pa.string())
    )
    if choices is not None:
        by_id = {c["session_id"]: c for c in choices}
        mine = [by_id.get(s, {}) for s in per_session["session_id"].to_pylist()]
        for key in ("as_sent", "as_sent_reason"):
            per_session = per_session.append_column(
                key, pa.array([c.get(key) for c in mine], pa.string()))  # fmt: skip
        summary["as_sent"] = choices
    ids = per_session["session_id"].to_pylist()
    if fits is not None:
        for key, kind in zip(CALIBRATION_SCHEMA.names, CALIBRATION_SCHEMA.types, strict=True):
            per_session = per_session.append_column(
                key, pa.array([fits[s][key] for s in ids], kind))  # fmt: skip
        summary["calibration"] = [{"session_id": s, **fits[s]} for s in ids
                                  if fits[s]["calibration_calls"] is not None]  # fmt: skip
    for key in ("cache_breaks", "cache_break_tokens"):  # null: the run records no reads
        per_session = per_session.append_column(
            key, pa.array([breaks[s][key] if s in breaks else None for s in ids], pa.int64())
        )
    summary["cache_breaks"] = [{"session_id": s, **breaks[s]} for s in ids
                               if s in breaks and breaks[s]["cache_breaks"]]  # fmt: skip
    summary["cache_break_calls"] = sum(b["cache_breaks"] for b in breaks.values())
    summary["cache_break_tokens"] = sum(b["cache_break_tokens"] for b in breaks.values())
    summary["cache_break_rule"] = CACHE_BREAK
    baseline = dict(zip(ids, per_session["baseline_prompt_tokens"].to_pylist(), strict=True))
    summary |= recorded_totals(recorded, baseline)
    return Replay(calls=calls, sessions=per_session, summary=summary)


def sent_baseline(
    data: Session | Transcript | Iterable[Session],
    as_sent: str | Policy | Mapping[str, Any] | AsSent | SentBaseline,
    *,
    limits: Limits | Mapping[str, int],
    config: CompactionConfig | Mapping[str, Any] | None = None,
    model: str | Sequence[str] | None = None,
    system: str | None = None,
) -> SentBaseline:
    """Each run's as-sent choice, made once (``tuning.as_sent``), counted as
    ``replay`` would count it under ``model``: a ``replay(..., as_sent=...)``
    of any policy over these runs (or some of them) applies it as it is, so
    the candidates of a search share one baseline per run."""
    sent_as = parse_as_sent(as_sent, "as_sent")
    if isinstance(sent_as, SentBaseline):
        return sent_as
    assert sent_as is not None
    table = _table(data)
    cfg = with_run_method(check_config(config, "replay"), model_names(model), table)
    window = check_window(Limits.coerce(limits), cfg)
    facts = message_facts(table)
    # The baseline only: nothing pruned, nothing summarized, nothing scored.
    plain = cfg.model_copy(update={"auto": False, "mask_first": False, "prune": False})
    calls = engine_calls(table, plain, window, summarizer=None, system=system,
                         schema=CALL_SCHEMA, facts=facts, retention=False)  # fmt: skip
    recorded = recorded_usage_table(table, facts)
    return choose_baseline(table, calls, recorded, sent_as, cfg, window, system)


_TOKENS = [n for n in CALL_SCHEMA.names if n.endswith("_tokens")]


def per_session_table(calls: pa.Table, recorded: list[dict[str, Any]] | None = None) -> pa.Table:
    """The per-call table summed per session, with ``baseline_written_tokens``
    (the baseline's prompt tokens not read from the previous prompt) and, given
    ``recorded`` (``tuning.recorded.recorded_usage`` per session), what each
    session recorded beside it (null where it recorded nothing) and the gap:
    ``prompt_gap``, the baseline's prompt tokens less the recorded ones."""
    per_session = calls.group_by("session_id", use_threads=False).aggregate(
        [(k, "sum") for k in [*_TOKENS, "removed_facts", "kept_facts"]]
        + [("compacted", "sum"), ("over_window", "sum"), ("call", "count"), ("retention", "mean")]
    )
    names = {"call_count": "calls", "retention_mean": "retention"}
    per_session = per_session.rename_columns(
        [names.get(n, n.removesuffix("_sum")) for n in per_session.column_names]
    )
    per_session = per_session.append_column("baseline_written_tokens", pc.subtract(
        per_session["baseline_prompt_tokens"], per_session["baseline_cached_tokens"]))  # fmt: skip
    if recorded is None:
        return per_session
    by_id = {r["session_id"]: r for r in recorded}
    mine = [by_id.get(sid, {}) for sid in per_session["session_id"].to_pylist()]
    for key in RECORDED_KEYS:
        per_session = per_session.append_column(
            key, pa.array([r.get(key) for r in mine], pa.int64())
        )
    return per_session.append_column(
        "prompt_gap",
        pc.subtract(per_session["baseline_prompt_tokens"], per_session["recorded_prompt_tokens"]),
    )


def price_row_for(model: str | None, config: CompactionConfig,
                  prices: Mapping[str, Any] | None) -> PriceRow | None:  # fmt: skip
    """The price row of ``model`` (``None``: no model named): ``prices``, then
    the config's ``prices`` (named by where they were set), then the shipped
    table."""
    where = config.sources().get("prices", "default")
    return row_for(model, (config.prices, f"the config's prices, from {where}"),
                   (prices, "prices="))  # fmt: skip


def priced_policy(config: CompactionConfig, sheets: Sequence[Sheet]) -> CompactionConfig:
    """``config`` with a cache-aware policy's prices set from the first sheet
    (``Sheet.cache_ratios``); unchanged without a sheet or a cache gate."""
    policy = config.prune_policy()
    if not sheets or not policy.cache_aware:
        return config
    return config.with_policy(policy.with_cache_prices(*sheets[0].cache_ratios()))


def sheets_for(model: str | Sequence[str] | None, config: CompactionConfig,
               prices: Mapping[str, Any] | None, cache: str = "5m",
               cache_ttl_s: float | None = None) -> list[Sheet]:  # fmt: skip
    """A price sheet per model named (none: not priced), each checked up
    front: a model no row prices is a ``ConfigError`` naming the nearest rows,
    and ``cache="1h"`` one naming a row whose provider has no 1-hour cache."""
    check_cache(cache)
    sheets = []
    for name in model_names(model):
        row = price_row_for(name, config, prices)
        assert row is not None
        sheet = Sheet(name, row, cache, cache_ttl_s)
        sheet.write_price()
        sheets.append(sheet)
    return sheets


def session_retention(calls: pa.Table) -> pa.ChunkedArray:
    """Per session, in order of first appearance (as ``group_by`` gives
    them), the mean of its calls' ``retention``."""
    means = calls.group_by("session_id", use_threads=False).aggregate([("retention", "mean")])
    return means["retention_mean"]


def mean_retention(calls: pa.Table) -> float:
    """The comparable retention of a per-call table: each session's mean over
    its calls, averaged over the sessions (1.0 for no call)."""
    if calls.num_rows == 0:
        return 1.0
    missing = calls["retention"].null_count
    if missing:
        raise DatasetError(f"the per-call table has no retention for {missing} of its "
                           f"{calls.num_rows} calls", column="retention")  # fmt: skip
    # fsum: the same figure whatever order the sessions come in (Ray's blocks)
    means = session_retention(calls).to_pylist()
    return math.fsum(means) / len(means)


def summarize_calls(calls: pa.Table,
                    price: Sequence[Sheet] | Price | PriceRow | None = None,
                    model: str | None = None,
                    lifetimes: Mapping[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """Totals of a per-call table (``CALL_SCHEMA``): tokens, compactions,
    retention, the facts lost most often, and costs when price sheets are
    given (``tuning.cache.price_calls``, per call under each sheet's provider
    rules): ``costs`` holds one per model, and the first sheet's ``cost``,
    ``baseline_cost``, ``saved`` and ``price_row`` (the row that priced it)
    are at the top. A bare ``Price`` or ``PriceRow`` is one sheet.
    ``lifetimes``: per run, its cache's lifetime (``price_calls``)."""
    if isinstance(price, Price):
        price = PriceRow(model or "", price, "given", "given")
    if isinstance(price, PriceRow):
        price = [Sheet(model or price.name, price)]
    sheets = list(price or ())
    totals = {k: int(pc.sum(calls[k]).as_py() or 0) for k in _TOKENS}
    removed = int(pc.sum(calls["removed_facts"]).as_py() or 0)
    kept = int(pc.sum(calls["kept_facts"]).as_py() or 0)
    summary: dict[str, Any] = {
        "sessions": len(pc.unique(calls["session_id"])),
        "calls": calls.num_rows,
        "compactions": int(pc.sum(calls["compacted"]).as_py() or 0),
        # Calls whose prompt the model would have refused (over its input window).
        "over_window": int(pc.sum(calls["over_window"]).as_py() or 0),
        **totals,
        # The share of the facts stated so far that a call still shows, averaged
        # over each session's calls, then over the sessions (each weighs the same).
        "retention": mean_retention(calls),
        # Kept / removed facts over every call that removed something (1.0: none did).
        "removed_facts": removed,
        "kept_facts": kept,
        "compaction_retention": kept / removed if removed else 1.0,
        "most_lost": ranked(Counter(pc.list_flatten(calls["lost"]).to_pylist())),
    }
    summary["baseline_written_tokens"] = (
        totals["baseline_prompt_tokens"] - totals["baseline_cached_tokens"]
    )
    if sheets:
        costs = {sheet.model: price_calls(calls, sheet, lifetimes) for sheet in sheets}
        first = costs[sheets[0].model]
        summary |= {"model": sheets[0].model, "cache": sheets[0].cache, "cost": first["cost"],
                    "baseline_cost": first["baseline_cost"], "saved": first["saved"],
                    "price_row": first["price_row"], "costs": costs}  # fmt: skip
    return summary


__all__ = [
    "CACHE_TTL_S",
    "CALL_SCHEMA",
    "Replay",
    "mean_retention",
    "per_session_table",
    "price_row_for",
    "priced_policy",
    "replay",
    "replay_session",
    "sent_baseline",
    "session_retention",
    "sheets_for",
    "summarize_calls",
]
