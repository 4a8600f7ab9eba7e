"""The contract between the compaction agent and a model API.

A summary request is plain data (system prompt + OpenAI-style chat messages,
no tools ever); an adapter turns it into one API call and drains the
response, streamed or not, into text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxcompact.errors import SummaryClientError
from ctxcompact.scans.chat import content_text


@dataclass(frozen=True)
class SummaryRequest:
    system: str
    #: OpenAI Chat Completions messages; the last one is the summary request.
    messages: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    #: Per-attempt timeout and retries the summarizer takes from its config
    #: (``timeout_s`` / ``max_retries``); a client applies them unless it was
    #: given its own. None: the client's defaults.
    timeout_s: float | None = None
    max_retries: int | None = None


def tools_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with tool calls and results as plain text turns, for APIs
    that refuse tool blocks in a request defining no tools (Anthropic's
    Messages API: "Requests which include `tool_use` or `tool_result` blocks
    must define tools"); the compaction agent's request never defines any."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            text = content_text(m.get("content"))
            lines = [text] if text else []
            for call in m["tool_calls"]:
                fn = call.get("function") or {}
                names[str(call.get("id"))] = str(fn.get("name") or "")
                args = fn.get("arguments")
                args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                lines.append(f"[tool call {fn.get('name') or ''} {args}]")
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif m.get("role") == "tool":
            call_id = str(m.get("tool_call_id"))
            result = content_text(m.get("content"))
            name = names.get(call_id, call_id)
            out.append({"role": "user", "content": f"[tool result of {name}]\n{result}"})
        else:
            out.append(m)
    return out


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


#: What an adapter-made SDK client uses when neither the adapter nor a request says.
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 2


class SdkClient:
    """What the SDK adapters share: lazily made sync/async SDK clients with
    the same options, and closing them. Subclasses name the SDK classes.

    Timeout and retries, highest first: ``timeout=`` / ``max_retries=`` given
    here; the request's (the summarizer's config: ``timeout_s``,
    ``max_retries``); 120 s and 2. An SDK object passed as ``client`` /
    ``async_client`` is used as it was configured. Given only ``client``, the
    async path calls it in a worker thread (never an async SDK client made
    with other settings); given only ``async_client``, the sync path fails
    with ``SummaryClientError`` (pass ``client`` too, or use the async API).
    """

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        async_client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.stream = stream
        self._options: dict[str, Any] = {"base_url": base_url, "api_key": api_key}
        self._explicit: dict[str, Any] = {
            k: v for k, v in (("timeout", timeout), ("max_retries", max_retries)) if v is not None
        }
        self._client = client
        self._async_client = async_client
        self._own = client is None
        self._own_async = async_client is None

    def _make(self, asynchronous: bool) -> Any:
        raise NotImplementedError

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        if not self._own_async and self._own:
            # Making a sync SDK client here would drop the async one's base_url and key.
            raise SummaryClientError(
                f"{type(self).__name__} was given only an async_client: pass client= "
                "(the sync SDK client) too, or use the async API"
            )
        return self._complete(request)

    async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
        if self._own_async and not self._own:
            # Only a configured sync SDK client was given: use it, off the event
            # loop, not an async client made without its base_url and key.
            return await asyncio.to_thread(self._complete, request)
        return await self._acomplete(request)

    # What a subclass names: the SDK's call, its parameters, and how a reply
    # becomes a ``SummaryResponse``: whole (``_reply``), or its streamed
    # events drained (``_drain()``: a new accumulator, ``add(event)``,
    # ``response()``).
    _reply: Callable[[Any], SummaryResponse]
    _drain: Callable[[], Any]

    def _create(self, sdk: Any) -> Any:
        raise NotImplementedError

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _complete(self, request: SummaryRequest) -> SummaryResponse:
        result = self._create(self.sdk_for(request))(**self._params(request))
        if not self.stream:
            return self._reply(result)
        drain = self._drain()
        for event in result:
            drain.add(event)
        response: SummaryResponse = drain.response()
        return response

    async def _acomplete(self, request: SummaryRequest) -> SummaryResponse:
        sdk = self.sdk_for(request, asynchronous=True)
        result = await self._create(sdk)(**self._params(request))
        if not self.stream:
            return self._reply(result)
        drain = self._drain()
        async for event in result:
            drain.add(event)
        response: SummaryResponse = drain.response()
        return response

    def _sdk_options(self) -> dict[str, Any]:
        """Constructor options for an SDK client this adapter makes."""
        defaults = {"timeout": DEFAULT_TIMEOUT_S, "max_retries": DEFAULT_MAX_RETRIES}
        return {**self._options, **defaults, **self._explicit}

    def sdk_for(self, request: SummaryRequest, *, asynchronous: bool = False) -> Any:
        """The SDK client for one call, with the request's timeout and retries
        unless this adapter was given its own (or the SDK client was passed in)."""
        base = self.async_client if asynchronous else self.client
        if not (self._own_async if asynchronous else self._own):
            return base
        wanted = {"timeout": request.timeout_s, "max_retries": request.max_retries}
        options = {k: v for k, v in wanted.items() if v is not None and k not in self._explicit}
        # with_options copies the client around the same connection pool: cheap.
        return base.with_options(**options) if options else base

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


__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "AsyncSummaryClient",
    "SdkClient",
    "SummaryClient",
    "SummaryRequest",
    "SummaryResponse",
]
