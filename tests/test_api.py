"""The public API on hand-built inputs, against values computed by hand.

Tables are built directly with pyarrow (docs/schema.md), so these tests do
not depend on the pydantic models.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ctxcompact as cc
import polars as pl
import pyarrow as pa
import pytest
from ctxcompact.errors import ConfigError, FormatError, InvalidUsageError, UnknownModelError
from ctxcompact.scans import (
    OverflowOptions,
    OverflowReport,
    TokenBudget,
    Usage,
    estimate_tokens_array,
    is_overflow,
    pivot_mask,
)
from ctxcompact.transcript import SCAN_COLUMNS, SCHEMA

# --- building part-row tables ----------------------------------------------------------

# Scan columns as plain strings (the builder below picks other layouts on purpose).
COLUMNS: dict[str, pa.DataType] = {
    f.name: pa.string() if pa.types.is_large_string(f.type) else f.type
    for f in SCHEMA
    if f.name in SCAN_COLUMNS
}


def row(sid: str, mid: str | None, role: str | None, ptype: str | None, **kw: Any) -> dict:
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(session_id=sid, message_id=mid, role=role, part_type=ptype)
    r.update(kw)
    return r


def tool(sid: str, mid: str, pid: str, name: str, status: str, output: str | None, **kw: Any):
    return row(
        sid, mid, "assistant", "tool", part_id=pid, tool=name, status=status, output=output, **kw
    )


def user(sid: str, mid: str, pid: str, text: str = "hi") -> dict:
    return row(sid, mid, "user", "text", part_id=pid, output=text)


def build(rows: list[dict]) -> pa.Table:
    return pa.table({name: pa.array([r[name] for r in rows], typ) for name, typ in COLUMNS.items()})


def chunked(table: pa.Table, cuts: list[int]) -> pa.Table:
    bounds = [0, *cuts, table.num_rows]
    return pa.concat_tables([table.slice(a, b - a) for a, b in itertools.pairwise(bounds)])


def x(tokens: int) -> str:
    """A text of exactly ``tokens`` tokens in both methods (4 ASCII chars per token)."""
    return "x" * (4 * tokens)


# --- estimate_tokens -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 100, 25)],
)
def test_ceil_bytes_seed_cases(text: str, want: int) -> None:
    assert cc.estimate_tokens(text, "ceil-bytes") == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", 0),
        ("a", 0),  # 0.25 -> 0
        ("ab", 1),  # 0.5 rounds half up (JS Math.round), not to even
        ("abc", 1),
        ("abcd", 1),
        ("abcdef", 2),  # 1.5 -> 2
        ("abcdefghij", 3),  # 2.5 -> 3
        ("x" * 100, 25),
    ],
)
def test_opencode_estimate_ascii(text: str, want: int) -> None:
    assert cc.estimate_tokens(text, "opencode") == want
    assert cc.estimate_tokens(text) == want  # opencode is the default


@pytest.mark.parametrize(
    ("text", "opencode", "ceil_bytes"),
    [
        # UTF-16 units / UTF-8 bytes, computed by hand:
        ("é", 0, 1),  # 1 unit, 2 bytes
        ("😀", 1, 1),  # 2 units (surrogate pair) -> 0.5 -> 1; 4 bytes
        ("😀😀😀", 2, 3),  # 6 units -> 1.5 -> 2; 12 bytes
        ("👍🏽", 1, 2),  # two astral code points: 4 units; 8 bytes
        ("日本", 1, 2),  # 2 units -> 0.5 -> 1; 6 bytes
        ("日本語テキスト", 2, 6),  # 7 units -> 1.75 -> 2; 21 bytes
        ("𝔘𝔫𝔦", 2, 3),  # 6 units; 12 bytes
        ("a😀b", 1, 2),  # 4 units; 6 bytes
    ],
)
def test_estimate_non_ascii(text: str, opencode: int, ceil_bytes: int) -> None:
    assert cc.estimate_tokens(text, "opencode") == opencode
    assert cc.estimate_tokens(text, "ceil-bytes") == ceil_bytes


def test_estimate_messages_reads_file_parts_and_refuses_a_broken_part_json() -> None:
    # The model sees a file part as "[file: name (mime)]": the batch scan counts it too.
    file = {"id": "p", "type": "file", "mime": "text/plain", "filename": "notes.txt"}
    session = cc.Session.model_validate(
        {"info": {"id": "s"}, "messages": [{"info": {"id": "m", "role": "user"}, "parts": [file]}]}
    )
    text = "[file: notes.txt (text/plain)]"
    assert cc.to_model_messages(session) == [{"role": "user", "content": text}]
    assert cc.estimate_messages(session).total == 4 + cc.estimate_tokens(text)
    table = cc.Transcript.from_sessions([session]).to_arrow()
    column = table.schema.get_field_index("part_json")
    broken = table.set_column(column, "part_json", pa.array(["{nope"], pa.large_string()))
    with pytest.raises(FormatError, match="part_json of row 0") as info:
        cc.estimate_messages(broken)
    assert info.value.column == "part_json"
    assert info.value.session_id == "s"


# --- estimate_tokens_array -------------------------------------------------------------

VALUES = ["abcd", None, "", "abcdef", "😀😀😀", None, "日本語テキスト"]
WANT_OPENCODE = [1, None, 0, 2, 2, None, 2]
WANT_CEIL = [1, None, 0, 2, 3, None, 6]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.string_view()])
def test_estimate_array_string_types(typ: pa.DataType) -> None:
    arr = pa.array(VALUES, typ)
    got = estimate_tokens_array(arr)
    assert isinstance(got, pa.Array)
    assert got.type == pa.int64()
    assert got.to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(arr, "ceil-bytes").to_pylist() == WANT_CEIL


@pytest.mark.parametrize("value_type", [pa.string(), pa.large_string()])
def test_estimate_array_dictionary(value_type: pa.DataType) -> None:
    arr = pa.array(VALUES, value_type).dictionary_encode()
    assert pa.types.is_dictionary(arr.type)
    assert estimate_tokens_array(arr).to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(arr, "ceil-bytes").to_pylist() == WANT_CEIL


def test_estimate_array_dictionary_with_repeated_values() -> None:
    arr = pa.DictionaryArray.from_arrays(
        pa.array([1, 0, None, 1, 1], pa.int32()), pa.array(["ab", "x" * 40])
    )
    assert estimate_tokens_array(arr).to_pylist() == [10, 1, None, 10, 10]


def test_estimate_array_chunked_gives_chunked() -> None:
    arr = pa.chunked_array([pa.array(VALUES[:3]), pa.array(VALUES[3:])])
    got = estimate_tokens_array(arr)
    assert isinstance(got, pa.ChunkedArray)
    assert got.num_chunks == 2
    assert [len(c) for c in got.chunks] == [3, 4]
    assert got.to_pylist() == WANT_OPENCODE


def test_estimate_array_polars_series() -> None:
    series = pl.Series("text", VALUES)
    got = estimate_tokens_array(series)
    assert isinstance(got, pa.Array)
    assert got.to_pylist() == WANT_OPENCODE
    assert estimate_tokens_array(series, "ceil-bytes").to_pylist() == WANT_CEIL


def test_estimate_array_multi_chunk_polars_series() -> None:
    series = pl.concat([pl.Series(VALUES[:3]), pl.Series(VALUES[3:])], rechunk=False)
    assert series.n_chunks() == 2
    got = estimate_tokens_array(series)
    assert isinstance(got, pa.Array)
    assert got.to_pylist() == WANT_OPENCODE


def test_estimate_array_nulls_keep_validity() -> None:
    got = estimate_tokens_array(pa.array([None, None, "abcd"]))
    assert got.null_count == 2
    assert got.is_null().to_pylist() == [True, True, False]


def test_estimate_array_empty_and_threads() -> None:
    assert estimate_tokens_array(pa.array([], pa.string())).to_pylist() == []
    big = pa.array([x(3), "ab", None] * 20_000)
    one = estimate_tokens_array(big, threads=1)
    two = estimate_tokens_array(big, threads=2)
    assert one.equals(two)
    assert one.to_pylist()[:4] == [3, 1, None, 3]


# --- is_overflow / check_overflow ------------------------------------------------------

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


# --- TokenBudget -----------------------------------------------------------------------


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


# --- ModelRegistry ---------------------------------------------------------------------


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


# --- prune -----------------------------------------------------------------------------


class Config:
    """A CompactionConfig stand-in with small thresholds."""

    prune = True
    prune_protect = 15
    prune_minimum = 5
    prune_protected_tools = ("skill",)
    prune_continue_past_compacted = False
    estimate_method = "opencode"

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)


def prune_rows() -> list[dict]:
    """Four sessions; the comments give the row numbers and tokens (4 chars/token)."""
    return [
        # s1: turns u4 and u3 are protected; a2's read is counted but within protect.
        user("s1", "s1-u1", "s1-p0"),  # 0
        tool("s1", "s1-a1", "p1", "read", "completed", x(10)),  # 1
        tool("s1", "s1-a1", "p2", "bash", "completed", x(10)),  # 2
        user("s1", "s1-u2", "s1-p3"),  # 3
        tool("s1", "s1-a2", "p4", "read", "completed", x(6)),  # 4: total 6
        tool("s1", "s1-a2", "p5", "skill", "completed", x(100)),  # 5 protected tool
        tool("s1", "s1-a2", "p6", "bash", "error", x(100)),  # 6 not completed
        tool("s1", "s1-a2", "p7", "read", "running", None),  # 7 not completed
        row("s1", "s1-a2", "assistant", "text", part_id="p8", output=x(100)),  # 8 text
        user("s1", "s1-u3", "s1-p9"),  # 9
        tool("s1", "s1-a3", "p10", "read", "completed", x(100)),  # 10 (turns < 2)
        user("s1", "s1-u4", "s1-p11"),  # 11
        tool("s1", "s1-a4", "p12", "read", "completed", x(100)),  # 12 (turns < 2)
        # s2: a summary message ends the scan.
        user("s2", "s2-u1", "q0"),  # 13
        tool("s2", "s2-a1", "q1", "read", "completed", x(20)),  # 14 (before the summary)
        row(
            "s2",
            "s2-a1s",
            "assistant",
            "text",
            part_id="qs",
            output="sum",
            summary=True,
            finished=True,
            parent_id="s2-u1",
        ),  # 15
        user("s2", "s2-u2", "q2"),  # 16
        tool("s2", "s2-a2", "q3", "read", "completed", x(20)),  # 17
        tool("s2", "s2-a2", "q4", "read", "completed", x(20)),  # 18
        user("s2", "s2-u3", "q5"),  # 19
        tool("s2", "s2-a3", "q6", "read", "completed", x(20)),  # 20 (turns < 2)
        user("s2", "s2-u4", "q7"),  # 21
        # s3: an already compacted part ends the scan.
        user("s3", "s3-u1", "c0"),  # 22
        tool("s3", "s3-a1", "c1", "read", "completed", x(20)),  # 23
        tool("s3", "s3-a1", "c2", "read", "completed", x(20), compacted_at=1_000),  # 24
        tool("s3", "s3-a1", "c3", "read", "completed", x(20)),  # 25
        user("s3", "s3-u2", "c4"),  # 26
        user("s3", "s3-u3", "c5"),  # 27
        # s4: a session without messages.
        row("s4", None, None, None),  # 28
    ]


@pytest.fixture
def prune_table() -> pa.Table:
    return build(prune_rows())


def test_prune_selects_hand_computed_rows(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25]
    assert result.part_ids == ["p2", "p1", "q4", "q3", "c3"]
    assert len(result) == 5
    assert result.sessions.column_names == ["session_id", "total", "pruned", "parts"]
    assert result.sessions.to_pydict() == {
        "session_id": ["s1", "s2", "s3", "s4"],
        "total": [26, 40, 20, 0],
        "pruned": [20, 40, 20, 0],
        "parts": [2, 2, 1, 0],
    }
    assert result.total == 86
    assert result.pruned == 80


def test_prune_minimum_is_strict(prune_table: pa.Table) -> None:
    # s1 and s3 free exactly 20 tokens: not more than a minimum of 20.
    result = cc.prune(prune_table, Config(prune_minimum=20))
    assert result.rows.to_pylist() == [18, 17]
    assert result.sessions["pruned"].to_pylist() == [0, 40, 0, 0]
    assert result.sessions["total"].to_pylist() == [26, 40, 20, 0]
    assert result.pruned == 40


def test_prune_protect_is_strict(prune_table: pa.Table) -> None:
    # protect 16: in s1 row 2 brings the total to exactly 16 (kept), row 1 to 26.
    result = cc.prune(prune_table, Config(prune_protect=16))
    assert result.part_ids[:1] == ["p1"]
    assert result.sessions["pruned"].to_pylist()[0] == 10


def test_prune_continue_past_compacted(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config(prune_continue_past_compacted=True))
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25, 23]
    assert result.sessions["total"].to_pylist() == [26, 40, 40, 0]
    assert result.sessions["pruned"].to_pylist() == [20, 40, 40, 0]


def test_prune_protected_tools_and_disabled(prune_table: pa.Table) -> None:
    # Protecting nothing: s1's skill output (100) is counted after the read (6).
    result = cc.prune(prune_table, Config(prune_protected_tools=[]))
    assert result.rows.to_pylist()[:4] == [5, 4, 2, 1]
    assert result.sessions["total"].to_pylist()[0] == 126
    off = cc.prune(prune_table, Config(prune=False))
    assert off.rows.to_pylist() == []
    assert off.part_ids == []
    assert off.total == 0 and off.pruned == 0
    assert off.sessions["session_id"].to_pylist() == ["s1", "s2", "s3", "s4"]


def test_prune_defaults_select_nothing_on_small_outputs(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table)
    assert len(result) == 0
    assert result.sessions["total"].to_pylist() == [26, 40, 20, 0]
    assert result.pruned == 0


def test_prune_method_ceil_bytes() -> None:
    # 5 bytes: opencode round(1.25) = 1, ceil-bytes 2.
    rows = [
        user("s", "u1", "a"),
        tool("s", "a1", "t1", "read", "completed", "xxxxx"),
        tool("s", "a1", "t2", "read", "completed", "xxxxx"),
        user("s", "u2", "b"),
        user("s", "u3", "c"),
    ]
    table = build(rows)
    assert cc.prune(table, Config(prune_protect=0, prune_minimum=0)).total == 2
    result = cc.prune(table, Config(prune_protect=0, prune_minimum=0, estimate_method="ceil-bytes"))
    assert result.total == 4
    assert result.part_ids == ["t2", "t1"]


def test_mark_pruned_sets_only_selected_rows(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    marked = cc.mark_pruned(prune_table, result, now_ms=5_000)
    assert isinstance(marked, cc.Transcript)
    out = marked.to_arrow()
    want = [None] * prune_table.num_rows
    for r in (1, 2, 17, 18, 25):
        want[r] = 5_000
    want[24] = 1_000  # already compacted before
    assert out.column("compacted_at").to_pylist() == want
    assert out.schema == prune_table.schema
    for name in prune_table.column_names:
        if name != "compacted_at":
            assert out.column(name).equals(prune_table.column(name)), name
    # the input table itself is unchanged
    assert prune_table.column("compacted_at").null_count == prune_table.num_rows - 1


def test_second_prune_after_marking_selects_nothing(prune_table: pa.Table) -> None:
    marked = cc.mark_pruned(prune_table, cc.prune(prune_table, Config()), now_ms=5_000)
    again = cc.prune(marked, Config())
    assert again.rows.to_pylist() == []
    assert again.part_ids == []
    # s1 counts a2's read (6), then stops at the compacted row 2.
    assert again.sessions["total"].to_pylist() == [6, 0, 0, 0]
    assert again.pruned == 0


def test_mark_pruned_adds_missing_column_and_keeps_chunks(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    without = prune_table.drop_columns(["compacted_at"])
    out = cc.mark_pruned(without, result, now_ms=7).to_arrow()
    assert out.column("compacted_at").type == pa.int64()
    assert [i for i, v in enumerate(out.column("compacted_at").to_pylist()) if v] == [
        1, 2, 17, 18, 25,
    ]  # fmt: skip
    pieces = chunked(prune_table, [5, 17])
    out = cc.mark_pruned(pieces, result, now_ms=7).to_arrow()
    assert out.column("compacted_at").num_chunks == 3
    assert out.column("compacted_at").to_pylist()[17] == 7


def test_mark_pruned_rejects_bad_timestamp_and_other_table(prune_table: pa.Table) -> None:
    result = cc.prune(prune_table, Config())
    with pytest.raises(ConfigError):
        cc.mark_pruned(prune_table, result, now_ms=0)
    with pytest.raises(ValueError):
        cc.mark_pruned(prune_table.slice(0, 10), result, now_ms=1)


def test_mark_pruned_default_timestamp_is_now(prune_table: pa.Table) -> None:
    import time

    before = int(time.time() * 1000)
    out = cc.mark_pruned(prune_table, cc.prune(prune_table, Config())).to_arrow()
    after = int(time.time() * 1000)
    stamp = out.column("compacted_at").to_pylist()[1]
    assert before <= stamp <= after


# --- pivot -----------------------------------------------------------------------------


def pivot_rows() -> list[dict]:
    def summary(sid: str, mid: str, parent: str, **kw: Any) -> dict:
        flags = {"summary": True, "finished": True, "error": False}
        flags.update(kw)
        return row(sid, mid, "assistant", "text", part_id=f"{mid}-p", output="sum",
                   parent_id=parent, **flags)  # fmt: skip

    def compaction(sid: str, mid: str) -> dict:
        return row(sid, mid, "user", "compaction", part_id=f"{mid}-c", auto=True)

    return [
        # v1: completed pivot at row 2
        user("v1", "v1-u1", "a"),  # 0
        row(
            "v1",
            "v1-a1",
            "assistant",
            "text",
            part_id="b",
            output="ok",
            parent_id="v1-u1",
            finished=True,
        ),  # 1
        compaction("v1", "v1-u2"),  # 2
        summary("v1", "v1-a2", "v1-u2"),  # 3
        user("v1", "v1-u3", "c"),  # 4
        row("v1", "v1-a3", "assistant", "text", part_id="d", output="ok"),  # 5
        # v2: the summary ended in error: no pivot, kept whole
        user("v2", "v2-u1", "e"),  # 6
        compaction("v2", "v2-u2"),  # 7
        summary("v2", "v2-a2", "v2-u2", error=True),  # 8
        user("v2", "v2-u3", "f"),  # 9
        # v3: two completed pivots, the latest (row 13) wins
        compaction("v3", "v3-u1"),  # 10
        summary("v3", "v3-a1", "v3-u1"),  # 11
        user("v3", "v3-u2", "g"),  # 12
        compaction("v3", "v3-u3"),  # 13
        summary("v3", "v3-a3", "v3-u3"),  # 14
        user("v3", "v3-u4", "h"),  # 15
        # v4: the summary is not finished: kept whole
        compaction("v4", "v4-u1"),  # 16
        summary("v4", "v4-a1", "v4-u1", finished=None),  # 17
        # v5: a finished summary whose parent has no compaction part: kept whole
        user("v5", "v5-u1", "i"),  # 18
        summary("v5", "v5-a1", "v5-u1"),  # 19
        # v6: a pivot whose user message has a text part then the compaction part
        user("v6", "v6-u1", "j"),  # 20
        row("v6", "v6-u2", "user", "text", part_id="k", output="please compact"),  # 21
        row("v6", "v6-u2", "user", "compaction", part_id="l", auto=False),  # 22
        summary("v6", "v6-a2", "v6-u2"),  # 23
        # v7: empty session
        row("v7", None, None, None),  # 24
    ]


PIVOT_MASK = (
    [False, False, True, True, True, True]
    + [True] * 4
    + [False, False, False, True, True, True]
    + [True, True]
    + [True, True]
    + [False, True, True, True]
    + [True]
)


@pytest.fixture
def pivot_table() -> pa.Table:
    return build(pivot_rows())


def test_pivot_mask_hand_computed(pivot_table: pa.Table) -> None:
    mask = pivot_mask(pivot_table)
    assert mask.type == pa.bool_()
    assert mask.to_pylist() == PIVOT_MASK


def test_filter_pivot_keeps_rows_from_the_pivot(pivot_table: pa.Table) -> None:
    out = cc.filter_pivot(pivot_table)
    assert isinstance(out, cc.Transcript)
    table = out.to_arrow()
    assert table.schema == pivot_table.schema
    want = pivot_table.filter(pa.array(PIVOT_MASK))
    assert table.num_rows == 19
    assert table.equals(want)
    assert table.column("message_id").to_pylist()[:4] == ["v1-u2", "v1-a2", "v1-u3", "v1-a3"]


def test_filter_pivot_result_is_a_valid_transcript(pivot_table: pa.Table) -> None:
    once = cc.filter_pivot(pivot_table)
    twice = cc.filter_pivot(once)
    assert twice.to_arrow().equals(once.to_arrow())
    assert pivot_mask(once).to_pylist() == [True] * once.num_rows


def test_filter_pivot_preserves_layouts_and_chunks(pivot_table: pa.Table) -> None:
    table = pivot_table.set_column(
        0, "session_id", pivot_table.column("session_id").dictionary_encode()
    )
    table = table.set_column(
        table.schema.get_field_index("output"),
        "output",
        table.column("output").cast(pa.large_string()),
    )
    pieces = chunked(table, [3, 12, 13])
    out = cc.filter_pivot(pieces).to_arrow()
    assert out.schema == table.schema
    assert out.to_pylist() == table.filter(pa.array(PIVOT_MASK)).to_pylist()


# --- estimate_messages -----------------------------------------------------------------


def estimate_rows() -> list[dict]:
    return [
        # Each model message costs the overhead (4), its content is estimated once as sent.
        # e1-u1: 4 + "abcdefgh\n\nWhat did we do so far?" (32 units -> 8) = 12
        row("e1", "e1-u1", "user", "text", part_id="1", output="abcdefgh"),
        row("e1", "e1-u1", "user", "compaction", part_id="2", auto=True),
        # e1-a1: the call message 4 + 1 + calls (3 + 2 + 2 + 2), then 4 tool results
        # (4 + 10, 4 + 8, 4 + 8, 4 + 1) = 57
        row("e1", "e1-a1", "assistant", "text", part_id="3", output="abcd"),  # 1
        # call "read" (1) + input '{"a":1}' (7 units -> 2); result 40 chars (10)
        tool("e1", "e1-a1", "4", "read", "completed", x(10), input='{"a":1}'),
        # "bash" (1) + no input: "{}" (1); interrupted placeholder (32 units -> 8)
        tool("e1", "e1-a1", "5", "bash", "running", x(100)),
        # "read" (1) + "{}" (1); cleared placeholder (33 units -> 8)
        tool("e1", "e1-a1", "6", "read", "completed", x(100), compacted_at=1),
        # "bash" (1) + "{}" (1); error output "xxxx" (1)
        tool("e1", "e1-a1", "7", "bash", "error", "xxxx"),
        row("e1", "e1-a1", "assistant", "reasoning", part_id="8", output=x(100)),  # 0
        row("e1", "e1-a1", "assistant", "step-start", part_id="9"),  # 0
        # e1-a2: a message without parts is not sent: 0
        row("e1", "e1-a2", "assistant", None),
        # e2: a session without messages
        row("e2", None, None, None),
        # e3-u1: 4 + "ab" (1) = 5
        row("e3", "e3-u1", "user", "text", part_id="10", output="ab"),
    ]


def test_estimate_messages_hand_computed() -> None:
    table = build(estimate_rows())
    est = cc.estimate_messages(table)
    assert est.messages.to_pydict() == {
        "session_id": ["e1", "e1", "e1", "e3"],
        "message_id": ["e1-u1", "e1-a1", "e1-a2", "e3-u1"],
        "tokens": [12, 57, 0, 5],
    }
    assert est.sessions.to_pydict() == {
        "session_id": ["e1", "e3"],
        "tokens": [69, 5],
        "messages": [3, 1],
    }
    assert est.total == 74


def test_estimate_messages_overhead_and_method() -> None:
    table = build(estimate_rows())
    none = cc.estimate_messages(table, SimpleNamespace(message_overhead=0))
    assert none.messages["tokens"].to_pylist() == [8, 37, 0, 1]
    # ceil-bytes: u1 = ceil(32/4) = 8; a1 = 1 + calls (1+2 + 1+1 + 1+1 + 1+1)
    # + results (10 + 8 + ceil(33/4)=9 + 1) = 38; "ab" -> 1
    ceil = cc.estimate_messages(
        table, SimpleNamespace(estimate_method="ceil-bytes", message_overhead=0)
    )
    assert ceil.messages["tokens"].to_pylist() == [8, 38, 0, 1]


# --- inputs: polars, chunked tables, threads, many layouts ------------------------------


def all_rows() -> list[dict]:
    return prune_rows() + pivot_rows() + estimate_rows()


def outcomes(data: Any, threads: int | None = None) -> tuple:
    result = cc.prune(data, Config(), threads=threads)
    est = cc.estimate_messages(data, threads=threads)
    filtered = cc.filter_pivot(data, threads=threads).to_arrow()
    return (
        result.rows.to_pylist(),
        result.part_ids,
        result.sessions.to_pylist(),
        pivot_mask(data, threads=threads).to_pylist(),
        filtered.num_rows,
        filtered.column("part_id").to_pylist(),
        est.messages.to_pylist(),
        est.sessions.to_pylist(),
    )


@pytest.fixture
def all_table() -> pa.Table:
    return build(all_rows())


def test_multiple_sessions_at_once(all_table: pa.Table) -> None:
    result = cc.prune(all_table, Config())
    assert result.rows.to_pylist() == [2, 1, 18, 17, 25]
    sessions = result.sessions["session_id"].to_pylist()
    assert sessions == ["s1", "s2", "s3", "s4", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
                        "e1", "e2", "e3"]  # fmt: skip
    n = len(prune_rows())
    assert pivot_mask(all_table).to_pylist()[n : n + len(PIVOT_MASK)] == PIVOT_MASK
    est = cc.estimate_messages(all_table)
    assert est.messages["tokens"].to_pylist()[-4:] == [12, 57, 0, 5]


def test_polars_input_matches_pyarrow(all_table: pa.Table) -> None:
    frame = pl.from_arrow(all_table)
    assert isinstance(frame, pl.DataFrame)
    assert pa.table(frame).schema.field("session_id").type == pa.string_view()
    assert outcomes(frame) == outcomes(all_table)


def test_chunked_input_matches_plain(all_table: pa.Table) -> None:
    pieces = chunked(all_table, [1, 2, 14, 15, 40, 41, 60])
    assert pieces.column("session_id").num_chunks == 8
    assert outcomes(pieces) == outcomes(all_table)


def test_dictionary_and_int8_layouts_match_plain(all_table: pa.Table) -> None:
    codes = {
        "role": {"user": 0, "assistant": 1, "system": 2, "tool": 3},
        "status": {"pending": 0, "running": 1, "completed": 2, "error": 3},
        "part_type": {"text": 0, "tool": 1, "compaction": 2, "reasoning": 4, "step-start": 5},
    }
    table = all_table
    for name, mapping in codes.items():
        values = [None if v is None else mapping[v] for v in table.column(name).to_pylist()]
        table = table.set_column(
            table.schema.get_field_index(name), name, pa.array(values, pa.int8())
        )
    for name in ("session_id", "message_id", "tool"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).dictionary_encode())
    for name in ("output", "input"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).cast(pa.large_string()))
    assert outcomes(table) == outcomes(all_table)
    assert outcomes(chunked(table, [3, 30])) == outcomes(all_table)


def test_threads_give_identical_results(all_table: pa.Table) -> None:
    assert outcomes(all_table, threads=1) == outcomes(all_table, threads=2)
    assert outcomes(all_table, threads=1) == outcomes(all_table)


def test_transcript_input(all_table: pa.Table) -> None:
    transcript = cc.Transcript.from_arrow(all_table)
    assert outcomes(transcript) == outcomes(all_table)
    assert cc.mark_pruned(transcript, cc.prune(transcript, Config()), now_ms=1).num_rows == (
        all_table.num_rows
    )


def test_mark_pruned_on_polars_frame(prune_table: pa.Table) -> None:
    frame = pl.from_arrow(prune_table)
    result = cc.prune(frame, Config())
    out = cc.mark_pruned(frame, result, now_ms=9).to_arrow()
    marked = [i for i, v in enumerate(out.column("compacted_at").to_pylist()) if v == 9]
    assert marked == [1, 2, 17, 18, 25]
    assert out.column("output").to_pylist() == prune_table.column("output").to_pylist()


# --- Transcript.from_arrow -------------------------------------------------------------


def test_transcript_from_arrow_sources(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    assert t.to_arrow() is prune_table
    assert t.num_rows == 29
    assert cc.Transcript.from_arrow(t) is t

    batch = prune_table.to_batches()[0]
    assert cc.Transcript.from_arrow(batch).to_arrow().equals(prune_table)

    reader = pa.RecordBatchReader.from_batches(prune_table.schema, prune_table.to_batches())
    assert cc.Transcript.from_arrow(reader).to_arrow().equals(prune_table)

    frame = pl.from_arrow(prune_table)
    from_polars = cc.Transcript.from_arrow(frame).to_arrow()
    assert from_polars.num_rows == 29
    assert from_polars.to_pylist() == prune_table.to_pylist()


def test_transcript_from_arrow_rejects_plain_python() -> None:
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow([{"session_id": "s"}])
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow({"session_id": ["s"]})
    with pytest.raises(TypeError):
        cc.Transcript.from_arrow("not a table")
    with pytest.raises(TypeError):
        cc.Transcript(pa.record_batch({"a": [1]}))  # type: ignore[arg-type]


def test_transcript_session_ids(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    assert t.session_ids() == ["s1", "s2", "s3", "s4"]
    assert len(t) == 4
    assert len(cc.Transcript.from_arrow(pl.from_arrow(prune_table))) == 4


def test_transcript_with_column(prune_table: pa.Table) -> None:
    t = cc.Transcript.from_arrow(prune_table)
    replaced = t.with_column("output", pa.array([None] * 29, pa.string()))
    assert replaced.to_arrow().column("output").null_count == 29
    assert t.to_arrow().column("output").null_count < 29
    added = t.with_column("extra", pa.array(range(29)))
    assert added.to_arrow().column_names[-1] == "extra"


@pytest.mark.parametrize(
    ("text", "opencode", "ceil_bytes"),
    [("a\ud800b", 1, 2), ("\udc00" * 6, 2, 5), ("ab\ud83d", 1, 2)],
)
def test_lone_surrogates_count_like_javascript(text: str, opencode: int, ceil_bytes: int) -> None:
    # JavaScript: "a\ud800b".length == 3 -> round(0.75) == 1; WTF-8 bytes for ceil-bytes.
    assert cc.estimate_tokens(text) == opencode
    assert cc.estimate_tokens(text, "ceil-bytes") == ceil_bytes


def test_context_1m_beta_raises_the_window_of_models_that_accept_it() -> None:
    registry = cc.ModelRegistry()
    sonnet = "claude-sonnet-4-20250514"
    assert registry.get(sonnet).context == 200_000
    assert registry.get(sonnet, betas=["context-1m-2025-08-07"]).context == 1_000_000
    assert registry.get(sonnet, betas=["other-beta"]).context == 200_000
    assert registry.get("gpt-4o", betas=["context-1m-2025-08-07"]).context == 128_000
    assert registry.get(sonnet, betas=["context-1m-2025-08-07"]).output == 64_000
