"""The SDK clients against local servers that speak each API's real wire format."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ctxcompact.clients.anthropic import AnthropicClient, to_anthropic_messages
from ctxcompact.clients.base import AsyncSummaryClient, SummaryClient, SummaryRequest
from ctxcompact.clients.openai import OpenAIChatClient
from support.servers import FakeAnthropicServer, FakeOpenAIServer, Reply

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "fix the bug in app.py"},
    {"role": "assistant", "content": "Reading it.", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "read", "arguments": '{"path": "app.py"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "def f(): ..."},
    {"role": "user", "content": "What did we do so far?\n\nWrite the notes."},
]  # fmt: skip
REQUEST = SummaryRequest(system="be brief", messages=HISTORY, model=None, max_tokens=64)


def openai(server: FakeOpenAIServer, stream: bool, **kw: Any) -> OpenAIChatClient:
    return OpenAIChatClient("gpt-x", base_url=server.base_url, api_key="k", stream=stream,
                            max_retries=0, **kw)  # fmt: skip


def anthropic(server: FakeAnthropicServer, stream: bool, **kw: Any) -> AnthropicClient:
    return AnthropicClient("claude-x", base_url=server.base_url, api_key="k", stream=stream,
                           max_retries=0, **kw)  # fmt: skip


def both_ways(client: Any) -> list[Any]:
    """The same request through ``complete`` and ``acomplete``, connections closed after."""

    async def call() -> Any:
        try:
            return await client.acomplete(REQUEST)
        finally:
            await client.aclose()

    with client:
        return [client.complete(REQUEST), asyncio.run(call())]


@pytest.mark.parametrize("stream", [True, False])
def test_openai_text_finish_usage_and_no_tools(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.replies.extend(
        [Reply("the notes, in full", input_tokens=321, output_tokens=9)] * 2
    )
    client = openai(openai_server, stream)
    assert isinstance(client, SummaryClient) and isinstance(client, AsyncSummaryClient)
    for response in both_ways(client):
        assert (response.text, response.finish) == ("the notes, in full", "stop")
        assert (response.input_tokens, response.output_tokens) == (321, 9)
    body = openai_server.requests[0].body
    assert openai_server.requests[0].path == "/v1/chat/completions"
    assert "tools" not in body and "tool_choice" not in body
    assert body["model"] == "gpt-x" and body["max_tokens"] == 64
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][1:] == HISTORY
    assert body.get("stream", False) is stream


@pytest.mark.parametrize("stream", [True, False])
def test_openai_cut_off_summary_reports_length(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.replies.extend([Reply("half a summ", finish="length")] * 2)
    assert [r.finish for r in both_ways(openai(openai_server, stream))] == ["length", "length"]


def test_openai_request_model_and_completion_tokens_param(openai_server: FakeOpenAIServer) -> None:
    with openai(openai_server, True, max_tokens_param="max_completion_tokens") as client:
        client.complete(SummaryRequest(system="s", messages=HISTORY, model="cheap", max_tokens=7,
                                   temperature=0.2))  # fmt: skip
    body = openai_server.requests[0].body
    assert (body["model"], body["max_completion_tokens"], body["temperature"]) == ("cheap", 7, 0.2)


@pytest.mark.parametrize("status", [500, 429, 400])
def test_openai_errors_raise_the_sdk_error(openai_server: FakeOpenAIServer, status: int) -> None:
    import openai as sdk

    openai_server.default = Reply("boom", status=status)
    with pytest.raises(sdk.APIStatusError) as e, openai(openai_server, True) as client:
        client.complete(REQUEST)
    assert e.value.status_code == status


def test_openai_timeout(openai_server: FakeOpenAIServer) -> None:
    import openai as sdk

    openai_server.default = Reply("late", delay_s=2.0)
    with pytest.raises(sdk.APITimeoutError), openai(openai_server, False, timeout=0.3) as c:
        c.complete(REQUEST)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_text_stop_reason_and_usage(
    anthropic_server: FakeAnthropicServer, stream: bool
) -> None:
    anthropic_server.replies.extend(
        [Reply("anthropic notes", input_tokens=50, output_tokens=4)] * 2
    )
    for response in both_ways(anthropic(anthropic_server, stream)):
        assert (response.text, response.finish) == ("anthropic notes", "stop")
        assert (response.input_tokens, response.output_tokens) == (50, 4)
    sent = anthropic_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == "be brief" and "tools" not in sent.body
    assert sent.body["messages"][0]["role"] == "user"
    # No tools defined, so no tool blocks: the real API refuses them (the fake does too).
    kinds = {"text" if isinstance(m["content"], str) else b["type"]
             for m in sent.body["messages"] for b in m["content"]}  # fmt: skip
    assert kinds == {"text"}
    assert "[tool call read" in str(sent.body) and "def f(): ..." in str(sent.body)


def test_the_fake_anthropic_server_refuses_tool_blocks_without_tools(
    anthropic_server: FakeAnthropicServer,
) -> None:
    """As the Messages API does; a summary request that sent them would always fail."""
    import anthropic as sdk

    _, blocks = to_anthropic_messages(HISTORY)
    client = sdk.Anthropic(base_url=anthropic_server.base_url, api_key="k", max_retries=0)
    with client, pytest.raises(sdk.BadRequestError, match="must define tools"):
        client.messages.create(model="m", max_tokens=8, messages=blocks)  # type: ignore[arg-type]


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_max_tokens_is_length(
    anthropic_server: FakeAnthropicServer, stream: bool
) -> None:
    anthropic_server.default = Reply("cut", finish="max_tokens")
    with anthropic(anthropic_server, stream) as client:
        assert client.complete(REQUEST).finish == "length"


def test_anthropic_errors_and_timeouts(anthropic_server: FakeAnthropicServer) -> None:
    import anthropic as sdk

    anthropic_server.default = Reply("overloaded", status=529)
    with pytest.raises(sdk.APIStatusError), anthropic(anthropic_server, True) as client:
        client.complete(REQUEST)
    anthropic_server.default = Reply("late", delay_s=2.0)
    with pytest.raises(sdk.APITimeoutError), anthropic(anthropic_server, False, timeout=0.3) as c:
        c.complete(REQUEST)


def test_chat_history_becomes_valid_anthropic_messages() -> None:
    system, messages = to_anthropic_messages(
        [{"role": "system", "content": "sys"}, {"role": "assistant", "content": "hi"}, *HISTORY]
    )
    assert system == "sys"
    # alternating, starting with a user turn (a placeholder before the leading reply)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[3]["content"][-1] == {"type": "tool_use", "id": "c1", "name": "read",
                                          "input": {"path": "app.py"}}  # fmt: skip
    results = messages[4]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "c1", "content": "def f(): ..."}
    assert results[1]["type"] == "text"  # the user's words follow the result in one turn


@pytest.mark.parametrize("make", [openai, anthropic])
def test_the_requests_timeout_and_retries_reach_the_sdk_unless_set_on_the_client(
    openai_server: FakeOpenAIServer, anthropic_server: FakeAnthropicServer, make: Any
) -> None:
    server = openai_server if make is openai else anthropic_server
    request = SummaryRequest(system="s", messages=HISTORY, timeout_s=3.0, max_retries=5)
    plain = make(server, True)  # max_retries=0 given, timeout not
    sdk = plain.sdk_for(request)
    assert (sdk.timeout, sdk.max_retries) == (3.0, 0)
    asynchronous = plain.sdk_for(request, asynchronous=True)
    assert (asynchronous.timeout, asynchronous.max_retries) == (3.0, 0)
    assert plain.sdk_for(SummaryRequest(system="s")).timeout == 120.0  # no request value
    pinned = make(server, True, timeout=7.0)
    assert pinned.sdk_for(request).timeout == 7.0
    # an SDK object passed in is used as it was configured
    passed = make(server, True, client=plain.client)
    assert passed.sdk_for(request) is plain.client
    plain.close()
    pinned.close()
    asyncio.run(plain.aclose())


def test_every_summary_client_sends_tool_calls_and_results_as_text() -> None:
    """The compaction agent defines no tools, so no request may hold tool blocks."""
    from ctxcompact.clients.base import tools_as_text
    from ctxcompact.integrations.langchain import LangChainSummaryClient
    from ctxcompact.integrations.pydantic_ai import PydanticAISummaryClient
    from langchain_core.messages import AIMessage, ToolMessage
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart

    flat = tools_as_text(HISTORY)
    assert all("tool_calls" not in m and m["role"] != "tool" for m in flat)
    assert flat[1]["content"] == 'Reading it.\n[tool call read {"path": "app.py"}]'
    assert flat[2] == {"role": "user", "content": "[tool result of read]\ndef f(): ..."}
    lc = LangChainSummaryClient(None)._messages(REQUEST)  # type: ignore[arg-type]
    assert not any(isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls)
                   for m in lc)  # fmt: skip
    pai = PydanticAISummaryClient("test")._messages(REQUEST)
    assert not any(isinstance(p, ToolCallPart | ToolReturnPart) for m in pai for p in m.parts)


@pytest.mark.parametrize("make", [openai, anthropic])
def test_a_passed_sync_sdk_client_serves_the_async_path_too(
    openai_server: FakeOpenAIServer, anthropic_server: FakeAnthropicServer, make: Any
) -> None:
    """Given only ``client=``, ``acomplete`` uses it (its base_url and key), not
    an async SDK client made from the environment."""
    server = openai_server if make is openai else anthropic_server
    server.replies.extend([Reply("from the configured server")] * 2)
    sdk = make(server, True).client
    adapter = (OpenAIChatClient("gpt-x", client=sdk) if make is openai
               else AnthropicClient("claude-x", client=sdk))  # fmt: skip
    response = asyncio.run(adapter.acomplete(REQUEST))
    assert response.text == "from the configured server"
    assert len(server.requests) == 1
    assert adapter._async_client is None  # no async SDK client was made
    sdk.close()


@pytest.mark.parametrize("make", [openai, anthropic])
def test_a_passed_async_sdk_client_alone_refuses_the_sync_path(
    openai_server: FakeOpenAIServer, anthropic_server: FakeAnthropicServer, make: Any
) -> None:
    from ctxcompact.errors import SummaryClientError

    server = openai_server if make is openai else anthropic_server
    sdk = make(server, True).async_client
    adapter = (OpenAIChatClient("gpt-x", async_client=sdk) if make is openai
               else AnthropicClient("claude-x", async_client=sdk))  # fmt: skip
    with pytest.raises(SummaryClientError, match="only an async_client"):
        adapter.complete(REQUEST)
    assert adapter._client is None and server.requests == []
