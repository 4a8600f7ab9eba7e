"""A grid of policies replayed over a corpus: points, streaming, the front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from builders import read_run
from ctxcompact.errors import (
    ConfigError,
    DatasetError,
    DuplicateSessionError,
    InputTypeError,
    NonContiguousError,
)
from ctxcompact.policy import Policy
from ctxcompact.tuning import load_grid, tune
from ctxcompact.tuning.grid import points, results
from ctxcompact.tuning.prices import Price

run = read_run


SESSIONS = [run(f"s{n}", 6 + 3 * n, 3_000 + 500 * n) for n in range(5)]
GRID = {"preset": ["opencode", "swe-agent"], "mask_first": [False, True],
        "context": [12_000, 40_000]}  # fmt: skip
LIMITS = {"context": 0, "output": 1_000}


def test_every_point_is_replayed_and_the_front_is_not_dominated() -> None:
    result = tune(SESSIONS, GRID, limits=LIMITS, model="claude-sonnet-4", workers=1)
    table = result.points.to_pylist()
    assert len(table) == 8 and len({r["policy"] for r in table}) == 8
    calls = sum(len(cc.replay(s, limits={"context": 40_000, "output": 1_000}).calls)
                for s in SESSIONS)  # fmt: skip
    assert all(r["sessions"] == 5 and r["calls"] == calls for r in table)
    assert result.calls.num_rows == 8 * calls
    # each point is what replay gives for its options
    one = result.summaries["preset=swe-agent,mask_first=True,context=12000"]
    alone = cc.replay(
        SESSIONS,
        "swe-agent",
        limits={"context": 12_000, "output": 1_000},
        config=cc.CompactionConfig(mask_first=True),
        model="claude-sonnet-4",
    )
    for key in ("prompt_tokens", "cached_tokens", "compactions", "retention", "cost"):
        assert one[key] == alone.summary[key], key
    # masking changes the prompts: the grid is not replaying one policy eight times
    assert len({r["prompt_tokens"] for r in table}) >= 3
    front = result.front().to_pylist()
    assert front and result.axis == "cost"
    fits = [r for r in table if r["feasible"]]
    assert all(r["feasible"] is (r["over_window"] == 0) for r in table)
    for r in table:
        beaten = any(o["cost"] <= r["cost"] and o["retention"] >= r["retention"]
                     and (o["cost"] < r["cost"] or o["retention"] > r["retention"])
                     for o in fits)  # fmt: skip
        assert r["pareto"] is (r["feasible"] and not beaten)


def test_parquet_streamed_in_small_batches_on_two_workers_gives_the_same(tmp_path: Path) -> None:
    table = cc.Transcript.from_sessions(SESSIONS).to_arrow()
    ids = table["session_id"].cast(pa.string())
    for n, group in enumerate([["s0", "s1"], ["s2", "s3", "s4"]]):
        pq.write_table(table.filter(pc.is_in(ids, value_set=pa.array(group))),
                       tmp_path / f"part-{n}.parquet")  # fmt: skip
    grid = {"preset": ["swe-agent"], "mask_first": [True], "context": [12_000]}
    seen: list[int] = []
    streamed = tune(tmp_path, grid, limits=LIMITS, workers=2, batch_rows=7,
                    progress=lambda done, total: seen.append(done))  # fmt: skip
    memory = tune(SESSIONS, grid, limits=LIMITS, workers=1)
    key = ["session_id", "call"]
    assert streamed.calls.sort_by([(k, "ascending") for k in key]).equals(
        memory.calls.sort_by([(k, "ascending") for k in key])
    )
    assert len(seen) > 2 and seen[-1] == 5 and seen == sorted(seen)


def test_a_toml_grid(tmp_path: Path) -> None:
    path = tmp_path / "grid.toml"
    path.write_text('[grid]\npreset = ["swe-agent", "aggressive"]\nkeep_recent = [2, 8]\n'
                    "context = 50000\n")  # fmt: skip
    assert load_grid(path) == {"preset": ["swe-agent", "aggressive"], "keep_recent": [2, 8],
                               "context": [50000]}  # fmt: skip
    names = [p.name for p in points(path, limits=LIMITS)]
    assert names[0] == "preset=swe-agent,keep_recent=2,context=50000" and len(names) == 4
    assert points(path, limits=LIMITS)[1].config.policy.keep_recent == 8


@pytest.mark.parametrize(
    ("grid", "match"),
    [
        ({"keep_recnt": [1]}, "grid option 'keep_recnt' does not exist"),
        ({"keep_recent": [-1], "context": [50_000]}, "grid point keep_recent=-1"),
        ({"preset": ["nope"], "context": [50_000]}, "grid point preset=nope"),
        ({"keep_recent": []}, "has no values"),
        ({}, "the grid is empty"),
        ({"keep_recent": [1]}, "no context window"),
        ({"context": [20_000]}, "leaves no usable input window"),
        # 0 is unlimited elsewhere; tune --context takes at least 1, and so does a grid
        ({"context": [0, 50_000]}, "grid point context=0: context 0 is no window"),
        ({"mask_first": ["yes"], "context": [50_000]}, "mask_first takes true or false"),
        # a value listed twice made two points of one name, counted twice
        (
            {"preset": ["swe-agent", "swe-agent"], "context": [50_000]},
            "grid option 'preset' lists 'swe-agent' twice",
        ),
        ({"keep_recent": [5, 5.0], "context": [50_000]}, "lists 5 and 5.0, one value"),
        (
            {"protect": [1, "1"], "context": [50_000]},
            "grid point protect=1,context=50000: another point has this name",
        ),
    ],
)
def test_bad_grids(grid: dict[str, Any], match: str) -> None:
    limits = None if "context" not in grid else {"context": 0, "output": 1_000}
    if match == "leaves no usable input window":
        limits = None
    with pytest.raises(ConfigError, match=match):
        tune(SESSIONS, grid, limits=limits, workers=1)


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"workers": "2"}, ConfigError, "workers must be an integer of at least 1, got str '2'"),
        ({"workers": 0}, ConfigError, "workers must be an integer of at least 1, got int 0"),
        ({"workers": 1.5}, ConfigError, "workers must be an integer"),
        ({"batch_rows": 0}, ConfigError, "batch_rows must be an integer of at least 1"),
        ({"model": 5}, ConfigError, r"model must be a model name \(str\)"),
        ({"model": "x", "prices": [1]}, ConfigError, "prices must be a dict"),
        ({"config": 5}, ConfigError, "tune: config takes a CompactionConfig"),
        ({"corpus": None}, InputTypeError, r"tune takes .*\(corpus\), got NoneType"),
        ({"corpus": 5}, InputTypeError, r"\(corpus\), got int"),
        # was "the grid is empty"
        ({"grid": [1, 2]}, ConfigError, "a grid is a dict of option -> list of values, or the "
                                        "path of a TOML file, got list"),
        # was pydantic's raw dump ("1 validation error for Policy ... errors.pydantic.dev")
        ({"grid": {"protect": [-5], "context": [8000]}}, ConfigError,
         r"^grid point protect=-5,context=8000: invalid policy option protect: Input should be "
         r"greater than or equal to 0$"),
    ],
)  # fmt: skip
def test_tune_names_an_argument_of_the_wrong_kind(
    kwargs: dict[str, Any], error: type[Exception], says: str
) -> None:
    args = {"corpus": SESSIONS[:1], "grid": {"context": [50_000]}, "limits": LIMITS,
            "workers": 1, **kwargs}  # fmt: skip
    with pytest.raises(error, match=says):
        tune(**args)


def test_tune_takes_a_dict_of_config_fields() -> None:
    grid = {"preset": ["swe-agent"], "context": [12_000]}
    as_dict = tune(SESSIONS[:2], grid, limits=LIMITS, config={"mask_first": True}, workers=1)
    as_config = tune(SESSIONS[:2], grid, limits=LIMITS,
                     config=cc.CompactionConfig(mask_first=True), workers=1)  # fmt: skip
    assert as_dict.points.equals(as_config.points)


def test_a_bad_policy_value_in_a_grid_file_reads_as_in_a_policy_file(tmp_path: Path) -> None:
    grid = tmp_path / "g.toml"
    grid.write_text("protect = [-5]\ncontext = [8000]\n")
    with pytest.raises(ConfigError) as caught:
        points(grid)
    assert str(caught.value) == (
        f"{grid}: grid point protect=-5,context=8000: invalid policy "
        "option protect: Input should be greater than or equal to 0"
    )
    assert "pydantic" not in str(caught.value)


def test_bad_grid_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("preset = [")
    with pytest.raises(ConfigError, match=f"{bad}: not a TOML grid"):
        load_grid(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("window = [1]")
    with pytest.raises(ConfigError, match=f"{unknown}: grid option 'window' does not exist"):
        load_grid(unknown)
    with pytest.raises(ConfigError, match="cannot read the grid"):
        load_grid(tmp_path / "missing.toml")
    # keys beside a [grid] table were dropped without a word
    for text, stray in (('context = [32000]\n[grid]\npreset = ["swe-agent"]\n', "context"),
                        ('[grid]\npreset = ["swe-agent"]\n[other]\nx = 1\n', "other")):  # fmt: skip
        mixed = tmp_path / "mixed.toml"
        mixed.write_text(text)
        with pytest.raises(ConfigError, match=f"{stray} is outside the \\[grid\\] table"):
            load_grid(mixed)


def test_bad_corpora(tmp_path: Path) -> None:
    grid = {"context": [50_000]}
    no_calls = cc.Session.model_validate({"info": {"id": "q"}, "messages": [
        {"info": {"id": "u", "role": "user"}, "parts": [{"id": "t", "type": "text", "text": "hi"}]},
    ]})  # fmt: skip
    with pytest.raises(DatasetError, match="no assistant message"):
        tune([no_calls], grid, limits=LIMITS, workers=1)
    table = cc.Transcript.from_sessions(SESSIONS[:2]).to_arrow()
    ids = table["session_id"].cast(pa.string())
    pieces = [table.filter(pc.equal(ids, s)) for s in ("s0", "s1", "s0")]
    pq.write_table(pa.concat_tables(pieces[:2]), tmp_path / "a.parquet")
    pq.write_table(pieces[2], tmp_path / "b.parquet")
    with pytest.raises(NonContiguousError, match=r"b\.parquet: session 's0' appears again"):
        tune(tmp_path, grid, limits=LIMITS, workers=1)
    with pytest.raises(NonContiguousError, match=r"session 's0' appears again at row \d+"):
        tune(pa.concat_tables(pieces), grid, limits=LIMITS, workers=1)
    # one file given twice (or its folder and itself): named, not a session "appearing again"
    for twice in ([tmp_path / "a.parquet"] * 2, [tmp_path, tmp_path / "a.parquet"]):
        with pytest.raises(DuplicateSessionError, match=r"a\.parquet: this file is given twice"):
            tune(twice, grid, limits=LIMITS, workers=1)
    with pytest.raises(ConfigError, match="tune takes Sessions"):
        tune([1, 2], grid, limits=LIMITS, workers=1)
    with pytest.raises(DuplicateSessionError, match="'s1' is repeated: sessions 1 and 2"):
        tune([SESSIONS[0], SESSIONS[1], SESSIONS[1]], grid, limits=LIMITS, workers=1)


def test_a_table_is_cut_between_sessions_for_the_workers() -> None:
    from ctxcompact.tuning.grid import _table_chunks

    table = cc.Transcript.from_sessions(SESSIONS).to_arrow()
    located = list(_table_chunks(table, 10))
    pieces = [piece for piece, _ in located]
    assert [locate(0) for _, locate in located] == [
        (None, sum(p.num_rows for p in pieces[:i])) for i in range(len(pieces))
    ]  # each piece knows where it starts
    assert len(pieces) > 2 and sum(p.num_rows for p in pieces) == table.num_rows
    seen: list[str] = []
    for piece in pieces:
        ids = pc.unique(piece["session_id"].cast(pa.string())).to_pylist()
        assert not set(ids) & set(seen)  # no session in two pieces
        seen += ids
    assert seen == [s.id for s in SESSIONS]
    # one table in pieces on two threads gives what the sessions give on one
    grid = {"preset": ["swe-agent"], "mask_first": [True], "context": [12_000]}
    split = tune(table, grid, limits=LIMITS, workers=2, batch_rows=10)
    whole = tune(SESSIONS, grid, limits=LIMITS, workers=1)
    order = [("session_id", "ascending"), ("call", "ascending")]
    assert split.calls.sort_by(order).equals(whole.calls.sort_by(order))


def test_a_replay_never_changes_its_input() -> None:
    before = [s.model_dump() for s in SESSIONS]
    cc.replay(SESSIONS, "aggressive", limits={"context": 12_000, "output": 1_000},
              config=cc.CompactionConfig(mask_first=True))  # fmt: skip
    tune(SESSIONS, GRID, limits=LIMITS, workers=1)
    assert [s.model_dump() for s in SESSIONS] == before


def test_a_points_policy_is_not_changed_by_the_configs_prune_fields(tmp_path: Path) -> None:
    """A grid point's policy options run as given (the base config's legacy
    prune_* fields used to override them under the point's name)."""
    toml = tmp_path / "tight.toml"
    toml.write_text("[compaction]\nprune_protect = 10000\nprune_minimum = 0\n")
    tight = cc.CompactionConfig.from_file(toml)
    grid = {"preset": ["swe-agent"], "mask_first": [True], "context": [12_000]}
    (point,) = points(grid, config=tight, limits=LIMITS)
    assert point.config.prune_policy() == Policy.preset("swe-agent")
    with_fields = tune(SESSIONS, grid, limits=LIMITS, config=tight, workers=1)
    without = tune(SESSIONS, grid, limits=LIMITS, workers=1)
    assert with_fields.points.equals(without.points)
    adjusted = tune(SESSIONS, {**grid, "protect": [10_000]},
                    limits=LIMITS, workers=1)  # fmt: skip
    assert adjusted.points["prompt_tokens"] != without.points["prompt_tokens"]
    # A point without policy options replays the config's policy, fields applied.
    (own,) = points({"mask_first": [True], "context": [12_000]}, config=tight, limits=LIMITS)
    assert own.config.prune_policy() == tight.prune_policy() != Policy()


