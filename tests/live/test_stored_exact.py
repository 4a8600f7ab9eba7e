"""Exact counts kept by the stores (``count=``): every part is counted in
each family as it is stored, loads back with the session, and the loaded
session's table carries ``Transcript.count``'s columns, so the live estimate
under ``<family>-exact`` reads them; a count whose text changed since is
never read."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import tool_reply, user
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.live.store import MemoryStore, SQLiteStore
from ctxcompact.models import Session
from ctxcompact.scans import estimate_messages
from ctxcompact.transcript import Transcript, sessions_to_table
from ctxcompact.transcript.rows import exact_part_counts
from test_stored_counts import mixed

EXACT = CompactionConfig(estimate_method="o200k-exact")


def open_counting(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "memory":
        return MemoryStore(count=["o200k"])
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "store.db", count=["o200k"])
    from ctxcompact.live.postgres import PostgresStore

    conninfo, schema = request.getfixturevalue("pg_schema")
    return PostgresStore(conninfo, schema=schema, count=["o200k"])


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    s = open_counting(request.param, tmp_path, request)
    yield s
    if request.param != "memory":
        s.close()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The SQL stores only: a test that forges their rows."""
    s = open_counting(request.param, tmp_path, request)
    yield s
    s.close()


def fresh(session: Session) -> Any:
    """The session's table counted from its texts (a copy without stored counts)."""
    copy = Session.model_validate(session.to_export())
    return Transcript(sessions_to_table([copy])).count("o200k").to_arrow()


def tokens(table: Any) -> list[int]:
    return estimate_messages(table, EXACT).messages.column("tokens").to_pylist()


def filled(session: Session) -> int:
    """The rows of the session's table that hold a stored o200k count."""
    table = sessions_to_table([session])
    return table.num_rows - table.column("output_tokens_o200k").null_count


def test_every_part_loads_with_its_exact_counts(store: Any) -> None:
    sid = store.create_session()
    messages = mixed()
    for m in messages:
        store.append_message(sid, m)
    for loaded in (store.load(sid), store.load_since(sid).session):
        table = sessions_to_table([loaded])
        want = fresh(loaded)
        for name in ("output_tokens_o200k", "output_hash", "input_tokens_o200k", "input_hash"):
            got = table.column(name).to_pylist()
            # every part with a text has its count, and it is the text's
            assert [g for g in got if g is not None] == [
                w for g, w in zip(got, want.column(name).to_pylist(), strict=True) if g is not None
            ], name
        assert filled(loaded) == sum(1 for o in table.column("output").to_pylist() if o is not None)
        assert tokens(table) == tokens(want)
    # appended after a read: load_since keeps both reads' counts
    first = store.load_since(sid)
    store.append_message(sid, user("and one more 😀"))
    later = store.load_since(sid, first.cursor)
    assert not later.whole
    assert filled(later.session) == 1


def test_the_live_estimate_reads_the_stored_counts(sql_store: Any, tmp_path: Path) -> None:
    store = sql_store  # its rows are forged below
    sid = store.create_session()
    u = user("find it")
    reply = tool_reply(u.id, "line 🚀\n" * 40)
    for m in (u, reply):
        store.append_message(sid, m)
    honest = tokens(sessions_to_table([store.load(sid)]))
    part = reply.parts[0].id
    # a count forged beside the right hash is read: the estimate reads the store
    _forge(store, sid, part, lambda c: {**c, "o200k": [c["o200k"][0] + 1000, *c["o200k"][1:]]})
    assert sum(tokens(sessions_to_table([store.load(sid)]))) == sum(honest) + 1000
    # the text changed under it (the part rewritten with the count left): never read
    _rewrite(store, sid, part, "another output entirely")
    loaded = store.load(sid)
    assert tokens(sessions_to_table([loaded])) == tokens(fresh(loaded))


def _sql(store: Any) -> tuple[Any, str]:
    if isinstance(store, SQLiteStore):
        return sqlite3.connect(store.path, isolation_level=None), "?"
    import psycopg

    db = psycopg.connect(store.conninfo, autocommit=True)
    db.execute(f'SET search_path TO "{store.schema}"')
    return db, "%s"


