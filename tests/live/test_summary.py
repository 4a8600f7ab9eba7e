"""The compaction agent's request, and what happens when the model fails."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.clients.openai import OpenAIChatClient
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, SummaryError
from ctxcompact.live import prompts
from ctxcompact.live.calibration import UsageCalibrator
from ctxcompact.live.summary import Summarizer, build_digest, truncate_history
from ctxcompact.scans import COMPACTION_QUESTION
from support.servers import FakeAnthropicServer, FakeOpenAIServer, Reply


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    import json

    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "you are a coding agent"},
    {"role": "user", "content": "Add retries to fetch() in src/net.py, keep the API unchanged."},
    {"role": "assistant", "content": "Looking.",
     "tool_calls": [call("c1", "read", path="src/net.py")]},
    {"role": "tool", "tool_call_id": "c1", "content": "def fetch(url): ..."},
    {"role": "assistant", "content": None, "tool_calls": [call("c2", "bash", command="pytest")]},
    {"role": "tool", "tool_call_id": "c2", "content": "Error: 2 tests failed\nassert 1 == 2"},
    {"role": "assistant", "content": None,
     "tool_calls": [call("c3", "edit", file_path="src/net.py"),
                    call("c4", "bash", command="pytest")]},
    {"role": "tool", "tool_call_id": "c3", "content": "edited"},
    {"role": "tool", "tool_call_id": "c4", "content": "5 passed"},
    {"role": "user", "content": "Also log each retry."},
    {"role": "assistant", "content": "Retries are in; adding logging next."},
    {"role": "user", "content": COMPACTION_QUESTION},
]  # fmt: skip


class Scripted:
    """A sync client that returns scripted responses or raises."""

    def __init__(self, *outcomes: SummaryResponse | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def test_request_is_tool_less_with_system_prompt_and_final_request() -> None:
    request = Summarizer(None, model="big").build_request(HISTORY)
    assert request.system == prompts.SYSTEM_PROMPT
    assert request.model == "big"
    assert all(m["role"] != "system" for m in request.messages)  # its own system prompt only
    assert request.messages[:-1] == HISTORY[1:]
    assert request.messages[-1]["role"] == "user"
    assert prompts.SUMMARY_REQUEST in request.messages[-1]["content"]
    assert not hasattr(request, "tools")


def test_request_carries_context_instructions_template_and_previous_summary() -> None:
    cfg = CompactionConfig(summary_template="structured", summary_model="small",
                           summary_max_tokens=900, summary_temperature=0.3)  # fmt: skip
    request = Summarizer(None, cfg, model="big").build_request(
        HISTORY, previous_summary="## Session Summary (Compaction Round 1)\nold notes",
        round=2, instructions="focus on the tests", context=["branch: retries"],
    )  # fmt: skip
    final = request.messages[-1]["content"]
    assert (request.model, request.max_tokens, request.temperature) == ("small", 900, 0.3)
    assert "- branch: retries" in final
    assert "focus on the tests" in final
    assert "## Session Summary (Compaction Round 2)" in final
    assert "old notes" in final and "round 2" in final and "round 1" in final
    # a previous summary already in the history is not pasted twice
    with_prev = [*HISTORY[:-1], {"role": "assistant", "content": "PREV-7F3"}, HISTORY[-1]]
    again = Summarizer(None).build_request(with_prev, previous_summary="PREV-7F3", round=2)
    assert "PREV-7F3" not in again.messages[-1]["content"]


def test_custom_prompts_replace_the_defaults() -> None:
    cfg = CompactionConfig(system_prompt="SYS", summary_prompt="SUMMARIZE NOW")
    request = Summarizer(None, cfg).build_request(HISTORY)
    assert request.system == "SYS" and "SUMMARIZE NOW" in request.messages[-1]["content"]


def test_model_summary_is_used() -> None:
    client = Scripted(SummaryResponse("the notes", "stop"))
    outcome = Summarizer(client).summarize(HISTORY, round=3)
    assert (outcome.text, outcome.source, outcome.round, outcome.error) == (
        "the notes",
        "model",
        3,
        None,
    )


@pytest.mark.parametrize(("outcome", "why"), [
    (RuntimeError("connection refused"), "RuntimeError: connection refused"),
    (TimeoutError(), "timed out"),
    (SummaryResponse("   \n", "stop"), "empty summary"),
    (SummaryResponse("half of it", "length"), "cut off at max_tokens"),
])  # fmt: skip
def test_failures_fall_back_to_the_digest(outcome: Any, why: str) -> None:
    result = Summarizer(Scripted(outcome)).summarize(HISTORY)
    assert result.source == "digest"
    assert why in (result.error or "")
    assert result.text.startswith("## Session Summary (Compaction Round 1)")


def test_fallback_policies() -> None:
    boom = RuntimeError("down")
    cfg = CompactionConfig(fallback="truncate", summary_max_tokens=30)
    truncated = Summarizer(Scripted(boom), cfg).summarize(HISTORY)
    assert truncated.source == "truncation" and "log each retry" in truncated.text
    with pytest.raises(SummaryError) as e:
        Summarizer(Scripted(boom), CompactionConfig(fallback="raise")).summarize(HISTORY)
    assert e.value.__cause__ is boom
    # No model given: the digest is what was asked for, not a failure (whatever the fallback).
    for fallback in ("digest", "raise"):
        chosen = Summarizer(None, CompactionConfig(fallback=fallback)).summarize(HISTORY)
        assert (chosen.source, chosen.error) == ("digest", None)
        assert "none was given" in chosen.text and "call failed" not in chosen.text


def test_digest_is_structured_and_deterministic() -> None:
    digest = build_digest(HISTORY)
    assert digest == build_digest(HISTORY)
    assert "Add retries to fetch() in src/net.py, keep the API unchanged." in digest  # verbatim
    assert "- src/net.py" in digest
    assert "bash: Error: 2 tests failed -> resolved later" in digest
    assert "- Also log each retry." in digest
    assert "Retries are in; adding logging next." in digest
    assert COMPACTION_QUESTION not in digest.split("### Latest User Requests")[1]


def test_digest_round_two_carries_the_original_task() -> None:
    first = build_digest(HISTORY)
    later = [{"role": "user", "content": "now port it to async"}]
    second = build_digest(later, previous_summary=first, round=2)
    assert second.startswith("## Session Summary (Compaction Round 2)")
    task = second.split("### Original Task\n")[1].split("\n\n")[0]
    assert task == "Add retries to fetch() in src/net.py, keep the API unchanged."
    free_form = build_digest(later, previous_summary="we did X and Y", round=2)
    assert "we did X and Y" in free_form


def test_truncation_keeps_the_newest_turns_within_budget() -> None:
    text = truncate_history(HISTORY, 25)
    assert cc.estimate_tokens(text.split("\n\n", 1)[1]) <= 25
    assert "Retries are in" in text and "Add retries to fetch" not in text
    tiny = truncate_history([{"role": "user", "content": "x" * 1000}], 5)
    assert tiny.endswith("x" * 20)


def test_through_the_openai_sdk_every_failure_degrades(openai_server: FakeOpenAIServer) -> None:
    openai_server.replies.extend([
        Reply("real notes"), Reply("err", status=500), Reply("", finish="stop"),
        Reply("cut", finish="length"), Reply("slow", delay_s=2.0),
    ])  # fmt: skip
    client = OpenAIChatClient("m", base_url=openai_server.base_url, api_key="k", max_retries=0,
                              timeout=0.5)  # fmt: skip
    with client:
        results = [Summarizer(client).summarize(HISTORY) for _ in range(5)]
    assert [r.source for r in results] == ["model", "digest", "digest", "digest", "digest"]
    assert results[0].text == "real notes"
    assert "InternalServerError" in (results[1].error or "")
    assert "empty" in (results[2].error or "") and "cut off" in (results[3].error or "")
    assert "Timeout" in (results[4].error or "")
    assert all("tools" not in r.body for r in openai_server.requests)


def test_async_path_with_the_anthropic_sdk(anthropic_server: FakeAnthropicServer) -> None:
    from ctxcompact.clients.anthropic import AnthropicClient

    anthropic_server.replies.extend([Reply("async notes"), Reply("cut", finish="max_tokens")])
    client = AnthropicClient("c", base_url=anthropic_server.base_url, api_key="k", max_retries=0)

    async def run() -> list[Any]:
        try:
            s = Summarizer(client)
            return [await s.asummarize(HISTORY), await s.asummarize(HISTORY)]
        finally:
            await client.aclose()

    ok, cut = asyncio.run(run())
    assert (ok.source, ok.text) == ("model", "async notes")
    assert cut.source == "digest" and "cut off" in (cut.error or "")


def test_async_path_keeps_the_loop_free_with_a_slow_sync_client() -> None:
    class Slow:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            time.sleep(0.3)
            return SummaryResponse("slow notes", "stop")

    async def run() -> tuple[Any, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        outcome = await Summarizer(Slow()).asummarize(HISTORY)
        task.cancel()
        return outcome, ticks

    outcome, ticks = asyncio.run(run())
    assert outcome.text == "slow notes"
    assert ticks >= 5  # the loop kept running while the sync call slept in a thread


def test_async_timeout_uses_the_configured_limit() -> None:
    class Hangs:
        async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
            await asyncio.sleep(5)
            raise AssertionError("unreachable")

    outcome = asyncio.run(Summarizer(Hangs(), CompactionConfig(timeout_s=0.1)).asummarize(HISTORY))
    assert outcome.source == "digest" and "timed out" in (outcome.error or "")


def test_async_only_client_needs_the_async_path() -> None:
    class AsyncOnly:
        async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
            return SummaryResponse("x", "stop")

    with pytest.raises(ConfigError, match="asummarize"):
        Summarizer(AsyncOnly()).summarize(HISTORY)


# --- issue 10, items 5 and 6: the config's timeout_s and max_retries reach the call ------


@pytest.fixture
def sdk_client() -> Iterator[Callable[..., Any]]:
    """Makes adapters on a local server; their connections are closed after the test."""
    from ctxcompact.clients.anthropic import AnthropicClient

    made: list[Any] = []

    def make(kind: str, server: Any, **kw: Any) -> Any:
        cls = OpenAIChatClient if kind == "openai" else AnthropicClient
        made.append(cls("m", base_url=server.base_url, api_key="k", **kw))
        assert made[-1].client is not None  # the SDK is imported now, not in a timed call
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture(params=["openai", "anthropic"])
def slow_or_failing(request: pytest.FixtureRequest) -> Any:
    server_cls = FakeOpenAIServer if request.param == "openai" else FakeAnthropicServer
    return request.param, server_cls


def test_sync_summarize_gives_up_after_timeout_s_and_falls_back(
    slow_or_failing: Any, sdk_client: Callable[..., Any]
) -> None:
    kind, server_cls = slow_or_failing
    # The server takes 4 s to answer; the client has no timeout of its own.
    with server_cls(default=Reply("too late", delay_s=4.0)) as server:
        summarizer = Summarizer(sdk_client(kind, server), CompactionConfig(timeout_s=1))
        start = time.monotonic()
        outcome = summarizer.summarize(HISTORY)
        elapsed = time.monotonic() - start
    assert elapsed < 2.5, f"summarize blocked {elapsed:.1f} s with timeout_s=1"
    assert outcome.source == "digest"
    assert outcome.error == "the summary call timed out after 1 s (timeout_s)"
    assert outcome.text.startswith(prompts.SUMMARY_HEADING)


def test_sync_deadline_holds_for_any_blocking_client() -> None:
    class Hangs:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            time.sleep(3)
            return SummaryResponse("too late", "stop")

    start = time.monotonic()
    outcome = Summarizer(Hangs(), CompactionConfig(timeout_s=0.2, fallback="truncate")).summarize(
        HISTORY
    )
    assert time.monotonic() - start < 1.5
    assert outcome.source == "truncation" and "timed out after 0.2 s" in (outcome.error or "")
    with pytest.raises(SummaryError, match="timed out"):
        Summarizer(Hangs(), CompactionConfig(timeout_s=0.2, fallback="raise")).summarize(HISTORY)


def test_a_timed_out_compaction_is_reported_as_a_fallback(
    tmp_path: Any, sdk_client: Callable[..., Any]
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    with FakeOpenAIServer(default=Reply("too late", delay_s=4.0)) as server:
        config = CompactionConfig(timeout_s=0.5)
        store = cc.MemoryStore()
        sid = store.create_session()
        compactor = cc.Compactor(store, Summarizer(sdk_client("openai", server)), config=config)
        compactor.events.subscribe("compaction.fallback", lambda n, p: seen.append((n, p)))
        loop = cc.CompactionLoop(compactor)
        loop.add_user(sid, "Add retries to fetch() in src/net.py")
        compactor.request_compaction(sid)
        compactor.model_messages(sid)  # first-use imports (pyarrow -> pandas) before the clock
        start = time.monotonic()
        record = compactor.process_pending(sid)
        assert time.monotonic() - start < 3.0  # the server answers after 4 s
    assert record is not None and record.summary_source == "digest"
    assert record.error == "the summary call timed out after 0.5 s (timeout_s)"
    assert [p["error"] for _, p in seen] == [record.error]


@pytest.mark.parametrize("retries", [0, 2])
def test_attempts_against_a_failing_server_follow_config_max_retries(
    slow_or_failing: Any, retries: int, sdk_client: Callable[..., Any]
) -> None:
    kind, server_cls = slow_or_failing
    with server_cls(default=Reply("overloaded", status=500)) as server:
        config = CompactionConfig(max_retries=retries)
        outcome = Summarizer(sdk_client(kind, server), config).summarize(HISTORY)
        assert outcome.source == "digest" and "InternalServerError" in (outcome.error or "")
        assert len(server.requests) == retries + 1


def test_the_compactors_config_drives_a_summarizer_built_without_one(
    sdk_client: Callable[..., Any],
) -> None:
    with FakeOpenAIServer(default=Reply("overloaded", status=500)) as server:
        store = cc.MemoryStore()
        sid = store.create_session()
        config = CompactionConfig(max_retries=1)
        compactor = cc.Compactor(store, Summarizer(sdk_client("openai", server)), config=config)
        compactor.request_compaction(sid)
        record = compactor.process_pending(sid)
        assert record is not None and record.summary_source == "digest"
        assert len(server.requests) == 2


def test_the_clients_own_max_retries_wins_over_the_config(sdk_client: Callable[..., Any]) -> None:
    with FakeOpenAIServer(default=Reply("overloaded", status=500)) as server:
        client = sdk_client("openai", server, max_retries=0)
        Summarizer(client, CompactionConfig(max_retries=2)).summarize(HISTORY)
        assert len(server.requests) == 1


def test_aprocess_pending_uses_the_configured_sync_sdk_client(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As examples/agent_loop.py builds it: ``client=openai.OpenAI(base_url=...)``.
    The async path sends the summary to that server, not to a client made from
    the environment (which here would point elsewhere)."""
    import openai

    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    openai_server.replies.append(Reply("notes from the configured server"))
    sdk = openai.OpenAI(base_url=openai_server.base_url, api_key="x", max_retries=0)
    compactor = cc.Compactor(cc.MemoryStore(), Summarizer(OpenAIChatClient("m", client=sdk)),
                             config=CompactionConfig(timeout_s=5, max_retries=0))  # fmt: skip
    sid = compactor.store.create_session()
    cc.CompactionLoop(compactor).add_user(sid, "TASK")
    compactor.request_compaction(sid)
    record = asyncio.run(compactor.aprocess_pending(sid))
    assert record is not None and (record.summary_source, record.error) == ("model", None)
    assert len(openai_server.requests) == 1
    headers = {k.lower(): v for k, v in openai_server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer x"
    sdk.close()


def test_a_summarizer_shared_by_two_compactors_uses_each_ones_config() -> None:
    with FakeOpenAIServer(default=Reply("down", status=500)) as server:
        shared = Summarizer(OpenAIChatClient("m", base_url=server.base_url, api_key="x"))
        strict = cc.Compactor(cc.MemoryStore(), shared, config=CompactionConfig(
            fallback="raise", max_retries=0, summary_model="big-model"))  # fmt: skip
        lenient = cc.Compactor(cc.MemoryStore(), shared, config=CompactionConfig(
            fallback="digest", max_retries=0, summary_model="cheap-model"))  # fmt: skip
        assert strict.summarizer.config is strict.config
        assert lenient.summarizer.config is lenient.config
        assert shared.config.fallback == "digest" and not shared.configured  # left as built
        sid = strict.store.create_session()
        cc.CompactionLoop(strict).add_user(sid, "TASK")
        strict.request_compaction(sid)
        with pytest.raises(SummaryError):
            strict.process_pending(sid)
        assert server.requests[-1].body["model"] == "big-model"
        other = lenient.store.create_session()
        cc.CompactionLoop(lenient).add_user(other, "TASK")
        lenient.request_compaction(other)
        record = lenient.process_pending(other)
        assert record is not None and record.summary_source == "digest"
        assert server.requests[-1].body["model"] == "cheap-model"


def test_the_digest_is_bounded_and_says_where_it_cut_the_task() -> None:
    from ctxcompact.live.summary import MAX_FILES, TASK_CHARS

    task = "Here is the crash log, find the bug:\n" + "ERROR failed at frame 0x1234\n" * 2000
    reads = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call(f"c{i}", "read", path=f"src/m{i}.py")],
        }
        for i in range(200)
    ]
    digest = build_digest([{"role": "user", "content": task}, *reads])
    section = digest.split("### Original Task\n")[1].split("\n\n###")[0]
    assert section.startswith(task[:1000]) and len(section) < TASK_CHARS + 200
    assert f"its first {TASK_CHARS} of {len(task)} characters are kept" in section
    files = digest.split("### Files Touched\n")[1].split("\n\n")[0].splitlines()
    assert len(files) == MAX_FILES + 1 and files[-1] == "- ... and 150 more files"
    again = build_digest([], previous_summary="## Original Task\n" + task, round=2)
    assert len(again) < TASK_CHARS + 1000  # a chained round stays bounded too


