"""SDK replies as the assistant message ``after_step`` stores (issue 10, item 10)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import ctxcompact as cc
import openai
import pytest
from ctxcompact.errors import FormatError
from ctxcompact.live import (
    from_anthropic_message,
    from_openai_chat,
    from_openai_response,
    is_context_stop,
    run_tools,
)
from ctxcompact.models import AssistantMessage, MessageWithParts
from support.servers import FakeAnthropicServer, FakeOpenAIServer, Reply

CALL = {"id": "call_1", "name": "read", "arguments": json.dumps({"path": "src/app.py"})}
REPLY = Reply("Reading it.", finish="tool_calls", tool_calls=[CALL], input_tokens=900,
              output_tokens=40, cache_read_tokens=100, cache_write_tokens=30,
              reasoning_tokens=12)  # fmt: skip
OPENAI_TOKENS = {"input": 900, "output": 40, "reasoning": 12, "cache": {"read": 100, "write": 30}}
MESSAGES: list[Any] = [{"role": "user", "content": "fix the test"}]


def shape(message: MessageWithParts) -> dict[str, Any]:
    """What matters of a converted message, ids left out (they are fresh)."""
    info = message.info
    assert isinstance(info, AssistantMessage)
    return {
        "finish": info.finish,
        "tokens": info.tokens.model_dump() if info.tokens else None,
        "parts": [
            (p.type, p.text, p.tool, p.callID, p.state.status if p.state else None,
             p.state.input if p.state else None)
            for p in message.parts
        ],
    }  # fmt: skip


def test_openai_chat_every_form_gives_the_same_message(openai_server: FakeOpenAIServer) -> None:
    openai_server.replies.extend([REPLY] * 4)
    sdk = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    with sdk:
        completion = sdk.chat.completions.create(model="gpt-x", messages=MESSAGES)
        chunks = list(sdk.chat.completions.create(
            model="gpt-x", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        ))  # fmt: skip
        live = sdk.chat.completions.create(
            model="gpt-x", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        with sdk.chat.completions.stream(
            model="gpt-x", messages=MESSAGES, stream_options={"include_usage": True}
        ) as stream:
            final = stream.get_final_completion()
        forms = [completion, completion.model_dump(), chunks, [c.model_dump() for c in chunks],
                 live, final]  # fmt: skip
        results = [shape(from_openai_chat(f)) for f in forms]
    expected = {
        "finish": "tool_calls",
        # OpenAI's prompt_tokens (1030) include the cache reads and writes: input does not
        "tokens": OPENAI_TOKENS,
        "parts": [("text", "Reading it.", None, None, None, None),
                  ("tool", None, "read", "call_1", "pending", {"path": "src/app.py"})],
    }  # fmt: skip
    assert results == [expected] * len(forms)
    message = from_openai_chat(completion, session_id="s1", parent_id="u1")
    assert (message.info.sessionID, message.info.parentID) == ("s1", "u1")  # type: ignore[union-attr]
    assert message.info.modelID == "gpt-x" and message.info.providerID == "openai"  # type: ignore[union-attr]
    assert all(p.messageID == message.id and p.sessionID == "s1" for p in message.parts)


def test_anthropic_every_form_gives_the_same_message(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.replies.extend([REPLY] * 3)
    sdk = anthropic.Anthropic(base_url=anthropic_server.base_url, api_key="k", max_retries=0)
    with sdk:
        message = sdk.messages.create(model="claude-x", max_tokens=100, messages=MESSAGES)
        events = list(sdk.messages.create(model="claude-x", max_tokens=100, messages=MESSAGES,
                                          stream=True))  # fmt: skip
        with sdk.messages.stream(model="claude-x", max_tokens=100, messages=MESSAGES) as stream:
            final = stream.get_final_message()
        forms = [message, message.model_dump(), events, [e.model_dump() for e in events], final]
        results = [shape(from_anthropic_message(f)) for f in forms]
    expected = {
        "finish": "tool_use",
        # Anthropic's input_tokens exclude the cache already
        "tokens": {"input": 900, "output": 40, "reasoning": 0, "cache": {"read": 100, "write": 30}},
        "parts": [("text", "Reading it.", None, None, None, None),
                  ("tool", None, "read", "call_1", "pending", {"path": "src/app.py"})],
    }  # fmt: skip
    assert results == [expected] * len(forms)
    assert from_anthropic_message(message).info.providerID == "anthropic"  # type: ignore[union-attr]


def test_anthropic_thinking_is_a_reasoning_part_with_its_signature() -> None:
    message = from_anthropic_message({
        "model": "claude-x", "stop_reason": "max_tokens",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xyz"},
                    {"type": "text", "text": "partial"}],
        "usage": {"input_tokens": 5, "output_tokens": 7},
    })  # fmt: skip
    assert [(p.type, p.text) for p in message.parts] == [
        ("reasoning", "hmm"),
        ("reasoning", ""),
        ("text", "partial"),
    ]
    assert message.parts[0].model_extra == {"signature": "sig"}
    assert message.parts[1].model_extra == {"redacted": "xyz"}
    assert message.info.finish == "max_tokens"  # type: ignore[union-attr]


RESPONSE: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-x",
    "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "message", "id": "m_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read",
         "arguments": '{"path": "src/app.py"}', "status": "completed"},
    ],
    "usage": {"input_tokens": 1030,
              "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 30},
              "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12},
              "total_tokens": 1070},
}  # fmt: skip


def test_openai_responses_object_dict_and_stream() -> None:
    from openai.types.responses import Response

    sdk_object = Response.model_validate(RESPONSE)
    created = {**RESPONSE, "status": "in_progress", "output": [], "usage": None}
    events = [
        {"type": "response.created", "sequence_number": 0, "response": created},
        *[{"type": "response.output_item.done", "output_index": i, "item": item,
           "sequence_number": i + 1} for i, item in enumerate(RESPONSE["output"])],
        {"type": "response.completed", "sequence_number": 9, "response": RESPONSE},
    ]  # fmt: skip
    results = [shape(from_openai_response(f)) for f in (RESPONSE, sdk_object, events)]
    expected = {
        "finish": "tool_calls",
        "tokens": OPENAI_TOKENS,
        "parts": [("reasoning", "plan", None, None, None, None),
                  ("text", "Reading it.", None, None, None, None),
                  ("tool", None, "read", "call_1", "pending", {"path": "src/app.py"})],
    }  # fmt: skip
    assert results == [expected] * 3
    # A stream cut before its terminal event: the items it finished, not "stop".
    cut = shape(from_openai_response(events[:-1]))
    assert cut["parts"] == expected["parts"] and cut["finish"] == "incomplete"
    short = {**RESPONSE, "status": "incomplete", "output": RESPONSE["output"][1:2],
             "incomplete_details": {"reason": "max_output_tokens"}}  # fmt: skip
    assert from_openai_response(short).info.finish == "length"  # type: ignore[union-attr]
    failed = {**RESPONSE, "status": "failed", "output": [],
              "error": {"code": "context_length_exceeded", "message": "too long"}}  # fmt: skip
    assert is_context_stop(from_openai_response(failed).info.finish)  # type: ignore[union-attr]


def test_bad_replies_raise_format_errors_saying_what_is_wrong() -> None:
    with pytest.raises(FormatError, match="no choices"):
        from_openai_chat({"choices": []})
    with pytest.raises(FormatError, match=r"chunk 1 is not a chat\.completion\.chunk"):
        from_openai_chat([{"choices": []}, {"id": "x"}])
    with pytest.raises(FormatError, match="not an object"):
        from_openai_chat(42)
    with pytest.raises(FormatError, match="no content list"):
        from_anthropic_message({"stop_reason": "end_turn"})
    with pytest.raises(FormatError, match="no message_start"):
        from_anthropic_message([{"type": "ping"}])
    with pytest.raises(FormatError, match="no response event"):
        from_openai_response([{"type": "response.output_text.delta", "delta": "x"}])


def chat_reply(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]}}],
    }  # fmt: skip


def test_run_tools_completes_each_call_and_turns_failures_into_tool_errors() -> None:
    def read(path: str) -> str:
        if path == "missing":
            raise FileNotFoundError(path)
        return f"contents of {path}"

    message = from_openai_chat(chat_reply(
        ("c1", "read", '{"path": "a.py"}'), ("c2", "read", '{"path": "missing"}'),
        ("c3", "grep", '{"q": "x"}'), ("c4", "read", '{"path": '),
        ("c5", "count", '{"n": 3}'),
    ))  # fmt: skip
    assert run_tools(message, {"read": read, "count": lambda n: {"n": n}}) is message
    states = [(p.callID, p.state.status, p.state.output, p.state.error) for p in message.parts]  # type: ignore[union-attr]
    assert states[0] == ("c1", "completed", "contents of a.py", None)
    assert states[1] == ("c2", "error", None, "FileNotFoundError: missing")
    assert states[2] == ("c3", "error", None, "unknown tool 'grep'")
    assert states[3][:3] == ("c4", "error", None) and "not valid JSON" in str(states[3][3])
    assert states[4] == ("c5", "completed", '{"n": 3}', None)
    assert all(p.state.time and p.state.time.end for p in message.parts)  # type: ignore[union-attr]
    # one function for every tool; finished calls are left alone
    again = from_openai_chat(chat_reply(("c6", "echo", '{"x": 1}')))
    run_tools(again, lambda name, args: f"{name} {args}")
    assert again.parts[0].state.output == "echo {'x': 1}"  # type: ignore[union-attr]
    run_tools(again, lambda name, args: "second run")
    assert again.parts[0].state.output == "echo {'x': 1}"  # type: ignore[union-attr]


def test_a_converted_reply_drives_the_loop(openai_server: FakeOpenAIServer) -> None:
    """The step's usage and finish reach after_step: a cut-off reply queues a compaction."""
    store = cc.MemoryStore()
    compactor = cc.Compactor(store, cc.Summarizer(), limits={"context": 50_000, "output": 4_000})
    loop = cc.CompactionLoop(compactor)
    sid = store.create_session()
    loop.add_user(sid, "go")
    openai_server.replies.extend([
        REPLY, Reply("done", input_tokens=1_000), Reply("over", input_tokens=47_000),
    ])  # fmt: skip
    sdk = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    with sdk:
        decisions = []
        for _ in range(3):
            reply = sdk.chat.completions.create(model="m", messages=loop.before_call(sid))
            message = run_tools(from_openai_chat(reply), {"read": lambda path: "x = 1"})
            decisions.append(loop.after_step(sid, message))
    assert [(d.done, d.compaction_queued) for d in decisions] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    stored = store.load(sid).messages[1]
    assert stored.parts[1].state.output == "x = 1"  # type: ignore[union-attr]
    assert compactor.metrics.snapshot()["reactive_overflows"] == 1


