"""The native JSONL readers of the foreign formats against their Python adapters.

Random documents of each format (Claude Code events, Anthropic requests,
OpenAI Responses items, OpenHands streams, SWE-agent trajectories, tau-bench
runs) are written as JSONL and read both ways; ``assert_same_as_python``
compares the scan columns value for value and the sessions rebuilt from the
tables. The bad-input tests check what the native reader does with a line
the adapters cannot map: the first one fails the run, or it is left out as
if it were not in the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.reader import iter_jsonl, read_jsonl
from ctxcompact.formats.views import to_model_chat
from ctxcompact.scans.view import to_model_messages
from ctxcompact.transcript import targets_as_dictionary
from hypothesis import given
from hypothesis import strategies as st
from test_ingest import JSON, SETTINGS, TEXT, assert_same_as_python, chat_messages, write_lines

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
EXTRA = st.dictionaries(st.sampled_from(["x", "meta", "cache_control"]), JSON, max_size=1)
CALL_IDS = ["toolu_1", "toolu_2", "toolu_3"]


# --- Anthropic blocks and Claude Code events ---------------------------------------------


@st.composite
def tool_result(draw: st.DrawFn) -> dict[str, Any]:
    text = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})
    blocks = st.one_of(text, st.just({"type": "image"}), st.integers(0, 9))
    content = st.one_of(st.lists(blocks, min_size=2, max_size=3), TEXT, st.none(),
                        st.dictionaries(TEXT, st.integers(0, 9), max_size=2))  # fmt: skip
    result: dict[str, Any] = {"type": "tool_result",
                              "tool_use_id": draw(st.sampled_from([*CALL_IDS, "other"])),
                              "content": draw(content)}  # fmt: skip
    if draw(st.booleans()):
        result["is_error"] = draw(st.booleans())
    return result


@st.composite
def block(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use",
                                 "tool_result", "image", "document", "raw"]))  # fmt: skip
    extra = draw(EXTRA)
    if kind == "text":
        return {"type": "text", "text": draw(TEXT), **extra}
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(TEXT), "signature": "sig", **extra}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": draw(TEXT)}
    if kind == "tool_use":
        inputs = st.one_of(st.dictionaries(TEXT, JSON, max_size=2), st.none(), st.just({}))
        return {"type": "tool_use", "id": draw(st.sampled_from(CALL_IDS)), "name": "Bash",
                "input": draw(inputs), **extra}  # fmt: skip
    if kind == "tool_result":
        return draw(tool_result())
    if kind == "image":
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                            "data": "AAAA"}}  # fmt: skip
    if kind == "document":
        return {"type": "document", "source": {"type": "text", "data": draw(TEXT)}}
    return draw(st.one_of(st.integers(0, 9), TEXT))


CONTENT = st.one_of(TEXT, st.lists(block(), max_size=4))


@st.composite
def claude_events(draw: st.DrawFn) -> list[Any]:
    events: list[Any] = []
    for i in range(draw(st.integers(0, 10))):
        # (a line that is not an event is a bad line: test_ingest's forced-format test)
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "summary", "system"]))
        event: dict[str, Any] = {"type": kind}
        uuid = draw(st.sampled_from([f"u{i}", "u0", None, ""]))
        if uuid is not None:
            event["uuid"] = uuid
        if draw(st.integers(0, 3)) == 0:
            event["sessionId"] = draw(st.sampled_from(["sa", "sb", ""]))
        if kind == "summary":
            event["summary"] = draw(TEXT)
            event["leafUuid"] = "u0"
        elif kind == "system":
            event["content"] = draw(st.one_of(TEXT, st.none()))
            event["level"] = "info"
        else:
            message: dict[str, Any] = {"role": kind}
            if kind == "user" and draw(st.booleans()):  # results of the calls before
                message["content"] = draw(st.lists(tool_result(), min_size=1, max_size=2))
            elif kind == "assistant" and draw(st.booleans()):  # calls
                message["content"] = draw(st.lists(block().filter(
                    lambda b: isinstance(b, dict) and b["type"] == "tool_use"), min_size=1,
                    max_size=2))  # fmt: skip
            elif draw(st.integers(0, 4)):
                message["content"] = draw(CONTENT)
            if kind == "assistant":
                # the lines of one model call share its id: they make one message
                call = draw(st.sampled_from([None, "msg_a", "msg_b", ""]))
                if call is not None:
                    message["id"] = call
                event["parentUuid"] = draw(st.sampled_from([None, "u0"]))
                message["model"] = "claude-x"
                message["stop_reason"] = draw(st.sampled_from([None, "tool_use", "end_turn"]))
                if draw(st.booleans()):
                    message["usage"] = {
                        "input_tokens": draw(st.integers(0, 10**6)),
                        "output_tokens": draw(st.integers(0, 10**4)),
                        "cache_read_input_tokens": draw(st.one_of(st.none(), st.integers(0, 9))),
                    }
            event["message"] = message
            event.update(draw(st.dictionaries(st.sampled_from(["cwd", "isSidechain"]), JSON,
                                              max_size=1)))  # fmt: skip
        events.append(event)
    return events


@SETTINGS
@given(claude_events())
def test_claude_code_files_match_the_python_adapter(tmp_path: Path, events: list[Any]) -> None:
    if not events:
        return
    path = write_lines(tmp_path / "claude.jsonl", events)
    assert_same_as_python(path, "claude-code", chunk_bytes=64, threads=2)


@st.composite
def anthropic_request(draw: st.DrawFn) -> dict[str, Any]:
    turns = st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": CONTENT},
        optional={"id": TEXT},
    )
    request: dict[str, Any] = {"model": "claude-x", "messages": draw(st.lists(turns, max_size=5))}
    if draw(st.booleans()):
        request["system"] = draw(st.one_of(TEXT, st.lists(block(), max_size=2)))
    return request


def without_orphans(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` without the tool_result blocks no earlier tool_use called."""
    made: set[str] = set()

    def kept(content: Any) -> Any:
        if not isinstance(content, list):
            return content
        out = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                made.add(str(b.get("id")))
            if not (isinstance(b, dict) and b.get("type") == "tool_result"
                    and str(b.get("tool_use_id")) not in made):  # fmt: skip
                out.append(b)
        return out

    if "system" in request:
        request = {**request, "system": kept(request["system"])}
    return {**request, "messages": [{**t, "content": kept(t["content"])}
                                    for t in request["messages"]]}  # fmt: skip


