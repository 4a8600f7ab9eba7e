"""What a compaction tells the outside world: hooks, events, records and counters."""

from __future__ import annotations

import difflib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ctxcompact.errors import ConfigError, HookError, InputTypeError

log = logging.getLogger("ctxcompact")
# A library leaves logging to the application: without this, Python's
# last-resort handler printed our warnings on stderr.
log.addHandler(logging.NullHandler())

Trigger = Literal["auto", "manual"]

# Event names. ``session.compacted`` is OpenCode's own name for the same event.
OVERFLOW_DETECTED = "overflow.detected"
COMPACTION_QUEUED = "compaction.queued"
COMPACTION_STARTED = "compaction.started"
COMPACTED = "session.compacted"
COMPACTION_FALLBACK = "compaction.fallback"
COMPACTION_CANCELLED = "compaction.cancelled"
COMPACTION_STALLED = "compaction.stalled"
COMPACTION_CONFLICT = "compaction.conflict"
#: A compaction that raised after ``compaction.started`` (a pre-compact hook,
#: ``fallback="raise"``, the store): its marker stays pending.
COMPACTION_FAILED = "compaction.failed"
PRUNE_APPLIED = "prune.applied"
#: The summary request was cut to the summarizer's window (``RequestCut`` fields).
SUMMARY_REQUEST_CUT = "summary.request_cut"
#: Every event the library emits (``EventBus.subscribe`` takes these and ``"*"``).
EVENT_NAMES = (OVERFLOW_DETECTED, COMPACTION_QUEUED, COMPACTION_STARTED, COMPACTED,
               COMPACTION_FALLBACK, COMPACTION_CANCELLED, COMPACTION_STALLED,
               COMPACTION_CONFLICT, COMPACTION_FAILED, PRUNE_APPLIED,
               SUMMARY_REQUEST_CUT)  # fmt: skip


def _check_callable(fn: Any, what: str) -> Any:
    """``fn`` if it can be called (else ``InputTypeError`` now, not a failure
    at the next compaction)."""
    if not callable(fn):
        raise InputTypeError(f"{what} must be callable, got {type(fn).__name__}")
    return fn


@dataclass
class PreCompactEvent:
    """Given to pre-compact hooks before the summary; hooks may change it."""

    session_id: str
    trigger: Trigger
    reason: str
    tokens_before: int
    custom_instructions: str | None = None
    #: Lines a hook adds for the summary (current branch, goals, ...).
    extra_context: list[str] = field(default_factory=list)
    cancelled: bool = False
    cancel_reason: str | None = None

    def cancel(self, reason: str) -> None:
        self.cancelled = True
        self.cancel_reason = reason


@dataclass(frozen=True)
class CompactionRecord:
    """The boundary record every compaction leaves behind.

    ``tokens_before`` / ``tokens_after``: the estimated model input as it is
    sent (the policy's masked view, placeholders and cuts counted as sent)
    before the compaction and at the next call; both measured the same way.
    """

    session_id: str
    family: Literal["pivot", "split"]
    trigger: Trigger
    reason: str
    round: int
    tokens_before: int
    tokens_after: int
    summary_source: Literal["model", "digest", "truncation"]
    summarized_message_ids: tuple[str, ...] = ()
    kept_message_ids: tuple[str, ...] = ()
    pruned_tokens: int = 0
    pruned_parts: int = 0
    marker_message_id: str | None = None
    summary_message_id: str | None = None
    created_ms: int = 0
    #: Why a fallback summary was used (None: the model wrote it).
    error: str | None = None
    #: The split family: the history's size before the policy's masking (what
    #: the caller holds; ``tokens_before`` when nothing is masked). None: not
    #: measured (the pivot family, whose sent view is ``tokens_before``).
    unmasked_tokens_before: int | None = None
    #: What the token figures were counted with (``count_label``: ``"o200k
    #: exact"``, the store's counts read, or ``"estimate opencode"``); None
    #: in a record written before it was said.
    counted: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summarized_message_ids"] = list(self.summarized_message_ids)
        d["kept_message_ids"] = list(self.kept_message_ids)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompactionRecord:
        values = dict(d)
        for key in ("summarized_message_ids", "kept_message_ids"):
            values[key] = tuple(values.get(key) or ())
        return cls(**values)