def test_a_digest_compaction_of_a_huge_first_turn_shrinks_the_session() -> None:
    """The tester's case: a ~19k-token paste as the task in a 16k window."""
    compactor = cc.Compactor(cc.MemoryStore(), Summarizer(None),
                             limits={"context": 16_000, "output": 2_000})  # fmt: skip
    loop = cc.CompactionLoop(compactor, system="S")
    sid = compactor.store.create_session()
    loop.add_user(sid, "Here is the crash log:\n" + "ERROR something failed at 0x1234\n" * 2000)
    compactor.request_compaction(sid)
    record = compactor.process_pending(sid)
    assert record is not None and record.tokens_after < record.tokens_before
    assert record.tokens_after < (compactor.usable_tokens() or 0)


def test_a_compaction_that_grows_the_session_says_so(caplog: pytest.LogCaptureFixture) -> None:
    compactor = cc.Compactor(cc.MemoryStore(), Summarizer(None))
    sid = compactor.store.create_session()
    cc.CompactionLoop(compactor).add_user(sid, "hi")  # the digest outweighs a two-word session
    compactor.request_compaction(sid)
    with caplog.at_level("WARNING", logger="ctxcompact"):
        record = compactor.process_pending(sid)
    assert record is not None and record.tokens_after > record.tokens_before
    assert f"left it bigger: {record.tokens_before} -> {record.tokens_after}" in caplog.text


