"""A process killed anywhere in a compaction leaves the old state and a pending task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from builders import fill
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.postgres import PostgresStore
from ctxcompact.live.store import SQLiteStore
from ctxcompact.live.summary import Summarizer

WORKER = Path(__file__).with_name("crash_worker.py")


class Client:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse("## Session Summary\nrecovered notes", "stop")


@pytest.mark.parametrize("point", ["summary", "commit", "transaction"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_mid_compaction_then_recover_exactly_once(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, point: str
) -> None:
    if backend == "sqlite":
        where = str(tmp_path / "sessions.db")

        def open_store() -> Any:
            return SQLiteStore(where)
    else:
        conninfo, schema = request.getfixturevalue("pg_schema")
        where = f"{conninfo}|{schema}"

        def open_store() -> Any:
            return PostgresStore(conninfo, schema=schema)

    store = open_store()
    sid = store.create_session("s")
    fill(store, sid, 6)
    compactor = Compactor(store, Summarizer(Client()), limits={"context": 100_000})
    marker = compactor.request_compaction(sid)
    before = [m.to_export() for m in store.load(sid).messages]
    store.close()

    flag = tmp_path / "frozen"
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), backend, where, sid, point, str(flag)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert worker.poll() is None, f"worker exited early with {worker.returncode}"
        assert time.monotonic() < deadline, "worker never reached the freeze point"
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert worker.returncode == -signal.SIGKILL

    store = open_store()
    compactor = Compactor(store, Summarizer(Client()), limits={"context": 100_000})
    session = store.load(sid)
    # old state exactly: no summary, no prune marks, no record, the task still pending
    assert [m.to_export() for m in session.messages] == before
    assert store.records(sid) == []
    pending = compactor.pending_task(session)
    assert pending is not None and pending.id == marker

    record = compactor.process_pending(sid)
    assert record is not None and record.marker_message_id == marker
    assert compactor.process_pending(sid) is None
    summaries = [m for m in store.load(sid).messages if m.info.role == "assistant"
                 and getattr(m.info, "summary", None) is True]  # fmt: skip
    assert (
        len(summaries) == 1 and summaries[0].parts[0].text == "## Session Summary\nrecovered notes"
    )
    store.close()
