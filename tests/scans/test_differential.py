"""The Rust core against the pure-Python reference on random transcripts.

Transcripts are generated as part rows (docs/schema.md) with many sessions,
summaries, compaction markers, already-compacted parts, protected tools,
empty and null outputs and non-ASCII text, then encoded with a random Arrow
layout (string / large_string / string_view / dictionary, random chunking).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import NonContiguousError
from ctxcompact.estimators import METHODS
from ctxcompact.policy import Policy
from ctxcompact.scans import OverflowOptions, estimate_tokens_array, is_overflow, pivot_mask
from ctxcompact.scans import reference as ref
from ctxcompact.scans.parts import compact_pass, with_output_units, with_tool_targets
from ctxcompact.transcript import SCAN_COLUMNS, TOOL_TARGET
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sweeps import sweep

TEXT = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "é", "日", "😀", "\n", "𝔘", "\u0800"]),
    max_size=60,
)
TOOLS = st.sampled_from(["read", "bash", "skill", "edit"])
STATUS = st.sampled_from(["completed", "completed", "completed", "error", "running", "pending"])
# The generators' strategies are built once, here: built inside a draw, each one
# was made and validated again for every part, message and column of every
# example (that took a third of the draw's CPU), for the same distribution.
USER_KINDS = st.sampled_from(["text", "text", "compaction", "file"])
ASSISTANT_KINDS = st.sampled_from(["tool", "tool", "tool", "text", "reasoning", "step-start"])
NONE_OR_TEXT = st.one_of(st.none(), TEXT)
TEXT_JSON = st.sampled_from([None, "{}", '{"ignored":true}', '{"ignored":false}',
                             '{"synthetic":true}', '{"pinned":true}'])  # fmt: skip
MARKER_JSON = st.sampled_from([None, '{"ignored":true}'])
FILE_MIME = st.sampled_from([None, "image/png", "text/plain"])
FILE_NAME = st.sampled_from([None, "", "a.py", "é.txt"])
FILE_URL = st.sampled_from([None, "", "data:image/png;base64,AAAA"])
# Targets for supersession: paths (any tool), commands (same tool), none.
TOOL_INPUT = st.sampled_from([None, '{"path":"a.py"}', '{"q":"日本"}', '{"filePath":"a.py"}',
                              '{"file_path":"b.py","command":"x"}', '{"command":"ls"}',
                              '{"cmd":""}', "not json", "[1]",
                              '{"command":"' + "x" * 90 + '"}',
                              '{"command":"cat <<EOF\\r\\nhé\\nEOF"}'])  # fmt: skip
# Pinned parts are never cleared or cut; a text-protocol step's part
# (its source keeps the observation's record) sends no call, and its
# result as a user message; "observation" elsewhere in it does not.
TOOL_JSON = st.sampled_from([None, None, '{"pinned":true}', '{"pinned":false}',
                             '{"source":{"observation":{}}}',
                             '{"source":{"observation":{"agent":"a"}}}',
                             '{"pinned":true,"source":{"observation":{}}}', '{"observation":{}}',
                             '{"source":{"x":"observation"}}',
                             '{"source":{"observation":{},"history":[],"instruction":""}}',
                             '{"callID":"call_1"}', '{"callID":""}'])  # fmt: skip
OUTPUT_SIZE = st.sampled_from([0, 1, 7, 40, 130, 400])
COMPACTED_AT = st.sampled_from([None, None, None, None, 0, 1_700_000_000_000])


@st.composite
def part(draw: st.DrawFn, role: str) -> dict[str, Any]:
    kind = draw(USER_KINDS if role == "user" else ASSISTANT_KINDS)
    row: dict[str, Any] = {"part_type": kind, "tool": None, "status": None, "input": None}
    row["output"] = draw(NONE_OR_TEXT) if kind in ("text", "reasoning") else None
    row["compacted_at"] = None
    row["auto"] = draw(st.booleans()) if kind == "compaction" else None
    # What the model input reads from part_json: ignored text, a file's name, mime and url.
    row["part_json"] = None
    if kind == "text":
        row["part_json"] = draw(TEXT_JSON)
    if kind == "compaction":  # a marker a hook cancelled is ignored: never sent
        row["part_json"] = draw(MARKER_JSON)
    if kind == "file":
        info = {
            key: value
            for key, value in (
                ("mime", draw(FILE_MIME)),
                ("filename", draw(FILE_NAME)),
                ("url", draw(FILE_URL)),
            )
            if value is not None
        }
        row["part_json"] = draw(st.sampled_from([None, json.dumps(info, ensure_ascii=False)]))
    if kind == "tool":
        row["tool"] = draw(TOOLS)
        row["status"] = draw(STATUS)
        row["input"] = draw(TOOL_INPUT)
        row["part_json"] = draw(TOOL_JSON)
        # Big outputs, so small thresholds are crossed often; sometimes empty or null.
        size = draw(OUTPUT_SIZE)
        row["output"] = draw(st.one_of(st.none(), st.just(draw(TEXT) * (size // 10 + 1))))
        row["compacted_at"] = draw(COMPACTED_AT)
    return row


MESSAGES = st.integers(0, 14)
ROLES = st.sampled_from(["user", "assistant", "assistant", "system"])
SUMMARY = st.sampled_from([False, False, True, None])
FINISHED = st.sampled_from([True, True, False, None])
ERROR = st.sampled_from([False, False, True, None])
PARTS = {role: st.lists(part(role), max_size=4) for role in ("user", "assistant", "system")}


@st.composite
def session(draw: st.DrawFn, sid: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    users: list[str] = []
    n_messages = draw(MESSAGES)
    if n_messages == 0:
        return [_row(sid, None, None, {"part_type": None})]
    for m in range(n_messages):
        role = draw(ROLES)
        mid = f"{sid}-m{m:03d}"
        info: dict[str, Any] = {"role": role, "parent_id": None, "summary": None}
        if role == "assistant":
            info["parent_id"] = draw(st.sampled_from([*users[-3:], None])) if users else None
            info["summary"] = draw(SUMMARY)
            info["finished"] = draw(FINISHED)
            info["error"] = draw(ERROR)
        else:
            users.append(mid)
            info["finished"] = None
            info["error"] = None
        parts = draw(PARTS[role])
        for p in parts or [{"part_type": None}]:
            rows.append(_row(sid, mid, info, p))
    return rows


def _row(
    sid: str, mid: str | None, info: dict[str, Any] | None, part: dict[str, Any]
) -> dict[str, Any]:
    base = dict.fromkeys(COLUMNS)
    base.update(info or {})
    base.update(part)
    base["session_id"] = sid
    base["message_id"] = mid
    base["part_id"] = None if part.get("part_type") is None else f"p{id(part)}"
    return base


COLUMNS = [*SCAN_COLUMNS, "part_json"]
STRINGS = {"session_id", "message_id", "role", "parent_id", "part_id", "part_type", "tool",
           "status", "input", "output", "part_json"}  # fmt: skip
BOOLS = {"summary", "finished", "error", "auto"}


def _dictionary_with_repeats(values: list[str | None]) -> pa.DictionaryArray:
    """A dictionary holding every value twice, rows alternating between the two
    keys: equal strings under different keys must still compare equal."""
    distinct = sorted({v for v in values if v is not None})
    index = {v: i for i, v in enumerate(distinct)}
    keys = [None if v is None else index[v] + (i % 2) * len(distinct) for i, v in enumerate(values)]
    return pa.DictionaryArray.from_arrays(
        pa.array(keys, pa.int32()), pa.array(distinct * 2, pa.string())
    )


SESSION_COUNT = st.integers(1, 6)
SESSIONS = [session(f"s{s}") for s in range(6)]
LAYOUTS = st.sampled_from(["string", "large_string", "string_view", "dict", "dict16",
                           "dict-repeats"])  # fmt: skip


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], pa.Table]:
    n = draw(SESSION_COUNT)
    rows = [r for s in range(n) for r in draw(SESSIONS[s])]
    arrays = {}
    for name in COLUMNS:
        values = [r[name] for r in rows]
        if name in STRINGS:
            kind = draw(LAYOUTS)
            if kind == "dict":
                arrays[name] = pa.array(values, pa.string()).dictionary_encode()
            elif kind == "dict16":  # keys other than int32 are normalised, not read in place
                arrays[name] = pa.array(values, pa.string()).cast(
                    pa.dictionary(pa.int16(), pa.string())
                )
            elif kind == "dict-repeats":  # one value under two keys, alternating
                arrays[name] = _dictionary_with_repeats(values)
            else:
                arrays[name] = pa.array(values, getattr(pa, kind)())
        elif name in BOOLS:
            arrays[name] = pa.array(values, pa.bool_())
        else:
            arrays[name] = pa.array(values, pa.int64())
    table = pa.table(arrays)
    # Random chunking: sessions and messages may straddle batch boundaries.
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(rows) - 1)), max_size=3)))
    bounds = [0, *[c for c in cuts if c < len(rows)], len(rows)]
    batches = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds) if b > a]
    return rows, pa.concat_tables(batches)


SMALL = {"protect": 60, "minimum": 25}


class Config:
    prune = True
    prune_protect = SMALL["protect"]
    prune_minimum = SMALL["minimum"]
    prune_protected_tools = ["skill"]
    prune_continue_past_compacted = False
    estimate_method = "opencode"


@settings(max_examples=sweep(300), deadline=None)
@given(transcripts(), st.booleans(), st.sampled_from(METHODS))
def test_prune_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table], continue_past: bool, method: str
) -> None:
    rows, table = data
    config = Config()
    config.prune_continue_past_compacted = continue_past
    config.estimate_method = method
    got = cc.prune(table, config)
    want = ref.prune(rows, **SMALL, continue_past_compacted=continue_past, method=method)
    assert got.sessions["session_id"].to_pylist() == [w.session_id for w in want]
    assert got.sessions["total"].to_pylist() == [w.total for w in want]
    assert got.sessions["pruned"].to_pylist() == [w.pruned for w in want]
    assert got.rows.to_pylist() == [r for w in want for r in w.rows]


# How tool parts are sent: they change the estimates (and so a trigger).
RENDER_OPTIONS = {
    "clear_inputs": st.booleans(),
    "truncate_output": st.sampled_from([None, None, 0, 3, 20]),
    "placeholder": st.sampled_from(["opencode", "describe"]),
    "keep_thinking": st.sampled_from([0, 0, 1, 3]),
}

POLICY_OPTIONS = st.fixed_dictionaries({
    "turn": st.sampled_from(["user", "step"]),
    "protect_turns": st.integers(0, 4),
    "protect": st.sampled_from([0, 30, 60, 200, 10**6]),
    "minimum": st.sampled_from([0, 10, 25]),
    "clear_at_least": st.sampled_from([0, 20, 100]),
    "trigger": st.sampled_from([0, 0, 50, 300]),
    "keep_recent": st.sampled_from([None, 0, 1, 3, 50]),
    "keep_recent_per_tool": st.booleans(),
    "supersede": st.booleans(),
    "continue_past_compacted": st.booleans(),
    "exclude_tools": st.sampled_from([[], ["skill"], ["read", "bash"]]),
    "enabled": st.sampled_from([True, True, True, False]),
    "min_output_tokens": st.sampled_from([0, 0, 1, 20]),
    # The cache gate: a selection stands only when it pays under these prices.
    "cache_aware": st.booleans(),
    "cache_read": st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    "cache_write": st.sampled_from([1.0, 1.25, 2.0]),
    "expected_calls": st.sampled_from([0, 0, 2, 6, 10**6]),
    **RENDER_OPTIONS,
})  # fmt: skip


def counted_once(table: pa.Table, counted: bool, method: str) -> pa.Table:
    """The table, with each output's length counted once when ``counted``
    (``output_utf16``, and the method's family column when it has one) and
    each call's target worked out (``tool_target``): the scans must give the
    same results either way."""
    if not counted:
        return table
    table = with_tool_targets(with_output_units(table)).to_arrow()
    if method not in ("opencode", "ceil-bytes"):
        table = with_output_units(table, method=method).to_arrow()
    return table


@settings(max_examples=sweep(500), deadline=None)
@given(
    transcripts(),
    POLICY_OPTIONS,
    st.sampled_from(METHODS),
    st.integers(0, 6),
    st.booleans(),
)
def test_prune_policies_match_reference(
    data: tuple[list[dict[str, Any]], pa.Table],
    options: dict[str, Any],
    method: str,
    overhead: int,
    counted: bool,
) -> None:
    rows, table = data
    table = counted_once(table, counted, method)
    policy = Policy(**options)
    config = CompactionConfig(policy=policy, estimate_method=method, message_overhead=overhead)
    got = cc.prune(table, config)
    kwargs = {**options, "protected_tools": options["exclude_tools"]}
    del kwargs["exclude_tools"]
    want = ref.prune(rows, **kwargs, method=method, overhead=overhead)
    assert got.sessions["total"].to_pylist() == [w.total for w in want]
    assert got.sessions["pruned"].to_pylist() == [w.pruned for w in want]
    assert got.rows.to_pylist() == [r for w in want for r in w.rows]
    # The one-pass batch scan takes the same policy.
    one_pass = compact_pass(table, config)
    assert one_pass.pruned == [w.pruned for w in want]
    assert one_pass.rows.to_pylist() == [r for w in want for r in w.rows]


@settings(max_examples=sweep(300), deadline=None)
@given(
    transcripts(),
    st.fixed_dictionaries({
        "protect_turns": st.integers(0, 2),
        "keep_recent": st.sampled_from([None, 0, 1, 2]),
        "cache_read": st.floats(0, 1),
        "cache_write": st.floats(1, 30),
        "expected_calls": st.sampled_from([0, 1, 3, 10**6]),
        **RENDER_OPTIONS,
    }),
    st.sampled_from(METHODS),
)  # fmt: skip
def test_the_cache_gate_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table], options: dict[str, Any], method: str
) -> None:
    """A policy that selects much (step turns, no window, no minimum) behind
    the cache gate, under prices either side of its break-even."""
    rows, table = data
    options = {"turn": "step", "protect": 0, "minimum": 0, "cache_aware": True, **options}
    config = CompactionConfig(policy=Policy(**options), estimate_method=method)
    got = cc.prune(table, config)
    want = ref.prune(rows, **options, protected_tools=["skill"], method=method)
    assert got.sessions["pruned"].to_pylist() == [w.pruned for w in want]
    assert got.rows.to_pylist() == [r for w in want for r in w.rows]


def _settled(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the trigger's sums take it: a call finished and not
    cleared, in an assistant message; texts present; no file parts."""
    row = dict(row)
    kind = row["part_type"]
    if kind == "tool" and row["role"] == "assistant":
        row["status"] = row["status"] if row["status"] in ("completed", "error") else "completed"
        row["compacted_at"] = None
    elif kind in ("tool", "file"):
        row.update(part_type="text", tool=None, status=None, input=None, compacted_at=None)
        row["output"] = row["output"] or "x"
    elif kind in ("text", "reasoning") and row["output"] is None:
        row["output"] = ""
    return row


@settings(max_examples=sweep(300), deadline=None)
@given(
    transcripts(),
    st.fixed_dictionaries(RENDER_OPTIONS),
    st.integers(0, 6),
    st.integers(0, 5),
    st.integers(-3, 3),
    st.sampled_from(["string", "large_string"]),
    st.booleans(),
)
def test_trigger_from_sums_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table],
    render: dict[str, Any],
    overhead: int,
    session: int,
    offset: int,
    input_type: str,
    settled: bool,
) -> None:
    """A trigger on a counted table with the tool names dictionary-encoded
    and one chunk (where it decides most sessions from sums over their rows,
    before the bounds pass; `settled`: sessions it takes, every call
    finished in an assistant message), set at a session's visible tokens
    and just around them: the same outputs as the reference."""
    rows, _ = data
    if settled:
        rows = [_settled(r) for r in rows]
    arrays = {}
    for name in COLUMNS:
        values = [r[name] for r in rows]
        if name == "tool":
            arrays[name] = pa.array(values, pa.string()).dictionary_encode()
        elif name == "input":
            arrays[name] = pa.array(values, getattr(pa, input_type)())
        elif name in STRINGS:
            arrays[name] = pa.array(values, pa.large_string())
        elif name in BOOLS:
            arrays[name] = pa.array(values, pa.bool_())
        else:
            arrays[name] = pa.array(values, pa.int64())
    table = counted_once(pa.table(arrays), True, "opencode").combine_chunks()
    # Nothing protected: a session above the trigger loses its outputs.
    options = {**render, "protect": 0, "minimum": 0, "protect_turns": 0}
    visible = ref.visible_tokens(rows, method="opencode", overhead=overhead, **render)
    seen = [v for v in visible.values() if v > 0] or [1]
    trigger = max(1, seen[session % len(seen)] + offset)
    config = CompactionConfig(policy=Policy(trigger=trigger, **options), message_overhead=overhead)
    got = cc.prune(table, config)
    want = ref.prune(rows, trigger=trigger, **options, overhead=overhead)
    assert got.sessions["total"].to_pylist() == [w.total for w in want]
    assert got.sessions["pruned"].to_pylist() == [w.pruned for w in want]
    assert got.rows.to_pylist() == [r for w in want for r in w.rows]


