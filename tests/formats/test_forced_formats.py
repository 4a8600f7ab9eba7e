"""A forced format refuses another format's records (issue 10, item 1).

For every ordered pair (records of format A, format B forced), both readers
(``read_jsonl``, native, and ``formats.read``, the Python adapters) must
refuse: a ``FormatError`` naming the file and line (JSONL) or the file
(a document), or under ``on_error="skip"`` every line rejected and no row.
``LEGIT`` lists the pairs where the data really is valid in both formats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.chat import to_openai_chat
from ctxcompact.formats.reader import read_jsonl
from ctxcompact.models import Session

SESSION = Session.model_validate({"info": {"id": "s1"}, "messages": [
    {"info": {"id": "m1", "role": "user"},
     "parts": [{"id": "p1", "type": "text", "text": "fix it"}]},
    {"info": {"id": "m2", "role": "assistant", "parentID": "m1", "finish": "tool-calls"},
     "parts": [{"id": "p2", "type": "text", "text": "reading"},
               {"id": "p3", "type": "tool", "tool": "read", "callID": "c1",
                "state": {"status": "completed", "input": {"path": "a.py"}, "output": "body"}}]},
    {"info": {"id": "m3", "role": "assistant", "parentID": "m1", "finish": "stop"},
     "parts": [{"id": "p4", "type": "text", "text": "done"}]},
]})  # fmt: skip

EVENTS = [
    {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
    {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"},
     "tool_call_metadata": {"tool_call_id": "c1", "function_name": "execute_bash"}},
    {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1,
     "tool_call_metadata": {"tool_call_id": "c1"}},
    {"id": 3, "source": "agent", "action": "finish", "message": "done"},
]  # fmt: skip


def _records(fmt: str, tmp: Path) -> list[Any]:
    """The JSONL records ``formats.write`` makes of ``SESSION`` in ``fmt``."""
    session = formats.read(EVENTS, "openhands")[0] if fmt == "openhands" else SESSION
    if fmt == "mini-swe-agent":  # a chat list whose steps are in the text
        return [[{"role": "user", "content": "fix it"},
                 {"role": "assistant", "content": "```mswea_bash_command\nls\n```"},
                 {"role": "user", "content": "<returncode>0</returncode>"}]]  # fmt: skip
    path = tmp / f"{fmt}.jsonl"
    formats.write([session], path, fmt)
    text = path.read_text()
    if fmt == "tau-bench":  # written as one document: a list of runs
        return [json.loads(text)]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def samples(tmp: Path) -> dict[str, list[Any]]:
    """Records (JSONL lines) of every format, and the other shapes some formats take."""
    out = {fmt: _records(fmt, tmp) for fmt in formats.FORMATS}
    out["openai-chat/bare"] = [to_openai_chat(SESSION)]
    out["openai-chat/plain"] = [[{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": "hello"}]]  # fmt: skip
    out["openai-responses/input"] = [{"model": "m", "input": out["openai-responses"][0]}]
    out["openhands/record"] = [{"instance_id": "i1", "instruction": "fix", "history": EVENTS}]
    out["anthropic/text"] = [{"system": "be brief", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}]  # fmt: skip
    return out


#: (sample, forced format) pairs whose data is valid in both formats, and why.
LEGIT = {
    ("openai-chat/plain", "openai-responses"): "a list of {role, content} text messages is "
    "also Responses input in its short form",
    **{(chat, "mini-swe-agent"): "a mini-swe-agent trajectory is a chat message list (its "
       "steps are found in the text)" for chat in ("openai-chat", "openai-chat/bare",
                                                   "openai-chat/plain")},
    ("mini-swe-agent", "openai-chat"): "a mini-swe-agent trajectory is a chat session",
    ("mini-swe-agent", "openai-responses"): "its {role, content} text messages are also "
    "Responses input in its short form",
}  # fmt: skip

#: Formats of one record per line whose document is the list of the records.
PER_EVENT = ("opencode-messages", "claude-code")

NAMES = [*formats.FORMATS, "openai-chat/bare", "openai-chat/plain", "openai-responses/input",
         "openhands/record", "anthropic/text"]  # fmt: skip
PAIRS = [(a, b) for a in NAMES for b in formats.FORMATS if a.split("/")[0] != b]


def _files(tmp: Path, name: str) -> tuple[Path, Path, int]:
    records = samples(tmp)[name]
    stem = name.replace("/", "_")
    jsonl = tmp / f"{stem}.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    doc = tmp / f"{stem}.json"
    doc.write_text(json.dumps(records if name in PER_EVENT else records[0]))
    return jsonl, doc, len(records)


def test_every_sample_reads_in_its_own_format(tmp_path: Path) -> None:
    for name in NAMES:
        jsonl, doc, _ = _files(tmp_path, name)
        fmt = name.split("/")[0]
        assert formats.jsonl_format(json.loads(jsonl.read_text().splitlines()[0])) == fmt
        got = read_jsonl(jsonl, fmt)
        assert got.rejected == [] and got.table.num_rows > 0, name
        assert len(formats.read(jsonl, fmt)) == got.sessions, name
        assert [s.messages for s in formats.read(doc, fmt)], name


@pytest.mark.parametrize(("name", "forced"), PAIRS)
def test_a_forced_format_refuses_records_of_another(tmp_path: Path, name: str, forced: str) -> None:
    jsonl, doc, lines = _files(tmp_path, name)
    if (name, forced) in LEGIT:
        got = read_jsonl(jsonl, forced)
        assert got.rejected == [] and got.table.num_rows > 0
        assert len(formats.read(jsonl, forced)) == got.sessions
        return
    # the native reader: the first line fails the run, or every line is rejected
    with pytest.raises(FormatError) as native:
        read_jsonl(jsonl, forced)
    assert str(native.value).startswith(f"{jsonl}:1: "), native.value
    skipped = read_jsonl(jsonl, forced, on_error="skip")
    assert skipped.table.num_rows == 0 and skipped.sessions == 0
    assert [r.line for r in skipped.rejected] == list(range(1, lines + 1))
    # the Python adapters, JSONL and document
    with pytest.raises(FormatError) as adapter:
        formats.read(jsonl, forced)
    assert str(adapter.value).startswith(f"{jsonl}:"), adapter.value
    with pytest.raises(FormatError) as document:
        formats.read(doc, forced)
    assert str(document.value).startswith(f"{doc}: "), document.value


@pytest.mark.parametrize(
    ("fmt", "record", "error"),
    [
        ("opencode", {"info": {"id": "m1", "sessionID": "s", "role": "user"}, "parts": []},
         "not an OpenCode session export: no 'messages' list"),
        ("openhands", [{"type": "message", "role": "user", "content": "hi"}],
         "not an openhands event: event 0 has no 'source', 'action' or 'observation' key"),
        ("openhands", {"history": [{"role": "assistant", "content": "x", "action": "ls"}]},
         "not an openhands event: event 0 has a 'role'"),
        ("openai-responses", [{"task_id": 1, "traj": []}],
         "not an OpenAI Responses item: item 0 has no 'type' or 'role'"),
        ("openai-responses", [{"type": "user", "uuid": "u", "message": {}}],
         "not OpenAI Responses input: no item is a message"),
        ("openai-chat", {"system": "s", "messages": [{"role": "user", "content": "x"}]},
         "not an OpenAI chat session: it has a top-level 'system'"),
        ("openai-chat", [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}],
         "is an Anthropic 'tool_result' block"),
        ("anthropic", {"messages": [{"role": "assistant", "content": None}]},
         "content must be a list of blocks or a string"),
        # a tool_result no earlier tool_use called: counted nowhere, refused
        ("anthropic", {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]},
         r'content\[1\] holds the tool_result of tool_use_id "t9", which no earlier message'),
    ],
)  # fmt: skip
def test_what_is_missing_is_said_by_both_readers(
    tmp_path: Path, fmt: str, record: Any, error: str
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(FormatError, match=error) as native:
        read_jsonl(path, fmt)
    assert str(native.value).startswith(f"{path}:1: ") and native.value.row == 1
    with pytest.raises(FormatError, match=error) as adapter:
        formats.read(path, fmt)
    assert str(adapter.value).startswith(f"{path}:1: ")


def test_writers_give_records_of_their_own_format(tmp_path: Path) -> None:
    """A chat session written as Responses or Anthropic: the tool call is an item
    of its own and an assistant turn without text has content, so it reads back."""
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type":
             "function", "function": {"name": "ls", "arguments": "{\"path\":  \".\"}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "a.py"}]  # fmt: skip
    session = formats.read(chat, "openai-chat", name="c")
    for fmt in ("openai-responses", "anthropic"):
        path = tmp_path / f"c.{fmt}.jsonl"
        formats.write(session, path, fmt)
        back = formats.read(path, fmt)[0]
        tools = [p for m in back.messages for p in m.parts if p.type == "tool"]
        assert [(t.tool, t.state and t.state.output) for t in tools] == [("ls", "a.py")], fmt
        assert read_jsonl(path, fmt).rejected == []


def test_an_empty_session_written_as_opencode_reads_back(tmp_path: Path) -> None:
    from ctxcompact.models import SessionInfo

    path = tmp_path / "empty.jsonl"
    formats.write([Session(info=SessionInfo(id="e"))], path, "opencode")
    assert [s.id for s in formats.read(path, "opencode")] == ["e"]
    assert read_jsonl(path, "opencode").sessions == 1


def test_an_orphaned_tool_result_is_refused_naming_its_message_and_block(tmp_path: Path) -> None:
    """The stored ``anthropic`` reader kept a ``tool_result`` whose
    ``tool_use_id`` no earlier ``tool_use`` made, counted nowhere (a chat
    list refused it); it now refuses it naming the file, line, session,
    message and block, and a result of an earlier message's call still reads."""
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}],
    }
    answer = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "the file"}],
    }
    good = {"messages": [{"role": "user", "content": "go"}, call, answer]}
    orphan = {
        "messages": [
            {"role": "user", "content": "go"},
            call,
            answer,
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "y"},
                ],
            },
        ]
    }
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(orphan) + "\n")
    with pytest.raises(FormatError) as native:
        read_jsonl(path, "anthropic")
    e = native.value
    assert str(e) == (
        f"{path}:2: messages[3].content[1] holds the tool_result of tool_use_id "
        '"t2", which no earlier message called'
    )
    assert (e.row, e.session_id, e.message_id) == (2, "x:2", "x:2-m000003")
    with pytest.raises(FormatError, match=r"message 3 content\[1\]") as adapter:
        formats.read(path, "anthropic")
    assert (adapter.value.row, adapter.value.message_id) == (2, "x:2-m000003")
    skipped = read_jsonl(path, "anthropic", on_error="skip")
    assert [r.line for r in skipped.rejected] == [2] and skipped.table.num_rows > 0
    # the good line alone: its result completes its call
    path.write_text(json.dumps(good) + "\n")
    state = formats.read(path, "anthropic")[0].messages[1].parts[0].state
    assert state is not None and (state.status, state.output) == ("completed", "the file")
    assert read_jsonl(path, "anthropic").rejected == []
