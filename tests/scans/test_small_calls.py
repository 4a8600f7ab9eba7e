"""Small inputs (a chat list, a live session) run on the calling thread.

An agent runtime calls the core once per step on a table of a few rows: a
pool thread that went to sleep between two such calls takes milliseconds to
wake on a loaded machine, far more than the work (``parallel::run_sized``).
Their answers are the ones a pool gives, and a forked child (Python's
multiprocessing forks) runs them too.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from ctxcompact.live.split import select_split
from ctxcompact.scans.chatrows import chat_counts, read_chat
from ctxcompact.transcript.targets import tool_targets

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Book me a flight to Lisbon on Friday."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "search", "arguments": json.dumps({"to": "LIS"})}},
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "flight TP123 " * 200},
    {"role": "assistant", "content": "TP123 leaves at 9:40. Shall I book it?"},
    {"role": "user", "content": "Yes."},
]  # fmt: skip
POLICY = {"protect_turns": 0, "protect": 0, "minimum": 0}


def _small_calls(out: Any = None) -> tuple[list[int], list[int], list[str | None], int]:
    rows = read_chat(CHAT)
    answer = (chat_counts(CHAT), rows.pruned(POLICY), tool_targets(rows.table).to_pylist(),
              select_split(CHAT, keep_tokens=50).boundary)  # fmt: skip
    if out is not None:
        out.put(answer)
    return answer


@pytest.mark.skipif(sys.platform != "linux", reason="counts threads in /proc/self/task")
def test_small_calls_start_no_pool_thread() -> None:
    # a fresh interpreter: no pool of an earlier test's
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = {sys.path!r}
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_small_calls as t
        import pyarrow as pa
        pa.table({{"a": [1]}}).column("a").to_pylist()
        before = len(os.listdir("/proc/self/task"))
        for _ in range(3):
            t._small_calls()
        print(before, len(os.listdir("/proc/self/task")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    before, after = map(int, done.stdout.split())
    assert after == before, f"{after - before} threads started for a six-message chat list"


def test_small_calls_answer_as_a_pool_does() -> None:
    from ctxcompact.scans.parts import prune

    table = read_chat(CHAT).table
    assert table.num_rows < 100
    for threads in (2, 1):
        assert (prune(table, POLICY, threads=threads).rows.to_pylist()
                == prune(table, POLICY).rows.to_pylist())  # fmt: skip
        assert (tool_targets(table, threads).to_pylist()
                == tool_targets(table).to_pylist())  # fmt: skip
    assert _small_calls()[1], "the policy clears the long result"


def test_small_calls_in_a_forked_child_finish_and_agree() -> None:
    want = _small_calls()  # the parent's calling-thread pool exists before the fork
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_small_calls, args=(out,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("a small call in the forked child never finished")
    assert child.exitcode == 0
    assert out.get(timeout=5) == want


def test_a_small_table_from_another_thread() -> None:
    import threading

    want, got = _small_calls(), []
    worker = threading.Thread(target=lambda: got.append(_small_calls()))
    worker.start()
    worker.join(timeout=60)
    assert got == [want]
    assert isinstance(read_chat(CHAT).table, pa.Table)


def test_chat_counts_are_one_core_call_from_the_lists_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A split's counts go from the chat list's bytes to the counts in one
    core call (``_core.chat_counts``): no table of rows crosses into Python
    (the table path cost 2x the CPU over the tau-bench chats), and the
    counts are the table path's."""
    import ctxcompact._core as _core
    from ctxcompact.scans import chatrows

    pinned = [*CHAT[:-1], {**CHAT[-1], "pinned": True}]
    want = {id(c): read_chat(c).counts(method="opencode", overhead=4) for c in (CHAT, pinned)}

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("chat_counts read the list into a table")

    monkeypatch.setattr(chatrows._core, "chat_rows", refused)
    monkeypatch.setattr(chatrows._core, "sent_messages", refused)
    for chat in (CHAT, pinned):
        assert chat_counts(chat) == want[id(chat)]
    assert _core.chat_counts(b'{"id":"chat","messages":[]}', 0, session="chat") == []
