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

import json
import os
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow.compute as pc
import pytest
from ctxcompact.errors import ConfigError
from ctxcompact.transcript import Transcript
from ctxcompact.tuning import replay
from ctxcompact.tuning.as_sent import parse_as_sent

WIDE = {"context": 1_000_000, "output": 8_000}
SID = "5e55-cc"


def _event(kind: str, uuid: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "sessionId": SID, "isSidechain": False, **more}


def _stamp(seconds: float) -> str:
    """An event's ``timestamp`` as Claude Code writes it, ``seconds`` into the day."""
    whole = int(seconds)
    return (f"2026-02-11T{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}."
            f"{round(seconds % 1 * 1000):03d}Z")  # fmt: skip


def session_lines(steps: int, compact_at: int, usage: list[dict[str, int]] | None,
                  times: list[float] | None = None,
                  agent: str | None = None) -> list[str]:  # fmt: skip
    """A task, ``steps`` calls each reading a file, Claude Code compacting
    before call ``compact_at``; ``usage``: each call's recorded usage;
    ``times``: when each call's response began (seconds; its lines and the
    tool result a second apart); ``agent``: a subagent's ``agentId`` (its
    lines a sidechain of session ``SID``, as in ``<SID>/subagents/``)."""
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
        if times is not None:
            for k, line in enumerate(lines[-3:]):
                line["timestamp"] = _stamp(times[i] + k)
    if agent is not None:
        for line in lines:
            line |= {"agentId": agent, "isSidechain": True}
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


SYSTEM, SLOPE = 9_000, 1.3  # the fixture's system prompt and tools; provider tokens per estimate


def _usage(prompt: int, read: int, hour: bool) -> dict[str, Any]:
    """A call's usage as Claude Code records it: ``prompt`` tokens sent, ``read``
    of them from the cache, the rest (less 3 uncached) written for 5 minutes or 1 hour."""
    write = prompt - read - 3
    return {"input_tokens": 3, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write, "output_tokens": 40,
            "cache_creation": {"ephemeral_5m_input_tokens": 0 if hour else write,
                               "ephemeral_1h_input_tokens": write if hour else 0}}  # fmt: skip


def _as_sent(path: Path) -> tuple[list[int], list[int]]:
    """Each call's estimated prompt as sent (cut at the compaction) and its
    common prefix with the previous one."""
    calls = replay(cc.read_sessions(path).table, limits=WIDE, as_sent="own").calls
    return calls["baseline_prompt_tokens"].to_pylist(), calls["baseline_cached_tokens"].to_pylist()


def claude_code_folder(tmp_path: Path) -> Path:
    """A Claude Code project folder as ``~/.claude/projects`` holds it,
    modelled on real sessions (docs/tuning.md): the session ``<SID>.jsonl``
    (1-hour writes; its first call reads the system prompt and tools cached
    by an earlier session; a 20-minute pause, which the 1-hour cache
    outlives; compacted before call 8, after which Claude Code still reads
    the system prompt), and in ``<SID>/subagents/`` a Task agent (5-minute
    writes; a 10-minute pause, after which it writes its whole prompt again)
    and the compaction agent, whose one call is sent the parent's history
    read from the cache; each call streamed over two lines."""
    root = tmp_path / "project"
    agents = root / SID / "subagents"
    agents.mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    runs = {  # name: (steps, compact_at, times, agent, 1-hour writes)
        f"{SID}.jsonl": (14, 8, [60.0 * i + 1200 * (i >= 5) for i in range(14)], None, True),
        f"{SID}/subagents/agent-a1b2.jsonl": (4, 99, [30.0 * i + 600 * (i >= 2) for i in range(4)],
                                              "a1b2", False),
        f"{SID}/subagents/agent-acompact-7f3e.jsonl": (1, 99, [2500.0], "acompact-7f3e", True),
    }  # fmt: skip
    last_prompt = 0
    for name, (steps, compact_at, times, agent, hour) in runs.items():
        est = _as_sent(write(plain / name.replace("/", "_"),
                             session_lines(steps, compact_at, None, times, agent)))  # fmt: skip
        ttl = 3600 if hour else 300
        usage = []
        for i, (p, c) in enumerate(zip(*est, strict=True)):
            prompt = round(SLOPE * p) + SYSTEM
            if agent == "acompact-7f3e":  # the parent's last prompt, from the cache
                prompt, read = last_prompt + round(SLOPE * p), last_prompt
            elif i == 0:
                read = SYSTEM if agent is None else 0
            elif times[i] - times[i - 1] > ttl:
                read = 0
            else:
                read = round(SLOPE * c) + SYSTEM if c else SYSTEM
            usage.append(_usage(prompt, read, hour))
            last_prompt = prompt if agent is None else last_prompt
        write(root / name, session_lines(steps, compact_at, usage, times, agent))
    return root