def targets_worked_out(table: pa.Table, which: str) -> pa.Table:
    """The table without ``tool_target``, with it as the library makes it (a
    dictionary, read by id), as plain strings, in two chunks with a
    dictionary each, or null at every other row (string_view, or a
    dictionary; those rows are worked out from their inputs by the scan)."""
    if which == "none":
        return table
    table = with_tool_targets(table).to_arrow()
    if which == "dictionary":
        return table
    values = table[TOOL_TARGET].to_pylist()
    half = [None if i % 2 else v for i, v in enumerate(values)]
    mid = len(values) // 2
    column: pa.Array | pa.ChunkedArray
    if which == "plain":
        column = pa.array(values, pa.string())
    elif which == "chunked":
        parts = (values[:mid], values[mid:])
        column = pa.chunked_array([pa.array(p, pa.string()).dictionary_encode() for p in parts])
    elif which == "half-dictionary":
        column = pa.array(half, pa.string()).dictionary_encode()
    else:
        column = pa.array(half, pa.string_view())
    return table.set_column(table.schema.get_field_index(TOOL_TARGET), TOOL_TARGET, column)


@settings(max_examples=sweep(300), deadline=None)
@given(
    transcripts(),
    st.sampled_from(["user", "step"]),
    st.integers(0, 2),
    st.booleans(),
    st.sampled_from(["none", "dictionary", "plain", "chunked", "half", "half-dictionary"]),
)
def test_supersession_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table],
    turn: str,
    protect_turns: int,
    per_tool: bool,
    targets: str,
) -> None:
    # Windows wide open: only stale outputs can go, so every one of them shows.
    rows, table = data
    table = targets_worked_out(table, targets)
    options = {"turn": turn, "protect_turns": protect_turns, "protect": 10**6, "minimum": 0,
               "supersede": True, "keep_recent": 2, "keep_recent_per_tool": per_tool}  # fmt: skip
    got = cc.prune(table, Policy(**options))
    want = ref.prune(rows, **options)
    assert got.rows.to_pylist() == [r for w in want for r in w.rows]
    assert got.pruned == sum(w.pruned for w in want)


