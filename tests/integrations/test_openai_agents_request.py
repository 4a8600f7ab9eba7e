"""CompactingSession keeps the user's newest request and the leading system
items through a summary: the view is ``[system..., summary, request?, *kept]``,
valid Responses input, stable across reads and summaries."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from ctxcompact.integrations.openai_agents import SUMMARY_KEY, CompactingSession
from test_openai_agents_items import (
    assert_accepted,
    call,
    output,
    reasoning,
    run,
    steps,
    stored,
)

POLICY = {"preset": "swe-agent", "keep_recent": 2}
END = "PLEASE FIX THE FAILURE ABOVE"
LOG = "log line\n" * 25_000 + END
MARKER = "characters cut ...]"  # the head-and-tail cut says how much went


def big_request() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "fix the test"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": LOG}]  # fmt: skip


def summary_at(view: list[dict[str, Any]]) -> int:
    (at,) = [n for n, i in enumerate(view) if "## Session Summary" in str(i.get("content"))]
    return at


def requests(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in view if i.get("role") == "user" and END in str(i.get("content"))]


@pytest.mark.parametrize("repair", [False, True])
def test_a_request_bigger_than_the_tail_survives_cut(repair: bool) -> None:
    s = CompactingSession("u", context=32_000, output=4_000, repair=repair)
    (view,) = run(s, big_request())
    assert len(s.records) == 1
    (request,) = requests(view)
    assert view.index(request) == summary_at(view) + 1
    text = request["content"]
    assert text.endswith(END) and text.startswith("log line") and MARKER in text.lower()
    assert len(text) < len(LOG) // 4
    assert_accepted(view, stored(s))
    # stored whole, never repeated in the inner session
    assert [i.get("content") for i in stored(s)].count(LOG) == 1


def test_the_view_is_stable_across_reads() -> None:
    s = CompactingSession("st", context=32_000, output=4_000)
    first, second = run(s, big_request(), [])
    assert first == second and len(s.records) == 1
    assert asyncio.run(s.get_items(limit=1)) == [second[-1]]


def test_a_request_that_fits_is_repeated_as_written_before_the_kept_steps() -> None:
    """The agent's own steps after the request fill the tail: the request is
    summarized with the head, and repeated as written between the summary and
    the kept steps."""
    request = {"role": "user", "content": "please fix the failing test in f0.py"}
    s = CompactingSession("w", context=32_000, output=4_000, policy=POLICY)
    (view,) = run(s, [{"role": "user", "content": "hi"}, request, *steps(0, 20)])
    assert len(s.records) == 1
    at = summary_at(view)
    assert view[at + 1] == request and view.count(request) == 1
    assert view[at + 2].get("type") in ("function_call", "reasoning") or view[at + 2]["role"] == (
        "assistant"
    )
    items = stored(s)
    mark = items[-1][SUMMARY_KEY]
    assert items[mark["keep_from"]] is not None and mark["keep_from"] > items.index(request)
    assert_accepted(view, items)


@pytest.mark.parametrize("repair", [False, True])
@pytest.mark.parametrize("think", [False, True])
def test_two_rounds_repeat_the_request_once_and_keep_the_boundary(repair: bool,
                                                                  think: bool) -> None:  # fmt: skip
    s = CompactingSession("two", context=32_000, output=4_000, repair=repair, policy=POLICY)
    gap = 3 if repair else None
    first, second = run(s, [*big_request(), *steps(0, 20, gap=gap, think=think)],
                        steps(20, 40, think=think))  # fmt: skip
    assert len(s.records) == 2
    items = stored(s)
    for view in (first, second):
        (request,) = requests(view)
        assert view.index(request) == summary_at(view) + 1
        assert request["content"].endswith(END) and MARKER in request["content"].lower()
        # cut once, from the stored request: the marker counts what went of it
        (cut,) = re.findall(r"\[\.\.\. (\d+) characters cut", request["content"])
        kept = request["content"].replace(f"\n\n[... {cut} characters cut ...]\n\n", "")
        assert len(kept) == len(LOG) - int(cut) and LOG.startswith(kept[:1000])
        assert_accepted(view, items)
    # the newest summary's boundary: after the repeat, the stored items from it on
    s2 = max(n for n, i in enumerate(items) if SUMMARY_KEY in i)
    mark = items[s2][SUMMARY_KEY]
    assert items[mark["request"]["item"]]["content"] == LOG  # the stored request, whole
    keep_from = mark["keep_from"]
    assert items[keep_from].get("type") != "function_call_output"
    if items[keep_from].get("type") == "function_call":  # with the reasoning before it
        assert items[keep_from - 1].get("type") != "reasoning"

    def shape(view: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(i.get("type"), i.get("role"), i.get("call_id"), i.get("id")) for i in view]

    expected = [i for i in items[keep_from:] if SUMMARY_KEY not in i]
    assert shape(second[summary_at(second) + 2 :]) == shape(expected)
    # nothing the first summary took comes back
    assert not any(i.get("call_id") == "c0" for i in second)
    assert run(s, [])[0] == second


def test_a_newer_request_in_the_tail_replaces_the_repeat() -> None:
    s = CompactingSession("nr", context=32_000, output=4_000, policy=POLICY)
    newer = {"role": "user", "content": "and now run the linter"}
    first, second, third = run(s, big_request(), [newer, *steps(0, 4)], steps(4, 30))
    assert requests(first) and newer not in first
    # until the next summary the old request stays repeated, the newer one in place
    assert requests(second) and second.index(newer) == summary_at(second) + 2
    assert len(s.records) == 2 and not requests(third)
    assert third.count(newer) == 1 and third.index(newer) == summary_at(third) + 1
    assert_accepted(third, stored(s))


def test_leading_system_and_developer_items_are_kept_in_front() -> None:
    system = {"role": "system", "content": "You fix code."}
    developer = {"role": "developer", "content": "Never push."}
    s = CompactingSession("sys", context=32_000, output=4_000, policy=POLICY)
    first, second = run(s, [system, developer, {"role": "user", "content": "go"},
                            *steps(0, 20, think=True)], steps(20, 40, think=True))  # fmt: skip
    assert len(s.records) == 2
    for view in (first, second):
        assert view[:2] == [system, developer]
        assert summary_at(view) == 2
        assert_accepted(view, stored(s))
    # the second summary found the first one after the system items
    assert s.records[1].round == 2


def test_a_later_system_item_is_history() -> None:
    late = {"role": "developer", "content": "LATE NOTE"}
    s = CompactingSession("late", context=32_000, output=4_000, policy=POLICY)
    (view,) = run(s, [{"role": "user", "content": "go"}, late, *steps(0, 20)])
    assert len(s.records) == 1 and late not in view


def test_an_old_summary_item_without_a_request_still_reads() -> None:
    head = [{"role": "user", "content": "go"}, reasoning(1), call(1, item_id=True), output(1, 10)]
    tail = [call(2), output(2, 10), {"role": "assistant", "content": "done"}]
    summary = {"role": "user", "content": "## Session Summary (Compaction Round 1)",
               SUMMARY_KEY: {"round": 1, "keep_from": 4}}  # fmt: skip
    (view,) = run(CompactingSession("old", context=100_000), [*head, *tail, summary])
    assert view == [{"role": "user", "content": summary["content"]}, *tail]


@pytest.mark.parametrize("keep_from", ["x", None, -2, True])
def test_a_summary_item_with_an_invalid_boundary_keeps_nothing(keep_from: Any) -> None:
    summary = {"role": "user", "content": "## Session Summary (Compaction Round 1)",
               SUMMARY_KEY: {"round": 1, "keep_from": keep_from}}  # fmt: skip
    after = {"role": "user", "content": "and?"}
    items = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}, summary]
    (view,) = run(CompactingSession("bad", context=100_000), [*items, after])
    assert view == [{"role": "user", "content": summary["content"]}, after]
