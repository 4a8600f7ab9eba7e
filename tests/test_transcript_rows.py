"""``sessions_to_table``: a thin call into the core's OpenCode mapper, checked
against the Python reference (``scans.reference.session_rows``, the mapper it
replaced) on random exports, and its errors: each names where and why."""

from __future__ import annotations

import json
import math
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.errors import FormatError, TranscriptError
from ctxcompact.models import SessionInfo
from ctxcompact.scans import reference
from ctxcompact.transcript import (
    DERIVED,
    SCHEMA,
    sessions_to_table,
    table_to_sessions,
    tool_targets,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sweeps import sweep

KEYS = st.sampled_from(["a", "b", "note", "x y", "é", "😀", "title", "time"])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))  # fmt: skip
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(KEYS, inner, max_size=3), max_leaves=8)  # fmt: skip
TEXT = st.text(max_size=40)
EXTRAS = st.dictionaries(st.sampled_from(["extra", "source", "meta"]), VALUES, max_size=2)


@st.composite
def parts(draw: Any, prefix: str) -> list[dict[str, Any]]:
    out = []
    for j in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "reasoning", "tool", "compaction", "file",
                                     "step-start", "future-part"]))  # fmt: skip
        part: dict[str, Any] = {"id": f"{prefix}p{j}", "type": kind, **draw(EXTRAS)}
        if kind in ("text", "reasoning") and draw(st.booleans()):
            part["text"] = draw(TEXT)
        if kind == "compaction" and draw(st.booleans()):
            part["auto"] = draw(st.booleans())
        if kind == "tool":
            part["callID"] = f"c{prefix}{j}"
            if draw(st.booleans()):
                part["tool"] = draw(st.sampled_from(["bash", "read", "edit", "grep"]))
            if draw(st.booleans()):
                state: dict[str, Any] = {
                    "status": draw(st.sampled_from(["pending", "running", "completed", "error"]))
                }
                for key in ("output", "error", "title"):
                    if draw(st.booleans()):
                        state[key] = draw(TEXT)
                if draw(st.booleans()):
                    state["input"] = draw(st.dictionaries(KEYS, VALUES, max_size=3))
                if draw(st.booleans()):
                    compacted = draw(st.none() | st.integers(0, 2**62))
                    state["time"] = {"start": draw(st.integers(0, 2**40)), "compacted": compacted}
                if draw(st.booleans()):
                    state["metadata"] = draw(st.dictionaries(KEYS, VALUES, max_size=2))
                part["state"] = state
        out.append(part)
    return out


@st.composite
def exports(draw: Any, index: int) -> dict[str, Any]:
    messages = []
    for i in range(draw(st.integers(0, 4))):
        role = draw(st.sampled_from(["user", "assistant", "system"]))
        info: dict[str, Any] = {"id": f"m{index}_{i}", "role": role, **draw(EXTRAS)}
        if role == "assistant":
            cost = st.floats(allow_nan=False, allow_infinity=False)
            for key, value in (("parentID", st.text(max_size=5)),
                               ("finish", st.sampled_from(["stop", "tool-calls"])),
                               ("summary", st.booleans()), ("error", st.just({"name": "x"})),
                               ("cost", cost)):  # fmt: skip
                if draw(st.booleans()):
                    info[key] = draw(value)
        if role == "user" and draw(st.booleans()):
            info["summary"] = {"title": draw(TEXT)}
        # (always "parts": a message without it comes back with "parts": [])
        messages.append({"info": info, "parts": draw(parts(f"{index}_{i}"))})
    session_info = {"id": f"s{index}", **draw(EXTRAS)}
    return {"info": session_info, "messages": messages}


def expected(sessions: list[cc.Session]) -> list[dict[str, Any]]:
    names = [n for n in SCHEMA.names if n not in DERIVED]
    return [{n: row.get(n) for n in names}
            for s in sessions for row in reference.session_rows(s.to_export())]  # fmt: skip


@settings(max_examples=sweep(300), deadline=None)
@given(st.lists(st.integers(0, 3), max_size=4).flatmap(
    lambda xs: st.tuples(*(exports(i) for i in range(len(xs))))))  # fmt: skip
def test_the_core_mapper_makes_the_reference_rows(specs: tuple[dict[str, Any], ...]) -> None:
    sessions = [cc.Session.model_validate(e) for e in specs]
    table = sessions_to_table(sessions)
    assert table.schema == SCHEMA
    names = [n for n in SCHEMA.names if n not in DERIVED]
    assert table.select(names).to_pylist() == expected(sessions)
    outputs = table.column("output").to_pylist()
    assert table.column("output_utf16").to_pylist() == [reference.js_length(o or "")
                                                        for o in outputs]  # fmt: skip
    assert table.column("tool_target").to_pylist() == tool_targets(table).to_pylist()
    # and back: lossless
    assert [s.to_export() for s in table_to_sessions(table)] == [s.to_export() for s in sessions]


def test_no_sessions_make_an_empty_table_of_the_schema() -> None:
    table = sessions_to_table([])
    assert table.num_rows == 0 and table.schema == SCHEMA


def test_a_session_given_no_messages_is_one_row() -> None:
    """``messages`` left unset (not exported) is a session without messages."""
    sessions = [cc.Session.model_validate({"info": {"id": "s", "title": "t"}}),
                cc.Session(info=SessionInfo(id="u"))]  # fmt: skip
    table = sessions_to_table(sessions)
    assert table.select(["session_id", "message_id", "session_json"]).to_pylist() == [
        {"session_id": "s", "message_id": None, "session_json": '{"id":"s","title":"t"}'},
        {"session_id": "u", "message_id": None, "session_json": '{"id":"u"}'},
    ]


