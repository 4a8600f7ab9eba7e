"""The replay's estimates calibrated from the usage each run recorded
(``replay(..., calibrate=True)``, ``ctxcompact replay --calibrate``).

Per run, each call whose assistant message recorded its usage
(``tuning.recorded``: OpenCode's tokens; Claude Code's, Anthropic's,
OpenHands', an OpenAI chat or Responses log's usage) pairs the baseline's
estimate of that call's prompt with the prompt tokens the provider counted
(``live.calibration.prompt_tokens``). The core fits ``reported ~ slope x
estimate + intercept`` from those pairs (``_core.calibration_fit``, the rule
the live ``UsageCalibrator`` uses) and gives the per-call relative error
before and after; the run's prompt estimates, baseline and replayed (prompt,
cached, written), are then the calibrated ones (``Calibration.apply``), so
costs and savings are in the provider's tokens, and a call is over the
window when its calibrated prompt is. The replay itself (what the policy
removed, when it compacted) ran on the estimates. A run without per-call
records (SWE-agent's totals only, or nothing) is left as estimated, its fit
null.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact._core import calibration_fit
from ctxcompact.formats.source import claude_code_compact_boundary
from ctxcompact.live.calibration import Calibration, prompt_tokens
from ctxcompact.models import TokenUsage
from ctxcompact.tuning.cache import cache_breaks
from ctxcompact.tuning.engine import Facts, plain_strings

#: Per session: the fit and the residual (null: no per-call record).
CALIBRATION_SCHEMA = pa.schema([
    ("calibration_calls", pa.int64()),
    ("calibration_slope", pa.float64()),
    ("calibration_intercept", pa.float64()),
    ("residual_before_p50", pa.float64()),
    ("residual_before_p95", pa.float64()),
    ("residual_p50", pa.float64()),
    ("residual_p95", pa.float64()),
])  # fmt: skip


def recorded_calls(table: pa.Table, facts: Facts) -> dict[tuple[str, str], tuple[int, int]]:
    """(session id, message id) -> the prompt tokens its call recorded and
    how many of them it read from the cache, for each assistant message with a
    usage that is not all zeros."""
    if not facts.starts:
        return {}
    sids = plain_strings(table.column("session_id")).take(pa.array(facts.starts)).to_pylist()
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for sid, info in zip(sids, facts.infos, strict=True):
        if not info or info.get("role") != "assistant" or not info.get("tokens"):
            continue
        usage = TokenUsage.model_validate(info["tokens"])
        if sent := prompt_tokens(usage):
            out[(sid, info["id"])] = (sent, usage.cache.read)
    return out


def own_compactions(table: pa.Table, facts: Facts) -> tuple[set[tuple[str, str]], set[str]]:
    """The run's own compactions, whose small recorded reads are its policy,
    not cache breaks: (session id, message id) of each call after a Claude
    Code ``compact_boundary`` (``as_sent="own"``) or a summary message of the
    run's own (the ``summary`` column), and the sessions that carry their
    own prune marks (``compacted_at``: the prompt's middle changed where the
    run pruned, which the replay does not place)."""
    if not facts.starts:
        return set(), set()
    index = pa.array(facts.starts)
    sids = plain_strings(table.column("session_id")).take(index).to_pylist()
    summaries = (table.column("summary").take(index).to_pylist()
                 if "summary" in table.column_names else [None] * len(sids))  # fmt: skip
    pruned: set[str] = set()
    if "compacted_at" in table.column_names:
        marked = pc.is_valid(table.column("compacted_at"))
        pruned = set(plain_strings(table.column("session_id").filter(marked)).to_pylist())
    out: set[tuple[str, str]] = set()
    pending: set[str] = set()
    for sid, info, summary in zip(sids, facts.infos, summaries, strict=True):
        if not info:
            continue
        if summary or claude_code_compact_boundary(info.get("source")):
            pending.add(sid)
        elif sid in pending and info.get("role") == "assistant":
            out.add((sid, info["id"]))
            pending.discard(sid)
    return out, pruned


def recorded_breaks(table: pa.Table, facts: Facts, calls: pa.Table,
                    recorded: dict[tuple[str, str], tuple[int, int]],
                    lifetimes: dict[str, float], calibrated: bool,
                    ttl_s: float) -> tuple[pa.Table, dict[str, dict[str, Any]]]:  # fmt: skip
    """``tuning.cache.cache_breaks`` of ``calls`` (a replay's, or a grid
    point's) from the per-call reads the runs of ``table`` recorded
    (``recorded_calls``), leaving out the calls after a run's own compaction
    (``own_compactions``); a call sharing nothing reads the run's first
    recorded read when ``calibrated`` (``CACHED_PREFIX``), else nothing."""
    if not any(read for _, read in recorded.values()):
        return calls, {}
    own, pruned = own_compactions(table, facts)
    usable = {k: v for k, v in recorded.items() if k not in own and k[0] not in pruned}
    prefixes = first_reads(calls, recorded) if calibrated else {}
    return cache_breaks(calls, usable, lifetimes, prefixes, ttl_s)


def recorded_prompts(table: pa.Table, facts: Facts) -> dict[tuple[str, str], int]:
    """(session id, message id) -> the prompt tokens its call recorded, for
    each assistant message with a usage that is not all zeros."""
    return {k: sent for k, (sent, _) in recorded_calls(table, facts).items()}


def _calibrated(fit: Calibration, prompt: int, cached: int, prefix: int) -> tuple[int, int]:
    """A call's prompt and cached tokens calibrated. A prompt that shares
    nothing with the previous one (the run's first call, the first after a
    compaction) still reads the cached prefix the transcript does not hold
    (the system prompt and tools, in the fit's intercept): ``prefix``, what
    the run's first call read from the cache (``CACHED_PREFIX``)."""
    whole = fit.apply(prompt)
    return whole, min(fit.apply(cached) if cached else prefix, whole)


#: The rule ``_calibrated`` applies to a prompt the previous call did not start.
CACHED_PREFIX = (
    "the prompt a call sends that its transcript does not hold (the system prompt and "
    "tools) is the calibration's intercept; a call that shares no message with the "
    "previous prompt reads as much of it from the cache as the run's first call read"
)


def first_reads(calls: pa.Table,
                recorded: dict[tuple[str, str], tuple[int, int]]) -> dict[str, int]:  # fmt: skip
    """Per session id of ``calls``: what its first call recorded reading from
    the cache (0: no record), the prefix a prompt sharing nothing with the
    previous one reads once calibrated (``CACHED_PREFIX``)."""
    out: dict[str, int] = {}
    sids, mids = calls["session_id"].to_pylist(), calls["message_id"].to_pylist()
    for sid, mid in zip(sids, mids, strict=True):
        if sid not in out:
            first = recorded.get((sid, mid))
            out[sid] = first[1] if first is not None else 0
    return out


def calibrate_calls(table: pa.Table, calls: pa.Table, facts: Facts, usable: int | None,
                    recorded: dict[tuple[str, str], tuple[int, int]] | None = None,
                    ) -> tuple[pa.Table, dict[str, dict[str, Any]]]:  # fmt: skip
    """``calls`` with each run's prompt estimates calibrated from its recorded
    usage (``over_window`` of the calibrated prompt against ``usable``, the
    input window: ``Limits.usable``), and per session id its fit
    (``CALIBRATION_SCHEMA``; every run of ``calls`` has an entry, null where
    it recorded no call). A call whose prompt shares nothing with the
    previous one reads the prefix the run's first call read
    (``CACHED_PREFIX``). ``recorded``: ``recorded_calls(table, facts)``,
    when read already."""
    recorded = recorded if recorded is not None else recorded_calls(table, facts)
    prefixes = first_reads(calls, recorded)
    rows = calls.to_pylist()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    fits: dict[str, dict[str, Any]] = {}
    for sid, mine in by_session.items():
        pairs = [(r["baseline_prompt_tokens"], recorded[(sid, r["message_id"])][0])
                 for r in mine if (sid, r["message_id"]) in recorded]  # fmt: skip
        got = calibration_fit([e for e, _ in pairs], [r for _, r in pairs]) if pairs else None
        fits[sid] = dict.fromkeys(CALIBRATION_SCHEMA.names)
        if got is None:
            continue
        slope, intercept, n, before50, before95, after50, after95 = got
        values = (n, slope, intercept, before50, before95, after50, after95)
        fits[sid] = dict(zip(CALIBRATION_SCHEMA.names, values, strict=True))
        fit = Calibration(slope, intercept, n, after50, after95)
        prefix = prefixes[sid]
        for r in mine:
            r["prompt_tokens"], r["cached_tokens"] = _calibrated(
                fit, r["prompt_tokens"], r["cached_tokens"], prefix)  # fmt: skip
            r["written_tokens"] = r["prompt_tokens"] - r["cached_tokens"]
            r["over_window"] = usable is not None and r["prompt_tokens"] > usable
            r["baseline_prompt_tokens"], r["baseline_cached_tokens"] = _calibrated(
                fit, r["baseline_prompt_tokens"], r["baseline_cached_tokens"], prefix)  # fmt: skip
    return pa.Table.from_pylist(rows, schema=calls.schema), fits


__all__ = [
    "CACHED_PREFIX",
    "CALIBRATION_SCHEMA",
    "calibrate_calls",
    "first_reads",
    "own_compactions",
    "recorded_breaks",
    "recorded_calls",
    "recorded_prompts",
]
