"""A ``SessionStore`` on PostgreSQL (psycopg 3), for workers on several machines.

The same tables and guarantees as ``SQLiteStore``: messages and parts kept as
the OpenCode JSON text they were written as (``text``, not ``jsonb``, so keys
keep their order and a session loads back exactly), a compaction committed in
one transaction, a marker answered at most once. SQLite serializes every
writer of the file; here each write locks only its session's row, so workers
on different sessions commit in parallel and two workers on one marker queue
on that row: the first commits, the second finds the summary and raises
``CompactionConflictError``. A worker killed mid-transaction (SIGKILL, a lost
machine) leaves nothing: the server rolls back a connection that dies.

Install with the ``postgres`` extra (``psycopg[binary]``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxcompact.errors import (
    CompactionConflictError,
    SessionNotFoundError,
    StoreError,
    TranscriptError,
)
from ctxcompact.live.events import CompactionRecord
from ctxcompact.live.markers import pending_marker
from ctxcompact.live.store import (
    Commit,
    _cancel,
    _check_ids,
    _counts,
    _dumps,
    _mark,
    _recalled,
    _session_info,
    session_of_rows,
)
from ctxcompact.models import MessageWithParts, Session

if TYPE_CHECKING:
    import psycopg

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    seq BIGSERIAL,
    info TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    parent_id TEXT,
    summary BOOLEAN NOT NULL DEFAULT FALSE,
    info TEXT NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX IF NOT EXISTS messages_summary
    ON messages (session_id, parent_id) WHERE summary;
CREATE TABLE IF NOT EXISTS parts (
    seq BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    id TEXT NOT NULL,
    data TEXT NOT NULL,
    output_utf16 BIGINT,
    UNIQUE (session_id, id),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS parts_by_session ON parts (session_id, seq);
CREATE TABLE IF NOT EXISTS compactions (
    seq BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    marker_id TEXT,
    record TEXT NOT NULL,
    UNIQUE (session_id, marker_id)
);
"""

#: One key for the schema's advisory lock: concurrent ``CREATE TABLE IF NOT
#: EXISTS`` of the same table can fail in PostgreSQL (a unique violation on
#: the catalog), so the first connections of many workers take turns.
_SCHEMA_LOCK = 0x63_74_78_63_6F_6D_70  # "ctxcomp"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError(
            "PostgresStore needs psycopg 3: pip install 'ctxcompact[postgres]'"
        ) from None
    return psycopg


