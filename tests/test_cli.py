"""The ctxcompact command: every subcommand, its JSON output and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.batch.synthetic import generate_table


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any]:
    code, out, _ = invoke(monkeypatch, capsys, *args)
    return code, (json.loads(out) if "--json" in args and code == 0 else out)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "t.parquet"
    pq.write_table(generate_table(12, 300, seed=4, mean_output_chars=5000), path)
    return path


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 runs of 80 parts (10k-46k tokens each: a 40k window still compacts
    some of them, a 120k one none, so the grid's points differ). A replay
    walks every call of a run; on ``data``'s 300 parts (70k-180k tokens)
    test_tune took 87 s in CI (103 s CPU alone, 26 s on these) for assertions
    that read the sessions, points and outputs, not the runs' length."""
    path = tmp_path_factory.mktemp("cli") / "short.parquet"
    pq.write_table(generate_table(12, 80, seed=4, mean_output_chars=5000), path)
    return path


def test_estimate_prune_filter_compact(
    data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    code, est = run(monkeypatch, capsys, "estimate", str(data), "--json")
    assert code == 0 and est["sessions"] == 12 and est["tokens"] >= est["tokens_after_pivot"] > 0
    code, pr = run(
        monkeypatch, capsys, "prune", str(data), "--output", str(tmp_path / "m.parquet"), "--json"
    )
    assert code == 0 and pr["tokens_pruned"] > 0
    marked = pq.read_table(tmp_path / "m.parquet")
    assert marked["compacted_at"].null_count == marked.num_rows - pr["parts_pruned"]
    code, fl = run(monkeypatch, capsys, "filter", str(data), "--json")
    assert code == 0 and fl["rows_after"] < fl["rows_before"]
    code, cp = run(monkeypatch, capsys, "compact", str(data), "--context", "100000",
                   "--report", str(tmp_path / "r.parquet"), "--json")  # fmt: skip
    assert code == 0 and cp["tokens_after"] < cp["tokens_before"]
    assert pq.read_table(tmp_path / "r.parquet").num_rows == 12


def test_the_estimate_method_reaches_every_command(
    data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    import ctxcompact as cc

    table = pq.read_table(data)
    for method in ("o200k", "qwen-conservative"):
        code, est = run(monkeypatch, capsys, "estimate", str(data), "--method", method, "--json")
        want = cc.estimate_messages(table, cc.CompactionConfig(estimate_method=method)).total
        assert code == 0 and est["method"] == method and est["tokens"] == want
        code, pr = run(monkeypatch, capsys, "prune", str(data), "--method", method, "--json")
        assert code == 0
        assert (
            pr["tokens_counted"]
            == cc.prune(table, cc.CompactionConfig(estimate_method=method)).total
        )
        code, cp = run(monkeypatch, capsys, "compact", str(data), "--method", method, "--json")
        assert code == 0 and cp["tokens_before"] == want
        code, bt = run(monkeypatch, capsys, "batch", str(data), "--method", method,
                       "--report", str(tmp_path / f"{method}.parquet"), "--json")  # fmt: skip
        assert code == 0 and bt["sessions"] == 12
        report = pq.read_table(tmp_path / f"{method}.parquet")
        assert pa.compute.sum(report["tokens_before"]).as_py() == want
    code, out = run(monkeypatch, capsys, "estimate", str(data), "--method", "gpt2")
    assert code == 2 and not out


def test_batch_and_human_output(data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    code, stats = run(monkeypatch, capsys, "batch", str(data), "-o", str(tmp_path / "o.parquet"),
                      "--batch-rows", "300", "--json")  # fmt: skip
    assert code == 0 and stats["sessions"] == 12 and stats["batches"] > 1
    code, text = run(monkeypatch, capsys, "estimate", str(data))
    assert code == 0 and "sessions" in text and "tokens" in text


def test_convert_round_trip(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(chat))
    code, out = run(monkeypatch, capsys, "convert", str(src), str(tmp_path / "o.jsonl"),
                    "--to", "opencode", "--json")  # fmt: skip
    assert code == 0 and out["sessions"] == 1
    back = tmp_path / "back.json"
    code, _ = run(monkeypatch, capsys, "convert", str(tmp_path / "o.jsonl"), str(back),
                  "--to", "openai-chat")  # fmt: skip
    assert json.loads((tmp_path / "back.json").read_text())["messages"] == chat


def test_convert_reads_parquet_part_rows(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from ctxcompact.transcript import Transcript

    rows = tmp_path / "rows.parquet"
    pq.write_table(Transcript.from_sessions(Transcript(generate_table(5, 30, seed=2)).to_sessions())
                   .to_arrow(), rows)  # fmt: skip
    out = tmp_path / "s.jsonl"
    code, res = run(monkeypatch, capsys, "convert", str(rows), str(out), "--to", "opencode",
                    "--json")  # fmt: skip
    assert code == 0 and res == {"sessions": 5, "from": "parquet", "to": "opencode",
                                 "written": str(out), "lost": []}  # fmt: skip
    back = tmp_path / "back.parquet"
    code, _ = run(monkeypatch, capsys, "ingest", str(out), "-o", str(back), "--json")
    assert code == 0 and pq.read_table(back).equals(pq.read_table(rows))
    copy = tmp_path / "copy.parquet"
    code, res = run(monkeypatch, capsys, "convert", str(rows), str(copy), "--to", "parquet",
                    "--json")  # fmt: skip
    assert code == 0 and pq.read_table(copy).equals(pq.read_table(rows))
    (tmp_path / "bad.parquet").write_text("not parquet")
    code, _, err = run_err(monkeypatch, capsys, "convert", str(tmp_path / "bad.parquet"),
                           str(tmp_path / "x.jsonl"))  # fmt: skip
    assert code == 1 and "not a readable Parquet file" in err
    assert not (tmp_path / "x.jsonl").exists()


def test_ingest_to_parquet_with_rejects(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from ctxcompact import formats
    from ctxcompact.transcript import Transcript

    sessions = Transcript(generate_table(4, 30, seed=1)).to_sessions()
    src = tmp_path / "in.jsonl"
    formats.write(sessions, src, "openai-chat")
    with src.open("ab") as f:
        f.write(b"not json\n")
    out = tmp_path / "rows.parquet"
    code, _ = run(monkeypatch, capsys, "ingest", str(src), "-o", str(out))
    assert code == 1 and not out.exists()  # the bad line fails the run; nothing half-written
    rejects = tmp_path / "rejects.jsonl"
    code, res = run(monkeypatch, capsys, "ingest", str(src), "-o", str(out), "--on-error", "skip",
                    "--rejects", str(rejects), "--threads", "2", "--json")  # fmt: skip
    assert code == 0 and (res["format"], res["sessions"], res["rejected"]) == ("openai-chat", 4, 1)
    assert pq.read_table(out).num_rows == res["rows"] > 0
    assert json.loads(rejects.read_text())["line"] == 5
    code, est = run(monkeypatch, capsys, "estimate", str(out), "--json")
    assert code == 0 and est["sessions"] == 4
    assert run(monkeypatch, capsys, "ingest", str(src), "-o", str(out), "--on-error", "x")[0] == 2
    assert run(monkeypatch, capsys, "ingest", str(tmp_path / "no.jsonl"), "-o", str(out))[0] == 3


def test_bench(monkeypatch: Any, capsys: Any) -> None:
    code, out = run(monkeypatch, capsys, "bench", "--sessions", "5", "--parts", "50", "--json")
    assert code == 0 and out["parts"] > 0 and out["prune_speedup"].endswith("x")


def test_exit_codes(data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    assert run(monkeypatch, capsys, "estimate", str(tmp_path / "missing.parquet"))[0] == 3
    bad = tmp_path / "bad.json"
    bad.write_text("[")
    assert run(monkeypatch, capsys, "estimate", str(bad))[0] == 1
    cfg = tmp_path / "c.toml"
    cfg.write_text("prune_minimum = -5\n")
    assert run(monkeypatch, capsys, "prune", str(data), "--config", str(cfg))[0] == 4
    assert run(monkeypatch, capsys, "prune")[0] == 2
    truncated = tmp_path / "cut.parquet"
    truncated.write_bytes(data.read_bytes()[:1000])
    assert (
        run(monkeypatch, capsys, "batch", str(truncated), "-o", str(tmp_path / "x.parquet"))[0] == 1
    )
    assert not (tmp_path / "x.parquet").exists()


def test_the_installed_entry_point(data: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", "filter", str(data), "--json"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions"] == 12
    command = [sys.executable, "-m", "ctxcompact.cli", "estimate", "/nonexistent.json"]
    missing = subprocess.run(command, capture_output=True, text=True, check=False)
    assert missing.returncode == 3 and "no such file" in missing.stderr


def test_help_documents_the_exit_codes() -> None:
    from ctxcompact.cli import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "4 invalid configuration" in " ".join(result.output.split())


# --- issue 10 ---------------------------------------------------------------------------


#: The exit code, stdout and stderr.
run_err = invoke


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "hello"}]))  # fmt: skip
    return path


@pytest.mark.parametrize("args", [
    ("estimate", "{chat}", "--format", "bogus"),
    ("convert", "{chat}", "{tmp}/o.json", "--to", "bogus"),
    ("convert", "{chat}", "{tmp}/o.json", "--format", "bogus"),
    ("convert", "{chat}", "{tmp}/o.json", "--from", "bogus"),  # --format's old name
    ("ingest", "{chat}", "-o", "{tmp}/o.parquet", "--on-error", "maybe"),
    ("estimate", "{chat}", "--json=1"),  # a flag takes no value
    ("compact", "{chat}", "--output-limit", "8000"),  # needs --context
])  # fmt: skip
def test_usage_errors_exit_2(
    args: tuple[str, ...], chat_file: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    argv = [a.format(chat=chat_file, tmp=tmp_path) for a in args]
    code, _, err = run_err(monkeypatch, capsys, *argv)
    assert code == 2, err
    if "bogus" in args:
        assert "openai-chat" in err and "claude-code" in err  # the choices are listed
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "o.parquet").exists()


def test_missing_config_file_is_a_missing_input(
    chat_file: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    code, _, err = run_err(monkeypatch, capsys, "estimate", str(chat_file),
                           "--config", str(tmp_path / "missing.toml"))  # fmt: skip
    assert code == 3 and "missing.toml" in err and len(err.strip().splitlines()) == 1


def test_version_flag(monkeypatch: Any, capsys: Any) -> None:
    import ctxcompact as cc

    code, out, _ = run_err(monkeypatch, capsys, "--version")
    assert code == 0 and out.strip() == cc.__version__


def test_help_is_plain_and_lists_the_formats() -> None:
    from ctxcompact.cli import app
    from ctxcompact.formats import FORMATS
    from typer.testing import CliRunner

    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    listing = top.output.split("Commands:")[1].split("\n\n")[0].strip().splitlines()
    commands = [line.split()[0] for line in listing]
    assert {"estimate", "convert", "ingest", "config", "batch"} <= set(commands)
    assert not any(line.endswith("...") for line in listing)  # short help is not cut off
    for command in ["", *commands]:
        result = runner.invoke(app, [command, "--help"] if command else ["--help"])
        assert result.exit_code == 0, command
        assert "``" not in result.output and "<bool>" not in result.output, command
    text = " ".join(runner.invoke(app, ["convert", "--help"]).output.split())
    for fmt in FORMATS:
        assert fmt in text
    assert "5 output not writable" in " ".join(top.output.split())


UNWRITABLE = [
    ("prune", "{data}", "--output", "{out}"),
    ("filter", "{data}", "--output", "{out}"),
    ("compact", "{data}", "--output", "{out}"),
    ("compact", "{data}", "--report", "{out}"),
    ("batch", "{data}", "-o", "{out}"),
    ("batch", "{data}", "-o", "{tmp}/ok.parquet", "--report", "{out}"),
    ("convert", "{chat}", "{out}", "--to", "parquet"),
    ("ingest", "{jsonl}", "-o", "{out}"),
    ("ingest", "{jsonl}", "-o", "{tmp}/ok.parquet", "--on-error", "skip", "--rejects", "{out}"),
]


@pytest.mark.parametrize("target", ["missing folder", "directory"])
@pytest.mark.parametrize("args", UNWRITABLE, ids=lambda a: " ".join(a[:4]))
def test_an_unwritable_output_is_one_line_and_exit_5(
    args: tuple[str, ...], target: str, data: Path, chat_file: Path, tmp_path: Path,
    monkeypatch: Any, capsys: Any,
) -> None:  # fmt: skip
    from ctxcompact import formats

    jsonl = tmp_path / "in.jsonl"
    formats.write(formats.read(chat_file), jsonl, "openai-chat")
    out = tmp_path / "no-such-folder" / "o.parquet" if target == "missing folder" else tmp_path
    argv = [a.format(data=data, chat=chat_file, jsonl=jsonl, out=out, tmp=tmp_path)
            for a in args]  # fmt: skip
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_err(monkeypatch, capsys, *argv)
    assert code == 5, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(out) in err and ("does not exist" in err or "directory" in err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    src = tmp_path / "surrogate.json"
    src.write_text('[{"role": "user", "content": "bad \\ud800 text"}]')  # a lone surrogate
    out = tmp_path / "out.json"
    out.write_text("previous")
    code, _, err = run_err(monkeypatch, capsys, "convert", str(src), str(out))
    assert code == 1 and "surrogate" in err and str(src) in err
    assert len(err.strip().splitlines()) == 1
    assert out.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "surrogate.json"]


def test_context_without_a_usable_window_is_refused(
    data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    for command in (
        ("compact", str(data)),
        ("batch", str(data), "-o", str(tmp_path / "b.parquet")),
    ):
        code, _, err = run_err(monkeypatch, capsys, *command, "--context", "20000")
        assert code == 4 and "usable" in err and "--output-limit" in err, err
    assert not (tmp_path / "b.parquet").exists()
    # the library's overflow rule: 100,000 - min(output limit or 32,000, 32,000)
    code, out, _ = run_err(monkeypatch, capsys, "compact", str(data), "--context", "20000",
                           "--output-limit", "4000", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["usable_context"] == 16_000
    code, out, _ = run_err(monkeypatch, capsys, "batch", str(data), "-o",
                           str(tmp_path / "b.parquet"), "--context", "100000",
                           "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["usable_context"] == 68_000
    code, out, _ = run_err(monkeypatch, capsys, "compact", str(data), "--context", "100000")
    assert code == 0 and "usable context" in out and "68,000" in out


def test_format_hint_names_the_cli_option(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"foo": 1}')
    code, _, err = run_err(monkeypatch, capsys, "estimate", str(odd))
    assert code == 1 and "--format" in err and "openai-chat" in err and "format=" not in err


def test_prune_threshold_flags(data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    _, default = run(monkeypatch, capsys, "prune", str(data), "--json")
    code, eager = run(monkeypatch, capsys, "prune", str(data), "--prune-protect", "1000",
                      "--prune-minimum", "0", "--json")  # fmt: skip
    assert code == 0 and eager["tokens_pruned"] > default["tokens_pruned"]
    for command in (
        ("compact", str(data)),
        ("batch", str(data), "-o", str(tmp_path / "b.parquet")),
    ):
        code, res = run(monkeypatch, capsys, *command, "--prune-protect", "1000",
                        "--prune-minimum", "0", "--json")  # fmt: skip
        assert code == 0 and res["tokens_pruned"] == eager["tokens_pruned"], command
    code, _, _ = run_err(monkeypatch, capsys, "prune", str(data), "--prune-protect", "-1")
    assert code == 2


def test_config_show(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from ctxcompact.config import CompactionConfig

    path = tmp_path / "c.toml"
    path.write_text("[compaction]\nkeep_messages = 3\n")
    monkeypatch.setenv("CTXCOMPACT_PRUNE_MINIMUM", "5")
    code, out = run(monkeypatch, capsys, "config", "--show", "--config", str(path),
                    "--prune-protected-tools", "skill,todo", "--json")  # fmt: skip
    assert code == 0
    rows = out
    assert set(rows) == set(CompactionConfig.model_fields)
    assert (rows["keep_messages"]["value"], rows["keep_messages"]["source"]) == (3, f"file {path}")
    assert rows["prune_minimum"]["source"] == "environment CTXCOMPACT_PRUNE_MINIMUM"
    assert (rows["prune_protected_tools"]["value"], rows["prune_protected_tools"]["source"]) == (
        ["skill", "todo"], "argument")  # fmt: skip
    assert rows["fallback"]["source"] == "default"
    assert rows["prune_protect"]["environment"] == "CTXCOMPACT_PRUNE_PROTECT"
    code, text = run(monkeypatch, capsys, "config")
    assert code == 0 and "prune_protect" in text and "default" in text
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECT", "lots")
    code, _, err = run_err(monkeypatch, capsys, "config")
    assert code == 4 and "CTXCOMPACT_PRUNE_PROTECT" in err


def test_demo_accounts_for_every_token(monkeypatch: Any, capsys: Any) -> None:
    code, out = run(monkeypatch, capsys, "demo", "--sessions", "8", "--parts", "400", "--json")
    assert code == 0
    assert out["tokens_pruned"] > 0 and out["tokens_dropped_by_pivot"] > 0
    assert (out["tokens_before"] - out["tokens_pruned"] + out["tokens_placeholders"]
            - out["tokens_dropped_by_pivot"]) == out["tokens_after"]  # fmt: skip
    names = [s["step"] for s in out["steps"]]
    assert len(names) == len(set(names))
    monkeypatch.setenv("COLUMNS", "80")
    code, text = run(monkeypatch, capsys, "demo", "--sessions", "8", "--parts", "400")
    assert code == 0 and max(len(line) for line in text.splitlines()) <= 80
    assert "ctxcompact demo" in text  # the title on one line
    assert "pivot filter" in text


def test_bench_hint_does_not_point_at_the_repository(monkeypatch: Any, capsys: Any) -> None:
    code, text = run(monkeypatch, capsys, "bench", "--sessions", "3", "--parts", "40")
    assert code == 0 and "benches/" not in text and "--sessions" in text


def test_progress_on_a_terminal_only(data: Path) -> None:
    import os

    command = [sys.executable, "-m", "ctxcompact.cli", "estimate", str(data)]
    tty = {**os.environ, "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}
    shown = subprocess.run(command, capture_output=True, text=True, env=tty, check=False)
    assert shown.returncode == 0 and "estimating" in shown.stderr
    quiet = subprocess.run([*command, "--json"], capture_output=True, text=True, env=tty,
                           check=False)  # fmt: skip
    assert quiet.returncode == 0 and quiet.stderr == ""
    piped = subprocess.run(command, capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and piped.stderr == ""


def test_replay(data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    calls = tmp_path / "calls.parquet"
    code, out = run(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                    "--output-limit", "2000", "--policy", "swe-agent", "--policy", "opencode",
                    "--mask-first", "--model", "gpt-4o", "--out", str(calls), "--json")  # fmt: skip
    assert code == 0 and [p["name"] for p in out["policies"]] == [
        "swe-agent + mask_first",
        "opencode + mask_first",
    ]
    swe, opencode = out["policies"]
    keys = {"name", "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
            "cached_tokens", "cost", "baseline_cost", "compactions", "retention"}  # fmt: skip
    assert keys <= set(swe) and swe["sessions"] == 12
    table = pq.read_table(calls)
    assert table.num_rows == swe["calls"] + opencode["calls"] and swe["calls"] > 12
    mine = table.filter(pa.compute.equal(table["policy"], "swe-agent + mask_first"))
    assert sum(mine["prompt_tokens"].to_pylist()) == swe["prompt_tokens"]
    assert swe["prompt_tokens"] < swe["baseline_prompt_tokens"] and swe["cost"] > 0
    assert opencode["prompt_tokens"] != swe["prompt_tokens"]
    # the table: a column per policy
    code, text = run(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                     "--output-limit", "2000", "--policy", "swe-agent")  # fmt: skip
    assert code == 0 and "swe-agent" in text and "prompt tokens" in text
    code, _, err = run_err(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                           "--output-limit", "2000", "--model", "gpt-9")  # fmt: skip
    # the command line has no prices=: it says where a price goes there
    assert code == 4 and "no price for model 'gpt-9'" in err and "prices=" not in err
    assert '--config file ([compaction.prices."<model>"]' in err and "CTXCOMPACT_PRICES" in err
    code, _ = run(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                  "--output-limit", "2000", "--calls", "/proc/nope/c.parquet")  # fmt: skip
    assert code == 5
    code, _ = run(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                  "--policy", "no-such-preset")  # fmt: skip
    assert code == 4
    # a policy given twice: its rows were written twice under one label
    twice = tmp_path / "twice.parquet"
    code, _, err = run_err(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                           "--policy", "swe-agent", "--policy", "swe-agent",
                           "--out", str(twice))  # fmt: skip
    assert code == 2 and "'swe-agent' is given twice" in err and not twice.exists()


@pytest.mark.slow  # replays the runs under four policies: `pytest -m slow`
def test_tune(short_runs: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    data = short_runs
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\npreset = ["opencode", "swe-agent"]\nmask_first = [true]\n'
                    "context = [40000, 120000]\n")  # fmt: skip
    report, calls = tmp_path / "report.html", tmp_path / "calls.parquet"
    code, out = run(monkeypatch, capsys, "tune", str(data), "--grid", str(grid),
                    "--output-limit", "4000", "--model", "gpt-4o", "--workers", "2",
                    "--report", str(report), "--out", str(calls), "--json")  # fmt: skip
    assert code == 0 and out["points"] == 4 == len(out["policies"])
    assert all(p["sessions"] == 12 for p in out["policies"])
    front = [p["name"] for p in out["policies"] if p["front"]]
    assert front and out["front"] == front
    assert pq.read_table(calls).num_rows == sum(p["calls"] for p in out["policies"])
    page = report.read_text()
    assert page.count("<svg") == 5 and "preset=swe-agent,mask_first=True,context=40000" in page
    bad = tmp_path / "bad.toml"
    bad.write_text("keep_recnt = [1]")
    code, _, err = run_err(monkeypatch, capsys, "tune", str(data), "--grid", str(bad),
                           "--context", "50000", "--report", str(tmp_path / "r2.html"))  # fmt: skip
    assert code == 4 and "grid option 'keep_recnt' does not exist" in err
    assert not (tmp_path / "r2.html").exists()
    code, _, err = run_err(monkeypatch, capsys, "tune", str(data), "--grid", str(grid),
                           "--output-limit", "4000", "--report", "/proc/nope/r.html")  # fmt: skip
    assert code == 5 and "--report" in err
    code, _, err = run_err(monkeypatch, capsys, "tune", str(tmp_path / "none.parquet"),
                           "--grid", str(grid))  # fmt: skip
    assert code == 3
    # a grid that is a folder is an input that cannot be read (3), not a bad value (4)
    code, _, err = run_err(monkeypatch, capsys, "tune", str(data), "--grid", str(tmp_path),
                           "--context", "50000")  # fmt: skip
    assert code == 3 and "cannot read the grid file (--grid)" in err


def test_every_output_is_checked_before_any_is_written(
    data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Before, a report /proc refuses passed the permission check (root), so
    --out was written and the report then failed; --out and --report on one
    path wrote the Parquet and replaced it with the HTML."""
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\ncontext = [40000]\n')
    calls = tmp_path / "calls.parquet"
    args = ["tune", str(data), "--grid", str(grid), "--output-limit", "4000", "--workers", "1"]
    code, _, err = run_err(monkeypatch, capsys, *args, "--report", "/proc/r.html",
                           "--out", str(calls))  # fmt: skip
    assert code == 5 and "/proc/r.html: cannot write --report" in err
    assert not calls.exists()
    same = tmp_path / "same.x"
    code, _, err = run_err(monkeypatch, capsys, *args, "--report", str(same), "--out", str(same))
    assert code == 2 and "is also the --out output" in err and not same.exists()
    code, _, err = run_err(monkeypatch, capsys, "replay", str(data), "--context", "30000",
                           "--output-limit", "2000", "--out", "/proc/c.parquet")  # fmt: skip
    # named before the replay (root may pass the permission bits), not by Arrow after it
    assert code == 5 and "/proc/c.parquet: cannot write --out" in err and ".tmp-" not in err


def test_counted_ingest_and_a_report_only_batch(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    src = tmp_path / "runs"
    src.mkdir()
    turns = [{"role": "user", "content": "fix it"}]
    for i in range(6):
        observation = "<returncode>0</returncode>\n" + "é" * 3000
        turns += [{"role": "assistant", "content": f"```mswea_bash_command\ncat f{i}.py\n```"},
                  {"role": "user", "content": observation}]  # fmt: skip
    (src / "run.traj.json").write_text(json.dumps({"trajectory_format": "mini-swe-agent-1",
                                                   "messages": turns}))  # fmt: skip
    rows = tmp_path / "rows.parquet"
    code, _ = run(monkeypatch, capsys, "ingest", str(src), "-o", str(rows), "--json")
    table = pq.read_table(rows)
    assert code == 0 and "output_utf16" in table.column_names  # counted by default
    a, b = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    code, lean = run(monkeypatch, capsys, "batch", str(rows), "--report", a,
                     "--policy", "swe-agent", "--json")  # fmt: skip
    code2, full = run(monkeypatch, capsys, "batch", str(rows), "-o",
                      str(tmp_path / "parts.parquet"), "--report", b, "--policy", "swe-agent",
                      "--json")  # fmt: skip
    assert code == code2 == 0 and lean["parts_out"] is None and full["parts_out"] > 0
    assert lean["tokens_pruned"] == full["tokens_pruned"] > 0
    assert pq.read_table(a).equals(pq.read_table(b))
    assert lean["bytes_read"] < full["bytes_read"] / 5  # the outputs were not read
    # Without the counts, the same report is made from the text.
    plain = tmp_path / "plain.parquet"
    code, _ = run(monkeypatch, capsys, "ingest", str(src), "-o", str(plain), "--no-count-units",
                  "--json")  # fmt: skip
    assert code == 0 and "output_utf16" not in pq.read_schema(plain).names
    c = str(tmp_path / "c.parquet")
    code, read = run(monkeypatch, capsys, "batch", str(plain), "--report", c,
                     "--policy", "swe-agent", "--json")  # fmt: skip
    assert code == 0 and pq.read_table(c).equals(pq.read_table(a))
    assert read["bytes_read"] > lean["bytes_read"] * 5
    code, _, err = run_err(monkeypatch, capsys, "batch", str(rows))
    assert code == 2 and "nothing to write" in err


def test_a_run_given_twice_or_out_of_order_is_named(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from ctxcompact import formats
    from ctxcompact.transcript import Transcript

    sessions = Transcript(generate_table(3, 20, seed=7)).to_sessions()
    src = tmp_path / "runs.jsonl"
    formats.write(sessions, src, "opencode")
    rows = tmp_path / "rows.parquet"
    assert run(monkeypatch, capsys, "ingest", str(src), "-o", str(rows), "--json")[0] == 0
    # The same runs as session files and as Parquet: both inputs are named.
    code, _, err = run_err(monkeypatch, capsys, "replay", str(src), str(rows),
                           "--context", "64000", "--output-limit", "4000")  # fmt: skip
    sid = sessions[0].id
    assert code == 1 and "DuplicateSessionError" in err
    assert f"session id {sid!r} is in {rows}" in err and str(src) in err
    # Rows of a session split by another session: the error says where.
    table = pq.read_table(rows)
    ids = table["session_id"].to_pylist()
    first = ids.index(ids[-1])  # the last session's first row
    shuffled = pa.concat_tables([table.slice(0, 1), table.slice(first), table.slice(1, first - 1)])
    bad = tmp_path / "bad.parquet"
    pq.write_table(shuffled, bad)
    for args in (["estimate"], ["replay", "--context", "64000", "--output-limit", "4000"]):
        code, _, err = run_err(monkeypatch, capsys, args[0], str(bad), *args[1:])
        assert code == 1 and "NonContiguousError" in err and ids[0] in err, args
    # One Parquet file given twice: named as such, as a session file is (before:
    # "not contiguous ... sort the dataset by session first").
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\ncontext = [64000]\n')
    for args in (["replay", "--context", "64000"], ["tune", "--grid", str(grid)]):
        code, _, err = run_err(monkeypatch, capsys, args[0], str(rows), str(rows), *args[1:],
                               "--output-limit", "4000")  # fmt: skip
        assert code == 1 and f"{rows}: this file is given twice" in err, args
    # Two files holding the same runs: both named (was "rows of a session are not
    # contiguous", naming neither); a session continuing into the next file is read.
    copy = tmp_path / "copy.parquet"
    pq.write_table(table, copy)
    for args in (["replay", "--context", "64000"], ["tune", "--grid", str(grid)]):
        code, _, err = run_err(monkeypatch, capsys, args[0], str(rows), str(copy), *args[1:],
                               "--output-limit", "4000")  # fmt: skip
        assert code == 1 and "DuplicateSessionError" in err, args
        assert f"session id {sid!r} is in {rows} and in {copy}" in err, args
    head, tail = tmp_path / "head.parquet", tmp_path / "tail.parquet"
    pq.write_table(table.slice(0, 5), head)
    pq.write_table(table.slice(5), tail)
    code, _, err = run_err(monkeypatch, capsys, "replay", str(head), str(tail),
                           "--context", "64000", "--output-limit", "4000")  # fmt: skip
    assert code == 0, err


def test_replay_labels_what_ran_and_runs_a_policy_as_given(
    data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """--policy runs as given (the config's prune_* fields adjust its own
    policy only, and a note says so); without it, the label names the
    config's policy with those fields applied."""
    cfg = tmp_path / "tight.toml"
    cfg.write_text('[compaction]\npolicy = "swe-agent"\nprune_protect = 3000\n')
    args = ["replay", str(data), "--context", "30000", "--output-limit", "2000", "--json"]
    code, plain = run(monkeypatch, capsys, *args, "--policy", "swe-agent")
    assert code == 0
    code, out, err = run_err(monkeypatch, capsys, *args, "--policy", "swe-agent",
                             "--config", str(cfg))  # fmt: skip
    (given,) = json.loads(out)["policies"]
    assert code == 0 and given == plain["policies"][0] and given["name"] == "swe-agent"
    assert f"prune_protect (file {cfg}) adjust only the configuration's own policy" in err
    code, out, err = run_err(monkeypatch, capsys, *args, "--config", str(cfg))
    (own,) = json.loads(out)["policies"]
    assert code == 0 and own["name"] == "swe-agent+protect=3000" and "note" not in err


@pytest.mark.slow  # replays the real runs several times: `pytest -m slow`
def test_replay_says_why_every_policy_gave_the_same_prompts(
    data: Path, monkeypatch: Any, capsys: Any, tmp_path: Path
) -> None:
    args = ["replay", str(data), "--context", "10000000", "--output-limit", "4000",
            "--policy", "swe-agent", "--policy", "opencode", "--json"]  # fmt: skip
    # policies that act only as a summary runs (none fires in this window)
    summary_only = tmp_path / "swe-agent-in-summaries.toml"
    summary_only.write_text('preset = "swe-agent"\nacts = "summary"\n')
    plain = [*args[:6], "--policy", "aggressive", "--policy", str(summary_only), "--json"]
    code, _, err = run_err(monkeypatch, capsys, *plain)
    assert code == 0 and "no policy changed a prompt" in err
    code, _, err = run_err(monkeypatch, capsys, *args, "--mask-first")
    assert code == 0 and "no policy changed a prompt" not in err
    # pruning switched off: masking is off too, and the note says that instead
    for env, value in (("CTXCOMPACT_DISABLE_PRUNE", "1"), ("CTXCOMPACT_PRUNE", "0")):
        monkeypatch.setenv(env, value)
        code, _, err = run_err(monkeypatch, capsys, *args, "--mask-first")
        assert code == 0 and f"pruning is disabled (prune = false, from environment {env})" in err
        assert "masks at every step" not in err
        monkeypatch.delenv(env)


def test_ingest_counts_a_family_for_prune_with_that_method(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from ctxcompact import formats
    from ctxcompact.transcript import Transcript

    src = tmp_path / "runs.jsonl"
    formats.write(Transcript(generate_table(4, 40, seed=3)).to_sessions(), src, "opencode")
    rows, plain = tmp_path / "rows.parquet", tmp_path / "plain.parquet"
    code, _ = run(monkeypatch, capsys, "ingest", str(src), "-o", str(rows), "--count-method",
                  "o200k", "--count-method", "tekken-conservative", "--json")  # fmt: skip
    assert code == 0
    schema = pq.read_schema(rows)
    assert {"output_units_o200k", "output_units_tekken"} <= set(schema.names)
    assert schema.field("output_units_o200k").metadata[b"ctxcompact.units"].startswith(b"o200k:")
    assert run(monkeypatch, capsys, "ingest", str(src), "-o", str(plain), "--no-count-units",
               "--json")[0] == 0  # fmt: skip
    for method in ("o200k", "tekken-conservative"):
        got = [run(monkeypatch, capsys, "prune", str(p), "--method", method, "--policy",
                   "aggressive", "--json")[1] for p in (rows, plain)]  # fmt: skip
        assert got[0] == got[1] and got[0]["tokens_pruned"] > 0
    # an unknown value is a usage error (2), as for --method; it was 4, its message
    # listed opencode and ceil-bytes, then ceil-bytes was refused and opencode did nothing
    for bad in ("ceil-bytes", "gpt9", "opencode"):
        code, _, err = run_err(monkeypatch, capsys, "ingest", str(src), "-o",
                               str(tmp_path / "x.parquet"), "--count-method", bad)  # fmt: skip
        assert code == 2 and "is not a tokenizer family" in err, err
        assert "o200k, cl100k" in err and not (tmp_path / "x.parquet").exists()


def test_a_folder_without_sessions_says_so(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """Before, replay said "missing column 'session_id'" (the folder read as an
    empty Parquet dataset) and tune "no .parquet files in this directory"."""
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\ncontext = [40000]\n')
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    other.mkdir()
    (other / "LICENSE").write_text("MIT")
    for folder in (empty, other):
        for args in (["replay", "--context", "40000", "--output-limit", "4000"],
                     ["tune", "--grid", str(grid), "--output-limit", "4000"],
                     ["estimate"]):  # fmt: skip
            code, _, err = run_err(monkeypatch, capsys, args[0], str(folder), *args[1:])
            assert code == 1 and f"{folder}: no sessions in this folder" in err, (folder, args)


def test_replay_and_tune_skip_bad_lines_and_tune_takes_the_method(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """replay and tune had no --on-error (the README's claude-code row could
    not be made on the command line) and tune no --method."""
    import ctxcompact as cc
    from ctxcompact import formats
    from ctxcompact.transcript import Transcript
    from ctxcompact.tuning import tune

    sessions = Transcript(generate_table(3, 40, seed=5, mean_output_chars=3000)).to_sessions()
    runs = tmp_path / "runs.jsonl"
    formats.write(sessions, runs, "openai-chat")
    bad = len(runs.read_text().splitlines()) + 1
    with runs.open("a") as f:
        f.write("42\n")
    replay = ["replay", str(runs), "--context", "64000", "--output-limit", "4000", "--json"]
    code, _, err = run_err(monkeypatch, capsys, *replay)
    assert code == 1 and f"runs.jsonl:{bad}" in err
    code, out, err = run_err(monkeypatch, capsys, *replay, "--on-error", "skip")
    assert code == 0 and json.loads(out)["policies"][0]["sessions"] == 3
    assert f"rejected: {runs}:{bad}: " in err
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["swe-agent"]\nmask_first = [true]\ncontext = [20000]\n')
    args = ["tune", str(runs), "--grid", str(grid), "--output-limit", "4000", "--workers", "1",
            "--on-error", "skip", "--json"]  # fmt: skip
    read = cc.read_sessions(runs, on_error="skip")
    tokens = set()
    for method in ("opencode", "o200k"):
        code, out, err = run_err(monkeypatch, capsys, *args, "--method", method)
        want = tune(read.transcript, grid, limits={"context": 0, "output": 4000}, workers=1,
                    config=cc.CompactionConfig(estimate_method=method))  # fmt: skip
        (point,) = json.loads(out)["policies"]
        assert code == 0 and point["prompt_tokens"] == want.points["prompt_tokens"][0].as_py()
        assert f"rejected: {runs}:{bad}: " in err
        tokens.add(point["prompt_tokens"])
    assert len(tokens) == 2  # the method is used
    code, _, _ = run_err(monkeypatch, capsys, *args, "--on-error", "ignore")
    assert code == 2
