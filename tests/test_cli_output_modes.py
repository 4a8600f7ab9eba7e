"""An output the command replaces keeps its permission bits (a 0600 export
stays private), and a read-only one (no write permission bit: refused even
for root) is exit 5 naming the file and the option, left as it was with
every other output of the run."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.transcript import Transcript


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    source = tmp_path / "in" / "runs.jsonl"
    source.parent.mkdir()
    formats.write(Transcript(generate_table(2, 30, seed=5)).to_sessions(), source, "openai-chat")
    return source


#: (arguments, {option: output name}): every output a command writes.
COMMANDS = [
    (["ingest", "{in}", "-o", "{out}/rows.parquet"], {"--output": "rows.parquet"}),
    (["convert", "{in}", "{out}/runs.jsonl", "--to", "anthropic"], {"OUTPUT": "runs.jsonl"}),
    (["prune", "{in}", "--output", "{out}/pruned.parquet"], {"--output": "pruned.parquet"}),
    (
        ["compact", "{in}", "--output", "{out}/parts.parquet", "--report", "{out}/rep.parquet"],
        {"--output": "parts.parquet", "--report": "rep.parquet"},
    ),
    (
        [
            "ingest",
            "{in}",
            "-o",
            "{out}/rows.parquet",
            "--on-error",
            "skip",
            "--rejects",
            "{out}/rejects.jsonl",
        ],
        {"--output": "rows.parquet", "--rejects": "rejects.jsonl"},
    ),
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def args(command: list[str], source: Path, out: Path) -> list[str]:
    return [a.replace("{in}", str(source)).replace("{out}", str(out)) for a in command]


@pytest.mark.parametrize(("command", "outputs"), COMMANDS, ids=lambda c: "-".join(c)[:40])
def test_a_replaced_output_keeps_its_mode(
    tmp_path: Path, sessions: Path, command: list[str], outputs: dict[str, str],
    monkeypatch: Any, capsys: Any,
) -> None:  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    wanted = {}
    for bits, name in zip((0o600, 0o640), outputs.values(), strict=False):
        (out / name).write_text("old")
        (out / name).chmod(bits)
        wanted[name] = bits
    code, _, err = invoke(monkeypatch, capsys, *args(command, sessions, out))
    assert code == 0, err
    for name, bits in wanted.items():
        assert (out / name).read_text(errors="replace") != "old"
        assert mode(out / name) == bits, name


@pytest.mark.parametrize(("command", "outputs"), COMMANDS, ids=lambda c: "-".join(c)[:40])
def test_a_read_only_output_is_refused_with_exit_5(
    tmp_path: Path, sessions: Path, command: list[str], outputs: dict[str, str],
    monkeypatch: Any, capsys: Any,
) -> None:  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    for option, name in outputs.items():  # each output read-only in turn; the others writable
        for other in outputs.values():
            (out / other).unlink(missing_ok=True)
            (out / other).write_text("old")
        (out / name).chmod(0o444)
        code, _, err = invoke(monkeypatch, capsys, *args(command, sessions, out))
        assert code == 5, err
        assert str(out / name) in err and option in err and "read-only" in err, err
        assert all((out / other).read_text() == "old" for other in outputs.values())
        assert mode(out / name) == 0o444
        assert sorted(p.name for p in out.iterdir()) == sorted(outputs.values())  # no temporary


def test_a_read_only_output_found_only_at_the_rename_is_refused(
    tmp_path: Path, sessions: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Made read-only while the run read its input (after the checks before
    any work): the rename refuses it and puts back neither output."""
    import ctxcompact.cli.compaction as cli  # where compact looks the check up

    out = tmp_path / "out"
    out.mkdir()
    parts, report = out / "parts.parquet", out / "rep.parquet"
    for path in (parts, report):
        path.write_text("old")
    check = cli._check_outputs

    def check_then_lock(*a: Any, **k: Any) -> None:
        check(*a, **k)
        report.chmod(0o444)

    monkeypatch.setattr(cli, "_check_outputs", check_then_lock)
    command = ["compact", str(sessions), "--output", str(parts), "--report", str(report)]
    code, _, err = invoke(monkeypatch, capsys, *command)
    assert code == 5 and str(report) in err and "--report" in err, err
    assert parts.read_text() == "old" and report.read_text() == "old"
    monkeypatch.setattr(cli, "_check_outputs", check)
    report.chmod(0o600)
    assert invoke(monkeypatch, capsys, *command)[0] == 0
    assert pq.read_table(parts).num_rows > 0 and mode(report) == 0o600
