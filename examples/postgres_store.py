"""Sessions in PostgreSQL, shared by workers: two compact the same pending task,
one wins, the other gets CompactionConflictError.

Both workers load the session (with the task pending) before either starts,
so the race always happens; a worker that loads it after the winner has
committed finds nothing pending (``process_pending`` returns ``None``).

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

    outcomes: dict[str, str] = {}
    both_loaded = threading.Barrier(2)

    def worker(name: str) -> None:
        with PostgresStore(pg.conninfo) as store:  # each worker its own connections
            compactor = Compactor(store, Summarizer(None), limits={"context": 100_000})
            session = store.load(sid)  # the task is pending in both copies
            both_loaded.wait()
            try:
                record = compactor.process_pending(sid, session=session)
            except CompactionConflictError:
                outcomes[name] = "conflict: another worker had already compacted it"
                return
            if record is None:
                outcomes[name] = "nothing was pending"
            else:
                outcomes[name] = f"compacted ({record.tokens_before} tokens summarized)"

    threads = [threading.Thread(target=worker, args=(f"worker {n}",)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, outcome in sorted(outcomes.items()):
        print(f"{name}: {outcome}")
    conflicts = sum(o.startswith("conflict") for o in outcomes.values())
    print(f"records: {len(setup.records(sid))}, conflicts: {conflicts}")
    setup.close()
