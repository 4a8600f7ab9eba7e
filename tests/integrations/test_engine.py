"""A framework history gets the fates and counts of the same history stored.

Each integration converts its history (LangChain messages, pydantic-ai
``ModelMessage``s, Agents SDK items) to a chat list and masks it
(``ChatCompaction.view``: ``mask_chat_messages``); the same chat list
written as an ``openai-chat`` session file, read by the native reader and
run through the stored-session scans (``prune``, ``mark_pruned``,
``estimate_messages``) must clear the same tool results and count every
message the same. Random histories (hypothesis) under the presets.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ctxcompact.integrations.chatlists import ChatCompaction
from ctxcompact.live.summary import Summarizer
from ctxcompact.policy import Policy
from ctxcompact.scans.chatrows import chat_counts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: A history: steps, each a user turn (its text) or an agent step (its text
#: and its calls: tool, argument, output size).
Step = tuple[str, str, list[tuple[str, int, int]]]

TOOLS = ("read", "bash", "grep", "skill")
user_turns = st.tuples(st.just("user"), st.text("abc xyz", min_size=1, max_size=40), st.just([]))
agent_steps = st.tuples(
    st.just("agent"),
    st.text("ok fine", max_size=20),
    st.lists(
        st.tuples(st.sampled_from(TOOLS), st.integers(0, 5), st.integers(0, 40_000)),
        min_size=1, max_size=3,
    ),
)  # fmt: skip
#: Mostly agent steps, so the presets' protections are passed and results cleared.
steps = st.lists(st.one_of(user_turns, agent_steps, agent_steps, agent_steps),
                 min_size=8, max_size=30).map(lambda s: [("user", "start", []), *s])  # fmt: skip
CUTTING = {"keep_recent": 2, "clear_inputs": True, "truncate_output": 300}
policies = st.sampled_from(
    ["opencode", "swe-agent", "aggressive", "anthropic-clear-tool-uses", CUTTING]
)


def _output(n: int, seed: int) -> str:
    return f"line {seed} of the output\n" * (n // 20) + "e" * (n % 20)


def langchain_history(history: list[Step]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for k, (kind, text, calls) in enumerate(history):
        if kind == "user":
            out.append(HumanMessage(text))
            continue
        ids = [f"call_{k}_{j}" for j in range(len(calls))]
        out.append(AIMessage(text, tool_calls=[
            {"name": tool, "args": {"path": f"f{arg}.py"}, "id": i, "type": "tool_call"}
            for (tool, arg, _), i in zip(calls, ids, strict=True)]))  # fmt: skip
        out += [ToolMessage(_output(n, k), tool_call_id=i)
                for (_, _, n), i in zip(calls, ids, strict=True)]  # fmt: skip
    return out


def pydantic_ai_history(history: list[Step]) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    for k, (kind, text, calls) in enumerate(history):
        if kind == "user":
            out.append(ModelRequest(parts=[UserPromptPart(text)]))
            continue
        ids = [f"call_{k}_{j}" for j in range(len(calls))]
        parts: list[Any] = [TextPart(text)] if text else []
        parts += [ToolCallPart(tool, {"path": f"f{arg}.py"}, i)
                  for (tool, arg, _), i in zip(calls, ids, strict=True)]  # fmt: skip
        out.append(ModelResponse(parts=parts))
        returns = [ToolReturnPart(tool, _output(n, k), i)
                   for (tool, _, n), i in zip(calls, ids, strict=True)]  # fmt: skip
        out.append(ModelRequest(parts=returns))
    return out


def agents_history(history: list[Step]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k, (kind, text, calls) in enumerate(history):
        if kind == "user":
            out.append({"role": "user", "content": text})
            continue
        if text:
            out.append({"role": "assistant", "content": text})
        ids = [f"call_{k}_{j}" for j in range(len(calls))]
        out += [{"type": "function_call", "call_id": i, "name": tool,
                 "arguments": json.dumps({"path": f"f{arg}.py"})}
                for (tool, arg, _), i in zip(calls, ids, strict=True)]  # fmt: skip
        out += [{"type": "function_call_output", "call_id": i, "output": _output(n, k)}
                for (_, _, n), i in zip(calls, ids, strict=True)]  # fmt: skip
    return out


def to_chat(framework: str, history: list[Step]) -> list[dict[str, Any]]:
    if framework == "langchain":
        from ctxcompact.integrations.langchain import to_chat as lc_chat

        return lc_chat(langchain_history(history))
    if framework == "pydantic-ai":
        from ctxcompact.integrations.pydantic_ai import to_chat as pa_chat

        return pa_chat(pydantic_ai_history(history))[0]
    from ctxcompact.integrations.openai_agents import to_chat as agents_chat

    return agents_chat(agents_history(history))[0]


def stored(chat: list[dict[str, Any]], policy: Policy) -> tuple[set[str], list[int], list[int]]:
    """The chat list stored as a session file and run through the stored-session
    scans: the call ids of the results prune clears, and each stored message's
    estimate before (as read) and after (marked, the policy's rendering)."""
    from ctxcompact.formats.reader import read_jsonl
    from ctxcompact.scans.parts import estimate_messages, mark_pruned, prune

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.jsonl"
        path.write_text(json.dumps({"id": "s", "messages": chat}) + "\n")
        transcript = read_jsonl(path, "openai-chat").transcript
    result = prune(transcript, policy)
    rows = result.rows.to_pylist()
    part_json = transcript.to_arrow().column("part_json").to_pylist()
    cleared = {json.loads(part_json[r])["callID"] for r in rows}
    before = estimate_messages(transcript, Policy()).messages.column("tokens").to_pylist()
    after = estimate_messages(mark_pruned(transcript, result), policy)
    return cleared, before, after.messages.column("tokens").to_pylist()


def per_stored_message(chat: list[dict[str, Any]], counts: list[int]) -> list[int]:
    """Chat counts summed per stored message: a tool result is part of its call's message."""
    out: list[int] = []
    for message, count in zip(chat, counts, strict=True):
        if message["role"] == "tool":
            out[-1] += count  # the histories send each call's results right after it
        else:
            out.append(count)
    return out


@pytest.mark.parametrize("framework", ["langchain", "pydantic-ai", "openai-agents"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps, name=policies)
def test_a_framework_history_gets_the_fates_and_counts_of_the_stored_session(
    framework: str, history: list[Step], name: Any
) -> None:
    chat = to_chat(framework, history)
    policy = Policy.load(name)
    compaction = ChatCompaction.build(Summarizer(None), context=1_000_000, model=None,
                                      output=8_000, policy=policy, config=None)  # fmt: skip
    from ctxcompact.scans.masking import mask_chat_messages

    cfg = compaction.config
    mask = mask_chat_messages(chat, cfg.policy, method=cfg.estimate_method,
                              overhead=cfg.message_overhead)  # fmt: skip
    assert compaction.view(chat) == mask.messages  # what the integration sends
    cleared, before, after = stored(chat, cfg.policy)
    assert set(mask.cleared) == cleared
    assert per_stored_message(chat, mask.counts_before) == before
    assert per_stored_message(chat, mask.counts_after) == after
    # the list sent, read again, counts what the mask said it would
    assert chat_counts(mask.messages) == mask.counts_after


@settings(max_examples=25, deadline=None)
@given(history=steps)
def test_a_described_placeholder_counts_as_the_list_sent(history: list[Step]) -> None:
    """With the described placeholder (it names the call) the masked list, read
    again, counts what the mask said: the engine renders what is applied."""
    from ctxcompact.scans.masking import mask_chat_messages

    chat = to_chat("langchain", history)
    policy = {"keep_recent": 1, "placeholder": "describe", "clear_inputs": True}
    mask = mask_chat_messages(chat, policy)
    assert chat_counts(mask.messages) == mask.counts_after
    assert sum(mask.counts_after) == mask.tokens_after


def test_arguments_count_as_a_stored_session_counts_them() -> None:
    """Deliberate: a call's arguments count as the compact JSON a stored
    session of the list holds (the Python chat estimate counted the text as
    given, so the integrations' records counted `{"path": "a.py"}` one token
    more than the same history stored)."""
    from ctxcompact.scans.chat import estimate_chat_message
    from ctxcompact.scans.estimate import estimate_tokens

    spaced = '{"path": "f15.py"}'  # 18 characters: 5 tokens; compact, 17: 4
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function",
                 "function": {"name": "read_file", "arguments": spaced}}]},
            {"role": "tool", "tool_call_id": "c", "content": "body"}]  # fmt: skip
    counts = chat_counts(chat)
    name = estimate_tokens("read_file")
    assert counts[1] == 4 + name + estimate_tokens('{"path":"f15.py"}')
    assert estimate_chat_message(chat[1]) == 4 + name + estimate_tokens(spaced) == counts[1] + 1
    _, before, _ = stored(chat, Policy())
    assert per_stored_message(chat, counts) == before


