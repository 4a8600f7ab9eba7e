"""LangChain v1 agents: ``CompactionMiddleware`` for ``create_agent``.

    agent = create_agent(model, tools, middleware=[
        CompactionMiddleware(model, context=128_000, policy="swe-agent"),
    ])

Before every model call (``wrap_model_call``) the model is sent the policy's
view of the history: old tool outputs cleared to placeholders, oversized
ones cut; the agent's state keeps every output whole. When even that view
fills the window's threshold (``before_model``), the older messages are
summarized by the compaction agent (the chat model given, with no tools; no
model: a deterministic digest) and the state becomes ``[system messages...,
summary, request?, *recent]``, tool calls never split from their results:
every ``SystemMessage`` the state starts with stays, and the newest
``HumanMessage`` is repeated after the summary (cut to its head and tail when
too big) when the recent messages do not reach it. The summary is a ``HumanMessage``
(any provider accepts one first) marked ``additional_kwargs["ctxcompact_summary"]
= round``; the next round integrates it. ``records``, ``events``, ``metrics``
and ``hooks`` are the live lifecycle's.

Install: ``pip install 'ctxcompact[langchain]'``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Unpack

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ctxcompact.clients.base import (
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
    tools_as_text,
)
from ctxcompact.errors import FormatError, InputTypeError
from ctxcompact.integrations.chatlists import Chat, Integration, SessionOptions, kept_tail
from ctxcompact.live.split import SplitResult, leading_system, summary_round
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import content_text

#: ``additional_kwargs`` key of a summary message: its compaction round.
SUMMARY_KEY = "ctxcompact_summary"


class LangChainSummaryClient:
    """A LangChain chat model as the compaction agent's model (no tools bound)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    def _messages(self, request: SummaryRequest) -> list[BaseMessage]:
        # No tools in the request: calls and results as text (Anthropic models refuse them).
        return [
            SystemMessage(request.system),
            *convert_to_messages(tools_as_text(request.messages)),
        ]

    @staticmethod
    def _response(reply: BaseMessage) -> SummaryResponse:
        meta = reply.response_metadata or {}
        reason = str(meta.get("finish_reason") or meta.get("stop_reason") or "stop")
        usage = getattr(reply, "usage_metadata", None) or {}
        return SummaryResponse(
            content_text(reply.content),
            "length" if reason in ("length", "max_tokens") else reason,
            usage.get("input_tokens"),
            usage.get("output_tokens"),
        )

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return self._response(self.model.invoke(self._messages(request)))

    async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
        return self._response(await self.model.ainvoke(self._messages(request)))


def _result_blocks(message: BaseMessage) -> bool:
    """The message's content is Anthropic blocks holding a ``tool_result``."""
    content = message.content
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )


