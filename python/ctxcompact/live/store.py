"""Where sessions live: the ``SessionStore`` protocol, SQLite (default) and memory.

Messages and parts are kept as the OpenCode JSON objects, in insertion order,
so a session loads back exactly as it was written. A compaction is committed
in one transaction (prune marks, summary, continue message, record): a crash
leaves either the old state or the whole compaction, never half of it. The
compaction marker itself is written before the work starts, so an
interrupted compaction stays a pending task that the next run completes.
``SQLiteStore`` is ``sqlstore.SQLStore`` on SQLite's dialect.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ctxcompact.errors import (
    CompactionConflictError,
    InputTypeError,
    SessionNotFoundError,
    StoreError,
    TranscriptError,
)
from ctxcompact.live.events import CompactionRecord
from ctxcompact.live.markers import pending_marker
from ctxcompact.live.sqlstore import (
    Changes,
    Commit,
    Dialect,
    SQLStore,
    cancel_marker,
    check_ids,
    exact_families_to_count,
    keep_counts,
    mark_part,
    new_id,
    output_counts,
    recalled,
    session_info,
)
from ctxcompact.models import MessageWithParts, Session, StoredCounts, part_output
from ctxcompact.transcript.rows import exact_part_counts


class SessionStore(Protocol):
    """Storage the lifecycle needs. Implementations must be thread-safe."""

    def create_session(self, session_id: str | None = None, **info: Any) -> str: ...

    def load(self, session_id: str) -> Session: ...

    def load_since(self, session_id: str, since: tuple[int, ...] | None = None) -> Changes:
        """The messages appended since ``since`` (the ``cursor`` of an earlier
        ``Changes`` of this session), or the whole session when ``since`` is
        None or another write changed stored rows since. Optional: a
        ``CompactionLoop`` on a store without it loads the whole session."""
        ...

    def append_message(self, session_id: str, message: MessageWithParts) -> str: ...

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None: ...

    def queue_compaction(self, session_id: str, marker: MessageWithParts) -> str:
        """Append ``marker`` unless a compaction is already pending
        (``markers.pending_marker``), checked and written in one transaction;
        returns the id of the marker that is pending afterwards. (A store
        without it is checked, then appended: two runners may queue twice.)"""
        ...

    def cancel_compaction(self, session_id: str, marker_id: str) -> None:
        """Mark the marker's compaction part ``ignored``: a pre-compact hook
        cancelled it, so it is never pending again and never sent."""
        ...

    def commit_compaction(self, session_id: str, commit: Commit) -> None:
        """Write ``commit`` in one transaction, or raise ``CompactionConflictError``
        (and write nothing) when its marker already has a summary."""
        ...

    def records(self, session_id: str) -> list[CompactionRecord]: ...

    def session_ids(self) -> list[str]: ...

    def recall(self, session_id: str, part_id: str) -> str:
        """The full stored text of a part whose output a policy cleared or cut
        (a described placeholder names the part id); nothing is ever deleted."""
        ...


def _new_parts(messages: list[dict[str, Any]], message: MessageWithParts, session_id: str) -> None:
    """Part ids are unique in a session (``recall`` finds a part by its id)."""
    ids = {p.id for p in message.parts}
    for stored in messages:
        for part in stored.get("parts", []):
            if part.get("id") in ids:
                raise TranscriptError(f"cannot store message {message.id}: part id {part['id']} "
                                      f"is already stored", session_id=session_id,
                                      message_id=message.id)  # fmt: skip


def _json_copy(value: Any) -> Any:
    """A deep copy of what the memory store keeps: JSON data (``to_export``),
    whose strings and numbers are immutable and can be shared. About 3x
    faster than ``copy.deepcopy`` (no memo, no dispatch table), which
    replay paid at every model call."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


