"""Summary client on the official ``anthropic`` SDK (Messages API).

The history arrives in the OpenAI chat format; it is converted to Anthropic
messages by the core's conversion (``to_anthropic_messages``), the one the
model input's Anthropic shape uses: system apart, tool calls as ``tool_use``
blocks, tool results as ``tool_result`` blocks in a user turn, consecutive
turns of one role merged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import ctxcompact._core as _core
from ctxcompact._extras import from_extra
from ctxcompact.clients.base import SdkClient, SummaryRequest, SummaryResponse, tools_as_text
from ctxcompact.errors import SummaryClientError

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _sdk() -> Any:
    return from_extra("anthropic", "anthropic", "the Anthropic client needs the anthropic SDK",
                      SummaryClientError)  # fmt: skip


def to_anthropic_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str, list[dict[str, Any]]]:
    """(system text, Anthropic messages) for OpenAI chat-format ``messages``.

    The core's conversion (``_core.anthropic_body``, rust/src/shapes.rs), the
    one ``to_model_messages(..., shape="anthropic")`` uses, so the two never
    disagree: system and developer texts lifted (joined by a blank line),
    tool calls as ``tool_use`` blocks, results as ``tool_result`` blocks,
    images as ``image`` blocks, consecutive turns of one role merged into one
    message, empty texts left out. One thing is the request's own: the API
    wants a user turn first, so a history that starts with the model's turn
    gets a ``(conversation)`` user turn before it."""
    body = json.loads(_core.anthropic_body(json.dumps(list(messages), default=str).encode()))
    system = "\n\n".join(block["text"] for block in body.get("system", []))
    out: list[dict[str, Any]] = body["messages"]
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation)"}]})
    return system, out


def _from_message(message: Any) -> SummaryResponse:
    if not hasattr(message, "content"):
        # The SDK hands back the body as it came when it is not JSON (a proxy's page).
        raise SummaryClientError(f"the server did not answer with a message: "
                                 f"{str(message)[:120]!r}")  # fmt: skip
    text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
    stop = message.stop_reason or "end_turn"
    return SummaryResponse(
        text=text,
        finish=_FINISH.get(stop, stop),
        input_tokens=message.usage.input_tokens,
        output_tokens=message.usage.output_tokens,
    )


class _Drain:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.stop: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.started = False

    def add(self, event: Any) -> None:
        kind = getattr(event, "type", "")
        self.started |= kind == "message_start"
        if kind == "message_start":
            self.input_tokens = event.message.usage.input_tokens
        elif kind == "content_block_delta" and getattr(event.delta, "type", "") == "text_delta":
            self.parts.append(event.delta.text)
        elif kind == "message_delta":
            self.stop = event.delta.stop_reason or self.stop
            if event.usage is not None:
                self.output_tokens = event.usage.output_tokens

    def response(self) -> SummaryResponse:
        if not self.started:
            # Not a cut summary: nothing the server sent was a message stream.
            raise SummaryClientError("the server sent no message_start event (not a "
                                     "Messages stream)")  # fmt: skip
        stop = self.stop or "max_tokens"  # no stop reason: the stream was cut
        return SummaryResponse(
            text="".join(self.parts),
            finish=_FINISH.get(stop, stop),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )


class AnthropicClient(SdkClient):
    """``complete`` / ``acomplete`` through ``messages.create`` (streamed by default)."""

    def _make(self, asynchronous: bool) -> Any:
        sdk = _sdk()
        return (sdk.AsyncAnthropic if asynchronous else sdk.Anthropic)(**self._sdk_options())

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        # The compaction agent defines no tools: calls and results go as text.
        system, messages = to_anthropic_messages(tools_as_text(request.messages))
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "system": "\n\n".join(s for s in (request.system, system) if s),
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self.stream:
            params["stream"] = True
        return params

    def _create(self, sdk: Any) -> Any:
        return sdk.messages.create

    _reply = staticmethod(_from_message)
    _drain = _Drain


__all__ = ["AnthropicClient", "to_anthropic_messages"]
