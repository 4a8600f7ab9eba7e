"""One ``SessionStore`` over SQL, whatever the engine; and the checks every
store (the memory store's too) makes on what it is given.

``SQLStore`` holds every step once: create, append, load, mark parts, queue a
compaction (checked and written in one transaction), commit one (refused with
``CompactionConflictError`` when its marker already has a summary), cancel,
records, recall. What differs between SQLite and PostgreSQL is a ``Dialect``:
data (the placeholder, the summary flag's true literal, the row lock, the
schema, the error a key already stored raises) and the few steps each engine
does its own way (connecting, the write transaction and the read snapshot,
where PostgreSQL reports a lost connection as a ``StoreError``; listing a
table's columns). The tables are the same on both: messages and parts kept
as the OpenCode JSON text they were written as, so a session loads back
exactly.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from typing import Any, Self

from ctxcompact.errors import (
    CompactionConflictError,
    InputTypeError,
    SessionNotFoundError,
    StoreError,
    TranscriptError,
)
from ctxcompact.live.events import CompactionRecord
from ctxcompact.live.markers import pending_marker
from ctxcompact.models import MessageWithParts, Session, StoredCounts, part_output
from ctxcompact.transcript import count_texts
from ctxcompact.transcript.rows import exact_part_counts

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


@dataclass(frozen=True)
class Changes:
    """What ``load_since`` read: the whole session, or only the messages
    appended since the cursor it was given (``whole`` False: the session's
    info with those messages, in stored order). ``cursor`` is passed back to
    the next ``load_since``. Any write other than an append (prune marks, a
    committed compaction, a cancelled marker) makes the next read whole."""

    cursor: tuple[int, ...]
    session: Session
    whole: bool


# --- what every store checks ------------------------------------------------------


def recalled(part: Mapping[str, Any] | None, session_id: str, part_id: str) -> str:
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


def session_info(session_id: Any, info: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
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


def check_ids(session_id: str, message: MessageWithParts) -> None:
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


def cancel_marker(parts: list[dict[str, Any]], session_id: str, marker_id: str) -> dict[str, Any]:
    """Set ``ignored`` on the compaction part among marker ``marker_id``'s
    ``parts``; returns the part."""
    for part in parts:
        if part.get("type") == "compaction":
            part["ignored"] = True
            return part
    raise TranscriptError(f"no compaction marker {marker_id} to cancel", session_id=session_id,
                          message_id=marker_id)  # fmt: skip


def output_counts(parts: list[dict[str, Any]]) -> list[int | None]:
    """Each part's ``output_utf16`` (None: no text in the row's ``output``),
    counted once as the part is stored. A stored count is only ever written
    with its part's JSON: ``mark_part`` and ``cancel_marker`` change neither a
    counted text nor which one counts."""
    texts = [part_output(p) for p in parts]
    return count_texts(texts) if any(t is not None for t in texts) else [None] * len(texts)


def _exact_counts(text: str | None) -> dict[str, list[int | None]] | None:
    """A part's ``exact_counts`` as the store wrote it; anything else (a
    value another program wrote) is None: that part is counted from its
    text, never read from a value the store did not make."""
    try:
        counts = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(counts, dict):
        return None
    for value in counts.values():
        if not (isinstance(value, list) and len(value) == 4 and all(
                v is None or (type(v) is int and 0 <= v < 2**63) for v in value)):  # fmt: skip
            return None
    return counts


def exact_families_to_count(count: Sequence[str]) -> tuple[str, ...]:
    """A store's ``count`` option: the families it counts every part in
    exactly as it stores it (``ConfigError`` for one the core cannot
    count, ``InputTypeError`` for a single string or another kind)."""
    from ctxcompact.errors import InputTypeError
    from ctxcompact.scans.vocabularies import core_name

    if isinstance(count, str) or not all(isinstance(f, str) for f in count):
        raise InputTypeError(f"count takes a list of tokenizer families, got {count!r}")
    for family in count:
        core_name(family)  # ConfigError naming an unknown family
    return tuple(dict.fromkeys(count))


def keep_counts(session: Session, counts: StoredCounts) -> Session:
    """``session`` with the counts its store kept (``Session._stored``, which
    its table reads instead of counting)."""
    private = session.__pydantic_private__
    if private is not None:  # set directly: pydantic's setattr is 5x slower
        private["_stored"] = counts
    return session


def extended(session: Session, appended: Session) -> Session:
    """``session`` with the messages of ``appended`` (a ``load_since`` that
    was not whole) after its own, and the info and counts of both."""
    grown = session.model_copy(
        update={"info": appended.info, "messages": [*session.messages, *appended.messages]}
    )
    old, new = session._stored, appended._stored
    if old is not None and new is not None:
        exact = {**old.exact_by_id(), **new.exact_by_id()}
        keep_counts(grown, StoredCounts(by_id={**old.by_id(), **new.by_id()}, exact_by_id=exact))
    return grown


def mark_part(part: dict[str, Any], now_ms: int) -> None:
    """Set a tool part's ``state.time.compacted`` (its output is kept)."""
    state = part.get("state")
    if not isinstance(state, dict):
        raise TranscriptError(f"part {part.get('id')} has no tool state to mark")
    time_ = state.setdefault("time", {})
    time_["compacted"] = now_ms


