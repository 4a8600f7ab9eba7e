"""Scans work in a process forked after the parent ran scans of its own.

Python's multiprocessing forks by default on Linux (and `tune` runs its
workers that way). A forked child keeps a thread pool's bookkeeping but not
its threads, so a scan that split its work over a pool started before the
fork would wait forever. The core builds its pools per process.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.batch.synthetic import generate_table


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate_table(30, 200, seed=11, mean_output_chars=800)


def _scan(table: pa.Table, threads: int | None, out: Any) -> None:
    pruned = cc.prune(table, "swe-agent", threads=threads).pruned
    tokens = cc.estimate_messages(table, threads=threads).total
    out.put((pruned, tokens))


@pytest.mark.parametrize("threads", [None, 2])
def test_scans_in_a_forked_child_finish_and_agree(table: pa.Table, threads: int | None) -> None:
    # The parent's pools exist before the fork (every size the child will use).
    want = (
        cc.prune(table, "swe-agent", threads=threads).pruned,
        cc.estimate_messages(table, threads=threads).total,
    )
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_scan, args=(table, threads, out))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("a scan in the forked child never finished")
    assert child.exitcode == 0
    assert out.get(timeout=5) == want
