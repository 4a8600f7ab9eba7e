"""Where sessions live: the ``SessionStore`` protocol, SQLite (default) and memory.

Messages and parts are kept as the OpenCode JSON objects, in insertion order,
so a session loads back exactly as it was written. A compaction is committed
in one transaction (prune marks, summary, continue message, record): a crash
leaves either the old state or the whole compaction, never half of it. The
compaction marker itself is written before the work starts, so an
interrupted compaction stays a pending task that the next run completes.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
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
from ctxcompact.models import MessageWithParts, Session, StoredCounts
from ctxcompact.transcript import count_texts, part_output

_id_lock = threading.Lock()
_last_id: tuple[int, int] = (0, 0)


def new_id(prefix: str) -> str:
    """An ascending, sortable id like OpenCode's (time, counter, randomness)."""
    global _last_id
    with _id_lock:
        ms = int(time.time() * 1000)
        last_ms, count = _last_id
        ms, count = (last_ms, count + 1) if ms <= last_ms else (ms, 0)
        _last_id = (ms, count)
    return f"{prefix}_{ms:012x}{count:04x}{secrets.token_hex(5)}"


@dataclass(frozen=True)
class Commit:
    """Everything one compaction writes, in one transaction: the prune marks,
    the summary (and the continue message) answering the marker, the record."""

    marker_id: str
    summary: MessageWithParts
    continue_message: MessageWithParts | None
    marks: Mapping[str, int]
    record: CompactionRecord

    @classmethod
    def coerce(cls, commit: Commit | None, fields: Mapping[str, Any]) -> Commit:
        """``commit``, or one built from the keywords of the 0.1 signature."""
        if commit is not None:
            if fields:
                raise TypeError("pass a Commit or its fields as keywords, not both")
            return commit
        return cls(**fields)


class SessionStore(Protocol):
    """Storage the lifecycle needs. Implementations must be thread-safe."""

    def create_session(self, session_id: str | None = None, **info: Any) -> str: ...

    def load(self, session_id: str) -> Session: ...

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


def _recalled(part: Mapping[str, Any] | None, session_id: str, part_id: str) -> str:
    """What ``recall`` returns for a stored part: a tool's output (or error
    text), a text or reasoning part's text."""
    if part is None:
        raise TranscriptError(f"no part {part_id} in session {session_id!r}",
                              session_id=session_id)  # fmt: skip
    state = part.get("state")
    if isinstance(state, Mapping):
        value = state.get("error") if state.get("status") == "error" else state.get("output")
    else:
        value = part.get("text")
    if not isinstance(value, str):
        raise TranscriptError(f"part {part_id} of session {session_id!r} has no stored text "
                              f"to recall", session_id=session_id)  # fmt: skip
    return value


