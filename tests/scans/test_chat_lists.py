"""Chat-format helpers: the seed-001 estimator cases, light pruning, validation."""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.errors import (
    ConfigError,
    FormatError,
    OrphanedToolResultError,
    TranscriptError,
    UnknownValueError,
)
from ctxcompact.live.split import compact_messages
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import (
    IMAGE_TOKENS,
    check_chat_messages,
    estimate_chat_message,
    estimate_chat_messages,
    validate_chat_messages,
)
from ctxcompact.scans.masking import prune_tool_results


@pytest.mark.parametrize(("message", "expected"), [
    ({"role": "user", "content": "abcdefgh"}, 4 + 2),
    ({"role": "user", "content": [{"type": "text", "text": "abcd"},
                                  {"type": "text", "text": "efgh"}]},
     4 + 2),  # "abcd\nefgh" = 9 chars -> 2
    ({"role": "user", "content": ""}, 4),
    ({"role": "assistant", "content": None}, 4),
    ({"role": "user", "content": []}, 4),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "read", "arguments": '{"a":1}'}}]},
     4 + 1 + 2),
    ({"role": "tool", "tool_call_id": "c", "content": "x" * 100}, 4 + 25),
])  # fmt: skip
def test_estimates(message: dict[str, Any], expected: int) -> None:
    assert estimate_chat_message(message) == expected


def test_overhead_and_method() -> None:
    msgs = [{"role": "user", "content": "abcde"}] * 3
    assert estimate_chat_messages(msgs, overhead=0) == 3 * 1  # round(5/4) = 1
    assert estimate_chat_messages(msgs, overhead=0, method="ceil-bytes") == 3 * 2
    assert estimate_chat_messages(msgs, overhead=2) == 3 * 3  # seed 004: 2 per message


def test_prune_tool_results_shortens_only_old_long_results() -> None:
    msgs = [
        {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "A" * 5000},
        {"role": "tool", "tool_call_id": "b", "content": "short"},
        {"role": "user", "content": "U" * 5000},
        {"role": "assistant", "content": None, "tool_calls": [_call("c")]},
        {"role": "tool", "tool_call_id": "c", "content": "C" * 5000},
    ]
    out = prune_tool_results(msgs, preserve_recent=1, max_chars=100)
    assert out[1]["content"].startswith("A" * 50) and out[1]["content"].endswith("A" * 50)
    assert "4900 characters of old tool output removed" in out[1]["content"]
    assert out[2] == msgs[2] and out[3] == msgs[3]  # short, and not a tool result
    assert out[5] == msgs[5]  # recent
    assert msgs[1]["content"] == "A" * 5000  # input untouched
    assert prune_tool_results(msgs, preserve_recent=10) == msgs
    with pytest.raises(ValueError):
        prune_tool_results(msgs, preserve_recent=-1)


@pytest.mark.parametrize("bad", ["hello", [{"content": "x"}], [["role", "tool"]], None])
def test_prune_tool_results_refuses_what_is_not_a_message_list(bad: Any) -> None:
    # were a bare ValueError from dict(), or passed through as if pruned
    with pytest.raises(FormatError):
        prune_tool_results(bad, preserve_recent=1)


@pytest.mark.parametrize("bad", [1.5, True, "2"])
def test_prune_tool_results_refuses_a_count_that_is_not_an_int(bad: Any) -> None:
    with pytest.raises(ConfigError, match="preserve_recent"):
        prune_tool_results([], preserve_recent=bad)


def test_validation_names_the_message() -> None:
    good = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]  # fmt: skip
    validate_chat_messages(good)
    with pytest.raises(OrphanedToolResultError) as e:
        orphan = {"role": "tool", "tool_call_id": "zz", "content": "?"}
        validate_chat_messages([{"role": "user", "content": "hi"}, orphan])
    assert e.value.row == 1 and e.value.column == "tool_call_id"
    with pytest.raises(UnknownValueError):
        validate_chat_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(TranscriptError, match="no content"):
        validate_chat_messages([{"role": "user"}])
    with pytest.raises(TranscriptError, match="without an id"):
        validate_chat_messages([{"role": "assistant", "content": None, "tool_calls": [{}]}])


