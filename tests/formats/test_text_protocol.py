"""Text-protocol agents (SWE-agent without function calling, mini-swe-agent):
each step's command and the user turn answering it become one completed tool
part, so prune can clear old observations; the native reader makes the same
parts, and the writers put every message back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.reader import read_jsonl
from hypothesis import given
from hypothesis import strategies as st
from test_ingest import SETTINGS, TEXT, assert_same_as_python, write_lines

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"
WORDS = st.sampled_from(["open a.py", "edit 1:2\nx\nend_of_edit", " ls -la ", "\n", "", "submit"])
OBSERVATION = st.one_of(TEXT, st.just("<returncode>0</returncode>\n<output>\nok\n</output>"))


@st.composite
def swe_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A text-protocol history: system, task, then steps with an ``action`` and,
    usually, an observation; sometimes two user turns in a row or a list content."""
    extra = {"agent": "primary"}
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent.", **extra},
        {"role": "user", "content": draw(TEXT), "message_type": "observation", **extra},
    ]
    for _ in range(draw(st.integers(0, 6))):
        action = draw(WORDS)
        step: dict[str, Any] = {"role": "assistant", "content": f"thinking\n```\n{action}\n```",
                                "thought": "thinking", **extra}  # fmt: skip
        if draw(st.booleans()):
            step["action"] = action
        history.append(step)
        answer = draw(st.sampled_from(["text", "text", "none", "list", "orphan"]))
        if answer == "text":
            history.append({"role": "user", "content": draw(OBSERVATION), **extra})
        elif answer == "list":
            blocks = [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]
            history.append({"role": "user", "content": blocks})
        elif answer == "orphan":
            history.append({"role": "tool", "tool_call_id": "nope", "content": "lost"})
    return history


@st.composite
def mini_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "one bash block per reply"},
        {"role": "user", "content": "Please solve this issue: " + draw(TEXT)},
    ]
    fences = ["```mswea_bash_command\n{c}\n```", "```bash\n{c}\n```", "```bash \t\n{c}```",
              "```python\n{c}\n```", "no command here", "```bashx\n{c}\n```"]  # fmt: skip
    for _ in range(draw(st.integers(0, 6))):
        command = draw(st.sampled_from(["ls", "cat a.py\n", "", "echo ```"]))
        body = draw(st.sampled_from(fences)).format(c=command)
        history.append({"role": "assistant", "content": f"THOUGHT: go\n\n{body}"})
        if draw(st.booleans()):
            history.append({"role": "user", "content": draw(OBSERVATION)})
    return history


def tool_parts(session: cc.Session) -> list[Any]:
    return [p for m in session.messages for p in m.parts if p.type == "tool"]


@SETTINGS
@given(st.lists(swe_history(), min_size=1, max_size=3))
def test_swe_agent_text_steps_native_equals_python_and_round_trip(
    tmp_path: Path, histories: list[list[dict[str, Any]]]
) -> None:
    trajs = [{"environment": "swe", "history": h, "info": {"exit": "submitted"}}
             for h in histories]  # fmt: skip
    for traj in trajs:
        session = formats.from_swe_agent(traj, "s")
        assert formats.to_swe_agent(session) == traj
        # every answered step with an action is a tool part holding its answer
        for p in tool_parts(session):
            assert p.state is not None and p.state.status == "completed"
            assert p.state.input["command"].strip()
    assert_same_as_python(write_lines(tmp_path / "swe.jsonl", trajs), "swe-agent", chunk_bytes=64)


@SETTINGS
@given(st.lists(mini_history(), min_size=1, max_size=3), st.booleans())
def test_mini_swe_agent_steps_native_equals_python_and_round_trip(
    tmp_path: Path, histories: list[list[dict[str, Any]]], wrapped: bool
) -> None:
    docs: list[Any] = [
        {"info": {"exit": "Submitted"}, "messages": h, "trajectory_format": "mini-swe-agent-1"}
        if wrapped else h
        for h in histories
    ]  # fmt: skip
    for doc in docs:
        session = formats.read(doc, "mini-swe-agent", name="m")[0]
        back = formats.to_mini_swe_agent(session)
        if isinstance(doc, list) and not tool_parts(session):
            # a list with no step found is written in the form that names its format
            assert back == {"trajectory_format": "mini-swe-agent-1", "messages": doc}
        else:
            assert back == doc
    assert_same_as_python(write_lines(tmp_path / "mini.jsonl", docs), "mini-swe-agent",
                          chunk_bytes=64)  # fmt: skip


