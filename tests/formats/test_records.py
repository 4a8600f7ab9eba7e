"""A format's own record goes back only into that format: a chat document's
keys into openai-chat, a trajectory's into its trajectory format (whichever
way the writer is called), and the message and block records of pydantic-ai,
Anthropic and Responses into no other format's messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.formats.source import session_record

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ROCK = DATA / "transcripts" / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "rev"
ROCK = ROCK / "rock.traj"
needs = pytest.mark.skipif(not DATA.is_dir(), reason="no ../shared/data")

CHAT_DOC: dict[str, Any] = {
    "model": "gpt-4o",
    "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}],
    "tool_choice": "auto",
    "temperature": 0.2,
    "messages": [{"role": "user", "content": "hi"}],
}
ANTHROPIC_REQUEST: dict[str, Any] = {
    "model": "claude-x",
    "max_tokens": 10,
    "tools": [{"name": "read", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "hi"}],
}
#: The keys of a message in each target.
CHAT_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio"}
CHAT_BLOCK_KEYS = {"type", "text", "image_url"}


def test_a_chat_documents_own_keys_go_back_into_openai_chat(tmp_path: Path) -> None:
    # `convert d.json o.json --to openai-chat` wrote only {"id", "messages"}
    src = tmp_path / "d.json"
    src.write_text(json.dumps(CHAT_DOC))
    out = tmp_path / "o.json"
    formats.write(formats.read(src), out, "openai-chat")
    assert json.loads(out.read_text()) == {"id": "d", **CHAT_DOC}
    assert formats.read(out) == formats.read(src)
    # a plain {"model", "messages"} document too (keys both APIs have)
    plain = {"id": "p", "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    formats.write(formats.read(plain, "openai-chat"), out, "openai-chat")
    assert json.loads(out.read_text()) == plain


def test_a_chat_document_with_an_id_and_a_session_id_keeps_both(tmp_path: Path) -> None:
    """The id names the session; the session_id beside it is the document's
    own key (it was dropped on read, by the Python and the native readers)."""
    from ctxcompact.formats.reader import read_jsonl
    from ctxcompact.transcript import Transcript

    doc = {"id": "req-1", "session_id": "sess-9", "model": "gpt-4o",
           "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    src, out = tmp_path / "d.json", tmp_path / "o.json"
    src.write_text(json.dumps(doc))
    (session,) = formats.read(src)
    assert session.id == "req-1"
    formats.write([session], out, "openai-chat")
    assert json.loads(out.read_text()) == doc
    lines = tmp_path / "d.jsonl"
    lines.write_text(json.dumps(doc) + "\n")
    for table in (read_jsonl(lines).table, read_jsonl(lines, chunk_bytes=1).table):
        (native,) = Transcript(table).to_sessions()
        assert native.id == "req-1" and native == formats.read(lines)[0]
        assert json.loads(table.column("session_json")[0].as_py())["source"]["session_id"] == (
            "sess-9"
        )
    # without an id (or an empty one) the session_id names the session, as before
    rest = {k: v for k, v in doc.items() if k != "id"}
    for named_by_session_id in (rest, {"id": "", **rest}, {"id": None, **rest}):
        (named,) = formats.read(named_by_session_id, "openai-chat")
        assert named.id == "sess-9"
        assert session_record(named.info, "openai-chat") == {"model": "gpt-4o"}


def test_a_chat_documents_keys_go_into_no_other_format(tmp_path: Path) -> None:
    session = formats.read(CHAT_DOC, "openai-chat")[0]
    assert session_record(session.info, "openai-chat") == {
        k: v for k, v in CHAT_DOC.items() if k != "messages"
    }
    assert set(formats.to_anthropic(session)) == {"messages"}
    for target in ("swe-agent", "mini-swe-agent", "tau-bench"):
        assert session_record(session.info, target) == {}
    # and an Anthropic request's parameters go into no chat document
    request = formats.read(ANTHROPIC_REQUEST, "anthropic")[0]
    assert session_record(request.info, "openai-chat") == {}
    out = tmp_path / "r.json"
    formats.write([request], out, "openai-chat")
    assert set(json.loads(out.read_text())) == {"id", "messages"}
    assert formats.to_anthropic(request) == ANTHROPIC_REQUEST


@needs
def test_trajectory_writers_called_directly_keep_only_their_own_record() -> None:
    # formats.write dropped a foreign record before these writers ran; called
    # directly they wrote a .traj's environment/trajectory/info into a tau-bench
    # run and an Anthropic request's model/max_tokens into a .traj
    traj = formats.read(ROCK)[0]
    (run,) = formats.to_tau_bench([traj])
    assert set(run) == {"task_id", "traj"}
    assert formats.to_mini_swe_agent(traj) == formats.to_openai_chat(traj)  # its steps say
    request = formats.read(ANTHROPIC_REQUEST, "anthropic")[0]
    assert set(formats.to_swe_agent(request)) == {"history"}
    assert set(formats.to_mini_swe_agent(request)) == {"trajectory_format", "messages"}
    assert set(formats.to_tau_bench([request])[0]) == {"task_id", "traj"}
    # their own records still go back
    assert set(formats.to_swe_agent(traj)) == {"environment", "history", "info", "trajectory"}
    tau = formats.read(DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json")[:1]
    assert set(formats.to_tau_bench(tau)[0]) == {"task_id", "reward", "info", "trial", "traj"}


def _pydantic_history() -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart("hi")]),
        ModelResponse(
            parts=[TextPart("reading"), ToolCallPart("read", {"path": "a"}, "c1")], model_name="m"
        ),
        ModelRequest(parts=[ToolReturnPart("read", "AAA", "c1")]),
        ModelResponse(parts=[TextPart("done")], model_name="m"),
    ]


def test_pydantic_ai_records_stay_out_of_chat_anthropic_and_responses() -> None:
    pytest.importorskip("pydantic_ai")
    session = formats.from_pydantic_ai(_pydantic_history(), "p")
    chat = formats.to_openai_chat(session)
    assert chat == [
        {"role": "user", "content": [{"type": "text", "text": "be brief"},
                                     {"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": "reading", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "AAA"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    body = formats.to_anthropic(session)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "be brief"},
                                     {"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "AAA"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]  # fmt: skip
    items = formats.to_openai_responses(session)
    messages = [i for i in items if i["type"] == "message"]
    assert all(set(m) == {"type", "role", "content"} for m in messages)
    assert [b for m in messages for b in m["content"]] == [
        {"type": "input_text", "text": "be brief"},
        {"type": "input_text", "text": "hi"},
        {"type": "output_text", "text": "reading"},
        {"type": "output_text", "text": "done"},
    ]
    # pydantic-ai's own writer still has every key back
    back = formats.to_pydantic_ai(session)
    assert formats.from_pydantic_ai(back, "p") == session


ANTHROPIC_BLOCKS: dict[str, Any] = {"messages": [
    {"role": "user", "content": [
        {"type": "text", "text": "long doc", "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "It says so.", "citations": [{"type": "char_location"}]}]},
]}  # fmt: skip


def test_an_anthropic_text_blocks_own_keys_stay_out_of_chat() -> None:
    session = formats.read(ANTHROPIC_BLOCKS, "anthropic")[0]
    # citations are Anthropic's only; cache_control is a chat text block's key too
    assert formats.to_openai_chat(session) == [
        {"role": "user", "content": [
            {"type": "text", "text": "long doc", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": "It says so."},
    ]  # fmt: skip
    assert formats.to_anthropic(session) == ANTHROPIC_BLOCKS  # its own, kept
    # a chat text block's own other keys are no Anthropic keys
    chat = [{"role": "user", "content": [{"type": "text", "text": "a", "x_note": 1}]}]
    back = formats.read(chat, "openai-chat")[0]
    assert formats.to_openai_chat(back) == chat
    assert formats.to_anthropic(back)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]}
    ]


def test_a_chat_text_blocks_cache_control_survives_chat_and_anthropic() -> None:
    """A chat text block's cache_control (OpenRouter, LiteLLM) was dropped
    writing chat back to chat: its record was taken for an Anthropic block's.
    Each target keeps the keys that are its own: chat all of a chat block's,
    Anthropic its text block's (cache_control, not x_note)."""
    ephemeral = {"type": "ephemeral"}
    chat = [
        {"role": "system", "content": [
            {"type": "text", "text": "rules", "cache_control": ephemeral}]},
        {"role": "user", "content": [
            {"type": "text", "text": "long doc", "cache_control": ephemeral, "x_note": 1},
            {"type": "text", "text": "question"}]},
    ]  # fmt: skip
    session = formats.read(chat, "openai-chat")[0]
    assert formats.to_openai_chat(session) == chat
    body = formats.to_anthropic(session)
    assert body["system"] == [{"type": "text", "text": "rules", "cache_control": ephemeral}]
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "long doc", "cache_control": ephemeral},
        {"type": "text", "text": "question"}]}]  # fmt: skip
    again = formats.read({"id": "c", "messages": chat}, "openai-chat")[0]
    assert formats.to_openai_chat(again) == chat


