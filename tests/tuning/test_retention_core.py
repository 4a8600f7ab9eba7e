"""Retention scored in the core (rust/src/retention) against its reference,
``tuning.retention`` in pure Python: the same facts (kind, text, resolution,
content words) out of random chat messages, the same compaction scores, and
the same run retention call by call, exact floats. The texts mix what the
rule reads (paths, code names, backquoted spans and fences, error names and
lines, plan steps, requests) with what Python's ``re`` and ``str`` read
their own way (Unicode word characters, digits and spaces, the letters
``re.IGNORECASE`` folds, line breaks ``splitlines`` knows).

The replay's per-call retention is held to the live walk (which scores with
the reference) by tests/tuning/test_engine_replay.py, on every corpus of
../shared/data and on generated runs.
"""

from __future__ import annotations

import json
from typing import Any

import ctxcompact._core as _core
import pytest
from ctxcompact.errors import InvalidUsageError
from ctxcompact.tuning.retention import RunRetention, extract_facts, score_compaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FRAGMENTS = [
    "src/app/main.py", "../lib/x.rs", "~/.config/tool.toml", "./run.sh", "a/b/c.d.ts", "README.md",
    "file.pyi", "x.pyx/", "data/v1.2/out.json", "/abs/path/to/file.cfg", "dir/", "a.b",
    "snake_case_name", "camelCase", "HttpServerError", "mod_1", "os.path.join(", "obj.method(x)",
    "_private", "A1b2C3", "`code_name`", "`a`", "`two words here now`", "`Sentence. Next`",
    "``", "```python", "`` `x` ``", "`src/x.py`", "` spaced `", "ValueError", "KeyError: 'k'",
    "panicked at", "Segmentation fault", "MyException", "Error", "error: bad", "Fatal( x",
    "Traceback (most recent call last):", "failed: 3", "FAILURE\tnow", "1. first step",
    "2) second", "- [ ] todo", "- [x] done", "Step 3 go", "the plan is", "next steps", "Next Step",
    "planning", "please make sure the tests pass", "What did we do so far?",
    "Continue if you have next steps", "implement the feature quickly", "résumé naïve façade",
    "ǅungla", "Kelvin", "ſtep 1 x", "İstanbul error: x", "ı", "٣. arabic digit", "x²y",
    "e\u0301tude", "mod_\u0301x", "\u2028", "\x1c", "\x85", "\xa0", "\u3000", "\r\n", "\t", "\n",
    " ", "  ", ".", ";", "!", "?", "(", ")", "'", "-", "/", "~", "_", "`", "x", "A", "9",
]  # fmt: skip
SEPARATORS = ["", " ", "\n", "  ", "\t", ". ", ", ", "`", "/", "\n\n", "\u2028"]

text = st.lists(
    st.tuples(st.sampled_from(FRAGMENTS) | st.text(max_size=6), st.sampled_from(SEPARATORS)),
    max_size=14,
).map(lambda parts: "".join(a + b for a, b in parts))


@st.composite
def message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
    m: dict[str, Any] = {"role": role, "content": draw(text)}
    if role == "assistant" and draw(st.booleans()):
        calls = []
        for i in range(draw(st.integers(1, 2))):
            args = draw(st.one_of(
                st.dictionaries(st.sampled_from(["path", "cmd", "n"]),
                                text | st.integers() | st.lists(text, max_size=2), max_size=3
                                ).map(json.dumps),
                text,
            ))  # fmt: skip
            name = draw(st.sampled_from(["read", "bash", "edit"]))
            calls.append({"id": f"c{i}", "type": "function",
                          "function": {"name": name, "arguments": args}})  # fmt: skip
        m["tool_calls"] = calls
    if role == "tool":
        m["tool_call_id"] = draw(st.sampled_from(["c0", "c1", "x"]))
    return m


messages = st.lists(message(), max_size=6)
SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


def python_facts(ms: list[dict[str, Any]], task_index: int | None) -> list[Any]:
    return [(f.kind, f.text, f.resolved, sorted(f.words))
            for f in extract_facts(ms, task_index=task_index)]  # fmt: skip


def core_facts(ms: list[dict[str, Any]], task_index: int | None) -> list[Any]:
    return [(k, t, r, sorted(w)) for k, t, r, w in _core.retention_facts(json.dumps(ms),
                                                                         task_index)]  # fmt: skip


@SETTINGS
@given(ms=messages, task=st.sampled_from([None, -1, 0, 1, 2]))
def test_the_core_extracts_the_facts_python_does(ms: list[dict[str, Any]],
                                                 task: int | None) -> None:  # fmt: skip
    assert core_facts(ms, task) == python_facts(ms, task)


@SETTINGS
@given(t=text)
def test_the_core_reads_a_text_as_python_does(t: str) -> None:
    """One text in every place: a request, a plan, what an agent wrote, a tool result."""
    ms = [{"role": "user", "content": t}, {"role": "assistant", "content": t},
          {"role": "tool", "tool_call_id": "c0", "content": t}]  # fmt: skip
    assert core_facts(ms, None) == python_facts(ms, None)


@SETTINGS
@given(before=messages, kept=st.lists(st.booleans(), min_size=6, max_size=6), new=messages,
       task=st.none() | text)  # fmt: skip
def test_the_core_scores_a_compaction_as_python_does(
    before: list[dict[str, Any]], kept: list[bool], new: list[dict[str, Any]], task: str | None
) -> None:
    if before and before[0]["role"] == "user" and task == "":
        task = before[0]["content"]  # the task among the removed
    after = [m for m, k in zip(before, kept, strict=False) if k] + new
    want = score_compaction(before, after, task=task)
    got = _core.retention_compaction(json.dumps(before), json.dumps(after), task)
    assert got == (len(want.removed), want.kept, [f.label() for f in want.lost])


@SETTINGS
@given(steps=st.lists(st.tuples(st.booleans(), messages, st.lists(st.booleans(), max_size=12)),
                      max_size=6))  # fmt: skip
def test_the_core_keeps_a_runs_retention_as_python_does(
    steps: list[tuple[bool, list[dict[str, Any]], list[bool]]],
) -> None:
    """Messages appended, then prompts resent with some messages dropped
    (masked) and others entering (placeholders, a summary)."""
    run, prompt, ops = RunRetention(), [], []
    want: list[float] = []
    for resend, ms, keep in steps:
        if resend:
            sent = [m for m, k in zip(prompt, keep + [True] * len(prompt), strict=False) if k]
            sent += ms
            run.resend(prompt, sent)
            ops.append(["resend", json.dumps(prompt), json.dumps(sent)])
            prompt = sent
        else:
            run.append(ms)
            ops.append(["append", json.dumps(ms)])
            prompt = prompt + ms
        want.append(run.score)
    scores, lost = _core.retention_run(ops)
    assert scores == want
    assert lost == [f.label() for f in run.lost()]


def test_a_bad_step_or_message_list_is_a_usage_error() -> None:
    with pytest.raises(InvalidUsageError, match="JSON array"):
        _core.retention_compaction("[", "[]")
    with pytest.raises(InvalidUsageError, match="a step is"):
        _core.retention_run([["drop", "[]"]])
