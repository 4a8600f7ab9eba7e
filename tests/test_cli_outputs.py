"""The command never loses or replaces data it was not asked to: outputs that
are inputs, links, devices, files given twice, documents no reader takes back,
and the exit codes of those refusals. Run on the shared real transcripts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_run import invoke
from ctxcompact import formats

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
MINI = DATA / "mini-swe-agent"
RESOLVER = DATA / "openhands" / "tests_unit_resolver_mock_output_output.jsonl"
TAU = DATA / "tau-bench" / "gpt-4o-airline.json"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    code, out, err = invoke(monkeypatch, capsys, *args)
    return code, out + err


def test_an_output_that_is_an_input_is_refused(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    same = tmp_path / "same.jsonl"
    same.write_bytes(RESOLVER.read_bytes())
    code, out = run(monkeypatch, capsys, "ingest", str(same), "-o", str(same))
    assert code == 2 and "also an input" in out
    assert same.read_bytes() == RESOLVER.read_bytes()
    # A session file inside an input folder counts too.
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.traj.json").write_bytes((MINI / "local.traj.json").read_bytes())
    code, out = run(monkeypatch, capsys, "convert", str(folder), str(folder / "a.traj.json"))
    assert code == 2 and "also an input" in out
    # Parquet in a folder read as session files would mix the folder: refused
    # (test_no_command_mixes_a_folder); a name the Parquet reader skips is not.
    for _ in range(2):
        assert (
            run(monkeypatch, capsys, "ingest", str(folder), "-o", str(folder / "_r.parquet"))[0]
            == 0
        )


def test_no_command_writes_an_output_its_input_folder_would_read_next_time(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Pass 36, F1: `batch ds ds/compacted.parquet` poisoned the folder (the next
    # run read its own output as a shard). One check, in every command.
    import pyarrow.parquet as pq
    from ctxcompact.batch.synthetic import generate_table

    ds = tmp_path / "ds"
    ds.mkdir()
    table = generate_table(4, 60, seed=1)
    pq.write_table(table.slice(0, 120), ds / "a.parquet")
    pq.write_table(table.slice(120), ds / "b.parquet")
    window = ["--context", "200000", "--output-limit", "8000"]
    for args in (["batch", str(ds), "-o", str(ds / "compacted.parquet")],
                 ["batch", str(ds), "--report", str(ds / "report.parquet")],
                 ["prune", str(ds), "--output", str(ds / "pruned.parquet")],
                 ["filter", str(ds), "--output", str(ds / "sub" / "f.parquet")],
                 ["compact", str(ds), "--report", str(ds / "r.parquet")],
                 ["convert", str(ds), str(ds / "copy.parquet"), "--to", "parquet"],
                 ["convert", str(ds), str(ds / "sessions.jsonl"), "--to", "opencode"],
                 ["replay", str(ds), *window, "--out", str(ds / "calls.parquet")]):  # fmt: skip
        (ds / "sub").mkdir(exist_ok=True)
        code, out = run(monkeypatch, capsys, *args)
        assert code == 2 and f"inside the input folder {ds}" in out, (args, out)
        assert sorted(p.name for p in ds.iterdir()) == ["a.parquet", "b.parquet", "sub"]
    # a name the folder's reader skips is written, and the folder reads as before
    for _ in range(2):
        code, out = run(monkeypatch, capsys, "batch", str(ds), "-o", str(ds / "_compacted.parquet"),
                        "--report", str(ds / ".report.parquet"), "--json")  # fmt: skip
        assert code == 0 and '"files": 2' in out
    # a session file written into a folder of session files would be read too
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.traj.json").write_bytes((MINI / "local.traj.json").read_bytes())
    code, out = run(monkeypatch, capsys, "convert", str(runs), str(runs / "b.json"))
    assert code == 2 and "would be read as an input of" in out and ".traj" in out
    code, out = run(monkeypatch, capsys, "ingest", str(runs), "-o", str(tmp_path / "r.parquet"),
                    "--on-error", "skip", "--rejects", str(runs / "rejects.jsonl"))  # fmt: skip
    assert code == 2 and "--rejects" in out and sorted(os.listdir(runs)) == ["a.traj.json"]


TRAJECTORIES = DATA / "swe-agent" / "tests" / "test_data" / "trajectories"


def test_no_command_mixes_a_folder_of_session_files_with_parquet(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Issue 37, item 4: `ingest runs/ -o runs/rows.parquet` exited 0 (so did
    # prune, compact, filter, batch, convert, replay, tune), and from then on
    # every command on runs/ failed with "holds both Parquet files and session
    # files". Every writer refuses it before any work, naming both paths.
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(TRAJECTORIES, runs)
    before = sorted(p.relative_to(runs) for p in runs.rglob("*"))
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\npreset = ["opencode"]\n')
    window = ["--context", "200000", "--output-limit", "8000"]
    sub = next(p for p in runs.iterdir() if p.is_dir())  # deeper in the folder counts too
    for option, target, args in (
        ("--output", runs / "rows.parquet", ["ingest", str(runs), "-o"]),
        ("--output", sub / "p.parquet", ["prune", str(runs), "--output"]),
        ("--output", runs / "f.parquet", ["filter", str(runs), "--output"]),
        ("--report", runs / "r.parquet", ["compact", str(runs), "--report"]),
        ("--output", runs / "b.parquet", ["batch", str(runs), "-o"]),
        ("--report", runs / "b.parquet", ["batch", str(runs), "--report"]),
        ("OUTPUT", runs / "c.parquet", ["convert", str(runs), "--to", "parquet"]),
        ("--out", runs / "calls.parquet", ["replay", str(runs), *window, "--out"]),
        ("--out", runs / "calls.parquet", ["tune", str(runs), "--grid", str(grid),
                                           *window, "--out"]),
    ):  # fmt: skip
        code, out = run(monkeypatch, capsys, *args, str(target))
        assert code == 2, (args, out)
        assert option in out and str(target) in out and f"input folder {runs}" in out, out
        assert "both Parquet files and session files" in out, out
        assert sorted(p.relative_to(runs) for p in runs.rglob("*")) == before, args
    assert run(monkeypatch, capsys, "estimate", str(runs))[0] == 0  # the folder reads as before
    # a name the Parquet reader skips leaves the folder one kind: written, and again
    for _ in range(2):
        code, out = run(monkeypatch, capsys, "ingest", str(runs), "-o", str(runs / "_rows.parquet"))
        assert code == 0, out
    assert run(monkeypatch, capsys, "estimate", str(runs))[0] == 0


def test_the_python_writers_refuse_to_mix_an_input_folder(tmp_path: Path) -> None:
    # The same rule in the library (issue 37, item 4): a rejects file in a
    # folder of session files is read next time; a session file written into
    # a Parquet folder mixes it.
    import shutil

    import pyarrow.parquet as pq
    from ctxcompact.batch.parquet import compact_parquet
    from ctxcompact.batch.synthetic import generate_table
    from ctxcompact.errors import OutputConflictError
    from ctxcompact.formats.reader import read_jsonl, read_sessions

    runs = tmp_path / "runs"
    shutil.copytree(TRAJECTORIES, runs)
    for read in (read_sessions, read_jsonl):
        with pytest.raises(OutputConflictError, match="would be read as an input") as e:
            read(iter([runs]), on_error="skip", reject_path=runs / "rejects.jsonl")
        assert e.value.column == "reject_path" and str(runs / "rejects.jsonl") in str(e.value)
    assert not (runs / "rejects.jsonl").exists()
    ds = tmp_path / "ds"
    ds.mkdir()
    pq.write_table(generate_table(2, 30, seed=1), ds / "a.parquet")
    with pytest.raises(OutputConflictError, match="both Parquet files and session files") as e:
        compact_parquet(ds, tmp_path / "o.parquet", report_path=ds / "report.json")
    assert e.value.column == "report_path"
    assert sorted(os.listdir(ds)) == ["a.parquet"] and not (tmp_path / "o.parquet").exists()


def test_batch_counts_the_files_it_skips_as_ingest_does(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Pass 36, F10: `skipped` counted only Parquet files left out, and a
    # report-only run said "parts out 0".
    runs = tmp_path / "runs"
    runs.mkdir()
    for f in MINI.iterdir():
        (runs / f.name).write_bytes(f.read_bytes())
    (runs / "NOTES").write_text("not a session")
    code, out, _ = invoke(monkeypatch, capsys, "ingest", str(runs), "-o",
                          str(tmp_path / "i.parquet"), "--json")  # fmt: skip
    ingest = json.loads(out)
    code2, out2, _ = invoke(monkeypatch, capsys, "batch", str(runs), "--report",
                            str(tmp_path / "b.parquet"), "--json")  # fmt: skip
    batch = json.loads(out2)
    assert code == code2 == 0 and ingest["files_skipped"] > 0
    assert batch["skipped"] == ingest["files_skipped"]
    assert batch["files"] == ingest["files"] - ingest["files_skipped"]
    assert batch["parts_out"] is None and batch["bytes_read"] > 0 and "bytes_in" not in batch
    code, out3, _ = invoke(monkeypatch, capsys, "batch", str(runs), "-o",
                           str(tmp_path / "o.parquet"), "--json")  # fmt: skip
    assert code == 0 and json.loads(out3)["parts_out"] == json.loads(out3)["parts_in"] > 0


def test_a_link_is_written_through_and_a_device_never_replaced(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _ = run(monkeypatch, capsys, "convert", str(MINI / "local.traj.json"), str(link))
    assert code == 0 and link.is_symlink()
    assert target.read_text() != "old" and len(formats.read(target)) == 1
    fifo = tmp_path / "pipe.parquet"
    os.mkfifo(fifo)
    code, out = run(monkeypatch, capsys, "ingest", str(MINI), "-o", str(fifo))
    assert code == 5 and "not a regular file" in out
    assert not fifo.is_file()  # still the pipe


def test_a_file_given_twice_is_refused(monkeypatch: Any, capsys: Any, tmp_path: Path) -> None:
    out = str(tmp_path / "o.parquet")
    twice = [str(MINI), str(MINI / "local.traj.json")]
    code, text = run(monkeypatch, capsys, "ingest", *twice, "-o", out)
    assert code == 1 and "given twice" in text and not Path(out).exists()


def test_an_openhands_resolver_record_converts_back_whole(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    original = [json.loads(line) for line in RESOLVER.read_text().splitlines() if line.strip()]
    direct = tmp_path / "direct.jsonl"
    code, _ = run(monkeypatch, capsys, "convert", str(RESOLVER), str(direct), "--to", "openhands")
    assert code == 0
    back = [json.loads(line) for line in direct.read_text().splitlines()]
    assert back == original
    assert [list(r) for r in back] == [list(r) for r in original]  # the key order too
    # Through Parquet (the native reader's record) the same.
    table = tmp_path / "oh.parquet"
    assert run(monkeypatch, capsys, "ingest", str(RESOLVER), "-o", str(table))[0] == 0
    again = tmp_path / "again.jsonl"
    assert run(monkeypatch, capsys, "convert", str(table), str(again), "--to", "openhands")[0] == 0
    assert again.read_bytes() == direct.read_bytes()


def test_a_document_no_reader_takes_back_is_not_written(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    many = tmp_path / "tau.json"
    code, out = run(monkeypatch, capsys, "convert", str(TAU), str(many), "--to", "openai-chat")
    assert code == 1 and "write a .jsonl file" in out and not many.exists()
    line_format = tmp_path / "one.json"
    code, out = run(monkeypatch, capsys, "convert", str(MINI / "local.traj.json"), str(line_format),
                    "--to", "claude-code")  # fmt: skip
    assert code == 1 and "JSONL format" in out and not line_format.exists()
    # What is written reads back, to the token, in every document format.
    for to in ("opencode", "openai-chat", "anthropic", "tau-bench"):
        doc = tmp_path / f"one.{to}.json"
        code, _ = run(monkeypatch, capsys, "convert", str(MINI / "local.traj.json"), str(doc),
                      "--to", to)  # fmt: skip
        assert code == 0
        assert len(formats.read(doc)) == 1


def test_convert_output_is_detected_as_what_it_is(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    out = tmp_path / "tau.anthropic.jsonl"
    assert run(monkeypatch, capsys, "convert", str(TAU), str(out), "--to", "anthropic")[0] == 0
    code, text = run(monkeypatch, capsys, "estimate", str(out), "--json")
    assert code == 0 and json.loads(text)["format"] == "anthropic"


def test_tune_needs_a_window_and_replay_a_positive_one(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    grid = tmp_path / "g.toml"
    grid.write_text('preset = ["opencode", "swe-agent"]\n')
    code, out = run(monkeypatch, capsys, "tune", str(MINI), "--grid", str(grid))
    assert code == 2 and "context" in out
    code, _ = run(monkeypatch, capsys, "replay", str(MINI), "--context", "-5")
    assert code == 2


def test_missing_policy_file_is_a_missing_input(monkeypatch: Any, capsys: Any) -> None:
    code, out = run(monkeypatch, capsys, "prune", str(MINI), "--policy", "/nonexistent/p.toml")
    assert code == 3 and "no such policy file" in out


def test_batch_counts_the_session_files_it_read(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    code, out = run(
        monkeypatch, capsys, "batch", str(MINI), "-o", str(tmp_path / "o.parquet"), "--json"
    )
    summary = json.loads(out[: out.rindex("}") + 1])
    assert code == 0 and summary["files"] == 2
    assert summary["session_bytes"] == sum(p.stat().st_size for p in MINI.glob("*.json"))


def test_convert_hints_name_its_own_option(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"what": 1}')
    code, out = run(monkeypatch, capsys, "convert", str(odd), str(tmp_path / "x.jsonl"))
    assert code == 1 and "pass --format" in out and "--from" not in out


def test_convert_to_claude_code_warns_that_the_system_prompt_is_no_model_input(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # was written as a `system` event (a note Claude Code never sends) without a word
    source = MINI / "github_issue.traj.json"
    out = tmp_path / "issue.jsonl"
    code, said = run(monkeypatch, capsys, "convert", str(source), str(out), "--to", "claude-code")
    assert code == 0 and out.exists()
    assert (f"warning: claude-code cannot hold all of {source}: 1 system prompt(s) written as "
            "Claude Code 'system' events, which are never model input") in said  # fmt: skip


def test_convert_of_pruned_rows_warns_or_writes_the_model_view(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # converting `prune` output to a session format wrote every cleared output
    # back in full (the estimate went 159k -> 198k) without a word
    pruned = tmp_path / "m.parquet"
    code, out, _ = invoke(monkeypatch, capsys, "prune", str(DATA / "swe-agent"), "--policy",
                          "swe-agent", "--output", str(pruned), "--json")  # fmt: skip
    cleared = json.loads(out)["parts_pruned"]
    assert code == 0 and cleared > 0
    tokens = json.loads(invoke(monkeypatch, capsys, "estimate", str(pruned), "--json")[1])["tokens"]
    full = tmp_path / "full.jsonl"
    code, said = run(monkeypatch, capsys, "convert", str(pruned), str(full), "--to", "anthropic")
    assert code == 0 and f"{cleared} cleared tool output(s) written in full" in said
    for to in ("anthropic", "swe-agent"):
        model = tmp_path / f"model.{to}.jsonl"
        code, said = run(monkeypatch, capsys, "convert", str(pruned), str(model), "--to", to,
                         "--view", "model", "--json")  # fmt: skip
        assert code == 0 and "warning" not in said
        code, out, _ = invoke(monkeypatch, capsys, "estimate", str(model), "--json")
        assert json.loads(out)["tokens"] == tokens
    code, said = run(monkeypatch, capsys, "convert", str(pruned), str(tmp_path / "o.jsonl"),
                     "--to", "opencode")  # fmt: skip
    assert code == 0 and "warning" not in said
    code, said = run(monkeypatch, capsys, "convert", str(pruned), str(tmp_path / "p.jsonl"),
                     "--policy", "swe-agent")  # fmt: skip
    assert code == 2 and "add --view model" in said