def test_a_swe_agent_step_and_its_observation_make_one_tool_part() -> None:
    traj = {"history": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "the issue", "message_type": "observation"},
        {"role": "assistant", "content": "look\n```\nopen a.py\n```", "action": "open a.py\n",
         "thought": "look"},
        {"role": "user", "content": "[File: a.py (3 lines total)]", "message_type": "observation"},
        {"role": "assistant", "content": "done\n```\nsubmit\n```", "action": "submit\n"},
    ]}  # fmt: skip
    session = formats.from_swe_agent(traj, "t")
    assert [m.info.role for m in session.messages] == ["system", "user", "assistant", "assistant"]
    (part,) = tool_parts(session)
    assert (part.tool, part.callID, part.state.input) == ("open", "t-m000002-action",
                                                          {"command": "open a.py\n"})  # fmt: skip
    assert part.state.output == "[File: a.py (3 lines total)]"
    # the task stays a user message; the last step has no answer and stays text
    assert session.messages[1].parts[0].text == "the issue"
    assert formats.to_swe_agent(session) == traj
    # written as chat, as logged, with only chat keys (not message_type, action...)
    chat_keys = ("role", "content")
    want = [{k: v for k, v in m.items() if k in chat_keys} for m in traj["history"]]
    assert formats.to_openai_chat(session) == want


def test_a_mini_swe_agent_list_is_detected_and_a_chat_list_is_not() -> None:
    observation = "<returncode>0</returncode>\n<output>\na\n</output>"
    mini = [{"role": "user", "content": "task"},
            {"role": "assistant", "content": "```mswea_bash_command\nls\n```"},
            {"role": "user", "content": observation}]  # fmt: skip
    assert formats.detect_format(mini) == "mini-swe-agent"
    assert formats.detect_format(mini[:2]) == "openai-chat"
    plain = [
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": "ok"},
    ]
    assert formats.detect_format(plain) == "openai-chat"
    with pytest.raises(FormatError, match="needs a 'messages' list"):
        formats.read({"messages": "x"}, "mini-swe-agent")
    with pytest.raises(FormatError, match="top-level 'system'"):
        formats.read({"system": "x", "messages": []}, "mini-swe-agent")


@pytest.mark.skipif(not DATA.is_dir(), reason="no ../shared/data")
def test_real_text_protocol_runs_have_tool_parts_and_write_back_unchanged() -> None:
    runs = sorted(DATA.glob("swe-agent/**/*.traj")) + sorted(DATA.glob("mini-swe-agent/*.json"))
    steps = observed = 0
    for path in runs:
        doc = json.loads(path.read_text())
        session = formats.read(path)[0]
        fmt = formats.detect_format(doc)
        back = (
            formats.to_swe_agent(session)
            if fmt == "swe-agent"
            else formats.to_mini_swe_agent(session)
        )
        assert back == doc, path
        history = doc["history"] if fmt == "swe-agent" else doc
        steps += sum(1 for m in history if m.get("role") == "assistant")
        observed += len(tool_parts(session))
    # every step of every run is a tool call but the last of each (no answer)
    assert observed >= steps - len(runs) - 2
    assert observed > 250
    # and the native reader reads the whole folder to the same tool parts
    read = cc.read_sessions([DATA / "swe-agent", DATA / "mini-swe-agent"])
    table = read.transcript.to_arrow()
    assert table.column("part_type").to_pylist().count("tool") == observed


def test_the_native_reader_names_the_line_of_a_bad_mini_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "mini.jsonl"
    path.write_text('[{"role": "user", "content": "task"}]\n{"messages": 3}\n')
    with pytest.raises(FormatError, match=r"mini\.jsonl:2: .*needs a 'messages' list"):
        read_jsonl(path, "mini-swe-agent")
