"""The usage the stored runs recorded, beside the replay's baseline (issue 39,
part 1): SWE-agent's model_stats, Claude Code's per-call usage (each call
once, its cache reads, writes and 1-hour writes), null where nothing is
recorded; checked against the raw files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.tuning import replay
from ctxcompact.tuning.recorded import recorded_usage

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SWE = sorted((DATA / "transcripts" / "swe-agent").rglob("*.traj"))
CLAUDE = sorted((DATA / "formats" / "claude-code").rglob("*.jsonl"))
WIDE = {"context": 1_000_000, "output": 8_000}
NONE = dict.fromkeys(("recorded_prompt_tokens", "recorded_calls", "recorded_cached_tokens",
                      "recorded_written_tokens", "recorded_written_1h_tokens"))  # fmt: skip


def test_swe_agent_runs_record_model_stats() -> None:
    assert len(SWE) >= 20
    recorded = 0
    for path in SWE:
        stats = json.loads(path.read_bytes()).get("info", {}).get("model_stats") or {}
        (session,) = formats.read(path)
        got = recorded_usage(session)
        if stats.get("tokens_sent"):
            recorded += 1
            assert got == {**NONE, "session_id": session.id,
                           "recorded_prompt_tokens": stats["tokens_sent"],
                           "recorded_calls": stats["api_calls"]}, path  # fmt: skip
        else:  # the CTF runs record zeros: no record, not a record of 0
            assert got == {**NONE, "session_id": session.id}, path
    assert recorded >= 3


def claude_code_usage(path: Path) -> dict[str, dict[str, int]]:
    """Per session: the prompt tokens, calls, cache reads and writes of the
    file's assistant lines, each API call (message id) once."""
    out: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        message = event.get("message") if isinstance(event, dict) else None
        if event.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict) or (event["sessionId"], message["id"]) in seen:
            continue
        seen.add((event["sessionId"], message["id"]))
        mine = out.setdefault(event["sessionId"], dict.fromkeys(("prompt", "calls", "read",
                                                                   "write"), 0))  # fmt: skip
        read = usage.get("cache_read_input_tokens") or 0
        write = usage.get("cache_creation_input_tokens") or 0
        mine["prompt"] += (usage.get("input_tokens") or 0) + read + write
        mine["calls"] += 1
        mine["read"] += read
        mine["write"] += write
    return out


def test_claude_code_samples_record_their_usage() -> None:
    checked = 0
    for path in CLAUDE:
        try:
            sessions = formats.read(path)
        except Exception:  # a sample of malformed lines (edge_cases.jsonl)
            continue
        want = claude_code_usage(path)
        for session in sessions:
            got = recorded_usage(session)
            if session.id not in want:
                assert got == {**NONE, "session_id": session.id}, path
                continue
            w = want[session.id]
            assert (got["recorded_prompt_tokens"], got["recorded_calls"],
                    got["recorded_cached_tokens"], got["recorded_written_tokens"]) == (
                w["prompt"], w["calls"], w["read"], w["write"]), path  # fmt: skip
            checked += 1
    assert checked >= 3


def event(uuid: str, parent: str | None, **kw: Any) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": "cc", "cwd": "/x",
            "timestamp": "2026-01-01T00:00:00Z", **kw}  # fmt: skip


def assistant(uuid: str, parent: str, call: str, usage: dict[str, Any], block: Any) -> Any:
    return event(uuid, parent, type="assistant", message={
        "id": call, "role": "assistant", "model": "claude-sonnet-4-5", "usage": usage,
        "content": [block], "stop_reason": "tool_use"})  # fmt: skip