def _session_info(session_id: Any, info: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The id (made up when ``None``) and the info a new session is stored with,
    checked now: a ``title`` that is not a str, or a value JSON cannot hold,
    made the session unloadable (or the write fail) later."""
    if session_id is not None and not isinstance(session_id, str):
        raise InputTypeError(f"create_session: session_id must be a str or None, got "
                             f"{type(session_id).__name__}")  # fmt: skip
    sid = session_id or new_id("ses")
    if "id" in info:
        raise InputTypeError("create_session: give the id as session_id, not as id=",
                             session_id=sid)  # fmt: skip
    title = info.get("title")
    if title is not None and not isinstance(title, str):
        raise InputTypeError(f"create_session: title must be a str or None, got "
                             f"{type(title).__name__}", session_id=sid)  # fmt: skip
    data = {**info, "id": sid}
    try:
        json.dumps(data)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"create_session: session info must be JSON values ({e})",
                             session_id=sid) from None  # fmt: skip
    return sid, data


def _check_ids(session_id: str, message: MessageWithParts) -> None:
    """A message names the session it is stored in, and its parts the message
    (when they name one): stored elsewhere, it would load back under ids that
    contradict where it is."""
    named = message.info.sessionID
    if named is not None and named != session_id:
        raise TranscriptError(f"message {message.id} names session {named!r}, not the session "
                              f"it is stored in", session_id=session_id,
                              message_id=message.id)  # fmt: skip
    seen: set[str] = set()
    for part in message.parts:
        if part.messageID is not None and part.messageID != message.id:
            raise TranscriptError(f"part {part.id} names message {part.messageID!r}, not "
                                  f"{message.id}", session_id=session_id,
                                  message_id=message.id)  # fmt: skip
        if part.sessionID is not None and part.sessionID != session_id:
            raise TranscriptError(f"part {part.id} names session {part.sessionID!r}",
                                  session_id=session_id, message_id=message.id)  # fmt: skip
        if part.id in seen:
            raise TranscriptError(f"part id {part.id} is given twice in message {message.id}",
                                  session_id=session_id, message_id=message.id)  # fmt: skip
        seen.add(part.id)


def _new_parts(messages: list[dict[str, Any]], message: MessageWithParts, session_id: str) -> None:
    """Part ids are unique in a session (``recall`` finds a part by its id)."""
    ids = {p.id for p in message.parts}
    for stored in messages:
        for part in stored.get("parts", []):
            if part.get("id") in ids:
                raise TranscriptError(f"cannot store message {message.id}: part id {part['id']} "
                                      f"is already stored", session_id=session_id,
                                      message_id=message.id)  # fmt: skip


def _cancel(parts: list[dict[str, Any]], session_id: str, marker_id: str) -> dict[str, Any]:
    """Set ``ignored`` on the compaction part among marker ``marker_id``'s
    ``parts``; returns the part."""
    for part in parts:
        if part.get("type") == "compaction":
            part["ignored"] = True
            return part
    raise TranscriptError(f"no compaction marker {marker_id} to cancel", session_id=session_id,
                          message_id=marker_id)  # fmt: skip


def _counts(parts: list[dict[str, Any]]) -> list[int | None]:
    """Each part's ``output_utf16`` (None: no text in the row's ``output``),
    counted once as the part is stored. A stored count is only ever written
    with its part's JSON: ``_mark`` and ``_cancel`` change neither a counted
    text nor which one counts."""
    texts = [part_output(p) for p in parts]
    return count_texts(texts) if any(t is not None for t in texts) else [None] * len(texts)


def _keep_counts(session: Session, counts: StoredCounts) -> Session:
    """``session`` with the counts its store kept (``Session._stored``, which
    its table reads instead of counting)."""
    private = session.__pydantic_private__
    if private is not None:  # set directly: pydantic's setattr is 5x slower
        private["_stored"] = counts
    return session


def session_of_rows(
    info: str,
    messages: Iterable[tuple[str, str]],
    parts: Iterable[tuple[str, str, int | None]],
) -> Session:
    """A session from a SQL store's rows: its info JSON, its messages
    ``(id, info JSON)`` and its parts ``(message id, part JSON, output_utf16)``,
    each in stored order; the parts' stored counts given back with it."""
    by_message: dict[str, list[Any]] = {}
    loaded, units = [], []
    for message_id, data, n in parts:
        part = json.loads(data)
        by_message.setdefault(message_id, []).append(part)
        loaded.append(part)
        units.append(n)
    rows = [{"info": json.loads(i), "parts": by_message.get(mid, [])} for mid, i in messages]
    session = Session.model_validate({"info": json.loads(info), "messages": rows})
    # The model holds the loaded JSON's own str objects, which the counts name.
    return _keep_counts(session, StoredCounts(loaded, units))


