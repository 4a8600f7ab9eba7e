"""The live loop's budget reads the store's exact counts (``count=``) when
they are in the family of the session's model (``family_for``): its history
count is then the exact count of the view it returns, read from the store
(a count whose text changed is counted again, never read), and falls back
to the estimate for a model whose family the store does not count. Which
count was used is said (``CompactionLoop.last_count``, ``StepCheck.counted``,
the events, ``CompactionRecord.counted``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from builders import tool_reply, user
from ctxcompact.live.events import CompactionRecord
from ctxcompact.live.store import MemoryStore, SQLiteStore, new_id
from ctxcompact.models import AssistantMessage, MessageWithParts, Part
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import chat_tokens
from scans.test_exact_tokens import reference
from test_stored_exact import _forge, _rewrite, open_counting

BIG = {"context": 1_000_000, "output": 8_000}


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    s = open_counting(request.param, tmp_path, request)
    yield s
    if request.param != "memory":
        s.close()


def tiktoken_count(messages: list[dict[str, Any]], overhead: int) -> int:
    """The view counted with tiktoken's own o200k encoder: each message its
    overhead, its content, its reasoning, each call's name and arguments."""
    enc = reference("o200k_base")

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    total = 0
    for m in messages:
        content = m.get("content")
        assert content is None or isinstance(content, str), m
        total += overhead + n(content or "") + n(m.get("reasoning_content") or "")
        for call in m.get("tool_calls") or []:
            total += n(call["function"]["name"]) + n(call["function"]["arguments"])
    return total


def thinking_reply(parent: str, i: int) -> MessageWithParts:
    reply = tool_reply(parent, f"def f{i}():\n    return '🚀 {i}'\n" * (5 + i), path=f"m{i}.py")
    reply.parts.insert(0, Part(id=new_id("prt"), type="reasoning",
                               text=f"look at m{i}.py, ünïcode " * i))  # fmt: skip
    return reply


@pytest.mark.parametrize("policy", [None, Policy(keep_thinking=2, truncate_output=200)])
def test_the_budget_is_the_exact_count_of_the_view(store: Any, policy: Any) -> None:
    config = cc.CompactionConfig(**({} if policy is None else {"policy": policy}))
    compactor = cc.Compactor(store, cc.Summarizer(None), config=config, limits=BIG,
                             model="gpt-4o")  # fmt: skip
    loop = cc.CompactionLoop(compactor, system="be brief")
    sid = store.create_session()
    loop.add_user(sid, "read the files 😀")
    for i in range(4):
        messages = loop.before_call(sid)
        got = loop.last_count(sid)
        assert got is not None and got.counted == "o200k exact" and got.method == "o200k-exact"
        assert got.tokens == tiktoken_count(messages[1:], config.message_overhead)
        loop.after_step(sid, thinking_reply(messages[-1].get("id") or "x", i))
    # the whole session read again (a new loop): the same count
    again = cc.CompactionLoop(compactor, system="be brief")
    messages = again.before_call(sid)
    count = again.last_count(sid)
    assert count is not None
    assert count.tokens == tiktoken_count(messages[1:], config.message_overhead)
    assert count.tokens == compactor.history_tokens(store.load(sid))
    # an estimate would not have been the exact count here
    opencode = chat_tokens(messages[1:], method="opencode", overhead=config.message_overhead)
    assert opencode != count.tokens


