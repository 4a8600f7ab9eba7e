"""Arrow across the core's boundary (rust/src/python/arrow.rs): every shape
of the Arrow PyCapsule interface comes in, pyarrow objects come out, and
neither direction copies a buffer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pyarrow as pa
import pytest
from ctxcompact import _core
from ctxcompact.errors import DatasetError
from tables import build, prune_rows


class OnlyArray:
    """Exports ``__arrow_c_array__`` and nothing else (no pyarrow type)."""

    def __init__(self, array: Any) -> None:
        self._array = array

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        return self._array.__arrow_c_array__(requested_schema)


class OnlyStream:
    """Exports ``__arrow_c_stream__`` and nothing else."""

    def __init__(self, data: Any) -> None:
        self._data = data

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._data.__arrow_c_stream__(requested_schema)


STRINGS = pa.chunked_array([["a", "bb", None], [], ["cccc"]], pa.large_string())


@pytest.mark.parametrize(
    "values",
    [
        STRINGS,
        STRINGS.combine_chunks(),
        OnlyArray(STRINGS.combine_chunks()),
        OnlyStream(STRINGS),
    ],
    ids=["chunked", "array", "capsule-array", "capsule-stream"],
)
def test_an_array_argument_of_every_shape(values: Any) -> None:
    out = _core.estimate_tokens_array(values)
    assert isinstance(out, pa.ChunkedArray)
    assert out.type == pa.int64()
    assert out.to_pylist() == _core.estimate_tokens_array(STRINGS.combine_chunks()).to_pylist()
    assert out.null_count == 1


def test_an_empty_stream_gives_an_empty_typed_column() -> None:
    out = _core.estimate_tokens_array(pa.chunked_array([], pa.string()))
    assert isinstance(out, pa.ChunkedArray)
    assert (out.type, out.num_chunks, len(out)) == (pa.int64(), 0, 0)


@pytest.mark.parametrize(
    "shape",
    ["table", "batch", "capsule-array", "capsule-stream", "reader"],
)
def test_a_table_argument_of_every_shape(shape: str) -> None:
    table = build(prune_rows())
    want = [a.to_pylist() for a in _core.prune(table)]
    batch = table.combine_chunks().to_batches()[0]
    data = {
        "table": table,
        "batch": batch,
        "capsule-array": OnlyArray(batch),
        "capsule-stream": OnlyStream(table),
        "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
    }[shape]
    out = _core.prune(data)
    assert all(isinstance(a, pa.Array) for a in out)
    assert [a.to_pylist() for a in out] == want


def test_an_error_inside_an_input_stream_is_a_dataset_error() -> None:
    table = build(prune_rows())

    def batches() -> Any:
        yield from table.to_batches()
        raise OSError("the disk went away")

    reader = pa.RecordBatchReader.from_batches(table.schema, batches())
    with pytest.raises(DatasetError, match="the disk went away"):
        _core.prune(reader)


def test_a_struct_array_with_nulls_is_not_a_table() -> None:
    rows = pa.array([{"x": 1}, None], pa.struct([("x", pa.int64())]))
    with pytest.raises(ValueError, match="non-zero null count"):
        _core.check_table(OnlyArray(rows))


# What the child measures: the peak resident memory a call adds (an import
# that copied its input would add the input's size), and the bytes pyarrow
# allocates while it takes a result over (an export copied into pyarrow
# would allocate the result's size).
ZERO_COPY = textwrap.dedent(
    """
    import json, resource
    import numpy as np
    import pyarrow as pa
    from ctxcompact import _core

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    size = 256 << 20
    big = pa.LargeStringArray.from_buffers(
        1,
        pa.py_buffer(np.array([0, size], np.int64)),
        pa.py_buffer(np.full(size, ord("x"), np.uint8)),
    )
    address = big.buffers()[2].address
    before = peak()
    _core.estimate_tokens_array(big)
    imported = peak() - before

    rows = 4 << 20
    short = pa.StringArray.from_buffers(
        rows,
        pa.py_buffer(np.arange(0, rows + 1, dtype=np.int32)),
        pa.py_buffer(np.full(rows, ord("y"), np.uint8)),
    )
    pooled = pa.total_allocated_bytes()
    out = _core.estimate_tokens_array(short)
    exported = pa.total_allocated_bytes() - pooled
    print(json.dumps({
        "size": size, "imported": imported, "same_input": big.buffers()[2].address == address,
        "result": out.nbytes, "exported": exported,
    }))
    """
)


def test_arrow_crosses_the_boundary_without_a_copy() -> None:
    child = subprocess.run(
        [sys.executable, "-c", ZERO_COPY], capture_output=True, text=True, check=True
    )
    seen = json.loads(child.stdout)
    # a 256 MiB string read in place: the call adds well under a copy's size
    assert seen["imported"] < seen["size"] // 4, seen
    assert seen["same_input"]
    # a 32 MiB int64 result taken over by pyarrow without allocating it again
    assert seen["result"] == 8 * (4 << 20)
    assert seen["exported"] < seen["result"] // 4, seen
