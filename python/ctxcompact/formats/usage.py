"""A recorded OpenAI ``usage`` object as the canonical ``TokenUsage``: one rule
for every reader that keeps one (a Chat Completions reply's usage on an
OpenAI chat log's assistant message, a Responses item's, OpenHands'
``model_response.usage``), the Python side of ``rust/src/ingest/usage.rs``.

Prompt tokens are split as OpenCode records them: the uncached input, and
the cache reads and writes. Chat counts ``prompt_tokens`` with
``prompt_tokens_details.cached_tokens`` and ``.cache_write_tokens``
(LiteLLM's ``cache_read_input_tokens`` and ``cache_creation_input_tokens``
first, when it passes them on); Responses ``input_tokens`` with
``input_tokens_details``' same two. ``reasoning`` is
``completion_tokens_details.reasoning_tokens`` (Responses:
``output_tokens_details``), the part of the output spent thinking.
A count that is there but no non-negative integer below 2**64 is a
``FormatError`` naming it; a count that is absent or null is 0, as is a
details object that is absent, null or no object; a ``usage`` that is no
object is no record (``None``), as Anthropic's. The live replies
(``live.replies``) read a model's reply by this same rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ctxcompact.errors import FormatError
from ctxcompact.models import CacheUsage, TokenUsage

#: By API: the input and output counts, and the objects holding the cache
#: counts and the reasoning count.
_KEYS = {
    "chat": ("prompt_tokens", "completion_tokens", "prompt_tokens_details",
             "completion_tokens_details"),
    "responses": ("input_tokens", "output_tokens", "input_tokens_details",
                  "output_tokens_details"),
}  # fmt: skip


def usage_count(usage: Mapping[str, Any], key: str, where: str) -> int:
    """``usage[key]``: 0 when absent or null, else a non-negative integer."""
    value = usage.get(key)
    if value is None:
        return 0
    # below 2**64, as the native reader (and every count column) holds them
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise FormatError(f"{where}.{key} must be a non-negative integer, got {value!r}")
    return value


def openai_usage(
    usage: Any, where: str, api: Literal["chat", "responses"] = "chat"
) -> TokenUsage | None:
    """``usage`` (at ``where``, for error messages) as ``TokenUsage``, or
    ``None`` when it is no object."""
    if not isinstance(usage, Mapping):
        return None
    input_key, output_key, details_key, output_details_key = _KEYS[api]

    def detail(key: str, name: str) -> int:
        details = usage.get(key)
        return usage_count(details, name, f"{where}.{key}") if isinstance(details, Mapping) else 0

    cached, written = (
        detail(details_key, "cached_tokens"),
        detail(details_key, "cache_write_tokens"),
    )
    read = usage_count(usage, "cache_read_input_tokens", where) or cached
    write = usage_count(usage, "cache_creation_input_tokens", where) or written
    prompt = usage_count(usage, input_key, where)
    return TokenUsage(
        input=max(0, prompt - read - write),
        output=usage_count(usage, output_key, where),
        reasoning=detail(output_details_key, "reasoning_tokens"),
        cache=CacheUsage(read=read, write=write),
    )


__all__ = ["openai_usage", "usage_count"]
