"""Pure-Python reference of the core semantics, written to be read, not to be fast.

The Rust core is checked against this module on random transcripts
(tests/scans/test_differential.py), and the benchmarks use it as the baseline.
It works on part rows as plain dicts (``table.to_pylist()``, columns of
docs/schema.md: ``role``, ``part_type`` and ``status`` as names or their int8
codes), so it shares no code with the Rust path.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxcompact.errors import UnknownValueError

Row = Mapping[str, Any]

CLEARED_TOOL_OUTPUT = "[Old tool result content cleared]"
INTERRUPTED_TOOL = "[Tool execution was interrupted]"
COMPACTION_QUESTION = "What did we do so far?"
#: What one image costs, whatever its URL (not the length of its base64).
IMAGE_TOKENS = 1600


# --- token estimates ------------------------------------------------------------------


def js_length(text: str) -> int:
    """JavaScript's ``text.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def estimate(text: str | None, method: str = "opencode") -> int:
    text = text or ""
    if method == "opencode":
        # Math.max(0, Math.round(length / 4)); Math.round rounds half up.
        return max(0, math.floor(js_length(text) / 4 + 0.5))
    if method == "ceil-bytes":
        return math.ceil(len(text.encode("utf-8")) / 4)
    family, conservative = method.removesuffix("-conservative"), method.endswith("-conservative")
    # A lone surrogate (never in UTF-8) is read as "?", as the facade does.
    return bigram_estimate(text.encode("utf-8", "replace"), family, conservative)


#: The bytes whose runs read their own row of the table (257 + index).
_RUNS = b" \t"


@functools.cache
def _bigram_table(family: str) -> tuple[list[list[int]], int, int, int]:
    """The family's weights as rows (256 previous bytes, the start row, one
    row per run byte), its conservative factor, its digit group weight and
    its punctuation weight, all in 1/65536. A ``ctxbgr2`` table has a 24-byte
    header (factor, digit, punctuation, reserved); a ``ctxbgr1`` table a
    16-byte one and no punctuation weight (0)."""
    from ctxcompact import _core

    raw = _core.estimator_table(family)  # ValueError-free: unknown families raise ConfigError
    factor = int.from_bytes(raw[8:12], "little")
    digit = int.from_bytes(raw[12:16], "little")
    v2 = raw[:8] == b"ctxbgr2\0"
    punct = int.from_bytes(raw[16:20], "little") if v2 else 0
    start = 24 if v2 else 16
    weights = [int.from_bytes(raw[i : i + 2], "little") for i in range(start, len(raw), 2)]
    rows = [weights[r * 256 : (r + 1) * 256] for r in range(257 + len(_RUNS))]
    return rows, factor, digit, punct


def _is_letter(byte: int) -> bool:
    return 65 <= byte <= 90 or 97 <= byte <= 122


def _is_punct(byte: int) -> bool:
    """ASCII punctuation: 0x21-0x7E, not a letter or digit."""
    return 0x21 <= byte <= 0x7E and not _is_letter(byte) and not 48 <= byte <= 57


def bigram_estimate(data: bytes, family: str, conservative: bool = False) -> int:
    """Sum of each byte's weight: the row of its previous byte (the start row
    for the first), or its run's row when the bytes before and after it are
    the same space or tab; plus the digit group weight for each ASCII digit
    that starts a group of three in its run of digits (the 4th, 7th, ...),
    and the punctuation weight for each ASCII letter after ASCII punctuation
    that follows a space or ASCII punctuation (``"/usr``, ``://host``,
    ``().name``; not ``java/lang``); rounded half up from 1/65536 tokens."""
    rows, factor, digit, punct = _bigram_table(family)
    total = 0
    run = 0  # digits in the run of ASCII digits before this byte
    for i, byte in enumerate(data):
        if 48 <= byte <= 57:
            if run and run % 3 == 0:
                total += digit
            run += 1
        else:
            run = 0
        if (
            i >= 2
            and _is_letter(byte)
            and _is_punct(data[i - 1])
            and (data[i - 2] == 32 or _is_punct(data[i - 2]))
        ):
            total += punct
        if i == 0:
            row = 256
        elif byte in _RUNS and data[i - 1] == byte and i + 1 < len(data) and data[i + 1] == byte:
            row = 257 + _RUNS.index(byte)
        else:
            row = data[i - 1]
        total += rows[row][byte]
    if conservative:
        total = total * factor // 65536
    return (total + 32768) // 65536