class PostgresStore:
    """A ``SessionStore`` on PostgreSQL: one connection per thread.

    ``conninfo`` is a libpq connection string or URL
    (``postgresql://user@host/db``, ``host=/run/postgresql dbname=app``).
    ``schema``: a PostgreSQL schema to keep the tables in (created when
    missing), so one database can hold several stores; the default is the
    connection's search path (``public``).
    """

    def __init__(self, conninfo: str, *, schema: str | None = None) -> None:
        if schema is not None and not _NAME.fullmatch(schema):
            raise StoreError(f"PostgresStore: {schema!r} is not a plain schema name "
                             "(letters, digits, underscores)")  # fmt: skip
        self._psycopg = _psycopg()
        self.conninfo = conninfo
        self.schema = schema
        self._local = threading.local()
        self._connections: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            if schema is not None:
                db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            db.execute(_SCHEMA)
            # A schema made by an earlier release: ``parts`` gains the counts
            # (old rows stay NULL, counted when loaded). Checked first, as an
            # ALTER locks the table even when it has nothing to do.
            if not db.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'parts' AND column_name = 'output_utf16'"
            ).fetchone():
                db.execute("ALTER TABLE parts ADD COLUMN output_utf16 BIGINT")

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # --- connections -------------------------------------------------------------

    def _where(self) -> str:
        return f"the PostgreSQL store{'' if self.schema is None else f' (schema {self.schema})'}"

    def _db(self) -> psycopg.Connection[Any]:
        db: psycopg.Connection[Any] | None = getattr(self._local, "db", None)
        if db is not None and not db.closed:
            return db
        try:
            # autocommit: transactions are explicit (``_tx``, ``load``), never
            # left open by a bare read between them.
            db = self._psycopg.connect(self.conninfo, autocommit=True)
        except self._psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to {self._where()}: {e}") from None
        assert db is not None
        if self.schema is not None:
            db.execute(f'SET search_path TO "{self.schema}"')
        self._local.db = db
        with self._lock:
            self._connections.append(db)
        return db

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction; rolled back on any error (the server does the same
        for a connection that dies inside it)."""
        db = self._db()
        try:
            with db.transaction():
                yield db
        except self._psycopg.OperationalError as e:
            raise StoreError(f"{self._where()} failed mid-transaction: {e}") from None

    def close(self) -> None:
        """Close every thread's connection (callable from any thread, twice too)."""
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the SessionStore protocol -----------------------------------------------

    def _require(self, db: psycopg.Connection[Any], session_id: str, *, lock: bool) -> str:
        """The session's info; with ``lock`` the session row stays locked to the
        end of the transaction, which serializes the session's writers."""
        sql = "SELECT info FROM sessions WHERE id = %s" + (" FOR UPDATE" if lock else "")
        row = db.execute(sql, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}", session_id=session_id)
        return str(row[0])

    def create_session(self, session_id: str | None = None, **info: Any) -> str:
        sid, data = _session_info(session_id, info)
        with self._tx() as db:
            db.execute(
                "INSERT INTO sessions (id, info) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                (sid, _dumps(data)),
            )
        return sid

    def load(self, session_id: str) -> Session:
        db = self._db()
        try:
            with db.transaction():
                # One snapshot for the three reads: a compaction committing
                # meanwhile is seen whole or not at all.
                db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return self._read(db, session_id, lock=False)
        except self._psycopg.OperationalError as e:
            raise StoreError(f"cannot read session {session_id!r} from {self._where()}: {e}",
                             session_id=session_id) from None  # fmt: skip

    def _read(self, db: psycopg.Connection[Any], session_id: str, *, lock: bool) -> Session:
        """The session, read inside the caller's transaction (``lock``: its
        row locked, so writers of this session wait)."""
        info = self._require(db, session_id, lock=lock)
        rows = db.execute(
            "SELECT id, info FROM messages WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
        parts = db.execute(
            "SELECT message_id, data, output_utf16 FROM parts WHERE session_id = %s ORDER BY seq",
            (session_id,),
        )
        return session_of_rows(info, rows, parts)

    def queue_compaction(self, session_id: str, marker: MessageWithParts) -> str:
        with self._tx() as db:  # the session row locked: no writer between check and insert
            pending = pending_marker(self._read(db, session_id, lock=True))
            if pending is not None:
                return pending.id
            self._insert(db, session_id, marker)
        return marker.id

    def cancel_compaction(self, session_id: str, marker_id: str) -> None:
        with self._tx() as db:
            self._require(db, session_id, lock=True)
            rows = db.execute(
                "SELECT data FROM parts WHERE session_id = %s AND message_id = %s ORDER BY seq",
                (session_id, marker_id),
            ).fetchall()
            part = _cancel([json.loads(r[0]) for r in rows], session_id, marker_id)
            db.execute(
                "UPDATE parts SET data = %s WHERE session_id = %s AND id = %s",
                (_dumps(part), session_id, part["id"]),
            )

    def _insert(
        self, db: psycopg.Connection[Any], session_id: str, message: MessageWithParts
    ) -> None:
        _check_ids(session_id, message)
        data = message.to_export()
        info = data["info"]
        try:
            # A savepoint, so the error below leaves the caller's transaction usable.
            with db.transaction():
                db.execute(
                    "INSERT INTO messages (session_id, id, role, parent_id, summary, info) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (session_id, info["id"], info["role"], info.get("parentID"),
                     info.get("summary") is True, _dumps(info)),
                )  # fmt: skip
        except self._psycopg.errors.UniqueViolation as e:
            raise TranscriptError(
                f"cannot store message {info['id']}: {e.diag.message_primary}",
                session_id=session_id, message_id=info["id"],
            ) from None  # fmt: skip
        parts = data.get("parts", [])
        if parts:
            try:
                with db.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO parts (session_id, message_id, id, data, output_utf16) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        [(session_id, info["id"], p["id"], _dumps(p), n)
                         for p, n in zip(parts, _counts(parts), strict=True)],
                    )  # fmt: skip
            except self._psycopg.errors.UniqueViolation as e:
                # The whole transaction rolls back: the message is not half-stored.
                raise TranscriptError(
                    f"cannot store the parts of message {info['id']}: "
                    f"{e.diag.message_detail or e.diag.message_primary}",
                    session_id=session_id, message_id=info["id"],
                ) from None  # fmt: skip

    def append_message(self, session_id: str, message: MessageWithParts) -> str:
        with self._tx() as db:
            self._require(db, session_id, lock=True)
            self._insert(db, session_id, message)
        return message.id

    def _apply_marks(
        self, db: psycopg.Connection[Any], session_id: str, marks: Mapping[str, int]
    ) -> None:
        if not marks:
            return
        found = dict(
            db.execute(
                "SELECT id, data FROM parts WHERE session_id = %s AND id = ANY(%s)",
                (session_id, list(marks)),
            ).fetchall()
        )
        if missing := [p for p in marks if p not in found]:
            raise TranscriptError(f"no part {missing[0]} to mark", session_id=session_id)
        updates = []
        for part_id, now in marks.items():
            part = json.loads(found[part_id])
            _mark(part, now)
            updates.append((_dumps(part), session_id, part_id))
        with db.cursor() as cur:
            cur.executemany("UPDATE parts SET data = %s WHERE session_id = %s AND id = %s", updates)

    def mark_parts(self, session_id: str, marks: Mapping[str, int]) -> None:
        with self._tx() as db:
            self._require(db, session_id, lock=True)
            self._apply_marks(db, session_id, marks)

    def commit_compaction(
        self, session_id: str, commit: Commit | None = None, **fields: Any
    ) -> None:
        """Write ``commit`` (or its fields given as keywords) in one transaction."""
        c = Commit.coerce(commit, fields)
        with self._tx() as db:
            # The session row lock: a second worker on the same marker waits
            # here until the first commits, then sees its summary below.
            self._require(db, session_id, lock=True)
            done = db.execute(
                "SELECT 1 FROM messages WHERE session_id = %s AND summary AND parent_id = %s",
                (session_id, c.marker_id),
            ).fetchone()
            if done is not None:
                winner = db.execute(
                    "SELECT record FROM compactions WHERE session_id = %s AND marker_id = %s",
                    (session_id, c.marker_id),
                ).fetchone()
                raise CompactionConflictError(
                    f"marker {c.marker_id} was already compacted",
                    record=CompactionRecord.from_dict(json.loads(winner[0])) if winner else None,
                    session_id=session_id, message_id=c.marker_id,
                )  # fmt: skip
            self._apply_marks(db, session_id, c.marks)
            self._insert(db, session_id, c.summary)
            if c.continue_message is not None:
                self._insert(db, session_id, c.continue_message)
            db.execute(
                "INSERT INTO compactions (session_id, marker_id, record) VALUES (%s, %s, %s)",
                (session_id, c.marker_id, _dumps(c.record.to_dict())),
            )

    def records(self, session_id: str) -> list[CompactionRecord]:
        with self._tx() as db:
            self._require(db, session_id, lock=False)
            rows = db.execute(
                "SELECT record FROM compactions WHERE session_id = %s ORDER BY seq", (session_id,)
            ).fetchall()
        return [CompactionRecord.from_dict(json.loads(r[0])) for r in rows]

    def recall(self, session_id: str, part_id: str) -> str:
        with self._tx() as db:
            self._require(db, session_id, lock=False)
            row = db.execute(
                "SELECT data FROM parts WHERE session_id = %s AND id = %s", (session_id, part_id)
            ).fetchone()
        return _recalled(None if row is None else json.loads(row[0]), session_id, part_id)

    def session_ids(self) -> list[str]:
        with self._tx() as db:
            return [r[0] for r in db.execute("SELECT id FROM sessions ORDER BY seq")]


__all__ = ["PostgresStore"]
