"""The exception hierarchy. Every error ctxcompact raises is a ``CompactionError``.

The Rust core reports errors as (class name, message, location); the bindings
build the matching class below, so users catch specific classes and read
where the problem is from attributes instead of parsing messages.
"""

from __future__ import annotations


class CompactionError(Exception):
    """Base class. ``session_id``, ``message_id``, ``row`` and ``column`` say where, when known."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        message_id: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.message_id = message_id
        self.row = row
        self.column = column


# --- shape of the input --------------------------------------------------------------


class SchemaError(CompactionError):
    """The columnar input does not have the shape a scan needs."""


class MissingColumnError(SchemaError, KeyError):
    """A column a scan needs is absent."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ColumnTypeError(SchemaError, TypeError):
    """A column has an Arrow type the scan cannot read."""


# --- content of the input ------------------------------------------------------------


class TranscriptError(CompactionError, ValueError):
    """The transcript's content breaks a rule of the data model."""


class NonContiguousError(TranscriptError):
    """Rows of a session (or of a message) are not contiguous."""


class DuplicateSessionError(NonContiguousError):
    """Two sessions with the same id: their rows could never be one contiguous session."""


class NullValueError(TranscriptError):
    """A required value is null."""


class UnknownValueError(TranscriptError):
    """A role, part type or status outside the known set."""


class InconsistentMessageError(TranscriptError):
    """Rows of one message disagree on a message-level field (its role), or a
    ``*_json`` value contradicts the column it repeats (a role, id, type or
    session id: ``column`` names the JSON column)."""


class InvalidUsageError(CompactionError, ValueError):
    """Token usage that cannot be real: negative or missing counts."""


# --- configuration and registry ------------------------------------------------------


class ConfigError(CompactionError, ValueError):
    """An invalid configuration value."""


class UnknownModelError(CompactionError, LookupError):
    """A model the limits registry does not know, with no explicit default."""


class InputTypeError(CompactionError, TypeError):
    """An argument of a kind the call cannot read (a dict where a ``Session``
    goes, ``None`` where a table goes); a ``TypeError`` too."""


__all__ = [
    "ColumnTypeError",
    "CompactionConflictError",
    "CompactionError",
    "CompactionLoopError",
    "CompactionPendingError",
    "ConfigError",
    "DatasetError",
    "DuplicateSessionError",
    "FormatError",
    "HookError",
    "InconsistentMessageError",
    "InputTypeError",
    "InternalError",
    "InvalidUsageError",
    "MissingColumnError",
    "MissingToolResultError",
    "NonContiguousError",
    "NullValueError",
    "OrphanedToolResultError",
    "OutputConflictError",
    "SchemaError",
    "SessionNotFoundError",
    "StoreError",
    "SummaryClientError",
    "SummaryError",
    "TranscriptError",
    "UnknownModelError",
    "UnknownValueError",
]


class InternalError(CompactionError):
    """A bug in ctxcompact (caught at the Rust boundary), not a problem with the input."""


# --- summaries and the lifecycle ------------------------------------------------------


class SummaryError(CompactionError):
    """The summary could not be generated and the fallback policy is ``raise``."""


class SummaryClientError(CompactionError):
    """A model client could not be used (missing SDK extra, bad response shape)."""


class HookError(CompactionError):
    """A pre- or post-compaction hook raised; the original error is chained."""


class CompactionConflictError(CompactionError):
    """Another runner already completed the compaction of this marker."""

    def __init__(self, message: str, *, record: object = None, **where: str | None) -> None:
        super().__init__(message, session_id=where.get("session_id"),
                         message_id=where.get("message_id"))  # fmt: skip
        self.record = record


class CompactionPendingError(CompactionError):
    """Instructions for a compaction while another one is pending: they would
    not reach its summary. ``message_id`` is the pending marker's id."""


class CompactionLoopError(CompactionError):
    """Compactions keep failing to bring the session under its limit."""


class SessionNotFoundError(CompactionError, LookupError):
    """The store has no session with this id."""


class StoreError(CompactionError):
    """The session store cannot be reached or refused an operation (names the store)."""


class OrphanedToolResultError(TranscriptError):
    """A tool result whose call is not in the history."""


class MissingToolResultError(TranscriptError):
    """A tool call that no later message answers (a model API rejects the history)."""


class DatasetError(CompactionError):
    """A dataset file that cannot be read (missing, truncated, not Parquet)."""


class OutputConflictError(CompactionError, ValueError):
    """An output that would replace an input of the same run (the file, a
    link to it, a file an input folder is read from) or another of its
    outputs; ``column`` names the argument (or option) of the output."""


class FormatError(TranscriptError):
    """Input in a session format that cannot be read; says which file, line or message."""


def check_core_classes(names: list[str]) -> None:
    """Refuse to import when the Rust core can raise a class this module lacks.

    The core names the class of each error it reports (``_core.ERROR_CLASSES``
    lists them all); checking them here, at import, turns a renamed or removed
    class into an import failure instead of an ``AttributeError`` the first
    time that error fires.
    """
    missing = [
        name
        for name in names
        if not (isinstance(cls := globals().get(name), type) and issubclass(cls, CompactionError))
    ]
    if missing:
        raise ImportError(
            "ctxcompact._core reports errors as classes ctxcompact.errors does not define "
            f"as CompactionError subclasses: {', '.join(missing)} (a build out of step?)"
        )
