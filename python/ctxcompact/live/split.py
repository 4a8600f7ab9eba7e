"""The split-point family (seeds 001 and 004): summarize the head, keep a recent tail.

Over an OpenAI chat-format list ``[system..., previous summary?, ...]``:
choose a boundary that keeps the newest messages (by a token budget, 40% of
the usable window by default, or by count, 10 by default) without ever
separating an assistant tool call from its results; summarize everything
between the system prompt (every system or developer message the list starts
with) and the boundary; return ``[system..., summary, request?, *tail]``.
``request`` is the newest user turn when the boundary fell after it (the
tail holds only the steps answering it, or nothing): it is repeated after the
summary, cut to its head and tail when it is too big (a cut copy an earlier
round repeated is cut as its original would be: one marker, counting all
that went), so the list still ends with what the caller asked and never has
the summary followed by the agent's own step. A system or developer message
later in the list is history: kept in place in the tail, summarized in the
head. A summary produced here is a plain assistant message (no extra keys,
so any chat API accepts it) whose content starts with
``## Session Summary (Compaction Round N)``; the next round finds it, passes
it to the summarizer as the previous summary (integrated, not duplicated),
and counts on from N.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ctxcompact._core as _core
import ctxcompact.live.events as ev
import ctxcompact.live.flow as flow
import ctxcompact.live.twins as twins
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.live.prompts import SUMMARY_HEADING
from ctxcompact.live.summary import Summarizer, SummaryOutcome
from ctxcompact.scans.chat import (
    content_text,
    tool_blocks_as_chat,
    validate_chat_messages,
)
from ctxcompact.scans.chatrows import chat_counts
from ctxcompact.scans.estimate import EstimateMethod
from ctxcompact.scans.masking import mask_chat_messages
from ctxcompact.scans.overflow import Limits, TokenBudget, check_window

Message = Mapping[str, Any]
_ROUND = re.compile(rf"^{re.escape(SUMMARY_HEADING)}(?: \(Compaction Round (\d+)\))?")
#: The marker ``truncate_output`` puts where it cut (the core's ``render::marker``).
_CUT = re.compile(r"\n\n\[\.\.\. (\d+) characters cut \.\.\.\]\n\n")


@dataclass(frozen=True)
class Split:
    """Where a message list divides. ``head`` is summarized, ``tail`` kept verbatim."""

    #: The first of ``systems`` (None: the list does not start with one).
    system: Message | None
    previous_summary: str | None
    previous_round: int
    head: list[Message]
    tail: list[Message]
    #: Index of the first head message and of the first tail message in the input.
    head_start: int
    boundary: int
    #: Every system or developer message the list starts with: kept in front.
    systems: list[Message] = field(default_factory=list)
    #: Index of the newest user turn when it is in the head (the tail holds
    #: no user turn): the result repeats it after the summary.
    request: int | None = None


def summary_round(message: Message) -> int | None:
    """The round of a summary message (0: a summary without a round; None: not one)."""
    if message.get("role") != "assistant":
        return None
    match = _ROUND.match(content_text(message.get("content")))
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


def _blocks(message: Message, kind: str) -> list[Mapping[str, Any]]:
    """The Anthropic content blocks of ``kind`` (``tool_use``, ``tool_result``) in ``message``."""
    content = message.get("content")
    if content is None or type(content) is str:  # the common cases, without the ABC checks
        return []
    if type(content) is not list and (
        isinstance(content, str) or not isinstance(content, Sequence)
    ):
        return []
    return [b for b in content
            if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == kind]  # fmt: skip


def _result_ids(message: Message) -> set[str]:
    """The calls ``message`` answers: a tool message's, a turn's ``tool_result`` blocks'."""
    content = message.get("content")
    if content is None or type(content) is str:  # no blocks (most messages)
        ids: set[str] = set()
    else:
        ids = {str(b.get("tool_use_id")) for b in _blocks(message, "tool_result")}
    if message.get("role") == "tool":
        ids.add(str(message.get("tool_call_id")))
    return ids


def _call_ids(message: Message) -> set[str]:
    """The calls ``message`` makes: its ``tool_calls``, its ``tool_use`` blocks."""
    ids = {str(b.get("id")) for b in _blocks(message, "tool_use")}
    return ids | {str(c.get("id")) for c in (message.get("tool_calls") or [])}


