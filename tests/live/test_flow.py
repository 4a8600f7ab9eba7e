"""The compaction flow is written once: the sync and async drivers give the
same steps, events, records and store state, on success and on every failure."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionConflictError, HookError, InputTypeError
from ctxcompact.live import Compactor, MemoryStore, Summarizer, compact_messages, flow
from ctxcompact.live import events as ev
from ctxcompact.live.split import acompact_messages


class Model:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        if self.fail:
            raise RuntimeError("the model is down")
        return SummaryResponse("## Summary\nwhat happened", "stop")


def setup(model: Model, hook: Callable[[Any], Any] | None = None) -> tuple[Compactor, str, list]:
    store = MemoryStore()
    sid = store.create_session("s1")
    first = user("fix the bug")
    store.append_message(sid, first)
    store.append_message(sid, tool_reply(first.id, "x" * 400))
    compactor = Compactor(store, Summarizer(model, CompactionConfig()))
    seen: list[tuple[str, Any]] = []
    compactor.events.subscribe("*", lambda name, payload: seen.append((name, payload)))
    if hook is not None:
        compactor.hooks.add_pre_compact(hook)
    compactor.request_compaction(sid)
    return compactor, sid, seen


def outcome(compactor: Compactor, sid: str, seen: list) -> tuple[Any, ...]:
    """What a run leaves, without ids and clocks."""
    messages = compactor.store.load(sid).messages
    shape = [(m.role, [p.type for p in m.parts], getattr(m.info, "summary", None))
             for m in messages]  # fmt: skip
    records = [(r.reason, r.summary_source, r.tokens_before, r.tokens_after)
               for r in compactor.store.records(sid)]  # fmt: skip
    return [name for name, _ in seen], shape, records


@pytest.mark.parametrize("fail", [False, True])
def test_sync_and_async_complete_a_task_the_same_way(fail: bool) -> None:
    a, sid_a, seen_a = setup(Model(fail))
    b, sid_b, seen_b = setup(Model(fail))
    got_a = a.process_pending(sid_a)
    got_b = asyncio.run(b.aprocess_pending(sid_b))
    assert got_a is not None and got_b is not None
    assert got_a.summary_source == got_b.summary_source == ("digest" if fail else "model")
    assert outcome(a, sid_a, seen_a) == outcome(b, sid_b, seen_b)
    names = outcome(a, sid_a, seen_a)[0]
    assert (ev.COMPACTION_FALLBACK in names) == fail


def test_a_failing_hook_fails_both_drivers_and_leaves_the_task_pending() -> None:
    def broken(event: Any) -> None:
        raise ValueError("hook bug")

    for run in (lambda c, s: c.process_pending(s), lambda c, s: asyncio.run(c.aprocess_pending(s))):
        compactor, sid, _ = setup(Model(), broken)
        with pytest.raises(HookError, match="hook bug"):
            run(compactor, sid)
        session = compactor.store.load(sid)
        assert compactor.pending_task(session) is not None and not compactor.store.records(sid)


def test_a_conflict_reaches_the_caller_of_both_drivers() -> None:
    for asynchronous in (False, True):
        compactor, sid, seen = setup(Model())
        session = compactor.store.load(sid)  # taken before another runner completes the task
        compactor.process_pending(sid)
        run = compactor.pending_flow(sid, session)
        with pytest.raises(CompactionConflictError):
            asyncio.run(flow.arun(run)) if asynchronous else flow.run(run)
        assert ev.COMPACTION_CONFLICT in [name for name, _ in seen]


def test_the_split_family_runs_the_same_steps_sync_and_async() -> None:
    messages = [{"role": "system", "content": "sys"}]
    for i in range(12):
        messages += [{"role": "user", "content": f"step {i} " + "x" * 3000},
                     {"role": "assistant", "content": "ok " + "y" * 3000}]  # fmt: skip
    summarizer = Summarizer(Model(), CompactionConfig())
    sync = compact_messages(messages, summarizer, context=20_000, output=4_000)
    asynchronous = asyncio.run(acompact_messages(messages, summarizer, context=20_000,
                                                 output=4_000))  # fmt: skip
    assert sync.record is not None and asynchronous.record is not None
    assert sync.messages == asynchronous.messages
    assert sync.record.tokens_after == asynchronous.record.tokens_after


def test_an_effects_error_is_thrown_into_the_flow_where_it_can_be_handled() -> None:
    def fails() -> None:
        raise KeyError("gone")

    def steps() -> flow.Flow[str]:
        try:
            yield flow.blocking(fails)
        except KeyError:
            return "handled"
        return "not reached"

    def unhandled() -> flow.Flow[int]:
        yield flow.blocking(fails)
        return 1

    assert flow.run(steps()) == asyncio.run(flow.arun(steps())) == "handled"
    with pytest.raises(KeyError):
        flow.run(unhandled())
    with pytest.raises(KeyError):
        asyncio.run(flow.arun(unhandled()))


def test_cancelled_during_the_commit_the_compaction_still_gets_its_post_hooks() -> None:
    """The commit runs in a worker thread, which a cancellation cannot stop:
    the compaction was stored (and session.compacted sent) but the task's
    post-compact hooks were skipped. Now the flow is seen through, then the
    task ends cancelled."""
    import threading

    compactor, sid, seen = setup(Model())
    entered, release = threading.Event(), threading.Event()
    commit = compactor.store.commit_compaction

    def slow_commit(session_id: str, c: Any) -> None:
        entered.set()
        release.wait()
        commit(session_id, c)

    compactor.store.commit_compaction = slow_commit  # type: ignore[method-assign]
    posted: list[int] = []

    async def post(event: ev.PostCompactEvent) -> None:
        await asyncio.sleep(0)
        posted.append(event.record.round)

    compactor.hooks.add_post_compact(post)

    async def run() -> None:
        task = asyncio.create_task(compactor.aprocess_pending(sid))
        await asyncio.to_thread(entered.wait)
        task.cancel()
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert posted == [1] and len(compactor.store.records(sid)) == 1
    assert [n for n, _ in seen][-1] == ev.COMPACTED


def test_cancelled_before_the_commit_nothing_is_stored() -> None:
    import threading

    entered, release = threading.Event(), threading.Event()

    class Slow(Model):
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            entered.set()
            release.wait()
            return super().complete(request)

    compactor, sid, _ = setup(Slow())
    posted: list[int] = []
    compactor.hooks.add_post_compact(lambda e: posted.append(1))

    async def run() -> None:
        task = asyncio.create_task(compactor.aprocess_pending(sid))
        await asyncio.to_thread(entered.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()

    asyncio.run(run())
    assert not posted and not compactor.store.records(sid)
    assert compactor.pending_task(compactor.store.load(sid)) is not None


class OldSummarizer(Summarizer):
    """A ``summarize`` override without the keywords the compaction passes
    (``limits``, ``token_ratio``, ``kept``)."""

    def summarize(self, history, *, previous_summary=None, round=1,  # type: ignore[no-untyped-def,override]
                  instructions=None, context=()):  # fmt: skip
        raise AssertionError("not called: the arguments do not bind")

    async def asummarize(self, history, *, previous_summary=None, round=1,  # type: ignore[no-untyped-def,override]
                         instructions=None, context=()):  # fmt: skip
        raise AssertionError("not called: the arguments do not bind")


class BrokenInside(Summarizer):
    """The right signature, and a TypeError raised by its own code."""

    def summarize(self, history, **options):  # type: ignore[no-untyped-def,override]
        return len(None)  # type: ignore[arg-type]

    async def asummarize(self, history, **options):  # type: ignore[no-untyped-def,override]
        return len(None)  # type: ignore[arg-type]


def pending_compactor(summarizer: Summarizer) -> tuple[Compactor, str]:
    store = MemoryStore()
    sid = store.create_session("s1")
    first = user("fix the bug")
    store.append_message(sid, first)
    store.append_message(sid, tool_reply(first.id, "x" * 400))
    compactor = Compactor(store, summarizer)
    compactor.request_compaction(sid)
    return compactor, sid


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_summarize_with_the_wrong_signature_is_a_typed_error_naming_it(driver: str) -> None:
    """The compaction calls ``summarize`` one way; an override that cannot take
    that call fails with InputTypeError naming the class and the signature
    (not a bare TypeError), and the task stays pending."""
    compactor, sid = pending_compactor(OldSummarizer(Model(), CompactionConfig()))
    name = "summarize" if driver == "sync" else "asummarize"
    with pytest.raises(InputTypeError, match=rf"OldSummarizer\.{name} cannot take") as caught:
        if driver == "sync":
            compactor.process_pending(sid)
        else:
            asyncio.run(compactor.aprocess_pending(sid))
    message = str(caught.value)
    for keyword in ("limits=None", "token_ratio=None", "kept=()"):
        assert keyword in message
    assert isinstance(caught.value, TypeError) and caught.value.session_id == sid
    assert compactor.pending_task(compactor.store.load(sid)) is not None
    assert not compactor.store.records(sid)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_type_error_from_inside_summarize_is_not_blamed_on_the_signature(driver: str) -> None:
    compactor, sid = pending_compactor(BrokenInside(Model(), CompactionConfig()))
    with pytest.raises(TypeError, match="has no len") as caught:
        if driver == "sync":
            compactor.process_pending(sid)
        else:
            asyncio.run(compactor.aprocess_pending(sid))
    assert not isinstance(caught.value, InputTypeError)