class _Recorder:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse("## Session Summary\nnotes", "stop")


def _request_tokens(request: SummaryRequest) -> int:
    from ctxcompact.scans.chat import estimate_chat_messages
    from ctxcompact.scans.estimate import estimate_tokens

    return estimate_chat_messages(request.messages) + estimate_tokens(request.system)


def test_the_summary_request_is_cut_to_the_session_window() -> None:
    """One 800k-character output in a 32k session: the request sent fits the
    window, the output kept as head and tail with a marker, and it says so."""
    from builders import tool_reply, user
    from ctxcompact.live import events as ev

    client = _Recorder()
    compactor = cc.Compactor(cc.MemoryStore(), Summarizer(client),
                             limits={"context": 32_000, "output": 4_000})  # fmt: skip
    seen: list[dict[str, Any]] = []
    compactor.events.subscribe(ev.SUMMARY_REQUEST_CUT, lambda n, p: seen.append(p))
    sid = compactor.store.create_session()
    task = user("grep the logs")
    compactor.store.append_message(sid, task)
    huge = "".join(f"log line {i}\n" for i in range(64_000))  # ~800k chars
    compactor.store.append_message(sid, tool_reply(task.id, huge))
    compactor.request_compaction(sid)
    record = compactor.process_pending(sid)
    assert record is not None and record.summary_source == "model"
    (request,) = client.requests
    window = 32_000 - 4_000  # the answer: at most the output limit
    assert _request_tokens(request) <= window
    (output,) = [m["content"] for m in request.messages if m["role"] == "tool"]
    assert output.startswith("log line 0\n") and output.endswith("log line 63999\n")
    assert "characters cut ...]" in output
    assert "cut to fit the window" in request.messages[-1]["content"]
    (cut,) = seen
    assert cut["window"] == window and cut["outputs_cut"] == 1 and cut["tokens_before"] > 190_000
    assert cut["tokens_sent"] <= window and cut["messages_left_out"] == 0