# --- overflow ---------------------------------------------------------------------------


def is_overflow(
    usage: Mapping[str, Any],
    limits: Mapping[str, int],
    *,
    auto: bool = True,
    output_token_max: int = 32_000,
    reserved: int | str | None = None,
    inclusive: bool = False,
    count_cache_write: bool = False,
    clamp_usable: bool = False,
) -> bool:
    if not auto or limits.get("context", 0) == 0:
        return False
    cache = usage.get("cache") or {}
    count: int = usage["input"] + cache.get("read", 0) + usage["output"]
    if count_cache_write:
        count += cache.get("write", 0)
    output_limit = limits.get("output", 0)
    reserve = min(output_limit, output_token_max) if output_limit else output_token_max
    if limits.get("input", 0):
        headroom = 0
        if reserved == "default":
            headroom = min(20_000, reserve)
        elif isinstance(reserved, int):
            headroom = reserved
        usable = limits["input"] - headroom
    else:
        usable = limits["context"] - reserve
    if clamp_usable:
        usable = max(0, usable)
    return bool(count >= usable if inclusive else count > usable)


# --- grouping rows into sessions and messages ------------------------------------------


@dataclass
class Message:
    id: str
    role: str
    first_row: int
    rows: list[int] = field(default_factory=list)


@dataclass
class SessionRows:
    id: str
    rows: list[int] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)


#: The names of the int8 codes docs/schema.md allows in ``role``, ``part_type``
#: and ``status`` (part type 127: ``other``, a type the core does not know).
CODE_NAMES: dict[str, dict[int, str]] = {
    "role": dict(enumerate(("user", "assistant", "system", "tool"))),
    "part_type": {
        **dict(enumerate(("text", "tool", "compaction", "file", "reasoning", "step-start",
                          "step-finish", "subtask", "snapshot", "patch", "agent", "retry"))),
        127: "other",
    },
    "status": dict(enumerate(("pending", "running", "completed", "error"))),
}  # fmt: skip


def named(rows: Sequence[Row]) -> Sequence[Row]:
    """``rows`` with the int8 codes of ``role``, ``part_type`` and ``status``
    (as ``table.to_pylist()`` gives them) as their names; ``rows`` itself
    when they hold names. Every function here that takes rows reads them so."""
    coded = [c for c in CODE_NAMES if any(isinstance(r.get(c), int) for r in rows)]
    if not coded:
        return rows
    out = []
    for i, row in enumerate(rows):
        row = dict(row)
        for column in coded:
            value = row.get(column)
            if isinstance(value, int):
                if value not in CODE_NAMES[column]:
                    raise UnknownValueError(
                        f"unknown {column} code {value} (row {i})", session_id=row["session_id"],
                        message_id=row.get("message_id"), row=i, column=column,
                    )  # fmt: skip
                row[column] = CODE_NAMES[column][value]
        out.append(row)
    return out


def group(rows: Sequence[Row]) -> list[SessionRows]:
    """Sessions in table order, each with its messages (rows assumed well-formed)."""
    rows = named(rows)
    sessions: list[SessionRows] = []
    for i, row in enumerate(rows):
        if not sessions or sessions[-1].id != row["session_id"]:
            sessions.append(SessionRows(row["session_id"]))
        session = sessions[-1]
        session.rows.append(i)
        if row["message_id"] is None:
            continue
        if not session.messages or session.messages[-1].id != row["message_id"]:
            session.messages.append(Message(row["message_id"], row["role"], i))
        session.messages[-1].rows.append(i)
    return sessions


def _flag(row: Row, name: str) -> bool:
    return bool(row.get(name))


# --- prune ------------------------------------------------------------------------------


@dataclass
class PruneOutcome:
    session_id: str
    total: int
    pruned: int
    rows: list[int]


PATH_KEYS = ("filePath", "file_path", "path", "file", "filename", "target_file", "notebook_path")
COMMAND_KEYS = ("command", "cmd", "code")