@SETTINGS
@given(st.lists(anthropic_request(), min_size=1, max_size=3))
def test_anthropic_requests_match_the_python_adapter(
    tmp_path: Path, requests: list[dict[str, Any]]
) -> None:
    path = write_lines(tmp_path / "anthropic.jsonl", requests)
    try:
        formats.read(path, "anthropic")
    except FormatError as adapter:
        # a tool_result no earlier tool_use called: both readers refuse it, at its line
        with pytest.raises(FormatError) as native:
            read_jsonl(path, "anthropic", chunk_bytes=64)
        assert "which no earlier message called" in str(adapter)
        assert "which no earlier message called" in str(native.value)
        assert (native.value.row, native.value.message_id) == (adapter.row, adapter.message_id)
        # and read alike without them
        path = write_lines(tmp_path / "anthropic.jsonl", [without_orphans(r) for r in requests])
    assert_same_as_python(path, "anthropic", chunk_bytes=64)


# --- OpenAI Responses ----------------------------------------------------------------------


@st.composite
def responses_item(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["message", "short", "function_call", "function_call_output",
                                 "reasoning", "web_search_call"]))  # fmt: skip
    if kind in ("message", "short"):
        role = draw(st.sampled_from(["user", "assistant", "system", "developer"]))
        blocks = st.lists(st.one_of(
            st.fixed_dictionaries({"type": st.just("input_text"), "text": TEXT}),
            st.fixed_dictionaries({"type": st.just("input_image"), "image_url": TEXT}),
        ), max_size=2)  # fmt: skip
        item: dict[str, Any] = {"role": role, "content": draw(st.one_of(TEXT, blocks))}
        return item if kind == "short" else {"type": "message", **item}
    if kind == "function_call":
        arguments = st.one_of(st.dictionaries(TEXT, JSON, max_size=2).map(json.dumps),
                              st.just(""), st.just(" "), st.just("{}"),
                              # unreadable: input {}, the raw arguments with why in metadata
                              st.just("not json"), st.just("[1]"), st.just(3))  # fmt: skip
        return {"type": "function_call", "call_id": draw(st.sampled_from(CALL_IDS)),
                "name": "shell", "arguments": draw(arguments), "id": "fc"}  # fmt: skip
    if kind == "function_call_output":
        output = st.one_of(TEXT, st.dictionaries(TEXT, JSON, max_size=2), st.none())
        return {"type": "function_call_output", "call_id": draw(st.sampled_from([*CALL_IDS, "x"])),
                "output": draw(output)}  # fmt: skip
    if kind == "reasoning":
        summary = st.lists(st.fixed_dictionaries({"type": st.just("summary_text"),
                                                  "text": TEXT}), max_size=2)  # fmt: skip
        return {"type": "reasoning", "summary": draw(summary), "encrypted_content": "e"}
    return {"type": "web_search_call", "status": "completed", **draw(EXTRA)}