def custom_chat(history: list[Step]) -> list[dict[str, Any]]:
    """The history as a chat list whose calls of ``skill`` are OpenAI custom
    (freeform) tool calls: a patch's text, not JSON arguments."""
    out: list[dict[str, Any]] = []
    for k, (kind, text, calls) in enumerate(history):
        if kind == "user":
            out.append({"role": "user", "content": text})
            continue
        ids = [f"call_{k}_{j}" for j in range(len(calls))]
        out.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": i, "type": "custom", "custom": {"name": "apply_patch",
                                                   "input": f"*** Update f{arg}.py\n+\"x\"\n"}}
            if tool == "skill" else
            {"id": i, "type": "function",
             "function": {"name": tool, "arguments": json.dumps({"path": f"f{arg}.py"})}}
            for (tool, arg, _), i in zip(calls, ids, strict=True)]})  # fmt: skip
        out += [{"role": "tool", "tool_call_id": i, "content": _output(n, k)}
                for (_, _, n), i in zip(calls, ids, strict=True)]  # fmt: skip
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps, name=policies)
def test_custom_tool_calls_get_the_fates_and_counts_of_the_stored_session(
    history: list[Step], name: Any
) -> None:
    """A list with custom tool calls was counted by the Python chat estimate
    (the mapper read them as calls without a name or input): its counts were
    not the stored session's, and a cleared input wrote a ``function`` into
    the custom call. Now the mapper reads a custom call (its name, its text
    as the input ``{"input": text}``) and the list gets the stored fates and
    counts; a cleared custom call keeps its shape, its text emptied."""
    from ctxcompact.scans.masking import mask_chat_messages

    chat = custom_chat(history)
    policy = Policy.load(name)
    mask = mask_chat_messages(chat, policy)
    cleared, before, after = stored(chat, policy)
    assert set(mask.cleared) == cleared
    assert per_stored_message(chat, mask.counts_before) == before
    assert per_stored_message(chat, mask.counts_after) == after
    assert chat_counts(mask.messages) == mask.counts_after
    for message in mask.messages:
        for call in message.get("tool_calls") or ():
            assert ("custom" in call) != ("function" in call)


