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


def to_anthropic(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One stored message's chat render in the Anthropic Messages shape
    (rust/src/shapes.rs): a step's results gathered into one user message."""
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    step = False
    for m in chat:
        if m["role"] == "system":
            out.append(m)
        elif m["role"] == "assistant":
            step = True
            blocks = [{"type": "text", "text": m["content"]}] if m["content"] is not None else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": _anthropic_input(c["function"]["arguments"])}
                       for c in m.get("tool_calls", [])]  # fmt: skip
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            step = True
            results.append({"type": "tool_result", "tool_use_id": m["tool_call_id"],
                            "content": m["content"]})  # fmt: skip
        elif step:
            results.append({"type": "text", "text": m["content"]})
        elif isinstance(m["content"], list):
            out.append({"role": "user", "content": [_anthropic_block(b) for b in m["content"]]})
        else:
            out.append(m)
    if results:
        out.append({"role": "user", "content": results})
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
