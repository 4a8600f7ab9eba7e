"""How far the estimate of a call's prompt is from what the provider counted,
before and after self-calibration, on stored runs that recorded usage.

    python benches/calibration.py

- OpenHands runs (../shared/data/transcripts/openhands): every model response
  records its prompt tokens (claude-3-5-sonnet). Each call's estimate is the
  history before it (ctxcompact's model-input estimate); the calibrated one
  predicts it from the earlier calls only (``UsageCalibrator``, online, in
  file order), so no call is fitted on itself.
- SWE-agent runs that report ``tokens_sent`` (the prompt tokens summed over
  the run's calls, gpt-4): the summed estimate of every call of the run,
  before calibration only: three runs (one with a call it did not store)
  are too few to fit on some and test on the others.

Errors are relative to the reported count: median and maximum of |error|.

``python benches/calibration.py --estimators`` compares the fits the batch
could use (``replay --calibrate`` fits each run on its own calls): per run
with per-call usage (OpenHands, the Claude Code samples), the pairs of
``replay``'s baseline estimate of each call and its recorded prompt, fitted
by each estimator on all the run's calls, and the per-call relative error
after (p50 / p95 over the calls of all runs): the ratio of sums, a
least-squares line, and Theil-Sen (the core's rule, ``_core.calibration_fit``).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import ctxcompact as cc
from ctxcompact import formats
from ctxcompact.errors import CompactionError
from ctxcompact.live import UsageCalibrator
from ctxcompact.live.calibration import prompt_tokens

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
METHODS = ("opencode", "o200k", "cl100k")


def _prefix_estimates(session: cc.Session, method: str) -> dict[str, int]:
    """Per message id: the estimate of everything before it."""
    config = cc.CompactionConfig(estimate_method=method)
    per = cc.estimate_messages(cc.Transcript.from_sessions([session]), config).messages
    tokens = dict(zip(per["message_id"].to_pylist(), per["tokens"].to_pylist(), strict=True))
    out, total = {}, 0
    for message in session.messages:
        out[message.info.id] = total
        total += tokens.get(message.info.id, 0)
    return out


def openhands(method: str) -> tuple[list[float], list[float]]:
    calibrator = UsageCalibrator(min_calls=2)
    before, after = [], []
    for path in sorted((DATA / "openhands").glob("*.json")):
        session = formats.read(path)[0]
        prefix = _prefix_estimates(session, method)
        for message in session.messages:
            tokens = getattr(message.info, "tokens", None)
            if message.info.role != "assistant" or tokens is None:
                continue
            reported, estimated = prompt_tokens(tokens), prefix[message.info.id]
            model = str(message.info.modelID)
            if calibrator.fit(model) is not None:  # predicted before it is learnt
                before.append(abs(estimated - reported) / reported)
                after.append(abs(calibrator.calibrate(model, estimated) - reported) / reported)
            calibrator.observe(model, estimated=estimated, reported=reported)
    return before, after


def swe_agent(method: str) -> tuple[list[float], list[float]]:
    runs = []
    for path in sorted((DATA / "swe-agent").rglob("*.traj")):
        stats = json.loads(path.read_bytes()).get("info", {}).get("model_stats") or {}
        if not stats.get("tokens_sent"):
            continue
        session = formats.read(path)[0]
        prefix = _prefix_estimates(session, method)
        calls = [m for m in session.messages if m.info.role == "assistant"]
        estimated = sum(prefix[m.info.id] for m in calls)
        runs.append((estimated, len(calls), stats["tokens_sent"], stats["api_calls"]))
    return [abs(e - sent) / sent for e, _, sent, _ in runs], []


def _fmt(errors: list[float]) -> str:
    if not errors:
        return "n/a"
    return f"{100 * statistics.median(errors):.1f}% / {100 * max(errors):.1f}%"


def _replay_pairs(folder: Path, pattern: str) -> list[list[tuple[int, int]]]:
    """Per run with per-call usage: (baseline estimate, recorded prompt) per call."""
    from ctxcompact.tuning import replay
    from ctxcompact.tuning.calibrated import recorded_prompts
    from ctxcompact.tuning.engine import message_facts

    runs = []
    for path in sorted(folder.rglob(pattern)):
        try:
            table = formats.read_sessions(path, on_error="skip").table
        except CompactionError:
            continue
        try:
            calls = replay(table, limits={"context": 1_000_000, "output": 8_000}).calls
        except CompactionError:  # nothing to replay
            continue
        recorded = recorded_prompts(table, message_facts(table))
        by_run: dict[str, list[tuple[int, int]]] = {}
        for row in calls.to_pylist():
            key = (row["session_id"], row["message_id"])
            if key in recorded:
                by_run.setdefault(key[0], []).append((row["baseline_prompt_tokens"],
                                                      recorded[key]))  # fmt: skip
        runs += [pairs for pairs in by_run.values() if len(pairs) >= 2]
    return runs


def _errors(pairs: list[tuple[int, int]], slope: float, intercept: float) -> list[float]:
    return [abs(max(0, math.ceil(slope * e + intercept)) - r) / r for e, r in pairs]


def _fits(pairs: list[tuple[int, int]]) -> dict[str, tuple[float, float]]:
    from ctxcompact._core import calibration_fit

    es, rs = [e for e, _ in pairs], [r for _, r in pairs]
    ratio = sum(rs) / sum(es)
    mean_e, mean_r = statistics.fmean(es), statistics.fmean(rs)
    spread = sum((e - mean_e) ** 2 for e in es)
    ls = sum((e - mean_e) * (r - mean_r) for e, r in pairs) / spread if spread else 1.0
    got = calibration_fit(es, rs)
    assert got is not None
    return {"none": (1.0, 0.0), "ratio of sums": (ratio, 0.0),
            "least squares": (ls, mean_r - ls * mean_e), "Theil-Sen (core)": got[:2]}  # fmt: skip


def _quantiles(errors: list[float]) -> str:
    q = statistics.quantiles(errors, n=20, method="inclusive")
    return f"{100 * statistics.median(errors):.1f}% / {100 * q[18]:.1f}%"


def estimators() -> int:
    claude = DATA.parent / "formats" / "claude-code"
    corpora = (("OpenHands", DATA / "openhands", "*.json"),
               ("Claude Code samples", claude, "*.jsonl"))  # fmt: skip
    print("| corpus | runs (calls) | estimator | per-call error p50 / p95 |")
    print("|---|---|---|---|")
    for name, folder, pattern in corpora:
        runs = _replay_pairs(folder, pattern)
        calls = sum(len(r) for r in runs)
        pooled: dict[str, list[float]] = {}
        for pairs in runs:
            for label, (slope, intercept) in _fits(pairs).items():
                pooled.setdefault(label, []).extend(_errors(pairs, slope, intercept))
        for label, errors in pooled.items():
            print(f"| {name} | {len(runs)} ({calls}) | {label} | {_quantiles(errors)} |")
    return 0


def main() -> int:
    if "--estimators" in sys.argv[1:]:
        return estimators()
    print("| runs | estimate | calls | before: median / max error | after |")
    print("|---|---|---|---|---|")
    for name, measure in (("OpenHands (claude-3-5-sonnet)", openhands),
                          ("SWE-agent (tokens_sent)", swe_agent)):  # fmt: skip
        for method in METHODS:
            before, after = measure(method)
            print(f"| {name} | {method} | {len(before)} | {_fmt(before)} | {_fmt(after)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
