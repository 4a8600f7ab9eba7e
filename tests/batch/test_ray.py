"""Ray Data: compact_batch through map_batches on a local Ray instance."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import (
    DatasetError,
    NonContiguousError,
    OutputConflictError,
    UnknownValueError,
)

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
# Ray's own modules warn about their deprecated settings; they are not ours to fix.
# slow: a Ray instance per module, the slowest tests of the suite; `pytest -m slow` runs them.
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),  # one Ray at a time: both modules in one process
]
from ctxcompact.batch.ray_data import (  # noqa: E402
    compact_dataset,
    compact_parquet_on_ray,
    compact_ray_dataset,
    count_dataset,
    count_parquet_on_ray,
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    folder = tmp_path_factory.mktemp("ray")
    table = generate_table(24, 200, seed=11, mean_output_chars=5000)
    ids = table["session_id"].cast(pa.string())
    sessions = pc.unique(ids).to_pylist()
    for n in range(4):  # 4 files of whole sessions
        group = pa.array(sessions[n * 6 : (n + 1) * 6])
        pq.write_table(table.filter(pc.is_in(ids, value_set=group)), folder / f"part-{n}.parquet")
    return folder, table


def sort(t: pa.Table) -> pa.Table:
    return t.sort_by("session_id")


def by_part(t: pa.Table) -> pa.Table:
    """``t``'s rows ordered by session, message and part id."""
    keys = pa.table({k: t[k].cast(pa.string()) for k in ("session_id", "message_id", "part_id")})
    return t.take(pc.sort_indices(keys, [(k, "ascending") for k in keys.column_names]))


def per_file(folder: Path) -> Any:
    """A Dataset of one block per file, each file's rows in order (Ray
    Data's reader may hand a file's rows over out of order)."""
    return ray.data.from_arrow([pq.read_table(f) for f in sorted(folder.glob("*.parquet"))])


def test_map_batches_matches_compact_batch(local_ray: None, files: tuple[Path, pa.Table]) -> None:
    folder, table = files
    ds = per_file(folder)
    report = compact_dataset(ds, now_ms=5).to_arrow_refs()
    got = pa.concat_tables(ray.get(report))
    expected = compact_batch(table, now_ms=5)
    assert sort(got).equals(sort(expected).cast(got.schema))
    by_path = pa.concat_tables(ray.get(compact_ray_dataset(str(folder), now_ms=5).to_arrow_refs()))
    assert sort(by_path).equals(sort(got))
    parts = compact_dataset(ds, now_ms=5, parts=True)
    assert parts.count() == compact_batch(table, now_ms=5, parts=True)[1].num_rows


def test_parquet_in_and_out(local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path) -> None:
    folder, table = files
    compact_parquet_on_ray(str(folder), str(tmp_path / "parts"), report=str(tmp_path / "report"),
                           now_ms=5)  # fmt: skip
    report = pq.read_table(tmp_path / "report")
    assert report.num_rows == 24
    assert sum(report["tokens_pruned"].to_pylist()) == cc.prune(table).pruned
    # The outputs mirror the source file for file, each file's rows in its
    # order: what compact_batch gives that file alone, row for row.
    names = sorted(f.name for f in folder.glob("*.parquet"))
    for out in ("parts", "report"):
        assert sorted(f.name for f in (tmp_path / out).iterdir()) == names
    for name in names:
        sessions, parts = compact_batch(pq.read_table(folder / name), now_ms=5, parts=True)
        assert pq.read_table(tmp_path / "parts" / name).equals(parts)
        assert pq.read_table(tmp_path / "report" / name).equals(sessions)


