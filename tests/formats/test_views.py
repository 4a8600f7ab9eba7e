"""Writers' view="model": exactly what a model call is sent; "full" stays lossless."""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pytest
from builders import fill
from ctxcompact import formats
from ctxcompact.errors import ConfigError, FormatError
from ctxcompact.formats.anthropic import to_anthropic
from ctxcompact.formats.langchain import to_langchain
from ctxcompact.formats.pydantic_ai import to_pydantic_ai
from ctxcompact.formats.responses import to_openai_responses
from ctxcompact.live import Compactor, MemoryStore, Summarizer
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT

BIG = "x" * 4_000


def pruned_run(calls: bool = False) -> cc.Session:
    """A mini-swe-agent run of 8 steps with swe-agent's policy applied (3 cleared);
    ``calls``: the same run made with function calls (a chat list)."""
    run: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test"}]
    for i in range(8):
        if calls:
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "bash", "arguments": f'{{"command":"cat f{i}.py"}}'},
            }
            run += [{"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": BIG}]  # fmt: skip
            continue
        run += [{"role": "assistant", "content": f"```mswea_bash_command\ncat f{i}.py\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n" + BIG}]  # fmt: skip
    session = formats.read(run)[0]
    cc.mark_pruned(session, cc.prune(session, "swe-agent"))
    return session


