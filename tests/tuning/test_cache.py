"""Pricing a replay under each provider's prompt cache (issue 39, part 6):
OpenAI's 1,024-token floor and 128-token steps, Anthropic's minimum cacheable
length and its 5-minute and 1-hour caches, no cache, several price sheets."""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.errors import ConfigError
from ctxcompact.tuning import PRICE_ROWS, price_row, replay, tune
from ctxcompact.tuning.cache import Sheet, price_calls
from ctxcompact.tuning.reference_billing import bill_prompt
from ctxcompact.tuning.replay import CALL_SCHEMA


def rule(model: str) -> Any:
    return price_row(model).cache


def test_openai_caches_nothing_below_1024_prompt_tokens() -> None:
    openai = rule("gpt-4o")
    assert bill_prompt(1_023, 1_023, 1.0, openai) == (0, 0, 1_023)
    assert bill_prompt(1_024, 1_024, 1.0, openai) == (1_024, 0, 0)
    # a long prompt whose common prefix is under the floor reads nothing
    assert bill_prompt(5_000, 1_023, 1.0, openai) == (0, 0, 5_000)


def test_openai_counts_cached_tokens_in_128_token_steps() -> None:
    openai = rule("gpt-4o-mini")
    assert bill_prompt(3_000, 1_151, 1.0, openai) == (1_024, 0, 1_976)
    assert bill_prompt(3_000, 1_152, 1.0, openai) == (1_152, 0, 1_848)
    assert bill_prompt(3_000, 2_999, 1.0, openai) == (2_944, 0, 56)


def test_anthropic_caches_nothing_under_the_model_s_minimum() -> None:
    haiku = rule("claude-haiku-4-5")  # 4,096 tokens (Sonnet 4: 1,024)
    assert (haiku.min_tokens, rule("claude-sonnet-4").min_tokens) == (4_096, 1_024)
    assert bill_prompt(4_095, 4_000, 1.0, haiku) == (0, 0, 4_095)  # neither read nor written
    assert bill_prompt(4_096, 0, None, haiku) == (0, 4_096, 0)  # written whole
    assert bill_prompt(6_000, 4_095, 1.0, haiku) == (0, 6_000, 0)  # no entry that short
    assert bill_prompt(6_000, 4_096, 1.0, haiku) == (4_096, 1_904, 0)
    assert bill_prompt(1_024, 0, None, rule("claude-sonnet-4")) == (0, 1_024, 0)


def test_entries_expire_after_the_cache_s_lifetime() -> None:
    sonnet = rule("claude-sonnet-4")
    assert bill_prompt(9_000, 8_000, 300.0, sonnet) == (8_000, 1_000, 0)
    assert bill_prompt(9_000, 8_000, 301.0, sonnet) == (0, 9_000, 0)
    assert bill_prompt(9_000, 8_000, 3_600.0, sonnet, "1h") == (8_000, 1_000, 0)
    assert bill_prompt(9_000, 8_000, 3_601.0, sonnet, "1h") == (0, 9_000, 0)
    assert bill_prompt(9_000, 8_000, 301.0, rule("gpt-4o")) == (0, 0, 9_000)
    # no timestamps: taken as within the lifetime
    assert bill_prompt(9_000, 8_000, None, sonnet) == (8_000, 1_000, 0)


def calls(*rows: tuple[int, int, float | None], output: int = 0) -> pa.Table:
    """A per-call table of (prompt, cached, seconds since the previous call)."""
    return pa.Table.from_pylist([
        {"session_id": "s", "call": i, "message_id": f"a{i}", "prompt_tokens": p,
         "cached_tokens": c, "written_tokens": p - c, "output_tokens": output,
         "compacted": False, "summary_input_tokens": 0, "summary_output_tokens": 0,
         "baseline_prompt_tokens": p, "baseline_cached_tokens": c, "removed_facts": 0,
         "kept_facts": 0, "lost": [], "over_window": False, "since_previous_s": gap}
        for i, (p, c, gap) in enumerate(rows)
    ], schema=CALL_SCHEMA)  # fmt: skip


def test_the_one_hour_cache_writes_at_twice_the_input_price() -> None:
    table = calls((10_000, 0, None), (12_000, 10_000, 1_200.0))
    row = price_row("claude-sonnet-4")  # $3 input, $0.30 read, $3.75 5-minute write
    five = price_calls(table, Sheet("claude-sonnet-4", row, "5m"))
    hour = price_calls(table, Sheet("claude-sonnet-4", row, "1h"))
    # 20 minutes apart: the 5-minute cache lost the first prompt, the hour's did not.
    assert (five["cached_tokens"], five["written_tokens"]) == (0, 22_000)
    assert (hour["cached_tokens"], hour["written_tokens"]) == (10_000, 12_000)
    assert five["cost"] == pytest.approx(22_000 * 3.75 / 1e6)
    assert hour["cost"] == pytest.approx((10_000 * 0.30 + 12_000 * 6.00) / 1e6)


