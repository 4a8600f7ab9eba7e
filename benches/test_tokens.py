"""Exact token counts over a column, side by side with tiktoken and
``tokenizers`` in one run, with the estimates and the counted columns.

The texts are every message of the shared runs (tau-bench dialogues and
SWE-agent trajectories: prose, JSON arguments, tool output, code), repeated
to ~20 MB. tiktoken is the reference encoder on the same vocabulary (its
``encode_ordinary_batch`` with its thread pool), built from the core's
built-in files; the byte-level estimates (chars / 4 and the fitted
per-family tables) are there for scale.

    pytest benches/test_tokens.py --benchmark-enable
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from ctxcompact.scans import count_tokens_array, estimate_tokens_array

tiktoken = pytest.importorskip("tiktoken")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "transcripts"
TARGET_BYTES = 20_000_000


def _texts() -> list[str]:
    texts: list[str] = []
    for path in sorted((SHARED / "tau-bench").glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8")):
            texts += [m["content"] for m in run.get("traj") or []
                      if isinstance(m.get("content"), str) and m["content"]]  # fmt: skip
    for path in sorted((SHARED / "swe-agent").rglob("*.traj")):
        traj = json.loads(path.read_text(encoding="utf-8"))
        for m in traj.get("history") or []:
            content = m.get("content")
            if isinstance(content, str) and content:
                texts.append(content)
    return texts


@pytest.fixture(scope="module")
def column(measuring: bool) -> pa.Array:
    """The texts repeated to ~20 MB for timings; once in the smoke run (3.3 MB:
    the repeats hold no text the differential checks have not seen)."""
    texts = _texts()
    if not texts:
        pytest.skip("needs ../shared/data")
    size = sum(len(t.encode()) for t in texts)
    return pa.array(texts * (max(1, TARGET_BYTES // size) if measuring else 1))


def _encoding(name: str) -> Any:
    raw = gzip.decompress((ROOT / "rust" / "assets" / f"{name}.tiktoken.gz").read_bytes())
    lines = [line.split() for line in raw.decode().splitlines() if line]
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in lines}
    import tiktoken_ext.openai_public as public

    with mock.patch.object(public, "load_tiktoken_bpe", lambda *a, **k: ranks):
        return tiktoken.Encoding(**getattr(public, name)())


def _info(benchmark: Any, column: pa.Array) -> None:
    benchmark.extra_info["rows"] = len(column)
    benchmark.extra_info["mb"] = round(column.nbytes / 1e6, 1)


@pytest.mark.benchmark(group="exact-tokens")
@pytest.mark.parametrize("family", ["o200k", "cl100k"])
@pytest.mark.parametrize("threads", [1, 2])
def test_count_tokens_array(benchmark: Any, column: pa.Array, family: str, threads: int) -> None:
    _info(benchmark, column)
    count_tokens_array(column[:10], family)  # type: ignore[arg-type]  # builds the encoder once
    counted = benchmark.pedantic(count_tokens_array, (column, family), {"threads": threads},
                                 rounds=3, warmup_rounds=1)  # fmt: skip
    assert counted.null_count == 0


@pytest.mark.benchmark(group="exact-tokens")
@pytest.mark.parametrize("family", ["o200k", "cl100k"])
def test_tiktoken_batch(benchmark: Any, column: pa.Array, family: str) -> None:
    _info(benchmark, column)
    enc = _encoding(f"{family}_base")
    texts = column.to_pylist()  # tiktoken takes Python strings; not timed

    def run() -> int:
        return sum(len(ids) for ids in enc.encode_ordinary_batch(texts))

    total = benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    assert total == sum(count_tokens_array(column, family).to_pylist())  # type: ignore[arg-type]


#: Vocabularies read from their files, and their own libraries on the same file
#: (tools/estimators/vocab.py: tiktoken with each family's pattern; tokenizers for DeepSeek).
LOADED = ["llama3", "qwen", "tekken", "deepseek"]


def _own_library(family: str) -> Any:
    import sys

    from ctxcompact.scans.vocabularies import package_file

    if package_file(family) is None:
        pytest.skip(f"needs the {family} vocabulary's package (docs/batch.md: exact token counts)")
    sys.path.insert(0, str(ROOT / "tools" / "estimators"))
    import vocab  # type: ignore[import-not-found]

    return vocab.encoder(family)[0]


@pytest.mark.benchmark(group="exact-tokens-loaded")
@pytest.mark.parametrize("family", LOADED)
@pytest.mark.parametrize("threads", [1, 2])
def test_count_loaded_vocabulary(
    benchmark: Any, column: pa.Array, family: str, threads: int
) -> None:
    _own_library(family)
    _info(benchmark, column)
    count_tokens_array(column[:10], family)  # type: ignore[arg-type]  # loads the file once
    counted = benchmark.pedantic(count_tokens_array, (column, family), {"threads": threads},
                                 rounds=3, warmup_rounds=1)  # fmt: skip
    assert counted.null_count == 0


@pytest.mark.benchmark(group="exact-tokens-loaded")
@pytest.mark.parametrize("family", LOADED)
def test_own_library(benchmark: Any, column: pa.Array, family: str) -> None:
    encode = _own_library(family)
    _info(benchmark, column)
    texts = column.to_pylist()  # the libraries take Python strings; not timed

    def run() -> int:
        return sum(len(ids) for ids in encode(texts))

    total = benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    assert total == sum(count_tokens_array(column, family).to_pylist())  # type: ignore[arg-type]


@pytest.mark.benchmark(group="exact-tokens")
@pytest.mark.parametrize("method", ["opencode", "o200k", "o200k-conservative", "deepseek"])
@pytest.mark.parametrize("threads", [1, 2])
def test_byte_level_estimate(benchmark: Any, column: pa.Array, method: str, threads: int) -> None:
    """The estimates on the same column: chars / 4, and a family's fitted table
    (one table load per byte pair, issue 16's >= 1.5 GB/s per core)."""
    _info(benchmark, column)
    result = benchmark.pedantic(estimate_tokens_array, (column, method), {"threads": threads},
                                rounds=5, warmup_rounds=1)  # fmt: skip
    assert result.null_count == 0


@pytest.fixture(scope="module")
def part_table() -> Any:
    """A synthetic part table (~10 MB of outputs), and the same with its
    exact o200k counts kept (``Transcript.count``)."""
    from ctxcompact.batch.synthetic import generate_table
    from ctxcompact.transcript import Transcript

    table = Transcript(generate_table(100, 200, seed=1, mean_output_chars=500))
    return table, table.count("o200k")


@pytest.mark.benchmark(group="exact-columns")
def test_count_columns_once(benchmark: Any, part_table: Any) -> None:
    """Counting the columns once (``Transcript.count``: every output and
    call's arguments, hashed), all cores; MB counts both text columns."""
    import pyarrow.compute as pc

    table = part_table[0]
    arrow = table.to_arrow()
    benchmark.extra_info["rows"] = arrow.num_rows
    benchmark.extra_info["mb"] = round(sum(
        pc.sum(pc.binary_length(arrow.column(c))).as_py() or 0 for c in ("output", "input")
    ) / 1e6, 1)  # fmt: skip
    counted = benchmark.pedantic(table.count, ("o200k",), rounds=3, warmup_rounds=1)
    assert counted.to_arrow().column("input_tokens_o200k").null_count == 0


@pytest.mark.benchmark(group="exact-columns")
@pytest.mark.parametrize("counted", [False, True], ids=["on-the-fly", "counted-column"])
def test_exact_estimate_counted_column(benchmark: Any, part_table: Any, counted: bool) -> None:
    """estimate_messages under o200k-exact: every part counted on the fly vs
    read from the kept columns (outputs and call arguments, each text
    hashed to prove it unchanged)."""
    from ctxcompact.config import CompactionConfig
    from ctxcompact.scans import estimate_messages

    table = part_table[1] if counted else part_table[0]
    config = CompactionConfig(estimate_method="o200k-exact")
    result = benchmark(estimate_messages, table, config)
    assert result.total == estimate_messages(part_table[0], config).total
