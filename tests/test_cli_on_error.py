"""``--on-error raise|skip`` on the commands that read session files
(estimate, prune, filter, compact, batch), as ``ingest`` has it: a file or
line that does not parse stops the run (exit 1), or with ``skip`` is left
out, named on stderr, and the rest is read (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import formats
from ctxcompact.testing.synthetic import generate_table
from ctxcompact.transcript import Transcript


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two good session files (2 sessions each) and one that does not parse."""
    sessions = Transcript(generate_table(4, 30, seed=1)).to_sessions()
    runs = tmp_path / "runs"
    runs.mkdir()
    formats.write(sessions[:2], runs / "a.jsonl", "openai-chat")
    formats.write(sessions[2:], runs / "b.jsonl", "openai-chat")
    (runs / "bad.jsonl").write_text('{"messages": [\nnot json at all\n')
    return runs


COMMANDS = [
    ["estimate"],
    ["prune", "--output", "{tmp}/out.parquet"],
    ["filter", "--output", "{tmp}/out.parquet"],
    ["compact", "--output", "{tmp}/out.parquet", "--report", "{tmp}/report.parquet"],
    ["batch", "--report", "{tmp}/report.parquet"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_bad_session_file_stops_the_run_or_is_skipped(
    tmp_path: Path, folder: Path, command: list[str], monkeypatch: Any, capsys: Any
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    code, _, err = invoke(monkeypatch, capsys, *args, str(folder))
    assert code == 1 and "bad.jsonl" in err
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "report.parquet").exists()
    code, _, err = invoke(monkeypatch, capsys, *args, str(folder), "--on-error", "raise")
    assert code == 1 and "bad.jsonl" in err
    code, out, err = invoke(monkeypatch, capsys, *args, str(folder), "--on-error", "skip",
                            "--json")  # fmt: skip
    assert code == 0, err
    assert f"rejected: {folder / 'bad.jsonl'}" in err  # named on stderr, as ingest names it
    shown = json.loads(out)
    assert shown["sessions"] == 4  # the good files are all read
    if command[0] == "batch":
        assert shown["files"] == 2 and pq.read_table(tmp_path / "report.parquet").num_rows == 4
    code, _, err = invoke(monkeypatch, capsys, *args, str(folder), "--on-error", "maybe")
    assert code == 2 and "maybe" in err


@pytest.mark.parametrize("command", ["ingest", "estimate", "replay"])
def test_a_file_left_out_is_named_once(
    tmp_path: Path, folder: Path, command: str, monkeypatch: Any, capsys: Any
) -> None:
    """A whole file left out: ``rejected: PATH: reason``, its path not repeated
    by the reason (replay printed ``rejected: x.json: x.json: cannot tell ...``)."""
    unknown = folder / "unknown.json"
    unknown.write_text("{}")
    extra = {
        "ingest": ["-o", str(tmp_path / "rows.parquet")],
        "replay": ["--context", "64000", "--output-limit", "4000"],
    }.get(command, [])
    code, _, err = invoke(monkeypatch, capsys, command, str(folder), *extra, "--on-error", "skip")
    assert code == 0, err
    (line,) = [x for x in err.splitlines() if str(unknown) in x]
    assert line.startswith(f"rejected: {unknown}: ") and line.count(str(unknown)) == 1, line


def test_on_error_is_taken_with_parquet(
    tmp_path: Path, folder: Path, monkeypatch: Any, capsys: Any
) -> None:
    """A Parquet source is read whole: the option changes nothing there."""
    rows = tmp_path / "rows.parquet"
    pq.write_table(generate_table(3, 30, seed=2), rows)
    for skip in ([], ["--on-error", "skip"]):
        code, out, _ = invoke(monkeypatch, capsys, "estimate", str(rows), "--json", *skip)
        assert code == 0 and json.loads(out)["sessions"] == 3
