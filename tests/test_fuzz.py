"""Bad bytes never crash the core (issue 41, part 6): hypothesis over raw bytes at
the Python boundary, for the native readers (``read_jsonl``, ``iter_jsonl``) and for
the scans over tables of arbitrary strings and codes, and for the engine's entry
points (the plan, the chat-list counts, replay and its resume with the retention
scorer). A panic in the core comes back
as ``InternalError`` (a bug); bad input must get a typed error instead.

Marked ``fuzz``: deselected by default, run by ``tools/fuzz/run.sh`` (with
``CTXCOMPACT_FUZZ_EXAMPLES`` examples per test). Seeds: tests/fixtures and
../shared/data when it is beside the checkout (read there, never copied).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import _core
from ctxcompact.errors import CompactionError, InternalError
from ctxcompact.formats.reader import iter_jsonl, read_jsonl
from ctxcompact.scans.chatrows import chat_counts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("CTXCOMPACT_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SEED_BYTES = 16 << 10


def _head(data: bytes) -> bytes:
    """The first lines of ``data`` up to about ``SEED_BYTES``."""
    if len(data) <= SEED_BYTES:
        return data
    end = data.find(b"\n", SEED_BYTES)
    return data if end < 0 else data[: end + 1]


def _seeds() -> list[bytes]:
    """JSONL files' heads, and JSON documents as one compact line each."""
    roots = [ROOT / "tests" / "fixtures", ROOT.parent / "shared" / "data"]
    seeds = []
    for path in sorted(p for r in roots if r.is_dir() for p in r.rglob("*") if p.is_file()):
        if path.suffix == ".jsonl":
            seeds.append(_head(path.read_bytes()))
        elif path.suffix in (".json", ".traj") and path.stat().st_size < 1 << 20:
            try:
                value = json.loads(path.read_bytes())
            except ValueError:
                continue
            seeds.append(_head(json.dumps(value, separators=(",", ":")).encode()))
    return seeds


SEEDS = _seeds()
TOKENS = [b"\\ud800", b"\\udc00", b"\x00", b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"[" * 300,
          b'{"a":' * 200, b"1e999999", b"123456789012345678901234567890", b"-0", b"\r\n",
          b"\n", b'"', b"\\", b"{}", b"[]", b"null", b"\xef\xbb\xbf"]  # fmt: skip


@st.composite
def bad_bytes(draw: st.DrawFn) -> bytes:
    """A seed with a few bytes changed, or raw bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=512))
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        match draw(st.integers(0, 3)):
            case 0:
                data[at:at] = draw(st.sampled_from(TOKENS))
            case 1:
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            case 2:
                del data[at : at + draw(st.integers(1, 64))]
            case _:
                del data[at:]
    return bytes(data)


def _typed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> CompactionError | None:
    """``call(*args, **kwargs)`` returns, or raises a typed error that is not a bug
    (returned)."""
    try:
        call(*args, **kwargs)
    except InternalError:
        raise
    except CompactionError as e:
        return e
    return None


def _read_skipping(tmp_path: Path, data: bytes, fmt: str | None) -> Any:
    """``data`` read as a file with bad lines skipped; None where the reader
    refused it with a typed error (an internal error is raised: a bug)."""
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    try:
        return read_jsonl(path, fmt, on_error="skip")
    except InternalError:
        raise
    except CompactionError:
        return None


def _names_the_file(error: CompactionError | None) -> None:
    """A reader's error names the file it was reading."""
    assert error is None or "fuzz.jsonl" in str(error), error


FORMATS = [None, *_core.FORMATS]


