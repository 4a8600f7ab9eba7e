"""A sync/async pair written once: both twins made from one function.

``driven`` and ``adriven`` turn one generator of steps (a ``flow.py`` flow,
a summary call's steps) into the sync and the async public function: the
generator carries the signature, the docstring and every step, and each
twin only names the driver that performs the steps (in the calling thread,
or from an event loop). ``threaded`` makes the async twin of a blocking
method. The twins keep the signature for mypy, IDEs and ``inspect``
(``typing.ParamSpec``), so their keywords are written once.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

T = TypeVar("T")
G = TypeVar("G")
S = TypeVar("S")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])


def driven(
    steps: Callable[P, G], name: str, run: Callable[[G], T], doc: str | None = None
) -> Callable[P, T]:
    """The sync twin: ``steps``' signature, ``run`` driving what it returns
    in the calling thread; ``doc``: the docstring (None: ``steps``')."""

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run(steps(*args, **kwargs))

    return _named(call, steps, name, doc)


def adriven(
    steps: Callable[P, G], name: str, arun: Callable[[G], Awaitable[T]], doc: str | None = None
) -> Callable[P, Coroutine[Any, Any, T]]:
    """The async twin: ``steps``' signature, ``arun`` driving what it returns."""

    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return await arun(steps(*args, **kwargs))

    return _named(call, steps, name, doc)


def threaded(
    method: Callable[Concatenate[S, P], T], name: str, doc: str
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The async twin of a blocking method: the same signature, the call made
    in a worker thread. It calls the instance's ``method`` by name, so a
    subclass's override is the one that runs."""
    sync_name = method.__name__

    async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, T] = getattr(self, sync_name)
        return await asyncio.to_thread(bound, *args, **kwargs)

    return _named(call, method, name, doc)


def _named(fn: F, like: Callable[..., Any], name: str, doc: str | None) -> F:
    """``fn`` as a public function named ``name``: ``like``'s module, place and
    parameters (no return annotation: ``like``'s is not the twin's)."""
    fn.__name__ = name
    place, dot, _ = like.__qualname__.rpartition(".")
    fn.__qualname__ = place + dot + name
    fn.__module__ = like.__module__
    fn.__doc__ = like.__doc__ if doc is None else doc
    signature = inspect.signature(like)
    fn.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=inspect.Signature.empty
    )
    return fn


__all__ = ["adriven", "driven", "threaded"]