def test_the_oldest_history_is_left_out_when_cutting_outputs_is_not_enough() -> None:
    """Many turns of prose: the first request, the previous summary and the
    newest step stay; the note says earlier history was elided; a tool call
    never loses its result (own window of the summarizer used)."""
    client = _Recorder()
    summarizer = Summarizer(client, limits={"context": 12_000, "output": 2_000})
    history: list[dict[str, Any]] = [{"role": "user", "content": "TASK: port the parser"},
                                      {"role": "user", "content": COMPACTION_QUESTION},
                                      {"role": "assistant", "content": "OLD NOTES"}]  # fmt: skip
    for i in range(40):
        history.append({"role": "user", "content": f"step {i} " + "w " * 1_000})
        history.append({"role": "assistant", "content": None,
                        "tool_calls": [call(f"c{i}", "read", path=f"f{i}.py")]})  # fmt: skip
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok " * 200})
    for run in (summarizer.summarize, summarizer.asummarize):
        outcome = run(history, previous_summary="OLD NOTES", round=2)
        if asyncio.iscoroutine(outcome):
            outcome = asyncio.run(outcome)
        assert outcome.cut is not None and outcome.cut.messages_left_out > 0
        request = client.requests[-1]
        assert _request_tokens(request) <= 12_000 - 2_000  # the answer: at most the output limit
        contents = [m.get("content") for m in request.messages]
        assert contents[0] == "TASK: port the parser" and "OLD NOTES" in contents
        assert history[-3]["content"] in contents  # the newest step
        assert "step 0 " + "w " * 1_000 not in contents
        assert "earlier history elided" in contents[-1]
        ids = {c["id"] for m in request.messages for c in m.get("tool_calls") or []}
        assert {m["tool_call_id"] for m in request.messages if m["role"] == "tool"} <= ids