def test_one_claude_code_call_over_several_lines_is_counted_once(tmp_path: Path) -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3_000,
             "cache_creation_input_tokens": 700,
             "cache_creation": {"ephemeral_5m_input_tokens": 200,
                                "ephemeral_1h_input_tokens": 500}}  # fmt: skip
    lines = [
        event("u1", None, type="user", message={"role": "user", "content": "fix it"}),
        # one API call written as two lines, its usage repeated on each
        assistant("a1", "u1", "msg_1", usage, {"type": "text", "text": "looking"}),
        assistant(
            "a2",
            "a1",
            "msg_1",
            usage,
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        ),
        event(
            "r1",
            "a2",
            type="user",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        ),
        assistant(
            "a3", "r1", "msg_2", {**usage, "cache_creation": {}}, {"type": "text", "text": "done"}
        ),
    ]
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (session,) = formats.read(path)
    assert recorded_usage(session) == {
        "session_id": "cc", "recorded_prompt_tokens": 2 * 3_710, "recorded_calls": 2,
        "recorded_cached_tokens": 6_000, "recorded_written_tokens": 1_400,
        "recorded_written_1h_tokens": 500,
    }  # fmt: skip
    result = replay(session, limits=WIDE)
    row = result.sessions.to_pylist()[0]
    assert row["recorded_prompt_tokens"] == 7_420 and row["recorded_calls"] == 2
    assert row["prompt_gap"] == row["baseline_prompt_tokens"] - 7_420
    assert result.summary["recorded_sessions"] == 1
    assert result.summary["prompt_gap_ratio"] == pytest.approx(row["prompt_gap"] / 7_420)


def test_a_replay_reports_recorded_usage_beside_its_baseline() -> None:
    recorded = next(p for p in SWE if "pydicom" in p.name)
    silent = next(p for p in SWE if p.name == "rock.traj")
    sessions = [*formats.read(recorded), *formats.read(silent)]
    stats = json.loads(recorded.read_bytes())["info"]["model_stats"]
    result = replay(sessions, limits=WIDE, model="gpt-4o")
    rows = {r["session_id"]: r for r in result.sessions.to_pylist()}
    mine, none = rows[sessions[0].id], rows[sessions[1].id]
    assert (mine["recorded_prompt_tokens"], mine["recorded_calls"]) == (
        stats["tokens_sent"], stats["api_calls"])  # fmt: skip
    assert mine["recorded_cached_tokens"] is None  # SWE-agent records no cache reads
    assert mine["prompt_gap"] == mine["baseline_prompt_tokens"] - stats["tokens_sent"]
    assert all(none[k] is None for k in (*NONE, "prompt_gap"))
    assert mine["baseline_written_tokens"] == (
        mine["baseline_prompt_tokens"] - mine["baseline_cached_tokens"])  # fmt: skip
    s = result.summary
    assert (s["recorded_sessions"], s["recorded_prompt_tokens"], s["prompt_gap"]) == (
        1, stats["tokens_sent"], mine["prompt_gap"])  # fmt: skip
    assert s["recorded_cached_tokens"] is None and s["recorded_written_tokens"] is None
    nothing = replay(formats.read(silent), limits=WIDE).summary
    assert nothing["recorded_sessions"] == 0
    assert all(nothing[k] is None for k in (*NONE, "prompt_gap", "prompt_gap_ratio"))


def test_the_table_reader_gives_what_each_session_records() -> None:
    """``recorded_usage_table`` reads the message records parsed once for the
    engine's facts: the same as ``recorded_usage`` of each session built."""
    from ctxcompact.transcript import Transcript
    from ctxcompact.tuning.engine import message_facts
    from ctxcompact.tuning.recorded import recorded_usage_table

    paths = [p for p in [*SWE[:4], *CLAUDE] if p.name != "edge_cases.jsonl"]
    if not paths:
        pytest.skip("needs ../shared/data")
    for path in paths:
        table = formats.read_sessions(path, on_error="skip").table
        want = [recorded_usage(s) for s in Transcript(table).to_sessions() if s.messages]
        assert recorded_usage_table(table, message_facts(table)) == want, path
        assert recorded_usage_table(table) == want, path


def test_swe_agent_runs_record_no_cache_reads_and_have_no_breaks() -> None:
    """SWE-agent records its run's totals, not each call's reads: no break
    is read from it (tuning.cache.cache_breaks)."""
    sessions = [s for path in SWE[:6] for s in formats.read(path)]
    got = replay(sessions, limits=WIDE, model="gpt-4o", calibrate=True)
    assert got.sessions["cache_breaks"].null_count == got.sessions.num_rows
    assert got.summary["cache_breaks"] == [] and got.summary["cache_break_calls"] == 0
