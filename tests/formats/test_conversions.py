"""Converting a real session from one format to another: nothing is lost on
the way, and a writer that cannot hold a foreign session says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.reader import read_jsonl
from ctxcompact.models import Session
from ctxcompact.scans.chat import validate_chat_messages

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CLAUDE = DATA / "formats" / "claude-code" / "claude-code-log" / "representative_messages.jsonl"
ROCK = DATA / "transcripts" / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "rev"
ROCK = ROCK / "rock.traj"
SAMPLE = DATA / "formats" / "claude-code" / "claude-code-transcripts" / "sample_session.jsonl"
needs = pytest.mark.skipif(not DATA.is_dir(), reason="no ../shared/data")


@needs
def test_a_claude_code_session_is_no_openhands_stream(tmp_path: Path) -> None:
    # Claude Code keeps its event envelope under source["event"] too; written as
    # OpenHands events it lost every message (text and tool calls).
    sessions = formats.read(CLAUDE)
    with pytest.raises(FormatError, match="did not come from an OpenHands stream"):
        formats.to_openhands(sessions[0])
    out = tmp_path / "rep.openhands.json"
    with pytest.raises(FormatError, match="did not come from an OpenHands stream"):
        formats.write(sessions[:1], out, "openhands")
    assert not out.exists()


def _texts(session: Session) -> list[tuple[str, str]]:
    return [(m.role, p.text or "") for m in session.messages for p in m.parts if p.type == "text"]


@needs
def test_a_swe_agent_system_prompt_survives_claude_code(tmp_path: Path) -> None:
    # its system message keeps SWE-agent's fields ("agent", "message_type") as
    # source, and the writer took a source without "text_key" for a Claude Code
    # event that holds its text itself: the prompt was dropped
    sessions = formats.read(ROCK)
    system = sessions[0].messages[0]
    assert system.role == "system" and system.parts[0].text
    out = tmp_path / "rock.claude.jsonl"
    formats.write(sessions, out, "claude-code")
    back = formats.read(out)
    assert back[0].messages[0].role == "system"
    assert back[0].messages[0].parts[0].text == system.parts[0].text
    assert _texts(back[0]) == _texts(sessions[0])  # every text, the prompt included


@needs
def test_the_responses_output_reads_back_as_responses(tmp_path: Path) -> None:
    # two sessions, the first of text messages only: written without
    # "type": "message", it was detected as openai-chat, its input_text blocks
    # read as "" and the second line failed ("not a chat message (no role)")
    # (the sample is one session: its summary line is none of its own)
    text_only = formats.from_openai_chat(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "texts"
    )
    sessions = [text_only, *formats.read(SAMPLE)]
    assert len(sessions) == 2
    out = tmp_path / "sample.responses.jsonl"
    formats.write(sessions, out, "openai-responses")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    messages = [i for line in lines for i in line if "role" in i]
    assert messages and all(i["type"] == "message" for i in messages)
    assert formats.jsonl_format(lines[0]) == "openai-responses"
    back = formats.read(out)
    assert [_texts(s) for s in back] == [_texts(s) for s in sessions]
    native = read_jsonl(out)
    assert native.format == "openai-responses" and native.sessions == 2
    assert native.transcript.to_sessions() == back


def test_responses_items_without_type_are_told_by_their_blocks(tmp_path: Path) -> None:
    # what the writer made before: {role, content} items with input_text blocks
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "fixed"}]},
    ]
    assert formats.detect_format(items) == "openai-responses"
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(items) + "\n")
    assert read_jsonl(path).format == "openai-responses"
    assert _texts(formats.read(path)[0]) == [("user", "fix the bug"), ("assistant", "fixed")]


BLOCKS: list[dict[str, Any]] = [
    {"type": "refusal", "refusal": "I cannot help with that."},
    {"type": "output_text", "text": "kept", "annotations": []},
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
]


def test_the_chat_reader_keeps_the_text_of_every_block(tmp_path: Path) -> None:
    # a refusal's text, or the text of a block of another type, was read as ""
    chat = [{"role": "assistant", "content": BLOCKS}]
    session = formats.read(chat, "openai-chat")[0]
    assert [p.text for p in session.messages[0].parts] == ["I cannot help with that.", "kept", ""]
    assert formats.to_openai_chat(session) == chat  # written back as it was
    path = tmp_path / "blocks.jsonl"
    path.write_text(json.dumps(chat) + "\n")
    assert read_jsonl(path, "openai-chat").transcript.to_sessions() == [
        formats.read(path, "openai-chat")[0]
    ]


CHAT_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}


@needs
def test_claude_code_to_chat_writes_chat_messages_only() -> None:
    # each message carried Claude Code's event, message, has_content and
    # content_is_text keys, and each turn of tool results became an extra
    # {"role": "user", "content": ""} (the results follow their calls already)
    session = formats.read(CLAUDE)[0]
    chat = formats.to_openai_chat(session)
    assert all(set(m) <= CHAT_KEYS for m in chat), [sorted(set(m) - CHAT_KEYS) for m in chat]
    assert not [m for m in chat if m["role"] == "user" and m["content"] == ""]
    calls = [c["id"] for m in chat for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in chat if m["role"] == "tool"]
    assert calls and results == calls
    body = formats.to_anthropic(session)  # the same for another target
    assert all(set(m) == {"role", "content"} for m in body["messages"])
    # and Claude Code itself still gets its own events back
    lines = [json.loads(line) for line in CLAUDE.read_text().splitlines() if line.strip()]
    assert formats.to_claude_code(session) == lines


@needs
def test_tau_bench_jsonl_is_a_run_per_line(tmp_path: Path) -> None:
    # was the whole list of runs on one line, without a line break
    sessions = formats.read(DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json")
    assert len(sessions) > 1
    out = tmp_path / "runs.jsonl"
    formats.write(sessions, out, "tau-bench")
    text = out.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == len(sessions)
    assert all(len(json.loads(line)) == 1 for line in text.splitlines())
    assert formats.read(out) == sessions
    assert read_jsonl(out).transcript.to_sessions() == sessions


def test_images_convert_to_the_target_formats_image_blocks() -> None:
    # an Anthropic image was written into chat (and Responses) as its own block
    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image", "source": png},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
        {"type": "image", "source": {"type": "file", "file_id": "f1"}},
    ]}]}  # fmt: skip
    session = formats.read(body, "anthropic")[0]
    content = formats.to_openai_chat(session)[0]["content"]
    assert content[1:] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://x/a.jpg"}},
        {"type": "text", "text": "[image: unknown type]"},
    ]
    items = formats.to_openai_responses(session)[0]["content"]
    assert items[1] == {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    assert items[3] == {"type": "input_text", "text": "[image: unknown type]"}
    # and back: a chat image is an Anthropic image block, its data URL as base64 data
    chat = [{"role": "user", "content": content[:3]}]
    blocks = formats.to_anthropic(formats.from_openai_chat(chat, "s"))["messages"][0]["content"]
    assert blocks[1:] == [
        {"type": "image", "source": png},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
    ]


def test_an_image_without_a_url_is_named_by_type_and_size() -> None:
    from ctxcompact.formats.source import image_placeholder

    assert image_placeholder("image/png", 8) == "[image: image/png, 8 bytes]"


def test_a_stored_sessions_image_is_an_image_block_in_the_full_writers() -> None:
    # a data: URL was an Anthropic {"type": "url"} source (url sources must be
    # http(s)), and Responses wrote an image as input_file
    from ctxcompact.models import Session

    png = "data:image/png;base64,iVBORw0KGgoA" + "A" * 8
    jpeg = "https://x/a.jpg"
    parts = [{"id": "p0", "type": "text", "text": "what?"},
             {"id": "p1", "type": "file", "mime": "image/png", "url": png},
             {"id": "p2", "type": "file", "mime": "image/jpeg", "url": jpeg}]  # fmt: skip
    session = Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "m1", "sessionID": "s", "role": "user"}, "parts": parts}]})  # fmt: skip
    blocks = formats.to_anthropic(session)["messages"][0]["content"]
    assert blocks[1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgoAAAAAAAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
    ]  # fmt: skip
    assert formats.to_anthropic(session, view="model")["messages"][0]["content"] == blocks
    content = formats.to_openai_responses(session)[0]["content"]
    assert content[1:] == [{"type": "input_image", "image_url": png},
                           {"type": "input_image", "image_url": "https://x/a.jpg"}]  # fmt: skip


def test_an_anthropic_image_has_its_url_on_the_part_so_the_model_is_sent_an_image(
    tmp_path: Path,
) -> None:
    # the part had no url: the model view sent "[file: file (image/png)]" and
    # the estimates counted no image
    import ctxcompact as cc
    from ctxcompact.formats.reader import read_jsonl
    from ctxcompact.scans.chat import IMAGE_TOKENS, estimate_chat_messages

    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is on this screen?"},
        {"type": "image", "source": png},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
    ]}]}  # fmt: skip
    session = formats.read(body, "anthropic")[0]
    parts = session.messages[0].parts
    assert [(p.mime, p.url) for p in parts[1:]] == [
        ("image/png", "data:image/png;base64,iVBORw0KGgo="),
        ("image/*", "https://x/a.jpg"),
    ]
    sent = cc.to_model_messages(session)
    assert sent[0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://x/a.jpg"}}]  # fmt: skip
    want = 4 + 6 + 2 * IMAGE_TOKENS
    assert estimate_chat_messages(sent) == want
    assert cc.estimate_messages(cc.Transcript.from_sessions([session])).total == want
    assert formats.to_anthropic(session) == body  # still written back as it was
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(body) + "\n")
    native = read_jsonl(path, "anthropic").transcript.to_sessions()
    assert native == formats.read(path, "anthropic")
    assert native[0].messages[0].parts[1].url == "data:image/png;base64,iVBORw0KGgo="


SWE_AGENT_TRAJS = sorted(DATA.glob("**/*.traj"))


@pytest.mark.skipif(not SWE_AGENT_TRAJS, reason="no SWE-agent trajectories in the shared data")
def test_swe_agent_keys_stay_out_of_openai_chat_and_round_trip_in_swe_agent(
    tmp_path: Path,
) -> None:
    # agent, thought, action, is_demo, message_type, tool_call_ids... were
    # written into every openai-chat message
    from ctxcompact.formats.chat import CHAT_KEYS
    from ctxcompact.formats.reader import read_jsonl

    for path in SWE_AGENT_TRAJS:
        traj = json.loads(path.read_text("utf-8"))
        (session,) = formats.read(path)
        chat = formats.to_openai_chat(session)
        assert chat and all(set(m) <= set(CHAT_KEYS) for m in chat), path
        assert formats.to_swe_agent(session) == traj, path
        line = tmp_path / "t.jsonl"
        line.write_text(json.dumps(traj) + "\n")
        assert read_jsonl(line, "swe-agent").transcript.to_sessions() == formats.read(
            line, "swe-agent"
        ), path


RESPONSES_RUN = [
    {"type": "message", "role": "user", "content": "hi", "id": "msg_1", "status": "completed"},
    {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": '{"a":1}', "id": "fc"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
]


def test_responses_to_chat_writes_chat_calls_and_keys_only() -> None:
    # the call's id was the item's ("fc", which no result names), its type
    # "function_call", and call_id/name/content_is_text/status leaked in
    chat = formats.to_openai_chat(formats.from_openai_responses(RESPONSES_RUN, "s"))
    assert chat == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]  # fmt: skip
    validate_chat_messages(chat)  # every result names a call


def test_responses_to_anthropic_writes_each_result_once() -> None:
    # the function_call_output item was written again, raw, after its tool_result turn
    body = formats.to_anthropic(formats.from_openai_responses(RESPONSES_RUN, "s"))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    ]
    assert "function_call_output" not in str(body)


@needs
def test_claude_code_titles_are_no_empty_system_messages_elsewhere() -> None:
    # a summary (title) line became {"role": "system", "content": ""} in chat
    # and "system": [] in Anthropic
    session = formats.read(CLAUDE)[0]
    assert not [m for m in formats.to_openai_chat(session) if m["role"] == "system"]
    assert "system" not in formats.to_anthropic(session)


def test_two_system_messages_are_one_anthropic_system_prompt() -> None:
    # the second overwrote the first
    chat = [{"role": "system", "content": "You fix tests."},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Be brief."}]  # fmt: skip
    body = formats.to_anthropic(formats.read(chat)[0])
    assert body["system"] == "You fix tests.\n\nBe brief."


@needs
def test_claude_code_says_it_cannot_hold_a_system_prompt(tmp_path: Path) -> None:
    # Claude Code stores no system prompt: to_claude_code writes one as a
    # `system` event, which its readers keep as a note never sent to the model.
    # The tau-bench policy prompt dropped out of every estimate (-44%) unsaid.
    sessions = formats.read(DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json")
    assert formats.losses(sessions, "claude-code") == [
        f"{len(sessions)} system prompt(s) written as Claude Code 'system' events, which are "
        f"never model input (Claude Code stores no system prompt), in {len(sessions)} session(s)"
    ]
    out = tmp_path / "tau.jsonl"
    formats.write(sessions[:1], out, "claude-code")
    back = formats.read(out)[0]
    assert back.messages[0].role == "system" and all(p.ignored for p in back.messages[0].parts)
    # every other target keeps it as model input; Claude Code's own events are no loss
    for target in ("anthropic", "openai-chat", "openai-responses", "swe-agent", "tau-bench"):
        assert not any("system prompt" in s for s in formats.losses(sessions, target))
    assert formats.losses(formats.read(SAMPLE), "claude-code") == []
    todo = formats.read(CLAUDE.with_name("todowrite_examples.jsonl"))
    assert formats.losses(todo, "claude-code") == []
    traj = formats.read(ROCK)
    assert any("system prompt" in s for s in formats.losses(traj, "claude-code"))


@needs
def test_a_session_record_goes_back_only_into_its_own_format(tmp_path: Path) -> None:
    # to_anthropic started from any format's session record: a SWE-agent .traj
    # put environment/trajectory/info into the Messages body, and a mini-swe-agent
    # dict trajectory's trajectory_format made the body unreadable
    traj = formats.read(ROCK)
    body = formats.to_anthropic(traj[0])
    assert set(body) == {"system", "messages"}
    assert all(set(m) == {"role", "content"} for m in body["messages"])  # no swe_agent key
    assert not any("swe_agent" in item for item in formats.to_openai_responses(traj[0]))
    steps = json.loads((DATA / "transcripts" / "mini-swe-agent" / "local.traj.json").read_text())
    mini = tmp_path / "local.traj.json"
    mini.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": steps,
                                "info": {"exit_status": "Submitted"}}))  # fmt: skip
    out = tmp_path / "local.anthropic.json"
    formats.write(formats.read(mini), out, "anthropic")
    assert set(json.loads(out.read_text())) == {"system", "messages"}
    assert formats.read(out)[0].messages  # read back as Anthropic (was a FormatError)
    tau = formats.read(DATA / "transcripts" / "tau-bench" / "gpt-4o-airline.json")[:1]
    written = {}
    for target in ("anthropic", "swe-agent", "mini-swe-agent", "tau-bench"):
        for name, sessions in (("traj", traj), ("mini", formats.read(mini)), ("tau", tau)):
            path = tmp_path / f"{name}.{target}.json"
            formats.write(sessions, path, target)
            doc = json.loads(path.read_text())
            doc = doc[0] if target == "tau-bench" else doc
            written[name, target] = set(doc) if isinstance(doc, dict) else {"a list"}
            assert formats.read(path, target)
    # each keeps its own record, and only its own
    assert written["traj", "swe-agent"] == {"environment", "history", "info", "trajectory"}
    assert written["mini", "mini-swe-agent"] == {"trajectory_format", "messages", "info"}
    assert written["tau", "tau-bench"] == {"task_id", "reward", "info", "trial", "traj"}
    assert written["tau", "swe-agent"] == written["mini", "swe-agent"] == {"history"}
    assert written["traj", "tau-bench"] == written["mini", "tau-bench"] == {"task_id", "traj"}
    assert written["tau", "mini-swe-agent"] == {"trajectory_format", "messages"}
    assert written["traj", "mini-swe-agent"] == {"a list"}  # its steps tell what it is
    # an Anthropic request's own parameters go back into its body, not into a trajectory
    request = {
        "model": "claude-x",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    session = formats.read(request, "anthropic")[0]
    assert formats.to_anthropic(session) == request
    path = tmp_path / "req.swe-agent.json"
    formats.write([session], path, "swe-agent")
    assert set(json.loads(path.read_text())) == {"history"}


# the pass's Responses run (/tmp/pass-formats/resp_native.json)
RESPONSES_TEXTS: list[dict[str, Any]] = [
    {"type": "message", "role": "user",
     "content": [{"type": "input_text", "text": "Please read app.py"}]},
    {"type": "message", "id": "msg_1", "role": "assistant",
     "content": [{"type": "output_text", "text": "Sure, reading it."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "read",
     "arguments": '{"path":"app.py"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "print('hi')"},
    {"type": "message", "id": "msg_2", "role": "assistant",
     "content": [{"type": "output_text", "text": "It prints hi."},
                 {"type": "output_text", "text": "Done.", "annotations": []}]},
]  # fmt: skip
#: The Chat Completions content part types.
CHAT_BLOCKS = {"text", "image_url", "input_audio", "file", "refusal"}
CHAT_TARGETS = ("openai-chat", "tau-bench", "swe-agent", "mini-swe-agent")


def _chat_lists(doc: Any) -> list[list[dict[str, Any]]]:
    """The chat message lists of a written chat-format document."""
    if isinstance(doc, dict) and "history" in doc:
        return [doc["history"]]
    if isinstance(doc, dict):
        return [doc["messages"]]
    if doc and "traj" in doc[0]:
        return [run["traj"] for run in doc]
    return [doc]


@pytest.mark.parametrize("target", CHAT_TARGETS)
def test_responses_text_is_written_into_chat_formats_as_chat_content(
    tmp_path: Path, target: str
) -> None:
    # every message was written as bare {"type": "input_text"} / {"type":
    # "output_text"} blocks: the Responses reader keeps a block without its
    # text, and the chat writer wrote that block back as it was
    import ctxcompact as cc

    session = formats.from_openai_responses(RESPONSES_TEXTS, "resp")
    out = tmp_path / f"resp.{target}.json"
    formats.write([session], out, target)
    (messages,) = _chat_lists(json.loads(out.read_text()))
    contents = [m["content"] for m in messages if m["role"] in ("user", "assistant")]
    assert contents == [
        "Please read app.py",
        "Sure, reading it.",
        None,
        [{"type": "text", "text": "It prints hi."}, {"type": "text", "text": "Done."}],
    ]
    blocks = [b for c in contents if isinstance(c, list) for b in c]
    assert {b["type"] for b in blocks} <= CHAT_BLOCKS
    validate_chat_messages(messages)
    back = formats.read(out, target)
    assert [cc.to_model_messages(s) for s in back] == [cc.to_model_messages(session)]
    assert formats.losses([session], target) == []


@needs
def test_a_claude_code_run_through_responses_keeps_its_text_in_chat(tmp_path: Path) -> None:
    # representative -> openai-chat -> openai-responses -> openai-chat went from
    # 11 model messages with text to 4: every Responses message lost its text
    import ctxcompact as cc

    chat = tmp_path / "rep.chat.json"
    formats.write(formats.read(CLAUDE), chat, "openai-chat")
    first = formats.read(chat)
    responses = tmp_path / "rep.responses.json"
    formats.write(first, responses, "openai-responses")
    again = tmp_path / "rep.chat2.json"
    formats.write(formats.read(responses), again, "openai-chat")
    written = json.loads(again.read_text())["messages"]
    assert not [b for m in written if isinstance(m["content"], list) for b in m["content"]
                if b["type"] not in CHAT_BLOCKS or "text" not in b]  # fmt: skip

    def said(session: Session) -> list[str]:
        return [m["content"] for m in cc.to_model_messages(session) if m.get("content")]

    assert said(formats.read(again)[0]) == said(first[0])
    assert len(said(first[0])) >= 9  # user prompts, answers and tool outputs


# the pass's Anthropic request (/tmp/pass-formats/an.json)
ANTHROPIC_CALL: dict[str, Any] = {"messages": [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "reading"},
        {"type": "tool_use", "id": "tu1", "name": "read", "input": {"path": "a"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "AAA"}]},
]}  # fmt: skip
CHAT_CALL = {"id": "tu1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a"}'}}  # fmt: skip


def _finished_calls(session: Session) -> list[tuple[str | None, str | None, str, Any]]:
    return [(p.callID, p.tool, p.state.status, p.state.output)
            for m in session.messages for p in m.parts
            if p.type == "tool" and p.state is not None]  # fmt: skip


@pytest.mark.parametrize("target", CHAT_TARGETS)
def test_an_anthropic_tool_call_is_a_chat_tool_call_and_converts_back_with_its_result(
    tmp_path: Path, target: str
) -> None:
    # the call was written {"id", "type": "tool_use", "function", "name",
    # "input"} (the Anthropic block under the chat keys); converted on to
    # anthropic it became a tool_use without an id and its result was lost
    session = formats.read(ANTHROPIC_CALL, "anthropic")[0]
    out = tmp_path / f"an.{target}.json"
    formats.write([session], out, target)
    (messages,) = _chat_lists(json.loads(out.read_text()))
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    assert calls == [CHAT_CALL]
    validate_chat_messages(messages)
    back = formats.read(out, target)
    assert _finished_calls(back[0]) == [("tu1", "read", "completed", "AAA")]
    body = formats.to_anthropic(back[0])
    assert body["messages"][1:] == ANTHROPIC_CALL["messages"][1:]


def test_an_old_chat_file_with_tool_use_calls_converts_to_anthropic_with_ids_and_results() -> None:
    # what older versions wrote (/tmp/pass-formats/an_chat.json): the chat
    # reader keeps type/name/input without the id, and the Anthropic writer took
    # them for its own block
    old = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "reading",
         "tool_calls": [{**CHAT_CALL, "type": "tool_use", "name": "read", "input": {"path": "a"}}]},
        {"role": "tool", "tool_call_id": "tu1", "content": "AAA"},
    ]  # fmt: skip
    session = formats.read(old, "openai-chat")[0]
    body = formats.to_anthropic(session)
    assert body["messages"][1:] == ANTHROPIC_CALL["messages"][1:]
    assert [c for m in formats.to_openai_chat(session) for c in m.get("tool_calls", [])] == [
        CHAT_CALL
    ]


@needs
@pytest.mark.parametrize("sample", [SAMPLE, CLAUDE], ids=lambda p: p.name)
def test_claude_code_tool_calls_survive_chat_then_anthropic(tmp_path: Path, sample: Path) -> None:
    # every call of a real Claude Code session was typed "tool_use" in chat, and
    # -> openai-chat -> anthropic dropped every tool output ("File written
    # successfully"...): the calls read back pending
    import ctxcompact as cc

    sessions = formats.read(sample)
    calls = [c for s in sessions for c in _finished_calls(s)]
    assert calls and all(status == "completed" for _, _, status, _ in calls)
    chat = tmp_path / "cc.chat.jsonl"
    formats.write(sessions, chat, "openai-chat")
    for line in chat.read_text().splitlines():
        doc = json.loads(line)
        messages = doc["messages"] if isinstance(doc, dict) else doc
        tool_calls = [c for m in messages for c in m.get("tool_calls") or []]
        assert all(set(c) == {"id", "type", "function"} and c["type"] == "function"
                   for c in tool_calls)  # fmt: skip
        validate_chat_messages(messages)
    anthropic = tmp_path / "cc.anthropic.jsonl"
    formats.write(formats.read(chat), anthropic, "anthropic")
    back = formats.read(anthropic)
    assert [c for s in back for c in _finished_calls(s)] == calls
    assert [cc.to_model_messages(s) for s in back] == [
        cc.to_model_messages(s) for s in formats.read(chat)
    ]


@pytest.mark.parametrize("target", ["anthropic", "claude-code"])
def test_responses_text_is_an_anthropic_text_block(tmp_path: Path, target: str) -> None:
    # the Responses block's type was written over "text": {"type": "input_text",
    # "text": ...}, which the Anthropic reader does not read as text
    import ctxcompact as cc

    session = formats.from_openai_responses(RESPONSES_TEXTS, "resp")
    out = tmp_path / f"resp.{target}.jsonl"
    formats.write([session], out, target)
    assert "input_text" not in out.read_text() and "output_text" not in out.read_text()
    (back,) = formats.read(out, target)
    assert cc.to_model_messages(back) == cc.to_model_messages(session)
