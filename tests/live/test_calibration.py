"""Self-calibration from reported usage: the ratio per model, and budgets that
use it once enough calls are seen."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.live import UsageCalibrator
from ctxcompact.live.calibration import prompt_tokens
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.loop import CompactionLoop
from ctxcompact.live.store import MemoryStore
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import estimate_chat_messages


def test_no_scaling_before_enough_calls() -> None:
    cal = UsageCalibrator(min_calls=3)
    assert cal.observe("m", estimated=1000, reported=1300)
    assert cal.observe("m", estimated=2000, reported=2600)
    assert cal.fit("m") is None and cal.calibrate("m", 500) == 500
    cal.observe("m", estimated=4000, reported=5200)
    fit = cal.fit("m")
    assert fit is not None and fit.slope == pytest.approx(1.3) and fit.intercept == pytest.approx(0)
    assert cal.calibrate("m", 500) == 650
    assert cal.calibrate("other", 500) == 500  # per model


def test_a_fixed_amount_the_estimate_never_sees_is_learnt() -> None:
    """Tool schemas and templates the provider adds: reported = 1.1 x estimate + 3000."""
    cal = UsageCalibrator(min_calls=3)
    for est in (100, 900, 2500, 4000):
        cal.observe("m", estimated=est, reported=round(1.1 * est) + 3000)
    fit = cal.fit("m")
    assert fit is not None
    assert fit.slope == pytest.approx(1.1, abs=0.01) and fit.intercept == pytest.approx(3000, abs=5)
    assert cal.calibrate("m", 10_000) == pytest.approx(14_000, abs=10)


def test_one_odd_call_does_not_move_the_fit() -> None:
    cal = UsageCalibrator(min_calls=3)
    for est, reported in ((1000, 1200), (2000, 2400), (3000, 9900), (4000, 4800), (5000, 6000)):
        cal.observe("m", estimated=est, reported=reported)
    assert cal.calibrate("m", 10_000) == pytest.approx(12_000, rel=0.01)


def test_calls_of_one_size_give_the_added_amount() -> None:
    cal = UsageCalibrator(min_calls=2)
    for reported in (1500, 1510, 1490):
        cal.observe("m", estimated=1000, reported=reported)
    fit = cal.fit("m")
    assert fit is not None and (fit.slope, fit.intercept) == (1.0, 500)


def test_the_window_forgets_old_calls() -> None:
    cal = UsageCalibrator(min_calls=2, window=4)
    for est in (1000, 2000, 3000, 4000):
        cal.observe("m", estimated=est, reported=est)
    for est in (1000, 2000, 3000, 4000):  # the model changed: every call now counts 1.5x
        cal.observe("m", estimated=est, reported=est * 3 // 2)
    fit = cal.fit("m")
    assert fit is not None and fit.slope == pytest.approx(1.5) and cal.calls("m") == 4


def test_a_wild_slope_is_kept_in_range() -> None:
    cal = UsageCalibrator(min_calls=2)
    cal.observe("m", estimated=1000, reported=100)
    cal.observe("m", estimated=2000, reported=90_000)
    fit = cal.fit("m")
    assert fit is not None and fit.slope == 4.0


def test_empty_calls_are_not_learnt() -> None:
    cal = UsageCalibrator(min_calls=1)
    assert not cal.observe("m", estimated=0, reported=100)
    assert not cal.observe("m", estimated=100, reported=0)
    assert cal.fit("m") is None and cal.calls("m") == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "m", "estimated": -1, "reported": 5}, "estimated tokens of model 'm'"),
        ({"model": "", "estimated": 5, "reported": 5}, "model must be a non-empty string"),
    ],
)
def test_bad_observations(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        UsageCalibrator().observe(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match", "column"),
    [
        ({"model": "m", "estimated": 5, "reported": 2.5}, "reported tokens of model 'm' "
         "must be an integer, got float", "reported"),
        ({"model": "m", "estimated": True, "reported": 5}, "estimated .* got bool", "estimated"),
        ({"model": "m", "estimated": "5", "reported": 5}, "estimated .* got str", "estimated"),
        ({"model": 5, "estimated": 5, "reported": 5}, "model must be a str, got int", "model"),
        ({"model": None, "estimated": 5, "reported": 5}, "got NoneType", "model"),
    ],
)  # fmt: skip
def test_observations_of_the_wrong_kind_are_input_type_errors(
    kwargs: dict[str, Any], match: str, column: str
) -> None:
    # were ConfigError, where calibrate (and the rest of the live API) says InputTypeError
    with pytest.raises(InputTypeError, match=match) as e:
        UsageCalibrator().observe(**kwargs)
    assert e.value.column == column


def test_observe_takes_any_integer_as_calibrate_does() -> None:
    np = pytest.importorskip("numpy")
    cal = UsageCalibrator(min_calls=1)
    assert cal.observe("m", estimated=np.int64(1000), reported=np.int32(1300))
    assert cal.state()["calls"] == {"m": [[1000, 1300]]}
    assert type(cal.state()["calls"]["m"][0][0]) is int  # JSON-able
    assert UsageCalibrator.from_state(cal.state()).calls("m") == 1


def test_bad_settings() -> None:
    with pytest.raises(ConfigError, match="min_calls must be a positive integer"):
        UsageCalibrator(min_calls=0)
    with pytest.raises(ConfigError, match="larger than window"):
        UsageCalibrator(min_calls=10, window=5)


def test_state_round_trips_through_json() -> None:
    cal = UsageCalibrator(min_calls=2, window=8)
    for est, rep in ((100, 120), (200, 250), (300, 330)):
        cal.observe("a/b", estimated=est, reported=rep)
    again = UsageCalibrator.from_state(json.loads(json.dumps(cal.state())))
    assert again.state() == cal.state() and again.fit("a/b") == cal.fit("a/b")
    with pytest.raises(ConfigError, match="unknown field"):
        UsageCalibrator.from_state({"ratios": {}})
    with pytest.raises(ConfigError, match="calls of model 'x'"):
        UsageCalibrator.from_state({"calls": {"x": [[1, "two"]]}})
    with pytest.raises(ConfigError, match="calls of model 'x'"):
        UsageCalibrator.from_state({"calls": {"x": [[0, 5]]}})


def test_prompt_tokens_count_cache_reads_and_writes() -> None:
    assert prompt_tokens({"input": 5, "output": 9, "cache": {"read": 100, "write": 20}}) == 125


class _Client:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse("## Session Summary\nnotes", "stop")


def _first_compaction(calibrator: UsageCalibrator | None, ratio: float) -> int:
    """Steps until the loop compacts, with a provider that counts ``ratio``
    times the estimate of what it was sent."""
    store = MemoryStore()
    sid = store.create_session()
    config = CompactionConfig()
    compactor = Compactor(store, Summarizer(_Client(), config), config=config,
                          limits={"context": 100_000, "output": 8_000}, calibrator=calibrator,
                          model="m1")  # fmt: skip
    loop = CompactionLoop(compactor, system="sys")
    for step in range(60):
        u = user(f"request {step}")
        store.append_message(sid, u)
        messages = loop.before_call(sid)
        if store.records(sid):
            return step
        sent = estimate_chat_messages(messages)
        reported = round(sent * ratio)
        loop.after_step(sid, tool_reply(u.id, "x" * 8_000, tokens={"input": reported,
                                                                   "output": 10}))  # fmt: skip
    raise AssertionError("never compacted")


def test_the_budget_uses_the_calibrated_figure() -> None:
    cal = UsageCalibrator(min_calls=3)
    plain = _first_compaction(None, 1.6)
    calibrated = _first_compaction(cal, 1.6)
    # The provider counts 1.6x: the calibrated budget sees the window fill
    # sooner, before the provider reports an overflow.
    assert calibrated < plain
    fit = cal.fit("m1")
    assert fit is not None and fit.slope == pytest.approx(1.6, rel=0.01)
    assert cal.calls("m1") == calibrated


def test_the_model_named_by_the_reply_is_the_key() -> None:
    store = MemoryStore()
    sid = store.create_session()
    config = CompactionConfig()
    cal = UsageCalibrator(min_calls=1)
    compactor = Compactor(store, Summarizer(_Client(), config), config=config,
                          limits={"context": 100_000, "output": 8_000}, calibrator=cal)  # fmt: skip
    loop = CompactionLoop(compactor)
    u = user("go")
    store.append_message(sid, u)
    sent = estimate_chat_messages(loop.before_call(sid))
    reply = tool_reply(u.id, "out", tokens={"input": sent * 2, "output": 1})
    reply.info.modelID, reply.info.providerID = "gpt-x", "openai"
    loop.after_step(sid, reply)
    assert cal.calibrate("openai/gpt-x", 1000) == 1000 + sent
    assert compactor.model_of(store.load(sid)) == "openai/gpt-x"


OPENHANDS = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "openhands"


@pytest.mark.skipif(not OPENHANDS.is_dir(), reason="needs ../shared/data")
def test_stored_runs_with_usage_are_predicted_from_earlier_calls() -> None:
    """OpenHands runs record each call's prompt tokens; the stored history
    misses the system prompt and tool schemas (~3.4k tokens). Predicting each
    call from the earlier ones only closes that gap."""
    import ctxcompact as cc
    from ctxcompact import formats

    cal = UsageCalibrator(min_calls=2)
    raw, calibrated = [], []
    for path in sorted(OPENHANDS.glob("*.json")):
        session = formats.read(path)[0]
        per = cc.estimate_messages(cc.Transcript.from_sessions([session])).messages
        tokens = dict(zip(per["message_id"].to_pylist(), per["tokens"].to_pylist(), strict=True))
        history = 0
        for message in session.messages:
            usage = getattr(message.info, "tokens", None)
            if message.info.role == "assistant" and usage is not None:
                reported, model = prompt_tokens(usage), str(message.info.modelID)
                if cal.fit(model) is not None:
                    raw.append(abs(history - reported) / reported)
                    calibrated.append(abs(cal.calibrate(model, history) - reported) / reported)
                cal.observe(model, estimated=history, reported=reported)
            history += tokens.get(message.info.id, 0)
    assert len(calibrated) >= 6
    assert statistics.median(raw) > 0.5
    assert statistics.median(calibrated) < 0.05 and max(calibrated) < 0.15


def test_the_fit_is_the_core_rule_the_reference_states() -> None:
    """``UsageCalibrator`` fits by ``_core.calibration_fit`` (one rule with
    ``replay --calibrate``), which gives what the pure-Python reference (the
    calibrator's own rule before it moved to the core) gives, on random
    calls: factors, amounts, odd calls, estimates too close for a slope."""
    import random

    from ctxcompact._core import calibration_fit
    from ctxcompact.scans import reference

    rng = random.Random(39)
    for _ in range(300):
        n = rng.randint(1, 40)
        factor, amount = rng.uniform(0.2, 5.0), rng.randint(-500, 20_000)
        estimated = [rng.choice((rng.randint(1, 200_000), rng.randint(1_000, 1_010), 0))
                     for _ in range(n)]  # fmt: skip
        reported = [max(0, int(factor * e + amount + rng.gauss(0, 300))) for e in estimated]
        got = calibration_fit(estimated, reported)
        assert got == reference.calibration_fit(estimated, reported), (estimated, reported)
        cal = UsageCalibrator(min_calls=1, window=64)
        for e, r in zip(estimated, reported, strict=True):
            cal.observe("m", estimated=e, reported=r)
        fit = cal.fit("m")
        if got is None:
            assert fit is None
        else:
            assert fit is not None
            assert (fit.slope, fit.intercept, fit.calls, fit.residual_p50, fit.residual_p95) == (
                got[0], got[1], got[2], got[5], got[6])  # fmt: skip
