"""Rust scans against the pure-Python reference, side by side in one run.

Each group has the reference and the Rust scan on 1 and 2 threads over the
same >= 1M-part transcript. The reference gets its rows as Python dicts
already built (conversion not timed), so the ratio is scan against scan.
"""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.scans import estimate_tokens_array, with_output_units
from ctxcompact.scans import reference as ref

THREADS = [1, 2]


def _info(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.extra_info["bytes"] = table.nbytes


@pytest.mark.benchmark(group="prune")
@pytest.mark.parametrize("threads", THREADS)
def test_prune_rust(benchmark: Any, table: pa.Table, threads: int) -> None:
    _info(benchmark, table)
    result = benchmark.pedantic(cc.prune, (table,), {"threads": threads}, rounds=5, warmup_rounds=1)
    assert result.pruned > 0


@pytest.mark.benchmark(group="prune")
@pytest.mark.parametrize("threads", THREADS)
def test_prune_counted_once_rust(benchmark: Any, table: pa.Table, threads: int) -> None:
    """The same prune with each output's length counted once (output_utf16): no
    output text is read."""
    counted = with_output_units(table).to_arrow()
    _info(benchmark, counted)
    result = benchmark.pedantic(cc.prune, (counted,), {"threads": threads}, rounds=5,
                                warmup_rounds=1)  # fmt: skip
    assert result.pruned == cc.prune(table).pruned


@pytest.mark.benchmark(group="prune")
def test_prune_reference(benchmark: Any, table: pa.Table, rows: list[dict[str, Any]]) -> None:
    _info(benchmark, table)
    result = benchmark.pedantic(ref.prune, (rows,), rounds=2)
    assert sum(r.pruned for r in result) == cc.prune(table).pruned


@pytest.mark.benchmark(group="filter_pivot")
@pytest.mark.parametrize("threads", THREADS)
def test_filter_pivot_rust(benchmark: Any, table: pa.Table, threads: int) -> None:
    _info(benchmark, table)
    result = benchmark.pedantic(
        cc.filter_pivot, (table,), {"threads": threads}, rounds=5, warmup_rounds=1
    )
    assert 0 < result.num_rows < table.num_rows


@pytest.mark.benchmark(group="filter_pivot")
def test_filter_pivot_reference(
    benchmark: Any, table: pa.Table, rows: list[dict[str, Any]]
) -> None:
    _info(benchmark, table)

    def run() -> list[dict[str, Any]]:
        starts = ref.pivot_starts(rows)
        kept = []
        for session, start in zip(ref.group(rows), starts):
            kept.extend(rows[r] for r in session.rows if r >= start)
        return kept

    result = benchmark.pedantic(run, rounds=2)
    assert len(result) == cc.filter_pivot(table).num_rows


@pytest.mark.benchmark(group="estimate")
@pytest.mark.parametrize("threads", THREADS)
def test_estimate_rust(benchmark: Any, table: pa.Table, threads: int) -> None:
    column = table.column("output")
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.extra_info["bytes"] = column.nbytes
    result = benchmark.pedantic(
        estimate_tokens_array, (column,), {"threads": threads}, rounds=5, warmup_rounds=1
    )
    assert len(result) == table.num_rows


@pytest.mark.benchmark(group="estimate")
def test_estimate_reference(benchmark: Any, table: pa.Table, rows: list[dict[str, Any]]) -> None:
    column = table.column("output")
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.extra_info["bytes"] = column.nbytes
    texts = [r["output"] for r in rows]
    result = benchmark.pedantic(
        lambda: [None if t is None else ref.estimate(t) for t in texts], rounds=2
    )
    assert len(result) == table.num_rows


@pytest.mark.benchmark(group="estimate_messages")
@pytest.mark.parametrize("threads", THREADS)
def test_estimate_messages_rust(benchmark: Any, table: pa.Table, threads: int) -> None:
    _info(benchmark, table)
    result = benchmark.pedantic(
        cc.estimate_messages, (table,), {"threads": threads}, rounds=5, warmup_rounds=1
    )
    assert result.total > 0


@pytest.mark.benchmark(group="estimate_messages")
def test_estimate_messages_reference(
    benchmark: Any, table: pa.Table, rows: list[dict[str, Any]]
) -> None:
    _info(benchmark, table)
    result = benchmark.pedantic(ref.estimate_messages, (rows,), rounds=2)
    assert sum(t for _, t in result) == cc.estimate_messages(table).total


# --- prune policies (issue 12, part 7): what the options cost over OpenCode's rule ----------

#: Each policy's options; "opencode" is today's rule. The table carries part_json
#: (as every table from ``to_table`` does), so the pinned check is paid too.
POLICIES = {
    "opencode": {},
    "opencode-no-part-json": {},
    "swe-agent": {"preset": "swe-agent"},
    # supersession reads every asked-about call's target (parsed from its
    # input, or read from tool_target with "+targets")
    "aggressive": {"preset": "aggressive"},
    "render": {
        "preset": "swe-agent",
        "placeholder": "describe",
        "clear_inputs": True,
        "truncate_output": 200,
    },
    # the trigger adds an estimate of every message
    "anthropic-clear-tool-uses": {"preset": "anthropic-clear-tool-uses"},
    # each of the two costly options alone on OpenCode's rule
    "opencode+supersede": {"supersede": True},
    "opencode+trigger": {"trigger": 100_000},
}


@pytest.fixture(scope="session")
def table_json(table: pa.Table) -> pa.Table:
    """The benchmark table plus a ``part_json`` column like ``to_table`` writes."""
    kinds = table.column("part_type").to_pylist()
    values = [
        f'{{"callID":"call_{i}","state":{{"title":"read","time":{{"start":1,"end":2}}}}}}'
        if kind == "tool" else None
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    return table.append_column("part_json", pa.array(values, pa.large_string()))


@pytest.fixture(scope="session")
def table_json_counted(table_json: pa.Table) -> pa.Table:
    """``table_json`` with each output counted once, as every table the
    library makes now carries it."""
    from ctxcompact.scans import with_output_units

    return with_output_units(table_json).to_arrow()


def _with_targets(table: pa.Table) -> pa.Table:
    """``table`` with each call's supersession target worked out once
    (``tool_target``); skipped on a core from before the column."""
    scans = pytest.importorskip("ctxcompact.scans")
    if not hasattr(scans, "with_tool_targets"):
        pytest.skip("this core has no tool_target column")
    return scans.with_tool_targets(table).to_arrow()  # type: ignore[no-any-return]


@pytest.mark.benchmark(group="prune-policy")
@pytest.mark.parametrize("lengths", ["text", "counted", "text+targets", "counted+targets"])
@pytest.mark.parametrize("name", POLICIES)
def test_prune_policy(
    benchmark: Any, table_json: pa.Table, table_json_counted: pa.Table, name: str, lengths: str
) -> None:
    table = table_json_counted if lengths.startswith("counted") else table_json
    if lengths.endswith("+targets"):
        # Targets matter to supersession only: the rule's baseline is the same.
        if name not in ("opencode-no-part-json", "aggressive", "opencode+supersede"):
            pytest.skip("reads no target")
        table = _with_targets(table)
    if name.endswith("no-part-json"):
        table = table.drop_columns(["part_json"])
    _info(benchmark, table)
    if "tool_target" in table.column_names:
        # a dictionary (read by id) on a core that makes it so, else strings
        benchmark.extra_info["tool_target"] = str(table.schema.field("tool_target").type)
    policy = cc.CompactionConfig(policy=POLICIES[name])
    result = benchmark.pedantic(cc.prune, (table, policy), {"threads": 2}, rounds=5,
                                warmup_rounds=1)  # fmt: skip
    assert result.pruned > 0