def test_an_anthropic_system_prompts_cache_control_survives_its_round_trip() -> None:
    # a system prompt of one text block was written back as a string, without it
    body = {"system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    assert formats.to_anthropic(formats.read(body, "anthropic")[0]) == body


RESPONSES_RUN = [
    {"type": "message", "role": "user", "content": "hi", "id": "msg_1", "status": "completed"},
    {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed",
     "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
]  # fmt: skip


def test_responses_item_keys_are_no_keys_of_anthropic_turns() -> None:
    session = formats.from_openai_responses(RESPONSES_RUN, "r")
    assert formats.to_anthropic(session)["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert formats.to_openai_responses(session) == RESPONSES_RUN
    # nor of chat messages (the chat writer kept them out already)
    assert all(set(m) <= CHAT_KEYS for m in formats.to_openai_chat(session))


def test_a_custom_tool_call_goes_back_into_openai_chat_as_it_was() -> None:
    """A custom (freeform) tool call was read without its name and input and
    written back with a ``function`` beside its ``custom``; it is read as a
    call of its name with the input ``{"input": text}`` and written back as
    it was, its result after it."""
    chat = [{"role": "user", "content": "fix it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "custom",
                 "custom": {"name": "apply_patch", "input": "*** Begin Patch\n"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Done!"}]  # fmt: skip
    session = formats.from_openai_chat(chat)
    call = session.messages[1].parts[0]
    assert call.tool == "apply_patch" and call.state is not None
    assert call.state.input == {"input": "*** Begin Patch\n"}
    assert call.state.output == "Done!"
    assert formats.to_openai_chat(session) == chat
