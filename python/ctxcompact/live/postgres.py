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

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxcompact.errors import StoreError
from ctxcompact.live.sqlstore import Dialect, SQLStore

if TYPE_CHECKING:
    import psycopg

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    seq BIGSERIAL,
    info TEXT NOT NULL,
    rev BIGINT NOT NULL DEFAULT 0
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
    exact_counts TEXT,
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


class _Postgres(Dialect):
    """PostgreSQL: a write locks its session's row (``FOR UPDATE``), so writers
    of different sessions commit side by side; a read is one REPEATABLE READ
    snapshot; a lost connection is a ``StoreError`` naming the store."""

    name = "PostgreSQL"
    placeholder = "%s"
    true = "TRUE"
    lock = " FOR UPDATE"
    session_order = "seq"
    schema = _SCHEMA
    count_type = "BIGINT"

    def __init__(self, conninfo: str, schema: str | None) -> None:
        self.psycopg = _psycopg()
        self.taken = self.psycopg.errors.UniqueViolation
        self.conninfo = conninfo
        self.search_path = schema
        self.where = f"the PostgreSQL store{'' if schema is None else f' (schema {schema})'}"

    def connect(self) -> psycopg.Connection[Any]:
        try:
            # autocommit: transactions are explicit (``write``, ``read``), never
            # left open by a bare statement between them.
            db: psycopg.Connection[Any] = self.psycopg.connect(self.conninfo, autocommit=True)
        except self.psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to {self.where}: {e}") from None
        if self.search_path is not None:
            db.execute(f'SET search_path TO "{self.search_path}"')
        return db

    @contextmanager
    def write(self, db: psycopg.Connection[Any]) -> Iterator[None]:
        """Rolled back on any error (the server does the same for a connection
        that dies inside it)."""
        try:
            with db.transaction():
                yield
        except self.psycopg.OperationalError as e:
            raise StoreError(f"{self.where} failed mid-transaction: {e}") from None

    @contextmanager
    def read(self, db: psycopg.Connection[Any], session_id: str | None) -> Iterator[None]:
        try:
            with db.transaction():
                db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield
        except self.psycopg.OperationalError as e:
            what = "read" if session_id is None else f"read session {session_id!r}"
            raise StoreError(f"cannot {what} from {self.where}: {e}",
                             session_id=session_id) from None  # fmt: skip

    def prepare(self, db: psycopg.Connection[Any]) -> None:
        """The first connections of many workers make the tables in turn."""
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        if self.search_path is not None:
            db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.search_path}"')

    def columns(self, db: psycopg.Connection[Any], table: str) -> set[str]:
        rows = db.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        )
        return {r[0] for r in rows}


class PostgresStore(SQLStore):
    """A ``SessionStore`` on PostgreSQL: one connection per thread.

    ``conninfo`` is a libpq connection string or URL
    (``postgresql://user@host/db``, ``host=/run/postgresql dbname=app``).
    ``schema``: a PostgreSQL schema to keep the tables in (created when
    missing), so one database can hold several stores; the default is the
    connection's search path (``public``).
    """

    def __init__(
        self, conninfo: str, *, schema: str | None = None, count: Sequence[str] = ()
    ) -> None:
        if schema is not None and not _NAME.fullmatch(schema):
            raise StoreError(f"PostgresStore: {schema!r} is not a plain schema name "
                             "(letters, digits, underscores)")  # fmt: skip
        self.conninfo = conninfo
        self.schema = schema
        super().__init__(_Postgres(conninfo, schema), count)

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"


__all__ = ["PostgresStore"]
