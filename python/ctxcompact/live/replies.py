"""A model's reply as the assistant message ``CompactionLoop.after_step`` stores.

    reply = sdk.chat.completions.create(model=..., messages=messages, tools=TOOLS)
    message = from_openai_chat(reply)          # text, reasoning, tool calls, usage, finish
    run_tools(message, {"read": read_file})    # fill in the tool parts' outputs
    loop.after_step(session, message)

Each converter takes the SDK's object, a plain dict of the same shape, or a
stream: the list (or iterator) of chunks / events, or the SDK's accumulated
final object (``get_final_completion()``, ``get_final_message()``,
``get_final_response()``). Usage follows OpenCode's convention, the one the
overflow check counts (``input + cache.read + output``, plus ``cache.write``
with ``count_cache_write``): ``input`` is the prompt tokens neither read from
nor written to the cache, as Anthropic reports them, so OpenAI's totals are
split into ``input`` / ``cache.read`` / ``cache.write``; ``reasoning`` is the
part of ``output`` spent thinking. Finish reasons are the provider's own
(``"stop"``, ``"length"``, ``"tool_calls"``, ``"end_turn"``, ``"max_tokens"``,
``"tool_use"``, ...), which ``after_step`` understands; a stream that ended
without one (cut short) gets ``"incomplete"``, which ``after_step`` reports as
not done (reason ``"incomplete"``), as a Responses stream without its
terminal event. Tool calls become tool
parts in state ``pending`` until ``run_tools`` (or your code) completes them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypedDict, Unpack

from ctxcompact.errors import FormatError
from ctxcompact.formats.responses import SERVER_ITEMS
from ctxcompact.formats.usage import openai_usage
from ctxcompact.live.store import new_id
from ctxcompact.models import (
    AssistantMessage,
    MessageTime,
    MessageWithParts,
    Part,
    TokenUsage,
    ToolState,
    ToolTime,
)


def _plain(value: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON data; everything else as is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", warnings=False)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _is_stream(value: Any) -> bool:
    return (
        not isinstance(value, Mapping | str | bytes)
        and not callable(getattr(value, "model_dump", None))
        and isinstance(value, Iterable)
    )


def _mapping(value: Any, what: str) -> dict[str, Any]:
    value = _plain(value)
    if not isinstance(value, dict):
        raise FormatError(f"{what} is a {type(value).__name__}, not an object")
    return value


def _whole(
    reply: Any, from_events: Callable[[Iterable[Any]], dict[str, Any]], what: str
) -> dict[str, Any]:
    """A reply as one object: its stream's events gathered, else the reply itself."""
    return from_events(reply) if _is_stream(reply) else _mapping(reply, what)


def _items(
    data: dict[str, Any], key: str, what: str, item: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each object of the list ``data[key]`` with its index: a ``FormatError``
    when ``what`` has no such list or an ``item`` is no object."""
    items = data.get(key)
    if not isinstance(items, list):
        raise FormatError(f"{what} has no {key} list", column=key)
    for i, raw in enumerate(items):
        yield i, _mapping(raw, f"{item} {i}")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _arguments(raw: Any, call: str) -> tuple[dict[str, Any] | None, str | None]:
    """(tool input, why it could not be read) for a call's JSON arguments."""
    if isinstance(raw, Mapping):
        return dict(raw), None
    if raw is None or raw == "":
        return {}, None
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError) as e:
        return None, f"the arguments of call {call} are not valid JSON: {e}"
    if not isinstance(parsed, dict):
        return None, f"the arguments of call {call} are not a JSON object"
    return parsed, None


def _tool_part(call_id: Any, name: Any, raw_arguments: Any, where: str, **extra: Any) -> Part:
    cid = str(call_id or new_id("call"))
    if not isinstance(name, str) or not name:
        # stored, it would be sent back as a call of no tool, which the APIs refuse
        raise FormatError(f"{where} names no tool (name {name!r})", column="name")
    args, problem = _arguments(raw_arguments, cid)
    state = ToolState(status="pending", input=args)
    if problem is not None:  # kept for the record; run_tools reports it to the model
        state.metadata = {"arguments": raw_arguments, "error": problem}
    return Part(id=new_id("prt"), type="tool", tool=str(name or ""), callID=cid, state=state,
                **extra)  # fmt: skip


