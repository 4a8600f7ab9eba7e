"""The model input in the three shapes (``to_model_messages(..., shape=)``):
OpenAI chat, OpenAI Responses input items and Anthropic Messages carry the
same texts, calls and results in the same order, for every session of the
shared corpus and for generated ones (against ``reference.to_anthropic`` /
``to_responses``, small conversions of the chat shape), and validate against
the official SDKs' request types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import _core, formats
from ctxcompact.errors import ConfigError, FormatError
from ctxcompact.policy import Policy
from ctxcompact.scans import reference_shapes as ref
from hypothesis import given, settings
from hypothesis import strategies as st
from test_differential import RENDER_OPTIONS, sweep, transcripts

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
#: Every transcript file of the shared corpus (licences and notes left out).
CORPUS = sorted(
    p for p in DATA.rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl", ".traj"}
)
#: Corpus files the reader rejects on purpose (a malformed line): no sessions.
REJECTED = {"edge_cases.jsonl"}
POLICIES = [None, Policy(clear_inputs=True, truncate_output=200, placeholder="describe",
                         keep_thinking=2, turn="step", protect_turns=0, protect=0,
                         minimum=0, keep_recent=1)]  # fmt: skip


def _shown(table: pa.Table, shape: str, **render: Any) -> list[list[dict[str, Any]]]:
    return [json.loads(b) for b in _core.render_chat(table, **render, shape=shape)]


def _same_as_reference(table: pa.Table, **render: Any) -> None:
    chat = _shown(table, "chat", **render)
    assert _shown(table, "anthropic", **render) == [ref.to_anthropic(m) for m in chat]
    assert _shown(table, "responses", **render) == [ref.to_responses(m) for m in chat]


def _carried(shape: str, messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What a shape carries, in order: texts, images, calls (id, name,
    arguments as JSON) and results (id, text); the envelope left out."""
    out: list[tuple[str, Any]] = []

    def args(text: str) -> Any:
        try:
            parsed = json.loads(text)
        except ValueError:
            return {"arguments": text}
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    for m in messages:
        if shape == "chat":
            content = m.get("content")
            kind = "result" if m["role"] == "tool" else "text"
            if isinstance(content, str):
                out.append((kind, (m.get("tool_call_id"), content)) if kind == "result"
                           else ("text", content))  # fmt: skip
            for b in content if isinstance(content, list) else []:
                out.append(("text", b["text"]) if b["type"] == "text"
                           else ("image", b["image_url"]["url"]))  # fmt: skip
            for c in m.get("tool_calls") or []:
                out.append(("call", (c["id"], c["function"]["name"],
                                     args(c["function"]["arguments"]))))  # fmt: skip
        elif shape == "responses":
            if m["type"] == "function_call":
                out.append(("call", (m["call_id"], m["name"], args(m["arguments"]))))
            elif m["type"] == "function_call_output":
                out.append(("result", (m["call_id"], m["output"])))
            elif isinstance(m["content"], str):
                out.append(("text", m["content"]))
            else:
                out += [("text", b["text"]) if b["type"] == "input_text"
                        else ("image", b["image_url"]) for b in m["content"]]  # fmt: skip
        else:
            blocks = m["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            for b in blocks:
                if b["type"] == "text":
                    out.append(("text", b["text"]))
                elif b["type"] == "tool_use":
                    out.append(("call", (b["id"], b["name"], b["input"])))
                elif b["type"] == "tool_result":
                    out.append(("result", (b["tool_use_id"], b["content"])))
                else:
                    src = b["source"]
                    url = src.get("url") or f"data:{src['media_type']};base64,{src['data']}"
                    out.append(("image", url))
    return out


@pytest.mark.skipif(not CORPUS, reason="needs /work/shared/data")
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(DATA)))
def test_every_corpus_session_carries_the_same_in_every_shape(path: Path) -> None:
    from anthropic.types import MessageParam, TextBlockParam
    from openai.types.responses import ResponseInputParam
    from pydantic import TypeAdapter

    if path.name in REJECTED:
        with pytest.raises(FormatError):
            formats.read(path)
        return
    sessions = formats.read(path)
    assert sessions
    messages_type = TypeAdapter(list[MessageParam])
    system_type = TypeAdapter(list[TextBlockParam])
    input_type = TypeAdapter(ResponseInputParam)
    for session in sessions:
        table = cc.Transcript.from_sessions([session]).to_arrow()
        for policy in POLICIES:
            render = {} if policy is None else policy.render_options()
            _same_as_reference(table, **render)
            chat = cc.to_model_messages(session, policy=policy, system="be brief")
            responses = cc.to_model_messages(session, policy=policy, system="be brief",
                                             shape="responses")  # fmt: skip
            body = cc.to_model_messages(session, policy=policy, system="be brief",
                                        shape="anthropic")  # fmt: skip
            messages_type.validate_python(body["messages"], strict=True)
            system_type.validate_python(body["system"], strict=True)
            input_type.validate_python(responses, strict=True)
            want = _carried("chat", chat)
            assert _carried("responses", responses) == want
            system = [("text", b["text"]) for b in body["system"]]
            got = system + _carried("anthropic", body["messages"])
            assert sorted(map(repr, got)) == sorted(map(repr, want))
            # Texts, calls and results each in the chat order.
            for kind in ("text", "call", "result", "image"):
                assert [c for c in got if c[0] == kind] == [c for c in want if c[0] == kind]


