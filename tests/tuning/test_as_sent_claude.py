"""The as-sent baseline of Claude Code sessions (issue 39, part 2): a call
after Claude Code compacted its session (a ``compact_boundary`` event) was
sent the summary and what follows, not the history before (``as_sent="own"``),
and ``auto`` with ``calibrate`` finds that from the recorded per-call usage.

The fixture is written by the test, modelled on real sessions: every call
streamed over two lines (a text line, a tool_use line, one ``message.id`` and
``requestId``, the usage repeated), 1-hour cache writes, a compaction. The
real-corpus measurement (docs/tuning.md) runs in
``test_real_claude_code_corpus`` when ``CLAUDE_CODE_CORPUS`` names it."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import ConfigError
from ctxcompact.tuning import replay
from ctxcompact.tuning.as_sent import parse_as_sent

WIDE = {"context": 1_000_000, "output": 8_000}
SID = "5e55-cc"


def _event(kind: str, uuid: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "sessionId": SID, "isSidechain": False, **more}


def session_lines(steps: int, compact_at: int, usage: list[dict[str, int]] | None) -> list[str]:
    """A task, ``steps`` calls each reading a file, Claude Code compacting
    before call ``compact_at``; ``usage``: each call's recorded usage."""
    lines = [_event("user", "u0", message={"role": "user", "content": "fix the bug " * 40})]
    for i in range(steps):
        if i == compact_at:
            lines.append(_event("system", f"b{i}", subtype="compact_boundary",
                                content="Conversation compacted",
                                compactMetadata={"trigger": "auto", "preTokens": 1}))  # fmt: skip
            lines.append(_event("user", f"s{i}", isCompactSummary=True, message={
                "role": "user", "content": "Summary: the bug is in f.py. " * 30}))  # fmt: skip
        body: dict[str, Any] = {"id": f"msg_{i}", "role": "assistant", "model": "claude-opus-4-6"}
        if usage is not None:
            body["usage"] = usage[i]
        text = {**body, "content": [{"type": "text", "text": f"reading f{i}.py"}]}
        tool = {**body, "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read",
                                     "input": {"file_path": f"f{i}.py"}}]}  # fmt: skip
        lines.append(_event("assistant", f"a{i}", requestId=f"req_{i}", message=text))
        lines.append(_event("assistant", f"a{i}b", requestId=f"req_{i}", message=tool))
        lines.append(_event("user", f"r{i}", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}",
             "content": f"<{i}>" + "code line\n" * (150 + 13 * i)}]}))  # fmt: skip
    return [json.dumps(x) for x in lines]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def recorded_file(tmp_path: Path, steps: int = 14, compact_at: int = 8,
                  slope: float = 1.3, system: int = 9_000) -> Path:  # fmt: skip
    """The session with the usage Claude Code would record for it: each
    call's prompt as sent (cut at the compaction) in the provider's count
    (``slope`` per estimated token, ``system`` tokens of system prompt and
    tools), the previous prompt read from the cache, the rest written for 1 hour."""
    plain = write(tmp_path / "plain.jsonl", session_lines(steps, compact_at, None))
    sent = replay(cc.read_sessions(plain).table, limits=WIDE, as_sent="own").calls
    prompts = [round(slope * p) + system for p in sent["baseline_prompt_tokens"].to_pylist()]
    cached = [round(slope * c) + system * (i > 0) for i, c in
              enumerate(sent["baseline_cached_tokens"].to_pylist())]  # fmt: skip
    usage = [{"input_tokens": 3, "cache_read_input_tokens": c,
              "cache_creation_input_tokens": p - c - 3, "output_tokens": 40,
              "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                 "ephemeral_1h_input_tokens": p - c - 3}}
             for p, c in zip(prompts, cached, strict=True)]  # fmt: skip
    return write(tmp_path / "session.jsonl", session_lines(steps, compact_at, usage))


def test_own_cuts_the_history_at_claude_codes_compaction(tmp_path: Path) -> None:
    table = cc.read_sessions(write(tmp_path / "s.jsonl", session_lines(10, 6, None))).table
    whole = replay(table, limits=WIDE).calls
    own = replay(table, limits=WIDE, as_sent="own")
    calls = own.calls
    assert calls.num_rows == whole.num_rows == 10  # one call per message id, lines merged
    (choice,) = own.summary["as_sent"]
    assert (choice["as_sent"], choice["as_sent_reason"]) == ("own", "given")
    before = calls["baseline_prompt_tokens"].to_pylist()
    sent_whole = whole["baseline_prompt_tokens"].to_pylist()
    assert before[:6] == sent_whole[:6]  # nothing changes before the boundary
    # After it the prompt is the summary and what follows: smaller, and
    # nothing of it was the previous prompt's prefix.
    assert all(o < w for o, w in zip(before[6:], sent_whole[6:], strict=True))
    assert calls["baseline_cached_tokens"].to_pylist()[6] == 0
    assert before[6] < before[5]


def test_auto_with_calibrate_finds_the_compaction_and_reproduces_the_recorded_usage(
        tmp_path: Path) -> None:  # fmt: skip
    table = cc.read_sessions(recorded_file(tmp_path)).table
    got = replay(table, limits=WIDE, model="claude-opus-4-6", as_sent="auto", calibrate=True)
    s = got.summary
    (choice,) = s["as_sent"]
    assert (choice["as_sent"], choice["as_sent_reason"]) == ("own", "auto, calibrated")
    assert s["calls"] == s["recorded_calls"] == 14  # streamed lines: one call each
    assert s["baseline_prompt_tokens"] == pytest.approx(s["recorded_prompt_tokens"], rel=0.01)
    # The replay writes the system prompt again after the compaction, where
    # Claude Code still reads it from the cache: that call's reads move to writes.
    moved = s["baseline_written_tokens"] - s["recorded_written_tokens"]
    assert 0 < moved <= 1.4 * 9_000
    assert s["baseline_cached_tokens"] + moved == pytest.approx(s["recorded_cached_tokens"],
                                                                rel=0.01)  # fmt: skip
    assert s["recorded_written_1h_tokens"] == s["recorded_written_tokens"]
    # Sent whole, the history before the compaction is counted after it too:
    # a fit matches any baseline's total, not its calls.
    whole = replay(table, limits=WIDE, model="claude-opus-4-6", calibrate=True).summary
    (fit,) = whole["calibration"]
    (own,) = s["calibration"]
    assert own["residual_p95"] < 0.02 < fit["residual_p95"]


def test_a_session_without_a_boundary_is_the_same_under_own(tmp_path: Path) -> None:
    table = cc.read_sessions(write(tmp_path / "s.jsonl", session_lines(6, 99, None))).table
    own = replay(table, limits=WIDE, as_sent="own").calls
    whole = replay(table, limits=WIDE).calls
    assert own["baseline_prompt_tokens"].equals(whole["baseline_prompt_tokens"])


def test_own_parses_and_a_typo_is_refused() -> None:
    assert parse_as_sent("own").label == "own"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="'own'"):
        parse_as_sent("ownn")