@settings(max_examples=sweep(300), deadline=None)
@given(transcripts())
def test_pivot_matches_reference(data: tuple[list[dict[str, Any]], pa.Table]) -> None:
    rows, table = data
    want_mask = [False] * len(rows)
    for shown in ref.shown_messages(rows):
        for message in shown:
            for r in message.rows:
                want_mask[r] = True
    for session in ref.group(rows):  # an empty session's one row is shown
        if not session.messages:
            want_mask[session.rows[0]] = True
    assert pivot_mask(table).to_pylist() == want_mask
    filtered = cc.filter_pivot(table).to_arrow()
    assert filtered.num_rows == sum(want_mask)


@settings(max_examples=sweep(300), deadline=None)
@given(
    transcripts(),
    st.integers(0, 8),
    st.sampled_from(METHODS),
    st.fixed_dictionaries(RENDER_OPTIONS),
    st.booleans(),
)
def test_message_estimates_match_reference(
    data: tuple[list[dict[str, Any]], pa.Table],
    overhead: int,
    method: str,
    render: dict[str, Any],
    counted: bool,
) -> None:
    rows, table = data
    table = counted_once(table, counted, method)

    class C:
        estimate_method = method
        message_overhead = overhead
        policy = Policy(**render)

    got = cc.estimate_messages(table, C())
    want = ref.estimate_messages(rows, method=method, overhead=overhead, **render)
    assert got.messages["tokens"].to_pylist() == [t for _, t in want]
    assert got.messages["message_id"].to_pylist() == [rows[r]["message_id"] for r, _ in want]