def test_a_tool_call_naming_no_tool_is_a_format_error() -> None:
    """Was stored as a call of tool "" (an invented id kept it), sent back on
    the next call, which the APIs refuse."""
    chat = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
        {"type": "function", "function": {"arguments": "{}"}}]},
        "finish_reason": "tool_calls"}]}  # fmt: skip
    with pytest.raises(FormatError, match="tool call 1 of the chat completion names no tool"):
        from_openai_chat(chat)
    anthropic = {"content": [{"type": "tool_use", "id": "t1", "input": {"path": "a"}}],
                 "stop_reason": "tool_use"}  # fmt: skip
    with pytest.raises(FormatError, match=r"content block 0 \(tool_use\) names no tool"):
        from_anthropic_message(anthropic)
    call = {"type": "function_call", "call_id": "c", "name": "", "arguments": "{}"}
    response = {"output": [call]}
    with pytest.raises(FormatError, match="function_call item of the response names no tool"):
        from_openai_response(response)
    # an id a server left out is still made up (local servers omit it)
    named = from_openai_chat({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "read", "arguments": "{}"}}]}}]})  # fmt: skip
    (part,) = [p for p in named.parts if p.type == "tool"]
    assert part.tool == "read" and part.callID


def test_a_custom_tool_call_is_a_tool_call_of_the_turn() -> None:
    """A Responses custom_tool_call (a freeform tool) was dropped: the loop
    stored no call, ran nothing and ended the turn. It is a tool part whose
    input is {"input": text}, run, sent back, and written back as the item."""
    from ctxcompact import formats
    from openai.types.responses import Response

    patch = "*** Begin Patch\n" + "x" * 400
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1", "name": "apply_patch",
            "input": patch, "status": "completed"}  # fmt: skip
    web = {"type": "web_search_call", "id": "ws_1", "status": "completed",
           "action": {"type": "search", "query": "patch format"}}  # fmt: skip
    response = {**RESPONSE, "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                                       web, item]}  # fmt: skip
    for given in (response, Response.model_validate(response)):
        message = from_openai_response(given)
        assert [p.type for p in message.parts] == ["reasoning", "web_search_call", "tool"]
        assert message.info.finish == "tool_calls"  # type: ignore[union-attr]
        call = message.parts[2]
        assert (call.tool, call.callID, call.state.input) == ("apply_patch", "c1",  # type: ignore[union-attr]
                                                              {"input": patch})  # fmt: skip
    store = cc.MemoryStore()
    compactor = cc.Compactor(store, cc.Summarizer(None),
                             limits={"context": 200_000, "output": 8_000})  # fmt: skip
    loop = cc.CompactionLoop(compactor)
    sid = store.create_session()
    loop.add_user(sid, "apply the patch")
    message = from_openai_response(response)
    run_tools(message, {"apply_patch": lambda input: f"applied {len(input)} chars"})
    decision = loop.after_step(sid, message)
    assert (decision.reason, decision.done) == ("ok", False)
    sent = loop.before_call(sid)
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": json.dumps({"input": patch}, separators=(",", ":")),
    }
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"applied {len(patch)} chars",
    }
    items = formats.to_openai_responses(store.load(sid))
    assert items[-3:] == [web, item, {"type": "custom_tool_call_output", "call_id": "c1",
                                      "output": f"applied {len(patch)} chars"}]  # fmt: skip
    chat = formats.to_openai_chat(store.load(sid))
    assert chat[1]["tool_calls"][0]["type"] == "function"  # no Responses keys in chat
    blocks = formats.to_anthropic(store.load(sid))["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]  # nor in Anthropic


@pytest.mark.parametrize("item", [
    {"type": "local_shell_call", "id": "ls_1", "call_id": "c2", "status": "completed",
     "action": {"type": "exec", "command": ["ls"], "env": {}}},
    {"type": "computer_call", "id": "cc_1", "call_id": "c3", "status": "completed",
     "action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": []},
    {"type": "mcp_approval_request", "id": "ap_1", "name": "t", "arguments": "{}",
     "server_label": "s"},
    {"type": "totally_new_item"},
    {"id": "no type"},
])  # fmt: skip
def test_an_item_the_loop_cannot_answer_is_a_format_error(item: dict[str, Any]) -> None:
    """Was dropped: parts [], finish "stop", the turn ended."""
    kind = item.get("type", "an item with no type")
    response = {**RESPONSE, "output": [RESPONSE["output"][1], item]}
    with pytest.raises(FormatError, match=rf"output item 1 of the response is a?n? ?{kind}") as e:
        from_openai_response(response)
    assert e.value.row == 1


def test_anthropic_server_tool_blocks_are_kept() -> None:
    """server_tool_use / web_search_tool_result / mcp_tool_use and unknown
    blocks were dropped: kept as parts of their type, written back as they were."""
    from ctxcompact import formats

    blocks = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": [{"type": "web_search_result", "url": "https://e.x", "title": "t",
                      "encrypted_content": "enc"}]},
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "look", "server_name": "s",
         "input": {}},
        {"type": "brand_new", "data": 1},
        {"type": "text", "text": "Found it."},
    ]  # fmt: skip
    reply = {"id": "m", "type": "message", "role": "assistant", "model": "claude",
             "content": blocks, "stop_reason": "end_turn",
             "usage": {"input_tokens": 3, "output_tokens": 4}}  # fmt: skip
    message = from_anthropic_message(reply, session_id="s")
    assert [p.type for p in message.parts] == [
        "server_tool_use",
        "web_search_tool_result",
        "mcp_tool_use",
        "brand_new",
        "text",
    ]
    assert message.info.finish == "end_turn"  # type: ignore[union-attr]
    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [message.to_export()]})
    assert formats.to_anthropic(session)["messages"][0]["content"] == blocks


