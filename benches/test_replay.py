"""Replay throughput (issue 13, part 7; issue 38, part 3): ``cc.replay`` (the
engine, ``_core.replay``), the live walk it replaced (``replay_session``, kept
as the oracle) and a plain Python loop doing the same walk, side by side on
the same generated runs.

The plain loop is what one writes without the library: before each assistant
message, render the history so far as chat messages and estimate it (no
masking, no summaries, no cache accounting). ``cc.replay`` does that through
the live lifecycle (store, proactive check, pivot filter) and also records the
cache reads, the baseline and the retention of each compaction.

Run: ``pytest benches/test_replay.py --benchmark-enable``; calls per second
are in each result's ``extra_info``.
"""

from __future__ import annotations

import os
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.models import AssistantMessage, Session
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import estimate_chat_messages
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.tuning.replay import replay_session

#: Runs of the benchmark (x 200 parts each); the CI smoke run uses fewer.
RUNS = max(2, int(os.environ.get("CTXCOMPACT_BENCH_SESSIONS", "40")) // 2)
LIMITS = {"context": 200_000, "output": 8_000}


@pytest.fixture(scope="module")
def runs() -> list[Session]:
    table = generate_table(RUNS, 200, seed=3, mean_output_chars=3000)
    # Without the runs' own summaries: replay leaves them out (the policy under
    # test decides compactions), so the plain loop walks the same history.
    return [
        s.model_copy(update={"messages": [m for m in s.messages if not _own_compaction(m)]})
        for s in cc.Transcript(table).to_sessions()
    ]


def _own_compaction(message: Any) -> bool:
    info = message.info
    return (isinstance(info, AssistantMessage) and info.summary is True) or any(
        p.type == "compaction" for p in message.parts
    )


def plain_loop(sessions: list[Session]) -> int:
    """Prompt tokens of every call, re-rendering the history each time."""
    total = 0
    for session in sessions:
        for i, message in enumerate(session.messages):
            if isinstance(message.info, AssistantMessage):
                before = session.model_copy(update={"messages": session.messages[:i]})
                total += estimate_chat_messages(cc.to_model_messages(before))
    return total


def _rate(benchmark: Any, calls: int) -> None:
    """Calls and calls per second in the result (no timing when benchmarks are disabled)."""
    benchmark.extra_info["calls"] = calls
    if benchmark.stats is not None:
        benchmark.extra_info["calls_per_s"] = calls / benchmark.stats.stats.min


def _calls(sessions: list[Session]) -> int:
    return sum(isinstance(m.info, AssistantMessage) for s in sessions for m in s.messages)


@pytest.mark.benchmark(group="replay")
def test_replay_plain_loop(benchmark: Any, runs: list[Session]) -> None:
    total = benchmark.pedantic(plain_loop, (runs,), rounds=3)
    _rate(benchmark, _calls(runs))
    assert total > 0


#: OpenCode's options pruning only as a summary runs (none fires here; the
#: preset prunes at turn ends): every prompt is then the plain loop's.
IN_SUMMARIES = Policy.load("opencode").model_copy(update={"acts": "summary"})


def live_walk(sessions: list[Session]) -> int:
    """Today's replay before the engine: every run through the live lifecycle."""
    config = cc.CompactionConfig().with_policy(IN_SUMMARIES)
    window = check_window(Limits.coerce(LIMITS), config)
    return sum(row["prompt_tokens"] for session in sessions
               for row in replay_session(session, config, window))  # fmt: skip


@pytest.mark.benchmark(group="replay")
def test_replay_live_walk(benchmark: Any, runs: list[Session]) -> None:
    total = benchmark.pedantic(live_walk, (runs,), rounds=3)
    _rate(benchmark, _calls(runs))
    assert total == plain_loop(runs)


@pytest.mark.benchmark(group="replay")
def test_replay_ctxcompact(benchmark: Any, runs: list[Session]) -> None:
    result = benchmark.pedantic(cc.replay, (runs, IN_SUMMARIES), {"limits": LIMITS}, rounds=3)
    _rate(benchmark, result.summary["calls"])
    # the same walk: with nothing compacted, every prompt is the plain loop's
    assert result.summary["compactions"] == 0
    assert result.summary["prompt_tokens"] == plain_loop(runs)


# --- a whole corpus end to end: the shared 1M-part transcript (conftest) --------------------


def _sessions_of(table: Any) -> list[Session]:
    return [
        s.model_copy(update={"messages": [m for m in s.messages if not _own_compaction(m)]})
        for s in cc.Transcript(table).to_sessions()
    ]


@pytest.mark.benchmark(group="replay-corpus")
def test_replay_corpus_plain_loop(benchmark: Any, table: Any, measuring: bool) -> None:
    """Read the table into sessions, then the plain walk, one core. The smoke
    run (no timings) walks two of them: the walk re-renders each run's history
    at every call, and the other runs add time, not code (on CI's 20
    sessions this was the smoke run's longest test)."""
    runs = None if measuring else 2
    total = benchmark.pedantic(lambda: plain_loop(_sessions_of(table)[:runs]), rounds=1)
    benchmark.extra_info["rows"] = table.num_rows
    assert total > 0


@pytest.mark.benchmark(group="replay-corpus")
def test_replay_corpus_tune(benchmark: Any, table: Any) -> None:
    """``cc.tune`` on the table: cut between sessions, the engine on 2 threads in process."""
    grid = {"preset": ["opencode"], "context": [LIMITS["context"]]}
    result = benchmark.pedantic(
        cc.tune, (table, grid), {"limits": LIMITS, "workers": 2, "batch_rows": 16_384}, rounds=1
    )
    benchmark.extra_info["rows"] = table.num_rows
    _rate(benchmark, int(result.points["calls"][0].as_py()))
    assert result.points["calls"][0].as_py() > 0


@pytest.mark.benchmark(group="replay-corpus")
def test_replay_corpus_engine(benchmark: Any, table: Any) -> None:
    """``cc.replay`` on the table in one process: the engine on every core."""
    result = benchmark.pedantic(cc.replay, (table, "opencode"), {"limits": LIMITS}, rounds=1)
    benchmark.extra_info["rows"] = table.num_rows
    _rate(benchmark, result.summary["calls"])
    assert result.summary["calls"] > 0
