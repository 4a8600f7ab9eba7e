"""Bad bytes never crash the core (issue 41, part 6): hypothesis over raw bytes at
the Python boundary, for the native readers (``read_jsonl``, ``iter_jsonl``) and for
the scans over tables of arbitrary strings and codes. A panic in the core comes back
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

import pyarrow as pa
import pytest
from ctxcompact import _core
from ctxcompact.errors import CompactionError, InternalError
from ctxcompact.formats.reader import iter_jsonl, read_jsonl
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