@settings(max_examples=sweep(500), deadline=None)
@given(st.text(), st.sampled_from(METHODS))
def test_estimate_matches_reference_on_any_unicode(text: str, method: str) -> None:
    assert cc.estimate_tokens(text, method) == ref.estimate(text, method)  # type: ignore[arg-type]


@settings(max_examples=sweep(100), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=200)), max_size=50))
def test_estimate_array_matches_reference(values: list[str | None]) -> None:
    for typ in (pa.string(), pa.large_string(), pa.string_view()):
        got = estimate_tokens_array(pa.array(values, typ)).to_pylist()
        assert got == [None if v is None else ref.estimate(v) for v in values]


@settings(max_examples=sweep(300), deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "input": st.integers(0, 300_000),
            "output": st.integers(0, 64_000),
            "cache": st.fixed_dictionaries(
                {"read": st.integers(0, 100_000), "write": st.integers(0, 100_000)}
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "context": st.sampled_from([0, 8_192, 128_000, 200_000, 1_000_000]),
            "input": st.sampled_from([0, 0, 100_000, 272_000]),
            "output": st.sampled_from([0, 4_096, 32_000, 128_000]),
        }
    ),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, "default", 5_000]),
)
def test_overflow_matches_reference(
    usage: dict[str, Any],
    limits: dict[str, int],
    inclusive: bool,
    cache_write: bool,
    clamp: bool,
    reserved: int | str | None,
) -> None:
    opts = OverflowOptions(
        inclusive=inclusive, count_cache_write=cache_write, clamp_usable=clamp, reserved=reserved
    )
    want = ref.is_overflow(
        usage,
        limits,
        inclusive=inclusive,
        count_cache_write=cache_write,
        clamp_usable=clamp,
        reserved=reserved,
    )
    assert is_overflow(usage, limits, opts) == want