def _call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "read", "arguments": "{}"}}


#: Each light helper over a chat list, called as a user would.
LIGHT_HELPERS = {
    "estimate_chat_messages": lambda ms: estimate_chat_messages(ms),
    "prune_tool_results": lambda ms: prune_tool_results(ms, preserve_recent=0, max_chars=10),
    "prune_tool_results(policy)": lambda ms: prune_tool_results(ms, policy="opencode"),
    "mask_chat_messages": lambda ms: cc.scans.mask_chat_messages(ms, "opencode"),
    "compact_messages": lambda ms: compact_messages(ms, Summarizer(None), context=100_000),
}


@pytest.mark.parametrize("helper", LIGHT_HELPERS)
def test_light_helpers_refuse_an_orphaned_result_as_compact_messages_does(helper: str) -> None:
    # estimate / prune / mask took a result without its call (a list no API takes)
    orphan = {"role": "tool", "tool_call_id": "zz", "content": "x" * 3000}
    with pytest.raises(OrphanedToolResultError, match=r"message 1 .*'zz'.*no earlier") as e:
        LIGHT_HELPERS[helper]([{"role": "user", "content": "hi"}, orphan])
    assert e.value.row == 1 and e.value.column == "tool_call_id"


@pytest.mark.parametrize("role", ["robot", "function"])
@pytest.mark.parametrize("helper", LIGHT_HELPERS)
def test_light_helpers_refuse_an_unknown_role_as_compact_messages_does(
    helper: str, role: str
) -> None:
    # estimate / prune took any role; mask said FormatError, compact_messages UnknownValueError
    with pytest.raises(UnknownValueError, match=f"message 1 has an unknown role '{role}'") as e:
        LIGHT_HELPERS[helper]([{"role": "user", "content": "hi"},
                               {"role": role, "name": "f", "content": "x"}])  # fmt: skip
    assert e.value.row == 1 and e.value.column == "role"


@pytest.mark.parametrize(("bad", "why"), [
    ({"role": "user"}, "message 1 \\(user\\) has no content"),
    ({"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "read"}}]},
     "message 1 has a tool call without an id"),
])  # fmt: skip
@pytest.mark.parametrize("helper", LIGHT_HELPERS)
def test_light_helpers_refuse_what_compact_messages_refuses(
    helper: str, bad: dict[str, Any], why: str
) -> None:
    with pytest.raises(TranscriptError, match=why) as e:
        LIGHT_HELPERS[helper]([{"role": "user", "content": "hi"}, bad])
    assert e.value.row == 1


#: What ``check_chat_messages`` refuses, as message 1 of a list: (the message,
#: the key at fault, what the error says).
UNREADABLE = {
    "not-a-dict": (["role", "user"], None, "chat message 1 is not a dict: list"),
    "no-role": ({"content": "x"}, "role", "chat message 1 has no string 'role'"),
    "role-not-a-string": ({"role": 3, "content": "x"}, "role", "no string 'role'"),
    "content-a-number": ({"role": "user", "content": 5}, "content", "chat message 1: 'content'"),
    "tool_calls-a-dict": ({"role": "assistant", "content": None, "tool_calls": {"id": "c"}},
                          "tool_calls", "chat message 1: 'tool_calls' must be a list of dicts"),
    "tool_calls-of-strings": ({"role": "assistant", "content": None, "tool_calls": ["c"]},
                              "tool_calls", "'tool_calls' must be a list of dicts"),
}  # fmt: skip
#: Every helper that reads a chat list through ``check_chat_messages``.
CHECKED = {
    "check_chat_messages": check_chat_messages,
    "estimate_chat_messages": LIGHT_HELPERS["estimate_chat_messages"],
    "prune_tool_results": LIGHT_HELPERS["prune_tool_results"],
    "mask_chat_messages": LIGHT_HELPERS["mask_chat_messages"],
    "count_chat_tokens": lambda ms: cc.scans.count_chat_tokens(ms),
}


@pytest.mark.parametrize("case", UNREADABLE)
@pytest.mark.parametrize("helper", CHECKED)
def test_an_unreadable_chat_message_is_named_by_its_row(helper: str, case: str) -> None:
    """README "Errors": the error carries the message's index in ``row`` (it
    was in the text only), and the key at fault in ``column``."""
    bad, column, why = UNREADABLE[case]
    with pytest.raises(FormatError) as e:
        CHECKED[helper]([{"role": "user", "content": "hi"}, bad])
    assert why in str(e.value)
    assert (e.value.row, e.value.column) == (1, column)


def test_one_unreadable_message_estimated_alone_is_row_0() -> None:
    with pytest.raises(FormatError) as e:
        estimate_chat_message({"role": "user", "content": 5})
    assert (e.value.row, e.value.column) == (0, "content")


ANTHROPIC_TURNS = [
    {"role": "user", "content": "read f"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read",
                                       "input": {"path": "f"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                  "content": "x" * 3000}]},
]  # fmt: skip
OPENAI_TURNS = [
    {"role": "developer", "content": "be brief"},
    {"role": "system", "content": "you are an agent"},
    {"role": "user", "content": [{"type": "text", "text": "read f"}]},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "x" * 3000},
    {"role": "tool", "tool_call_id": "c1", "content": "a second result of c1"},
    {"role": "assistant", "content": "done", "reasoning_content": "thought"},
]


