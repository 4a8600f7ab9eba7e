"""The split-point family: boundaries, tool pairs, chained rounds, hooks."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from ctxcompact._core import truncate_output
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import SummaryError
from ctxcompact.live import events as ev
from ctxcompact.live.split import (
    acompact_messages,
    compact_messages,
    keep_tokens_for,
    recut,
    select_split,
    should_compact,
    summary_round,
)
from ctxcompact.live.summary import Summarizer
from ctxcompact.scans.chat import estimate_chat_messages

SYSTEM = {"role": "system", "content": "sys"}


def call(i: int) -> dict[str, Any]:
    arguments = json.dumps({"path": f"f{i}.py"})
    return {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": arguments}}


def conversation(turns: int, size: int = 400) -> list[dict[str, Any]]:
    """system, then per turn: user, assistant(call), tool result, assistant text."""
    out: list[dict[str, Any]] = [SYSTEM]
    for i in range(turns):
        out += [
            {"id": f"u{i}", "role": "user", "content": f"task {i}"},
            {"id": f"a{i}", "role": "assistant", "content": None, "tool_calls": [call(i)]},
            {"id": f"t{i}", "role": "tool", "tool_call_id": f"c{i}", "content": "x" * size},
            {"id": f"r{i}", "role": "assistant", "content": f"done {i}"},
        ]
    return out


class Client:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse(f"notes after {len(self.requests)} call(s)", "stop")


def test_message_policy_keeps_the_last_n_and_the_system() -> None:
    msgs = conversation(5)
    split = select_split(msgs, keep_policy="messages", keep_messages=4)
    assert split.system == SYSTEM and split.head_start == 1
    assert [m["id"] for m in split.tail] == ["u4", "a4", "t4", "r4"]
    assert len(split.head) == 16 and split.previous_summary is None


@pytest.mark.parametrize("keep", [1, 2, 3, 5, 6])
def test_boundary_never_separates_a_call_from_its_result(keep: int) -> None:
    msgs = conversation(4)
    split = select_split(msgs, keep_policy="messages", keep_messages=keep)
    assert split.tail[0]["role"] != "tool"
    head_calls = {c["id"] for m in split.head for c in m.get("tool_calls") or []}
    tail_results = {m["tool_call_id"] for m in split.tail if m["role"] == "tool"}
    assert not head_calls & tail_results
    assert split.head + split.tail == msgs[1:]  # nothing lost, nothing duplicated


def test_parallel_calls_stay_with_all_their_results() -> None:
    msgs = [SYSTEM, {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call(1), call(2)]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "assistant", "content": "ok"}]  # fmt: skip
    split = select_split(msgs, keep_policy="messages", keep_messages=2)
    assert split.tail[0]["role"] == "assistant" and split.tail[0].get("tool_calls")


def test_token_policy_keeps_what_fits_the_budget() -> None:
    msgs = conversation(6)
    one_turn = estimate_chat_messages(msgs[-4:])
    split = select_split(msgs, keep_policy="tokens", keep_tokens=one_turn)
    assert [m["id"] for m in split.tail] == ["u5", "a5", "t5", "r5"]
    assert select_split(msgs, keep_policy="tokens", keep_tokens=10**9).head == []
    with pytest.raises(ValueError, match="keep_tokens"):
        select_split(msgs, keep_policy="tokens")
    assert keep_tokens_for(CompactionConfig(), 100_000, 8_000) == int(92_000 * 0.4)


def test_should_compact_at_the_proactive_threshold() -> None:
    msgs = conversation(10, size=4000)  # ~10k tokens of history
    history = estimate_chat_messages(msgs[1:])
    system = estimate_chat_messages(msgs[:1])
    assert should_compact(msgs, context=int(history / 0.85) + 32_000 + system)
    assert not should_compact(msgs, context=int(history / 0.5) + 32_000)
    assert not should_compact(msgs, context=0)  # unlimited


def test_compact_messages_builds_system_summary_tail_and_a_record() -> None:
    client, metrics, bus = Client(), ev.Metrics(), ev.EventBus()
    seen: list[str] = []
    bus.subscribe("*", lambda n, p: seen.append(n))
    msgs = conversation(8, size=2000)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(msgs, Summarizer(client, cfg), context=50_000, session_id="s",
                              events=bus, metrics=metrics)  # fmt: skip
    out, record = result.messages, result.record
    assert record is not None
    assert out[0] == SYSTEM and out[2:] == msgs[-4:]
    assert out[1]["role"] == "assistant" and summary_round(out[1]) == 1
    assert "notes after 1 call(s)" in out[1]["content"]
    assert (record.family, record.round, record.summary_source) == ("split", 1, "model")
    assert record.summarized_message_ids[0] == "u0" and record.kept_message_ids == (
        "u7",
        "a7",
        "t7",
        "r7",
    )
    assert record.tokens_after < record.tokens_before
    assert seen == [ev.COMPACTED] and metrics.compactions == 1
    sent = client.requests[0].messages
    assert sent[0]["id"] == "u0" and all(m.get("role") != "system" for m in sent)


def test_chained_rounds_integrate_the_previous_summary() -> None:
    client = Client()
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    summarizer = Summarizer(client, cfg)
    msgs = conversation(6)
    rounds = []
    for _ in range(3):
        result = compact_messages(msgs, summarizer, context=50_000)
        assert result.record is not None
        rounds.append(result.record.round)
        msgs = result.messages + conversation(3)[1:]  # the session goes on
    assert rounds == [1, 2, 3]
    last = client.requests[-1]
    # the previous summary reaches the model once, as the integration input
    previous = [m for m in msgs if summary_round(m) == 3]
    assert len(previous) == 1
    final = last.messages[-1]["content"]
    assert "round 3" in final and "notes after 2 call(s)" in final
    assert sum("notes after 2 call(s)" in str(m.get("content")) for m in last.messages) == 1


def test_nothing_to_compact_returns_the_messages_unchanged() -> None:
    msgs = conversation(1)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=10)
    result = compact_messages(msgs, Summarizer(Client()), context=50_000, config=cfg)
    assert result.record is None and result.messages == msgs


def test_hooks_add_context_or_cancel() -> None:
    client = Client()
    hooks = ev.Hooks()
    hooks.add_pre_compact(lambda e: e.extra_context.append("goal: ship it"))
    post: list[ev.PostCompactEvent] = []
    hooks.add_post_compact(post.append)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(conversation(5), Summarizer(client, cfg), context=50_000,
                              hooks=hooks, trigger="manual", reason="manual")  # fmt: skip
    assert "goal: ship it" in client.requests[0].messages[-1]["content"]
    assert post[0].record == result.record and post[0].source == "compact"
    hooks.add_pre_compact(lambda e: e.cancel("not now"))
    msgs = conversation(5)
    cancelled = compact_messages(msgs, Summarizer(client, cfg), context=50_000, hooks=hooks)
    assert cancelled.record is None and cancelled.messages == msgs


def test_model_failure_gives_a_digest_summary_and_the_loop_goes_on() -> None:
    class Down:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            raise ConnectionError("down")

    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(conversation(5), Summarizer(Down(), cfg), context=50_000)
    assert result.record is not None and result.record.summary_source == "digest"
    assert summary_round(result.messages[1]) == 1 and "f0.py" in result.messages[1]["content"]
    with pytest.raises(SummaryError):
        strict = cfg.model_copy(update={"fallback": "raise"})
        compact_messages(conversation(5), Summarizer(Down(), strict), context=50_000)


def test_async_twin() -> None:
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = asyncio.run(
        acompact_messages(conversation(5), Summarizer(Client(), cfg), context=50_000)
    )
    assert result.record is not None and result.record.round == 1
    assert result.messages[2:] == conversation(5)[-4:]


# --- the newest request and every system prompt survive a split ---------------------------


def valid_after_summary(out: list[dict[str, Any]]) -> bool:
    """The summary is followed by a user turn (or nothing but it ends the list
    with one), never directly by the agent's own step."""
    i = next(i for i, m in enumerate(out) if summary_round(m) is not None)
    return i + 1 < len(out) and out[i + 1]["role"] == "user"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_newest_request_over_the_tail_budget_is_repeated_cut(asynchronous: bool) -> None:
    log = "Here is the CI log:\n" + "log line\n" * 25_000 + "PLEASE FIX THE FAILURE ABOVE"
    msgs = [SYSTEM, {"role": "user", "content": "fix the test"},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": log}]  # fmt: skip
    kwargs: dict[str, Any] = {"context": 128_000, "output": 16_000}
    summarizer = Summarizer(None)
    result = (asyncio.run(acompact_messages(msgs, summarizer, **kwargs)) if asynchronous
              else compact_messages(msgs, summarizer, **kwargs))  # fmt: skip
    out = result.messages
    assert result.record is not None and [m["role"] for m in out] == ["system", "assistant", "user"]
    assert out[-1]["content"].startswith("Here is the CI log:")
    assert out[-1]["content"].endswith("PLEASE FIX THE FAILURE ABOVE")  # head and tail kept
    assert "characters cut" in out[-1]["content"]
    keep = keep_tokens_for(CompactionConfig(), 128_000, 16_000)
    assert estimate_chat_messages([out[-1]]) <= keep * 1.05
    assert (result.request_index, result.request_cut) == (3, True)
    assert msgs[3]["content"] == log  # the input is not changed


def assert_cut_once_from(text: str, original: str) -> int:
    """``text`` is ``original`` cut once to its head and tail: one marker,
    counting every character that went. Returns that count."""
    (cut,) = re.findall(r"\[\.\.\. (\d+) characters cut \.\.\.\]", text)
    head, tail = text.split(f"\n\n[... {cut} characters cut ...]\n\n")
    assert len(head) + int(cut) + len(tail) == len(original)
    assert original.startswith(head) and original.endswith(tail)
    assert text == truncate_output(original, len(head) // 2)  # as a cut of the original
    return int(cut)


def test_a_request_cut_once_is_not_cut_again_from_the_cut_copy() -> None:
    # round 2 read the cut copy as the request and cut it again: the first
    # marker went and the second counted only what went of the copy
    log = "Here is the CI log:\n" + "log line\n" * 25_000 + "PLEASE FIX THE FAILURE ABOVE"
    msgs = [SYSTEM, {"role": "user", "content": "fix the test"},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": log}]  # fmt: skip
    kwargs: dict[str, Any] = {"context": 32_000, "output": 4_000}
    first = compact_messages(msgs, Summarizer(None), **kwargs)
    assert first.request_cut
    cut = assert_cut_once_from(first.messages[2]["content"], log)
    # the agent's steps after the request fill the tail: round 2 repeats it smaller
    steps = [m for i in range(30) for m in conversation(i + 1, 2000)[-3:-1]]
    second = compact_messages([*first.messages, *steps], Summarizer(None), **kwargs)
    assert second.record is not None and second.record.round == 2
    assert second.request_cut and second.request_index == 2
    request = second.messages[2]
    assert request["role"] == "user" and request is not first.messages[2]
    assert assert_cut_once_from(request["content"], log) > cut  # smaller, and says so


def test_recut_cuts_a_cut_text_as_its_original() -> None:
    original = "".join(f"line {i}\n" for i in range(5000))
    once = truncate_output(original, 1000)
    assert recut(once, 300) == truncate_output(original, 300)  # not truncate_output(once, 300)
    assert truncate_output(once, 300) != truncate_output(original, 300)
    assert recut(once, 1000) == recut(once, 5000) == once  # keeps as much: as it is
    assert recut(original, 300) == truncate_output(original, 300)  # not a cut: cut
    # a text that only quotes a marker (head and tail of other lengths) is cut as it is
    quoted = "x" * 10 + "\n\n[... 5 characters cut ...]\n\n" + "y" * 9000
    assert recut(quoted, 100) == truncate_output(quoted, 100)


def test_a_request_before_a_call_that_fills_the_budget_is_kept_before_the_call() -> None:
    keep = keep_tokens_for(CompactionConfig(), 100_000, 8_000)
    request = {"id": "u1", "role": "user", "content": "fix the flaky test " * 400}
    msgs = [SYSTEM, {"id": "u0", "role": "user", "content": "hello"},
            {"id": "a0", "role": "assistant", "content": "hi " * 3000}, request,
            {"id": "a1", "role": "assistant", "content": None, "tool_calls": [call(1)]},
            {"id": "t1", "role": "tool", "tool_call_id": "c1",
             "content": "x" * ((keep - 600) * 4)}]  # fmt: skip
    split = select_split(msgs, keep_tokens=keep)
    assert [m["id"] for m in split.tail] == ["a1", "t1"] and split.request == 3
    result = compact_messages(msgs, Summarizer(None), context=100_000, output=8_000)
    out = result.messages
    assert out[0] == SYSTEM and summary_round(out[1]) == 1
    assert out[2] == request and not result.request_cut  # as written
    assert out[3:] == msgs[4:]
    assert valid_after_summary(out)


def test_a_request_in_the_tail_is_not_repeated() -> None:
    msgs = conversation(8, size=2000)
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    result = compact_messages(msgs, Summarizer(None, cfg), context=50_000)
    assert result.request is None and result.messages[2:] == msgs[-4:]
    cfg = CompactionConfig(keep_policy="messages", keep_messages=2)  # tail: a7's answer only
    result = compact_messages(msgs, Summarizer(None, cfg), context=50_000)
    out = result.messages  # the tail is a7's call, result and answer: u7 repeated before them
    assert out[2:] == msgs[-4:] and result.request_index == len(msgs) - 4
    assert valid_after_summary(out)


def test_every_leading_system_and_developer_message_is_kept() -> None:
    developer = {"role": "developer", "content": "NEVER run rm -rf. Repo rules: use uv."}
    msgs = [SYSTEM, developer, *conversation(8, size=2000)[1:]]
    cfg = CompactionConfig(keep_policy="messages", keep_messages=4)
    split = select_split(msgs, keep_policy="messages", keep_messages=4)
    assert split.systems == [SYSTEM, developer] and split.head_start == 2
    assert developer not in split.head
    result = compact_messages(msgs, Summarizer(None, cfg), context=50_000)
    assert result.messages[:2] == [SYSTEM, developer]
    assert summary_round(result.messages[2]) == 1 and result.messages[3:] == msgs[-4:]
    again = compact_messages([*result.messages, *conversation(3)[1:]], Summarizer(None, cfg),
                             context=50_000)  # fmt: skip
    assert again.messages[:2] == [SYSTEM, developer] and summary_round(again.messages[2]) == 2


def test_should_compact_counts_a_later_system_message_as_history() -> None:
    # What the split can remove is history: a system message after the first
    # user turn is summarized like any message, so it is counted like one.
    note = "y" * 40_000
    msgs = [SYSTEM, *conversation(6, size=4000)[1:]]
    late_system = [*msgs[:5], {"role": "system", "content": note}, *msgs[5:]]
    late_user = [*msgs[:5], {"role": "user", "content": note}, *msgs[5:]]
    results = {c: (should_compact(late_system, context=c), should_compact(late_user, context=c))
               for c in range(40_000, 80_000, 1_000)}  # fmt: skip
    assert all(a == b for a, b in results.values())
    assert {a for a, _ in results.values()} == {True, False}


def test_bad_lists_raise_format_errors_saying_what_is_wrong() -> None:
    from ctxcompact.errors import FormatError

    summarizer = Summarizer(None)
    for bad, said in [(None, "got NoneType"), ("hello", "got str"),
                      ({"role": "user", "content": "x"}, "got dict"),
                      (["hi"], "message 0 is not a dict"),
                      ([{"role": "assistant", "content": None, "tool_calls": "c1"}],
                       "'tool_calls' must be a list"),
                      ([{"role": "assistant", "content": None, "tool_calls": ["c1"]}],
                       "tool call is a str")]:  # fmt: skip
        with pytest.raises(FormatError, match=said):
            compact_messages(bad, summarizer, context=100_000)  # type: ignore[arg-type]
        with pytest.raises(FormatError, match=said):
            asyncio.run(acompact_messages(bad, summarizer, context=100_000))  # type: ignore[arg-type]


@pytest.mark.parametrize("window", [{"context": 32_000}, {"context": 1_000},
                                    {"context": 8_000, "output": 8_000}])  # fmt: skip
def test_a_window_with_no_input_room_is_refused_as_the_compactor_refuses_it(
    window: dict[str, int],
) -> None:
    """The output reserve (the output limit, else output_token_max = 32,000)
    leaves nothing of the window: the split cut a 54k-character request to 290
    characters without a word, should_compact said a two-message chat needs
    compacting. Now the Compactor's ConfigError (``check_window``)."""
    from ctxcompact import Compactor, MemoryStore
    from ctxcompact.errors import ConfigError

    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with pytest.raises(ConfigError, match="leaves no usable input window") as e:
        Compactor(MemoryStore(), Summarizer(None), limits=window)
    said = str(e.value).removeprefix("limits: ")
    calls = {
        "compact_messages": lambda: compact_messages(msgs, Summarizer(None), **window),
        "acompact_messages": lambda: asyncio.run(
            acompact_messages(msgs, Summarizer(None), **window)),
        "should_compact": lambda: should_compact(msgs, **window),
    }  # fmt: skip
    for name, call in calls.items():
        with pytest.raises(ConfigError) as e:
            call()
        assert (str(e.value), e.value.column) == (said, "context"), name
    # a window with room, or none (0: unlimited), is taken as before
    assert not should_compact(msgs, context=window["context"], output=100)
    assert compact_messages(msgs, Summarizer(None), context=0).record is None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _tool_chats(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chats of user turns, calls (``tool_calls`` or ``tool_use`` blocks,
    ids reused), their results (``tool`` messages or ``tool_result``
    blocks, some missing, some twice, some early) and replies."""
    ids = st.sampled_from(["a", "b", "c", "d"])
    out: list[dict[str, Any]] = [SYSTEM] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "calls", "uses", "tool", "results", "reply"]))
        if kind == "user":
            out.append(
                {
                    "role": "user",
                    "content": draw(st.sampled_from(["go", [{"type": "text", "text": "go"}]])),
                }
            )
        elif kind == "calls":
            calls = [{"id": i, "type": "function"} for i in draw(st.lists(ids, max_size=3))]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif kind == "uses":
            out.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": i, "name": "read", "input": {}}
                for i in draw(st.lists(ids, min_size=1, max_size=3))]})  # fmt: skip
        elif kind == "tool":
            out.append({"role": "tool", "tool_call_id": draw(ids), "content": "out"})
        elif kind == "results":
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": i, "content": "out"}
                for i in draw(st.lists(ids, min_size=1, max_size=3))]})  # fmt: skip
        else:
            out.append({"role": "assistant", "content": "ok"})
    return out


def _answers(m: dict[str, Any]) -> set[str]:
    content = m.get("content")
    blocks = content if isinstance(content, list) else []
    ids = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
    return ids | ({m["tool_call_id"]} if m["role"] == "tool" else set())


def _makes(m: dict[str, Any]) -> set[str]:
    content = m.get("content")
    blocks = content if isinstance(content, list) else []
    ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return ids | {c["id"] for c in m.get("tool_calls") or []}


@settings(max_examples=300, deadline=None)
@given(chat=_tool_chats(), keep=st.integers(0, 16))
def test_the_boundary_is_the_latest_that_keeps_every_call_with_its_results(
    chat: list[dict[str, Any]], keep: int
) -> None:
    """The boundary is the latest at or before the one the budget gives
    whose message answers no call and whose tail answers no call of the
    head (the head start if none); the request is the newest user turn
    answering nothing, when it is in the head."""
    counts = [1] * len(chat)
    split = select_split(chat, keep_tokens=keep, counts=counts)
    start = split.head_start
    budget = max(start, len(chat) - keep)

    def cut(b: int) -> bool:
        tail = set().union(*(_answers(m) for m in chat[b:]))
        head = set().union(*(_makes(m) for m in chat[start:b]))
        return not _answers(chat[b]) and not tail & head

    want = budget
    if budget < len(chat):
        want = next((b for b in range(budget, start, -1) if cut(b)), start)
    assert split.boundary == want
    users = [
        i for i in range(start, len(chat)) if chat[i]["role"] == "user" and not _answers(chat[i])
    ]
    assert split.request == (users[-1] if users and users[-1] < want else None)
