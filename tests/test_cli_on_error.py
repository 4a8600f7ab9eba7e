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
from ctxcompact.batch.synthetic import generate_table
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


def _with_bad_lines(folder: Path, count: int) -> Path:
    """A session file whose last ``count`` lines do not parse (its first does)."""
    tail = folder / "tail.jsonl"
    formats.write(Transcript(generate_table(1, 10, seed=7)).to_sessions(), tail, "openai-chat")
    text = tail.read_text().replace('"ses_0000000"', '"tail"', 1)  # an id of its own
    tail.write_text(text + "".join(f"not json {n}\n" for n in range(count)))
    return tail


@pytest.mark.parametrize("command", ["ingest", "batch", "estimate"])
def test_skipped_lines_are_named_by_every_command(
    tmp_path: Path, folder: Path, command: str, monkeypatch: Any, capsys: Any
) -> None:
    """ingest (and batch, which ingests session files first) named the files
    left out but not the lines: ``rejected: FILE:LINE: why``, as estimate
    does, the first 5 then how many more."""
    tail = _with_bad_lines(folder, 7)
    extra = {"ingest": ["-o", str(tmp_path / "rows.parquet")],
             "batch": ["--report", str(tmp_path / "report.parquet")]}.get(command, [])  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, command, str(folder), *extra, "--on-error", "skip")
    assert code == 0, err
    named = [x for x in err.splitlines() if x.startswith(f"rejected: {tail}:")]
    lines = [x.removeprefix(f"rejected: {tail}:").split(":")[0] for x in named]
    assert lines == ["2", "3", "4", "5", "6"], err
    assert all(x.count(str(tail)) == 1 and "not valid JSON" in x for x in named), named
    assert "rejected: 2 more line(s) (`ctxcompact ingest --on-error skip --rejects FILE`" in err
    if command == "ingest":  # with --rejects, the more are in that file
        rejects = tmp_path / "rejects.jsonl"
        code, _, err = invoke(monkeypatch, capsys, command, str(folder), *extra, "--on-error",
                              "skip", "--rejects", str(rejects))  # fmt: skip
        assert code == 0 and f"rejected: 2 more line(s) ({rejects} holds every one)" in err
        assert len(rejects.read_text().splitlines()) == 7 + 2  # and bad.jsonl's two lines


@pytest.mark.parametrize("command", ["ingest", "estimate", "batch"])
def test_a_jsonl_file_rejected_whole_is_named_once(
    tmp_path: Path, folder: Path, command: str, monkeypatch: Any, capsys: Any
) -> None:
    """bad.jsonl's first line does not parse, so the file is left out whole:
    one line, naming the file and line once (it was ``rejected: bad.jsonl:
    bad.jsonl:1: cannot tell ...``, and again ``rejected: bad.jsonl:1:
    bad.jsonl:1: ...`` for each of its lines)."""
    bad = folder / "bad.jsonl"
    extra = {"ingest": ["-o", str(tmp_path / "rows.parquet")],
             "batch": ["--report", str(tmp_path / "report.parquet")]}.get(command, [])  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, command, str(folder), *extra, "--on-error", "skip")
    assert code == 0, err
    (line,) = [x for x in err.splitlines() if str(bad) in x]
    assert line.startswith(f"rejected: {bad}:1: cannot tell the format: "), line
    assert line.count(str(bad)) == 1, line


def test_ingest_json_reasons_name_the_cli_option(
    tmp_path: Path, folder: Path, monkeypatch: Any, capsys: Any
) -> None:
    """``per_file[].reason`` said ``pass format=`` (the Python keyword) where
    stderr says ``pass --format (one of ...)``."""
    unknown = folder / "unknown.json"
    unknown.write_text("{}")
    rows = str(tmp_path / "rows.parquet")
    code, out, err = invoke(monkeypatch, capsys, "ingest", str(folder), "-o", rows,
                            "--on-error", "skip", "--json")  # fmt: skip
    assert code == 0, err
    (report,) = [f for f in json.loads(out)["per_file"] if f["path"] == str(unknown)]
    assert "pass --format (one of: opencode" in report["reason"], report
    assert "format=" not in report["reason"] and "format=" not in err


@pytest.mark.parametrize("content", [b"", b"  \n\t\n"], ids=["no-bytes", "whitespace"])
@pytest.mark.parametrize("command", [*COMMANDS, ["ingest", "-o", "{tmp}/out.parquet"],
                                     ["convert", "{tmp}/out.jsonl"]],
                         ids=lambda c: c[0])  # fmt: skip
def test_an_empty_session_document_is_a_format_error_or_a_rejected_file(
    tmp_path: Path, folder: Path, command: list[str], content: bytes, monkeypatch: Any,
    capsys: Any,
) -> None:  # fmt: skip
    # Issue 37, item 5: an empty .traj / .json read as 0 sessions, silently
    # (`ingest d --on-error skip` said "files empty 1" and exit 0).
    (folder / "bad.jsonl").unlink()
    empty = folder / "cut.traj"
    empty.write_bytes(content)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    if command[0] == "convert":  # convert INPUT... OUTPUT
        args = [args[0], "--on-error", "raise", *args[1:]]
    for given in (empty, folder):  # by itself, and found in a folder
        code, _, err = invoke(monkeypatch, capsys, args[0], str(given), *args[1:])
        assert code == 1 and f"FormatError: {empty}: an empty file" in err, (given, err)
        assert not any(p.name.startswith("out.") for p in tmp_path.iterdir())
    code, out, err = invoke(monkeypatch, capsys, args[0], str(folder), *args[1:], "--on-error",
                            "skip", "--json")  # fmt: skip
    assert code == 0 and f"rejected: {empty}: an empty file" in err, err
    shown = json.loads(out)
    assert shown["sessions"] == 4
    if command[0] == "ingest":
        assert shown["files_rejected"] == shown["rejected"] == 1 and "files_empty" not in shown


def test_an_empty_jsonl_file_holds_no_sessions_and_is_named(
    tmp_path: Path, folder: Path, monkeypatch: Any, capsys: Any
) -> None:
    # A JSONL file is a list of records: with none it holds no sessions
    # (docs/formats.md), reported "empty", named on stderr, never an error.
    (folder / "bad.jsonl").unlink()
    (folder / "none.jsonl").write_bytes(b"\n \n")
    code, out, err = invoke(monkeypatch, capsys, "ingest", str(folder), "-o",
                            str(tmp_path / "o.parquet"), "--json")  # fmt: skip
    assert code == 0 and f"empty: {folder / 'none.jsonl'}" in err
    assert json.loads(out)["files_empty"] == 1 and json.loads(out)["sessions"] == 4
    assert formats.read(folder / "none.jsonl") == []


def test_the_library_reads_an_empty_document_as_a_format_error(tmp_path: Path) -> None:
    from ctxcompact.errors import FormatError
    from ctxcompact.formats.reader import iter_sessions, read_sessions

    empty = tmp_path / "run.json"
    empty.write_bytes(b"\xef\xbb\xbf \n")  # a byte order mark and whitespace: nothing
    for read in (formats.read, lambda p: formats.read_document(p), read_sessions,
                 lambda p: list(iter_sessions(p))):  # fmt: skip
        with pytest.raises(FormatError, match="an empty file") as e:
            read(empty)
        assert str(empty) in str(e.value)
    skipped = read_sessions(tmp_path, on_error="skip")
    assert [(f.status, f.path) for f in skipped.files] == [("rejected", str(empty))]
    assert [(r.path, r.line) for r in skipped.rejected] == [(str(empty), 0)]
    assert skipped.sessions == 0 and skipped.table.num_rows == 0
