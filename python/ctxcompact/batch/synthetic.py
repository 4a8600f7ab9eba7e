"""Generated transcripts for the demo and the benchmarks.

Sessions look like coding-agent runs: a user request, then assistant turns
that call tools (read, bash, grep, edit, skill) with outputs of very uneven
size, some reasoning and text, and in some sessions an earlier completed
compaction (marker, summary, continue message). Deterministic for a seed.
"""

from __future__ import annotations

import json
import random

import pyarrow as pa

from ctxcompact.transcript import SCAN_COLUMNS

TOOLS = ("read", "bash", "grep", "edit", "glob", "skill")
_WORDS = [
    "def",
    "class",
    "return",
    "import",
    "self",
    "value",
    "error",
    "test",
    "file",
    "path",
    "line",
    "build",
    "cargo",
    "pytest",
    "função",
    "数据",
    "ошибка",
    "résumé",
    "naïve",
    "🚀",
    "ok",
]


def _blob(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(_WORDS)
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:chars]


def generate_table(
    sessions: int = 1000,
    parts_per_session: int = 200,
    *,
    seed: int = 0,
    mean_output_chars: int = 1500,
) -> pa.Table:
    """A part-row table (docs/schema.md) of about ``sessions * parts_per_session`` rows."""
    rng = random.Random(seed)
    # A pool of output texts, so generation is fast and memory is the table's.
    pool = [
        _blob(rng, int(rng.lognormvariate(0, 1.1) * mean_output_chars / 1.8)) for _ in range(512)
    ]
    cols: dict[str, list[object]] = {name: [] for name in SCAN_COLUMNS}

    def row(sid: str, mid: str, role: str, parent: str | None, kind: str, **kw: object) -> None:
        n = len(cols["part_id"])
        values = {
            "session_id": sid,
            "message_id": mid,
            "role": role,
            "parent_id": parent,
            "summary": kw.get("summary", False),
            "finished": role == "assistant",
            "error": False,
            "part_id": f"prt_{n:09d}",
            "part_type": kind,
            "tool": kw.get("tool"),
            "status": kw.get("status"),
            "input": kw.get("input"),
            "output": kw.get("output"),
            "compacted_at": kw.get("compacted_at"),
            "auto": kw.get("auto"),
        }
        for k, v in values.items():
            cols[k].append(v)

    for s in range(sessions):
        sid = f"ses_{s:07d}"
        m = 0
        parts = 0
        compacted_once = rng.random() < 0.3
        while parts < parts_per_session:
            uid = f"msg_{m:06d}"
            m += 1
            row(sid, uid, "user", None, "text", output=_blob(rng, rng.randint(20, 300)))
            parts += 1
            if compacted_once and parts > parts_per_session // 3:
                compacted_once = False
                mid = f"msg_{m:06d}"
                m += 1
                row(sid, mid, "user", None, "compaction", auto=True)
                aid = f"msg_{m:06d}"
                m += 1
                row(sid, aid, "assistant", mid, "text", summary=True, output=_blob(rng, 1500))
                parts += 2
                continue
            aid = f"msg_{m:06d}"
            m += 1
            row(sid, aid, "assistant", uid, "step-start")
            parts += 1
            if rng.random() < 0.3:
                row(sid, aid, "assistant", uid, "reasoning", output=_blob(rng, 200))
                parts += 1
            for _ in range(rng.randint(1, 6)):
                tool = rng.choice(TOOLS)
                status = "completed" if rng.random() < 0.93 else "error"
                row(
                    sid,
                    aid,
                    "assistant",
                    uid,
                    "tool",
                    tool=tool,
                    status=status,
                    input=json.dumps({"path": f"src/mod_{rng.randint(0, 99)}.py"}),
                    output=rng.choice(pool),
                )
                parts += 1
            row(sid, aid, "assistant", uid, "text", output=_blob(rng, rng.randint(10, 400)))
            row(sid, aid, "assistant", uid, "step-finish")
            parts += 2
    dictionary = {"role", "part_type", "tool", "status", "session_id"}
    arrays = {}
    for name, values in cols.items():
        if name in ("summary", "finished", "error", "auto"):
            arrays[name] = pa.array(values, pa.bool_())
        elif name == "compacted_at":
            arrays[name] = pa.array(values, pa.int64())
        elif name in ("input", "output"):
            arrays[name] = pa.array(values, pa.large_string())
        elif name in dictionary:
            arrays[name] = pa.array(values, pa.string()).dictionary_encode()
        else:
            arrays[name] = pa.array(values, pa.string())
    return pa.table(arrays)
