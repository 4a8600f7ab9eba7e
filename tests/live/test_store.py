"""SessionStore semantics, the same for SQLite, PostgreSQL and memory."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.errors import (
    CompactionConflictError,
    InputTypeError,
    SessionNotFoundError,
    TranscriptError,
)
from ctxcompact.live.events import CompactionRecord
from ctxcompact.live.store import MemoryStore, SQLiteStore, new_id
from ctxcompact.models import AssistantMessage, MessageWithParts, Part


def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A new store instance on the backend's shared storage (a second call opens
    the same data, as another process would)."""
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "store.db")
    from ctxcompact.live.postgres import PostgresStore

    conninfo, schema = request.getfixturevalue("pg_schema")
    return PostgresStore(conninfo, schema=schema)


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
    else:
        s = open_store(request.param, tmp_path, request)
        yield s
        s.close()


def record(session: str, marker: str) -> CompactionRecord:
    return CompactionRecord(session_id=session, family="pivot", trigger="auto", reason="overflow",
                            round=1, tokens_before=100, tokens_after=10, summary_source="model",
                            marker_message_id=marker)  # fmt: skip


def summary_for(marker: str) -> MessageWithParts:
    return MessageWithParts(
        info=AssistantMessage(id=new_id("msg"), parentID=marker, summary=True, finish="stop"),
        parts=[Part(id=new_id("prt"), type="text", text="notes")],
    )


