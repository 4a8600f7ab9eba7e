"""The live path refuses what it would otherwise store or send wrong."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import ConfigError, OrphanedToolResultError, TranscriptError
from ctxcompact.live.store import MemoryStore, SQLiteStore
from ctxcompact.models import MessageWithParts, Part, UserMessage


def test_assigning_a_bad_value_is_a_config_error_and_counts_as_set() -> None:
    cfg = cc.CompactionConfig()
    for name, value in [("timeout_s", -5), ("timeout_s", float("inf")), ("continue_text", "")]:
        with pytest.raises(ConfigError, match=name):
            setattr(cfg, name, value)
    cfg.prune_protect = 5  # applied by the policy, as a value given to the constructor is
    assert cfg.sources()["prune_protect"] == "argument"
    assert cfg.prune_policy().protect == 5
    with pytest.raises(ConfigError, match="timeout_s"):
        cc.CompactionConfig(timeout_s=float("inf"))


def _message(session: str, mid: str, parts: list[tuple[str, str | None]]) -> MessageWithParts:
    return MessageWithParts(
        info=UserMessage(id=mid, sessionID=session),
        parts=[Part(id=pid, type="text", text="hi", messageID=owner) for pid, owner in parts],
    )


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    s.create_session("A")
    s.create_session("B")
    yield s


def test_a_store_refuses_ids_that_contradict_where_they_go(store: Any) -> None:
    with pytest.raises(TranscriptError, match="names session 'B'"):
        store.append_message("A", _message("B", "m1", [("p1", "m1")]))
    with pytest.raises(TranscriptError, match="names message 'other'"):
        store.append_message("A", _message("A", "m1", [("p1", "other")]))
    store.append_message("A", _message("A", "m1", [("p1", "m1")]))
    with pytest.raises(TranscriptError, match="p1"):
        store.append_message("A", _message("A", "m2", [("p1", "m2")]))  # a part id again
    assert [m.id for m in store.load("A").messages] == ["m1"]  # nothing half-stored
    assert store.recall("A", "p1") == "hi"


def test_compact_messages_refuses_a_list_no_api_takes() -> None:
    orphan = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9",
                                                 "content": "out"}]  # fmt: skip
    with pytest.raises(OrphanedToolResultError):
        cc.compact_messages(orphan, cc.Summarizer(None), context=100_000)


class _Html(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b"<html>502 bad gateway</html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_that_is_not_the_api_is_named_as_such(stream: bool) -> None:
    from ctxcompact.clients.openai import OpenAIChatClient

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        client = OpenAIChatClient("m", base_url=url, api_key="x", stream=stream, max_retries=0)
        try:
            out = cc.Summarizer(client).summarize([{"role": "user", "content": "hi"}])
        finally:
            client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert out.source == "digest"  # the fallback, as documented
    assert out.error is not None and "max_tokens" not in out.error
    assert "not" in out.error and "SummaryClientError" in out.error


def test_wrong_kinds_of_live_arguments_are_input_type_errors() -> None:
    import asyncio

    from ctxcompact.errors import InputTypeError

    compactor = cc.Compactor(MemoryStore(), cc.Summarizer(None), limits={"context": 100_000})
    loop = cc.CompactionLoop(compactor)
    sid = compactor.store.create_session()
    loop.add_user(sid, "go")
    for call in (lambda: loop.before_call(None), lambda: compactor.process_pending(5),
                 lambda: compactor.request_compaction(None), lambda: loop.after_step(None),
                 lambda: asyncio.run(loop.abefore_call(None))):  # fmt: skip
        with pytest.raises(InputTypeError, match="session id must be a str"):
            call()
    with pytest.raises(InputTypeError, match=r"finish_reason must be a str .*, got int") as e:
        loop.after_step(sid, finish_reason=123)  # type: ignore[arg-type]
    assert e.value.session_id == sid
    with pytest.raises(InputTypeError, match="instructions must be a str, got int"):
        compactor.request_compaction(sid, instructions=5)  # type: ignore[arg-type]
    assert compactor.pending_task(compactor.store.load(sid)) is None  # nothing queued


def test_blank_continue_text_and_limits_of_the_wrong_kind_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="only whitespace") as e:
        cc.CompactionConfig(continue_text="   ")
    assert e.value.column == "continue_text"
    for limits, said in [(128_000, "got int 128000"), ("gpt-4o", "got str 'gpt-4o'"),
                         ({"context": -5}, "non-negative"), ({}, "no 'context'")]:  # fmt: skip
        with pytest.raises(ConfigError, match=said) as e:
            cc.Compactor(MemoryStore(), cc.Summarizer(None), limits=limits)
        assert e.value.column == "limits"


def test_session_info_of_the_wrong_kind_is_refused_when_the_session_is_created(
    store: Any,
) -> None:
    # title=5 was stored, and the session could not be loaded after (pydantic's
    # ValidationError); a value JSON cannot hold failed the SQLite write.
    from ctxcompact.errors import InputTypeError

    with pytest.raises(InputTypeError, match="title must be a str"):
        store.create_session(title=5)
    with pytest.raises(InputTypeError, match="session_id must be a str"):
        store.create_session(5)
    with pytest.raises(InputTypeError, match="JSON"):
        store.create_session(owner=object())
    with pytest.raises(InputTypeError, match="session_id"):
        store.create_session(id="x")
    sid = store.create_session(title="t", tags=["a"])
    assert store.load(sid).info.title == "t"


def test_reason_calibrate_and_budget_refuse_arguments_of_the_wrong_kind() -> None:
    from ctxcompact.errors import InputTypeError
    from ctxcompact.live import CompactionLoop, Compactor, Summarizer, UsageCalibrator

    store = MemoryStore()
    compactor = Compactor(store, Summarizer(None), limits={"context": 16000, "output": 2000})
    sid = store.create_session()
    with pytest.raises(InputTypeError, match="reason must be a non-empty str"):
        compactor.request_compaction(sid, reason=5)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="auto must be a bool"):
        compactor.request_compaction(sid, auto="yes")  # type: ignore[arg-type]
    assert store.load(sid).messages == []  # nothing queued
    assert compactor.request_compaction(sid, reason="handoff")
    assert compactor.process_pending(sid).reason == "handoff"  # type: ignore[union-attr]
    calibrator = UsageCalibrator()
    with pytest.raises(InputTypeError, match="must be an int"):
        calibrator.calibrate("m", "x")  # type: ignore[arg-type]  # returned "x"
    with pytest.raises(InputTypeError, match="model must be a str"):
        calibrator.calibrate(5, 10)  # type: ignore[arg-type]
    assert calibrator.calibrate("m", 10) == 10
    loop = CompactionLoop(compactor)
    with pytest.raises(InputTypeError, match="history_tokens"):
        loop.budget("x")  # type: ignore[arg-type]  # a bare TypeError from `<`
    assert loop.budget(100) is not None


def test_a_sqlite_write_lock_held_past_the_timeout_is_a_store_error(tmp_path: Path) -> None:
    """Another connection holding the file's write lock past the timeout is
    a ``StoreError`` naming the store (not sqlite3's own error), and nothing
    of the refused write is stored."""
    import sqlite3

    from ctxcompact.errors import StoreError

    path = tmp_path / "s.db"
    store = SQLiteStore(path, timeout=0.05)
    store.create_session("s1")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        with pytest.raises(StoreError, match=r"s\.db.*locked.*0\.05 s timeout"):
            store.create_session("s2")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.session_ids() == ["s1"]
    store.create_session("s2")  # the lock released, the store works on
    assert store.session_ids() == ["s1", "s2"]
    store.close()


@pytest.mark.parametrize("timeout", [-1, "30", True, float("nan")])
def test_a_sqlite_timeout_that_is_not_seconds_is_refused(tmp_path: Path, timeout: Any) -> None:
    from ctxcompact.errors import InputTypeError

    with pytest.raises(InputTypeError, match="timeout"):
        SQLiteStore(tmp_path / "s.db", timeout=timeout)
    assert not (tmp_path / "s.db").exists()
