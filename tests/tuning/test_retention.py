"""The retention check: facts of what a compaction removed, and which survive."""

from __future__ import annotations

import json
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.clients.base import SummaryRequest, SummaryResponse
from ctxcompact.live.summary import Summarizer, build_digest
from ctxcompact.tuning import replay
from ctxcompact.tuning.retention import Fact, extract_facts, most_lost, score_compaction

TASK = "Fix the crash in the CSV importer when a row has an empty date column"


def call(i: int, name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip


def history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": "Let me read `parse_date` first.",
         "tool_calls": [call(1, "read", path="src/importer/csv_reader.py")]},
        {"role": "tool", "tool_call_id": "c1", "content": "def parse_date(value): ..."},
        {"role": "assistant", "content": "", "tool_calls": [call(2, "bash", command="pytest")]},
        {"role": "tool", "tool_call_id": "c2",
         "content": "Traceback (most recent call last):\n  ...\nValueError: empty date"},
        {"role": "user", "content": "Do not change the public API of DateColumn please"},
        {"role": "assistant", "content": "Plan:\n1. guard empty values in parse_date\n"
                                         "2. add a regression test in tests/test_dates.py"},
        {"role": "assistant", "content": "", "tool_calls": [call(3, "bash", command="pytest")]},
        {"role": "tool", "tool_call_id": "c3", "content": "12 passed"},
    ]  # fmt: skip


def test_every_kind_is_extracted_once() -> None:
    facts = extract_facts(history())
    by_kind: dict[str, list[Fact]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, []).append(f)
    assert [f.text for f in by_kind["task"]] == [TASK]
    assert [f.text for f in by_kind["directive"]] == [
        "Do not change the public API of DateColumn please"
    ]
    assert by_kind["plan"][0].text.startswith("Plan: 1. guard empty values")
    paths = {f.text for f in by_kind["path"]}
    assert paths == {"src/importer/csv_reader.py", "tests/test_dates.py"}
    idents = {f.text for f in by_kind["identifier"]}
    assert {"parse_date", "DateColumn"} <= idents
    # the error of the first pytest run, resolved by the second
    errors = {f.text: f.resolved for f in by_kind["error"]}
    assert errors == {"ValueError": True}
    # nothing taken from tool outputs except errors ("def parse_date" is output)
    assert len(facts) == len({(f.kind, f.text) for f in facts})


def test_an_unresolved_error_and_a_generic_error_line() -> None:
    messages = [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": "", "tool_calls": [call(1, "bash", command="make")]},
        {"role": "tool", "tool_call_id": "c1", "content": "cc main.c\nerror: missing ';' here"},
        {"role": "assistant", "content": "", "tool_calls": [call(2, "bash", command="./a")]},
        {"role": "tool", "tool_call_id": "c2", "content": "Traceback (most recent call last):"},
    ]  # fmt: skip
    errors = [f for f in extract_facts(messages) if f.kind == "error"]
    assert errors == [
        Fact("error", "error: missing ';' here", resolved=False),
        Fact("error", "Traceback (most recent call last):", resolved=False),
    ]


def test_the_digest_keeps_what_a_vague_summary_loses() -> None:
    before = history()
    tail = before[-2:]

    def summarized(text: str) -> list[dict[str, Any]]:
        return [before[0], {"role": "user", "content": "What did we do so far?"},
                {"role": "assistant", "content": text}, *tail]  # fmt: skip

    digest = build_digest(before[1:-2])
    good = score_compaction(before, summarized(digest), task=TASK)
    vague = score_compaction(before, summarized("We worked on the code."), task=TASK)
    assert good.removed == vague.removed and len(good.removed) >= 8
    assert vague.score < 0.2 < 0.6 < good.score
    lost = {f.kind for f in vague.lost}
    assert {"task", "directive", "path", "error"} <= lost
    # the digest lists the files and the errors with their fate
    assert not [f for f in good.lost if f.kind in ("task", "path", "error")]


def test_masking_an_output_loses_its_errors_only() -> None:
    before = history()
    after = [dict(m) for m in before]
    after[5] = {**after[5], "content": "[Old tool result content cleared]"}
    r = score_compaction(before, after, task=TASK)
    # only the masked message was removed; its fact is the exception it reported,
    # resolved by the later run (outside what was removed)
    assert r.removed == (Fact("error", "ValueError", resolved=True),)
    assert r.lost == r.removed and r.score == 0.0
    assert most_lost([r, r]) == [("error: ValueError (resolved later)", 2)]


def test_nothing_removed_scores_one() -> None:
    r = score_compaction(history(), [*history(), {"role": "user", "content": "next"}])
    assert r.removed == () and r.score == 1.0


