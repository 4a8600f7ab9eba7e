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
from ctxcompact.scans.chat import result_blocks, use_blocks
from ctxcompact.scans.content import IMAGE_BLOCKS, content_text, split_images
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


def _note(cid: str, content: Any) -> str:
    """The text of an orphaned result kept as a note: its call id, then its text."""
    return f"[orphaned result of tool call {cid}]\n{content_text(split_images(content)[0])}"


def _note_content(cid: str, content: Any) -> str | list[Any]:
    """An orphaned result's ``content`` as a note: its text under its call id,
    and its images (if any) after it as they were."""
    images = [b for b in content if isinstance(b, Mapping) and b.get("type") in IMAGE_BLOCKS] if (
        isinstance(content, (list, tuple))) else []  # fmt: skip
    if not images:
        return _note(cid, content)
    return [{"type": "text", "text": _note(cid, content)}, *images]


def _made(message: Mapping[str, Any]) -> list[str]:
    """The ids of the calls ``message`` makes: its ``tool_calls``, then its
    Anthropic ``tool_use`` blocks (an id it already makes in ``tool_calls``
    is that same call)."""
    ids = [str(c.get("id")) for c in message.get("tool_calls") or []]
    return ids + [cid for cid in use_blocks(message) if cid not in ids]


def repair_chat_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], RepairReport]:
    """OpenAI chat messages with every call directly followed by exactly its
    results. A call is made by a ``tool_calls`` entry or an Anthropic
    ``tool_use`` block, and answered by a later ``tool`` message or
    ``tool_result`` block of its id, whichever shape each side has (the rule
    ``check_pairs`` applies). A ``tool`` message is moved right after its
    call; a ``tool_result`` block stays in its turn (renamed with its call's
    duplicate id). An orphaned result (no earlier call of its id) is kept as a
    user note holding its text: a ``tool`` message as a user message, a
    ``tool_result`` block as a text block in its turn. A call nothing answers
    gets an interrupted result: a ``tool`` message after a ``tool_calls``
    entry, a ``tool_result`` block in a user turn right after a ``tool_use``
    block."""
    report = RepairReport()
    seen_ids: dict[str, int] = {}
    renamed: dict[int, dict[str, str]] = {}  # assistant index -> old id -> new id
    calls: dict[str, int] = {}  # call id -> index of the assistant message
    for i, m in enumerate(messages):
        for cid in _made(m):
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
    # turn), the blocks whose call was renamed (message -> block -> new id),
    # and the orphaned blocks (message -> block -> call id)
    in_blocks: set[str] = set()
    block_ids: dict[int, dict[int, str]] = {}
    orphan_blocks: dict[int, dict[int, str]] = {}
    for i, m in enumerate(messages):
        for old, new in renamed.get(i, {}).items():
            latest_rename[old] = new
        for j, cid in result_blocks(m):
            new = latest_rename.get(cid, cid)
            if new in calls and calls[new] < i:
                in_blocks.add(new)
                if new != cid:
                    block_ids.setdefault(i, {})[j] = new
            else:
                orphan_blocks.setdefault(i, {})[j] = cid
        if m.get("role") == "tool":
            cid = str(m.get("tool_call_id"))
            cid = latest_rename.get(cid, cid)
            if cid in calls and calls[cid] < i:
                results.setdefault(cid, []).append((i, {**m, "tool_call_id": cid}))
                owner_of_result[i] = cid
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if i in owner_of_result:
                continue  # placed after its call below
            cid = str(m.get("tool_call_id"))
            report.changes.append(RepairChange("orphan-result", i, cid,
                                               "no earlier call; kept as a user note"))  # fmt: skip
            out.append({"role": "user", "content": _note_content(cid, m.get("content"))})
            continue
        entry = dict(m)
        if i in block_ids or i in orphan_blocks or i in renamed:
            names, orphans = renamed.get(i, {}), orphan_blocks.get(i, {})
            content: list[Any] = []
            for j, b in enumerate(m["content"] if isinstance(m.get("content"), (list, tuple))
                                  else ()):  # fmt: skip
                if j in orphans:
                    report.changes.append(RepairChange(
                        "orphan-result", i, orphans[j],
                        f"block {j}: no earlier call; kept as a note in its turn"))  # fmt: skip
                    note = _note_content(orphans[j], b.get("content"))
                    content += [{"type": "text", "text": note}] if isinstance(note, str) else note
                elif j in block_ids.get(i, {}):
                    content.append({**b, "tool_use_id": block_ids[i][j]})
                elif isinstance(b, Mapping) and b.get("type") == "tool_use" and str(
                        b.get("id")) in names:  # fmt: skip
                    content.append({**b, "id": names[str(b.get("id"))]})
                else:
                    content.append(b)
            if isinstance(m.get("content"), (list, tuple)):
                entry["content"] = content
        if i in renamed and m.get("tool_calls"):
            entry["tool_calls"] = [
                {**c, "id": renamed[i].get(str(c.get("id")), c.get("id"))} for c in m["tool_calls"]
            ]
        out.append(entry)
        expected = i + 1
        in_calls = {str(c.get("id")) for c in entry.get("tool_calls") or []}
        missing_blocks: list[str] = []
        for cid in _made(entry):
            found = results.get(cid)
            if not found and cid in in_blocks:
                continue  # answered by a tool_result block of a later turn
            if not found and cid not in in_calls:
                missing_blocks.append(cid)  # a tool_use block: answered in a user turn
                continue
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
        if missing_blocks:  # the API needs each tool_use answered in the next user turn
            report.changes += [RepairChange("missing-result", i, cid,
                                            "added an interrupted tool_result block")
                               for cid in missing_blocks]  # fmt: skip
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": cid, "content": INTERRUPTED_TOOL}
                for cid in missing_blocks]})  # fmt: skip
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
            text = _note(cid, source.get("content"))
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
