"""Compactions per second on the SQLite and PostgreSQL stores, 1, 4 and 16
worker threads; and on PostgreSQL, 1 and 2 worker processes.

A worker is a thread with its own store instance (its own connections, as a
worker process has) compacting sessions of its own: request a compaction,
then ``process_pending`` (load, prune, summary from an instant model, one
commit). Every session holds 8 turns of tool output (~60k tokens). SQLite
serializes every writer of its file; PostgreSQL locks one session row, so
workers on different sessions commit side by side.

    pytest benches/test_stores.py --benchmark-enable

A worker process (``test_compactions_per_second_processes``) is what a
platform runs: its own interpreter (no GIL shared with the others), its own
store and connections; the wall time runs from the first worker's start to
the last one's end, as each process reports them.

The PostgreSQL server is a throwaway cluster of the machine's ``postgresql``
binaries (``tests/support/postgres.py``), fsync off like the tests'.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.live import Compactor, Summarizer
from ctxcompact.live.store import SQLiteStore, new_id
from ctxcompact.models import (
    AssistantMessage,
    MessageWithParts,
    Part,
    ToolState,
    UserMessage,
)
from support.postgres import PostgresUnavailable, TemporaryPostgres

#: Compactions per round, split evenly over the workers; the smoke run
#: (timings off) does one per worker of the most workers (``compactions``).
COMPACTIONS = 64
SMOKE_COMPACTIONS = 16
LIMITS = {"context": 100_000}


class Instant:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse("## Summary\nwhat was done", "stop")


@pytest.fixture(scope="module")
def postgres() -> Iterator[TemporaryPostgres]:
    try:
        with TemporaryPostgres() as server:
            yield server
    except PostgresUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs postgresql (.ci/run), but: {e}")
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def compactions(measuring: bool) -> int:
    return COMPACTIONS if measuring else SMOKE_COMPACTIONS


def turns(n: int = 8, chars: int = 30_000) -> list[MessageWithParts]:
    out = []
    for i in range(n):
        text = Part(id=new_id("prt"), type="text", text=f"step {i}")
        user = MessageWithParts(info=UserMessage(id=new_id("msg")), parts=[text])
        state = ToolState(status="completed", input={"filePath": f"f{i}.py"}, output="x" * chars)
        tool = Part(id=new_id("prt"), type="tool", tool="read", callID=new_id("call"), state=state)
        info = AssistantMessage(id=new_id("msg"), parentID=user.id, finish="tool-calls")
        out += [user, MessageWithParts(info=info, parts=[tool])]
    return out


def open_store(backend: str, where: Any) -> Any:
    if backend == "sqlite":
        return SQLiteStore(where)
    from ctxcompact.live.postgres import PostgresStore

    return PostgresStore(where[0], schema=where[1])


def prepare(backend: str, where: Any, workers: int, compactions: int) -> list[list[str]]:
    """Fresh sessions with a pending compaction each, split among the workers."""
    store = open_store(backend, where)
    compactor = Compactor(store, Summarizer(Instant()), limits=LIMITS)
    ids = []
    for _ in range(compactions):
        sid = store.create_session()
        for m in turns():
            store.append_message(sid, m)
        compactor.request_compaction(sid)
        ids.append(sid)
    store.close()
    return [ids[w::workers] for w in range(workers)]


def run(backend: str, where: Any, shares: list[list[str]]) -> float:
    """Every worker compacts its share; returns the wall time."""
    stores = [open_store(backend, where) for _ in shares]
    barrier = threading.Barrier(len(shares) + 1)
    errors: list[BaseException] = []

    def work(store: Any, share: list[str]) -> None:
        compactor = Compactor(store, Summarizer(Instant()), limits=LIMITS)
        barrier.wait()
        try:
            for sid in share:
                assert compactor.process_pending(sid) is not None
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=a) for a in zip(stores, shares, strict=True)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for s in stores:
        s.close()
    if errors:
        raise errors[0]
    return wall


@pytest.mark.benchmark(group="store-compactions")
@pytest.mark.parametrize("workers", [1, 4, 16])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_compactions_per_second(
    benchmark: Any,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    backend: str,
    workers: int,
    compactions: int,
) -> None:
    if backend == "sqlite":
        where: Any = tmp_path / "store.db"
    else:
        server = request.getfixturevalue("postgres")
        where = (server.conninfo, f"b_{uuid.uuid4().hex[:12]}")
    walls: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (prepare(backend, where, workers, compactions),), {}

    def timed(shares: list[list[str]]) -> None:
        walls.append(run(backend, where, shares))

    benchmark.pedantic(timed, setup=setup, rounds=3)
    benchmark.extra_info["compactions_per_s"] = round(compactions / min(walls), 1)
    # every pending task was completed exactly once
    with open_store(backend, where) as store:
        assert sum(len(store.records(s)) for s in store.session_ids()) == len(walls) * compactions


def _process_worker(where: Any, share: list[str], barrier: Any, times: Any) -> None:
    """Compacts ``share``; with ``where`` None, the control: pure Python work
    (no I/O) of about the same length, what the machine's cores give two
    CPU-bound processes in this run."""
    store = compactor = None
    if where is not None:
        store = open_store("postgres", where)
        compactor = Compactor(store, Summarizer(Instant()), limits=LIMITS)
        store.records(share[0])  # connected before the clock starts, as a long-lived worker is
    barrier.wait()
    start = time.perf_counter()  # CLOCK_MONOTONIC: one clock for every process
    try:
        for sid in share:
            if compactor is None:
                sum(range(300_000))
            else:
                assert compactor.process_pending(sid) is not None
    finally:
        times.put((start, time.perf_counter()))
        if store is not None:
            store.close()


def run_processes(where: Any, shares: list[list[str]]) -> float:
    """Every worker process compacts its share; returns the wall time."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(shares))
    times = context.Queue()
    workers = [context.Process(target=_process_worker, args=(where, share, barrier, times))
               for share in shares]  # fmt: skip
    for w in workers:
        w.start()
    spans = [times.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    assert not failed, f"a worker process failed (exit codes {failed})"
    return max(end for _, end in spans) - min(start for start, _ in spans)


@pytest.mark.benchmark(group="store-compactions-processes")
@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("work", ["postgres", "cpu-bound control"])
def test_compactions_per_second_processes(
    benchmark: Any, request: pytest.FixtureRequest, processes: int, work: str, compactions: int
) -> None:
    """Compactions per second with 1 and 2 worker processes on PostgreSQL;
    beside them the same split of pure Python work, the scaling this machine
    gives CPU-bound processes in the same run (on a shared machine, less
    than 2x)."""
    where = None
    if work == "postgres":
        server = request.getfixturevalue("postgres")
        where = (server.conninfo, f"p_{uuid.uuid4().hex[:12]}")
    walls: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        if where is None:
            return ([[str(i) for i in range(compactions)][w::processes]
                     for w in range(processes)],), {}  # fmt: skip
        return (prepare("postgres", where, processes, compactions),), {}

    def timed(shares: list[list[str]]) -> None:
        walls.append(run_processes(where, shares))

    benchmark.pedantic(timed, setup=setup, rounds=3)
    benchmark.extra_info["per_s"] = round(compactions / min(walls), 1)
    if where is not None:
        with open_store("postgres", where) as store:
            done = sum(len(store.records(s)) for s in store.session_ids())
            assert done == len(walls) * compactions
