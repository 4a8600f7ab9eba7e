"""pydantic-ai agents: a history processor (``history_processors=[...]``).

    compaction = CompactionProcessor(model, context=128_000, policy="swe-agent")
    agent = Agent(model, **compaction.agent_options())

``agent_options()`` is ``history_processors=[...]`` on pydantic-ai 1.x and
``capabilities=[ProcessHistory(...)]`` on 2.x (where history processors
became a capability); the processor itself (or its async ``acall``) is the
plain history-processor function either way.

Before every model request the history is masked by the policy (old tool
returns replaced by placeholders, oversized ones cut); when even the masked
history fills the window's threshold, the older messages are summarized by
the compaction agent (a pydantic-ai model given, with no tools; no model: a
deterministic digest) and the history becomes ``[summary request, *recent]``,
a tool call never split from its return. pydantic-ai keeps what a processor
returns as the run's history, so later requests start from it: the processor
keeps the text of every return it masked (``recall``, and in the part's
``metadata["ctxcompact_original"]``, which is never sent, so a persisted
history resumes in another process with nothing lost) and puts it back
before the next round, so masking stays a function of the real history and
a summary reads what was masked (cut to ``summary_recall_tokens``). The summary
is a ``ModelRequest`` with a ``UserPromptPart`` (every system prompt part
the history starts with kept in front; the newest user prompt after it when
the recent messages do not reach it) and ``metadata["ctxcompact_summary"] = round``. ``records``,
``events``, ``metrics`` and ``hooks`` are the live lifecycle's.

Install: ``pip install 'ctxcompact[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from pydantic_ai import direct
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model

from ctxcompact.clients.base import (
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
    tools_as_text,
)
from ctxcompact.errors import InputTypeError
from ctxcompact.formats.pydantic_ai import from_chat
from ctxcompact.integrations.chatlists import Chat, Integration, SessionOptions, kept_tail
from ctxcompact.live.split import SplitResult, leading_system, summary_round
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import content_text
from ctxcompact.scans.masking import is_cleared

#: ``ToolReturnPart.metadata`` key of a masked return: its text, never sent.
ORIGINAL_KEY = "ctxcompact_original"

#: ``ModelRequest.metadata`` key of a summary request: its compaction round.
SUMMARY_KEY = "ctxcompact_summary"

#: Where a chat dict came from: (message index, part index; None for a response).
Origin = tuple[int, int | None]


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(c if isinstance(c, str) else f"[{type(c).__name__}]" for c in content)


def to_chat(messages: Sequence[ModelMessage]) -> tuple[Chat, list[Origin]]:
    """OpenAI chat dicts of a pydantic-ai history, and where each came from.

    A request gives one dict per part (system, user, tool return, retry); a
    response one assistant dict (its text and tool calls; thinking is not
    sent). A summary request is the assistant summary the split family finds.
    """
    chat: Chat = []
    origins: list[Origin] = []
    for i, m in enumerate(messages):
        if not isinstance(m, ModelRequest | ModelResponse):
            raise InputTypeError(f"history message {i} is a {type(m).__name__}, not a "
                                 "pydantic-ai ModelRequest or ModelResponse")  # fmt: skip
        if isinstance(m, ModelResponse):
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            calls = [{"id": p.tool_call_id, "type": "function",
                      "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                     for p in m.parts if isinstance(p, ToolCallPart)]  # fmt: skip
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                entry["tool_calls"] = calls
            chat.append(entry)
            origins.append((i, None))
            continue
        # In a summary request the first user prompt is the summary.
        summary = SUMMARY_KEY in (m.metadata or {})
        for j, part in enumerate(m.parts):
            if isinstance(part, SystemPromptPart):
                entry = {"role": "system", "content": part.content}
            elif isinstance(part, UserPromptPart):
                entry = {"role": "assistant" if summary else "user",
                         "content": _user_text(part.content)}  # fmt: skip
                summary = False
            elif isinstance(part, ToolReturnPart):
                entry = {"role": "tool", "tool_call_id": part.tool_call_id,
                         "content": part.model_response_str()}  # fmt: skip
            elif isinstance(part, RetryPromptPart):
                text = part.model_response()
                entry = ({"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
                         if part.tool_name else {"role": "user", "content": text})  # fmt: skip
            else:
                continue
            chat.append(entry)
            origins.append((i, j))
    return chat, origins


class PydanticAISummaryClient:
    """A pydantic-ai model as the compaction agent's model (a direct request, no tools)."""

    def __init__(self, model: Model | str) -> None:
        self.model = model

    def _messages(self, request: SummaryRequest) -> list[ModelMessage]:
        # No tools in the request: calls and results as text (Anthropic models refuse them).
        system = {"role": "system", "content": request.system}
        return from_chat([system, *tools_as_text(request.messages)])

    @staticmethod
    def _response(reply: ModelResponse) -> SummaryResponse:
        text = "".join(p.content for p in reply.parts if isinstance(p, TextPart))
        finish = "length" if reply.finish_reason == "length" else "stop"
        usage = reply.usage
        return SummaryResponse(text, finish, usage.input_tokens, usage.output_tokens)

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        # A loop of its own, closed after (model_request_sync leaves its loop
        # open in the worker thread pydantic-ai runs a sync processor in).
        reply = asyncio.run(direct.model_request(self.model, self._messages(request)))
        return self._response(reply)

    async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
        return self._response(await direct.model_request(self.model, self._messages(request)))


