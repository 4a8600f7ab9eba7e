"""The replay / tune commands: what their output says about the results
(found by a new-user pass)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import read_run
from cli_run import invoke

run = read_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ctxcompact import formats

    path = tmp_path_factory.mktemp("tuning") / "runs.jsonl"
    formats.write([run(f"s{n}", 6 + 3 * n, 3_000 + 500 * n) for n in range(4)], path, "opencode")
    return path


@pytest.fixture(scope="module")
def long_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs whose first request alone is ~2,500 tokens: over a small window
    whatever a policy does."""
    from ctxcompact import formats

    path = tmp_path_factory.mktemp("tuning") / "long.jsonl"
    task = " ".join(f"word{i}" for i in range(2_500))
    formats.write([run(f"l{n}", 4, 2_000, task) for n in range(2)], path, "opencode")
    return path


def test_tune_leaves_points_over_the_window_off_the_front(
    long_task: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text("context = [1200, 64000]\n")
    code, out, err = invoke(monkeypatch, capsys, "tune", str(long_task), "--grid", str(grid),
                            "--output-limit", "500", "--workers", "1", "--json")  # fmt: skip
    result = json.loads(out)
    rows = {p["name"]: p for p in result["policies"]}
    assert code == 0 and rows["context=1200"]["over_window"] > 0
    assert rows["context=1200"]["feasible"] is False and rows["context=1200"]["front"] is False
    assert result["front"] == ["context=64000"]
    assert "1 point(s) sent prompts over the input window and are left off the front" in err
    # no model: the front is on prompt tokens, and the output says so
    assert result["front_axis"] == "prompt_tokens"
    assert "no --model, so the calls are not priced: the front is prompt tokens" in err
    code, out, err = invoke(monkeypatch, capsys, "tune", str(long_task), "--grid", str(grid),
                            "--output-limit", "500", "--workers", "1", "--model", "gpt-4o",
                            "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["front_axis"] == "cost" and "not priced" not in err
    # the table shows why the point is not on the front
    code, text, _ = invoke(monkeypatch, capsys, "tune", str(long_task), "--grid", str(grid),
                           "--output-limit", "500", "--workers", "1")  # fmt: skip
    assert code == 0 and "no: over window" in text and "front axis: prompt_tokens" in text


def test_policies_that_replay_identically_are_named_with_why(
    runs: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Without mask_first, compactions fired and every policy replayed byte
    for byte the same (the offline digest does not read what pruning
    cleared), and nothing said so."""
    args = ["replay", str(runs), "--context", "12000", "--output-limit", "1000",
            "--policy", "opencode", "--policy", "aggressive", "--json"]  # fmt: skip
    code, out, err = invoke(monkeypatch, capsys, *args)
    a, b = json.loads(out)["policies"]
    assert code == 0 and a["compactions"] > 0
    assert a["prompt_tokens"] == b["prompt_tokens"] and a["retention"] == b["retention"]
    assert (
        "note: 2 policies replay identically (opencode, aggressive): a policy that does "
        "not act at every call (without mask_first)"
    ) in err
    assert "offline digest summary" in err and "use --mask-first" in err
    # pruning off: that is why, whatever the policy
    monkeypatch.setenv("CTXCOMPACT_PRUNE", "0")
    code, _, err = invoke(monkeypatch, capsys, *args)
    assert (
        code == 0
        and "2 policies replay identically (opencode, aggressive): pruning is "
        "disabled (prune = false, from environment CTXCOMPACT_PRUNE)"
        in err
    )
    assert "offline digest" not in err
    monkeypatch.delenv("CTXCOMPACT_PRUNE")
    # swe-agent acts at every call (issue 39): it differs from opencode, mask_first or not
    code, out, err = invoke(monkeypatch, capsys, "replay", str(runs), "--context", "12000",
                            "--output-limit", "1000", "--policy", "opencode", "--policy",
                            "swe-agent", "--json")  # fmt: skip
    a, b = json.loads(out)["policies"]
    assert code == 0 and a["prompt_tokens"] != b["prompt_tokens"] and b["masks_at"] == "call"
    # with mask_first aggressive masks: the two differ, no note
    code, out, err = invoke(monkeypatch, capsys, *args, "--mask-first")
    a, b = json.loads(out)["policies"]
    assert code == 0 and a["prompt_tokens"] != b["prompt_tokens"]
    assert "replay identically" not in err
    # a grid: points of one window are compared
    grid = runs.parent / "grid.toml"
    grid.write_text('preset = ["opencode", "swe-agent", "aggressive"]\nmask_first = [false, true]\n'
                    "context = [12000]\n")  # fmt: skip
    code, out, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                            "--output-limit", "1000", "--workers", "1", "--json")  # fmt: skip
    assert code == 0
    assert (
        "policies replay identically (preset=opencode,mask_first=False,context=12000, "
        "preset=opencode,mask_first=True,context=12000, "
        "preset=aggressive,mask_first=False,context=12000): a policy that does not act"
    ) in err
    assert "preset=swe-agent,mask_first=False" not in err.split("replay identically")[1]


def test_the_mask_first_hint_is_not_given_when_mask_first_was(
    runs: Path, monkeypatch: Any, capsys: Any
) -> None:
    args = ["replay", str(runs), "--context", "10000000", "--output-limit", "4000",
            "--policy", "opencode", "--json"]  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, *args)
    assert code == 0 and "--mask-first (a grid's mask_first) masks at every step" in err
    code, _, err = invoke(monkeypatch, capsys, *args, "--mask-first")
    assert code == 0 and "no policy changed a prompt" in err
    assert "masks at every step" not in err
    assert "with mask_first no policy found an output to clear" in err
    # a grid with and without mask_first: the masking points found nothing either
    grid = runs.parent / "huge.toml"
    grid.write_text('preset = ["opencode"]\nmask_first = [false, true]\ncontext = [10000000]\n')
    code, _, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                          "--output-limit", "4000", "--workers", "1", "--json")  # fmt: skip
    assert code == 0 and "no point with mask_first found an output to clear" in err, err


def test_json_records_what_the_numbers_depend_on(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    code, out, _ = invoke(monkeypatch, capsys, "replay", str(runs), "--context", "12000",
                          "--output-limit", "1000", "--policy", "swe-agent", "--mask-first",
                          "--method", "o200k", "--json")  # fmt: skip
    result = json.loads(out)
    assert code == 0
    assert {k: result[k] for k in ("context", "output_limit", "output_reserved", "method",
                                   "mask_first")} == {
        "context": 12000, "output_limit": 1000, "output_reserved": 1000, "method": "o200k",
        "mask_first": True}  # fmt: skip
    # a run that masks at every step says so in its label
    (row,) = result["policies"]
    assert row["name"] == "swe-agent + mask_first" and row["mask_first"] is True
    code, out, _ = invoke(monkeypatch, capsys, "replay", str(runs), "--context", "40000",
                          "--json")  # fmt: skip
    plain = json.loads(out)
    # no output limit: output_token_max is reserved for the answer
    assert plain["output_limit"] is None and plain["output_reserved"] == 32_000
    assert plain["method"] == "opencode" and plain["mask_first"] is False
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\nmask_first = [false, true]\n')
    code, out, _ = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                          "--context", "12000", "--output-limit", "1000", "--method",
                          "cl100k", "--workers", "1", "--json")  # fmt: skip
    tuned = json.loads(out)
    assert code == 0 and tuned["method"] == "cl100k" and tuned["output_limit"] == 1000
    assert tuned["context"] == 12000 and tuned["mask_first"] == [False, True]
    assert [p["mask_first"] for p in tuned["policies"]] == [False, True]


@pytest.mark.parametrize("command", ["replay", "tune", "compact", "batch"])
def test_an_output_limit_of_0_is_refused(
    command: str, runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """--output-limit 0 was taken as "unknown": output_token_max (32,000)
    reserved for the answer, without a word (an 8,000-token input window out
    of --context 40000)."""
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["opencode"]\n')
    extra = {"tune": ["--grid", str(grid)],
             "compact": ["--output", str(tmp_path / "out.parquet")]}.get(command, [])  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, command, str(runs), "--context", "40000",
                          "--output-limit", "0", *extra)  # fmt: skip
    assert code == 2 and "--output-limit" in err and "greater than or equal to 1" in err


def test_a_grids_output_of_0_is_refused(runs: Path, tmp_path: Path, monkeypatch: Any,
                                        capsys: Any) -> None:  # fmt: skip
    grid = tmp_path / "grid.toml"
    grid.write_text("output = [0, 4000]\n")
    code, _, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                          "--context", "40000", "--workers", "1")  # fmt: skip
    assert code == 4
    assert "grid point output=0: output 0 is no output limit: output_token_max (32,000" in err


def _grid_args(command: str, tmp_path: Path, presets: list[str]) -> list[str]:
    """What ``tune`` needs beside ``replay``'s options: a grid of ``presets``, one worker."""
    if command != "tune":
        return []
    grid = tmp_path / "grid.toml"
    grid.write_text(f"preset = {json.dumps(presets)}\n")
    return ["--grid", str(grid), "--workers", "1"]


@pytest.mark.parametrize("command", ["replay", "tune"])
def test_out_named_as_another_format_is_refused(
    command: str, runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """--out calls.csv wrote Parquet into a .csv name without a word."""
    extra = _grid_args(command, tmp_path, ["opencode"])
    out = tmp_path / "calls.csv"
    code, _, err = invoke(monkeypatch, capsys, command, str(runs), "--context", "40000",
                          "--output-limit", "1000", "--out", str(out), *extra)  # fmt: skip
    assert code == 2 and not out.exists()
    assert "--out writes Parquet, not CSV; name it calls.parquet" in " ".join(err.split())
    parquet = tmp_path / "calls.parquet"
    code, _, _ = invoke(monkeypatch, capsys, command, str(runs), "--context", "40000",
                        "--output-limit", "1000", "--out", str(parquet), *extra)  # fmt: skip
    assert code == 0 and parquet.read_bytes()[:4] == b"PAR1"


def test_equal_totals_with_different_calls_are_not_called_identical(capsys: Any) -> None:
    """Two policies can reach the same totals by sending different prompts
    (one call larger, another smaller): the note compares call by call."""
    import pyarrow as pa
    from ctxcompact.cli import tuning as cli
    from ctxcompact.config import CompactionConfig
    from ctxcompact.tuning.replay import CALL_SCHEMA

    def calls(prompts: list[int]) -> pa.Table:
        n = len(prompts)
        columns = {f.name: pa.nulls(n, f.type) for f in CALL_SCHEMA}
        columns |= {"session_id": pa.array(["s"] * n), "call": pa.array(range(n), pa.int64()),
                    "prompt_tokens": pa.array(prompts, pa.int64()),
                    "compacted": pa.array([False] * n)}  # fmt: skip
        return pa.table(columns, schema=CALL_SCHEMA)

    row = {"sessions": 1, "calls": 2, "prompt_tokens": 300, "cached_tokens": 0,
           "compactions": 0, "over_window": 0, "retention": 1.0}  # fmt: skip
    rows = [{"name": name, **row, "mask_first": True} for name in ("a", "b", "c")]
    cfg = CompactionConfig()
    cli._note_equal(
        rows, cfg, calls=[calls([100, 200]), calls([200, 100]), calls([100, 200])].__getitem__
    )
    err = capsys.readouterr().err
    assert "note: 2 policies replay identically (a, c)" in err and "b" not in err.split(":")[1]
    cli._note_equal(rows[:2], cfg, calls=[calls([100, 200]), calls([200, 100])].__getitem__)
    assert "identically" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["replay", "tune"])
def test_a_model_counted_exactly_reports_the_method_it_counted_with(
    command: str, runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # gpt-4o is counted in o200k exactly (the registry); the report said the
    # config's "opencode" beside "count: o200k exact", naming a method not used.
    extra = _grid_args(command, tmp_path, ["swe-agent", "opencode"])
    code, out, err = invoke(monkeypatch, capsys, command, str(runs), "--context", "12000",
                            "--output-limit", "1000", "--model", "gpt-4o", *extra,
                            "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["count"] == "o200k exact" and result["method"] == "o200k-exact"