def test_a_claude_code_folder_with_subagents_reads_as_one_input(tmp_path: Path) -> None:
    from ctxcompact.formats import read
    from ctxcompact.formats.source import compaction_agent, subagent_parent

    root = claude_code_folder(tmp_path)
    table = cc.read_sessions(root).table
    ids = set(Transcript(table).session_ids())
    task, summary = f"{SID}/subagents/agent-a1b2", f"{SID}/subagents/agent-acompact-7f3e"
    assert ids == {SID, task, summary}
    assert subagent_parent(task) == (SID, "a1b2") and subagent_parent(SID) is None
    assert compaction_agent(summary) == SID and compaction_agent(task) is None
    # the pure-Python reader names them alike
    assert [s.id for s in read(root / f"{summary}.jsonl")] == [summary]
    got = replay(table, limits=WIDE, model="claude-opus-4-6", as_sent="auto", calibrate=True)
    calls = dict(zip(got.sessions["session_id"].to_pylist(), got.sessions["calls"].to_pylist(),
                     strict=True))  # fmt: skip
    recorded = got.sessions["recorded_calls"].to_pylist()
    assert calls == {SID: 14, task: 4, summary: 1}  # one call per message id
    assert list(calls.values()) == recorded


def test_claude_codes_cache_reads_and_writes_are_replayed_as_it_wrote_them(
        tmp_path: Path) -> None:  # fmt: skip
    """The compaction agent reads its parent's prefix, a run's first call and
    the first after a compaction read the system prompt as the first call
    recorded, a pause past a run's cache lifetime (5 minutes, or 1 hour for a
    run that wrote 1-hour entries) writes the prompt again."""
    table = cc.read_sessions(claude_code_folder(tmp_path)).table
    got = replay(table, limits=WIDE, model="claude-opus-4-6", as_sent="auto", calibrate=True)
    s = got.summary
    c = s["costs"]["claude-opus-4-6"]
    assert s["baseline_prompt_tokens"] == pytest.approx(s["recorded_prompt_tokens"], rel=0.005)
    assert c["baseline_cached_tokens"] == pytest.approx(s["recorded_cached_tokens"], rel=0.005)
    assert c["baseline_written_tokens"] == pytest.approx(s["recorded_written_tokens"], rel=0.01)
    rows = {r["session_id"]: r for r in got.sessions.to_pylist()}
    summary = rows[f"{SID}/subagents/agent-acompact-7f3e"]
    assert summary["baseline_written_tokens"] == pytest.approx(
        summary["recorded_written_tokens"], abs=5)  # fmt: skip
    # the pauses are seen: each call's time is its event's timestamp
    since = got.calls.filter(pc.equal(got.calls["session_id"], SID))["since_previous_s"]
    assert since.to_pylist()[5] == pytest.approx(1260.0)


