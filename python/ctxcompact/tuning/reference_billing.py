"""The cache billing rules in plain Python: the reference the core's
``price_calls`` and ``cache_breaks`` (``billing.rs``) are tested against,
call for call and to the last bit (``tests/tuning/test_billing_differential.py``). ``tuning.cache``
documents the rule and prices replays through the core; nothing else calls
this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ctxcompact.tuning.cache import BREAK_MIN_TOKENS, BREAK_SHARE, CacheRule, Sheet


def bill_prompt(prompt: int, cached: int, since_previous_s: float | None, rule: CacheRule,
                cache: str = "5m", ttl_s: float | None = None) -> tuple[int, int, int]:  # fmt: skip
    """A prompt of ``prompt`` tokens whose first ``cached`` tokens equal the
    previous call's prompt prefix, sent ``since_previous_s`` after it: the
    tokens billed as (read from the cache, written to it, sent at the input
    price) under ``rule`` (``ttl_s``: the cache's lifetime, default the rule's)."""
    if cache == "off" or rule.provider == "none" or prompt < rule.min_tokens:
        return 0, 0, prompt
    ttl = ttl_s if ttl_s is not None else rule.ttl_1h_s if cache == "1h" else rule.ttl_s
    alive = since_previous_s is None or since_previous_s <= ttl
    read = cached if alive and cached >= rule.min_tokens else 0
    read -= read % rule.step
    rest = prompt - read
    return (read, rest, 0) if rule.writes else (read, 0, rest)


def price_calls(calls: pa.Table, sheet: Sheet, ttls: list[float | None]) -> dict[str, Any]:
    """``tuning.cache.price_calls``' figures, call by call (``ttls``: each
    call's cache lifetime, ``None`` the sheet's default)."""
    price, rule = sheet.row.price, sheet.row.cache
    write = sheet.write_price()
    totals = dict.fromkeys(("cached_tokens", "written_tokens", "input_tokens",
                            "baseline_cached_tokens", "baseline_written_tokens",
                            "baseline_input_tokens"), 0)  # fmt: skip

    def add(prefix: str, read: int, written: int, fresh: int) -> float:
        totals[f"{prefix}cached_tokens"] += read
        totals[f"{prefix}written_tokens"] += written
        totals[f"{prefix}input_tokens"] += fresh
        return read * price.cached_input + written * write + fresh * price.input

    cost = baseline = 0.0
    gaps = calls.column("since_previous_s").to_pylist()
    columns = [calls.column(n).to_pylist() for n in (
        "prompt_tokens", "cached_tokens", "baseline_prompt_tokens", "baseline_cached_tokens",
        "output_tokens", "summary_input_tokens", "summary_output_tokens")]  # fmt: skip
    for gap, ttl, (prompt, cached, b_prompt, b_cached, output, s_in, s_out) in zip(
        gaps, ttls, zip(*columns, strict=True), strict=True
    ):
        cost += add("", *bill_prompt(prompt, cached, gap, rule, sheet.cache, ttl))
        # A model summary is a call of its own, on the history it replaces.
        cost += add("", *bill_prompt(s_in, 0, None, rule, sheet.cache))
        cost += (output + s_out) * price.output
        baseline += add("baseline_", *bill_prompt(b_prompt, b_cached, gap, rule, sheet.cache, ttl))
        baseline += output * price.output
    return {"cost": cost / 1e6, "baseline_cost": baseline / 1e6, **totals}


def cache_breaks(calls: pa.Table, recorded: Mapping[tuple[str, str], tuple[int, int]],
                 lifetimes: Mapping[str, float], prefixes: Mapping[str, int],
                 ttl_s: float = 300.0) -> tuple[pa.Table, dict[str, dict[str, Any]]]:  # fmt: skip
    """``tuning.cache.cache_breaks``' result, call by call: the calls with
    the recorded cache breaks applied, and each reading run's breaks."""
    reading = {sid for (sid, _), (_, read) in recorded.items() if read > 0}
    out: dict[str, dict[str, Any]] = {
        sid: {"cache_breaks": 0, "cache_break_tokens": 0, "cache_break_calls": []}
        for sid in reading}  # fmt: skip
    if not reading:
        return calls, out
    rows = calls.to_pylist()
    earlier: list[tuple[int, int, int]] = []  # (recorded prompt, prompt, baseline prompt)
    previous: dict[str, Any] | None = None
    for row in rows:
        sid = row["session_id"]
        if previous is None or previous["session_id"] != sid:
            earlier, previous = [], None
        record = recorded.get((sid, row["message_id"]))
        last = recorded.get((sid, previous["message_id"])) if previous is not None else None
        gap, lifetime = row["since_previous_s"], lifetimes.get(sid, ttl_s)
        if (sid in reading and record is not None and last is not None
                and previous is not None and previous["baseline_prompt_tokens"] > 0
                and (gap is None or gap <= lifetime)):  # fmt: skip
            share = row["baseline_cached_tokens"] / previous["baseline_prompt_tokens"]
            shared = share * last[0]
            read = record[1]
            if shared >= BREAK_MIN_TOKENS and read < BREAK_SHARE * shared:
                at = next((e for e in reversed(earlier) if e[0] <= read), None)
                prefix = prefixes.get(sid, 0)
                cap, base_cap = (at[1], at[2]) if at is not None else (prefix, prefix)
                before = row["baseline_cached_tokens"]
                row["cached_tokens"] = min(row["cached_tokens"], cap)
                row["baseline_cached_tokens"] = min(before, base_cap)
                row["written_tokens"] = row["prompt_tokens"] - row["cached_tokens"]
                mine = out[sid]
                mine["cache_breaks"] += 1
                mine["cache_break_tokens"] += before - row["baseline_cached_tokens"]
                mine["cache_break_calls"].append(row["call"])
        if record is not None:
            earlier.append((record[0], row["prompt_tokens"], row["baseline_prompt_tokens"]))
        previous = row
    return pa.Table.from_pylist(rows, schema=calls.schema), out


__all__ = ["bill_prompt", "cache_breaks", "price_calls"]
