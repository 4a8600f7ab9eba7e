"""OpenAI chat and Responses logs that record each reply's ``usage`` (issue
39, part 1): the usage lands on the assistant message as its tokens (the
prompt split into uncached input and cache reads), read alike by the Python
adapter and the native reader, written back as it was, and reported by the
replay as recorded usage; a count that is no non-negative integer is a
FormatError naming the message, a usage that is no object no record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.reader import read_jsonl
from ctxcompact.models import Session
from ctxcompact.tuning import replay
from ctxcompact.tuning.recorded import recorded_usage

CHAT_USAGE = {"prompt_tokens": 1200, "completion_tokens": 40,
              "prompt_tokens_details": {"cached_tokens": 1000}}  # fmt: skip
RESPONSES_USAGE = {"input_tokens": 900, "output_tokens": 12,
                   "input_tokens_details": {"cached_tokens": 512}}  # fmt: skip


def chat_log(usage: Any = CHAT_USAGE, second: Any = None) -> dict[str, Any]:
    return {"id": "run-1", "messages": [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": None, "usage": usage, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "done",
         **({"usage": second} if second is not None else {})},
    ]}  # fmt: skip


def responses_log(usage: Any = RESPONSES_USAGE) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "fix it"},
        {"type": "function_call", "call_id": "c1", "name": "bash",
         "arguments": "{\"command\": \"ls\"}", "usage": usage},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        {"type": "message", "role": "assistant", "usage": usage,
         "content": [{"type": "output_text", "text": "done"}]},
    ]  # fmt: skip


def both(path: Path, fmt: str) -> list[Session]:
    """The first session as the Python adapter and the native reader read it."""
    return [formats.read(path, fmt)[0], read_jsonl(path, fmt).transcript.to_sessions()[0]]


def tokens_of(session: Session) -> list[tuple[int, int, int, int] | None]:
    out = []
    for m in session.messages:
        if m.info.role == "assistant":
            t = m.info.tokens
            out.append(None if t is None else (t.input, t.output, t.cache.read, t.cache.write))
    return out


def test_a_chat_log_records_each_reply_usage(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    second = {"prompt_tokens": 1300, "completion_tokens": 5}
    path.write_text(json.dumps(chat_log(second=second)) + "\n")
    for session in both(path, "openai-chat"):
        assert tokens_of(session) == [(200, 40, 1000, 0), (1300, 5, 0, 0)]
        got = recorded_usage(session)
        assert (got["recorded_prompt_tokens"], got["recorded_calls"],
                got["recorded_cached_tokens"], got["recorded_written_tokens"]) == (
            2500, 2, 1000, 0)  # fmt: skip
        # the usage is kept where it was: the log is written back as it was
        assert formats.to_openai_chat(session) == chat_log(second=second)["messages"]


def test_litellm_cache_counts_are_reads_and_writes(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 1, "cache_read_input_tokens": 600,
             "cache_creation_input_tokens": 300,
             "prompt_tokens_details": {"cached_tokens": 600}}  # fmt: skip
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat_log(usage)) + "\n")
    for session in both(path, "openai-chat"):
        assert tokens_of(session) == [(100, 1, 600, 300), None]


def test_a_responses_log_records_each_reply_usage(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(responses_log()) + "\n")
    for session in both(path, "openai-responses"):
        assert tokens_of(session) == [(388, 12, 512, 0), (388, 12, 512, 0)]
        assert recorded_usage(session)["recorded_prompt_tokens"] == 1800
        assert formats.to_openai_responses(session) == responses_log()


def test_a_replay_reports_a_chat_log_usage(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat_log()) + "\n")
    result = replay(formats.read(path, "openai-chat"), limits={"context": 100_000,
                                                              "output": 1_000})  # fmt: skip
    row = result.sessions.to_pylist()[0]
    assert (row["recorded_prompt_tokens"], row["recorded_calls"],
            row["recorded_cached_tokens"]) == (1200, 1, 1000)  # fmt: skip
    assert row["prompt_gap"] == row["baseline_prompt_tokens"] - 1200
    assert result.summary["recorded_sessions"] == 1


@pytest.mark.parametrize("usage", [None, "lots", [1, 2]])
def test_a_usage_that_is_no_object_is_no_record(tmp_path: Path, usage: Any) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat_log(usage)) + "\n")
    for session in both(path, "openai-chat"):
        assert tokens_of(session) == [None, None]
        assert recorded_usage(session)["recorded_prompt_tokens"] is None


@pytest.mark.parametrize(
    ("counts", "field"),
    [
        ({"prompt_tokens": -3}, r"usage\.prompt_tokens"),
        ({"prompt_tokens": "many"}, r"usage\.prompt_tokens"),
        ({"completion_tokens": 2.5}, r"usage\.completion_tokens"),
        ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": True}},
         r"usage\.prompt_tokens_details\.cached_tokens"),
    ],
)  # fmt: skip
def test_bad_chat_usage_is_a_format_error_naming_the_message(
    tmp_path: Path, counts: dict[str, Any], field: str
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat_log(counts)) + "\n")
    with pytest.raises(FormatError, match=f"chat.jsonl:1: message 2: {field} must be a non-") as e:
        formats.read(path, "openai-chat")
    where = ("run-1", "run-1-m000002")
    assert (e.value.row, e.value.session_id, e.value.message_id) == (1, *where)
    with pytest.raises(FormatError, match=f"messages\\[2\\]\\.{field} must be a non-") as e:
        read_jsonl(path, "openai-chat")
    assert (e.value.row, e.value.session_id, e.value.message_id) == (1, *where)


@pytest.mark.parametrize(
    ("counts", "field"),
    [
        ({"input_tokens": -1}, r"usage\.input_tokens"),
        ({"output_tokens": "12"}, r"usage\.output_tokens"),
        ({"input_tokens_details": {"cached_tokens": 1.5}},
         r"usage\.input_tokens_details\.cached_tokens"),
    ],
)  # fmt: skip
def test_bad_responses_usage_is_a_format_error_naming_the_item(
    tmp_path: Path, counts: dict[str, Any], field: str
) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(responses_log(counts)) + "\n")
    for read in (formats.read, read_jsonl):
        with pytest.raises(FormatError, match=f"jsonl:1: item 1: {field} must be a non-") as e:
            read(path, "openai-responses")
        assert (e.value.row, e.value.message_id) == (1, "responses:1-i000001")
