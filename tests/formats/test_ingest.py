"""The native JSONL ingest (``read_jsonl``) against the Python adapters.

The reference for every native format is ``formats.read`` followed by
``Transcript.from_sessions``: the scan columns must be equal value for value
(the ``input`` text too, byte for byte, since it feeds the estimates) and the
sessions rebuilt from the table must export the same JSON.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import _core, formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import ConfigError, DuplicateSessionError, FormatError, NonContiguousError
from ctxcompact.formats import IngestResult
from ctxcompact.formats.reader import NATIVE_FORMATS, read_jsonl
from ctxcompact.transcript import SCAN_COLUMNS, SCHEMA, targets_as_dictionary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sweeps import sweep

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

CHARS = ["a", " ", "é", "日", "😀", "\n", '"', "\\", "\x01", "\x7f"]
TEXT = st.text(alphabet=st.sampled_from(CHARS), max_size=20)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)
# Keys the models do not type (typed ones must hold their type, see test_bad_input).
EXTRA = st.dictionaries(st.sampled_from(["x", "meta", "é", "custom"]), JSON, max_size=2)


@st.composite
def part(draw: st.DrawFn, pid: str, role: str) -> dict[str, Any]:
    kinds = ["text", "reasoning", "tool", "tool", "compaction", "file", "step-finish", "new-kind"]
    kind = draw(st.sampled_from(kinds if role == "assistant" else ["text", "file", "compaction"]))
    p: dict[str, Any] = {"id": pid, "type": kind, **draw(EXTRA)}
    if kind in ("text", "reasoning"):
        p["text"] = draw(st.one_of(TEXT, st.none()))
    if kind == "compaction":
        p["auto"] = draw(st.one_of(st.booleans(), st.none()))
    if kind == "tool":
        p["tool"] = draw(st.sampled_from(["read", "bash", "edit"]))
        p["callID"] = f"call-{pid}"
        status = draw(st.sampled_from(["pending", "running", "completed", "error"]))
        state: dict[str, Any] = {"status": status}
        if draw(st.booleans()):
            state["input"] = draw(st.dictionaries(TEXT, JSON, max_size=3))
        if status == "completed":
            state["output"] = draw(TEXT)
        if status == "error":
            state["error"] = draw(TEXT)
        time = {"start": draw(st.integers(0, 2**40))}
        if draw(st.booleans()):
            time["compacted"] = draw(st.integers(0, 2**45))
        state["time"] = time
        p["state"] = state
    return p


@st.composite
def session_export(draw: st.DrawFn, sid: str) -> dict[str, Any]:
    messages = []
    for m in range(draw(st.integers(0, 5))):
        role = draw(st.sampled_from(["user", "assistant", "assistant", "system"]))
        mid = f"{sid}-m{m}"
        info: dict[str, Any] = {"id": mid, "sessionID": sid, "role": role}
        if role == "assistant":
            info["parentID"] = draw(st.one_of(st.none(), st.just(f"{sid}-m0")))
            if draw(st.booleans()):
                info["summary"] = True
            info["finish"] = draw(st.sampled_from([None, "stop", "tool-calls"]))
            if draw(st.integers(0, 5)) == 0:
                info["error"] = {"name": "APIError"}
        info.update(draw(EXTRA))
        parts = [draw(part(f"{mid}-p{j}", role)) for j in range(draw(st.integers(0, 4)))]
        messages.append({"info": info, "parts": parts})
    return {"info": {"id": sid, **draw(EXTRA)}, "messages": messages}


@st.composite
def chat_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    calls: list[str] = []
    for i in range(draw(st.integers(0, 8))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
        m: dict[str, Any] = {"role": role, **draw(st.dictionaries(
            st.sampled_from(["name", "x"]), JSON, max_size=1))}  # fmt: skip
        if role == "tool":
            m["tool_call_id"] = draw(st.sampled_from([*calls, "unknown"]))
            m["content"] = draw(st.one_of(TEXT, st.lists(st.fixed_dictionaries(
                {"type": st.just("text"), "text": TEXT}), max_size=2), st.none()))  # fmt: skip
        elif role == "assistant":
            m["content"] = draw(st.one_of(st.none(), TEXT))
            tool_calls = []
            for j in range(draw(st.integers(0, 2))):
                cid = f"c{i}-{j}"
                calls.append(cid)
                args = draw(st.one_of(
                    st.dictionaries(TEXT, JSON, max_size=2).map(json.dumps),
                    st.dictionaries(TEXT, JSON, max_size=2).map(
                        lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":"))),
                    st.just(""), st.just("{}"),
                    # unreadable: input {} and the raw arguments with why in metadata
                    st.just("not json"), st.just("[1, 2]"), st.just('{"cut'), st.just(["a"]),
                ))  # fmt: skip
                tool_calls.append({"id": cid, "type": "function",
                                   "function": {"name": "bash", "arguments": args}})  # fmt: skip
            if tool_calls:
                m["tool_calls"] = tool_calls
        else:
            m["content"] = draw(st.one_of(TEXT, st.lists(st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                st.fixed_dictionaries({"type": st.just("image_url"),
                                       "image_url": st.fixed_dictionaries({"url": TEXT})}),
            ), max_size=2)))  # fmt: skip
        out.append(m)
    return out


def write_lines(path: Path, docs: list[Any]) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
    return path


def assert_same_as_python(path: Path, fmt: str, **kwargs: Any) -> IngestResult:
    result = read_jsonl(path, fmt, **kwargs)
    expected_sessions = formats.read(path, fmt)
    expected = cc.Transcript.from_sessions(expected_sessions).to_arrow()
    assert result.table.schema == SCHEMA
    assert result.table.num_rows == expected.num_rows
    for name in SCAN_COLUMNS:
        assert result.table.column(name).to_pylist() == expected.column(name).to_pylist(), name
    got = [s.to_export() for s in cc.Transcript(result.table).to_sessions()]
    # Through the table both ways (a message without "parts" comes back with "parts": []).
    assert got == [s.to_export() for s in cc.Transcript(expected).to_sessions()]
    assert result.sessions == len(expected_sessions)
    assert result.rejected == []
    return result


SETTINGS = settings(max_examples=sweep(60), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


@SETTINGS
@given(st.lists(st.integers(0, 10**6), max_size=4, unique=True).flatmap(
    lambda ids: st.tuples(*[session_export(f"s{i}") for i in ids])))  # fmt: skip
def test_opencode_exports_match_the_python_adapter(
    tmp_path: Path, exports: tuple[dict[str, Any], ...]
) -> None:
    path = write_lines(tmp_path / "opencode.jsonl", list(exports))
    assert_same_as_python(path, "opencode", chunk_bytes=64)


@SETTINGS
@given(st.lists(st.integers(0, 10**6), max_size=4, unique=True).flatmap(
    lambda ids: st.tuples(*[session_export(f"s{i}") for i in ids])))  # fmt: skip
def test_message_lines_match_the_python_adapter(
    tmp_path: Path, exports: tuple[dict[str, Any], ...]
) -> None:
    lines = [m for e in exports for m in e["messages"]]
    path = write_lines(tmp_path / "messages.jsonl", lines)
    assert_same_as_python(path, "opencode-messages", chunk_bytes=64)


@SETTINGS
@given(
    st.lists(chat_messages(), max_size=4),
    st.lists(st.sampled_from(["object", "bare", "session_id", "both"]), min_size=4, max_size=4),
)
def test_chat_lines_match_the_python_adapter(
    tmp_path: Path, sessions: list[list[dict[str, Any]]], shapes: list[str]
) -> None:
    docs: list[Any] = []
    for i, (messages, shape) in enumerate(zip(sessions, shapes, strict=False)):
        if shape == "bare" and messages:
            docs.append(messages)
        elif shape == "session_id":
            docs.append({"session_id": f"chat-{i}", "messages": messages, "meta": {"n": 1.5}})
        elif shape == "both":  # the id names the session, the session_id is kept
            docs.append({"id": f"chat-{i}", "session_id": f"run-{i}", "messages": messages})
        else:
            docs.append({"id": f"chat-{i}", "messages": messages})
    path = write_lines(tmp_path / "chat.jsonl", docs)
    assert_same_as_python(path, "openai-chat", chunk_bytes=64)


# Formats a session of any origin can be written in (OpenHands streams only come from OpenHands).
WRITABLE = [fmt for fmt in NATIVE_FORMATS if fmt != "openhands"]


@pytest.mark.parametrize("fmt", WRITABLE)
def test_thread_count_and_chunk_size_do_not_change_the_table(tmp_path: Path, fmt: str) -> None:
    sessions = cc.Transcript(generate_table(30, 60, seed=5)).to_sessions()
    path = tmp_path / f"data.{fmt}.jsonl"
    formats.write(sessions, path, fmt)
    one = read_jsonl(path, fmt, threads=1).table
    for threads, chunk in [(2, 1 << 20), (2, 500), (1, 1)]:
        assert read_jsonl(path, fmt, threads=threads, chunk_bytes=chunk).table.equals(one)
    assert_same_as_python(path, fmt, threads=2, chunk_bytes=4096)


def test_formats_are_detected_and_many_files_and_directories_read_in_order(tmp_path: Path) -> None:
    sessions = cc.Transcript(generate_table(6, 20, seed=2)).to_sessions()
    formats.write(sessions[:3], tmp_path / "a.jsonl", "opencode")
    formats.write(sessions[3:], tmp_path / "b.jsonl", "opencode")
    result = read_jsonl(tmp_path)
    assert result.format == "opencode"
    assert cc.Transcript(result.table).session_ids() == [s.id for s in sessions]
    assert (result.lines, result.sessions) == (6, 6)
    for fmt in WRITABLE:
        formats.write(sessions, tmp_path / "one.jsonl", fmt)
        assert read_jsonl(tmp_path / "one.jsonl").format == fmt
    # current Claude Code files may open with a file-history snapshot, which has no session id
    formats.write(sessions, tmp_path / "cc.jsonl", "claude-code")
    snapshot = (
        '{"type":"file-history-snapshot","messageId":"m1","snapshot":{},"isSnapshotUpdate":false}'
    )
    (tmp_path / "cc.jsonl").write_text(snapshot + "\n" + (tmp_path / "cc.jsonl").read_text())
    got = read_jsonl(tmp_path / "cc.jsonl")
    # (the snapshot joins the first session: it is none of its own)
    assert got.format == "claude-code" and got.sessions == len(sessions)
    assert cc.Transcript(got.table).session_ids() == [s.id for s in sessions]


def test_the_ingested_table_feeds_the_scans(tmp_path: Path) -> None:
    table = generate_table(4, 200, seed=9, mean_output_chars=8000)
    sessions = cc.Transcript(table).to_sessions()
    path = tmp_path / "s.jsonl"
    formats.write(sessions, path, "opencode")
    ingested = read_jsonl(path).transcript
    table = cc.Transcript.from_sessions(sessions)
    assert cc.prune(ingested).pruned == cc.prune(table).pruned > 0
    assert cc.filter_pivot(ingested).to_arrow().equals(cc.filter_pivot(table).to_arrow())
    got, want = cc.estimate_messages(ingested), cc.estimate_messages(table)
    assert got.messages.equals(want.messages) and got.total == want.total > 0


# --- bad input ------------------------------------------------------------------------

TEXT_PART = {"id": "p1", "type": "text", "text": "hi"}
GOOD = {
    "info": {"id": "s1"},
    "messages": [{"info": {"id": "m1", "role": "user"}, "parts": [TEXT_PART]}],
}


def bad_file(tmp_path: Path) -> Path:
    good2 = json.loads(json.dumps(GOOD).replace("s1", "s2"))
    bad_status = json.loads(json.dumps(good2).replace("s2", "s3"))
    bad_status["messages"][0]["parts"] = [{"id": "t", "type": "tool", "state": {"status": "done"}}]
    lines = [
        json.dumps(GOOD).encode(),
        b"",
        b'{"info": {"id": "s4"}, "messages": [',  # truncated
        json.dumps(good2).encode() + b"\r",
        b'{"info": {"id": "s5", "t": "caf\xe9"}}',  # latin-1, not UTF-8
        json.dumps(bad_status).encode(),
        json.dumps(GOOD).encode(),  # s1 again
        b'{"info": {"id": "s6"}, "messages": [{"info": {"id": "m", "role": "robot"}}]}',
        b'{"info": {"id": "s7"}, "messages": [{"info": {"id": "m", "role": "user"}, "parts": '
        b'[{"id": "p", "type": "tool", "state": {"status": "completed", '
        b'"time": {"compacted": 1.5}}}]}]}',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("threads", [1, 2])
def test_bad_lines_fail_the_run_at_the_first_one_with_file_and_line(
    tmp_path: Path, threads: int
) -> None:
    path = bad_file(tmp_path)
    with pytest.raises(FormatError) as info:
        read_jsonl(path, "opencode", threads=threads, chunk_bytes=16)
    assert str(info.value).startswith(f"{path}:3: not valid JSON")
    assert info.value.row == 3


def test_skipped_lines_are_reported_and_written_with_their_bytes(tmp_path: Path) -> None:
    path = bad_file(tmp_path)
    rejects = tmp_path / "rejects.jsonl"
    result = read_jsonl(path, "opencode", on_error="skip", reject_path=rejects, chunk_bytes=16)
    assert cc.Transcript(result.table).session_ids() == ["s1", "s2"]
    assert (result.lines, result.sessions) == (8, 2)
    got = {r.line: r for r in result.rejected}
    assert sorted(got) == [3, 5, 6, 7, 8, 9]
    assert "not valid JSON" in got[3].error
    assert f"not valid UTF-8 (invalid byte at byte {got[5].raw.index(0xE9)})" in got[5].error
    assert 'status is "done"' in got[6].error and got[6].session_id == "s3"
    assert 'session "s1" was already read at' in got[7].error and got[7].session_id == "s1"
    assert 'role is "robot"' in got[8].error and got[8].message_id == "m"
    assert "compacted must be an integer" in got[9].error
    written = [json.loads(line) for line in rejects.read_text("utf-8").splitlines()]
    assert [w["line"] for w in written] == [3, 5, 6, 7, 8, 9]
    raw = path.read_bytes().split(b"\n")
    import base64

    assert base64.b64decode(written[1]["raw_base64"]) == raw[4]
    assert written[0]["raw"].encode() == raw[2]
    assert all(w["path"] == str(path) for w in written)
    # Nothing lost: every non-blank line is either in the table or in the reject file.
    assert result.sessions + len(result.rejected) == result.lines


def test_a_session_split_across_message_lines_is_rejected(tmp_path: Path) -> None:
    def line(sid: str, mid: str) -> dict[str, Any]:
        return {"info": {"id": mid, "sessionID": sid, "role": "user"}, "parts": []}

    path = write_lines(tmp_path / "m.jsonl", [line("a", "1"), line("b", "2"), line("a", "3"),
                                              line("b", "2")])  # fmt: skip
    with pytest.raises(FormatError, match=r"m.jsonl:3: session \"a\" was already read at "):
        read_jsonl(path, "opencode-messages")
    result = read_jsonl(path, "opencode-messages", on_error="skip")
    assert [(r.line, r.session_id) for r in result.rejected] == [(3, "a"), (4, "b")]
    assert "already read in this session" in result.rejected[1].error


def test_blank_lines_crlf_and_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n  \r\n\n")
    result = read_jsonl(path)
    assert (result.lines, result.sessions, result.table.num_rows) == (1, 1, 1)


def test_empty_inputs_give_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"\xef\xbb\xbf\n\n")
    result = read_jsonl(tmp_path / "empty.jsonl", "opencode")
    assert result.table.num_rows == 0 and result.table.schema == SCHEMA
    assert read_jsonl([]).table.num_rows == 0
    # an empty file holds no sessions, whether its format is given or not, in both readers
    detected = read_jsonl(tmp_path / "empty.jsonl")
    assert detected.table.num_rows == 0 and detected.table.schema == SCHEMA
    assert [(f.status, f.format) for f in detected.files] == [("empty", None)]
    assert formats.read(tmp_path / "empty.jsonl") == []


def test_usage_errors_are_typed(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [GOOD])
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        read_jsonl(tmp_path / "missing.jsonl", "opencode")
    with pytest.raises(ConfigError, match="on_error"):
        read_jsonl(path, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="threads"):
        read_jsonl(path, threads=0)
    with pytest.raises(ConfigError, match="chunk_bytes"):
        read_jsonl(path, chunk_bytes=0)
    with pytest.raises(ConfigError, match='unknown format "yaml"'):
        read_jsonl(path, "yaml")
    with pytest.raises(IsADirectoryError) as folder:  # an unreadable file: no bad line
        _core.ingest_jsonl([str(tmp_path)], "opencode")
    assert folder.value.filename == str(tmp_path)


@pytest.mark.skipif(not (DATA / "transcripts").is_dir(), reason="no ../shared/data")
def test_every_real_transcript_ingests_natively_like_the_python_adapters(tmp_path: Path) -> None:
    files = [p for p in sorted((DATA / "transcripts").rglob("*")) if p.suffix in
             (".json", ".traj", ".jsonl") and p.is_file()]  # fmt: skip
    sessions = [s for p in files for s in formats.read(p)]
    assert len(sessions) >= 10
    for i, s in enumerate(sessions):  # several files reuse ids (one line per session needs unique)
        s.info.id = f"{s.id}-{i}"
    for fmt in WRITABLE:
        path = tmp_path / f"real.{fmt}.jsonl"
        formats.write(sessions, path, fmt)
        assert_same_as_python(path, fmt, chunk_bytes=1 << 16)


def test_ingest_releases_the_gil(tmp_path: Path) -> None:
    from gil_probe import ticks_during

    path = tmp_path / "big.jsonl"
    formats.write(cc.Transcript(generate_table(40, 300, seed=3)).to_sessions(), path, "opencode")
    import sys

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.25)
    try:
        assert ticks_during(lambda: _core.ingest_jsonl([str(path)], "opencode", threads=1)) > 0
    finally:
        sys.setswitchinterval(old)
    results: list[int] = []
    workers = [threading.Thread(target=lambda: results.append(read_jsonl(path).table.num_rows))
               for _ in range(3)]  # fmt: skip
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(set(results)) == 1 and results[0] > 0
    assert pa.table(_core.ingest_jsonl([str(path)], "opencode")[0]).num_rows == results[0]


# --- any input, per-file formats (issue 10) ---------------------------------------------------

SESSIONS = cc.Transcript(generate_table(5, 40, seed=11)).to_sessions()


def claude_file(path: Path) -> Path:
    formats.write(SESSIONS[3:], path, "claude-code")
    return path


def test_each_jsonl_file_is_read_in_its_own_format(tmp_path: Path) -> None:
    formats.write(SESSIONS[:3], tmp_path / "a-chat.jsonl", "openai-chat")
    claude_file(tmp_path / "b-claude.jsonl")
    result = read_jsonl(tmp_path)
    assert result.formats == {str(tmp_path / "a-chat.jsonl"): "openai-chat",
                              str(tmp_path / "b-claude.jsonl"): "claude-code"}  # fmt: skip
    assert result.format == "openai-chat, claude-code"
    # every session as each file alone reads it (not chat sessions as empty events)
    alone = [read_jsonl(tmp_path / name).table for name in ("a-chat.jsonl", "b-claude.jsonl")]
    # each read has a tool_target dictionary of its own: joined as the library joins tables
    assert result.table.equals(targets_as_dictionary(pa.concat_tables(alone)))
    assert result.sessions == 5 and result.rejected == []
    estimate = cc.estimate_messages(result.transcript)
    assert estimate.total == sum(cc.estimate_messages(t).total for t in alone) > 1000


def test_a_line_not_in_the_forced_format_is_a_bad_line(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    formats.write(SESSIONS, chat, "openai-chat")
    with pytest.raises(FormatError, match=r"chat.jsonl:1: not a Claude Code event") as info:
        read_jsonl(chat, "claude-code")
    assert info.value.row == 1
    skipped = read_jsonl(chat, "claude-code", on_error="skip")
    assert skipped.table.num_rows == 0 and [r.line for r in skipped.rejected] == [1, 2, 3, 4, 5]
    with pytest.raises(FormatError, match=r"chat.jsonl:1: not a Claude Code event"):
        formats.read(chat, "claude-code")
    # a bare value is not an event either, in both readers
    raw = write_lines(tmp_path / "raw.jsonl", [{"type": "user", "uuid": "u", "message": {
        "role": "user", "content": "hi"}}, 7])  # fmt: skip
    with pytest.raises(FormatError, match=r"raw.jsonl:2: not a Claude Code event: got"):
        read_jsonl(raw)
    with pytest.raises(FormatError, match=r"raw.jsonl:2: not a Claude Code event: got"):
        formats.read(raw)


def test_skip_rejects_a_file_whose_format_cannot_be_told_and_reads_the_rest(
    tmp_path: Path,
) -> None:
    (tmp_path / "a-bad.jsonl").write_bytes(b"{oops\n" + json.dumps(GOOD).encode() + b"\n")
    (tmp_path / "b-empty.jsonl").write_bytes(b"")
    (tmp_path / "c-odd.jsonl").write_text('{"neither": 1}\n', "utf-8")
    write_lines(tmp_path / "d-good.jsonl", [GOOD])
    with pytest.raises(FormatError, match=r"a-bad.jsonl:1: cannot tell the format"):
        read_jsonl(tmp_path)
    result = read_jsonl(tmp_path, on_error="skip", reject_path=tmp_path / "rejects.out")
    assert result.transcript.session_ids() == ["s1"]
    assert [(Path(f.path).name, f.status, f.format) for f in result.files] == [
        ("a-bad.jsonl", "rejected", None), ("b-empty.jsonl", "empty", None),
        ("c-odd.jsonl", "rejected", None), ("d-good.jsonl", "read", "opencode")]  # fmt: skip
    assert "cannot tell the format" in result.files[0].reason
    # the file is rejected whole: every line of it is in the reject file, none lost
    assert [(Path(r.path).name, r.line) for r in result.rejected] == [
        ("a-bad.jsonl", 1), ("a-bad.jsonl", 2), ("c-odd.jsonl", 1)]  # fmt: skip
    assert result.lines == result.sessions + len(result.rejected) == 4
    assert len((tmp_path / "rejects.out").read_text().splitlines()) == 3


def traj(task: str) -> dict[str, Any]:
    return {
        "environment": "swe",
        "history": [
            {"role": "system", "content": "you are an agent"},
            {"role": "user", "content": f"fix {task}"},
            {"role": "assistant", "content": "done " * 50},
        ],
        "info": {"exit_status": "submitted"},
    }


def test_a_folder_of_documents_reads_with_unique_ids_and_skips_are_listed(
    tmp_path: Path,
) -> None:
    from ctxcompact.formats.reader import read_sessions

    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "pkg__pkg-1.traj").write_text(json.dumps(traj(run), indent=2), "utf-8")
    (tmp_path / "run1" / "notes.md").write_text("not a session", "utf-8")
    tau = [{"task_id": 0, "trial": 0, "reward": 1.0, "traj": traj("x")["history"]}]
    (tmp_path / "tau.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(tau, indent=1).encode())
    formats.write(SESSIONS[:2], tmp_path / "run1" / "chat.jsonl", "openai-chat")
    (tmp_path / "run1" / "bare.jsonl").write_text(json.dumps(traj("y")["history"]) + "\n")
    result = read_sessions(tmp_path)
    ids = result.transcript.session_ids()
    assert ids == ["run1/bare:1", SESSIONS[0].id, SESSIONS[1].id, "run1/pkg__pkg-1",
                   "run2/pkg__pkg-1", "tau-0-0"]  # fmt: skip
    # the Python adapter names a line the same way when given the same name
    assert formats.read(tmp_path / "run1" / "bare.jsonl", name="run1/bare")[0].id == "run1/bare:1"
    status = {Path(f.path).relative_to(tmp_path).as_posix(): (f.status, f.format)
              for f in result.files}  # fmt: skip
    assert status == {
        "run1/bare.jsonl": ("read", "openai-chat"),
        "run1/chat.jsonl": ("read", "openai-chat"),
        "run1/notes.md": ("skipped", None),
        "run1/pkg__pkg-1.traj": ("read", "swe-agent"),
        "run2/pkg__pkg-1.traj": ("read", "swe-agent"),
        "tau.json": ("read", "tau-bench"),
    }
    assert result.sessions == 6 and result.lines == 6
    # the scans take it: every session contiguous under its own id
    assert cc.estimate_messages(result.transcript).messages.num_rows > 0
    # a document read alone keeps its file-name id; the folder name is the caller's choice
    assert formats.read(tmp_path / "run1" / "pkg__pkg-1.traj")[0].id == "pkg__pkg-1"
    assert formats.read(tmp_path / "run1" / "pkg__pkg-1.traj", name="r/x")[0].id == "r/x"
    with pytest.raises(FormatError, match="not a session file"):
        read_sessions(tmp_path / "run1" / "notes.md")
    (tmp_path / "none").mkdir()
    with pytest.raises(FormatError, match="no session files"):
        read_sessions(tmp_path / "none")


def test_what_a_folder_holds_but_no_file_is_named_not_silently_left_out(tmp_path: Path) -> None:
    """A broken link, a pipe and a linked folder were left out without a word
    (only files of other extensions were reported as skipped)."""
    import os

    from ctxcompact.formats.reader import iter_sessions, jsonl_files, read_sessions

    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    runs.mkdir()
    elsewhere.mkdir()
    formats.write(SESSIONS[:1], runs / "a.jsonl", "openai-chat")
    formats.write(SESSIONS[1:2], elsewhere / "b.jsonl", "openai-chat")
    (runs / "x.json").symlink_to(tmp_path / "gone.json")
    os.mkfifo(runs / "pipe.jsonl")  # never opened: reading it would block
    (runs / "linked").symlink_to(elsewhere)
    result = read_sessions(runs)
    status = {Path(f.path).name: (f.status, f.reason) for f in result.files}
    assert status["a.jsonl"][0] == "read" and result.sessions == 1
    assert status["x.json"] == ("skipped", f"a broken symbolic link (to {tmp_path / 'gone.json'})")
    assert status["pipe.jsonl"] == ("skipped", "not a regular file (a named pipe)")
    assert status["linked"][0] == "skipped" and "link to a folder: not followed" in status[
        "linked"][1]  # fmt: skip
    assert jsonl_files(runs) == [runs / "a.jsonl"]
    assert {Path(f.path).name for f in list(iter_sessions(runs))[-1].files} == set(status)
    # given by itself, the linked folder is read
    assert read_sessions(runs / "linked").sessions == 1


def test_a_repeated_session_id_is_refused_at_once(tmp_path: Path) -> None:
    from ctxcompact.formats.reader import read_sessions

    twice = [SESSIONS[0], SESSIONS[1], SESSIONS[0]]
    with pytest.raises(DuplicateSessionError, match=repr(SESSIONS[0].id)) as info:
        cc.Transcript.from_sessions(twice)
    assert "sessions 0 and 2" in str(info.value)
    assert info.value.session_id == SESSIONS[0].id and info.value.row == 2
    assert isinstance(info.value, NonContiguousError)
    # across files: the later document fails the run, or is rejected whole under skip
    (tmp_path / "a.json").write_text(json.dumps({"id": "c", "messages": []}), "utf-8")
    (tmp_path / "b.json").write_text(json.dumps({"id": "c", "messages": []}), "utf-8")
    with pytest.raises(DuplicateSessionError, match=r"b.json: session id 'c' was already read"):
        read_sessions(tmp_path)
    result = read_sessions(tmp_path, on_error="skip")
    assert result.transcript.session_ids() == ["c"]
    assert [(Path(r.path).name, r.line) for r in result.rejected] == [("b.json", 0)]


def test_a_byte_order_mark_is_read_by_both_readers(tmp_path: Path) -> None:
    for name, text in (("bom.jsonl", json.dumps(GOOD) + "\n"), ("bom.json", json.dumps(GOOD))):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert [s.id for s in formats.read(tmp_path / name)] == ["s1"]
    assert read_jsonl(tmp_path / "bom.jsonl").transcript.session_ids() == ["s1"]
    # a document of nothing but whitespace is no document (issue 37, item 5)
    (tmp_path / "blank.json").write_text("  \n", "utf-8")
    with pytest.raises(FormatError, match=r"blank\.json: an empty file"):
        formats.read(tmp_path / "blank.json")


# --- the command line on any input ----------------------------------------------------------


def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        *args: str) -> tuple[int, Any, str]:  # fmt: skip
    from cli_run import invoke

    code, out, err = invoke(monkeypatch, capsys, *args, "--json")
    return code, (json.loads(out) if code == 0 else None), " ".join(err.split())


def test_the_cli_reads_session_folders_in_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "runs"
    (src / "run1").mkdir(parents=True)
    (src / "run2").mkdir()
    for run in ("run1", "run2"):
        (src / run / "t.traj").write_text(json.dumps(traj(run), indent=2), "utf-8")
    (src / "README.md").write_text("#", "utf-8")
    out = tmp_path / "rows.parquet"
    code, res, err = cli(monkeypatch, capsys, "ingest", str(src), "-o", str(out))
    assert code == 0 and (res["sessions"], res["lines"], res["format"]) == (2, 2, "swe-agent")
    assert (res["files_swe-agent"], res["files_skipped"]) == (2, 1)
    assert {(Path(f["path"]).name, f["status"]) for f in res["per_file"]} == {
        ("t.traj", "read"), ("README.md", "skipped")}  # fmt: skip
    assert "skipped: " in err and "README.md" in err
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == res["rows"] > 0
    code, est, _ = cli(monkeypatch, capsys, "estimate", str(src))
    assert code == 0 and est["sessions"] == 2 and est["format"] == "swe-agent"
    assert est["tokens"] == cc.estimate_messages(pq.read_table(out)).total > 0
    for command in ("prune", "filter", "compact"):
        code, res, _ = cli(monkeypatch, capsys, command, str(src))
        assert code == 0 and res["sessions"] == 2, command
    code, res, _ = cli(monkeypatch, capsys, "batch", str(src), "-o", str(tmp_path / "b.parquet"))
    assert code == 0 and res["format"] == "swe-agent" and res["sessions"] == 2
    code, res, _ = cli(monkeypatch, capsys, "convert", str(src), str(tmp_path / "c.parquet"),
                       "--to", "parquet")  # fmt: skip
    assert code == 0 and res["sessions"] == 2
    assert pq.read_table(tmp_path / "c.parquet").equals(pq.read_table(out))


def test_the_cli_ingests_a_mixed_folder_and_skips_an_undetectable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    formats.write(SESSIONS[:3], tmp_path / "a-chat.jsonl", "openai-chat")
    claude_file(tmp_path / "b-claude.jsonl")
    (tmp_path / "c-bad.jsonl").write_bytes(b"\n{oops\n")
    out = tmp_path / "_o.parquet"  # a name the folder's readers skip (else refused: mixed)
    code, _, err = cli(monkeypatch, capsys, "ingest", str(tmp_path), "-o", str(out))
    assert code == 1 and "c-bad.jsonl:2: cannot tell the format" in err
    code, res, err = cli(monkeypatch, capsys, "ingest", str(tmp_path), "-o", str(out),
                         "--on-error", "skip")  # fmt: skip
    assert code == 0 and (res["sessions"], res["rejected"]) == (5, 1)
    assert res["format"] == "openai-chat, claude-code"
    assert [(Path(f["path"]).name, f["status"], f["format"]) for f in res["per_file"]] == [
        ("a-chat.jsonl", "read", "openai-chat"), ("b-claude.jsonl", "read", "claude-code"),
        ("c-bad.jsonl", "rejected", None)]  # fmt: skip
    assert "rejected: " in err and "c-bad.jsonl" in err
    code, _, err = cli(monkeypatch, capsys, "ingest", str(tmp_path / "a-chat.jsonl"), "-o",
                       str(out), "--format", "claude-code")  # fmt: skip
    assert code == 1 and "a-chat.jsonl:1: not a Claude Code event" in err


@pytest.mark.skipif(not (DATA / "transcripts").is_dir(), reason="no ../shared/data")
def test_every_session_of_the_shared_transcripts_folder_is_read(tmp_path: Path) -> None:
    from ctxcompact.formats.reader import read_sessions

    root = DATA / "transcripts"
    result = read_sessions(root)
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    expected = sum(len(formats.read(p)) for p in files if p.suffix in (".json", ".traj", ".jsonl"))
    assert result.sessions == len(result.transcript.session_ids()) == expected > 200
    skipped = {Path(f.path).name for f in result.files if f.status == "skipped"}
    assert {"README.md", "LICENSE", "SOURCE.txt"} <= skipped
    assert len(result.files) == len(files) and result.rejected == []
    swe = read_sessions(root / "swe-agent")
    assert len(swe.transcript.session_ids()) == 28
    assert cc.estimate_messages(swe.transcript).total > 100_000
