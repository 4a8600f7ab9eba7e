"""The contract between the compaction agent and a model API.

A summary request is plain data (system prompt + OpenAI-style chat messages,
no tools ever); an adapter turns it into one API call and drains the
response, streamed or not, into text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SummaryRequest:
    system: str
    #: OpenAI Chat Completions messages; the last one is the summary request.
    messages: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None


@dataclass(frozen=True)
class SummaryResponse:
    text: str
    #: ``"stop"``, ``"length"`` (cut off at max_tokens), or the provider's raw reason.
    finish: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class SummaryClient(Protocol):
    def complete(self, request: SummaryRequest) -> SummaryResponse: ...


@runtime_checkable
class AsyncSummaryClient(Protocol):
    async def acomplete(self, request: SummaryRequest) -> SummaryResponse: ...


__all__ = ["AsyncSummaryClient", "SummaryClient", "SummaryRequest", "SummaryResponse"]
