"""The price table (issue 37): every row names its source and when it was
read, a dated snapshot is priced by its own row (never as its family), a
model no row prices is an error naming the nearest rows, and what priced a
replay is said."""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import ConfigError
from ctxcompact.tuning import PRICE_ROWS, PRICES, Price, price_row, replay, tune
from ctxcompact.tuning.prices import nearest_rows

WIDE = {"context": 200_000, "output": 8_000}


def session(steps: int = 4, chars: int = 6_000) -> cc.Session:
    """A task, then ``steps`` assistant steps, each reading a file, a second
    apart (so every call but the first reads the previous prompt from cache)."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user", "time": {"created": 0}},
         "parts": [{"id": "t0", "type": "text", "text": "fix the bug"}]},
    ]  # fmt: skip
    for i in range(steps):
        messages.append({
            "info": {"id": f"a{i}", "role": "assistant", "time": {"created": (i + 1) * 1_000},
                     "tokens": {"input": 0, "output": 50}},
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"f{i}.py"},
                                 "output": f"line {i} " * (chars // 8)}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": "s1"}, "messages": messages})


def test_every_row_names_its_source_and_when_it_was_read() -> None:
    names = [n for row in PRICE_ROWS for n in (row.name, *row.snapshots)]
    assert len(names) == len(set(names)), "a name priced by two rows"
    for row in PRICE_ROWS:
        assert row.source and row.read, row.name
        # a row is either read from a page (a URL) or says plainly it is not
        assert row.source.startswith("https://") or row.source.startswith("unverified"), row.name
        assert min(row.price.input, row.price.output) > 0 and row.price.cached_input >= 0


def test_anthropic_rows_follow_its_cache_multipliers() -> None:
    # Anthropic's pricing page: cache hits 0.1x and 5-minute writes 1.25x the input price.
    for row in PRICE_ROWS:
        if row.name.startswith("claude-"):
            p = row.price
            assert p.cached_input == pytest.approx(0.1 * p.input), row.name
            assert p.cache_write == pytest.approx(1.25 * p.input), row.name


def test_the_models_these_sessions_use_have_rows() -> None:
    # Issue 37 item 8: claude-opus-4-5 / -4-6 and the GPT-5 family had none.
    for model in ("claude-opus-4-5", "claude-opus-4-5-20251101", "claude-opus-4-6"):
        assert price_row(model).price == Price(5.00, 0.50, 6.25, 25.00)
    assert price_row("gpt-5-mini-2025-08-07").price == Price(0.25, 0.025, 0.25, 2.00)
    assert price_row("gpt-5-nano").price.output == 0.40
    assert price_row("claude-sonnet-4-6").name == "claude-sonnet-4-6"


def test_a_dated_snapshot_is_priced_by_its_own_row() -> None:
    """Before, gpt-4o-2024-05-13 was priced as gpt-4o ($2.50 / $1.25 cached /
    $10): its list price is $5 / $15, with no prompt caching."""
    row = price_row("gpt-4o-2024-05-13")
    assert row.name == "gpt-4o-2024-05-13" and row.price != PRICES["gpt-4o"]
    assert (row.price.input, row.price.output) == (5.00, 15.00)
    # no caching: a cache read costs what a fresh token does
    assert row.price.cached_input == row.price.cache_write == row.price.input
    # a snapshot its family's source names is priced by the family's row
    assert price_row("gpt-4o-2024-08-06").name == "gpt-4o"
    assert price_row("claude-sonnet-4-20250514").name == "claude-sonnet-4"


def test_a_model_without_caching_gets_no_cache_discount() -> None:
    counted = {"estimate_method": "opencode"}  # one count, whatever the model's family
    calls = replay(session(), limits=WIDE, model="gpt-4o-2024-05-13", config=counted)
    s = calls.summary
    assert s["cached_tokens"] > 0  # the calls did read a cached prefix
    assert s["cost"] == pytest.approx((s["prompt_tokens"] * 5 + s["output_tokens"] * 15) / 1e6)
    family = replay(session(), limits=WIDE, model="gpt-4o", config=counted).summary
    assert family["cost"] < s["cost"] / 2  # the family's price would have been half, and less
    # the user's own price without cached_input has no discount either
    own = replay(session(), limits=WIDE, model="mine", config=counted,
                 prices={"mine": {"input": 5, "output": 15}}).summary  # fmt: skip
    assert own["cost"] == pytest.approx(s["cost"])


@pytest.mark.parametrize(
    ("model", "nearest"),
    [
        # a dated snapshot no row lists: its family first
        ("gpt-4o-2024-11-20", ["gpt-4o", "gpt-4o-mini", "gpt-4o-2024-05-13"]),
        ("gpt-5", ["gpt-5-mini", "gpt-5-nano", "gpt-5-codex"]),
        # the nearest version first
        ("claude-opus-4-7", ["claude-opus-4-6", "claude-opus-4-5", "claude-opus-4-1"]),
        ("claude-sonnet-4-7-20260101", ["claude-sonnet-4-6", "claude-sonnet-4-5",
                                        "claude-sonnet-4"]),
        # a typo: the name closest as a string
        ("claude-sonet-4", ["claude-sonnet-4", "claude-sonnet-4-5", "claude-sonnet-4-6"]),
        ("claud-sonnet-4", ["claude-sonnet-4", "claude-sonnet-4-5", "claude-sonnet-4-6"]),
        ("llama-3-70b", []),
    ],
)  # fmt: skip
def test_nearest_rows(model: str, nearest: list[str]) -> None:
    names = [row.name for row in PRICE_ROWS]
    assert nearest_rows(model, names) == nearest


def test_an_unknown_model_names_the_nearest_rows_and_how_to_price_it() -> None:
    with pytest.raises(ConfigError) as caught:
        price_row("gpt-4o-2024-11-20")
    message = str(caught.value)
    assert "no price for model 'gpt-4o-2024-11-20' (a dated snapshot is priced only by" in message
    assert "nearest rows: gpt-4o," in message and "prices=" in message
    assert caught.value.column == "prices"
    # nothing near: every row is named
    with pytest.raises(ConfigError, match=r"no price for model 'llama-3'; rows: claude-3-5-haiku"):
        price_row("llama-3")
    # the user's own names count as rows
    with pytest.raises(ConfigError, match="nearest rows: house-model"):
        price_row("house-modl", {"house-model": {"input": 1, "output": 2}})


def test_the_row_that_priced_a_replay_and_a_tune_is_named() -> None:
    s = replay(session(), limits=WIDE, model="claude-opus-4-5-20251101").summary
    assert s["price_row"]["row"] == "claude-opus-4-5"
    assert s["price_row"]["source"].startswith("https://platform.claude.com/")
    assert s["price_row"]["read"] and s["price_row"]["input"] == 5.0
    config = cc.CompactionConfig(prices={"house": {"input": 1, "output": 2}})
    mine = replay(session(), limits=WIDE, config=config, model="house").summary["price_row"]
    assert mine["row"] == "house" and "the config's prices, from argument" in mine["source"]
    given = replay(session(), limits=WIDE, config=config, model="house",
                   prices={"house": {"input": 0, "output": 0}}).summary["price_row"]  # fmt: skip
    assert "prices=" in given["source"]
    result = tune([session()], {"context": [100_000]}, limits={"context": 100_000, "output": 4_000},
                  model="gpt-4o-2024-05-13", workers=1)  # fmt: skip
    assert result.price_row is not None and result.price_row.name == "gpt-4o-2024-05-13"
    assert tune([session()], {"context": [100_000]}, limits={"context": 100_000, "output": 4_000},
                workers=1).price_row is None  # fmt: skip
