"""Test support shipped for users' own tests: local servers speaking the
OpenAI and Anthropic wire protocols, synthetic transcripts, and the small
pure-Python reference of the exact semantics that the Rust core is checked
against."""

from ctxcompact.testing.servers import FakeAnthropicServer, FakeOpenAIServer, Received, Reply

__all__ = ["FakeAnthropicServer", "FakeOpenAIServer", "Received", "Reply"]
