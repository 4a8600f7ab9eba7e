"""Counted once on a store append (issue 15): every stored output's
``output_utf16`` is kept with its part, loads back with the session
(``Session._stored``), and is what the session's table reads; an edited text
is counted again, never given the old count; a store file of the previous
schema gains the column."""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
import test_store
from builders import tool_reply, user
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.errors import TranscriptError
from ctxcompact.live.store import MemoryStore, SQLiteStore, new_id
from ctxcompact.models import (
    AssistantMessage,
    MessageWithParts,
    Part,
    Session,
    StoredCounts,
    model_output,
    part_output,
)
from ctxcompact.scans.reference import part_row
from ctxcompact.transcript import count_texts, sessions_to_table
from test_store import record, summary_for

#: The stores under test: test_store's fixture (SQLite, PostgreSQL, memory).
store = test_store.store


class Instant:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse("## Summary\nwhat was done 😀", "stop")


def known(session: Session) -> dict[str, tuple[str, int]]:
    kept = (session.__pydantic_private__ or {}).get("_stored")
    return {} if kept is None else kept.by_id()


def stored(session: Session) -> dict[str, int]:
    """The stored count of every part that has one (and still holds its text)."""
    found = {}
    counts = known(session)
    for message in session.messages:
        for part in message.parts:
            hit = counts.get(part.id)
            if hit is not None and hit[0] is part_output(part.to_export()):
                found[part.id] = hit[1]
    return found


def fresh(session: Session) -> dict[str, int]:
    """Every part's count from its text, on a copy that holds no stored count."""
    table = sessions_to_table([Session.model_validate(session.to_export())])
    return {
        p: n
        for p, n, out in zip(*(table.column(c).to_pylist()
                               for c in ("part_id", "output_utf16", "output")), strict=True)
        if p is not None and out is not None
    }  # fmt: skip


def assert_counted(session: Session) -> None:
    """Every output is counted, each count is its text's, and the table reads them."""
    assert stored(session) == fresh(session)
    column = sessions_to_table([session]).column("output_utf16")
    assert column == sessions_to_table([Session.model_validate(session.to_export())]).column(
        "output_utf16"
    )


def mixed(parent: str | None = None) -> list[MessageWithParts]:
    """A user turn and a reply of every part kind, astral characters included
    (their UTF-16 length is not their length in code points)."""
    u = user("find 😀 in 𝒳")
    reply = MessageWithParts(
        info=AssistantMessage(id=new_id("msg"), parentID=u.id, finish="tool-calls"),
        parts=[
            Part(id=new_id("prt"), type="reasoning", text="think 🤔"),
            Part(id=new_id("prt"), type="step-start"),
            Part(id=new_id("prt"), type="text", text=""),
        ],
    )
    done = tool_reply(u.id, "line 🚀\n" * 50)
    failed = tool_reply(u.id, "no such file 💥", status="error")
    running = tool_reply(u.id, "", status="running")
    return [u, reply, done, failed, running]


def test_every_stored_output_loads_with_its_count(store: Any) -> None:
    sid = store.create_session()
    messages = mixed()
    for m in messages:
        store.append_message(sid, m)
    loaded = store.load(sid)
    assert_counted(loaded)
    texts = [p for m in messages for p in m.parts if part_output(p.to_export()) is not None]
    assert len(stored(loaded)) == len(texts) == 5
    assert stored(loaded)[messages[2].parts[0].id] == len("line 🚀\n".encode("utf-16-le")) // 2 * 50
    # the count is never exported and never part of equality
    assert "_counted" not in json.dumps(loaded.to_export())
    assert loaded == Session.model_validate(loaded.to_export())
    assert stored(pickle.loads(pickle.dumps(loaded))) == stored(loaded)


def test_counts_stay_right_through_marks_and_a_compaction(store: Any) -> None:
    sid = store.create_session()
    messages = mixed()
    marker = user("What did we do so far?")
    for m in (*messages, marker):
        store.append_message(sid, m)
    tool = messages[2].parts[0].id
    store.mark_parts(sid, {tool: 10})
    assert_counted(store.load(sid))
    summary = summary_for(marker.id)
    store.commit_compaction(sid, marker_id=marker.id, summary=summary,
                            continue_message=user("Continue 😀"),
                            marks={messages[3].parts[0].id: 11},
                            record=record(sid, marker.id))  # fmt: skip
    loaded = store.load(sid)
    assert loaded.messages[2].parts[0].compacted
    assert_counted(loaded)
    assert summary.parts[0].id in stored(loaded)