def call_target(tool: str | None, input_json: str | None) -> tuple[str, ...] | None:
    """What a call works on: ``("path", p)`` (stale for any tool) or
    ``("command", tool, c)`` (stale for the same tool only)."""
    try:
        args = json.loads(input_json) if input_json else None
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    for keys, kind in ((PATH_KEYS, "path"), (COMMAND_KEYS, "command")):
        for key in keys:
            value = args.get(key)
            if isinstance(value, str) and value:
                return ("path", value) if kind == "path" else ("command", tool or "", value)
    return None


def prune(
    rows: Sequence[Row],
    *,
    protect: int = 40_000,
    minimum: int = 20_000,
    protected_tools: Iterable[str] = ("skill",),
    continue_past_compacted: bool = False,
    method: str = "opencode",
    turn: str = "user",
    protect_turns: int = 2,
    keep_recent: int | None = None,
    keep_recent_per_tool: bool = False,
    clear_at_least: int = 0,
    trigger: int = 0,
    overhead: int = 4,
    supersede: bool = False,
    min_output_tokens: int = 0,
    enabled: bool = True,
    cache_aware: bool = False,
    cache_read: float = 0.1,
    cache_write: float = 1.25,
    expected_calls: int = 0,
    **render: Any,
) -> list[PruneOutcome]:
    """The prune policy (docs/policies.md); the defaults are OpenCode's rule.
    ``render``: the view options (``clear_inputs``, ``truncate_output``,
    ``placeholder``), which only change what a ``trigger`` measures."""
    rows = named(rows)
    protected = set(protected_tools)
    turn_role = "user" if turn == "user" else "assistant"
    visible: dict[str, int] = {}
    if trigger:
        visible = visible_tokens(rows, method=method, overhead=overhead, **render)
    message_tokens: dict[int, int] = {}
    if cache_aware:
        message_tokens = dict(estimate_messages(rows, method=method, overhead=overhead, **render))
    outcomes = []
    for session in group(rows):
        if not enabled or (trigger and visible[session.id] <= trigger):
            outcomes.append(PruneOutcome(session.id, 0, 0, []))
            continue
        turns = 0
        seen: set[tuple[str, ...]] = set()
        counted: list[tuple[int, bool]] = []  # (row, superseded), newest first
        stop = False
        for message in reversed(session.messages):
            if message.role == turn_role:
                turns += 1
            in_protected_turn = turns < protect_turns
            if (
                not in_protected_turn
                and message.role == "assistant"
                and _flag(rows[message.first_row], "summary")
            ):
                break
            for r in reversed(message.rows):
                part = rows[r]
                if part["part_type"] != "tool":
                    continue
                superseded = False
                if supersede:
                    target = call_target(part["tool"], part.get("input"))
                    if target is not None:
                        superseded = target in seen
                        seen.add(target)
                if in_protected_turn or part["status"] != "completed":
                    continue
                if part["tool"] in protected or _part_info(part).get("pinned") is True:
                    continue
                if part.get("compacted_at"):
                    if continue_past_compacted:
                        continue
                    stop = True
                    break
                counted.append((r, superseded))
            if stop:
                break
        total = pruned = window = 0
        selected: list[int] = []
        ranks: dict[str | None, int] = {}
        for r, superseded in counted:
            tokens = estimate(rows[r]["output"], method)
            total += tokens
            small = tokens < min_output_tokens
            if superseded and not small:
                pruned += tokens
                selected.append(r)
                continue
            window += tokens
            key = (rows[r]["tool"] or "") if keep_recent_per_tool else None
            rank = ranks.get(key, 0)
            ranks[key] = rank + 1
            if window > protect and (keep_recent is None or rank >= keep_recent) and not small:
                pruned += tokens
                selected.append(r)
        pays = True
        if cache_aware and selected:
            first = min(selected)
            after = sum(
                message_tokens[m.first_row] for m in session.messages if max(m.rows) >= first
            )
            calls = sum(m.role == "assistant" for m in session.messages)
            remaining = max(calls if expected_calls == 0 else max(expected_calls - calls, 0), 1)
            pays = cache_pays(cache_read, cache_write, pruned, after, remaining)
        if pruned > minimum and pruned >= clear_at_least and pays:
            outcomes.append(PruneOutcome(session.id, total, pruned, selected))
        else:
            outcomes.append(PruneOutcome(session.id, total, 0, []))
    return outcomes


