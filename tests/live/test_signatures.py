"""Keywords written once keep the public behaviour: the sync/async twins
made from one function (``live/twins.py``) keep the names, signatures and
docstrings, the async twin of a blocking method runs the instance's own
method (a subclass's override), and the reply readers' ids (one
``MessageIds``) are taken as before and a misspelt one is refused."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.live import from_anthropic_message, from_openai_chat, from_openai_response
from ctxcompact.live.loop import CompactionLoop, StepDecision


def _parameters(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_compact_messages_twins_share_one_signature_and_keep_their_names() -> None:
    sync, both = cc.compact_messages, cc.acompact_messages
    assert _parameters(sync) == _parameters(both)
    names = [name for name, _, _ in _parameters(sync)]
    assert names[:2] == ["messages", "summarizer"] and "instructions" in names
    assert (sync.__name__, both.__name__) == ("compact_messages", "acompact_messages")
    assert sync.__module__ == both.__module__ == "ctxcompact.live.split"
    assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(both)
    assert "Summarize the head" in (sync.__doc__ or "")
    assert "async twin" in (both.__doc__ or "")


def test_aafter_step_has_after_steps_signature_and_runs_an_override() -> None:
    assert _parameters(CompactionLoop.aafter_step) == _parameters(CompactionLoop.after_step)
    assert CompactionLoop.aafter_step.__qualname__ == "CompactionLoop.aafter_step"
    assert inspect.iscoroutinefunction(CompactionLoop.aafter_step)

    seen: list[tuple[Any, ...]] = []
    decision = StepDecision(compaction_queued=False, reason="ok", done=True)

    class Loop(CompactionLoop):
        def after_step(self, session_id: str, message: Any = None, *, usage: Any = None,
                       finish_reason: str | None = None) -> StepDecision:  # fmt: skip
            seen.append((session_id, message, usage, finish_reason))
            return decision

    loop = Loop.__new__(Loop)  # the override touches no state
    got = asyncio.run(loop.aafter_step("s1", None, usage={"input": 1}, finish_reason="stop"))
    assert got is decision
    assert seen == [("s1", None, {"input": 1}, "stop")]


CHAT = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
RESPONSE = {
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    ],
}
MESSAGE = {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
READERS = [(from_openai_chat, CHAT), (from_openai_response, RESPONSE),
           (from_anthropic_message, MESSAGE)]  # fmt: skip


@pytest.mark.parametrize(("read", "reply"), READERS)
def test_every_reply_reader_takes_the_ids_and_refuses_a_misspelt_one(read: Any, reply: Any) -> None:
    message = read(reply, session_id="s1", message_id="m1", parent_id="u1")
    assert (message.info.sessionID, message.info.id, message.info.parentID) == ("s1", "m1", "u1")
    assert all(p.sessionID == "s1" and p.messageID == "m1" for p in message.parts)
    fresh = read(reply)
    assert fresh.info.sessionID is None and fresh.info.parentID is None
    assert fresh.info.id.startswith("msg")
    with pytest.raises(TypeError, match="sesion_id"):
        read(reply, sesion_id="s1")