@FUZZ
@given(
    data=bad_bytes(),
    fmt=st.sampled_from(FORMATS),
    on_error=st.sampled_from(["raise", "skip"]),
    chunk_bytes=st.sampled_from([1, 64, 1 << 20]),
)
def test_readers_answer_bad_bytes_with_typed_errors(
    tmp_path: Path, data: bytes, fmt: str | None, on_error: Any, chunk_bytes: int
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    _names_the_file(_typed(read_jsonl, path, fmt, on_error=on_error, chunk_bytes=chunk_bytes))


@FUZZ
@given(
    data=bad_bytes(),
    fmt=st.sampled_from(FORMATS),
    on_error=st.sampled_from(["raise", "skip"]),
    window_bytes=st.sampled_from([1, 512, 1 << 16]),
)
def test_windowed_readers_answer_bad_bytes_with_typed_errors(
    tmp_path: Path, data: bytes, fmt: str | None, on_error: Any, window_bytes: int
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    windows = iter_jsonl(path, fmt, on_error=on_error, window_bytes=window_bytes)
    _names_the_file(_typed(list, windows))


ROLES = ["user", "assistant", "system", "tool"]
PART_TYPES = ["text", "tool", "compaction", "file", "reasoning", "step-start", "patch"]
STATUSES = ["completed", "error", "pending", "running"]
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(["{}", '{"path":"a"}', '{"pinned":true}']))


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    """A part-row table of arbitrary strings, codes and counts."""
    n = draw(st.integers(1, 12))
    sessions = draw(st.lists(st.sampled_from(["s1", "s2", ""]), min_size=n, max_size=n))
    messages = draw(st.lists(st.sampled_from(["m1", "m2", "m3", None]), min_size=n, max_size=n))
    columns: dict[str, pa.Array] = {
        "session_id": pa.array(sorted(sessions), pa.string()),
        "message_id": pa.array(messages, pa.string()),
    }
    for name, names in (("role", ROLES), ("part_type", PART_TYPES), ("status", STATUSES)):
        if draw(st.booleans()):
            codes = draw(st.lists(st.integers(-128, 127) | st.none(), min_size=n, max_size=n))
            columns[name] = pa.array(codes, pa.int8())
        else:
            values = st.sampled_from(names) | st.text(max_size=6) | st.none()
            columns[name] = pa.array(draw(st.lists(values, min_size=n, max_size=n)), pa.string())
    for name in ("parent_id", "part_id", "tool"):
        values = st.sampled_from(["m1", "bash", "skill", "read"]) | st.text(max_size=8) | st.none()
        columns[name] = pa.array(draw(st.lists(values, min_size=n, max_size=n)), pa.string())
    for name in ("input", "output", "part_json", "tool_target"):
        values = draw(st.lists(TEXT | st.none(), min_size=n, max_size=n))
        columns[name] = pa.array(values, pa.large_string())
    for name in ("summary", "finished", "error", "auto"):
        columns[name] = pa.array(draw(st.lists(st.booleans() | st.none(), min_size=n, max_size=n)))
    ints = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 100) | st.none()
    for name in ("compacted_at", "output_utf16"):
        columns[name] = pa.array(draw(st.lists(ints, min_size=n, max_size=n)), pa.int64())
    return pa.table(columns)


POLICIES = st.sampled_from([
    None,
    {"protect": 0, "minimum": 0, "supersede": True, "keep_recent": 1},
    {"protect": 1, "minimum": 0, "trigger": 1, "placeholder": "describe", "truncate_output": 2},
    {"protect": 0, "minimum": 0, "method": "o200k", "turn": "step", "protect_turns": 0},
])  # fmt: skip


@FUZZ
@given(table=tables(), policy=POLICIES, rows=st.lists(st.integers(0, 20), max_size=4))
def test_scans_answer_bad_tables_with_typed_errors(
    table: pa.Table, policy: dict | None, rows: list[int]
) -> None:
    _typed(_core.prune, table, policy, threads=1)
    _typed(_core.pivot, table, threads=1)
    _typed(_core.pivot_ranges, table, threads=1)
    _typed(_core.check_table, table, threads=1)
    _typed(_core.compact_batch, table, policy, now_ms=1, threads=1)
    _typed(_core.estimate_messages, table, placeholder="describe", threads=1)
    _typed(_core.tool_targets, table, threads=1)
    indices = pa.array(rows, pa.uint64())
    for name in ("output", "input", "part_json"):
        column = table.column(name)
        _typed(_core.estimate_tokens_array, column, threads=1)
        _typed(_core.count_tokens_array, column, "o200k", threads=1)
        _typed(_core.take_strings, column, indices)
    _typed(_core.mark_rows, table.column("compacted_at"), indices, 5)


# The engine's newest entry points: the plan, the chat-list counts, replay and its
# resume (and the retention scorer behind replay's ``retention=True``).

SHAPES = [None, "chat", "anthropic", "responses"]


@FUZZ
@given(
    table=tables(),
    policy=POLICIES,
    shape=st.sampled_from(SHAPES),
    output=st.sampled_from(["json", "arrow"]),
)
def test_the_plan_answers_bad_tables_with_typed_errors(
    table: pa.Table, policy: dict | None, shape: Any, output: Any
) -> None:
    _typed(_core.plan, table, policy, shape=shape, output=output, threads=1)
    _typed(cc.plan, table, policy, shape=shape, output=output, threads=1)


@FUZZ
@given(
    data=bad_bytes(),
    fmt=st.sampled_from(FORMATS),
    policy=POLICIES,
    shape=st.sampled_from(SHAPES),
)
def test_the_plan_answers_bad_bytes_with_typed_errors(
    tmp_path: Path, data: bytes, fmt: str | None, policy: dict | None, shape: Any
) -> None:
    read = _read_skipping(tmp_path, data, fmt)
    if read is None:
        return
    _typed(cc.plan, read.table, policy, shape=shape)


CHAT_TAG = "ctxcompact_at"


def _chat_lists() -> list[bytes]:
    """The messages of the seeds' chat lists as ``scans/chatrows.py`` hands them to
    the core: one ``openai-chat`` session, each ``tool`` message tagged with its
    index."""
    lists = []
    for seed in SEEDS:
        try:
            value = json.loads(seed.split(b"\n", 1)[0])
        except ValueError:
            continue
        messages = value.get("messages") if isinstance(value, dict) else value
        if not isinstance(messages, list) or not messages:
            continue
        tagged = []
        for i, m in enumerate(messages):
            if isinstance(m, dict):
                m = {k: v for k, v in m.items() if k != "id"}
                if m.get("role") == "tool":
                    m[CHAT_TAG] = i
            tagged.append(m)
        lists.append(json.dumps({"id": "chat", "messages": tagged}).encode())
    return lists