def _maps_an_item(items: list[dict[str, Any]]) -> bool:
    """Input of only unknown item types is not Responses input (test_forced_formats)."""
    known = ("message", "function_call", "function_call_output", "reasoning")
    return not items or any(i.get("type", "message") in known for i in items)


@SETTINGS
@given(st.lists(st.tuples(st.lists(responses_item(), max_size=6).filter(_maps_an_item),
                          st.booleans()), min_size=1, max_size=3))  # fmt: skip
def test_responses_lines_match_the_python_adapter(
    tmp_path: Path, lines: list[tuple[list[dict[str, Any]], bool]]
) -> None:
    docs = [{"model": "gpt-x", "input": items} if wrapped else items for items, wrapped in lines]
    path = write_lines(tmp_path / "responses.jsonl", docs)
    assert_same_as_python(path, "openai-responses", chunk_bytes=64)


# --- OpenHands, SWE-agent, tau-bench -------------------------------------------------------


@st.composite
def openhands_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "action", "tool_action", "observation", "env"]))
        event: dict[str, Any] = {"id": i, "timestamp": "t"}
        if kind == "user":
            event |= {"source": "user", "action": "message",
                      "args": {"content": draw(TEXT)}, "message": draw(TEXT)}  # fmt: skip
        elif kind == "action":
            event |= {"source": "agent", "action": "think", "message": draw(TEXT)}
        elif kind == "tool_action":
            event |= {"source": "agent", "action": "run", "args": {"command": draw(TEXT)},
                      "tool_call_metadata": {"tool_call_id": draw(st.sampled_from(CALL_IDS)),
                                             "function_name": draw(st.sampled_from(
                                                 ["execute_bash", None]))}}  # fmt: skip
        elif kind == "observation":
            event |= {
                "source": "agent",
                "observation": draw(st.sampled_from(["run", "error"])),
                "content": draw(st.one_of(TEXT, st.none())),
                "cause": draw(st.integers(0, 8)),
                "success": draw(st.sampled_from([True, False])),
            }
            if draw(st.booleans()):
                event["tool_call_metadata"] = {"tool_call_id": draw(st.sampled_from(CALL_IDS))}
        else:
            event |= (
                {"source": "environment", "observation": "agent_state_changed"}
                if draw(st.booleans())
                else {"source": "environment", "action": "change_agent_state"}
            )
        events.append(event)
    return events


