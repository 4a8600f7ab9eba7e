"""Session formats in and out: ``read`` / ``write`` any of ``FORMATS``.

Every format maps to the canonical model (OpenCode sessions, see
docs/formats.md) and back without loss; convert between two formats by
reading one and writing the other (``openai-chat`` is the common way out).
"""

from __future__ import annotations

from ctxcompact.formats.anthropic import (
    from_anthropic,
    from_claude_code,
    to_anthropic,
    to_claude_code,
)
from ctxcompact.formats.chat import (
    from_mini_swe_agent,
    from_openai_chat,
    from_swe_agent,
    from_tau_bench,
    to_mini_swe_agent,
    to_openai_chat,
    to_swe_agent,
    to_tau_bench,
)
from ctxcompact.formats.detect import FORMATS, detect_format, jsonl_format
from ctxcompact.formats.documents import (
    from_opencode_messages,
    read,
    read_document,
    session_from_json,
    to_opencode_messages,
)
from ctxcompact.formats.langchain import from_langchain, to_langchain
from ctxcompact.formats.openhands import from_openhands, to_openhands
from ctxcompact.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from ctxcompact.formats.reader import (
    FileReport,
    IngestResult,
    RejectedLine,
    iter_jsonl,
    iter_sessions,
    read_jsonl,
    read_sessions,
)
from ctxcompact.formats.responses import from_openai_responses, to_openai_responses
from ctxcompact.formats.writer import losses, write

__all__ = [
    "FORMATS",
    "FileReport",
    "IngestResult",
    "RejectedLine",
    "detect_format",
    "from_anthropic",
    "from_claude_code",
    "from_langchain",
    "from_mini_swe_agent",
    "from_openai_chat",
    "from_openai_responses",
    "from_opencode_messages",
    "from_openhands",
    "from_pydantic_ai",
    "from_swe_agent",
    "from_tau_bench",
    "iter_jsonl",
    "iter_sessions",
    "jsonl_format",
    "losses",
    "read",
    "read_document",
    "read_jsonl",
    "read_sessions",
    "session_from_json",
    "to_anthropic",
    "to_claude_code",
    "to_langchain",
    "to_mini_swe_agent",
    "to_openai_chat",
    "to_openai_responses",
    "to_opencode_messages",
    "to_openhands",
    "to_pydantic_ai",
    "to_swe_agent",
    "to_tau_bench",
    "write",
]