#: ANTHROPIC_TURNS as OpenAI chat holds them (``to_anthropic_messages`` builds one from the other).
ANTHROPIC_AS_CHAT = [
    {"role": "user", "content": "read f"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t1", "type": "function",
         "function": {"name": "read", "arguments": '{"path":"f"}'}}]},
    {"role": "tool", "tool_call_id": "t1", "content": "x" * 3000},
]  # fmt: skip


def test_anthropic_tool_blocks_count_as_their_chat_twins() -> None:
    """README "Configuration": Anthropic turns are counted as they are. A
    ``tool_use`` block costs its name and input as compact JSON, a
    ``tool_result`` its content (a string or text blocks; an image as
    IMAGE_TOKENS), as the same call and result cost in chat form (they
    counted 0: a 3,000-character result was 'nearly empty')."""
    from ctxcompact.clients.anthropic import to_anthropic_messages

    assert to_anthropic_messages(ANTHROPIC_AS_CHAT)[1][1:] == ANTHROPIC_TURNS[1:]
    assert estimate_chat_messages(ANTHROPIC_TURNS) == estimate_chat_messages(ANTHROPIC_AS_CHAT)
    assert estimate_chat_messages(ANTHROPIC_TURNS) == 3 * 4 + 2 + (1 + 3) + 750
    for method in ("ceil-bytes", "o200k"):
        assert estimate_chat_messages(ANTHROPIC_TURNS, method=method) == estimate_chat_messages(
            ANTHROPIC_AS_CHAT, method=method
        )
    assert cc.scans.count_chat_tokens(ANTHROPIC_TURNS) == cc.scans.count_chat_tokens(
        ANTHROPIC_AS_CHAT
    )
    assert cc.scans.count_chat_tokens(ANTHROPIC_TURNS) > 300
    blocks = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "y" * 40},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "A" * 10_000}}]}]}  # fmt: skip
    assert estimate_chat_message(blocks) == 4 + 10 + IMAGE_TOKENS
    big_input = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "write",
         "input": {"text": "z" * 4000}}]}  # fmt: skip
    assert estimate_chat_message(big_input) > 1000


