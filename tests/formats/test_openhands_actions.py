"""OpenHands streams without tool_call_metadata (the resolver's flat events):
an action and the observation that answers it become one completed tool part,
in the Python adapter and the native reader alike; the stream is written
back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import FormatError
from ctxcompact.formats.openhands import from_openhands, from_openhands_output, to_openhands
from hypothesis import given, settings
from support.sweeps import sweep
from test_ingest import assert_same_as_python, write_lines
from test_ingest_formats import flat_openhands_events

RESOLVER = (Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"
            / "openhands" / "tests_unit_resolver_mock_output_output.jsonl")  # fmt: skip
needs_data = pytest.mark.skipif(not RESOLVER.is_file(), reason="needs ../shared/data")


def tools(session: cc.Session) -> list[Any]:
    return [p for m in session.messages for p in m.parts if p.type == "tool"]


@needs_data
def test_every_answered_action_of_the_resolver_output_is_a_tool_part() -> None:
    records = [json.loads(line) for line in RESOLVER.read_text(encoding="utf-8").splitlines()]
    for n, record in enumerate(records):
        history = record["history"]
        session = from_openhands_output(record, f"r{n}")
        observations = [e for e in history if "observation" in e]
        parts = tools(session)
        # every observation here answers the action just before it
        assert len(parts) == len(observations) == {8: 3, 44: 21}[len(history)]
        assert [p.state.output for p in parts] == [e["content"] for e in observations]
        assert all(p.state.status == "completed" for p in parts)
        assert [p.tool for p in parts] == [e["observation"] for e in observations]
        assert parts[0].state.input["command"] == history[1]["command"]
        first = session.messages[0]
        assert first.role == "user" and first.parts[0].text == history[0]["content"]
        # the finish action nothing answers stays text: its thought
        assert session.messages[-1].parts[0].text == history[-1]["thought"]
        assert to_openhands(session) == record  # the record whole, its history included


@needs_data
def test_the_native_reader_agrees_on_the_resolver_output() -> None:
    assert_same_as_python(RESOLVER, "openhands")


@needs_data
def test_a_step_policy_clears_old_observations_of_a_resolver_run() -> None:
    record = json.loads(RESOLVER.read_text(encoding="utf-8").splitlines()[1])
    session = from_openhands_output(record, "r1")
    assert cc.prune(session).pruned == 0  # OpenCode's rule: one user turn, nothing
    result = cc.prune(session, "swe-agent")
    assert len(result) == 21 - 5 and result.pruned > 0


def test_an_observation_answers_the_oldest_unanswered_action_of_its_name() -> None:
    events = [
        {"action": "message", "content": "task"},
        {"action": "run", "command": "a", "thought": "first"},
        {"action": "run_ipython", "code": "b"},
        {"action": "run", "command": "c"},
        {"observation": "run", "content": "out a"},
        {"observation": "run", "content": "out c"},
        {"observation": "run_ipython", "content": "out b"},
        {"id": 9, "action": "read", "path": "x"},
        {"id": 10, "action": "read", "path": "y"},
        {"observation": "read", "cause": 10, "content": "y!"},
        {"observation": "read", "cause": 99, "content": "nobody's"},
        {"action": "finish", "thought": "done"},
    ]
    session = from_openhands(events)
    got = [(p.tool, p.state.input, p.state.status, p.state.output) for p in tools(session)]
    assert got == [
        ("run", {"command": "a"}, "completed", "out a"),
        ("run_ipython", {"code": "b"}, "completed", "out b"),
        ("run", {"command": "c"}, "completed", "out c"),
        ("read", {"path": "y"}, "completed", "y!"),
    ]
    # read x is answered by nothing (its cause-less answer went to y): text, no part
    assert [m.role for m in session.messages][:2] == ["user", "assistant"]
    assert session.messages[1].parts[0].text == "first"
    assert session.messages[7].parts == []
    assert to_openhands(session) == events


def test_a_failed_observation_completes_the_part_as_an_error() -> None:
    events = [{"action": "run", "command": "x"},
              {"observation": "run", "content": "boom", "success": False}]  # fmt: skip
    (part,) = tools(from_openhands(events))
    assert (part.state.status, part.state.error) == ("error", "boom")


def test_a_bad_event_is_named() -> None:
    with pytest.raises(FormatError, match="event 1 is not an object"):
        from_openhands([{"action": "run"}, 3])


@settings(max_examples=sweep(300), deadline=None)
@given(flat_openhands_events())
def test_flat_streams_round_trip(events: list[dict[str, Any]]) -> None:
    assert to_openhands(from_openhands(events)) == events


@settings(max_examples=sweep(100), deadline=None)
@given(flat_openhands_events())
def test_flat_streams_natively(tmp_path_factory: pytest.TempPathFactory,
                               events: list[dict[str, Any]]) -> None:  # fmt: skip
    path = write_lines(tmp_path_factory.mktemp("oh") / "flat.jsonl", [{"history": events}])
    assert_same_as_python(path, "openhands")