#: ``StepCheck.counted`` (and the events') of a check on the step's reported usage.
REPORTED = "reported usage"


@dataclass(frozen=True)
class StepCheck:
    """What ``check_step`` decided, and the numbers behind it."""

    queued: bool
    reason: str
    count: int
    usable: int
    marker_id: str | None = None
    #: What ``count`` is: ``"reported usage"`` (the step's, as the provider
    #: counted it), or the history counted as ``Compactor.count_method``
    #: says (``count_label``: ``"o200k exact"``, ``"estimate opencode"``).
    counted: str = REPORTED


@dataclass(frozen=True)
class PostCompactEvent:
    """After a compaction: the equivalent of ``SessionStart`` with ``source="compact"``."""

    session_id: str
    record: CompactionRecord
    source: Literal["compact"] = "compact"


PreCompactHook = Callable[[PreCompactEvent], Awaitable[None] | None]
PostCompactHook = Callable[[PostCompactEvent], Awaitable[None] | None]


def _name(hook: Callable[..., Any]) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)


class Hooks:
    """Pre- and post-compaction hooks, run in the order they were added."""

    def __init__(
        self,
        pre_compact: Sequence[PreCompactHook] = (),
        post_compact: Sequence[PostCompactHook] = (),
    ) -> None:
        self.pre_compact = [_check_callable(h, "a pre-compact hook") for h in pre_compact]
        self.post_compact = [_check_callable(h, "a post-compact hook") for h in post_compact]

    def add_pre_compact(self, hook: PreCompactHook) -> None:
        self.pre_compact.append(_check_callable(hook, "a pre-compact hook"))

    def add_post_compact(self, hook: PostCompactHook) -> None:
        self.post_compact.append(_check_callable(hook, "a post-compact hook"))

    def _call(self, hook: Callable[[Any], Any], event: Any, *, sync: bool) -> Any:
        try:
            result = hook(event)
        except Exception as e:
            raise HookError(
                f"compaction hook {_name(hook)} failed: {e}", session_id=event.session_id
            ) from e
        if inspect.isawaitable(result) and sync:
            if inspect.iscoroutine(result):
                result.close()
            raise HookError(
                f"hook {_name(hook)} is async: use the async compaction path",
                session_id=event.session_id,
            )
        return result

    async def _await(self, hook: Callable[[Any], Any], event: Any) -> None:
        result = self._call(hook, event, sync=False)
        if inspect.isawaitable(result):
            try:
                await result
            except Exception as e:
                raise HookError(
                    f"compaction hook {_name(hook)} failed: {e}", session_id=event.session_id
                ) from e

    def run_pre_compact(self, event: PreCompactEvent) -> PreCompactEvent:
        for hook in self.pre_compact:
            self._call(hook, event, sync=True)
            if event.cancelled:
                break
        return event

    async def arun_pre_compact(self, event: PreCompactEvent) -> PreCompactEvent:
        for hook in self.pre_compact:
            await self._await(hook, event)
            if event.cancelled:
                break
        return event

    def run_post_compact(self, event: PostCompactEvent) -> None:
        for hook in self.post_compact:
            self._call(hook, event, sync=True)

    async def arun_post_compact(self, event: PostCompactEvent) -> None:
        for hook in self.post_compact:
            await self._await(hook, event)


Subscriber = Callable[[str, dict[str, Any]], None]