def test_a_custom_tool_call_is_refused_by_name() -> None:
    """An OpenAI custom (freeform) tool call was refused as "names no tool"
    (it names ``apply_patch``); it cannot be sent back as the custom call the
    model made, so it is refused saying so, from a completion and a stream."""
    call = {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** x"}}
    chat = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                         "finish_reason": "tool_calls"}]}  # fmt: skip
    why = r"tool call 0 .* custom tool call \('apply_patch'\): custom tool calls are not supported"
    with pytest.raises(FormatError, match=why) as e:
        from_openai_chat(chat)
    assert e.value.column == "tool_calls"
    stream = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{**call, "index": 0}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "custom": {"input": "y"}}]},
                      "finish_reason": "tool_calls"}]},
    ]  # fmt: skip
    with pytest.raises(FormatError, match=why):
        from_openai_chat(stream)


#: Usage objects as the Chat Completions API and its proxies report them:
#: cache reads and writes in the details (OpenAI, OpenRouter), LiteLLM's
#: Anthropic-style counts, reasoning, and a reply that lacks fields.
CHAT_USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": 1030, "completion_tokens": 40,
     "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 30},
     "completion_tokens_details": {"reasoning_tokens": 12}},
    {"prompt_tokens": 1030, "completion_tokens": 40, "cache_read_input_tokens": 100,
     "cache_creation_input_tokens": 30, "prompt_tokens_details": {"cached_tokens": 7}},
    {"prompt_tokens": 5, "completion_tokens": None, "prompt_tokens_details": None},
    {"completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 9}},
    {},
]  # fmt: skip
#: A count that is no non-negative integer below 2**64, where it can be.
BAD_COUNTS = [-1, 2**64, 1.5, "12", True, [1]]
BAD_PLACES = [("prompt_tokens",), ("completion_tokens",), ("cache_creation_input_tokens",),
              ("prompt_tokens_details", "cached_tokens"),
              ("prompt_tokens_details", "cache_write_tokens"),
              ("completion_tokens_details", "reasoning_tokens")]  # fmt: skip


