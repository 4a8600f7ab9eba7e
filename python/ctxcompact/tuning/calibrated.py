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

from ctxcompact._core import calibration_fit
from ctxcompact.live.calibration import Calibration, prompt_tokens
from ctxcompact.models import TokenUsage
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


def recorded_prompts(table: pa.Table, facts: Facts) -> dict[tuple[str, str], int]:
    """(session id, message id) -> the prompt tokens its call recorded, for
    each assistant message with a usage that is not all zeros."""
    if not facts.starts:
        return {}
    sids = plain_strings(table.column("session_id")).take(pa.array(facts.starts)).to_pylist()
    out: dict[tuple[str, str], int] = {}
    for sid, info in zip(sids, facts.infos, strict=True):
        if not info or info.get("role") != "assistant" or not info.get("tokens"):
            continue
        sent = prompt_tokens(TokenUsage.model_validate(info["tokens"]))
        if sent:
            out[(sid, info["id"])] = sent
    return out


def _calibrated(fit: Calibration, prompt: int, cached: int) -> tuple[int, int]:
    whole = fit.apply(prompt)
    return whole, min(fit.apply(cached), whole) if cached else 0


def calibrate_calls(table: pa.Table, calls: pa.Table, facts: Facts,
                    usable: int | None) -> tuple[pa.Table, dict[str, dict[str, Any]]]:  # fmt: skip
    """``calls`` with each run's prompt estimates calibrated from its recorded
    usage (``over_window`` of the calibrated prompt against ``usable``, the
    input window: ``Limits.usable``), and per session id its fit
    (``CALIBRATION_SCHEMA``; every run of ``calls`` has an entry, null where
    it recorded no call)."""
    recorded = recorded_prompts(table, facts)
    rows = calls.to_pylist()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    fits: dict[str, dict[str, Any]] = {}
    for sid, mine in by_session.items():
        pairs = [(r["baseline_prompt_tokens"], recorded[(sid, r["message_id"])])
                 for r in mine if (sid, r["message_id"]) in recorded]  # fmt: skip
        got = calibration_fit([e for e, _ in pairs], [r for _, r in pairs]) if pairs else None
        fits[sid] = dict.fromkeys(CALIBRATION_SCHEMA.names)
        if got is None:
            continue
        slope, intercept, n, before50, before95, after50, after95 = got
        values = (n, slope, intercept, before50, before95, after50, after95)
        fits[sid] = dict(zip(CALIBRATION_SCHEMA.names, values, strict=True))
        fit = Calibration(slope, intercept, n, after50, after95)
        for r in mine:
            r["prompt_tokens"], r["cached_tokens"] = _calibrated(
                fit, r["prompt_tokens"], r["cached_tokens"])  # fmt: skip
            r["written_tokens"] = r["prompt_tokens"] - r["cached_tokens"]
            r["over_window"] = usable is not None and r["prompt_tokens"] > usable
            r["baseline_prompt_tokens"], r["baseline_cached_tokens"] = _calibrated(
                fit, r["baseline_prompt_tokens"], r["baseline_cached_tokens"])  # fmt: skip
    return pa.Table.from_pylist(rows, schema=calls.schema), fits


__all__ = ["CALIBRATION_SCHEMA", "calibrate_calls", "recorded_prompts"]