def _adjust(
    messages: Sequence[Message], boundary: int, floor: int, results: Sequence[set[str]]
) -> int:
    """Move the boundary back until no tool call in the head has a result in
    the tail (``results``: each message's ``_result_ids`` from ``floor``)."""
    head: dict[str, int] = {}  # the head's call ids, how many messages make each
    for m in messages[floor:boundary]:
        for cid in _call_ids(m):
            head[cid] = head.get(cid, 0) + 1
    tail = set().union(*results[boundary - floor :])
    while boundary > floor:
        # a result must stay with its call
        if not results[boundary - floor] and not any(cid in head for cid in tail):
            break
        boundary -= 1  # that message joins the tail
        tail |= results[boundary - floor]
        for cid in _call_ids(messages[boundary]):
            if head[cid] == 1:
                del head[cid]
            else:
                head[cid] -= 1
    return boundary


def select_split(
    messages: Sequence[Message],
    *,
    keep_policy: str = "tokens",
    keep_tokens: int | None = None,
    keep_messages: int = 10,
    method: EstimateMethod = "opencode",
    overhead: int = 4,
    counts: Sequence[int] | None = None,
) -> Split:
    """Divide ``messages`` into system, previous summary, head and tail.

    ``counts``: each message's estimate (``chat_counts``, the engine's);
    ``None``: counted here with ``method`` and ``overhead``."""
    if counts is None:
        counts = chat_counts(messages, method=method, overhead=overhead)
    if len(counts) != len(messages):
        raise ConfigError(f"{len(counts)} counts given for {len(messages)} messages",
                          column="counts")  # fmt: skip
    start = lead = leading_system(messages)
    system = messages[0] if lead else None
    previous, previous_round = None, 0
    if len(messages) > start and (r := summary_round(messages[start])) is not None:
        previous, previous_round = content_text(messages[start].get("content")), r
        start += 1
    if keep_policy == "messages":
        boundary = max(start, len(messages) - keep_messages)
    elif keep_policy == "tokens":
        if keep_tokens is None:
            raise ConfigError("keep_policy='tokens' needs keep_tokens", column="keep_tokens")
        boundary, used = len(messages), 0
        while boundary > start:
            cost = counts[boundary - 1]
            if used + cost > keep_tokens:
                break
            used += cost
            boundary -= 1
    else:
        raise ConfigError(
            f"unknown keep_policy {keep_policy!r}: 'messages' or 'tokens'", column="keep_policy"
        )
    results = [_result_ids(m) for m in messages[start:]]
    if boundary < len(messages):
        boundary = _adjust(messages, boundary, start, results)
    # the newest user turn, if in the head (a user turn of Anthropic tool
    # results answers the agent: no request)
    users = (i for i in range(len(messages) - 1, start - 1, -1)
             if messages[i].get("role") == "user" and not results[i - start])  # fmt: skip
    user = next(users, None)
    request = user if user is not None and user < boundary else None
    return Split(system, previous, previous_round, list(messages[start:boundary]),
                 list(messages[boundary:]), start, boundary, list(messages[:lead]),
                 request)  # fmt: skip


def leading_system(messages: Sequence[Message]) -> int:
    """How many system or developer messages ``messages`` starts with (the
    system prompt: every split keeps them in front, unsummarized)."""
    n = 0
    while n < len(messages) and messages[n].get("role") in ("system", "developer"):
        n += 1
    return n


def keep_tokens_for(config: CompactionConfig, context: int, output: int = 0) -> int:
    """The tail budget: ``keep_ratio`` of the usable window."""
    usable = Limits(context=context, output=output).usable(config) or 0
    return int(max(0, usable - config.system_reserve - config.safety_buffer) * config.keep_ratio)


def should_compact(
    messages: Sequence[Message], *, context: int, config: CompactionConfig | None = None,
    output: int = 0, counts: Sequence[int] | None = None,
) -> bool:  # fmt: skip
    """Proactive check: the history fills ``proactive_threshold`` of the usable window.

    ``counts``: each message's estimate (``chat_counts``; ``None``: counted
    here). A window the output reserve leaves no input room in is a
    ``ConfigError`` (``check_window``), as the ``Compactor`` refuses it."""
    cfg = config or CompactionConfig()
    if context:
        check_window(Limits.coerce({"context": context, "output": output}), cfg)
    if counts is None:
        counts = chat_counts(messages, method=cfg.estimate_method, overhead=cfg.message_overhead)
    # What a split can remove: everything after the leading system messages.
    lead = leading_system(messages)
    budget = TokenBudget.for_limits(
        Limits(context=context, output=output),
        history_tokens=sum(counts[lead:]), system_tokens=sum(counts[:lead]), config=cfg,
    )  # fmt: skip
    return budget is not None and budget.should_compact


