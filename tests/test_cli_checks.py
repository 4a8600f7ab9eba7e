"""Refusals and reports of the command found by a new-user pass: a folder
mixing Parquet and session files, --rejects without --on-error skip, a named
pipe as input, a .parquet OUTPUT without --to parquet, batch's batch count,
config --show with a policy, and paths inside a --config file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.batch.synthetic import generate_table

CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A folder of a Parquet file and a session file."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    pq.write_table(generate_table(3, 20, seed=2), folder / "a.parquet")
    (folder / "b.jsonl").write_text(json.dumps(CHAT) + "\n")
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "{d}"),
        ("prune", "{d}"),
        ("compact", "{d}"),
        ("batch", "{d}", "--report", "{t}/r.parquet"),
        ("convert", "{d}", "{t}/o.parquet", "--to", "parquet"),
        ("convert", "{d}", "{t}/o.jsonl"),
        ("replay", "{d}", "--context", "100000"),
    ],
    ids=["estimate", "prune", "compact", "batch", "convert-parquet", "convert-jsonl", "replay"],
)
def test_a_folder_of_parquet_and_session_files_is_refused(
    args: tuple[str, ...], mixed: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Read as session files, the Parquet sessions were left out with one
    # "skipped:" line, and the exit code was 0.
    argv = [a.format(d=mixed, t=tmp_path) for a in args]
    code, out, err = invoke(monkeypatch, capsys, *argv)
    text = " ".join(err.split())
    assert code == 2, err
    assert str(mixed) in text and "a.parquet" in text and "b.jsonl" in text
    assert "both Parquet files" in text and not out
    assert not list(tmp_path.glob("*.parquet")) and not (tmp_path / "o.jsonl").exists()


def test_a_folder_of_one_kind_is_read_as_before(mixed: Path, monkeypatch: Any, capsys: Any) -> None:
    (mixed / "b.jsonl").unlink()
    (mixed / "_b.jsonl.parquet").write_bytes(b"")  # not read: a name starting with '_'
    code, out, _ = invoke(monkeypatch, capsys, "estimate", str(mixed), "--json")
    assert code == 0 and json.loads(out)["sessions"] == 3


def test_rejects_without_on_error_skip_is_a_usage_error(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(CHAT) + "\n")
    out, rejects = tmp_path / "o.parquet", tmp_path / "r.jsonl"
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(src), "-o", str(out),
                          "--rejects", str(rejects))  # fmt: skip
    assert code == 2 and "--rejects" in err and "--on-error skip" in err
    assert not out.exists() and not rejects.exists()
    code, _, _ = invoke(monkeypatch, capsys, "ingest", str(src), "-o", str(out),
                        "--rejects", str(rejects), "--on-error", "skip")  # fmt: skip
    assert code == 0 and out.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
@pytest.mark.parametrize("command", ["estimate", "batch", "convert", "ingest"])
def test_a_named_pipe_input_is_exit_3(
    command: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    out = str(tmp_path / "o.parquet")
    argv = {"estimate": [str(fifo)], "batch": [str(fifo), "-o", out],
            "ingest": [str(fifo), "-o", out],
            "convert": [str(fifo), out, "--to", "parquet"]}[command]  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, command, *argv)
    assert code == 3, err  # docs/config.md: an input that cannot be read
    assert str(fifo) in err and "named pipe" in err and len(err.strip().splitlines()) == 1


def test_convert_to_a_parquet_file_needs_to_parquet(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(CHAT))
    out = tmp_path / "out.parquet"
    code, _, err = invoke(monkeypatch, capsys, "convert", str(src), str(out))
    assert code == 2 and "--to parquet" in " ".join(err.split()) and not out.exists()
    code, _, _ = invoke(monkeypatch, capsys, "convert", str(src), str(out), "--to", "parquet")
    assert code == 0 and pq.read_table(out).num_rows == 2


def test_batch_counts_the_batches_it_reads(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    data = tmp_path / "t.parquet"
    table = generate_table(5, 30, seed=3)
    pq.write_table(table, data)
    report = str(tmp_path / "r.parquet")
    code, out, _ = invoke(monkeypatch, capsys, "batch", str(data), "--report", report, "--json")
    assert code == 0 and json.loads(out)["batches"] == 1  # was 2: the last carry counted
    rows = -(-table.num_rows // 3)  # three batches
    code, out, _ = invoke(monkeypatch, capsys, "batch", str(data), "--report", report, "--json",
                          "--batch-rows", str(rows))  # fmt: skip
    assert code == 0 and json.loads(out)["batches"] == 3


def _show(monkeypatch: Any, capsys: Any, *args: str) -> dict[str, Any]:
    code, out, err = invoke(monkeypatch, capsys, "config", "--show", "--json", *args)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def test_config_show_prints_the_prune_values_a_policy_gives(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    shown = _show(monkeypatch, capsys, "--policy", "swe-agent")
    # the values the run uses (CompactionConfig.prune_policy()), not the defaults 40000 / 20000
    assert shown["prune_protect"] == {**shown["prune_protect"], "value": 0,
                                      "source": "policy (argument)"}  # fmt: skip
    assert shown["prune_minimum"]["value"] == 0
    assert shown["prune_protected_tools"]["value"] == []
    # a field set on its own still wins over the policy, and says so
    shown = _show(monkeypatch, capsys, "--policy", "swe-agent", "--prune-minimum", "7")
    assert shown["prune_minimum"]["value"] == 7 and shown["prune_minimum"]["source"] == "argument"
    # without a policy: the defaults, as before
    shown = _show(monkeypatch, capsys)
    assert shown["prune_protect"]["value"] == 40000
    assert shown["prune_protect"]["source"] == "default"


def test_a_policy_path_in_a_config_file_is_read_from_its_folder(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    (tmp_path / "conf" / "pol").mkdir(parents=True)
    (tmp_path / "conf" / "pol" / "p.toml").write_text("protect = 123\nminimum = 0\n")
    cfg = tmp_path / "conf" / "ctxcompact.toml"
    cfg.write_text('[compaction]\npolicy = "pol/p.toml"\n')
    elsewhere = tmp_path / "cwd"
    (elsewhere / "pol").mkdir(parents=True)  # a file of the same name here is not read
    (elsewhere / "pol" / "p.toml").write_text("protect = 999\n")
    monkeypatch.chdir(elsewhere)
    shown = _show(monkeypatch, capsys, "--config", str(cfg))
    assert shown["prune_protect"]["value"] == 123
    assert shown["prune_protect"]["source"] == f"policy (file {cfg})"


def test_a_too_large_policy_integer_names_the_file(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    data = tmp_path / "t.parquet"
    pq.write_table(generate_table(2, 10, seed=1), data)
    huge = tmp_path / "huge.toml"
    huge.write_text("protect = 99999999999999999999\n")
    code, _, err = invoke(monkeypatch, capsys, "prune", str(data), "--policy", str(huge))
    assert code == 4 and str(huge) in err and "protect" in err


def test_pruning_switched_off_is_said_on_stderr(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Pass 36: with CTXCOMPACT_DISABLE_PRUNE=1, `prune` printed 0 pruned and no word why.
    rows = tmp_path / "rows.parquet"
    pq.write_table(generate_table(3, 60, seed=4), rows)
    code, _, err = invoke(monkeypatch, capsys, "prune", str(rows), "--json")
    assert code == 0 and "switched off" not in err
    monkeypatch.setenv("CTXCOMPACT_DISABLE_PRUNE", "1")
    for args in (["prune", str(rows)], ["compact", str(rows)],
                 ["batch", str(rows), "--report", str(tmp_path / "r.parquet")]):  # fmt: skip
        code, out, err = invoke(monkeypatch, capsys, *args, "--json")
        assert code == 0 and "note: pruning is switched off" in err, args
        assert "CTXCOMPACT_DISABLE_PRUNE" in err and json.loads(out)["tokens_pruned"] == 0


def test_estimate_of_no_session_is_nothing_to_estimate_for_a_file_and_a_folder(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Pass 36: an empty folder was exit 1, an empty file exit 0 with 0 sessions.
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "empties").mkdir()
    (tmp_path / "empties" / "a.jsonl").write_text("")
    (tmp_path / "empty.jsonl").write_text("")
    for name in ("emptydir", "empties", "empty.jsonl"):
        code, out, err = invoke(monkeypatch, capsys, "estimate", str(tmp_path / name), "--json")
        assert code == 1 and out == "" and "nothing to estimate" in err, (name, err)
        assert f"{tmp_path / name}: no sessions" in err