def test_a_later_user_directive_outlives_older_steps_in_a_cut_request() -> None:
    """Cutting the summary request leaves out the agent's old steps before a
    request the user wrote later (was: the oldest messages, directive and all)."""
    client = _Recorder()
    summarizer = Summarizer(client, limits={"context": 12_000, "output": 2_000})
    history: list[dict[str, Any]] = [{"role": "user", "content": "TASK: port the parser"}]
    for i in range(30):
        if i == 3:
            history.append({"role": "user", "content": "NEVER edit vendor/"})
        history.append({"role": "assistant", "content": f"step {i} " + "w " * 1_000,
                        "tool_calls": [call(f"c{i}", "read", path=f"f{i}.py")]})  # fmt: skip
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok " * 200})
    outcome = summarizer.summarize(history)
    assert outcome.cut is not None and outcome.cut.messages_left_out > 0
    contents = [m.get("content") for m in client.requests[-1].messages]
    assert "NEVER edit vendor/" in contents
    assert contents[0] == "TASK: port the parser"
    assert history[7]["content"] == "NEVER edit vendor/"
    assert history[8]["content"] not in contents  # step 3, just after the directive, went
    assert _request_tokens(client.requests[-1]) <= 12_000 - 2_000


def _calibrated(slope: float, key: str = "m") -> UsageCalibrator:
    calibrator = UsageCalibrator()
    for estimated in (1_000, 2_000, 3_000):
        calibrator.observe(key, estimated=estimated, reported=round(estimated * slope))
    return calibrator