def cache_pays(read: float, write: float, saving: int, after: int, remaining: int) -> bool:
    """The cache-aware gate (docs/policies.md): clearing ``saving`` tokens per
    call, with ``after`` tokens from the first cleared output on, pays over
    ``remaining`` calls when read x saving x remaining > (write - read) x
    (after - saving); the prices are multiples of the input price."""
    rewrite = float(max(after - saving, 0))
    return read * float(saving) * float(remaining) > max(write - read, 0.0) * rewrite


def visible_tokens(
    rows: Sequence[Row], *, method: str, overhead: int, **render: Any
) -> dict[str, int]:
    """Per session, the estimated model input from its pivot on (a trigger's measure)."""
    rows = named(rows)
    tokens = dict(estimate_messages(rows, method=method, overhead=overhead, **render))
    return {
        session.id: sum(tokens[m.first_row] for m in shown)
        for session, shown in zip(group(rows), shown_messages(rows), strict=True)
    }


# --- pivot ------------------------------------------------------------------------------


def pivot_starts(rows: Sequence[Row]) -> list[int]:
    """First row later model calls see, per session."""
    rows = named(rows)
    starts = []
    for session in group(rows):
        start = session.rows[0]
        completed: set[str] = set()
        for message in reversed(session.messages):
            head = rows[message.first_row]
            if (
                message.role == "user"
                and message.id in completed
                and any(rows[r]["part_type"] == "compaction" for r in message.rows)
            ):
                start = message.first_row
                break
            if (
                message.role == "assistant"
                and _flag(head, "summary")
                and _flag(head, "finished")
                and not _flag(head, "error")
                and head.get("parent_id") is not None
            ):
                completed.add(head["parent_id"])
        starts.append(start)
    return starts


def shown_messages(rows: Sequence[Row]) -> list[list[Message]]:
    """Per session, the messages later model calls see: from the pivot on, and
    before it the system messages and those holding a pinned part."""
    rows = named(rows)
    out = []
    for session, start in zip(group(rows), pivot_starts(rows), strict=True):
        out.append([
            m for m in session.messages
            if m.first_row >= start
            or m.role == "system"
            or any(_part_info(rows[r]).get("pinned") is True for r in m.rows)
        ])  # fmt: skip
    return out


# --- message estimates ----------------------------------------------------------------


def _part_info(part: Row) -> dict[str, Any]:
    raw = part.get("part_json")
    return json.loads(raw) if raw else {}


def _observed(part: Row) -> bool:
    """A text-protocol step's tool part: its source keeps the observation's record
    (and is not an OpenHands resolver record)."""
    source = _part_info(part).get("source")
    return (
        isinstance(source, dict)
        and "observation" in source
        and not ("history" in source and "instruction" in source)
    )


def cleared_placeholder(tool: str, input_json: str | None, output: str, part_id: str) -> str:
    """A described placeholder: the tool, its target's first line (80 characters at
    most), the output's size in characters and the part id."""
    target = call_target(tool, input_json)
    call = tool
    if target is not None:
        text = target[-1]
        line = text.split("\n")[0].removesuffix("\r")[:80]
        shown = line if line == text else line + "..."
        # a command line naming its tool ("create x.py") is shown once
        call = shown if shown.startswith(tool + " ") else f"{tool} {shown}"
    return (
        f"[Old tool result content cleared: {call} returned {len(output)} characters; "
        f"call the tool again, or recall part {part_id}, to see it]"
    )


def truncate_output(output: str, budget: int) -> str:
    """An output of more than 4 x budget characters: its first and last 2 x budget
    characters around a marker saying how many were cut (unless the cut is no
    longer than the marker)."""
    keep = 2 * budget
    if len(output) <= 2 * keep:
        return output
    cut = len(output) - 2 * keep
    marker = f"\n\n[... {cut} characters cut ...]\n\n"
    if cut <= len(marker):  # the marker would cost as much as what it replaces
        return output
    return output[:keep] + marker + output[len(output) - keep :]


