"""The live walk of a stored run: each model call prepared by the live
lifecycle (``Compactor`` and ``CompactionLoop`` over an in-memory store), the
run's own message appended after it. The engine (``tuning.engine``) gives the
same rows without the lifecycle and hands this walk the sessions a summary
needs; the tests hold the engine to it call for call (the rows are described
in ``tuning.replay``).
"""

from __future__ import annotations

from typing import Any

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionLoopError
from ctxcompact.formats.source import claude_code_call_id, source_of
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.loop import CompactionLoop
from ctxcompact.live.store import MemoryStore
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import AssistantMessage, MessageWithParts, Session, UserMessage
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.view import to_model_messages
from ctxcompact.tuning.retention import RunRetention, content_text, score_compaction


def common_prefix(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def is_original_compaction(message: Any) -> bool:
    """The run's own summaries and compaction markers: not replayed (the
    policy under test decides compactions)."""
    info = message.info
    if isinstance(info, AssistantMessage) and info.summary is True:
        return True
    return any(p.type == "compaction" for p in message.parts)


def without_prune_marks(message: MessageWithParts) -> MessageWithParts:
    """``message`` with its tool parts' stored prune marks (``state.time.compacted``,
    the ``compacted_at`` column) removed: a copy when it has any, else the
    message itself (the caller's objects are never changed). A run pruned after
    the fact replays like the run as it happened: the policy under test decides
    what is cleared, as it decides the summaries."""
    if not any(p.compacted for p in message.parts):
        return message
    data = message.to_export()
    for part in data.get("parts", []):
        time = (part.get("state") or {}).get("time")
        if isinstance(time, dict):
            time.pop("compacted", None)
    return MessageWithParts.model_validate(data)


def _call_id(message: MessageWithParts) -> str | None:
    """The API message id of a Claude Code assistant message (its record's
    ``message.id``): the readers make one message of a call's lines, but a
    table read before they did holds one message a line, each a part of the
    same call."""
    return claude_code_call_id(source_of(message.info, claude_code=True))


def replay_session(
    session: Session,
    config: CompactionConfig,
    limits: Limits,
    *,
    summarizer: Summarizer | None = None,
    system: str | None = None,
) -> list[dict[str, Any]]:
    """The per-call rows of one run (see the module doc). ``cached_tokens`` is
    the raw common prefix with the previous prompt, however long ago it was
    sent: the price sheets apply each provider's cache lifetime from
    ``since_previous_s`` (``tuning.cache``)."""
    store = MemoryStore()
    sid = store.create_session(session.id)
    compactor = Compactor(store, summarizer or Summarizer(None, config), config=config,
                          limits=limits)  # fmt: skip
    loop = CompactionLoop(compactor, system=system)

    def tokens(messages: list[dict[str, Any]]) -> int:
        return chat_tokens(messages, method=config.estimate_method,
                                      overhead=config.message_overhead)  # fmt: skip

    usable = limits.usable(config)
    rows: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    # The run's messages since the previous call, as the model would read them:
    # the previous prompt plus these is what this call sends if nothing is removed.
    pending: list[dict[str, Any]] = []
    task: str | None = None
    facts = RunRetention()  # the comparable retention, call by call
    # The run without compaction: every message as sent, appended (estimates add
    # up message by message, so the total grows by each message's own).
    baseline = tokens(to_model_messages(Session(info=session.info), system=system))
    baseline_previous = 0
    last_time: int | None = None
    # One model call per API message id: an assistant message of the call
    # before (a Claude Code line of it, the results between) is no new call.
    last_call: str | None = None
    for original in session.messages:
        if is_original_compaction(original):
            continue
        message = without_prune_marks(original)
        info = message.info
        call_id = _call_id(message) if isinstance(info, AssistantMessage) else None
        same_call = call_id is not None and call_id == last_call
        if isinstance(info, AssistantMessage):
            last_call = call_id
        if isinstance(info, AssistantMessage) and not same_call:
            records = len(store.records(sid))
            try:
                sent = loop.before_call(sid)
            except CompactionLoopError:
                # What no compaction removes is over the window: the call is
                # sent as it is (flagged over_window), as a runtime could not.
                sent = compactor.model_messages(sid, system=system)
            made = store.records(sid)[records:]
            created = info.time.created if info.time else None
            since = (
                (created - last_time) / 1000
                if created is not None and last_time is not None
                else None
            )
            last_time = created if created is not None else last_time
            prompt = tokens(sent)
            common = common_prefix(previous, sent)
            cached = tokens(sent[:common])
            reply = to_model_messages(session.model_copy(update={"messages": [message]}))
            usage = info.tokens.output if info.tokens else 0
            output = usage or tokens(reply[:1])
            before = previous + pending
            removed = (
                score_compaction(before, sent, task=task)
                if common_prefix(before, sent) < len(before)
                else None
            )
            facts.resend(before, sent)
            model_summaries = [r for r in made if r.summary_source == "model"]
            written_by_model = 0
            if model_summaries:
                stored = {m.id: m for m in store.load(sid).messages}
                for r in model_summaries:
                    summary = stored.get(r.summary_message_id or "")
                    if summary is not None:
                        one = session.model_copy(update={"messages": [summary]})
                        written_by_model += tokens(to_model_messages(one))
            rows.append({
                "session_id": session.id,
                "call": len(rows),
                "message_id": message.id,
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "written_tokens": prompt - cached,
                "output_tokens": output,
                "compacted": bool(made),
                "reason": made[-1].reason if made else None,
                # A model summary read the history it replaced and wrote the summary.
                "summary_input_tokens": sum(r.tokens_before for r in model_summaries),
                "summary_output_tokens": written_by_model,
                "baseline_prompt_tokens": baseline,
                "baseline_cached_tokens": baseline_previous,
                "removed_facts": len(removed.removed) if removed else 0,
                "kept_facts": removed.kept if removed else 0,
                "lost": [f.label() for f in removed.lost] if removed else [],
                "retention": facts.score,
                "over_window": usable is not None and prompt > usable,
                "since_previous_s": since,
            })  # fmt: skip
            previous, baseline_previous, pending = sent, baseline, []
        store.append_message(sid, message)
        alone = to_model_messages(session.model_copy(update={"messages": [message]}))
        if task is None and isinstance(info, UserMessage):
            task = next((content_text(m) for m in alone if m.get("role") == "user"), None)
        pending.extend(alone)
        facts.append(alone)
        baseline += tokens(alone)
    return rows


__all__ = ["common_prefix", "is_original_compaction", "replay_session", "without_prune_marks"]
