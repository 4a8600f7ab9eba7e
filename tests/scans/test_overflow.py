"""Overflow, the proactive budget and the model registry, on values computed by hand.

Tables are built directly with pyarrow (docs/schema.md; tests/tables.py), so
these tests do not depend on the pydantic models.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import ConfigError, InvalidUsageError, UnknownModelError
from ctxcompact.scans import (
    OverflowOptions,
    OverflowReport,
    TokenBudget,
    Usage,
    is_overflow,
)

K = 1_000


@pytest.mark.parametrize(
    ("limits", "usage", "want"),
    [
        ({"context": 128 * K, "output": 8 * K}, {"input": 50 * K, "output": 5 * K}, False),
        ({"context": 128 * K, "output": 8 * K}, {"input": 120 * K, "output": 10 * K}, True),
        ({"context": 100 * K, "output": 32 * K}, {"input": 75 * K, "output": 5 * K}, True),
        ({"context": 200 * K, "output": 32 * K}, {"input": 110 * K, "output": 0}, False),
        ({"context": 0}, {"input": 10_000 * K, "output": 0}, False),
        ({"context": 0, "input": 0, "output": 0}, {"input": 1, "output": 1}, False),
    ],
)
def test_overflow_design_cases(limits: dict, usage: dict, want: bool) -> None:
    assert is_overflow(usage, limits) is want


def test_check_overflow_numbers() -> None:
    # 128k/-/8k: usable = 128000 - 8000 = 120000; count = 120000 + 10000 (+ cache read 0)
    report = cc.check_overflow(
        {"input": 120 * K, "output": 10 * K}, {"context": 128 * K, "output": 8 * K}
    )
    assert report == OverflowReport(overflow=True, count=130_000, usable=120_000)
    # output 0 means unknown: reserve the 32k cap
    report = cc.check_overflow({"input": 1, "output": 2}, {"context": 100 * K})
    assert (report.count, report.usable, report.overflow) == (3, 68_000, False)
    # output above the cap is capped at 32k
    report = cc.check_overflow({"input": 1, "output": 2}, {"context": 200 * K, "output": 64 * K})
    assert report.usable == 168_000
    # limit.input, when set, is the usable size
    report = cc.check_overflow({"input": 1, "output": 0}, {"context": 400 * K, "input": 272 * K})
    assert report.usable == 272_000


def test_count_includes_cache_read_not_write_or_reasoning() -> None:
    usage = {
        "input": 1_000,
        "output": 200,
        "reasoning": 50_000,
        "cache": {"read": 3_000, "write": 40_000},
    }
    report = cc.check_overflow(usage, {"context": 100 * K, "output": 4 * K})
    assert report.count == 4_200
    assert report.usable == 96_000
    opts = OverflowOptions(count_cache_write=True)
    report = cc.check_overflow(usage, {"context": 100 * K, "output": 4 * K}, opts)
    assert report.count == 44_200


def test_overflow_boundary_strict_then_inclusive() -> None:
    limits = {"context": 100 * K, "output": 20 * K}  # usable 80000
    at = {"input": 80 * K, "output": 0}
    assert is_overflow(at, limits) is False
    assert is_overflow({"input": 80 * K, "output": 1}, limits) is True
    assert is_overflow(at, limits, OverflowOptions(inclusive=True)) is True
    below = {"input": 79_999, "output": 0}
    assert is_overflow(below, limits, OverflowOptions(inclusive=True)) is False


def test_overflow_auto_false_disables() -> None:
    usage = {"input": 1_000 * K, "output": 0}
    limits = {"context": 100 * K}
    assert is_overflow(usage, limits) is True
    assert is_overflow(usage, limits, OverflowOptions(auto=False)) is False
    # any config object with the attribute works too
    assert is_overflow(usage, limits, SimpleNamespace(auto=False)) is False


def test_overflow_count_cache_write_option() -> None:
    limits = {"context": 100 * K, "output": 20 * K}  # usable 80000
    usage = {"input": 70 * K, "output": 0, "cache": {"read": 5 * K, "write": 10 * K}}
    assert is_overflow(usage, limits) is False  # 75000
    assert is_overflow(usage, limits, OverflowOptions(count_cache_write=True)) is True


def test_overflow_reserved_option() -> None:
    limits = {"context": 400 * K, "input": 272 * K, "output": 128 * K}
    usage = {"input": 260 * K, "output": 0}
    assert cc.check_overflow(usage, limits).usable == 272_000
    assert is_overflow(usage, limits) is False
    # "default": min(20000, min(128000, 32000)) = 20000 -> 252000
    report = cc.check_overflow(usage, limits, OverflowOptions(reserved="default"))
    assert (report.usable, report.overflow) == (252_000, True)
    # "default" with a small output limit: min(20000, 8000) = 8000
    small = {"context": 400 * K, "input": 272 * K, "output": 8 * K}
    assert cc.check_overflow(usage, small, OverflowOptions(reserved="default")).usable == 264_000
    # an explicit integer headroom
    report = cc.check_overflow(usage, limits, OverflowOptions(reserved=5_000))
    assert report.usable == 267_000
    # reserved only applies when limit.input is set
    no_input = {"context": 200 * K, "output": 8 * K}
    assert cc.check_overflow(usage, no_input, OverflowOptions(reserved=5_000)).usable == 192_000
    with pytest.raises(ConfigError):
        cc.check_overflow(usage, limits, OverflowOptions(reserved="lots"))


def test_overflow_clamp_usable_option() -> None:
    limits = {"context": 10 * K, "output": 32 * K}  # usable 10000 - 32000 = -22000
    usage = {"input": 0, "output": 0}
    assert cc.check_overflow(usage, limits).usable == -22_000
    assert is_overflow(usage, limits) is True
    clamped = cc.check_overflow(usage, limits, OverflowOptions(clamp_usable=True))
    assert (clamped.usable, clamped.overflow) == (0, False)
    both = OverflowOptions(clamp_usable=True, inclusive=True)
    assert is_overflow(usage, limits, both) is True


def test_overflow_output_token_max_option() -> None:
    limits = {"context": 100 * K, "output": 64 * K}
    opts = OverflowOptions(output_token_max=16 * K)
    assert cc.check_overflow({"input": 0, "output": 0}, limits, opts).usable == 84_000


def test_usage_and_limits_as_objects() -> None:
    usage = SimpleNamespace(
        input=120 * K, output=10 * K, reasoning=0, cache=SimpleNamespace(read=1, write=0)
    )
    limits = SimpleNamespace(context=128 * K, input=None, output=8 * K)
    report = cc.check_overflow(usage, limits)
    assert report == OverflowReport(overflow=True, count=130_001, usable=120_000)
    no_cache = SimpleNamespace(input=50 * K, output=5 * K)
    assert is_overflow(no_cache, limits) is False
    assert is_overflow(Usage(input=50 * K, output=5 * K), cc.Limits(context=128 * K)) is False


def test_usage_missing_input_or_output() -> None:
    with pytest.raises(InvalidUsageError):
        is_overflow({"output": 5}, {"context": 100})
    with pytest.raises(InvalidUsageError):
        is_overflow({"input": 5}, {"context": 100})
    with pytest.raises(InvalidUsageError):
        is_overflow(SimpleNamespace(output=5), {"context": 100})
    with pytest.raises(InvalidUsageError):
        is_overflow(None, {"context": 100})


@pytest.mark.parametrize(
    "usage",
    [
        {"input": -1, "output": 0},
        {"input": 0, "output": -1},
        {"input": 0, "output": 0, "reasoning": -1},
        {"input": 0, "output": 0, "cache": {"read": -5}},
        {"input": 0, "output": 0, "cache": {"write": -5}},
    ],
)
def test_negative_usage_is_invalid(usage: dict) -> None:
    with pytest.raises(InvalidUsageError) as info:
        is_overflow(usage, {"context": 100 * K})
    assert isinstance(info.value, cc.CompactionError)
    assert isinstance(info.value, ValueError)


def test_negative_usage_is_invalid_even_when_unlimited() -> None:
    with pytest.raises(InvalidUsageError):
        is_overflow({"input": -1, "output": 0}, {"context": 0})


@pytest.mark.parametrize(
    "usage",
    [
        {"input": True, "output": 0},
        {"input": 0, "output": False},
        {"input": 0, "output": 0, "cache": {"read": True}},
        {"input": 1.5, "output": 0},
        {"input": "100", "output": 0},
    ],
)
def test_non_integer_usage_is_rejected(usage: dict) -> None:
    with pytest.raises(InvalidUsageError):
        is_overflow(usage, {"context": 100 * K})


@pytest.mark.parametrize("limits", [{"context": True}, {"context": -1}, {"output": 5}, None])
def test_bad_limits_are_config_errors(limits: Any) -> None:
    with pytest.raises(ConfigError):
        is_overflow({"input": 0, "output": 0}, limits)


def test_huge_counts_do_not_wrap_around() -> None:
    # 2**62 + 2**62 does not fit in an i64: the count must not wrap to a negative
    # number and report "no overflow" for usage far above any window.
    usage = {"input": 2**62, "output": 2**62}
    try:
        over = is_overflow(usage, {"context": 1_000})
    except InvalidUsageError:
        return
    assert over is True


def test_counts_beyond_int64_raise_a_compaction_error() -> None:
    # errors.py: "Every error ctxcompact raises is a CompactionError".
    with pytest.raises(cc.CompactionError):
        is_overflow({"input": 2**63, "output": 0}, {"context": 1_000})


def test_budget_seed_004_defaults() -> None:
    budget = TokenBudget(
        context=128_000,
        history_tokens=0,
        system_tokens=2_000,
        output_reserve=4_000,
        safety_buffer=5_000,
    )
    assert budget.available == 117_000
    assert budget.threshold_tokens == 93_600
    assert budget.utilization == 0.0
    assert not budget.should_compact
    at = TokenBudget(128_000, 93_600, 2_000, 4_000, 5_000)
    assert at.should_compact and not at.is_critical
    below = TokenBudget(128_000, 93_599, 2_000, 4_000, 5_000)
    assert not below.should_compact


@pytest.mark.parametrize(
    ("history", "compact", "critical"),
    [(0, False, False), (799, False, False), (800, True, False), (949, True, False),
     (950, True, True), (1_000, True, True), (5_000, True, True)],
)  # fmt: skip
def test_budget_thresholds(history: int, compact: bool, critical: bool) -> None:
    budget = TokenBudget(context=1_000, history_tokens=history)
    assert budget.available == 1_000
    assert budget.utilization == history / 1_000
    assert budget.should_compact is compact
    assert budget.is_critical is critical


def test_budget_available_and_utilization() -> None:
    budget = TokenBudget(
        context=10_000, history_tokens=3_000, system_tokens=1_000, output_reserve=2_000,
        safety_buffer=1_000,
    )  # fmt: skip
    assert budget.available == 6_000
    assert budget.utilization == 0.5
    assert budget.threshold_tokens == 4_800
    custom = TokenBudget(context=1_000, history_tokens=600, proactive=0.5, critical=0.7)
    assert custom.should_compact and not custom.is_critical


def test_budget_unlimited_and_exhausted() -> None:
    unlimited = TokenBudget(context=0, history_tokens=10**9)
    assert unlimited.utilization == 0.0
    assert not unlimited.should_compact
    full = TokenBudget(context=1_000, history_tokens=1, system_tokens=600, output_reserve=600)
    assert full.available == 0
    assert full.utilization == float("inf")
    assert full.should_compact and full.is_critical


def test_budget_threshold_tokens_is_where_compaction_starts() -> None:
    # available 10, proactive 0.85: seed 004 floors 8.5 to a threshold of 8 and
    # compacts at tokens >= threshold; threshold_tokens documents itself as the
    # "history size at which proactive compaction starts".
    budget = TokenBudget(context=10, history_tokens=0, proactive=0.85, critical=0.95)
    threshold = budget.threshold_tokens
    assert threshold == 8
    at = TokenBudget(context=10, history_tokens=threshold, proactive=0.85, critical=0.95)
    assert at.should_compact


@pytest.mark.parametrize(
    "kwargs",
    [
        {"proactive": 0.0},
        {"proactive": 0.95, "critical": 0.95},
        {"proactive": 0.96},
        {"critical": 1.01},
        {"proactive": -0.1},
        {"context": -1},
        {"history_tokens": -1},
        {"system_tokens": -1},
        {"output_reserve": -1},
        {"safety_buffer": -1},
    ],
)
def test_budget_invalid_config(kwargs: dict) -> None:
    base: dict[str, Any] = {"context": 1_000, "history_tokens": 0}
    base.update(kwargs)
    with pytest.raises(ConfigError):
        TokenBudget(**base)


def test_budget_critical_may_be_one() -> None:
    budget = TokenBudget(context=100, history_tokens=100, critical=1.0)
    assert budget.is_critical


def test_registry_builtin_lookup() -> None:
    reg = cc.ModelRegistry()
    assert reg.get("gpt-4o") == cc.Limits(context=128_000, input=0, output=16_384)
    assert reg.get("gpt-4") == cc.Limits(context=8_192, output=8_192)
    assert reg.get("claude-3-5-sonnet-20240620").context == 200_000
    assert "gpt-4o" in reg
    assert "nope" not in reg


def test_registry_unknown_model() -> None:
    reg = cc.ModelRegistry()
    with pytest.raises(UnknownModelError) as info:
        reg.get("my-private-model")
    assert isinstance(info.value, cc.CompactionError)
    assert isinstance(info.value, LookupError)
    assert "my-private-model" in str(info.value)


@pytest.mark.parametrize(("model", "limits"), [
    ("gpt-5", cc.Limits(context=400_000, input=272_000, output=128_000)),
    ("gpt-5-mini", cc.Limits(context=400_000, input=272_000, output=128_000)),
    ("gpt-4.1", cc.Limits(context=1_047_576, output=32_768)),
    ("o3", cc.Limits(context=200_000, output=100_000)),
    ("o4-mini", cc.Limits(context=200_000, output=100_000)),
    ("claude-sonnet-4-5", cc.Limits(context=200_000, output=64_000)),
    ("claude-haiku-4-5", cc.Limits(context=200_000, output=64_000)),
    ("claude-opus-4-1", cc.Limits(context=200_000, output=32_000)),
    ("claude-3-7-sonnet-latest", cc.Limits(context=200_000, output=64_000)),
])  # fmt: skip
def test_registry_current_models_and_undated_aliases(model: str, limits: cc.Limits) -> None:
    # Issue 10 item 20: current model names resolved to nothing.
    reg = cc.ModelRegistry()
    assert reg.get(model) == limits
    assert model in reg


def test_registry_alias_is_the_newest_dated_entry_of_exactly_that_name() -> None:
    reg = cc.ModelRegistry({"acme-7-20240101": {"context": 1}, "acme-7-20250101": {"context": 2},
                            "acme-7-1-20260101": {"context": 3}}, builtin=False)  # fmt: skip
    assert reg.resolve("acme-7") == "acme-7-20250101"  # not acme-7-1
    assert reg.get("acme-7").context == 2
    assert reg.get("acme-7-1").context == 3
    assert cc.ModelRegistry().resolve("claude-sonnet-4") == "claude-sonnet-4-20250514"
    assert cc.ModelRegistry().get("claude-sonnet-4-5", betas=["context-1m-2025-08-07"]).context == (
        1_000_000
    )
    reg.register("acme-7", {"context": 9})  # an exact name wins over the alias
    assert reg.get("acme-7").context == 9


def test_registry_unknown_model_lists_close_matches() -> None:
    with pytest.raises(UnknownModelError) as info:
        cc.ModelRegistry().get("claude-sonet-4.5")
    assert "close matches: claude-sonnet-4-5" in str(info.value)
    with pytest.raises(UnknownModelError, match="close matches: gpt-5"):
        cc.ModelRegistry().get("GPT5")


def test_registry_explicit_default() -> None:
    reg = cc.ModelRegistry()
    assert reg.get("my-private-model", {"context": 32_000, "output": 4_000}) == cc.Limits(
        context=32_000, output=4_000
    )
    assert reg.get("x", cc.Limits(context=1)) == cc.Limits(context=1)
    # a known model ignores the default
    assert reg.get("gpt-4", {"context": 1}).context == 8_192


def test_registry_register_and_no_builtin() -> None:
    reg = cc.ModelRegistry({"mine": {"context": 50_000, "input": 40_000}}, builtin=False)
    assert len(reg) == 1
    assert reg.get("mine") == cc.Limits(context=50_000, input=40_000, output=0)
    assert "gpt-4o" not in reg
    reg.register("other", SimpleNamespace(context=1_000, input=None, output=100))
    assert reg.get("other") == cc.Limits(context=1_000, output=100)


def test_registry_from_json(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    path.write_text(
        json.dumps({"m1": {"context": 64_000, "output": 8_000}, "gpt-4o": {"context": 1}})
    )
    reg = cc.ModelRegistry.from_file(path)
    assert reg.get("m1") == cc.Limits(context=64_000, output=8_000)
    assert reg.get("gpt-4o") == cc.Limits(context=1)  # the file overrides the builtin
    assert reg.get("gpt-4").context == 8_192
    only = cc.ModelRegistry.from_file(str(path), builtin=False)
    assert len(only) == 2
    # the registry's limits feed is_overflow directly
    assert is_overflow({"input": 56_001, "output": 0}, reg.get("m1")) is True
    assert is_overflow({"input": 56_000, "output": 0}, reg.get("m1")) is False


def test_registry_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "limits.toml"
    path.write_text(
        '["my-model"]\ncontext = 128000\noutput = 8192\n\n'
        '["big.model"]\ncontext = 1000000\ninput = 900000\n'
    )
    reg = cc.ModelRegistry.from_file(path, builtin=False)
    assert len(reg) == 2
    assert reg.get("my-model") == cc.Limits(context=128_000, output=8_192)
    assert reg.get("big.model") == cc.Limits(context=1_000_000, input=900_000)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bad.json", "{not json"),
        ("bad.toml", "[model\ncontext = "),
        ("list.json", "[1, 2]"),
        ("neg.json", '{"m": {"context": -5}}'),
        ("neg.toml", "[m]\ncontext = 1000\noutput = -1\n"),
        ("nocontext.json", '{"m": {"output": 5}}'),
        ("str.json", '{"m": {"context": "128k"}}'),
        ("bool.json", '{"m": {"context": true}}'),
    ],
)
def test_registry_bad_files(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError):
        cc.ModelRegistry.from_file(path)


def test_registry_negative_limit_in_code() -> None:
    with pytest.raises(ConfigError) as info:
        cc.ModelRegistry({"m": {"context": 1_000, "input": -1}})
    assert "'m'" in str(info.value)
    reg = cc.ModelRegistry()
    with pytest.raises(ConfigError):
        reg.register("m", {"context": -1})
    with pytest.raises(ConfigError):
        reg.get("unknown", {"context": -1})


def test_context_1m_beta_raises_the_window_of_models_that_accept_it() -> None:
    registry = cc.ModelRegistry()
    sonnet = "claude-sonnet-4-20250514"
    assert registry.get(sonnet).context == 200_000
    assert registry.get(sonnet, betas=["context-1m-2025-08-07"]).context == 1_000_000
    assert registry.get(sonnet, betas=["other-beta"]).context == 200_000
    assert registry.get("gpt-4o", betas=["context-1m-2025-08-07"]).context == 128_000
    assert registry.get(sonnet, betas=["context-1m-2025-08-07"]).output == 64_000
