"""The model input's Anthropic Messages and OpenAI Responses shapes in plain
Python (rust/src/shapes.rs): each stored message's chat render
(``reference.render_chat``, ``_core.render_chat``) re-enveloped, for the
differential test (tests/scans/test_render_shapes.py). Not used at runtime."""

from __future__ import annotations

import json
from typing import Any


def _anthropic_input(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _anthropic_block(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] != "image_url":
        return {"type": "text", "text": block["text"]}
    url = block["image_url"]["url"]
    head, sep, data = url.partition(";base64,")
    if url.startswith("data:") and sep:
        source = {"type": "base64", "media_type": head[5:], "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def to_anthropic(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One stored message's chat render in the Anthropic Messages shape
    (rust/src/shapes.rs): each message's turn, consecutive turns of one role
    merged (a step's results and text-protocol results: one user message)."""
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "system":
            out.append(m)
            continue
        if m["role"] == "assistant":
            role = "assistant"
            content: Any = [{"type": "text", "text": m["content"]}] if m["content"] else []
            content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                         "input": _anthropic_input(c["function"]["arguments"])}
                        for c in m.get("tool_calls", [])]  # fmt: skip
        elif m["role"] == "tool":
            role = "user"
            content = [{"type": "tool_result", "tool_use_id": m["tool_call_id"],
                        "content": m["content"]}]  # fmt: skip
        else:
            role = "user"
            content = m["content"]
            if isinstance(content, list):
                content = [_anthropic_block(b) for b in content]
        if not content:
            continue
        if out and out[-1]["role"] == role:
            out[-1] = {"role": role, "content": _blocks(out[-1]["content"]) + _blocks(content)}
        else:
            out.append({"role": role, "content": content})
    return out


def to_responses(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One stored message's chat render as OpenAI Responses input items
    (rust/src/shapes.rs)."""
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "assistant":
            if m["content"] is not None:
                out.append({"type": "message", "role": "assistant", "content": m["content"]})
            out += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                     "arguments": c["function"]["arguments"]}
                    for c in m.get("tool_calls", [])]  # fmt: skip
        elif m["role"] == "tool":
            out.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                        "output": m["content"]})  # fmt: skip
        else:
            content = m["content"]
            if isinstance(content, list):
                content = [{"type": "input_image", "image_url": b["image_url"]["url"],
                            "detail": "auto"} if b["type"] == "image_url"
                           else {"type": "input_text", "text": b["text"]}
                           for b in content]  # fmt: skip
            out.append({"type": "message", "role": m["role"], "content": content})
    return out