def test_points_of_one_name_are_never_summed_together() -> None:
    grid = {"preset": ["swe-agent"], "context": [12_000]}
    one = points(grid, limits=LIMITS)
    calls = tune(SESSIONS, grid, limits=LIMITS, workers=1).calls
    with pytest.raises(ConfigError, match="two grid points are named 'preset=swe-agent"):
        results(calls, one * 2, None, None)


def test_a_point_without_preset_changes_the_configurations_policy() -> None:
    # was Policy defaults (OpenCode) with the options, whatever the config's policy
    cfg = cc.CompactionConfig(policy="swe-agent")
    point = points({"clear_inputs": [True], "context": [64_000]}, config=cfg)[0]
    want = Policy.preset("swe-agent").model_copy(update={"clear_inputs": True})
    assert point.config.policy == want
    named = points({"preset": ["opencode"], "clear_inputs": [True], "context": [64_000]},
                   config=cfg)[0]  # fmt: skip
    assert named.config.policy == Policy.preset("opencode").model_copy(
        update={"clear_inputs": True}
    )


def handmade(points_: list[Any], rows: dict[str, tuple[int, int, int, bool]]) -> pa.Table:
    """A per-call table of one call per point: (prompt tokens, removed facts,
    kept facts, over the window)."""
    from ctxcompact.tuning.grid import GRID_CALL_SCHEMA

    out = []
    for p in points_:
        prompt, removed, kept, over = rows[p.name]
        out.append({"policy": p.name, "session_id": "s", "call": 0, "message_id": "a",
                    "prompt_tokens": prompt, "cached_tokens": 0, "written_tokens": prompt,
                    "output_tokens": 10, "compacted": bool(removed), "reason": None,
                    "summary_input_tokens": 0, "summary_output_tokens": 0,
                    "baseline_prompt_tokens": 5_000, "baseline_cached_tokens": 0,
                    "removed_facts": removed, "kept_facts": kept, "lost": [],
                    "retention": kept / removed if removed else 1.0,
                    "over_window": over})  # fmt: skip
    return pa.Table.from_pylist(out, schema=GRID_CALL_SCHEMA)