@pytest.mark.parametrize("named", [False, True])
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_the_summary_request_is_cut_to_the_calibrated_window(driver: str, named: bool) -> None:
    """A model whose provider counts twice the estimate: the request is cut so
    that the calibrated figure fits the window (it was cut by raw estimates,
    which fitted, and the provider would refuse it), with the intercept left
    out (the summary call carries no tool schemas). ``named``: the summary
    model named as its API names it (``gpt-4o``), the fit kept under the
    reply's ``openai/gpt-4o`` (it was looked up under ``gpt-4o``: no cut)."""
    summary_config = CompactionConfig(summary_model="gpt-4o") if named else None
    from builders import tool_reply, user
    from ctxcompact.live import events as ev

    def run(calibrator: UsageCalibrator | None) -> tuple[SummaryRequest, list[dict[str, Any]]]:
        client = _Recorder()
        compactor = cc.Compactor(cc.MemoryStore(), Summarizer(client, summary_config),
                                 model="openai/gpt-4o" if named else "m",
                                 limits={"context": 12_000, "output": 2_000},
                                 calibrator=calibrator)  # fmt: skip
        seen: list[dict[str, Any]] = []
        compactor.events.subscribe(ev.SUMMARY_REQUEST_CUT, lambda n, p: seen.append(p))
        sid = compactor.store.create_session()
        task = user("summarize the log")
        compactor.store.append_message(sid, task)
        log = "".join(f"line {i} of the build log\n" for i in range(1_200))  # ~7.6k tokens
        compactor.store.append_message(sid, tool_reply(task.id, log))
        compactor.request_compaction(sid)
        if driver == "sync":
            record = compactor.process_pending(sid)
        else:
            record = asyncio.run(compactor.aprocess_pending(sid))
        assert record is not None and record.summary_source == "model"
        (request,) = client.requests
        return request, seen

    window = 12_000 - 2_000
    request, seen = run(None)
    assert not seen and window / 2 < _request_tokens(request) <= window  # fits as estimated
    request, seen = run(_calibrated(2.0, "openai/gpt-4o" if named else "m"))
    (cut,) = seen
    assert cut["outputs_cut"] == 1 and cut["window"] == window
    assert 2 * _request_tokens(request) <= window  # what the provider counts fits
    assert window / 2 < cut["tokens_before"] and cut["tokens_sent"] <= window