def to_chat(messages: Sequence[BaseMessage]) -> Chat:
    """OpenAI chat dicts of LangChain messages (LangChain's own conversion),
    each with its message id; a summary message is the assistant summary the
    split family finds by its heading. A message holding Anthropic
    ``tool_result`` blocks that LangChain splits into several tool messages
    stays one user turn of its blocks (it was refused): the core reads them
    as the ``anthropic`` format does, and its results are masked in place."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InputTypeError(f"the state's messages must be a list of LangChain messages, got "
                             f"{type(messages).__name__}")  # fmt: skip
    for i, m in enumerate(messages):
        if not isinstance(m, BaseMessage):
            raise InputTypeError(f"message {i} is a {type(m).__name__}, not a LangChain message")
    blocks = {i for i, m in enumerate(messages)
              if _result_blocks(m) and len(convert_to_openai_messages([m])) != 1}  # fmt: skip
    rest = convert_to_openai_messages([m for i, m in enumerate(messages) if i not in blocks])
    if len(rest) != len(messages) - len(blocks):
        # each dict must match the message it came from
        one = next((i for i, m in enumerate(messages)
                    if i not in blocks and len(convert_to_openai_messages([m])) != 1),
                   None)  # fmt: skip
        raise FormatError(f"message {one} is not one OpenAI message", row=one)
    converted = iter(rest)
    chat = [{"role": "user", "content": list(m.content)} if i in blocks else next(converted)
            for i, m in enumerate(messages)]  # fmt: skip
    out = []
    for m, c in zip(messages, chat, strict=True):
        c = {**c, "id": m.id} if m.id else dict(c)
        if SUMMARY_KEY in (m.additional_kwargs or {}):
            c = {"role": "assistant", "content": content_text(m.content), "id": m.id}
        out.append(c)
    return out


def _from_chat(chat: Chat, before: Chat, originals: Sequence[BaseMessage]) -> list[BaseMessage]:
    """LangChain messages for the repaired ``chat`` (``before``: the dicts the
    ``originals`` were converted to): the original message wherever the dict
    came from one (its id), as the repair changed it (a renamed call id, an
    orphaned result kept as a note), LangChain's conversion for a dict the
    repair added."""
    by_id = {m.id: (m, b) for m, b in zip(originals, before, strict=True) if m.id}
    out: list[BaseMessage] = []
    for d in chat:
        found = by_id.get(str(d.get("id")))
        if found is not None:
            out.append(_viewed(found[0], found[1], d))
        else:
            clean = {k: v for k, v in d.items() if k != "id"}
            out.append(convert_to_messages([clean])[0])
    return out


def _calls(message: AIMessage, before: Sequence[Any], after: Sequence[Any]) -> list[Any]:
    """``message``'s tool calls as ``after`` (its dict's calls, ``before`` as
    converted) has them: a renamed id, cleared arguments; by position."""
    out = []
    for k, c in enumerate(message.tool_calls):
        if k >= len(after) or k >= len(before) or after[k] == before[k]:
            out.append(c)
            continue
        new = after[k]
        out.append({**c, "id": new["id"], "args": json.loads(new["function"]["arguments"] or "{}")})
    return out


def _viewed(message: BaseMessage, before: Mapping[str, Any], after: Mapping[str, Any]) -> Any:
    """``message`` as the policy's view or the repair shows it (a copy; the
    state keeps the original until a repair is written back)."""
    if before == after:
        return message
    if isinstance(message, ToolMessage):
        return message.model_copy(update={"content": after.get("content"),
                                          "tool_call_id": after.get("tool_call_id")})  # fmt: skip
    if isinstance(message, AIMessage) and after.get("tool_calls") != before.get("tool_calls"):
        calls = _calls(message, before.get("tool_calls") or [], after.get("tool_calls") or [])
        renamed = {
            c["id"]: n["id"] for c, n in zip(message.tool_calls, calls) if c["id"] != n["id"]
        }
        content = message.content
        if renamed and isinstance(content, list):  # its Anthropic tool_use blocks too
            content = [{**b, "id": renamed[b["id"]]}
                       if isinstance(b, Mapping) and b.get("type") == "tool_use"
                       and b.get("id") in renamed else b for b in content]  # fmt: skip
        return message.model_copy(update={"tool_calls": calls, "content": content})
    if _result_blocks(message):  # its tool_result blocks, cleared, cut or renamed in place
        if before.get("role") == "tool":  # its one block, read as a tool message
            content = [{**b, "content": after.get("content"), "tool_use_id": after.get(
                "tool_call_id")} if isinstance(b, Mapping) and b.get("type") == "tool_result"
                else b for b in message.content]  # fmt: skip
            return message.model_copy(update={"content": content})
        return message.model_copy(update={"content": after.get("content")})
    return message


class CompactionMiddleware(Integration, AgentMiddleware):
    """ctxcompact's policy and lifecycle on a LangChain agent's messages.

    ``summary_model``: the chat model that writes summaries (pass the agent's
    own model to use it), a ``Summarizer`` or ``SummaryClient``, or ``None``
    for the deterministic digest. The window: ``context`` (tokens) or
    ``model`` (a name the limits registry knows). ``policy``: a preset name,
    file, dict or ``Policy`` (default: the config's). ``repair``: add
    interrupted-tool results and keep orphaned results as notes (reported in
    ``repairs``) instead of raising ``OrphanedToolResultError`` /
    ``MissingToolResultError``.
    """

    def __init__(
        self,
        summary_model: BaseChatModel | Summarizer | SummaryClient | None = None,
        **options: Unpack[SessionOptions],
    ) -> None:
        super().__init__()
        client = (LangChainSummaryClient(summary_model)
                  if isinstance(summary_model, BaseChatModel) else None)  # fmt: skip
        self._start(summary_model, options, client)

    @property
    def name(self) -> str:
        return "ctxcompact"

    # --- the summary: before the model node, on the state ------------------------

    def _prepared(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], Chat, bool]:
        chat = to_chat(messages)
        fixed = self.compaction.prepare(chat)
        if fixed is chat:
            return list(messages), chat, False
        return _from_chat(fixed, chat, messages), fixed, True

    def _update(
        self, lc: list[BaseMessage], chat: Chat, result: SplitResult | None, repaired: bool
    ) -> dict[str, Any] | None:
        if result is None:
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *lc]} if repaired else None
        assert result.record is not None
        text = next(content_text(m.get("content")) for m in result.messages
                    if summary_round(m) is not None)  # fmt: skip
        summary = HumanMessage(text, id=f"ctxcompact-summary-{uuid.uuid4().hex}",
                               additional_kwargs={SUMMARY_KEY: result.record.round})  # fmt: skip
        tail = lc[len(lc) - kept_tail(result) :]
        system = lc[: leading_system(chat)]  # every system message the state starts with
        request: list[BaseMessage] = []
        if result.request is not None and result.request_index is not None:
            # The newest human turn, from the head: the original, or its cut.
            original = lc[result.request_index]
            request = [original if not result.request_cut else HumanMessage(
                content_text(result.request.get("content")),
                id=f"ctxcompact-request-{uuid.uuid4().hex}",
            )]  # fmt: skip
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *system, summary, *request,
                             *tail]}  # fmt: skip

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        lc, chat, repaired = self._prepared(state["messages"])
        return self._update(lc, chat, self.compaction.compact(chat), repaired)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        lc, chat, repaired = self._prepared(state["messages"])
        return self._update(lc, chat, await self.compaction.acompact(chat), repaired)

    # --- the masking: what each model call is sent -------------------------------

    def _request(self, request: ModelRequest) -> ModelRequest:
        lc, chat, _ = self._prepared(request.messages)
        view = self.compaction.view(chat)
        shown: list[AnyMessage] = [_viewed(m, b, a) for m, b, a in zip(lc, chat, view, strict=True)]
        return request.override(messages=shown)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(self._request(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self._request(request))


__all__ = ["SUMMARY_KEY", "CompactionMiddleware", "LangChainSummaryClient", "to_chat"]
