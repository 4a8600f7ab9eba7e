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
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import ctxcompact as cc
from ctxcompact import formats
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


def main() -> int:
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