def session_of_rows(
    info: str,
    messages: Iterable[tuple[str, str]],
    parts: Iterable[tuple[str, str, int | None, str | None]],
) -> Session:
    """A session from a SQL store's rows: its info JSON, its messages
    ``(id, info JSON)`` and its parts ``(message id, part JSON, output_utf16,
    exact counts JSON)``, each in stored order; the parts' stored counts
    given back with it."""
    by_message: dict[str, list[Any]] = {}
    loaded, units, exact = [], [], []
    for message_id, data, n, counts in parts:
        part = json.loads(data)
        by_message.setdefault(message_id, []).append(part)
        loaded.append(part)
        units.append(n)
        exact.append(_exact_counts(counts))
    rows = [{"info": json.loads(i), "parts": by_message.get(mid, [])} for mid, i in messages]
    session = Session.model_validate({"info": json.loads(info), "messages": rows})
    # The model holds the loaded JSON's own str objects, which the counts name.
    return keep_counts(session, StoredCounts(loaded, units, exact=exact))


# --- SQL ----------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: The columns a store's tables must have (another program's database may
#: hold tables of these names); ``parts.output_utf16`` is added by the setup.
_COLUMNS = {
    "sessions": {"id", "info"},
    "messages": {"seq", "session_id", "id", "role", "parent_id", "summary", "info"},
    "parts": {"seq", "session_id", "message_id", "id", "data"},
    "compactions": {"seq", "session_id", "marker_id", "record"},
}
#: Columns a store of an earlier release lacks, added by the setup:
#: ``parts.output_utf16`` (NULL: counted when loaded), ``parts.exact_counts``
#: (each part's exact counts by family as JSON, ``exact_part_counts``; NULL:
#: counted when estimated) and ``sessions.rev``
#: (bumped by every write that changes stored rows rather than appending:
#: ``load_since`` reads only the appended rows while it stays the same).
_ADDED = (("parts", "output_utf16"), ("parts", "exact_counts"), ("sessions", "rev"))


class Dialect:
    """What differs between the SQL engines a ``SQLStore`` runs on.

    Data: ``name`` (in errors), ``where`` (the store, in errors), the
    ``placeholder`` of a parameter, ``true`` (the summary flag's true literal),
    ``lock`` (appended to the session's SELECT in a write: it locks the row to
    the transaction's end; empty where the write transaction locks the whole
    database), ``session_order`` (the column sessions were made in),
    ``schema`` (the tables, ``;``-separated statements), ``count_type`` (of
    ``parts.output_utf16`` and ``sessions.rev``, added to a schema that lacks
    them), ``taken`` (the
    error a unique key already stored raises). Steps: the methods below.
    """

    name: str
    where: str
    placeholder: str
    true: str
    lock: str
    session_order: str
    schema: str
    count_type: str
    taken: type[Exception] | tuple[type[Exception], ...]

    def connect(self) -> Any:
        """A new connection (used by one thread)."""
        raise NotImplementedError

    def write(self, db: Any) -> AbstractContextManager[None]:
        """One write transaction, rolled back on any error."""
        raise NotImplementedError

    def read(self, db: Any, session_id: str | None) -> AbstractContextManager[None]:
        """One consistent snapshot of the database (``session_id``: the session
        read, for errors)."""
        raise NotImplementedError

    def prepare(self, db: Any) -> None:
        """What the engine needs, in the setup's transaction, before the tables
        are checked and made."""

    def columns(self, db: Any, table: str) -> set[str]:
        """The columns of ``table`` (empty when there is no such table)."""
        raise NotImplementedError