@st.composite
def flat_openhands_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Resolver-style events: no tool_call_metadata, often no source or id; actions
    answered by name or by cause, or by nothing; messages; mixed with sourced ones."""
    events: list[dict[str, Any]] = []
    names = st.sampled_from(["run", "run_ipython", "read", "finish", None])
    for i in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["message", "action", "action", "observation",
                                     "observation", "sourced"]))  # fmt: skip
        event: dict[str, Any] = {"id": i} if draw(st.booleans()) else {}
        if kind == "message":
            event |= {"action": "message", "content": draw(TEXT), "wait_for_response": False}
        elif kind == "action":
            thought = draw(st.one_of(TEXT, st.none(), st.just(7)))
            event |= {"action": draw(names), "thought": thought, "command": draw(TEXT),
                      "keep_prompt": True, "action_risk": 1}  # fmt: skip
            if draw(st.integers(0, 4)) == 0:
                event["args"] = {"code": draw(TEXT)}
            if draw(st.integers(0, 4)) == 0:
                event["source"] = draw(st.sampled_from(["agent", None, "environment"]))
        elif kind == "observation":
            event |= {"observation": draw(names), "content": draw(st.one_of(TEXT, st.none())),
                      "exit_code": 0}  # fmt: skip
            if draw(st.booleans()):
                event["cause"] = draw(st.integers(0, 10))
            if draw(st.integers(0, 3)) == 0:
                event["success"] = False
        else:
            event |= {"source": draw(st.sampled_from(["user", "agent"])), "action": "message",
                      "message": draw(TEXT)}  # fmt: skip
        events.append(event)
    return events


@SETTINGS
@given(st.lists(st.tuples(st.one_of(openhands_events(), flat_openhands_events()),
                          st.booleans()), min_size=1, max_size=3))  # fmt: skip
def test_openhands_lines_match_the_python_adapter(
    tmp_path: Path, lines: list[tuple[list[dict[str, Any]], bool]]
) -> None:
    docs: list[Any] = []
    for i, (events, record) in enumerate(lines):
        if record or not events:
            docs.append({"instance_id": f"i{i}", "instruction": "fix", "history": events})
        else:
            docs.append(events)
    path = write_lines(tmp_path / "openhands.jsonl", docs)
    assert_same_as_python(path, "openhands", chunk_bytes=64)


@SETTINGS
@given(st.lists(chat_messages(), min_size=1, max_size=3), st.booleans())
def test_swe_agent_and_tau_bench_lines_match_the_python_adapter(
    tmp_path: Path, histories: list[list[dict[str, Any]]], call_id_lists: bool
) -> None:
    trajs = []
    for history in histories:
        if call_id_lists:  # function-calling trajectories name the call in tool_call_ids
            history = [{**{k: v for k, v in m.items() if k != "tool_call_id"},
                        "tool_call_ids": [m["tool_call_id"]]} if m["role"] == "tool" else m
                       for m in history]  # fmt: skip
        trajs.append({"environment": "swe", "history": history, "info": {"exit": "submitted"}})
    path = write_lines(tmp_path / "swe.jsonl", trajs)
    assert_same_as_python(path, "swe-agent", chunk_bytes=64)
    runs = [{"task_id": i, "reward": 1.0, "traj": h, "trial": 0} for i, h in enumerate(histories)]
    runs.append({"task_id": None, "traj": []})
    path = write_lines(tmp_path / "tau.jsonl", [runs[:1], runs[1:]])
    assert_same_as_python(path, "tau-bench", chunk_bytes=64)


def test_a_session_built_elsewhere_converts_to_every_format_with_its_tool_outputs(
    tmp_path: Path,
) -> None:
    from ctxcompact.batch.synthetic import generate_table

    def tool_outputs(table: Any) -> list[str]:
        rows = zip(*(table.column(c).to_pylist() for c in ("part_type", "status", "output")))
        return sorted(out for kind, status, out in rows if kind == "tool" and status != "pending")

    sessions = cc.Transcript(generate_table(12, 40, seed=8)).to_sessions()
    original = tool_outputs(cc.Transcript.from_sessions(sessions).to_arrow())
    assert len(original) > 50
    for fmt in ("openai-chat", "openai-responses", "anthropic", "claude-code", "swe-agent",
                "tau-bench"):  # fmt: skip
        path = tmp_path / f"data.{fmt}.jsonl"
        formats.write(sessions, path, fmt)
        one = assert_same_as_python(path, fmt, threads=1).table
        # every finished call keeps its output (synthetic calls have no call id)
        assert tool_outputs(one) == original, fmt
        if fmt == "claude-code":  # several sessions in one file keep their ids
            assert cc.Transcript(one).session_ids() == [s.id for s in sessions]
        for threads, chunk in [(2, 300), (2, 1)]:
            assert read_jsonl(path, fmt, threads=threads, chunk_bytes=chunk).table.equals(one)


@pytest.mark.skipif(not (DATA / "transcripts").is_dir(), reason="no ../shared/data")
def test_every_real_transcript_in_its_own_format_reads_like_the_adapter(tmp_path: Path) -> None:
    read = 0
    for i, path in enumerate(sorted((DATA / "transcripts").rglob("*"))):
        if path.suffix == ".jsonl":
            first = json.loads(path.read_bytes().splitlines()[0])
            assert_same_as_python(path, formats.jsonl_format(first))
        elif path.suffix in (".json", ".traj") and path.is_file():
            doc = json.loads(path.read_bytes())
            line = write_lines(tmp_path / f"t{i}.jsonl", [doc])  # the document as one line
            assert_same_as_python(line, formats.detect_format(doc))
        else:
            continue
        read += 1
    assert read >= 30


@pytest.mark.skipif(not (DATA / "formats" / "claude-code").is_dir(), reason="no ../shared/data")
def test_claude_code_samples_read_like_the_adapter(tmp_path: Path) -> None:
    from test_formats import without_junk

    for path in sorted((DATA / "formats" / "claude-code").rglob("*.jsonl")):
        if path.name != "edge_cases.jsonl":
            assert_same_as_python(path, "claude-code")
            continue
        # its junk lines (a string, an object without "type", a number, a list) are bad lines
        got = read_jsonl(path, "claude-code", on_error="skip")
        assert [r.line for r in got.rejected] == [13, 14, 15, 16]
        assert all("not a Claude Code event" in r.error for r in got.rejected)
        clean = without_junk(path, tmp_path)  # same name: the same default session id
        assert got.table.equals(assert_same_as_python(clean, "claude-code").table)


# --- bad input -----------------------------------------------------------------------------


def event(uuid: str, sid: str, content: Any, role: str = "assistant") -> dict[str, Any]:
    return {"type": role, "uuid": uuid, "sessionId": sid,
            "message": {"role": role, "content": content}}  # fmt: skip


def test_a_bad_claude_code_event_is_left_out_but_still_names_its_session(
    tmp_path: Path,
) -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "a b"}
    good = [event("u1", "s", [use]), event("u2", "s", [result], "user"),
            {"type": "system", "content": "note"}, event("u3", "s", "done")]  # fmt: skip
    bad = [
        event("u9", "s", [{**use, "input": ["not", "an", "object"]}]),  # would complete nothing
        event("u9", "s", [{"type": "text", "text": 7}]),
        {**event("u9", "t", "x"), "parentUuid": 5},
        {**event("u9", "s", "x"), "message": {"role": "assistant", "usage": {"input_tokens": -1}}},
    ]
    lines = [json.dumps(good[0]), json.dumps(bad[0]), "{oops", json.dumps(bad[1]),
             json.dumps(good[1]), json.dumps(bad[2]), json.dumps(good[2]), json.dumps(bad[3]),
             json.dumps(good[3])]  # fmt: skip
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(FormatError, match=r"c.jsonl:2: message.content\[0\].input must be an"):
        read_jsonl(path, "claude-code", chunk_bytes=8)
    got = read_jsonl(path, "claude-code", on_error="skip", chunk_bytes=8, threads=2)
    assert [r.line for r in got.rejected] == [2, 3, 4, 6, 8]
    assert got.rejected[0].session_id == "s" and got.rejected[0].message_id == "u9"
    assert "parentUuid must be a string" in got.rejected[3].error
    assert "usage.input_tokens must be a non-negative integer" in got.rejected[4].error
    # a rejected event still names its session: the next line without one joins "t"
    assert (got.lines, got.sessions) == (9, 2)
    clean = write_lines(tmp_path / "c2.jsonl", [*good[:2], {**good[2], "sessionId": "t"}, good[3]])
    expected = read_jsonl(clean, "claude-code").table
    # the same rows (the clean file's event source names its session, the original's does not)
    for name in ("session_id", "message_id", "part_id", "output", "status", "input"):
        assert got.table.column(name).equals(expected.column(name)), name
    assert got.table.column("session_id").to_pylist()[-1] == "t"
    assert got.table.column("status").to_pylist()[0] == "completed"
    assert got.table.column("output").to_pylist()[0] == "a b"
    # The Python adapter names the file for the same event (not a pydantic error).
    with pytest.raises(FormatError, match="not a valid Claude Code session: text"):
        formats.read(write_lines(tmp_path / "bad.jsonl", [bad[1]]), "claude-code")


def test_a_claude_code_session_in_two_files_is_rejected_in_the_second(tmp_path: Path) -> None:
    a = write_lines(tmp_path / "a.jsonl", [event("u1", "s", "x"), event("u2", "t", "y")])
    b = write_lines(tmp_path / "b.jsonl", [event("u3", "s", "z"), event("u4", "u", "w"),
                                           event("u5", "s", "v")])  # fmt: skip
    with pytest.raises(FormatError, match=r"b.jsonl:1: session \"s\" was already read at "):
        read_jsonl([a, b], "claude-code")
    got = read_jsonl([a, b], "claude-code", on_error="skip")
    assert [(Path(r.path).name, r.line, r.session_id) for r in got.rejected] == [
        ("b.jsonl", 1, "s"), ("b.jsonl", 3, "s")]  # fmt: skip
    assert cc.Transcript(got.table).session_ids() == ["s", "t", "u"]
    assert got.sessions + 0 == 3 and got.lines == 5


def test_events_without_a_session_id_belong_to_the_file(tmp_path: Path) -> None:
    later = {"type": "user", "uuid": "u2", "message": {"role": "user", "content": "on"}}
    # model input without a session id (a snapshot or title would wait for s1)
    first = {"type": "system", "content": "started", "level": "info"}
    events = [first, event("u1", "s1", "hi", "user"), later]
    path = write_lines(tmp_path / "sess.v2.jsonl", events)
    got = assert_same_as_python(path, "claude-code")
    assert cc.Transcript(got.table).session_ids() == ["sess.v2", "s1"]


# --- Claude Code summary lines (a conversation's title) and file-history snapshots --------

TITLE = {"type": "summary", "summary": "Fixing the parser", "leafUuid": "u2"}
ORPHAN = {"type": "summary", "summary": "An earlier session", "leafUuid": "elsewhere"}
SNAPSHOT = {
    "type": "file-history-snapshot",
    "messageId": "u1",
    "snapshot": {"messageId": "u1", "trackedFileBackups": {}, "timestamp": "t"},
    "isSnapshotUpdate": False,
}
# per kind of aside line: the one at the start of a file, the one elsewhere
ASIDES = {"summary": (ORPHAN, TITLE), "snapshot": (SNAPSHOT, {**SNAPSHOT, "messageId": "u3"}),
          "both": (SNAPSHOT, TITLE)}  # fmt: skip


def model_tokens(sessions: list[Any]) -> int:
    return cc.estimate_messages(cc.Transcript.from_sessions(sessions)).total


@pytest.mark.parametrize("kind", ASIDES)
@pytest.mark.parametrize("where", ["start", "middle", "end", "everywhere"])
def test_a_summary_or_snapshot_line_is_never_a_session_nor_model_input(
    tmp_path: Path, where: str, kind: str
) -> None:
    leading, later = ASIDES[kind]
    turns = [event("u1", "s1", "hi", "user"), event("u2", "s1", "hello"),
             event("u3", "s2", "again", "user"), event("u4", "s2", "yes")]  # fmt: skip
    at = {"start": [0], "middle": [2], "end": [4], "everywhere": [0, 0, 2, 4]}[where]
    events: list[Any] = list(turns)
    for k in reversed(at):
        events.insert(k, leading if k == 0 else later)
    path = write_lines(tmp_path / "sess.jsonl", events)
    got = assert_same_as_python(path, "claude-code", chunk_bytes=32)
    # in windows cut wherever they may be: the same rows
    streamed = list(iter_jsonl(path, "claude-code", window_bytes=1))
    assert len(streamed) > 1
    assert pa.concat_tables(w.table for w in streamed).equals(got.table)
    sessions = formats.read(path, "claude-code")
    # before the first other line: the first session; after one: the session before
    assert [s.id for s in sessions] == ["s1", "s2"]
    assert sum(len(s.messages) for s in sessions) == len(events)
    assert model_tokens(sessions) == model_tokens(formats.read(
        write_lines(tmp_path / "plain.jsonl", turns), "claude-code"))  # fmt: skip
    for s in sessions:  # the model is sent the turns only
        sent = to_model_chat(s, "model")
        assert [m["role"] for m in sent] == ["user", "assistant"]
    # written back: every line, in its place
    back = [e for s in sessions for e in formats.to_claude_code(s)]
    assert back == events


@pytest.mark.parametrize("lines", [[ORPHAN, TITLE], [SNAPSHOT], [SNAPSHOT, ORPHAN, SNAPSHOT]])
def test_a_file_of_summary_or_snapshot_lines_only_is_one_session_of_the_file(
    tmp_path: Path, lines: list[Any]
) -> None:
    path = write_lines(tmp_path / "titles.jsonl", lines)
    got = assert_same_as_python(path, "claude-code")
    assert cc.Transcript(got.table).session_ids() == ["titles"]
    assert cc.estimate_messages(cc.Transcript(got.table)).total == 0


@pytest.mark.skipif(not (DATA / "formats" / "claude-code").is_dir(), reason="no ../shared/data")
def test_the_claude_code_samples_with_a_summary_line(tmp_path: Path) -> None:
    cc_dir = DATA / "formats" / "claude-code"
    sample = cc_dir / "claude-code-transcripts" / "sample_session.jsonl"  # summary first
    got = assert_same_as_python(sample, "claude-code")
    assert (got.sessions, cc.Transcript(got.table).session_ids()) == (1, ["test-session-id"])
    rep = cc_dir / "claude-code-log" / "representative_messages.jsonl"  # summary last
    lines = [line for line in rep.read_text("utf-8").splitlines() if line.strip()]
    assert json.loads(lines[-1])["type"] == "summary"
    without = tmp_path / rep.name
    without.write_text("\n".join(lines[:-1]) + "\n", "utf-8")
    got = assert_same_as_python(rep, "claude-code")
    tokens = cc.estimate_messages(cc.Transcript(got.table)).total
    assert tokens == cc.estimate_messages(cc.Transcript(read_jsonl(without).table)).total == 722
    assert got.sessions == 1
    # current Claude Code starts a file with a file-history snapshot (no sessionId):
    # it was a session of its own, named by the file
    for base, sid in [(lines[:11], "test_session"),
                      (sample.read_text("utf-8").splitlines(), "test-session-id")]:  # fmt: skip
        snapped = tmp_path / "snap.jsonl"
        snapped.write_text("\n".join([json.dumps(SNAPSHOT), *base]) + "\n", "utf-8")
        got = assert_same_as_python(snapped, "claude-code")
        assert (got.sessions, cc.Transcript(got.table).session_ids()) == (1, [sid])
        streamed = list(iter_jsonl(snapped, "claude-code", window_bytes=1))
        # a dictionary per window: joined as the library joins tables
        joined = targets_as_dictionary(pa.concat_tables(w.table for w in streamed))
        assert joined.equals(got.table)
        back = [e for s in formats.read(snapped, "claude-code") for e in formats.to_claude_code(s)]
        assert back == [json.loads(line) for line in [json.dumps(SNAPSHOT), *base] if line.strip()]


#: A custom tool call whose text is not a string.
BAD_CUSTOM = {"id": "c", "type": "custom", "custom": {"name": "p", "input": 5}}


@pytest.mark.parametrize(
    ("fmt", "line", "error"),
    [
        ("anthropic", [], "an Anthropic request must be an object"),
        ("anthropic", {"messages": [{"role": "tool"}]}, "not a user or assistant turn"),
        ("anthropic", {"messages": [{"role": "user", "content": 5}]}, "content must be a list"),
        (
            "anthropic",
            {"messages": [{"role": "user", "content": {"type": "text"}}]},
            "content must be a list",
        ),
        ("anthropic", {"messages": [{"role": "user"}]}, "content must be a list"),
        ("openai-responses", {"input": "hi"}, "input must be a list of items"),
        ("openai-responses", [{"role": "robot", "content": "x"}], "unknown role"),
        ("openai-responses", [{"type": "function_call", "call_id": 5}], "call_id must be a string"),
        (
            "openai-chat",
            {"messages": [{"role": "assistant", "tool_calls": [BAD_CUSTOM]}]},
            r"tool_calls\[0\]\.custom\.input must be a string",
        ),
        ("openhands", {"instruction": "x"}, "no 'history' list"),
        ("openhands", [1], "event 0 is not an object"),
        ("swe-agent", {"trajectory": []}, "needs a 'history' list"),
        ("tau-bench", [{"task_id": 1}], "has no 'traj'"),
        ("tau-bench", [{"task_id": 1, "traj": []}, {"task_id": 1, "traj": []}], "twice on this"),
    ],
)
def test_lines_that_do_not_fit_the_format_are_typed_errors(
    tmp_path: Path, fmt: str, line: Any, error: str
) -> None:
    path = write_lines(tmp_path / "x.jsonl", [line])
    with pytest.raises(FormatError, match=error) as info:
        read_jsonl(path, fmt)
    assert str(info.value).startswith(f"{path}:1: ") and info.value.row == 1
    got = read_jsonl(path, fmt, on_error="skip")
    assert got.table.num_rows == 0 and [r.line for r in got.rejected] == [1]


@pytest.mark.parametrize(
    ("fmt", "lines"),
    [
        # a non-text tool result keeps its content in place among the other keys
        ("openai-chat", [{"id": "c", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "x"}],
             "name": "ls"}]}]),
        # what Python iterates: an empty object, an empty string
        ("openai-chat", [{"id": "e", "messages": {}}, {"id": "f", "messages": [
            {"role": "user", "content": {}}]}]),
        # custom (freeform) tool calls: read with their name and text; a
        # "custom" key that is not one is kept as an extra key
        ("openai-chat", [{"id": "u", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** é"}},
                {"id": "t2", "type": "custom", "custom": {"name": "x", "input": ""}, "k": 1},
                {"id": "t3", "type": "custom", "custom": {}},
                {"id": "t4", "type": "custom", "custom": 5},
                {"id": "t5", "type": "custom", "custom": {"input": "y"},
                 "function": {"name": "f", "arguments": "{}"}},
                {"id": "t6", "custom": {"name": "z", "input": "w"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "done"}]}]),
        ("openhands", ["", []]),
        ("tau-bench", [[{"task_id": 1, "traj": ""}]]),
        # usage counts as pydantic reads them
        ("claude-code", [{"type": "assistant", "uuid": "a", "message": {
            "role": "assistant", "content": "x", "usage": {
                "input_tokens": " 12 ", "output_tokens": 3.0, "cache_read_input_tokens": True,
                "cache_creation_input_tokens": "7.0"}}}]),
    ],
)  # fmt: skip
def test_odd_shapes_read_as_the_adapters_read_them(
    tmp_path: Path, fmt: str, lines: list[Any]
) -> None:
    path = write_lines(tmp_path / "odd.jsonl", lines)
    assert_same_as_python(path, fmt)


def test_a_claude_code_event_whose_id_is_taken_is_left_out_without_a_trace(
    tmp_path: Path,
) -> None:
    use = {"type": "tool_use", "id": "t", "name": "x", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t", "content": "ok"}
    lines = [
        {**event("s-e000001", "s", [use]), "uuid": "s-e000001"},  # takes the next positional id
        {"type": "user", "sessionId": "s", "message": {"role": "user", "content": [result]}},
        event("u3", "s", "after"),
    ]
    path = write_lines(tmp_path / "c.jsonl", lines)
    with pytest.raises(FormatError, match=r'c.jsonl:2: message id "s-e000001" appears twice'):
        read_jsonl(path, "claude-code")
    got = read_jsonl(path, "claude-code", on_error="skip")
    assert [r.line for r in got.rejected] == [2]
    assert got.table.column("status").to_pylist()[0] == "pending"  # completed by nothing
    assert got.table.column("message_id").to_pylist() == ["s-e000001", "u3"]


def test_claude_code_system_events_are_kept_but_not_model_input(tmp_path: Path) -> None:
    """A ``system`` event (a hook's note, a local command, an API retry) is
    shown to the user, never sent: its text is kept (ignored) and written back,
    but neither the view nor any estimate counts it (it was a system message
    of the model input, ~340 tokens here)."""
    note = {"type": "system", "uuid": "x1", "sessionId": "s", "level": "info",
            "content": "Running PostToolUse hooks " * 50}  # fmt: skip
    events = [event("u1", "s", "hi", "user"), note, event("a1", "s", "yo")]
    path = write_lines(tmp_path / "s.jsonl", events)
    native = assert_same_as_python(path, "claude-code").table
    (session,) = formats.read(path, "claude-code")
    part = session.messages[1].parts[0]
    assert part.text == note["content"] and part.ignored is True
    assert [m["role"] for m in to_model_messages(session)] == ["user", "assistant"]
    plain = write_lines(tmp_path / "p.jsonl", [events[0], events[2]])
    expected = cc.estimate_messages(read_jsonl(plain, "claude-code").table).total
    assert cc.estimate_messages(native).total == expected
    assert cc.estimate_messages(cc.Transcript.from_sessions([session])).total == expected
    bounds = cc.estimate_messages(native.drop_columns(["output_utf16"])).total
    assert bounds == expected
    assert formats.to_claude_code(session)[1] == note  # written back as read
