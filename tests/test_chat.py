"""Chat-format helpers: the seed-001 estimator cases, light pruning, validation."""

from __future__ import annotations

from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.chat import (
    estimate_chat_message,
    estimate_chat_messages,
    prune_tool_results,
    validate_chat_messages,
)


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
        {"role": "tool", "tool_call_id": "a", "content": "A" * 5000},
        {"role": "tool", "tool_call_id": "b", "content": "short"},
        {"role": "user", "content": "U" * 5000},
        {"role": "tool", "tool_call_id": "c", "content": "C" * 5000},
    ]
    out = prune_tool_results(msgs, preserve_recent=1, max_chars=100)
    assert out[0]["content"].startswith("A" * 50) and out[0]["content"].endswith("A" * 50)
    assert "4900 characters of old tool output removed" in out[0]["content"]
    assert out[1] == msgs[1] and out[2] == msgs[2]  # short, and not a tool result
    assert out[3] == msgs[3]  # recent
    assert msgs[0]["content"] == "A" * 5000  # input untouched
    assert prune_tool_results(msgs, preserve_recent=10) == msgs
    with pytest.raises(ValueError):
        prune_tool_results(msgs, preserve_recent=-1)


def test_validation_names_the_message() -> None:
    good = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]  # fmt: skip
    validate_chat_messages(good)
    with pytest.raises(cc.OrphanedToolResultError) as e:
        orphan = {"role": "tool", "tool_call_id": "zz", "content": "?"}
        validate_chat_messages([{"role": "user", "content": "hi"}, orphan])
    assert e.value.row == 1 and e.value.column == "tool_call_id"
    with pytest.raises(cc.UnknownValueError):
        validate_chat_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(cc.TranscriptError, match="no content"):
        validate_chat_messages([{"role": "user"}])
    with pytest.raises(cc.TranscriptError, match="without an id"):
        validate_chat_messages([{"role": "assistant", "content": None, "tool_calls": [{}]}])