CHAT_LISTS = _chat_lists()


@st.composite
def bad_chat_lists(draw: st.DrawFn) -> bytes:
    """A chat list with a few bytes changed, or any seed changed."""
    if not CHAT_LISTS or draw(st.integers(0, 4)) == 0:
        return draw(bad_bytes())
    data = bytearray(draw(st.sampled_from(CHAT_LISTS)))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data)))
        match draw(st.integers(0, 2)):
            case 0:
                data[at:at] = draw(st.sampled_from([*TOKENS, b"99999999999999999999", b"-1"]))
            case 1:
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            case _:
                del data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


@FUZZ
@given(
    data=bad_chat_lists(),
    extra=st.integers(-3, 3),
    method=st.sampled_from(["opencode", "o200k", "cl100k-exact", "bogus"]),
)
def test_the_chat_counts_answer_bad_bytes_with_typed_errors(
    data: bytes, extra: int, method: str
) -> None:
    try:
        size = len(json.loads(data)["messages"])
    except (ValueError, TypeError, KeyError):
        size = 4
    size = max(0, size + extra)
    _typed(_core.chat_counts, data, size, session="chat", method=method)
    try:
        messages = json.loads(data)["messages"]
    except (ValueError, TypeError, KeyError):
        return
    if isinstance(messages, list):
        # select_split and the integrations count through this (scans/chatrows.py)
        _typed(chat_counts, messages)


LIMITS = {"context": 2_000, "output": 200}


@FUZZ
@given(
    data=bad_bytes(),
    fmt=st.sampled_from(FORMATS),
    policy=st.sampled_from([None, "opencode", "mask-first", {"protect": 0, "minimum": 0}]),
    as_sent=st.sampled_from([None, "auto"]),
)
def test_replay_answers_bad_bytes_with_typed_errors(
    tmp_path: Path, data: bytes, fmt: str | None, policy: Any, as_sent: Any
) -> None:
    read = _read_skipping(tmp_path, data, fmt)
    if read is None:
        return
    _typed(cc.replay, read.transcript, policy, limits=LIMITS, as_sent=as_sent)


BIG = st.sampled_from([0, 1, 100, 5_000, 2**40, 2**64 - 1])
TIMES = st.none() | st.sampled_from([-(2**63), 2**63 - 1, -1, 0, 1_700_000_000_000])


@st.composite
def replay_inputs(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    """The message facts (created, output, call: of any length) and the budgets
    ``_core.replay`` takes."""
    n = draw(st.integers(0, 14))
    facts = [
        draw(st.lists(TIMES, min_size=n, max_size=n)),
        draw(st.lists(BIG, min_size=n, max_size=n)),
        draw(st.lists(st.none() | st.sampled_from(["a", "b", ""]), min_size=n, max_size=n)),
    ]
    budget = {
        "system_tokens": draw(BIG),
        "threshold": draw(st.none() | BIG),
        "available": draw(BIG),
        "usable": draw(st.none() | BIG),
    }
    return facts, budget


MASKS = st.sampled_from([
    None,
    {"protect": 0, "minimum": 0, "acts": "call"},
    {"protect": 1, "minimum": 0, "keep_recent": 1, "acts": "turn"},
])  # fmt: skip


@FUZZ
@given(table=tables(), view=POLICIES, mask=MASKS, inputs=replay_inputs(), retention=st.booleans())
def test_the_core_replay_answers_bad_tables_with_typed_errors(
    table: pa.Table, view: dict | None, mask: dict | None, inputs: tuple, retention: bool
) -> None:
    facts, budget = inputs
    _typed(_core.replay, table, view or {}, mask, *facts, **budget, threads=1,
           retention=retention, system="be brief")  # fmt: skip


#: Resume states: (head, hidden, first call, baseline, last time, stalled).
STATE = st.tuples(st.integers(0, 20) | st.just(2**64 - 1), st.lists(st.booleans(), max_size=8),
                  st.integers(0, 6) | st.just(2**64 - 1), BIG, TIMES, st.booleans())  # fmt: skip


@FUZZ
@given(
    table=tables(),
    view=POLICIES,
    mask=MASKS,
    inputs=replay_inputs(),
    states=st.lists(STATE, max_size=4),
)
def test_the_core_resume_answers_bad_states_with_typed_errors(
    table: pa.Table, view: dict | None, mask: dict | None, inputs: tuple, states: list
) -> None:
    facts, budget = inputs
    columns = [list(x) for x in zip(*states, strict=True)] if states else [[]] * 6
    _typed(_core.replay_resume, table, view or {}, mask, *facts, *columns, **budget, threads=1)