class MessageIds(TypedDict, total=False):
    """The keywords of every ``from_*`` reader: the session the message (and
    each part) belongs to, its id (None: a new one) and its parent's id."""

    session_id: str | None
    message_id: str | None
    parent_id: str | None


def _message(
    parts: list[Part],
    *,
    finish: str | None,
    tokens: TokenUsage | None,
    model: Any,
    provider: str,
    session_id: str | None = None,
    message_id: str | None = None,
    parent_id: str | None = None,
) -> MessageWithParts:
    mid = message_id or new_id("msg")
    now = int(time.time() * 1000)
    for part in parts:
        part.messageID = mid
        if session_id:
            part.sessionID = session_id
    info = AssistantMessage(
        id=mid,
        sessionID=session_id,
        parentID=parent_id,
        time=MessageTime(created=now, completed=now),
        finish=finish,
        tokens=tokens,
        modelID=str(model) if model else None,
        providerID=provider,
    )
    return MessageWithParts(info=info, parts=parts)


def _text_part(text: str) -> Part:
    return Part(id=new_id("prt"), type="text", text=text)


# --- OpenAI Chat Completions -----------------------------------------------------------


def _chat_from_chunks(chunks: Iterable[Any]) -> dict[str, Any]:
    """The chat completion a list of ``chat.completion.chunk`` objects adds up to."""
    content: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"usage": None}
    finish = None
    for i, raw in enumerate(chunks):
        chunk = _mapping(raw, f"chunk {i}")
        if "choices" not in chunk:
            raise FormatError(f"chunk {i} is not a chat.completion.chunk (no choices)", row=i)
        out.setdefault("id", chunk.get("id"))
        out.setdefault("model", chunk.get("model"))
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key, into in (("content", content), ("refusal", refusal)):
                if isinstance(delta.get(key), str):
                    into.append(delta[key])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    reasoning.append(delta[key])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    int(call.get("index", len(calls))),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = call.get("id") or slot["id"]
                if call.get("type") == "custom" or "custom" in call:
                    slot["type"] = "custom"  # refused by from_openai_chat, by its name
                    name = (call.get("custom") or {}).get("name")
                    slot.setdefault("custom", {}).update({"name": name} if name else {})
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if refusal:
        message["refusal"] = "".join(refusal)
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    # No finish reason: the stream was cut short (a finished one always ends with one).
    out["choices"] = [{"index": 0, "message": message, "finish_reason": finish or "incomplete"}]
    return out


def _openai_usage(usage: Any, api: Literal["chat", "responses"]) -> TokenUsage | None:
    """An OpenAI reply's ``usage`` as ``TokenUsage``, by the one rule a stored
    log's usage is read by (``formats.usage.openai_usage``, and
    rust/src/ingest/usage.rs): the same object gives the same counts live and
    stored, cache reads and writes and reasoning included, and a count that
    is no non-negative integer below 2**64 is the same ``FormatError``
    (``usage.<key> must be a non-negative integer``). What a live reply may
    legitimately lack is no error: a stream read without
    ``stream_options={"include_usage": True}`` has no usage (``None``: no
    record), and a count or details object that is absent or null is 0 (a
    provider that reports no cache or no reasoning)."""
    return openai_usage(_plain(usage), "usage", api)


