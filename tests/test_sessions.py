"""OpenCode session exports: models, columnar round trip, model input, scans on one session."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.errors import MissingColumnError, NonContiguousError, NullValueError
from ctxcompact.models import AssistantMessage
from ctxcompact.transcript import sessions_to_table, table_to_sessions
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support.sweeps import sweep

FIXTURE = Path(__file__).parent / "fixtures" / "opencode_session.json"


@pytest.fixture
def export() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def test_export_loads_as_is_and_round_trips(export: dict[str, Any]) -> None:
    session = cc.Session.model_validate(export)
    assert session.id == "ses_fixture01"
    assert [m.role for m in session.messages] == ["user", "assistant"] * 3
    assert session.to_export() == export
    assert isinstance(session.messages[3].info, AssistantMessage)
    assert session.messages[3].info.summary is True
    assert session.messages[1].parts[3].compacted
    assert not session.messages[1].parts[4].compacted


def test_unknown_fields_and_part_types_survive(export: dict[str, Any]) -> None:
    export["messages"][0]["parts"].append(
        {"id": "prt_x", "type": "future-part", "payload": {"a": [1, 2]}}
    )
    export["messages"][1]["info"]["newField"] = {"nested": True}
    assert cc.Session.model_validate(export).to_export() == export


def test_negative_tokens_are_rejected(export: dict[str, Any]) -> None:
    export["messages"][1]["info"]["tokens"]["input"] = -5
    with pytest.raises(ValidationError, match="input"):
        cc.Session.model_validate(export)


def test_unknown_role_is_rejected(export: dict[str, Any]) -> None:
    export["messages"][0]["info"]["role"] = "robot"
    with pytest.raises(ValidationError):
        cc.Session.model_validate(export)


def test_a_message_of_a_role_sets_only_what_is_given() -> None:
    from ctxcompact.errors import InvalidUsageError
    from ctxcompact.models import MessageWithParts, Part, SystemMessage

    kept = MessageWithParts.of("system", "m1", "s1", source={"raw": 1})
    assert isinstance(kept.info, SystemMessage)
    # no parts given: none exported, as a reader keeps a record it cannot show
    assert kept.to_export() == {
        "info": {"id": "m1", "sessionID": "s1", "role": "system", "source": {"raw": 1}}
    }
    said = MessageWithParts.of("user", "m2", None, [Part(id="p", type="text", text="hi")])
    assert said.role == "user" and [p.text for p in said.parts] == ["hi"]
    assert said.to_export()["parts"] == [{"id": "p", "type": "text", "text": "hi"}]
    with pytest.raises(InvalidUsageError, match="no message role 'tool'"):
        MessageWithParts.of("tool", "m3", "s1")


def test_columnar_round_trip_is_lossless(export: dict[str, Any]) -> None:
    other = copy.deepcopy(export)
    other["info"]["id"] = "ses_other"
    other["messages"] = []
    sessions = [cc.Session.model_validate(export), cc.Session.model_validate(other)]
    table = sessions_to_table(sessions)
    # 2 + 8 + 1 + 1 + 1 + 1 (empty message) parts, + 1 row for the empty session
    assert table.num_rows == 15
    back = cc.Transcript(table).to_sessions()
    assert [s.to_export() for s in back] == [export, other]


def test_columnar_columns_follow_the_schema(export: dict[str, Any]) -> None:
    table = sessions_to_table([cc.Session.model_validate(export)])
    rows = table.to_pylist()
    read = next(r for r in rows if r["part_id"] == "prt_006")
    assert (read["tool"], read["status"], read["compacted_at"]) == (
        "read",
        "completed",
        1731000500000,
    )
    assert json.loads(read["input"]) == {"filePath": "/repo/tests/test_parser.py"}
    failed = next(r for r in rows if r["part_id"] == "prt_007")
    assert failed["output"] == "Exit code 1: 1 failed"
    summary = next(r for r in rows if r["message_id"] == "msg_004")
    assert summary["summary"] and summary["finished"] and not summary["error"]
    assert summary["parent_id"] == "msg_003"
    empty = rows[-1]
    assert (empty["message_id"], empty["part_id"], empty["part_type"]) == ("msg_006", None, None)


def test_table_without_json_columns_gives_minimal_sessions(export: dict[str, Any]) -> None:
    table = sessions_to_table([cc.Session.model_validate(export)])
    scan_only = table.drop_columns(["session_json", "message_json", "part_json"])
    (session,) = table_to_sessions(scan_only)
    assert [m.id for m in session.messages] == [m["info"]["id"] for m in export["messages"]]
    read = session.messages[1].parts[3]
    assert read.tool == "read" and read.state is not None and read.state.output is not None
    assert read.compacted


def test_table_to_sessions_bad_input(export: dict[str, Any]) -> None:
    table = sessions_to_table([cc.Session.model_validate(export)])
    with pytest.raises(MissingColumnError) as e:
        table_to_sessions(table.drop_columns(["role"]))
    assert e.value.column == "role"
    ids = table.column("message_id").to_pylist()
    ids[1], ids[2] = "msg_002", "msg_001"  # msg_001 reappears at row 2
    with pytest.raises(NonContiguousError) as ne:
        table_to_sessions(table.set_column(1, "message_id", pa.array(ids)))
    assert ne.value.message_id == "msg_001" and ne.value.row == 2
    roles = table.column("role").to_pylist()
    roles[0] = None
    with pytest.raises(NullValueError) as nv:
        table_to_sessions(table.set_column(2, "role", pa.array(roles, pa.string())))
    assert nv.value.row == 0


def test_model_messages_apply_placeholders(export: dict[str, Any]) -> None:
    messages = cc.to_model_messages(cc.Session.model_validate(export), system="be brief")
    assert messages[0] == {"role": "system", "content": "be brief"}
    user = messages[1]
    assert user["role"] == "user" and user["content"][1]["type"] == "image_url"
    assistant = messages[2]
    assert assistant["content"] == "Reading the test and the parser."  # no reasoning
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b", "call_c", "call_d"]
    results = {m["tool_call_id"]: m["content"] for m in messages[3:7]}
    assert results == {
        "call_a": "[Old tool result content cleared]",
        "call_b": "Exit code 1: 1 failed",
        "call_c": "Always run ruff.",
        "call_d": "[Tool execution was interrupted]",
    }
    assert messages[7] == {"role": "user", "content": "What did we do so far?"}
    assert messages[8]["content"].startswith("We are fixing")
    assert messages[9] == {"role": "user", "content": "Continue if you have next steps"}
    assert len(messages) == 10  # the empty assistant message sends nothing


def test_filter_pivot_on_a_session(export: dict[str, Any]) -> None:
    session = cc.Session.model_validate(export)
    visible = cc.filter_pivot(session)
    assert [m.id for m in visible.messages] == ["msg_003", "msg_004", "msg_005", "msg_006"]
    assert len(session.messages) == 6  # the original is untouched
    export["messages"][3]["info"]["error"] = {"name": "APIError", "data": {}}
    assert len(cc.filter_pivot(cc.Session.model_validate(export)).messages) == 6


def _long_session(turns: int = 10, chars: int = 40_000) -> cc.Session:
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages.append(
            {
                "info": {"id": f"msg_u{t:02d}", "role": "user"},
                "parts": [{"id": f"prt_u{t:02d}", "type": "text", "text": "go on"}],
            }
        )
        messages.append(
            {
                "info": {"id": f"msg_a{t:02d}", "role": "assistant", "parentID": f"msg_u{t:02d}"},
                "parts": [
                    {
                        "id": f"prt_a{t:02d}",
                        "type": "tool",
                        "callID": f"c{t}",
                        "tool": "read",
                        "state": {
                            "status": "completed",
                            "input": {},
                            "output": "x" * chars,
                            "time": {"start": 1, "end": 2},
                        },
                    }
                ],
            }
        )
    return cc.Session.model_validate({"info": {"id": "ses_long"}, "messages": messages})


def test_prune_and_mark_a_live_session() -> None:
    session = _long_session()
    result = cc.prune(session)
    # a9 and a8 are in the last two turns; a7..a4 fill the 40k window; a3..a0 are pruned.
    assert result.part_ids == ["prt_a03", "prt_a02", "prt_a01", "prt_a00"]
    assert (result.total, result.pruned) == (80_000, 40_000)
    same = cc.mark_pruned(session, result, now_ms=1_700_000_000_000)
    assert same is session
    marked = [p.id for m in session.messages for p in m.parts if p.compacted]
    assert sorted(marked) == sorted(result.part_ids)
    part = session.messages[1].parts[0]
    assert part.state is not None and part.state.output == "x" * 40_000  # kept in storage
    assert cc.prune(session).part_ids == []  # the scan now stops at the compacted part
    estimates = cc.estimate_messages(session)
    pruned_row = estimates.messages.to_pylist()[1]
    assert pruned_row["message_id"] == "msg_a00"
    # call 4 + "read" 1 + "{}" 1 (input); result 4 + placeholder 8
    assert pruned_row["tokens"] == 4 + 1 + 1 + 4 + 8


@settings(max_examples=sweep(60), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant"]),
            st.lists(st.sampled_from(["text", "tool", "compaction", "reasoning"]), max_size=3),
            st.text(max_size=30),
        ),
        max_size=8,
    )
)
def test_random_sessions_round_trip(spec: list[tuple[str, list[str], str]]) -> None:
    messages = []
    for i, (role, kinds, text) in enumerate(spec):
        parts: list[dict[str, Any]] = []
        for j, kind in enumerate(kinds):
            part: dict[str, Any] = {"id": f"p{i}_{j}", "type": kind}
            if kind in ("text", "reasoning"):
                part["text"] = text
            elif kind == "compaction":
                part["auto"] = bool(j % 2)
            else:
                part.update(
                    callID=f"c{i}{j}",
                    tool="bash",
                    state={"status": "completed", "input": {"cmd": text}, "output": text},
                )
            parts.append(part)
        info: dict[str, Any] = {"id": f"m{i:03d}", "role": role}
        if role == "assistant":
            info.update(parentID="m000", finish="stop", summary=bool(i % 2))
        messages.append({"info": info, "parts": parts})
    export = {"info": {"id": "s"}, "messages": messages}
    table = sessions_to_table([cc.Session.model_validate(export)])
    assert [s.to_export() for s in table_to_sessions(table)] == [export]