def test_a_rerun_replaces_the_outputs(
    local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    # Issue 10 item 16: Ray Data appends by default, so a second run doubled the report.
    folder, table = files
    parts, report = tmp_path / "parts", tmp_path / "report"
    for _ in range(2):
        compact_parquet_on_ray(str(folder), str(parts), report=str(report), now_ms=5)
    assert pq.read_table(report).num_rows == 24
    assert pq.read_table(parts).num_rows == compact_batch(table, now_ms=5, parts=True)[1].num_rows
    with pytest.raises(DatasetError, match="already exists") as e:
        compact_parquet_on_ray(str(folder), str(tmp_path / "new"), report=str(report),
                               if_exists="error")  # fmt: skip
    assert str(report) in str(e.value)
    assert not (tmp_path / "new").exists()  # refused before any work


def test_a_session_split_between_blocks_is_detected(local_ray: None, tmp_path: Path) -> None:
    table = generate_table(3, 100, seed=2)
    pq.write_table(table.slice(0, 50), tmp_path / "a.parquet")
    pq.write_table(table.slice(50), tmp_path / "b.parquet")  # cuts session 0 in two
    # one dataset per file, so the two halves land in different blocks
    halves = ray.data.from_arrow(table.slice(0, 50)).union(ray.data.from_arrow(table.slice(50)))
    with pytest.raises(NonContiguousError) as e:
        compact_dataset(halves)
    assert e.value.session_id == table["session_id"][0].as_py()
    # The parts too: each half compacted alone would be a silently wrong session.
    with pytest.raises(NonContiguousError) as e:
        compact_dataset(halves, parts=True)
    assert e.value.session_id == table["session_id"][0].as_py()
    # And a grid: each half replayed alone would be two wrong runs.
    from ctxcompact.tuning import tune_dataset

    with pytest.raises(NonContiguousError, match="split between blocks") as e:
        tune_dataset(halves, {"preset": ["opencode"], "context": [60_000]})
    assert e.value.session_id == table["session_id"][0].as_py()


def test_a_large_output_split_by_ray_is_not_taken_for_a_split_session(
    local_ray: None, files: tuple[Path, pa.Table]
) -> None:
    # Ray cuts a task's output into blocks of at most target_max_block_size:
    # a session across two output blocks of one input block is whole (only
    # two input blocks prove a split), so it is neither refused nor changed.
    folder, table = files
    context = ray.data.DataContext.get_current()
    before = context.target_max_block_size
    context.target_max_block_size = 64 * 1024
    try:
        parts = compact_dataset(per_file(folder), now_ms=5, parts=True).materialize()
        assert parts.num_blocks() > 4  # the outputs were cut (4 input blocks)
        got = pa.concat_tables(ray.get(parts.to_arrow_refs()))
        from ctxcompact.tuning import tune, tune_dataset

        grid = {"preset": ["swe-agent"], "mask_first": [True], "context": [60_000]}
        limits = {"context": 0, "output": 4_000}
        tuned = tune_dataset(per_file(folder), grid, limits=limits, model="gpt-4o")
    finally:
        context.target_max_block_size = before
    assert "_ctxcompact_block" not in got.column_names
    expected = compact_batch(table, now_ms=5, parts=True)[1]
    assert by_part(got).equals(by_part(expected.cast(got.schema)))
    local = tune(table, grid, limits=limits, model="gpt-4o", workers=1)
    order = [(k, "ascending") for k in ("policy", "session_id", "call")]
    assert tuned.calls.sort_by(order).equals(local.calls.sort_by(order))
    assert tuned.points.equals(local.points)


def test_a_session_out_of_place_in_a_block_is_refused_not_regrouped() -> None:
    """A block's order cannot say which piece of a session comes first (Ray's
    reader may hand a file's last rows over first): never regrouped."""
    from ctxcompact.batch.ray_data import _compact

    table = generate_table(3, 100, seed=2)
    first, second = table.slice(0, 50), table.slice(50)  # session 0 cut in two
    block = pa.concat_tables([second, first])  # the later rows first
    with pytest.raises(NonContiguousError, match="out of order") as e:
        _compact(block)
    assert e.value.session_id == table["session_id"][0].as_py()
    # Whole sessions, joined in any order, are compacted as they are.
    ids = table["session_id"].cast(pa.string())
    one, rest = table.filter(pc.equal(ids, ids[0])), table.filter(pc.not_equal(ids, ids[0]))
    assert sort(_compact(pa.concat_tables([rest, one]))).equals(sort(compact_batch(table)))


def test_sessions_split_between_files_are_never_compacted_silently(
    local_ray: None, tmp_path: Path
) -> None:
    """Each file read whole: a session in two files is refused before any
    work, by every path entry point, naming both files; counting, a row at
    a time, mirrors them."""
    from ctxcompact.transcript import count_exact_parts
    from ctxcompact.tuning import tune_dataset

    table = generate_table(4, 150, seed=5, mean_output_chars=3000)
    (tmp_path / "in").mkdir()  # the outputs outside it (inside, it would read them next time)
    halves = table.slice(0, table.num_rows // 2), table.slice(table.num_rows // 2)
    for n, half in enumerate(halves):
        pq.write_table(half, tmp_path / "in" / f"in-{n}.parquet")
    cut = halves[1]["session_id"][0].as_py()
    assert cut == halves[0]["session_id"][-1].as_py()  # the generator's sessions are long
    source = str(tmp_path / "in")
    for run in (
        lambda: compact_parquet_on_ray(source, str(tmp_path / "out"), report=str(tmp_path / "r")),
        lambda: compact_ray_dataset(source),
        lambda: tune_dataset(
            source,
            {"preset": ["opencode"], "context": [60_000]},
            model="gpt-4o",
            limits={"context": 0, "output": 4_000},
        ),
    ):
        with pytest.raises(NonContiguousError, match="split between files") as e:
            run()
        assert e.value.session_id == cut
        assert "in-0.parquet" in str(e.value) and "in-1.parquet" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # nothing written
    count_parquet_on_ray(source, str(tmp_path / "counted"), "o200k")
    for n, half in enumerate(halves):
        got = pq.read_table(tmp_path / "counted" / f"in-{n}.parquet")
        assert got.equals(count_exact_parts(half, "o200k"))


def test_a_policy_grid_on_ray_equals_the_local_one(
    local_ray: None, files: tuple[Path, pa.Table]
) -> None:
    from ctxcompact.tuning import tune, tune_dataset

    folder, table = files
    grid = {"preset": ["swe-agent", "aggressive"], "mask_first": [True], "context": [60_000]}
    limits = {"context": 0, "output": 4_000}
    on_ray = tune_dataset(str(folder), grid, limits=limits, model="gpt-4o")
    local = tune(table, grid, limits=limits, model="gpt-4o", workers=1)
    order = [(k, "ascending") for k in ("policy", "session_id", "call")]
    assert on_ray.calls.num_rows > 200
    assert on_ray.calls.sort_by(order).equals(local.calls.sort_by(order))
    assert on_ray.points.equals(local.points)


@pytest.mark.parametrize("as_sent", ["last-3", "auto"])
def test_a_grid_on_ray_with_an_as_sent_baseline_equals_the_local_one(
    local_ray: None, files: tuple[Path, pa.Table], as_sent: str
) -> None:
    """``tune_dataset(..., as_sent=...)`` as ``tune``: the same baseline per
    call and the same choice per run (each task chooses for its own runs)."""
    from ctxcompact.tuning import tune, tune_dataset

    folder, table = files
    # One policy: the as-sent choice is per run, whatever the grid (a grid of two
    # on Ray is test_a_policy_grid_on_ray_equals_the_local_one).
    grid = {"preset": ["swe-agent"], "mask_first": [True], "context": [60_000]}
    limits = {"context": 0, "output": 4_000}
    on_ray = tune_dataset(
        per_file(folder), grid, limits=limits, model="gpt-4o", as_sent=as_sent
    )  # a Dataset: its blocks as given

    local = tune(table, grid, limits=limits, model="gpt-4o", workers=1, as_sent=as_sent)
    order = [(k, "ascending") for k in ("policy", "session_id", "call")]
    assert on_ray.calls.sort_by(order).equals(local.calls.sort_by(order))
    assert on_ray.points.equals(local.points)
    assert on_ray.as_sent is not None and local.as_sent is not None
    key = lambda c: c["session_id"]  # noqa: E731
    assert sorted(on_ray.as_sent, key=key) == sorted(local.as_sent, key=key)
    assert len(on_ray.as_sent) == len(set(table["session_id"].to_pylist()))
    if as_sent == "last-3":  # the baseline is the as-sent one, not the history whole
        plain = tune(table, grid, limits=limits, model="gpt-4o", workers=1)
        got, whole = (pc.sum(t.calls["baseline_prompt_tokens"]).as_py() for t in (on_ray, plain))
        assert got < whole


def _claude_code_run(path: Path, sid: str, break_at: int) -> None:
    """A Claude Code session that wrote 1-hour cache entries, its calls 10
    minutes apart (past the 5-minute lifetime, within the hour), each
    reading the previous prompt except call ``break_at`` (the runtime broke
    its cache: only the system prompt read)."""
    import json

    def event(kind: str, uuid: str, seconds: int, **more: object) -> dict[str, object]:
        stamp = f"2026-02-11T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z"
        return {"type": kind, "uuid": uuid, "sessionId": sid, "isSidechain": False,
                "timestamp": stamp, **more}  # fmt: skip

    lines = [event("user", "u0", 0, message={"role": "user", "content": "fix the bug " * 300})]
    prompt = 3_000
    for i in range(8):
        read = 2_000 if i in (0, break_at) else prompt
        prompt += 900
        usage = {"input_tokens": 3, "cache_read_input_tokens": read, "output_tokens": 40,
                 "cache_creation_input_tokens": prompt - read,
                 "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                    "ephemeral_1h_input_tokens": prompt - read}}  # fmt: skip
        message = {
            "id": f"msg_{i}",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "usage": usage,
            "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "f"}}
            ],
        }
        lines.append(event("assistant", f"a{i}", 600 * i + 1, requestId=f"r{i}",
                           message=message))  # fmt: skip
        lines.append(
            event(
                "user",
                f"r{i}",
                600 * i + 2,
                message={
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{i}",
                            "content": "code line\n" * 400,
                        }
                    ],
                },
            )
        )
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_a_grid_on_ray_keeps_each_runs_cache_lifetime_and_breaks_as_the_local_one(
    local_ray: None, tmp_path: Path
) -> None:
    """A run that wrote 1-hour entries keeps them an hour on Ray too, and its
    recorded cache break is every point's, as in ``tune``."""
    from ctxcompact.tuning import replay, tune, tune_dataset

    folder = tmp_path / "runs"
    folder.mkdir()
    for k in range(2):
        _claude_code_run(tmp_path / f"s{k}.jsonl", f"cc-{k}", break_at=4 + k)
        table = cc.read_sessions(tmp_path / f"s{k}.jsonl").table
        pq.write_table(table, folder / f"s{k}.parquet")
    table = cc.read_sessions([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"]).table
    grid = {"preset": ["opencode", "swe-agent"]}
    limits = {"context": 200_000, "output": 8_000}
    model = "claude-sonnet-4-5"
    on_ray = tune_dataset(str(folder), grid, limits=limits, model=model)
    local = tune(table, grid, limits=limits, model=model, workers=1)
    order = [(k, "ascending") for k in ("policy", "session_id", "call")]
    assert on_ray.calls.sort_by(order).equals(local.calls.sort_by(order))
    assert on_ray.points.equals(local.points)
    # priced as replay prices each run (its lifetime, its break)
    alone = replay(table, "swe-agent", limits=limits, model=model).summary
    assert alone["cache_break_calls"] == 2
    assert on_ray.summaries["preset=swe-agent"]["baseline_cost"] == pytest.approx(
        alone["baseline_cost"])  # fmt: skip


def test_a_failed_rerun_leaves_the_outputs_as_they_were(
    local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    folder, _ = files
    parts, report = tmp_path / "parts", tmp_path / "report"
    compact_parquet_on_ray(str(folder), str(parts), report=str(report), now_ms=5)
    before = (pq.read_table(parts), pq.read_table(report))
    bad = tmp_path / "bad"
    bad.mkdir()
    table = generate_table(3, 100, seed=2)
    roles = pa.array(["robot"] * table.num_rows, table.schema.field("role").type)
    pq.write_table(table.set_column(table.schema.get_field_index("role"), "role", roles),
                   bad / "a.parquet")  # fmt: skip
    with pytest.raises(UnknownValueError, match="robot"):
        compact_parquet_on_ray(str(bad), str(parts), report=str(report), now_ms=5)
    assert pq.read_table(parts).equals(before[0]) and pq.read_table(report).equals(before[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "parts", "report"]


def test_a_part_read_twice_where_files_join_is_refused(local_ray: None, tmp_path: Path) -> None:
    """Overlapping shards (the next file starts with the first's last row):
    one block holds the same part twice, which would be counted twice."""
    from ctxcompact.errors import DuplicateSessionError

    table = generate_table(3, 60, seed=2)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.slice(table.num_rows - 1), tmp_path / "b.parquet")
    last = table.slice(table.num_rows - 1).to_pylist()[0]
    ds = per_file(tmp_path).repartition(1)  # one block, as Ray may join them
    for parts in (False, True):
        with pytest.raises(DuplicateSessionError) as e:
            compact_dataset(ds, now_ms=5, parts=parts)
        assert e.value.session_id == last["session_id"] and last["part_id"] in str(e.value)
    with pytest.raises(DuplicateSessionError, match=r"b\.parquet"):
        compact_parquet_on_ray(str(tmp_path), str(tmp_path / "_out"), now_ms=5)


def test_a_rerun_keeps_the_outputs_modes_and_refuses_a_read_only_one(
    local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """As the CLI and compact_parquet: a replaced output keeps its modes (a
    private one stays private), and one holding a read-only file is never
    replaced (ReadOnlyFileError naming it, before any work)."""
    import stat

    from ctxcompact._atomic import ReadOnlyFileError

    folder, _ = files
    parts, report = tmp_path / "parts", tmp_path / "report"
    compact_parquet_on_ray(str(folder), str(parts), report=str(report), now_ms=5)
    for out in (parts, report):
        out.chmod(0o700)
        for f in out.iterdir():
            f.chmod(0o600)
    compact_parquet_on_ray(str(folder), str(parts), report=str(report), now_ms=5)

    def modes(out: Path) -> set[int]:
        return {stat.S_IMODE(f.stat().st_mode) for f in out.iterdir()}

    for out in (parts, report):
        assert stat.S_IMODE(out.stat().st_mode) == 0o700 and modes(out) == {0o600}
    locked = sorted(report.iterdir())[0]
    locked.chmod(0o444)
    before = sorted(f.name for f in report.iterdir()), pq.read_table(parts)
    with pytest.raises(ReadOnlyFileError, match="read-only") as e:
        compact_parquet_on_ray(str(folder), str(parts), report=str(report), now_ms=5)
    assert e.value.filename == str(locked) and isinstance(e.value, OSError)
    assert (sorted(f.name for f in report.iterdir()), pq.read_table(parts)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts", "report"]


def test_an_output_the_source_folder_would_read_next_time_is_refused(
    local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    # As compact_parquet and the CLI refuse it: the folder's reader would take
    # the compacted parts as more input next run. Was written.
    folder, _ = files
    before = sorted(p.name for p in folder.iterdir())
    for destination, report in ((folder / "parts", None), (tmp_path / "parts", folder / "r"),
                                (folder, None), (folder.parent, None)):  # fmt: skip
        with pytest.raises(OutputConflictError, match=r"is also an input|inside the input folder"):
            compact_parquet_on_ray(str(folder), str(destination),
                                   report=None if report is None else str(report))  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not (tmp_path / "parts").exists()
    # a name the reader skips ('_' or '.') is no input next time
    compact_parquet_on_ray(str(folder), str(folder / "_parts"), now_ms=5)
    assert pq.read_table(folder / "_parts").num_rows > 0
    shutil.rmtree(folder / "_parts")


def test_counting_on_ray_gives_transcript_counts(
    local_ray: None, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    from ctxcompact.config import CompactionConfig
    from ctxcompact.errors import ConfigError
    from ctxcompact.scans import estimate_messages
    from ctxcompact.transcript import count_exact_parts, exact_columns

    folder, _ = files
    small = tmp_path / "small"
    small.mkdir()
    for path in sorted(folder.glob("*.parquet"))[:2]:  # exact counting is slow: two files
        pq.write_table(pq.read_table(path), small / path.name)
    local = count_exact_parts(pq.read_table(small), "o200k")
    # A folder mirroring the source, row for row: what the scans read as is.
    count_parquet_on_ray(str(small), str(tmp_path / "mirror"), "o200k")
    counted = pq.read_table(tmp_path / "mirror")
    assert counted.equals(local)
    assert set(exact_columns(counted.schema)) == {"output_tokens_o200k", "input_tokens_o200k"}
    exact = CompactionConfig(estimate_method="o200k-exact")
    assert estimate_messages(counted, exact).sessions.equals(
        estimate_messages(local, exact).sessions)  # fmt: skip
    # A Dataset: the same counts, in the order Ray gives the rows.
    refs = count_dataset(ray.data.read_parquet(str(small)), "o200k").to_arrow_refs()
    on_ray = pa.concat_tables(ray.get(refs))
    names = ["session_id", "message_id", "part_id", "output_tokens_o200k", "output_hash",
             "input_tokens_o200k", "input_hash"]  # fmt: skip

    def rows(t: pa.Table) -> list[tuple[object, ...]]:
        return sorted(zip(*(t.column(n).to_pylist() for n in names), strict=True))

    assert rows(on_ray) == rows(local)
    for count in (lambda f: count_dataset(ray.data.read_parquet(str(small)), f),
                  lambda f: count_parquet_on_ray(str(small), str(tmp_path / "x"), f)):  # fmt: skip
        with pytest.raises(ConfigError, match="gpt4"):
            count("gpt4")
    assert not (tmp_path / "x").exists()


def test_bad_sources_are_named_before_any_work(local_ray: None, tmp_path: Path) -> None:
    """A folder with no Parquet file, a file that is not Parquet, or one with
    no session column: a ``DatasetError`` naming it; nothing written."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not data")
    with pytest.raises(DatasetError, match=r"no \.parquet files"):
        compact_parquet_on_ray(str(empty), str(tmp_path / "out"))
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(generate_table(2, 20, seed=1), bad / "a.parquet")
    (bad / "b.parquet").write_text("not parquet")
    with pytest.raises(DatasetError, match=r"b\.parquet.*not a readable Parquet file"):
        compact_parquet_on_ray(str(bad), str(tmp_path / "out"))
    (bad / "b.parquet").unlink()
    pq.write_table(pa.table({"x": [1]}), bad / "c.parquet")
    with pytest.raises(DatasetError, match=r"c\.parquet: no column 'session_id'"):
        compact_ray_dataset(str(bad))
    # an output that cannot be written: the OSError naming it, before any work
    from ctxcompact._atomic import OutputNotWritableError

    with pytest.raises(OutputNotWritableError, match="cannot write the output") as e:
        compact_parquet_on_ray(str(bad), "/proc/ctxcompact-out")
    assert e.value.filename == "/proc/ctxcompact-out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "empty"]
