"""Repair of tool call / result pairing, with a report of every change."""

from __future__ import annotations

from typing import Any

import pytest
from ctxcompact.errors import MissingToolResultError, OrphanedToolResultError
from ctxcompact.formats import from_openai_chat
from ctxcompact.integrations.chatlists import check_pairs
from ctxcompact.scans import INTERRUPTED_TOOL, validate_chat_messages
from ctxcompact.scans.chat import use_blocks
from ctxcompact.scans.repair import repair_chat_messages, repair_tool_pairs


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def result(cid: str, text: str = "r") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def asks(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def test_valid_history_is_unchanged() -> None:
    msgs = [{"role": "user", "content": "go"}, asks("a", "b"), result("a"), result("b")]
    out, report = repair_chat_messages(msgs)
    assert out == msgs and not report


def test_out_of_order_result_is_moved_after_its_call() -> None:
    msgs = [asks("a"), {"role": "user", "content": "hm"}, result("a")]
    out, report = repair_chat_messages(msgs)
    assert out == [asks("a"), result("a"), {"role": "user", "content": "hm"}]
    assert [(c.kind, c.where, c.call_id) for c in report.changes] == [("moved-result", 2, "a")]
    validate_chat_messages(out)


def test_orphan_result_becomes_a_note_and_missing_result_is_interrupted() -> None:
    msgs = [result("zz", "lost output"), asks("a")]
    out, report = repair_chat_messages(msgs)
    assert out[0] == {"role": "user", "content": "[orphaned result of tool call zz]\nlost output"}
    assert out[-1] == {"role": "tool", "tool_call_id": "a", "content": INTERRUPTED_TOOL}
    assert (report.count("orphan-result"), report.count("missing-result")) == (1, 1)
    validate_chat_messages(out)


def test_duplicate_call_ids_are_renamed_with_their_results() -> None:
    msgs = [asks("a"), result("a", "first"), asks("a"), result("a", "second")]
    out, report = repair_chat_messages(msgs)
    assert out[2]["tool_calls"][0]["id"] == "a-dup1"
    assert out[3] == {"role": "tool", "tool_call_id": "a-dup1", "content": "second"}
    assert report.count("duplicate-call-id") == 1
    validate_chat_messages(out)


def test_session_repair_keeps_orphans_as_notes_and_reports_pending_calls() -> None:
    session = from_openai_chat(
        [{"role": "user", "content": "go"}, asks("a"), result("zz", "x")], "s"
    )
    fixed, report = repair_tool_pairs(session)
    assert fixed.messages[-1].parts[0].text == "[orphaned result of tool call zz]\nx"
    assert {c.kind for c in report.changes} == {"orphan-result", "missing-result"}
    assert len(fixed.messages) == len(session.messages)


def test_a_call_answered_by_a_tool_result_block_is_not_interrupted() -> None:
    """A later turn's Anthropic tool_result block answers its call: the repair
    added an interrupted result too, so the model saw two answers."""
    blocks = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "the file"},
        {"type": "text", "text": "go on"}]}  # fmt: skip
    msgs = [{"role": "user", "content": "go"}, asks("a", "b"), blocks]
    out, report = repair_chat_messages(msgs)
    assert [(c.kind, c.call_id) for c in report.changes] == [("missing-result", "b")]
    assert [m.get("tool_call_id") for m in out if m["role"] == "tool"] == ["b"]
    assert out[-1] == blocks
    validate_chat_messages(out)


def test_a_renamed_duplicate_call_renames_its_result_block() -> None:
    def block(cid: str, text: str) -> dict[str, Any]:
        result = {"type": "tool_result", "tool_use_id": cid, "content": text}
        return {"role": "user", "content": [result]}

    msgs = [asks("a"), block("a", "first"), asks("a"), block("a", "second")]
    out, report = repair_chat_messages(msgs)
    assert [c.kind for c in report.changes] == ["duplicate-call-id"]
    assert out[2]["tool_calls"][0]["id"] == "a-dup1"
    assert out[3]["content"][0]["tool_use_id"] == "a-dup1"
    assert out[1] == msgs[1] and len(out) == 4


def _uses(*ids: str) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": "read", "input": {}} for i in ids]
    return {"role": "assistant", "content": [{"type": "text", "text": "reading"}, *blocks]}


