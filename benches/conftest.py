"""Shared fixtures of the benchmarks: one generated transcript of >= 1M parts.

Run: ``pytest benches --benchmark-enable`` (see docs/benchmarks.md).
Size: ``CTXCOMPACT_BENCH_SESSIONS`` x 500 parts (default 2000 -> ~1M parts).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from ctxcompact.batch.synthetic import generate_table

# The test fixtures (tests/support: the throwaway PostgreSQL cluster) are not in the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Timings need one process: the tests' ``-n auto`` (pyproject addopts) is off here."""
    config.option.numprocesses = 0


SESSIONS = int(os.environ.get("CTXCOMPACT_BENCH_SESSIONS", "2000"))


@pytest.fixture(scope="session")
def measuring(request: pytest.FixtureRequest) -> bool:
    """True when the run takes timings (``--benchmark-enable``); False in the
    smoke run (pyproject's addopts disable them), where each benchmark runs
    once to show it works: an input repeated only to time it longer is not
    repeated there."""
    config = request.config
    return bool(config.getoption("benchmark_enable") or not config.getoption("benchmark_disable"))


@pytest.fixture(scope="session")
def table() -> pa.Table:
    return generate_table(SESSIONS, 500, seed=7, mean_output_chars=1500)


@pytest.fixture(scope="session")
def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The same transcript as Python dicts, for the pure-Python reference.

    Frozen out of the cyclic GC: otherwise every later allocation (the Rust
    runs' result objects included) pays for traversing millions of dicts.
    """
    rows = table.to_pylist()
    gc.collect()
    gc.freeze()
    return rows


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the pure-Python reference benchmarks last.

    Their input (``rows``: millions of dicts, several GB of Python heap) stays
    alive until the session ends, and with it in the process every later Rust
    scan measured up to 4x slower (allocation and cache effects that no Rust
    user has). Same run, same data: only the order changes.
    """
    items.sort(key=lambda item: "reference" in item.name)
