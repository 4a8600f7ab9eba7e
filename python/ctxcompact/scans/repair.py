"""Repair tool call / result pairing so a history is valid model input again.

Every change is reported; nothing is silently dropped: an orphaned result
becomes a user note that keeps its text, a call without a result gets the
protocol's interrupted-tool result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxcompact.models import MessageWithParts, Part, Session, UserMessage
from ctxcompact.scans.chat import answered_calls, result_blocks, use_blocks
from ctxcompact.scans.view import INTERRUPTED_TOOL

ChangeKind = Literal["moved-result", "orphan-result", "missing-result", "duplicate-call-id"]


@dataclass(frozen=True)
class RepairChange:
    kind: ChangeKind
    #: Index of the message in the input (or the message id for sessions).
    where: int | str
    call_id: str
    detail: str


@dataclass
class RepairReport:
    changes: list[RepairChange] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changes)

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind == kind)


def repair_chat_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], RepairReport]:
    """OpenAI chat messages with every call directly followed by exactly its
    results. A call a later turn answers with a ``tool_result`` block (an
    Anthropic turn, a LangChain ``HumanMessage`` of blocks) is answered: the
    block stays in its turn (renamed with its call's duplicate id). An
    Anthropic turn's ``tool_use`` block nothing answers gets an interrupted
    ``tool_result`` block in a user turn right after it."""
    report = RepairReport()
    seen_ids: dict[str, int] = {}
    renamed: dict[int, dict[str, str]] = {}  # assistant index -> old id -> new id
    calls: dict[str, int] = {}  # call id -> index of the assistant message
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            cid = str(call.get("id"))
            if cid in seen_ids:
                seen_ids[cid] += 1
                new = f"{cid}-dup{seen_ids[cid]}"
                renamed.setdefault(i, {})[cid] = new
                report.changes.append(
                    RepairChange("duplicate-call-id", i, cid, f"renamed to {new}")
                )
                cid = new
            else:
                seen_ids[cid] = 0
            calls[cid] = i
    results: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    owner_of_result: dict[int, str] = {}
    latest_rename: dict[str, str] = {}
    # calls a later turn's tool_result block answers (the block stays in its
    # turn), and the blocks whose call was renamed: message -> block -> new id
    in_blocks: set[str] = set()
    block_ids: dict[int, dict[int, str]] = {}
    for i, m in enumerate(messages):
        for old, new in renamed.get(i, {}).items():
            latest_rename[old] = new
        for j, cid in result_blocks(m):
            new = latest_rename.get(cid, cid)
            if new in calls and calls[new] < i:
                in_blocks.add(new)
                if new != cid:
                    block_ids.setdefault(i, {})[j] = new
        if m.get("role") == "tool":
            cid = str(m.get("tool_call_id"))
            cid = latest_rename.get(cid, cid)
            if cid in calls and calls[cid] < i:
                results.setdefault(cid, []).append((i, {**m, "tool_call_id": cid}))
                owner_of_result[i] = cid
    # an Anthropic turn's tool_use blocks are answered by any result of their id
    answered = {cid for m in messages for cid in answered_calls(m)}
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if i in owner_of_result:
                continue  # placed after its call below
            cid = str(m.get("tool_call_id"))
            report.changes.append(RepairChange("orphan-result", i, cid,
                                               "no earlier call; kept as a user note"))  # fmt: skip
            note = f"[orphaned result of tool call {cid}]\n{m.get('content') or ''}"
            out.append({"role": "user", "content": note})
            continue
        entry = dict(m)
        if i in block_ids:
            entry["content"] = [{**b, "tool_use_id": block_ids[i][j]} if j in block_ids[i] else b
                                for j, b in enumerate(m["content"])]  # fmt: skip
        if i in renamed:
            entry["tool_calls"] = [
                {**c, "id": renamed[i].get(str(c.get("id")), c.get("id"))} for c in m["tool_calls"]
            ]
        out.append(entry)
        expected = i + 1
        for call in entry.get("tool_calls") or []:
            cid = str(call.get("id"))
            found = results.get(cid)
            if not found and cid in in_blocks:
                continue  # answered by a tool_result block of a later turn
            if not found:
                report.changes.append(RepairChange("missing-result", i, cid,
                                                   "added an interrupted-tool result"))  # fmt: skip
                out.append({"role": "tool", "tool_call_id": cid, "content": INTERRUPTED_TOOL})
                continue
            for src, result in found:
                if src != expected:
                    report.changes.append(RepairChange("moved-result", src, cid,
                                                       f"moved after message {i}"))  # fmt: skip
                expected = src + 1
                out.append(result)
        missing = [cid for cid in use_blocks(m) if cid not in answered and cid not in calls]
        if missing:  # the API needs each tool_use answered in the next user turn
            report.changes += [RepairChange("missing-result", i, cid, "added an interrupted "
                                            "tool_result block") for cid in missing]  # fmt: skip
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": cid, "content": INTERRUPTED_TOOL}
                for cid in missing]})  # fmt: skip
    return out, report


def repair_tool_pairs(session: Session) -> tuple[Session, RepairReport]:
    """The session with orphaned results turned into user notes; calls without a
    result are reported (they already reach the model as interrupted)."""
    report = RepairReport()
    messages: list[MessageWithParts] = []
    for m in session.messages:
        source = (m.info.model_extra or {}).get("source") or {}
        if isinstance(m.info, UserMessage) and source.get("role") == "tool":
            cid = str(source.get("tool_call_id"))
            report.changes.append(RepairChange("orphan-result", m.id, cid,
                                               "no call; kept as a user note"))  # fmt: skip
            text = f"[orphaned result of tool call {cid}]\n{source.get('content') or ''}"
            messages.append(MessageWithParts(
                info=UserMessage(id=m.id, sessionID=m.info.sessionID),
                parts=[Part(id=f"{m.id}-note", type="text", text=text)],
            ))  # fmt: skip
            continue
        for p in m.parts:
            if (
                p.type == "tool"
                and p.state is not None
                and p.state.status in ("pending", "running")
            ):
                report.changes.append(RepairChange("missing-result", m.id, str(p.callID),
                                                   "no result: sent as interrupted"))  # fmt: skip
        messages.append(m)
    return session.model_copy(update={"messages": messages}), report


__all__ = ["RepairChange", "RepairReport", "repair_chat_messages", "repair_tool_pairs"]
