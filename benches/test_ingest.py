"""JSONL ingest: the Rust reader against ``json.loads`` + the pydantic models.

The same sessions, written as OpenCode exports (a session per line), OpenAI
chat lines, Claude Code files (an event per line, a file per session as
Claude Code keeps them) and one Claude Code file holding every session
(larger than a window: scanned, then read in windows), go through:

* ``read_jsonl`` on 1 and 2 threads (Rust: parse, map, Arrow);
* the Python reference: ``json.loads`` per line, ``Session.model_validate``
  (or the chat adapter), then ``Transcript.from_sessions``, i.e.
  ``formats.read`` + the columnar conversion;
* ``json.loads`` of every line alone: the floor of any Python reader.

Size: ``CTXCOMPACT_BENCH_SESSIONS`` / 8 sessions x 500 parts per file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SESSIONS
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.formats.reader import jsonl_files, read_jsonl
from ctxcompact.transcript import Transcript, sessions_to_table

FORMATS = ("opencode", "openai-chat", "claude-code", "claude-code-one-file")


def _format(name: str) -> str:
    return name.removesuffix("-one-file")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("jsonl")
    table = generate_table(max(8, SESSIONS // 8), 500, seed=11, mean_output_chars=1500)
    sessions = Transcript(table).to_sessions()
    out = {}
    for fmt in FORMATS:
        out[fmt] = folder / f"sessions.{fmt}.jsonl"
        if fmt == "claude-code":
            out[fmt].mkdir()
            for s in sessions:
                formats.write([s], out[fmt] / f"{s.id}.jsonl", fmt)
        else:
            formats.write(sessions, out[fmt], _format(fmt))
    return out


def _info(benchmark: Any, path: Path, rows: int) -> None:
    benchmark.extra_info["rows"] = rows  # part rows produced
    size = sum(p.stat().st_size for p in jsonl_files(path))
    benchmark.extra_info["bytes"] = size  # MB/s of JSONL read


def reference(path: Path, fmt: str) -> int:
    sessions = [s for p in jsonl_files(path) for s in formats.read(p, fmt)]
    return sessions_to_table(sessions).num_rows


def json_loads_only(path: Path) -> int:
    lines = 0
    for p in jsonl_files(path):
        with p.open("rb") as f:
            lines += sum(1 for line in f if json.loads(line) is not None)
    return lines


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("threads", [1, 2])
def test_ingest(benchmark: Any, files: dict[str, Path], fmt: str, threads: int) -> None:
    benchmark.group = f"ingest-{fmt}"
    # A warm-up round first, for both this and json.loads: the first call in a
    # process also pays one-time costs (the thread pool, the heap's growth).
    result = benchmark.pedantic(read_jsonl, (files[fmt], _format(fmt)), {"threads": threads},
                                rounds=3, warmup_rounds=1)  # fmt: skip
    _info(benchmark, files[fmt], result.table.num_rows)
    assert result.rejected == [] and result.table.num_rows > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_json_loads_only(benchmark: Any, files: dict[str, Path], fmt: str) -> None:
    benchmark.group = f"ingest-{fmt}"
    lines = benchmark.pedantic(json_loads_only, (files[fmt],), rounds=3, warmup_rounds=1)
    _info(benchmark, files[fmt], read_jsonl(files[fmt], _format(fmt)).table.num_rows)
    assert lines > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_ingest_reference_pydantic(benchmark: Any, files: dict[str, Path], fmt: str) -> None:
    benchmark.group = f"ingest-{fmt}"
    rows = benchmark.pedantic(reference, (files[fmt], _format(fmt)), rounds=1)
    _info(benchmark, files[fmt], rows)
    assert rows == read_jsonl(files[fmt], _format(fmt)).table.num_rows


def read_whole(path: Path) -> int:
    """The one Claude Code file in a single window: read whole, as the last release did."""
    from ctxcompact.formats import iter_jsonl

    return sum(r.table.num_rows for r in iter_jsonl(path, "claude-code", threads=1,
                                                    window_bytes=1 << 40))  # fmt: skip


def test_ingest_claude_code_read_whole(benchmark: Any, files: dict[str, Path]) -> None:
    fmt = "claude-code-one-file"
    benchmark.group = f"ingest-{fmt}"
    rows = benchmark.pedantic(read_whole, (files[fmt],), rounds=3, warmup_rounds=1)
    _info(benchmark, files[fmt], rows)
    assert rows == read_jsonl(files[fmt], "claude-code").table.num_rows