def broken_file(tmp_path: Path, at: int | None, steps: int = 14, system: int = 2_000,
                times: list[float] | None = None) -> Path:  # fmt: skip
    """A session whose calls recorded reading the previous prompt, written
    for 5 minutes, except call ``at`` (``None``: none), where the runtime
    broke its cache: it read only the system prompt and tools (``system``)
    and wrote the history again, as Claude Code did after a task
    notification. Each call is 20 s after the previous unless ``times``."""
    times = times if times is not None else [20.0 * i for i in range(steps)]
    plain = write(tmp_path / "plain.jsonl", session_lines(steps, 99, None, times))
    sent = replay(cc.read_sessions(plain).table, limits=WIDE).calls
    prompts = [p + system for p in sent["baseline_prompt_tokens"].to_pylist()]
    usage = []
    for i, p in enumerate(prompts):
        read = system if i in (0, at) else prompts[i - 1]
        usage.append(
            {
                "input_tokens": 3,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": p - read - 3,
                "output_tokens": 40,
            }
        )
    name = f"broken-{at}.jsonl"
    return write(tmp_path / name, session_lines(steps, 99, usage, times))


def test_a_recorded_cache_break_caps_every_policys_cache_at_that_call(tmp_path: Path) -> None:
    """The runtime's break is an event of the run: the baseline and every
    policy write their history again at that call, and only there."""
    broken = cc.read_sessions(broken_file(tmp_path, at=10)).table
    intact = cc.read_sessions(broken_file(tmp_path, at=None)).table
    model = "claude-sonnet-4-5"  # reads from 1,024 tokens
    for policy in ("opencode", "swe-agent", "anthropic-clear-tool-uses"):
        got = replay(broken, policy, limits=WIDE, model=model, calibrate=True)
        was = replay(intact, policy, limits=WIDE, model=model, calibrate=True)
        (row,) = got.sessions.to_pylist()
        assert (row["cache_breaks"], was.sessions.to_pylist()[0]["cache_breaks"]) == (1, 0)
        (entry,) = got.summary["cache_breaks"]
        assert entry["cache_break_calls"] == [10] and got.summary["cache_break_calls"] == 1
        calls, before = got.calls.to_pylist(), was.calls.to_pylist()
        prefix = calls[0]["baseline_cached_tokens"]  # what the first call read: the system prompt
        assert prefix == 2_000
        for i, (c, b) in enumerate(zip(calls, before, strict=True)):
            assert c["prompt_tokens"] == b["prompt_tokens"], i
            if i != 10:
                assert (c["cached_tokens"], c["baseline_cached_tokens"]) == (
                    b["cached_tokens"], b["baseline_cached_tokens"]), i  # fmt: skip
        # call 10 read only what precedes the history: the policy's and the baseline's alike
        assert calls[10]["cached_tokens"] == calls[10]["baseline_cached_tokens"] == prefix
        assert calls[10]["written_tokens"] == calls[10]["prompt_tokens"] - prefix
        assert before[10]["baseline_cached_tokens"] > 2 * prefix
        assert before[10]["cached_tokens"] > prefix
        assert entry["cache_break_tokens"] == before[10]["baseline_cached_tokens"] - prefix
        # the writes recorded are the replay's, within the calibration's noise
        c_got = got.summary["costs"][model]
        c_was = was.summary["costs"][model]
        moved = before[10]["baseline_cached_tokens"] - prefix
        assert c_got["baseline_written_tokens"] == c_was["baseline_written_tokens"] + moved
        assert c_got["baseline_written_tokens"] == pytest.approx(
            got.summary["recorded_written_tokens"], rel=0.02)  # fmt: skip
        assert c_got["written_tokens"] > c_was["written_tokens"]


