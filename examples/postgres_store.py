"""Sessions in PostgreSQL, shared by workers: two compact the same pending task,
one wins, the other gets CompactionConflictError.

Both workers load the session (with the task pending) before either starts,
so the race always happens; a worker that loads it after the winner has
committed finds nothing pending (``process_pending`` returns ``None``).

Give it your server as a libpq URL (or key=value string), as an argument or in
``DATABASE_URL``; it works in a schema of its own (``ctxcompact_example``).

    pip install "ctxcompact[postgres]"
    python examples/postgres_store.py postgresql://app@localhost/agents
"""

from __future__ import annotations

import os
import sys
import threading

from ctxcompact.errors import CompactionConflictError
from ctxcompact.live import Compactor, PostgresStore, Summarizer
from ctxcompact.live.store import new_id
from ctxcompact.models import MessageWithParts, Part, UserMessage

url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DATABASE_URL")
if not url:
    sys.exit("usage: python examples/postgres_store.py URL (or set DATABASE_URL): a PostgreSQL "
             "server, e.g. postgresql://app@localhost/agents")  # fmt: skip
SCHEMA = "ctxcompact_example"

setup = PostgresStore(url, schema=SCHEMA)
sid = setup.create_session(title="demo")
for i in range(4):
    text = Part(id=new_id("prt"), type="text", text=f"request {i}: " + "details " * 500)
    setup.append_message(sid, MessageWithParts(info=UserMessage(id=new_id("msg")),
                                               parts=[text]))  # fmt: skip
Compactor(setup, Summarizer(None), limits={"context": 100_000}).request_compaction(sid)

outcomes: dict[str, str] = {}
both_loaded = threading.Barrier(2)


def worker(name: str) -> None:
    with PostgresStore(url, schema=SCHEMA) as store:  # each worker its own connections
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