def run(steps: int) -> cc.Session:
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user"},
         "parts": [{"id": "t0", "type": "text", "text": TASK}]},
    ]  # fmt: skip
    for i in range(steps):
        messages.append({
            "info": {"id": f"a{i}", "role": "assistant", "parentID": "u0", "finish": "tool-calls"},
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"src/mod_{i}.py"},
                                 "output": ("KeyError: 'date'\n" if i == 2 else "")
                                 + "x" * 8_000}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": "r"}, "messages": messages})


def test_replay_scores_each_compaction_and_the_policy() -> None:
    limits = {"context": 12_000, "output": 1_000}
    digest = replay(run(12), limits=limits)

    class Vague:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            return SummaryResponse("## Session Summary\nWe read some files.", "stop")

    config = cc.CompactionConfig()
    vague = replay(run(12), limits=limits, config=config, summarizer=Summarizer(Vague(), config))
    for result in (digest, vague):
        calls = result.calls.to_pylist()
        scored = [c for c in calls if c["removed_facts"]]
        assert scored and all(c["compacted"] for c in scored)
        assert all(0 <= c["kept_facts"] <= c["removed_facts"] for c in calls)
        s = result.summary
        assert s["removed_facts"] == sum(c["removed_facts"] for c in calls)
        assert s["compaction_retention"] == s["kept_facts"] / s["removed_facts"]
    # the digest names the task and the files read; the vague summary does not
    kept, vaguely = (r.summary["compaction_retention"] for r in (digest, vague))
    assert kept > 0.8 > 0.3 > vaguely
    # and so the calls after the summary show more of what the run stated
    assert digest.summary["retention"] > vague.summary["retention"]
    lost = dict(vague.summary["most_lost"])
    assert lost.get(f"task: {TASK}") and lost.get("path: src/mod_0.py")
    assert "error: KeyError (resolved later)" in lost


def identifiers(text: str) -> list[str]:
    facts = extract_facts([{"role": "user", "content": "fix it"},
                           {"role": "assistant", "content": text}])  # fmt: skip
    return [f.text for f in facts if f.kind == "identifier"]


def test_prose_between_backquoted_paths_is_no_identifier() -> None:
    # A path taken out first left "` `", pairing each closing backtick with
    # the next opening one: the prose between them read as a code name.
    text = ("Let us open the `fields.py` file in the repository. It is likely to be in "
            "the `src/marshmallow` directory.")  # fmt: skip
    facts = extract_facts([{"role": "user", "content": "fix it"},
                           {"role": "assistant", "content": text}])  # fmt: skip
    assert [(f.kind, f.text) for f in facts if f.kind != "directive" and f.kind != "task"] == [
        ("path", "fields.py"),
        ("identifier", "src/marshmallow"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # real names, backquoted or bare, are still found
        ("Call `parse_date` and `DateColumn.from_row(x)` then run `pytest -q`.",
         ["parse_date", "DateColumn.from_row(x)", "pytest -q"]),
        ("The helper load_config calls readFile, HttpClient and os.path.join(a) here.",
         ["load_config", "readFile", "HttpClient", "os.path.join"]),
        # a command with a path in it is one name, the path a path of its own
        ("Run `python src/app.py` now.", ["python src/app.py"]),
        # a stray backtick: the prose after it is no name, the next span still is
        ("It said ` and then the `retry_count` was reset to `max_tries`.",
         ["retry_count", "max_tries"]),
        # a fence closing on the line of the text pairs with nothing
        ("}\n```After that, `upload()` is called with `$cgi->param('file')`.",
         ["upload()", "$cgi->param('file')"]),
        # too short for a name: the bare names inside are read
        ("Set `x` and `is_ok`.", ["is_ok"]),
    ],
)  # fmt: skip
def test_backquoted_spans_are_paired_as_written(text: str, expected: list[str]) -> None:
    assert identifiers(text) == expected


def test_a_score_below_one_never_reads_as_one() -> None:
    """Three decimals would print 0.99987 (a swe-agent mask on tau-bench) as
    1.000, the score of no loss at all: the tables show more places instead."""
    from ctxcompact.cli.display import _cell
    from ctxcompact.tuning.report import _shown
    from ctxcompact.tuning.retention import shown_score

    assert shown_score(1.0) == "1.000"
    assert shown_score(0.81249) == "0.812"
    assert shown_score(0.99987) == "0.9999"
    assert shown_score(0.9995) == "0.9995"
    assert shown_score(1 - 1e-12) == "0.999999999"
    assert shown_score(float("nan")) == "nan"
    for value in (0.99987, 0.9999999, 1 - 1e-15, 0.99951):
        for text in (shown_score(value), _cell("retention", value), _shown("retention", value)):
            assert float(text) < 1.0, text
