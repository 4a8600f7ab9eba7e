"""Per-step latency of the live path on one ~200k-token session.

What a runtime pays before every model call: ``CompactionLoop.before_call``
with nothing to compact (store load, pivot filter, model view, proactive
check), and its parts on an already loaded ``Session``. Memory and SQLite
stores. Run before and after a change with the same command and compare:

    pytest benches/test_live.py --benchmark-enable --benchmark-json=live.json
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.testing.synthetic import generate_table

LIMITS = {"context": 1_000_000, "output": 32_000}  # never compacts: the step itself is timed


class NoModel:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        raise AssertionError("the benchmark must not compact")


@pytest.fixture(scope="module")
def session() -> cc.Session:
    """One generated coding-agent session with a completed compaction a quarter in."""
    (generated,) = cc.Transcript(
        generate_table(1, 1300, seed=3, mean_output_chars=1400)
    ).to_sessions()
    export = generated.to_export()
    cut = len(export["messages"]) // 4
    marker = {
        "info": {"id": "msg_marker", "role": "user"},
        "parts": [{"id": "prt_marker", "type": "compaction", "auto": True}],
    }
    summary = {
        "info": {
            "id": "msg_summary",
            "role": "assistant",
            "parentID": "msg_marker",
            "summary": True,
            "finish": "stop",
        },
        "parts": [{"id": "prt_summary", "type": "text", "text": "## Summary\nearlier work"}],
    }
    export["messages"][cut:cut] = [marker, summary]  # fmt: skip
    return cc.Session.model_validate(export)


def test_the_session_is_about_200k_tokens(session: cc.Session) -> None:
    tokens = cc.estimate_messages(cc.filter_pivot(session)).total
    assert 150_000 < tokens < 300_000, tokens


def _loop(store: Any, session: cc.Session) -> tuple[cc.CompactionLoop, str]:
    sid = store.create_session(session.id)  # its messages name it
    for message in session.messages:
        store.append_message(sid, message)
    config = cc.CompactionConfig()
    compactor = cc.Compactor(store, cc.Summarizer(NoModel(), config), config=config,
                             limits=LIMITS)  # fmt: skip
    return cc.CompactionLoop(compactor, system="You are a coding agent."), sid


@pytest.fixture(params=["memory", "sqlite"])
def loop(
    request: pytest.FixtureRequest, session: cc.Session, tmp_path: Path
) -> Iterator[tuple[cc.CompactionLoop, str]]:
    sqlite = request.param == "sqlite"
    store: Any = cc.SQLiteStore(tmp_path / "s.db") if sqlite else cc.MemoryStore()
    yield _loop(store, session)
    if sqlite:
        store.close()


def test_before_call(benchmark: Any, loop: tuple[cc.CompactionLoop, str]) -> None:
    runner, sid = loop
    messages = benchmark(runner.before_call, sid)
    assert messages[0]["role"] == "system" and len(messages) > 10


def test_filter_pivot_session(benchmark: Any, session: cc.Session) -> None:
    visible = benchmark(cc.filter_pivot, session)
    assert 0 < len(visible.messages) < len(session.messages)


def test_to_model_messages_session(benchmark: Any, session: cc.Session) -> None:
    visible = cc.filter_pivot(session)
    messages = benchmark(cc.to_model_messages, visible)
    assert len(messages) >= len(visible.messages)


def test_prune_session(benchmark: Any, session: cc.Session) -> None:
    result = benchmark(cc.prune, session)
    assert result.total > 0


def test_estimate_messages_session(benchmark: Any, session: cc.Session) -> None:
    estimates = benchmark(cc.estimate_messages, session)
    assert estimates.total > 0
