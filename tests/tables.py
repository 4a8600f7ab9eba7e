"""Part-row tables built by hand for the scan tests (docs/schema.md).

The comments of ``prune_rows`` and ``pivot_rows`` give each row's number and
tokens; the tests assert against them.
"""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
from ctxcompact.transcript import SCAN_COLUMNS, SCHEMA

COLUMNS: dict[str, pa.DataType] = {
    f.name: pa.string() if pa.types.is_large_string(f.type) else f.type
    for f in SCHEMA
    if f.name in SCAN_COLUMNS
}


def row(sid: str, mid: str | None, role: str | None, ptype: str | None, **kw: Any) -> dict:
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(session_id=sid, message_id=mid, role=role, part_type=ptype)
    r.update(kw)
    return r


def tool(sid: str, mid: str, pid: str, name: str, status: str, output: str | None, **kw: Any):
    return row(
        sid, mid, "assistant", "tool", part_id=pid, tool=name, status=status, output=output, **kw
    )


def user(sid: str, mid: str, pid: str, text: str = "hi") -> dict:
    return row(sid, mid, "user", "text", part_id=pid, output=text)


def build(rows: list[dict]) -> pa.Table:
    return pa.table({name: pa.array([r[name] for r in rows], typ) for name, typ in COLUMNS.items()})


def chunked(table: pa.Table, cuts: list[int]) -> pa.Table:
    bounds = [0, *cuts, table.num_rows]
    return pa.concat_tables([table.slice(a, b - a) for a, b in itertools.pairwise(bounds)])


def x(tokens: int) -> str:
    """A text of exactly ``tokens`` tokens in both methods (4 ASCII chars per token)."""
    return "x" * (4 * tokens)


class Config:
    """A CompactionConfig stand-in with small thresholds."""

    prune = True
    prune_protect = 15
    prune_minimum = 5
    prune_protected_tools = ("skill",)
    prune_continue_past_compacted = False
    estimate_method = "opencode"

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)


def prune_rows() -> list[dict]:
    """Four sessions; the comments give the row numbers and tokens (4 chars/token)."""
    return [
        # s1: turns u4 and u3 are protected; a2's read is counted but within protect.
        user("s1", "s1-u1", "s1-p0"),  # 0
        tool("s1", "s1-a1", "p1", "read", "completed", x(10)),  # 1
        tool("s1", "s1-a1", "p2", "bash", "completed", x(10)),  # 2
        user("s1", "s1-u2", "s1-p3"),  # 3
        tool("s1", "s1-a2", "p4", "read", "completed", x(6)),  # 4: total 6
        tool("s1", "s1-a2", "p5", "skill", "completed", x(100)),  # 5 protected tool
        tool("s1", "s1-a2", "p6", "bash", "error", x(100)),  # 6 not completed
        tool("s1", "s1-a2", "p7", "read", "running", None),  # 7 not completed
        row("s1", "s1-a2", "assistant", "text", part_id="p8", output=x(100)),  # 8 text
        user("s1", "s1-u3", "s1-p9"),  # 9
        tool("s1", "s1-a3", "p10", "read", "completed", x(100)),  # 10 (turns < 2)
        user("s1", "s1-u4", "s1-p11"),  # 11
        tool("s1", "s1-a4", "p12", "read", "completed", x(100)),  # 12 (turns < 2)
        # s2: a summary message ends the scan.
        user("s2", "s2-u1", "q0"),  # 13
        tool("s2", "s2-a1", "q1", "read", "completed", x(20)),  # 14 (before the summary)
        row(
            "s2",
            "s2-a1s",
            "assistant",
            "text",
            part_id="qs",
            output="sum",
            summary=True,
            finished=True,
            parent_id="s2-u1",
        ),  # 15
        user("s2", "s2-u2", "q2"),  # 16
        tool("s2", "s2-a2", "q3", "read", "completed", x(20)),  # 17
        tool("s2", "s2-a2", "q4", "read", "completed", x(20)),  # 18
        user("s2", "s2-u3", "q5"),  # 19
        tool("s2", "s2-a3", "q6", "read", "completed", x(20)),  # 20 (turns < 2)
        user("s2", "s2-u4", "q7"),  # 21
        # s3: an already compacted part ends the scan.
        user("s3", "s3-u1", "c0"),  # 22
        tool("s3", "s3-a1", "c1", "read", "completed", x(20)),  # 23
        tool("s3", "s3-a1", "c2", "read", "completed", x(20), compacted_at=1_000),  # 24
        tool("s3", "s3-a1", "c3", "read", "completed", x(20)),  # 25
        user("s3", "s3-u2", "c4"),  # 26
        user("s3", "s3-u3", "c5"),  # 27
        # s4: a session without messages.
        row("s4", None, None, None),  # 28
    ]


