"""Run a compaction and freeze at a chosen point, so the test can SIGKILL it there.

python crash_worker.py DB SESSION POINT FLAG
POINT: summary (inside the model call), commit (just before the transaction),
       transaction (inside it, after the prune marks and the summary row).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.store import SQLiteStore
from ctxcompact.live.summary import Summarizer

db, session, point, flag = sys.argv[1:5]


def freeze() -> None:
    Path(flag).write_text(point)
    time.sleep(600)  # the test kills us here


class Client:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        if point == "summary":
            freeze()
        return SummaryResponse("## Session Summary\nnotes", "stop")


class FreezingStore(SQLiteStore):
    def commit_compaction(self, *args: Any, **kwargs: Any) -> None:
        if point == "commit":
            freeze()
        super().commit_compaction(*args, **kwargs)

    def _insert(self, db: sqlite3.Connection, session_id: str, message: Any) -> None:
        super()._insert(db, session_id, message)
        if point == "transaction":
            freeze()


Compactor(FreezingStore(db), Summarizer(Client()), limits={"context": 100_000}).process_pending(
    session
)
