"""Streamed JSONL ingest (``iter_jsonl``, ``iter_sessions``, ``ctxcompact ingest``):
window by window, the same rows, rejects and counts as reading the files whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import ConfigError, DuplicateSessionError, FormatError
from ctxcompact.formats import IngestResult, iter_jsonl, iter_sessions, read_jsonl, read_sessions
from ctxcompact.transcript import targets_as_dictionary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sweeps import sweep
from test_ingest import DATA, WRITABLE, bad_file, claude_file, cli, traj, write_lines

SESSIONS = cc.Transcript(generate_table(12, 40, seed=11, mean_output_chars=600)).to_sessions()


def gathered(results: list[IngestResult]) -> tuple[pa.Table, list[tuple[str, int, str]]]:
    """The windows' tables concatenated and their rejects, as (path, line, error).
    Each window's ``tool_target`` has a dictionary of its own (a window is
    made before the next is read), so the join is given one dictionary, as
    the library joins tables (``targets_as_dictionary``): the values compare."""
    assert results, "a stream yields at least one result"
    table = targets_as_dictionary(pa.concat_tables([r.table for r in results]))
    return table, [(r.path, r.line, r.error) for w in results for r in w.rejected]


def assert_same(streamed: list[IngestResult], whole: IngestResult) -> None:
    table, rejects = gathered(streamed)
    assert table.equals(whole.table)
    assert rejects == [(r.path, r.line, r.error) for r in whole.rejected]
    last = streamed[-1]
    assert (last.lines, last.sessions, last.format) == (whole.lines, whole.sessions, whole.format)
    assert last.files == whole.files


@pytest.mark.parametrize("fmt", WRITABLE)
def test_any_window_gives_the_rows_of_the_whole_file(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"s.{fmt}.jsonl"
    formats.write(SESSIONS, path, fmt)
    whole = read_jsonl(path)
    for window in (1, 3_000, 1 << 26):
        streamed = list(iter_jsonl(path, window_bytes=window, chunk_bytes=2_000))
        assert_same(streamed, whole)
        if window == 1 and fmt != "claude-code":
            assert len(streamed) == whole.lines  # a line per window
        elif window == 1:  # cut between sessions and after each call's result
            assert len(streamed) > len(SESSIONS)
    assert whole.table.num_rows > 0


def test_windows_hold_about_window_bytes_of_lines(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    formats.write(SESSIONS, path, "openai-chat")
    window = 40_000
    streamed = list(iter_jsonl(path, window_bytes=window))
    longest = max(len(line) for line in path.read_bytes().splitlines())
    assert len(streamed) >= path.stat().st_size // (window + longest) > 1
    for w in streamed:  # each window's rows come from at most a window and one line of text
        text = pa.compute.sum(pa.compute.binary_length(w.table.column("output"))).as_py() or 0
        assert text <= window + longest


def claude_events(draw: st.DrawFn) -> list[str]:
    """Lines of a Claude Code file: sessions that run on or come back, calls
    answered at once, late, twice or never, uuids given again at any distance
    or shaped like a positional id, lines without a session id
    (snapshots, summary lines, some of either before the first session id), and
    lines the reader rejects."""
    lines: list[str] = []
    calls: list[str] = []
    session = "s0"
    for k in range(draw(st.integers(0, 3))):  # they wait for the first session
        if draw(st.booleans()):
            lines.append(json.dumps({"type": "summary", "summary": "x" * k, "leafUuid": "u0"}))
        else:
            lines.append(json.dumps({"type": "file-history-snapshot", "messageId": f"m{k}",
                                     "snapshot": {"p": "x" * k}}))  # fmt: skip
    for k in range(draw(st.integers(1, 60))):
        if draw(st.integers(0, 9)) == 0:
            session = f"s{draw(st.integers(0, 3))}"
        kinds = ["user", "call", "result", "snapshot", "summary", "bad", "empty-sid"]
        kind = draw(st.sampled_from(kinds))
        text = "x" * draw(st.integers(0, 300))
        # an id of any line before, or one a positional id (f"{session}-e{n:06}") takes
        shape = draw(st.sampled_from(["u{}", session + "-e{:06}"]))
        uuid = shape.format(draw(st.integers(0, 2 * k)))
        head: dict[str, Any] = {"sessionId": session, "uuid": uuid}
        if kind == "call":
            call = draw(st.sampled_from([*calls, f"t{k}"]))
            calls.append(call)
            use = {"type": "tool_use", "id": call, "name": "Bash", "input": {"k": k}}
            content: Any = [{"type": "text", "text": text}, use]
            event = {
                "type": "assistant",
                **head,
                "message": {"role": "assistant", "content": content},
            }
        elif kind == "result" and calls:
            call = draw(st.sampled_from([calls[-1], *calls, "nowhere"]))
            block = {"type": "tool_result", "tool_use_id": call, "content": f"out {k} {text}",
                     "is_error": draw(st.booleans())}  # fmt: skip
            event = {"type": "user", **head, "message": {"role": "user", "content": [block]}}
        elif kind == "snapshot":
            event = {"type": "file-history-snapshot", "messageId": f"m{k}", "snapshot": {}}
        elif kind == "summary":
            event = {"type": "summary", "summary": text, "leafUuid": f"u{k}"}
        elif kind == "bad":  # not JSON, a text that is not a string, a line cut short
            wrong = {"role": "user", "content": [{"type": "text", "text": 7}]}
            cut = '{"type":"user","sessionId":"s9","message":{"role":"user"}'
            choices = ["{not json", json.dumps({"type": "user", **head, "message": wrong}), cut]
            lines.append(draw(st.sampled_from(choices)))
            continue
        else:
            sid = {"sessionId": ""} if kind == "empty-sid" else head
            event = {"type": "user", **head, **sid, "message": {"role": "user", "content": text}}
        lines.append(json.dumps(event))
    return lines


@settings(
    max_examples=sweep(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_claude_code_file_in_windows_gives_the_rows_of_the_whole_file(
    tmp_path: Path, data: st.DataObject
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(data.draw(st.composite(claude_events)())) + "\n", "utf-8")
    window = data.draw(st.sampled_from([1, 200, 1_500, 1 << 20]))
    for on_error in ("skip", "raise"):
        try:
            whole = read_jsonl(path, "claude-code", on_error=on_error, chunk_bytes=300)
        except FormatError as e:
            with pytest.raises(FormatError) as info:
                list(iter_jsonl(path, "claude-code", on_error=on_error, window_bytes=window))
            assert str(info.value) == str(e)
            continue
        streamed = list(iter_jsonl(path, "claude-code", on_error=on_error, window_bytes=window,
                                   chunk_bytes=300))  # fmt: skip
        assert_same(streamed, whole)


def test_a_long_claude_code_session_is_read_in_windows_of_about_window_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.jsonl"
    lines = []
    for k in range(400):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"path": f"f{k}"}}
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "y" * 500}
        lines += [
            {"type": "assistant", "sessionId": "long", "uuid": f"a{k}",
             "message": {"role": "assistant", "content": [use]}},
            {"type": "file-history-snapshot", "messageId": f"m{k}", "snapshot": {}},
            {"type": "user", "sessionId": "long", "uuid": f"r{k}",
             "message": {"role": "user", "content": [result]}},
        ]  # fmt: skip
    write_lines(path, lines)
    window = 20_000
    streamed = list(iter_jsonl(path, window_bytes=window))
    assert_same(streamed, read_jsonl(path))
    longest = max(len(line) for line in path.read_bytes().splitlines())
    assert len(streamed) >= path.stat().st_size // (window + 3 * longest) > 1
    for w in streamed:  # a window ends at the first line end past it that no call spans
        text = pa.compute.sum(pa.compute.binary_length(w.table.column("output"))).as_py() or 0
        assert text <= window + 3 * longest


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_temporary_folder_that_cannot_be_used_is_an_oserror_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_error: str
) -> None:
    """The first pass over a Claude Code file larger than a window spills to
    the temporary folder: one that is missing (or full, or not writable) is
    no fault of the file, so it is Python's OSError naming the folder (as
    the README says of files that cannot be written), never a FormatError,
    and no line is skipped for it."""
    path = DATA / "formats" / "claude-code" / "claude-code-log" / "representative_messages.jsonl"
    missing = tmp_path / "no-such-tmp"
    monkeypatch.setenv("TMPDIR", str(missing))
    with pytest.raises(FileNotFoundError) as info:
        list(iter_jsonl(path, "claude-code", window_bytes=1_000, on_error=on_error))  # type: ignore[arg-type]
    assert not isinstance(info.value, cc.CompactionError)
    assert info.value.filename == str(missing)
    assert str(path) in str(info.value) and "temporary files" in str(info.value)


def test_the_cli_names_an_unusable_temporary_folder_once_as_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was exit 3, "error: <folder>: cannot read: <file>: the first pass cannot
    # use its temporary files in <folder>: ... (os error 2)": the folder twice,
    # "read" for a folder that could not be written.
    source = DATA / "formats" / "claude-code" / "claude-code-log" / "representative_messages.jsonl"
    lines = source.read_text().splitlines()
    big = json.loads(lines[0])
    big["uuid"], big["parentUuid"] = "big", None
    big["message"] = {"role": "user", "content": [{"type": "text", "text": "x" * (2 << 20)}]}
    path = write_lines(tmp_path / "big.jsonl", [*map(json.loads, lines), big])
    missing = tmp_path / "no-such-tmp"
    monkeypatch.setenv("TMPDIR", str(missing))
    out = tmp_path / "out.parquet"
    code, stdout, err = invoke(monkeypatch, capsys, "ingest", str(path), "-o", str(out),
                               "--window-mb", "1")  # fmt: skip
    assert code == 5, err
    assert err == (f"error: {missing}: cannot write the temporary files of the first pass over "
                   f"{path}: No such file or directory\n")  # fmt: skip
    assert not stdout and not out.exists()


def test_bad_lines_are_rejected_or_raised_as_the_whole_file_reader_does(tmp_path: Path) -> None:
    path = bad_file(tmp_path)
    whole = read_jsonl(path, "opencode", on_error="skip")
    for window in (1, 50, 400, 1 << 20):
        assert_same(list(iter_jsonl(path, "opencode", on_error="skip", window_bytes=window)),
                    whole)  # fmt: skip
        with pytest.raises(FormatError) as info:
            list(iter_jsonl(path, "opencode", window_bytes=window))
        assert str(info.value).startswith(f"{path}:3: not valid JSON")
        assert info.value.row == 3


def test_a_session_read_twice_is_caught_across_windows_and_files(tmp_path: Path) -> None:
    def line(sid: str, mid: str) -> dict[str, Any]:
        return {"info": {"id": mid, "sessionID": sid, "role": "user"}, "parts": []}

    path = write_lines(tmp_path / "m.jsonl", [line("a", "1"), line("a", "2"), line("b", "3"),
                                              line("a", "4")])  # fmt: skip
    with pytest.raises(FormatError, match=r"m.jsonl:4: session \"a\" was already read at "):
        list(iter_jsonl(path, "opencode-messages", window_bytes=1))
    whole = read_jsonl(path, "opencode-messages", on_error="skip")
    streamed = list(iter_jsonl(path, "opencode-messages", on_error="skip", window_bytes=1))
    assert_same(streamed, whole)
    # a session continued over a window boundary is one session
    assert streamed[-1].sessions == 2 and len(streamed) == 4
    formats.write(SESSIONS[:2], tmp_path / "x1.jsonl", "opencode")
    formats.write(SESSIONS[1:3], tmp_path / "x2.jsonl", "opencode")
    paths = [tmp_path / "x1.jsonl", tmp_path / "x2.jsonl"]
    with pytest.raises(FormatError, match=f"x2.jsonl:1: session {SESSIONS[1].id!r}"
                       .replace("'", '"')):  # fmt: skip
        list(iter_jsonl(paths, window_bytes=100))
    assert_same(list(iter_jsonl(paths, on_error="skip", window_bytes=100)),
                read_jsonl(paths, on_error="skip"))  # fmt: skip


def test_mixed_folders_stream_like_read_sessions(tmp_path: Path) -> None:
    formats.write(SESSIONS[:4], tmp_path / "a-chat.jsonl", "openai-chat")
    claude_file(tmp_path / "b-claude.jsonl")
    (tmp_path / "c-bad.jsonl").write_bytes(b"\n{oops\n")
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "t.traj").write_text(json.dumps(traj("run1")), "utf-8")
    (tmp_path / "notes.md").write_text("#", "utf-8")
    whole = read_sessions(tmp_path, on_error="skip")
    for window in (1, 5_000, 1 << 26):
        assert_same(list(iter_sessions(tmp_path, on_error="skip", window_bytes=window)), whole)
    with pytest.raises(FormatError, match=r"c-bad\.jsonl:2: cannot tell the format"):
        list(iter_sessions(tmp_path))
    if (DATA / "transcripts").is_dir():
        whole = read_sessions(DATA, on_error="skip")
        assert_same(list(iter_sessions(DATA, on_error="skip", window_bytes=10_000)), whole)


def test_formats_and_file_reports_follow_the_order_given(tmp_path: Path) -> None:
    # a document that sorts before the JSONL files, in a format one of them has too
    (tmp_path / "a.traj").write_text(json.dumps(traj("a")), "utf-8")
    formats.write(SESSIONS[2:4], tmp_path / "b.jsonl", "opencode")
    formats.write(SESSIONS[4:6], tmp_path / "c.jsonl", "swe-agent")
    (tmp_path / "d.txt").write_text("notes", "utf-8")
    whole = read_sessions(tmp_path)
    assert whole.format == "swe-agent, opencode"
    results = list(iter_sessions(tmp_path, window_bytes=1))
    assert_same(results, whole)
    # one list of reports, shared by every result, complete at the end
    assert all(r.files is results[-1].files for r in results)
    assert [Path(f.path).name for f in results[-1].files] == ["a.traj", "b.jsonl", "c.jsonl",
                                                               "d.txt"]  # fmt: skip


def test_a_document_repeating_a_streamed_session_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.traj").write_text(json.dumps(traj("run")), "utf-8")
    sid = read_sessions(tmp_path / "t.traj").transcript.session_ids()[0]
    session = cc.Session.model_validate({"info": {"id": sid}, "messages": []})
    formats.write([session], tmp_path / "a.jsonl", "opencode")
    with pytest.raises(DuplicateSessionError, match="already read"):
        list(iter_sessions(tmp_path, window_bytes=1))
    results = list(iter_sessions(tmp_path, on_error="skip", window_bytes=1))
    assert results[-1].files[-1].status == "rejected" and results[-1].sessions == 1
    assert [r.line for w in results for r in w.rejected] == [0]


def test_empty_input_yields_one_empty_result_and_bad_windows_are_config_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"\xef\xbb\xbf\n\n")
    results = list(iter_jsonl(tmp_path / "empty.jsonl"))
    assert len(results) == 1 and results[0].table.num_rows == 0
    assert results[0].table.schema == read_jsonl(tmp_path / "empty.jsonl").table.schema
    for bad in (0, -5, True, 1.5, "64"):
        with pytest.raises(ConfigError, match="window_bytes must be a positive integer"):
            list(iter_jsonl(tmp_path, window_bytes=bad))  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="window_bytes"):
            list(iter_sessions(tmp_path, window_bytes=bad))  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        list(iter_jsonl(tmp_path / "missing.jsonl"))


def test_the_cli_streams_into_parquet_and_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    formats.write(SESSIONS, src / "a.jsonl", "opencode")
    bad = bad_file(src)
    out, rejects = tmp_path / "rows.parquet", tmp_path / "rejects.jsonl"
    code, res, _ = cli(monkeypatch, capsys, "ingest", str(src), "-o", str(out), "--on-error",
                       "skip", "--rejects", str(rejects), "--window-mb", "1",
                       "--count-units")  # fmt: skip
    assert code == 0
    whole = read_sessions(src, on_error="skip")
    # Parquet gives tool_target back as dictionary<int32, string>, a
    # dictionary per row group: read as the library reads it
    written = targets_as_dictionary(pq.read_table(out))
    assert written.equals(whole.table)
    # several windows, one row group: small windows are gathered before a write
    assert len(list(iter_sessions(src, on_error="skip", window_bytes=1 << 20))) == 2
    assert pq.ParquetFile(out).num_row_groups == 1
    assert (res["rows"], res["rejected"], res["sessions"]) == (
        whole.table.num_rows, len(whole.rejected), whole.sessions)  # fmt: skip
    assert [json.loads(x)["line"] for x in rejects.read_text("utf-8").splitlines()] == [
        r.line for r in whole.rejected]  # fmt: skip
    # A bad line under --on-error raise: exit 1, the earlier output untouched, no temporary left.
    before = out.read_bytes()
    code, _, err = cli(monkeypatch, capsys, "ingest", str(src), "-o", str(out))
    assert code == 1 and f"{bad}:3: not valid JSON" in err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rejects.jsonl", "rows.parquet", "src"]
    # An output that cannot be written: exit 5 naming the option, before anything is read.
    code, _, err = cli(
        monkeypatch, capsys, "ingest", str(src), "-o", str(tmp_path / "no" / "o.parquet")
    )
    assert code == 5 and "cannot write --output" in err
    code, _, err = cli(monkeypatch, capsys, "ingest", str(src), "-o", str(out), "--window-mb", "0")
    assert code == 2 and "window-mb" in err