def from_openai_chat(
    reply: Any,
    **ids: Unpack[MessageIds],
) -> MessageWithParts:
    """The assistant message of a Chat Completions reply (``ChatCompletion``, a
    dict, or the stream's chunks). Only the first choice is read."""
    completion = _whole(reply, _chat_from_chunks, "the reply")
    choices = completion.get("choices")
    if not choices:
        raise FormatError("the chat completion has no choices", column="choices")
    choice = _plain(choices[0])
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise FormatError("the chat completion's first choice has no message", column="message")
    parts: list[Part] = []
    thinking = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thinking, str) and thinking:
        parts.append(Part(id=new_id("prt"), type="reasoning", text=thinking))
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    if content:
        parts.append(_text_part(str(content)))
    if message.get("refusal"):
        parts.append(_text_part(str(message["refusal"])))
    for i, call in enumerate(message.get("tool_calls") or []):
        if call.get("type") == "custom" or ("custom" in call and "function" not in call):
            # its freeform input is no JSON object: sent back as a function call's
            # arguments, it would be a call of another kind than the model made
            custom = call.get("custom") if isinstance(call.get("custom"), Mapping) else {}
            raise FormatError(
                f"tool call {i} of the chat completion is a custom tool call "
                f"({custom.get('name')!r}): custom tool calls are not supported; "
                "define the tool as a function tool",
                column="tool_calls",
            )
        fn = call.get("function") or {}
        parts.append(_tool_part(call.get("id"), fn.get("name"), fn.get("arguments"),
                                f"tool call {i} of the chat completion"))  # fmt: skip
    return _message(
        parts, finish=choice.get("finish_reason"),
        tokens=_openai_usage(completion.get("usage"), "chat"), model=completion.get("model"),
        provider="openai", **ids,
    )  # fmt: skip


# --- OpenAI Responses ------------------------------------------------------------------

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _response_from_events(events: Iterable[Any]) -> dict[str, Any]:
    """The final ``Response`` of a Responses stream (its terminal event's), with
    output items from ``response.output_item.done`` when the snapshot has none."""
    response: dict[str, Any] | None = None
    items: dict[int, Any] = {}
    for i, raw in enumerate(events):
        event = _mapping(raw, f"event {i}")
        kind = event.get("type")
        if not isinstance(kind, str):
            raise FormatError(f"event {i} is not a Responses stream event (no type)", row=i)
        if isinstance(event.get("response"), Mapping):
            response = dict(event["response"])
        if kind == "response.output_item.done":
            items[int(event.get("output_index", len(items)))] = event.get("item")
    if response is None:
        raise FormatError("the Responses stream has no response event")
    if not response.get("output") and items:
        response["output"] = [items[k] for k in sorted(items)]
    if response.get("status") in (None, "in_progress", "queued"):
        response["status"] = "incomplete"  # the stream ended before a terminal event
    return response