@dataclass(frozen=True)
class SplitResult:
    messages: list[dict[str, Any]]
    #: None when nothing was compacted (too short, or a hook cancelled).
    record: ev.CompactionRecord | None
    outcome: SummaryOutcome | None = None
    #: The newest user turn repeated after the summary (``[system..., summary,
    #: request, *tail]``), None when the tail holds it; ``request_index`` is
    #: its index in the input, ``request_cut`` whether it was cut to fit.
    request: dict[str, Any] | None = None
    request_index: int | None = None
    request_cut: bool = False


class _Run:
    """Shared steps of the sync and async paths."""

    def __init__(self, messages: Sequence[Message], config: CompactionConfig, *, context: int,
                 output: int, trigger: ev.Trigger, reason: str, session_id: str,
                 instructions: str | None) -> None:  # fmt: skip
        self.config = config
        self.keep_tokens = keep_tokens_for(config, context, output)
        self.session_id = session_id
        self.trigger: ev.Trigger = trigger
        self.reason = reason
        self.instructions = instructions
        originals = messages
        #: What the model is sent of the input (with mask_first: the policy's
        #: masked list), each message's count (the engine's), their sum (the
        #: record's and the hook's ``tokens_before``) and the input's own size
        #: before masking.
        messages, self.counts, self.unmasked_tokens_before = self.sent(messages)
        self.tokens_before = sum(self.counts)
        #: With mask_first: whether the masked list fits without a summary.
        self.masked_enough = messages is not originals and not should_compact(
            messages, context=context, config=config, output=output, counts=self.counts
        )
        self.messages = messages
        self.split = select_split(
            messages, keep_policy=config.keep_policy,
            keep_tokens=self.keep_tokens,
            keep_messages=config.keep_messages, counts=self.counts,
        )  # fmt: skip
        #: What the summarizer reads: the head as it was before masking (outputs
        #: cut to summary_recall_tokens), so the summary integrates what was masked.
        #: Anthropic tool blocks as chat tool calls and results (what it reads).
        self.head = tool_blocks_as_chat(self.split.head)
        self.originals = originals
        if originals is not messages:
            head = originals[self.split.head_start : self.split.boundary]
            self.head = [_cut_result(m, config.summary_recall_tokens) for m in head]

    def sent(self, messages: Sequence[Message]) -> tuple[Sequence[Message], list[int], int]:
        """What the model is sent of ``messages``: with ``mask_first`` the
        policy's masking (as the integrations mask every call), else the list;
        each of its messages' counts, and the size of ``messages`` before
        masking. Both sizes a record gives are of this."""
        cfg = self.config
        if cfg.masks_at() != "call":
            counts = self._counts(messages)
            return messages, counts, sum(counts)
        mask = mask_chat_messages(messages, cfg.policy, method=cfg.estimate_method,
                                  overhead=cfg.message_overhead)  # fmt: skip
        return mask.messages, mask.counts_after, mask.tokens_before

    def _counts(self, messages: Sequence[Message]) -> list[int]:
        cfg = self.config
        return chat_counts(messages, method=cfg.estimate_method, overhead=cfg.message_overhead)

    def event(self) -> ev.PreCompactEvent:
        return ev.PreCompactEvent(self.session_id, self.trigger, self.reason, self.tokens_before,
                                  self.instructions)  # fmt: skip

    def finish(self, outcome: SummaryOutcome, round: int) -> SplitResult:
        split = self.split
        heading = f"{SUMMARY_HEADING} (Compaction Round {round})"
        text = outcome.text.strip()
        if summary_round({"role": "assistant", "content": text}) != round:
            text = f"{heading}\n\n{text}"  # the heading is how the next round finds it
        summary: dict[str, Any] = {"role": "assistant", "content": text}
        request, cut = self._request()
        lead = [*split.systems, summary, *([request] if request else [])]
        # the new list (the tail as the input held it) as the next call is sent
        # it: measured as tokens_before was (an integration keeps the tail whole
        # and masks every call; the policy masks the new list as it does here)
        sent, counts, _ = self.sent([*lead, *self.originals[split.boundary :]])
        out = [dict(m) for m in sent]
        record = ev.CompactionRecord(
            session_id=self.session_id, family="split", trigger=self.trigger, reason=self.reason,
            round=round, tokens_before=self.tokens_before, tokens_after=sum(counts),
            unmasked_tokens_before=self.unmasked_tokens_before,
            summary_source=outcome.source,
            summarized_message_ids=tuple(str(m["id"]) for m in split.head if "id" in m),
            kept_message_ids=tuple(str(m["id"]) for m in split.tail if "id" in m),
            created_ms=int(time.time() * 1000), error=outcome.error,
        )  # fmt: skip
        return SplitResult(out, record, outcome, request, split.request if request else None, cut)

    def _request(self) -> tuple[dict[str, Any] | None, bool]:
        """The newest user turn when the head holds it, to repeat after the
        summary; cut to its head and tail (the ``truncate_output`` marker
        says how much went) past what the tail leaves of its budget (at
        least a quarter of it). Returns the message and whether it was cut."""
        index = self.split.request
        if index is None:
            return None, False
        message = dict(self.originals[index])
        left = self.keep_tokens - sum(self.counts[self.split.boundary :])
        budget = max(left, self.keep_tokens // 4, 64)
        if sum(self._counts([message])) <= budget:
            return message, False
        text = content_text(message.get("content"))
        if index == self.split.head_start and self.split.previous_summary is not None:
            # right after the previous summary: the request an earlier round
            # repeated, maybe cut then (the original is gone from the list)
            return {**message, "content": recut(text, budget)}, True
        return {**message, "content": _core.truncate_output(text, budget)}, True


def recut(text: str, budget: int) -> str:
    """``text`` cut as ``truncate_output(text, budget)`` cuts it, unless it is
    itself such a cut (its head and tail of equal length around one marker: a
    request an earlier round repeated cut): then as the text it was cut from
    would be cut, so there is one marker, counting every character gone; a
    budget that keeps as much as the earlier cut or more keeps it as it is."""
    found = list(_CUT.finditer(text))
    if len(found) == 1:
        at = found[0]
        head, tail = text[: at.start()], text[at.end() :]
        if len(head) == len(tail):  # truncate_output keeps 2 x budget characters each side
            keep = 2 * budget
            if keep >= len(head):
                return text
            gone = int(at.group(1)) + 2 * (len(head) - keep)
            return f"{head[:keep]}\n\n[... {gone} characters cut ...]\n\n{tail[len(tail) - keep :]}"
    return _core.truncate_output(text, budget)


def _cut_result(message: Message, budget: int) -> Message:
    """A tool result cut to about ``budget`` tokens (head and tail)."""
    if message.get("role") != "tool":
        return message
    text = content_text(message.get("content"))
    cut = _core.truncate_output(text, budget)
    return message if cut == text else {**message, "content": cut}


def _emit_done(result: SplitResult, events: ev.EventBus | None, metrics: ev.Metrics | None) -> None:
    record = result.record
    assert record is not None
    if metrics is not None:
        metrics.record_compaction(record)
    if events is not None:
        if record.error is not None:  # a failed call, not a digest chosen
            events.emit(ev.COMPACTION_FALLBACK, session_id=record.session_id,
                        source=record.summary_source, error=record.error)  # fmt: skip
        events.emit(ev.COMPACTED, session_id=record.session_id, record=record)


def _compact_flow(
    messages: Sequence[Message],
    summarizer: Summarizer,
    *,
    context: int,
    output: int = 0,
    config: CompactionConfig | None = None,
    trigger: ev.Trigger = "auto",
    reason: str = "proactive",
    session_id: str = "",
    hooks: ev.Hooks | None = None,
    events: ev.EventBus | None = None,
    metrics: ev.Metrics | None = None,
    instructions: str | None = None,
) -> flow.Flow[SplitResult]:
    """Summarize the head of ``messages``; returns ``[system..., summary, request?, *tail]``.

    ``context`` / ``output``: the model's window and output limit (the tail
    budget is ``config.keep_ratio`` of what is usable; a context of 0 is
    unlimited, as in ``is_overflow``: nothing is compacted; a window the output
    reserve leaves no input room in is a ``ConfigError``, as the ``Compactor``
    refuses it). Nothing to compact, or
    a cancelling pre-compact hook, returns the messages unchanged with
    ``record=None``. With ``config.mask_first`` the policy's masking
    (``mask_chat_messages``) runs first: when that brings the list under the
    proactive threshold it comes back masked, with ``record=None``; otherwise
    the summary reads the head as it was before masking (results cut to
    ``summary_recall_tokens``) and the new list comes back masked by the
    policy (what the next call is sent). The record's ``tokens_before`` and
    ``tokens_after`` are both the model input as sent (with ``mask_first``:
    masked); ``unmasked_tokens_before`` the input's own size. A list no model
    API would take (a tool result without its call, an unknown role) raises
    its specific error (``validate_chat_messages``).
    """
    # compact_messages and acompact_messages, written once (below)
    _check_args(summarizer, context, output, config)
    validate_chat_messages(messages)
    return (yield from _split_flow(messages, summarizer, config or summarizer.config,
                                   context=context, output=output, trigger=trigger,
                                   reason=reason, session_id=session_id, hooks=hooks,
                                   events=events, metrics=metrics,
                                   instructions=instructions))  # fmt: skip


compact_messages = twins.driven(_compact_flow, "compact_messages", flow.run)
acompact_messages = twins.adriven(
    _compact_flow,
    "acompact_messages",
    flow.arun,
    "The async twin of ``compact_messages`` (estimates run in a worker thread).",
)


def _check_args(summarizer: Any, context: Any, output: Any, config: Any) -> None:
    if not isinstance(summarizer, Summarizer):
        raise InputTypeError(
            f"compact_messages takes a Summarizer, got {type(summarizer).__name__} "
            "(Summarizer(client) wraps a client; Summarizer(None) always uses the fallback)"
        )
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ConfigError(f"context must be a non-negative token count (0: unlimited), "
                          f"got {context!r}", column="context")  # fmt: skip
    if context:  # a window with no input room after the output reserve: the Compactor's refusal
        check_window(Limits.coerce({"context": context, "output": output}),
                     config or summarizer.config)  # fmt: skip


def _split_flow(messages: Sequence[Message], summarizer: Summarizer, cfg: CompactionConfig, *,
                context: int, output: int, trigger: ev.Trigger, reason: str, session_id: str,
                hooks: ev.Hooks | None, events: ev.EventBus | None, metrics: ev.Metrics | None,
                instructions: str | None) -> flow.Flow[SplitResult]:  # fmt: skip
    """The split-point compaction's steps (see ``live/flow.py``)."""
    if context == 0:  # an unlimited window never needs compacting
        return SplitResult([dict(m) for m in messages], None)
    run: _Run = yield flow.blocking(
        _Run, messages, cfg, context=context, output=output, trigger=trigger, reason=reason,
        session_id=session_id, instructions=instructions,
    )  # fmt: skip
    if run.masked_enough or not run.split.head:
        return SplitResult([dict(m) for m in run.messages], None)
    if metrics is not None and trigger == "auto" and reason in ev.PROACTIVE_REASONS:
        # the history is over the threshold (masking was not enough): a call held
        # back, counted before the hooks as the live loop counts it
        metrics.record_proactive_trigger()
    event = yield flow.PreCompact(hooks or ev.Hooks(), run.event())
    if event.cancelled:
        if events is not None:
            events.emit(ev.COMPACTION_CANCELLED, session_id=session_id, reason=event.cancel_reason)
        return SplitResult([dict(m) for m in messages], None)
    round = run.split.previous_round + 1
    outcome = yield flow.Summarize(summarizer, run.head, {
        "previous_summary": run.split.previous_summary, "round": round,
        "instructions": event.custom_instructions, "context": event.extra_context,
        "limits": Limits(context=context, output=output),
    })  # fmt: skip
    if outcome.cut is not None and events is not None:
        events.emit(ev.SUMMARY_REQUEST_CUT, session_id=session_id, **outcome.cut.to_dict())
    result: SplitResult = yield flow.blocking(run.finish, outcome, round)
    _emit_done(result, events, metrics)
    if hooks is not None and result.record is not None:
        yield flow.PostCompact(hooks, ev.PostCompactEvent(session_id, result.record))
    return result


__all__ = [
    "Split",
    "SplitResult",
    "acompact_messages",
    "compact_messages",
    "keep_tokens_for",
    "leading_system",
    "recut",
    "select_split",
    "should_compact",
    "summary_round",
]
