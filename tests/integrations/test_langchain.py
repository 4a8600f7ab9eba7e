"""CompactionMiddleware in a real LangChain v1 agent (create_agent), offline models."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from builders import check_options, check_records_as_sent
from ctxcompact.errors import MissingToolResultError, OrphanedToolResultError
from ctxcompact.integrations.langchain import SUMMARY_KEY, CompactionMiddleware
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

OUTPUT = "line of a large file\n" * 300  # ~1,600 tokens per read
#: SWE-agent's masking, keeping the 2 newest observations
POLICY = {"preset": "swe-agent", "keep_recent": 2}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}:\n{OUTPUT}"


class Agent(BaseChatModel):
    """Reads f0.py, f1.py, ... one call per step, then answers; keeps what it was sent."""

    steps: int = 40
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Agent:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        self.seen.append(list(messages))
        i = len(self.seen) - 1
        if i < self.steps:
            thought = f"Step {i}: the next file. " + "reasoning " * 40
            reply = AIMessage(thought, tool_calls=[{"id": f"call_{i}", "name": "read_file",
                                                     "args": {"path": f"f{i}.py"}}])  # fmt: skip
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class Summaries(BaseChatModel):
    """The compaction agent's model: a summary naming every file it was shown."""

    prompts: list[list[BaseMessage]] = []
    replies: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        self.prompts.append(list(messages))
        text = " ".join(str(m.content) for m in messages)
        files = sorted({w.rstrip(":") for w in text.split() if w.startswith("f") and ".py" in w})
        reply = AIMessage(f"## Session Summary\nRead so far: {', '.join(files)}",
                          response_metadata={"finish_reason": "stop"})  # fmt: skip
        self.replies.append(str(reply.content))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def pairs_intact(messages: list[BaseMessage]) -> bool:
    """Every tool result follows the AI message that made its call."""
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            open_calls = {c["id"] for c in m.tool_calls}
        elif isinstance(m, ToolMessage) and m.tool_call_id not in open_calls:
            return False
    return True


def run(asynchronous: bool) -> tuple[Agent, Summaries, CompactionMiddleware, dict[str, Any]]:
    agent_model, summaries = Agent(), Summaries()
    middleware = CompactionMiddleware(summaries, context=8_000, output=1_000, policy=POLICY)
    agent = create_agent(agent_model, [read_file], middleware=[middleware])
    task = {"messages": [HumanMessage("Read every file and report.")]}
    state = asyncio.run(agent.ainvoke(task)) if asynchronous else agent.invoke(task)
    return agent_model, summaries, middleware, state


@pytest.mark.parametrize("asynchronous", [False, True])
def test_masks_every_step_and_summarizes_when_the_window_fills(asynchronous: bool) -> None:
    agent_model, summaries, middleware, state = run(asynchronous)
    assert state["messages"][-1].content == "done"
    records = middleware.records
    assert len(records) >= 2 and [r.round for r in records] == list(range(1, len(records) + 1))
    assert len(summaries.prompts) == len(records)
    rounds = []
    for sent in agent_model.seen:
        assert pairs_intact(sent)
        results = [m for m in sent if isinstance(m, ToolMessage)]
        # the policy: the 2 newest observations whole, every older one a placeholder
        assert all(m.content != CLEARED_TOOL_OUTPUT for m in results[-2:])
        assert all(m.content == CLEARED_TOOL_OUTPUT for m in results[:-2])
        # a summary, when there is one, is the first message and the only one
        summaries_sent = [m for m in sent if SUMMARY_KEY in m.additional_kwargs]
        assert summaries_sent in ([], [sent[0]])
        rounds.append(sent[0].additional_kwargs.get(SUMMARY_KEY, 0))
    # once compacted, every later call starts from the newest summary
    assert rounds == sorted(rounds) and rounds[-1] == len(records)
    assert sorted(set(rounds)) == list(range(len(records) + 1))
    # the second summary integrates the first: its prompt holds the earlier summary
    # (the first request was cut to the 8k window)
    assert summaries.replies[0] in " ".join(str(m.content) for m in summaries.prompts[1])
    assert "cut to fit the window" in str(summaries.prompts[0][-1].content)
    # the state keeps every output it holds whole; the summary names what it replaced
    kept = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert kept and all(OUTPUT in m.content for m in kept)
    assert "f0.py" in str(state["messages"][0].content)


