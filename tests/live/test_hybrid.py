"""Hybrid mask-then-summarize (``mask_first``): masking every step, a summary
only when masking is not enough, and a summary that reads what was masked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.live import events as ev
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.loop import CompactionLoop
from ctxcompact.live.split import compact_messages
from ctxcompact.live.store import MemoryStore
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans import CLEARED_TOOL_OUTPUT, filter_pivot
from ctxcompact.transcript import Transcript

LIMITS = {"context": 100_000, "output": 8_000}


class Client:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse("## Session Summary\nnotes", "stop")

    def sent(self) -> str:
        return json.dumps([m for r in self.requests for m in r.messages])


def single_task(store: MemoryStore, sid: str, steps: int, chars: int) -> None:
    """One task, then ``steps`` tool steps of ``chars`` characters each."""
    task = user("fix the bug")
    store.append_message(sid, task)
    for i in range(steps):
        store.append_message(sid, tool_reply(task.id, f"<{i}>" + "x" * chars, path=f"f{i}.py"))


def make(**options: Any) -> tuple[MemoryStore, str, CompactionLoop, Client, ev.EventBus]:
    store, client, bus = MemoryStore(), Client(), ev.EventBus()
    sid = store.create_session("s")
    config = CompactionConfig(policy="swe-agent", mask_first=True, **options)
    compactor = Compactor(store, Summarizer(client, config), config=config, limits=LIMITS,
                          events=bus)  # fmt: skip
    return store, sid, CompactionLoop(compactor, system="sys"), client, bus


def test_masking_every_step_keeps_a_long_run_without_a_summary() -> None:
    store, sid, loop, client, bus = make()
    seen: list[Any] = []
    bus.subscribe(ev.PRUNE_APPLIED, lambda name, payload: seen.append(payload))
    single_task(store, sid, steps=12, chars=40_000)  # 12 x 10k tokens: over the window
    messages = loop.before_call(sid)
    tools = [m["content"] for m in messages if m["role"] == "tool"]
    assert tools[:7] == [CLEARED_TOOL_OUTPUT] * 7 and all(t.startswith("<") for t in tools[7:])
    assert not store.records(sid) and not client.requests  # no summary was needed
    assert seen and seen[0]["parts"] == 7
    # The marks are stored: the next call masks only what is new.
    stored = store.load(sid)
    assert sum(p.compacted for m in stored.messages for p in m.parts) == 7


def test_the_swe_agent_preset_masks_every_step_without_mask_first() -> None:
    # SWE-agent's history processor acts at every call, so its preset does.
    store, client = MemoryStore(), Client()
    sid = store.create_session("s")
    config = CompactionConfig(policy="swe-agent")
    loop = CompactionLoop(Compactor(store, Summarizer(client, config), config=config,
                                    limits=LIMITS), system="sys")  # fmt: skip
    single_task(store, sid, steps=12, chars=40_000)
    messages = loop.before_call(sid)
    tools = [m["content"] for m in messages if m["role"] == "tool"]
    assert tools[:7] == [CLEARED_TOOL_OUTPUT] * 7
    assert not store.records(sid) and not client.requests


def test_without_masking_the_same_run_is_summarized() -> None:
    store, client = MemoryStore(), Client()
    sid = store.create_session("s")
    config = CompactionConfig(policy={"preset": "swe-agent", "acts": "summary"})
    loop = CompactionLoop(Compactor(store, Summarizer(client, config), config=config,
                                    limits=LIMITS), system="sys")  # fmt: skip
    single_task(store, sid, steps=12, chars=40_000)
    loop.before_call(sid)
    assert len(store.records(sid)) == 1 and client.requests


def test_a_summary_when_masking_is_not_enough_reads_what_was_masked() -> None:
    store, sid, loop, client, _ = make(summary_recall_tokens=50)
    # The five newest outputs alone (5 x 20k tokens) are over the threshold.
    single_task(store, sid, steps=8, chars=80_000)
    loop.before_call(sid)
    (record,) = store.records(sid)
    assert record.reason in ("proactive", "critical")
    sent = client.sent()
    # Every output masked since the last round is shown again, cut to ~50 tokens.
    assert CLEARED_TOOL_OUTPUT not in sent
    assert sent.count("characters cut") == 8 and "<0>" in sent and "<7>" in sent


def test_a_reactive_overflow_that_masking_absorbs_queues_nothing() -> None:
    store, sid, loop, client, _ = make()
    single_task(store, sid, steps=11, chars=40_000)
    task_id = store.load(sid).messages[0].id
    step = tool_reply(task_id, "ok", tokens={"input": 99_000, "output": 10})
    decision = loop.after_step(sid, step)
    assert (decision.compaction_queued, decision.reason) == (False, "ok")
    assert not client.requests and loop.compactor.pending_task(store.load(sid)) is None
    masked = store.load(sid)
    assert sum(p.compacted for m in masked.messages for p in m.parts) == 7
    # The compactor says why: the reported overflow was absorbed by masking.
    step = tool_reply(task_id, "ok", tokens={"input": 99_000, "output": 10})
    store.append_message(sid, step)
    check = loop.compactor.check_step(sid)
    assert (check.queued, check.reason) == (False, "masked")


def chat(steps: int, chars: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                 {"role": "user", "content": "fix the bug"}]  # fmt: skip
    for i in range(steps):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": f"f{i}.py"})},
        }
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"<{i}>" + "x" * chars},
        ]
    return out  # fmt: skip


def test_chat_lists_masking_is_enough() -> None:
    client = Client()
    config = CompactionConfig(policy="swe-agent", mask_first=True)
    result = compact_messages(chat(12, 40_000), Summarizer(client, config), context=100_000,
                              config=config)  # fmt: skip
    assert result.record is None and not client.requests
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert tools[:7] == [CLEARED_TOOL_OUTPUT] * 7 and tools[7].startswith("<7>")


def test_chat_lists_summary_reads_the_head_as_it_was() -> None:
    client = Client()
    config = CompactionConfig(policy="swe-agent", mask_first=True, summary_recall_tokens=50,
                              keep_policy="messages", keep_messages=4)  # fmt: skip
    result = compact_messages(chat(8, 80_000), Summarizer(client, config), context=100_000,
                              config=config)  # fmt: skip
    assert result.record is not None and client.requests
    sent = client.sent()
    assert CLEARED_TOOL_OUTPUT not in sent and "<0>" in sent and "characters cut" in sent
    # the request the kept steps answer is repeated between the summary and them
    assert [m["role"] for m in result.messages] == ["system", "assistant", "user", "assistant",
                                                    "tool", "assistant", "tool"]  # fmt: skip
    assert result.messages[2] == {"role": "user", "content": "fix the bug"}


def test_a_pinned_task_stays_in_the_model_input_after_a_summary() -> None:
    store, client = MemoryStore(), Client()
    sid = store.create_session("s")
    config = CompactionConfig()
    loop = CompactionLoop(Compactor(store, Summarizer(client, config), config=config,
                                    limits=LIMITS), system="sys")  # fmt: skip
    loop.add_user(sid, "fix the bug in parser.py", pinned=True)
    task_id = store.load(sid).messages[0].id
    for i in range(8):
        store.append_message(sid, tool_reply(task_id, "x" * 40_000, path=f"f{i}.py"))
    messages = loop.before_call(sid)
    (record,) = store.records(sid)  # summarized
    assert messages[1] == {"role": "user", "content": "fix the bug in parser.py"}
    # the record says what stayed sent (it listed the task as summarized, kept nothing)
    assert record.kept_message_ids == (task_id,)
    assert task_id not in record.summarized_message_ids and record.summarized_message_ids
    assert [m["role"] for m in messages[2:4]] == ["user", "assistant"]  # the marker, the summary
    # The batch path shows the same rows.
    table = Transcript.from_sessions([store.load(sid)])
    shown = filter_pivot(table).to_sessions()[0]
    assert [m.id for m in shown.messages] == [m.id for m in filter_pivot(store.load(sid)).messages]
    assert shown.messages[0].id == task_id


@pytest.mark.parametrize("client", [None, "fails"])
@pytest.mark.parametrize("fallback", ["digest", "truncate"])
def test_a_pinned_task_is_sent_once_after_a_digest(client: str | None, fallback: str) -> None:
    """The pinned task is sent as it is before the summary: a digest (chosen,
    or the fallback of a failed call) names it instead of copying it into its
    Original Task and Latest User Requests, and a truncation leaves it out."""

    class Failing:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            raise RuntimeError("down")

    store = MemoryStore()
    sid = store.create_session("s")
    config = CompactionConfig(fallback=fallback)  # type: ignore[arg-type]
    summarizer = Summarizer(Failing() if client else None, config)
    loop = CompactionLoop(Compactor(store, summarizer, config=config, limits=LIMITS),
                          system="sys")  # fmt: skip
    loop.add_user(sid, "fix the bug in parser.py", pinned=True)
    task_id = store.load(sid).messages[0].id
    for i in range(8):
        store.append_message(sid, tool_reply(task_id, "x" * 40_000, path=f"f{i}.py"))
    messages = loop.before_call(sid)
    assert store.records(sid)  # summarized
    assert messages[1] == {"role": "user", "content": "fix the bug in parser.py"}
    assert json.dumps(messages).count("fix the bug in parser.py") == 1
    summary = messages[3]["content"]
    if client is None or fallback == "digest":
        assert "### Original Task\n(the first user request: pinned" in summary
        assert "f7.py" in summary


def test_chat_lists_record_counts_the_input_as_sent_before_and_after() -> None:
    """With mask_first the record's tokens_before counted the unmasked input and
    tokens_after the list returned; both are the model input as sent now: the
    masked input, and the next call's view of the compacted list (what an
    integration, which keeps the tail whole and masks every call, sends). Here
    the policy's minimum leaves the tail's older outputs whole in that view
    (alone they are under it), where the masked input had them cleared."""
    from ctxcompact.integrations.chatlists import kept_tail
    from ctxcompact.scans.chat import estimate_chat_messages
    from ctxcompact.scans.masking import mask_chat_messages

    config = CompactionConfig(policy={"protect": 1_000, "minimum": 5_000}, mask_first=True)
    history: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(20):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        output = {"role": "tool", "tool_call_id": f"c{i}", "content": f"<{i}>" + "x" * 4_000}
        history += [{"role": "user", "content": f"next {i}"},
                    {"role": "assistant", "content": "t" * 6_000, "tool_calls": [call]},
                    output]  # fmt: skip
    result = compact_messages(history, Summarizer(None, config), context=20_000, output=1_000,
                              config=config)  # fmt: skip
    record = result.record
    assert record is not None
    masked = mask_chat_messages(history, config.policy).messages
    assert record.tokens_before == estimate_chat_messages(masked)
    assert record.unmasked_tokens_before == estimate_chat_messages(history) > record.tokens_before
    # the next call: the summary and what it kept, the kept messages as they are held
    lead = len(result.messages) - kept_tail(result)
    held = [*result.messages[:lead], *history[len(history) - kept_tail(result) :]]
    sent = mask_chat_messages(held, config.policy).messages
    assert result.messages == sent
    assert record.tokens_after == estimate_chat_messages(sent)


def test_opencode_prunes_when_a_user_turn_ends_not_at_every_call() -> None:
    # OpenCode prunes as its agent loop exits: the history before the next user
    # message, its newest two user turns protected (docs/policies.md).
    store, client = MemoryStore(), Client()
    sid = store.create_session("s")
    config = CompactionConfig()  # the opencode preset: acts="turn"
    wide = {"context": 1_000_000, "output": 8_000}
    loop = CompactionLoop(Compactor(store, Summarizer(client, config), config=config,
                                    limits=wide), system="sys")  # fmt: skip

    def cleared() -> int:
        return sum(p.compacted for m in store.load(sid).messages for p in m.parts)

    single_task(store, sid, steps=8, chars=40_000)  # turn 1: 80k tokens of outputs
    for turn in (2, 3):
        loop.before_call(sid)
        assert cleared() == 0  # the turn ended holds one of the newest two turns
        asked = user(f"turn {turn}")
        store.append_message(sid, asked)
        loop.before_call(sid)
        store.append_message(sid, tool_reply(asked.id, "ok", path=f"g{turn}.py"))
    assert cleared() == 0  # turn 1 is still the second newest turn before turn 3
    store.append_message(sid, user("turn 4"))
    loop.before_call(sid)
    # Turn 1's outputs beyond the 40k protect window are cleared, once.
    assert cleared() > 0 and not store.records(sid)
    before = cleared()
    store.append_message(sid, tool_reply("x", "ok", path="h.py"))
    loop.before_call(sid)  # a later call of the same turn: no new prune
    assert cleared() == before
