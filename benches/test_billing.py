"""Pricing a replay's calls under a provider's cache rules: the core's
``billing.rs`` (``tuning.cache.price_calls`` / ``cache_breaks``) against the
Python loops it replaced, kept as the reference
(``tuning.reference_billing``), side by side on the same per-call table.

Run: ``pytest benches/test_billing.py --benchmark-enable``; calls per second
are in each result's ``extra_info``.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from ctxcompact.tuning import price_row
from ctxcompact.tuning.cache import Sheet, cache_breaks, price_calls
from ctxcompact.tuning.reference_billing import cache_breaks as reference_breaks
from ctxcompact.tuning.reference_billing import price_calls as reference_price
from ctxcompact.tuning.replay import CALL_SCHEMA


def per_call(calls: int) -> tuple[pa.Table, dict[tuple[str, str], tuple[int, int]]]:
    """``calls`` calls of runs of 100, prompts growing as an agent's do, each
    with a recorded read (one in 20 a break), 1 to 90 s apart."""
    rng = random.Random(5)
    rows, recorded = [], {}
    for i in range(calls):
        sid, n = f"s{i // 100}", i % 100
        prompt = 2_000 + 900 * n
        cached = 0 if n == 0 else prompt - 900
        rows.append({"session_id": sid, "call": n, "message_id": f"m{n}", "prompt_tokens": prompt,
                     "cached_tokens": cached, "written_tokens": prompt - cached,
                     "output_tokens": 300, "compacted": False, "summary_input_tokens": 0,
                     "summary_output_tokens": 0, "baseline_prompt_tokens": prompt,
                     "baseline_cached_tokens": cached, "removed_facts": 0, "kept_facts": 0,
                     "lost": [], "over_window": False,
                     "since_previous_s": None if n == 0 else rng.uniform(1, 90)})  # fmt: skip
        recorded[(sid, f"m{n}")] = (prompt, 0 if rng.random() < 0.05 else cached)
    return pa.Table.from_pylist(rows, schema=CALL_SCHEMA), recorded


@pytest.fixture(scope="module")
def calls(measuring: bool) -> tuple[pa.Table, dict[tuple[str, str], tuple[int, int]]]:
    return per_call(200_000 if measuring else 5_000)


SHEET = Sheet("claude-sonnet-4", price_row("claude-sonnet-4"))


@pytest.mark.parametrize("impl", ["core", "python"])
def test_price_calls(benchmark: Any, calls: Any, impl: str) -> None:
    table, _ = calls
    if impl == "core":
        got = benchmark(price_calls, table, SHEET)
    else:
        got = benchmark(reference_price, table, SHEET, [None] * table.num_rows)
    assert got["cost"] > 0
    benchmark.extra_info["calls"] = table.num_rows


@pytest.mark.parametrize("impl", ["core", "python"])
def test_cache_breaks(benchmark: Any, calls: Any, impl: str) -> None:
    table, recorded = calls
    fn = cache_breaks if impl == "core" else reference_breaks
    _, runs = benchmark(fn, table, recorded, {}, {}, 300.0)
    assert sum(r["cache_breaks"] for r in runs.values()) > 0
    benchmark.extra_info["calls"] = table.num_rows