class MemoryStore:
    """A ``SessionStore`` in process memory, for tests and short-lived sessions.

    ``count``: tokenizer families (``"o200k"``...) every part is counted in
    exactly as it is stored, which a loaded session's table carries
    (``Transcript.count``'s columns, each beside its text's hash), so an
    estimate under ``<family>-exact`` reads them (the SQL stores take it too)."""

    def __init__(self, *, count: Sequence[str] = ()) -> None:
        self._count_families = exact_families_to_count(count)
        #: The families counted exactly (``count=``; ``SQLStore.counted_families``).
        self.counted_families: tuple[str, ...] = self._count_families
        self._lock = threading.RLock()
        self._sessions: dict[str, dict[str, Any]] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._records: dict[str, list[CompactionRecord]] = {}
        #: Per session, each stored part's count by part id, with the text it counts.
        self._counted: dict[str, dict[str, tuple[str, int]]] = {}
        #: Per session, each part's exact counts by family (``exact_part_counts``).
        self._exact: dict[str, dict[str, dict[str, list[int | None]]]] = {}
        #: Per session, bumped by every write that changes stored messages
        #: rather than appending (``load_since``).
        self._revs: dict[str, int] = {}

    def _get(self, session_id: str) -> list[dict[str, Any]]:
        if session_id not in self._messages:
            raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
        return self._messages[session_id]

    def create_session(self, session_id: str | None = None, **info: Any) -> str:
        sid, data = session_info(session_id, info)
        with self._lock:
            if sid not in self._sessions:
                self._sessions[sid] = data
                self._messages[sid] = []
                self._records[sid] = []
                self._counted[sid] = {}
                self._exact[sid] = {}
                self._revs[sid] = 0
        return sid

    def load(self, session_id: str) -> Session:
        with self._lock:
            messages = _json_copy(self._get(session_id))  # shares the stored strings
            info = dict(self._sessions[session_id])
            counted = dict(self._counted[session_id])
            exact = dict(self._exact[session_id])
        session = Session.model_validate({"info": info, "messages": messages})
        return keep_counts(session, StoredCounts(by_id=counted, exact_by_id=exact))

    def load_since(self, session_id: str, since: tuple[int, ...] | None = None) -> Changes:
        with self._lock:
            stored = self._get(session_id)
            rev, count = self._revs[session_id], len(stored)
            whole = not (since is not None and len(since) == 2 and since[0] == rev
                         and since[1] <= count)  # fmt: skip
            start = 0 if whole or since is None else since[1]
            messages = _json_copy(stored[start:])  # shares the stored strings
            info = dict(self._sessions[session_id])
            counted = self._counted[session_id]
            counts = {p["id"]: counted[p["id"]] for m in messages for p in m.get("parts", [])
                      if p.get("id") in counted}  # fmt: skip
            stored_exact = self._exact[session_id]
            exact = {p["id"]: stored_exact[p["id"]] for m in messages for p in m.get("parts", [])
                     if p.get("id") in stored_exact}  # fmt: skip
        session = Session.model_validate({"info": info, "messages": messages})
        kept = StoredCounts(by_id=counts, exact_by_id=exact)
        return Changes((rev, count), keep_counts(session, kept), whole)

    def _count(self, session_id: str, data: dict[str, Any]) -> None:
        parts = data.get("parts", [])
        counted = self._counted[session_id]
        for part, n in zip(parts, output_counts(parts), strict=True):
            text = part_output(part)
            if n is not None and text is not None:
                counted[part["id"]] = (text, n)
        exact = self._exact[session_id]
        for part, counts in zip(parts, exact_part_counts(parts, self._count_families), strict=True):
            if counts is not None:
                exact[part["id"]] = counts

    def append_message(self, session_id: str, message: MessageWithParts) -> str:
        check_ids(session_id, message)
        data = message.to_export()
        with self._lock:
            messages = self._get(session_id)
            if any(m["info"]["id"] == message.id for m in messages):
                raise TranscriptError(f"message {message.id} already exists", session_id=session_id)
            _new_parts(messages, message, session_id)
            messages.append(data)
            self._count(session_id, data)
        return message.id

    def queue_compaction(self, session_id: str, marker: MessageWithParts) -> str:
        with self._lock:  # re-entrant: load and append take it too
            pending = pending_marker(self.load(session_id))
            if pending is not None:
                return pending.id
            return self.append_message(session_id, marker)

    def cancel_compaction(self, session_id: str, marker_id: str) -> None:
        with self._lock:
            marker = next((m for m in self._get(session_id) if m["info"].get("id") == marker_id),
                          {})  # fmt: skip
            cancel_marker(marker.get("parts", []), session_id, marker_id)
            self._revs[session_id] += 1

    def _apply_marks(self, messages: list[dict[str, Any]], marks: Mapping[str, int]) -> None:
        found = set()
        for message in messages:
            for part in message.get("parts", []):
                if part.get("id") in marks:
                    mark_part(part, marks[part["id"]])
                    found.add(part["id"])
        if missing := set(marks) - found:
            raise TranscriptError(f"no part {sorted(missing)[0]} to mark")

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None:
        with self._lock:
            staged = _json_copy(self._get(session_id))  # all or nothing
            self._apply_marks(staged, marks)
            self._messages[session_id] = staged
            self._revs[session_id] += 1

    def commit_compaction(
        self, session_id: str, commit: Commit | None = None, **fields: Any
    ) -> None:
        """Write ``commit`` (or its fields given as keywords) in one transaction."""
        c = Commit.coerce(commit, fields)
        marker_id, summary, continue_message = c.marker_id, c.summary, c.continue_message
        marks, record = c.marks, c.record
        with self._lock:
            messages = self._get(session_id)
            done = [r for r in self._records[session_id] if r.marker_message_id == marker_id]
            if done or any(
                m["info"].get("summary") is True and m["info"].get("parentID") == marker_id
                for m in messages
            ):
                raise CompactionConflictError(
                    f"marker {marker_id} was already compacted",
                    record=done[0] if done else None, session_id=session_id, message_id=marker_id,
                )  # fmt: skip
            staged = _json_copy(messages)  # all or nothing
            self._apply_marks(staged, marks)
            for added in (summary, continue_message):
                if added is not None:
                    check_ids(session_id, added)
                    _new_parts(staged, added, session_id)
                    staged.append(added.to_export())
            self._messages[session_id] = staged
            for data in staged[len(messages) :]:
                self._count(session_id, data)
            self._records[session_id].append(record)
            self._revs[session_id] += 1

    def records(self, session_id: str) -> list[CompactionRecord]:
        with self._lock:
            self._get(session_id)
            return list(self._records[session_id])

    def recall(self, session_id: str, part_id: str) -> str:
        with self._lock:
            found = next((p for m in self._get(session_id) for p in m.get("parts", [])
                          if p.get("id") == part_id), None)  # fmt: skip
            return recalled(found, session_id, part_id)

    def session_ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    rev INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    parent_id TEXT,
    summary INTEGER NOT NULL DEFAULT 0,
    info TEXT NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX IF NOT EXISTS messages_summary ON messages(session_id, parent_id) WHERE summary = 1;
