"""The agent-loop helper, and the end-to-end example through the real openai SDK."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest
from builders import fill, tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionLoopError
from ctxcompact.live import events as ev
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.loop import CompactionLoop, context_stop, is_context_stop
from ctxcompact.live.store import MemoryStore
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans import COMPACTION_QUESTION


class Client:
    def __init__(self, text: str = "## Session Summary\nnotes", delay: float = 0.0) -> None:
        self.text, self.delay, self.calls = text, delay, 0

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        time.sleep(self.delay)
        return SummaryResponse(self.text, "stop")


def make(client: Client | None = None, **cfg: Any) -> tuple[MemoryStore, str, CompactionLoop]:
    store = MemoryStore()
    sid = store.create_session()
    config = CompactionConfig(**cfg)
    compactor = Compactor(store, Summarizer(client or Client(), config), config=config,
                          limits={"context": 100_000, "output": 8_000})  # fmt: skip
    return store, sid, CompactionLoop(compactor, system="sys")


def test_before_call_returns_the_model_input_with_the_system_prompt() -> None:
    _, sid, loop = make()
    loop.add_user(sid, "hello")
    assert loop.before_call(sid) == [{"role": "system", "content": "sys"},
                                     {"role": "user", "content": "hello"}]  # fmt: skip


def test_a_user_turn_after_a_queued_compaction_comes_after_its_summary() -> None:
    """The last step queued a compaction and the runtime adds the next turn:
    the summary is written first, so the model reads the new request after
    it (not the summary as its answer), sync and async alike."""
    for use_async in (False, True):
        client = Client("NOTES: wrote hello.py")
        store, sid, loop = make(client)
        loop.add_user(sid, "TASK-ONE: write hello.py")
        loop.compactor.request_compaction(sid, auto=True, reason="overflow")
        if use_async:
            asyncio.run(loop.aadd_user(sid, "TASK-TWO: now add tests"))
        else:
            loop.add_user(sid, "TASK-TWO: now add tests")
        assert client.calls == 1 and len(store.records(sid)) == 1
        sent = [(m["role"], m["content"]) for m in loop.before_call(sid)]
        assert client.calls == 1  # nothing left to compact
        summary = next(i for i, (_, c) in enumerate(sent) if c == "NOTES: wrote hello.py")
        assert sent[summary - 1] == ("user", COMPACTION_QUESTION)
        assert sent[-1] == ("user", "TASK-TWO: now add tests")
        assert summary < len(sent) - 1


def test_proactive_compaction_at_the_threshold() -> None:
    store, sid, loop = make()
    fill(store, sid, 5, chars=50_000)  # ~62k tokens of history: under 0.80 of 92k
    assert loop.before_call(sid)[1]["role"] == "user" and not store.records(sid)
    fill(store, sid, 1, chars=50_000)  # ~75k: above 0.80 x (100k - 8k - system)
    messages = loop.before_call(sid)
    (record,) = store.records(sid)
    assert record.reason == "proactive" and record.trigger == "auto"
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == COMPACTION_QUESTION


def test_a_request_that_sets_off_a_proactive_compaction_is_sent_as_written() -> None:
    """The user's new turn pushes the session over the budget: the summary
    covers the history, and the continue turn repeats the request verbatim
    (was "Continue if you have next steps": the request reached the model only
    as the summary retold it), sync and async alike."""
    for use_async in (False, True):
        store, sid, loop = make()
        fill(store, sid, 5, chars=50_000)
        request = "NOW: rename parse() to parse_all() everywhere " + "y" * 50_000
        if use_async:
            asyncio.run(loop.aadd_user(sid, request))
            messages = asyncio.run(loop.abefore_call(sid))
        else:
            loop.add_user(sid, request)
            messages = loop.before_call(sid)
        (record,) = store.records(sid)
        assert record.reason == "proactive"
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[-1]["content"] == request
        assert record.tokens_after < record.tokens_before


def test_the_continue_turn_is_plain_after_an_answered_step_or_a_huge_request() -> None:
    """Nothing to repeat after an answered step (a reactive overflow); a request
    over a quarter of the window is left to the summary (repeating it would
    keep the session over budget)."""
    store, sid, loop = make()
    fill(store, sid, 6, chars=50_000)
    messages = loop.before_call(sid)
    assert messages[-1]["content"] == "Continue if you have next steps"
    store, sid, loop = make()
    fill(store, sid, 4, chars=50_000)
    loop.add_user(sid, "HUGE " + "z" * 120_000)  # ~30k tokens of a 100k window
    messages = loop.before_call(sid)
    assert store.records(sid)[0].reason in ("proactive", "critical")
    assert messages[-1]["content"] == "Continue if you have next steps"


def test_critical_reason_above_095() -> None:
    store, sid, loop = make()
    fill(store, sid, 8, chars=50_000)
    loop.before_call(sid)
    assert store.records(sid)[0].reason == "critical"


def test_after_step_stores_and_reacts_to_overflow_and_context_stops() -> None:
    store, sid, loop = make()
    u = user("go")
    store.append_message(sid, u)
    ok = loop.after_step(sid, tool_reply(u.id, "out", tokens={"input": 1000, "output": 10}))
    assert (ok.compaction_queued, ok.reason, ok.done) == (False, "ok", True)
    over = loop.after_step(sid, tool_reply(u.id, "out", tokens={"input": 95_000, "output": 10}))
    assert (over.compaction_queued, over.reason) == (True, "overflow")
    loop.before_call(sid)  # processes it
    assert len(store.records(sid)) == 1
    stop = loop.after_step(sid, usage={"input": 10, "output": 1}, finish_reason="max_tokens")
    assert (stop.compaction_queued, stop.reason, stop.done) == (True, "max_tokens", False)
    assert loop.before_call(sid)[1]["content"] == COMPACTION_QUESTION
    assert len(store.records(sid)) == 2


@pytest.mark.parametrize(("reason", "stop"), [
    ("length", True), ("max_tokens", True), ("model_context_window_exceeded", True),
    ("Error: prompt is too long: 210000 tokens > 200000 maximum", True),
    ("This model's maximum context length is 128000 tokens", True),
    ("stop", False), ("tool_calls", False), (None, False), ("end_turn", False),
])  # fmt: skip
def test_context_stops(reason: str | None, stop: bool) -> None:
    assert is_context_stop(reason) is stop


@pytest.mark.parametrize(("reason", "kind"), [
    ("length", "max_tokens"), ("max_tokens", "max_tokens"),
    ("model_context_window_exceeded", "max_tokens"),
    ("context_length_exceeded", "prompt_too_long"), ("prompt_too_long", "prompt_too_long"),
    ("Error: prompt is too long: 210000 tokens > 200000 maximum", "prompt_too_long"),
    ("This model's maximum context length is 128000 tokens", "prompt_too_long"),
    ("stop", None), (None, None),
])  # fmt: skip
def test_a_refused_prompt_is_told_from_a_cut_off_answer(reason: str | None, kind: str) -> None:
    """The step decision and the compaction's record say which it was (the
    prompt over the window was reported as "max_tokens", like a cut-off answer)."""
    assert context_stop(reason) == kind
    if kind is None:
        return
    store, sid, loop = make()
    loop.add_user(sid, "go")
    seen: list[str] = []
    loop.compactor.events.subscribe(ev.COMPACTION_QUEUED, lambda n, p: seen.append(p["reason"]))
    decision = loop.after_step(sid, finish_reason=reason)
    assert (decision.compaction_queued, decision.reason, decision.done) == (True, kind, False)
    loop.before_call(sid)
    assert [r.reason for r in store.records(sid)] == [kind] and seen == [kind]
    _, sid2, off = make(auto=False)
    off.add_user(sid2, "go")
    cut = off.after_step(sid2, finish_reason=reason)
    assert (cut.compaction_queued, cut.reason, cut.done) == (False, kind, False)


def test_a_stream_cut_short_is_incomplete_not_done() -> None:
    """A stream that ended without a finish reason was reported done (the
    runtime would stop on half an answer): it is "incomplete", not done, and
    queues no compaction; a finished one is still done."""
    from ctxcompact.live import from_anthropic_message, from_openai_chat, from_openai_response

    chat = [{"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "hal"}}]}]
    anthropic = [
        {"type": "message_start", "message": {"id": "m", "model": "m", "role": "assistant",
         "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "h"}},
    ]  # fmt: skip
    responses = [
        {
            "type": "response.created",
            "response": {"id": "r", "status": "in_progress", "output": [], "model": "m"},
        }
    ]
    store, sid, loop = make()
    loop.add_user(sid, "go")
    for message in (from_openai_chat(chat), from_anthropic_message(anthropic),
                    from_openai_response(responses)):  # fmt: skip
        assert message.info.finish == "incomplete"  # type: ignore[union-attr]
        d = loop.after_step(sid, message)
        assert (d.compaction_queued, d.reason, d.done) == (False, "incomplete", False)
    assert not store.records(sid) and loop.compactor.pending_task(store.load(sid)) is None
    done = [*chat, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    d = loop.after_step(sid, from_openai_chat(done))
    assert (d.compaction_queued, d.reason, d.done) == (False, "ok", True)


def test_a_stored_system_message_counts_towards_the_proactive_budget() -> None:
    """The loop's own system prompt is budgeted once; a system message the
    session stores (an imported run's prompt) is history, counted too."""
    from ctxcompact.models import MessageWithParts, Part, SystemMessage

    store, sid, loop = make()
    fill(store, sid, 5, chars=50_000)  # ~62k tokens of history: under 0.80 of 92k
    assert not store.records(sid) and len(loop.before_call(sid)) > 2
    store.append_message(sid, MessageWithParts(
        info=SystemMessage(id="msg_sys", sessionID=sid),
        parts=[Part(id="prt_sys", type="text", text="x" * 50_000, messageID="msg_sys")],
    ))  # fmt: skip
    messages = loop.before_call(sid)  # ~75k with it: above the threshold
    (record,) = store.records(sid)
    assert record.reason == "proactive"
    # the stored instructions stay in the model input after the summary
    assert [m["role"] for m in messages][:2] == ["system", "system"]
    assert messages[1]["content"] == "x" * 50_000


def test_stalled_proactive_path_lets_the_call_through() -> None:
    store, sid, loop = make(Client("z" * 400_000), max_attempts=1)
    seen: list[str] = []
    loop.compactor.events.subscribe(ev.COMPACTION_STALLED, lambda n, p: seen.append(n))
    fill(store, sid, 7, chars=50_000)
    loop.before_call(sid)  # compacts once, but the summary itself is too big
    assert len(store.records(sid)) == 1
    loop.before_call(sid)  # stalled: no new compaction, no exception
    assert len(store.records(sid)) == 1 and seen == [ev.COMPACTION_STALLED]
    with pytest.raises(CompactionLoopError):  # the reactive path refuses
        loop.after_step(sid, usage={"input": 1, "output": 1}, finish_reason="length")


def test_async_loop_keeps_the_event_loop_free() -> None:
    store, sid, loop = make(Client(delay=0.3))
    fill(store, sid, 7, chars=50_000)

    async def run() -> tuple[list[dict[str, Any]], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        messages = await loop.abefore_call(sid)
        decision = await loop.aafter_step(
            sid, usage={"input": 5, "output": 1}, finish_reason="stop"
        )
        task.cancel()
        assert not decision.compaction_queued
        return messages, ticks

    messages, ticks = asyncio.run(run())
    assert messages[1]["content"] == COMPACTION_QUESTION
    assert ticks >= 10


def test_the_example_agent_loop_runs_end_to_end(tmp_path: Path) -> None:
    path = Path(__file__).parents[2] / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run(tmp_path, turns=4, verbose=False)
    assert result["compactions"] >= 2
    assert result["rounds"] == list(range(1, result["compactions"] + 1))
    assert set(result["sources"]) == {"model"}  # summaries came through the SDK
    assert all(a < b for a, b in zip(result["tokens_after"], result["tokens_before"]))
    assert ev.COMPACTED in result["events"] and ev.PRUNE_APPLIED in result["events"]
    metrics = result["metrics"]  # every compaction is counted by what started it
    assert metrics["proactive_compactions"] == result["reasons"].count("proactive") + result[
        "reasons"
    ].count("critical")
    assert (
        metrics["proactive_compactions"] + metrics["reactive_compactions"]
        == metrics["compactions"]
        == result["compactions"]
    )
    assert "overflow_detections" not in metrics


def test_the_example_says_which_extra_it_needs_without_openai(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = Path(__file__).parents[2] / "examples" / "agent_loop.py"
    code = (
        "import runpy, sys; sys.modules['openai'] = None; "  # import openai now fails
        f"runpy.run_path({str(path)!r}, run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'this example needs the openai SDK: pip install "ctxcompact[openai]"'
    )


def test_metrics_tell_proactive_reactive_and_manual_compactions_apart() -> None:
    store, sid, loop = make()
    fill(store, sid, 6, chars=50_000)
    loop.before_call(sid)  # the budget is past 0.80: proactive
    u = user("next")
    store.append_message(sid, u)
    over = tool_reply(u.id, "out", tokens={"input": 95_000, "output": 10})
    assert loop.after_step(sid, over).compaction_queued  # the step overflowed: reactive
    loop.before_call(sid)
    loop.compactor.request_compaction(sid)  # by hand
    loop.before_call(sid)
    snap = loop.compactor.metrics.snapshot()
    assert [r.reason for r in store.records(sid)] == ["proactive", "overflow", "manual"]
    counts = {k: snap[k] for k in ("compactions", "proactive_compactions", "reactive_compactions",
                                   "manual_compactions", "proactive_triggers",
                                   "reactive_overflows")}  # fmt: skip
    assert counts == {"compactions": 3, "proactive_compactions": 1, "reactive_compactions": 1,
                      "manual_compactions": 1, "proactive_triggers": 1,
                      "reactive_overflows": 1}  # fmt: skip


class CountingStore(MemoryStore):
    """A memory store that counts how often a session is read back."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0
        self.whole = 0  # reads of the whole session (``load`` and whole ``load_since``)

    def load_since(self, session_id: str, since: Any = None) -> Any:
        self.loads += 1
        changes = super().load_since(session_id, since)
        self.whole += changes.whole
        return changes

    def load(self, session_id: str) -> Any:
        self.loads += 1
        self.whole += 1
        return super().load(session_id)


def counting_loop() -> tuple[CountingStore, str, CompactionLoop]:
    store = CountingStore()
    sid = store.create_session()
    config = CompactionConfig()
    compactor = Compactor(store, Summarizer(Client(), config), config=config,
                          limits={"context": 100_000, "output": 8_000})  # fmt: skip
    return store, sid, CompactionLoop(compactor, system="sys")


def test_before_call_with_nothing_to_compact_loads_the_session_once() -> None:
    store, sid, loop = counting_loop()
    fill(store, sid, 3, chars=2_000)
    store.loads = 0
    loop.before_call(sid)
    assert store.loads == 1
    store.loads = 0
    asyncio.run(loop.abefore_call(sid))
    assert store.loads == 1


def test_a_step_reads_only_what_was_appended() -> None:
    """After the first call, a step (after_step, then before_call) reads the
    session once each, never whole: what was appended since."""
    store, sid, loop = counting_loop()
    fill(store, sid, 3, chars=2_000)
    loop.before_call(sid)
    store.loads = store.whole = 0
    asked = loop.add_user(sid, "next")
    loop.after_step(sid, tool_reply(asked, "out", tokens={"input": 900, "output": 10}))
    asyncio.run(loop.abefore_call(sid))
    assert (store.loads, store.whole) == (3, 0)


def test_before_call_with_a_pending_task_loads_before_and_after_it() -> None:
    store, sid, loop = counting_loop()
    fill(store, sid, 3, chars=2_000)
    loop.compactor.request_compaction(sid)
    store.loads = 0
    messages = loop.before_call(sid)
    assert len(store.records(sid)) == 1 and messages[1]["content"] == COMPACTION_QUESTION
    assert store.loads == 2  # the task is prepared on the first load; the result is read back


def test_one_before_call_compacts_at_most_once() -> None:
    """A queued compaction that leaves the history over budget is not followed,
    in the same call, by a proactive one (a summary of the summary)."""
    compactor = Compactor(MemoryStore(), Summarizer(Client("s" * 54_000)),
                          limits={"context": 16_000, "output": 2_000})  # fmt: skip
    names: list[str] = []
    compactor.events.subscribe("*", lambda name, payload: names.append(name))
    loop = CompactionLoop(compactor, system="S")
    sid = compactor.store.create_session()
    loop.add_user(sid, "P" * 80_000)  # alone over the window; the summary ~13k tokens
    loop.after_step(sid, finish_reason="context_length_exceeded")  # reactive: queued
    names.clear()
    loop.before_call(sid)
    assert [r.reason for r in compactor.store.records(sid)] == ["prompt_too_long"]
    assert names.count(ev.COMPACTION_STARTED) == 1
    loop.before_call(sid)  # the next call may compact again
    assert [r.reason for r in compactor.store.records(sid)] == ["prompt_too_long", "critical"]


def test_a_cut_off_step_is_not_done_with_auto_compaction_off() -> None:
    store, sid, loop = make(auto=False)
    loop.add_user(sid, "go")
    cut = loop.after_step(sid, usage={"input": 10, "output": 1}, finish_reason="length")
    assert (cut.compaction_queued, cut.reason, cut.done) == (False, "max_tokens", False)
    u = user("more")
    store.append_message(sid, u)
    pending = tool_reply(u.id, "", tokens={"input": 10, "output": 1}, status="pending")
    decision = loop.after_step(sid, pending, finish_reason="length")
    assert (decision.compaction_queued, decision.done) == (False, False)
    assert store.records(sid) == []


def test_an_overflow_is_reported_with_auto_compaction_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was reason "ok" and not counted: a runtime that switched auto compaction
    off could not tell from the decision that the window was full."""
    monkeypatch.setenv("CTXCOMPACT_DISABLE_AUTOCOMPACT", "1")
    store, sid, loop = make()
    assert loop.config.auto is False
    seen: list[str] = []
    loop.compactor.events.subscribe(ev.OVERFLOW_DETECTED, lambda n, p: seen.append(n))
    loop.add_user(sid, "go")
    fits = loop.after_step(sid, usage={"input": 90_000, "output": 1}, finish_reason="stop")
    assert (fits.compaction_queued, fits.reason, fits.done) == (False, "ok", True)
    full = loop.after_step(sid, usage={"input": 92_000, "output": 5}, finish_reason="stop")
    assert (full.compaction_queued, full.reason, full.done) == (False, "overflow", True)
    calls = loop.after_step(sid, usage={"input": 95_000, "output": 5}, finish_reason="tool_calls")
    assert (calls.compaction_queued, calls.reason, calls.done) == (False, "overflow", False)
    cut = loop.after_step(sid, usage={"input": 10, "output": 1}, finish_reason="length")
    assert (cut.compaction_queued, cut.reason, cut.done) == (False, "max_tokens", False)
    assert store.records(sid) == [] and loop.compactor.pending_task(store.load(sid)) is None
    assert loop.compactor.metrics.snapshot()["reactive_overflows"] == 3
    assert seen == [ev.OVERFLOW_DETECTED] * 2
    check = loop.compactor.check_step(sid, {"input": 93_000, "output": 0})
    assert (check.queued, check.reason, check.count, check.usable) == (False, "overflow",
                                                                       93_000, 92_000)  # fmt: skip


def test_a_record_counts_the_pinned_turn_it_keeps_so_the_guard_trips() -> None:
    """tokens_after is what later calls are sent: a pinned turn under the
    window that a summary cannot fit beside is a stall after max_attempts,
    not a summary paid at every step."""
    client = Client("s" * 40_000)  # ~10k tokens of summary
    store, sid, loop = make(client, max_attempts=2)
    loop.add_user(sid, "P" * 340_000, pinned=True)  # ~85k tokens, under the usable 92k
    fill(store, sid, 1, chars=40_000)
    for _ in range(2):
        decision = loop.after_step(sid, finish_reason="context_length_exceeded")
        assert decision.compaction_queued
        loop.before_call(sid)  # completes it, and compacts no further in this call
    records = store.records(sid)
    assert len(records) == 2 and all(r.tokens_after > 92_000 for r in records)
    with pytest.raises(CompactionLoopError, match="keeps overflowing"):
        loop.after_step(sid, finish_reason="context_length_exceeded")
    assert client.calls == 2


@pytest.mark.parametrize("path", ["proactive", "context stop", "overflow", "async"])
def test_pinned_content_over_the_window_fails_before_any_summary(path: str) -> None:
    client = Client()
    store, sid, loop = make(client)
    seen: list[dict[str, Any]] = []
    loop.compactor.events.subscribe(ev.COMPACTION_STALLED, lambda n, p: seen.append(p))
    loop.add_user(sid, "P" * 400_000, pinned=True)  # ~100k tokens: over the usable 92k
    with pytest.raises(CompactionLoopError, match=r"pinned and system messages alone are \d+ "
                       r"tokens, over the usable 92000"):  # fmt: skip
        if path == "proactive":
            loop.before_call(sid)
        elif path == "async":
            asyncio.run(loop.abefore_call(sid))
        elif path == "context stop":
            loop.after_step(sid, finish_reason="context_length_exceeded")
        else:
            loop.after_step(sid, usage={"input": 99_000, "output": 10}, finish_reason="stop")
    assert client.calls == 0 and not store.records(sid)
    assert seen and seen[0]["reason"] == "unremovable" and seen[0]["usable"] == 92_000


def test_pinned_content_over_the_threshold_is_not_summarized_at_every_call() -> None:
    """Alone over 0.80 but the call fits: a summary cannot bring it under the
    threshold, so the call goes ahead with compaction.stalled, nothing paid."""
    client = Client()
    store, sid, loop = make(client)
    seen: list[dict[str, Any]] = []
    loop.compactor.events.subscribe(ev.COMPACTION_STALLED, lambda n, p: seen.append(p))
    loop.add_user(sid, "P" * 320_000, pinned=True)  # ~80k tokens
    for _ in range(3):
        assert len(loop.before_call(sid)) == 2
    assert client.calls == 0 and not store.records(sid)
    assert [p["reason"] for p in seen] == ["unremovable"] * 3


def test_a_paused_anthropic_turn_is_not_done() -> None:
    """Anthropic's ``pause_turn`` (a long server-tool turn paused; the reply is
    sent back for the model to go on) was reported done: a runtime would stop
    mid-turn. The same reply with ``end_turn`` is done."""
    from ctxcompact.live.replies import from_anthropic_message

    def reply(stop: str) -> dict[str, Any]:
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [{"type": "server_tool_use", "id": "srv_1", "name": "web_search",
                             "input": {"query": "ctxcompact"}}],
                "stop_reason": stop,
                "usage": {"input_tokens": 100, "output_tokens": 5}}  # fmt: skip

    for stop, done in (("pause_turn", False), ("end_turn", True)):
        _, sid, loop = make()
        loop.add_user(sid, "search")
        decision = loop.after_step(sid, from_anthropic_message(reply(stop)))
        assert (decision.reason, decision.done) == ("ok", done), stop