@st.composite
def live_sessions(draw: st.DrawFn) -> cc.Session:
    """Sessions as a live loop holds them: pydantic objects, every pivot case."""
    messages: list[dict[str, Any]] = []
    users: list[str] = []
    for m in range(draw(st.integers(0, 12))):
        role = draw(st.sampled_from(["user", "user", "assistant", "assistant", "system"]))
        mid = f"m{m:03d}"
        info: dict[str, Any] = {"id": mid, "role": role}
        parts: list[dict[str, Any]] = []
        if role == "user":
            users.append(mid)
            kinds = draw(st.lists(st.sampled_from(["text", "compaction"]), max_size=2))
            # a pinned text stays ahead of the pivot (the Session path reads `pinned`)
            parts = [{"id": f"{mid}-{k}", "type": kind,
                      **({"pinned": True} if kind == "text" and draw(st.booleans()) else {})}
                     for k, kind in enumerate(kinds)]  # fmt: skip
        elif role == "assistant":
            parent = draw(st.sampled_from([*users[-3:], None, "elsewhere"]))
            summary = draw(st.sampled_from([True, True, False, None]))
            finish = draw(st.sampled_from(["stop", "stop", None]))
            error = draw(st.sampled_from([None, None, {"name": "APIError"}]))
            fields = {"parentID": parent, "summary": summary, "finish": finish, "error": error}
            info |= {k: v for k, v in fields.items() if v is not None}
            parts = [{"id": f"{mid}-t", "type": "text", "text": "done"}]
        messages.append({"info": info, "parts": parts})
    return cc.Session.model_validate({"info": {"id": "s"}, "messages": messages})