def test_should_compact_and_compact_messages_see_anthropic_results() -> None:
    """The report's case: 30 reads of 8,000 characters each (~60k tokens) in a
    28k window were 'nothing to compact'. Now compacted, and the split never
    parts a tool_use from its tool_result (the tail starts with no orphan)."""
    from ctxcompact.live import should_compact

    turns: list[dict[str, Any]] = [{"role": "user", "content": "fix"}]
    for i in range(30):
        turns += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read",
                                               "input": {"path": f"f{i}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                          "content": "x" * 8000}]},
        ]  # fmt: skip
    assert should_compact(turns, context=32_000, output=4_000)
    result = compact_messages(turns, Summarizer(None), context=32_000, output=4_000)
    assert result.record is not None
    assert result.record.tokens_before > 60_000 > 20_000 > result.record.tokens_after
    summary, request, *tail = result.messages
    assert summary["content"].startswith("## Session Summary")
    assert "f0" in summary["content"]  # the digest read the tool_use inputs
    assert request == {"role": "user", "content": "fix"}  # a result turn is no request
    assert tail[0]["content"][0]["type"] == "tool_use"
    made: set[str] = set()
    for m in tail:
        for b in m["content"]:
            if b["type"] == "tool_use":
                made.add(b["id"])
            else:
                assert b["tool_use_id"] in made


def test_prune_tool_results_shortens_anthropic_results_too() -> None:
    """README: Anthropic turns are pruned as they are (the tool_result was
    silently left whole while the same chat list shrank)."""
    chat = prune_tool_results(ANTHROPIC_AS_CHAT, preserve_recent=0, max_chars=10)
    out = prune_tool_results(ANTHROPIC_TURNS, preserve_recent=0, max_chars=10)
    assert out[:2] == ANTHROPIC_TURNS[:2]
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": chat[2]["content"]}]}  # fmt: skip
    assert "2990 characters of old tool output removed" in chat[2]["content"]
    assert ANTHROPIC_TURNS[2]["content"][0]["content"] == "x" * 3000  # input unchanged
    assert prune_tool_results(ANTHROPIC_TURNS, preserve_recent=1, max_chars=10) == ANTHROPIC_TURNS
    # a policy masks Anthropic turns as their chat twins (it refused them):
    # the result cut in its block, its tool_use_id kept
    policy = {"truncate_output": 100}
    cut = prune_tool_results(ANTHROPIC_AS_CHAT, policy=policy)[2]["content"]
    assert len(cut) < 3000
    assert prune_tool_results(ANTHROPIC_TURNS, policy=policy)[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": cut}]}  # fmt: skip


@pytest.mark.parametrize("helper", LIGHT_HELPERS)
def test_light_helpers_still_take_every_openai_role(helper: str) -> None:
    LIGHT_HELPERS[helper](OPENAI_TURNS)


# --- one estimate of the model input: the live path and the batch scan agree -------------

from pathlib import Path  # noqa: E402

from ctxcompact.estimators import METHODS  # noqa: E402
from ctxcompact.models import (  # noqa: E402
    AssistantMessage,
    MessageWithParts,
    Part,
    Session,
    SessionInfo,
    SystemMessage,
    UserMessage,
)
from ctxcompact.policy import Policy  # noqa: E402
from ctxcompact.scans.view import to_model_messages  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from support.sweeps import sweep  # noqa: E402

DATA = Path("/work/shared/data")
TEXT = st.text(alphabet=st.sampled_from(["a", "b", " ", "é", "日", "😀", "\n", "{", '"']),
               max_size=30)  # fmt: skip
INPUTS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["path", "ché", "n", "日"]),
                    st.one_of(TEXT, st.integers(-5, 10**6), st.lists(st.booleans(), max_size=2)),
                    max_size=3),
)  # fmt: skip