def test_cache_off_prices_every_prompt_token_at_the_input_price() -> None:
    table = calls((10_000, 0, None), (12_000, 10_000, 1.0), output=100)
    for model in ("claude-sonnet-4", "gpt-4o"):
        row = price_row(model)
        off = price_calls(table, Sheet(model, row, "off"))
        want = (22_000 * row.price.input + 200 * row.price.output) / 1e6
        assert off["cost"] == pytest.approx(want) == off["baseline_cost"]
        assert off["cached_tokens"] == off["written_tokens"] == 0
        assert off["cost"] > price_calls(table, Sheet(model, row))["cost"]


def step(i: int) -> dict[str, Any]:
    return {"info": {"id": f"a{i}", "role": "assistant", "parentID": "u",
                     "time": {"created": 1_000 * (i + 1)}},
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"f{i}.py"},
                                 "output": f"{i} " * 2_000}}]}  # fmt: skip


RUN = cc.Session.model_validate({"info": {"id": "r"}, "messages": [
    {"info": {"id": "u", "role": "user", "time": {"created": 0}},
     "parts": [{"id": "t", "type": "text", "text": "fix the bug"}]},
    *(step(i) for i in range(10))]})  # fmt: skip
LIMITS = {"context": 12_000, "output": 1_000}
MASKED = cc.CompactionConfig(mask_first=True)


def test_a_replay_under_two_sheets_equals_pricing_it_twice() -> None:
    # one count for every sheet (else each replay counts in its first model's family)
    counted = cc.CompactionConfig(mask_first=True, estimate_method="opencode")
    both = replay(RUN, "swe-agent", limits=LIMITS, config=counted,
                  model=["gpt-4o", "claude-sonnet-4"]).summary  # fmt: skip
    assert both["model"] == "gpt-4o" and list(both["costs"]) == ["gpt-4o", "claude-sonnet-4"]
    for model in ("gpt-4o", "claude-sonnet-4"):
        alone = replay(RUN, "swe-agent", limits=LIMITS, config=counted, model=model).summary
        assert both["costs"][model] == alone["costs"][model]
        if model == "gpt-4o":  # the first sheet is the cost shown
            assert (both["cost"], both["baseline_cost"]) == (alone["cost"], alone["baseline_cost"])
    # OpenAI reads in 128-token steps; Anthropic reads the whole prefix and writes the rest.
    openai, anthropic = both["costs"]["gpt-4o"], both["costs"]["claude-sonnet-4"]
    assert openai["cached_tokens"] % 128 == 0 and openai["written_tokens"] == 0
    assert anthropic["written_tokens"] > 0
    assert anthropic["cached_tokens"] + anthropic["written_tokens"] + anthropic[
        "input_tokens"] == both["prompt_tokens"]  # fmt: skip


def test_tune_prices_every_point_under_every_sheet() -> None:
    result = tune([RUN], {"mask_first": [False, True], "context": [12_000]},
                  limits={"context": 0, "output": 1_000}, model=["claude-sonnet-4", "gpt-4o"],
                  workers=1)  # fmt: skip
    for summary in result.summaries.values():
        assert list(summary["costs"]) == ["claude-sonnet-4", "gpt-4o"]
        assert summary["cost"] == summary["costs"]["claude-sonnet-4"]["cost"]
    assert result.price_row is not None and result.price_row.name == "claude-sonnet-4"


def test_your_own_price_names_its_provider_s_rules() -> None:
    mine = {"house": {"input": 1, "output": 2, "cached_input": 0.5, "provider": "openai"}}
    assert price_row("house", mine).cache.provider == "openai"
    assert price_row("house", {"house": {"input": 1, "output": 2}}).cache.provider == "prefix"
    with pytest.raises(ConfigError, match="price of 'house': provider must be one of openai, "
                       "anthropic, gemini, none, got 'azure'"):  # fmt: skip
        price_row("house", {"house": {"input": 1, "output": 2, "provider": "azure"}})