@settings(max_examples=sweep(400), deadline=None)
@given(live_sessions())
def test_pivot_on_a_live_session_matches_the_core(session: cc.Session) -> None:
    # The Session path reads the pydantic objects; the table path is the Rust scan.
    got = [m.id for m in cc.filter_pivot(session).messages]
    table = cc.filter_pivot(cc.Transcript.from_sessions([session])).to_arrow()
    ids = [i for i in table.column("message_id").to_pylist() if i is not None]
    want = [k for k, _ in itertools.groupby(ids)]
    assert got == want


def test_pivot_on_a_session_with_repeated_message_ids_is_left_to_the_core() -> None:
    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "a", "role": "user"}, "parts": [{"id": "p1", "type": "text"}]},
        {"info": {"id": "b", "role": "assistant"}, "parts": []},
        {"info": {"id": "a", "role": "user"}, "parts": [{"id": "p2", "type": "text"}]},
    ]})  # fmt: skip
    with pytest.raises(NonContiguousError, match="reappears"):
        cc.filter_pivot(session)


@settings(max_examples=sweep(300), deadline=None)
@given(transcripts(), st.sampled_from([(60, 25), (0, 0), (10_000, 0)]), st.integers(0, 6))
def test_the_one_pass_batch_scan_equals_the_separate_scans(
    data: tuple[list[dict[str, Any]], pa.Table], policy: tuple[int, int], overhead: int
) -> None:
    from ctxcompact.scans.parts import compact_pass

    _, table = data

    class Cfg(Config):
        prune_protect, prune_minimum = policy
        message_overhead = overhead

    found = compact_pass(table, Cfg(), now_ms=5)
    result = cc.prune(table, Cfg())
    assert found.session_ids == result.sessions["session_id"].to_pylist()
    assert found.pruned == result.sessions["pruned"].to_pylist()
    assert found.pruned_parts == result.sessions["parts"].to_pylist()
    assert found.rows.to_pylist() == result.rows.to_pylist()
    marked = cc.mark_pruned(table, result, now_ms=5) if len(result) else cc.Transcript(table)
    if len(result):
        assert found.marked is not None
        assert found.marked.to_pylist() == marked.to_arrow()["compacted_at"].to_pylist()
    visible = cc.filter_pivot(marked)
    per_session = {}
    for name, data_ in (("after_prune", marked), ("after", visible)):
        sessions = cc.estimate_messages(data_, Cfg()).sessions
        per_session[name] = dict(zip(sessions["session_id"].to_pylist(),
                                     sessions["tokens"].to_pylist()))  # fmt: skip
    ids = found.session_ids
    assert found.tokens_after_prune == [per_session["after_prune"].get(s, 0) for s in ids]
    assert found.tokens_after == [per_session["after"].get(s, 0) for s in ids]
    rows = [table.slice(a, n) for a, n in found.visible]
    assert sum(r.num_rows for r in rows) == visible.num_rows == sum(found.visible_parts)