@st.composite
def _part(draw: st.DrawFn, i: int) -> Part:
    kind = draw(st.sampled_from(["text", "text", "tool", "tool", "compaction", "file",
                                 "reasoning", "step-start"]))  # fmt: skip
    pid = f"p{i:03d}"
    if kind == "text":
        return Part(id=pid, type="text", text=draw(st.one_of(st.none(), TEXT)),
                    ignored=draw(st.sampled_from([None, None, False, True])))  # fmt: skip
    if kind == "tool":
        status = draw(st.sampled_from(["completed", "completed", "error", "running", "pending"]))
        state: dict[str, Any] = {"status": status, "input": draw(INPUTS)}
        if status == "completed":
            state["output"] = draw(st.one_of(st.none(), TEXT))
        if status == "error":
            state["error"] = draw(st.one_of(st.none(), TEXT))
        if draw(st.booleans()):
            state["time"] = {"start": 1, "compacted": draw(st.sampled_from([0, 1_700_000_000_000]))}
        stateless = draw(st.integers(0, 9)) == 0
        return Part.model_validate({"id": pid, "type": "tool", "callID": f"c{i}",
                                    "tool": draw(st.sampled_from(["read", "bash", "日"])),
                                    "pinned": draw(st.sampled_from([None, None, True])),
                                    "state": None if stateless else state})  # fmt: skip
    if kind == "file":
        return Part(id=pid, type="file",
                    mime=draw(st.sampled_from([None, "image/png", "text/plain"])),
                    filename=draw(st.sampled_from([None, "", "a.png", "notes é.txt"])),
                    url=draw(st.sampled_from([None, "", "data:image/png;base64,AAAA",
                                              "file:///tmp/x"])))  # fmt: skip
    return Part(id=pid, type=kind, text=draw(TEXT) if kind == "reasoning" else None)


@st.composite
def _sessions(draw: st.DrawFn) -> Session:
    messages = []
    for m in range(draw(st.integers(0, 8))):
        role = draw(st.sampled_from(["user", "assistant", "assistant", "system"]))
        info = {"user": UserMessage, "assistant": AssistantMessage, "system": SystemMessage}
        parts = [draw(_part(m * 10 + i)) for i in range(draw(st.integers(0, 5)))]
        messages.append(MessageWithParts(info=info[role](id=f"m{m:03d}"), parts=parts))
    return Session(info=SessionInfo(id="s"), messages=messages)


def _assert_paths_agree(
    session: Session, method: str = "opencode", overhead: int = 4, policy: Policy | None = None
) -> None:
    class C:
        estimate_method = method
        message_overhead = overhead

    config = C()
    if policy is not None:
        config.policy = policy  # type: ignore[attr-defined]
    batch = cc.estimate_messages(session, config).messages.to_pylist()

    def alone(j: int) -> Policy | None:
        """The policy for message j sent on its own: it sends its reasoning when it
        is one of the session's newest keep_thinking assistant messages."""
        if policy is None:
            return None
        newer = sum(isinstance(m.info, AssistantMessage) for m in session.messages[j + 1 :])
        return policy.model_copy(update={"keep_thinking": int(newer < policy.keep_thinking)})

    live = [
        estimate_chat_messages(
            to_model_messages(session.model_copy(update={"messages": [m]}), policy=alone(j)),
            method=method,  # type: ignore[arg-type]
            overhead=overhead,
        )
        for j, m in enumerate(session.messages)
    ]
    # Every stored message: the sum over the chat messages it becomes.
    assert [r["tokens"] for r in batch] == live, session.id
    total = estimate_chat_messages(to_model_messages(session, policy=policy),
                                   method=method,  # type: ignore[arg-type]
                                   overhead=overhead)  # fmt: skip
    assert sum(live) == total


@settings(max_examples=sweep(300), deadline=None)
@given(_sessions(), st.sampled_from(METHODS), st.integers(0, 6))
def test_batch_and_live_estimates_agree(session: Session, method: str, overhead: int) -> None:
    _assert_paths_agree(session, method, overhead)


@settings(max_examples=sweep(300), deadline=None)
@given(
    _sessions(),
    st.builds(
        Policy,
        clear_inputs=st.booleans(),
        truncate_output=st.sampled_from([None, 0, 1, 4]),
        placeholder=st.sampled_from(["opencode", "describe"]),
        keep_thinking=st.sampled_from([0, 1, 3]),
    ),
)
def test_batch_and_live_estimates_agree_under_a_rendering_policy(
    session: Session, policy: Policy
) -> None:
    # The view a model is sent and the native estimate render tool parts alike.
    _assert_paths_agree(session, policy=policy)


