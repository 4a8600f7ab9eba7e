"""The compactor's history estimate is the core's ``estimate_messages`` over the
session's table (``Compactor.view_tokens``), no longer a Python walk of
``to_model_messages``: the two agree exactly, pivot, placeholders, thinking,
pinned and system messages included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.live.compactor import _stays
from ctxcompact.live.store import MemoryStore
from ctxcompact.models import MessageWithParts, Part, Session
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.parts import filter_pivot
from ctxcompact.scans.view import to_model_messages

FIXTURE = Path(__file__).parents[1] / "fixtures" / "opencode_session.json"

POLICIES: list[Any] = [
    None,
    Policy(placeholder="describe", clear_inputs=True, truncate_output=40, keep_thinking=2),
    Policy(keep_thinking=100),
]


def walk(session: Session, config: cc.CompactionConfig, system: str | None, pivot: bool = True
         ) -> int:  # fmt: skip
    """The estimate as it was made before: a walk of the chat messages."""
    visible = filter_pivot(session) if pivot else session
    shown = to_model_messages(visible, system=system, policy=config.policy)
    return chat_tokens(shown, method=config.estimate_method, overhead=config.message_overhead)


def sessions() -> list[Session]:
    out = [Session.model_validate(json.loads(FIXTURE.read_text()))]
    out += cc.Transcript(generate_table(4, 80, seed=9, mean_output_chars=300)).to_sessions()
    pinned = out[1].model_copy(deep=True)
    pinned.messages[3].pin()
    pinned.messages.insert(2, MessageWithParts.model_validate({
        "info": {"id": "sys", "role": "system"},
        "parts": [{"id": "sysp", "type": "text", "text": "rules 😀"}]}))  # fmt: skip
    think = out[2].model_copy(deep=True)
    for i, m in enumerate(think.messages):
        if m.role == "assistant":
            m.parts.insert(0, Part(id=f"r{i}", type="reasoning", text="thinking " * i))
    return [*out, pinned, think, Session.model_validate({"info": {"id": "empty"}})]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("method", ["opencode", "ceil-bytes"])
@pytest.mark.parametrize("system", [None, "be brief 😀"])
def test_the_core_estimate_is_the_walks(policy: Any, method: str, system: str | None) -> None:
    chosen = {} if policy is None else {"policy": policy}
    config = cc.CompactionConfig(**chosen, estimate_method=method, message_overhead=3)
    compactor = cc.Compactor(MemoryStore(), cc.Summarizer(None, config), config=config)
    for session in sessions():
        expected = walk(session, config, system)
        assert compactor.history_tokens(session, system) == expected, session.id
        visible = filter_pivot(session)
        fixed = visible.model_copy(update={"messages": [m for m in visible.messages if _stays(m)]})
        assert compactor.unremovable_tokens(session, system) == walk(fixed, config, system, False)
