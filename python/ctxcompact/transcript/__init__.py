"""``Transcript``: many sessions as one Arrow table, one row per part (docs/schema.md).

Sessions convert to and from the table losslessly: the scan columns hold what
the Rust core reads; the ``*_json`` columns hold everything else, so
``table_to_sessions(sessions_to_table(s))`` gives back the same export. The
scan columns are the source of truth when converting back (``compacted_at``
set by ``mark_pruned`` becomes ``state.time.compacted``).

The package's modules: ``schema`` (the columns and codes), ``counts`` (the
counted output lengths), ``targets`` (the ``tool_target`` column), ``rows``
(sessions to rows), ``sessions`` (rows to sessions, checked) and ``table``
(``Transcript``); their public names are imported from here.
"""

from __future__ import annotations

from ctxcompact.transcript.counts import (
    INPUT_HASH,
    OUTPUT_HASH,
    OUTPUT_TYPES,
    count_exact_parts,
    count_output_units,
    count_texts,
    counted_columns,
    counted_field,
    exact_columns,
    exact_families,
)
from ctxcompact.transcript.rows import sessions_to_table
from ctxcompact.transcript.schema import (
    CODES,
    DERIVED,
    OUTPUT_UNITS,
    REQUIRED,
    ROLES,
    SCAN_COLUMNS,
    SCHEMA,
    TOOL_TARGET,
    UNITS_KEY,
    code_names,
    mixed_codes,
)
from ctxcompact.transcript.sessions import table_to_sessions
from ctxcompact.transcript.table import Transcript, relocate, unique_sessions
from ctxcompact.transcript.targets import (
    TARGETS_DICTIONARY,
    encode_targets,
    targets_as_dictionary,
    tool_targets,
)

__all__ = [
    "CODES",
    "DERIVED",
    "INPUT_HASH",
    "OUTPUT_HASH",
    "OUTPUT_TYPES",
    "OUTPUT_UNITS",
    "REQUIRED",
    "ROLES",
    "SCAN_COLUMNS",
    "SCHEMA",
    "TARGETS_DICTIONARY",
    "TOOL_TARGET",
    "UNITS_KEY",
    "Transcript",
    "code_names",
    "count_exact_parts",
    "count_output_units",
    "count_texts",
    "counted_columns",
    "counted_field",
    "encode_targets",
    "exact_columns",
    "exact_families",
    "mixed_codes",
    "relocate",
    "sessions_to_table",
    "table_to_sessions",
    "targets_as_dictionary",
    "tool_targets",
    "unique_sessions",
]