def test_batch_and_live_estimates_agree_on_an_assistant_with_tools() -> None:
    # Issue 10 item 9: a tool result is its own chat message (one overhead each), and
    # arguments are compact JSON; texts are estimated joined, not part by part.
    session = Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "m1", "role": "assistant"}, "parts": [
            {"id": "a", "type": "text", "text": "ab"},
            {"id": "b", "type": "text", "text": "cd"},
            {"id": "c", "type": "tool", "tool": "read", "callID": "x",
             "state": {"status": "completed", "input": {"path": "é.py", "n": [1, 2]},
                       "output": "ok"}},
            {"id": "d", "type": "tool", "tool": "bash", "callID": "y",
             "state": {"status": "running", "input": {}}}]}]})  # fmt: skip
    chat = to_model_messages(session)
    assert [m["role"] for m in chat] == ["assistant", "tool", "tool"]
    assert chat[0]["tool_calls"][0]["function"]["arguments"] == '{"path":"é.py","n":[1,2]}'
    want = estimate_chat_messages(chat)
    assert want == (4 + 2) + (1 + 6) + (1 + 1) + (4 + 1) + (4 + 8)
    assert cc.estimate_messages(session).total == want


def test_batch_and_live_estimates_agree_on_real_transcripts() -> None:
    # Every session file under shared/data, read as a user would; skip leaves out
    # the sample's deliberately broken Claude Code lines and its repeated session.
    sessions = cc.read_sessions(DATA, on_error="skip").transcript.to_sessions()
    assert len(sessions) > 100
    for session in sessions:
        _assert_paths_agree(session)


SCREENSHOT = "data:image/png;base64," + "iVBORw0KGgo" * 30_000  # 330 kB of base64


@pytest.mark.parametrize("block", [
    {"type": "image_url", "image_url": {"url": SCREENSHOT}},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": SCREENSHOT}},
    {"type": "input_image", "image_url": SCREENSHOT},
])  # fmt: skip
def test_an_image_costs_image_tokens_not_its_base64(block: dict[str, Any]) -> None:
    # A data URL was counted as text (~82k tokens here; Anthropic's block as 0).
    message = {"role": "user", "content": [{"type": "text", "text": "abcdefgh"}, block]}
    assert estimate_chat_message(message) == 4 + 2 + IMAGE_TOKENS
    two = {"role": "user", "content": [block, block]}
    assert estimate_chat_message(two) == 4 + 2 * IMAGE_TOKENS


def test_a_stored_image_costs_the_same_in_the_core() -> None:
    session = cc.Session.model_validate({
        "info": {"id": "ses_img"},
        "messages": [{
            "info": {"id": "msg_1", "sessionID": "ses_img", "role": "user"},
            "parts": [
                {"id": "prt_1", "messageID": "msg_1", "sessionID": "ses_img", "type": "text",
                 "text": "what is on this screen?"},
                {"id": "prt_2", "messageID": "msg_1", "sessionID": "ses_img", "type": "file",
                 "mime": "image/png", "url": SCREENSHOT, "filename": "shot.png"},
            ],
        }],
    })  # fmt: skip
    sent = cc.to_model_messages(session)
    assert estimate_chat_messages(sent) == 4 + 6 + IMAGE_TOKENS
    per_message = cc.estimate_messages(cc.Transcript.from_sessions([session]))
    assert per_message.total == 4 + 6 + IMAGE_TOKENS


