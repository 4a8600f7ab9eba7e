"""A framework-free helper a runtime calls around each model step.

    loop = CompactionLoop(compactor, system="You are a coding agent.")
    loop.add_user(session_id, "Fix the failing test")
    while True:
        messages = loop.before_call(session_id)      # compacts first when needed
        reply = client.chat.completions.create(model=..., messages=messages, tools=...)
        message = run_tools(from_openai_chat(reply), {"read": read})  # ctxcompact.live
        decision = loop.after_step(session_id, message)   # usage and finish from the reply
        if decision.done: break

``before_call`` completes a pending compaction or else checks the proactive
budget (0.80 of the window: compact before the call; 0.95: critical), and
returns the messages to send: at most one compaction per call.
``after_step`` stores the step and checks overflow and context stops
(the answer cut off: ``length``, ``max_tokens``; the prompt refused:
``context_length_exceeded``, prompt too long):
reactive compaction is queued for the next ``before_call``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import ctxcompact.live.events as ev
import ctxcompact.live.flow as flow
import ctxcompact.live.twins as twins
from ctxcompact.errors import (
    CompactionConflictError,
    CompactionLoopError,
    InputTypeError,
    TranscriptError,
)
from ctxcompact.estimators import EstimateMethod, count_label
from ctxcompact.live.calibration import prompt_tokens
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.markers import compaction_part
from ctxcompact.live.sessions import check_session_id, model_name, turn_end, validate_session
from ctxcompact.live.sqlstore import extended
from ctxcompact.live.store import new_id
from ctxcompact.models import MessageTime, MessageWithParts, Part, Session, UserMessage
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import TokenBudget
from ctxcompact.scans.parts import filter_pivot
from ctxcompact.scans.view import ViewCache, system_message

#: Sessions a loop keeps between steps (``_Kept``): one loop may serve many;
#: the least recently stepped is read whole again at its next step.
KEPT_SESSIONS = 64

#: Finish reasons that mean the answer was cut off: at ``max_tokens``, or where
#: the context window ran out (Anthropic's ``model_context_window_exceeded``).
OUTPUT_STOPS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})
#: Error codes / texts that mean the prompt itself was over the window (the
#: call was refused).
PROMPT_STOPS = frozenset({"context_length_exceeded", "prompt_too_long", "prompt is too long"})
#: Finish reasons / error codes that mean the context was too long.
CONTEXT_STOPS = OUTPUT_STOPS | PROMPT_STOPS
#: A reply that ended without a finish reason (a stream cut short): the
#: converters (``from_openai_chat``, ...) give it this finish.
INCOMPLETE = "incomplete"
#: Finish reasons of a turn that is not over: calls to answer, or Anthropic's
#: ``pause_turn`` (a long server-tool turn paused: the reply is sent back as
#: it is for the model to go on).
CONTINUES = frozenset({"tool_calls", "tool-calls", "tool_use", "pause_turn"})


def context_stop(reason: str | None) -> str | None:
    """``"prompt_too_long"`` when ``reason`` (a finish reason or error text)
    says the prompt was over the window, ``"max_tokens"`` when the answer was
    cut off, else None."""
    if not reason:
        return None
    text = reason.strip().lower()
    if text in PROMPT_STOPS or "context length" in text or "prompt is too long" in text:
        return "prompt_too_long"
    if text in OUTPUT_STOPS:
        return "max_tokens"
    return None


def is_context_stop(reason: str | None) -> bool:
    """True for a finish reason or error text that means "the context is full"."""
    return context_stop(reason) is not None


@dataclass(frozen=True)
class StepDecision:
    #: A compaction was queued (it runs in the next ``before_call``).
    compaction_queued: bool
    #: Why: ``"overflow"`` (the reported usage was over the window),
    #: ``"max_tokens"`` (the answer was cut off: ``length``, ``max_tokens``,
    #: ``model_context_window_exceeded``), ``"prompt_too_long"`` (the prompt was
    #: over the window and refused: ``context_length_exceeded``, "prompt is too
    #: long", ...), ``"incomplete"`` (the reply ended without a finish reason,
    #: a stream cut short: nothing queued), ``"masked"``, or ``"ok"``.
    reason: str
    #: The model finished its turn (no tool calls pending, not cut off, not
    #: paused: Anthropic's ``pause_turn`` is not done).
    #: A context stop or an incomplete reply is never done; with auto
    #: compaction off nothing is queued for a context stop or an overflow
    #: (``compaction_queued`` False, the reason still given and counted in
    #: ``reactive_overflows``): the runtime decides whether to continue or stop.
    done: bool


@dataclass(frozen=True)
class CallCount:
    """How a ``before_call`` counted the history it returned (``last_count``)."""

    #: The history's tokens (without the loop's own ``system``), uncalibrated:
    #: what the proactive budget read.
    tokens: int
    #: The method (``Compactor.count_method``): ``<family>-exact`` when the
    #: store keeps exact counts in the family of the session's model (read,
    #: not counted again), else the config's estimate.
    method: str
    #: ``count_label(method)``: ``"o200k exact"``, ``"estimate opencode"``.
    counted: str


@dataclass(frozen=True)
class _Kept:
    """What the loop keeps of a session between steps: the store's cursor,
    the session as loaded (validated) and its messages' views and estimates."""

    cursor: tuple[int, ...]
    session: Session
    views: ViewCache


