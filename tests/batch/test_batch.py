"""compact_batch and the Parquet streaming runner."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import ctxcompact as cc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.compact import REPORT_SCHEMA, compact_batch
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import DatasetError, MissingColumnError, NonContiguousError, SchemaError


@pytest.fixture(scope="module")
def table() -> pa.Table:
    # big outputs so that prune selects parts in many sessions
    return generate_table(30, 300, seed=5, mean_output_chars=6000)


def test_report_matches_the_scans_session_by_session(table: pa.Table) -> None:
    report, parts = compact_batch(table, now_ms=42, parts=True)
    assert report.schema == REPORT_SCHEMA and report.num_rows == 30
    result = cc.prune(table)
    marked = cc.mark_pruned(table, result, now_ms=42)
    visible = cc.filter_pivot(marked)
    expected = cc.estimate_messages(visible).sessions.to_pylist()
    after = {r["session_id"]: r["tokens"] for r in expected}
    assert report["tokens_after"].to_pylist() == [
        after[s] for s in report["session_id"].to_pylist()
    ]
    assert sum(report["tokens_pruned"].to_pylist()) == result.pruned > 0
    assert parts.equals(visible.to_arrow())
    full = {r["session_id"]: r["tokens"] for r in cc.estimate_messages(table).sessions.to_pylist()}
    assert report["tokens_before"].to_pylist() == [
        full[s] for s in report["session_id"].to_pylist()
    ]
    assert sum(report["visible_parts"].to_pylist()) == parts.num_rows
    assert all(a <= b for a, b in zip(report["tokens_after"].to_pylist(),
                                      report["tokens_before"].to_pylist()))  # fmt: skip
    # outputs untouched, marks set at now_ms
    marked_rows = pa.compute.equal(parts["compacted_at"], 42)
    assert pa.compute.sum(marked_rows).as_py() == sum(report["pruned_parts"].to_pylist())


def test_deterministic_and_batch_input(table: pa.Table) -> None:
    a = compact_batch(table, now_ms=1)
    b = compact_batch(table.to_batches()[0] if table.num_rows == len(table.to_batches()[0])
                      else table.combine_chunks().to_batches()[0], now_ms=1)  # fmt: skip
    assert a.equals(b)


def test_overflow_flags_and_model_input() -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "opencode_session.json"
    session = cc.Session.model_validate(json.loads(fixture.read_text()))
    table = cc.Transcript.from_sessions([session]).to_arrow()
    report = compact_batch(table, limits={"context": 50, "output": 10}, model_input=True)
    row = report.to_pylist()[0]
    assert row["overflow_before"] is True
    visible = cc.filter_pivot(session)
    assert json.loads(row["model_input"]) == cc.to_model_messages(visible)
    assert compact_batch(table)["overflow_before"].to_pylist() == [None]


def write_split(table: pa.Table, folder: Path, cuts: list[int]) -> None:
    folder.mkdir()
    bounds = [0, *cuts, table.num_rows]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(table.slice(lo, hi - lo), folder / f"part-{i:03}.parquet")


# one row per batch is the slowest case by far: under `pytest -m slow`
@pytest.mark.parametrize("batch_rows", [pytest.param(1, marks=pytest.mark.slow), 97, 1000, 10**7])
def test_streaming_equals_one_big_batch(table: pa.Table, tmp_path: Path, batch_rows: int) -> None:
    # files cut in the middle of sessions: a session may span files
    cuts, sessions = [1234, 5000, 7777], 30
    if batch_rows == 1:
        # One row per batch costs a batch per row: the whole sessions up to row
        # 1000 (several, each spanning batches; the cuts still inside sessions).
        ids = table.column("session_id").to_pylist()
        end = next(i for i in range(1000, len(ids)) if ids[i] != ids[i - 1])
        table, cuts = table.slice(0, end), [123, 500, 777]
        sessions = len(set(ids[:end]))
        assert sessions >= 3 and all(ids[c] == ids[c - 1] for c in cuts)
    write_split(table, tmp_path / "in", cuts)
    stats = compact_parquet(tmp_path / "in", tmp_path / "out.parquet", batch_rows=batch_rows,
                            report_path=tmp_path / "report.parquet", now_ms=42)  # fmt: skip
    whole, parts = compact_batch(table, now_ms=42, parts=True)
    assert pq.read_table(tmp_path / "report.parquet").equals(whole)
    assert pq.read_table(tmp_path / "out.parquet").equals(parts)
    assert (stats.files, stats.sessions, stats.parts_in, stats.parts_out) == (
        4, sessions, table.num_rows, parts.num_rows)  # fmt: skip


def test_memory_stays_bounded_by_the_batch_and_the_largest_session(tmp_path: Path) -> None:
    big = generate_table(150, 300, seed=9, mean_output_chars=200)
    pq.write_table(big, tmp_path / "big.parquet", row_group_size=500)
    batch_rows = 500
    assert big.num_rows >= 10 * batch_rows
    stats = compact_parquet(tmp_path / "big.parquet", tmp_path / "out.parquet",
                            batch_rows=batch_rows)  # fmt: skip
    counts = pa.compute.value_counts(big["session_id"].cast(pa.string()))
    largest = max(counts.field("counts").to_pylist())
    # what is held at once never grows with the dataset: one batch plus one session
    assert stats.peak_rows <= batch_rows + largest < big.num_rows // 10
    assert stats.sessions == 150 and stats.batches > 10


def test_truncated_file_is_named_and_nothing_is_written(table: pa.Table, tmp_path: Path) -> None:
    write_split(table, tmp_path / "in", [4000])
    victim = tmp_path / "in" / "part-001.parquet"
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.raises(DatasetError, match=r"part-001\.parquet"):
        compact_parquet(tmp_path / "in", tmp_path / "out.parquet",
                        report_path=tmp_path / "r.parquet")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no output, no temp file


def test_wrong_schemas(table: pa.Table, tmp_path: Path) -> None:
    pq.write_table(table.drop_columns(["status"]), tmp_path / "nostatus.parquet")
    with pytest.raises(MissingColumnError, match=r"nostatus\.parquet") as e:
        compact_parquet(tmp_path / "nostatus.parquet", tmp_path / "o.parquet")
    assert e.value.column == "status"
    folder = tmp_path / "mixed"
    folder.mkdir()
    pq.write_table(table.slice(0, 100), folder / "a.parquet")
    bad = table.slice(100).set_column(
        table.schema.get_field_index("compacted_at"), "compacted_at",
        pa.array(["x"] * (table.num_rows - 100)))  # fmt: skip
    pq.write_table(bad, folder / "b.parquet")
    with pytest.raises(SchemaError, match=r"b\.parquet"):
        compact_parquet(folder, tmp_path / "o.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"no \.parquet files"):
        compact_parquet(tmp_path / "empty", tmp_path / "o.parquet")
    with pytest.raises(FileNotFoundError, match=r"missing\.parquet"):  # unreadable: not bad data
        compact_parquet(tmp_path / "missing.parquet", tmp_path / "o.parquet")


def test_session_split_across_non_adjacent_files_is_an_error(
    table: pa.Table, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    first = table.slice(0, 400)
    pq.write_table(first, folder / "a.parquet")
    pq.write_table(table.slice(400, 2000), folder / "b.parquet")
    pq.write_table(first.slice(0, 10), folder / "c.parquet")  # session 0 again
    with pytest.raises(NonContiguousError, match=r"c\.parquet") as e:
        compact_parquet(folder, tmp_path / "o.parquet")
    assert e.value.session_id == table["session_id"][0].as_py()


@pytest.mark.parametrize("batch_rows", [3, 1000, 10**7])
def test_reappearing_session_names_the_file_it_reappears_in(
    table: pa.Table, tmp_path: Path, batch_rows: int
) -> None:
    # Issue 10 item 15: the session reappears in file 3 followed by another session;
    # the error named file 2 (where the carried rows came from).
    sessions = table["session_id"].to_pylist()
    bounds = [sessions.index(s) for s in dict.fromkeys(sessions)] + [len(sessions)]
    one = table.slice(bounds[0], bounds[1] - bounds[0])  # session 0
    two = table.slice(bounds[1], bounds[3] - bounds[1])  # sessions 1-2
    three = table.slice(bounds[3], bounds[4] - bounds[3])  # session 3
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(one, folder / "1.parquet")
    pq.write_table(two, folder / "2.parquet")
    pq.write_table(pa.concat_tables([one.slice(0, 5), three]), folder / "3.parquet")
    with pytest.raises(NonContiguousError, match=r"3\.parquet: session") as e:
        compact_parquet(folder, tmp_path / "o.parquet", batch_rows=batch_rows)
    assert e.value.session_id == sessions[0]
    assert "2.parquet" not in str(e.value)
    assert not (tmp_path / "o.parquet").exists()


def test_a_100_mb_tool_output(tmp_path: Path) -> None:
    huge = "y" * (100 * 1024 * 1024)

    def said(mid: str) -> dict[str, object]:
        return {"info": {"id": mid, "role": "user"},
                "parts": [{"id": f"p{mid}", "type": "text", "text": "go"}]}  # fmt: skip

    session = cc.Session.model_validate({"info": {"id": "big"}, "messages": [
        said("m1"),
        {"info": {"id": "m2", "role": "assistant", "parentID": "m1", "finish": "stop"},
         "parts": [{"id": "p2", "type": "tool", "tool": "read", "callID": "c",
                    "state": {"status": "completed", "input": {}, "output": huge}}]},
        said("m3"), said("m4"),
    ]})  # fmt: skip
    pq.write_table(cc.Transcript.from_sessions([session]).to_arrow(), tmp_path / "big.parquet")
    del huge, session
    stats = compact_parquet(tmp_path / "big.parquet", tmp_path / "o.parquet",
                            report_path=tmp_path / "r.parquet")  # fmt: skip
    row = pq.read_table(tmp_path / "r.parquet").to_pylist()[0]
    # 26 214 400 tokens counted, more than 40k protected, so it is pruned (and kept on disk)
    assert row["tokens_pruned"] == 26_214_400 and row["pruned_parts"] == 1
    out = pq.read_table(tmp_path / "o.parquet")
    assert len(out["output"][1].as_py()) == 100 * 1024 * 1024
    assert out["compacted_at"][1].as_py() is not None and stats.sessions == 1


def test_a_report_only_run_never_reads_the_outputs_once_counted(
    table: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxcompact.batch import parquet
    from ctxcompact.scans import with_output_units

    pq.write_table(table, tmp_path / "plain.parquet")
    pq.write_table(with_output_units(table).to_arrow(), tmp_path / "counted.parquet")
    read: list[list[str] | None] = []
    batches = parquet._batches

    def spy(path: Path, batch_rows: int, columns: list[str] | None = None) -> object:
        read.append(columns)
        return batches(path, batch_rows, columns)

    monkeypatch.setattr(parquet, "_batches", spy)
    full = compact_parquet(tmp_path / "plain.parquet", None, report_path=tmp_path / "a.parquet")
    lean = compact_parquet(tmp_path / "counted.parquet", None, report_path=tmp_path / "b.parquet")
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    assert read[0] is None and read[1] is not None and "output" not in read[1]
    assert lean.bytes_read < 0.2 * full.bytes_read and lean.parts_out is None
    assert not (tmp_path / "None").exists()
    # a report that must read outputs (described placeholders) reads them
    describe = cc.CompactionConfig(policy={"preset": "swe-agent", "placeholder": "describe"})
    compact_parquet(
        tmp_path / "counted.parquet", None, describe, report_path=tmp_path / "c.parquet"
    )
    assert read[2] is None
    with pytest.raises(DatasetError, match="nothing to write"):
        compact_parquet(tmp_path / "counted.parquet", None)


def test_a_table_without_outputs_needs_its_counted_lengths(table: pa.Table) -> None:
    from ctxcompact.scans import with_output_units

    lean = with_output_units(table).to_arrow().drop_columns(["output"])
    assert compact_batch(lean).equals(compact_batch(table))
    for config, needed in [
        (cc.CompactionConfig(estimate_method="ceil-bytes"), "no counts made with it"),
        (cc.CompactionConfig(policy={"preset": "swe-agent", "truncate_output": 50}),
         "truncate_output"),
    ]:  # fmt: skip
        with pytest.raises(MissingColumnError, match=needed):
            compact_batch(lean, config)
    with pytest.raises(MissingColumnError, match="output"):
        compact_batch(table.drop_columns(["output"]))  # no lengths either


@pytest.mark.parametrize("limits", [{"context": 30_000}, {"context": 10_000, "output": 10_000}])
def test_batch_refuses_a_window_with_no_input_room(limits: dict[str, int], tmp_path: Path) -> None:
    """compact_batch flagged every session overflow_before (a usable window of
    30,000 - 32,000 < 0) and compact_parquet wrote that report, where the CLI
    and the Compactor refuse the window: now the same ConfigError, before any
    output is written."""
    from ctxcompact.errors import ConfigError

    table = generate_table(10, 20, seed=5)
    with pytest.raises(ConfigError, match="leaves no usable input window") as e:
        compact_batch(table, limits=limits)
    assert e.value.column == "context"
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    report = tmp_path / "report.parquet"
    with pytest.raises(ConfigError, match="leaves no usable input window"):
        compact_parquet(src, tmp_path / "out.parquet", report_path=report, limits=limits)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    # with the output limit given the window has room
    fits = compact_batch(table, limits={**limits, "output": 4_000})
    assert not any(fits.column("overflow_before").to_pylist())
