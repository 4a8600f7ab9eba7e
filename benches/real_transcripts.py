"""What compaction would save on real agent transcripts (../shared/data/transcripts).

    python benches/real_transcripts.py            # per-corpus table + largest sessions
    python benches/real_transcripts.py --json     # every session

Two policies side by side: OpenCode's defaults (protect 40k tokens of tool
output, prune only above 20k) and a tight one for small windows (protect 1k,
prune above 500). Tokens are ctxcompact's estimate of the model input
(placeholders applied), before and after pruning and the pivot filter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import ctxcompact as cc
from ctxcompact.config import CompactionConfig

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
POLICIES = {
    "opencode": CompactionConfig(),
    "tight": CompactionConfig(prune_protect=1_000, prune_minimum=500),
}


def tables_by_corpus(root: Path = DATA) -> dict[str, cc.Transcript]:
    """Each corpus folder read as a user would (``read_sessions``): every session
    file in it, each named by its path inside the folder so repeated file names
    in different runs stay different sessions."""
    return {
        folder.name: cc.read_sessions(folder).transcript
        for folder in sorted(p for p in root.iterdir() if p.is_dir())
    }


def _tokens(table: cc.Transcript) -> dict[str, int]:
    return {r["session_id"]: r["tokens"] for r in cc.estimate_messages(table).sessions.to_pylist()}


def measure(table: cc.Transcript) -> list[dict[str, Any]]:
    before = _tokens(table)
    rows: dict[str, dict[str, Any]] = {
        sid: {"session": sid, "tokens": before.get(sid, 0)} for sid in table.session_ids()
    }
    for name, config in POLICIES.items():
        result = cc.prune(table, config)
        marked = cc.mark_pruned(table, result, now_ms=1)
        visible = cc.filter_pivot(marked)
        after = _tokens(visible)
        pruned = {r["session_id"]: r["parts"] for r in result.sessions.to_pylist()}
        for sid, row in rows.items():
            row[f"{name}_after"] = after.get(sid, 0)
            row[f"{name}_pruned_parts"] = pruned.get(sid, 0)
    return list(rows.values())


def main() -> None:
    if not DATA.exists():
        sys.exit(f"{DATA} not found: run from a checkout with ../shared beside it")
    results = {corpus: measure(t) for corpus, t in tables_by_corpus().items()}
    if "--json" in sys.argv:
        print(json.dumps(results, indent=1))
        return
    print(
        "| corpus | sessions | tokens | after (OpenCode defaults) | after (tight) | saved (tight) |"
    )
    print("|---|---|---|---|---|---|")
    for corpus, rows in results.items():
        tokens = sum(r["tokens"] for r in rows)
        default = sum(r["opencode_after"] for r in rows)
        tight = sum(r["tight_after"] for r in rows)
        print(f"| {corpus} | {len(rows)} | {tokens:,} | {default:,} | {tight:,} "
              f"| {1 - tight / tokens:.1%} |")  # fmt: skip
    largest = sorted((r | {"corpus": c} for c, rs in results.items() for r in rs),
                     key=lambda r: -r["tokens"])[:8]  # fmt: skip
    print(
        "\n| largest sessions | tokens | after (defaults) | after (tight) | parts pruned (tight) |"
    )
    print("|---|---|---|---|---|")
    for r in largest:
        name = f"{r['corpus']}/…/{r['session'].rsplit('/', 1)[-1]}"  # ids are paths: shortened
        print(f"| {name} | {r['tokens']:,} | {r['opencode_after']:,} "
              f"| {r['tight_after']:,} | {r['tight_pruned_parts']} |")  # fmt: skip


if __name__ == "__main__":
    main()