def test_a_compactor_gives_the_same_result_with_and_without_stored_counts(
    tmp_path: Path,
) -> None:
    """The same session twice, one store's counts erased (as rows of an older
    release): prune, estimates and a whole compaction agree."""
    (session,) = cc.Transcript(generate_table(1, 60, seed=5, mean_output_chars=900)).to_sessions()
    with SQLiteStore(tmp_path / "a.db") as a:
        sid = a.create_session(session.id)
        for m in session.messages:
            a.append_message(sid, m)
        a.append_message(sid, user("What did we do so far?"))
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    with sqlite3.connect(tmp_path / "b.db") as db:
        db.execute("UPDATE parts SET output_utf16 = NULL")
    results = []
    for name in ("a.db", "b.db"):
        with SQLiteStore(tmp_path / name) as s:
            loaded = s.load(sid)
            assert bool(stored(loaded)) is (name == "a.db")
            config = cc.CompactionConfig(prune_minimum=0, prune_protect=1000)
            pruned = cc.prune(loaded, config)
            estimates = cc.estimate_messages(loaded, config)
            compactor = cc.Compactor(s, cc.Summarizer(Instant()), config=config,
                                     limits={"context": 50_000})  # fmt: skip
            compactor.request_compaction(sid)
            done = compactor.process_pending(sid)
            after = s.load(sid)
            marked = sorted(p.id for m in after.messages for p in m.parts if p.compacted)
            results.append((pruned.part_ids, pruned.total, pruned.pruned,
                            estimates.messages.to_pydict(), done.tokens_before if done else None,
                            done.tokens_after if done else None, marked))  # fmt: skip
            if name == "a.db":
                assert_counted(after)
    assert results[0] == results[1]
    assert results[0][0] and results[0][6]  # something was pruned and marked


def test_the_table_reads_the_stored_count_only_for_the_text_it_counted() -> None:
    """A stored count is used as it is (so a wrong one would show); an output
    or text replaced after the load, or a status change that shows another
    text, is counted again."""
    store = MemoryStore()
    sid = store.create_session()
    for m in mixed():
        store.append_message(sid, m)
    loaded = store.load(sid)
    _, reply, done, failed, _ = loaded.messages
    tool = done.parts[0]
    assert tool.state is not None and tool.state.output is not None
    known(loaded)[tool.id] = (tool.state.output, 7)
    assert column(loaded)[tool.id] == 7
    assert column(cc.filter_pivot(loaded))[tool.id] == 7  # copies keep the counts
    tool.state.output = "new output"
    assert column(loaded)[tool.id] == 10
    # same content, another object: counted again (right either way)
    known(loaded)[tool.id] = ("new output", 3)
    tool.state.output = "".join(["new ", "output"])
    assert column(loaded)[tool.id] == 10
    error = failed.parts[0]
    assert error.state is not None
    error.state.status = "completed"  # the row now shows state.output (None)
    assert column(loaded)[error.id] == 0
    reply.parts[0].text = "x"
    assert column(loaded)[reply.parts[0].id] == 1
    assert column(loaded) == column(Session.model_validate(loaded.to_export()))
    assert StoredCounts() == StoredCounts(by_id={"p": ("x", 1)})


def column(session: Session) -> dict[str, int]:
    table = sessions_to_table([session])
    return dict(zip(table.column("part_id").to_pylist(), table.column("output_utf16").to_pylist(),
                    strict=True))  # fmt: skip


def test_part_output_is_the_rows_output() -> None:
    session = Session.model_validate({"info": {"id": "s"}, "messages": mixed()})
    outputs = sessions_to_table([session]).column("output").to_pylist()
    parts = [p for m in session.messages for p in m.parts]
    assert len(parts) == len(outputs)
    for part, output in zip(parts, outputs, strict=True):
        data = part.to_export()
        assert part_output(data) is part_row(data).get("output")
        assert model_output(part) is part_output(data)  # the same str object
        assert output == part_output(data)


