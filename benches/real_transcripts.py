"""What each prune policy saves on real agent runs (../shared/data/transcripts).

    python benches/real_transcripts.py            # per-corpus tables
    python benches/real_transcripts.py --json     # every session

Two measures per policy, both ctxcompact's estimate of the model input
(placeholders applied, pivot filtered):

- **final**: the whole stored history, pruned once;
- **summed calls**: what the agent would have been sent at every model call
  of the run, summed: before each assistant message, the history up to it
  with the policy applied to that prefix (the run's own later actions are
  fixed; a counterfactual of the context, not of the agent).

Policies: the shipped presets (docs/policies.md), ``tight``, OpenCode's
rule with small windows (protect 1k, prune above 500), and ``swe-agent+cut``:
the swe-agent preset that also sends every output over 4 000 characters as
its head and tail (``truncate_output=1000``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
from ctxcompact.policy import PRESETS, Policy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
POLICIES: dict[str, Policy] = {
    **PRESETS,
    "tight": Policy(protect=1_000, minimum=500),
    "swe-agent+cut": PRESETS["swe-agent"].model_copy(update={"truncate_output": 1_000}),
}


def tables_by_corpus(root: Path = DATA) -> dict[str, cc.Transcript]:
    """Each corpus folder read as a user would (``read_sessions``): every session
    file in it, each named by its path inside the folder so repeated file names
    in different runs stay different sessions."""
    return {
        folder.name: cc.read_sessions(folder).transcript
        for folder in sorted(p for p in root.iterdir() if p.is_dir())
    }


def _tokens(table: cc.Transcript, policy: Policy | None = None) -> dict[str, int]:
    estimates = cc.estimate_messages(table, policy)
    return {r["session_id"]: r["tokens"] for r in estimates.sessions.to_pylist()}


def _after(table: cc.Transcript, policy: Policy) -> dict[str, int]:
    """Per session, the visible estimate once ``policy`` has pruned it, as the
    policy sends it (placeholders, cut outputs)."""
    marked = cc.mark_pruned(table, cc.prune(table, policy), now_ms=1)
    return _tokens(cc.filter_pivot(marked), policy)


def call_prefixes(table: cc.Transcript) -> tuple[cc.Transcript, dict[str, str]]:
    """One session per model call: for every assistant message, the rows before
    it, as session ``<id>#<call>``; and each such session's run."""
    arrow = table.to_arrow()
    sessions = arrow.column("session_id").to_pylist()
    messages = arrow.column("message_id").to_pylist()
    roles = arrow.column("role").to_pylist()
    column = arrow.schema.get_field_index("session_id")
    pieces: list[pa.Table] = []
    runs: dict[str, str] = {}
    start = 0
    for end in range(1, len(sessions) + 1):
        if end < len(sessions) and sessions[end] == sessions[start]:
            continue
        calls = 0
        for row in range(start + 1, end):  # an assistant message starts at `row`
            if roles[row] == "assistant" and messages[row] != messages[row - 1]:
                calls += 1
                sid = f"{sessions[start]}#{calls}"
                runs[sid] = sessions[start]
                prefix = arrow.slice(start, row - start)
                ids = pa.array([sid] * prefix.num_rows, pa.string())
                pieces.append(prefix.set_column(column, "session_id", ids))
        start = end
    if not pieces:
        return cc.Transcript(arrow.slice(0, 0)), runs
    combined = pa.concat_tables([p.cast(pieces[0].schema) for p in pieces])
    return cc.Transcript(combined), runs


def _by_run(per_call: dict[str, int], runs: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for sid, tokens in per_call.items():
        out[runs[sid]] = out.get(runs[sid], 0) + tokens
    return out


def measure(table: cc.Transcript) -> list[dict[str, Any]]:
    """One row per session: tokens before and after each policy, final and summed."""
    prefixes, runs = call_prefixes(table)
    before = _tokens(table)
    calls_before = _by_run(_tokens(prefixes), runs)
    rows: dict[str, dict[str, Any]] = {
        sid: {"session": sid, "tokens": before.get(sid, 0), "calls": 0,
              "calls_tokens": calls_before.get(sid, 0)}
        for sid in table.session_ids()
    }  # fmt: skip
    for run in runs.values():
        rows[run]["calls"] += 1
    for name, policy in POLICIES.items():
        after = _after(table, policy)
        calls_after = _by_run(_after(prefixes, policy), runs)
        for sid, row in rows.items():
            row[f"{name}_after"] = after.get(sid, 0)
            row[f"{name}_calls_after"] = calls_after.get(sid, 0)
    return list(rows.values())


def _saved(rows: list[dict[str, Any]], key: str, total: str) -> str:
    before = sum(r[total] for r in rows)
    after = sum(r[key] for r in rows)
    return f"{1 - after / before:.1%}" if before else "-"


def main() -> None:
    if not DATA.exists():
        sys.exit(f"{DATA} not found: run from a checkout with ../shared beside it")
    results = {corpus: measure(t) for corpus, t in tables_by_corpus().items()}
    if "--json" in sys.argv:
        print(json.dumps(results, indent=1))
        return
    names = list(POLICIES)
    for title, total, suffix in (("summed over every model call", "calls_tokens", "_calls_after"),
                                 ("final history", "tokens", "_after")):  # fmt: skip
        print(f"\nTokens saved, {title}:\n")
        print("| corpus | sessions | calls | tokens | " + " | ".join(names) + " |")
        print("|---|---|---|---|" + "---|" * len(names))
        for corpus, rows in results.items():
            cells = [_saved(rows, f"{n}{suffix}", total) for n in names]
            calls = sum(r["calls"] for r in rows)
            tokens = sum(r[total] for r in rows)
            print(
                f"| {corpus} | {len(rows)} | {calls:,} | {tokens:,} | " + " | ".join(cells) + " |"
            )


if __name__ == "__main__":
    main()