class SQLStore:
    """A ``SessionStore`` on a SQL database: one connection per thread, each
    write one transaction that locks the session (``Dialect.lock``) or the
    database before it checks anything, so a check-then-write cannot race
    another writer; a compaction committed whole or not at all."""

    def __init__(self, dialect: Dialect, count: Sequence[str] = ()) -> None:
        self._dialect = dialect
        self._count = exact_families_to_count(count)
        #: The families every part is counted in exactly as it is stored
        #: (``count=``): a loop whose model counts in one of them budgets
        #: with the stored counts (``Compactor.count_method``).
        self.counted_families: tuple[str, ...] = self._count
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._queries: dict[str, str] = {}
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        """The tables, made where missing (nothing is written when they are
        all there: a store may be read-only); a schema from an earlier
        release gains ``parts.output_utf16`` (old rows stay NULL, counted when
        loaded). Tables another program made under these names are refused
        and left as they were."""
        with self._read_only(None) as db:
            if self._ready(db):
                return
        with self._write() as db:
            self._dialect.prepare(db)
            if not self._ready(db):
                for statement in self._dialect.schema.split(";"):
                    if statement.strip():
                        db.execute(statement)
                count = self._dialect.count_type
                for table, column in _ADDED:
                    if column not in self._dialect.columns(db, table):
                        default = " NOT NULL DEFAULT 0" if column == "rev" else ""
                        kind = "TEXT" if column == "exact_counts" else count
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}{default}")

    def _ready(self, db: Any) -> bool:
        """Whether every table is there with every column; a ``StoreError``
        when one of them lacks a column of ours."""
        ready, d = True, self._dialect
        for table, columns in _COLUMNS.items():
            have = d.columns(db, table)
            if have and not columns <= have:
                missing = ", ".join(sorted(columns - have))
                raise StoreError(f"{d.where}: not a ctxcompact {d.name} store (its table "
                                 f"{table!r} has no column {missing})")  # fmt: skip
            ready = ready and bool(have) and all(c in have for t, c in _ADDED if t == table)
        return ready

    # --- connections -------------------------------------------------------------

    def _db(self) -> Any:
        db = getattr(self._local, "db", None)
        if db is not None and not getattr(db, "closed", False):
            return db
        db = self._dialect.connect()
        self._local.db = db
        with self._lock:
            self._connections.append(db)
        return db

    def _q(self, sql: str) -> str:
        """``sql`` (written with ``?``) in the dialect's placeholders."""
        query = self._queries.get(sql)
        if query is None:
            query = self._queries[sql] = sql.replace("?", self._dialect.placeholder)
        return query

    def _run(self, db: Any, sql: str, *params: Any) -> Any:
        query = self._q(sql)
        return db.execute(query, params) if params else db.execute(query)

    def _many(self, db: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with closing(db.cursor()) as cur:
                cur.executemany(self._q(sql), rows)

    def _in(self, db: Any, sql: str, session_id: str, ids: list[str]) -> list[Any]:
        """The rows of ``sql`` ending in ``id IN`` for each of ``ids``, looked
        up a chunk at a time (far below either engine's parameter limit)."""
        rows = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows += self._run(db, f"{sql} ({', '.join('?' * len(chunk))})", session_id, *chunk)
        return rows

    @contextmanager
    def _write(self) -> Iterator[Any]:
        db = self._db()
        with self._dialect.write(db):
            yield db

    @contextmanager
    def _read_only(self, session_id: str | None) -> Iterator[Any]:
        db = self._db()
        with self._dialect.read(db, session_id):
            yield db

    def close(self) -> None:
        """Close every thread's connection (callable from any thread, twice too)."""
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the SessionStore protocol -----------------------------------------------

    def _require(self, db: Any, session_id: str, *, lock: bool) -> str:
        """The session's info; with ``lock`` (in a write) its row stays locked
        to the transaction's end, which serializes the session's writers."""
        sql = "SELECT info FROM sessions WHERE id = ?" + (self._dialect.lock if lock else "")
        row = self._run(db, sql, session_id).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
        return str(row[0])

    def create_session(self, session_id: str | None = None, **info: Any) -> str:
        sid, data = session_info(session_id, info)
        with self._write() as db:
            self._run(db, "INSERT INTO sessions (id, info) VALUES (?, ?) "
                          "ON CONFLICT (id) DO NOTHING", sid, _dumps(data))  # fmt: skip
        return sid

    def load(self, session_id: str) -> Session:
        # One snapshot for the three reads: a compaction committing meanwhile
        # is seen whole or not at all.
        with self._read_only(session_id) as db:
            return self._read(db, session_id, lock=False)

    def _read(self, db: Any, session_id: str, *, lock: bool) -> Session:
        """The session, read inside the caller's transaction (``lock``: its
        row locked, so writers of this session wait)."""
        info = self._require(db, session_id, lock=lock)
        sql = "SELECT id, info FROM messages WHERE session_id = ? ORDER BY seq"
        rows = self._run(db, sql, session_id).fetchall()
        sql = ("SELECT message_id, data, output_utf16, exact_counts FROM parts "
               "WHERE session_id = ? ORDER BY seq")  # fmt: skip
        return session_of_rows(info, rows, self._run(db, sql, session_id))

    def load_since(self, session_id: str, since: tuple[int, ...] | None = None) -> Changes:
        """The messages appended since ``since`` (a ``Changes.cursor`` of this
        session), or the whole session when ``since`` is None or another
        write changed stored rows since (``sessions.rev``). One snapshot, as
        ``load``. A session's writers hold its row lock (or the file's) to
        their commit, so its rows commit in ``seq`` order: none is skipped."""
        with self._read_only(session_id) as db:
            row = self._run(db, "SELECT info, rev FROM sessions WHERE id = ?",
                            session_id).fetchone()  # fmt: skip
            if row is None:
                raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
            info, rev = str(row[0]), int(row[1])
            whole, after_message, after_part = True, 0, 0
            if since is not None and len(since) == 3 and since[0] == rev:
                whole, after_message, after_part = False, since[1], since[2]
            sql = "SELECT seq, id, info FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq"
            messages = self._run(db, sql, session_id, after_message).fetchall()
            sql = ("SELECT seq, message_id, data, output_utf16, exact_counts FROM parts "
                   "WHERE session_id = ? AND seq > ? ORDER BY seq")  # fmt: skip
            parts = self._run(db, sql, session_id, after_part).fetchall()
        cursor = (rev, messages[-1][0] if messages else after_message,
                  parts[-1][0] if parts else after_part)  # fmt: skip
        session = session_of_rows(info, [r[1:] for r in messages], [r[1:] for r in parts])
        return Changes(cursor, session, whole)

    def queue_compaction(self, session_id: str, marker: MessageWithParts) -> str:
        with self._write() as db:  # the session locked: no writer between check and insert
            pending = pending_marker(self._read(db, session_id, lock=True))
            if pending is not None:
                return pending.id
            self._insert(db, session_id, marker)
        return marker.id

    def cancel_compaction(self, session_id: str, marker_id: str) -> None:
        with self._write() as db:
            self._require(db, session_id, lock=True)
            sql = "SELECT data FROM parts WHERE session_id = ? AND message_id = ? ORDER BY seq"
            rows = self._run(db, sql, session_id, marker_id).fetchall()
            part = cancel_marker([json.loads(r[0]) for r in rows], session_id, marker_id)
            sql = "UPDATE parts SET data = ? WHERE session_id = ? AND id = ?"
            self._run(db, sql, _dumps(part), session_id, part["id"])
            self._changed(db, session_id)

    def _changed(self, db: Any, session_id: str) -> None:
        """A stored row was changed, not appended: ``load_since`` reads the
        session whole next time."""
        self._run(db, "UPDATE sessions SET rev = rev + 1 WHERE id = ?", session_id)

    def _insert(self, db: Any, session_id: str, message: MessageWithParts) -> None:
        """Store ``message`` and its parts, or raise ``TranscriptError`` naming
        the id already stored (the caller's transaction rolls back: the
        message is not half-stored)."""
        check_ids(session_id, message)
        data = message.to_export()
        info, mid = data["info"], data["info"]["id"]
        parts = data.get("parts", [])
        # A savepoint: after a failed insert the transaction can still say why.
        self._run(db, "SAVEPOINT ctxcompact_insert")
        try:
            self._run(db, "INSERT INTO messages (session_id, id, role, parent_id, summary, info) "
                          "VALUES (?, ?, ?, ?, ?, ?)", session_id, mid, info["role"],
                      info.get("parentID"), info.get("summary") is True, _dumps(info))  # fmt: skip
            exact = [None if c is None else _dumps(c)
                     for c in exact_part_counts(parts, self._count)]  # fmt: skip
            counts = zip(parts, output_counts(parts), exact, strict=True)
            rows = [(session_id, mid, p["id"], _dumps(p), n, c) for p, n, c in counts]
            self._many(db, "INSERT INTO parts (session_id, message_id, id, data, output_utf16, "
                           "exact_counts) VALUES (?, ?, ?, ?, ?, ?)", rows)  # fmt: skip
        except self._dialect.taken as e:
            self._run(db, "ROLLBACK TO SAVEPOINT ctxcompact_insert")
            what = self._taken(db, session_id, mid, parts, e)
            raise TranscriptError(f"cannot store {what}", session_id=session_id,
                                  message_id=mid) from None  # fmt: skip
        self._run(db, "RELEASE SAVEPOINT ctxcompact_insert")

    def _taken(self, db: Any, session_id: str, message_id: str, parts: list[dict[str, Any]],
               e: Exception) -> str:  # fmt: skip
        """What a unique-key error on inserting ``message_id`` met: the message
        id, or the first part id, already stored in the session."""
        sql = "SELECT 1 FROM messages WHERE session_id = ? AND id = ?"
        if self._run(db, sql, session_id, message_id).fetchone():
            return f"message {message_id}: a message of that id is already stored"
        sql = "SELECT id FROM parts WHERE session_id = ? AND id IN"
        if taken := self._in(db, sql, session_id, [str(p["id"]) for p in parts]):
            return f"the parts of message {message_id}: part id {taken[0][0]} is already stored"
        return f"message {message_id}: {str(e).splitlines()[0]}"

    def append_message(self, session_id: str, message: MessageWithParts) -> str:
        with self._write() as db:
            self._require(db, session_id, lock=True)
            self._insert(db, session_id, message)
        return message.id

    def _apply_marks(self, db: Any, session_id: str, marks: Mapping[str, int]) -> None:
        sql = "SELECT id, data FROM parts WHERE session_id = ? AND id IN"
        found: dict[str, str] = dict(self._in(db, sql, session_id, list(marks)))
        if missing := [p for p in marks if p not in found]:
            raise TranscriptError(f"no part {missing[0]} to mark", session_id=session_id)
        updates = []
        for part_id, now in marks.items():
            part = json.loads(found[part_id])
            mark_part(part, now)
            updates.append((_dumps(part), session_id, part_id))
        self._many(db, "UPDATE parts SET data = ? WHERE session_id = ? AND id = ?", updates)
        if updates:
            self._changed(db, session_id)

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None:
        with self._write() as db:
            self._require(db, session_id, lock=True)
            self._apply_marks(db, session_id, marks)

    def commit_compaction(
        self, session_id: str, commit: Commit | None = None, **fields: Any
    ) -> None:
        """Write ``commit`` (or its fields given as keywords) in one transaction."""
        c = Commit.coerce(commit, fields)
        with self._write() as db:
            # The session locked: a second worker on the same marker waits
            # here until the first commits, then sees its summary below.
            self._require(db, session_id, lock=True)
            sql = (f"SELECT 1 FROM messages WHERE session_id = ? "
                   f"AND summary = {self._dialect.true} AND parent_id = ?")  # fmt: skip
            if self._run(db, sql, session_id, c.marker_id).fetchone() is not None:
                sql = "SELECT record FROM compactions WHERE session_id = ? AND marker_id = ?"
                winner = self._run(db, sql, session_id, c.marker_id).fetchone()
                raise CompactionConflictError(
                    f"marker {c.marker_id} was already compacted",
                    record=CompactionRecord.from_dict(json.loads(winner[0])) if winner else None,
                    session_id=session_id, message_id=c.marker_id,
                )  # fmt: skip
            self._apply_marks(db, session_id, c.marks)
            self._insert(db, session_id, c.summary)
            if c.continue_message is not None:
                self._insert(db, session_id, c.continue_message)
            sql = "INSERT INTO compactions (session_id, marker_id, record) VALUES (?, ?, ?)"
            self._run(db, sql, session_id, c.marker_id, _dumps(c.record.to_dict()))

    def records(self, session_id: str) -> list[CompactionRecord]:
        with self._read_only(session_id) as db:
            self._require(db, session_id, lock=False)
            sql = "SELECT record FROM compactions WHERE session_id = ? ORDER BY seq"
            rows = self._run(db, sql, session_id).fetchall()
        return [CompactionRecord.from_dict(json.loads(r[0])) for r in rows]

    def recall(self, session_id: str, part_id: str) -> str:
        with self._read_only(session_id) as db:
            self._require(db, session_id, lock=False)
            sql = "SELECT data FROM parts WHERE session_id = ? AND id = ?"
            row = self._run(db, sql, session_id, part_id).fetchone()
        return recalled(None if row is None else json.loads(row[0]), session_id, part_id)

    def session_ids(self) -> list[str]:
        with self._read_only(None) as db:
            order = self._dialect.session_order
            return [r[0] for r in self._run(db, f"SELECT id FROM sessions ORDER BY {order}")]


__all__ = [
    "Changes",
    "Commit",
    "Dialect",
    "SQLStore",
    "cancel_marker",
    "check_ids",
    "exact_families_to_count",
    "extended",
    "keep_counts",
    "mark_part",
    "new_id",
    "output_counts",
    "recalled",
    "session_info",
    "session_of_rows",
]
