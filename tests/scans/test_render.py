"""How a policy shows tool parts to the model: described placeholders, cleared
call arguments, oversized outputs cut to head and tail, pinned parts, and
``recall`` of what a placeholder stands for. The stored session never changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.errors import ConfigError, MissingColumnError, TranscriptError
from ctxcompact.live.store import MemoryStore, SQLiteStore
from ctxcompact.models import MessageWithParts, Part
from ctxcompact.policy import Policy
from ctxcompact.scans import CLEARED_TOOL_OUTPUT

BIG = "line\n" * 2_000  # 10 000 characters, 2 500 tokens


def _session(*, pinned: bool = False) -> cc.Session:
    """A task, then four reads of src/app.py (10 000 characters each), one step each."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u1", "role": "user"},
         "parts": [{"id": "t1", "type": "text", "text": "fix the bug"}]},
    ]  # fmt: skip
    for i in range(4):
        messages.append({
            "info": {"id": f"a{i}", "role": "assistant", "parentID": "u1", "finish": "tool-calls"},
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       **({"pinned": True} if pinned and i == 0 else {}),
                       "state": {"status": "completed", "input": {"filePath": "src/app.py"},
                                 "output": BIG}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": "s"}, "messages": messages})


STEP = Policy(turn="step", protect_turns=0, protect=0, minimum=0, keep_recent=1)


def _cleared(session: cc.Session, policy: Policy) -> cc.Session:
    return cc.mark_pruned(session, cc.prune(session, policy), now_ms=1)


def _tool_messages(chat: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in chat if m["role"] == "tool"]


def test_the_default_view_is_opencodes() -> None:
    chat = cc.to_model_messages(_cleared(_session(), STEP))
    assert _tool_messages(chat) == [CLEARED_TOOL_OUTPUT] * 3 + [BIG]


def test_a_described_placeholder_names_tool_target_size_and_part() -> None:
    policy = STEP.model_copy(update={"placeholder": "describe"})
    chat = cc.to_model_messages(_cleared(_session(), policy), policy=policy)
    assert _tool_messages(chat)[0] == (
        "[Old tool result content cleared: read src/app.py returned 10000 characters; "
        "call the tool again, or recall part p0, to see it]"
    )
    assert _tool_messages(chat)[3] == BIG


def test_cleared_inputs_are_sent_as_empty_arguments() -> None:
    policy = STEP.model_copy(update={"clear_inputs": True})
    chat = cc.to_model_messages(_cleared(_session(), policy), policy=policy)
    arguments = [m["tool_calls"][0]["function"]["arguments"] for m in chat if m.get("tool_calls")]
    assert arguments == ["{}", "{}", "{}", '{"filePath":"src/app.py"}']


def test_an_oversized_output_is_cut_to_head_and_tail_unless_pinned() -> None:
    policy = Policy(enabled=False, truncate_output=100)  # keep 200 characters each side
    session = _session(pinned=True)
    chat = cc.to_model_messages(session, policy=policy)
    sent = _tool_messages(chat)
    assert sent[0] == BIG  # pinned
    assert sent[1] == BIG[:200] + "\n\n[... 9600 characters cut ...]\n\n" + BIG[-200:]
    # The estimate sees what is sent; the stored session keeps every character.
    assert cc.estimate_messages(session, policy).total < cc.estimate_messages(session).total // 3
    assert all(p.state.output == BIG for m in session.messages[1:] for p in m.parts if p.state)


def test_pinned_parts_are_never_cleared() -> None:
    result = cc.prune(_session(pinned=True), STEP)
    assert result.part_ids == ["p2", "p1"]  # p3 is the newest kept, p0 pinned
    session = _session()
    session.messages[1].pin()
    assert cc.prune(session, STEP).part_ids == ["p2", "p1"]


def test_pins_survive_the_part_row_table() -> None:
    session = _session(pinned=True)
    table = cc.Transcript.from_sessions([session])
    back = table.to_sessions()[0]
    assert back.messages[1].parts[0].pinned is True
    assert cc.prune(table, STEP).rows.to_pylist() == cc.prune(session, STEP).rows.to_pylist()


def test_the_batch_report_counts_the_rendered_history() -> None:
    policy = STEP.model_copy(update={"placeholder": "describe", "clear_inputs": True,
                                     "truncate_output": 1_000})  # fmt: skip
    config = cc.CompactionConfig(policy=policy)
    table = cc.Transcript.from_sessions([_session()]).to_arrow()
    report = cc.compact_batch(table, config=config)
    # Before: every output cut to 4 000 characters; after: three of them cleared.
    assert report["tokens_before"][0].as_py() == cc.estimate_messages(table, config).total
    rendered = cc.to_model_messages(_cleared(_session(), policy), policy=policy)
    from ctxcompact.scans.chat import estimate_chat_messages

    assert report["tokens_after_prune"][0].as_py() == estimate_chat_messages(rendered)


def test_a_described_placeholder_needs_the_part_id_column() -> None:
    table = cc.Transcript.from_sessions([_cleared(_session(), STEP)]).to_arrow()
    with pytest.raises(MissingColumnError, match="part_id"):
        cc.estimate_messages(table.drop_columns(["part_id"]), Policy(placeholder="describe"))
    # OpenCode's placeholder needs no id.
    assert cc.estimate_messages(table.drop_columns(["part_id"]), STEP).total > 0


@pytest.mark.parametrize("options", [{"placeholder": "short"}, {"truncate_output": -1},
                                     {"clear_inputs": "sometimes"}])  # fmt: skip
def test_bad_rendering_options_are_config_errors(options: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(options))
    field = next(iter(options))
    with pytest.raises(ConfigError, match=f"policy.json: invalid policy option {field}"):
        Policy.load(path)


def test_the_native_scan_rejects_an_unknown_placeholder() -> None:
    from ctxcompact import _core

    table = cc.Transcript.from_sessions([_session()]).to_arrow()
    with pytest.raises(ConfigError, match="unknown placeholder"):
        _core.estimate_messages(table, placeholder="short")


@pytest.mark.parametrize("make", [MemoryStore, "sqlite"])
def test_recall_gives_back_what_a_placeholder_stands_for(make: Any, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db") if make == "sqlite" else make()
    sid = store.create_session("s")
    for message in _cleared(_session(), STEP).messages:
        store.append_message(sid, message)
    assert store.recall(sid, "p0") == BIG
    assert store.recall(sid, "t1") == "fix the bug"
    with pytest.raises(TranscriptError, match="no part nope in session 's'"):
        store.recall(sid, "nope")
    with pytest.raises(cc.errors.SessionNotFoundError):
        store.recall("other", "p0")


def test_an_unfinished_part_has_nothing_to_recall() -> None:
    store = MemoryStore()
    sid = store.create_session("s")
    running = MessageWithParts.model_validate({
        "info": {"id": "a", "role": "assistant"},
        "parts": [{"id": "p", "type": "tool", "tool": "bash", "state": {"status": "running"}}],
    })  # fmt: skip
    store.append_message(sid, running)
    with pytest.raises(TranscriptError, match="no stored text"):
        store.recall(sid, "p")


def test_the_compactor_sends_the_policys_view() -> None:
    from ctxcompact.live.compactor import Compactor
    from ctxcompact.live.summary import Summarizer

    policy = STEP.model_copy(update={"truncate_output": 100})
    config = cc.CompactionConfig(policy=policy)
    store = MemoryStore()
    sid = store.create_session("s")
    for message in _session().messages:
        store.append_message(sid, message)
    compactor = Compactor(store, Summarizer(config=config), config=config)
    sent = _tool_messages(compactor.model_messages(sid))
    assert all("characters cut" in t for t in sent)
    assert compactor.history_tokens(store.load(sid)) < 4 * 4 * 100 + 200


def test_an_arrow_table_without_part_json_has_no_pins() -> None:
    table = cc.Transcript.from_sessions([_session(pinned=True)]).to_arrow()
    assert isinstance(table, pa.Table)
    bare = table.drop_columns(["part_json"])
    assert cc.prune(bare, STEP).part_ids == ["p2", "p1", "p0"]


def test_only_the_newest_steps_send_their_reasoning() -> None:
    session = _session()
    for i, message in enumerate(session.messages[1:]):
        message.parts.insert(0, Part(id=f"r{i}", type="reasoning", text=f"thought {i}"))
    assert all("reasoning_content" not in m for m in cc.to_model_messages(session))
    policy = Policy(keep_thinking=2)
    sent = cc.to_model_messages(session, policy=policy)
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == [
        None, None, "thought 2", "thought 3"
    ]  # fmt: skip
    from ctxcompact.scans.chat import estimate_chat_messages

    assert cc.estimate_messages(session, policy).total == estimate_chat_messages(sent)
    assert cc.estimate_messages(session, policy).total > cc.estimate_messages(session).total


def test_a_text_protocol_action_names_its_tool_once() -> None:
    """A SWE-agent action's target is its command line ("create x.py"),
    which starts with the tool's name: the placeholder said it twice."""
    from ctxcompact import formats
    from ctxcompact.scans.reference import cleared_placeholder

    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"
    session = formats.read(shared / "swe-agent/tests/test_data/trajectories/ctf/crypto/katy.traj")[
        0
    ]
    policy = Policy.load({"preset": "swe-agent", "placeholder": "describe"})
    cc.mark_pruned(session, cc.prune(session, policy))
    # a text-protocol step's observation is a user turn, its placeholder there
    sent = [m["content"] for m in cc.to_model_messages(session, policy=policy)
            if m["role"] == "user" and m["content"].startswith("[Old tool")]  # fmt: skip
    assert sent and sent[0].startswith("[Old tool result content cleared: file release... returned")
    tools = {p.id: p for m in session.messages for p in m.parts if p.type == "tool"}
    first = tools["katy-m000002-t00"]
    assert sent[0] == cleared_placeholder(
        first.tool or "", json.dumps(first.state.input), first.state.output or "", first.id
    )
