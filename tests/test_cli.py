"""The ctxcompact command: every subcommand, its JSON output and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ctxcompact.cli import main
from ctxcompact.synthetic import generate_table


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any]:
    monkeypatch.setattr(sys, "argv", ["ctxcompact", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr().out
    return code, (json.loads(out) if "--json" in args and code == 0 else out)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "t.parquet"
    pq.write_table(generate_table(12, 300, seed=4, mean_output_chars=5000), path)
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


def test_batch_and_human_output(data: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    code, stats = run(monkeypatch, capsys, "batch", str(data), str(tmp_path / "o.parquet"),
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
    assert run(monkeypatch, capsys, "batch", str(truncated), str(tmp_path / "x.parquet"))[0] == 1
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
