"""Shared fixtures: local servers speaking the OpenAI and Anthropic wire formats."""

from __future__ import annotations

from collections.abc import Iterator

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
