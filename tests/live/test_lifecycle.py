"""The queued-task lifecycle (OpenCode's family) over a real store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from builders import fill, tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionLoopError, HookError, InvalidUsageError, TranscriptError
from ctxcompact.live import events as ev
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.store import MemoryStore, SQLiteStore, new_id
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import AssistantMessage, MessageWithParts, Part
from ctxcompact.scans import CLEARED_TOOL_OUTPUT, COMPACTION_QUESTION

LIMITS = {"context": 100_000, "output": 8_000}  # usable: 92 000


class Client:
    """Records requests; answers with ``text`` (a callable gets the request)."""

    def __init__(self, text: Any = "## Session Summary\nnotes") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        text = self.text(request) if callable(self.text) else self.text
        return SummaryResponse(text, "stop", 1000, 50)


def setup(tmp_path: Path, client: Client | None = None, **config: Any) -> tuple[Any, ...]:
    store = SQLiteStore(tmp_path / "s.db")
    sid = store.create_session("s")
    client = client or Client()
    cfg = CompactionConfig(**config)
    bus = ev.EventBus()
    seen: list[tuple[str, dict[str, Any]]] = []
    bus.subscribe("*", lambda name, payload: seen.append((name, payload)))
    compactor = Compactor(store, Summarizer(client, cfg), config=cfg, limits=LIMITS, events=bus)
    return store, sid, client, compactor, seen


def test_overflow_after_a_step_queues_an_auto_marker(tmp_path: Path) -> None:
    store, sid, _, compactor, seen = setup(tmp_path)
    fill(store, sid, 4)  # last step reported 60 100 tokens: fine
    assert not compactor.check_step(sid).queued
    fill(store, sid, 1, step=0)
    check = compactor.check_step(sid, {"input": 92_000, "output": 1})
    assert (check.queued, check.count, check.usable) == (True, 92_001, 92_000)
    marker = store.load(sid).messages[-1]
    assert marker.id == check.marker_id and marker.role == "user"
    assert [(p.type, p.auto) for p in marker.parts] == [("compaction", True)]
    assert [n for n, _ in seen] == [ev.OVERFLOW_DETECTED, ev.COMPACTION_QUEUED]
    assert compactor.metrics.reactive_overflows == 1
    # while it is pending, no second marker
    assert not compactor.check_step(sid, {"input": 99_000, "output": 1}).queued


def test_no_queue_when_auto_is_off_or_limits_unknown(tmp_path: Path) -> None:
    store, sid, _, compactor, _ = setup(tmp_path, auto=False)
    fill(store, sid, 6)
    assert not compactor.check_step(sid).queued
    unlimited = Compactor(store, Summarizer(None), limits=None)
    assert not unlimited.check_step(sid).queued


def test_step_without_usage_uses_the_estimated_history(tmp_path: Path) -> None:
    store, sid, _, compactor, _ = setup(tmp_path)
    u = user("go")
    store.append_message(sid, u)
    reply = tool_reply(u.id, "y" * 400_000)  # ~100k tokens of output, no usage reported
    reply.info.tokens = None  # type: ignore[union-attr]
    store.append_message(sid, reply)
    assert compactor.check_step(sid).queued


def test_process_pending_writes_summary_continue_marks_and_record(tmp_path: Path) -> None:
    store, sid, client, compactor, seen = setup(tmp_path)
    fill(store, sid, 6)
    marker_id = compactor.check_step(sid).marker_id
    record = compactor.process_pending(sid)
    assert record is not None
    session = store.load(sid)
    marker, summary, follow = session.messages[-3:]
    assert marker.id == marker_id
    assert isinstance(summary.info, AssistantMessage)
    assert (summary.info.summary, summary.info.parentID, summary.info.finish) == (
        True, marker_id, "stop")  # fmt: skip
    assert summary.parts[0].text == "## Session Summary\nnotes"
    assert follow.parts[0].text == "Continue if you have next steps" and follow.parts[0].synthetic
    pruned = [p.id for m in session.messages for p in m.parts if p.compacted]
    assert len(pruned) == record.pruned_parts > 0
    assert all(p.state.output for m in session.messages for p in m.parts if p.compacted)  # type: ignore[union-attr]
    assert (record.family, record.trigger, record.reason, record.round) == (
        "pivot", "auto", "overflow", 1)  # fmt: skip
    assert record.summary_source == "model" and record.error is None
    assert record.tokens_before > 80_000 and record.tokens_after < 1_000
    assert record.summary_message_id == summary.id and record.marker_message_id == marker_id
    assert store.records(sid) == [record]
    names = [n for n, _ in seen]
    assert names[-3:] == [ev.COMPACTION_STARTED, ev.PRUNE_APPLIED, ev.COMPACTED]
    assert seen[-1][1]["record"] == record
    # the request: tool-less, the history ends with the marker's question
    request = client.requests[0]
    assert request.messages[-2] == {"role": "user", "content": COMPACTION_QUESTION}
    assert CLEARED_TOOL_OUTPUT in str(request.messages)  # pruned outputs are placeholders
    # later calls see the pivot: marker question, summary, continue
    visible = compactor.model_messages(sid)
    assert [m["role"] for m in visible] == ["user", "assistant", "user"]
    assert visible[0]["content"] == COMPACTION_QUESTION
    assert compactor.process_pending(sid) is None  # nothing pending any more


def test_manual_compaction_has_instructions_and_no_continue(tmp_path: Path) -> None:
    store, sid, client, compactor, _ = setup(tmp_path)
    fill(store, sid, 3)
    compactor.request_compaction(sid, instructions="keep the test names")
    record = compactor.process_pending(sid)
    assert record is not None and record.trigger == "manual" and record.reason == "manual"
    assert "keep the test names" in client.requests[0].messages[-1]["content"]
    assert store.load(sid).messages[-1].info.role == "assistant"  # no auto-continue


def test_chained_rounds_integrate_the_previous_summary(tmp_path: Path) -> None:
    client = Client(lambda r: f"## Session Summary\nround notes {len(r.messages)}")
    store, sid, _, compactor, _ = setup(tmp_path, client)
    fill(store, sid, 3)
    compactor.request_compaction(sid)
    first = compactor.process_pending(sid)
    fill(store, sid, 2)
    compactor.request_compaction(sid)
    second = compactor.process_pending(sid)
    assert first is not None and second is not None
    assert (first.round, second.round) == (1, 2)
    request = client.requests[1]
    previous = (
        store.load(sid)
        .messages[[m.id for m in store.load(sid).messages].index(first.summary_message_id)]
        .parts[0]
        .text
    )
    assert {"role": "assistant", "content": previous} in request.messages
    assert "round 2" in request.messages[-1]["content"]
    # the second history starts at the first pivot: nothing older is sent
    assert request.messages[0] == {"role": "user", "content": COMPACTION_QUESTION}


def test_hooks_add_context_cancel_and_see_the_result(tmp_path: Path) -> None:
    store, sid, client, compactor, seen = setup(tmp_path)
    fill(store, sid, 3)
    after: list[ev.PostCompactEvent] = []
    compactor.hooks.add_pre_compact(lambda e: e.extra_context.append("branch: feature/x"))
    compactor.hooks.add_post_compact(after.append)
    compactor.request_compaction(sid, instructions="be short")
    record = compactor.process_pending(sid)
    assert "branch: feature/x" in client.requests[0].messages[-1]["content"]
    assert after[0].record == record and after[0].source == "compact"

    compactor.hooks.add_pre_compact(lambda e: e.cancel("user said no"))
    cancelled = compactor.request_compaction(sid)
    assert compactor.process_pending(sid) is None
    # Kept, marked ignored: never pending again, never sent to the agent's model.
    session = store.load(sid)
    assert session.messages[-1].id == cancelled and session.messages[-1].parts[0].ignored
    assert compactor.pending_task(session) is None
    sent = compactor.model_messages(sid)
    assert [m["content"] for m in sent].count(COMPACTION_QUESTION) == 1  # the answered one
    # The batch estimate leaves it out too (one definition of what is sent).
    from ctxcompact.scans import estimate_chat_messages, estimate_messages, to_model_messages

    assert estimate_messages(session).total == estimate_chat_messages(to_model_messages(session))
    assert (ev.COMPACTION_CANCELLED, {"session_id": sid, "marker_id": cancelled,
            "reason": "user said no"}) in seen  # fmt: skip
    # Asked again, the hook is asked about a new marker.
    assert compactor.request_compaction(sid) != cancelled


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_runners_queueing_at_once_add_one_marker(tmp_path: Path, kind: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "q.db")
    sid = store.create_session("s")
    fill(store, sid, 2)
    compactor = Compactor(store, Summarizer(Client()), limits=LIMITS)
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: compactor.request_compaction(sid), range(16)))
    markers = [m for m in store.load(sid).messages if m.parts and m.parts[0].type == "compaction"]
    assert len(ids) == 1 and [m.id for m in markers] == list(ids)


def test_failing_hook_is_a_hook_error(tmp_path: Path) -> None:
    store, sid, _, compactor, _ = setup(tmp_path)
    fill(store, sid, 2)

    def broken(event: ev.PreCompactEvent) -> None:
        raise RuntimeError("hook bug")

    compactor.hooks.add_pre_compact(broken)
    compactor.request_compaction(sid)
    with pytest.raises(HookError, match="broken"):
        compactor.process_pending(sid)
    assert compactor.pending_task(store.load(sid)) is not None  # nothing lost


def test_empty_model_summary_falls_back_to_the_digest(tmp_path: Path) -> None:
    store, sid, _, compactor, seen = setup(tmp_path, Client(""))
    fill(store, sid, 3)
    compactor.request_compaction(sid)
    record = compactor.process_pending(sid)
    assert record is not None and record.summary_source == "digest"
    assert record.error == "empty summary"
    assert ev.COMPACTION_FALLBACK in [n for n, _ in seen]
    assert compactor.metrics.fallbacks == 1 and compactor.metrics.summaries_generated == 0


def test_loop_guard_stops_ineffective_compactions(tmp_path: Path) -> None:
    # A summary bigger than the window never brings the session under its limit.
    store, sid, _, compactor, seen = setup(tmp_path, Client("z" * 400_000), max_attempts=2)
    fill(store, sid, 2)
    for _ in range(2):
        assert compactor.check_step(sid, {"input": 95_000, "output": 0}).queued
        record = compactor.process_pending(sid)
        assert record is not None and record.tokens_after > 92_000
    with pytest.raises(CompactionLoopError):
        compactor.check_step(sid, {"input": 95_000, "output": 0})
    assert ev.COMPACTION_STALLED in [n for n, _ in seen]


@pytest.mark.parametrize("usage", [{"input": -1, "output": 0}, {"input": 5}])
def test_bad_usage_is_rejected(tmp_path: Path, usage: dict[str, int]) -> None:
    store, sid, _, compactor, _ = setup(tmp_path)
    fill(store, sid, 1)
    with pytest.raises(InvalidUsageError):
        compactor.check_step(sid, usage)


def test_invalid_sessions_get_specific_errors(tmp_path: Path) -> None:
    store = MemoryStore()
    compactor = Compactor(store, Summarizer(None), limits=LIMITS)
    sid = store.create_session()
    u = user()
    store.append_message(sid, u)
    orphan = MessageWithParts(
        info=AssistantMessage(id=new_id("msg"), parentID="missing", summary=True, finish="stop"),
        parts=[Part(id=new_id("prt"), type="text", text="s")],
    )
    store.append_message(sid, orphan)
    compactor.request_compaction(sid)
    with pytest.raises(TranscriptError, match="no parent marker") as e:
        compactor.process_pending(sid)
    assert e.value.message_id == orphan.id

    sid2 = store.create_session()
    store.append_message(sid2, user())
    bad = MessageWithParts(
        info=AssistantMessage(id=new_id("msg"), finish="stop"),
        parts=[Part(id=new_id("prt"), type="compaction", auto=True)],
    )
    store.append_message(sid2, bad)
    store.append_message(sid2, user("What did we do so far?"))
    compactor.request_compaction(sid2)
    with pytest.raises(TranscriptError, match="belongs in a user message"):
        compactor.process_pending(sid2)


def test_async_twin_gives_the_same_result(tmp_path: Path) -> None:
    store, sid, _, compactor, _ = setup(tmp_path)
    fill(store, sid, 6)

    async def run() -> Any:
        check = await compactor.acheck_step(sid)
        assert check.queued
        return await compactor.aprocess_pending(sid)

    record = asyncio.run(run())
    assert record is not None and record.round == 1 and record.summary_source == "model"
    assert store.load(sid).messages[-2].info.summary is True  # type: ignore[union-attr]


def test_instructions_while_a_compaction_is_pending_are_refused_not_dropped() -> None:
    from ctxcompact.errors import CompactionPendingError

    compactor = Compactor(MemoryStore(), Summarizer(None))
    sid = compactor.store.create_session()
    pending = compactor.request_compaction(sid, auto=True, reason="overflow")
    with pytest.raises(CompactionPendingError, match="already pending") as e:
        compactor.request_compaction(sid, instructions="keep the API notes")
    assert (e.value.session_id, e.value.message_id) == (sid, pending)
    assert compactor.request_compaction(sid) == pending  # no instructions: the pending id
    assert sum(m.info.role == "user" for m in compactor.store.load(sid).messages) == 1
