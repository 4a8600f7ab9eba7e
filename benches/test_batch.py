"""Batch path benchmarks, side by side in one run.

* ``compact_parquet`` against the floor of a bare pyarrow Parquet read + write
  of the same files with the same batch size (target: compaction adds at most
  50% on top of that floor).
* ``estimate_chat_messages`` / ``select_split`` against LangChain's
  ``count_tokens_approximately`` / ``trim_messages`` on the same real
  messages (tau-bench); note LangChain counts characters / 4 per message plus
  fixed extras, ctxcompact counts UTF-16 units as OpenCode does.

Size: ``CTXCOMPACT_BENCH_SESSIONS`` / 4 sessions x 500 parts for Parquet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SESSIONS
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.live.split import select_split
from ctxcompact.scans.chat import estimate_chat_messages

BATCH_ROWS = 32_768
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dataset")
    sessions = max(8, SESSIONS // 4)
    for i in range(4):  # four files of whole sessions
        table = generate_table(sessions // 4, 500, seed=100 + i, mean_output_chars=1500)
        ids = [f"f{i}-{s}" for s in table["session_id"].to_pylist()]
        table = table.set_column(0, "session_id", pa.array(ids))
        pq.write_table(table, folder / f"part-{i}.parquet")
    return folder


@pytest.fixture(scope="module")
def counted(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same files with each output's length counted once (output_utf16)."""
    from ctxcompact.scans import with_output_units

    folder = tmp_path_factory.mktemp("counted")
    for path in sorted(dataset.glob("*.parquet")):
        pq.write_table(with_output_units(pq.read_table(path)).to_arrow(), folder / path.name)
    return folder


def _info(benchmark: Any, folder: Path) -> None:
    files = sorted(folder.glob("*.parquet"))
    benchmark.extra_info["rows"] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    benchmark.extra_info["bytes"] = sum(
        pq.ParquetFile(f).read().nbytes for f in files
    )  # in-memory Arrow size, as MB/s elsewhere


