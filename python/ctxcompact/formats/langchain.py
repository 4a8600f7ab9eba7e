"""LangChain messages (``pip install 'ctxcompact[langchain]'``).

``BaseMessage`` lists go through LangChain's own OpenAI conversion
(``convert_to_openai_messages`` / ``convert_to_messages``), so content,
tool calls, tool results and names map exactly as LangChain defines them;
message ids and the LangChain-only fields (``additional_kwargs``,
``response_metadata``, ``usage_metadata``) are kept under ``source`` and
restored on the way back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcompact._extras import from_extra
from ctxcompact.errors import FormatError
from ctxcompact.formats.chat import from_openai_chat, to_openai_chat
from ctxcompact.formats.views import View, to_model_chat
from ctxcompact.models import Session
from ctxcompact.policy import Policy

_KEPT = ("id", "additional_kwargs", "response_metadata", "usage_metadata")


def _lc() -> Any:
    return from_extra("langchain_core.messages", "langchain",
                      "LangChain messages need langchain-core", FormatError)  # fmt: skip


def from_langchain(messages: Sequence[Any], session_id: str = "session") -> Session:
    lc = _lc()
    if not all(isinstance(m, lc.BaseMessage) for m in messages):
        raise FormatError("from_langchain takes a list of langchain_core BaseMessage objects")
    chat = lc.convert_to_openai_messages(list(messages))
    kept = []
    for m, c in zip(messages, chat):
        extra = {k: getattr(m, k) for k in _KEPT if getattr(m, k, None)}
        kept.append({**c, **({"langchain": extra} if extra else {})})
    return from_openai_chat(kept, session_id)


def to_langchain(
    session: Session, *, view: View = "full", policy: Policy | None = None
) -> list[Any]:
    """LangChain messages of ``session``; ``view="model"``: what the model is sent
    (placeholders, from the latest compaction on; ``formats.views``)."""
    lc = _lc()
    if view != "full":
        return list(lc.convert_to_messages(to_model_chat(session, view, policy)))
    chat = to_openai_chat(session)
    extras = [m.pop("langchain", {}) for m in chat]
    out = lc.convert_to_messages(chat)
    for message, extra in zip(out, extras):
        for key, value in extra.items():
            setattr(message, key, value)
    return list(out)


__all__ = ["from_langchain", "to_langchain"]