@settings(max_examples=sweep(300), deadline=None)
@given(transcripts(), st.fixed_dictionaries(RENDER_OPTIONS))
def test_the_shapes_match_reference(
    data: tuple[list[dict[str, Any]], pa.Table], render: dict[str, Any]
) -> None:
    """Generated transcripts (cleared and cut outputs, cleared inputs, pins,
    reasoning, images, system messages, text-protocol steps): each message's
    Anthropic and Responses render is the reference's conversion of its chat
    render."""
    _, table = data
    _same_as_reference(table, **render)


def _step_session() -> cc.Session:
    return cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "u1", "role": "user"},
         "parts": [{"id": "t1", "type": "text", "text": "fix it"},
                   {"id": "f1", "type": "file", "mime": "image/png",
                    "url": "data:image/png;base64,iVBORw0KGgo="}]},
        {"info": {"id": "a1", "role": "assistant", "parentID": "u1", "finish": "tool-calls"},
         "parts": [{"id": "r1", "type": "reasoning", "text": "think"},
                   {"id": "t2", "type": "text", "text": "reading"},
                   *[{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                      "state": {"status": "completed", "input": {"filePath": f"f{i}"},
                                "output": f"out {i}"}} for i in range(2)]]},
    ]})  # fmt: skip


def test_anthropic_gathers_a_steps_results_into_one_user_message() -> None:
    body = cc.to_model_messages(_step_session(), shape="anthropic", system="sys")
    assert body["system"] == [{"type": "text", "text": "sys"}]
    user, assistant, results = body["messages"]
    assert user["content"][1]["source"] == {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}  # fmt: skip
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert assistant["content"][1]["input"] == {"filePath": "f0"}
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["c0", "c1"]


def test_responses_items_and_reasoning_left_out() -> None:
    policy = Policy(keep_thinking=1)
    items = cc.to_model_messages(_step_session(), shape="responses", policy=policy)
    assert [i["type"] for i in items] == ["message", "message", "function_call",
                                          "function_call", "function_call_output",
                                          "function_call_output"]  # fmt: skip
    assert items[2]["arguments"] == json.dumps({"filePath": "f0"}, separators=(",", ":"))
    assert "think" not in json.dumps(items)
    chat = cc.to_model_messages(_step_session(), policy=policy)
    assert chat[1]["reasoning_content"] == "think"  # the chat shape keeps it


def test_the_default_shape_is_chat() -> None:
    session = _step_session()
    assert cc.to_model_messages(session) == cc.to_model_messages(session, shape="chat")


@pytest.mark.parametrize("shape", ["gemini", "", None, 3])
def test_an_unknown_shape_is_a_config_error_naming_shape(shape: Any) -> None:
    with pytest.raises(ConfigError, match="shape"):
        cc.to_model_messages(_step_session(), shape=shape)
