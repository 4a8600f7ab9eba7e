"""The live walk of a stored run: each model call prepared by the live
lifecycle (``Compactor`` and ``CompactionLoop`` over an in-memory store), the
run's own message appended after it. The engine (``tuning.engine``) gives the
same rows without the lifecycle but for each summary's call, which it makes
here (``LiveRun``, from the core's state: ``tuning.resume``); the tests hold
the engine to the whole walk call for call (the rows are described in
``tuning.replay``).
"""

from __future__ import annotations

from typing import Any

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionLoopError
from ctxcompact.formats.source import claude_code_call_id, claude_code_created_ms, source_of
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


class LiveRun:
    """One run walked through the live lifecycle: ``call`` prepares the model
    call an assistant message makes (``CompactionLoop.before_call``) and
    gives its row, ``append`` stores the run's message after it. The row's
    state (the previous prompt, the messages since, the retention, the
    baseline, the last call's time) is kept here: the engine
    (``tuning.resume``) sets it from the core's walk to make one summary's
    call here and hands the rest back to the core."""

    def __init__(
        self,
        session: Session,
        config: CompactionConfig,
        limits: Limits,
        *,
        summarizer: Summarizer | None = None,
        system: str | None = None,
    ) -> None:
        self.session, self.config, self.system = session, config, system
        self.store = MemoryStore()
        self.sid = self.store.create_session(session.id)
        self.compactor = Compactor(self.store, summarizer or Summarizer(None, config),
                                   config=config, limits=limits)  # fmt: skip
        self.loop = CompactionLoop(self.compactor, system=system)
        self.usable = limits.usable(config)
        self.rows: list[dict[str, Any]] = []
        self.previous: list[dict[str, Any]] = []
        # The run's messages since the previous call, as the model would read them:
        # the previous prompt plus these is what this call sends if nothing is removed.
        self.pending: list[dict[str, Any]] = []
        self.task: str | None = None
        self.facts = RunRetention()  # the comparable retention, call by call
        # The run without compaction: every message as sent, appended (estimates add
        # up message by message, so the total grows by each message's own).
        self.baseline = self.tokens(to_model_messages(Session(info=session.info), system=system))
        self.baseline_previous = 0
        self.last_time: int | None = None
        # One model call per API message id: an assistant message of the call
        # before (a Claude Code line of it, the results between) is no new call.
        self.last_call: str | None = None

    def tokens(self, messages: list[dict[str, Any]]) -> int:
        return chat_tokens(messages, method=self.config.estimate_method,
                           overhead=self.config.message_overhead)  # fmt: skip

    def alone(self, message: MessageWithParts) -> list[dict[str, Any]]:
        """``message`` as the model reads it, alone."""
        return to_model_messages(self.session.model_copy(update={"messages": [message]}))

    def makes_call(self, message: MessageWithParts) -> bool:
        """Whether ``message`` (the run's next) is an assistant message starting a new call."""
        info = message.info
        if not isinstance(info, AssistantMessage):
            return False
        call_id = _call_id(message)
        same_call = call_id is not None and call_id == self.last_call
        self.last_call = call_id
        return not same_call

    def call(self, message: MessageWithParts) -> dict[str, Any]:
        """The call assistant message ``message`` makes: its row (also in ``rows``)."""
        store, sid, compactor, tokens = self.store, self.sid, self.compactor, self.tokens
        info = message.info
        assert isinstance(info, AssistantMessage)
        records = len(store.records(sid))
        try:
            sent = self.loop.before_call(sid)
        except CompactionLoopError:
            # What no compaction removes is over the window: the call is
            # sent as it is (flagged over_window), as a runtime could not.
            sent = compactor.model_messages(sid, system=self.system)
        made = store.records(sid)[records:]
        created = (
            info.time.created
            if info.time  # else Claude Code's event time
            else claude_code_created_ms(source_of(info, claude_code=True))
        )
        last = self.last_time
        since = (created - last) / 1000 if created is not None and last is not None else None
        self.last_time = created if created is not None else last
        prompt = tokens(sent)
        common = common_prefix(self.previous, sent)
        cached = tokens(sent[:common])
        reply = self.alone(message)
        usage = info.tokens.output if info.tokens else 0
        output = usage or tokens(reply[:1])
        before = self.previous + self.pending
        removed = (
            score_compaction(before, sent, task=self.task)
            if common_prefix(before, sent) < len(before)
            else None
        )
        self.facts.resend(before, sent)
        model_summaries = [r for r in made if r.summary_source == "model"]
        written_by_model = 0
        if model_summaries:
            stored = {m.id: m for m in store.load(sid).messages}
            for r in model_summaries:
                summary = stored.get(r.summary_message_id or "")
                if summary is not None:
                    one = self.session.model_copy(update={"messages": [summary]})
                    written_by_model += tokens(to_model_messages(one))
        row = {
            "session_id": self.session.id,
            "call": len(self.rows),
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
            "baseline_prompt_tokens": self.baseline,
            "baseline_cached_tokens": self.baseline_previous,
            "removed_facts": len(removed.removed) if removed else 0,
            "kept_facts": removed.kept if removed else 0,
            "lost": [f.label() for f in removed.lost] if removed else [],
            "retention": self.facts.score,
            "over_window": self.usable is not None and prompt > self.usable,
            "since_previous_s": since,
        }  # fmt: skip
        self.rows.append(row)
        self.previous, self.baseline_previous, self.pending = sent, self.baseline, []
        return row

    def append(self, message: MessageWithParts) -> None:
        """Store the run's ``message`` after the calls before it."""
        self.store.append_message(self.sid, message)
        alone = self.alone(message)
        if self.task is None and isinstance(message.info, UserMessage):
            self.task = next((content_text(m) for m in alone if m.get("role") == "user"), None)
        self.pending.extend(alone)
        self.facts.append(alone)
        self.baseline += self.tokens(alone)


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
    run = LiveRun(session, config, limits, summarizer=summarizer, system=system)
    for message in replayed_messages(session):
        if run.makes_call(message):
            run.call(message)
        run.append(message)
    return run.rows


def replayed_messages(session: Session) -> list[MessageWithParts]:
    """The run's messages as the walk replays them: its own summaries and
    markers left out, its stored prune marks removed."""
    return [without_prune_marks(m) for m in session.messages if not is_original_compaction(m)]


__all__ = [
    "LiveRun",
    "common_prefix",
    "is_original_compaction",
    "replay_session",
    "replayed_messages",
    "without_prune_marks",
]