def test_a_custom_tool_call_counts_its_name_and_input() -> None:
    """OpenAI custom (freeform) tool calls counted 0: a 4,000-character patch
    was 15 tokens. They cost their name and input, as a function call its
    name and arguments."""
    patch = "x" * 4000

    def calls(call: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}]  # fmt: skip

    custom = calls({"id": "c1", "type": "custom",
                    "custom": {"name": "apply_patch", "input": patch}})  # fmt: skip
    function = calls({"id": "c1", "type": "function",
                      "function": {"name": "apply_patch", "arguments": patch}})  # fmt: skip
    assert estimate_chat_messages(custom) == estimate_chat_messages(function) > 1000
    assert cc.scans.count_chat_tokens(custom) == cc.scans.count_chat_tokens(function) > 500
    from ctxcompact.live import should_compact

    assert should_compact(custom * 10, context=12_000, output=2_000)
    assert not should_compact(custom * 10, context=40_000, output=2_000)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ([{"type": "tool_use", "id": "t", "name": "r", "input": {}},
          {"type": "server_tool_use", "id": "s"}],
         r"content\[1\] is not an Anthropic content block: .*server_tool_use"),
        ([{"type": "tool_use", "name": "r", "input": {}}],
         r"content\[0\]\.id must be a non-empty string"),
        ([{"type": "tool_use", "id": "t", "name": "r", "input": [1]}],
         r"content\[0\]\.input must be an object"),
        ([{"type": "tool_use", "id": "t", "name": "r", "input": {}},
          {"type": "tool_result", "tool_use_id": "t", "content": "x"}],
         r"content\[1\] is a 'tool_result' block in an assistant message"),
        (["text", {"type": "thinking", "thinking": "x"}],
         r"content\[0\] must be an object"),
    ],
)  # fmt: skip
def test_an_anthropic_block_the_core_cannot_read_names_its_message_and_block(
    content: list[Any], why: str
) -> None:
    """Anthropic turns are read by the core (they were counted by the Python
    estimate, and refused by a policy): an unknown or malformed block is a
    ``FormatError`` naming the message (``row``) and the block, never a
    count or a mask of what the core could not read."""
    from ctxcompact.scans.chatrows import chat_counts
    from ctxcompact.scans.masking import mask_chat_messages

    chat = [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}]
    for call in (lambda: chat_counts(chat), lambda: mask_chat_messages(chat, "opencode")):
        # where in the list (it was "chat list:1: messages[1]...", a file's line)
        with pytest.raises(FormatError, match="^chat list, message 1: " + why) as e:
            call()
        assert (e.value.row, e.value.session_id, e.value.message_id) == (1, None, None)
        assert e.value.column == "content"


def test_an_orphaned_tool_result_block_is_refused_not_counted_nowhere() -> None:
    """A tool_result block no earlier tool_use called was read by the core as
    a result of nothing (its text counted nowhere): refused by the core
    (``FormatError``) and by the pairing check (``OrphanedToolResultError``),
    as an orphaned ``tool`` message is."""
    from ctxcompact.scans.chatrows import chat_counts
    from ctxcompact.scans.masking import mask_chat_messages

    chat = [{"role": "user", "content": "go"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz",
                                          "content": "x" * 4000}]}]  # fmt: skip
    with pytest.raises(FormatError, match='tool_use_id "zz", which no earlier') as e:
        chat_counts(chat)
    assert e.value.row == 1
    with pytest.raises(OrphanedToolResultError, match="'zz'") as o:
        mask_chat_messages(chat, "opencode")
    assert (o.value.row, o.value.column) == (1, "content")


def test_a_call_saying_custom_without_its_custom_object_is_refused_not_counted() -> None:
    """A chat list's call of ``"type": "custom"`` with a ``function`` and no
    ``custom`` object was counted by the core's fast reader as a function
    call (the general reader refuses it): both refuse it now, naming the
    message and the call."""
    from ctxcompact.scans.chatrows import chat_counts

    call = {"id": "c", "type": "custom", "function": {"name": "read", "arguments": "{}"}}
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]}]  # fmt: skip
    with pytest.raises(
        FormatError, match=r"^chat list, message 1: tool_calls\[0\] has a 'custom'"
    ) as e:
        chat_counts(chat)
    assert e.value.row == 1
