"""Ray Data on a multi-node cluster (two Ray nodes on this machine): the batches run
on both nodes and the result equals compact_batch's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.synthetic import generate_table

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
# slow: a Ray instance per module, the slowest tests of the suite; `pytest -m slow` runs them.
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),  # one Ray at a time: both modules in one process
]
from ctxcompact.batch.ray_data import compact_dataset, compact_parquet_on_ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and a worker node, one CPU each: work must cross nodes."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, configure_logging=False)
    # Ray Data packs small tasks on the driver's node; a cluster job spreads them.
    context = ray.data.DataContext.get_current()
    before = (context.scheduling_strategy, context.enable_progress_bars)
    context.scheduling_strategy, context.enable_progress_bars = "SPREAD", False
    yield c
    context.scheduling_strategy, context.enable_progress_bars = before
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    folder = tmp_path_factory.mktemp("cluster")
    table = generate_table(16, 200, seed=5, mean_output_chars=4000)
    ids = table["session_id"].cast(pa.string())
    sessions = pc.unique(ids).to_pylist()
    for n in range(8):  # 8 files of whole sessions: 8 read tasks to spread
        group = pa.array(sessions[n * 2 : (n + 1) * 2])
        pq.write_table(table.filter(pc.is_in(ids, value_set=group)), folder / f"part-{n}.parquet")
    return folder, table


def test_two_nodes_compute_what_compact_batch_does(
    cluster: Cluster, files: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    folder, table = files
    assert sum(1 for n in ray.nodes() if n["Alive"]) == 2
    # one block per file (each holds whole sessions): eight tasks to spread
    ds = ray.data.from_arrow([pq.read_table(f) for f in sorted(folder.glob("*.parquet"))])

    def node_of(batch: pa.Table) -> dict[str, Any]:  # nested: Ray ships it by value
        time.sleep(0.2)  # long enough that the tasks overlap
        return {"node": [ray.get_runtime_context().get_node_id()] * batch.num_rows}

    nodes = set(ds.map_batches(node_of, batch_format="pyarrow", batch_size=None).unique("node"))
    assert len(nodes) == 2  # the batches ran on both nodes
    got = pa.concat_tables(ray.get(compact_dataset(ds, now_ms=9).to_arrow_refs()))
    expected = compact_batch(table, now_ms=9)
    assert got.sort_by("session_id").equals(expected.sort_by("session_id").cast(got.schema))
    out = tmp_path / "out"
    compact_parquet_on_ray(str(folder), str(out), now_ms=9)
    written = pq.read_table(out)
    _, parts = compact_batch(table, now_ms=9, parts=True)  # marked, from each pivot on

    def marks(t: pa.Table) -> dict[str, Any]:
        return dict(zip(t["part_id"].to_pylist(), t["compacted_at"].to_pylist(), strict=True))

    assert written.num_rows == parts.num_rows and marks(written) == marks(parts)
    assert pc.sum(pc.is_valid(written["compacted_at"])).as_py() > 0
