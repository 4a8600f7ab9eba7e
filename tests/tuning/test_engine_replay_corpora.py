"""The engine's replay against the live walk on every corpus of ../shared/data
whole (tests/tuning/test_engine_replay.py compares the first few sessions of
each): the engine's per-call table is the live walk's, every preset, with and
without mask_first, where masks happen and where summaries fire.

The walk is the slow side (tau-bench's 200 sessions take about 20 s of CPU
per context), so this waits for ``pytest -m slow``, one test per corpus,
preset, mask_first and context, which xdist spreads over the cores; each
test process reads a corpus and builds its sessions once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import formats
from ctxcompact.policy import Policy
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.tuning.replay import CALL_SCHEMA, replay_session

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CORPORA = {
    "mini-swe-agent": DATA / "transcripts" / "mini-swe-agent",
    "openhands": DATA / "transcripts" / "openhands",
    "swe-agent": DATA / "transcripts" / "swe-agent",
    "tau-bench": DATA / "transcripts" / "tau-bench",
    "claude-code": DATA / "formats" / "claude-code",
}
PRESETS = ["opencode", "swe-agent", "anthropic-clear-tool-uses", "aggressive"]
#: Masks happen, summaries rarely; and summaries fire (the fallback).
CONTEXTS = {
    "masks": {"context": 32_000, "output": 4_000},
    "summaries": {"context": 12_000, "output": 2_000},
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data"),
]


@cache
def corpus(name: str) -> pa.Table:
    """The corpus read whole (once per test process)."""
    return formats.read_sessions(CORPORA[name], on_error="skip").table


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("mask_first", [False, True])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", list(CORPORA))
def test_engine_equals_the_walk_on_the_whole_corpora(
    name: str, preset: str, mask_first: bool, context: str
) -> None:
    table = corpus(name)
    limits = CONTEXTS[context]
    config = cc.CompactionConfig(mask_first=mask_first)
    got = cc.replay(table, preset, limits=limits, config=config).calls
    walk = config.with_policy(Policy.load(preset))
    window = check_window(Limits.coerce(limits), walk)
    rows = [
        row
        for session in cc.Transcript(table).to_sessions()
        for row in replay_session(session, walk, window)
    ]
    assert got.num_rows == len(rows)
    assert got.equals(pa.Table.from_pylist(rows, schema=CALL_SCHEMA))
