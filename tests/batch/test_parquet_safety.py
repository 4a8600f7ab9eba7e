"""compact_parquet's outputs are replaced whole or not at all, its errors name
the file row, and a report-only run reads the text whenever a count is missing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ctxcompact import compact_parquet
from ctxcompact._atomic import NotRegularFileError
from ctxcompact.batch.compact import compact_batch
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import UnknownValueError
from ctxcompact.scans import with_output_units


def test_a_target_that_cannot_be_replaced_fails_before_any_output_is(tmp_path: Path) -> None:
    pq.write_table(generate_table(4, 100, seed=1), tmp_path / "in.parquet")
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous run")
    (tmp_path / "report.parquet").mkdir()  # e.g. a folder an earlier Ray run wrote
    with pytest.raises(NotRegularFileError):
        compact_parquet(tmp_path / "in.parquet", out, report_path=tmp_path / "report.parquet")
    assert out.read_bytes() == b"previous run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "out.parquet",
                                                          "report.parquet"]  # fmt: skip


@pytest.mark.parametrize("batch_rows", [100, 65_536])
def test_an_error_names_the_row_in_the_file(tmp_path: Path, batch_rows: int) -> None:
    table = generate_table(4, 200, seed=3)
    roles = table["role"].cast(pa.string()).to_pylist()
    roles[517] = "robot"
    bad = table.set_column(table.schema.get_field_index("role"), "role", pa.array(roles))
    pq.write_table(bad, tmp_path / "in.parquet", row_group_size=150)
    with pytest.raises(UnknownValueError) as e:
        compact_parquet(tmp_path / "in.parquet", None, report_path=tmp_path / "r.parquet",
                        batch_rows=batch_rows)  # fmt: skip
    assert e.value.row == 517 and "row 517" in str(e.value) and "in.parquet" in str(e.value)


def test_report_only_reads_the_text_where_a_count_is_missing(tmp_path: Path) -> None:
    """Null counts as many as null outputs, but in other rows: the text is read."""
    table = with_output_units(generate_table(3, 300, seed=7, mean_output_chars=2000)).to_arrow()
    outputs = table["output"].to_pylist()
    counts = table["output_utf16"].to_pylist()
    nulls = sum(o is None for o in outputs)
    present = [i for i, o in enumerate(outputs) if o is not None][:nulls]
    counts = [None if i in set(present) else c for i, c in enumerate(counts)]
    holed = table.set_column(table.schema.get_field_index("output_utf16"), "output_utf16",
                             pa.array(counts, pa.int64()))  # fmt: skip
    assert holed["output_utf16"].null_count == nulls  # equal null counts, other rows
    pq.write_table(holed, tmp_path / "in.parquet")
    compact_parquet(tmp_path / "in.parquet", None, report_path=tmp_path / "r.parquet", now_ms=1)
    want = compact_batch(table, now_ms=1)
    got = pq.read_table(tmp_path / "r.parquet")
    assert got["tokens_before"].to_pylist() == want["tokens_before"].to_pylist()