CORPUS = os.environ.get("CLAUDE_CODE_CORPUS")


@pytest.mark.skipif(CORPUS is None, reason="CLAUDE_CODE_CORPUS does not name a folder of real "
                    "Claude Code sessions (docs/tuning.md says where to fetch one)")  # fmt: skip
def test_real_claude_code_corpus() -> None:
    """Each file of the corpus replayed on its own (a subagent file shares its
    parent's session id): exactly the recorded calls; prompt and cache reads
    within 5% in total (docs/tuning.md has the per-session table)."""
    files = sorted(glob.glob(f"{CORPUS}/**/*.jsonl", recursive=True))
    assert files
    totals = dict.fromkeys(("calls", "recorded_calls", "baseline_prompt_tokens",
                            "recorded_prompt_tokens", "baseline_cached_tokens",
                            "recorded_cached_tokens"), 0)  # fmt: skip
    for f in files:
        s = replay(cc.read_sessions(f).table, limits={"context": 200_000, "output": 32_000},
                   model="claude-opus-4-6", as_sent="auto", calibrate=True).summary  # fmt: skip
        assert s["calls"] == s["recorded_calls"], f
        for k in totals:
            totals[k] += s[k] or 0
    assert totals["calls"] == totals["recorded_calls"]
    for mine, theirs in (("baseline_prompt_tokens", "recorded_prompt_tokens"),
                         ("baseline_cached_tokens", "recorded_cached_tokens")):  # fmt: skip
        assert totals[mine] == pytest.approx(totals[theirs], rel=0.05), mine