def test_the_state_is_written_only_by_compactions() -> None:
    _, _, middleware, state = run(False)
    calls = sum(1 for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    # 40 steps, but the summarized ones left the state; masking never changed it
    assert calls < 40 and len(middleware.records) >= 2
    assert all(OUTPUT in m.content for m in state["messages"] if isinstance(m, ToolMessage))


def test_unpaired_histories_get_a_typed_error_or_the_repair_report() -> None:
    orphan = [HumanMessage("hi", id="h"),
              ToolMessage("stray", tool_call_id="nope", id="t")]  # fmt: skip
    missing = [HumanMessage("hi", id="h"),
               AIMessage("", tool_calls=[{"id": "c1", "name": "read_file", "args": {}}], id="a"),
               HumanMessage("and?", id="h2")]  # fmt: skip
    strict = CompactionMiddleware(None, context=16_000, output=2_000)
    with pytest.raises(OrphanedToolResultError, match="message 1"):
        strict.before_model({"messages": orphan}, None)
    with pytest.raises(MissingToolResultError, match="message 1 calls tool 'c1'"):
        strict.before_model({"messages": missing}, None)
    lenient = CompactionMiddleware(None, context=16_000, output=2_000, repair=True)
    update = lenient.before_model({"messages": missing}, None)
    assert update is not None
    fixed = update["messages"][1:]
    assert isinstance(fixed[2], ToolMessage) and fixed[2].tool_call_id == "c1"
    assert [c.kind for c in lenient.repairs[0].changes] == ["missing-result"]


def test_repair_counts_a_call_answered_in_a_human_messages_blocks() -> None:
    """A HumanMessage of Anthropic tool_result blocks answers its calls:
    ``repair=True`` added an interrupted tool message for them as well, so
    the model saw two answers to one call."""
    messages: list[BaseMessage] = [
        HumanMessage("hi", id="h"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "read_file", "args": {}},
                                  {"id": "c2", "name": "read_file", "args": {}}], id="a"),
        HumanMessage([{"type": "tool_result", "tool_use_id": "c1", "content": "the file"},
                      {"type": "text", "text": "and?"}], id="r"),
    ]  # fmt: skip
    lenient = CompactionMiddleware(None, context=16_000, output=2_000, repair=True)
    update = lenient.before_model({"messages": messages}, None)
    assert update is not None
    fixed = update["messages"][1:]
    # c2 alone is interrupted; c1's answer is its block, once
    assert [m.tool_call_id for m in fixed if isinstance(m, ToolMessage)] == ["c2"]
    assert fixed[-1] is messages[-1]
    assert [(c.kind, c.call_id) for c in lenient.repairs[0].changes] == [("missing-result", "c2")]


def test_a_window_is_required() -> None:
    from ctxcompact.errors import ConfigError

    with pytest.raises(ConfigError, match="context"):
        CompactionMiddleware(None)
    with pytest.raises(ConfigError, match="no room for the history after the output reserve"):
        CompactionMiddleware(None, context=16_000)  # the default reserve is 32k
    assert CompactionMiddleware(None, model="gpt-4o").compaction.context == 128_000


