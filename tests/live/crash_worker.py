"""Run a compaction and freeze at a chosen point, so the test can SIGKILL it there.

python crash_worker.py BACKEND WHERE SESSION POINT FLAG
BACKEND: sqlite (WHERE: the database file) or postgres (WHERE: "conninfo|schema").
POINT: summary (inside the model call), commit (just before the transaction),
       transaction (inside it, after the prune marks and the summary row).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.postgres import PostgresStore
from ctxcompact.live.store import SQLiteStore
from ctxcompact.live.summary import Summarizer

backend, where, session, point, flag = sys.argv[1:6]


def freeze() -> None:
    Path(flag).write_text(point)
    time.sleep(600)  # the test kills us here


class Client:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        if point == "summary":
            freeze()
        return SummaryResponse("## Session Summary\nnotes", "stop")


def freezing(base: type[Any]) -> type[Any]:
    class FreezingStore(base):  # type: ignore[misc,valid-type]
        def commit_compaction(self, *args: Any, **kwargs: Any) -> None:
            if point == "commit":
                freeze()
            super().commit_compaction(*args, **kwargs)

        def _insert(self, db: Any, session_id: str, message: Any) -> None:
            super()._insert(db, session_id, message)
            if point == "transaction":
                freeze()

    return FreezingStore


if backend == "sqlite":
    store = freezing(SQLiteStore)(where)
else:
    conninfo, schema = where.split("|")
    store = freezing(PostgresStore)(conninfo, schema=schema)
Compactor(store, Summarizer(Client()), limits={"context": 100_000}).process_pending(session)
