"""The price table on the command line (issue 37): replay and tune name the
row that priced the calls, an unknown model names the nearest rows (exit 4,
a configuration error), a bad price sheet is named by file and key, tune's
points get short labels with a legend, and estimate has per-session rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import read_run
from cli_run import invoke


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ctxcompact import formats

    path = tmp_path_factory.mktemp("prices") / "runs.jsonl"
    formats.write([read_run(f"s{n}", 5 + 2 * n, 3_000) for n in range(3)], path, "opencode")
    return path


REPLAY = ("replay", "--context", "30000", "--output-limit", "2000")


def test_replay_names_the_row_that_priced_it(runs: Path, monkeypatch: Any, capsys: Any) -> None:
    code, out, _ = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--model",
                          "gpt-4o-2024-05-13", "--json")  # fmt: skip
    row = json.loads(out)["price_row"]
    assert code == 0 and row["row"] == "gpt-4o-2024-05-13"
    assert (row["input"], row["cached_input"], row["output"]) == (5.0, 5.0, 15.0)
    assert row["source"].startswith("https://") and row["read"]
    code, text, _ = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--model",
                           "claude-sonnet-4-20250514")  # fmt: skip
    assert code == 0 and "priced by: row 'claude-sonnet-4' ($3 input, $0.3 cached" in text
    assert "source https://platform.claude.com/" in text and "read 2026-11-29" in text
    code, text, _ = invoke(monkeypatch, capsys, *REPLAY, str(runs))
    assert code == 0 and "priced by: - (no --model: not priced)" in text


@pytest.mark.parametrize(
    ("model", "nearest"),
    [
        ("claude-opus-4-7", "nearest rows: claude-opus-4-6, claude-opus-4-5, claude-opus-4-1"),
        ("gpt-4o-2024-11-20", "nearest rows: gpt-4o, "),
    ],
)
def test_an_unknown_model_is_a_configuration_error_naming_the_nearest_rows(
    runs: Path, monkeypatch: Any, capsys: Any, model: str, nearest: str
) -> None:
    code, out, err = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--model", model)
    assert code == 4 and out == ""
    assert f"no price for model {model!r}" in err and nearest in err
    # the command line has no prices=: it says where a price goes there
    assert '--config file ([compaction.prices."<model>"]' in err and "prices=" not in err


def test_your_own_price_sheet(runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    def cost(sheet_text: str) -> tuple[float, dict[str, Any]]:
        sheet = tmp_path / "prices.toml"
        sheet.write_text('[compaction.prices."house-model"]\n' + sheet_text)
        code, out, _ = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--config", str(sheet),
                              "--model", "house-model", "--json")  # fmt: skip
        assert code == 0
        result = json.loads(out)
        assert str(sheet) in result["price_row"]["source"]
        return result["policies"][0]["cost"], result["price_row"]

    plain, row = cost("input = 1.0\noutput = 4.0\n")
    assert row["row"] == "house-model" and row["cached_input"] == row["cache_write"] == 1.0
    # no cached_input: no cache discount (as with every cached read at the input price)
    assert plain == pytest.approx(cost("input = 1.0\noutput = 4.0\ncached_input = 1.0\n")[0])
    assert plain > cost("input = 1.0\noutput = 4.0\ncached_input = 0.1\n")[0]


@pytest.mark.parametrize(
    ("sheet", "says"),
    [
        ('[compaction.prices."house"]\ninput = 1.0\n', "price of 'house' has no 'output'"),
        ('[compaction.prices."house"]\ninput = "cheap"\noutput = 2\n', "prices"),
        ('[compaction.prices."house"]\ninput = 1\noutput = 2\ncahced_input = 0.1\n',
         "unknown field 'cahced_input'"),
        ('[compaction.prices."house"]\ninput = 1\noutput = -2\n', "price of 'house' is negative"),
        ('[compaction]\nprices = "cheap"\n', "prices"),
    ],
)  # fmt: skip
def test_a_malformed_price_sheet_is_named_by_file_and_key(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any, sheet: str, says: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(sheet)
    code, out, err = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--config", str(path),
                            "--model", "house")  # fmt: skip
    assert code == 4 and out == "" and str(path) in err and says in err


def test_a_malformed_price_variable_is_named(runs: Path, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"house": {"input": 1}}')
    code, _, err = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--model", "house")
    assert code == 4 and "CTXCOMPACT_PRICES" in err and "price of 'house' has no 'output'" in err


def test_tune_labels_its_points_with_a_legend(
    runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """The table's headers were the points' names, cut to the column width
    (``preset=swe-agent,mask_first=True,contex...``): 32000 and 128000 read
    the same."""
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\nmask_first = [true]\ncontext = [32000, 128000]\n')
    args = ("tune", str(runs), "--grid", str(grid), "--output-limit", "2000", "--workers", "1",
            "--model", "gpt-4o-2024-05-13")  # fmt: skip
    code, text, _ = invoke(monkeypatch, capsys, *args)
    assert code == 0
    header = next(line for line in text.splitlines() if "measure" in line)
    assert "p1" in header and "p2" in header and "preset=" not in header
    assert "  p1: preset=swe-agent,mask_first=True,context=32000" in text.splitlines()
    assert "  p2: preset=swe-agent,mask_first=True,context=128000" in text.splitlines()
    assert "priced by: row 'gpt-4o-2024-05-13'" in text
    front = next(line for line in text.splitlines() if line.startswith("front:"))
    assert "preset=" not in front and "p" in front
    report = tmp_path / "report.html"
    code, out, _ = invoke(monkeypatch, capsys, *args, "--json", "--report", str(report))
    result = json.loads(out)
    assert code == 0 and [p["label"] for p in result["policies"]] == ["p1", "p2"]
    assert result["policies"][1]["name"] == "preset=swe-agent,mask_first=True,context=128000"
    assert result["price_row"]["row"] == "gpt-4o-2024-05-13"
    assert "priced by the price table's row &#x27;gpt-4o-2024-05-13&#x27; ($5 input" in (
        report.read_text())  # fmt: skip


def test_estimate_per_session(runs: Path, monkeypatch: Any, capsys: Any) -> None:
    code, out, _ = invoke(monkeypatch, capsys, "estimate", str(runs), "--json")
    totals = json.loads(out)
    assert code == 0 and "per_session" not in totals
    code, out, _ = invoke(monkeypatch, capsys, "estimate", str(runs), "--per-session", "--json")
    result = json.loads(out)
    rows = result["per_session"]
    assert code == 0 and [r["session_id"] for r in rows] == ["s0", "s1", "s2"]
    for key in ("parts", "messages", "tokens", "tokens_after_pivot"):
        assert sum(r[key] for r in rows) == result[key] == totals[key], key
    assert rows[0]["tokens"] < rows[2]["tokens"]  # s2 has more steps
    code, text, _ = invoke(monkeypatch, capsys, "estimate", str(runs), "--per-session")
    assert code == 0 and "per session" in text
    assert all(any(line.startswith(f"│ s{n} ") for line in text.splitlines()) for n in range(3))


def test_price_sheets_on_the_command_line(runs: Path, monkeypatch: Any, capsys: Any) -> None:
    """Issue 39, part 6: --price repeated prices one replay under each sheet
    (a cost column each, ``costs`` in --json); the first is the ``cost``."""
    # one count for every sheet (else each replay counts in its first model's family)
    args = (*REPLAY, str(runs), "--mask-first", "--policy", "swe-agent", "--method", "opencode")
    code, out, _ = invoke(monkeypatch, capsys, *args, "--price", "gpt-4o", "--price",
                          "claude-sonnet-4", "--json")  # fmt: skip
    both = json.loads(out)
    policy = both["policies"][0]
    assert code == 0 and both["models"] == ["gpt-4o", "claude-sonnet-4"]
    assert list(policy["costs"]) == ["gpt-4o", "claude-sonnet-4"] and both["cache"] == "5m"
    assert policy["cost"] == policy["costs"]["gpt-4o"]["cost"]
    assert policy["cost claude-sonnet-4"] == policy["costs"]["claude-sonnet-4"]["cost"]
    assert both["price_rows"]["claude-sonnet-4"]["cache_rule"]["provider"] == "anthropic"
    code, out, _ = invoke(monkeypatch, capsys, *args, "--model", "claude-sonnet-4", "--json")
    alone = json.loads(out)["policies"][0]
    assert alone["costs"]["claude-sonnet-4"] == policy["costs"]["claude-sonnet-4"]
    code, text, _ = invoke(monkeypatch, capsys, *args, "--price", "gpt-4o", "--price",
                           "claude-sonnet-4")  # fmt: skip
    assert code == 0 and "cost claude-sonnet-4" in text
    assert "claude-sonnet-4 priced by: row 'claude-sonnet-4'" in text
    # --cache off: every prompt token at the input price, cached or not
    code, out, _ = invoke(monkeypatch, capsys, *args, "--price", "gpt-4o", "--cache", "off",
                          "--json")  # fmt: skip
    off = json.loads(out)["policies"][0]
    assert off["costs"]["gpt-4o"]["cached_tokens"] == 0 < off["cached_tokens"]
    assert off["cost"] > policy["cost"] and off["costs"]["gpt-4o"]["cache"] == "off"
    assert off["costs"]["gpt-4o"]["input_tokens"] == off["prompt_tokens"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--price", "gpt-4o", "--price", "claude-opus-4-7"),
         "--price/--model claude-opus-4-7: no price for model 'claude-opus-4-7'"),
        (("--price", "gpt-4o", "--cache", "1h"), "--price/--model gpt-4o: cache='1h' is "
                                                 "Anthropic's 1-hour cache"),
    ],
)  # fmt: skip
def test_a_sheet_with_no_price_row_is_named_by_its_option(
    runs: Path, monkeypatch: Any, capsys: Any, args: tuple[str, ...], says: str
) -> None:
    code, out, err = invoke(monkeypatch, capsys, *REPLAY, str(runs), *args)
    assert code == 4 and out == "" and says in err
    code, out, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(runs), *args)
    assert code == 4 and out == "" and says in err


def test_cache_takes_5m_1h_or_off(runs: Path, monkeypatch: Any, capsys: Any) -> None:
    code, _, err = invoke(monkeypatch, capsys, *REPLAY, str(runs), "--price", "gpt-4o",
                          "--cache", "2h")  # fmt: skip
    assert code == 2 and "'2h' is not one of: 5m, 1h, off" in err


def test_replay_shows_the_usage_the_runs_recorded(
    runs: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Issue 39, part 1: the recorded usage beside the baseline, null where
    the runs recorded none (the built runs here: OpenCode messages without
    tokens), and the gap."""
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
    traj = next((data / "swe-agent").rglob("pydicom__pydicom-1458.traj"))
    stats = json.loads(traj.read_bytes())["info"]["model_stats"]
    code, out, _ = invoke(monkeypatch, capsys, *REPLAY[:2], "200000", *REPLAY[3:], str(traj),
                          "--json")  # fmt: skip
    policy = json.loads(out)["policies"][0]
    assert code == 0 and policy["recorded_prompt_tokens"] == stats["tokens_sent"]
    assert policy["recorded_calls"] == stats["api_calls"] and policy["recorded_sessions"] == 1
    assert policy["prompt_gap"] == policy["baseline_prompt_tokens"] - stats["tokens_sent"]
    assert policy["recorded_cached_tokens"] is None and policy["baseline_written_tokens"] > 0
    code, text, _ = invoke(monkeypatch, capsys, *REPLAY, str(runs))
    assert code == 0 and "recorded prompt tokens" in text
    line = next(x for x in text.splitlines() if "recorded prompt tokens" in x)
    assert line.rstrip(" │").endswith("-")  # no record: shown as none, not 0