CREATE TABLE IF NOT EXISTS parts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    id TEXT NOT NULL,
    data TEXT NOT NULL,
    output_utf16 INTEGER,
    exact_counts TEXT,
    UNIQUE (session_id, id),
    FOREIGN KEY (session_id, message_id) REFERENCES messages(session_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS compactions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    marker_id TEXT,
    record TEXT NOT NULL,
    UNIQUE (session_id, marker_id)
);
"""


def _check_path(path: Path) -> None:
    """An ``OSError`` naming ``path`` where SQLite would only say "unable to open"."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a store file", str(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"folder {path.parent} does not exist", str(path))


class _SQLite(Dialect):
    """SQLite: WAL, one file; a write transaction (IMMEDIATE) takes the file's
    write lock up front, so no row lock is needed."""

    name = "SQLite"
    placeholder = "?"
    true = "1"
    lock = ""
    session_order = "rowid"
    schema = _SCHEMA
    count_type = "INTEGER"
    taken = sqlite3.IntegrityError

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.where = str(path)
        self.timeout = timeout

    def connect(self) -> sqlite3.Connection:
        # Each connection is used by its own thread only; check_same_thread
        # is off so close() may close every thread's connection from one.
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                             check_same_thread=False)  # fmt: skip
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        return db

    @contextmanager
    def write(self, db: sqlite3.Connection) -> Iterator[None]:
        with self._failures("write to"):
            db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def read(self, db: sqlite3.Connection, session_id: str | None) -> Iterator[None]:
        what = "read from" if session_id is None else f"read session {session_id!r} from"
        with self._failures(what, session_id):
            db.execute("BEGIN")
            try:
                yield
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")

    @contextmanager
    def _failures(self, what: str, session_id: str | None = None) -> Iterator[None]:
        """SQLite's own failures (a lock held past the timeout, a read-only
        or full disk) as a ``StoreError`` naming the store, as PostgreSQL's
        are; the transaction is rolled back, nothing half-written."""
        try:
            yield
        except sqlite3.OperationalError as e:
            why = str(e)
            if "locked" in why or "busy" in why:
                held = f"another connection held its write lock past the {self.timeout:g} s timeout"
                why += f" ({held})"
            raise StoreError(f"cannot {what} {self.where}: {why}", session_id=session_id) from None

    def columns(self, db: sqlite3.Connection, table: str) -> set[str]:
        return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


class SQLiteStore(SQLStore):
    """The embedded default store: one SQLite file, WAL, one connection per thread."""

    def __init__(
        self, path: str | os.PathLike[str], *, count: Sequence[str] = (), timeout: float = 30.0
    ) -> None:
        """``count``: tokenizer families every part is counted in exactly as
        it is stored (``MemoryStore``); ``timeout``: how long (seconds) a
        write waits for another connection's write lock before a ``StoreError``."""
        if not isinstance(path, str | os.PathLike):
            raise InputTypeError(f"SQLiteStore takes a file path, got {type(path).__name__}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
            raise InputTypeError(f"SQLiteStore: timeout must be seconds >= 0, got {timeout!r}")
        self.path = Path(path)
        _check_path(self.path)
        try:
            # Another program's file is checked before anything is created: it stays as it was.
            super().__init__(_SQLite(self.path, float(timeout)), count)
        except sqlite3.OperationalError as e:
            if "unable to open" in str(e):  # what the checks above could not see
                why = f"cannot open the store ({e})"
                raise PermissionError(errno.EACCES, why, str(self.path)) from None
            raise StoreError(f"{self.path}: not a ctxcompact SQLite store ({e})") from None
        except sqlite3.DatabaseError as e:  # not SQLite at all
            raise StoreError(f"{self.path}: not a ctxcompact SQLite store ({e})") from None


__all__ = ["Commit", "MemoryStore", "SQLiteStore", "SessionStore", "new_id"]
