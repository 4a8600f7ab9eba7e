"""A compaction step of a framework integration on one long history.

What every integration (LangChain middleware, pydantic-ai processor, Agents
SDK session) pays per model call, on the chat list it converts the
framework's history to (a generated ~1,300-part coding-agent session, ~940
chat messages): the policy's masking of what the model is sent
(``ChatCompaction.view``) and a split-point summary when the window fills
(``ChatCompaction.compact``, the digest as the summarizer: no model call).
Run before and after a change with the same command and compare:

    pytest benches/test_integrations.py --benchmark-enable \
        --benchmark-timer=time.process_time --benchmark-min-rounds=10
"""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.integrations.chatlists import ChatCompaction
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.view import to_model_messages


@pytest.fixture(scope="module")
def chat() -> list[dict[str, Any]]:
    (session,) = cc.Transcript(
        generate_table(1, 1300, seed=3, mean_output_chars=1400)
    ).to_sessions()
    return [dict(m) for m in to_model_messages(session)]


def compaction(context: int) -> ChatCompaction:
    return ChatCompaction.build(Summarizer(None), context=context, model=None, output=8_000,
                                policy="swe-agent", config=None)  # fmt: skip


@pytest.mark.benchmark(group="integration-step")
def test_view(benchmark: Any, chat: list[dict[str, Any]]) -> None:
    """The masking every model call is sent through."""
    step = compaction(1_000_000)
    view = benchmark(step.view, chat)
    assert len(view) == len(chat)


@pytest.mark.benchmark(group="integration-step")
def test_compact(benchmark: Any, chat: list[dict[str, Any]]) -> None:
    """A step whose history fills the window: masked, split, summarized."""
    step = compaction(40_000)
    result = benchmark(step.compact, chat)
    assert result is not None and result.record is not None
