"""Pydantic models of an OpenCode session export.

``{"info": {...session...}, "messages": [{"info": {...}, "parts": [...]}]}``,
field names exactly as OpenCode writes them (``sessionID``, ``parentID``,
``callID``, ...). Every model keeps unknown fields (``extra="allow"``) and
``to_export()`` dumps only what was set, so a load/dump round trip gives back
the same JSON, and newer OpenCode exports load as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PrivateAttr, model_validator

from ctxcompact.errors import InvalidUsageError


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    def to_export(self) -> dict[str, Any]:
        """The JSON object as OpenCode writes it (only fields that were set)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class CacheUsage(_Model):
    read: NonNegativeInt = 0
    write: NonNegativeInt = 0


class TokenUsage(_Model):
    """Usage OpenCode records on an assistant message (negative counts are rejected)."""

    input: NonNegativeInt = 0
    output: NonNegativeInt = 0
    reasoning: NonNegativeInt = 0
    cache: CacheUsage = Field(default_factory=CacheUsage)


class ModelLimits(_Model):
    """A model's limits; 0 = unset (context 0 = unlimited)."""

    context: NonNegativeInt
    input: NonNegativeInt = 0
    output: NonNegativeInt = 0


# --- parts ---------------------------------------------------------------------------------


class ToolTime(_Model):
    start: int | None = None
    end: int | None = None
    #: ms timestamp set when the output was pruned (soft compaction).
    compacted: int | None = None


ToolStatus = Literal["pending", "running", "completed", "error"]


class ToolState(_Model):
    """``state`` of a tool part; which fields exist depends on ``status``."""

    status: ToolStatus
    input: dict[str, Any] | None = None
    output: str | None = None
    error: str | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = None
    time: ToolTime | None = None
    attachments: list[dict[str, Any]] | None = None


class Part(_Model):
    """One message part. ``type`` is ``text``, ``reasoning``, ``tool``, ``compaction``,
    ``file``, ``step-start``, ``step-finish``, ``subtask``, ... (unknown types load too).
    """

    id: str
    sessionID: str | None = None
    messageID: str | None = None
    type: str
    #: No policy clears or cuts a pinned part (kept in ``part_json``; ours, not OpenCode's).
    pinned: bool | None = None
    # text / reasoning
    text: str | None = None
    synthetic: bool | None = None
    ignored: bool | None = None
    # tool
    callID: str | None = None
    tool: str | None = None
    state: ToolState | None = None
    # compaction
    auto: bool | None = None
    # file
    mime: str | None = None
    filename: str | None = None
    url: str | None = None

    @property
    def compacted(self) -> bool:
        """A tool part whose output was pruned."""
        return bool(self.state and self.state.time and self.state.time.compacted)

    def mark_compacted(self, now_ms: int) -> None:
        """Set ``state.time.compacted``; the output itself is kept."""
        if self.state is None:
            raise InvalidUsageError(f"part {self.id} is not a tool part with a state")
        if self.state.time is None:
            self.state.time = ToolTime()
        self.state.time.compacted = now_ms


# --- messages ------------------------------------------------------------------------------


class MessageTime(_Model):
    created: int | None = None
    completed: int | None = None


class _Message(_Model):
    @model_validator(mode="after")
    def _role_is_always_written(self) -> _Message:
        # The role is the discriminator: an export without it would not load back.
        self.model_fields_set.add("role")
        return self


class UserMessage(_Message):
    id: str
    sessionID: str | None = None
    role: Literal["user"] = "user"
    time: MessageTime | None = None
    #: OpenCode stores a title/diff summary object on user messages.
    summary: dict[str, Any] | None = None
    agent: str | None = None
    model: dict[str, Any] | None = None


class AssistantMessage(_Message):
    id: str
    sessionID: str | None = None
    role: Literal["assistant"] = "assistant"
    parentID: str | None = None
    time: MessageTime | None = None
    #: True on the summary written by a compaction.
    summary: bool | None = None
    finish: str | None = None
    error: dict[str, Any] | None = None
    tokens: TokenUsage | None = None
    cost: float | None = None
    modelID: str | None = None
    providerID: str | None = None
    mode: str | None = None
    agent: str | None = None


class SystemMessage(_Message):
    """A system (or developer) prompt, for foreign formats that keep it in the history."""

    id: str
    sessionID: str | None = None
    role: Literal["system"] = "system"
    time: MessageTime | None = None


MessageInfo = Annotated[UserMessage | AssistantMessage | SystemMessage, Field(discriminator="role")]


#: The info model of each role.
_INFO_TYPES: dict[str, type[UserMessage] | type[AssistantMessage] | type[SystemMessage]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "system": SystemMessage,
}


