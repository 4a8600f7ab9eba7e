"""Sessions in PostgreSQL, shared by workers: two compact the same pending task,
one wins, the other gets CompactionConflictError.

Starts a throwaway PostgreSQL cluster from the machine's server binaries
(Debian: ``apt-get install postgresql``); point ``PostgresStore`` at your own
server with a libpq URL instead.

    pip install "ctxcompact[postgres]"
    python examples/postgres_store.py
"""

from __future__ import annotations

import threading

from ctxcompact.errors import CompactionConflictError
from ctxcompact.live import Compactor, PostgresStore, Summarizer
from ctxcompact.live.store import new_id
from ctxcompact.models import MessageWithParts, Part, UserMessage
from ctxcompact.testing.postgres import TemporaryPostgres

with TemporaryPostgres() as pg:
    setup = PostgresStore(pg.conninfo)  # e.g. "postgresql://app@db.internal/agents"
    sid = setup.create_session(title="demo")
    for i in range(4):
        text = Part(id=new_id("prt"), type="text", text=f"request {i}: " + "details " * 500)
        setup.append_message(sid, MessageWithParts(info=UserMessage(id=new_id("msg")),
                                                   parts=[text]))  # fmt: skip
    Compactor(setup, Summarizer(None), limits={"context": 100_000}).request_compaction(sid)

    outcomes: list[str] = []

    def worker(name: str) -> None:
        with PostgresStore(pg.conninfo) as store:  # each worker its own connections
            compactor = Compactor(store, Summarizer(None), limits={"context": 100_000})
            try:
                record = compactor.process_pending(sid)
                outcomes.append(f"{name}: compacted ({record.tokens_before if record else 0} "
                                "tokens summarized)")  # fmt: skip
            except CompactionConflictError:
                outcomes.append(f"{name}: another worker had already compacted it")

    threads = [threading.Thread(target=worker, args=(f"worker {n}",)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("\n".join(sorted(outcomes)))
    print(f"records: {len(setup.records(sid))}")
    setup.close()