def _answers(*ids: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": i, "content": "the file"} for i in ids]}  # fmt: skip


def test_an_unanswered_tool_use_block_is_caught_and_repaired() -> None:
    """A plain Anthropic list: a tool_use block no turn answers was neither
    reported by the pairing check nor repaired, so the API refused the list."""
    msgs = [{"role": "user", "content": "go"}, _uses("a", "b"), _answers("a")]
    with pytest.raises(MissingToolResultError, match="message 1 calls tool 'b'") as caught:
        check_pairs(msgs)
    assert (caught.value.row, caught.value.column) == (1, "content")
    out, report = repair_chat_messages(msgs)
    assert [(c.kind, c.where, c.call_id) for c in report.changes] == [("missing-result", 1, "b")]
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "b", "content": INTERRUPTED_TOOL}]}  # fmt: skip
    assert out[:2] == msgs[:2] and out[3] == msgs[2]
    check_pairs(out)  # the repaired list passes
    answered = [_uses("a"), _answers("a")]
    check_pairs(answered)
    unchanged, nothing = repair_chat_messages(answered)
    assert unchanged == answered and not nothing


def _tool_answers(cid: str, text: str = "the file") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def test_a_tool_message_answers_a_tool_use_block() -> None:
    """One rule for what answers a call, whichever shape each side has: an
    OpenAI ``tool`` message answering an Anthropic ``tool_use`` block was
    turned into an orphan note (and the call left unanswered)."""
    msgs = [{"role": "user", "content": "go"}, _uses("a"), _tool_answers("a"),
            {"role": "assistant", "content": "done"}]  # fmt: skip
    check_pairs(msgs)  # the check takes it
    out, report = repair_chat_messages(msgs)
    assert out == msgs and not report  # so the repair keeps it as it is
    # a late answer is moved right after its call, as a tool_calls entry's is
    late = [_uses("a"), {"role": "user", "content": "hm"}, _tool_answers("a")]
    out, report = repair_chat_messages(late)
    assert out == [late[0], late[2], late[1]]
    assert [(c.kind, c.where, c.call_id) for c in report.changes] == [("moved-result", 2, "a")]
    check_pairs(out)
    # a reused tool_use id is renamed with its answer, as a tool_calls id is
    dup = [_uses("a"), _tool_answers("a", "1"), _uses("a"), _tool_answers("a", "2")]
    out, report = repair_chat_messages(dup)
    assert [c.kind for c in report.changes] == ["duplicate-call-id"]
    assert use_blocks(out[2]) == ["a-dup1"] and out[3]["tool_call_id"] == "a-dup1"
    check_pairs(out)


def test_an_orphaned_tool_result_block_is_kept_as_a_note() -> None:
    """A ``tool_result`` block with no earlier call: ``repair=True`` raised;
    it is kept as a note in its turn, as an orphaned ``tool`` message is
    kept as a user note. Without the repair the check names message and block."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    turn = {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "tool_result", "tool_use_id": "zz",
         "content": [{"type": "text", "text": "lost output"}, image]}]}  # fmt: skip
    msgs = [{"role": "user", "content": "go"}, turn, {"role": "assistant", "content": "ok"}]
    with pytest.raises(OrphanedToolResultError, match=r"message 1 \(block 1\).*'zz'") as caught:
        check_pairs(msgs)
    assert (caught.value.row, caught.value.column) == (1, "content")
    out, report = repair_chat_messages(msgs)
    assert [(c.kind, c.where, c.call_id) for c in report.changes] == [("orphan-result", 1, "zz")]
    note = {"type": "text", "text": "[orphaned result of tool call zz]\nlost output"}
    assert out[1] == {"role": "user", "content": [{"type": "text", "text": "look"}, note, image]}
    assert out[0] == msgs[0] and out[2] == msgs[2]
    check_pairs(out)
    # the same text as an orphaned tool message keeps (its blocks' text, not their repr)
    tool = {"role": "tool", "tool_call_id": "zz", "content": [{"type": "text", "text": "lost"}]}
    notes, _ = repair_chat_messages([tool])
    assert notes == [{"role": "user", "content": "[orphaned result of tool call zz]\nlost"}]
