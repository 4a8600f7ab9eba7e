"""The as-sent baseline (issue 39, part 2): each run's baseline replayed under
the policy it was sent with; ``auto`` picks it from the recorded usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from cli_run import invoke
from ctxcompact.errors import ConfigError
from ctxcompact.tuning import replay
from ctxcompact.tuning.as_sent import candidates

WIDE = {"context": 1_000_000, "output": 8_000}


def run(steps: int, chars: int, *, prompts: list[int] | None = None, sid: str = "r") -> cc.Session:
    """A task, then ``steps`` steps each reading a file; ``prompts``: the
    recorded input tokens of each call (else none recorded)."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user"},
         "parts": [{"id": "t0", "type": "text", "text": "fix the bug"}]},
    ]  # fmt: skip
    for i in range(steps):
        info: dict[str, Any] = {"id": f"a{i}", "role": "assistant", "parentID": "u0",
                                "finish": "tool-calls"}  # fmt: skip
        if prompts is not None:
            info["tokens"] = {"input": prompts[i], "output": 7}
        messages.append({
            "info": info,
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"f{i}.py"},
                                 "output": f"<{i}>" + "x" * (chars + 97 * i)}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": sid}, "messages": messages})


@pytest.mark.parametrize("n", [1, 3, 7, 10])
def test_auto_picks_the_keep_n_policy_that_produced_the_recorded_usage(n: int) -> None:
    plain = run(16, 2_000)
    sent = replay(plain, limits=WIDE, as_sent=f"last-{n}").calls["baseline_prompt_tokens"]
    recorded = run(16, 2_000, prompts=sent.to_pylist())
    got = replay(recorded, limits=WIDE, as_sent="auto")
    (choice,) = got.summary["as_sent"]
    assert choice["as_sent"] == ("swe-agent" if n == 5 else f"last-{n}")
    assert choice["as_sent_reason"] == "auto"
    assert choice["as_sent_prompt_tokens"] == choice["recorded_prompt_tokens"]
    # The baseline is the as-sent one: the gap to the recorded usage is closed.
    assert got.summary["prompt_gap"] == 0
    whole = replay(recorded, limits=WIDE)
    assert whole.summary["prompt_gap"] > 0  # the stored history sent whole overstates it
    assert got.sessions["as_sent"].to_pylist() == [choice["as_sent"]]


def test_a_run_that_records_nothing_stays_sent_whole_and_says_so() -> None:
    got = replay(run(8, 2_000), limits=WIDE, as_sent="auto")
    (choice,) = got.summary["as_sent"]
    assert choice["as_sent"] == "none" and choice["as_sent_reason"] == "auto, nothing recorded"
    assert got.calls.equals(replay(run(8, 2_000), limits=WIDE).calls)


def test_a_forced_policy_is_every_runs_baseline() -> None:
    session = run(12, 2_000)
    forced = replay(session, "opencode", limits=WIDE, as_sent="swe-agent")
    masked = replay(session, "swe-agent", limits=WIDE)
    # The baseline under swe-agent is what swe-agent itself sends.
    assert forced.calls["baseline_prompt_tokens"].equals(masked.calls["prompt_tokens"])
    assert forced.calls["baseline_cached_tokens"].equals(masked.calls["cached_tokens"])
    assert forced.summary["as_sent"][0]["as_sent_reason"] == "given"


def test_the_candidates_are_none_the_presets_and_last_n() -> None:
    names = list(candidates())
    assert names[0] == "none" and "swe-agent" in names and "opencode" in names
    assert [f"last-{n}" in names for n in range(1, 11)].count(True) == 9  # last-5 is swe-agent


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("bogus", "as_sent: unknown policy preset 'bogus'"),
        ("last-0", "as_sent: 'last-0': N of last-N is at least 1"),
        (3, "as_sent: takes 'auto', 'none', 'last-N'"),
        ({"keep_recent": -1}, "as_sent: policy: invalid policy option keep_recent"),
        ("nowhere/p.toml", "as_sent: "),
    ],
)
def test_an_as_sent_that_does_not_parse_is_a_config_error_naming_it(spec: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as e:
        replay(run(3, 100), limits=WIDE, as_sent=spec)
    assert e.value.column == "as_sent"


def test_the_cli_names_the_option_and_reports_the_choice_per_run(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from ctxcompact import formats

    path = tmp_path / "runs.jsonl"
    plain = run(12, 2_000)
    sent = replay(plain, limits=WIDE, as_sent="last-7").calls["baseline_prompt_tokens"]
    formats.write([run(12, 2_000, prompts=sent.to_pylist(), sid="a"), run(6, 900, sid="b")],
                  path, "opencode")  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, "replay", str(path), "--context", "100000",
                          "--as-sent", "bogus")  # fmt: skip
    assert code != 0 and "--as-sent" in err and "bogus" in err
    code, out, err = invoke(monkeypatch, capsys, "replay", str(path), "--context", "100000",
                            "--as-sent", "auto", "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    by_run = {c["session_id"]: c for c in result["as_sent"]}
    assert by_run["a"]["as_sent"] == "last-7" and by_run["b"]["as_sent"] == "none"
    assert by_run["b"]["as_sent_reason"] == "auto, nothing recorded"
    assert result["policies"][0]["prompt_gap"] == 0
    code, text, _ = invoke(monkeypatch, capsys, "replay", str(path), "--context", "100000",
                           "--as-sent", "auto")  # fmt: skip
    assert code == 0 and "as sent (the baseline of each run)" in text and "last-7" in text