def test_points_over_the_window_are_never_on_the_front() -> None:
    """A point whose prompts the model would refuse was on the front, and
    being cheaper with a higher retention pushed a feasible point off it."""
    grid = {"context": [3_000, 16_000, 64_000]}
    pts = points(grid, limits=LIMITS)
    calls = handmade(pts, {"context=3000": (1_000, 10, 8, True),
                           "context=16000": (4_000, 10, 3, False),
                           "context=64000": (5_000, 0, 0, False)})  # fmt: skip
    for price, model in ((None, None), (Price(1.0, 0.1, 1.25, 5.0), "m")):
        result = results(calls, pts, price, model)
        rows = {r["policy"]: r for r in result.points.to_pylist()}
        assert [rows[n]["feasible"] for n in rows] == [False, True, True]
        assert rows["context=3000"]["pareto"] is False
        # the feasible 16k point is the cheapest feasible one: on the front
        assert rows["context=16000"]["pareto"] is True
        assert result.front()["policy"].to_pylist() == ["context=16000", "context=64000"]
        assert result.axis == ("prompt_tokens" if price is None else "cost")


def test_a_front_with_every_point_over_the_window_is_empty() -> None:
    grid = {"context": [3_000, 4_000]}
    pts = points(grid, limits=LIMITS)
    calls = handmade(pts, {"context=3000": (1_000, 10, 8, True),
                           "context=4000": (1_200, 10, 8, True)})  # fmt: skip
    result = results(calls, pts, None, None)
    assert result.front().num_rows == 0 and result.points["feasible"].to_pylist() == [False] * 2