def test_a_break_reaching_an_earlier_call_caps_at_that_calls_prompt(tmp_path: Path) -> None:
    """A read that reaches an earlier call's prompt (a breakpoint written
    before) keeps that much of each policy's prompt cached."""
    steps, system = 14, 2_000
    times = [20.0 * i for i in range(steps)]
    plain = write(tmp_path / "plain.jsonl", session_lines(steps, 99, None, times))
    prompts = [
        p + system
        for p in replay(cc.read_sessions(plain).table, limits=WIDE)
        .calls["baseline_prompt_tokens"]
        .to_pylist()
    ]
    reads = [system, *prompts[:-1]]
    reads[11] = prompts[2] + 10  # call 11 read what call 2 sent, and a little more
    usage = [{"input_tokens": 3, "cache_read_input_tokens": r,
              "cache_creation_input_tokens": p - r - 3, "output_tokens": 40}
             for p, r in zip(prompts, reads, strict=True)]  # fmt: skip
    path = write(tmp_path / "early.jsonl", session_lines(steps, 99, usage, times))
    got = replay(cc.read_sessions(path).table, "opencode", limits=WIDE, calibrate=True)
    calls = got.calls.to_pylist()
    assert got.summary["cache_breaks"][0]["cache_break_calls"] == [11]
    assert calls[11]["baseline_cached_tokens"] == calls[2]["baseline_prompt_tokens"]
    intact = write(
        tmp_path / "intact.jsonl",
        session_lines(
            steps,
            99,
            [
                {**u, "cache_read_input_tokens": r, "cache_creation_input_tokens": p - r - 3}
                for u, p, r in zip(usage, prompts, [system, *prompts[:-1]], strict=True)
            ],
            times,
        ),
    )
    was = replay(cc.read_sessions(intact).table, "opencode", limits=WIDE, calibrate=True)
    raw = was.calls.to_pylist()[11]["cached_tokens"]
    assert calls[11]["cached_tokens"] == min(raw, calls[2]["prompt_tokens"]) < raw


def test_a_grid_caps_every_point_at_a_recorded_break_as_replay_does(tmp_path: Path) -> None:
    from ctxcompact.tuning import tune

    table = cc.read_sessions(broken_file(tmp_path, at=10)).table
    model = "claude-sonnet-4-5"
    tuned = tune(table, {"preset": ["opencode", "swe-agent"]}, limits=WIDE, model=model,
                 workers=1)  # fmt: skip
    for name, policy in (("preset=opencode", "opencode"), ("preset=swe-agent", "swe-agent")):
        alone = replay(table, policy, limits=WIDE, model=model).summary
        assert alone["cache_break_calls"] == 1
        got = tuned.summaries[name]
        assert (got["cost"], got["baseline_cost"]) == pytest.approx(
            (alone["cost"], alone["baseline_cost"]))  # fmt: skip


def test_the_cli_reports_each_runs_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_run import invoke

    path = str(broken_file(tmp_path, at=10))
    args = ("replay", path, "--context", "1000000", "--price", "claude-sonnet-4-5", "--calibrate")
    code, out, _ = invoke(monkeypatch, capsys, *args, "--json")
    assert code == 0
    (entry,) = json.loads(out)["cache_breaks"]
    assert (entry["session_id"], entry["cache_breaks"], entry["cache_break_calls"]) == (
        SID,
        1,
        [10],
    )
    code, out, _ = invoke(monkeypatch, capsys, *args)
    assert code == 0 and "cache breaks the runs recorded: 1 run(s)" in out
    assert f"{SID}: 1 call(s) [10], {entry['cache_break_tokens']:,} tokens written again" in out


def test_the_runs_own_compaction_is_no_break(tmp_path: Path) -> None:
    """A call after Claude Code's compaction read only the system prompt: the
    run's policy, not a break, even with the baseline sent whole; a run that
    carries its own prune marks has none read either."""
    import pyarrow as pa

    table = cc.read_sessions(recorded_file(tmp_path)).table
    whole = replay(table, limits=WIDE, model="claude-opus-4-6", calibrate=True)
    assert whole.summary["cache_break_calls"] == 0
    assert whole.sessions.to_pylist()[0]["cache_breaks"] == 0
    broken = cc.read_sessions(broken_file(tmp_path, at=10)).table
    assert replay(broken, limits=WIDE, calibrate=True).summary["cache_break_calls"] == 1
    marks = broken["compacted_at"].to_pylist()
    marks[5] = 1_770_000_000_000  # a part the run pruned itself
    at = broken.schema.get_field_index("compacted_at")
    pruned = broken.set_column(at, "compacted_at", pa.array(marks, broken["compacted_at"].type))
    got = replay(pruned, limits=WIDE, calibrate=True)
    assert got.summary["cache_break_calls"] == 0
    assert got.sessions.to_pylist()[0]["cache_breaks"] is None


