"""Small, frequent calls: what an agent runtime pays once per step.

``select_split`` over each of the 200 tau-bench chats (5,308 messages; the
split counts every message the engine's way: the list read by the core's
chat mapper, ``sent_messages`` over its rows), and the live prune's
``tool_targets`` and ``prune`` on one chat's table. Small tables run on the
calling thread (``parallel::run_sized``): no pool thread to wake per call.
docs/benchmarks.md ("Small calls per step") has the figures and the run
they are compared with:

    pytest benches/test_small_calls.py --benchmark-enable --benchmark-min-rounds=10

The ``pure-python`` tests time the same calls by the pure-Python estimate
the engine's counts replaced (``chat_estimate_63a8395.py``, a copy of that
code): the split of 63a8395, and the count of the same chats as Anthropic
turns (``to_anthropic_messages``) as f9fdeea^ counted such a list; compare
with ``--benchmark-timer=time.process_time`` (docs/benchmarks.md, "The
engine move's regressions").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chat_estimate_63a8395
import pytest
from ctxcompact.clients.anthropic import to_anthropic_messages
from ctxcompact.live.split import select_split
from ctxcompact.scans.chatrows import chat_counts, read_chat
from ctxcompact.scans.content import check_chat_messages
from ctxcompact.scans.parts import prune
from ctxcompact.transcript.targets import tool_targets

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"


@pytest.fixture(scope="module")
def chats() -> list[list[dict[str, Any]]]:
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if not path.exists():
        pytest.skip("../shared/data is not beside this checkout")
    return [run["traj"] for run in json.loads(path.read_text())]


@pytest.mark.benchmark(group="small-calls")
def test_select_split_tau_bench(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    benchmark.extra_info["messages"] = sum(len(c) for c in chats)
    splits = benchmark(lambda: [select_split(c, keep_tokens=2000) for c in chats])
    assert len(splits) == len(chats)
    assert all(s.boundary <= len(c) for s, c in zip(splits, chats, strict=True))


@pytest.mark.benchmark(group="small-calls")
def test_select_split_tau_bench_pure_python(
    benchmark: Any, chats: list[list[dict[str, Any]]]
) -> None:
    """The split of 63a8395 (its Python estimate, from the tail until the
    budget is spent)."""
    benchmark(lambda: [chat_estimate_63a8395.select_split(c, keep_tokens=2000) for c in chats])


@pytest.fixture(scope="module")
def anthropic_chats(chats: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The same chats as Anthropic turns (5,108 messages of content blocks)."""
    return [to_anthropic_messages(c)[1] for c in chats]


@pytest.mark.benchmark(group="anthropic-counts")
def test_chat_counts_anthropic_blocks(
    benchmark: Any, anthropic_chats: list[list[dict[str, Any]]]
) -> None:
    counts = benchmark(lambda: [chat_counts(c) for c in anthropic_chats])
    assert counts == [chat_estimate_63a8395.chat_counts_blocks(c) for c in anthropic_chats]


@pytest.mark.benchmark(group="anthropic-counts")
def test_chat_counts_anthropic_blocks_pure_python(
    benchmark: Any, anthropic_chats: list[list[dict[str, Any]]]
) -> None:
    benchmark(lambda: [chat_estimate_63a8395.chat_counts_blocks(c) for c in anthropic_chats])


def _table_counts(chat: list[dict[str, Any]]) -> list[int]:
    """The counts as ``chat_counts`` took them before ``_core.chat_counts``:
    the mapper's rows as a pyarrow table, then ``sent_messages`` over it."""
    check_chat_messages(chat)
    return read_chat(chat).counts(method="opencode", overhead=4)


@pytest.mark.benchmark(group="small-calls")
def test_select_split_tau_bench_table_counts(
    benchmark: Any, chats: list[list[dict[str, Any]]]
) -> None:
    """The same split with its counts through the table (before): the
    counts are equal."""
    splits = benchmark(
        lambda: [select_split(c, keep_tokens=2000, counts=_table_counts(c)) for c in chats]
    )
    assert [s.boundary for s in splits] == [
        select_split(c, keep_tokens=2000).boundary for c in chats
    ]


@pytest.mark.benchmark(group="small-calls")
def test_tool_targets_one_chat(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    table = read_chat(max(chats, key=len)).table
    targets = benchmark(tool_targets, table)
    assert len(targets) == table.num_rows


@pytest.mark.benchmark(group="small-calls")
def test_prune_one_chat(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    table = read_chat(max(chats, key=len)).table
    policy = {"protect_turns": 0, "protect": 0, "minimum": 0}
    assert benchmark(prune, table, policy).rows is not None
