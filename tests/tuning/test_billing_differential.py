"""The core's cache billing (``billing.rs``, through ``tuning.cache.price_calls``)
against the readable reference (``tuning.reference_billing``): on random
per-call tables, every shipped price row's rule, each cache mode, a sheet's
own lifetime and runs' recorded lifetimes, the figures are equal to the last
bit; bad columns are typed errors naming the column and row."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest
from ctxcompact.errors import ColumnTypeError, NullValueError, UnknownValueError
from ctxcompact.tuning import PRICE_ROWS
from ctxcompact.tuning.cache import DEFAULT_RULES, Sheet, cache_breaks, price_calls
from ctxcompact.tuning.prices import Price, PriceRow
from ctxcompact.tuning.reference_billing import cache_breaks as reference_breaks
from ctxcompact.tuning.reference_billing import price_calls as reference
from ctxcompact.tuning.replay import CALL_SCHEMA
from hypothesis import example, given, settings
from hypothesis import strategies as st

#: Token counts around the rules' edges (OpenAI's 1,024 floor and 128 steps,
#: Anthropic's minimums) and far from them.
TOKENS = st.one_of(
    st.integers(0, 5_000),
    st.sampled_from([1_023, 1_024, 1_151, 1_152, 2_048, 4_095, 4_096]),
    st.integers(0, 10**7),
)
GAPS = st.one_of(
    st.none(), st.floats(0, 4_000, allow_nan=False), st.sampled_from([300.0, 301.0, 3_600.0])
)
#: Each shipped row's rule, and every provider's default rule under a price of its own.
ROWS = [*PRICE_ROWS, *(PriceRow(f"own-{p}", Price(1.1, 0.13, 1.7, 4.3), "given", "given",
                                cache=rule) for p, rule in DEFAULT_RULES.items())]  # fmt: skip


@st.composite
def call_tables(draw: Any) -> tuple[pa.Table, dict[str, float]]:
    rows = []
    for i in range(draw(st.integers(0, 40))):
        prompt, b_prompt = draw(TOKENS), draw(TOKENS)
        rows.append({
            "session_id": f"s{draw(st.integers(0, 3))}", "call": i, "message_id": f"m{i}",
            "prompt_tokens": prompt, "cached_tokens": draw(st.integers(0, prompt)),
            "written_tokens": 0, "output_tokens": draw(st.integers(0, 9_000)),
            "compacted": False,
            "summary_input_tokens": draw(st.sampled_from([0, 0, 1_500, 40_000])),
            "summary_output_tokens": draw(st.integers(0, 2_000)),
            "baseline_prompt_tokens": b_prompt,
            "baseline_cached_tokens": draw(st.integers(0, b_prompt)), "removed_facts": 0,
            "kept_facts": 0, "lost": [], "over_window": False, "since_previous_s": draw(GAPS),
        })  # fmt: skip
    lifetimes = draw(st.dictionaries(st.sampled_from(["s0", "s1", "s9"]),
                                     st.sampled_from([300.0, 3_600.0, 10.0])))  # fmt: skip
    return pa.Table.from_pylist(rows, schema=CALL_SCHEMA), lifetimes


@settings(max_examples=150, deadline=None)
@given(call_tables(), st.sampled_from(ROWS), st.sampled_from(["5m", "1h", "off"]),
       st.sampled_from([None, 60.0]), st.booleans())  # fmt: skip
def test_the_core_bills_as_the_reference(drawn: tuple[pa.Table, dict[str, float]], row: PriceRow,
                                         cache: str, ttl_s: float | None,
                                         recorded: bool) -> None:  # fmt: skip
    calls, lifetimes = drawn
    if cache == "1h" and row.cache.write_1h is None:
        cache = "5m"  # no 1-hour cache to price (a ConfigError, tested in test_cache.py)
    sheet = Sheet(row.name, row, cache, ttl_s)
    given_lifetimes = lifetimes if recorded else None
    got = price_calls(calls, sheet, given_lifetimes)
    default = ttl_s if ttl_s is not None else None
    ttls: list[float | None] = [default] * calls.num_rows
    if given_lifetimes and ttl_s is None and cache == "5m":
        ttls = [given_lifetimes.get(s) for s in calls.column("session_id").to_pylist()]
    want = reference(calls, sheet, ttls)
    assert {k: got[k] for k in want} == want  # floats equal to the last bit
    assert got["saved"] == got["baseline_cost"] - got["cost"]


def priced(table: pa.Table) -> dict[str, Any]:
    row = next(r for r in PRICE_ROWS if r.cache.provider == "openai")
    return price_calls(table, Sheet(row.name, row))


def one_call(**changes: Any) -> pa.Table:
    row = {"session_id": "s", "call": 0, "message_id": "m", "prompt_tokens": 2_000,
           "cached_tokens": 1_500, "written_tokens": 500, "output_tokens": 10, "compacted": False,
           "summary_input_tokens": 0, "summary_output_tokens": 0,
           "baseline_prompt_tokens": 2_000, "baseline_cached_tokens": 1_500, "removed_facts": 0,
           "kept_facts": 0, "lost": [], "over_window": False, "since_previous_s": None}  # fmt: skip
    return pa.Table.from_pylist([row, {**row, "call": 1, **changes}], schema=CALL_SCHEMA)


def test_bad_token_columns_are_typed_errors_naming_column_and_row() -> None:
    with pytest.raises(NullValueError, match="prompt_tokens") as e:
        priced(one_call(prompt_tokens=None))
    assert (e.value.column, e.value.row) == ("prompt_tokens", 1)
    with pytest.raises(UnknownValueError, match="negative") as e:
        priced(one_call(output_tokens=-3))
    assert (e.value.column, e.value.row) == ("output_tokens", 1)
    table = one_call()
    at = table.schema.get_field_index("since_previous_s")
    with pytest.raises(ColumnTypeError, match="since_previous_s"):
        priced(table.set_column(at, "since_previous_s", pa.array(["x", "y"])))
    at = table.schema.get_field_index("cached_tokens")
    with pytest.raises(ColumnTypeError, match="cached_tokens"):
        priced(table.set_column(at, "cached_tokens", pa.array([1.5, 2.0])))


def test_a_rule_without_steps_is_refused() -> None:
    row = next(r for r in PRICE_ROWS if r.cache.provider == "openai")
    bad = dataclasses.replace(row, cache=dataclasses.replace(row.cache, step=0))
    from ctxcompact.errors import ConfigError

    with pytest.raises(ConfigError, match="step"):
        price_calls(one_call(), Sheet(bad.name, bad))


@st.composite
def recorded_runs(draw: Any) -> tuple[pa.Table, dict[tuple[str, str], tuple[int, int]],
                                      dict[str, float], dict[str, int]]:  # fmt: skip
    """Runs call by call, and what some of their calls recorded: reads near
    the prefix shared with the previous call (no break) or far under it
    (a break, capped where an earlier recorded prompt is reached)."""
    rows, recorded = [], {}
    for s in range(draw(st.integers(1, 3))):
        sid, prompt = f"s{s}", draw(st.integers(0, 3_000))
        for i in range(draw(st.integers(1, 8))):
            previous, prompt = prompt, prompt + draw(st.integers(0, 20_000))
            cached = min(draw(st.sampled_from([previous, 0, previous // 2])), prompt)
            base = prompt + draw(st.sampled_from([0, 0, 5_000]))
            rows.append({
                "session_id": sid, "call": i, "message_id": f"m{i}", "prompt_tokens": prompt,
                "cached_tokens": cached, "written_tokens": prompt - cached,
                "output_tokens": 10, "compacted": False, "summary_input_tokens": 0,
                "summary_output_tokens": 0, "baseline_prompt_tokens": base,
                "baseline_cached_tokens": min(draw(st.sampled_from([cached, previous])), base),
                "removed_facts": 0, "kept_facts": 0, "lost": [], "over_window": False,
                "since_previous_s": draw(st.sampled_from([None, 10.0, 299.0, 400.0, 4_000.0])),
            })  # fmt: skip
            if draw(st.integers(0, 4)):
                got = base + draw(st.integers(-500, 500))
                read = draw(st.sampled_from([0, 900, previous, previous // 3, got]))
                recorded[(sid, f"m{i}")] = (max(got, 0), max(min(read, got), 0))
    lifetimes = draw(
        st.dictionaries(st.sampled_from(["s0", "s2"]), st.sampled_from([300.0, 3_600.0]))
    )
    prefixes = draw(st.dictionaries(st.sampled_from(["s0", "s1"]), st.integers(0, 4_000)))
    return pa.Table.from_pylist(rows, schema=CALL_SCHEMA), recorded, lifetimes, prefixes


def a_break() -> tuple[pa.Table, dict[tuple[str, str], tuple[int, int]], dict[str, float],
                       dict[str, int]]:  # fmt: skip
    """The third call read only the first call's prompt (a breakpoint written
    before), far under the 19,000 tokens it shares with the second."""
    rows = [one_call().to_pylist()[0] | {"call": i, "message_id": m, "prompt_tokens": p,
                                         "baseline_prompt_tokens": p, "cached_tokens": c,
                                         "baseline_cached_tokens": c, "since_previous_s": 5.0}
            for i, (m, p, c) in enumerate([("a", 10_000, 0), ("b", 19_500, 9_000),
                                           ("c", 20_000, 19_000)])]  # fmt: skip
    recorded = {("s", "a"): (10_000, 0), ("s", "b"): (19_500, 10_000), ("s", "c"): (20_000, 10_000)}
    return pa.Table.from_pylist(rows, schema=CALL_SCHEMA), recorded, {}, {}


@settings(max_examples=200, deadline=None)
@given(recorded_runs())
@example(a_break())
def test_the_core_finds_the_cache_breaks_the_reference_finds(drawn: Any) -> None:
    calls, recorded, lifetimes, prefixes = drawn
    got, runs = cache_breaks(calls, recorded, lifetimes, prefixes, 300.0)
    want, want_runs = reference_breaks(calls, recorded, lifetimes, prefixes, 300.0)
    assert got.equals(want)
    assert runs == want_runs


def test_a_break_caps_the_prefix_at_the_breakpoint_written_before() -> None:
    calls, recorded, lifetimes, prefixes = a_break()
    got, runs = cache_breaks(calls, recorded, lifetimes, prefixes)
    assert runs == {"s": {"cache_breaks": 1, "cache_break_tokens": 9_000, "cache_break_calls": [2]}}
    assert got["cached_tokens"].to_pylist() == [0, 9_000, 10_000]
    assert got["written_tokens"].to_pylist()[2] == 10_000