@settings(max_examples=sweep(300), deadline=None)
@given(
    st.sampled_from(["read", "bash", ""]),
    st.one_of(
        st.none(),
        st.builds(
            lambda key, value: json.dumps({key: value}, ensure_ascii=False),
            st.sampled_from(["path", "command", "code", "q"]),
            st.text(st.sampled_from(["a", "é", "\r", "\n", " ", "😀"]), max_size=120),
        ),
        st.text(max_size=20),
    ),
    st.text(max_size=50),
    st.integers(0, 30),
)
def test_rendered_tool_parts_match_reference(
    tool: str, input_json: str | None, output: str, budget: int
) -> None:
    from ctxcompact import _core

    got = _core.cleared_placeholder(tool, input_json, output, "prt_1")
    assert got == ref.cleared_placeholder(tool, input_json, output, "prt_1")
    assert _core.truncate_output(output, budget) == ref.truncate_output(output, budget)


@settings(max_examples=sweep(300), deadline=None)
@given(transcripts(), st.fixed_dictionaries(RENDER_OPTIONS))
def test_the_model_input_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table], render: dict[str, Any]
) -> None:
    """The core's render (``_core.render_chat``, what ``to_model_messages``
    sends) against the reference's, message by message: cleared and cut
    outputs, cleared inputs, pins, reasoning, images, system messages."""
    from ctxcompact import _core

    rows, table = data
    got = [json.loads(b) for b in _core.render_chat(table, **render)]
    assert got == ref.render_chat(rows, **render)


@settings(max_examples=sweep(200), deadline=None)
@given(transcripts(), st.fixed_dictionaries(RENDER_OPTIONS))
def test_to_model_messages_of_a_session_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table], render: dict[str, Any]
) -> None:
    """The Session path (the live loop's: a session's rows rendered by the
    core) sends what the reference renders from the same rows."""
    _, table = data
    # A session keeps a call's input as a JSON object: the others are not sessions.
    inputs = [i if i and i.startswith("{") else None for i in table.column("input").to_pylist()]
    table = table.set_column(
        table.schema.get_field_index("input"), "input", pa.array(inputs, pa.string())
    )
    policy = Policy(**render)
    for session in cc.Transcript(table).to_sessions():
        rows = cc.Transcript.from_sessions([session]).to_arrow().to_pylist()
        want = [m for shown in ref.render_chat(rows, **render) for m in shown]
        assert cc.to_model_messages(session, policy=policy) == want