def _tool_result(
    part: Row, *, placeholder: str = "opencode", truncate_output_at: int | None = None
) -> str:
    if part.get("status") not in ("completed", "error"):
        return INTERRUPTED_TOOL
    output = part.get("output") or ""
    if part.get("compacted_at"):
        if placeholder == "opencode":
            return CLEARED_TOOL_OUTPUT
        return cleared_placeholder(part.get("tool") or "", part.get("input"), output,
                                   part.get("part_id") or "")  # fmt: skip
    if truncate_output_at is not None and _part_info(part).get("pinned") is not True:
        return truncate_output(output, truncate_output_at)
    return output


@dataclass(frozen=True)
class Sending:
    """How a stored message is sent (``model_messages``, ``chat_messages``):
    ``clear_inputs``, ``truncate_output``, ``placeholder`` as in a Policy;
    ``thinking``: the message sends its reasoning."""

    clear_inputs: bool = False
    truncate_output: int | None = None
    placeholder: str = "opencode"
    thinking: bool = False

    def result(self, part: Row) -> str:
        """What a tool part's result is sent as."""
        return _tool_result(part, placeholder=self.placeholder,
                            truncate_output_at=self.truncate_output)  # fmt: skip

    def arguments(self, part: Row) -> str:
        """What a tool call's arguments are sent as (``{}`` once cleared)."""
        cleared = self.clear_inputs and bool(part.get("compacted_at"))
        return "{}" if cleared else part.get("input") or "{}"


def model_messages(
    rows: Sequence[Row], message: Message, how: Sending
) -> list[tuple[str, list[str], int]]:
    """What the model is sent for one stored message: (content text, tool call
    texts, images) per model message, as ``to_model_messages`` builds it."""
    rows = named(rows)
    parts = [rows[r] for r in message.rows]

    def texts(check_ignored: bool) -> list[str]:
        return [
            p["output"]
            for p in parts
            if p["part_type"] == "text"
            and p.get("output")
            and not (check_ignored and _part_info(p).get("ignored") is True)
        ]

    if message.role == "assistant":
        tools = [p for p in parts if p["part_type"] == "tool"]
        # a text-protocol step: its command is in the text, its result a user message
        observed = [p for p in tools if _observed(p)]
        tools = [p for p in tools if not _observed(p)]
        content = "\n\n".join(texts(True))
        said = [how.result(p) for p in observed]
        shown: list[tuple[str, list[str], int]] = [(r, [], 0) for r in said if r]  # not empty
        if not content and not tools:
            return shown
        reasoning = "\n\n".join(
            p["output"] for p in parts if p["part_type"] == "reasoning" and p.get("output")
        )
        # sent as reasoning_content: estimated on its own, like a call's text
        calls_head = [reasoning] if how.thinking and reasoning else []
        calls = [*calls_head, *(t for p in tools for t in (p.get("tool") or "", how.arguments(p)))]
        results = [how.result(p) for p in tools]
        return [(content, calls, 0), *((r, [], 0) for r in results), *shown]
    if message.role == "system":
        content = "\n\n".join(texts(True))
        return [(content, [], 0)] if content else []
    blocks: list[str] = []
    images = 0
    for p in parts:
        kind = p["part_type"]
        if kind == "text" and p.get("output") and _part_info(p).get("ignored") is not True:
            blocks.append(p["output"])
        elif kind == "compaction" and _part_info(p).get("ignored") is not True:
            # a marker a hook cancelled is kept, ignored, and never sent
            blocks.append(COMPACTION_QUESTION)
        elif kind == "file":
            info = _part_info(p)
            mime, url = info.get("mime"), info.get("url")
            if (mime or "").startswith("image/") and url:
                images += 1
            else:
                blocks.append(f"[file: {info.get('filename') or url or 'file'} ({mime})]")
    if not blocks and not images:
        return []
    return [("\n".join(blocks) if images else "\n\n".join(blocks), [], images)]


