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
the view is ``[system..., summary, request?, *kept items, *newer items]``,
masked by the policy: every system or developer message the session starts
with, the summary (sent as a user message), and the user's newest request
when the kept items do not reach back to it (a pasted log bigger than the
kept budget, or the agent's own steps after it filling that budget): the
stored message as written, or cut to its head and tail with a marker when it
is too big (the mark holds the cut text, so every read sends the same view;
the next summary repeats it again, or the newer request, never both). A
system or developer message later in the session is history. A function call is never
separated from its output, nor from the reasoning item before it (the first
kept item is moved back over reasoning items, which have no chat form and
stay in place in the view). Nothing is deleted: ``inner.get_items()`` still
holds every item. With ``repair=True`` the view is the stored items with the
repair's changes (an interrupted-tool output added after its call, an output
moved after its call, an orphaned output as a user note); without it an
unpaired call or output raises, naming its index in ``inner.get_items()``.

Install: ``pip install 'ctxcompact[openai-agents]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from agents import SQLiteSession
from agents.memory import Session

import ctxcompact._core as _core
from ctxcompact.clients.base import AsyncSummaryClient, SummaryClient
from ctxcompact.errors import (
    FormatError,
    InputTypeError,
    MissingToolResultError,
    OrphanedToolResultError,
    TranscriptError,
)
from ctxcompact.integrations.chatlists import Chat, Integration, Options, kept_tail
from ctxcompact.live.split import SplitResult, summary_round
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import content_text

#: The key of a stored summary item: {"round": N, "keep_from": index of the first kept item}.
SUMMARY_KEY = "ctxcompact"

Item = dict[str, Any]

#: A chat dict's index before the repair, carried through it (never sent).
_SOURCE = "_ctxcompact_source"


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


def _groups(items: Sequence[Mapping[str, Any]], origins: list[list[int]]) -> list[list[int]]:
    """The items that go with each chat dict: its own, and the items before it
    that have none (a reasoning item goes with the call or message it
    precedes); the last list holds the trailing items with no chat dict after them."""
    owner = [-1] * len(items)
    for c, idx in enumerate(origins):
        for i in idx:
            owner[i] = c
    groups: list[list[int]] = [[] for _ in range(len(origins) + 1)]
    nxt = len(origins)
    for i in range(len(items) - 1, -1, -1):
        if owner[i] >= 0:
            nxt = owner[i]
        groups[nxt].append(i)
    for g in groups:
        g.reverse()
    return groups


def _changed(item: Item, before: Mapping[str, Any], entry: Mapping[str, Any],
             after: Mapping[str, Any], call: int) -> Item:  # fmt: skip
    """``item``, one of the items of the chat dict ``before``, as the view
    ``after`` of the (repaired) ``entry`` has it: a cleared or cut output, a
    cleared argument, a renamed call id, an orphaned output as the repair's
    user note. ``call``: the item's place among the dict's function calls."""
    kind = _kind(item)
    if kind == "function_call_output":
        if entry["role"] != "tool":  # an orphaned output: the repair's note
            return {"role": "user", "content": content_text(after.get("content"))}
        if after == before:
            return item
        return {**item, "call_id": after["tool_call_id"], "output": after.get("content")}
    calls = after.get("tool_calls") or []
    if kind != "function_call" or calls == before.get("tool_calls") or call >= len(calls):
        return item
    new = calls[call]
    if new["id"] == item["call_id"] and new["function"]["arguments"] == item.get("arguments"):
        return item
    return {**item, "call_id": new["id"], "arguments": new["function"]["arguments"]}


