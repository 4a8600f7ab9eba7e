"""Hooks, the event bus, records and metrics."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from ctxcompact.errors import HookError
from ctxcompact.live.events import (
    CompactionRecord,
    EventBus,
    Hooks,
    Metrics,
    PostCompactEvent,
    PreCompactEvent,
)


def pre() -> PreCompactEvent:
    return PreCompactEvent(session_id="s", trigger="manual", reason="manual", tokens_before=10)


def rec(source: str = "model", before: int = 100, error: str | None = None) -> CompactionRecord:
    return CompactionRecord(session_id="s", family="split", trigger="auto", reason="proactive",
                            round=2, tokens_before=before, tokens_after=5,
                            summary_source=source,  # type: ignore[arg-type]
                            summarized_message_ids=("a", "b"), error=error)  # fmt: skip


def test_pre_hooks_run_in_order_mutate_and_stop_at_cancel() -> None:
    order: list[str] = []

    def one(e: PreCompactEvent) -> None:
        order.append("one")
        e.extra_context.append("ctx")

    def two(e: PreCompactEvent) -> None:
        order.append("two")
        e.cancel("no")

    hooks = Hooks([one, two])
    hooks.add_pre_compact(lambda e: order.append("three"))
    event = hooks.run_pre_compact(pre())
    assert order == ["one", "two"]
    assert (event.extra_context, event.cancelled, event.cancel_reason) == (["ctx"], True, "no")


def test_async_hooks_need_the_async_path() -> None:
    async def hook(event: PreCompactEvent) -> None:
        event.extra_context.append("async ctx")

    hooks = Hooks(pre_compact=[hook])
    with pytest.raises(HookError, match="async"):
        hooks.run_pre_compact(pre())
    event = asyncio.run(hooks.arun_pre_compact(pre()))
    assert event.extra_context == ["async ctx"]


def test_hook_failures_are_hook_errors_with_the_cause() -> None:
    def bad_post(event: PostCompactEvent) -> None:
        raise KeyError("x")

    async def bad_async(event: PreCompactEvent) -> None:
        raise ValueError("y")

    with pytest.raises(HookError, match="bad_post") as e:
        Hooks(post_compact=[bad_post]).run_post_compact(PostCompactEvent("s", rec()))
    assert isinstance(e.value.__cause__, KeyError) and e.value.session_id == "s"
    with pytest.raises(HookError, match="bad_async"):
        asyncio.run(Hooks(pre_compact=[bad_async]).arun_pre_compact(pre()))


def test_bus_wildcard_unsubscribe_and_failing_subscriber(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    got: list[tuple[str, dict[str, object]]] = []
    stop = bus.subscribe("session.compacted", lambda n, p: got.append((n, p)))
    bus.subscribe("*", lambda n, p: got.append(("*" + n, p)))
    bus.subscribe("session.compacted", lambda n, p: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="ctxcompact"):
        bus.emit("session.compacted", session_id="s")
    assert got == [
        ("session.compacted", {"session_id": "s"}),
        ("*session.compacted", {"session_id": "s"}),
    ]
    assert "ZeroDivisionError" in caplog.text
    stop()
    bus.emit("session.compacted", session_id="t")
    assert got[-1] == ("*session.compacted", {"session_id": "t"})


def test_metrics_count_and_average_across_threads() -> None:
    metrics = Metrics()
    assert metrics.average_tokens_before == 0.0

    def work() -> None:
        for _ in range(1000):
            metrics.record_reactive_overflow()
            metrics.record_prune(3)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    metrics.record_compaction(rec("model", 100))
    metrics.record_compaction(rec("digest", 300, error="timeout"))  # a fallback
    metrics.record_compaction(rec("digest", 200))  # a digest chosen (no model): none
    snap = metrics.snapshot()
    assert (snap["reactive_overflows"], snap["prune_runs"], snap["tokens_pruned"]) == (
        4000,
        4000,
        12000,
    )
    assert (snap["compactions"], snap["summaries_generated"], snap["fallbacks"]) == (3, 1, 1)
    assert snap["average_tokens_before"] == 200.0


def test_record_round_trips_through_a_dict() -> None:
    record = rec()
    assert CompactionRecord.from_dict(record.to_dict()) == record
    assert record.to_dict()["summarized_message_ids"] == ["a", "b"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_compaction_that_raises_is_closed_by_failed_and_names_its_session(
    asynchronous: bool,
) -> None:
    import ctxcompact as cc
    from ctxcompact.config import CompactionConfig
    from ctxcompact.errors import SummaryError
    from ctxcompact.live import events as ev

    class Down:
        def complete(self, request: object) -> object:
            raise ConnectionError("down")

    def run(compactor: cc.Compactor, sid: str) -> object:
        if asynchronous:
            return asyncio.run(compactor.aprocess_pending(sid))
        return compactor.process_pending(sid)

    config = CompactionConfig(fallback="raise")
    compactor = cc.Compactor(cc.MemoryStore(), cc.Summarizer(Down(), config), config=config)
    names: list[tuple[str, dict[str, object]]] = []
    compactor.events.subscribe("*", lambda name, payload: names.append((name, payload)))
    sid = compactor.store.create_session()
    marker = compactor.request_compaction(sid)
    with pytest.raises(SummaryError) as e:
        run(compactor, sid)
    assert e.value.session_id == sid
    assert [n for n, _ in names][-2:] == [ev.COMPACTION_STARTED, ev.COMPACTION_FAILED]
    failed = names[-1][1]
    assert failed["marker_id"] == marker and "SummaryError" in str(failed["error"])
    assert compactor.pending_task(compactor.store.load(sid)) is not None  # tried again later

    def refuse(event: PreCompactEvent) -> None:
        raise RuntimeError("no")

    compactor.hooks.add_pre_compact(refuse)
    names.clear()
    with pytest.raises(HookError):
        run(compactor, sid)
    assert [n for n, _ in names] == [ev.COMPACTION_STARTED, ev.COMPACTION_FAILED]


def test_a_store_error_at_commit_names_the_session_and_fails_the_compaction() -> None:
    import ctxcompact as cc
    from ctxcompact.errors import StoreError
    from ctxcompact.live import events as ev

    class Restarting(cc.MemoryStore):
        def commit_compaction(self, session_id: str, commit: object) -> None:
            raise StoreError("the server closed the connection")  # as psycopg's is wrapped

    compactor = cc.Compactor(Restarting(), cc.Summarizer(None))
    names: list[str] = []
    compactor.events.subscribe("*", lambda name, payload: names.append(name))
    sid = compactor.store.create_session()
    compactor.request_compaction(sid)
    with pytest.raises(StoreError) as e:
        compactor.process_pending(sid)
    assert e.value.session_id == sid and names[-1] == ev.COMPACTION_FAILED


def test_a_misspelt_event_or_a_non_callable_is_refused_when_registered() -> None:
    """A misspelt name was accepted and never fired; a non-callable hook made
    every later compaction fail with HookError."""
    from ctxcompact.errors import ConfigError, InputTypeError
    from ctxcompact.live.events import EventBus, Hooks

    bus = EventBus()
    with pytest.raises(ConfigError, match=r"did you mean 'session\.compacted'"):
        bus.subscribe("session.compactd", lambda n, p: None)
    with pytest.raises(InputTypeError, match="subscriber must be callable"):
        bus.subscribe("session.compacted", 5)  # type: ignore[arg-type]
    hooks = Hooks()
    with pytest.raises(InputTypeError, match="pre-compact hook must be callable"):
        hooks.add_pre_compact(5)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="post-compact hook must be callable"):
        hooks.add_post_compact("x")  # type: ignore[arg-type]
    assert not hooks.pre_compact and not hooks.post_compact


def test_a_compactor_refuses_optional_parts_of_the_wrong_kind() -> None:
    """``calibrator="x"`` / ``model=5`` were accepted and failed at the first step."""
    import ctxcompact as cc
    from ctxcompact.errors import InputTypeError
    from ctxcompact.live.summary import Summarizer

    for bad, match in (({"calibrator": "x"}, "calibrator: expected UsageCalibrator"),
                       ({"model": 5}, "model must be a non-empty str"),
                       ({"model": ""}, "model must be a non-empty str"),
                       ({"hooks": [print]}, "hooks: expected Hooks"),
                       ({"events": {}}, "events: expected EventBus"),
                       ({"metrics": 1}, "metrics: expected Metrics")):  # fmt: skip
        with pytest.raises(InputTypeError, match=match):
            cc.Compactor(cc.MemoryStore(), Summarizer(None), **bad)  # type: ignore[arg-type]


def test_the_library_leaves_its_log_lines_to_the_application() -> None:
    """A compaction that left the session bigger reached Python's last-resort
    handler: one stderr line per session in any program. The package logger
    has a NullHandler; the warning still reaches handlers the application adds."""
    import subprocess
    import sys

    script = """
import logging
import ctxcompact as cc
assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("ctxcompact").handlers)
store = cc.MemoryStore()
compactor = cc.Compactor(store, cc.Summarizer(None), limits={"context": 200_000, "output": 8_000})
loop = cc.CompactionLoop(compactor)
sid = store.create_session()
loop.add_user(sid, "hi")
compactor.request_compaction(sid, auto=False)
record = compactor.process_pending(sid)
assert record.tokens_after > record.tokens_before, record
print("bigger")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "bigger" and done.stderr == ""
    configured = subprocess.run(
        [sys.executable, "-c", "import logging; logging.basicConfig()\n" + script],
        capture_output=True, text=True,
    )  # fmt: skip
    assert "left it bigger" in configured.stderr
