"""The OpenAI Agents SDK with a CompactingSession, against a local OpenAI-wire server.

Offline: ctxcompact's FakeOpenAIServer plays the model behind the real
``openai`` client (the agent reads the file each user turn names; summary
requests get notes). Each turn is one ``Runner.run``; between turns the
session masks old outputs and summarizes when the 8k window fills.

    pip install "ctxcompact[openai-agents]"
    python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from ctxcompact.clients.openai import OpenAIChatClient
from ctxcompact.integrations.openai_agents import CompactingSession
from ctxcompact.testing.servers import FakeOpenAIServer, Reply
from openai import AsyncOpenAI

TURNS = 20


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of a large file\n" * 300


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if "hand-over notes" in str(messages[0].get("content")):
        return Reply(text="## Session Summary\nThe user has me read one file per turn.")
    if messages[-1]["role"] == "tool":
        return Reply(text="Read it. " + "what the file holds, " * 50)
    path = str(messages[-1]["content"]).split()[-1]
    call = {"id": f"call_{path}", "name": "read_file", "arguments": json.dumps({"path": path})}
    return Reply(text="", finish="tool_calls", tool_calls=[call])


async def main() -> None:
    set_tracing_disabled(True)  # nothing leaves the machine
    with FakeOpenAIServer(model) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="local")
        agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                      model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client))  # fmt: skip
        summaries = OpenAIChatClient("gpt-4o-mini", base_url=server.base_url, api_key="local")
        session = CompactingSession("user-42", summary_model=summaries, context=8_000,
                                    output=1_000, policy={"preset": "swe-agent",
                                                          "keep_recent": 2})  # fmt: skip
        # Masks the outputs of a turn's own tool calls before each model call too.
        masking = RunConfig(call_model_input_filter=session.model_input_filter)
        for t in range(TURNS):
            await Runner.run(agent, f"please read f{t}.py", session=session, run_config=masking)
            view = await session.get_items()
            print(f"turn {t:2d}: the next turn starts from {len(view):2d} items")
        stored = await session.inner.get_items()
        print(f"compactions: {len(session.records)}; {len(stored)} items stored, none lost")
        assert len(session.records) >= 2
        await client.close()
        await summaries.aclose()


asyncio.run(main())
