"""A (pivot-filtered, pruned) session as the messages a model receives.

The core renders them (``_core.render_chat``, rust/src/view.rs) from the
session's part rows, by the rules its estimates read, so estimates and the
real model input agree; this module orchestrates (and caches, ``ViewCache``).
The placeholder strings are protocol constants that other runtimes read.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, overload

import pyarrow as pa

import ctxcompact._core as _core
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.estimators import EXACT_METHODS
from ctxcompact.models import AssistantMessage, MessageWithParts, Session, SessionInfo

if TYPE_CHECKING:
    from ctxcompact.policy import Policy

CLEARED_TOOL_OUTPUT = _core.CLEARED_TOOL_OUTPUT  # "[Old tool result content cleared]"
INTERRUPTED_TOOL = _core.INTERRUPTED_TOOL  # "[Tool execution was interrupted]"
COMPACTION_QUESTION = _core.COMPACTION_QUESTION  # "What did we do so far?"


@overload
def to_model_messages(
    session: Session,
    *,
    system: str | None = None,
    policy: Policy | str | Any = None,
    shape: Literal["chat", "responses"] = "chat",
) -> list[dict[str, Any]]: ...
@overload
def to_model_messages(
    session: Session,
    *,
    system: str | None = None,
    policy: Policy | str | Any = None,
    shape: Literal["anthropic"],
) -> dict[str, Any]: ...
def to_model_messages(
    session: Session,
    *,
    system: str | None = None,
    policy: Policy | str | Any = None,
    shape: str = "chat",
) -> list[dict[str, Any]] | dict[str, Any]:
    """OpenAI Chat Completions messages for ``session`` with the placeholder rules applied.

    ``shape``: ``"chat"`` (default), ``"responses"`` (OpenAI Responses input
    items) or ``"anthropic"`` (``{"system": [text blocks], "messages": [...]}``
    for the Messages API, ``system`` left out when there is none): the same
    texts, calls and results in the same order (rust/src/shapes.rs). Reasoning
    is sent only in the chat shape (no provider signature or id is stored).

    Pass the output of ``filter_pivot`` to send only what follows the latest
    compaction. Step markers and ignored text are not sent; reasoning only
    for the newest ``policy.keep_thinking`` assistant messages (as
    ``reasoning_content``). ``policy`` (a ``Policy``, preset name, policy file
    or dict): its rendering options (placeholder, clear_inputs,
    truncate_output, keep_thinking); OpenCode's view when None.
    """
    if not isinstance(session, Session):
        raise InputTypeError(
            f"to_model_messages takes a Session, got {type(session).__name__}"
            + (" (Session.model_validate(it) first)" if isinstance(session, dict) else "")
        )
    if not isinstance(shape, str):
        raise ConfigError(f"shape must be a string, got {type(shape).__name__}")
    policy = _policy(policy)
    if shape == "anthropic":
        # The whole chat list converted by the core (shapes::anthropic_body):
        # the system prompt lifted, consecutive turns of one role merged, as
        # clients.anthropic.to_anthropic_messages converts a runtime's list.
        chat = to_model_messages(session, system=system, policy=policy)
        body: dict[str, Any] = json.loads(_core.anthropic_body(json.dumps(chat).encode()))
        return body
    messages: list[dict[str, Any]] = []
    if system:
        messages.append(system_message(system, shape))
    for shown in _render(session, policy, shape=shape):
        messages.extend(shown)
    return messages


#: The rendering options of OpenCode's view (no policy).
_OPENCODE: dict[str, Any] = {"clear_inputs": False, "truncate_output": None,
                             "placeholder": "opencode", "keep_thinking": 0}  # fmt: skip


def _render(
    session: Session,
    policy: Policy | None,
    thinking: list[bool] | None = None,
    *,
    shape: str = "chat",
) -> list[list[dict[str, Any]]]:
    """Each message's model messages, rendered by the core (``_core.render_chat``,
    rust/src/view.rs) from the session's part rows. ``thinking``: per message,
    whether it sends its reasoning (default: the newest ``policy.keep_thinking``
    assistant messages)."""
    from ctxcompact.transcript import Transcript

    return _render_rows(Transcript.from_sessions([session]).to_arrow(), policy, thinking,
                        shape=shape)  # fmt: skip


def _render_rows(
    table: Any, policy: Policy | None, thinking: list[bool] | None, *, shape: str = "chat"
) -> list[list[dict[str, Any]]]:
    """``_render`` of a session's part rows (``sessions_to_table``)."""
    options = _OPENCODE if policy is None else policy.render_options()
    rendered = _core.render_chat(table, **options, thinking=thinking, threads=1, shape=shape)
    return [json.loads(b) for b in rendered]


def _policy(policy: Policy | str | Any) -> Policy | None:
    if policy is None:
        return None
    from ctxcompact.policy import Policy as _Policy

    return policy if isinstance(policy, _Policy) else _Policy.load(policy)