def test_the_budget_reads_the_stored_counts_never_a_stale_one(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", count=["o200k"])  # its rows are forged below
    compactor = cc.Compactor(store, cc.Summarizer(None), limits=BIG, model="openai/gpt-4o")
    sid = store.create_session()
    u = user("find it")
    reply = tool_reply(u.id, "line 🚀\n" * 40)
    for m in (u, reply):
        store.append_message(sid, m)
    loop = cc.CompactionLoop(compactor)
    honest = tiktoken_count(loop.before_call(sid), 4)
    count = loop.last_count(sid)
    assert count is not None and count.tokens == honest
    part = reply.parts[0].id
    # a count forged beside the right hash is read: the budget reads the store
    _forge(store, sid, part, lambda c: {**c, "o200k": [c["o200k"][0] + 1000, *c["o200k"][1:]]})
    loop = cc.CompactionLoop(compactor)
    loop.before_call(sid)
    count = loop.last_count(sid)
    assert count is not None and count.tokens == honest + 1000
    assert compactor.history_tokens(store.load(sid)) == honest + 1000
    # the text changed under it: the count is not read, the text is counted
    _rewrite(store, sid, part, "another output entirely")
    loop = cc.CompactionLoop(compactor)
    messages = loop.before_call(sid)
    count = loop.last_count(sid)
    assert count is not None and count.tokens == tiktoken_count(messages, 4) != honest + 1000
    store.close()


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4", "gpt-4-turbo", None])
def test_a_model_whose_family_is_not_counted_gets_the_estimate(model: str | None) -> None:
    store = MemoryStore(count=["o200k"])  # gpt-4 counts in cl100k; claude has no tokenizer
    compactor = cc.Compactor(store, cc.Summarizer(None), limits=BIG, model=model)
    loop = cc.CompactionLoop(compactor)
    sid = store.create_session()
    loop.add_user(sid, "read it")
    loop.after_step(sid, tool_reply("x", "line 🚀\n" * 40))
    messages = loop.before_call(sid)
    count = loop.last_count(sid)
    assert count is not None and count.counted == "estimate opencode"
    assert count.tokens == chat_tokens(messages, method="opencode", overhead=4)


def test_the_model_a_step_names_picks_the_family() -> None:
    """No model given to the Compactor: the newest reply's ``providerID/modelID``
    decides, and the loop's cached view follows it when it first appears."""
    store = MemoryStore(count=["o200k"])
    compactor = cc.Compactor(store, cc.Summarizer(None), limits=BIG)
    loop = cc.CompactionLoop(compactor)
    sid = store.create_session()
    loop.add_user(sid, "read it")
    loop.before_call(sid)
    first = loop.last_count(sid)
    assert first is not None and first.counted == "estimate opencode"
    reply = tool_reply("x", "line 🚀\n" * 40)
    assert isinstance(reply.info, AssistantMessage)
    reply.info.providerID, reply.info.modelID = "openai", "gpt-4o-2024-08-06"
    loop.after_step(sid, reply)
    messages = loop.before_call(sid)
    count = loop.last_count(sid)
    assert count is not None and count.counted == "o200k exact"
    assert count.tokens == tiktoken_count(messages, 4)


def test_an_explicit_estimate_method_wins() -> None:
    store = MemoryStore(count=["o200k"])
    config = cc.CompactionConfig(estimate_method="ceil-bytes")
    compactor = cc.Compactor(store, cc.Summarizer(None), config=config, limits=BIG,
                             model="gpt-4o")  # fmt: skip
    loop = cc.CompactionLoop(compactor)
    sid = store.create_session()
    loop.add_user(sid, "read it")
    messages = loop.before_call(sid)
    count = loop.last_count(sid)
    assert count is not None and count.counted == "estimate ceil-bytes"
    assert count.tokens == chat_tokens(messages, method="ceil-bytes", overhead=4)


def test_the_overflow_check_and_the_record_say_which_count() -> None:
    store = MemoryStore(count=["o200k"])
    limits = {"context": 20_000, "output": 1_000}
    config = cc.CompactionConfig(output_token_max=1_000, reserved=0)
    compactor = cc.Compactor(store, cc.Summarizer(None), config=config, limits=limits,
                             model="gpt-4o")  # fmt: skip
    seen: list[tuple[str, dict[str, Any]]] = []
    compactor.events.subscribe("*", lambda name, payload: seen.append((name, payload)))
    sid = store.create_session()
    u = user("read it")
    store.append_message(sid, u)
    # no usage anywhere: the check counts the history, exactly, from the store
    reply = tool_reply(u.id, "word 🚀 " * 9_000)
    reply.info.tokens = None  # type: ignore[union-attr]
    store.append_message(sid, reply)
    exact = compactor.history_tokens(store.load(sid))
    check = compactor.check_step(sid)
    assert check.counted == "o200k exact" and check.queued and check.count == exact
    overflow = [p for name, p in seen if name == "overflow.detected"]
    assert overflow and overflow[0]["counted"] == "o200k exact"
    record = compactor.process_pending(sid)
    assert record is not None and record.counted == "o200k exact"
    assert CompactionRecord.from_dict(record.to_dict()) == record
    # a reported usage is said to be one
    step = compactor.check_step(sid, {"input": 10, "output": 1})
    assert step.counted == "reported usage"
