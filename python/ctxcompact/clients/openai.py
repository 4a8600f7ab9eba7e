"""Summary client on the official ``openai`` SDK (Chat Completions).

Works with any OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...) via
``base_url``. No tools are ever sent: the compaction agent only writes.
"""

from __future__ import annotations

from typing import Any

from ctxcompact._extras import from_extra
from ctxcompact.clients.base import SdkClient, SummaryRequest, SummaryResponse
from ctxcompact.errors import SummaryClientError


def _sdk() -> Any:
    return from_extra("openai", "openai", "the OpenAI client needs the openai SDK",
                      SummaryClientError)  # fmt: skip


def _from_completion(completion: Any) -> SummaryResponse:
    if not hasattr(completion, "choices"):
        # The SDK hands back the body as it came when it is not JSON (a proxy's page).
        raise SummaryClientError(f"the server did not answer with a chat completion: "
                                 f"{str(completion)[:120]!r}")  # fmt: skip
    if not completion.choices:
        raise SummaryClientError("the chat completion has no choices")
    choice = completion.choices[0]
    usage = completion.usage
    return SummaryResponse(
        text=choice.message.content or "",
        finish=choice.finish_reason or "stop",
        input_tokens=usage.prompt_tokens if usage else None,
        output_tokens=usage.completion_tokens if usage else None,
    )


class _Drain:
    """Accumulates streamed chunks into one response."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.finish: str | None = None
        self.usage: Any = None
        self.chunks = 0

    def add(self, chunk: Any) -> None:
        self.chunks += 1
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage
        for choice in chunk.choices or []:
            if choice.delta and choice.delta.content:
                self.parts.append(choice.delta.content)
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def response(self) -> SummaryResponse:
        if self.chunks == 0:
            # Not a cut summary: nothing the server sent was a stream event.
            raise SummaryClientError("the server sent no stream events (not a chat "
                                     "completion stream)")  # fmt: skip
        return SummaryResponse(
            text="".join(self.parts),
            # A stream that ends without a finish reason was cut: treat it like one.
            finish=self.finish or "length",
            input_tokens=self.usage.prompt_tokens if self.usage else None,
            output_tokens=self.usage.completion_tokens if self.usage else None,
        )


class OpenAIChatClient(SdkClient):
    """``complete`` / ``acomplete`` through ``chat.completions.create``.

    ``stream=True`` (default) drains the streamed deltas into text, the way a
    long summary is best received; ``max_tokens_param`` may be set to
    ``"max_completion_tokens"`` for models that require it.
    """

    def __init__(self, model: str, *, max_tokens_param: str = "max_tokens", **options: Any) -> None:
        super().__init__(model, **options)
        self.max_tokens_param = max_tokens_param

    def _make(self, asynchronous: bool) -> Any:
        sdk = _sdk()
        return (sdk.AsyncOpenAI if asynchronous else sdk.OpenAI)(**self._sdk_options())

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [{"role": "system", "content": request.system}, *request.messages],
            self.max_tokens_param: request.max_tokens,
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    def _create(self, sdk: Any) -> Any:
        return sdk.chat.completions.create

    _reply = staticmethod(_from_completion)
    _drain = _Drain


__all__ = ["OpenAIChatClient"]
