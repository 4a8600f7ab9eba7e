"""Model clients for the compaction agent.

``ctxcompact.clients.openai.OpenAIChatClient`` (extra ``openai``) and
``ctxcompact.clients.anthropic.AnthropicClient`` (extra ``anthropic``) import
their SDK only when used.
"""

from ctxcompact.clients.base import (
    AsyncSummaryClient,
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
)

__all__ = ["AsyncSummaryClient", "SummaryClient", "SummaryRequest", "SummaryResponse"]