def _apply_view(
    messages: Sequence[ModelMessage], chat: Chat, view: Chat, origins: list[Origin]
) -> list[ModelMessage]:
    """The history with the view's changes (cleared/cut returns, cleared call
    arguments) on copies of the changed parts; unchanged messages are the same objects."""
    parts: dict[int, list[Any]] = {}
    for (i, j), before, after in zip(origins, chat, view, strict=True):
        if before == after:
            continue
        message = messages[i]
        new = parts.setdefault(i, list(message.parts))
        if j is not None and after.get("role") == "tool":
            new[j] = dataclasses.replace(new[j], content=after.get("content"))
        elif j is None and after.get("tool_calls") != before.get("tool_calls"):
            args = {c["id"]: c["function"]["arguments"] for c in after.get("tool_calls") or []}
            new[:] = [dataclasses.replace(p, args=args[p.tool_call_id])
                      if isinstance(p, ToolCallPart) and p.tool_call_id in args else p
                      for p in new]  # fmt: skip
    return [dataclasses.replace(m, parts=parts[i]) if i in parts else m  # type: ignore[arg-type]
            for i, m in enumerate(messages)]  # fmt: skip


def _tail(messages: Sequence[ModelMessage], origins: list[Origin], start: int) -> list[Any]:
    """The history from chat dict ``start`` on: the message it is in (from its
    part, for a request) and every later one."""
    if start >= len(origins):
        return []
    i, j = origins[start]
    first = messages[i]
    if j is not None and j > 0:
        first = dataclasses.replace(first, parts=list(first.parts)[j:])  # type: ignore[arg-type]
    return [first, *messages[i + 1 :]]


