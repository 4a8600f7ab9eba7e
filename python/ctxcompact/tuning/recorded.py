"""What a stored run recorded of its own usage, for the replay to stand beside.

Where a run records the provider's usage, the replay reports it next to its
baseline (the run without compaction, re-estimated), so the gap between the
two is in view rather than assumed away:

- per call: an assistant message's ``tokens`` (OpenCode; Claude Code's and
  Anthropic's ``usage`` with ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``; OpenHands' ``usage`` with its cached
  tokens), counted once per API call (the lines of one Claude Code call repeat
  its usage). Its prompt tokens are input plus cache reads and writes
  (``live.calibration.prompt_tokens``); Claude Code's 1-hour cache writes are
  its record's ``usage.cache_creation.ephemeral_1h_input_tokens``.
- per run: SWE-agent's ``info.model_stats`` (``tokens_sent``, ``api_calls``),
  which records no cache reads or writes.

A run that records nothing gives ``None`` (null), never 0; a usage of all
zeros (a runtime that did not fill it) is no record either.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

import ctxcompact.formats.source as sources
from ctxcompact.live.calibration import prompt_tokens
from ctxcompact.models import AssistantMessage, Session
from ctxcompact.transcript.schema import typed_columns
from ctxcompact.tuning.engine import Facts, message_facts, plain_strings

#: What ``recorded_usage`` returns per session, in order (null: not recorded).
RECORDED_SCHEMA = pa.schema([
    ("session_id", pa.string()),
    *typed_columns(pa.int64(), "recorded_prompt_tokens", "recorded_calls",
                   "recorded_cached_tokens", "recorded_written_tokens",
                   "recorded_written_1h_tokens"),
])  # fmt: skip

RECORDED_KEYS = tuple(n for n in RECORDED_SCHEMA.names if n != "session_id")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _written_1h(info: AssistantMessage) -> int | None:
    """Claude Code's 1-hour cache writes of a call (``None``: not split)."""
    record = sources.source_of(info, claude_code=True)
    if not sources.claude_code_record(record):
        return None
    usage = (record.get("message") or {}).get("usage") if isinstance(record, dict) else None
    split = usage.get("cache_creation") if isinstance(usage, dict) else None
    return _int(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else None


def _swe_agent_stats(session: Session) -> dict[str, Any] | None:
    info = sources.session_record(session.info, "swe-agent").get("info")
    stats = info.get("model_stats") if isinstance(info, dict) else None
    if not isinstance(stats, dict):
        return None
    sent, calls = _int(stats.get("tokens_sent")), _int(stats.get("api_calls"))
    if not sent or calls is None:  # no record, or one of nothing sent
        return None
    return {"recorded_prompt_tokens": sent, "recorded_calls": calls}


def recorded_usage(session: Session) -> dict[str, Any]:
    """The usage ``session`` recorded (``RECORDED_SCHEMA``; ``None``: none)."""
    out: dict[str, Any] = {"session_id": session.id, **dict.fromkeys(RECORDED_KEYS)}
    seen: set[str] = set()
    prompt = calls = cached = written = 0
    hour: int | None = None
    for message in session.messages:
        info = message.info
        if not isinstance(info, AssistantMessage) or info.tokens is None:
            continue
        call = sources.claude_code_call_id(sources.source_of(info, claude_code=True))
        if call is not None:
            if call in seen:  # another line of a call already counted
                continue
            seen.add(call)
        sent = prompt_tokens(info.tokens)
        if not sent and not info.tokens.output:  # all zeros: not filled in
            continue
        prompt, calls = prompt + sent, calls + 1
        cached += info.tokens.cache.read
        written += info.tokens.cache.write
        if (one_hour := _written_1h(info)) is not None:
            hour = (hour or 0) + one_hour
    if calls:
        out |= {"recorded_prompt_tokens": prompt, "recorded_calls": calls,
                "recorded_cached_tokens": cached, "recorded_written_tokens": written,
                "recorded_written_1h_tokens": hour}  # fmt: skip
    elif (stats := _swe_agent_stats(session)) is not None:
        out |= stats
    return out


def recorded_lifetimes(recorded: list[dict[str, Any]]) -> dict[str, float]:
    """Per run of ``recorded`` (``recorded_usage``) that wrote most of its
    cache writes to Anthropic's 1-hour cache (Claude Code's
    ``ephemeral_1h_input_tokens``): 3,600 s, the lifetime its entries had
    (``tuning.cache.price_calls``); the others are not listed (the 5-minute
    default)."""
    out: dict[str, float] = {}
    for r in recorded:
        hour, written = r.get("recorded_written_1h_tokens"), r.get("recorded_written_tokens")
        if hour and written and 2 * hour >= written:
            out[r["session_id"]] = 3600.0
    return out


def recorded_usage_table(table: pa.Table, facts: Facts | None = None) -> list[dict[str, Any]]:
    """``recorded_usage`` of every session of a part-row table that holds a
    message, in table order, read from the session and assistant message
    records alone (the usage is on the message: no part is built).
    ``facts``: ``tuning.engine.message_facts(table)``, the message records
    already read (each ``message_json`` is parsed once)."""
    if "message_json" not in table.column_names:
        return []
    facts = facts if facts is not None else message_facts(table)
    starts = facts.starts
    if not starts:
        return []
    index = pa.array(starts, pa.int64())
    sids = plain_strings(table.column("session_id")).take(index).to_pylist()
    roles = plain_strings(table.column("role")).take(index).to_pylist()
    heads = (table.column("session_json").take(index).to_pylist()
             if "session_json" in table.column_names else [None] * len(starts))  # fmt: skip
    sessions: list[dict[str, Any]] = []
    for sid, role, info, head in zip(sids, roles, facts.infos, heads, strict=True):
        if not sessions or sessions[-1]["info"]["id"] != sid:
            session_info = json.loads(head) if head else {}
            sessions.append({"info": {**session_info, "id": sid}, "messages": []})
        if role in ("assistant", 1) and info is not None:
            sessions[-1]["messages"].append({"info": info, "parts": []})
    return [recorded_usage(Session.model_validate(s)) for s in sessions]


def recorded_totals(rows: list[dict[str, Any]], baseline: dict[str, int]) -> dict[str, Any]:
    """The recorded usage summed over the sessions that recorded it (each
    total ``None`` when none did), how many did (``recorded_sessions``), and
    the gap: the baseline's prompt tokens less the recorded ones, over those
    sessions (``baseline``: session id -> its baseline prompt tokens)."""
    recorded = [r for r in rows if r["recorded_prompt_tokens"] is not None]
    totals: dict[str, Any] = {}
    for key in RECORDED_KEYS:
        values = [r[key] for r in recorded if r[key] is not None]
        totals[key] = sum(values) if values else None
    gap = sum(baseline.get(r["session_id"], 0) - r["recorded_prompt_tokens"] for r in recorded)
    sent = totals["recorded_prompt_tokens"]
    return {"recorded_sessions": len(recorded), **totals,
            "prompt_gap": gap if recorded else None,
            "prompt_gap_ratio": gap / sent if sent else None}  # fmt: skip


__all__ = [
    "RECORDED_KEYS",
    "RECORDED_SCHEMA",
    "recorded_lifetimes",
    "recorded_totals",
    "recorded_usage",
    "recorded_usage_table",
]
