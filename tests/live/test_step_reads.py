"""A loop step reads only what was appended since the last one (``load_since``)
and renders only new messages: its output must still be what a whole load
gives, whatever another writer (another store instance, another process)
changed in between, on every store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import SessionNotFoundError
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.loop import CompactionLoop
from ctxcompact.live.store import MemoryStore, SQLiteStore
from ctxcompact.live.summary import Summarizer
from ctxcompact.policy import Policy
from ctxcompact.scans import CLEARED_TOOL_OUTPUT, filter_pivot, to_model_messages


class Client:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse("## Summary\nnotes", "stop")


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "store.db")
    from ctxcompact.live.postgres import PostgresStore

    conninfo, schema = request.getfixturevalue("pg_schema")
    return PostgresStore(conninfo, schema=schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """The loop's store and another writer's (the same instance for memory)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        return
    mine, other = _open(request.param, tmp_path, request), _open(request.param, tmp_path, request)
    yield mine, other
    mine.close()
    other.close()


def _loop(store: Any, **cfg: Any) -> CompactionLoop:
    config = CompactionConfig(**cfg)
    compactor = Compactor(store, Summarizer(Client(), config), config=config,
                          limits={"context": 1_000_000, "output": 8_000})  # fmt: skip
    return CompactionLoop(compactor, system="sys")


def _whole(loop: CompactionLoop, store: Any, sid: str) -> list[dict[str, Any]]:
    """What a step sends, from a whole load."""
    shown = filter_pivot(store.load(sid))
    return to_model_messages(shown, system=loop.system, policy=loop.config.policy)


def _session(store: Any, turns: int = 3) -> tuple[str, list[str]]:
    sid = store.create_session()
    parts = []
    for i in range(turns):
        u = user(f"request {i}")
        reply = tool_reply(u.id, f"output {i} " * 50)
        store.append_message(sid, u)
        store.append_message(sid, reply)
        parts.append(reply.parts[0].id)
    return sid, parts


def test_appends_by_another_writer_are_sent(stores: tuple[Any, Any]) -> None:
    mine, other = stores
    loop = _loop(mine)
    sid, _ = _session(other)
    assert loop.before_call(sid) == _whole(loop, mine, sid)
    u = user("and this")
    other.append_message(sid, u)
    other.append_message(sid, tool_reply(u.id, "new output"))
    sent = loop.before_call(sid)
    assert sent == _whole(loop, mine, sid) and sent[-1]["content"] == "new output"


def test_a_mark_by_another_writer_is_read_whole(stores: tuple[Any, Any]) -> None:
    """Parts marked after a step (a rewrite, not an append): the next step
    sends their placeholder, not the output it rendered before."""
    mine, other = stores
    loop = _loop(mine)
    sid, parts = _session(other)
    before = loop.before_call(sid)
    assert CLEARED_TOOL_OUTPUT not in [m["content"] for m in before]
    other.mark_parts(sid, {parts[0]: 1})
    after = loop.before_call(sid)
    assert after == _whole(loop, mine, sid)
    assert [m["content"] for m in after].count(CLEARED_TOOL_OUTPUT) == 1


def test_a_compaction_by_another_runner_is_read_whole(stores: tuple[Any, Any]) -> None:
    mine, other = stores
    loop, runner = _loop(mine), _loop(other)
    sid, _ = _session(other)
    loop.before_call(sid)
    runner.compactor.request_compaction(sid)
    assert runner.compactor.process_pending(sid) is not None
    sent = loop.before_call(sid)
    assert sent == _whole(loop, mine, sid)
    assert sent[-1]["content"] == "## Summary\nnotes"


def test_a_cancelled_marker_is_read_whole(stores: tuple[Any, Any]) -> None:
    mine, other = stores
    loop = _loop(mine)
    sid, _ = _session(other)
    marker = loop.compactor.request_compaction(sid)
    seen = mine.load_since(sid)
    other.cancel_compaction(sid, marker)  # as a pre-compact hook elsewhere would
    assert mine.load_since(sid, seen.cursor).whole
    assert loop.before_call(sid) == _whole(loop, mine, sid)
    assert loop.compactor.store.records(sid) == []


def test_changing_the_sent_messages_changes_no_later_step(stores: tuple[Any, Any]) -> None:
    """A runtime may add to what it sends (an Anthropic ``cache_control`` on
    the last message): the next step is not built from the changed dicts."""
    mine, _ = stores
    loop = _loop(mine, policy=Policy(keep_thinking=1))
    sid, _ = _session(mine)
    first = loop.before_call(sid)
    for message in first:
        message["content"] = "changed"
        message["cache_control"] = {"type": "ephemeral"}
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = "changed"
    assert loop.before_call(sid) == _whole(loop, mine, sid)


def test_keep_thinking_follows_the_newest_steps(stores: tuple[Any, Any]) -> None:
    """Which assistant messages send their reasoning moves as steps are added:
    a message's view is not kept across that change."""
    mine, _ = stores
    loop = _loop(mine, policy=Policy(keep_thinking=1))
    sid, _ = _session(mine, turns=1)
    for i in range(3):
        u = user(f"think {i}")
        reply = tool_reply(u.id, "out")
        reply.parts.insert(0, reply.parts[0].model_copy(
            update={"id": f"prt_r{i}", "type": "reasoning", "text": f"why {i}", "state": None,
                    "tool": None, "callID": None}))  # fmt: skip
        mine.append_message(sid, u)
        mine.append_message(sid, reply)
        sent = loop.before_call(sid)
        assert sent == _whole(loop, mine, sid)
        assert [m.get("reasoning_content") for m in sent if "reasoning_content" in m] == [
            f"why {i}"
        ]


def test_a_loop_keeps_a_bounded_number_of_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """One loop serving many sessions keeps only the most recently stepped
    (each kept session holds its messages and views); the others are read
    whole at their next step, and still sent right."""
    import ctxcompact.live.loop as loop_module

    monkeypatch.setattr(loop_module, "KEPT_SESSIONS", 2)
    store = MemoryStore()
    loop = _loop(store)
    sids = [_session(store, turns=1)[0] for _ in range(3)]
    for sid in sids + sids:
        assert loop.before_call(sid) == _whole(loop, store, sid)
    assert list(loop._kept) == sids[1:]


def test_a_store_without_load_since_is_loaded_whole() -> None:
    """A store of the runtime's own (the protocol's core only) still works."""

    class Plain:
        def __init__(self) -> None:
            self.inner = MemoryStore()

        def __getattr__(self, name: str) -> Any:
            if name == "load_since":
                raise AttributeError(name)
            return getattr(self.inner, name)

    store: Any = Plain()
    loop = _loop(store)
    sid, parts = _session(store)
    loop.before_call(sid)
    store.mark_parts(sid, {parts[0]: 1})
    assert loop.before_call(sid) == _whole(loop, store, sid)


def test_load_since_a_missing_session(stores: tuple[Any, Any]) -> None:
    mine, _ = stores
    with pytest.raises(SessionNotFoundError):
        mine.load_since("nope")


def test_load_since_gives_only_the_appended_messages(stores: tuple[Any, Any]) -> None:
    mine, other = stores
    sid, _ = _session(other, turns=2)
    first = mine.load_since(sid)
    assert first.whole and len(first.session.messages) == 4
    assert first.session == mine.load(sid)
    u = user("next")
    other.append_message(sid, u)
    later = mine.load_since(sid, first.cursor)
    assert not later.whole and [m.id for m in later.session.messages] == [u.id]
    assert mine.load_since(sid, later.cursor).session.messages == []
