"""Format adapters: every real sample loads, round trips, and runs through the scans."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats import detect_format, read, to_openai_chat, write
from ctxcompact.scans import INTERRUPTED_TOOL, estimate_chat_messages, validate_chat_messages

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SAMPLES = sorted(
    p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl", ".traj") and p.is_file()
) if DATA.exists() else []  # fmt: skip
needs_data = pytest.mark.skipif(not SAMPLES, reason="../shared/data is not beside this checkout")


def without_junk(path: Path, tmp_path: Path) -> Path:
    """A copy of a Claude Code file with only its events (objects with a ``type``)."""
    lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    keep = [line for line in lines if isinstance(json.loads(line), dict) and "type" in line]
    out = tmp_path / path.name
    out.write_text("".join(line + "\n" for line in keep), "utf-8")
    return out


def _canon(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True)


def original_and_back(path: Path) -> tuple[list[str], list[str]]:
    sessions = read(path)
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        fmt = formats.jsonl_format(lines[0])
        if fmt == "claude-code":
            back = [e for s in sessions for e in formats.to_claude_code(s)]
        else:
            # A resolver record comes back whole, its history in its place.
            back = [formats.to_openhands(s) for s in sessions]
        return sorted(map(_canon, lines)), sorted(map(_canon, back))
    obj = json.loads(path.read_text())
    fmt = detect_format(obj)
    writers = {
        "tau-bench": lambda: formats.to_tau_bench(sessions),
        "swe-agent": lambda: formats.to_swe_agent(sessions[0]),
        "mini-swe-agent": lambda: formats.to_mini_swe_agent(sessions[0]),
        "openhands": lambda: formats.to_openhands(sessions[0]),
        "openai-chat": lambda: formats.to_openai_chat(sessions[0]),
    }
    return [_canon(obj)], [_canon(writers[fmt]())]


@needs_data
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_real_sample_round_trips_and_scans(path: Path, tmp_path: Path) -> None:
    if path.name == "edge_cases.jsonl":
        # junk lines on purpose (lines 13-16): not Claude Code events, so bad lines
        with pytest.raises(FormatError, match=r"edge_cases.jsonl:13: not a Claude Code event"):
            read(path)
        path = without_junk(path, tmp_path)
    original, back = original_and_back(path)
    assert back == original
    sessions = read(path)
    assert sessions
    table = cc.Transcript.from_sessions(sessions)
    assert cc.Transcript(table.to_arrow()).to_sessions() == sessions  # columnar is lossless too
    cc.prune(table)
    cc.filter_pivot(table)
    # The batch estimate is the size of what the model is sent (0 when nothing is).
    assert cc.estimate_messages(table).total == sum(
        estimate_chat_messages(cc.to_model_messages(s)) for s in sessions
    )
    for session in sessions:
        validate_chat_messages(
            [m for m in to_openai_chat(session) if m["role"] != "user" or "content" in m]
        )


@needs_data
def test_real_tool_calls_are_folded_with_their_results(tmp_path: Path) -> None:
    runs = read(DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json")
    tools = [p for s in runs for m in s.messages for p in m.parts if p.type == "tool"]
    assert len(tools) > 500
    assert all(p.state and p.state.status == "completed" and p.state.output is not None
               for p in tools)  # fmt: skip
    edge = DATA / "formats" / "claude-code" / "claude-code-log" / "edge_cases.jsonl"
    claude = read(without_junk(edge, tmp_path))
    statuses = {p.state.status for s in claude for m in s.messages for p in m.parts if p.state}
    assert "error" in statuses  # an is_error tool_result


CHAT: list[dict[str, Any]] = [
    {"role": "developer", "content": "be careful"},
    {"role": "user", "content": [{"type": "text", "text": "look"},
                                 {"type": "image_url", "image_url": {"url": "data:x"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p":1}'}},
        {"id": "b", "type": "function", "function": {"name": "grep", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "a", "content": "one", "name": "read"},
    {"role": "tool", "tool_call_id": "b", "content": "two"},
    {"role": "assistant", "content": "done", "refusal": None},
    {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
]  # fmt: skip


def test_openai_chat_round_trip_edge_cases() -> None:
    session = formats.from_openai_chat(CHAT, "s")
    assert to_openai_chat(session) == CHAT
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "assistant", "user"]
    call = session.messages[2].parts[0]
    assert (call.tool, call.callID, call.state.status, call.state.output) == (  # type: ignore[union-attr]
        "read", "a", "completed", "one")  # fmt: skip


def test_call_without_result_is_pending_and_renders_interrupted() -> None:
    call = {"id": "x", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]}]  # fmt: skip
    session = formats.from_openai_chat(chat, "s")
    assert to_openai_chat(session) == chat
    sent = cc.to_model_messages(session)
    assert sent[-1] == {"role": "tool", "tool_call_id": "x", "content": INTERRUPTED_TOOL}


def test_anthropic_request_round_trip() -> None:
    body = {"model": "claude", "system": "sys", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
            {"type": "text", "text": "oops"}]},
    ]}  # fmt: skip
    session = formats.from_anthropic(body, "s")
    assert formats.to_anthropic(session) == body
    tool = session.messages[2].parts[2]
    assert tool.state.status == "error" and tool.state.error == "boom"  # type: ignore[union-attr]
    assert [p.type for p in session.messages[2].parts] == ["reasoning", "text", "tool"]


def test_write_then_read_every_format(tmp_path: Path) -> None:
    session = formats.from_openai_chat(CHAT[:6], "s1")
    for fmt, name in [("openai-chat", "x.jsonl"), ("opencode", "x.jsonl"),
                      ("openai-chat", "one.json")]:  # fmt: skip
        write([session], tmp_path / name, fmt)
        again = read(tmp_path / name, fmt)
        assert to_openai_chat(again[0]) == to_openai_chat(session)


def test_bad_input_names_file_line_and_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "messages": []}\n{not json\n')
    with pytest.raises(FormatError, match=r"bad\.jsonl:2") as e:
        read(bad)
    assert e.value.row == 2
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"id": "a", "messages": []}\n{"id": "b\xff", "messages": []}\n')
    with pytest.raises(FormatError, match=r"broken\.jsonl:2: not valid UTF-8") as e:
        read(broken)
    assert e.value.row == 2
    with pytest.raises(FormatError, match="unknown role"):
        formats.from_openai_chat([{"role": "robot", "content": "x"}])
    with pytest.raises(FormatError, match="no role"):
        formats.from_openai_chat([{"content": "x"}])
    with pytest.raises(FormatError, match="cannot tell"):
        detect_format({"what": 1})
    with pytest.raises(FileNotFoundError, match=r"missing\.json"):
        read(tmp_path / "missing.json")
    with pytest.raises(FormatError, match="unknown format"):
        write([], tmp_path / "x.json", "yaml")


@needs_data
def test_utf16_input_is_named(tmp_path: Path) -> None:
    # was "not valid UTF-8 (invalid start byte at byte 0)"
    from ctxcompact.formats.reader import read_jsonl

    runs = json.loads((DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json").read_text())
    doc, lines = tmp_path / "runs.json", tmp_path / "runs.jsonl"
    doc.write_text(json.dumps(runs), encoding="utf-16")  # with its byte order mark
    lines.write_text(json.dumps(runs) + "\n", encoding="utf-16")
    says = "UTF-16 text (convert to UTF-8)"
    with pytest.raises(FormatError, match=rf"runs\.json: {re.escape(says)}"):
        read(doc)
    with pytest.raises(FormatError, match=rf"runs\.jsonl:1: {re.escape(says)}"):
        read(lines)
    for forced in (None, "tau-bench"):  # the native reader, detected or forced
        with pytest.raises(FormatError, match=rf"runs\.jsonl:1: {re.escape(says)}"):
            read_jsonl(lines, forced)


BAD_ARGUMENTS = ['{"path": "/very/long/path/that/was/cut', '["a", "b"]', '"a string"', "3",
                 "ls -la /tmp", ["a"]]  # fmt: skip


BAD_WHY = [
    "the arguments are not valid JSON (cut off?)",
    "the arguments hold an array, not a JSON object",
    "the arguments hold a string, not a JSON object",
    "the arguments hold a number, not a JSON object",
    "the arguments are not valid JSON (cut off?)",
    "the arguments are an array, not a string holding a JSON object",
]


@pytest.mark.parametrize(("arguments", "why"), list(zip(BAD_ARGUMENTS, BAD_WHY, strict=True)))
def test_tool_arguments_that_are_not_an_object_are_kept_with_why(
    tmp_path: Path, arguments: Any, why: str
) -> None:
    # were a FormatError refusing the whole file (b1b9ed9): a call cut off by
    # max_tokens lost the transcript; now input {} and the raw arguments with
    # why in the tool state's metadata, as the live path keeps a reply's
    from ctxcompact.formats.reader import read_jsonl

    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    chat = [{"role": "user", "content": "do it"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]  # fmt: skip
    session = formats.from_openai_chat(chat, "s1")
    state = session.messages[1].parts[0].state
    assert state is not None and (state.status, state.input) == ("completed", {})
    assert state.metadata == {"arguments": arguments, "error": why}
    assert to_openai_chat(session) == chat
    lines = tmp_path / "chat.jsonl"
    lines.write_text(json.dumps({"id": "s1", "messages": chat}) + "\n")
    native = read_jsonl(lines, "openai-chat").transcript.to_sessions()
    assert native == read(lines, "openai-chat")
    assert native[0].messages[1].parts[0].state.metadata == state.metadata  # type: ignore[union-attr]
    raws = [arguments] if isinstance(arguments, str) else [arguments, json.dumps(arguments)]
    for raw in raws:
        items = [{"type": "function_call", "call_id": "c1", "name": "bash", "arguments": raw},
                 {"type": "function_call_output", "call_id": "c1", "output": "ok"}]  # fmt: skip
        session = formats.from_openai_responses(items, "s1")
        state = session.messages[0].parts[0].state
        assert state is not None and (state.status, state.input) == ("completed", {})
        want = BAD_WHY[1] if raw == '["a"]' else why
        assert state.metadata == {"arguments": raw, "error": want}
        assert formats.to_openai_responses(session) == items
        lines.write_text(json.dumps(items) + "\n")
        native = read_jsonl(lines, "openai-responses").transcript.to_sessions()
        assert native == read(lines, "openai-responses")


def test_blank_tool_arguments_are_no_arguments() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": " "}}
    chat = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    session = formats.from_openai_chat(chat, "s")
    assert session.messages[0].parts[0].state.input == {}  # type: ignore[union-attr]
    assert to_openai_chat(session) == chat


RESPONSES: list[dict[str, Any]] = [
    {"role": "developer", "content": "be brief"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}],
     "encrypted_content": "opaque"},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "read",
     "arguments": '{"path": "a"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "c1", "output": "contents"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "done", "annotations": []}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
]  # fmt: skip


def test_openai_responses_round_trip_and_model_input() -> None:
    assert detect_format(RESPONSES) == "openai-responses"
    session = read(RESPONSES)[0]
    assert formats.to_openai_responses(session) == RESPONSES
    call = session.messages[3].parts[0]
    assert (call.tool, call.state.status, call.state.output) == (  # type: ignore[union-attr]
        "read", "completed", "contents")  # fmt: skip
    assert [m["role"] for m in cc.to_model_messages(session)] == [
        "system", "user", "assistant", "tool", "assistant"]  # fmt: skip
    assert cc.Transcript(cc.Transcript.from_sessions([session]).to_arrow()).to_sessions() == [
        session
    ]


def test_langchain_round_trip() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    messages = [
        lc.SystemMessage("sys"), lc.HumanMessage("hi", id="h1"),
        lc.AIMessage("", id="a1", response_metadata={"model": "x"},
                     tool_calls=[{"id": "c1", "name": "read", "args": {"path": "a"}}]),
        lc.ToolMessage("contents", tool_call_id="c1"), lc.AIMessage("done", id="a2"),
    ]  # fmt: skip
    session = formats.from_langchain(messages, "s")
    assert formats.to_langchain(session) == messages
    (tool,) = [p for p in session.messages[2].parts if p.type == "tool"]
    assert tool.state.output == "contents"  # type: ignore[union-attr]
    with pytest.raises(FormatError, match="BaseMessage"):
        formats.from_langchain([{"role": "user"}])


def test_pydantic_ai_round_trip() -> None:
    pm = pytest.importorskip("pydantic_ai.messages")
    messages = [
        pm.ModelRequest(parts=[pm.SystemPromptPart(content="sys")]),
        pm.ModelRequest(parts=[pm.UserPromptPart(content="fix it")]),
        pm.ModelResponse(parts=[pm.ThinkingPart(content="hmm"), pm.TextPart(content="reading"),
                                pm.ToolCallPart(tool_name="read", args={"path": "a"},
                                                tool_call_id="c1")], model_name="m"),
        pm.ModelRequest(parts=[pm.ToolReturnPart(tool_name="read", content="contents",
                                                 tool_call_id="c1")]),
        pm.ModelResponse(parts=[pm.TextPart(content="done")]),
    ]  # fmt: skip
    session = formats.from_pydantic_ai(messages, "s")
    assert formats.to_pydantic_ai(session) == messages
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "user",
                                                  "assistant"]  # fmt: skip
    sent = cc.to_model_messages(session)
    assert {"role": "tool", "tool_call_id": "c1", "content": "contents"} in sent
    with pytest.raises(FormatError, match="pydantic-ai"):
        formats.from_pydantic_ai([{"not": "a message"}])


@pytest.mark.parametrize(
    ("fmt", "doc", "says"),
    [
        ("anthropic", [{"traj": []}], "an Anthropic request must be an object, got an array"),
        ("swe-agent", {"history": [{"role": "user", "content": "x"}, "bad"]},
         "history[1] must be an object, got a string"),
        ("swe-agent", {"history": [{"role": "user", "content": ["x"]}]},
         "message 0: content[0] must be an object, got a string"),
        ("openai-chat", [{"role": "user", "content": "x"}, {"role": "user", "content": 3}],
         "message 1: content must be a string, an array or null, got a number"),
        ("openai-chat", [{"role": "assistant", "tool_calls": ["x"]}],
         "message 0: tool_calls[0] must be an object, got a string"),
        ("openai-chat", 3, "must be an object or an array, got a number"),
        ("tau-bench", 5, "tau-bench results must be a list of runs, got a number"),
        ("tau-bench", [{"traj": [{"role": "assistant", "tool_calls": [{"function": 1}]}]}],
         "message 0: tool_calls[0].function must be an object, got a number"),
        ("openai-responses", [{"type": "message", "role": "user", "content": 3}],
         "item 0: content must be a string or a list of blocks (objects), got a number"),
        ("openhands", 7, "must be an object or an array, got a number"),
    ],
)  # fmt: skip
def test_adapter_errors_say_where_in_json_terms(fmt: str, doc: Any, says: str) -> None:
    # Issue 10 item 18: a wrong JSON type names the message and field, never a Python
    # exception ("'list' object has no attribute 'get'").
    with pytest.raises(FormatError) as caught:
        formats.read(doc, fmt)
    assert says in str(caught.value)
    assert "object has no attribute" not in str(caught.value)


def test_every_wrong_shape_is_a_format_error_in_json_terms() -> None:
    values: list[Any] = ["s", 3, None, [], {}, ["x"], [3], {"a": 1}, [{"role": 3}],
                         [{"role": "user", "content": 3}], [{"role": "user", "content": [3]}],
                         [{"role": "assistant", "tool_calls": 3}],
                         [{"role": "assistant", "tool_calls": ["x"]}],
                         [{"role": "assistant", "tool_calls": [{"function": 3}]}]]  # fmt: skip
    shapes: list[Any] = []
    for v in values:
        shapes += [v, {"messages": v}, {"history": v}, [{"traj": v}],
                   {"info": {"id": "s"}, "messages": v}, {"input": v},
                   [{"source": "user", "action": "message", "args": v}],
                   [{"type": "message", "role": "user", "content": v}],
                   {"messages": [{"role": "user", "content": v}]},
                   {"history": [{"role": "user", "content": v}]}]  # fmt: skip
    for fmt in formats.FORMATS:
        for doc in shapes:
            if isinstance(doc, str):  # a path: a missing file is an OSError
                with pytest.raises(FileNotFoundError):
                    formats.read(doc, fmt)
                continue
            try:
                formats.read(doc, fmt)
            except FormatError as e:
                assert "Error:" not in str(e) and "object has no" not in str(e), (fmt, doc, e)


def test_an_orphan_chat_tool_result_is_written_as_a_responses_item_that_reads_back(
    tmp_path: Path,
) -> None:
    # was written as {"type": "message", "role": "tool", ...}, which the
    # Responses readers refuse ("unknown role"), while the chat reader keeps it
    from ctxcompact.formats.reader import read_jsonl

    chat = [{"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "x", "content": "late result"},
            {"role": "tool", "tool_call_id": "y", "content": [{"type": "text", "text": "r"}]},
            {"role": "assistant", "content": "ok"}]  # fmt: skip
    session = formats.from_openai_chat(chat, "s")
    items = formats.to_openai_responses(session)
    assert items[1:3] == [
        {"type": "function_call_output", "call_id": "x", "output": "late result"},
        {"type": "function_call_output", "call_id": "y",
         "output": json.dumps([{"type": "text", "text": "r"}])},
    ]  # fmt: skip
    back = formats.from_openai_responses(items, "s")
    assert [m.role for m in back.messages] == ["user", "user", "user", "assistant"]
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(items) + "\n")
    assert read_jsonl(path, "openai-responses").transcript.to_sessions() == read(
        path, "openai-responses"
    )
