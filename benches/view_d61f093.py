"""The Python renderer of ``to_model_messages`` as it was before issue 38
(``python/ctxcompact/scans/view.py`` at d61f093^), kept only as the
baseline the engine's render is measured against (``benches/test_live.py``).
Not part of the package; nothing else imports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import ctxcompact._core as _core
from ctxcompact.errors import InputTypeError
from ctxcompact.formats.chat import is_observed
from ctxcompact.models import AssistantMessage, MessageWithParts, Part, Session, SystemMessage

if TYPE_CHECKING:
    from ctxcompact.policy import Policy

CLEARED_TOOL_OUTPUT = _core.CLEARED_TOOL_OUTPUT  # "[Old tool result content cleared]"
INTERRUPTED_TOOL = _core.INTERRUPTED_TOOL  # "[Tool execution was interrupted]"
COMPACTION_QUESTION = _core.COMPACTION_QUESTION  # "What did we do so far?"


def tool_result_text(part: Part, policy: Policy | None = None) -> str:
    """What the model sees as the result of a tool part: its output or error
    text (cut to head and tail by ``policy.truncate_output`` unless pinned),
    a placeholder when it was cleared, the interrupted error when unfinished."""
    state = part.state
    if state is None or state.status in ("pending", "running"):
        return INTERRUPTED_TOOL
    text = (state.error if state.status == "error" else state.output) or ""
    if part.compacted:
        if policy is None or policy.placeholder == "opencode":
            return CLEARED_TOOL_OUTPUT
        return _core.cleared_placeholder(part.tool or "", _input_json(part), text, part.id)
    if policy is not None and policy.truncate_output is not None and not part.pinned:
        return _core.truncate_output(text, policy.truncate_output)
    return text


def _input_json(part: Part) -> str | None:
    """The call's arguments as the part-row table stores them (None when unset)."""
    given = part.state.input if part.state else None
    return None if given is None else json.dumps(given, ensure_ascii=False, separators=(",", ":"))


def tool_arguments(part: Part, policy: Policy | None = None) -> str:
    """A tool call's arguments as sent: compact JSON, non-ASCII kept (the ``input``
    column of the part-row table holds the same string, so the batch estimate reads it
    as stored); ``{}`` for a cleared call when ``policy.clear_inputs``."""
    if part.compacted and policy is not None and policy.clear_inputs:
        return "{}"
    return _input_json(part) or "{}"


def _user_content(message: MessageWithParts) -> str | list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if part.type == "text" and not part.ignored and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif part.type == "compaction" and not part.ignored:  # ignored: cancelled by a hook
            blocks.append({"type": "text", "text": COMPACTION_QUESTION})
        elif part.type == "file":
            if (part.mime or "").startswith("image/") and part.url:
                blocks.append({"type": "image_url", "image_url": {"url": part.url}})
            else:
                name = part.filename or part.url or "file"
                blocks.append({"type": "text", "text": f"[file: {name} ({part.mime})]"})
    if all(b["type"] == "text" for b in blocks):
        return "\n\n".join(b["text"] for b in blocks)
    return blocks


def _assistant(
    message: MessageWithParts, policy: Policy | None, thinking: bool = False
) -> list[dict[str, Any]]:
    """The model messages of one assistant message: itself (its text, its calls)
    unless it has neither, then each call's result as a ``tool`` message. A
    text-protocol step's tool part (``is_observed``: SWE-agent, mini-swe-agent)
    is sent as the agent sent it: its command is already in the text, so it
    adds no call, and its result (or placeholder) is the next user message
    (none when empty, as no empty user turn is sent)."""
    texts = [p.text for p in message.parts if p.type == "text" and not p.ignored and p.text]
    tools = [p for p in message.parts if p.type == "tool"]
    calls = [p for p in tools if not is_observed(p)]
    out: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    reasoning = [p.text for p in message.parts if p.type == "reasoning" and p.text]
    if thinking and reasoning:
        out["reasoning_content"] = "\n\n".join(reasoning)
    if calls:
        out["tool_calls"] = [
            {
                "id": p.callID or p.id,
                "type": "function",
                "function": {
                    "name": p.tool or "",
                    "arguments": tool_arguments(p, policy),
                },
            }
            for p in calls
        ]
    sent = [] if out["content"] is None and not calls else [out]
    # Every call is followed by its result, so no call is ever left without one.
    results = [
        {"role": "tool", "tool_call_id": p.callID or p.id, "content": tool_result_text(p, policy)}
        for p in calls
    ]
    # an empty observation is not sent, as no empty user turn is
    observed = [{"role": "user", "content": text} for p in tools
                if is_observed(p) and (text := tool_result_text(p, policy))]  # fmt: skip
    return [*sent, *results, *observed]


