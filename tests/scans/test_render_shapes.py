"""The model input in the three shapes (``to_model_messages(..., shape=)``):
OpenAI chat, OpenAI Responses input items and Anthropic Messages carry the
same texts, calls and results in the same order, for every session of the
shared corpus and for generated ones (against ``reference.to_anthropic`` /
``to_responses``, small conversions of the chat shape), and validate against
the official SDKs' request types."""

from __future__ import annotations

import itertools
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
    with pytest.raises(ConfigError, match="shape") as caught:
        cc.to_model_messages(_step_session(), shape=shape)
    if isinstance(shape, str):  # the core's check (shapes::Shape::parse) names the argument
        assert caught.value.column == "shape"


def _alternates(messages: list[dict[str, Any]]) -> bool:
    return all(a["role"] != b["role"] for a, b in itertools.pairwise(messages))


@pytest.mark.skipif(not CORPUS, reason="needs /work/shared/data")
def test_the_client_and_the_model_input_give_one_anthropic_body_on_the_corpus() -> None:
    """One conversion (shapes::anthropic_body): the summary client's
    ``to_anthropic_messages`` of a session's chat list is the body
    ``to_model_messages(..., shape="anthropic")`` gives, and no body holds
    two turns of one role in a row (the model input's shape had two user
    messages in a row where a step's results met the next user message:
    the client merged them, the core did not)."""
    from anthropic.types import MessageParam
    from ctxcompact.clients.anthropic import to_anthropic_messages
    from pydantic import TypeAdapter

    messages_type = TypeAdapter(list[MessageParam])
    compared = 0
    for path in CORPUS:
        if path.name in REJECTED:
            continue
        for session in formats.read(path):
            for policy in POLICIES:
                chat = cc.to_model_messages(session, policy=policy, system="be brief")
                body = cc.to_model_messages(session, policy=policy, system="be brief",
                                            shape="anthropic")  # fmt: skip
                system, messages = to_anthropic_messages(chat)
                assert system == "\n\n".join(b["text"] for b in body.get("system", []))
                if body["messages"] and body["messages"][0]["role"] != "user":
                    assert messages[0]["content"] == [{"type": "text", "text": "(conversation)"}]
                    messages = messages[1:]
                assert messages == body["messages"]
                assert _alternates(body["messages"]), session.info.id
                messages_type.validate_python(body["messages"], strict=True)
                compared += 1
    assert compared > 400


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@st.composite
def _chats(draw: st.DrawFn) -> list[dict[str, Any]]:
    """OpenAI chat lists as a runtime holds them: every role, string and
    block contents (empty texts, images), calls with string or object
    arguments, each call answered."""
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 10))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant"]))
        content: Any = draw(st.one_of(
            st.none(), _TEXT,
            st.lists(st.one_of(
                st.builds(lambda t: {"type": "text", "text": t}, _TEXT),
                st.just({"type": "image_url",
                         "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
                st.just({"type": "image_url", "image_url": {"url": "https://x/y.png"}}),
            ), max_size=3),
        ))  # fmt: skip
        if role in ("system", "developer"):
            content = draw(_TEXT)
        message: dict[str, Any] = {"role": role, "content": content}
        calls = draw(st.integers(0, 2)) if role == "assistant" else 0
        if calls:
            message["tool_calls"] = [
                {"id": f"c{i}-{j}", "type": "function", "function": {
                    "name": "read", "arguments": draw(st.one_of(
                        st.just('{"p": 1}'), _TEXT, st.just({"p": [1]}), st.none()))}}
                for j in range(calls)
            ]  # fmt: skip
        out.append(message)
        for j in range(calls):
            out.append({"role": "tool", "tool_call_id": f"c{i}-{j}", "content": draw(_TEXT)})
    return out


@settings(max_examples=sweep(200), deadline=None)
@given(_chats())
def test_a_runtimes_chat_list_becomes_one_valid_anthropic_body(chat: list[dict[str, Any]]) -> None:
    """Generated chat lists: the client's conversion is the core's body, the
    SDK's request types take it, no two turns of one role follow each other,
    and every non-empty text, call and result is carried in order."""
    from anthropic.types import MessageParam
    from ctxcompact.clients.anthropic import to_anthropic_messages
    from pydantic import TypeAdapter

    body = json.loads(_core.anthropic_body(json.dumps(chat).encode()))
    system, messages = to_anthropic_messages(chat)
    lead = 1 if body["messages"] and body["messages"][0]["role"] != "user" else 0
    assert messages[lead:] == body["messages"]
    assert system == "\n\n".join(
        m["content"] for m in chat if m["role"] in ("system", "developer") and m["content"]
    )
    assert _alternates(messages)
    TypeAdapter(list[MessageParam]).validate_python(messages, strict=True)
    rest = [m for m in chat if m["role"] not in ("system", "developer")]
    want = [c for c in _carried("chat", _without_empty(rest)) if c != ("text", "")]
    got = _carried("anthropic", body["messages"])
    for kind in ("text", "image", "result"):
        assert [c for c in got if c[0] == kind] == [c for c in want if c[0] == kind]
    assert [c[1][0] for c in got if c[0] == "call"] == [c[1][0] for c in want if c[0] == "call"]


def _without_empty(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat list as ``_carried`` reads it, a call's arguments as text."""
    out = []
    for m in chat:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls") or []:
            args = c["function"]["arguments"]
            c["function"] = {**c["function"], "arguments": args if isinstance(args, str)
                             else json.dumps(args if args is not None else {})}  # fmt: skip
        out.append(m)
    return out