class EventBus:
    """Publish/subscribe by event name (``"*"``: everything). Thread-safe.

    A subscriber that raises is logged and skipped: observers never break a
    compaction.
    """

    def __init__(self) -> None:
        self._subs: dict[str, list[Subscriber]] = {}
        self._lock = threading.Lock()

    def subscribe(self, name: str, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(name, payload)`` on each ``name`` event (``"*"``: every
        one); returns the function that unsubscribes it. A name the library
        never emits is a ``ConfigError`` (a misspelt one would never fire)."""
        if name != "*" and name not in EVENT_NAMES:
            close = difflib.get_close_matches(str(name), EVENT_NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"no event is named {name!r}{hint}; the events are "
                              f"{', '.join(EVENT_NAMES)} or '*'", column="name")  # fmt: skip
        _check_callable(callback, "an event subscriber")
        with self._lock:
            self._subs.setdefault(name, []).append(callback)

        def unsubscribe() -> None:
            with self._lock:
                subs = self._subs.get(name, [])
                if callback in subs:
                    subs.remove(callback)

        return unsubscribe

    def emit(self, name: str, /, **payload: Any) -> None:
        with self._lock:
            targets = [*self._subs.get(name, ()), *self._subs.get("*", ())]
        for callback in targets:
            try:
                callback(name, payload)
            except Exception:
                log.exception("ctxcompact event subscriber %s failed on %s", _name(callback), name)


#: Reasons the loop gives a compaction it starts before a call (the budget).
PROACTIVE_REASONS = frozenset({"proactive", "critical"})


class Metrics:
    """Counters across sessions (seed 000's CompactionMetrics, and a few more).

    Compactions are told apart by what started them: ``proactive`` (the
    budget crossed its 0.80 / 0.95 threshold before a call), ``reactive`` (a
    finished step's usage overflowed or it stopped on a full context) and
    ``manual`` (``request_compaction`` by hand).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Steps whose usage or finish reason showed a full context (each queues
        #: a reactive compaction unless the loop guard stops it).
        self.reactive_overflows = 0
        #: Calls held back because the budget crossed its threshold.
        self.proactive_triggers = 0
        self.prune_runs = 0
        self.tokens_pruned = 0
        self.summaries_generated = 0
        self.compactions = 0
        self.proactive_compactions = 0
        self.reactive_compactions = 0
        self.manual_compactions = 0
        self.fallbacks = 0
        self.tokens_before_total = 0

    def record_reactive_overflow(self) -> None:
        with self._lock:
            self.reactive_overflows += 1

    def record_proactive_trigger(self) -> None:
        with self._lock:
            self.proactive_triggers += 1

    def record_prune(self, tokens: int) -> None:
        with self._lock:
            self.prune_runs += 1
            self.tokens_pruned += tokens

    def record_compaction(self, record: CompactionRecord) -> None:
        with self._lock:
            self.compactions += 1
            if record.trigger == "manual":
                self.manual_compactions += 1
            elif record.reason in PROACTIVE_REASONS:
                self.proactive_compactions += 1
            else:
                self.reactive_compactions += 1
            self.tokens_before_total += record.tokens_before
            if record.summary_source == "model":
                self.summaries_generated += 1
            elif record.error is not None:  # a digest chosen (no model) is no fallback
                self.fallbacks += 1

    @property
    def average_tokens_before(self) -> float:
        """Average ``tokens_before`` of the compactions: the model input as
        sent when each started (masked by the policy where it masks)."""
        with self._lock:
            return self.tokens_before_total / self.compactions if self.compactions else 0.0

    def snapshot(self) -> dict[str, float | int]:
        average = self.average_tokens_before
        with self._lock:
            return {
                "compactions": self.compactions,
                "proactive_compactions": self.proactive_compactions,
                "reactive_compactions": self.reactive_compactions,
                "manual_compactions": self.manual_compactions,
                "proactive_triggers": self.proactive_triggers,
                "reactive_overflows": self.reactive_overflows,
                "prune_runs": self.prune_runs,
                "tokens_pruned": self.tokens_pruned,
                "summaries_generated": self.summaries_generated,
                "fallbacks": self.fallbacks,
                "average_tokens_before": average,
            }


__all__ = [
    "COMPACTED",
    "COMPACTION_CANCELLED",
    "COMPACTION_CONFLICT",
    "COMPACTION_FAILED",
    "COMPACTION_FALLBACK",
    "COMPACTION_QUEUED",
    "COMPACTION_STALLED",
    "COMPACTION_STARTED",
    "OVERFLOW_DETECTED",
    "PROACTIVE_REASONS",
    "PRUNE_APPLIED",
    "CompactionRecord",
    "EventBus",
    "Hooks",
    "Metrics",
    "PostCompactEvent",
    "PreCompactEvent",
    "Trigger",
]