class CompactionLoop:
    """Proactive and reactive compaction around each model call of one runtime.

    Between steps it keeps each session as last loaded, its model view and
    estimates: a step reads from the store only what was appended since
    (``load_since``; a store without it is loaded whole) and renders and
    estimates only the new messages. Any other change to the stored session
    (prune marks, a compaction, a cancelled marker) is read whole again.
    """

    def __init__(self, compactor: Compactor, *, system: str | None = None) -> None:
        if not isinstance(compactor, Compactor):
            kind = type(compactor).__name__
            raise InputTypeError(f"CompactionLoop takes a Compactor, got {kind}")
        self.compactor = compactor
        self.system = system
        # Per session: the estimate of the last call's messages and its model,
        # set against the usage the step reports (``compactor.calibrator``).
        self._sent: dict[str, tuple[int, str]] = {}
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._counts: OrderedDict[str, CallCount] = OrderedDict()
        self._kept_lock = threading.Lock()

    @property
    def config(self) -> Any:
        return self.compactor.config

    def budget(
        self,
        history_tokens: int,
        model: str | None = None,
        method: EstimateMethod | None = None,
    ) -> TokenBudget | None:
        """The proactive budget with ``history_tokens`` of history; the system
        prompt is counted under ``method`` (the config's estimate when None;
        the history's ``Compactor.count_method``) and calibrated for
        ``model`` here."""
        if self.compactor.limits is None:
            return None
        system = estimate_tokens(self.system or "", method or self.config.estimate_method)
        system = self.compactor.calibrated(system, model or self.compactor.model_of(None))
        return TokenBudget.for_limits(self.compactor.limits, history_tokens=history_tokens,
                                      system_tokens=system, config=self.config)  # fmt: skip

    def add_user(self, session_id: str, text: str, *, pinned: bool = False) -> str:
        """Store a user turn (a convenience for runtimes without their own store code).

        ``pinned``: the turn stays in the model input after every summary (the
        task, a standing directive). A compaction the previous step queued is
        completed first: its summary answers the history before this turn and
        must come before it (stored after it, the model would read the summary
        as the answer to the new turn, and the summary would not have read it).
        If that compaction raises, the turn is not stored. From an event loop
        use ``aadd_user``.
        """
        message = self._user_turn(session_id, text, pinned=pinned)
        flow.run(self._before_user(session_id))
        self.compactor.store.append_message(session_id, message)
        return message.id

    async def aadd_user(self, session_id: str, text: str, *, pinned: bool = False) -> str:
        """``add_user`` from an event loop (a queued compaction completed in worker threads)."""
        message = self._user_turn(session_id, text, pinned=pinned)
        await flow.arun(self._before_user(session_id))
        await asyncio.to_thread(self.compactor.store.append_message, session_id, message)
        return message.id

    def _before_user(self, session_id: str) -> flow.Flow[None]:
        session: Session = yield flow.blocking(self._load, session_id)
        if self.compactor.pending_task(session) is not None:
            yield from self._process(session_id, session)

    def _user_turn(self, session_id: str, text: str, *, pinned: bool) -> MessageWithParts:
        check_session_id(session_id)
        if not isinstance(text, str):
            raise InputTypeError(f"a user turn's text must be a str, got {type(text).__name__}")
        if not text.strip():
            # An empty turn is sent as nothing: the model would get no user message.
            raise TranscriptError("a user turn must have text", session_id=session_id)
        mid = new_id("msg")
        part = Part(id=new_id("prt"), type="text", text=text, messageID=mid)
        if pinned:
            part.pinned = True
        return MessageWithParts(
            info=UserMessage(id=mid, sessionID=session_id, time=MessageTime()), parts=[part]
        )

    # --- before the call ----------------------------------------------------------------

    def _proactive_reason(
        self, session_id: str, tokens: int, session: Session, method: EstimateMethod
    ) -> str | None:
        """``tokens``: the history's count under ``method`` (the loop's own
        system prompt is in the budget already; a system message the session
        stores is history)."""
        if not self.config.auto:
            return None
        model = self.compactor.model_of(session)
        budget = self.budget(self.compactor.calibrated(tokens, model), model, method)
        if budget is None or not budget.should_compact:
            return None
        # Pinned and system content over the window: no summary can help.
        self.compactor.refuse_unremovable(session_id, session, self.system)
        fixed = self.compactor.unremovable_tokens(session)
        if fixed >= budget.threshold_tokens and budget.history_tokens <= budget.available:
            # Alone over the threshold but the call fits: a summary could not
            # bring it under, and every call would pay for one.
            self.compactor.events.emit(ev.COMPACTION_STALLED, session_id=session_id,
                                       attempts=0, reason="unremovable", tokens=fixed,
                                       usable=budget.available,
                                       counted=count_label(method))  # fmt: skip
            return None
        if self.compactor.stalled(session_id):
            # Every recent compaction left it above the limit: let the call go
            # ahead (it still fits the window) instead of compacting forever.
            self.compactor.events.emit(ev.COMPACTION_STALLED, session_id=session_id,
                                       attempts=self.config.max_attempts)  # fmt: skip
            return None
        self.compactor.metrics.record_proactive_trigger()
        return "critical" if budget.is_critical else "proactive"

    def before_call(self, session_id: str) -> list[dict[str, Any]]:
        """Compact if needed (at most once), then return the OpenAI chat messages to send.

        With nothing to compact, the session is loaded from the store once.
        """
        messages, tokens, model, method = flow.run(self._before_call(session_id))
        return self._sending(session_id, messages, tokens, model, method)

    async def abefore_call(self, session_id: str) -> list[dict[str, Any]]:
        """``before_call`` from an event loop (store work and scans in worker threads)."""
        messages, tokens, model, method = await flow.arun(self._before_call(session_id))
        return self._sending(session_id, messages, tokens, model, method)

    def _sending(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        tokens: int | None,
        model: str,
        method: EstimateMethod,
    ) -> list[dict[str, Any]]:
        """``tokens``: the history's count under ``method`` (None: count ``messages``)."""
        overhead = self.config.message_overhead
        if tokens is None:
            history = messages[1:] if self.system else messages
            tokens = chat_tokens(history, method=method, overhead=overhead)
        with self._kept_lock:  # the sessions stepped last, as the kept ones
            self._counts[session_id] = CallCount(tokens, method, count_label(method))
            self._counts.move_to_end(session_id)
            while len(self._counts) > KEPT_SESSIONS:
                self._counts.popitem(last=False)
        if self.compactor.calibrator is not None:
            shown = [system_message(self.system)] if self.system else []
            estimated = tokens + chat_tokens(shown, method=method, overhead=overhead)
            self._sent[session_id] = (estimated, model)
        return messages

    def last_count(self, session_id: str) -> CallCount | None:
        """How the last ``before_call`` of ``session_id`` counted the history
        it returned (the loop's ``system`` left out): the tokens its budget
        read and which count they are (None before a call, or for a session
        not among the ``KEPT_SESSIONS`` stepped last)."""
        return self._counts.get(session_id)

    def _before_call(
        self, session_id: str
    ) -> flow.Flow[tuple[list[dict[str, Any]], int | None, str, EstimateMethod]]:
        check_session_id(session_id)
        compactor = self.compactor
        session: Session = yield flow.blocking(self._load, session_id)
        pending = compactor.pending_task(session)
        if pending is not None:
            yield from self._process(session_id, session)
            session = yield flow.blocking(self._load, session_id)
            if _cancelled(session, pending.id):
                # A hook said no to this compaction: not asked again in this call.
                messages: list[dict[str, Any]] = yield flow.blocking(
                    compactor.model_messages, session_id, system=self.system, session=session
                )
                return messages, None, compactor.model_of(session), compactor.count_method(session)
        masks_at = self.config.masks_at()
        if masks_at == "call":
            # Hybrid: mask every step; the proactive check below then sees the
            # masked history and asks for a summary only if that is not enough.
            yield flow.blocking(self._mask, session_id, session)
        elif masks_at == "turn" and (end := turn_end(session)) is not None:
            # A user turn ended since the last call: prune the history before
            # the new user message, as OpenCode does when its agent loop exits.
            yield flow.blocking(self._mask, session_id, session, end)
        shown: tuple[list[dict[str, Any]], int, EstimateMethod] = yield flow.blocking(
            self._view, session_id, session
        )
        messages, tokens, method = shown
        model = compactor.model_of(session)
        if pending is not None:
            # One compaction per call: a summary of the summary just written
            # would add nothing. Still over budget, the next call compacts again
            # (and the max_attempts guard stops a series that never fits).
            return messages, tokens, model, method
        reason = yield flow.blocking(self._proactive_reason, session_id, tokens, session, method)
        if reason is None:
            return messages, tokens, model, method
        yield flow.blocking(compactor.request_compaction, session_id, auto=True, reason=reason)
        session = yield flow.blocking(self._load, session_id)  # the marker appended
        yield from self._process(session_id, session)
        session = yield flow.blocking(self._load, session_id)
        messages, tokens, method = yield flow.blocking(self._view, session_id, session)
        return messages, tokens, model, method

    def _load(self, session_id: str) -> Session:
        """The session, validated: what was appended since the last step read
        and added to the session kept from it (``load_since``), or read whole."""
        store = self.compactor.store
        load_since = getattr(store, "load_since", None)
        if load_since is None:
            session = store.load(session_id)
            validate_session(session)
            return session
        kept = self._kept.get(session_id)
        changes = load_since(session_id, None if kept is None else kept.cursor)
        if changes.whole or kept is None:
            session = changes.session
            validate_session(session)
            views = self._views(session)
        else:
            session = extended(kept.session, changes.session)
            validate_session(session, len(kept.session.messages))
            views = kept.views
            if views.method != self.compactor.count_method(session):
                views = self._views(session)  # the model named since counts in another family
        with self._kept_lock:
            self._kept[session_id] = _Kept(changes.cursor, session, views)
            self._kept.move_to_end(session_id)
            while len(self._kept) > KEPT_SESSIONS:  # the least recently stepped goes
                self._kept.popitem(last=False)
        return session

    def _views(self, session: Session) -> ViewCache:
        """A view cache counting as ``Compactor.count_method`` says for ``session``."""
        method = self.compactor.count_method(session)
        return ViewCache(self.config.policy, method, self.config.message_overhead)

    def _view(
        self, session_id: str, session: Session
    ) -> tuple[list[dict[str, Any]], int, EstimateMethod]:
        """The messages to send (``Compactor.model_messages``), the history's
        count and its method (``Compactor.count_method``: the store's exact
        counts read when it keeps them for the model's family), rendering
        and counting only messages not seen before."""
        kept = self._kept.get(session_id)
        # a store without load_since, or the session changed since: a new cache
        views = kept.views if kept is not None and kept.session is session else \
            self._views(session)  # fmt: skip
        messages, tokens = views.view(filter_pivot(session))
        if self.system:
            messages.insert(0, system_message(self.system))
        return messages, tokens, views.method

    def _mask(self, session_id: str, session: Session, upto: int | None = None) -> None:
        if self.compactor.mask(session_id, session, upto=upto):
            # parts marked in ``session``: its views so far are stale
            self._kept.pop(session_id, None)

    def _process(self, session_id: str, session: Session | None = None) -> flow.Flow[None]:
        # The compaction marks parts of ``session`` before it commits them:
        # whatever it does, the next step reads the session whole.
        self._kept.pop(session_id, None)
        # Another runner may complete it first: its summary is then in the store.
        with contextlib.suppress(CompactionConflictError):
            yield from self.compactor.pending_flow(session_id, session)

    # --- after the step -----------------------------------------------------------------

    def after_step(
        self,
        session_id: str,
        message: MessageWithParts | None = None,
        *,
        usage: Any = None,
        finish_reason: str | None = None,
    ) -> StepDecision:
        """Store the step's assistant message (if given) and check for overflow.

        ``usage``: the step's reported token usage (defaults to the message's
        ``tokens``). A context stop queues a compaction even without usage.
        """
        check_session_id(session_id)
        if finish_reason is not None and not isinstance(finish_reason, str):
            raise InputTypeError(f"finish_reason must be a str (the API's finish or stop "
                                 f"reason), got {type(finish_reason).__name__}",
                                 session_id=session_id)  # fmt: skip
        if message is not None and not isinstance(message, MessageWithParts):
            raise InputTypeError(
                f"after_step takes the step's MessageWithParts, got {type(message).__name__}"
                + (" (MessageWithParts.model_validate(it))" if isinstance(message, dict) else "")
            )
        if message is not None:
            self.compactor.store.append_message(session_id, message)
            if usage is None:
                usage = getattr(message.info, "tokens", None)
            finish_reason = finish_reason or getattr(message.info, "finish", None)
        self._learn(session_id, message, usage)
        pending_tools = message is not None and any(
            p.type == "tool" and p.state is not None and p.state.status in ("pending", "running")
            for p in message.parts
        )
        stop = context_stop(finish_reason)
        if stop is not None:
            if self.config.auto:
                session = self._load(session_id)
                self.compactor.refuse_unremovable(session_id, session, self.system)
                if self.compactor.stalled(session_id):
                    self.compactor.events.emit(ev.COMPACTION_STALLED, session_id=session_id,
                                               attempts=self.config.max_attempts)  # fmt: skip
                    raise CompactionLoopError(
                        "the context keeps overflowing after compaction", session_id=session_id
                    )
                self.compactor.metrics.record_reactive_overflow()
                self.compactor.request_compaction(session_id, auto=True, reason=stop)
                return StepDecision(True, stop, False)
            # Cut off is never done, compaction or not: with auto compaction
            # off the runtime decides (the reason given and counted, nothing queued).
            self.compactor.metrics.record_reactive_overflow()
            return StepDecision(False, stop, False)
        # What was appended since the last step read, added to the session
        # kept. Parts the hybrid masks here are marked in it too, and the
        # store's marks make the next step read the session whole.
        kept = None if self.compactor.limits is None else self._load(session_id)
        check = self.compactor.check_step(session_id, usage, system=self.system, session=kept)
        # "overflow" with nothing queued: auto compaction is off, the window is full all the same
        told = check.queued or check.reason == "overflow"
        if finish_reason == INCOMPLETE:
            # A stream that ended without a finish reason: cut short, not a
            # finished turn (nor a full context).
            return StepDecision(check.queued, check.reason if told else INCOMPLETE, False)
        done = finish_reason not in CONTINUES and not pending_tools
        return StepDecision(check.queued, check.reason if told else "ok", done)

    def _learn(self, session_id: str, message: MessageWithParts | None, usage: Any) -> None:
        """Set the reported prompt tokens against the estimate of what was sent."""
        sent = self._sent.pop(session_id, None)
        calibrator = self.compactor.calibrator
        if calibrator is None or sent is None or usage is None:
            return
        estimated, model = sent
        named = model_name(message) if message is not None else None
        calibrator.observe(named or model, estimated=estimated, reported=prompt_tokens(usage))

    aafter_step = twins.threaded(
        after_step, "aafter_step", "The async twin of ``after_step`` (run in a worker thread)."
    )


def _cancelled(session: Session, marker_id: str) -> bool:
    """Whether a pre-compact hook cancelled marker ``marker_id`` (its part ignored)."""
    for message in session.messages:
        if message.id == marker_id:
            part = compaction_part(message)
            return part is not None and part.ignored is True
    return False


__all__ = [
    "CONTEXT_STOPS",
    "OUTPUT_STOPS",
    "PROMPT_STOPS",
    "CallCount",
    "CompactionLoop",
    "StepDecision",
    "context_stop",
    "is_context_stop",
]