def _session(*texts: str, tool_input: dict[str, Any] | None = None) -> cc.Session:
    parts: list[dict[str, Any]] = [
        {"id": f"p{i}", "type": "text", "text": t} for i, t in enumerate(texts)
    ]
    if tool_input is not None:
        state = {"status": "completed", "input": tool_input, "output": "ok"}
        parts.insert(0, {"id": "t", "type": "tool", "tool": "bash", "callID": "c", "state": state})
    return cc.Session.model_validate(
        {"info": {"id": "s1"}, "messages": [{"info": {"id": "m1", "role": "user"}, "parts": parts}]}
    )


def where(e: TranscriptError) -> tuple[Any, ...]:
    return (e.session_id, e.message_id, e.row, e.column)


def test_a_lone_surrogate_is_named_by_the_first_column_then_row_holding_it() -> None:
    ok = _session("fine")
    # a later row's output comes before an earlier row's part_json (column order)
    bad = _session("ok", "x\udc00", tool_input={"k": "v\ud800"})
    bad.info.id = "s2"
    with pytest.raises(TranscriptError, match="input holds a lone surrogate") as e:
        sessions_to_table([ok, bad])
    assert where(e.value) == ("s2", "m1", 1, "input")
    assert "surrogates not allowed" in str(e.value)
    only_text = _session("ok", "x\udc00")
    with pytest.raises(TranscriptError) as e:
        sessions_to_table([ok, only_text])
    assert where(e.value) == ("s1", "m1", 2, "output")
    in_extra = cc.Session.model_validate({"info": {"id": "s3", "note": "\ud83d"}})
    with pytest.raises(TranscriptError) as e:
        sessions_to_table([ok, in_extra])
    assert where(e.value) == ("s3", None, 1, "session_json")


def test_a_cost_json_cannot_hold_is_refused_not_written_as_null() -> None:
    for cost in (math.nan, math.inf):
        session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
            {"info": {"id": "m", "role": "assistant", "cost": cost}}]})  # fmt: skip
        with pytest.raises(TranscriptError, match="cost") as e:
            sessions_to_table([session])
        assert where(e.value) == ("s", "m", None, "message_json")
    fine = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "m", "role": "assistant", "cost": 0.25}}]})  # fmt: skip
    (json_text,) = sessions_to_table([fine]).column("message_json").to_pylist()
    assert json.loads(json_text)["cost"] == 0.25


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # an extra field the models do not type, read by the rules as parentID
        (lambda m: m["info"].update(parentID=5), "parentID must be a string"),
        # an int the models take whole and int64 cannot hold
        (lambda m: m["parts"][0]["state"].update(time={"compacted": 2**70}),
         "compacted must be an integer ms timestamp"),
    ],
)  # fmt: skip
def test_a_value_the_rules_refuse_is_a_format_error_naming_it(change: Any, says: str) -> None:
    message: dict[str, Any] = {
        "info": {"id": "m1", "role": "user"},
        "parts": [{"id": "t", "type": "tool", "tool": "bash",
                   "state": {"status": "completed", "output": "ok"}}],
    }  # fmt: skip
    change(message)
    session = cc.Session.model_validate({"info": {"id": "s1"}, "messages": [message]})
    with pytest.raises(FormatError, match=says) as e:
        sessions_to_table([_session("a"), session])
    assert (e.value.session_id, e.value.message_id) == ("s1", "m1")
    assert str(e.value).startswith("sessions[1]: ")


def test_a_table_of_many_sessions_spans_chunks_in_order() -> None:
    from ctxcompact.batch.synthetic import generate_table

    table = generate_table(6, 300, seed=3, mean_output_chars=4000)
    sessions = cc.Transcript(table).to_sessions()
    made = sessions_to_table(sessions)
    assert made.num_rows == table.num_rows and pa.concat_tables([made]).equals(made)
    names = [n for n in SCHEMA.names if n not in DERIVED]
    assert made.select(names).to_pylist() == expected(sessions)


@pytest.mark.parametrize("value", [8796093022208.562, 0.5 + 2**-11, 2.5, 1e22, 5e-324])
def test_a_float_halfway_between_two_shortest_forms_is_written_as_python_writes_it(
    value: float, tmp_path: Any
) -> None:
    # 8796093022208.562 is exactly ...5625: .562 and .563 are both shortest;
    # repr takes the even one, Rust's shortest formatting took .563 (found by
    # the hypothesis sweep above): a silent change of the stored JSON.
    from ctxcompact.formats.reader import read_jsonl

    export = {"info": {"id": "s0", "extra": value}, "messages": []}
    want = json.dumps({"id": "s0", "extra": value}, separators=(",", ":"))
    table = sessions_to_table([cc.Session.model_validate(export)])
    assert table.column("session_json").to_pylist() == [want]
    path = tmp_path / "s.jsonl"
    message = {"info": {"id": "m", "role": "user", "sessionID": "s0"},
               "parts": [{"id": "p", "type": "text", "text": "x"}]}  # fmt: skip
    path.write_text(json.dumps({**export, "messages": [message]}) + "\n")
    read = read_jsonl(path, "opencode").transcript.to_arrow()
    assert read.column("session_json").to_pylist()[0] == want
