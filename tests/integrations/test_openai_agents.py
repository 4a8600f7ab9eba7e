"""CompactingSession with the real OpenAI Agents SDK against a local OpenAI-wire server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from builders import check_options, check_records_as_sent
from ctxcompact.clients.openai import OpenAIChatClient
from ctxcompact.errors import MissingToolResultError
from ctxcompact.integrations.openai_agents import SUMMARY_KEY, CompactingSession
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT
from openai import AsyncOpenAI
from support.servers import FakeOpenAIServer, Reply

OUTPUT = "line of a large file\n" * 300  # ~1,600 tokens per read
TURNS = 20
ANSWER = "done: " + "what the file holds, " * 50  # ~250 tokens a turn
SUMMARY_SYSTEM = "You write hand-over notes"


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n{OUTPUT}"


def responder(body: dict[str, Any]) -> Reply:
    """The agent reads the file the newest user message names, then says done;
    a summary request (no tools) gets notes naming every file it was shown."""
    messages = body["messages"]
    if SUMMARY_SYSTEM in str(messages[0].get("content")):
        files = sorted({w.rstrip(":,") for w in json.dumps(messages).split()
                        if w.startswith("f") and ".py" in w})  # fmt: skip
        return Reply(text=f"## Session Summary\nRead so far: {', '.join(files)}")
    if messages[-1]["role"] == "tool":
        return Reply(text=ANSWER)
    path = str(messages[-1]["content"]).split()[-1]
    return Reply(text="", finish="tool_calls", tool_calls=[
        {"id": f"call_{path}", "name": "read_file", "arguments": json.dumps({"path": path})}
    ])  # fmt: skip


@pytest.fixture
def server() -> Any:
    set_tracing_disabled(True)  # nothing leaves the machine
    with FakeOpenAIServer(responder) as s:
        yield s


def test_compacts_between_turns_and_the_model_sees_the_view(server: FakeOpenAIServer) -> None:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x")
    agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                  model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client))  # fmt: skip
    summaries = OpenAIChatClient("gpt-4o-mini", base_url=server.base_url, api_key="x")
    session = CompactingSession("s1", summary_model=summaries, context=8_000, output=1_000,
                                policy={"preset": "swe-agent", "keep_recent": 2})  # fmt: skip

    async def run() -> None:
        for t in range(TURNS):
            result = await Runner.run(agent, f"please read f{t}.py", session=session)
            assert result.final_output == ANSWER
        await client.close()
        await summaries.aclose()

    asyncio.run(run())
    records = session.records
    assert len(records) >= 2 and [r.round for r in records] == list(range(1, len(records) + 1))
    agent_calls = [r.body["messages"] for r in server.requests
                   if SUMMARY_SYSTEM not in str(r.body["messages"][0].get("content"))]  # fmt: skip
    assert len(agent_calls) == 2 * TURNS
    rounds = []
    for sent in agent_calls:
        results = [m for m in sent if m["role"] == "tool"]
        calls = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in calls for m in results)  # pairs never split
        # the session's view keeps 2 outputs whole; within a turn the runner adds
        # the turn's own new output to it (the session is read between turns)
        whole = 3 if sent[-1]["role"] == "tool" else 2
        assert all(m["content"] != CLEARED_TOOL_OUTPUT for m in results[-whole:])
        assert all(m["content"] == CLEARED_TOOL_OUTPUT for m in results[:-whole])
        summary = [m for m in sent if "## Session Summary (Compaction Round" in str(m["content"])]
        assert len(summary) <= 1
        rounds.append(int(str(summary[0]["content"]).split("Round ")[1].split(")")[0])
                      if summary else 0)  # fmt: skip
        if summary:
            assert sent[1] is summary[0] or sent[1] == summary[0]  # after the instructions
            assert summary[0]["role"] == "user"
    assert rounds == sorted(rounds) and rounds[-1] == len(records)
    # the second summary integrated the first; the stored items are all still there
    second = [r.body["messages"] for r in server.requests
              if SUMMARY_SYSTEM in str(r.body["messages"][0].get("content"))][1]  # fmt: skip
    assert "Read so far: f0.py" in json.dumps(second)
    stored = asyncio.run(session.inner.get_items())
    outputs = [i for i in stored if i.get("type") == "function_call_output"]
    assert len(outputs) == TURNS and all(OUTPUT in i["output"] for i in outputs)
    assert sum(1 for i in stored if SUMMARY_KEY in i) == len(records)


def test_limit_pop_and_clear_follow_the_protocol() -> None:
    session = CompactingSession("s2", context=100_000, output=4_000)

    async def run() -> None:
        await session.add_items([{"role": "user", "content": "a"},
                                 {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}])  # fmt: skip
        assert [i["content"] for i in await session.get_items(limit=2)] == ["b", "c"]
        assert (await session.pop_item())["content"] == "c"
        assert [i["content"] for i in await session.get_items()] == ["a", "b"]
        await session.clear_session()
        assert await session.get_items() == []

    asyncio.run(run())


def test_a_call_without_output_is_a_typed_error_or_repaired() -> None:
    items = [{"role": "user", "content": "go"},
             {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
             {"role": "user", "content": "and?"}]  # fmt: skip

    async def view(repair: bool) -> list[Any]:
        session = CompactingSession("s3", context=100_000, output=4_000, repair=repair)
        await session.add_items(items)
        return await session.get_items()

    with pytest.raises(MissingToolResultError, match="c1"):
        asyncio.run(view(False))
    fixed = asyncio.run(view(True))
    assert [i.get("type") for i in fixed][1:3] == ["function_call", "function_call_output"]


def test_the_filter_masks_the_outputs_of_one_long_turn() -> None:
    """The runner reads the session once per turn; the filter masks within it."""
    from agents import RunConfig

    set_tracing_disabled(True)
    steps = [0]

    def one_turn(body: dict[str, Any]) -> Reply:
        steps[0] += 1
        if steps[0] < 12:
            call = {"id": f"c{steps[0]}", "name": "read_file",
                    "arguments": json.dumps({"path": f"f{steps[0]}.py"})}  # fmt: skip
            return Reply(text="", finish="tool_calls", tool_calls=[call])
        return Reply(text="done")

    async def turn(server: FakeOpenAIServer, masked: bool) -> list[Any]:
        async with AsyncOpenAI(base_url=server.base_url, api_key="x") as client:
            model = OpenAIChatCompletionsModel("gpt-4o", openai_client=client)
            agent = Agent(name="reader", tools=[read_file], model=model)
            policy = {"preset": "swe-agent", "keep_recent": 3}
            session = CompactingSession("one", context=100_000, policy=policy)
            config = RunConfig(call_model_input_filter=session.model_input_filter if masked
                               else None)  # fmt: skip
            await Runner.run(agent, "read them all", session=session, max_turns=30,
                             run_config=config)  # fmt: skip
            return list(await session.inner.get_items())

    def run(masked: bool) -> list[dict[str, Any]]:
        steps[0] = 0
        with FakeOpenAIServer(one_turn) as server:
            stored = asyncio.run(turn(server, masked))
            last: list[dict[str, Any]] = server.requests[-1].body["messages"]
        outputs = [m["content"] for m in last if m["role"] == "tool"]
        assert len(outputs) == 11
        assert all(
            OUTPUT in str(i.get("output"))
            for i in stored
            if i.get("type") == "function_call_output"
        )  # stored whole
        return outputs

    whole = run(masked=False)
    assert CLEARED_TOOL_OUTPUT not in whole  # without the filter: every output whole
    masked = run(masked=True)
    assert masked[:-3] == [CLEARED_TOOL_OUTPUT] * 8 and masked[-3:] == whole[-3:]


def test_items_it_cannot_read_are_typed_errors() -> None:
    from ctxcompact.errors import FormatError, InputTypeError
    from ctxcompact.integrations.openai_agents import to_chat

    with pytest.raises(InputTypeError, match="item 0"):
        to_chat(["hello"])  # type: ignore[list-item]
    with pytest.raises(FormatError, match="no call_id"):
        to_chat([{"type": "function_call", "name": "read", "arguments": "{}"}])


def replay(allow: int) -> tuple[list[Any], CompactingSession, list[tuple[int, int]], list[int]]:
    """The run of the first test with hooks: the pre-compact hook notes (model
    call, tokens_before) and cancels every compaction after the first
    ``allow``; the post-compact hook notes the model call the compaction came
    before. Returns what each agent call was sent (the summaries' left out)."""
    from ctxcompact.live.events import Hooks

    set_tracing_disabled(True)
    asked: list[tuple[int, int]] = []
    done: list[int] = []
    with FakeOpenAIServer(responder) as server:

        def calls() -> list[Any]:
            return [r.body["messages"] for r in server.requests
                    if SUMMARY_SYSTEM not in str(r.body["messages"][0].get("content"))]  # fmt: skip

        def pre(event: Any) -> None:
            asked.append((len(calls()), event.tokens_before))
            if len(asked) > allow:
                event.cancel("replay")  # nothing changes: the turn is sent the view as it is

        client = AsyncOpenAI(base_url=server.base_url, api_key="x")
        agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                      model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client))  # fmt: skip
        summaries = OpenAIChatClient("gpt-4o-mini", base_url=server.base_url, api_key="x")
        hooks = Hooks([pre], [lambda event: done.append(len(calls()))])
        session = CompactingSession("s1", summary_model=summaries, context=8_000, output=1_000,
                                    policy={"preset": "swe-agent", "keep_recent": 2},
                                    hooks=hooks)  # fmt: skip

        async def run() -> None:
            for t in range(TURNS):
                await Runner.run(agent, f"please read f{t}.py", session=session)
            await client.close()
            await summaries.aclose()

        asyncio.run(run())
        return calls(), session, asked, done


def session_part(sent: list[dict[str, Any]]) -> int:
    """The estimate of what the session gave a turn's first call: the messages
    between the agent's instructions and the turn's new input, as sent
    (counted as a stored session of it is: ``chat_counts``)."""
    from ctxcompact.scans.chatrows import chat_counts

    assert sent[0] == {"role": "system", "content": "You read files."}
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("please read f")
    return sum(chat_counts(sent[1:-1]))


def test_records_hooks_and_metrics_count_the_model_input_as_sent() -> None:
    """tokens_before counted the unmasked items while tokens_after counted the
    masked view sent: each compaction looked ~3x bigger than what was sent."""
    check_records_as_sent(replay, lambda calls: calls, session_part)


def test_the_constructor_takes_every_option() -> None:
    check_options(lambda **options: CompactingSession("s", **options), "s")
