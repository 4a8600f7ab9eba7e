"""CompactionProcessor in a real pydantic-ai agent, offline (FunctionModel)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from builders import check_options, check_records_as_sent
from ctxcompact.errors import MissingToolResultError, OrphanedToolResultError
from ctxcompact.integrations.pydantic_ai import ORIGINAL_KEY, SUMMARY_KEY, CompactionProcessor
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

OUTPUT = "line of a large file\n" * 300  # ~1,600 tokens per read
POLICY = {"preset": "swe-agent", "keep_recent": 2}
STEPS = 40


def agent_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Reads f0.py, f1.py, ... one call per step, then answers; keeps what it was sent."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        i = len(seen) - 1
        if i < STEPS:
            thought = f"Step {i}: the next file. " + "reasoning " * 40
            call = ToolCallPart("read_file", {"path": f"f{i}.py"}, f"c{i}")
            return ModelResponse(parts=[TextPart(thought), call])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def notes(messages: list[ModelMessage]) -> str:
    """The scripted summary: every file the prompt names."""
    text = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
    files = sorted({w.rstrip(":,") for w in text.split() if w.startswith("f") and ".py" in w})
    return f"## Session Summary\nRead so far: {', '.join(files)}"


def summary_model(prompts: list[list[ModelMessage]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(list(messages))
        assert not info.function_tools  # the compaction agent has no tools
        return ModelResponse(parts=[TextPart(notes(messages))])

    return FunctionModel(respond)


def parts(messages: list[ModelMessage], kind: type) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def run(asynchronous: bool) -> tuple[list[Any], list[Any], CompactionProcessor, list[Any]]:
    seen: list[list[ModelMessage]] = []
    prompts: list[list[ModelMessage]] = []
    processor = CompactionProcessor(summary_model(prompts), context=8_000, output=1_000,
                                    policy=POLICY)  # fmt: skip
    agent = Agent(agent_model(seen), system_prompt="You read files.",
                  **processor.agent_options(asynchronous=asynchronous))  # fmt: skip

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"{path}:\n{OUTPUT}"

    # agent.run in both: run_sync leaves its event loop open (pydantic-ai's), which
    # pytest reports later; the sync processor still runs, in pydantic-ai's worker thread.
    result = asyncio.run(agent.run("Read every file and report."))
    return seen, prompts, processor, result.all_messages()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_masks_every_step_and_summarizes_when_the_window_fills(asynchronous: bool) -> None:
    seen, prompts, processor, history = run(asynchronous)
    assert len(seen) == STEPS + 1
    records = processor.records
    assert len(records) >= 2 and [r.round for r in records] == list(range(1, len(records) + 1))
    assert len(prompts) == len(records)
    rounds = []
    for sent in seen:
        calls = {p.tool_call_id for p in parts(sent, ToolCallPart)}
        returns = parts(sent, ToolReturnPart)
        assert all(r.tool_call_id in calls for r in returns)  # pairs never split
        # the policy: the 2 newest returns whole, every older one a placeholder
        assert all(r.content != CLEARED_TOOL_OUTPUT for r in returns[-2:])
        assert all(r.content == CLEARED_TOOL_OUTPUT for r in returns[:-2])
        # the system prompt stays first; a summary follows it
        assert isinstance(sent[0].parts[0], SystemPromptPart)
        rounds.append((sent[0].metadata or {}).get(SUMMARY_KEY, 0))
    assert rounds == sorted(rounds) and rounds[-1] == len(records)
    assert sorted(set(rounds)) == list(range(len(records) + 1))
    # the second summary integrates the first (the requests are cut to the window)
    assert notes(prompts[0]).split("\n")[-1] in " ".join(
        str(getattr(p, "content", "")) for m in prompts[1] for p in m.parts
    )
    assert history[-1].parts[-1].content == "done"
    # a masked return's text is kept by the processor, not lost with the history
    cleared = [r for r in parts(seen[-1], ToolReturnPart) if r.content == CLEARED_TOOL_OUTPUT]
    assert cleared and all(OUTPUT in processor.recall(r.tool_call_id) for r in cleared)
    # ...and by the history pydantic-ai returns (metadata, never sent): persisted and
    # resumed in a new process, a fresh processor puts every text back.
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    saved = ModelMessagesTypeAdapter.dump_json(history)
    resumed = ModelMessagesTypeAdapter.validate_json(saved)
    masked = [r for r in parts(resumed, ToolReturnPart) if r.content == CLEARED_TOOL_OUTPUT]
    assert masked and all(OUTPUT in r.metadata[ORIGINAL_KEY] for r in masked)
    fresh = CompactionProcessor(None, context=8_000, output=1_000, policy=POLICY)
    restored = fresh._restored(resumed)
    assert all(r.content != CLEARED_TOOL_OUTPUT for r in parts(restored, ToolReturnPart))
    assert all(not (r.metadata or {}) for r in parts(restored, ToolReturnPart))


def test_unpaired_histories_get_a_typed_error_or_the_repair_report() -> None:
    orphan: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi"), ToolReturnPart("read_file", "stray", "nope")])
    ]
    missing: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "a"}, "c1")]),
        ModelRequest(parts=[UserPromptPart("and?")]),
    ]
    strict = CompactionProcessor(None, context=16_000, output=2_000)
    with pytest.raises(OrphanedToolResultError, match="message 1"):
        strict(orphan)
    with pytest.raises(MissingToolResultError, match="calls tool 'c1'"):
        strict(missing)
    lenient = CompactionProcessor(None, context=16_000, output=2_000, repair=True)
    fixed = lenient(missing)
    (ret,) = parts(fixed, ToolReturnPart)
    assert ret.tool_call_id == "c1" and "interrupted" in str(ret.content).lower()
    assert [c.kind for c in lenient.repairs[0].changes] == ["missing-result"]


def test_a_history_of_other_things_is_a_typed_error() -> None:
    from ctxcompact.errors import InputTypeError

    processor = CompactionProcessor(None, context=8_000, output=1_000, policy=POLICY)
    with pytest.raises(InputTypeError, match="history message 0"):
        processor([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    with pytest.raises(InputTypeError, match="got NoneType"):
        processor(None)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="got NoneType"):
        asyncio.run(processor.acall(None))  # type: ignore[arg-type]


def test_every_system_prompt_part_and_the_newest_request_survive_a_summary() -> None:
    processor = CompactionProcessor(None, context=16_000, output=2_000, policy=POLICY)
    systems = [SystemPromptPart("SYS ONE"), SystemPromptPart("SYS TWO: never delete files")]
    history: list[ModelMessage] = [ModelRequest(parts=[*systems, UserPromptPart("read them")])]
    for i in range(20):
        history += [ModelResponse(parts=[TextPart("reasoning " * 500),
                                         ToolCallPart("read_file", {"path": f"f{i}.py"}, f"c{i}")]),
                    ModelRequest(parts=[ToolReturnPart("read_file", OUTPUT, f"c{i}")])]  # fmt: skip
    out = processor(history)
    assert len(processor.records) == 1
    first = out[0]
    assert isinstance(first, ModelRequest) and (first.metadata or {}).get(SUMMARY_KEY) == 1
    assert first.parts[:2] == systems
    # the summary, then the request as written, then the kept steps answering it
    assert isinstance(first.parts[2], UserPromptPart) and first.parts[3].content == "read them"
    assert isinstance(out[1], ModelResponse)


def test_a_request_cut_once_is_cut_from_the_original_on_a_later_round() -> None:
    # the history holds only the cut copy after round 1; round 2 cut that copy
    # again: its marker went and the new one counted what went of the copy
    import re

    from ctxcompact._core import truncate_output

    log = "Here is the CI log:\n" + "log line\n" * 25_000 + "PLEASE FIX THE FAILURE ABOVE"
    processor = CompactionProcessor(None, context=32_000, output=4_000)
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("fix the test")]),
                                   ModelResponse(parts=[TextPart("ok")]),
                                   ModelRequest(parts=[UserPromptPart(log)])]  # fmt: skip
    cuts = []
    for rnd in (1, 2):
        history = processor(history)
        assert len(processor.records) == rnd
        first = history[0]
        assert isinstance(first, ModelRequest) and (first.metadata or {}).get(SUMMARY_KEY) == rnd
        request = first.parts[1]
        assert isinstance(request, UserPromptPart) and isinstance(request.content, str)
        text = request.content
        (cut,) = re.findall(r"\[\.\.\. (\d+) characters cut \.\.\.\]", text)  # one marker
        head = text.split("\n\n[... ")[0]
        assert text == truncate_output(log, len(head) // 2)  # a cut of the request as written
        cuts.append(int(cut))
        # the agent's steps after the request fill the tail (text masking leaves)
        for i in range(30):
            cid = f"c{rnd}-{i}"
            history += [ModelResponse(parts=[TextPart("thinking about it " * 150),
                                             ToolCallPart("read", {}, cid)]),
                        ModelRequest(parts=[ToolReturnPart("read", "short", cid)])]  # fmt: skip
    assert cuts[1] > cuts[0]  # cut smaller the second time, and the marker says how much


def replay(allow: int) -> tuple[list[Any], CompactionProcessor, list[tuple[int, int]], list[int]]:
    """``run`` with hooks: the pre-compact hook notes (model call, tokens_before)
    and cancels every compaction after the first ``allow``; the post-compact
    hook notes the model call the compaction came before."""
    from ctxcompact.live.events import Hooks

    seen: list[list[ModelMessage]] = []
    asked: list[tuple[int, int]] = []
    done: list[int] = []

    def pre(event: Any) -> None:
        asked.append((len(seen), event.tokens_before))
        if len(asked) > allow:
            event.cancel("replay")  # nothing changes: the call is sent the history as it is

    hooks = Hooks([pre], [lambda event: done.append(len(seen))])
    processor = CompactionProcessor(summary_model([]), context=8_000, output=1_000, policy=POLICY,
                                    hooks=hooks)  # fmt: skip
    agent = Agent(agent_model(seen), system_prompt="You read files.", **processor.agent_options())

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"{path}:\n{OUTPUT}"

    asyncio.run(agent.run("Read every file and report."))
    return seen, processor, asked, done


def sent_tokens(messages: list[ModelMessage]) -> int:
    """The estimate of what a model call received: each part as an OpenAI chat message."""
    from ctxcompact.scans.chat import estimate_chat_messages

    chat: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            calls = [{"id": p.tool_call_id, "type": "function",
                      "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                     for p in parts([m], ToolCallPart)]  # fmt: skip
            text = "".join(p.content for p in parts([m], TextPart))
            chat.append({"role": "assistant", "content": text, **({"tool_calls": calls} if calls
                                                                   else {})})  # fmt: skip
            continue
        for p in m.parts:
            if isinstance(p, ToolReturnPart):
                chat.append({"role": "tool", "tool_call_id": p.tool_call_id,
                             "content": p.model_response_str()})  # fmt: skip
            else:
                assert isinstance(p, SystemPromptPart | UserPromptPart)
                role = "system" if isinstance(p, SystemPromptPart) else "user"
                chat.append({"role": role, "content": p.content})
    return estimate_chat_messages(chat)


def test_records_hooks_and_metrics_count_the_model_input_as_sent() -> None:
    """tokens_before counted the unmasked history while tokens_after counted the
    masked one sent: each compaction looked ~6x bigger than what was sent."""
    check_records_as_sent(replay, lambda seen: seen, sent_tokens)


def test_the_constructor_takes_every_option() -> None:
    check_options(lambda **options: CompactionProcessor(None, session_id="s", **options), "s")