def chat_messages(rows: Sequence[Row], message: Message, how: Sending) -> list[dict[str, Any]]:
    """The OpenAI chat messages one stored message is sent as (what
    ``to_model_messages`` gives for it): the message itself, each call's
    ``tool`` result, each text-protocol step's non-empty result as a user turn."""
    rows = named(rows)
    parts = [rows[r] for r in message.rows]

    def sent(p: Row) -> bool:  # a text part every role sends
        return bool(p["part_type"] == "text" and p.get("output")
                    and _part_info(p).get("ignored") is not True)  # fmt: skip

    if message.role == "assistant":
        tools = [p for p in parts if p["part_type"] == "tool"]
        calls = [p for p in tools if not _observed(p)]
        content = "\n\n".join(p["output"] for p in parts if sent(p)) or None
        out: dict[str, Any] = {"role": "assistant", "content": content}
        reasoning = [p["output"] for p in parts
                     if p["part_type"] == "reasoning" and p.get("output")]  # fmt: skip
        if how.thinking and reasoning:
            out["reasoning_content"] = "\n\n".join(reasoning)

        def call_id(p: Row) -> str:
            return _part_info(p).get("callID") or p.get("part_id") or ""

        if calls:
            out["tool_calls"] = [
                {"id": call_id(p), "type": "function", "function": {
                    "name": p.get("tool") or "",
                    "arguments": how.arguments(p)}}
                for p in calls
            ]  # fmt: skip
        shown = [] if out["content"] is None and not calls else [out]
        shown += [{"role": "tool", "tool_call_id": call_id(p), "content": how.result(p)}
                  for p in calls]  # fmt: skip
        return shown + [{"role": "user", "content": r}
                        for p in tools if _observed(p) and (r := how.result(p))]  # fmt: skip
    if message.role == "system":
        content = "\n\n".join(p["output"] for p in parts if sent(p))
        return [{"role": "system", "content": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for p in parts:
        kind = p["part_type"]
        if sent(p):
            blocks.append({"type": "text", "text": p["output"]})
        elif kind == "compaction" and _part_info(p).get("ignored") is not True:
            blocks.append({"type": "text", "text": COMPACTION_QUESTION})
        elif kind == "file":
            info = _part_info(p)
            mime, url = info.get("mime"), info.get("url")
            if (mime or "").startswith("image/") and url:
                blocks.append({"type": "image_url", "image_url": {"url": url}})
            else:
                name = info.get("filename") or url or "file"
                blocks.append({"type": "text", "text": f"[file: {name} ({mime})]"})
    if not blocks:
        return []
    if all(b["type"] == "text" for b in blocks):
        return [{"role": "user", "content": "\n\n".join(b["text"] for b in blocks)}]
    return [{"role": "user", "content": blocks}]


def render_chat(rows: Sequence[Row], *, keep_thinking: int = 0, **render: Any) -> list[Any]:
    """``chat_messages`` of every message, in table order; the newest
    ``keep_thinking`` assistant messages of each session send their reasoning."""
    rows = named(rows)
    out = []
    for session in group(rows):
        steps = [m for m in session.messages if m.role == "assistant"]
        recent = (
            {id(m) for m in steps[max(0, len(steps) - keep_thinking) :]} if keep_thinking else set()
        )
        for message in session.messages:
            how = Sending(thinking=id(message) in recent, **render)
            out.append(chat_messages(rows, message, how))
    return out


def estimate_messages(
    rows: Sequence[Row], *, method: str = "opencode", overhead: int = 4, **render: Any
) -> list[tuple[int, int]]:
    """(first row, tokens) of every message, in table order: each model message it
    becomes costs ``overhead`` + its content + its tool calls' names and arguments.
    ``render``: ``clear_inputs``, ``truncate_output``, ``placeholder`` as in a Policy."""
    rows = named(rows)
    keep = render.pop("keep_thinking", 0)
    out = []
    for session in group(rows):
        steps = [m for m in session.messages if m.role == "assistant"]
        recent = {id(m) for m in steps[max(0, len(steps) - keep) :]} if keep else set()
        for message in session.messages:
            sent = model_messages(rows, message, Sending(thinking=id(message) in recent, **render))
            tokens = sum(
                overhead
                + estimate(content, method)
                + sum(estimate(t, method) for t in calls)
                + images * IMAGE_TOKENS
                for content, calls, images in sent
            )
            out.append((message.first_row, tokens))
    return out


# --- calibration from recorded usage (rust/src/calibrate.rs) --------------------------


def _median(values: list[float]) -> float:
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    at = q * (len(values) - 1)
    lo, hi = math.floor(at), math.ceil(at)
    return values[lo] + (values[hi] - values[lo]) * (at - lo)


def calibration_fit(
    estimated: Sequence[int], reported: Sequence[int]
) -> tuple[float, float, int, float, float, float, float] | None:
    """``reported ~ slope x estimate + intercept`` by Theil-Sen: the median
    slope over pairs of calls whose estimates differ by more than 2%, kept in
    [0.25, 4] (slope 1 without such pairs), then the median of ``reported -
    slope x estimate``; and the relative error ``|ceil(slope x e + intercept)
    - r| / r`` per call, its median and 95th percentile before (slope 1,
    intercept 0) and after. Calls with 0 on either side are left out."""
    points = [(e, r) for e, r in zip(estimated, reported, strict=True) if e > 0 and r > 0]
    if not points:
        return None
    slopes = [(r2 - r1) / (e2 - e1) for i, (e1, r1) in enumerate(points)
              for e2, r2 in points[i + 1:] if abs(e2 - e1) > 0.02 * max(e1, e2)]  # fmt: skip
    slope = min(max(_median(slopes), 0.25), 4.0) if slopes else 1.0
    intercept = _median([r - slope * e for e, r in points])

    def residual(s: float, b: float) -> tuple[float, float]:
        errors = [abs(max(0, math.ceil(s * e + b)) - r) / r for e, r in points]
        return _quantile(errors, 0.5), _quantile(errors, 0.95)

    return (slope, intercept, len(points), *residual(1.0, 0.0), *residual(slope, intercept))


# --- sessions to part rows ------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def part_row(part: Mapping[str, Any]) -> dict[str, Any]:
    """Scan columns of one part (an export's dict), and the rest of it as JSON."""
    rest = dict(part)
    row: dict[str, Any] = {"part_id": rest.pop("id"), "part_type": rest.pop("type")}
    kind = row["part_type"]
    if kind in ("text", "reasoning") and isinstance(rest.get("text"), str):
        row["output"] = rest.pop("text")
    if kind == "compaction" and isinstance(rest.get("auto"), bool):
        row["auto"] = rest.pop("auto")
    if kind == "tool" and isinstance(rest.get("tool"), str):
        row["tool"] = rest.pop("tool")
    state = rest.get("state")
    if kind == "tool" and isinstance(state, dict):
        state = rest["state"] = dict(state)
        row["status"] = state.pop("status", None)
        if "input" in state and state["input"] is not None:
            row["input"] = _dumps(state.pop("input"))
        # The model sees the output of a completed tool and the error of a failed one.
        field = "output" if row["status"] == "completed" else "error"
        if isinstance(state.get(field), str):
            row["output"] = state.pop(field)
        time = state.get("time")
        if isinstance(time, dict) and time.get("compacted") is not None:
            state["time"] = {k: v for k, v in time.items() if k != "compacted"}
            row["compacted_at"] = time["compacted"]
    row["part_json"] = _dumps(rest)
    return row


def session_rows(export: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The part rows (docs/schema.md, without the derived ``output_utf16`` and
    ``tool_target``; an absent value left out) of one OpenCode session export:
    one row per part, one for a message without parts, one for a session
    without messages; ``session_json`` on the session's first row and
    ``message_json`` on each message's. What ``sessions_to_table`` makes in
    the core (``ingest/opencode.rs``)."""
    base: dict[str, Any] = {"session_id": export["info"]["id"],
                            "session_json": _dumps(export["info"])}  # fmt: skip
    rows: list[dict[str, Any]] = []
    if not export.get("messages"):
        rows.append(base)
    for message in export.get("messages", []):
        info = message["info"]
        head = {
            **base,
            "message_id": info["id"],
            "role": info["role"],
            "parent_id": info.get("parentID"),
            "summary": info.get("summary") is True,
            "finished": info.get("finish") is not None,
            "error": info.get("error") is not None,
            "message_json": _dumps(info),
        }
        parts = message.get("parts", [])
        if not parts:
            rows.append(head)
        for i, part in enumerate(parts):
            first = head if i == 0 else {k: v for k, v in head.items()
                                         if k not in ("session_json", "message_json")}  # fmt: skip
            rows.append({**first, **part_row(part)})
        base = {"session_id": export["info"]["id"]}  # session_json only on the first row
    return rows
