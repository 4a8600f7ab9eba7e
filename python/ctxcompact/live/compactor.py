"""OpenCode's compaction lifecycle: a queued task in the message stream.

1. After a finished step, overflow (or a manual request) appends a user
   message with a compaction part: the marker. It is stored before any work.
2. The next step sees the pending marker and processes it: prune old tool
   outputs, summarize the visible history with the tool-less agent, and
   commit in one transaction the prune marks, the summary (an assistant
   message with ``summary=true`` whose parent is the marker), the synthetic
   "continue" message when auto, and the boundary record.
3. Later calls see the history from the marker on (``filter_pivot``).

A crash anywhere leaves the old state plus the pending marker, which the next
``process_pending`` completes. Every method has an ``a``-prefixed async twin
that runs store I/O and scans in worker threads.
"""

from __future__ import annotations

import asyncio
import copy
import time
from dataclasses import dataclass, replace
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
import ctxcompact.live.events as ev
import ctxcompact.live.flow as flow
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    CompactionConflictError,
    CompactionError,
    CompactionLoopError,
    CompactionPendingError,
    ConfigError,
    InputTypeError,
)
from ctxcompact.estimators import EstimateMethod, count_label
from ctxcompact.live.calibration import UsageCalibrator
from ctxcompact.live.events import REPORTED, StepCheck
from ctxcompact.live.markers import compaction_part, pending_marker
from ctxcompact.live.sessions import check_session_id, model_name, validate_session
from ctxcompact.live.store import Commit, SessionStore, new_id
from ctxcompact.live.summary import Summarizer, SummaryOutcome
from ctxcompact.models import (
    AssistantMessage,
    MessageTime,
    MessageWithParts,
    Part,
    Session,
    TokenUsage,
    UserMessage,
)
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import (
    Limits,
    OverflowOptions,
    check_overflow,
    check_window,
    method_for,
)
from ctxcompact.scans.parts import filter_pivot, prune
from ctxcompact.scans.view import system_message, to_model_messages
from ctxcompact.transcript import Transcript, sessions_to_table


def _now_ms() -> int:
    return int(time.time() * 1000)


#: What a Compactor needs of its store (the ``SessionStore`` protocol's core).
_STORE_METHODS = ("load", "append_message", "mark_parts", "commit_compaction", "records")


def _check_parts(store: Any, summarizer: Any, config: Any) -> None:
    """Wrong kinds of parts fail here, naming them, not at the first step."""
    missing = [m for m in _STORE_METHODS if not callable(getattr(store, m, None))]
    if missing:
        raise InputTypeError(f"store must be a SessionStore (MemoryStore, SQLiteStore, "
                             f"PostgresStore...): {type(store).__name__} has no "
                             f"{', '.join(missing)}")  # fmt: skip
    if not isinstance(summarizer, Summarizer):
        raise InputTypeError(f"summarizer must be a Summarizer (Summarizer(client)), got "
                             f"{type(summarizer).__name__}")  # fmt: skip
    if config is not None and not isinstance(config, CompactionConfig):
        raise InputTypeError(
            f"config must be a CompactionConfig, got {type(config).__name__}"
            + (" (CompactionConfig(**it))" if isinstance(config, dict) else "")
        )


def _check_extras(hooks: Any, events: Any, metrics: Any, calibrator: Any, model: Any) -> None:
    """The optional parts, of the right kinds (else a failure at a later step)."""
    for name, value, kind in (("hooks", hooks, ev.Hooks), ("events", events, ev.EventBus),
                              ("metrics", metrics, ev.Metrics),
                              ("calibrator", calibrator, UsageCalibrator)):  # fmt: skip
        if value is not None and not isinstance(value, kind):
            raise InputTypeError(f"{name}: expected {kind.__name__} or None, got "
                                 f"{type(value).__name__}")  # fmt: skip
    if model is not None and not (isinstance(model, str) and model):
        raise InputTypeError(f"model must be a non-empty str (the calibrator's key), got {model!r}")


def _stays(message: MessageWithParts) -> bool:
    """A message every compaction keeps in the model input (``filter_pivot``)."""
    return message.info.role == "system" or any(p.pinned for p in message.parts)


