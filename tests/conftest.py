"""Shared fixtures: local servers speaking the OpenAI and Anthropic wire formats,
a throwaway PostgreSQL server; the ``slow`` marker's full sweeps."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import settings
from support import sweeps
from support.postgres import PostgresUnavailable, TemporaryPostgres
from support.servers import FakeAnthropicServer, FakeOpenAIServer
from support.sweeps import sweep


def pytest_configure(config: pytest.Config) -> None:
    # `pytest -m slow` runs the slow suites and every property test at its full count
    # (support/sweeps.py); the default run (addopts: -m "not slow") a tenth of it.
    sweeps.FULL = config.getoption("markexpr", "").strip() == "slow"
    # the property tests that name no count: hypothesis's default 100, swept the same way
    settings.register_profile("ctxcompact", parent=settings.default, max_examples=sweep(100))
    settings.load_profile("ctxcompact")


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if sweeps.FULL:
        for item in items:
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def postgres() -> Iterator[TemporaryPostgres]:
    """One PostgreSQL cluster for the run (Debian's server binaries, a temp dir).

    Skipped where the binaries are missing, except on CI, which installs them
    (.ci/run) and must run the PostgreSQL tests.
    """
    try:
        server = TemporaryPostgres()
        server.start()
    except PostgresUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs postgresql (.ci/run), but: {e}")
        pytest.skip(str(e))
    yield server
    server.stop()


@pytest.fixture
def pg_schema(postgres: TemporaryPostgres) -> tuple[str, str]:
    """(conninfo, a schema of the test's own): the tests share one cluster."""
    return postgres.conninfo, f"t_{uuid.uuid4().hex[:16]}"


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def prune_table() -> pa.Table:
    """Four sessions for prune (tests/tables.py: ``prune_rows``)."""
    from tables import build, prune_rows

    return build(prune_rows())


@pytest.fixture
def pivot_table() -> pa.Table:
    """Sessions with and without pivots (tests/tables.py: ``pivot_rows``)."""
    from tables import build, pivot_rows

    return build(pivot_rows())