def read_write_floor(folder: Path, out: Path) -> int:
    writer = None
    rows = 0
    for path in sorted(folder.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            if writer is None:
                writer = pq.ParquetWriter(out, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    assert writer is not None
    writer.close()
    return rows


@pytest.mark.benchmark(group="batch")
def test_parquet_read_write_floor(benchmark: Any, dataset: Path, tmp_path: Path) -> None:
    _info(benchmark, dataset)
    rows = benchmark.pedantic(read_write_floor, (dataset, tmp_path / "copy.parquet"), rounds=3)
    assert rows == benchmark.extra_info["rows"]


@pytest.mark.benchmark(group="batch")
def test_compact_parquet(benchmark: Any, dataset: Path, tmp_path: Path) -> None:
    _info(benchmark, dataset)
    stats = benchmark.pedantic(
        compact_parquet, (dataset, tmp_path / "out.parquet"),
        {"batch_rows": BATCH_ROWS, "report_path": tmp_path / "report.parquet", "now_ms": 1},
        rounds=3,
    )  # fmt: skip
    benchmark.extra_info["sessions"] = stats.sessions
    assert stats.parts_in == benchmark.extra_info["rows"]


@pytest.mark.benchmark(group="batch")
def test_compact_parquet_counted(benchmark: Any, counted: Path, tmp_path: Path) -> None:
    """A full run on the counted files: parts and report written."""
    _info(benchmark, counted)
    stats = benchmark.pedantic(
        compact_parquet, (counted, tmp_path / "out.parquet"),
        {"batch_rows": BATCH_ROWS, "report_path": tmp_path / "report.parquet", "now_ms": 1},
        rounds=3,
    )  # fmt: skip
    benchmark.extra_info["bytes_read"] = stats.bytes_read
    assert stats.parts_in == benchmark.extra_info["rows"]


@pytest.mark.benchmark(group="batch")
def test_compact_parquet_report_only(benchmark: Any, counted: Path, tmp_path: Path) -> None:
    """The report alone from the counted files: the output column is never read."""
    _info(benchmark, counted)
    stats = benchmark.pedantic(
        compact_parquet, (counted, None),
        {"batch_rows": BATCH_ROWS, "report_path": tmp_path / "report.parquet", "now_ms": 1},
        rounds=3,
    )  # fmt: skip
    benchmark.extra_info["bytes_read"] = stats.bytes_read
    benchmark.extra_info["file_bytes_read_share"] = round(_file_share(counted), 4)
    assert stats.parts_in == benchmark.extra_info["rows"] and stats.parts_out is None


def _file_share(folder: Path) -> float:
    """The share of the files' (compressed) bytes in the columns a report reads."""
    from ctxcompact.batch.parquet import _report_columns

    read = total = 0
    for path in sorted(folder.glob("*.parquet")):
        file = pq.ParquetFile(path)
        wanted = set(_report_columns([file.metadata], cc.CompactionConfig()) or [])
        for g in range(file.metadata.num_row_groups):
            group = file.metadata.row_group(g)
            for c in range(group.num_columns):
                size = group.column(c).total_compressed_size
                total += size
                read += size if group.column(c).path_in_schema in wanted else 0
    return read / total


@pytest.fixture(scope="module")
def chats() -> list[list[dict[str, Any]]]:
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if not path.exists():
        pytest.skip("../shared/data is not beside this checkout")
    return [run["traj"] for run in json.loads(path.read_text())]


def _lc(chats: list[list[dict[str, Any]]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return [convert_to_messages(c) for c in chats]


@pytest.mark.benchmark(group="chat-estimate")
def test_estimate_ctxcompact(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    benchmark.extra_info["rows"] = sum(len(c) for c in chats)
    total = benchmark(lambda: sum(estimate_chat_messages(c) for c in chats))
    assert total > 0


@pytest.mark.benchmark(group="chat-estimate")
def test_estimate_langchain(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    lc = pytest.importorskip("langchain_core.messages.utils")
    messages = _lc(chats)
    benchmark.extra_info["rows"] = sum(len(c) for c in chats)
    total = benchmark(lambda: sum(lc.count_tokens_approximately(m) for m in messages))
    ours = sum(estimate_chat_messages(c) for c in chats)
    assert 0.5 < total / ours < 2  # same ballpark, different heuristics


@pytest.mark.benchmark(group="chat-trim")
def test_trim_ctxcompact(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    benchmark.extra_info["rows"] = sum(len(c) for c in chats)
    splits = benchmark(lambda: [select_split(c, keep_tokens=1000) for c in chats])
    assert all(s.tail[0]["role"] != "tool" for s in splits if s.tail)


@pytest.mark.benchmark(group="chat-trim")
def test_trim_langchain(benchmark: Any, chats: list[list[dict[str, Any]]]) -> None:
    lc = pytest.importorskip("langchain_core.messages.utils")
    messages = _lc(chats)
    benchmark.extra_info["rows"] = sum(len(c) for c in chats)
    kept = benchmark(lambda: [
        lc.trim_messages(m, max_tokens=1000, token_counter="approximate", strategy="last",
                         include_system=True, start_on="human")
        for m in messages
    ])  # fmt: skip
    assert len(kept) == len(messages)


def _separate_scans(table: pa.Table) -> None:
    """What ``compact_batch`` ran before the one-pass scan: five native calls."""
    result = cc.prune(table)
    marked = cc.mark_pruned(table, result, now_ms=1) if len(result) else cc.Transcript(table)
    visible = cc.filter_pivot(marked)
    cc.estimate_messages(marked)
    cc.estimate_messages(visible)


@pytest.mark.benchmark(group="batch-one-pass")
def test_compact_batch_separate_scans(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.pedantic(_separate_scans, (table,), rounds=3)


@pytest.mark.benchmark(group="batch-one-pass")
def test_compact_batch_one_pass(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    report = benchmark.pedantic(cc.compact_batch, (table,), {"now_ms": 1}, rounds=3)
    assert report.num_rows == len(cc.Transcript(table).session_ids())


def _plan_separately(table: pa.Table) -> None:
    """What ``plan(table, shape="chat")`` answers, by the separate calls."""
    from ctxcompact import _core

    result = cc.prune(table)
    marked = cc.mark_pruned(table, result, now_ms=1).to_arrow()
    cc.scans.pivot_mask(marked)
    _core.sent_messages(marked)
    _core.render_chat(cc.filter_pivot(marked).to_arrow())


@pytest.mark.benchmark(group="plan")
def test_plan_separate_calls(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.pedantic(_plan_separately, (table,), rounds=3)


@pytest.mark.benchmark(group="plan")
def test_plan_one_call(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    plan = benchmark.pedantic(cc.plan, (table,), {"shape": "chat"}, rounds=3)
    assert plan.parts.num_rows == table.num_rows
