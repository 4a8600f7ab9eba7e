"""OpenHands runs record what the provider counted: each response's usage on
the assistant message of its first action, read alike by the adapter and the
native reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.reader import read_jsonl

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "openhands"
GUI = DATA / "tests_runtime_trajs_basic_gui_mode.json"


def _action(i: int, response: dict[str, Any], call: str) -> dict[str, Any]:
    return {"id": i, "source": "agent", "action": "run", "args": {"command": "ls"},
            "tool_call_metadata": {"tool_call_id": call, "function_name": "bash",
                                   "model_response": response}}  # fmt: skip


def _usage(**counts: Any) -> dict[str, Any]:
    return {"id": "r1", "model": "claude-x", "usage": counts}


@pytest.mark.skipif(not GUI.is_file(), reason="needs ../shared/data")
def test_each_response_records_its_usage_once() -> None:
    events = json.loads(GUI.read_text())
    session = formats.read(GUI)[0]
    responses = {}
    for event in events:
        meta = event.get("tool_call_metadata") or {}
        if event.get("source") == "agent" and "model_response" in meta:
            responses.setdefault(meta["model_response"]["id"], meta["model_response"]["usage"])
    recorded = [m.info.tokens for m in session.messages
                if m.info.role == "assistant" and m.info.tokens is not None]  # fmt: skip
    assert len(recorded) == len(responses) == 4
    for tokens, usage in zip(recorded, responses.values(), strict=True):
        assert tokens.input + tokens.cache.read + tokens.cache.write == usage["prompt_tokens"]
        assert tokens.output == usage["completion_tokens"]
        assert tokens.cache.read == usage["cache_read_input_tokens"]
    models = {m.info.modelID for m in session.messages if m.info.role == "assistant"}
    assert "claude-3-5-sonnet-20241022" in models


def test_openai_style_cached_tokens_are_cache_reads(tmp_path: Path) -> None:
    usage = _usage(prompt_tokens=1000, completion_tokens=20,
                   prompt_tokens_details={"cached_tokens": 800})  # fmt: skip
    events = [{"id": 0, "source": "user", "action": "message", "message": "go"},
              _action(1, usage, "c1"), _action(2, usage, "c2")]  # fmt: skip
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(events) + "\n")
    for session in (formats.read(path, "openhands")[0],
                    read_jsonl(path, "openhands").transcript.to_sessions()[0]):  # fmt: skip
        tokens = [m.info.tokens for m in session.messages if m.info.role == "assistant"]
        assert tokens[0] is not None and tokens[1] is None  # the second call repeats the response
        assert (tokens[0].input, tokens[0].cache.read, tokens[0].output) == (200, 800, 20)


@pytest.mark.parametrize(
    ("counts", "field"),
    [
        ({"prompt_tokens": -3}, "usage.prompt_tokens"),
        ({"prompt_tokens": "many"}, "usage.prompt_tokens"),
        ({"completion_tokens": 2.5}, "usage.completion_tokens"),
        # past the 64-bit counts every store and column holds: refused by
        # both readers (the adapter accepted it, the native reader did not)
        ({"prompt_tokens": 2**64}, "usage.prompt_tokens"),
    ],
)
def test_bad_usage_is_a_format_error_naming_the_event(
    tmp_path: Path, counts: dict[str, Any], field: str
) -> None:
    events = [{"id": 0, "source": "user", "action": "message", "message": "go"},
              _action(1, _usage(**counts), "c1")]  # fmt: skip
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(events) + "\n")
    with pytest.raises(FormatError, match=f"event 1: tool_call_metadata.model_response.{field}"):
        formats.read(path, "openhands")
    with pytest.raises(FormatError, match=f"event 1: tool_call_metadata.model_response.{field}"):
        read_jsonl(path, "openhands")


def test_cache_counts_past_the_prompt_leave_no_uncached_input(tmp_path: Path) -> None:
    # Found by the fuzz job: cache reads and writes whose sum passes 2**64 - 1
    # wrapped around in the native reader (a panic with overflow checks, a
    # wrong `input` without); both readers say what Python's integers say.
    top = 2**64 - 1
    usage = _usage(prompt_tokens=100, completion_tokens=1, cache_read_input_tokens=top,
                   cache_creation_input_tokens=7)  # fmt: skip
    events = [{"id": 0, "source": "user", "action": "message", "message": "go"},
              _action(1, usage, "c1")]  # fmt: skip
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(events) + "\n")
    for session in (formats.read(path, "openhands")[0],
                    read_jsonl(path, "openhands").transcript.to_sessions()[0]):  # fmt: skip
        tokens = next(m.info.tokens for m in session.messages if m.info.role == "assistant")
        assert tokens is not None
        assert (tokens.input, tokens.cache.read, tokens.cache.write) == (0, top, 7)
