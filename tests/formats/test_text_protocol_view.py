"""What the model is sent for a text-protocol step (SWE-agent without function
calling, mini-swe-agent) is what the agent sent: the assistant's text once (the
command is in it: the step's tool part adds no call) and the observation as
the next user message, the placeholder there once pruned. The recorded
``history`` / ``messages`` of each real run is the oracle; function-calling
runs keep their calls; the core's estimate, its bounds and the reference agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact import formats
from ctxcompact.scans import reference as ref
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import count_chat_tokens
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"
needs = pytest.mark.skipif(not DATA.is_dir(), reason="no ../shared/data")

RUNS = sorted(DATA.glob("swe-agent/**/*.traj")) + sorted(DATA.glob("mini-swe-agent/*.json"))


def recorded(path: Path) -> list[dict[str, Any]]:
    """The messages the run records as sent, chat keys only; but an empty user
    turn (mini-swe-agent's after its final submit), which no view sends."""
    doc = json.loads(path.read_text())
    messages = doc["history"] if path.suffix == ".traj" else doc  # mini: a bare list
    keys = ("role", "content", "tool_calls", "tool_call_id")
    return [{k: m[k] for k in keys if k in m} for m in messages
            if m["role"] != "user" or m["content"]]  # fmt: skip


def function_calling(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("tool_calls") for m in messages)


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(b["text"] for b in content if b.get("type") == "text")
    return content or ""


@needs
@pytest.mark.parametrize("path", RUNS, ids=lambda p: str(p.relative_to(DATA)))
def test_the_model_view_of_a_real_run_is_what_the_agent_sent(path: Path) -> None:
    session = formats.read(path)[0]
    view = cc.to_model_messages(session)
    sent = recorded(path)
    if function_calling(sent):
        # real calls stay calls, each followed by its result
        calls = [c["function"]["name"] for m in sent for c in m.get("tool_calls") or []]
        got = [c["function"]["name"] for m in view for c in m.get("tool_calls") or []]
        assert got == calls
        assert sum(m["role"] == "tool" for m in view) == sum(m["role"] == "tool" for m in sent)
        return
    assert any(p.type == "tool" for m in session.messages for p in m.parts), "steps are parts"
    assert not any("tool_calls" in m or m["role"] == "tool" for m in view)
    assert [(m["role"], m["content"]) for m in view] == [
        (m["role"], text_of(m["content"])) for m in sent
    ]
    assert count_chat_tokens(view, "o200k") == count_chat_tokens(sent, "o200k")


@needs
def test_the_core_estimates_the_view_message_by_message_on_real_runs() -> None:
    """The core's estimate (native reader, and the Python reader's table) is the
    view's estimate, and the reference's, for every run."""
    read = cc.read_sessions([DATA / "swe-agent", DATA / "mini-swe-agent"])
    table = read.transcript.to_arrow()
    got = cc.estimate_messages(table)
    sessions = read.transcript.to_sessions()
    views = {s.id: chat_tokens(cc.to_model_messages(s), method="opencode", overhead=4)
             for s in sessions}  # fmt: skip
    by_session = dict(zip(got.sessions["session_id"].to_pylist(),
                          got.sessions["tokens"].to_pylist(), strict=True))  # fmt: skip
    assert by_session == views
    want = ref.estimate_messages(table.to_pylist())
    assert got.messages["tokens"].to_pylist() == [t for _, t in want]
    for path in RUNS:  # the Python reader's sessions as a table
        session = formats.read(path)[0]
        want_total = chat_tokens(cc.to_model_messages(session), method="opencode", overhead=4)
        assert cc.estimate_messages(cc.Transcript.from_sessions([session])).total == want_total


@needs
@pytest.mark.parametrize("kind", ["swe-agent", "mini-swe-agent"])
def test_a_pruned_observation_is_its_placeholder_in_the_same_place(kind: str) -> None:
    path = next(p for p in RUNS if kind in str(p.parent) and not function_calling(recorded(p)))
    session = formats.read(path)[0]
    pruned = cc.mark_pruned(session.model_copy(deep=True), cc.prune(session, "swe-agent"))
    before, after = cc.to_model_messages(session), cc.to_model_messages(pruned)
    assert len(after) == len(before)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert changed, "the swe-agent policy clears old observations"
    for b, a in changed:
        assert (b["role"], a["role"], a["content"]) == ("user", "user", CLEARED_TOOL_OUTPUT)
    # the estimate of the pruned table agrees with the view
    table = cc.Transcript.from_sessions([pruned]).to_arrow()
    assert cc.estimate_messages(table).total == chat_tokens(after, method="opencode", overhead=4)


def test_a_function_call_beside_a_text_step_keeps_its_call() -> None:
    """The rule is the part's: a step read from a function-calling run's
    ``tool_calls`` is sent as a call, a text-protocol step's is not."""
    traj = {"history": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "look\n```\nls\n```", "action": "ls\n"},
        {"role": "user", "content": "a.py"},
        {"role": "assistant", "content": "read it", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "cat", "arguments": "{\"path\":\"a.py\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ]}  # fmt: skip
    view = cc.to_model_messages(formats.from_swe_agent(traj, "t"))
    assert view == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "look\n```\nls\n```"},
        {"role": "user", "content": "a.py"},
        {"role": "assistant", "content": "read it", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "cat", "arguments": "{\"path\":\"a.py\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ]  # fmt: skip
    table = cc.Transcript.from_sessions([formats.from_swe_agent(traj, "t")]).to_arrow()
    assert cc.estimate_messages(table).total == chat_tokens(view, method="opencode", overhead=4)