def from_openai_response(
    response: Any,
    **ids: Unpack[MessageIds],
) -> MessageWithParts:
    """The assistant message of a Responses API ``Response`` (a dict, or the
    stream's events). ``finish``: ``"tool_calls"`` when it calls functions,
    ``"length"`` when cut at ``max_output_tokens``, the error code when it
    failed, else ``"stop"``.

    A ``custom_tool_call`` (a freeform tool) is a tool part like a
    ``function_call``, its text the input's ``input`` (``run_tools`` calls
    ``fn(input=text)``). Items the API runs itself (``SERVER_ITEMS``:
    ``web_search_call``, ``mcp_call``, ...) are kept as parts of their own
    type, not sent in the chat view. Any other item (``local_shell_call``,
    ``computer_call``, ``mcp_approval_request``, a type this version does not
    know) waits for an answer the loop cannot give: a ``FormatError`` naming
    it and its index, never a silently ended turn."""
    data = _whole(response, _response_from_events, "the response")
    parts: list[Part] = []
    for i, item in _items(data, "output", "the response", "output item"):
        kind = item.get("type")
        if kind == "message":
            for block in item.get("content") or []:
                text = block.get("text") if block.get("type") != "refusal" else block.get("refusal")
                if text:
                    parts.append(_text_part(str(text)))
        elif kind == "function_call":
            parts.append(_tool_part(item.get("call_id"), item.get("name"), item.get("arguments"),
                                    "a function_call item of the response"))  # fmt: skip
        elif kind == "custom_tool_call":  # a freeform tool: its input is one text
            text = item.get("input")
            cid = str(item.get("call_id") or new_id("call"))
            # the item is kept so formats.to_openai_responses writes it back as it was
            kept = {**{k: v for k, v in item.items() if k != "input"}, "call_id": cid}
            parts.append(_tool_part(cid, item.get("name"),
                                    {"input": "" if text is None else str(text)},
                                    f"output item {i} (custom_tool_call) of the response",
                                    source=kept))  # fmt: skip
        elif kind == "reasoning":
            summary = "\n".join(s.get("text", "") for s in item.get("summary") or [])
            keep = {"encrypted_content": item["encrypted_content"]} if item.get(
                "encrypted_content"
            ) else {}  # fmt: skip
            parts.append(Part(id=new_id("prt"), type="reasoning", text=summary, **keep))
        elif kind in SERVER_ITEMS:  # run by the API: kept as it was, nothing to run
            parts.append(Part(id=new_id("prt"), type=str(kind), source=item))
        else:
            # local_shell_call, computer_call, mcp_approval_request wait for an
            # answer the loop cannot give; an unknown item might too. Dropped,
            # the turn would end as if the model had nothing left to do.
            what = f"a {kind}" if isinstance(kind, str) else "an item with no type"
            raise FormatError(
                f"output item {i} of the response is {what}, which from_openai_response "
                "does not read (it reads message, reasoning, function_call, custom_tool_call "
                f"and the items the API runs itself: {', '.join(SERVER_ITEMS)}); handle this "
                "reply in your own code",
                row=i, column="type",
            )  # fmt: skip
    status = data.get("status")
    reason = _get(data, "incomplete_details", "reason")
    if status == "failed":
        finish = str(_get(data, "error", "code") or "error")
    elif status == "incomplete" and reason == "max_output_tokens":
        finish = "length"
    elif status == "incomplete":
        finish = str(reason or "incomplete")
    elif any(p.type == "tool" for p in parts):
        finish = "tool_calls"
    else:
        finish = "stop"
    return _message(
        parts, finish=finish, tokens=_openai_usage(data.get("usage"), "responses"),
        model=data.get("model"), provider="openai", **ids,
    )  # fmt: skip


# --- Anthropic Messages ----------------------------------------------------------------


