"""pydantic-ai message histories (``pip install 'ctxcompact[pydantic-ai]'``).

Each ``ModelRequest`` / ``ModelResponse`` becomes one canonical message
(request -> user, response -> assistant) and each of its parts one part, in
order: ``user-prompt`` / ``text`` -> text, ``system-prompt`` -> text of a
system message, ``thinking`` -> reasoning, ``tool-call`` -> a tool part;
``tool-return`` completes that tool part (error when its ``outcome`` says
the call was retried or failed, as does a ``retry-prompt`` naming the call)
and stays in place as a ``tool-result`` part.
Every part and message keeps its pydantic-ai JSON under ``source``, so the
history is rebuilt exactly (``ModelMessagesTypeAdapter``); part kinds this
version does not know are kept the same way.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact._extras import from_extra
from ctxcompact.errors import FormatError
from ctxcompact.formats.source import source_of, split_data_url
from ctxcompact.formats.views import View, to_model_chat
from ctxcompact.models import MessageWithParts, Part, Session, SessionInfo, ToolState
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import content_text


def _adapter() -> Any:
    messages = from_extra("pydantic_ai.messages", "pydantic-ai",
                          "pydantic-ai messages need pydantic-ai", FormatError)  # fmt: skip
    return messages.ModelMessagesTypeAdapter


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def from_pydantic_ai(messages: Sequence[Any], session_id: str = "session") -> Session:
    """A session from a list of pydantic-ai ``ModelMessage`` objects."""
    adapter = _adapter()
    try:
        dumped = adapter.dump_python(list(messages), mode="json")
    except Exception as e:  # pydantic's errors for objects that are not ModelMessages
        raise FormatError(f"not a list of pydantic-ai ModelMessage objects: {e}") from None
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    for i, message in enumerate(dumped):
        mid = f"{session_id}-m{i:06d}"
        kind = message.get("kind")
        rest = {k: v for k, v in message.items() if k != "parts"}
        parts: list[Part] = []
        system_only = kind == "request" and all(
            p.get("part_kind") == "system-prompt" for p in message.get("parts") or []
        ) and bool(message.get("parts"))  # fmt: skip
        for j, raw in enumerate(message.get("parts") or []):
            pid, pk = f"{mid}-p{j:02d}", raw.get("part_kind")
            if pk in ("user-prompt", "text", "system-prompt"):
                parts.append(Part(id=pid, type="text", text=_text(raw.get("content")), source=raw))
            elif pk == "thinking":
                parts.append(Part(id=pid, type="reasoning", text=raw.get("content"), source=raw))
            elif pk == "tool-call":
                args = raw.get("args")
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {}
                state = ToolState(status="pending", input=args if isinstance(args, dict) else {})
                call = Part(id=pid, type="tool", tool=raw.get("tool_name"),
                            callID=raw.get("tool_call_id"), state=state, source=raw)  # fmt: skip
                calls[str(raw.get("tool_call_id"))] = call
                parts.append(call)
            elif pk in ("tool-return", "retry-prompt"):
                done = calls.get(str(raw.get("tool_call_id")))
                if done is not None and done.state is not None:
                    body = _text(raw.get("content"))
                    if pk == "tool-return" and raw.get("outcome") in (None, "success"):
                        done.state.status, done.state.output = "completed", body
                    else:
                        done.state.status, done.state.error = "error", body
                    parts.append(Part(id=pid, type="tool-result",
                                      callID=raw.get("tool_call_id"), source=raw))  # fmt: skip
                else:
                    parts.append(Part(id=pid, type="text", text=_text(raw.get("content")),
                                      source=raw))  # fmt: skip
            else:
                parts.append(Part(id=pid, type=str(pk or "unknown"), source=raw))
        if kind == "response":
            model = message.get("model_name")
            out.append(MessageWithParts.of("assistant", mid, session_id, parts, modelID=model,
                                           source=rest))  # fmt: skip
        elif kind == "request":
            role = "system" if system_only else "user"
            out.append(MessageWithParts.of(role, mid, session_id, parts, source=rest))
        else:
            raise FormatError(f"message {i} has an unknown kind {kind!r}", row=i,
                              session_id=session_id)  # fmt: skip
    return Session(info=SessionInfo(id=session_id), messages=out)


def to_pydantic_ai(
    session: Session, *, view: View = "full", policy: Policy | None = None
) -> list[Any]:
    """The pydantic-ai ``ModelMessage`` list a session was read from; with
    ``view="model"``, what the model is sent (``formats.views``), from any session.

    The full view (the default, lossless) takes only sessions read from
    pydantic-ai: another session's message is a ``FormatError`` that names
    ``to_pydantic_ai(session, view="model")``."""
    if view != "full":
        return from_chat(to_model_chat(session, view, policy))
    adapter = _adapter()
    dumped = []
    for message in session.messages:
        source = source_of(message.info)
        if not isinstance(source, dict) or "kind" not in source:
            raise FormatError(
                f"message {message.id} did not come from pydantic-ai: the full view (the "
                "default) writes only sessions read from pydantic-ai; for pydantic-ai "
                "messages of any session use formats.to_pydantic_ai(session, view=\"model\") "
                "(what the model is sent), or formats.to_openai_chat(session) to write it "
                "whole", session_id=session.id, message_id=message.id,
            )  # fmt: skip
        parts = [source_of(p) for p in message.parts]
        dumped.append({**source, "parts": parts})
    return list(adapter.validate_python(dumped))


def from_chat(chat: Sequence[Mapping[str, Any]]) -> list[Any]:
    """pydantic-ai messages of OpenAI chat dicts (a model view, a summary request)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    names: dict[str, str] = {}
    for d in chat:
        role = d.get("role")
        if role == "assistant":
            parts: list[Any] = []
            if text := content_text(d.get("content")):
                parts.append(TextPart(text))
            for call in d.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
                arguments = call["function"].get("arguments") or "{}"
                parts.append(ToolCallPart(call["function"]["name"], arguments, call["id"]))
            out.append(ModelResponse(parts=parts))
            continue
        if role in ("system", "developer"):
            part: Any = SystemPromptPart(content_text(d.get("content")))
        elif role == "tool":
            cid = str(d.get("tool_call_id"))
            part = ToolReturnPart(names.get(cid, "tool"), content_text(d.get("content")), cid)
        else:
            part = UserPromptPart(_user_content(d.get("content")))
        if out and isinstance(out[-1], ModelRequest):
            out[-1].parts = [*out[-1].parts, part]
        else:
            out.append(ModelRequest(parts=[part]))
    return out


__all__ = ["from_chat", "from_pydantic_ai", "to_pydantic_ai"]


def _user_content(content: Any) -> Any:
    """A user message's text, or its blocks with each image as pydantic-ai's
    image (``BinaryContent`` for a data URL, else ``ImageUrl``), not as the
    text of its URL."""
    from pydantic_ai.messages import BinaryContent, ImageUrl

    if not isinstance(content, list) or not any(
        isinstance(b, Mapping) and b.get("type") == "image_url" for b in content
    ):
        return content_text(content)
    out: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "image_url":
            url = str((block.get("image_url") or {}).get("url") or "")
            image: Any = ImageUrl(url)
            inline = split_data_url(url)
            if inline is not None:
                # bad base64 goes as the URL it was, for the model API to judge
                # (pydantic-ai's from_data_uri decodes "!!" to an empty image)
                with contextlib.suppress(ValueError):
                    image = BinaryContent(base64.b64decode(inline[1], validate=True),
                                          media_type=inline[0])  # fmt: skip
            out.append(image)
        elif text := content_text([block]):
            out.append(text)
    return out