class CompactionProcessor(Integration):
    """ctxcompact's policy and lifecycle as a pydantic-ai history processor.

    Pass the instance (sync; pydantic-ai runs it in a worker thread) or its
    ``acall`` (async) in ``history_processors``. ``summary_model``: the
    pydantic-ai model (or model name) that writes summaries, a
    ``Summarizer`` or ``SummaryClient``, or ``None`` for the digest. The
    window: ``context`` or ``model`` (a name the limits registry knows).
    ``repair``: add interrupted-tool returns and keep orphaned returns as
    notes (reported in ``repairs``; the repaired history is rebuilt from its
    chat form) instead of raising ``OrphanedToolResultError`` /
    ``MissingToolResultError``.
    """

    def __init__(
        self,
        summary_model: Model | str | Summarizer | SummaryClient | None = None,
        **options: Unpack[SessionOptions],
    ) -> None:
        client = (PydanticAISummaryClient(summary_model)
                  if isinstance(summary_model, Model | str) else None)  # fmt: skip
        #: tool call id -> the content of its return before masking cleared it
        self._originals: dict[str, Any] = {}
        self._start(summary_model, options, client)

    def agent_options(self, *, asynchronous: bool = False) -> dict[str, Any]:
        """The ``Agent(...)`` keyword that installs this processor on the installed
        pydantic-ai: ``capabilities`` (2.x) or ``history_processors`` (1.x)."""
        processor = self.acall if asynchronous else self
        try:
            from pydantic_ai.capabilities import ProcessHistory
        except ImportError:  # pydantic-ai 1.x
            return {"history_processors": [processor]}
        return {"capabilities": [ProcessHistory(processor)]}

    def recall(self, tool_call_id: str) -> Any:
        """The content of a tool return this processor masked (``KeyError`` if none)."""
        return self._originals[tool_call_id]

    def _restored(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history with the returns masked put back (from this processor's
        memory, or from their metadata: a history resumed elsewhere)."""
        return _replacing(messages, self._masked, self._original)

    def _original(self, part: Any) -> Any:
        meta = part.metadata if isinstance(part.metadata, Mapping) else {}
        content = self._originals.get(part.tool_call_id, meta.get(ORIGINAL_KEY))
        rest = {k: v for k, v in meta.items() if k != ORIGINAL_KEY} or None
        return dataclasses.replace(part, content=content,
                                   metadata=rest if isinstance(part.metadata, Mapping)
                                   else part.metadata)  # fmt: skip

    def _masked(self, part: Any) -> bool:
        if not (isinstance(part, ToolReturnPart) and isinstance(part.content, str)
                and is_cleared(part.content)):  # fmt: skip
            return False
        kept = isinstance(part.metadata, Mapping) and ORIGINAL_KEY in part.metadata
        return part.tool_call_id in self._originals or kept

    def _keeping_originals(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Each masked return with its text in ``metadata[ORIGINAL_KEY]`` (never
        sent): the history pydantic-ai keeps, and a caller persists, can be
        resumed in another process with nothing lost."""
        return _replacing(messages, self._keeps, self._kept)

    def _keeps(self, part: Any) -> bool:
        """A masked return whose text this processor holds and can put in its metadata."""
        return (self._masked(part) and part.tool_call_id in self._originals
                and (part.metadata is None or isinstance(part.metadata, Mapping)))  # fmt: skip

    def _kept(self, part: Any) -> Any:
        meta = {**(part.metadata or {}), ORIGINAL_KEY: self._originals[part.tool_call_id]}
        return dataclasses.replace(part, metadata=meta)

    def _remember(self, messages: Sequence[ModelMessage], chat: Chat, view: Chat,
                  origins: list[Origin]) -> None:  # fmt: skip
        """Keep what the view cleared; forget returns no longer in the history."""
        live: set[str] = set()
        for (i, j), before, after in zip(origins, chat, view, strict=True):
            if j is None or after.get("role") != "tool":
                continue
            part: Any = messages[i].parts[j]
            live.add(part.tool_call_id)
            if before != after and is_cleared(content_text(after.get("content"))):
                self._originals.setdefault(part.tool_call_id, part.content)
        self._originals = {k: v for k, v in self._originals.items() if k in live}

    def _prepared(
        self, messages: list[ModelMessage]
    ) -> tuple[list[ModelMessage], Chat, list[Origin]]:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise InputTypeError(
                "the history must be a list of pydantic-ai ModelRequest / ModelResponse "
                f"messages, got {type(messages).__name__}"
            )
        messages = self._restored(list(messages))
        chat, origins = to_chat(messages)
        fixed = self.compaction.prepare(chat)
        if fixed is chat:
            return messages, chat, origins
        rebuilt = from_chat(fixed)
        return rebuilt, *to_chat(rebuilt)

    def _finish(
        self, messages: list[ModelMessage], chat: Chat, origins: list[Origin],
        result: SplitResult | None,
    ) -> list[ModelMessage]:  # fmt: skip
        if result is not None:
            assert result.record is not None
            text = next(content_text(m.get("content")) for m in result.messages
                        if summary_round(m) is not None)  # fmt: skip
            start = len(chat) - kept_tail(result)
            # every system prompt part the history starts with
            system = [messages[i].parts[j] for i, j in origins[: leading_system(chat)]
                      if j is not None]  # fmt: skip
            tail = _tail(messages, origins, start)
            lead: list[Any] = [*system, UserPromptPart(text)]
            if result.request is not None and result.request_index is not None:
                # The newest user prompt, from the head: the original part, or its cut.
                i, j = origins[result.request_index]
                lead.append(
                    messages[i].parts[j]
                    if j is not None and not result.request_cut
                    else UserPromptPart(content_text(result.request.get("content")))
                )
            if tail and isinstance(tail[0], ModelRequest):
                lead += tail.pop(0).parts
            summary = ModelRequest(parts=lead, metadata={SUMMARY_KEY: result.record.round})
            messages = [summary, *tail]
            chat, origins = to_chat(messages)
        view = self.compaction.view(chat)
        self._remember(messages, chat, view, origins)
        return self._keeping_originals(_apply_view(messages, chat, view, origins))

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        messages, chat, origins = self._prepared(messages)
        return self._finish(messages, chat, origins, self.compaction.compact(chat))

    async def acall(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        messages, chat, origins = self._prepared(messages)
        return self._finish(messages, chat, origins, await self.compaction.acompact(chat))


def _replacing(
    messages: list[ModelMessage], which: Callable[[Any], bool], new: Callable[[Any], Any]
) -> list[ModelMessage]:
    """``messages`` with each request part ``which`` picks replaced by ``new(part)``
    (a request with none of them is kept as it is)."""
    out: list[ModelMessage] = []
    for m in messages:
        if isinstance(m, ModelRequest) and any(which(p) for p in m.parts):
            parts: list[Any] = [new(p) if which(p) else p for p in m.parts]
            m = dataclasses.replace(m, parts=parts)
        out.append(m)
    return out


__all__ = [
    "SUMMARY_KEY",
    "CompactionProcessor",
    "PydanticAISummaryClient",
    "from_chat",
    "to_chat",
]