def test_a_ray_task_replays_on_the_cpus_it_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune_dataset``'s tasks ask Ray for ``num_cpus`` and their engine runs
    on that many threads (not on every core of the node, which tasks side by
    side would oversubscribe). Ray itself is stood in for: the map runs here."""
    from types import SimpleNamespace

    import ctxcompact.batch.ray_files as ray_files
    import ctxcompact.tuning.grid as grid_module
    from ctxcompact.tuning import tune_dataset

    table = cc.Transcript.from_sessions(SESSIONS).to_arrow()
    asked: dict[str, Any] = {}
    used: list[int | None] = []

    class Dataset:  # what tune_dataset uses of a Ray Dataset
        def map_batches(self, fn: Any, **options: Any) -> Any:
            asked.update(options)
            self.out = fn(table)
            return self

        def to_arrow_refs(self) -> list[pa.Table]:
            return [self.out]

    engine = grid_module.engine_calls

    def recording(*args: Any, threads: int | None = None, **kw: Any) -> pa.Table:
        used.append(threads)
        return engine(*args, threads=threads, **kw)

    monkeypatch.setattr(ray_files, "ray_module", lambda: SimpleNamespace(get=lambda refs: refs))
    monkeypatch.setattr(grid_module, "engine_calls", recording)
    grid = {"preset": ["opencode", "swe-agent"], "context": [12_000]}
    got = tune_dataset(Dataset(), grid, limits=LIMITS, model="claude-sonnet-4", num_cpus=3)
    assert asked["num_cpus"] == 3
    assert used == [3, 3]  # one engine call per point, each on the task's 3 CPUs
    local = tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1)
    assert got.points.equals(local.points)


@pytest.mark.parametrize("as_sent", ["last-2", "auto"])
def test_tune_dataset_takes_as_sent_as_tune_does(monkeypatch: pytest.MonkeyPatch,
                                                 as_sent: str) -> None:  # fmt: skip
    """``tune_dataset(..., as_sent=...)``: the same baseline per call and the
    same choice per run as ``tune``; the choices come back beside the calls,
    two blocks of whole sessions each choosing for its own runs (Ray stood
    in for; tests/batch/test_ray.py runs it on Ray)."""
    from types import SimpleNamespace

    import ctxcompact.batch.ray_files as ray_files
    from ctxcompact.tuning import tune_dataset

    halves = [cc.Transcript.from_sessions(SESSIONS[:1]).to_arrow(),
              cc.Transcript.from_sessions(SESSIONS[1:]).to_arrow()]  # fmt: skip

    class Dataset:  # what tune_dataset uses of a Ray Dataset, in two blocks
        def map_batches(self, fn: Any, **options: Any) -> Any:
            self.out = [fn(t) for t in halves]
            return self

        def to_arrow_refs(self) -> list[pa.Table]:
            return self.out

    monkeypatch.setattr(ray_files, "ray_module", lambda: SimpleNamespace(get=lambda refs: refs))
    grid = {"preset": ["opencode", "swe-agent"], "context": [12_000]}
    got = tune_dataset(Dataset(), grid, limits=LIMITS, model="claude-sonnet-4", as_sent=as_sent)
    local = tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1,
                 as_sent=as_sent)  # fmt: skip
    order = [(k, "ascending") for k in ("policy", "session_id", "call")]
    assert got.calls.sort_by(order).equals(local.calls.sort_by(order))
    assert got.points.equals(local.points)
    assert got.as_sent == local.as_sent and len(got.as_sent or []) == len(SESSIONS)
    plain = tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1)
    assert plain.as_sent is None
    if as_sent == "last-2":
        assert {c["as_sent"] for c in got.as_sent or []} == {"last-2"}


def test_tune_takes_points_already_made() -> None:
    grid = {"preset": ["opencode", "swe-agent"], "context": [20_000]}
    made = points(grid, limits=LIMITS)
    from_points = tune(SESSIONS, made, model="claude-sonnet-4", workers=1)
    from_grid = tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1)
    assert from_points.points.equals(from_grid.points)
    assert from_points.calls.equals(from_grid.calls)
    # a point holds its own window: limits beside points would be ignored
    with pytest.raises(ConfigError, match="limits") as e:
        tune(SESSIONS, made, limits=LIMITS, workers=1)
    assert e.value.column == "limits"
    with pytest.raises(ConfigError, match="grid"):  # an empty list is no grid
        tune(SESSIONS, [], workers=1)