def test_a_pause_past_the_lifetime_is_an_expiry_not_a_break(tmp_path: Path) -> None:
    times = [20.0 * i for i in range(14)]
    times[10:] = [t + 900 for t in times[10:]]  # 15 minutes before call 10: the entry expired
    got = replay(cc.read_sessions(broken_file(tmp_path, at=10, times=times)).table,
                 limits=WIDE, model="claude-sonnet-4-5", calibrate=True)  # fmt: skip
    assert got.sessions.to_pylist()[0]["cache_breaks"] == 0
    assert got.summary["cache_breaks"] == [] and got.summary["cache_break_tokens"] == 0
    # priced as expired: the call writes its whole prompt (the fixture's
    # recorded call read the system prompt: 2,000 tokens more written here)
    c = got.summary["costs"]["claude-sonnet-4-5"]
    assert c["baseline_written_tokens"] == pytest.approx(
        got.summary["recorded_written_tokens"] + 2_000, rel=0.01)  # fmt: skip


def test_a_run_without_recorded_reads_has_no_breaks(tmp_path: Path) -> None:
    table = cc.read_sessions(write(tmp_path / "s.jsonl", session_lines(8, 99, None))).table
    got = replay(table, limits=WIDE, calibrate=True)
    assert got.sessions.to_pylist()[0]["cache_breaks"] is None
    assert got.summary["cache_breaks"] == [] and got.summary["cache_break_calls"] == 0


CORPUS = os.environ.get("CLAUDE_CODE_CORPUS")


@pytest.mark.skipif(CORPUS is None, reason="CLAUDE_CODE_CORPUS does not name a folder of real "
                    "Claude Code sessions (docs/tuning.md says where to fetch one)")  # fmt: skip
def test_real_claude_code_corpus() -> None:
    """The corpus folder read as one input (each subagent a session of its
    own) and replayed once: exactly the recorded calls per session; prompt
    and cache reads and writes within 5% in total (docs/tuning.md has the
    per-session table; the writes were
    -14.1% before the recorded cache breaks, ``tuning.cache.cache_breaks``:
    Claude Code re-read from the system prompt on most calls after a
    background task's notification)."""
    assert CORPUS is not None
    got = replay(cc.read_sessions(CORPUS).table, limits={"context": 200_000, "output": 32_000},
                 model="claude-opus-4-6", as_sent="auto", calibrate=True)  # fmt: skip
    for row in got.sessions.to_pylist():
        assert row["calls"] == row["recorded_calls"], row["session_id"]
    s = got.summary
    c = s["costs"]["claude-opus-4-6"]
    assert s["calls"] == s["recorded_calls"]
    assert s["baseline_prompt_tokens"] == pytest.approx(s["recorded_prompt_tokens"], rel=0.05)
    assert c["baseline_cached_tokens"] == pytest.approx(s["recorded_cached_tokens"], rel=0.05)
    assert c["baseline_written_tokens"] == pytest.approx(s["recorded_written_tokens"], rel=0.05)
    assert s["cache_break_calls"] >= 4  # the task notifications at least


def test_tune_prices_a_runs_cache_lifetime_as_replay_does(tmp_path: Path) -> None:
    """A run that wrote 1-hour entries keeps them an hour in a grid's prices too."""
    from ctxcompact.tuning import tune

    table = cc.read_sessions(claude_code_folder(tmp_path)).table
    point, model = {"preset": ["opencode"]}, "claude-sonnet-4-5"  # reads from 1,024 tokens
    alone = replay(table, limits=WIDE, model=model, policy="opencode").summary
    (summary,) = tune(table, point, limits=WIDE, model=model,
                      workers=1).summaries.values()  # fmt: skip
    assert summary["baseline_cost"] == pytest.approx(alone["baseline_cost"])
    assert summary["cost"] == pytest.approx(alone["cost"])
