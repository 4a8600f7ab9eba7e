"""Claude Code files as Claude Code writes them: one line per content block of a
model call (the lines share ``message.id`` and repeat its usage), hook
``progress`` records before the conversation, and the bad lines such files may
hold (two objects glued on one line, JSON nested past the parser's limit, a key
given twice). Both readers (the native one and ``formats.read``) and replay."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.anthropic import from_claude_code
from ctxcompact.formats.reader import read_jsonl
from ctxcompact.models import AssistantMessage, SessionInfo
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.view import to_model_messages
from ctxcompact.tuning.replay import replay
from test_ingest import DATA, assert_same_as_python, write_lines

SAMPLE = DATA / "formats" / "claude-code" / "claude-code-log" / "todowrite_examples.jsonl"
needs_sample = pytest.mark.skipif(not SAMPLE.is_file(), reason="no ../shared/data")

USAGE = {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000,
         "output_tokens": 5}  # fmt: skip


def line(uuid: str, role: str, content: Any, call: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if call is not None:
        message.update(id=call, type="message", model="claude-x", stop_reason=None,
                       usage=dict(USAGE))  # fmt: skip
    return {"type": role, "uuid": uuid, "sessionId": "s", "message": message}


def one_call_in_four_lines() -> list[dict[str, Any]]:
    """A model call whose blocks are written one a line (text, tool_use), the
    first call's result, the call's next tool_use, its result, then a second call."""
    return [
        line("u1", "user", "list files"),
        line("a1", "assistant", [{"type": "text", "text": "Let me look."}], "msg_1"),
        line(
            "a2",
            "assistant",
            [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
            "msg_1",
        ),
        line("r1", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]),
        line(
            "a3",
            "assistant",
            [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pwd"}}],
            "msg_1",
        ),
        line("r2", "user", [{"type": "tool_result", "tool_use_id": "t2", "content": "/x"}]),
        line("a4", "assistant", [{"type": "text", "text": "Done."}], "msg_2"),
    ]


def check_one_call(session: cc.Session) -> None:
    assistants = [m for m in session.messages if isinstance(m.info, AssistantMessage)]
    # was 4 assistant messages: one a line
    assert [m.id for m in assistants] == ["a1", "a4"]
    call = assistants[0]
    assert [(p.id, p.type, p.callID) for p in call.parts] == [
        ("a1-p00", "text", None), ("a1-p01", "tool", "t1"), ("a1-p02", "tool", "t2")]  # fmt: skip
    assert [p.state.output for p in call.parts[1:] if p.state] == ["a.txt", "/x"]
    # the usage once: the first line's, which the others repeat
    assert call.info.tokens is not None and call.info.tokens.input == 10
    assert [m.id for m in session.messages] == ["u1", "a1", "r1", "r2", "a4"]
    # the model view: every call of the message is answered after it
    view = to_model_messages(session)
    roles = [m["role"] for m in view]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"], view
    assert [c["id"] for c in view[1]["tool_calls"]] == ["t1", "t2"]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_the_lines_of_one_model_call_are_one_message(tmp_path: Path, on_error: str) -> None:
    path = write_lines(tmp_path / "calls.jsonl", one_call_in_four_lines())
    [python] = formats.read(path)
    check_one_call(python)
    got = read_jsonl(path, on_error=on_error, chunk_bytes=64)  # type: ignore[arg-type]
    assert got.rejected == []
    [native] = cc.Transcript(got.table).to_sessions()
    check_one_call(native)
    assert_same_as_python(path, "claude-code", chunk_bytes=64)


def test_replay_counts_one_call_per_message_id(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "calls.jsonl", one_call_in_four_lines())
    for sessions in (formats.read(path), cc.Transcript(read_jsonl(path).table).to_sessions()):
        out = replay(sessions, limits=Limits(context=200_000))
        assert out.calls.num_rows == 2  # was 4
        assert out.calls.column("message_id").to_pylist() == ["a1", "a4"]


def test_replay_counts_one_call_per_message_id_in_a_table_of_one_message_a_line() -> None:
    # A table ingested before the readers merged a call's lines holds a message a line.
    messages = [from_claude_code([e], "s").messages[0] for e in one_call_in_four_lines()]
    session = cc.Session(info=SessionInfo(id="s"), messages=messages)
    assert sum(m.role == "assistant" for m in session.messages) == 4
    out = replay(session, limits=Limits(context=200_000))
    assert out.calls.column("message_id").to_pylist() == ["a1", "a4"]  # was a1, a2, a3, a4


@needs_sample
def test_a_real_sample_written_one_block_a_line_reads_as_its_calls(tmp_path: Path) -> None:
    # The sample's assistant text and tool_use lines are separate calls there;
    # given one id each pair (as Claude Code writes one call's blocks), the
    # pair is one call: one assistant message, one replayed call per id.
    events = [json.loads(raw) for raw in SAMPLE.read_text().splitlines() if raw.strip()]
    written = copy.deepcopy(events)
    previous: dict[str, Any] | None = None
    for event in written:
        message = event.get("message")
        if event.get("type") != "assistant" or not isinstance(message, dict):
            previous = None
            continue
        if previous is not None and isinstance(message.get("content"), list):
            message["id"] = previous["message"]["id"]
            message["usage"] = previous["message"].get("usage")
        previous = event
    calls = {e["message"]["id"] for e in written if e.get("type") == "assistant"}
    lines = sum(e.get("type") == "assistant" for e in written)
    assert len(calls) < lines  # the sample holds text-then-tool_use pairs
    path = write_lines(tmp_path / SAMPLE.name, written)
    for sessions in (formats.read(path), cc.Transcript(read_jsonl(path).table).to_sessions()):
        assistants = [m for s in sessions for m in s.messages if m.role == "assistant"]
        assert len(assistants) == len(calls)
        out = replay(sessions, limits=Limits(context=200_000))
        assert out.calls.num_rows == len(calls)
    assert_same_as_python(path, "claude-code", chunk_bytes=64)


def test_the_native_fast_and_serde_paths_merge_alike(tmp_path: Path) -> None:
    # a line the fast path is unsure of (an image block) sends the file to serde_json
    events = one_call_in_four_lines()
    events[4]["message"]["content"].append({"type": "image", "source": {"type": "url"}})
    path = write_lines(tmp_path / "calls.jsonl", events)
    [native] = cc.Transcript(read_jsonl(path).table).to_sessions()
    assert [p.type for p in native.messages[1].parts] == ["text", "tool", "tool", "file"]
    assert_same_as_python(path, "claude-code", chunk_bytes=64)


PROGRESS = {"type": "progress", "sessionId": "s", "uuid": "p1", "parentUuid": None,
            "data": {"type": "hook_progress", "hookEvent": "SessionStart"},
            "timestamp": "2025-01-01T00:00:00Z"}  # fmt: skip


def test_a_file_that_opens_with_hook_progress_records_is_detected(tmp_path: Path) -> None:
    events = [PROGRESS, {**PROGRESS, "uuid": "p2"}, *one_call_in_four_lines()]
    path = write_lines(tmp_path / "progress.jsonl", events)
    # was "cannot tell which session format this is; pass format="
    [python] = formats.read(path)
    got = read_jsonl(path)
    assert got.files[0].format == "claude-code"
    [native] = cc.Transcript(got.table).to_sessions()
    for session in (python, native):
        # never model input: a note with no part
        assert [m.role for m in session.messages[:2]] == ["system", "system"]
        assert session.messages[0].parts == []
    assert_same_as_python(path, "claude-code")


GLUED = (
    '{"type":"user","uuid":"g1","sessionId":"s","message":{"role":"user","content":"a"}}'
    '{"type":"user","uuid":"g2","sessionId":"s","message":{"role":"user","content":"b"}}'
)


def refused_at_line_2(path: Path, error: str, native_error: str | None = None) -> Any:
    """``formats.read`` refuses ``path`` at its line 2 with ``error``, the
    native ``read_jsonl`` with ``native_error`` (default the same); skip mode
    leaves that line out and names it. The skip-mode result."""
    with pytest.raises(FormatError, match=error):
        formats.read(path)
    with pytest.raises(FormatError, match=native_error or error):
        read_jsonl(path)
    got = read_jsonl(path, on_error="skip")
    assert [r.line for r in got.rejected] == [2]
    return got


def test_two_objects_glued_on_one_line_are_a_bad_line(tmp_path: Path) -> None:
    # Decided: not split (a line is one event); the line is named and refused.
    ok = json.dumps(line("u1", "user", "hi"))
    path = tmp_path / "glued.jsonl"
    path.write_text(f"{ok}\n{GLUED}\n{ok.replace('u1', 'u3')}\n")
    got = refused_at_line_2(
        path, r"glued\.jsonl:2: not valid JSON", r"glued\.jsonl:2: not valid JSON \(trailing"
    )
    assert got.table.column("message_id").to_pylist() == ["u1", "u3"]


DEEP = 200_000


def deep_line() -> str:
    nested = "[" * DEEP + "]" * DEEP
    return ('{"type":"user","uuid":"d1","sessionId":"s","message":{"role":"user","content":'
            '[{"type":"text","text":"x","extra":' + nested + "}]}}")  # fmt: skip


def test_json_nested_past_the_limit_is_a_format_error_naming_file_and_line(
    tmp_path: Path,
) -> None:
    ok = json.dumps(line("u1", "user", "hi"))
    path = tmp_path / "deep.jsonl"
    path.write_text(f"{ok}\n{deep_line()}\n")
    # was RecursionError from the Python reader
    got = refused_at_line_2(path, r"deep\.jsonl:2: not valid JSON \(nested too deeply")
    assert "nested too deeply" in got.rejected[0].error
    # the first line decides the format: a deep first line is named too
    first = tmp_path / "deepfirst.jsonl"
    first.write_text(f"{deep_line()}\n{ok}\n")
    with pytest.raises(FormatError, match=r"deepfirst\.jsonl:1: .*nested too deeply"):
        read_jsonl(first)
    with pytest.raises(FormatError, match=r"deepfirst\.jsonl:1: .*nested too deeply"):
        formats.read(first)


def test_a_deeply_nested_json_column_is_a_format_error_naming_its_row(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "calls.jsonl", one_call_in_four_lines())
    table = read_jsonl(path).table
    deep = '{"extra":' + "[" * DEEP + "]" * DEEP + "}"
    for column in ("part_json", "message_json"):
        values = table.column(column).to_pylist()
        values[1] = deep
        bad = table.set_column(table.schema.get_field_index(column), column,
                               pa.array(values, table.schema.field(column).type))  # fmt: skip
        # the Python path (sessions from the table), was RecursionError
        with pytest.raises(FormatError, match=rf"{column} is not valid JSON \(nested too deeply"):
            cc.Transcript(bad).to_sessions()
    # the native path (the model view reads part_json of a text part naming "ignored")
    values = table.column("part_json").to_pylist()
    values[1] = '{"ignored":true,"extra":' + "[" * DEEP + "]" * DEEP + "}"
    bad = table.set_column(table.schema.get_field_index("part_json"), "part_json",
                           pa.array(values, table.schema.field("part_json").type))  # fmt: skip
    with pytest.raises(FormatError, match=r"part_json of row 1 .*nested too deeply"):
        cc.estimate_messages(bad)


def test_the_cli_names_a_deeply_nested_line_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(f"{deep_line()}\n")
    for args in (["convert", str(path), str(tmp_path / "out.json"), "--to", "openai-chat"],
                 ["estimate", str(path)]):  # fmt: skip
        run = subprocess.run([sys.executable, "-m", "ctxcompact.cli", *args],
                             capture_output=True, text=True)  # fmt: skip
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr
        assert "deep.jsonl:1" in run.stderr and "nested too deeply" in run.stderr


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_key_given_twice_keeps_its_last_value_in_both_readers(
    tmp_path: Path, on_error: str
) -> None:
    # Decided: the last value wins (Python's json and serde_json alike), in place of the first.
    path = tmp_path / "twice.jsonl"
    path.write_text(
        '{"type":"user","uuid":"a","uuid":"b","sessionId":"s","message":'
        '{"role":"user","content":"first","content":"second"}}\n'
    )
    [python] = formats.read(path)
    got = read_jsonl(path, on_error=on_error)  # type: ignore[arg-type]
    assert got.rejected == []
    [native] = cc.Transcript(got.table).to_sessions()
    for session in (python, native):
        assert [m.id for m in session.messages] == ["b"]
        assert [p.text for p in session.messages[0].parts] == ["second"]
    assert_same_as_python(path, "claude-code")