def results(kind: str, written: Any) -> list[str]:
    """The tool result texts a writer wrote, oldest first."""
    if kind == "langchain":
        return [str(m.content) for m in written if m.type == "tool"]
    if kind == "pydantic-ai":
        return [str(p.content) for m in written for p in m.parts
                if p.part_kind == "tool-return"]  # fmt: skip
    if kind == "responses":
        return [str(i["output"]) for i in written if i.get("type") == "function_call_output"]
    return [str(b["content"]) if isinstance(b["content"], str) else b["content"][0]["text"]
            for m in written["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]  # fmt: skip


WRITERS = {"langchain": to_langchain, "pydantic-ai": to_pydantic_ai,
           "responses": to_openai_responses, "anthropic": to_anthropic}  # fmt: skip


@pytest.mark.parametrize("kind", WRITERS)
def test_the_model_view_has_the_placeholders_and_full_stays_whole(kind: str) -> None:
    session = pruned_run(calls=True)
    write = WRITERS[kind]
    sent = [m["content"] for m in cc.to_model_messages(session) if m["role"] == "tool"]
    assert sent.count(CLEARED_TOOL_OUTPUT) == 3
    assert results(kind, write(session, view="model")) == sent
    if kind != "pydantic-ai":  # to_pydantic_ai's full view needs a session read from it
        # lossless: the run as it was read (observations as the format had them), all whole
        assert str(write(session)).count(BIG) == 8


@pytest.mark.parametrize("kind", WRITERS)
def test_the_model_view_of_a_text_protocol_run_is_what_the_agent_sent(kind: str) -> None:
    """No call: each reply's text, then its observation as a user turn (the
    placeholder there once cleared), in every writer's model view."""
    session = pruned_run()
    view = cc.to_model_messages(session)
    assert [m["role"] for m in view] == ["user"] + ["assistant", "user"] * 8
    sent = [m["content"] for m in view[2::2]]
    assert sent.count(CLEARED_TOOL_OUTPUT) == 3
    assert sum(BIG in s for s in sent) == 5
    written = str(WRITERS[kind](session, view="model"))
    assert written.count(CLEARED_TOOL_OUTPUT) == 3 and written.count(BIG) == 5
    assert results(kind, WRITERS[kind](session, view="model")) == []  # no tool results


def test_the_full_pydantic_ai_view_of_another_session_names_the_function_to_use() -> None:
    # Pass 36, F7: the error said "convert through openai-chat", naming no function.
    session = pruned_run()
    with pytest.raises(FormatError, match="did not come from pydantic-ai") as e:
        to_pydantic_ai(session)
    assert 'to_pydantic_ai(session, view="model")' in str(e.value)
    assert "formats.to_openai_chat(session)" in str(e.value)
    assert to_pydantic_ai(session, view="model")  # the function it names takes the session


def compacted_run() -> cc.Session:
    """Six tool turns of 2,000-character outputs, summarized by a compaction."""
    store = MemoryStore()
    sid = store.create_session("s")
    fill(store, sid, 6, chars=2_000)
    compactor = Compactor(store, Summarizer(None), limits={"context": 100_000})
    compactor.request_compaction(sid)
    assert compactor.process_pending(sid) is not None
    return store.load(sid)


@pytest.mark.parametrize("kind", WRITERS)
def test_the_model_view_starts_at_the_latest_summary(kind: str) -> None:
    session = compacted_run()
    if kind != "pydantic-ai":  # full: every output, the summarized ones too
        assert str(WRITERS[kind](session)).count("x" * 2_000) == 6
    written = WRITERS[kind](session, view="model")
    # the six tool turns are behind the summary: none of their outputs is sent
    assert results(kind, written) == [] and "x" * 2_000 not in str(written)
    summary = next(m for m in session.messages if getattr(m.info, "summary", None) is True)
    assert summary.parts[0].text.split("\n")[0] in str(written)


def test_an_unknown_view_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="view must be 'full' or 'model'"):
        to_openai_responses(pruned_run(), view="compact")  # type: ignore[arg-type]


def test_pydantic_ai_model_view_sends_an_image_as_an_image() -> None:
    # it was the text of its URL: 6 kB of base64 in the user's prompt
    from pydantic_ai.messages import BinaryContent, ImageUrl

    png = "data:image/png;base64,iVBORw0KGgoA" + "A" * 6_000
    session = cc.Session.model_validate({
        "info": {"id": "ses_img"},
        "messages": [{
            "info": {"id": "msg_1", "sessionID": "ses_img", "role": "user"},
            "parts": [
                {"id": f"prt_{i}", "messageID": "msg_1", "sessionID": "ses_img", **part}
                for i, part in enumerate([
                    {"type": "text", "text": "what is on these?"},
                    {"type": "file", "mime": "image/png", "url": png},
                    {"type": "file", "mime": "image/jpeg", "url": "https://example.com/a.jpg"},
                    {"type": "file", "mime": "image/png", "url": "data:image/png;base64,!!"},
                ])
            ],
        }],
    })  # fmt: skip
    prompt = to_pydantic_ai(session, view="model")[0].parts[0].content
    assert prompt[0] == "what is on these?"
    assert isinstance(prompt[1], BinaryContent) and prompt[1].media_type == "image/png"
    assert isinstance(prompt[2], ImageUrl) and prompt[2].url == "https://example.com/a.jpg"
    assert "AAAA" not in str(prompt[0])
    assert isinstance(prompt[3], ImageUrl)  # not base64: sent as it was, for the API to judge


def test_losses_name_the_prune_marks_a_target_cannot_hold(tmp_path: Any) -> None:
    # written to any format but OpenCode the cleared outputs came back whole, unsaid
    session = pruned_run()
    session.messages[1].parts[0].pinned = True
    for target in ("anthropic", "openai-chat", "claude-code", "mini-swe-agent", "tau-bench"):
        said = formats.losses([session], target)
        assert any(s.startswith("3 cleared tool output(s) written in full") for s in said), target
        assert "1 pinned part(s) written unpinned (OpenCode only), in 1 session(s)" in said
    assert formats.losses([session], "opencode") == []
    # view="model" writes the placeholders instead, in any format: nothing to lose
    for target in ("openai-chat", "mini-swe-agent", "claude-code", "swe-agent"):
        out = tmp_path / f"run.{target}.jsonl"
        formats.write([session], out, target, view="model")
        back = formats.read(out, target)[0]
        # the observations, as the agent sent them (user turns)
        sent = [m["content"] for m in cc.to_model_messages(back) if m["role"] == "user"]
        assert sent.count(CLEARED_TOOL_OUTPUT) == 3, target
        assert sum(BIG in str(m) for m in cc.to_model_messages(back)) == 5, target
        assert formats.losses([back], target) == []
    with pytest.raises(ConfigError, match="view must be"):
        formats.write([session], tmp_path / "x.json", "anthropic", view="pruned")  # type: ignore[arg-type]


def test_losses_name_the_history_a_compaction_hid() -> None:
    session = compacted_run()
    hidden = len(session.messages) - len(cc.filter_pivot(session).messages)
    assert hidden > 0
    said = formats.losses([session], "anthropic")
    assert f"{hidden} message(s) before a compaction written as model input" in said[0]
    assert formats.losses([session], "opencode") == []
