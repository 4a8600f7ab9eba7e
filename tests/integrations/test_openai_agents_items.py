"""CompactingSession on stored items alone (no model): the view is a list the
Responses API accepts, the summary boundary keeps calls with their outputs and
their reasoning, and errors name the session's items."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ctxcompact.errors import InputTypeError, MissingToolResultError, OrphanedToolResultError
from ctxcompact.integrations.openai_agents import SUMMARY_KEY, CompactingSession
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT, INTERRUPTED_TOOL

POLICY = {"preset": "swe-agent", "keep_recent": 2}


def call(i: int, *, item_id: bool = False) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": f"c{i}", "name": "read",
            "arguments": json.dumps({"path": f"f{i}.py"})}  # fmt: skip
    return {**item, "id": f"fc_{i}"} if item_id else item


def output(i: int, size: int = 6000) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{i}", "output": f"OUT{i} " + "x" * size}


def reasoning(i: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{i}",
            "summary": [{"type": "summary_text", "text": f"think {i}"}]}  # fmt: skip


def assert_accepted(view: list[dict[str, Any]], stored: list[dict[str, Any]]) -> None:
    """What the Responses API checks: every output after its call, every call
    answered, every call with an id right after the reasoning item it followed."""
    made: set[str] = set()
    for n, item in enumerate(view):
        if item.get("type") == "function_call":
            made.add(item["call_id"])
            assert any(o.get("type") == "function_call_output" and o["call_id"] == item["call_id"]
                       for o in view[n + 1:]), item  # fmt: skip
            at = next(
                k
                for k, s in enumerate(stored)
                if s.get("type") == "function_call" and s["call_id"] == item["call_id"]
            )
            if item.get("id") and at > 0 and stored[at - 1].get("type") == "reasoning":
                assert n > 0 and view[n - 1] == stored[at - 1], f"{item['id']} lost its reasoning"
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in made, f"output of {item['call_id']} without its call"
        else:
            assert "orphaned result" not in str(item.get("content")), item
        assert SUMMARY_KEY not in item


def run(session: CompactingSession, *batches: list[Any]) -> list[list[dict[str, Any]]]:
    """Add each batch, then read the view; every view."""

    async def go() -> list[list[dict[str, Any]]]:
        views = []
        for batch in batches:
            await session.add_items(batch)
            views.append(await session.get_items())
        return views

    return asyncio.run(go())


def stored(session: CompactingSession) -> list[dict[str, Any]]:
    return [dict(i) for i in asyncio.run(session.inner.get_items())]


def steps(first: int, last: int, *, gap: int | None = None, think: bool = False) -> list[Any]:
    items: list[Any] = []
    for i in range(first, last):
        items += [reasoning(i)] if think else []
        items.append(call(i, item_id=think))
        if i != gap:  # the gap's call was interrupted: no output stored
            items.append(output(i))
        items.append({"role": "assistant", "content": f"step {i} " + "t " * 3000})
    return items


def test_repair_in_the_head_keeps_the_first_kept_call_with_its_output() -> None:
    """A repair (an added interrupted output) before the split point moved the
    boundary one item too far: the kept output lost its call, for good."""
    s = CompactingSession("r", context=32_000, output=4_000, repair=True, policy=POLICY)
    first, second = run(s, [{"role": "user", "content": "fix the test"}, *steps(0, 20, gap=3)],
                        steps(20, 40, gap=39))  # fmt: skip
    assert len(s.records) == 2 and len(s.repairs) >= 2
    items = stored(s)
    marks = [i[SUMMARY_KEY]["keep_from"] for i in items if SUMMARY_KEY in i]
    # each boundary is a message or a call (with what precedes it), never an output
    assert all(items[k].get("type") != "function_call_output" for k in marks)
    for view in (first, second):
        assert_accepted(view, items)
        assert view[0]["role"] == "user" and "## Session Summary" in view[0]["content"]
    # the interrupted call of the kept items is answered in the view, not stored
    assert {"type": "function_call_output", "call_id": "c39", "output": INTERRUPTED_TOOL} in second
    assert not any(i.get("output") == INTERRUPTED_TOOL for i in items)


def test_the_summary_is_a_user_message_with_and_without_repair() -> None:
    history = [{"role": "user", "content": "fix the test"}, *steps(0, 20)]
    views = {}
    for repair in (False, True):
        s = CompactingSession("u", context=32_000, output=4_000, repair=repair, policy=POLICY)
        (views[repair],) = run(s, history)
        assert len(s.records) == 1
    assert views[True] == views[False]
    assert views[True][0]["role"] == "user" and set(views[True][0]) == {"role", "content"}
    outputs = [i["output"] for i in views[True] if i.get("type") == "function_call_output"]
    assert outputs[-2:] != [CLEARED_TOOL_OUTPUT] * 2 and CLEARED_TOOL_OUTPUT in outputs[:-2]


@pytest.mark.parametrize("repair", [False, True])
def test_a_kept_call_keeps_the_reasoning_item_before_it(repair: bool) -> None:
    items: list[Any] = [{"role": "user", "content": "fix the failing test"}]
    for i in range(20):
        items += [reasoning(i), call(i, item_id=True), output(i, 12_000)]
    items.append({"role": "user", "content": "NEWEST"})
    s = CompactingSession("t", context=32_000, output=4_000, repair=repair,
                          policy={"preset": "swe-agent", "keep_recent": 12})  # fmt: skip
    (view,) = run(s, items)
    assert len(s.records) == 1
    all_items = stored(s)
    keep_from = all_items[-1][SUMMARY_KEY]["keep_from"]
    assert all_items[keep_from]["type"] == "reasoning"
    assert_accepted(view, all_items)
    # every reasoning item from the boundary on is in the view, in place
    assert [i for i in view if i.get("type") == "reasoning"] == [
        i for i in all_items[keep_from:] if i.get("type") == "reasoning"
    ]
    assert view[-1] == {"role": "user", "content": "NEWEST"}


def test_reasoning_stays_in_place_through_two_summaries_with_repair() -> None:
    s = CompactingSession("t2", context=32_000, output=4_000, repair=True, policy=POLICY)
    views = run(s, [{"role": "user", "content": "go"}, *steps(0, 20, gap=2, think=True)],
                steps(20, 40, gap=23, think=True))  # fmt: skip
    assert len(s.records) == 2
    for view in views:
        assert_accepted(view, stored(s))
        assert any(i.get("type") == "reasoning" for i in view)


def test_a_stored_item_that_is_not_a_dict_is_a_typed_error() -> None:
    s = CompactingSession("bad", context=100_000)
    with pytest.raises(InputTypeError, match=r"item 1 of session 'bad' is a str") as e:
        run(s, [{"role": "user", "content": "hi"}, "hello"])
    assert e.value.row == 1


def test_pairing_errors_name_the_sessions_item_and_the_call() -> None:
    # the call joins the assistant message before it: chat message 1, item 3
    missing = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "reading"},
               reasoning(1), call(1), {"role": "user", "content": "and?"}]  # fmt: skip
    with pytest.raises(MissingToolResultError, match=r"^item 3 calls tool 'read' \(call_id 'c1'\)"
                       ) as e:  # fmt: skip
        run(CompactingSession("m", context=100_000), missing)
    assert e.value.row == 3
    orphan = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "reading"},
              reasoning(1), call(1), output(1, 10), output(9, 10)]  # fmt: skip
    with pytest.raises(OrphanedToolResultError, match=r"^item 5 is the output of tool call 'c9'"
                       ) as e:  # fmt: skip
        run(CompactingSession("o", context=100_000), orphan)
    assert e.value.row == 5
    # with repair: the orphan is a note in its place, the rest as stored
    (view,) = run(CompactingSession("o2", context=100_000, repair=True), orphan)
    assert view[:5] == orphan[:5]
    assert view[5]["role"] == "user" and "[orphaned result of tool call c9]" in view[5]["content"]


def test_a_moved_output_goes_after_its_call_with_repair() -> None:
    items = [{"role": "user", "content": "go"}, reasoning(1), call(1, item_id=True),
             {"role": "user", "content": "still there?"}, output(1, 10)]  # fmt: skip
    (view,) = run(CompactingSession("mv", context=100_000, repair=True), items)
    assert view == [items[0], items[1], items[2], items[4], items[3]]


def test_a_stored_boundary_that_cut_a_call_short_is_healed_in_the_view() -> None:
    """A summary item stored before this fix may point at an output (its call
    summarized) or at a call (its reasoning summarized)."""
    head = [{"role": "user", "content": "go"}, reasoning(1), call(1, item_id=True), output(1, 10)]
    tail = [reasoning(2), call(2, item_id=True), output(2, 10), {"role": "user", "content": "and?"}]
    for keep_from, kept in ((3, head[1:] + tail), (5, tail)):
        summary = {"role": "user", "content": "## Session Summary (Compaction Round 1)",
                   SUMMARY_KEY: {"round": 1, "keep_from": keep_from}}  # fmt: skip
        (view,) = run(CompactingSession(f"h{keep_from}", context=100_000),
                      [*head, *tail, summary])  # fmt: skip
        assert view == [{"role": "user", "content": summary["content"]}, *kept]
