"""Replay calibrated from recorded usage (issue 40, part 4): each run's
prompt estimates fitted to the prompt tokens its calls recorded, by the
core's rule (the live ``UsageCalibrator``'s), with the residual before and
after; runs without per-call records are left as estimated."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact._core import calibration_fit
from ctxcompact.errors import InputTypeError
from ctxcompact.live.calibration import Calibration
from ctxcompact.tuning import replay

WIDE = {"context": 1_000_000, "output": 8_000}


def chat_run(sid: str, steps: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test " * 20}]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"command": "cat f{i}.py"}}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}",
                         "content": f"line {i}\n" * (40 + 37 * i)})  # fmt: skip
    messages.append({"role": "assistant", "content": "done"})
    return {"id": sid, "messages": messages}


def with_usage(run: dict[str, Any], calls: list[dict[str, Any]], slope: float,
               amount: int) -> dict[str, Any]:  # fmt: skip
    """``run`` with each call's usage: ``slope`` x its estimate + ``amount``."""
    estimate = {c["message_id"]: c["baseline_prompt_tokens"] for c in calls}
    out = []
    for i, m in enumerate(run["messages"]):
        mid = f"{run['id']}-m{i:06d}"
        if m["role"] == "assistant":
            m = {**m, "usage": {"prompt_tokens": int(slope * estimate[mid]) + amount,
                                "completion_tokens": 10}}  # fmt: skip
        out.append(m)
    return {**run, "messages": out}


def test_a_run_is_replayed_in_its_provider_tokens() -> None:
    run = chat_run("r1", 8)
    plain = replay(formats.read(run, "openai-chat"), limits=WIDE)
    estimated = plain.calls.to_pylist()
    session = formats.read(with_usage(run, estimated, 1.3, 2_500), "openai-chat")
    result = replay(session, limits=WIDE, calibrate=True)
    row = result.sessions.to_pylist()[0]
    assert row["calibration_calls"] == len(estimated) == 9
    assert row["calibration_slope"] == pytest.approx(1.3, abs=0.01)
    assert row["calibration_intercept"] == pytest.approx(2_500, abs=20)
    assert row["residual_p95"] < 0.01 < row["residual_before_p50"]
    got = calibration_fit(
        [c["baseline_prompt_tokens"] for c in estimated],
        [int(1.3 * c["baseline_prompt_tokens"]) + 2_500 for c in estimated],
    )
    assert got is not None and (row["calibration_slope"], row["calibration_intercept"]) == got[:2]
    fit = Calibration(got[0], got[1], got[2])
    for before, after in zip(estimated, result.calls.to_pylist(), strict=True):
        assert after["baseline_prompt_tokens"] == fit.apply(before["baseline_prompt_tokens"])
        assert after["prompt_tokens"] == fit.apply(before["prompt_tokens"])
        cached = before["cached_tokens"]
        assert after["cached_tokens"] == (min(fit.apply(cached), after["prompt_tokens"])
                                          if cached else 0)  # fmt: skip
        assert after["written_tokens"] == after["prompt_tokens"] - after["cached_tokens"]
    # the recorded usage stands beside the calibrated baseline: the gap closes
    assert abs(row["prompt_gap"]) < 0.01 * row["recorded_prompt_tokens"]
    assert abs(plain.sessions.to_pylist()[0]["baseline_prompt_tokens"]
               - row["recorded_prompt_tokens"]) > 0.2 * row["recorded_prompt_tokens"]  # fmt: skip
    (entry,) = result.summary["calibration"]
    assert entry["session_id"] == "r1" and entry["calibration_slope"] == got[0]


def test_a_call_is_over_the_window_when_its_calibrated_prompt_is() -> None:
    from ctxcompact.config import CompactionConfig
    from ctxcompact.scans.overflow import Limits

    run = chat_run("tight", 6)
    estimated = replay(formats.read(run, "openai-chat"), limits=WIDE).calls.to_pylist()
    session = formats.read(with_usage(run, estimated, 3.0, 0), "openai-chat")
    limits = {"context": 2 * max(c["prompt_tokens"] for c in estimated), "output": 1_000}
    usable = Limits.coerce(limits).usable(CompactionConfig())
    assert usable is not None
    plain = replay(session, limits=limits)
    assert not any(plain.calls["over_window"].to_pylist())
    calls = replay(session, limits=limits, calibrate=True).calls.to_pylist()
    assert any(c["over_window"] for c in calls)
    assert all(c["over_window"] == (c["prompt_tokens"] > usable) for c in calls)


def test_a_run_without_per_call_records_is_left_as_estimated() -> None:
    plain_run, run = chat_run("plain", 3), chat_run("used", 3)
    estimated = replay(formats.read(run, "openai-chat"), limits=WIDE).calls.to_pylist()
    sessions = [*formats.read(plain_run, "openai-chat"),
                *formats.read(with_usage(run, estimated, 2.0, 0), "openai-chat")]  # fmt: skip
    alone = replay(formats.read(plain_run, "openai-chat"), limits=WIDE)
    result = replay(sessions, limits=WIDE, calibrate=True)
    rows = {r["session_id"]: r for r in result.sessions.to_pylist()}
    assert all(rows["plain"][k] is None for k in ("calibration_calls", "calibration_slope",
                                                  "residual_p50"))  # fmt: skip
    assert rows["plain"]["baseline_prompt_tokens"] == (
        alone.sessions.to_pylist()[0]["baseline_prompt_tokens"])  # fmt: skip
    assert rows["used"]["calibration_slope"] == pytest.approx(2.0, abs=0.01)
    assert [c["session_id"] for c in result.summary["calibration"]] == ["used"]
    # without calibrate nothing changes and no fit is reported
    off = replay(sessions, limits=WIDE)
    assert "calibration" not in off.summary and "calibration_slope" not in off.sessions.schema.names


