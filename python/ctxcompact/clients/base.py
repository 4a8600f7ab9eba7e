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


class SdkClient:
    """What the SDK adapters share: lazily made sync/async SDK clients with
    the same options, and closing them. Subclasses name the SDK classes."""

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        async_client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.stream = stream
        self._options = {
            "base_url": base_url,
            "api_key": api_key,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._client = client
        self._async_client = async_client

    def _make(self, asynchronous: bool) -> Any:
        raise NotImplementedError

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make(asynchronous=False)
        return self._client

    @property
    def async_client(self) -> Any:
        if self._async_client is None:
            self._async_client = self._make(asynchronous=True)
        return self._async_client

    def close(self) -> None:
        """Close the sync SDK client's connections (if one was made)."""
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close the async SDK client's connections (if one was made)."""
        if self._async_client is not None:
            await self._async_client.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["AsyncSummaryClient", "SdkClient", "SummaryClient", "SummaryRequest", "SummaryResponse"]