def test_every_shipped_row_names_its_cache_rule_and_where_it_is_documented() -> None:
    for row in PRICE_ROWS:
        assert row.cache.provider in ("openai", "anthropic", "none"), row.name
        if row.cache.provider != "none":
            assert "https://" in row.cache.source and row.cache.min_tokens >= 1_024, row.name
        if row.cache.provider == "anthropic":  # reads 0.1x, 5-minute writes 1.25x
            assert row.price.cached_input == pytest.approx(row.price.input * 0.1)
            assert row.price.cache_write == pytest.approx(row.price.input * 1.25)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"model": ["gpt-4o", "claude-opus-4-7"]},
         "no price for model 'claude-opus-4-7'.*nearest rows: claude-opus-4-6"),
        ({"model": ["gpt-4o", "gpt-4o"]}, "model 'gpt-4o' is given twice"),
        ({"model": []}, "model is an empty list"),
        ({"model": "gpt-4o", "cache": "2h"}, "cache must be one of 5m, 1h, off"),
        ({"model": ["claude-sonnet-4", "gpt-4o"], "cache": "1h"},
         "the row of 'gpt-4o' is priced by 'openai' rules, which have none"),
    ],
)  # fmt: skip
def test_bad_sheets_are_refused_before_the_replay(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        replay(RUN, limits=LIMITS, **kwargs)


def test_the_report_shows_a_cost_column_per_sheet() -> None:
    pytest.importorskip("matplotlib")
    from ctxcompact.tuning.report import render_report

    result = tune([RUN], {"mask_first": [False, True], "context": [12_000]},
                  limits={"context": 0, "output": 1_000}, model=["gpt-4o", "claude-sonnet-4"],
                  workers=1)  # fmt: skip
    page = render_report(result)
    assert "<th>cost claude-sonnet-4</th>" in page
    assert "claude-sonnet-4: priced by the price table's row &#x27;claude-sonnet-4" in page


def test_a_sheet_gives_the_cache_gate_its_price_ratios() -> None:
    def ratios(model: str, cache: str = "5m") -> tuple[float, float]:
        return Sheet(model, price_row(model), cache).cache_ratios()

    assert ratios("claude-sonnet-4") == pytest.approx((0.1, 1.25))
    assert ratios("claude-sonnet-4", "1h") == pytest.approx((0.1, 2.0))
    assert ratios("gpt-4o-2024-08-06") == pytest.approx((0.5, 1.0))
    assert ratios("gpt-4.1") == pytest.approx((0.25, 1.0))
    assert ratios("gpt-4o-2024-05-13") == ratios("claude-sonnet-4", "off") == (1.0, 1.0)


def test_the_first_sheet_drives_a_cache_aware_replay() -> None:
    """Replay hands its first price sheet to the cache gate: without a cache
    it masks as swe-agent does; under Anthropic's cache it masks less, and
    costs no more than masking every step."""

    def run(policy: str, model: list[str], cache: str = "5m") -> dict[str, Any]:
        return replay(RUN, policy, limits=LIMITS, config=MASKED, model=model,
                      cache=cache).summary  # fmt: skip

    off = run("cache-aware", ["claude-sonnet-4"], "off")
    assert off["prompt_tokens"] == run("swe-agent", ["claude-sonnet-4"], "off")["prompt_tokens"]
    assert off["policy"]["cache_read"] == off["policy"]["cache_write"] == 1.0
    swe = run("swe-agent", ["claude-sonnet-4"])
    anthropic = run("cache-aware", ["claude-sonnet-4", "gpt-4o"])
    assert anthropic["policy"] == "cache-aware"  # the preset's own prices
    assert anthropic["prompt_tokens"] > swe["prompt_tokens"]
    assert anthropic["cost"] <= min(swe["cost"], swe["baseline_cost"])
    # The order of the sheets decides which prices the policy used.
    openai = run("cache-aware", ["gpt-4o", "claude-sonnet-4"])
    assert openai["policy"]["cache_read"] == 0.5


def test_tune_gives_a_cache_aware_point_its_first_sheet_s_prices() -> None:
    grid = {"preset": ["cache-aware"], "mask_first": [True], "context": [12_000]}

    def tuned(model: str, cache: str = "5m") -> dict[str, Any]:
        result = tune([RUN], grid, limits={"context": 0, "output": 1_000}, model=model,
                      cache=cache, workers=1)  # fmt: skip
        return next(iter(result.summaries.values()))

    off = tuned("claude-sonnet-4", "off")
    want = replay(RUN, "cache-aware", limits=LIMITS, config=MASKED, model="claude-sonnet-4",
                  cache="off").summary  # fmt: skip
    assert off["prompt_tokens"] == want["prompt_tokens"]
    assert off["prompt_tokens"] < tuned("claude-sonnet-4")["prompt_tokens"]


def test_the_stated_break_rule_names_the_threshold_applied() -> None:
    """``summary["cache_break_rule"]`` said "under half" while 75% was applied."""
    from ctxcompact.tuning.cache import BREAK_MIN_TOKENS, BREAK_SHARE, CACHE_BREAK

    assert f"under {round(BREAK_SHARE * 100)}%" in CACHE_BREAK
    assert f"{BREAK_MIN_TOKENS:,} tokens" in CACHE_BREAK
