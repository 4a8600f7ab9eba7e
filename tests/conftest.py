"""Shared fixtures: local servers speaking the OpenAI and Anthropic wire formats."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from ctxcompact.testing.servers import FakeAnthropicServer, FakeOpenAIServer


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