def test_messages_it_cannot_map_one_to_one_are_typed_errors() -> None:
    from ctxcompact.errors import ConfigError, InputTypeError
    from ctxcompact.integrations.langchain import CompactionMiddleware, to_chat
    from langchain_core.messages import AIMessage, HumanMessage

    with pytest.raises(ConfigError, match="context must be a token count"):
        CompactionMiddleware(None, context="8000")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="message 0"):
        to_chat([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    call = AIMessage("", tool_calls=[{"id": "t1", "name": "read", "args": {}}])
    blocks = HumanMessage([{"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                           {"type": "text", "text": "and go on"}])  # fmt: skip
    # tool_result blocks stay one user turn (LangChain would split it; it was refused)
    assert to_chat([HumanMessage("task"), call, blocks])[2] == {
        "role": "user",
        "content": blocks.content,
    }


def test_tool_result_blocks_in_a_human_message_are_masked_in_place() -> None:
    """A HumanMessage of Anthropic tool_result blocks was refused when
    LangChain splits it (a result and text), and when it does not (a result
    alone: read as a tool message) the model was sent it whole while the
    records counted it cleared. Now the view clears its old results in their
    blocks, and counts what the mask said."""
    from ctxcompact.integrations.langchain import _viewed, to_chat
    from ctxcompact.scans.chatrows import chat_counts
    from ctxcompact.scans.masking import mask_chat_messages

    messages: list[BaseMessage] = [HumanMessage("task", id="h")]
    for i in range(12):
        messages += [
            AIMessage("", id=f"a{i}", tool_calls=[{"id": f"t{i}", "name": "read",
                                                   "args": {"path": f"f{i}.py"}}]),
            HumanMessage([{"type": "tool_result", "tool_use_id": f"t{i}",
                           "content": f"{i} " + "x" * 40_000},
                          *([{"type": "text", "text": "go on"}] if i % 2 else [])],
                         id=f"r{i}"),
        ]  # fmt: skip
    middleware = CompactionMiddleware(None, context=1_000_000, output=8_000,
                                      policy={"keep_recent": 2})  # fmt: skip
    lc, chat, _ = middleware._prepared(messages)
    view = middleware.compaction.view(chat)
    shown = [_viewed(m, b, a) for m, b, a in zip(lc, chat, view, strict=True)]
    results = [m.content[0]["content"] for m in shown[2::2]]
    assert results[0] == CLEARED_TOOL_OUTPUT and results[-1] == messages[-1].content[0]["content"]
    assert all(m.content[0]["tool_use_id"] == f"t{i}" for i, m in enumerate(shown[2::2]))
    assert messages[2].content[0]["content"].startswith("0 x")  # the state keeps it whole
    mask = mask_chat_messages(chat, middleware.compaction.config.policy)
    assert chat_counts(to_chat(shown)) == mask.counts_after
    assert [m["role"] for m in chat[2:6]] == ["tool", "assistant", "user", "assistant"]
    assert sum(mask.counts_after) < sum(mask.counts_before) // 2


def test_the_newest_request_and_every_system_message_survive_a_summary() -> None:
    from ctxcompact.live.split import keep_tokens_for
    from langchain_core.messages import SystemMessage

    middleware = CompactionMiddleware(None, context=32_000, output=4_000)
    systems = [SystemMessage("You fix tests.", id="s0"),
               SystemMessage("SYS TWO: never delete files", id="s1")]  # fmt: skip
    older = [HumanMessage("fix the test", id="h0"), AIMessage("looking " * 2500, id="a0")]
    # a pasted log over the tail budget: the request at its end survives, cut
    log = "Here is the CI log:\n" + "log line 1234567\n" * 6000 + "PLEASE FIX THE FAILURE ABOVE"
    update = middleware.before_model({"messages": [*systems, *older,
                                                   HumanMessage(log, id="h1")]}, None)  # fmt: skip
    assert update is not None
    state = update["messages"][1:]
    assert state[:2] == systems and SUMMARY_KEY in state[2].additional_kwargs
    assert isinstance(state[3], HumanMessage) and len(state) == 4
    assert state[3].content.endswith("PLEASE FIX THE FAILURE ABOVE")
    assert len(state[3].content) < len(log)
    # a request followed by a call and result that fill the tail budget: kept before them
    keep = keep_tokens_for(middleware.compaction.config, 32_000, 4_000)
    request = HumanMessage("now fix the flaky test", id="h2")
    call = AIMessage("", tool_calls=[{"id": "c1", "name": "read_file", "args": {}}], id="a1")
    result = ToolMessage("x" * ((keep - 300) * 4), tool_call_id="c1", id="t1")
    older = [*older, HumanMessage("and the docs", id="h3"), AIMessage("docs " * 8000, id="a3")]
    update = middleware.before_model({"messages": [*systems, *older, request, call, result]},
                                     None)  # fmt: skip
    assert update is not None
    state = update["messages"][1:]
    assert state[:2] == systems and SUMMARY_KEY in state[2].additional_kwargs
    assert state[3:] == [request, call, result]


def test_a_request_cut_once_is_cut_from_the_original_on_a_later_round() -> None:
    # the state holds only the cut copy after round 1; round 2 cut that copy
    # again: its marker went and the new one counted what went of the copy
    import re

    from ctxcompact._core import truncate_output

    log = "Here is the CI log:\n" + "log line\n" * 25_000 + "PLEASE FIX THE FAILURE ABOVE"
    middleware = CompactionMiddleware(None, context=32_000, output=4_000)
    state: list[BaseMessage] = [HumanMessage("fix the test", id="h0"), AIMessage("ok", id="a0"),
                                HumanMessage(log, id="h1")]  # fmt: skip
    cuts = []
    for rnd in (1, 2):
        update = middleware.before_model({"messages": state}, None)
        assert update is not None and len(middleware.records) == rnd
        state = update["messages"][1:]
        assert SUMMARY_KEY in state[0].additional_kwargs and isinstance(state[1], HumanMessage)
        text = state[1].content
        assert isinstance(text, str)
        (cut,) = re.findall(r"\[\.\.\. (\d+) characters cut \.\.\.\]", text)  # one marker
        head = text.split("\n\n[... ")[0]
        assert text == truncate_output(log, len(head) // 2)  # a cut of the request as written
        cuts.append(int(cut))
        # the agent's steps after the request fill the tail (text masking leaves)
        state += [m for i in range(30) for m in (
            AIMessage("thinking about it " * 150, id=f"s{rnd}-{i}",
                      tool_calls=[{"id": f"c{rnd}-{i}", "name": "read", "args": {}}]),
            ToolMessage("short", tool_call_id=f"c{rnd}-{i}", id=f"t{rnd}-{i}"))]  # fmt: skip
    assert cuts[1] > cuts[0]  # cut smaller the second time, and the marker says how much


@pytest.mark.parametrize("policy", ["swe-agent", None])
def test_metrics_count_proactive_triggers_as_the_live_loop_does(policy: str | None) -> None:
    """The integrations' metrics are the live lifecycle's, but a proactive
    summary left ``proactive_triggers`` at 0 (the live loop counts 1 per
    compaction it holds a call back for); a step under the threshold, or one
    masking brings under it, counts none."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import SystemMessage

    hist: list[BaseMessage] = [SystemMessage("You are a coder."), HumanMessage("fix src/app.py")]
    for i in range(12):
        hist += [AIMessage("", tool_calls=[{"id": f"c{i}", "name": "read",
                                             "args": {"path": f"f{i}.py"}}]),
                 ToolMessage("y = 1\n" * 1000, tool_call_id=f"c{i}")]  # fmt: skip
    hist.append(HumanMessage("now also fix test_b"))
    model = GenericFakeChatModel(messages=iter([AIMessage("## Session Summary\nfixing app"),
                                                AIMessage("Done.")]))  # fmt: skip
    comp = CompactionMiddleware(model, context=8_000, output=1_000, policy=policy)
    create_agent(model, tools=[], middleware=[comp]).invoke({"messages": hist})
    counts = comp.metrics.snapshot()
    assert (counts["proactive_compactions"], counts["proactive_triggers"]) == (1, 1)
    small = CompactionMiddleware(model, context=100_000, output=1_000, policy=policy)
    create_agent(GenericFakeChatModel(messages=iter([AIMessage("ok")])), tools=[],
                 middleware=[small]).invoke({"messages": hist[:4]})  # fmt: skip
    assert small.metrics.snapshot()["proactive_triggers"] == 0


def replay(allow: int) -> tuple[Agent, CompactionMiddleware, list[tuple[int, int]], list[int]]:
    """``run`` with hooks: the pre-compact hook notes (model call, tokens_before)
    and cancels every compaction after the first ``allow``; the post-compact
    hook notes the model call the compaction came before."""
    from ctxcompact.live.events import Hooks

    agent_model, asked, done = Agent(), [], []

    def pre(event: Any) -> None:
        asked.append((len(agent_model.seen), event.tokens_before))
        if len(asked) > allow:
            event.cancel("replay")  # nothing changes: the call is sent the history as it is

    hooks = Hooks([pre], [lambda event: done.append(len(agent_model.seen))])
    middleware = CompactionMiddleware(Summaries(), context=8_000, output=1_000, policy=POLICY,
                                      hooks=hooks)  # fmt: skip
    agent = create_agent(agent_model, [read_file], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Read every file and report.")]})
    return agent_model, middleware, asked, done


def sent_tokens(messages: list[BaseMessage]) -> int:
    """The engine's estimate of what a model call received, from LangChain's
    own OpenAI form (counted as a stored session of it is: ``chat_counts``)."""
    from ctxcompact.scans.chatrows import chat_counts
    from langchain_core.messages import convert_to_openai_messages

    return sum(chat_counts(convert_to_openai_messages(messages)))


def test_records_hooks_and_metrics_count_the_model_input_as_sent() -> None:
    """tokens_before counted the unmasked state while tokens_after counted the
    masked view sent: each compaction looked ~6x bigger than what was sent."""
    check_records_as_sent(replay, lambda model: model.seen, sent_tokens)


def test_the_constructor_takes_every_option() -> None:
    check_options(lambda **options: CompactionMiddleware(None, session_id="s", **options), "s")


def test_the_repaired_state_holds_the_repair() -> None:
    """The middleware reported a renamed duplicate call id and an orphaned
    ``tool_result`` block kept as a note, but wrote the messages back as they
    were: the model was still sent the duplicate id and the orphaned block."""
    messages: list[BaseMessage] = [
        HumanMessage("hi", id="h"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "read_file", "args": {}}], id="a1"),
        ToolMessage("one", tool_call_id="c1", id="t1"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "read_file", "args": {}}], id="a2"),
        ToolMessage("two", tool_call_id="c1", id="t2"),
        HumanMessage([{"type": "text", "text": "and?"},
                      {"type": "tool_result", "tool_use_id": "zz", "content": "lost"}], id="r"),
    ]  # fmt: skip
    lenient = CompactionMiddleware(None, context=16_000, output=2_000, repair=True)
    update = lenient.before_model({"messages": messages}, None)
    assert update is not None
    fixed = update["messages"][1:]
    assert [m.id for m in fixed] == [m.id for m in messages]
    assert isinstance(fixed[3], AIMessage) and fixed[3].tool_calls[0]["id"] == "c1-dup1"
    assert isinstance(fixed[4], ToolMessage) and fixed[4].tool_call_id == "c1-dup1"
    note = {"type": "text", "text": "[orphaned result of tool call zz]\nlost"}
    assert fixed[5].content == [{"type": "text", "text": "and?"}, note]
    assert fixed[:3] == messages[:3]
    assert sorted(c.kind for c in lenient.repairs[0].changes) == ["duplicate-call-id",
                                                                  "orphan-result"]  # fmt: skip
    # what the model is sent is the repaired history too
    strict = CompactionMiddleware(None, context=16_000, output=2_000)
    strict.before_model({"messages": fixed}, None)  # pairs: no error