def _forge(store: Any, sid: str, part: str, change: Any) -> None:
    db, m = _sql(store)
    row = db.execute(f"SELECT exact_counts FROM parts WHERE session_id = {m} AND id = {m}",
                     (sid, part)).fetchone()  # fmt: skip
    counts = change(json.loads(row[0]))
    db.execute(f"UPDATE parts SET exact_counts = {m} WHERE session_id = {m} AND id = {m}",
               (json.dumps(counts), sid, part))  # fmt: skip
    db.close()


def _rewrite(store: Any, sid: str, part: str, output: str) -> None:
    db, m = _sql(store)
    row = db.execute(f"SELECT data FROM parts WHERE session_id = {m} AND id = {m}",
                     (sid, part)).fetchone()  # fmt: skip
    data = json.loads(row[0])
    data["state"]["output"] = output
    db.execute(f"UPDATE parts SET data = {m} WHERE session_id = {m} AND id = {m}",
               (json.dumps(data), sid, part))  # fmt: skip
    db.close()


@pytest.mark.parametrize("bad", ["not json", '["a list"]', '{"o200k": "x"}',
                                 '{"o200k": [1, 2, 3]}', '{"o200k": [-1, 2, 3, 4]}'])  # fmt: skip
def test_a_stored_value_the_store_did_not_make_is_counted_from_the_text(
    tmp_path: Path, bad: str
) -> None:
    with SQLiteStore(tmp_path / "s.db", count=["o200k"]) as s:
        sid = s.create_session()
        u = user("find it")
        reply = tool_reply(u.id, "some output")
        for m in (u, reply):
            s.append_message(sid, m)
        _forge(s, sid, reply.parts[0].id, lambda c: None)
        db = sqlite3.connect(s.path, isolation_level=None)
        db.execute("UPDATE parts SET exact_counts = ? WHERE id = ?", (bad, reply.parts[0].id))
        db.close()
        loaded = s.load(sid)
        assert tokens(sessions_to_table([loaded])) == tokens(fresh(loaded))


def test_a_store_without_count_keeps_no_exact_column(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as s:
        sid = s.create_session()
        s.append_message(sid, user("hello"))
        assert "output_tokens_o200k" not in sessions_to_table([s.load(sid)]).column_names


def test_a_bad_count_option_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gpt4"):
        MemoryStore(count=["gpt4"])
    with pytest.raises(ConfigError, match="gpt4"):
        SQLiteStore(tmp_path / "s.db", count=["gpt4"])
    with pytest.raises(InputTypeError):
        MemoryStore(count="o200k")


DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
def test_a_store_counts_each_part_as_the_table_does_on_every_shared_session() -> None:
    """The texts a store counts (``countable_texts``: the core mapper's
    ``output`` and ``input``, arguments as its compact JSON) are the session
    table's, part by part, on every shared run read as sessions."""
    import ctxcompact as cc

    parts_seen = inputs_seen = 0
    for folder in sorted(p for p in DATA.iterdir() if p.is_dir()):
        for session in cc.read_sessions(folder).transcript.to_sessions():
            table = Transcript(sessions_to_table([session])).count("o200k").to_arrow()
            names = ("output_tokens_o200k", "output_hash", "input_tokens_o200k", "input_hash")
            columns = {n: table.column(n).to_pylist() for n in (*names, "output", "input")}
            row = 0
            for message in session.messages:
                parts = message.to_export().get("parts", [])
                for i, counts in enumerate(exact_part_counts(parts, ["o200k"])):
                    want = [columns[n][row + i] for n in names]
                    for k, text in enumerate(("output", "input")):
                        if columns[text][row + i] is None:
                            want[2 * k] = want[2 * k + 1] = None
                    got = (counts or {}).get("o200k", [None] * 4)
                    assert got == want, (folder.name, session.id, message.id, i)
                    parts_seen += 1
                    inputs_seen += want[2] is not None
                row += max(1, len(parts))
    assert parts_seen > 1000 and inputs_seen > 100, (parts_seen, inputs_seen)