def test_a_custom_call_counts_its_name_and_text_as_stored() -> None:
    """Deliberate, as for arguments: a custom call counts its name and its
    text as the compact JSON ``{"input": text}`` the stored session holds."""
    from ctxcompact.scans.estimate import estimate_tokens

    patch = "*** Begin Patch\n" + "+line\n" * 500
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "custom",
                 "custom": {"name": "apply_patch", "input": patch}}]},
            {"role": "tool", "tool_call_id": "c", "content": "done"}]  # fmt: skip
    counts = chat_counts(chat)
    stored_input = json.dumps({"input": patch}, separators=(",", ":"))
    assert counts[1] == 4 + estimate_tokens("apply_patch") + estimate_tokens(stored_input)
    _, before, _ = stored(chat, Policy())
    assert per_stored_message(chat, counts) == before


def anthropic_chat(history: list[Step]) -> list[dict[str, Any]]:
    """The history as Anthropic turns (what a LangChain or Anthropic runtime
    holds): an agent step an assistant turn of blocks (thinking, text,
    tool_use), its results one user turn of tool_result blocks (a string, or
    text blocks), a user turn text, with an image or a document now and then."""
    out: list[dict[str, Any]] = []
    for k, (kind, text, calls) in enumerate(history):
        if kind == "user":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            if k % 5 == 1:
                image = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
                blocks.append({"type": "image", "source": image})
            if k % 7 == 2:
                notes = {"type": "text", "media_type": "text/plain", "data": "notes " * 40}
                blocks.append({"type": "document", "source": notes})
            out.append({"role": "user", "content": blocks if len(blocks) > 1 else text})
            continue
        ids = [f"toolu_{k}_{j}" for j in range(len(calls))]
        turn: list[dict[str, Any]] = []
        if k % 3 == 0:
            turn.append({"type": "thinking", "thinking": f"step {k}: " + "why " * (k * 7),
                         "signature": "sig"})  # fmt: skip
        elif k % 3 == 1:
            turn.append({"type": "redacted_thinking", "data": "opaque"})
        if text:
            turn.append({"type": "text", "text": text})
        turn += [{"type": "tool_use", "id": i, "name": tool, "input": {"path": f"f{arg}.py"}}
                 for (tool, arg, _), i in zip(calls, ids, strict=True)]  # fmt: skip
        out.append({"role": "assistant", "content": turn})
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": i,
             "content": _output(n, k) if j % 2 == 0 else [{"type": "text", "text": _output(n, k)}]}
            for j, ((_, _, n), i) in enumerate(zip(calls, ids, strict=True))]  # fmt: skip
        if k % 4 == 3:
            results.append({"type": "text", "text": "and keep going"})
        out.append({"role": "user", "content": results})
    return out


