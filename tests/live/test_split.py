"""The split-point family: boundaries, tool pairs, chained rounds, hooks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import SummaryError
from ctxcompact.live import events as ev
from ctxcompact.live.split import (
    acompact_messages,
    compact_messages,
    keep_tokens_for,
    select_split,
    should_compact,
    summary_round,
)
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import estimate_chat_messages

SYSTEM = {"role": "system", "content": "sys"}


def call(i: int) -> dict[str, Any]:
    arguments = json.dumps({"path": f"f{i}.py"})
    return {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": arguments}}


def conversation(turns: int, size: int = 400) -> list[dict[str, Any]]:
    """system, then per turn: user, assistant(call), tool result, assistant text."""
    out: list[dict[str, Any]] = [SYSTEM]
    for i in range(turns):
        out += [
            {"id": f"u{i}", "role": "user", "content": f"task {i}"},
            {"id": f"a{i}", "role": "assistant", "content": None, "tool_calls": [call(i)]},
            {"id": f"t{i}", "role": "tool", "tool_call_id": f"c{i}", "content": "x" * size},
            {"id": f"r{i}", "role": "assistant", "content": f"done {i}"},
        ]
    return out


class Client:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse(f"notes after {len(self.requests)} call(s)", "stop")


def test_message_policy_keeps_the_last_n_and_the_system() -> None:
    msgs = conversation(5)
    split = select_split(msgs, keep_policy="messages", keep_messages=4)
    assert split.system == SYSTEM and split.head_start == 1
    assert [m["id"] for m in split.tail] == ["u4", "a4", "t4", "r4"]
    assert len(split.head) == 16 and split.previous_summary is None


@pytest.mark.parametrize("keep", [1, 2, 3, 5, 6])
def test_boundary_never_separates_a_call_from_its_result(keep: int) -> None:
    msgs = conversation(4)
    split = select_split(msgs, keep_policy="messages", keep_messages=keep)
    assert split.tail[0]["role"] != "tool"
    head_calls = {c["id"] for m in split.head for c in m.get("tool_calls") or []}
    tail_results = {m["tool_call_id"] for m in split.tail if m["role"] == "tool"}
    assert not head_calls & tail_results
    assert split.head + split.tail == msgs[1:]  # nothing lost, nothing duplicated


def test_parallel_calls_stay_with_all_their_results() -> None:
    msgs = [SYSTEM, {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call(1), call(2)]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "assistant", "content": "ok"}]  # fmt: skip
    split = select_split(msgs, keep_policy="messages", keep_messages=2)
    assert split.tail[0]["role"] == "assistant" and split.tail[0].get("tool_calls")


def test_token_policy_keeps_what_fits_the_budget() -> None:
    msgs = conversation(6)
    one_turn = estimate_chat_messages(msgs[-4:])
    split = select_split(msgs, keep_policy="tokens", keep_tokens=one_turn)
    assert [m["id"] for m in split.tail] == ["u5", "a5", "t5", "r5"]
    assert select_split(msgs, keep_policy="tokens", keep_tokens=10**9).head == []
    with pytest.raises(ValueError, match="keep_tokens"):
        select_split(msgs, keep_policy="tokens")
    assert keep_tokens_for(CompactionConfig(), 100_000, 8_000) == int(92_000 * 0.4)


def test_should_compact_at_the_proactive_threshold() -> None:
    msgs = conversation(10, size=4000)  # ~10k tokens of history
    history = estimate_chat_messages(msgs[1:])
    system = estimate_chat_messages(msgs[:1])
    assert should_compact(msgs, context=int(history / 0.85) + 32_000 + system)
    assert not should_compact(msgs, context=int(history / 0.5) + 32_000)
    assert not should_compact(msgs, context=0)  # unlimited


def test_compact_messages_builds_system_summary_tail_and_a_record() -> None:
    client, metrics, bus = Client(), ev.Metrics(), ev.EventBus()
    seen: list[str] = []
    bus.subscribe("*", lambda n, p: seen.append(n))
    msgs = conversation(8, size=2000)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(msgs, Summarizer(client, cfg), context=50_000, session_id="s",
                              events=bus, metrics=metrics)  # fmt: skip
    out, record = result.messages, result.record
    assert record is not None
    assert out[0] == SYSTEM and out[2:] == msgs[-4:]
    assert out[1]["role"] == "assistant" and summary_round(out[1]) == 1
    assert "notes after 1 call(s)" in out[1]["content"]
    assert (record.family, record.round, record.summary_source) == ("split", 1, "model")
    assert record.summarized_message_ids[0] == "u0" and record.kept_message_ids == (
        "u7",
        "a7",
        "t7",
        "r7",
    )
    assert record.tokens_after < record.tokens_before
    assert seen == [ev.COMPACTED] and metrics.compactions == 1
    sent = client.requests[0].messages
    assert sent[0]["id"] == "u0" and all(m.get("role") != "system" for m in sent)


def test_chained_rounds_integrate_the_previous_summary() -> None:
    client = Client()
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    summarizer = Summarizer(client, cfg)
    msgs = conversation(6)
    rounds = []
    for _ in range(3):
        result = compact_messages(msgs, summarizer, context=50_000)
        assert result.record is not None
        rounds.append(result.record.round)
        msgs = result.messages + conversation(3)[1:]  # the session goes on
    assert rounds == [1, 2, 3]
    last = client.requests[-1]
    # the previous summary reaches the model once, as the integration input
    previous = [m for m in msgs if summary_round(m) == 3]
    assert len(previous) == 1
    final = last.messages[-1]["content"]
    assert "round 3" in final and "notes after 2 call(s)" in final
    assert sum("notes after 2 call(s)" in str(m.get("content")) for m in last.messages) == 1


def test_nothing_to_compact_returns_the_messages_unchanged() -> None:
    msgs = conversation(1)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=10)
    result = compact_messages(msgs, Summarizer(Client()), context=50_000, config=cfg)
    assert result.record is None and result.messages == msgs


def test_hooks_add_context_or_cancel() -> None:
    client = Client()
    hooks = ev.Hooks()
    hooks.add_pre_compact(lambda e: e.extra_context.append("goal: ship it"))
    post: list[ev.PostCompactEvent] = []
    hooks.add_post_compact(post.append)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(conversation(5), Summarizer(client, cfg), context=50_000,
                              hooks=hooks, trigger="manual", reason="manual")  # fmt: skip
    assert "goal: ship it" in client.requests[0].messages[-1]["content"]
    assert post[0].record == result.record and post[0].source == "compact"
    hooks.add_pre_compact(lambda e: e.cancel("not now"))
    msgs = conversation(5)
    cancelled = compact_messages(msgs, Summarizer(client, cfg), context=50_000, hooks=hooks)
    assert cancelled.record is None and cancelled.messages == msgs


def test_model_failure_gives_a_digest_summary_and_the_loop_goes_on() -> None:
    class Down:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            raise ConnectionError("down")

    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(conversation(5), Summarizer(Down(), cfg), context=50_000)
    assert result.record is not None and result.record.summary_source == "digest"
    assert summary_round(result.messages[1]) == 1 and "f0.py" in result.messages[1]["content"]
    with pytest.raises(SummaryError):
        strict = cfg.model_copy(update={"fallback": "raise"})
        compact_messages(conversation(5), Summarizer(Down(), strict), context=50_000)


def test_async_twin() -> None:
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = asyncio.run(
        acompact_messages(conversation(5), Summarizer(Client(), cfg), context=50_000)
    )
    assert result.record is not None and result.record.round == 1
    assert result.messages[2:] == conversation(5)[-4:]