class Compactor:
    """Runs the queued-task lifecycle over a ``SessionStore``.

    ``limits``: the session model's limits (``Limits``, ``ModelLimits`` or a
    dict with context/input/output); without them only manual compactions run.
    A ``summarizer`` built without a config takes ``config``: the Compactor
    keeps a copy of it with ``config`` (``self.summarizer``), so a summarizer
    shared by several Compactors summarizes with each one's own config.
    """

    def __init__(
        self,
        store: SessionStore,
        summarizer: Summarizer,
        *,
        config: CompactionConfig | None = None,
        limits: Any = None,
        hooks: ev.Hooks | None = None,
        events: ev.EventBus | None = None,
        metrics: ev.Metrics | None = None,
        calibrator: UsageCalibrator | None = None,
        model: str | None = None,
    ) -> None:
        _check_parts(store, summarizer, config)
        _check_extras(hooks, events, metrics, calibrator, model)
        self.store = store
        self.config = config or summarizer.config
        if config is not None and not summarizer.configured and summarizer.config is not config:
            # One config for both (its timeout_s / max_retries reach the client),
            # on a copy: a summarizer shared by two Compactors keeps neither's.
            summarizer = copy.copy(summarizer)
            summarizer.config = config
            summarizer.configured = True
        self.summarizer = summarizer
        self.limits = None if limits is None else Limits.coerce(limits)
        if (
            self.limits is not None
            and self.limits.context
            and (self.limits.input > self.limits.context)
        ):
            raise ConfigError(f"model limit 'input' ({self.limits.input}) is larger than the "
                              f"context ({self.limits.context})", column="limits")  # fmt: skip
        if self.limits is not None:  # else every step would overflow, every compaction stall
            check_window(self.limits, self.config, "limits: ")
        self.hooks = hooks or ev.Hooks()
        self.events = events or ev.EventBus()
        self.metrics = metrics or ev.Metrics()
        #: Scales budget estimates by what providers reported (``live.calibration``).
        self.calibrator = calibrator
        #: The calibrator's key when a session's messages do not name their model.
        self.model = model

    # --- reading the session ------------------------------------------------------------

    def history_tokens(
        self,
        session: Session,
        system: str | None = None,
        *,
        calibrate: bool = True,
        method: EstimateMethod | None = None,
    ) -> int:
        """Tokens of what the next model call would receive, under ``method``
        (``count_method`` when None); with a calibrator, scaled by the
        model's reported/estimated ratio once known."""
        method = method or self.count_method(session)
        tokens = self.view_tokens(session, method=method) + self._system_tokens(system, method)
        return self.calibrated(tokens, self.model_of(session)) if calibrate else tokens

    def count_method(self, session: Session | None) -> EstimateMethod:
        """What the budgets count ``session`` with (``method_for``): exact in
        the family of its model (``model_of``) when the store counts every
        part in it (``count=``), its kept counts read (a text changed since
        counted again); else the config's estimate (``count_label`` says which)."""
        counted = getattr(self.store, "counted_families", ())
        return cast("EstimateMethod", method_for(self.config, self.model_of(session), counted))

    def view_tokens(
        self, session: Session, *, pivot: bool = True, method: EstimateMethod | None = None
    ) -> int:
        """Tokens of the messages ``to_model_messages(filter_pivot(session),
        policy=...)`` gives (``pivot=False``: of ``session`` as it is), without
        the runtime's system prompt, under ``method`` (``count_method`` when
        None; exact, the store's counts read): the core's pivot and
        ``estimate_messages`` over the session's table (one definition with
        ``chat_tokens`` of those messages)."""
        table = sessions_to_table([session], threads=1)
        if pivot:
            table = filter_pivot(Transcript(table), threads=1).to_arrow()
        cfg = self.config
        _, tokens, _ = _core.estimate_messages(
            table, method=method or self.count_method(session), overhead=cfg.message_overhead,
            **cfg.policy.render_options(), threads=1,
        )  # fmt: skip
        return int(pc.sum(pa.array(tokens)).as_py() or 0)

    def _system_tokens(self, system: str | None, method: EstimateMethod | None = None) -> int:
        """The runtime's own system prompt as the view's first message costs it."""
        if not system:
            return 0
        cfg = self.config
        return chat_tokens([system_message(system)], method=method or cfg.estimate_method,
                           overhead=cfg.message_overhead)  # fmt: skip

    def model_of(self, session: Session | None) -> str:
        """The calibrator's key for ``session``: the newest assistant message's
        ``providerID/modelID``, else ``model``, else ``"default"``."""
        for message in reversed(session.messages if session is not None else []):
            named = model_name(message)
            if named is not None:
                return named
        return self.model or "default"

    def _summary_token_ratio(self, job: _Job) -> float | None:
        """The calibrator's tokens per estimated token for the model that
        writes the summary (its slope alone: the intercept is what the
        runtime adds to its calls, tool schemas and templates, which the
        tool-less summary request does not carry); None before a fit."""
        if self.calibrator is None:
            return None
        cfg = self.summarizer.config
        named = cfg.summary_model or self.summarizer.model
        # a request names a model as its API does; the calibrator keys by
        # the reply's provider/model (``fit_named`` maps one to the other)
        fit = self.calibrator.fit(job.model) if named is None else self.calibrator.fit_named(named)
        return None if fit is None else fit.slope

    def calibrated(self, tokens: int, model: str) -> int:
        """``tokens`` as the calibrator scales them for ``model`` (unchanged without one)."""
        return tokens if self.calibrator is None else self.calibrator.calibrate(model, tokens)

    def model_messages(
        self, session_id: str, *, system: str | None = None, session: Session | None = None
    ) -> list[dict[str, Any]]:
        """The OpenAI chat messages of the next call: pivot-filtered, placeholders applied.

        ``session``: the session as just loaded from the store (saves a load).
        """
        if session is None:
            session = self.store.load(session_id)
        return to_model_messages(filter_pivot(session), system=system, policy=self.config.policy)

    def usable_tokens(self) -> int | None:
        """The input budget of the limits (None: unlimited or unknown)."""
        return None if self.limits is None else self.limits.usable(self.config)

    def pending_task(self, session: Session) -> MessageWithParts | None:
        """The newest compaction marker, if no summary answers it yet (not one
        a hook cancelled)."""
        return pending_marker(session)

    def unremovable_tokens(self, session: Session, system: str | None = None) -> int:
        """Estimated tokens no compaction can remove: the visible stored system
        messages and those holding a pinned part (with ``system``, the
        runtime's own prompt), estimated and calibrated as ``history_tokens``."""
        visible = filter_pivot(session)
        fixed = [m for m in visible.messages if _stays(m)]
        method = self.count_method(session)
        tokens = self.view_tokens(visible.model_copy(update={"messages": fixed}), pivot=False,
                                  method=method)  # fmt: skip
        return self.calibrated(tokens + self._system_tokens(system, method), self.model_of(session))

    def refuse_unremovable(
        self, session_id: str, session: Session, system: str | None = None
    ) -> None:
        """``CompactionLoopError`` when what no compaction can remove is already
        over the usable window: every summary would be paid for nothing."""
        usable = self.usable_tokens()
        if usable is None:
            return
        fixed = self.unremovable_tokens(session, system)
        if fixed <= usable:
            return
        self.events.emit(ev.COMPACTION_STALLED, session_id=session_id, attempts=0,
                         reason="unremovable", tokens=fixed, usable=usable,
                         counted=count_label(self.count_method(session)))  # fmt: skip
        raise CompactionLoopError(
            f"the pinned and system messages alone are {fixed} tokens, over the usable "
            f"{usable} (the window less the output reserve): no compaction can bring the "
            "session under it; unpin or shorten them, or use a model with a larger window",
            session_id=session_id,
        )

    def stalled(self, session_id: str) -> bool:
        """True when the last ``max_attempts`` compactions all left the history too big."""
        usable = self.usable_tokens()
        records = self.store.records(session_id)[-self.config.max_attempts :]
        return (
            usable is not None
            and len(records) == self.config.max_attempts
            and all(r.tokens_after > usable for r in records)
        )

    # --- queueing -----------------------------------------------------------------------

    def request_compaction(
        self,
        session_id: str,
        *,
        auto: bool = False,
        instructions: str | None = None,
        reason: str = "manual",
    ) -> str:
        """Queue a compaction: append its marker (a user message with a
        compaction part) and return its id, or return the id of the one
        already pending (two runners queueing at once add one marker: the
        store checks and appends in one transaction, ``queue_compaction``).
        With ``instructions``, a pending marker is ``CompactionPendingError``
        instead (its summary would not use them); nothing is queued."""
        check_session_id(session_id)
        if instructions is not None and not isinstance(instructions, str):
            raise InputTypeError(f"instructions must be a str, got {type(instructions).__name__}",
                                 session_id=session_id)  # fmt: skip
        if not isinstance(reason, str) or not reason:
            # Stored with the marker and copied to its record: 5 became "5".
            raise InputTypeError(f"reason must be a non-empty str, got {reason!r}",
                                 session_id=session_id)  # fmt: skip
        if not isinstance(auto, bool):
            raise InputTypeError(f"auto must be a bool, got {type(auto).__name__}",
                                 session_id=session_id)  # fmt: skip
        marker = new_id("msg")
        extra: dict[str, Any] = {"reason": reason}
        if instructions:
            extra["instructions"] = instructions
        message = MessageWithParts(
            info=UserMessage(id=marker, sessionID=session_id, time=MessageTime(created=_now_ms())),
            parts=[Part(id=new_id("prt"), sessionID=session_id, messageID=marker,
                        type="compaction", auto=auto, **extra)],
        )  # fmt: skip
        queue = getattr(self.store, "queue_compaction", None)
        if queue is not None:
            queued = queue(session_id, message)
        else:  # a store of its own without it: checked, then appended (not atomic)
            pending = pending_marker(self.store.load(session_id))
            queued = pending.id if pending is not None else message.id
            if pending is None:
                self.store.append_message(session_id, message)
        if queued != marker:
            if instructions:
                # The pending marker's summary is asked with its own instructions
                # (stored with it): these would be dropped without a word.
                raise CompactionPendingError(
                    f"a compaction is already pending (marker {queued}): its summary would not "
                    "use these instructions; process it first (process_pending), then queue "
                    "yours, or give them in a pre-compact hook (custom_instructions)",
                    session_id=session_id, message_id=str(queued),
                )  # fmt: skip
            return str(queued)
        self.events.emit(ev.COMPACTION_QUEUED, session_id=session_id, marker_id=marker,
                         auto=auto, reason=reason)  # fmt: skip
        return marker

    def mask(self, session_id: str, session: Session | None = None, *,
             upto: int | None = None) -> int:  # fmt: skip
        """Prune by the policy now, without a summary (the hybrid's every-step
        masking, ``config.masks_at()``); ``upto``: over the first ``upto``
        messages only (a user turn that ended, ``turn_end``). The marks are
        stored, and set on ``session`` too when given. Returns the tokens freed."""
        if session is None:
            session = self.store.load(session_id)
        if not self.config.prune or self.pending_task(session) is not None:
            return 0
        scope = session
        if upto is not None:
            scope = session.model_copy(update={"messages": session.messages[:upto]})
        result = prune(scope, self.config)
        if not result.part_ids:
            return 0
        now = _now_ms()
        marks = dict.fromkeys(result.part_ids, now)
        self.store.mark_parts(session_id, marks)
        for message in session.messages:
            for p in message.parts:
                if p.id in marks:
                    p.mark_compacted(now)
        self.metrics.record_prune(result.pruned)
        self.events.emit(ev.PRUNE_APPLIED, session_id=session_id, parts=len(marks),
                         tokens=result.pruned)  # fmt: skip
        return result.pruned

    def check_step(
        self,
        session_id: str,
        usage: Any = None,
        *,
        system: str | None = None,
        session: Session | None = None,
    ) -> StepCheck:
        """After a finished step: queue a compaction when the context overflowed.

        ``usage`` defaults to the last finished, non-summary assistant message's
        tokens; a session with no usage at all is checked on its estimated
        history instead. Raises ``CompactionLoopError`` when compactions keep
        failing to bring the session under its limit, or when the pinned and
        system messages (with ``system``, the runtime's prompt) alone are over it.
        ``session``: the session as just loaded from the store (saves a load).
        """
        check_session_id(session_id)
        if system is not None and not isinstance(system, str):
            raise InputTypeError(f"system must be a str, got {type(system).__name__}",
                                 session_id=session_id)  # fmt: skip
        if self.limits is None:
            return StepCheck(False, "no limits", 0, 0)
        if not self.config.auto:
            # Nothing is queued, but the runtime is told the window is full
            # (reason "overflow", counted and announced as with auto on).
            given, counted = (usage, REPORTED) if usage is not None else \
                self._step_usage(session_id, session)  # fmt: skip
            # the overflow check itself says no overflow when auto is off (OpenCode's rule)
            measure = replace(OverflowOptions.from_config(self.config), auto=True)
            report = check_overflow(given, self.limits, measure)
            if not report.overflow:
                return StepCheck(False, "auto compaction off", report.count, report.usable,
                                 counted=counted)  # fmt: skip
            self.metrics.record_reactive_overflow()
            self.events.emit(ev.OVERFLOW_DETECTED, session_id=session_id, count=report.count,
                             usable=report.usable, counted=counted)  # fmt: skip
            return StepCheck(False, "overflow", report.count, report.usable, counted=counted)
        if session is None:
            session = self.store.load(session_id)
        if self.pending_task(session) is not None:
            return StepCheck(False, "a compaction is already pending", 0, 0)
        counted = REPORTED
        if usage is None:
            usage = self._last_usage(session)
        if usage is None:
            method = self.count_method(session)
            usage = {"input": self.history_tokens(session, method=method), "output": 0}
            counted = count_label(method)
        options = OverflowOptions.from_config(self.config)
        report = check_overflow(usage, self.limits, options)
        if not report.overflow:
            return StepCheck(False, "within limits", report.count, report.usable,
                             counted=counted)  # fmt: skip
        if self.config.masks_at() == "call" and self.mask(session_id, session):
            # Hybrid: a summary only when masking cannot bring the history under.
            method = self.count_method(session)
            masked = check_overflow({"input": self.history_tokens(session, method=method),
                                     "output": 0}, self.limits, options)  # fmt: skip
            if not masked.overflow:
                return StepCheck(False, "masked", masked.count, masked.usable,
                                 counted=count_label(method))  # fmt: skip
        self.metrics.record_reactive_overflow()
        self.events.emit(ev.OVERFLOW_DETECTED, session_id=session_id, count=report.count,
                         usable=report.usable, counted=counted)  # fmt: skip
        self.refuse_unremovable(session_id, session, system)
        if self.stalled(session_id):
            self.events.emit(ev.COMPACTION_STALLED, session_id=session_id,
                             attempts=self.config.max_attempts)  # fmt: skip
            raise CompactionLoopError(
                f"the last {self.config.max_attempts} compactions did not bring the session "
                f"under {report.usable} tokens; not compacting again",
                session_id=session_id,
            )
        marker = self.request_compaction(session_id, auto=True, reason="overflow")
        return StepCheck(True, "overflow", report.count, report.usable, marker, counted)

    def _step_usage(self, session_id: str, session: Session | None = None) -> tuple[Any, str]:
        """The usage ``check_step`` reads when none is given (the last step's,
        else the history counted) and which it is (``StepCheck.counted``)."""
        if session is None:
            session = self.store.load(session_id)
        usage = self._last_usage(session)
        if usage is None:
            method = self.count_method(session)
            tokens = self.history_tokens(session, method=method)
            return {"input": tokens, "output": 0}, count_label(method)
        return usage, REPORTED

    @staticmethod
    def _last_usage(session: Session) -> TokenUsage | None:
        for message in reversed(session.messages):
            info = message.info
            if isinstance(info, AssistantMessage) and info.finish and info.summary is not True:
                return info.tokens
        return None

    # --- processing ---------------------------------------------------------------------

    def _prepare(self, session_id: str, session: Session | None = None) -> _Job | None:
        if session is None:
            session = self.store.load(session_id)
        validate_session(session)
        marker = self.pending_task(session)
        if marker is None:
            return None
        part = compaction_part(marker)
        assert part is not None
        upto = session.model_copy(
            update={"messages": session.messages[: session.messages.index(marker) + 1]}
        )
        method = self.count_method(session)
        tokens_before = self.history_tokens(upto, method=method)
        marks: dict[str, int] = {}
        pruned = 0
        if self.config.prune:
            result = prune(upto, self.config)
            now = _now_ms()
            marks = dict.fromkeys(result.part_ids, now)
            pruned = result.pruned
            for message in upto.messages:  # the summary must see the placeholders too
                for p in message.parts:
                    if p.id in marks:
                        p.mark_compacted(now)
        visible = filter_pivot(upto)
        if self.config.masks_at() == "call":
            history = self._recall_view(visible)
        else:
            history = to_model_messages(visible, policy=self.config.policy)
        summaries = [
            m for m in session.messages
            if isinstance(m.info, AssistantMessage) and m.info.summary is True
        ]  # fmt: skip
        previous = None
        if summaries:
            previous = "\n\n".join(p.text or "" for p in summaries[-1].parts if p.type == "text")
        extra = part.model_extra or {}
        return _Job(
            session_id=session_id,
            marker=marker,
            auto=bool(part.auto),
            reason=str(extra.get("reason") or ("overflow" if part.auto else "manual")),
            instructions=extra.get("instructions"),
            history=history,
            # pinned and system messages stay sent: kept, not summarized
            summarized_ids=tuple(
                m.id for m in visible.messages if m is visible.messages[-1] or not _stays(m)
            ),
            previous_summary=previous or None,
            round=len(summaries) + 1,
            tokens_before=tokens_before,
            kept=[m for m in visible.messages[:-1] if _stays(m)],
            model=self.model_of(session),
            method=method,
            marks=marks,
            pruned_tokens=pruned,
            request=self._open_request(visible.messages[:-1]) if part.auto else None,
        )

    def _open_request(self, before: list[MessageWithParts]) -> str | None:
        """The text of the user turn the history ends with, when a proactive
        compaction came between it and its answer; else None.

        The continue turn repeats it, so the model reads the request as the
        user wrote it, not only as the summary retells it. Not repeated: a
        pinned turn (sent after the summary anyway), and a turn over a
        quarter of the window (it would keep the session over its budget).
        """
        if not before or not isinstance(before[-1].info, UserMessage) or _stays(before[-1]):
            return None
        texts = [p.text for p in before[-1].parts
                 if p.type == "text" and p.text and p.text.strip() and not p.synthetic]  # fmt: skip
        if not texts or any(p.type == "compaction" for p in before[-1].parts):
            return None
        text = "\n\n".join(texts)
        if text.strip().lower() == self.config.continue_text.strip().lower():
            return None
        window = self.limits.context if self.limits is not None else 0
        if window and estimate_tokens(text, method=self.config.estimate_method) > window // 4:
            return None
        return text

    def _recall_view(self, visible: Session) -> list[dict[str, Any]]:
        """The summarizer's input in the hybrid: every output masked since the
        last round shown again, cut to ``summary_recall_tokens``, so the
        summary integrates what masking hid."""
        shown = visible.model_copy(deep=True)
        for message in shown.messages:
            for p in message.parts:
                if p.compacted and p.state is not None and p.state.time is not None:
                    p.state.time.compacted = None
        cap = self.config.summary_recall_tokens
        given = self.config.policy.truncate_output
        policy = self.config.policy.model_copy(
            update={"truncate_output": cap if given is None else min(cap, given)}
        )
        return to_model_messages(shown, policy=policy)

    def _finish(self, job: _Job, outcome: SummaryOutcome) -> tuple[ev.CompactionRecord, list[Any]]:
        now = _now_ms()
        usage = outcome.response
        summary = MessageWithParts(
            info=AssistantMessage(
                id=new_id("msg"), sessionID=job.session_id, parentID=job.marker.id,
                summary=True, finish="stop", mode="compaction", agent="compaction",
                modelID=(outcome.request.model if outcome.request else None),
                time=MessageTime(created=now, completed=now),
                tokens=TokenUsage(input=usage.input_tokens or 0, output=usage.output_tokens or 0)
                if usage else None,
            ),
            parts=[Part(id=new_id("prt"), sessionID=job.session_id, type="text",
                        text=outcome.text)],
        )  # fmt: skip
        summary.parts[0].messageID = summary.id
        follow = None
        if job.auto and self.config.auto_continue:
            cid = new_id("msg")
            follow = MessageWithParts(
                info=UserMessage(id=cid, sessionID=job.session_id,
                                 time=MessageTime(created=now)),
                parts=[Part(id=new_id("prt"), sessionID=job.session_id, messageID=cid,
                            type="text", text=job.request or self.config.continue_text,
                            synthetic=True)],
            )  # fmt: skip
        # What later calls are sent: the system and pinned messages stay
        # ahead of the pivot (an estimate of the summary alone would hide a
        # pinned turn over the window from the loop guard).
        after = Session(
            info={"id": job.session_id},
            messages=[*job.kept, job.marker, summary, *([follow] if follow else [])],
        )
        record = ev.CompactionRecord(
            session_id=job.session_id, family="pivot", trigger="auto" if job.auto else "manual",
            reason=job.reason, round=job.round, tokens_before=job.tokens_before,
            tokens_after=self.calibrated(self.history_tokens(after, calibrate=False,
                                                             method=job.method), job.model),
            summary_source=outcome.source,
            summarized_message_ids=job.summarized_ids,
            kept_message_ids=tuple(m.id for m in job.kept),
            pruned_tokens=job.pruned_tokens, pruned_parts=len(job.marks),
            marker_message_id=job.marker.id, summary_message_id=summary.id, created_ms=now,
            error=outcome.error, counted=count_label(job.method),
        )  # fmt: skip
        return record, [summary, follow]

    def _pre_event(self, job: _Job) -> ev.PreCompactEvent:
        return ev.PreCompactEvent(
            session_id=job.session_id, trigger="auto" if job.auto else "manual",
            reason=job.reason, tokens_before=job.tokens_before,
            custom_instructions=job.instructions,
        )  # fmt: skip

    def _cancelled(self, job: _Job, event: ev.PreCompactEvent) -> None:
        # The marker stays, marked ignored: never pending again, never sent.
        cancel = getattr(self.store, "cancel_compaction", None)
        if cancel is not None:
            cancel(job.session_id, job.marker.id)
        self.events.emit(ev.COMPACTION_CANCELLED, session_id=job.session_id,
                         marker_id=job.marker.id, reason=event.cancel_reason)  # fmt: skip

    def _failed(self, job: _Job, error: BaseException) -> None:
        """Close ``compaction.started`` when the compaction raised: the marker
        stays pending, so the next ``process_pending`` tries again."""
        self.events.emit(ev.COMPACTION_FAILED, session_id=job.session_id,
                         marker_id=job.marker.id,
                         error=f"{type(error).__name__}: {error}")  # fmt: skip

    def _commit(self, job: _Job, record: ev.CompactionRecord, messages: list[Any]) -> None:
        summary, follow = messages
        try:
            commit = Commit(job.marker.id, summary, follow, job.marks, record)
            try:
                self.store.commit_compaction(job.session_id, commit)
            except TypeError as e:
                wrong = flow.wrong_signature(self.store, "commit_compaction", SessionStore,
                                             (job.session_id, commit), {}, e)  # fmt: skip
                if wrong is None:
                    raise
                raise wrong from e
        except CompactionConflictError as e:
            self.events.emit(ev.COMPACTION_CONFLICT, session_id=job.session_id,
                             marker_id=job.marker.id)  # fmt: skip
            raise e
        if job.marks:
            self.metrics.record_prune(job.pruned_tokens)
            self.events.emit(ev.PRUNE_APPLIED, session_id=job.session_id,
                             parts=len(job.marks), tokens=job.pruned_tokens)  # fmt: skip
        if record.error is not None:  # a failed call, not a digest chosen
            self.events.emit(ev.COMPACTION_FALLBACK, session_id=job.session_id,
                             source=record.summary_source, error=record.error)  # fmt: skip
        if record.tokens_after > record.tokens_before:
            # Said, not hidden in the record: the summary (or what stays pinned)
            # outweighs what it replaced.
            ev.log.warning("compaction of session %s left it bigger: %d -> %d tokens (%s "
                           "summary)", job.session_id, record.tokens_before,
                           record.tokens_after, record.summary_source)  # fmt: skip
        self.metrics.record_compaction(record)
        self.events.emit(ev.COMPACTED, session_id=job.session_id, record=record)

    def pending_flow(
        self, session_id: str, session: Session | None = None
    ) -> flow.Flow[ev.CompactionRecord | None]:
        """The steps of completing the pending task (see ``live/flow.py``)."""
        check_session_id(session_id)
        job = yield flow.blocking(self._prepare, session_id, session)
        if job is None:
            return None
        self.events.emit(ev.COMPACTION_STARTED, session_id=session_id, marker_id=job.marker.id)
        try:
            event = yield flow.PreCompact(self.hooks, self._pre_event(job))
            if event.cancelled:
                self._cancelled(job, event)
                return None
            # the pinned and system messages are sent as they are beside the
            # summary: a digest does not repeat them (a pinned task is sent once)
            kept = to_model_messages(Session(info={"id": session_id}, messages=job.kept),
                                     policy=self.config.policy) if job.kept else []  # fmt: skip
            outcome = yield flow.Summarize(self.summarizer, job.history, {
                "previous_summary": job.previous_summary, "round": job.round,
                "instructions": event.custom_instructions, "context": event.extra_context,
                "limits": self.limits, "token_ratio": self._summary_token_ratio(job),
                "kept": kept,
            })  # fmt: skip
            if outcome.cut is not None:
                self.events.emit(ev.SUMMARY_REQUEST_CUT, session_id=session_id,
                                 marker_id=job.marker.id, **outcome.cut.to_dict())  # fmt: skip
            finished: tuple[ev.CompactionRecord, list[Any]] = yield flow.blocking(
                self._finish, job, outcome
            )
            record, messages = finished
            yield flow.settling(self._commit, job, record, messages)
        except CompactionConflictError:
            raise  # closed by compaction.conflict; the winner's summary is stored
        except Exception as e:
            # A SummaryError or StoreError raised where the session was not
            # known (the summarizer, a store): say which one.
            if isinstance(e, CompactionError) and e.session_id is None:
                e.session_id = session_id
            self._failed(job, e)
            raise
        yield flow.PostCompact(self.hooks, ev.PostCompactEvent(session_id, record))
        return record

    def process_pending(
        self, session_id: str, *, session: Session | None = None
    ) -> ev.CompactionRecord | None:
        """Complete the pending compaction task, if any; returns its record.

        A pre-compact hook may cancel (None is returned and the marker stays
        pending). A runner that loses a race to another one gets
        ``CompactionConflictError`` carrying the winner's record. ``session``:
        the session as just loaded from the store (saves a load).
        """
        return flow.run(self.pending_flow(session_id, session))

    async def aprocess_pending(
        self, session_id: str, *, session: Session | None = None
    ) -> ev.CompactionRecord | None:
        """``process_pending`` from an event loop (store work in worker threads)."""
        return await flow.arun(self.pending_flow(session_id, session))

    async def acheck_step(self, session_id: str, usage: Any = None) -> StepCheck:
        return await asyncio.to_thread(self.check_step, session_id, usage)

    async def arequest_compaction(
        self, session_id: str, *, auto: bool = False, instructions: str | None = None,
        reason: str = "manual",
    ) -> str:  # fmt: skip
        return await asyncio.to_thread(
            self.request_compaction, session_id, auto=auto, instructions=instructions,
            reason=reason,
        )  # fmt: skip


@dataclass
class _Job:
    session_id: str
    marker: MessageWithParts
    auto: bool
    reason: str
    instructions: str | None
    history: list[dict[str, Any]]
    summarized_ids: tuple[str, ...]
    previous_summary: str | None
    round: int
    tokens_before: int
    #: The system and pinned messages before the marker: sent after the summary too.
    kept: list[MessageWithParts]
    #: The calibrator's key for the session.
    model: str
    #: What its tokens are counted with (``Compactor.count_method``).
    method: EstimateMethod
    marks: dict[str, int]
    pruned_tokens: int
    #: The user's request the summarized history ends with, not yet answered:
    #: the continue turn repeats it (see ``_open_request``).
    request: str | None = None


CompactionRecord = ev.CompactionRecord

__all__ = [
    "Compactor",
    "StepCheck",
    "check_session_id",
    "compaction_part",
    "pending_marker",
    "validate_session",
]
