"""A prune policy over plain chat lists: ``mask_chat_messages`` and
``prune_tool_results(policy=...)``, on hand-built lists and real tau-bench runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact.errors import ConfigError, FormatError
from ctxcompact.formats.chat import from_openai_chat
from ctxcompact.policy import Policy
from ctxcompact.scans import CLEARED_TOOL_OUTPUT, mask_chat_messages, prune, prune_tool_results

TAU = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "tau-bench"


def steps(n: int, size: int = 4_000) -> list[dict[str, Any]]:
    """A task, then n steps of one read each (size characters of output)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                 {"role": "user", "content": "fix the bug"}]  # fmt: skip
    for i in range(n):
        arguments = json.dumps({"path": f"f{i % 3}.py"})
        out += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "read", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"{i}:" + "x" * size},
        ]  # fmt: skip
    return out


def results(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def test_the_swe_agent_preset_keeps_the_five_newest_results() -> None:
    messages = steps(8)
    before = copy.deepcopy(messages)
    mask = mask_chat_messages(messages, "swe-agent")
    assert results(mask.messages)[:3] == [CLEARED_TOOL_OUTPUT] * 3
    assert results(mask.messages)[3:] == results(messages)[3:]
    assert mask.cleared == ["c0", "c1", "c2"]
    assert mask.tokens_after < mask.tokens_before - 2_500
    assert messages == before  # the caller's list is where the text stays
    # Everything but the cleared results is the input's own content.
    kept = [m for m in mask.messages if m["role"] != "tool"]
    assert kept == [m for m in messages if m["role"] != "tool"]


def test_a_second_round_is_idempotent() -> None:
    once = mask_chat_messages(steps(8), "swe-agent").messages
    twice = mask_chat_messages(once, "swe-agent")
    assert twice.messages == once and twice.cleared == []


def test_the_chat_list_and_the_session_choose_the_same_results() -> None:
    messages = steps(12)
    policy = Policy.load("aggressive")
    by_session = prune(from_openai_chat(messages, session_id="chat"), policy)
    session = from_openai_chat(messages, session_id="chat")
    calls = {p.id: p.callID for m in session.messages for p in m.parts}
    assert sorted(mask_chat_messages(messages, policy).cleared) == sorted(
        calls[p] for p in by_session.part_ids
    )


def test_rendering_options_apply_to_chat_lists() -> None:
    policy = Policy.load("swe-agent").model_copy(
        update={"placeholder": "describe", "clear_inputs": True, "truncate_output": 100}
    )
    masked = mask_chat_messages(steps(8), policy).messages
    sent = results(masked)
    assert sent[0] == ("[Old tool result content cleared: read f0.py returned 4002 characters; "
                       "call the tool again, or recall part c0, to see it]")  # fmt: skip
    assert sent[7].startswith("7:" + "x" * 198) and "[... 3602 characters cut ...]" in sent[7]
    arguments = [m["tool_calls"][0]["function"]["arguments"] for m in masked
                 if m.get("tool_calls")]  # fmt: skip
    assert arguments[:3] == ["{}"] * 3 and arguments[3] == '{"path": "f0.py"}'


def test_a_pinned_result_is_never_cleared() -> None:
    messages = steps(8)
    messages[3]["pinned"] = True  # the result of c0
    mask = mask_chat_messages(messages, "swe-agent")
    assert mask.cleared == ["c1", "c2"] and results(mask.messages)[0] == results(messages)[0]


def test_prune_tool_results_takes_a_policy() -> None:
    assert (
        results(prune_tool_results(steps(8), policy="swe-agent"))[:3] == [CLEARED_TOOL_OUTPUT] * 3
    )
    with pytest.raises(ConfigError, match="not both"):
        prune_tool_results(steps(2), 1, policy="swe-agent")
    with pytest.raises(ConfigError, match="needs preserve_recent or a policy"):
        prune_tool_results(steps(2))
    # The seed's character rule is unchanged.
    assert "characters of old tool output removed" in results(prune_tool_results(steps(2), 0))[0]


@pytest.mark.parametrize(
    ("messages", "error", "match"),
    [
        (7, FormatError, "must be a list of message dicts"),
        ([{"content": "no role"}], FormatError, "message 0 has no string .role."),
        (steps(1), ConfigError, "unknown policy preset 'nope'"),
    ],
)
def test_bad_input(messages: Any, error: type[Exception], match: str) -> None:
    policy = "nope" if error is ConfigError else "swe-agent"
    with pytest.raises(error, match=match):
        mask_chat_messages(messages, policy)


@pytest.mark.skipif(not TAU.is_dir(), reason="needs ../shared/data")
def test_real_tau_bench_dialogues() -> None:
    runs = json.loads(next(TAU.glob("*.json")).read_text(encoding="utf-8"))
    freed = 0
    for run in runs[:40]:
        traj = run["traj"]
        mask = mask_chat_messages(traj, "swe-agent")
        tool_results = sum(1 for m in traj if m["role"] == "tool")
        assert len(mask.cleared) == max(0, tool_results - 5), run["task_id"]
        assert len(mask.messages) == len(traj)
        assert [m["role"] for m in mask.messages] == [m["role"] for m in traj]
        freed += mask.tokens_before - mask.tokens_after
    assert freed > 0


def test_reasoning_sent_back_is_kept_on_the_newest_steps_only() -> None:
    messages = steps(4)
    for m in messages:
        if m["role"] == "assistant":
            m["reasoning_content"] = "because"
    masked = mask_chat_messages(messages, Policy(enabled=False, keep_thinking=1)).messages
    kept = [m.get("reasoning_content") for m in masked if m["role"] == "assistant"]
    assert kept == [None, None, None, "because"]
    assert all(m["reasoning_content"] == "because" for m in messages if m["role"] == "assistant")