def pivot_rows() -> list[dict]:
    def summary(sid: str, mid: str, parent: str, **kw: Any) -> dict:
        flags = {"summary": True, "finished": True, "error": False}
        flags.update(kw)
        return row(sid, mid, "assistant", "text", part_id=f"{mid}-p", output="sum",
                   parent_id=parent, **flags)  # fmt: skip

    def compaction(sid: str, mid: str) -> dict:
        return row(sid, mid, "user", "compaction", part_id=f"{mid}-c", auto=True)

    return [
        # v1: completed pivot at row 2
        user("v1", "v1-u1", "a"),  # 0
        row(
            "v1",
            "v1-a1",
            "assistant",
            "text",
            part_id="b",
            output="ok",
            parent_id="v1-u1",
            finished=True,
        ),  # 1
        compaction("v1", "v1-u2"),  # 2
        summary("v1", "v1-a2", "v1-u2"),  # 3
        user("v1", "v1-u3", "c"),  # 4
        row("v1", "v1-a3", "assistant", "text", part_id="d", output="ok"),  # 5
        # v2: the summary ended in error: no pivot, kept whole
        user("v2", "v2-u1", "e"),  # 6
        compaction("v2", "v2-u2"),  # 7
        summary("v2", "v2-a2", "v2-u2", error=True),  # 8
        user("v2", "v2-u3", "f"),  # 9
        # v3: two completed pivots, the latest (row 13) wins
        compaction("v3", "v3-u1"),  # 10
        summary("v3", "v3-a1", "v3-u1"),  # 11
        user("v3", "v3-u2", "g"),  # 12
        compaction("v3", "v3-u3"),  # 13
        summary("v3", "v3-a3", "v3-u3"),  # 14
        user("v3", "v3-u4", "h"),  # 15
        # v4: the summary is not finished: kept whole
        compaction("v4", "v4-u1"),  # 16
        summary("v4", "v4-a1", "v4-u1", finished=None),  # 17
        # v5: a finished summary whose parent has no compaction part: kept whole
        user("v5", "v5-u1", "i"),  # 18
        summary("v5", "v5-a1", "v5-u1"),  # 19
        # v6: a pivot whose user message has a text part then the compaction part
        user("v6", "v6-u1", "j"),  # 20
        row("v6", "v6-u2", "user", "text", part_id="k", output="please compact"),  # 21
        row("v6", "v6-u2", "user", "compaction", part_id="l", auto=False),  # 22
        summary("v6", "v6-a2", "v6-u2"),  # 23
        # v7: empty session
        row("v7", None, None, None),  # 24
    ]


PIVOT_MASK = (
    [False, False, True, True, True, True]
    + [True] * 4
    + [False, False, False, True, True, True]
    + [True, True]
    + [True, True]
    + [False, True, True, True]
    + [True]
)


def estimate_rows() -> list[dict]:
    return [
        # Each model message costs the overhead (4), its content is estimated once as sent.
        # e1-u1: 4 + "abcdefgh\n\nWhat did we do so far?" (32 units -> 8) = 12
        row("e1", "e1-u1", "user", "text", part_id="1", output="abcdefgh"),
        row("e1", "e1-u1", "user", "compaction", part_id="2", auto=True),
        # e1-a1: the call message 4 + 1 + calls (3 + 2 + 2 + 2), then 4 tool results
        # (4 + 10, 4 + 8, 4 + 8, 4 + 1) = 57
        row("e1", "e1-a1", "assistant", "text", part_id="3", output="abcd"),  # 1
        # call "read" (1) + input '{"a":1}' (7 units -> 2); result 40 chars (10)
        tool("e1", "e1-a1", "4", "read", "completed", x(10), input='{"a":1}'),
        # "bash" (1) + no input: "{}" (1); interrupted placeholder (32 units -> 8)
        tool("e1", "e1-a1", "5", "bash", "running", x(100)),
        # "read" (1) + "{}" (1); cleared placeholder (33 units -> 8)
        tool("e1", "e1-a1", "6", "read", "completed", x(100), compacted_at=1),
        # "bash" (1) + "{}" (1); error output "xxxx" (1)
        tool("e1", "e1-a1", "7", "bash", "error", "xxxx"),
        row("e1", "e1-a1", "assistant", "reasoning", part_id="8", output=x(100)),  # 0
        row("e1", "e1-a1", "assistant", "step-start", part_id="9"),  # 0
        # e1-a2: a message without parts is not sent: 0
        row("e1", "e1-a2", "assistant", None),
        # e2: a session without messages
        row("e2", None, None, None),
        # e3-u1: 4 + "ab" (1) = 5
        row("e3", "e3-u1", "user", "text", part_id="10", output="ab"),
    ]
