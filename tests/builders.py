"""Small builders of OpenCode-shaped messages for the lifecycle tests."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import ctxcompact as cc
from ctxcompact.live.store import new_id
from ctxcompact.models import (
    AssistantMessage,
    MessageWithParts,
    Part,
    TokenUsage,
    ToolState,
    UserMessage,
)


def user(text: str = "go") -> MessageWithParts:
    mid = new_id("msg")
    return MessageWithParts(
        info=UserMessage(id=mid), parts=[Part(id=new_id("prt"), type="text", text=text)]
    )


def tool_reply(
    parent: str, output: str, *, tokens: dict[str, Any] | None = None, path: str = "a.py",
    tool: str = "read", status: str = "completed",
) -> MessageWithParts:  # fmt: skip
    state: dict[str, Any] = {"status": status, "input": {"path": path}}
    if status == "completed":
        state["output"] = output
    elif status == "error":
        state["error"] = output
    return MessageWithParts(
        info=AssistantMessage(id=new_id("msg"), parentID=parent, finish="stop",
                              tokens=TokenUsage(**(tokens or {"input": 10, "output": 1}))),
        parts=[Part(id=new_id("prt"), type="tool", tool=tool, callID=new_id("call"),
                    state=ToolState.model_validate(state))],
    )  # fmt: skip


def fill(store: Any, session: str, turns: int, chars: int = 60_000, step: int = 20_000) -> None:
    """``turns`` user turns, each answered by one tool read of ``chars`` characters;
    reported input tokens grow by ``step`` per turn."""
    for i in range(turns):
        u = user(f"request {i}")
        store.append_message(session, u)
        store.append_message(
            session, tool_reply(u.id, "x" * chars, tokens={"input": step * i, "output": 100})
        )


def read_run(
    sid: str, steps: int, chars: int, task: str = "fix the bug in src/app.py"
) -> cc.Session:
    """A single-task run: the task, then ``steps`` reads of ``chars`` each."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user", "time": {"created": 0}},
         "parts": [{"id": "t0", "type": "text", "text": task}]},
    ]  # fmt: skip
    for i in range(steps):
        messages.append({
            "info": {"id": f"a{i:03d}", "role": "assistant", "parentID": "u0",
                     "finish": "tool-calls", "time": {"created": (i + 1) * 1000}},
            "parts": [{"id": f"p{i:03d}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"src/f{i}.py"},
                                 "output": "x" * chars}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": sid}, "messages": messages})


#: How a file that was listed is made unreadable before it is read, and the
#: error (class, errno) reading it must give.
UNREADABLE: dict[str, tuple[type[OSError], int]] = {
    "gone": (FileNotFoundError, errno.ENOENT),
    "folder": (IsADirectoryError, errno.EISDIR),
    "pipe": (OSError, errno.EINVAL),
    "dangling link": (FileNotFoundError, errno.ENOENT),
}


def make_unreadable(path: Path, kind: str) -> None:
    """Replace the file at ``path`` by what ``kind`` (of ``UNREADABLE``) names."""
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "pipe":
        os.mkfifo(path)
    elif kind == "dangling link":
        path.symlink_to(path.with_name("no-such-target" + path.suffix))


def check_unreadable(error: BaseException, path: Path, kind: str) -> None:
    """``error`` is Python's own OSError for ``path`` made unreadable as ``kind``
    says: its class and errno, the file named (never a library error)."""
    cls, code = UNREADABLE[kind]
    assert type(error) is cls, repr(error)
    assert not isinstance(error, cc.CompactionError)
    assert (error.errno, error.filename) == (code, str(path)), repr(error)
    assert str(path) in str(error)


def unreadable_after(monkeypatch: Any, owner: object, name: str, path: Path, kind: str) -> None:
    """``owner.name`` patched so that ``path`` is made unreadable (``kind``)
    as soon as it returns: a file listed, then deleted or replaced before it
    is read."""
    listing = getattr(owner, name)

    def then_unreadable(*args: Any, **kwargs: Any) -> Any:
        out = listing(*args, **kwargs)
        make_unreadable(path, kind)
        return out

    monkeypatch.setattr(owner, name, then_unreadable)


def check_records_as_sent(replay: Any, seen: Any, sent_tokens: Any) -> None:
    """An integration's compaction records, hook and metrics count the model
    input as sent. ``replay(allow)`` runs the integration's test agent with
    compactions after the first ``allow`` cancelled and returns (run, holder,
    asked, done): ``asked`` the pre-compact hook's (model call, tokens_before),
    ``done`` the call each compaction came before; ``seen(run)`` lists what
    each model call received and ``sent_tokens`` estimates one of them; the
    holder (middleware, processor, session) has the ``records`` and ``metrics``."""
    run, holder, asked, done = replay(1_000)
    records = holder.records
    assert len(records) >= 2
    for i, record in enumerate(records):
        assert asked[i][1] == record.tokens_before  # the hook saw the record's figure
        # the call right after the compaction was sent what tokens_after counts
        assert record.tokens_after == sent_tokens(seen(run)[done[i]])
        # the same run with compaction i cancelled: that call is sent the history
        # compaction i started from, as the model sees it (masked)
        again, _, asked_again, _ = replay(i)
        call, tokens = asked_again[i]
        assert record.tokens_before == tokens == sent_tokens(seen(again)[call])
        # masking was active: the history held far more than was sent
        assert record.unmasked_tokens_before is not None
        assert record.unmasked_tokens_before > 2 * record.tokens_before
    average = sum(r.tokens_before for r in records) / len(records)
    assert holder.metrics.average_tokens_before == average


def check_options(make: Any, session_id: str) -> None:
    """An integration's constructor (``make(**options)``) takes every keyword
    of ``chatlists.Options`` and hands each to its ``ChatCompaction``; an
    unknown keyword is an ``InputTypeError`` (a ``TypeError``) naming it."""
    import pytest
    from ctxcompact.config import CompactionConfig
    from ctxcompact.errors import InputTypeError
    from ctxcompact.integrations.chatlists import Options
    from ctxcompact.live import events as ev
    from ctxcompact.policy import Policy

    hooks, events, metrics = ev.Hooks(), ev.EventBus(), ev.Metrics()
    config = CompactionConfig(safety_buffer=1_234)
    # context and output given win over the model's
    options: Options = {"context": 64_000, "model": "gpt-4o", "output": 8_000,
                        "policy": "swe-agent", "config": config, "repair": True, "hooks": hooks,
                        "events": events, "metrics": metrics}  # fmt: skip
    assert set(options) == set(Options.__annotations__)  # every option is given here
    c = make(**options).compaction
    assert (c.context, c.output, c.repair, c.session_id) == (64_000, 8_000, True, session_id)
    assert c.hooks is hooks and c.events is events and c.metrics is metrics
    assert c.config.safety_buffer == 1_234 and c.config.policy == Policy.load("swe-agent")
    assert c.summarizer.config is c.config
    named = make(model="gpt-4o", events=None, metrics=None).compaction
    assert named.context == 128_000 and named.output > 0 and not named.repair
    assert isinstance(named.events, ev.EventBus) and named.events is not events
    with pytest.raises(InputTypeError, match="unexpected keyword argument 'contxt'") as e:
        make(contxt=64_000)
    assert isinstance(e.value, TypeError)
