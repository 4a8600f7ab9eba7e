"""A LangChain v1 agent (create_agent) kept inside its window by CompactionMiddleware.

Offline: a scripted chat model plays the agent (it reads f0.py, f1.py, ...),
another writes the summaries. The window is 8k tokens: the policy masks old
file reads at every call, and when even that is too much the older turns
are summarized.

    pip install "ctxcompact[langchain]"
    python examples/langchain_agent.py
"""

from __future__ import annotations

from typing import Any

from ctxcompact.integrations.langchain import CompactionMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

STEPS = 40


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of a large file\n" * 300


class ScriptedAgent(BaseChatModel):
    """Stands in for a real model: one file read per step, then an answer."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedAgent:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        i, self.calls = self.calls, self.calls + 1
        sent = sum(len(str(m.content)) for m in messages) // 4
        print(f"call {i:2d}: {len(messages):2d} messages, ~{sent:5d} tokens sent")
        reply = (AIMessage(f"Reading f{i}.py next. " + "reasoning " * 40,
                           tool_calls=[{"id": f"c{i}", "name": "read_file",
                                        "args": {"path": f"f{i}.py"}}])
                 if i < STEPS else AIMessage("All files read."))  # fmt: skip
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ScriptedSummaries(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted-summaries"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        notes = "## Session Summary\nTask: read every file. Files read so far are listed above."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(notes))])


middleware = CompactionMiddleware(
    ScriptedSummaries(),  # pass the agent's own model to summarize with it
    context=8_000, output=1_000,
    policy={"preset": "swe-agent", "keep_recent": 2},
)  # fmt: skip
agent = create_agent(ScriptedAgent(), [read_file], middleware=[middleware])
state = agent.invoke({"messages": [HumanMessage("Read every file, then report.")]})
print(f"answer: {state['messages'][-1].content}")
print(f"compactions: {len(middleware.records)}; state holds {len(state['messages'])} messages")
assert len(middleware.records) >= 2
