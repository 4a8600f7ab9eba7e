"""The tuner that searches: the split, the search, the written policy, bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from builders import read_run
from cli_run import invoke
from ctxcompact.errors import ConfigError, DatasetError
from ctxcompact.policy import PRESETS, Policy
from ctxcompact.tuning import replay
from ctxcompact.tuning.search import load_space, search, split

SESSIONS = [read_run(f"s{n}", 8 + n % 3, 2_000 + 300 * n) for n in range(8)]
LIMITS = {"context": 64_000, "output": 1_000}
CONFIG = cc.CompactionConfig(mask_first=True)
#: A space small enough to replay whole: the known best is found by brute force.
SPACE = {"turn": ["step"], "protect_turns": [0], "protect": [0], "minimum": [0],
         "keep_recent": [1, 4, 7], "clear_inputs": [False, True]}  # fmt: skip


def test_the_split_is_stable_disjoint_and_keeps_each_sessions_side() -> None:
    ids = [f"run-{i}" for i in range(40)]
    train, held = split(ids, 0.3, seed=7)
    assert set(train) | set(held) == set(ids) and not set(train) & set(held)
    assert train and held and 4 <= len(held) <= 24
    assert split(list(reversed(ids)), 0.3, seed=7)[1] == list(reversed(held))  # order-free
    # a session's side depends on its id, not on the rest of the corpus
    more_train, more_held = split([*ids, *(f"new-{i}" for i in range(40))], 0.3, seed=7)
    assert set(held) <= set(more_held) and set(train) <= set(more_train)
    assert split(ids, 0.3, seed=8) != (train, held)  # the seed decides
    # each side gets one session at least, whatever the hash says
    for seed in range(20):
        t, h = split(["a", "b"], 0.3, seed=seed)
        assert len(t) == 1 and len(h) == 1
    with pytest.raises(DatasetError, match="at least 2 sessions"):
        split(["a"])


def _brute_force(min_retention: float) -> Policy:
    """The cheapest (prompt tokens) feasible policy of SPACE and the presets,
    each replayed on the training split."""
    train, _ = split([s.id for s in SESSIONS], 0.3, 0)
    chosen = [s for s in SESSIONS if s.id in train]
    base = CONFIG.policy.model_dump()
    candidates = list(PRESETS.values()) + [
        Policy.model_validate({**base, **dict(zip(SPACE, combo, strict=True))})
        for combo in itertools.product(*SPACE.values())
    ]
    scored = []
    for p in candidates:
        s = replay(chosen, p, limits=LIMITS, config=CONFIG).summary
        if s["retention"] >= min_retention and not s["over_window"]:
            scored.append((s["prompt_tokens"], p))
    return min(scored, key=lambda x: x[0])[1]


@pytest.mark.parametrize("method", ["halving", "random"])
def test_the_search_finds_the_known_best_policy(method: str) -> None:
    best = _brute_force(0.0)
    result = search(SESSIONS, limits=LIMITS, space=SPACE, min_retention=0.0, budget=30,
                    config=CONFIG, method=method)  # fmt: skip
    assert result.objective == "tokens" and len(result.trials) <= 30
    assert result.policy == best
    # the figures on the training split are the policy's, replayed on it
    train = [s for s in SESSIONS if s.id in result.train_ids]
    again = replay(train, best, limits=LIMITS, config=CONFIG).summary
    assert result.train["prompt_tokens"] == again["prompt_tokens"]
    # every preset is shown on the held-out split, and the goal follows from them
    assert set(result.presets) == set(PRESETS)
    cheapest = min(f["prompt_tokens"] for f in result.presets.values())
    assert result.goal_met == (result.held_out["prompt_tokens"] <= cheapest)


def test_a_candidate_under_the_retention_floor_is_never_chosen() -> None:
    cheapest = search(SESSIONS, limits=LIMITS, space=SPACE, budget=30, config=CONFIG,
                      method="random")  # fmt: skip
    floor = cheapest.train["retention"] + 1e-9
    assert floor < 1  # the cheapest policy loses facts: a floor over it rules it out
    result = search(SESSIONS, limits=LIMITS, space=SPACE, min_retention=floor, budget=30,
                    config=CONFIG, method="random")  # fmt: skip
    assert result.policy == _brute_force(floor) != cheapest.policy
    assert result.train["retention"] >= floor


def test_the_written_policy_loads_and_replays_to_the_reported_figures(tmp_path: Path) -> None:
    result = search(SESSIONS, limits=LIMITS, space=SPACE, budget=20, config=CONFIG,
                    model="gpt-4o-2024-08-06")  # fmt: skip
    assert result.objective == "cost"
    path = result.write(tmp_path / "policy.toml")
    loaded = Policy.load(str(path))
    assert loaded == result.policy
    held = [s for s in SESSIONS if s.id in result.held_out_ids]
    again = replay(held, loaded, limits=LIMITS, config=CONFIG, model="gpt-4o-2024-08-06").summary
    for key in ("cost", "prompt_tokens", "retention", "over_window"):
        assert again[key] == result.held_out[key], key


@pytest.mark.parametrize("name", [*PRESETS, "custom"])
def test_a_policy_written_as_toml_reads_back_the_same(name: str, tmp_path: Path) -> None:
    policy = PRESETS.get(name) or Policy(truncate_output=500, exclude_tools=["a", 'b"c'],
                                         placeholder="describe", keep_recent=0)  # fmt: skip
    path = tmp_path / "p.toml"
    path.write_text(policy.to_toml())
    assert Policy.from_file(path) == policy


@pytest.mark.parametrize(
    ("space", "column", "said"),
    [
        ({}, "space", "the search space is empty"),
        ({"keep_recent": []}, "keep_recent", "no values"),
        ({"protect": {"low": 10, "high": 5}}, "protect", "the range is empty"),
        ({"protect": {"low": -1, "high": 5}}, "protect", "greater than or equal to 0"),
        ({"turn": ["user", "hour"]}, "turn", "search space option turn"),
        ({"supersede": {"low": 0, "high": 1}}, "supersede", "a range is for an integer"),
        ({"bogus": [1]}, "bogus", "not a policy option"),
        ({"preset": ["opencode"]}, "preset", "not a policy option"),
        ({"keep_recent": [1, 1]}, "keep_recent", "listed twice"),
    ],
)
def test_a_bad_space_is_a_config_error_naming_the_option(
    space: dict[str, Any], column: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=said) as e:
        load_space(space)
    assert e.value.column == column


@pytest.mark.parametrize(
    ("options", "column"),
    [
        ({"min_retention": 1.5}, "min_retention"),
        ({"min_retention": -0.1}, "min_retention"),
        ({"budget": 0}, "budget"),
        ({"budget": 2.5}, "budget"),
        ({"objective": "latency"}, "objective"),
        ({"objective": "cost"}, "objective"),  # no model to price with
        ({"method": "grid"}, "method"),
        ({"holdout": 1.0}, "holdout"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it(options: dict[str, Any], column: str) -> None:
    with pytest.raises(ConfigError) as e:
        search(SESSIONS, limits=LIMITS, space=SPACE, config=CONFIG, **options)
    assert e.value.column == column and column in str(e.value)


@pytest.mark.parametrize("name", ["keep_recent", "truncate_output", "protect_turns", "protect"])
def test_every_integer_option_takes_a_range(name: str) -> None:
    # keep_recent and truncate_output may be None too: still integer options
    (dim,) = load_space({name: {"low": 1, "high": 9}})
    assert (dim.name, dim.low, dim.high) == (name, 1, 9)
    with pytest.raises(ConfigError, match="integer option") as e:
        load_space({"cache_read": {"low": 0, "high": 1}})
    assert e.value.column == "cache_read"


def test_the_space_is_read_from_toml_with_none(tmp_path: Path) -> None:
    path = tmp_path / "space.toml"
    path.write_text('[space]\nkeep_recent = ["none", 2]\nprotect = {low = 0, high = 9, log = '
                    "true}\n")  # fmt: skip
    dims = {d.name: d for d in load_space(path)}
    assert dims["keep_recent"].choices == (None, 2)
    assert (dims["protect"].low, dims["protect"].high, dims["protect"].log) == (0, 9, True)
    path.write_text("")
    with pytest.raises(ConfigError, match="empty") as e:
        load_space(path)
    assert e.value.column == "space" and str(path) in str(e.value)


# --- the command ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ctxcompact import formats

    path = tmp_path_factory.mktemp("search") / "runs.jsonl"
    formats.write(SESSIONS, path, "opencode")
    return path


def _space(tmp_path: Path) -> Path:
    path = tmp_path / "space.toml"
    path.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in SPACE.items()) + "\n")
    return path


def test_tune_search_writes_a_policy_every_command_takes(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    out = tmp_path / "policy.toml"
    code, text, err = invoke(monkeypatch, capsys, "tune", str(runs), "--search", "--space",
                             str(_space(tmp_path)), "--context", "64000", "--output-limit",
                             "1000", "--mask-first", "--model", "gpt-4o", "--min-retention",
                             "0.5", "--budget", "16", "--out", str(out), "--json")  # fmt: skip
    assert code == 0, err
    shown = json.loads(text)
    assert shown["objective"] == "cost" and shown["replays"] <= 16 and shown["mask_first"]
    assert set(shown["presets"]) == set(PRESETS) and isinstance(shown["goal_met"], bool)
    assert Policy.from_file(out).model_dump() == shown["options"]
    # --policy FILE on the commands that take it
    for args in (["prune"], ["compact", "--output", str(tmp_path / "c.parquet")],
                 ["batch", "--output", str(tmp_path / "b.parquet")],
                 ["replay", "--context", "64000", "--output-limit", "1000", "--json"]):  # fmt: skip
        code, _, err = invoke(monkeypatch, capsys, args[0], str(runs), "--policy", str(out),
                              *args[1:])  # fmt: skip
        assert code == 0, (args, err)
    code, text, _ = invoke(monkeypatch, capsys, "tune", str(runs), "--search", "--space",
                           str(_space(tmp_path)), "--context", "64000", "--output-limit",
                           "1000", "--mask-first", "--budget", "8")  # fmt: skip
    assert code == 0 and "held-out split: prompt_tokens" in text and "goal " in text


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--min-retention", "1.5"], 2, "--min-retention"),
        (["--min-retention", "-0.5"], 2, "--min-retention"),
        (["--budget", "0"], 2, "--budget"),
        (["--objective", "latency"], 2, "--objective"),
        (["--objective", "cost"], 4, "--objective"),
        (["--out", "policy.parquet"], 2, "--out"),
        (["--out", "/nonexistent-dir/policy.toml"], 5, "--out"),
        (["--space", "EMPTY"], 4, "the search space is empty"),
        (["--grid", "grid.toml"], 2, "--grid"),
        (["--report", "/nonexistent-dir/r.html"], 5, "--report"),
        (["--report", "p.toml"], 2, "is also the --out output"),
    ],
)
def test_tune_search_refuses_bad_options_before_any_work(
    args: list[str], code: int, said: str, runs: Path, tmp_path: Path, monkeypatch: Any,
    capsys: Any,
) -> None:  # fmt: skip
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    args = [str(empty) if a == "EMPTY" else a for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "p.toml")]
    monkeypatch.chdir(tmp_path)
    got, _, err = invoke(monkeypatch, capsys, "tune", str(runs), "--search", "--context",
                         "64000", "--output-limit", "1000", *args)  # fmt: skip
    assert got == code and said in " ".join(err.split()), err
    assert not (tmp_path / "p.toml").exists() and not (tmp_path / "policy.parquet").exists()


def test_tune_search_reports_the_tuned_policy_beside_every_preset(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    out, report = tmp_path / "policy.toml", tmp_path / "search.html"
    code, text, err = invoke(monkeypatch, capsys, "tune", str(runs), "--search", "--space",
                             str(_space(tmp_path)), "--context", "64000", "--output-limit",
                             "1000", "--mask-first", "--model", "gpt-4o", "--budget", "8",
                             "--out", str(out), "--report", str(report), "--json")  # fmt: skip
    assert code == 0, err
    shown = json.loads(text)
    assert shown["report"] == str(report) and out.exists()
    page = report.read_text()
    marks = page.split('<table class="marks">', 1)[1].split("</table>", 1)[0]
    assert marks.count('<tr class="preset">') == len(PRESETS)
    tuned = marks.split('<tr class="tuned">', 1)[1].split("</tr>", 1)[0]
    # the report's tuned row is the held-out figures the command printed
    held = shown["held_out"]
    assert f"<td>{held['prompt_tokens']:,}</td><td>{held['retention']:.3f}</td>" in tuned
    assert f"<td>{held['cost']:,.4f}</td>" in tuned
    assert "<!-- tuned policy (search) -->" in page
    assert f"over {shown['held_out_sessions']} sessions" in page


def test_search_options_without_search_are_refused(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["opencode"]\n')
    code, _, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                          "--context", "64000", "--budget", "5")  # fmt: skip
    assert code == 2 and "--budget" in err and "takes --search" in " ".join(err.split())
    code, _, err = invoke(monkeypatch, capsys, "tune", str(runs), "--context", "64000")
    assert code == 2 and "--grid" in err


def test_tpe_without_optuna_is_a_config_error_naming_the_extra(monkeypatch: Any) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    with pytest.raises(ConfigError, match=r"ctxcompact\[search\]") as e:
        search(SESSIONS, limits=LIMITS, space=SPACE, config=CONFIG, method="tpe")
    assert e.value.column == "method"