def _chat_reply(usage: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": "done"}
    return {"model": "gpt-x", "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip


def _stored_tokens(usage: Any, tmp_path: Any) -> list[dict[str, Any] | None]:
    """The usage as the stored-log readers keep it: the core's (a JSONL
    file) and the Python reader's (``formats.chat.from_openai_chat``)."""
    from ctxcompact.formats.chat import from_openai_chat as read_chat

    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "done", "usage": usage}]  # fmt: skip
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"id": "s", "messages": messages}) + "\n")
    out = []
    for session in (cc.formats.read(path, "openai-chat")[0], read_chat(messages, "s")):
        info = session.messages[1].info
        assert isinstance(info, AssistantMessage)
        out.append(info.tokens.model_dump() if info.tokens else None)
    return out


@pytest.mark.parametrize("usage", CHAT_USAGES)
def test_a_usage_gives_the_same_counts_live_and_stored(
    usage: dict[str, Any], tmp_path: Any
) -> None:
    """One rule (formats.usage, rust/src/ingest/usage.rs): the live reader
    kept its own, which read cache writes only from the details and
    reasoning, where the stored reader read LiteLLM's counts and no
    reasoning; the same reply gave other counts live than logged."""
    live = shape(from_openai_chat(_chat_reply(usage)))["tokens"]
    assert _stored_tokens(usage, tmp_path) == [live, live]
    response = from_openai_response({"status": "completed", "output": [], "usage": {
        "input_tokens": 1030, "output_tokens": 40,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 30},
        "output_tokens_details": {"reasoning_tokens": 12}}})  # fmt: skip
    assert shape(response)["tokens"] == OPENAI_TOKENS