def test_ids_ascend() -> None:
    ids = [new_id("msg") for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == 2000


def test_round_trip_keeps_order_and_every_field(store: Any) -> None:
    sid = store.create_session("s1", title="t")
    u = user("hello")
    reply = tool_reply(u.id, "out")
    reply.parts[0].state.metadata = {"exit": 0}  # type: ignore[union-attr]
    for m in (u, reply):
        store.append_message(sid, m)
    loaded = store.load(sid)
    assert loaded.info.title == "t"
    assert [m.to_export() for m in loaded.messages] == [u.to_export(), reply.to_export()]
    assert store.session_ids() == ["s1"]
    assert store.create_session("s1") == "s1"  # idempotent


def test_a_loaded_session_is_the_callers_own_copy(store: Any) -> None:
    """Changing what ``load`` returned, nested values included, or the message
    that was appended, never changes what the store holds."""
    sid = store.create_session()
    u = user("hello")
    reply = tool_reply(u.id, "out")
    reply.parts[0].state.input = {"filePath": "a.py", "lines": [1, 2]}  # type: ignore[union-attr]
    reply.parts[0].state.metadata = {"exit": {"code": 0}}  # type: ignore[union-attr]
    for m in (u, reply):
        store.append_message(sid, m)
    expected = [m.to_export() for m in store.load(sid).messages]
    state = store.load(sid).messages[1].parts[0].state
    state.input["lines"].append(3)  # type: ignore[union-attr]
    state.metadata["exit"]["code"] = 1  # type: ignore[union-attr]
    reply.parts[0].state.input["filePath"] = "b.py"  # type: ignore[union-attr]
    store.mark_parts(sid, {reply.parts[0].id: 7})
    state = store.load(sid).messages[1].parts[0].state
    assert state.input == {"filePath": "a.py", "lines": [1, 2]}  # type: ignore[union-attr]
    assert state.metadata == {"exit": {"code": 0}}  # type: ignore[union-attr]
    assert store.load(sid).messages[0].to_export() == expected[0]


def test_unknown_session_and_duplicate_message(store: Any) -> None:
    with pytest.raises(SessionNotFoundError):
        store.load("nope")
    with pytest.raises(SessionNotFoundError):
        store.append_message("nope", user())
    sid = store.create_session()
    u = user()
    store.append_message(sid, u)
    with pytest.raises(TranscriptError):
        store.append_message(sid, u)


def test_marks_set_compacted_and_keep_the_output(store: Any) -> None:
    sid = store.create_session()
    u = user()
    reply = tool_reply(u.id, "precious output")
    store.append_message(sid, u)
    store.append_message(sid, reply)
    store.mark_parts(sid, {reply.parts[0].id: 1234})
    part = store.load(sid).messages[1].parts[0]
    assert part.state.time.compacted == 1234  # type: ignore[union-attr]
    assert part.state.output == "precious output"  # type: ignore[union-attr]
    with pytest.raises(TranscriptError):
        store.mark_parts(sid, {u.parts[0].id: 1})  # a text part has no tool state


def test_commit_compaction_is_all_or_nothing_and_once(store: Any) -> None:
    sid = store.create_session()
    u = user()
    reply = tool_reply(u.id, "out")
    marker = user("What did we do so far?")
    for m in (u, reply, marker):
        store.append_message(sid, m)
    before = [m.to_export() for m in store.load(sid).messages]
    # A bad mark (unknown part) must leave nothing behind: no summary, no record.
    with pytest.raises(TranscriptError):
        store.commit_compaction(sid, marker_id=marker.id, summary=summary_for(marker.id),
                                continue_message=None, marks={"nope": 1},
                                record=record(sid, marker.id))  # fmt: skip
    assert [m.to_export() for m in store.load(sid).messages] == before
    assert store.records(sid) == []
    rec = record(sid, marker.id)
    store.commit_compaction(sid, marker_id=marker.id, summary=summary_for(marker.id),
                            continue_message=user("Continue if you have next steps"),
                            marks={reply.parts[0].id: 5}, record=rec)  # fmt: skip
    loaded = store.load(sid)
    assert len(loaded.messages) == 5 and loaded.messages[1].parts[0].compacted
    assert store.records(sid) == [rec]
    with pytest.raises(CompactionConflictError) as e:
        store.commit_compaction(sid, marker_id=marker.id, summary=summary_for(marker.id),
                                continue_message=None, marks={},
                                record=record(sid, marker.id))  # fmt: skip
    assert e.value.record == rec
    assert len(store.load(sid).messages) == 5


def test_a_part_id_already_stored_is_named_and_nothing_is_half_stored(store: Any) -> None:
    """Every store names the part id it refuses (PostgreSQL gave the server's
    key detail instead)."""
    sid = store.create_session()
    u = user()
    store.append_message(sid, u)
    again = user()
    again.parts[0].id = u.parts[0].id
    with pytest.raises(TranscriptError, match=f"part id {u.parts[0].id} is already stored") as e:
        store.append_message(sid, again)
    assert e.value.message_id == again.id and e.value.session_id == sid
    assert [m.id for m in store.load(sid).messages] == [u.id]
    store.append_message(sid, user())  # the store is still usable
    assert len(store.load(sid).messages) == 2


def test_marks_on_more_parts_than_one_lookup_takes(store: Any) -> None:
    """A compaction may mark many parts at once: all are marked, or none when
    one of them is missing."""
    sid = store.create_session()
    u = user()
    reply = tool_reply(u.id, "out")
    first = reply.parts[0]
    reply.parts = [first.model_copy(update={"id": new_id("prt"), "callID": new_id("call")})
                   for _ in range(1203)]  # fmt: skip
    for m in (u, reply):
        store.append_message(sid, m)
    ids = [p.id for p in reply.parts]
    with pytest.raises(TranscriptError, match="no part nope to mark"):
        store.mark_parts(sid, {**dict.fromkeys(ids, 1), "nope": 1})
    assert not any(p.compacted for p in store.load(sid).messages[1].parts)
    store.mark_parts(sid, dict.fromkeys(ids, 7))
    parts = store.load(sid).messages[1].parts
    assert [p.id for p in parts] == ids
    assert all(p.state.time.compacted == 7 for p in parts)  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_concurrent_commits_have_one_winner(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    setup = open_store(backend, tmp_path, request)
    sid = setup.create_session()
    marker = user("What did we do so far?")
    setup.append_message(sid, marker)
    barrier = threading.Barrier(4)
    outcomes: list[str] = []

    # Each store opens its own connections (in the thread using it), as a process would.
    stores = [open_store(backend, tmp_path, request) for _ in range(4)]

    def run(store: Any) -> None:
        barrier.wait()
        try:
            store.commit_compaction(sid, marker_id=marker.id, summary=summary_for(marker.id),
                                    continue_message=None, marks={},
                                    record=record(sid, marker.id))  # fmt: skip
            outcomes.append("won")
        except CompactionConflictError:
            outcomes.append("lost")
        finally:
            store.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
    assert sum(1 for m in setup.load(sid).messages if m.info.role == "assistant") == 1
    assert len(setup.records(sid)) == 1
    setup.close()


def test_close_from_the_main_thread_after_the_async_path_used_the_store(tmp_path: Path) -> None:
    # The async lifecycle runs store I/O in worker threads, each with its own
    # connection; closing from the main thread must close those too.
    import asyncio

    from ctxcompact.live.compactor import Compactor
    from ctxcompact.live.summary import Summarizer

    store = SQLiteStore(tmp_path / "s.db")
    sid = store.create_session("s")
    store.append_message(sid, user("hello"))
    compactor = Compactor(store, Summarizer(None), limits={"context": 100_000})

    async def run() -> None:
        await compactor.arequest_compaction(sid)
        assert (await compactor.aprocess_pending(sid)) is not None

    asyncio.run(run())
    worker_dbs = list(store._connections)
    assert len(worker_dbs) >= 2  # the main thread's and at least one worker's
    store.close()  # raised sqlite3.ProgrammingError (created in another thread)
    for db in worker_dbs:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            db.execute("SELECT 1")
    store.close()  # closing twice is harmless
    # the file holds the compaction; a new store reads it back
    with SQLiteStore(tmp_path / "s.db") as again:
        assert len(again.records(sid)) == 1


def test_a_commit_value_and_its_keywords_write_the_same(store: Any) -> None:
    from ctxcompact.live.store import Commit

    sid = store.create_session()
    marker = user("What did we do so far?")
    store.append_message(sid, marker)
    commit = Commit(marker.id, summary_for(marker.id), None, {}, record(sid, marker.id))
    store.commit_compaction(sid, commit)
    assert store.records(sid) == [commit.record]
    assert store.load(sid).messages[-1].to_export() == commit.summary.to_export()
    with pytest.raises(CompactionConflictError):
        store.commit_compaction(sid, **vars(commit))
    with pytest.raises(TypeError, match="not both"):
        store.commit_compaction(sid, commit, marks={})


def test_a_store_with_the_keyword_only_signature_is_a_typed_error_naming_it() -> None:
    """The Compactor calls ``commit_compaction(session_id, commit)`` one way; a
    store that cannot take it fails with InputTypeError naming the store and
    the signature (not adapted to, not a bare TypeError), writing nothing."""
    from ctxcompact.clients.base import SummaryRequest, SummaryResponse
    from ctxcompact.config import CompactionConfig
    from ctxcompact.live import Compactor, Summarizer

    class OldStore(MemoryStore):
        def commit_compaction(  # type: ignore[override]
            self, session_id: str, *, marker_id: str, summary: MessageWithParts,
            continue_message: MessageWithParts | None, marks: Any, record: CompactionRecord,
        ) -> None:  # fmt: skip
            super().commit_compaction(session_id, marker_id=marker_id, summary=summary,
                                      continue_message=continue_message, marks=marks,
                                      record=record)  # fmt: skip

    class Model:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            return SummaryResponse("## Summary\nnotes", "stop")

    store = OldStore()
    sid = store.create_session()
    store.append_message(sid, user("hello"))
    compactor = Compactor(store, Summarizer(Model(), CompactionConfig()))
    compactor.request_compaction(sid)
    with pytest.raises(InputTypeError, match=r"OldStore\.commit_compaction cannot take") as e:
        compactor.process_pending(sid)
    assert "commit_compaction(session_id, commit)" in str(e.value)
    assert e.value.session_id == sid and not store.records(sid)
    assert compactor.pending_task(store.load(sid)) is not None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_workers_on_one_marker_give_one_summary_and_one_conflict(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    from ctxcompact.clients.base import SummaryRequest, SummaryResponse
    from ctxcompact.live import Compactor, Summarizer

    # Both workers reach the model before either commits: each writes a summary,
    # the store lets exactly one of them land.
    at_model = threading.Barrier(2)

    class Model:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            at_model.wait(timeout=30)
            return SummaryResponse(f"## Summary\nfrom {threading.current_thread().name}", "stop")

    setup = open_store(backend, tmp_path, request)
    sid = setup.create_session("s")
    setup.append_message(sid, user("hello"))
    marker = Compactor(setup, Summarizer(Model()), limits={"context": 100_000}).request_compaction(
        sid
    )
    stores = [open_store(backend, tmp_path, request) for _ in range(2)]
    outcomes: dict[str, Any] = {}

    def work(store: Any) -> None:
        name = threading.current_thread().name
        try:
            compactor = Compactor(store, Summarizer(Model()), limits={"context": 100_000})
            outcomes[name] = compactor.process_pending(sid)
        except CompactionConflictError as e:
            outcomes[name] = e

    threads = [threading.Thread(target=work, args=(s,), name=f"w{i}") for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes.values() if isinstance(o, CompactionRecord)]
    losers = [o for o in outcomes.values() if isinstance(o, CompactionConflictError)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].record == winners[0] and winners[0].marker_message_id == marker
    summaries = [m for m in setup.load(sid).messages if getattr(m.info, "summary", None) is True]
    assert len(summaries) == 1 and setup.records(sid) == winners
    for s in (*stores, setup):
        s.close()


def test_postgres_store_errors_say_which_store_and_why(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    from ctxcompact.errors import StoreError
    from ctxcompact.live.postgres import PostgresStore

    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL store"):
        PostgresStore(f"host={tmp_path} dbname=postgres user=postgres connect_timeout=2")
    with pytest.raises(StoreError, match="not a plain schema name"):
        PostgresStore(pg_schema[0], schema='x"; DROP TABLE sessions; --')
    store = PostgresStore(pg_schema[0], schema=pg_schema[1])
    # The message a failed insert names is not half-written: the session is as before.
    sid = store.create_session()
    u = user()
    store.append_message(sid, u)
    with pytest.raises(TranscriptError, match=u.id):
        store.append_message(sid, u)
    with pytest.raises(TranscriptError, match="no part nope"):
        store.mark_parts(sid, {"nope": 1})
    # a part id stored twice: the second message is refused whole
    again = user()
    again.parts[0].id = u.parts[0].id
    with pytest.raises(TranscriptError, match=f"cannot store the parts of message {again.id}"):
        store.append_message(sid, again)
    assert [m.id for m in store.load(sid).messages] == [u.id]
    store.close()
    # A closed store reconnects on the next call instead of failing.
    assert store.session_ids() == [sid]
    store.close()


def test_postgres_tables_another_program_made_are_refused_and_left_as_they_were(
    pg_schema: tuple[str, str],
) -> None:
    """Was psycopg's untyped error on creating the other tables (their foreign
    keys name columns the foreign table lacks), after some were created."""
    import psycopg
    from ctxcompact.errors import StoreError
    from ctxcompact.live.postgres import PostgresStore

    conninfo, schema = pg_schema
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'CREATE TABLE "{schema}".sessions (name TEXT)')
    with pytest.raises(StoreError, match=r"not a ctxcompact PostgreSQL store \(its table "
                       r"'sessions' has no column id, info\)") as e:  # fmt: skip
        PostgresStore(conninfo, schema=schema)
    assert f"schema {schema}" in str(e.value)
    with psycopg.connect(conninfo, autocommit=True) as db:
        tables = db.execute("SELECT table_name FROM information_schema.tables "
                            "WHERE table_schema = %s", (schema,)).fetchall()  # fmt: skip
    assert tables == [("sessions",)]


def test_an_existing_sqlite_store_opens_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """Opening writes nothing when the tables are there: a worker opening the
    file while another holds its write lock (mid-commit) is not kept waiting."""
    import time

    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        sid = store.create_session()
    hold = sqlite3.connect(path, isolation_level=None)
    hold.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        with SQLiteStore(path) as store:
            assert store.load(sid).id == sid
        assert time.monotonic() - start < 5
    finally:
        hold.execute("ROLLBACK")
        hold.close()


def test_a_bad_sqlite_path_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    """Was sqlite3's OperationalError / DatabaseError or pathlib's TypeError,
    none naming the file; another program's database gained our tables."""
    import sqlite3

    from ctxcompact.errors import InputTypeError, StoreError
    from ctxcompact.live.store import SQLiteStore

    with pytest.raises(IsADirectoryError) as folder:
        SQLiteStore(tmp_path)
    assert folder.value.filename == str(tmp_path)
    missing = tmp_path / "no" / "x.db"
    with pytest.raises(FileNotFoundError, match="does not exist") as gone:
        SQLiteStore(missing)
    assert gone.value.filename == str(missing)
    with pytest.raises(InputTypeError, match="file path"):
        SQLiteStore(5)  # type: ignore[arg-type]
    junk = tmp_path / "junk.db"
    junk.write_text("not a database " * 100)
    with pytest.raises(StoreError, match=f"{junk}: not a ctxcompact SQLite store"):
        SQLiteStore(junk)
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE sessions (name TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="table 'sessions' has no column id, info"):
        SQLiteStore(other)
    db = sqlite3.connect(other)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert tables == {"sessions"}  # left as it was
    with SQLiteStore(tmp_path / "ok.db") as store:  # a good path still works
        sid = store.create_session()
    with SQLiteStore(tmp_path / "ok.db") as store:
        assert store.load(sid).id == sid