def _mark(part: dict[str, Any], now_ms: int) -> None:
    state = part.get("state")
    if not isinstance(state, dict):
        raise TranscriptError(f"part {part.get('id')} has no tool state to mark")
    time_ = state.setdefault("time", {})
    time_["compacted"] = now_ms


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
    """A ``SessionStore`` in process memory, for tests and short-lived sessions."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sessions: dict[str, dict[str, Any]] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._records: dict[str, list[CompactionRecord]] = {}
        #: Per session, each stored part's count by part id, with the text it counts.
        self._counted: dict[str, dict[str, tuple[str, int]]] = {}

    def _get(self, session_id: str) -> list[dict[str, Any]]:
        if session_id not in self._messages:
            raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
        return self._messages[session_id]

    def create_session(self, session_id: str | None = None, **info: Any) -> str:
        sid, data = _session_info(session_id, info)
        with self._lock:
            if sid not in self._sessions:
                self._sessions[sid] = data
                self._messages[sid] = []
                self._records[sid] = []
                self._counted[sid] = {}
        return sid

    def load(self, session_id: str) -> Session:
        with self._lock:
            messages = _json_copy(self._get(session_id))  # shares the stored strings
            info = dict(self._sessions[session_id])
            counted = dict(self._counted[session_id])
        session = Session.model_validate({"info": info, "messages": messages})
        return _keep_counts(session, StoredCounts(by_id=counted))

    def _count(self, session_id: str, data: dict[str, Any]) -> None:
        parts = data.get("parts", [])
        counted = self._counted[session_id]
        for part, n in zip(parts, _counts(parts), strict=True):
            text = part_output(part)
            if n is not None and text is not None:
                counted[part["id"]] = (text, n)

    def append_message(self, session_id: str, message: MessageWithParts) -> str:
        _check_ids(session_id, message)
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
            _cancel(marker.get("parts", []), session_id, marker_id)

    def _apply_marks(self, messages: list[dict[str, Any]], marks: Mapping[str, int]) -> None:
        found = set()
        for message in messages:
            for part in message.get("parts", []):
                if part.get("id") in marks:
                    _mark(part, marks[part["id"]])
                    found.add(part["id"])
        if missing := set(marks) - found:
            raise TranscriptError(f"no part {sorted(missing)[0]} to mark")

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None:
        with self._lock:
            staged = _json_copy(self._get(session_id))  # all or nothing
            self._apply_marks(staged, marks)
            self._messages[session_id] = staged

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
                    _check_ids(session_id, added)
                    _new_parts(staged, added, session_id)
                    staged.append(added.to_export())
            self._messages[session_id] = staged
            for data in staged[len(messages) :]:
                self._count(session_id, data)
            self._records[session_id].append(record)

    def records(self, session_id: str) -> list[CompactionRecord]:
        with self._lock:
            self._get(session_id)
            return list(self._records[session_id])

    def recall(self, session_id: str, part_id: str) -> str:
        with self._lock:
            found = next((p for m in self._get(session_id) for p in m.get("parts", [])
                          if p.get("id") == part_id), None)  # fmt: skip
            return _recalled(found, session_id, part_id)

    def session_ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    info TEXT NOT NULL
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


#: The columns a store's tables must have (another program's SQLite file may
#: hold tables of these names); ``parts.output_utf16`` is added by ``_migrate``.
_COLUMNS = {
    "sessions": {"id", "info"},
    "messages": {"seq", "session_id", "id", "role", "parent_id", "summary", "info"},
    "parts": {"seq", "session_id", "message_id", "id", "data"},
    "compactions": {"seq", "session_id", "marker_id", "record"},
}


def _check_path(path: Path) -> None:
    """An ``OSError`` naming ``path`` where SQLite would only say "unable to open"."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a store file", str(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"folder {path.parent} does not exist", str(path))


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    """A ``StoreError`` when a table of ours exists without our columns."""
    for table, columns in _COLUMNS.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if have and not columns <= have:
            missing = ", ".join(sorted(columns - have))
            raise StoreError(f"{path}: not a ctxcompact SQLite store (its table {table!r} has "
                             f"no column {missing})")  # fmt: skip


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SQLiteStore:
    """The embedded default store: one SQLite file, WAL, one connection per thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InputTypeError(f"SQLiteStore takes a file path, got {type(path).__name__}")
        self.path = Path(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        _check_path(self.path)
        try:
            # Checked before anything is created: another program's file stays as it was.
            _check_tables(self._db(), self.path)
            self._db().executescript(_SCHEMA)  # idempotent; executescript commits by itself
            self._migrate()
        except sqlite3.OperationalError as e:
            self.close()
            if "unable to open" in str(e):  # what the checks above could not see
                why = f"cannot open the store ({e})"
                raise PermissionError(errno.EACCES, why, str(self.path)) from None
            raise StoreError(f"{self.path}: not a ctxcompact SQLite store ({e})") from None
        except sqlite3.DatabaseError as e:  # not SQLite at all
            self.close()
            raise StoreError(f"{self.path}: not a ctxcompact SQLite store ({e})") from None
        except BaseException:
            self.close()
            raise

    def _migrate(self) -> None:
        """Bring a file made by an earlier release up to this schema: ``parts``
        gains ``output_utf16`` (its old rows stay NULL, counted when loaded)."""

        def missing(db: sqlite3.Connection) -> bool:
            return all(row[1] != "output_utf16" for row in db.execute("PRAGMA table_info(parts)"))

        if missing(self._db()):
            with self._tx() as db:  # checked again under the write lock: another may have won
                if missing(db):
                    db.execute("ALTER TABLE parts ADD COLUMN output_utf16 INTEGER")

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            # Each connection is used by its own thread only; check_same_thread
            # is off so close() may close every thread's connection from one.
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE takes the write lock up front, so a
        check-then-write inside it cannot race another process."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection (callable from any thread, twice too)."""
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self, db: sqlite3.Connection, session_id: str) -> str:
        row = db.execute("SELECT info FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
        return str(row[0])

    def create_session(self, session_id: str | None = None, **info: Any) -> str:
        sid, data = _session_info(session_id, info)
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO sessions (id, info) VALUES (?, ?)",
                (sid, _dumps(data)),
            )
        return sid

    def load(self, session_id: str) -> Session:
        db = self._db()
        db.execute("BEGIN")  # one consistent snapshot of the session
        try:
            return self._read(db, session_id)
        finally:
            db.execute("COMMIT")

    def _read(self, db: sqlite3.Connection, session_id: str) -> Session:
        """The session, read inside the caller's transaction."""
        info = self._require(db, session_id)
        rows = db.execute(
            "SELECT id, info FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        parts = db.execute(
            "SELECT message_id, data, output_utf16 FROM parts WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return session_of_rows(info, rows, parts)

    def queue_compaction(self, session_id: str, marker: MessageWithParts) -> str:
        with self._tx() as db:  # IMMEDIATE: no other writer between check and insert
            pending = pending_marker(self._read(db, session_id))
            if pending is not None:
                return pending.id
            self._insert(db, session_id, marker)
        return marker.id

    def cancel_compaction(self, session_id: str, marker_id: str) -> None:
        with self._tx() as db:
            self._require(db, session_id)
            rows = db.execute(
                "SELECT data FROM parts WHERE session_id = ? AND message_id = ? ORDER BY seq",
                (session_id, marker_id),
            ).fetchall()
            part = _cancel([json.loads(r[0]) for r in rows], session_id, marker_id)
            db.execute(
                "UPDATE parts SET data = ? WHERE session_id = ? AND id = ?",
                (_dumps(part), session_id, part["id"]),
            )

    def _insert(self, db: sqlite3.Connection, session_id: str, message: MessageWithParts) -> None:
        _check_ids(session_id, message)
        data = message.to_export()
        info = data["info"]
        try:
            db.execute(
                "INSERT INTO messages (session_id, id, role, parent_id, summary, info) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, info["id"], info["role"], info.get("parentID"),
                 1 if info.get("summary") is True else 0, _dumps(info)),
            )  # fmt: skip
        except sqlite3.IntegrityError as e:
            raise TranscriptError(
                f"cannot store message {info['id']}: {e}", session_id=session_id,
                message_id=info["id"],
            ) from None  # fmt: skip
        parts = data.get("parts", [])
        try:
            db.executemany(
                "INSERT INTO parts (session_id, message_id, id, data, output_utf16) "
                "VALUES (?, ?, ?, ?, ?)",
                [(session_id, info["id"], p["id"], _dumps(p), n)
                 for p, n in zip(parts, _counts(parts), strict=True)],
            )  # fmt: skip
        except sqlite3.IntegrityError as e:
            # The transaction rolls back: the message is not half-stored.
            taken = [p["id"] for p in data.get("parts", []) if db.execute(
                "SELECT 1 FROM parts WHERE session_id = ? AND id = ? AND message_id != ?",
                (session_id, p["id"], info["id"])).fetchone()]  # fmt: skip
            what = f"part id {taken[0]} is already stored" if taken else str(e)
            raise TranscriptError(
                f"cannot store message {info['id']}: {what}", session_id=session_id,
                message_id=info["id"],
            ) from None  # fmt: skip

    def append_message(self, session_id: str, message: MessageWithParts) -> str:
        with self._tx() as db:
            self._require(db, session_id)
            self._insert(db, session_id, message)
        return message.id

    def _apply_marks(
        self, db: sqlite3.Connection, session_id: str, marks: Mapping[str, int]
    ) -> None:
        for part_id, now in marks.items():
            row = db.execute(
                "SELECT data FROM parts WHERE session_id = ? AND id = ?", (session_id, part_id)
            ).fetchone()
            if row is None:
                raise TranscriptError(f"no part {part_id} to mark", session_id=session_id)
            part = json.loads(row[0])
            _mark(part, now)
            db.execute(
                "UPDATE parts SET data = ? WHERE session_id = ? AND id = ?",
                (_dumps(part), session_id, part_id),
            )

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None:
        with self._tx() as db:
            self._require(db, session_id)
            self._apply_marks(db, session_id, marks)

    def commit_compaction(
        self, session_id: str, commit: Commit | None = None, **fields: Any
    ) -> None:
        """Write ``commit`` (or its fields given as keywords) in one transaction."""
        c = Commit.coerce(commit, fields)
        marker_id, summary, continue_message = c.marker_id, c.summary, c.continue_message
        marks, record = c.marks, c.record
        with self._tx() as db:
            self._require(db, session_id)
            done = db.execute(
                "SELECT 1 FROM messages WHERE session_id = ? AND summary = 1 AND parent_id = ?",
                (session_id, marker_id),
            ).fetchone()
            if done is not None:
                winner = db.execute(
                    "SELECT record FROM compactions WHERE session_id = ? AND marker_id = ?",
                    (session_id, marker_id),
                ).fetchone()
                raise CompactionConflictError(
                    f"marker {marker_id} was already compacted",
                    record=CompactionRecord.from_dict(json.loads(winner[0])) if winner else None,
                    session_id=session_id, message_id=marker_id,
                )  # fmt: skip
            self._apply_marks(db, session_id, marks)
            self._insert(db, session_id, summary)
            if continue_message is not None:
                self._insert(db, session_id, continue_message)
            db.execute(
                "INSERT INTO compactions (session_id, marker_id, record) VALUES (?, ?, ?)",
                (session_id, marker_id, _dumps(record.to_dict())),
            )

    def records(self, session_id: str) -> list[CompactionRecord]:
        db = self._db()
        self._require(db, session_id)
        rows = db.execute(
            "SELECT record FROM compactions WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        return [CompactionRecord.from_dict(json.loads(r[0])) for r in rows]

    def recall(self, session_id: str, part_id: str) -> str:
        db = self._db()
        self._require(db, session_id)
        row = db.execute(
            "SELECT data FROM parts WHERE session_id = ? AND id = ?", (session_id, part_id)
        ).fetchone()
        return _recalled(None if row is None else json.loads(row[0]), session_id, part_id)

    def session_ids(self) -> list[str]:
        return [r[0] for r in self._db().execute("SELECT id FROM sessions ORDER BY rowid")]


__all__ = ["Commit", "MemoryStore", "SQLiteStore", "SessionStore", "new_id"]