def _rebuild(items: list[Item], chat: Chat, origins: list[list[int]], fixed: Chat,
             src: list[int | None], view: Chat) -> list[Item]:  # fmt: skip
    """The items the model is sent for the chat ``fixed`` (``chat`` repaired:
    entry k came from ``chat[src[k]]``, ``None`` for an output the repair
    added) and its masked ``view``: each entry's own items as the view changed
    them, with the items that have no chat dict (reasoning) kept before the
    entry they precede; an added interrupted-tool output as a new item."""
    groups = _groups(items, origins)
    out: list[Item] = []
    for entry, after, c in zip(fixed, view, src, strict=True):
        if c is None:
            out.append({"type": "function_call_output", "call_id": entry["tool_call_id"],
                        "output": content_text(after.get("content"))})  # fmt: skip
            continue
        own = set(origins[c])
        calls = 0
        for i in groups[c]:
            if i not in own:
                out.append(items[i])
                continue
            out.append(_changed(items[i], chat[c], entry, after, calls))
            calls += _kind(items[i]) == "function_call"
    out.extend(items[i] for i in groups[len(origins)])
    return out


def _apply_view(items: list[Item], chat: Chat, view: Chat, origins: list[list[int]]) -> list[Item]:
    """Copies of the items the view changed (cleared/cut outputs, cleared arguments)."""
    return _rebuild(items, chat, origins, chat, list(range(len(chat))), view)


def _heal(stored: list[Item], keep: int, end: int) -> int:
    """``keep`` moved back over the items a kept item needs: the reasoning (any
    item with no chat form) right before it, the calls right before it that a
    kept output answers. A boundary this session sets already has them; one
    stored by an older version (a call cut from its reasoning or its output)
    is healed in the view."""
    answered = {str(i.get("call_id")) for i in stored[keep:end]
                if _kind(i) == "function_call_output"}  # fmt: skip
    while keep > 0 and SUMMARY_KEY not in stored[keep - 1]:
        item = stored[keep - 1]
        needed = _kind(item) == "function_call" and str(item.get("call_id")) in answered
        if not needed and _kind(item) in ("message", "function_call", "function_call_output"):
            break
        keep -= 1
    return keep


def _sent(item: Item) -> Item:
    """A summary item as the model receives it: a user message, no ctxcompact key."""
    if SUMMARY_KEY not in item:
        return item
    return {"role": "user", "content": item["content"]}


