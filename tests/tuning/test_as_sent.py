"""The as-sent baseline (issue 39, part 2): each run's baseline replayed under
the policy it was sent with; ``auto`` picks it from the recorded usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow.compute as pc
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
        (3, "as_sent: takes 'auto', 'none', 'own', 'last-N'"),
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


# --- tune and tune --search take it (chosen once per run, reported) -------------------


def recorded_runs() -> list[cc.Session]:
    """Run ``a`` sent with the last 7 observations (its usage says so), ``b``
    recording nothing."""
    plain = run(12, 2_000, sid="a")
    sent = replay(plain, limits=WIDE, as_sent="last-7").calls["baseline_prompt_tokens"]
    return [run(12, 2_000, prompts=sent.to_pylist(), sid="a"), run(6, 900, sid="b"),
            run(9, 1_500, sid="c")]  # fmt: skip


def test_tune_replays_every_points_baseline_as_sent_chosen_once_per_run(monkeypatch: Any) -> None:
    from ctxcompact.tuning import as_sent as module
    from ctxcompact.tuning import tune

    runs = recorded_runs()
    chosen = []
    real = module.choose_baseline

    def counting(*args: Any, **kwargs: Any) -> Any:
        chosen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("ctxcompact.tuning.grid.choose_baseline", counting)
    grid = {"preset": ["opencode", "swe-agent"], "mask_first": [False, True]}
    got = tune(runs, grid, limits=WIDE, as_sent="auto", workers=1)
    assert len(chosen) == 1  # one choice per run, shared by the four points
    alone = replay(runs, limits=WIDE, as_sent="auto")
    assert got.as_sent == alone.summary["as_sent"]
    assert {c["session_id"]: c["as_sent"] for c in got.as_sent} == {
        "a": "last-7", "b": "none", "c": "none"}  # fmt: skip
    want = alone.calls.sort_by([("session_id", "ascending"), ("call", "ascending")])
    for name in got.points["policy"].to_pylist():
        mine = got.calls.filter(pc.equal(got.calls["policy"], name)).sort_by(
            [("session_id", "ascending"), ("call", "ascending")])  # fmt: skip
        for column in ("baseline_prompt_tokens", "baseline_cached_tokens"):
            assert mine[column].equals(want[column]), (name, column)
    plain = tune(runs, grid, limits=WIDE, workers=1)
    assert plain.as_sent is None
    # Run a's baseline is smaller as sent than its history sent whole.
    assert got.points["baseline_prompt_tokens"][0].as_py() < (
        plain.points["baseline_prompt_tokens"][0].as_py())  # fmt: skip


def test_tune_refuses_an_as_sent_that_does_not_parse_naming_it() -> None:
    from ctxcompact.tuning import tune

    with pytest.raises(ConfigError, match="as_sent: 'last-0'") as e:
        tune(object(), {"preset": ["opencode"]}, limits=WIDE, as_sent="last-0")
    assert e.value.column == "as_sent"  # before the corpus (not one) is looked at


def test_search_chooses_once_over_every_run_and_every_replay_shares_it(monkeypatch: Any) -> None:
    from ctxcompact.tuning import as_sent as module
    from ctxcompact.tuning import search

    runs = [*recorded_runs(), run(7, 1_200, sid="d"), run(10, 800, sid="e")]
    chosen = []
    real = module.choose_baseline

    def counting(*args: Any, **kwargs: Any) -> Any:
        chosen.append(1)
        return real(*args, **kwargs)

    import sys

    for name in ("ctxcompact.tuning.replay", "ctxcompact.tuning.grid", module.__name__):
        monkeypatch.setattr(sys.modules[name], "choose_baseline", counting)
    got = search(runs, limits=WIDE, model="gpt-4o", budget=3, as_sent="auto",
                 config={"mask_first": True})  # fmt: skip
    assert len(chosen) == 1
    assert got.as_sent is not None
    assert {c["session_id"] for c in got.as_sent} == {s.id for s in runs}
    held = [s for s in runs if s.id in set(got.held_out_ids)]
    alone = replay(held, "opencode", limits=WIDE, model="gpt-4o", as_sent="auto")
    assert got.presets["opencode"]["baseline_prompt_tokens"] == (
        alone.summary["baseline_prompt_tokens"])  # fmt: skip
    assert got.count == "o200k exact" == got.held_out["count"]
    # The report of the search replays the held-out split against the same baseline.
    from ctxcompact.tuning.report import search_tuning

    before = len(chosen)  # the search's, and the replay of the held-out split above
    tuned, _ = search_tuning(got, runs, limits=WIDE, config={"mask_first": True}, model="gpt-4o")
    assert len(chosen) == before and tuned.count == "o200k exact"
    assert tuned.as_sent == [c for c in got.as_sent if c["session_id"] in set(got.held_out_ids)]
    row = tuned.points.filter(pc.equal(tuned.points["policy"], "preset=opencode")).to_pylist()[0]
    assert row["baseline_prompt_tokens"] == alone.summary["baseline_prompt_tokens"]


def test_a_baseline_chosen_under_one_count_is_refused_under_another() -> None:
    from ctxcompact.tuning.replay import sent_baseline

    runs = recorded_runs()
    chosen = sent_baseline(runs, "auto", limits=WIDE, model="gpt-4o")
    assert chosen.method == "o200k-exact"
    same = replay(runs, limits=WIDE, model="gpt-4o", as_sent=chosen)
    assert same.summary["as_sent"] == replay(runs, limits=WIDE, model="gpt-4o",
                                             as_sent="auto").summary["as_sent"]  # fmt: skip
    with pytest.raises(ConfigError, match="counted with o200k-exact") as e:
        replay(runs, limits=WIDE, config=cc.CompactionConfig.load(estimate_method="cl100k"),
               as_sent=chosen)  # fmt: skip
    assert e.value.column == "as_sent"


def test_the_cli_tune_takes_as_sent_and_says_the_count(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from ctxcompact import formats

    path = tmp_path / "runs.jsonl"
    formats.write(recorded_runs(), path, "opencode")
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["opencode", "swe-agent"]\nmask_first = [true]\n')
    code, _, err = invoke(monkeypatch, capsys, "tune", str(path), "--grid", str(grid),
                          "--context", "100000", "--as-sent", "last-x")  # fmt: skip
    assert code != 0 and "--as-sent" in err and "last-x" in err
    code, out, err = invoke(monkeypatch, capsys, "tune", str(path), "--grid", str(grid),
                            "--context", "100000", "--as-sent", "auto", "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["count"] == "estimate opencode"
    assert {c["session_id"]: c["as_sent"] for c in result["as_sent"]}["a"] == "last-7"
    code, out, err = invoke(monkeypatch, capsys, "tune", str(path), "--grid", str(grid),
                            "--context", "100000", "--model", "gpt-4o", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["count"] == "o200k exact" and "as_sent" not in json.loads(out)
    code, text, err = invoke(monkeypatch, capsys, "tune", str(path), "--grid", str(grid),
                             "--context", "100000", "--as-sent", "auto")  # fmt: skip
    assert code == 0, err
    assert "count: estimate opencode" in text and "as sent (the baseline of each run)" in text


def test_the_cli_search_takes_as_sent_and_reports_it(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from ctxcompact import formats

    path = tmp_path / "runs.jsonl"
    formats.write([*recorded_runs(), run(7, 1_200, sid="d")], path, "opencode")
    code, _, err = invoke(monkeypatch, capsys, "tune", str(path), "--search", "--context",
                          "100000", "--as-sent", "bogus")  # fmt: skip
    assert code != 0 and "--as-sent" in err and "bogus" in err
    code, out, err = invoke(monkeypatch, capsys, "tune", str(path), "--search", "--context",
                            "100000", "--budget", "2", "--as-sent", "auto",
                            "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["count"] == "estimate opencode"
    assert {c["session_id"]: c["as_sent"] for c in result["as_sent"]}["a"] == "last-7"


def test_the_report_says_the_count_and_the_baseline_per_run() -> None:
    pytest.importorskip("matplotlib")
    from ctxcompact.tuning import tune
    from ctxcompact.tuning.report import render_report

    runs = recorded_runs()
    grid = {"preset": ["opencode", "swe-agent"], "mask_first": [True]}
    page = render_report(tune(runs, grid, limits=WIDE, as_sent="auto", workers=1))
    assert "Prompt tokens counted as: estimate opencode" in page
    assert "last-7 (1)" in page and "none (2)" in page and 'id="as-sent"' in page
    plain = render_report(tune(runs, grid, limits=WIDE, model="gpt-4o", workers=1))
    assert "counted as: o200k exact" in plain and "stored history sent whole" in plain