def to_model_messages(
    session: Session, *, system: str | None = None, policy: Policy | str | Any = None
) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages for ``session`` with the placeholder rules applied.

    Pass the output of ``filter_pivot`` to send only what follows the latest
    compaction. Step markers and ignored text are not sent; reasoning only
    for the newest ``policy.keep_thinking`` assistant messages (as
    ``reasoning_content``). ``policy`` (a ``Policy``, preset name, policy file
    or dict): its rendering options (placeholder, clear_inputs,
    truncate_output, keep_thinking); OpenCode's view when None.
    """
    if not isinstance(session, Session):
        raise InputTypeError(
            f"to_model_messages takes a Session, got {type(session).__name__}"
            + (" (Session.model_validate(it) first)" if isinstance(session, dict) else "")
        )
    policy = _policy(policy)
    messages: list[dict[str, Any]] = []
    if system:
        messages.append(system_message(system))
    for message, thinking in _rendered(session, policy):
        messages.extend(message_view(message, policy, thinking=thinking))
    return messages


def _policy(policy: Policy | str | Any) -> Policy | None:
    if policy is None:
        return None
    from ctxcompact.policy import Policy as _Policy

    return policy if isinstance(policy, _Policy) else _Policy.load(policy)


def system_message(system: str) -> dict[str, Any]:
    """The runtime's own system prompt as the view's first message."""
    return {"role": "system", "content": system}


def _rendered(session: Session, policy: Policy | None) -> Iterator[tuple[MessageWithParts, bool]]:
    """Each message with whether it sends its reasoning (the newest
    ``policy.keep_thinking`` assistant messages do)."""
    keep = 0 if policy is None else policy.keep_thinking
    steps = sum(isinstance(m.info, AssistantMessage) for m in session.messages)
    for message in session.messages:
        if isinstance(message.info, AssistantMessage):
            steps -= 1  # newer assistant messages than this one
            yield message, steps < keep
        else:
            yield message, False


def message_view(
    message: MessageWithParts, policy: Policy | None, *, thinking: bool = False
) -> list[dict[str, Any]]:
    """The model messages of one stored message (none, one, or an assistant
    step with its tool results): what ``to_model_messages`` sends for it."""
    if isinstance(message.info, AssistantMessage):
        return _assistant(message, policy, thinking=thinking)
    if isinstance(message.info, SystemMessage):
        text = "\n\n".join(
            p.text for p in message.parts if p.type == "text" and p.text and not p.ignored
        )
        return [{"role": "system", "content": text}] if text else []
    content = _user_content(message)
    return [{"role": "user", "content": content}] if content else []


class ViewCache:
    """Each message's model messages and their estimate, kept between calls
    on one session: valid while its stored messages only grow (a new cache
    after any other change: prune marks, a compaction, a cancelled marker).
    ``view`` gives what ``to_model_messages`` gives, and its estimate
    (``chat_tokens``), rendering and estimating only the messages it has
    not seen. The messages it returns are copies: a caller may change them."""

    def __init__(self, policy: Policy | str | Any, method: Any, overhead: int) -> None:
        self.policy = _policy(policy)
        self.method, self.overhead = method, overhead
        self._views: dict[tuple[str, bool], tuple[list[dict[str, Any]], int]] = {}

    def view(self, session: Session) -> tuple[list[dict[str, Any]], int]:
        """``to_model_messages(session, policy=...)`` and its ``chat_tokens``."""
        from ctxcompact.scans.chat import chat_tokens

        out: list[dict[str, Any]] = []
        tokens = 0
        views = self._views
        for message, thinking in _rendered(session, self.policy):
            key = (message.id, thinking)
            got = views.get(key)
            if got is None:
                shown = message_view(message, self.policy, thinking=thinking)
                got = views[key] = (shown, chat_tokens(shown, method=self.method,
                                                       overhead=self.overhead))  # fmt: skip
            out += got[0]
            tokens += got[1]
        return [_fresh(m) for m in out], tokens


def _fresh(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of a view message (its blocks and calls too: nothing shared)."""
    copied = dict(message)
    content = copied.get("content")
    if isinstance(content, list):
        copied["content"] = [_copy_block(b) for b in content]
    calls = copied.get("tool_calls")
    if calls is not None:
        copied["tool_calls"] = [{**c, "function": dict(c["function"])} for c in calls]
    return copied


def _copy_block(block: dict[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in block.items()}