def _index(value: Any, default: int) -> int:
    """An index a summary item's mark holds, ``default`` when it holds none."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return default
    return value


def _recut(whole: str, shown: str, cut: str) -> str:
    """``whole`` cut to the budget that cut ``shown`` (an earlier cut of it) to ``cut``."""
    for budget in range(len(cut) // 4, max(0, (len(cut) - 80) // 4), -1):
        if _core.truncate_output(shown, budget) == cut:
            return _core.truncate_output(whole, budget)
    return cut


def _request(stored: list[Item], mark: Mapping[str, Any], lead: int,
             s: int) -> tuple[int | None, Item]:  # fmt: skip
    """The request a summary item repeats: its index in ``stored`` and the item
    sent (the stored message, or a user message with the text the mark holds:
    cut to fit); ``None`` when it repeats none (or the mark is not one this
    session wrote)."""
    request = mark.get("request")
    if not isinstance(request, Mapping):
        return None, {}
    i = _index(request.get("item"), -1)
    if not lead <= i < s or SUMMARY_KEY in stored[i]:
        return None, {}
    text = request.get("content")
    if isinstance(text, str):
        return i, {"role": "user", "content": text}
    if _kind(stored[i]) != "message":
        return None, {}
    return i, stored[i]


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
        **options: Unpack[Options],
    ) -> None:
        self.session_id = session_id
        self.inner: Session = inner if inner is not None else SQLiteSession(session_id)
        self._start(summary_model, {**options, "session_id": session_id})

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
        stored = await self._stored()
        visible, where, repeat = self._visible(stored)
        chat, origins = to_chat(visible)
        fixed, src = self._prepare(visible, where, chat, origins)
        result = await self._named(self.compaction.acompact(fixed), where, origins, src)
        if result is not None:
            assert result.record is not None
            text = next(content_text(m.get("content")) for m in result.messages
                        if summary_round(m) is not None)  # fmt: skip
            new = self._mark(result, stored, visible, where, origins, src, repeat)
            summary: Item = {"role": "user", "content": text, SUMMARY_KEY: new}
            await self.inner.add_items([summary])  # type: ignore[list-item]
            stored.append(summary)
            visible, where, _ = self._visible(stored)
            chat, origins = to_chat(visible)
            fixed, src = self._prepare(visible, where, chat, origins)
        view = _rebuild(visible, chat, origins, fixed, src, self.compaction.view(fixed))
        out = [_sent(i) for i in view]
        return out if limit is None else out[-limit:] if limit > 0 else []

    @staticmethod
    def _mark(result: SplitResult, stored: list[Item], visible: list[Item], where: list[int],
              origins: list[list[int]], src: list[int | None],
              repeat: int | None) -> dict[str, Any]:  # fmt: skip
        """The new summary item's mark: its round, the first item it keeps, and
        the request it repeats (the newest user turn when the kept items do not
        reach it: its index, and its text when that is not the item as stored).
        ``repeat``: where the view repeats a request now."""
        assert result.record is not None
        start = len(src) - kept_tail(result)
        kept = [c for c in src[start:] if c is not None]  # an added output has no item
        request: dict[str, Any] | None = None
        # (the request the view repeats sits right after the summary: a tail
        # reaching it would leave no head, so it is never among the kept items)
        if result.request is not None and result.request_index is not None:
            c = src[result.request_index]
            if c is not None:
                v = origins[c][0]
                item, original = visible[v], stored[where[v]]
                request = {"item": where[v]}
                was_cut = v == repeat and content_text(item.get("content")) != content_text(
                    original.get("content")
                )
                if result.request_cut or was_cut or _kind(original) != "message":
                    # cut now or before, or an orphaned output's note: the text as sent
                    text = content_text(result.request.get("content"))
                    if result.request_cut and was_cut:
                        # cut again: cut the stored request to that size instead, so the
                        # marker counts what went of it (not of the earlier cut)
                        shown = content_text(item.get("content"))
                        text = _recut(content_text(original.get("content")), shown, text)
                    request["content"] = text
        if kept:
            # the first kept item, or the reasoning (any item with no chat dict)
            # right before it: a call is never sent without its reasoning
            first = _groups(visible, origins)[min(kept)][0]
            keep_from = where[first]
        else:
            keep_from = len(stored)
        new: dict[str, Any] = {"round": result.record.round, "keep_from": keep_from}
        if request is not None:
            new["request"] = request
        return new

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
    def _visible(stored: list[Item]) -> tuple[list[Item], list[int], int | None]:
        """The items from the newest summary on: the system and developer
        messages the session starts with, the summary, the request it repeats,
        the items it kept, the items after it; with each one's index in
        ``stored``, and where the view repeats the request (None: nowhere)."""
        lead = 0
        while (
            lead < len(stored)
            and _kind(stored[lead]) == "message"
            and (
                stored[lead].get("role") in ("system", "developer")
                and SUMMARY_KEY not in stored[lead]
            )
        ):
            lead += 1
        for s in range(len(stored) - 1, lead - 1, -1):
            mark = stored[s].get(SUMMARY_KEY)
            if isinstance(mark, Mapping):
                keep = max(lead, _heal(stored, min(_index(mark.get("keep_from"), s), s), s))
                request, item = _request(stored, mark, lead, s)
                # older summaries among the kept items were summarized into this one
                kept = [i for i in range(keep, s) if SUMMARY_KEY not in stored[i] and i != request]
                repeated = [request] if request is not None else []
                where = [*range(lead), s, *repeated, *kept, *range(s + 1, len(stored))]
                items = [stored[i] for i in where]
                if request is not None:
                    items[lead + 1] = item  # as written, or cut to fit
                return items, where, lead + 1 if request is not None else None
        return stored, list(range(len(stored))), None

    async def _stored(self) -> list[Item]:
        items = await self.inner.get_items()
        for n, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InputTypeError(
                    f"item {n} of session {self.session_id!r} is a {type(item).__name__}, "
                    "not a Responses input item (a dict)", session_id=self.session_id, row=n,
                )  # fmt: skip
        return [dict(i) for i in items]

    def _prepare(self, visible: list[Item], where: list[int], chat: Chat,
                 origins: list[list[int]]) -> tuple[Chat, list[int | None]]:  # fmt: skip
        """The chat checked (typed errors naming the session's items) or
        repaired, and for each of its dicts the index of the chat dict it came
        from (``None``: an interrupted-tool output the repair added)."""
        if not self.compaction.repair:
            self._check_pairs(visible, where)
            same: list[int | None] = list(range(len(chat)))
            checked = self._named_now(lambda: self.compaction.prepare(chat), where, origins, same)
            return checked, same
        tagged = [{**d, _SOURCE: c} for c, d in enumerate(chat)]
        before = len(self.compaction.repairs)
        repaired = self.compaction.prepare(tagged)
        # an orphaned output becomes a new user note, in the order of the report
        changes = [c for r in self.compaction.repairs[before:] for c in r.changes]
        orphans = iter([c.where for c in changes if c.kind == "orphan-result"])
        fixed: Chat = []
        src: list[int | None] = []
        for d in repaired:
            c = d.get(_SOURCE)
            if c is None and d.get("role") == "user":
                c = int(next(orphans))
            src.append(c)
            fixed.append({k: v for k, v in d.items() if k != _SOURCE})
        return fixed, src

    def _check_pairs(self, visible: list[Item], where: list[int]) -> None:
        """Raise for an output with no earlier call or a call with no later
        output, naming the session's item (its index in ``inner.get_items()``)."""
        made: set[str] = set()
        answered_after: dict[str, int] = {}
        for v, item in enumerate(visible):
            kind, cid = _kind(item), str(item.get("call_id"))
            if kind == "function_call":
                made.add(cid)
            elif kind == "function_call_output":
                if cid not in made:
                    raise OrphanedToolResultError(
                        f"item {where[v]} is the output of tool call {cid!r}, and no earlier "
                        "function_call item made that call (pass repair=True to keep it as a "
                        "note)", session_id=self.session_id, row=where[v], column="call_id",
                    )  # fmt: skip
                answered_after[cid] = v
        for v, item in enumerate(visible):
            cid = str(item.get("call_id"))
            if _kind(item) == "function_call" and answered_after.get(cid, -1) < v:
                raise MissingToolResultError(
                    f"item {where[v]} calls tool {item.get('name')!r} (call_id {cid!r}), and no "
                    "later function_call_output item holds its output (pass repair=True to add "
                    "an interrupted-tool output)", session_id=self.session_id, row=where[v],
                    column="call_id",
                )  # fmt: skip

    def _item_error(self, error: TranscriptError, where: list[int], origins: list[list[int]],
                    src: list[int | None]) -> TranscriptError:  # fmt: skip
        """``error`` (about message N of the chat) about the session's item instead."""
        row = error.row
        if row is None or not 0 <= row < len(src) or src[row] is None:
            return error
        n = where[origins[src[row]][0]]  # type: ignore[index]
        text = str(error).replace(f"message {row}", f"item {n}", 1)
        return type(error)(text, session_id=self.session_id, row=n, column=error.column)

    def _named_now(self, run: Any, where: list[int], origins: list[list[int]],
                   src: list[int | None]) -> Any:  # fmt: skip
        try:
            return run()
        except TranscriptError as e:
            raise self._item_error(e, where, origins, src) from e

    async def _named(self, run: Any, where: list[int], origins: list[list[int]],
                     src: list[int | None]) -> Any:  # fmt: skip
        try:
            return await run
        except TranscriptError as e:
            raise self._item_error(e, where, origins, src) from e


__all__ = ["SUMMARY_KEY", "CompactingSession", "to_chat"]