def stored_anthropic(
    chat: list[dict[str, Any]], policy: Policy
) -> tuple[set[str], list[int], list[int]]:
    """``stored`` for Anthropic turns: the list stored as an ``anthropic``
    request, one per line."""
    from ctxcompact.formats.reader import read_jsonl
    from ctxcompact.scans.parts import estimate_messages, mark_pruned, prune

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.jsonl"
        path.write_text(json.dumps({"messages": chat}) + "\n")
        transcript = read_jsonl(path, "anthropic").transcript
    result = prune(transcript, policy)
    part_json = transcript.to_arrow().column("part_json").to_pylist()
    cleared = {json.loads(part_json[r])["callID"] for r in result.rows.to_pylist()}
    before = estimate_messages(transcript, Policy()).messages.column("tokens").to_pylist()
    after = estimate_messages(mark_pruned(transcript, result), policy)
    return cleared, before, after.messages.column("tokens").to_pylist()


def per_step(chat: list[dict[str, Any]], counts: list[int]) -> list[int]:
    """Counts summed per step: an assistant turn with the user turn of its
    results (a stored session counts a call's result with its call's
    message; a chat list, at the turn holding its tool_result block)."""
    out: list[int] = []
    for i, count in enumerate(counts):
        if i > 0 and chat[i - 1]["role"] == "assistant":
            out[-1] += count
        else:
            out.append(count)
    return out


#: The presets, and a policy that sends the two newest turns' thinking.
anthropic_policies = st.one_of(policies, st.just({**CUTTING, "keep_thinking": 2}))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps, name=anthropic_policies)
def test_anthropic_turns_get_the_fates_and_counts_of_the_stored_session(
    history: list[Step], name: Any
) -> None:
    """Anthropic turns were counted by the Python chat estimate and refused by
    a policy (``FormatError``): now read by the core as the same turns stored
    in the ``anthropic`` format, they get its fates and counts, and the masked
    list is still an Anthropic request (the SDK's ``MessageParam`` list):
    a cleared result keeps its block and tool_use_id, a cleared input is
    ``{}``, the thinking blocks stay."""
    from anthropic.types import MessageParam
    from ctxcompact.scans.masking import mask_chat_messages
    from pydantic import TypeAdapter

    chat = anthropic_chat(history)
    policy = Policy.load(name)
    mask = mask_chat_messages(chat, policy)
    cleared, before, after = stored_anthropic(chat, policy)
    assert set(mask.cleared) == cleared
    assert per_step(chat, mask.counts_before) == per_step(chat, before)
    assert per_step(chat, mask.counts_after) == per_step(chat, after)
    assert chat_counts(chat) == mask.counts_before
    if policy.keep_thinking == 0:  # chat_counts: the default view, no thinking sent
        assert chat_counts(mask.messages) == mask.counts_after
    TypeAdapter(list[MessageParam]).validate_python(mask.messages)
    for was, now in zip(chat, mask.messages, strict=True):
        if isinstance(was["content"], str):
            assert now == was
            continue
        assert [b["type"] for b in now["content"]] == [b["type"] for b in was["content"]]
        for a, b in zip(was["content"], now["content"], strict=True):
            if a["type"] == "tool_result":
                assert b["tool_use_id"] == a["tool_use_id"]
                assert (b != a) == (a["tool_use_id"] in mask.cleared) or (
                    policy.truncate_output is not None
                )
            elif a["type"] == "tool_use":
                cleared_input = policy.clear_inputs and a["id"] in mask.cleared
                assert b == ({**a, "input": {}} if cleared_input else a)
            else:
                assert b == a
