"""Every scan releases the GIL: another Python thread runs while it works.

A ticker thread counts in a tight loop. With a long switch interval, a call
that holds the GIL keeps the ticker frozen from the moment it starts until it
returns (the ticker gets 0 ticks in between); a call that releases it lets
the ticker run at once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import _core
from ctxcompact.batch.synthetic import generate_table
from gil_probe import ticks_during


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate_table(40, 500, seed=3, mean_output_chars=4000)


@pytest.fixture
def long_switch_interval() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.25)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def hold_the_gil() -> None:
    # A pure-Python loop never gives up the GIL before the switch interval.
    total = 0
    for i in range(20_000):
        total += i


SCANS: dict[str, Callable[[pa.Table], Any]] = {
    "prune": lambda t: _core.prune(t, threads=1),
    "pivot": lambda t: _core.pivot(t, threads=1),
    "pivot_ranges": lambda t: _core.pivot_ranges(t, threads=1),
    "estimate_messages": lambda t: _core.estimate_messages(t, threads=1),
    "estimate_tokens_array": lambda t: _core.estimate_tokens_array(
        t.column("output"), "opencode", 1
    ),
}


def test_the_probe_sees_a_call_that_holds_the_gil(long_switch_interval: None) -> None:
    assert ticks_during(hold_the_gil) == 0


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_releases_the_gil(name: str, table: pa.Table, long_switch_interval: None) -> None:
    assert ticks_during(lambda: SCANS[name](table)) > 0


def test_facade_scans_give_the_same_answers_while_another_thread_runs(table: pa.Table) -> None:
    expected = cc.prune(table).pruned
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(cc.prune(table).pruned)) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4