def test_the_counts_of_the_one_rule() -> None:
    first, litellm, lacking, no_prompt, empty = (
        shape(from_openai_chat(_chat_reply(u)))["tokens"] for u in CHAT_USAGES)  # fmt: skip
    assert first == OPENAI_TOKENS  # cache writes from the details, reasoning
    assert litellm == OPENAI_TOKENS | {"reasoning": 0}  # LiteLLM's counts first
    assert lacking == {"input": 5, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    assert no_prompt["input"] == 0 and no_prompt["cache"]["read"] == 9  # never negative
    assert empty == {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    # a reply without usage (a stream read without include_usage) records none
    assert shape(from_openai_chat(_chat_reply(None)))["tokens"] is None


@pytest.mark.parametrize("place", BAD_PLACES, ids="-".join)
@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
def test_a_bad_count_is_the_same_format_error_live_and_stored(
    place: tuple[str, ...], bad: Any, tmp_path: Any
) -> None:
    usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": 2}
    if len(place) == 1:
        usage[place[0]] = bad
    else:
        usage[place[0]] = {place[1]: bad}
    key = ".".join(place)
    with pytest.raises(FormatError, match=rf"usage\.{key} must be a non-negative integer") as live:
        from_openai_chat(_chat_reply(usage))
    with pytest.raises(FormatError, match=rf"usage\.{key} must be a non-negative integer"):
        _stored_tokens(usage, tmp_path)
    assert type(live.value) is FormatError