class MessageWithParts(_Model):
    info: MessageInfo
    parts: list[Part] = Field(default_factory=list)

    @classmethod
    def of(
        cls,
        role: str,
        id: str,
        session_id: str | None,
        parts: list[Part] | None = None,
        **info: Any,
    ) -> MessageWithParts:
        """A ``role`` message (user, assistant or system) of ``session_id`` with
        these info fields; ``parts`` unset when None (exported without them)."""
        if role not in _INFO_TYPES:
            raise InvalidUsageError(f"no message role {role!r}: one of {', '.join(_INFO_TYPES)}")
        message = _INFO_TYPES[role](id=id, sessionID=session_id, **info)
        return cls(info=message) if parts is None else cls(info=message, parts=parts)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def role(self) -> str:
        return self.info.role

    def pin(self) -> MessageWithParts:
        """Pin every part of this message: no policy clears or cuts them. Returns self."""
        for part in self.parts:
            part.pinned = True
        return self


def part_output(part: Mapping[str, Any]) -> str | None:
    """What a part's row holds in ``output`` (``_part_row``'s rule): a text or
    reasoning part's text, a completed tool's output, another tool's error."""
    kind = part.get("type")
    if kind in ("text", "reasoning"):
        value = part.get("text")
    elif kind == "tool" and isinstance(state := part.get("state"), dict):
        value = state.get("output" if state.get("status") == "completed" else "error")
    else:
        return None
    return value if isinstance(value, str) else None


def model_output(part: Part) -> str | None:
    """``part_output`` of a ``Part`` model, read from its fields (the very
    ``str`` objects ``to_export`` gives), without dumping it."""
    kind = part.type
    if kind in ("text", "reasoning"):
        return part.text
    state = part.state
    if kind == "tool" and state is not None:
        return state.output if state.status == "completed" else state.error
    return None


class StoredCounts:
    """The ``output_utf16`` a store counted when it wrote a loaded session's
    parts, by part id, each with the very ``str`` object it counts: the
    session's table reads a count only while the part still holds that
    object (an edited or replaced text is counted again, never given the old
    count). Made on first use from the loaded JSON parts, so a load that no
    table follows pays nothing. A cache: equal to any other (or to none), so
    a session's equality ignores it.

    ``exact`` (a store counting exactly, ``count=``): each part's exact
    counts by family, ``{family: [output tokens, output hash, input tokens,
    input hash]}`` (``transcript.rows.exact_part_counts``), or None; the
    table reads a count only where its text still has the hash beside it."""

    __slots__ = ("_by_id", "_exact", "_exact_by_id", "_parts", "_units")

    def __init__(
        self,
        parts: list[dict[str, Any]] | None = None,
        units: list[int | None] | None = None,
        *,
        by_id: dict[str, tuple[str, int]] | None = None,
        exact: list[dict[str, list[int | None]] | None] | None = None,
        exact_by_id: dict[str, dict[str, list[int | None]]] | None = None,
    ) -> None:
        self._parts, self._units, self._by_id = parts, units, by_id
        self._exact, self._exact_by_id = exact, exact_by_id

    def by_id(self) -> dict[str, tuple[str, int]]:
        """``{part id: (its counted text, output_utf16)}``."""
        if self._by_id is None:
            found = {}
            for raw, n in zip(self._parts or (), self._units or (), strict=True):
                if n is not None and (text := part_output(raw)) is not None:
                    found[raw["id"]] = (text, n)
            self._by_id = found
            self._release()
        return self._by_id

    def exact_by_id(self) -> dict[str, dict[str, list[int | None]]]:
        """``{part id: {family: [output tokens, output hash, input tokens,
        input hash]}}`` for the parts counted exactly."""
        if self._exact_by_id is None:
            found = {}
            if self._exact is not None:
                for raw, counts in zip(self._parts or (), self._exact, strict=True):
                    if counts:
                        found[raw["id"]] = counts
            self._exact_by_id = found
            self._release()
        return self._exact_by_id

    def _release(self) -> None:
        """The loaded parts are let go once both views are made."""
        if self._by_id is not None and self._exact_by_id is not None:
            self._parts = self._units = self._exact = None

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, StoredCounts)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "StoredCounts()"


class SessionInfo(_Model):
    id: str
    title: str | None = None


class Session(_Model):
    """An OpenCode session export: ``Session.model_validate(json.load(f))``."""

    info: SessionInfo
    messages: list[MessageWithParts] = Field(default_factory=list)
    #: Counts the store kept with the parts (set by the stores' ``load``,
    #: never exported; ``transcript.sessions_to_table`` reads them).
    _stored: StoredCounts | None = PrivateAttr(default=None)

    @property
    def id(self) -> str:
        return self.info.id


__all__ = [
    "AssistantMessage",
    "CacheUsage",
    "MessageTime",
    "MessageWithParts",
    "ModelLimits",
    "Part",
    "Session",
    "SessionInfo",
    "SystemMessage",
    "TokenUsage",
    "ToolState",
    "ToolTime",
    "UserMessage",
]