def test_a_text_utf8_cannot_hold_is_left_uncounted() -> None:
    assert count_texts(["ab", "\ud800", None, "😀"]) == [2, None, None, 2]
    store = MemoryStore()
    sid = store.create_session()
    store.append_message(sid, user("bad \ud800"))  # stored as before; the table names it
    with pytest.raises(TranscriptError, match="lone surrogate"):
        cc.prune(store.load(sid))


OLD_ROWS = [
    ("user", None, {"id": "prt_1", "type": "text", "text": "go 😀"}),
    ("assistant", "msg_0", {"id": "prt_2", "type": "tool", "tool": "read", "callID": "c",
                            "state": {"status": "completed", "input": {}, "output": "ok 🚀"}}),
]  # fmt: skip


def write_old_rows(db: Any, mark: str) -> None:
    """The rows an earlier release wrote: no count column."""
    db.execute(f"INSERT INTO sessions (id, info) VALUES ({mark}, {mark})", ("s", '{"id":"s"}'))
    for i, (role, parent, part) in enumerate(OLD_ROWS):
        info = {"id": f"msg_{i}", "role": role, **({"parentID": parent} if parent else {})}
        db.execute(f"INSERT INTO messages (session_id, id, role, parent_id, info) "
                   f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
                   ("s", f"msg_{i}", role, parent, json.dumps(info)))  # fmt: skip
        db.execute(f"INSERT INTO parts (session_id, message_id, id, data) "
                   f"VALUES ({mark}, {mark}, {mark}, {mark})",
                   ("s", f"msg_{i}", part["id"], json.dumps(part)))  # fmt: skip


def check_migrated(store: Any) -> None:
    loaded = store.load("s")
    assert stored(loaded) == {}  # old rows: counted when made a table
    assert sessions_to_table([loaded]).column("output_utf16").to_pylist() == [5, 5]
    store.append_message("s", user("more 😀"))
    loaded = store.load("s")
    assert list(stored(loaded).values()) == [7]
    assert column(loaded) == column(Session.model_validate(loaded.to_export()))
    # sessions.rev added too: a read since a cursor sees a mark as a change
    first = store.load_since("s")
    store.append_message("s", user("again"))
    assert not store.load_since("s", first.cursor).whole
    store.mark_parts("s", {OLD_ROWS[1][2]["id"]: 5})
    assert store.load_since("s", first.cursor).whole


def test_a_sqlite_file_of_the_previous_schema_gains_the_count_column(tmp_path: Path) -> None:
    from ctxcompact.live.store import _SCHEMA

    old = _SCHEMA.replace("    output_utf16 INTEGER,\n    exact_counts TEXT,\n", "").replace(
        "info TEXT NOT NULL,\n    rev INTEGER NOT NULL DEFAULT 0\n", "info TEXT NOT NULL\n"
    )
    assert "output_utf16" not in old and "rev" not in old and "exact_counts" not in old
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(old)
        write_old_rows(db, "?")
    db.close()
    with SQLiteStore(path) as s, SQLiteStore(path) as again:  # a second opener: nothing to do
        check_migrated(s)
        assert again.load("s") == s.load("s")


def test_a_postgres_schema_of_the_previous_release_gains_the_count_column(
    pg_schema: tuple[str, str],
) -> None:
    import psycopg
    from ctxcompact.live.postgres import _SCHEMA, PostgresStore

    old = _SCHEMA.replace("    output_utf16 BIGINT,\n    exact_counts TEXT,\n", "").replace(
        "info TEXT NOT NULL,\n    rev BIGINT NOT NULL DEFAULT 0\n", "info TEXT NOT NULL\n"
    )
    assert "output_utf16" not in old and "rev" not in old and "exact_counts" not in old
    conninfo, schema = pg_schema
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'SET search_path TO "{schema}"')
        db.execute(old)
        write_old_rows(db, "%s")
    with (
        PostgresStore(conninfo, schema=schema) as s,
        PostgresStore(conninfo, schema=schema) as again,
    ):
        check_migrated(s)
        assert again.load("s") == s.load("s")


def test_a_session_built_in_memory_has_no_stored_counts() -> None:
    """Sessions not loaded from a store are counted as before."""
    messages = mixed()
    session = Session.model_validate({"info": {"id": "s"},
                                      "messages": [m.to_export() for m in messages]})  # fmt: skip
    assert stored(session) == {}
    assert sessions_to_table([session]).column("output_utf16").type == pa.int64()
