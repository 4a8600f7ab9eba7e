"""Which session format a parsed document, or a JSONL file's first record, is in.

``FORMATS`` is the core's one list of format names (``ingest::Format``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import FormatError
from ctxcompact.formats.chat import is_chat_list, looks_like_mini_swe_agent

#: Every format name, from the core's one definition (``ingest::Format``).
FORMATS: tuple[str, ...] = tuple(_core.FORMATS)


#: The Responses item types the adapter maps.
RESPONSES_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})
#: Content block types only the Responses API has (chat has text, image_url,
#: input_audio, file, refusal).
RESPONSES_BLOCKS = frozenset({"input_text", "output_text", "input_image", "input_file"})


def _responses_blocks(item: Any) -> bool:
    """A ``{role, content}`` item whose content holds a Responses-only block."""
    content = item.get("content") if isinstance(item, Mapping) else None
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") in RESPONSES_BLOCKS for b in content
    )


def detect_format(obj: Any) -> str:
    """The format of a parsed JSON document (``FormatError`` when none fits)."""
    if isinstance(obj, Mapping):
        messages = obj.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        # An OpenCode message is {info, parts}; a chat message with a role
        # beside an "info" of another tool's record is not one.
        chat = isinstance(first, Mapping) and "role" in first and "info" not in first
        if "info" in obj and "messages" in obj and not chat:
            return "opencode"
        if isinstance(obj.get("history"), list) and "instruction" not in obj:
            return "swe-agent"
        if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return "mini-swe-agent"
        if isinstance(obj.get("messages"), list):
            contents = [m.get("content") for m in obj["messages"] if isinstance(m, Mapping)]
            blocks = [
                b.get("type") for c in contents if isinstance(c, list)
                for b in c if isinstance(b, Mapping)
            ]  # fmt: skip
            anthropic_blocks = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
            if "system" in obj or anthropic_blocks & set(blocks):
                return "anthropic"
            return "openai-chat"
        if isinstance(obj.get("input"), list):  # a Responses request body
            kinds = RESPONSES_ITEMS
            if any(isinstance(i, Mapping) and (i.get("type") in kinds or "role" in i)
                   for i in obj["input"]):  # fmt: skip
                return "openai-responses"
    if isinstance(obj, list) and obj:
        first = obj[0]
        if isinstance(first, Mapping):
            if "traj" in first:
                return "tau-bench"
            if "source" in first and ("action" in first or "observation" in first):
                return "openhands"
            if "type" in first and ("uuid" in first or "sessionId" in first):
                return "claude-code"
            if any(isinstance(i, Mapping) and i.get("type") in RESPONSES_ITEMS for i in obj):
                return "openai-responses"
            if any(map(_responses_blocks, obj)):  # {role, content} items, no "type"
                return "openai-responses"
        if is_chat_list(obj):
            return "mini-swe-agent" if looks_like_mini_swe_agent(obj) else "openai-chat"
    raise FormatError("cannot tell which session format this is; pass format=")


def jsonl_format(first: Any) -> str:
    """The format of a JSONL file from its first record."""
    claude_types = {"user", "assistant", "summary", "system"}
    if (
        isinstance(first, Mapping)
        and first.get("type") in claude_types
        and ("uuid" in first or "sessionId" in first or "leafUuid" in first)
    ):
        return "claude-code"
    # Any other event in Claude Code's envelope (a "type" string, a "sessionId"
    # and a "uuid"): a hook's "progress" record, which current Claude Code may
    # write before the conversation's first line
    if (
        isinstance(first, Mapping)
        and isinstance(first.get("type"), str)
        and isinstance(first.get("sessionId"), str)
        and "uuid" in first
    ):
        return "claude-code"
    # Claude Code files may open with a file-history snapshot (no session id)
    if (
        isinstance(first, Mapping)
        and first.get("type") == "file-history-snapshot"
        and ("snapshot" in first or "messageId" in first)
    ):
        return "claude-code"
    if isinstance(first, Mapping) and "history" in first and "instruction" in first:
        return "openhands"
    if isinstance(first, Mapping) and "info" in first and "parts" in first:
        return "opencode-messages"
    return detect_format(first)
