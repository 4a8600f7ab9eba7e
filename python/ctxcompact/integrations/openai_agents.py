"""The OpenAI Agents SDK: ``CompactingSession``, a ``Session`` that compacts between turns.

    session = CompactingSession("user-42", summary_model=OpenAIChatClient("gpt-4o-mini"),
                                model="gpt-4o", policy="swe-agent")
    run_config = RunConfig(call_model_input_filter=session.model_input_filter)
    await Runner.run(agent, "next request", session=session, run_config=run_config)

The runner reads the session once per turn: ``model_input_filter`` masks the
outputs of the turn's own tool calls before each model call as well.

Items are stored whole in an inner SDK session (``agents.SQLiteSession`` in
memory by default; pass ``SQLiteSession(id, "file.db")``, an SQLAlchemy
session on PostgreSQL, any ``Session``). ``get_items``, which the runner calls
at the start of every turn, returns what the model should see: when even the
policy's masked history fills the window's threshold, the older items are
summarized (a tool-less request to ``summary_model``; no model: the
deterministic digest) and a summary item is appended to the inner session,
naming the first item it keeps (``ctxcompact`` key, never sent); from then on
the view is ``[summary, *kept items, *newer items]``, masked by the policy.
A function call is never separated from its output. Nothing is deleted:
``inner.get_items()`` still holds every item.

Install: ``pip install 'ctxcompact[openai-agents]'``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from agents import SQLiteSession
from agents.memory import Session

from ctxcompact.clients.base import AsyncSummaryClient, SummaryClient
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import FormatError, InputTypeError
from ctxcompact.integrations.chatlists import Chat, Integration, kept_tail, summarizer_for
from ctxcompact.live import events as ev
from ctxcompact.live.split import summary_round
from ctxcompact.live.summary import Summarizer
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import content_text

#: The key of a stored summary item: {"round": N, "keep_from": index of the first kept item}.
SUMMARY_KEY = "ctxcompact"

Item = dict[str, Any]


def _kind(item: Mapping[str, Any]) -> str | None:
    return item.get("type") or ("message" if "role" in item else None)


def to_chat(items: Sequence[Mapping[str, Any]]) -> tuple[Chat, list[list[int]]]:
    """OpenAI chat dicts of Responses input items, and the items each came from.

    A message item is one dict; function calls join the assistant message
    before them (or start one); a function call output is a tool result; a
    summary item is the assistant summary the split family finds. Reasoning
    and other item types are not sent as chat (they stay in place in the view).
    """
    chat: Chat = []
    origins: list[list[int]] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InputTypeError(f"item {i} is a {type(item).__name__}, not a Responses "
                                 "input item (a dict)")  # fmt: skip
        kind = _kind(item)
        if kind in ("function_call", "function_call_output") and not item.get("call_id"):
            raise FormatError(f"item {i} ({kind}) has no call_id", row=i, column="call_id")
        if kind == "message":
            role = "assistant" if SUMMARY_KEY in item else item.get("role", "user")
            chat.append({"role": role, "content": content_text(item.get("content"))})
            origins.append([i])
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item.get("name", ""),
                                 "arguments": item.get("arguments") or "{}"}}  # fmt: skip
            last = chat[-1] if chat else None
            if (
                last is not None
                and last["role"] == "assistant"
                and SUMMARY_KEY not in (items[origins[-1][0]])
            ):
                last.setdefault("tool_calls", []).append(call)
                origins[-1].append(i)
            else:
                chat.append({"role": "assistant", "content": "", "tool_calls": [call]})
                origins.append([i])
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else content_text(output)
            chat.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
            origins.append([i])
    return chat, origins


def _apply_view(items: list[Item], chat: Chat, view: Chat, origins: list[list[int]]) -> list[Item]:
    """Copies of the items the view changed (cleared/cut outputs, cleared arguments)."""
    out = list(items)
    for idx, before, after in zip(origins, chat, view, strict=True):
        if before == after:
            continue
        if after["role"] == "tool":
            out[idx[0]] = {**items[idx[0]], "output": after.get("content")}
        elif after.get("tool_calls") != before.get("tool_calls"):
            args = {c["id"]: c["function"]["arguments"] for c in after.get("tool_calls") or []}
            for i in idx:
                if _kind(items[i]) == "function_call" and items[i]["call_id"] in args:
                    out[i] = {**items[i], "arguments": args[items[i]["call_id"]]}
    return out


def _sent(item: Item) -> Item:
    """A summary item as the model receives it: a user message, no ctxcompact key."""
    if SUMMARY_KEY not in item:
        return item
    return {"role": "user", "content": item["content"]}


class CompactingSession(Integration):
    """An Agents SDK ``Session`` whose items are compacted between turns.

    ``inner``: where items live (default: an in-memory ``agents.SQLiteSession``).
    ``summary_model``: a ``SummaryClient`` (``ctxcompact.clients``: OpenAI,
    Anthropic), a ``Summarizer``, or ``None`` for the digest. The window:
    ``context`` (tokens) or ``model`` (a name the limits registry knows).
    ``repair``: add interrupted-tool outputs and keep orphaned outputs as
    notes in the view (reported in ``repairs``) instead of raising
    ``OrphanedToolResultError`` / ``MissingToolResultError``.
    """

    session_settings = None

    def __init__(
        self,
        session_id: str,
        *,
        inner: Session | None = None,
        summary_model: Summarizer | SummaryClient | AsyncSummaryClient | None = None,
        context: int | None = None,
        model: str | None = None,
        output: int | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
        config: CompactionConfig | None = None,
        repair: bool = False,
        hooks: ev.Hooks | None = None,
        events: ev.EventBus | None = None,
        metrics: ev.Metrics | None = None,
    ) -> None:
        self.session_id = session_id
        self.inner: Session = inner if inner is not None else SQLiteSession(session_id)
        self._start(
            summarizer_for(summary_model, config), context=context, model=model, output=output,
            policy=policy, config=config, session_id=session_id, repair=repair, hooks=hooks,
            events=events, metrics=metrics,
        )  # fmt: skip

    # --- the Session protocol ----------------------------------------------------

    async def add_items(self, items: list[Any]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """What the model sees, compacting first when the window needs it;
        ``limit``: only the newest that many items of it."""
        stored = [dict(i) for i in await self.inner.get_items()]
        visible, where = self._visible(stored)
        chat, origins = to_chat(visible)
        fixed = self.compaction.prepare(chat)
        result = await self.compaction.acompact(fixed)
        if result is not None:
            assert result.record is not None
            start = len(fixed) - kept_tail(result)
            text = next(content_text(m.get("content")) for m in result.messages
                        if summary_round(m) is not None)  # fmt: skip
            keep_from = where[origins[start][0]] if start < len(origins) else len(stored)
            mark = {"round": result.record.round, "keep_from": keep_from}
            summary: Item = {"role": "user", "content": text, SUMMARY_KEY: mark}
            await self.inner.add_items([summary])  # type: ignore[list-item]
            stored.append(summary)
            visible, where = self._visible(stored)
            chat, origins = to_chat(visible)
            fixed = self.compaction.prepare(chat)
        view = self._view(visible, chat, fixed, origins)
        out = [_sent(i) for i in view]
        return out if limit is None else out[-limit:] if limit > 0 else []

    def model_input_filter(self, data: Any) -> Any:
        """The policy's masking before every model call of a turn, for
        ``RunConfig(call_model_input_filter=session.model_input_filter)``.

        The runner asks ``get_items`` once, at the start of a turn; the tool
        outputs of a long turn reach the model whole unless this filter masks
        them too (a summary still happens only between turns, in
        ``get_items``). Items the chat view does not know pass unchanged."""
        from agents.run import ModelInputData

        items = list(data.model_data.input)
        dicts = [i for i in items if isinstance(i, Mapping)]
        if len(dicts) != len(items) or not items:
            return data.model_data
        chat, origins = to_chat(items)
        masked = _apply_view(items, chat, self.compaction.view(chat), origins)
        # Items go back as the dicts they came as (the SDK's input items are TypedDicts).
        return ModelInputData(input=masked, instructions=data.model_data.instructions)  # type: ignore[arg-type]

    # --- the view ---------------------------------------------------------------------

    @staticmethod
    def _visible(stored: list[Item]) -> tuple[list[Item], list[int]]:
        """The items from the newest summary on: the summary, the items it kept,
        the items after it; with each one's index in ``stored``."""
        for s in range(len(stored) - 1, -1, -1):
            mark = stored[s].get(SUMMARY_KEY)
            if isinstance(mark, Mapping):
                keep = min(int(mark.get("keep_from", s)), s)
                # older summaries among the kept items were summarized into this one
                kept = [i for i in range(keep, s) if SUMMARY_KEY not in stored[i]]
                where = [s, *kept, *range(s + 1, len(stored))]
                return [stored[i] for i in where], where
        return stored, list(range(len(stored)))

    def _view(self, visible: list[Item], chat: Chat, fixed: Chat,
              origins: list[list[int]]) -> list[Item]:  # fmt: skip
        if fixed is not chat:
            # repaired: the view is rebuilt from the repaired chat (added outputs, notes)
            return [copy.deepcopy(i) for i in _from_chat(self.compaction.view(fixed))]
        return _apply_view(visible, chat, self.compaction.view(chat), origins)


def _from_chat(chat: Chat) -> list[Item]:
    """Responses input items of chat dicts (a repaired history)."""
    out: list[Item] = []
    for d in chat:
        if d["role"] == "tool":
            out.append({"type": "function_call_output", "call_id": d["tool_call_id"],
                        "output": content_text(d.get("content"))})  # fmt: skip
            continue
        text = content_text(d.get("content"))
        if text or not d.get("tool_calls"):
            out.append({"role": d["role"], "content": text})
        for call in d.get("tool_calls") or []:
            out.append({"type": "function_call", "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"]})  # fmt: skip
    return out


__all__ = ["SUMMARY_KEY", "CompactingSession", "to_chat"]