def system_message(system: str, shape: str = "chat") -> dict[str, Any]:
    """The runtime's own system prompt as the view's first message."""
    if shape == "responses":
        return {"type": "message", "role": "system", "content": system}
    return {"role": "system", "content": system}


def _thinking(session: Session, policy: Policy | None) -> list[bool]:
    """Per message, whether it sends its reasoning (the newest
    ``policy.keep_thinking`` assistant messages do: ``_core.thinking_flags``)."""
    keep = 0 if policy is None else policy.keep_thinking
    steps = [isinstance(m.info, AssistantMessage) for m in session.messages]
    return list(_core.thinking_flags(steps, keep)) if keep else [False] * len(steps)


def message_view(
    message: MessageWithParts, policy: Policy | None, *, thinking: bool = False
) -> list[dict[str, Any]]:
    """The model messages of one stored message (none, one, or an assistant
    step with its tool results): what ``to_model_messages`` sends for it."""
    alone = Session(info=SessionInfo(id=message.info.sessionID or "s"), messages=[message])
    (shown,) = _render(alone, policy, [thinking])
    return shown


class ViewCache:
    """Each message's model messages and their estimate, kept between calls
    on one session: valid while its stored messages only grow (a new cache
    after any other change: prune marks, a compaction, a cancelled marker).
    ``view`` gives what ``to_model_messages`` gives, and its estimate
    (``chat_tokens``), rendering and estimating only the messages it has
    not seen. The messages it returns are copies: a caller may change them."""

    def __init__(self, policy: Policy | str | Any, method: Any, overhead: int) -> None:
        self.policy = _policy(policy)
        self.method, self.overhead = method, overhead
        self._views: dict[tuple[str, bool], tuple[list[dict[str, Any]], int]] = {}

    def view(self, session: Session) -> tuple[list[dict[str, Any]], int]:
        """``to_model_messages(session, policy=...)`` and its ``chat_tokens``."""
        from ctxcompact.scans.chat import chat_tokens

        views = self._views
        messages = session.messages
        keys = [(m.id, t) for m, t in zip(messages, _thinking(session, self.policy))]
        missing: dict[tuple[str, bool], int] = {}
        for i, key in enumerate(keys):
            if key not in views:
                missing.setdefault(key, i)
        if missing:
            new = session.model_copy(update={"messages": [messages[i] for i in missing.values()]})
            flags = [thinking for _, thinking in missing]
            table = _rows(new)
            shown = _render_rows(table, self.policy, flags)
            if self.method in EXACT_METHODS:
                counts = _stored_tokens(new, table, self.policy, flags, self.method, self.overhead)
            else:
                counts = [chat_tokens(one, method=self.method, overhead=self.overhead)
                          for one in shown]  # fmt: skip
            for key, one, n in zip(missing, shown, counts, strict=True):
                views[key] = (one, n)
        out: list[dict[str, Any]] = []
        tokens = 0
        for key in keys:
            sent, estimate = views[key]
            out += sent
            tokens += estimate
        return [_fresh(m) for m in out], tokens


def _rows(session: Session) -> Any:
    """The part rows of one session (with the counts its store kept)."""
    from ctxcompact.transcript import sessions_to_table

    return sessions_to_table([session], threads=1)


def _stored_tokens(
    session: Session,
    table: Any,
    policy: Policy | None,
    thinking: list[bool],
    method: str,
    overhead: int,
) -> list[int]:
    """Each message's tokens under the exact ``method`` as the core's
    ``estimate_messages`` gives them over the session's table: the counts a
    store kept (``count=``) read where the text sent is still the one
    counted (its hash holds), the rest counted now; ``chat_tokens`` of its
    view by definition (rust/src/messages.rs). ``table``: its part rows
    (``_rows``); ``thinking``: per message, whether its reasoning is sent."""
    options = _OPENCODE if policy is None else policy.render_options()
    # the first row of each message (an empty message is one row)
    starts, row = [], 0
    for message in session.messages:
        starts.append(row)
        row += max(1, len(message.parts))
    out = [0] * len(session.messages)
    at = {start: i for i, start in enumerate(starts)}
    for sends in (False, True):
        if sends not in thinking:
            continue
        # every assistant message sends its reasoning, or none does; the
        # other flag's messages are counted by the other pass
        keep = len(session.messages) if sends else 0
        rows, tokens, _ = _core.estimate_messages(
            table, method=method, overhead=overhead, **{**options, "keep_thinking": keep},
            threads=1,
        )  # fmt: skip
        for r, n in zip(pa.array(rows).to_pylist(), pa.array(tokens).to_pylist(), strict=True):
            i = at[r]
            if thinking[i] == sends:
                out[i] = n
    return out


def _fresh(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of a view message (its blocks and calls too: nothing shared)."""
    copied = dict(message)
    content = copied.get("content")
    if isinstance(content, list):
        copied["content"] = [_copy_block(b) for b in content]
    calls = copied.get("tool_calls")
    if calls is not None:
        copied["tool_calls"] = [{**c, "function": dict(c["function"])} for c in calls]
    return copied


def _copy_block(block: dict[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in block.items()}