def test_a_bad_token_ratio_is_a_config_error() -> None:
    summarizer = Summarizer(None, limits={"context": 8_000})
    for bad in (0, -1.5, float("nan"), float("inf"), "2", True):
        with pytest.raises(ConfigError, match="token_ratio"):
            summarizer.build_request(HISTORY, token_ratio=bad)  # type: ignore[arg-type]
    assert summarizer.build_request(HISTORY, token_ratio=1.0) == summarizer.build_request(HISTORY)


def test_fit_named_finds_a_provider_key_by_its_model_part() -> None:
    calibrator = _calibrated(2.0, "openai/gpt-4o")
    fit = calibrator.fit_named("gpt-4o")
    assert fit is not None and fit.slope == pytest.approx(2.0)
    assert calibrator.fit_named("openai/gpt-4o") == fit and calibrator.fit_named("gpt-4") is None
    for estimated in (1_000, 2_000, 3_000):  # a second provider of that model: ambiguous
        calibrator.observe("azure/gpt-4o", estimated=estimated, reported=estimated)
    assert calibrator.fit_named("gpt-4o") is None


def test_the_summary_asks_for_no_more_than_the_window_keeps_free() -> None:
    """``max_tokens`` is the room the cut kept for the answer: at most the
    output limit (it was ``summary_max_tokens``, 4096, beside a request cut
    for 1000: prompt + max_tokens over the context, which a provider refuses)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for i in range(20):
        history.append({"role": "assistant", "content": None,
                        "tool_calls": [call(f"c{i}", "read", path=f"f{i}.py")]})  # fmt: skip
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x = 1\n" * 400})
    summarizer = Summarizer(None, limits={"context": 8_000, "output": 1_000})
    request = summarizer.build_request(history)
    assert request.max_tokens == 1_000 == summarizer.answer_tokens()
    assert _request_tokens(request) + request.max_tokens <= 8_000
    assert Summarizer(None).build_request(history).max_tokens == 4_096  # no window known
    wide = Summarizer(None, limits={"context": 200_000, "output": 64_000})
    assert wide.build_request(history).max_tokens == 4_096  # summary_max_tokens
