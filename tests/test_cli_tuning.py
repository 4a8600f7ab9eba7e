"""The replay / tune commands: what their output says about the results
(found by a new-user pass)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from cli_run import invoke


def run(sid: str, steps: int, chars: int, task: str = "fix the bug in src/app.py") -> cc.Session:
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user", "time": {"created": 0}},
         "parts": [{"id": "t0", "type": "text", "text": task}]},
    ]  # fmt: skip
    for i in range(steps):
        messages.append({
            "info": {"id": f"a{i:03d}", "role": "assistant", "parentID": "u0",
                     "finish": "tool-calls", "time": {"created": (i + 1) * 1000}},
            "parts": [{"id": f"p{i:03d}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"src/f{i}.py"},
                                 "output": "x" * chars}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": sid}, "messages": messages})


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
