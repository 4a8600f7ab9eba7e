"""The OpenAI Agents SDK with a CompactingSession, through the real ``openai`` client.

Offline by default: a pretend model that this script plays itself answers the
client's requests in process (the agent reads the file each user turn names;
summary requests get notes). Each turn is one ``Runner.run``; between turns the
session masks old outputs and summarizes when the 8k window fills.
``--base-url URL --model NAME`` asks a real OpenAI-compatible server instead.

    pip install "ctxcompact[openai-agents]"
    python examples/openai_agents_session.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import httpx
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
from openai import AsyncOpenAI

TURNS = 20


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of a large file\n" * 300


def completion(text: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Chat Completions reply as the API sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function", "function": c} for c in calls]
    return {"id": "chatcmpl-local", "object": "chat.completion", "created": 0, "model": "local",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}  # fmt: skip


def model(body: dict[str, Any]) -> dict[str, Any]:
    """The pretend model."""
    messages = body["messages"]
    if "hand-over notes" in str(messages[0].get("content")):
        return completion("## Session Summary\nThe user has me read one file per turn.")
    if messages[-1]["role"] == "tool":
        return completion("Read it. " + "what the file holds, " * 50)
    path = str(messages[-1]["content"]).split()[-1]
    call = {"id": f"call_{path}", "name": "read_file", "arguments": json.dumps({"path": path})}
    return completion("", [call])


async def main(base_url: str | None, name: str) -> None:
    set_tracing_disabled(True)  # nothing leaves the machine
    if base_url:
        client = AsyncOpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "local"))
    else:  # the pretend model answers the real client, in process
        answer = httpx.MockTransport(
            lambda r: httpx.Response(200, json=model(json.loads(r.content)))
        )
        client = AsyncOpenAI(base_url="http://pretend-model/v1", api_key="local",
                             http_client=httpx.AsyncClient(transport=answer))  # fmt: skip
    agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                  model=OpenAIChatCompletionsModel(name, openai_client=client))  # fmt: skip
    # A real server streams the summary; the pretend model answers in one piece.
    summaries = OpenAIChatClient(name, async_client=client, stream=base_url is not None)
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The Agents SDK with a CompactingSession.")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: the pretend "
                        "model, in process)")  # fmt: skip
    parser.add_argument("--model", default="gpt-4o", help="the model to ask")
    args = parser.parse_args()
    asyncio.run(main(args.base_url, args.model))
