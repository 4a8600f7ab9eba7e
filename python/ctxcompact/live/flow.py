"""The compaction flow, written once, driven sync or async.

A compaction is always: prepare (read the session, prune, pick what to
summarize) -> pre-compact hook (may cancel or add instructions) ->
summarize -> finish (the summary messages and the record) -> commit ->
events -> post-compact hook. Each family (the queued task in
``compactor.py``, the split point in ``split.py``) and the loop's
``before_call`` write their steps once, as a generator that yields the
effects it needs done and receives their results. ``run`` performs the
effects in the calling thread; ``arun`` performs them from an event loop:
blocking work (store I/O, scans) in a worker thread, hooks and summary
clients through their async entry points. The order of the steps, the
cancellation and the error paths therefore cannot differ between the sync
and the async API.

An exception raised by an effect is thrown back into the generator at the
``yield``, so a flow handles it (or lets it pass) exactly as it would a
direct call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import ctxcompact.live.events as ev
from ctxcompact.errors import InputTypeError

if TYPE_CHECKING:
    from ctxcompact.live.summary import Summarizer

T = TypeVar("T")


@dataclass(frozen=True)
class Blocking:
    """Work that blocks (store I/O, scans): inline when sync, a worker thread when async."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: Work that, once begun, is seen through (a commit): a worker thread
    #: cannot be stopped, so ``arun`` cancelled here waits for it and drives
    #: the flow to its end (events, post-compact hooks) before re-raising.
    settle: bool = False


@dataclass(frozen=True)
class PreCompact:
    """Run the pre-compact hooks; the result is the (possibly changed) event."""

    hooks: ev.Hooks
    event: ev.PreCompactEvent


@dataclass(frozen=True)
class PostCompact:
    hooks: ev.Hooks
    event: ev.PostCompactEvent


@dataclass(frozen=True)
class Summarize:
    """Ask the compaction agent; the result is a ``SummaryOutcome``."""

    summarizer: Summarizer
    history: Sequence[Any]
    options: Mapping[str, Any]


Effect = Blocking | PreCompact | PostCompact | Summarize
#: A flow yields effects, is sent each effect's result, and returns ``T``.
Flow = Generator[Effect, Any, T]


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Blocking:
    return Blocking(fn, args, kwargs)


def settling(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Blocking:
    """``blocking`` work a cancellation does not cut short (see ``Blocking.settle``)."""
    return Blocking(fn, args, kwargs, settle=True)


def wrong_signature(
    obj: Any,
    name: str,
    reference: type,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    error: TypeError,
) -> InputTypeError | None:
    """The typed error for a method ``name`` of ``obj`` (a summarizer, a store)
    that cannot take the one call ctxcompact makes (``error`` raised by that
    call), or None when ``error`` came from inside it. ``reference``: the
    ``ctxcompact.live`` class whose signature the call follows. Looked at only
    after a TypeError: the call itself is never adapted to the signature."""
    try:
        inspect.signature(getattr(obj, name)).bind(*args, **kwargs)
    except TypeError:
        pass
    except ValueError:  # no signature to read: the error says what it can
        return None
    else:
        return None
    expected = inspect.signature(getattr(reference, name))
    params = [p.replace(annotation=p.empty) for p in expected.parameters.values()]
    shown = expected.replace(parameters=params[1:], return_annotation=expected.empty)
    return InputTypeError(
        f"{type(obj).__name__}.{name} cannot take the call ctxcompact makes ({error}); "
        f"it must accept {name}{shown}, as ctxcompact.live.{reference.__name__} does"
    )


def _summarize_error(effect: Summarize, name: str, error: TypeError) -> InputTypeError | None:
    from ctxcompact.live.summary import Summarizer

    return wrong_signature(effect.summarizer, name, Summarizer, (effect.history,),
                           effect.options, error)  # fmt: skip


def _perform(effect: Effect) -> Any:
    if isinstance(effect, Blocking):
        return effect.fn(*effect.args, **effect.kwargs)
    if isinstance(effect, PreCompact):
        return effect.hooks.run_pre_compact(effect.event)
    if isinstance(effect, PostCompact):
        return effect.hooks.run_post_compact(effect.event)
    try:
        return effect.summarizer.summarize(effect.history, **effect.options)
    except TypeError as e:
        wrong = _summarize_error(effect, "summarize", e)
        if wrong is None:
            raise
        raise wrong from e


async def _aperform(effect: Effect) -> Any:
    if isinstance(effect, Blocking):
        return await asyncio.to_thread(effect.fn, *effect.args, **effect.kwargs)
    if isinstance(effect, PreCompact):
        return await effect.hooks.arun_pre_compact(effect.event)
    if isinstance(effect, PostCompact):
        return await effect.hooks.arun_post_compact(effect.event)
    try:
        call = effect.summarizer.asummarize(effect.history, **effect.options)
    except TypeError as e:  # the arguments are bound when the coroutine is made
        wrong = _summarize_error(effect, "asummarize", e)
        if wrong is None:
            raise
        raise wrong from e
    return await call


def run(flow: Flow[T]) -> T:
    """Drive ``flow`` to its result in the calling thread."""
    try:
        effect = next(flow)
        while True:
            try:
                result = _perform(effect)
            except Exception as e:
                effect = flow.throw(e)
            else:
                effect = flow.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


async def arun(flow: Flow[T]) -> T:
    """Drive ``flow`` to its result without blocking the event loop.

    Cancelled during a settling step (the commit), it waits for that step,
    finishes the flow (so a stored compaction gets its events and
    post-compact hooks), then raises ``CancelledError``.
    """
    cancelled: asyncio.CancelledError | None = None
    try:
        effect = next(flow)
        while True:
            try:
                if isinstance(effect, Blocking) and effect.settle:
                    work = asyncio.ensure_future(_aperform(effect))
                    try:
                        result = await asyncio.shield(work)
                    except asyncio.CancelledError as e:
                        if work.cancelled():
                            raise
                        cancelled = cancelled or e
                        result = await _settled(work)
                else:
                    result = await _aperform(effect)
            except Exception as e:
                effect = flow.throw(e)
            else:
                effect = flow.send(result)
    except StopIteration as done:
        if cancelled is not None:
            raise cancelled from None
        value: T = done.value
        return value
    except Exception as e:
        if cancelled is not None:
            raise cancelled from e
        raise


async def _settled(work: asyncio.Future[Any]) -> Any:
    """``work``'s result, waited for through further cancellations."""
    while True:
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.cancelled():
                raise


__all__ = [
    "Blocking",
    "Effect",
    "Flow",
    "PostCompact",
    "PreCompact",
    "Summarize",
    "arun",
    "blocking",
    "run",
    "settling",
]
