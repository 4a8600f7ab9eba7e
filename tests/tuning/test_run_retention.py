"""Retention that compares policies (issue 39, part 5): per call, the share
of the facts the run stated so far that the prompt still shows, kept
incrementally (``RunRetention``); averaged over a session's calls, then over
the sessions. The per-compaction score is ``compaction_retention``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import DatasetError
from ctxcompact.live.summary import is_request
from ctxcompact.policy import Policy
from ctxcompact.tuning.replay import CALL_SCHEMA, replay, summarize_calls
from ctxcompact.tuning.retention import (
    RunRetention,
    _written,
    extract_facts,
    message_text,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CLEARED = "[Old tool result content cleared]"
TASK = "Fix the crash in the CSV importer when a row has an empty date column"


def call(i: int, name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip


def labels(tracker: RunRetention) -> list[str]:
    return [f.label() for f in tracker.lost()]


def test_a_run_appended_as_written_shows_everything_it_stated() -> None:
    run = RunRetention()
    assert run.score == 1.0 and run.stated == 0
    user = {"role": "user", "content": TASK}
    step = {"role": "assistant", "content": "Reading `parse_date`.",
            "tool_calls": [call(1, "read", path="src/importer/csv_reader.py")]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c1", "content": "ValueError: empty date"}
    run.append([user])
    run.resend([user], [user])
    run.append([step, result])
    run.resend([user, step, result], [user, step, result])
    assert run.stated == 4 and run.score == 1.0  # task, parse_date, the path, ValueError


def test_a_placeholder_shows_what_it_still_says() -> None:
    """OpenCode's placeholder says nothing; the described one names the
    target, so clearing the call's input too keeps the path, not the error."""
    user = {"role": "user", "content": TASK}
    step = {"role": "assistant", "content": "",
            "tool_calls": [call(1, "read", path="src/importer/csv_reader.py")]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c1", "content": "ValueError: empty date"}
    cleared_step = {**step, "tool_calls": [call(1, "read")]}
    described = {**result, "content": "[Old tool result content cleared: read "
                 "src/importer/csv_reader.py returned 22 characters; call the tool again, "
                 "or recall part p1, to see it]"}  # fmt: skip
    opaque = {**result, "content": CLEARED}
    for shown, want_lost in (
        (described, ["error: ValueError"]),
        (opaque, ["path: src/importer/csv_reader.py", "error: ValueError"]),
    ):
        run = RunRetention()
        run.append([user, step, result])
        before = [user, step, result]
        run.resend(before, [user, cleared_step, shown])
        assert labels(run) == want_lost
        assert run.score == (3 - len(want_lost)) / 3


def test_a_summary_shows_what_its_text_holds_and_a_restated_fact_is_back() -> None:
    user = {"role": "user", "content": TASK}
    step = {"role": "assistant", "content": "I will edit `parse_date` in src/dates.py"}
    run = RunRetention()
    run.append([user, step])
    digest = {"role": "user", "content": "## Summary\nTask: fix the CSV importer crash on an "
              "empty date column (a row with an empty date). Files: src/dates.py"}  # fmt: skip
    run.resend([user, step], [digest])
    assert labels(run) == ["identifier: parse_date"]
    again = {"role": "assistant", "content": "Now `parse_date` guards empty values."}
    run.append([again])
    assert run.lost() == [] and run.score == 1.0
    vague = {"role": "user", "content": "We read some files."}
    run.resend([digest, again], [vague])
    assert labels(run) == [f"task: {TASK}", "path: src/dates.py", "identifier: parse_date"]


# Incremental against the definition, worked out from scratch at every call.

PATHS = ["src/a.py", "src/b.py", "a.py", "docs/guide.md", "tests/test_b.py"]
NAMES = ["parse_date", "DateColumn", "load_rows", "rowCount", "csv.reader("]
ERRORS = ["ValueError: bad", "KeyError: 'x'", "error: build failed", "all good"]
WORDS = ["importer", "crash", "empty", "column", "dates", "parser", "guard", "values"]


@st.composite
def messages(draw: Any, start: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        n = start + i
        kind = draw(st.sampled_from(["user", "text", "call"]))
        bits = draw(st.lists(st.sampled_from(PATHS + [f"`{x}`" for x in NAMES] + WORDS),
                             min_size=1, max_size=6))  # fmt: skip
        text = " ".join(bits)
        if kind == "user":
            out.append({"role": "user", "content": text})
        elif kind == "text":
            out.append({"role": "assistant", "content": f"Plan:\n1. {text}"})
        else:
            path = draw(st.sampled_from(PATHS))
            out.append(
                {"role": "assistant", "content": "", "tool_calls": [call(n, "read", path=path)]}
            )
            out.append({"role": "tool", "tool_call_id": f"c{n}",
                        "content": draw(st.sampled_from(ERRORS))})  # fmt: skip
    return out


def transform(draw: Any, prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a call might send instead: outputs and inputs cleared, described
    placeholders, a summary of a prefix holding some of its text."""
    out = []
    for m in prompt:
        choice = draw(st.integers(0, 4))
        if m.get("role") == "tool" and choice == 0:
            m = {**m, "content": CLEARED}
        elif m.get("role") == "tool" and choice == 1:
            m = {**m, "content": f"[Old tool result content cleared: read "
                 f"{draw(st.sampled_from(PATHS))} returned 9 characters]"}  # fmt: skip
        elif m.get("tool_calls") and choice == 2:
            m = {**m, "tool_calls": [call(0, "read")]}
        out.append(m)
    cut = draw(st.integers(0, len(out)))
    if cut and draw(st.booleans()):
        pieces = draw(st.lists(st.sampled_from([message_text(m) for m in out[:cut]]),
                               max_size=3))  # fmt: skip
        out = [{"role": "user", "content": "## Summary\n" + "\n".join(pieces)}, *out[cut:]]
    return out


def from_scratch(appended: list[dict[str, Any]], prompt: list[dict[str, Any]]) -> float:
    """The definition: the facts each appended message states (the first
    request is the task; a message appended again as it was states nothing
    new), shown when a message of the prompt states or holds one."""
    stated: dict[tuple[str, str], Any] = {}
    states: dict[str, set[tuple[str, str]]] = {}
    seen = False
    for m in appended:
        key = json.dumps(m, sort_keys=True)
        if key in states:
            continue
        first = not seen and is_request(m)
        seen = seen or first
        facts = extract_facts([m], task_index=0 if first else -1)
        for f in facts:
            stated.setdefault((f.kind, f.text), f)
        states[key] = {(f.kind, f.text) for f in facts}
    if not stated:
        return 1.0
    from ctxcompact.tuning.retention import _words

    def holds(m: dict[str, Any], key: tuple[str, str]) -> bool:
        if key in states.get(json.dumps(m, sort_keys=True), set()):
            return True
        text = "\n".join([message_text(m), _written(m)])
        return bool(stated[key].kept_in(text, _words(text)))

    shown = sum(any(holds(m, k) for m in prompt) for k in stated)
    return shown / len(stated)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_incremental_score_is_the_definition(data: Any) -> None:
    run = RunRetention()
    prompt: list[dict[str, Any]] = []
    appended: list[dict[str, Any]] = []
    for step in range(data.draw(st.integers(1, 6))):
        new = data.draw(messages(step * 10))
        run.append(new)
        appended += new
        before = prompt + new
        sent = transform(data.draw, before) if data.draw(st.booleans()) else before
        run.resend(before, sent)
        prompt = sent
        assert run.score == from_scratch(appended, prompt)


# The properties on replays: generated runs and the shared corpora.

#: No summary fires in this window (masking only).
WIDE = {"context": 1_000_000, "output": 8_000}


def keep_recent(k: int, render: dict[str, Any] | None = None) -> Policy:
    return Policy.preset("swe-agent").model_copy(update={"keep_recent": k, **(render or {})})


def assert_no_compaction_scores_one(table: pa.Table) -> None:
    # swe-agent acting only as a summary runs (none fires here): nothing is cleared
    summary_only = Policy.preset("swe-agent").model_copy(update={"acts": "summary"})
    for mask_first, policy in ((False, summary_only), (True, keep_recent(10**6))):
        r = replay(table, policy, limits=WIDE, config={"mask_first": mask_first})
        calls = r.calls
        assert pc.all(pc.equal(calls["prompt_tokens"], calls["baseline_prompt_tokens"])).as_py()
        assert pc.all(pc.equal(calls["retention"], 1.0)).as_py()
        assert r.summary["retention"] == 1.0


def assert_superset_never_scores_higher(table: pa.Table, less: int, more: int,
                                        render: dict[str, Any] | None = None) -> None:  # fmt: skip
    """``keep_recent=less`` clears a superset of what ``more`` clears, at every call."""
    tight, loose = (replay(table, keep_recent(k, render), limits=WIDE,
                           config={"mask_first": True}) for k in (less, more))  # fmt: skip
    assert tight.summary["compactions"] == loose.summary["compactions"] == 0
    a, b = tight.calls, loose.calls
    assert a["session_id"].equals(b["session_id"]) and a["call"].equals(b["call"])
    assert pc.all(pc.less_equal(a["retention"], b["retention"])).as_py()
    assert tight.summary["retention"] <= loose.summary["retention"]
    # and per session
    assert pc.all(pc.less_equal(tight.sessions["retention"], loose.sessions["retention"])).as_py()


RENDERS = [{}, {"placeholder": "describe"}, {"clear_inputs": True, "placeholder": "describe"},
           {"clear_inputs": True}, {"truncate_output": 300}]  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), less=st.integers(0, 4), more=st.integers(1, 6),
       render=st.sampled_from(RENDERS))  # fmt: skip
def test_on_generated_runs(seed: int, less: int, more: int, render: dict[str, Any]) -> None:
    table = generate_table(2, 40, seed=seed, mean_output_chars=2_000)
    assert_no_compaction_scores_one(table)
    assert_superset_never_scores_higher(table, less, less + more, render)


@cache
def corpus(name: str) -> pa.Table:
    return formats.read_sessions(DATA / "transcripts" / name, on_error="skip").table


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("name", ["swe-agent", "tau-bench", "openhands", "mini-swe-agent"])
def test_on_the_shared_corpora(name: str) -> None:
    """The per-compaction score broke this: on tau-bench, keep_recent=5
    scored 0.812 and keep_recent=8, which clears less, 0.800."""
    table = corpus(name)
    assert_no_compaction_scores_one(table)
    for less, more in ((1, 2), (2, 5), (5, 8)):
        assert_superset_never_scores_higher(table, less, more)
    assert_superset_never_scores_higher(table, 2, 5, {"placeholder": "describe",
                                                      "clear_inputs": True})  # fmt: skip


def test_the_average_is_over_calls_then_sessions() -> None:
    """Each session weighs the same, whatever its number of calls."""
    n = 3
    columns = {f.name: pa.nulls(n, f.type) for f in CALL_SCHEMA}
    columns |= {"session_id": pa.array(["long", "long", "short"]),
                "retention": pa.array([1.0, 0.5, 0.0]),
                "call": pa.array([0, 1, 0], pa.int64()),
                "compacted": pa.array([False] * n), "over_window": pa.array([False] * n),
                "lost": pa.array([[]] * n, pa.list_(pa.string()))}  # fmt: skip
    for k in ("removed_facts", "kept_facts", *(c for c in columns if c.endswith("_tokens"))):
        columns[k] = pa.array([0] * n, pa.int64())
    calls = pa.table(columns, schema=CALL_SCHEMA)
    assert summarize_calls(calls)["retention"] == (0.75 + 0.0) / 2
    assert summarize_calls(calls)["compaction_retention"] == 1.0
    with pytest.raises(DatasetError, match="no retention for 1 of its 3 calls") as e:
        summarize_calls(calls.set_column(
            CALL_SCHEMA.get_field_index("retention"), "retention",
            pa.array([1.0, None, 0.0], pa.float64())))  # fmt: skip
    assert e.value.column == "retention"
