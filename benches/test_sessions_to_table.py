"""``sessions_to_table``: the core's mapper against the Python mapper it replaced.

The same sessions (``CTXCOMPACT_BENCH_SESSIONS`` / 16 x 500 parts, outputs of
about 1,500 characters) go through:

* ``sessions_to_table`` on 1 and 2 threads: pydantic serializes each session
  as JSON (``to_json``), the core maps the lines to part rows, counts
  ``output_utf16`` and works out ``tool_target``;
* the Python mapper of the last release (``old_sessions_to_table`` below, on
  ``scans.reference.session_rows``): ``to_export`` and a dict walk per
  session, ``pa.table`` of the rows, then the same count and targets.

Both give the same table (asserted). CPU time: ``--benchmark-timer=time.process_time``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from conftest import SESSIONS
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.models import Session
from ctxcompact.scans.reference import session_rows
from ctxcompact.transcript import (
    DERIVED,
    OUTPUT_UNITS,
    SCHEMA,
    TARGETS_DICTIONARY,
    Transcript,
    count_output_units,
    encode_targets,
    sessions_to_table,
    tool_targets,
)

_WITHOUT_DERIVED = pa.schema([f for f in SCHEMA if f.name not in DERIVED])


def old_sessions_to_table(sessions: Sequence[Session]) -> pa.Table:
    """The last release's Python mapper (without a store's kept counts: these
    sessions have none): rows as dicts, then columns, counts and targets."""
    columns: dict[str, list[Any]] = {name: [] for name in _WITHOUT_DERIVED.names}
    for session in sessions:
        for row in session_rows(session.to_export()):
            for name, values in columns.items():
                values.append(row.get(name))
    table = pa.table(columns, schema=_WITHOUT_DERIVED)
    table = table.append_column(SCHEMA.field(OUTPUT_UNITS), count_output_units(table))
    return table.append_column(TARGETS_DICTIONARY, encode_targets(tool_targets(table)))


@pytest.fixture(scope="module")
def sessions() -> list[Session]:
    table = generate_table(max(8, SESSIONS // 16), 500, seed=11, mean_output_chars=1500)
    return Transcript(table).to_sessions()


def _info(benchmark: Any, table: pa.Table) -> None:
    benchmark.extra_info["rows"] = table.num_rows
    benchmark.extra_info["output_bytes"] = table.column("output").nbytes


@pytest.mark.parametrize("threads", [1, 2])
def test_sessions_to_table(benchmark: Any, sessions: list[Session], threads: int) -> None:
    benchmark.group = "sessions_to_table"
    table = benchmark.pedantic(sessions_to_table, (sessions,), {"threads": threads},
                               rounds=5, warmup_rounds=1)  # fmt: skip
    _info(benchmark, table)
    assert table.equals(old_sessions_to_table(sessions))


def test_sessions_to_table_reference_python(benchmark: Any, sessions: list[Session]) -> None:
    benchmark.group = "sessions_to_table"
    table = benchmark.pedantic(old_sessions_to_table, (sessions,), rounds=5, warmup_rounds=1)
    _info(benchmark, table)
    assert table.equals(sessions_to_table(sessions))