def _anthropic_from_events(events: Iterable[Any]) -> dict[str, Any]:
    """The ``Message`` a Messages stream's events add up to."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for i, raw in enumerate(events):
        event = _mapping(raw, f"event {i}")
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event.get("message") or {})
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            index = int(event.get("index", len(blocks)))
            blocks[index] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            index = int(event.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif dtype == "input_json_delta":
                partial.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "message_delta":
            if message is None:
                raise FormatError(f"event {i}: message_delta before message_start", row=i)
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                message["stop_reason"] = delta["stop_reason"]
            for key, value in (event.get("usage") or {}).items():
                if value is not None:
                    message["usage"][key] = value
        elif kind == "error":
            raise FormatError(f"the stream reported an error: {_get(event, 'error', 'message')}")
        elif not isinstance(kind, str):
            raise FormatError(f"event {i} is not a Messages stream event (no type)", row=i)
        # ping, message_stop, content_block_stop and SDK helper events add nothing
    if message is None:
        raise FormatError("the Messages stream has no message_start event")
    for index, pieces in partial.items():
        blocks[index]["input"] = "".join(pieces)  # JSON text, read with the other calls
    message["content"] = [blocks[k] for k in sorted(blocks)]
    if not message.get("stop_reason"):  # the stream was cut short before message_delta
        message["stop_reason"] = "incomplete"
    return message


def _anthropic_usage(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, Mapping):
        return None
    return TokenUsage.model_validate(
        {
            "input": _int(usage.get("input_tokens")),
            "output": _int(usage.get("output_tokens")),
            "cache": {
                "read": _int(usage.get("cache_read_input_tokens")),
                "write": _int(usage.get("cache_creation_input_tokens")),
            },
        }
    )


def from_anthropic_message(
    message: Any,
    **ids: Unpack[MessageIds],
) -> MessageWithParts:
    """The assistant message of a Messages API reply (``Message``, a dict, or the
    stream's events). Anthropic's ``input_tokens`` already exclude the cache.

    Blocks other than text, thinking and tool_use (``server_tool_use``,
    ``web_search_tool_result``, ``mcp_tool_use``, unknown ones) are kept as
    parts of their own type (the block in ``source``), as ``formats.read``
    keeps them: ``formats.to_anthropic`` writes them back; the chat view
    (``before_call``) has no place for them. The API ran them: the stop
    reason says what is left to do."""
    data = _whole(message, _anthropic_from_events, "the message")
    parts: list[Part] = []
    for i, block in _items(data, "content", "the message", "content block"):
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            parts.append(_text_part(str(block["text"])))
        elif kind == "thinking":
            keep = {"signature": block["signature"]} if block.get("signature") else {}
            parts.append(
                Part(id=new_id("prt"), type="reasoning", text=block.get("thinking", ""), **keep)
            )
        elif kind == "redacted_thinking":  # kept so the turn can be sent back as it was
            redacted = {"redacted": block.get("data")}
            parts.append(Part(id=new_id("prt"), type="reasoning", text="", **redacted))
        elif kind == "tool_use":
            parts.append(_tool_part(block.get("id"), block.get("name"), block.get("input"),
                                    f"content block {i} (tool_use)"))  # fmt: skip
        elif kind != "text":
            # server_tool_use, web_search_tool_result, mcp_tool_use, a block this
            # version does not know: kept as it was, as formats.read keeps them
            # (formats.to_anthropic writes it back); the chat view leaves it out
            parts.append(Part(id=new_id("prt"), type=str(kind or "unknown"), source=block))
    return _message(
        parts, finish=data.get("stop_reason"), tokens=_anthropic_usage(data.get("usage")),
        model=data.get("model"), provider="anthropic", **ids,
    )  # fmt: skip


# --- running the tools -----------------------------------------------------------------

Tools = Mapping[str, Callable[..., Any]] | Callable[[str, dict[str, Any]], Any]


def run_tools(message: MessageWithParts, tools: Tools) -> MessageWithParts:
    """Run each pending tool call of ``message`` and store its result in place.

    ``tools``: a mapping from tool name to a function called with the call's
    arguments as keywords, or one function called as ``fn(name, arguments)``.
    A result that is not a string is stored as JSON. An exception, an unknown
    tool or unreadable arguments become the call's error (the model sees it
    and can react), so the loop goes on. Returns ``message``.
    """
    for part in message.parts:
        state = part.state
        if part.type != "tool" or state is None or state.status not in ("pending", "running"):
            continue
        name = part.tool or ""
        start = int(time.time() * 1000)
        output: str | None = None
        error: str | None = None
        problem = (state.metadata or {}).get("error")
        if problem:
            error = str(problem)
        elif isinstance(tools, Mapping) and name not in tools:
            error = f"unknown tool {name!r}"
        else:
            try:
                if isinstance(tools, Mapping):
                    result = tools[name](**(state.input or {}))
                else:
                    result = tools(name, dict(state.input or {}))
                output = result if isinstance(result, str) else json.dumps(result, default=str)
            except Exception as e:  # the tool's failure is the model's to handle
                error = f"{type(e).__name__}: {e}"
        part.state = ToolState(
            status="error" if error is not None else "completed",
            input=state.input or {},
            output=output,
            error=error,
            metadata=state.metadata,
            time=ToolTime(start=start, end=int(time.time() * 1000)),
        )
    return message


__all__ = ["from_anthropic_message", "from_openai_chat", "from_openai_response", "run_tools"]