def test_calibrate_must_be_a_bool() -> None:
    with pytest.raises(InputTypeError, match="calibrate must be a bool"):
        replay(formats.read(chat_run("r", 1), "openai-chat"), limits=WIDE,
               calibrate="yes")  # type: ignore[arg-type]  # fmt: skip


def test_the_residual_is_the_relative_error_after_the_fit() -> None:
    estimated, reported = [1000, 2000, 3000, 4000, 5000], [1600, 2400, 3900, 4200, 5500]
    got = calibration_fit(estimated, reported)
    assert got is not None
    slope, intercept, calls, b50, b95, a50, a95 = got
    errors = sorted(abs(max(0, math.ceil(slope * e + intercept)) - r) / r
                    for e, r in zip(estimated, reported, strict=True))  # fmt: skip
    raw = sorted(abs(e - r) / r for e, r in zip(estimated, reported, strict=True))
    assert calls == 5 and (a50, b50) == (errors[2], raw[2])
    assert a95 == pytest.approx(errors[3] + 0.8 * (errors[4] - errors[3]))
    assert b95 == pytest.approx(raw[3] + 0.8 * (raw[4] - raw[3]))


def test_the_cli_reports_each_calibrated_run(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from cli_run import invoke

    run = chat_run("cli-run", 5)
    estimated = replay(formats.read(run, "openai-chat"), limits=WIDE).calls.to_pylist()
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(with_usage(run, estimated, 1.5, 1_000)) + "\n")
    args = ("replay", str(path), "--context", "1000000", "--calibrate")
    code, out, _ = invoke(monkeypatch, capsys, *args, "--json")
    assert code == 0
    (fit,) = json.loads(out)["calibration"]
    assert fit["session_id"] == "cli-run" and fit["calibration_slope"] == pytest.approx(1.5, 0.01)
    code, text, _ = invoke(monkeypatch, capsys, *args)
    assert code == 0 and "calibrated runs: 1" in text and "cli-run: 6 calls" in text


def with_reads(run: dict[str, Any], calls: list[dict[str, Any]], broken: int | None,
               reads: bool = True) -> dict[str, Any]:  # fmt: skip
    """``run`` with each call's usage as OpenAI records it: its prompt (the
    estimate plus 2,000 tokens of system prompt and tools) and, with
    ``reads``, ``cached_tokens``: the previous prompt, rounded down to
    128-token steps, except call ``broken``, which read only the system
    prompt (the provider's cache missed)."""
    estimate = {c["message_id"]: c["baseline_prompt_tokens"] + 2_000 for c in calls}
    out: list[dict[str, Any]] = []
    previous, call = 0, 0
    for i, m in enumerate(run["messages"]):
        mid = f"{run['id']}-m{i:06d}"
        if m["role"] == "assistant":
            usage: dict[str, Any] = {"prompt_tokens": estimate[mid], "completion_tokens": 10}
            read = 1_920 if call in (0, broken) else previous
            if reads:
                usage["prompt_tokens_details"] = {"cached_tokens": read - read % 128}
            m = {**m, "usage": usage}
            previous, call = estimate[mid], call + 1
        out.append(m)
    return {**run, "messages": out}


def test_an_openai_log_shows_a_cache_miss_as_a_break_and_no_reads_change_nothing() -> None:
    run = chat_run("oa", 9)
    estimated = replay(formats.read(run, "openai-chat"), limits=WIDE).calls.to_pylist()
    broken = replay(formats.read(with_reads(run, estimated, 6), "openai-chat"), limits=WIDE,
                    model="gpt-4o", calibrate=True)  # fmt: skip
    intact = replay(formats.read(with_reads(run, estimated, None), "openai-chat"), limits=WIDE,
                    model="gpt-4o", calibrate=True)  # fmt: skip
    (row,) = broken.sessions.to_pylist()
    assert (row["cache_breaks"], intact.sessions.to_pylist()[0]["cache_breaks"]) == (1, 0)
    assert broken.summary["cache_breaks"][0]["cache_break_calls"] == [6]
    got, was = broken.calls.to_pylist(), intact.calls.to_pylist()
    # call 6 reads only what precedes the history, as the first call read
    assert got[6]["baseline_cached_tokens"] == got[6]["cached_tokens"] == 1_920
    assert was[6]["baseline_cached_tokens"] > got[6]["baseline_cached_tokens"]
    assert [c for i, c in enumerate(got) if i != 6] == [c for i, c in enumerate(was) if i != 6]
    # the same log without cached_tokens: no reads recorded, no break, nothing changes
    plain = replay(formats.read(with_reads(run, estimated, 6, reads=False), "openai-chat"),
                   limits=WIDE, model="gpt-4o")  # fmt: skip
    unbroken = replay(formats.read(with_reads(run, estimated, None, reads=False),
                                   "openai-chat"), limits=WIDE, model="gpt-4o")  # fmt: skip
    assert plain.sessions.to_pylist()[0]["cache_breaks"] is None
    assert plain.summary["cache_breaks"] == [] and plain.summary["cache_break_calls"] == 0
    assert plain.calls.equals(unbroken.calls)
