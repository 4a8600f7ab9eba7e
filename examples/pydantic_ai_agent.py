"""A pydantic-ai agent kept inside its window by CompactionProcessor.

Offline: FunctionModel plays the agent (it reads f0.py, f1.py, ...) and the
summarizer. The window is 8k tokens: every request is masked by the policy,
and the older turns are summarized when even that is too much.

    pip install "ctxcompact[pydantic-ai]"
    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio

from ctxcompact.integrations.pydantic_ai import CompactionProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

STEPS = 40
calls: list[int] = []


def agent_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    i = len(calls)
    calls.append(i)
    sent = sum(len(str(getattr(p, "content", ""))) for m in messages for p in m.parts) // 4
    print(f"call {i:2d}: {len(messages):2d} messages, ~{sent:5d} tokens sent")
    if i < STEPS:
        thought = TextPart(f"Reading f{i}.py next. " + "reasoning " * 40)
        return ModelResponse(
            parts=[thought, ToolCallPart("read_file", {"path": f"f{i}.py"}, f"c{i}")]
        )
    return ModelResponse(parts=[TextPart("All files read.")])


def summaries(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("## Session Summary\nTask: read every file.")])


processor = CompactionProcessor(FunctionModel(summaries), context=8_000, output=1_000,
                                policy={"preset": "swe-agent", "keep_recent": 2})  # fmt: skip
agent = Agent(FunctionModel(agent_model), system_prompt="You read files.",
              **processor.agent_options())  # fmt: skip


@agent.tool_plain
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of a large file\n" * 300


result = asyncio.run(agent.run("Read every file, then report."))
print(f"answer: {result.output}")
print(f"compactions: {len(processor.records)}; history holds {len(result.all_messages())} messages")
assert len(processor.records) >= 2
