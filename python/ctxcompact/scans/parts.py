"""The compaction scans over transcripts and single sessions.

Every scan runs in Rust over the part-row table with the GIL released and
sessions spread over the cores. A single ``Session`` is converted to a
one-session table first, so live sessions and stored ones follow exactly the
same code.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
from ctxcompact.errors import (
    ConfigError,
    InputTypeError,
    MissingColumnError,
    NullValueError,
    TranscriptError,
)
from ctxcompact.scans.estimate import check_threads
from ctxcompact.transcript import (
    OUTPUT_UNITS,
    TARGETS_DICTIONARY,
    TOOL_TARGET,
    Transcript,
    count_output_units,
    counted_columns,
    counted_field,
    encode_targets,
    exact_columns,
    tool_targets,
)

if TYPE_CHECKING:
    from ctxcompact.models import Session
    from ctxcompact.policy import Policy

T = TypeVar("T", "Session", Transcript)


def _as_table(data: Any) -> tuple[pa.Table, Session | None]:
    """The table to scan, and the session when a single one was given."""
    from ctxcompact.models import Session

    if isinstance(data, Session):
        return Transcript.from_sessions([data]).to_arrow(), data
    return Transcript.from_arrow(data).to_arrow(), None


def _take(table: pa.Table, column: str, rows: pa.Array) -> pa.StringArray:
    """Strings of ``column`` at ``rows`` (works for every string layout, string_view too)."""
    result: pa.StringArray = pa.array(_core.take_strings(table.column(column), rows))
    return result


def _opt(config: Any, name: str) -> Any:
    """``config.name``, else the config's built-in default (OpenCode's numbers)."""
    from ctxcompact.config import default

    return default(name) if config is None else getattr(config, name, default(name))


def _resolve(config: Any, scan: str) -> tuple[Policy, Any]:
    """The policy ``config`` names and the object its estimate fields
    (``estimate_method``, ``message_overhead``) are read from (``None``: the
    defaults). ``config``: a ``CompactionConfig`` (its ``prune_policy()``), a
    ``Policy``, a preset name / file / dict of policy options, a duck-typed
    config, or ``None`` (OpenCode's rule). Anything else is a ``ConfigError``:
    a config that is silently not read would give the default's numbers."""
    from ctxcompact.config import PRUNE_FIELDS, CompactionConfig, with_prune_fields
    from ctxcompact.policy import Policy

    if isinstance(config, CompactionConfig):
        return config.prune_policy(), config
    if isinstance(config, Mapping):
        fields = set(CompactionConfig.model_fields) - set(Policy.model_fields)
        misplaced = sorted(set(config) & fields)
        if misplaced:
            raise ConfigError(
                f"{misplaced[0]} is a CompactionConfig field, not a policy option: pass "
                f"CompactionConfig({misplaced[0]}=...) to {scan}",
                column=misplaced[0],
            )
    if config is None or isinstance(config, (Policy, str, Path, Mapping)):
        return (Policy() if config is None else Policy.load(config)), None
    if any(hasattr(config, name) for name in CompactionConfig.model_fields):
        # any object with some of the config's field names (a duck-typed config)
        present = {name: getattr(config, name) for name in PRUNE_FIELDS if hasattr(config, name)}
        policy = with_prune_fields(
            Policy.load(getattr(config, "policy", None) or Policy()), present
        )
        return policy, config
    raise ConfigError(
        f"{scan} takes a CompactionConfig, a Policy, a preset name, a policy file or a dict "
        f"of policy options, got {type(config).__name__}",
        column="policy",
    )


def _prune_options(config: Any) -> dict[str, Any]:
    """The native prune's policy options from ``config`` (see ``_resolve``)."""
    policy, config = _resolve(config, "prune")
    return policy.scan_options(
        method=str(_opt(config, "estimate_method")), overhead=int(_opt(config, "message_overhead"))
    )


class PruneResult:
    """Which tool parts to mark as compacted; nothing is marked yet.

    ``rows``: table rows of the selected parts (session order, newest first
    within a session). ``sessions``: one row per session with ``session_id``,
    ``total`` (estimated tokens of the tool outputs the scan counted),
    ``pruned`` (tokens of the selected outputs, 0 when below the minimum) and
    ``parts`` (number selected). ``total`` / ``pruned``: sums over sessions.
    ``part_ids`` is built on first use (a Python list, costly for millions).
    """

    def __init__(
        self,
        rows: pa.UInt64Array,
        sessions: pa.Table,
        total: int,
        pruned: int,
        part_ids: list[str] | None = None,
        *,
        table: pa.Table | None = None,
    ) -> None:
        self.rows = rows
        self.sessions = sessions
        self.total = total
        self.pruned = pruned
        self._part_ids = part_ids
        self._table = table

    @property
    def part_ids(self) -> list[str]:
        """Ids of the selected parts (``MissingColumnError`` / ``NullValueError``
        when the table cannot name them: an empty list would mark nothing)."""
        if self._part_ids is None:
            if len(self.rows) == 0:
                self._part_ids = []
                return self._part_ids
            table = self._table
            if table is None or "part_id" not in table.column_names:
                raise MissingColumnError("part_ids needs the part_id column", column="part_id")
            ids = _take(table, "part_id", self.rows).to_pylist()
            if None in ids:
                row = int(self.rows[ids.index(None)].as_py())
                raise NullValueError(
                    "a selected tool part has no part_id", row=row, column="part_id"
                )
            self._part_ids = [str(p) for p in ids]
        return self._part_ids

    @property
    def table_rows(self) -> int | None:
        """Rows of the table this result was computed on (None if unknown)."""
        return None if self._table is None else int(self._table.num_rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"PruneResult(parts={len(self)}, total={self.total}, pruned={self.pruned})"


def with_output_units(
    data: Any, *, method: str = "opencode", threads: int | None = None
) -> Transcript:
    """The transcript with each output's length units under ``method``,
    counted once (in Rust, on the thread pool) while the text is at hand:
    ``output_utf16`` for opencode, ``output_units_<family>`` for a tokenizer
    family (its field metadata names the table it was counted with; counts
    from another release's table are not read). Tables made by this library
    (``Transcript.from_sessions``, the readers, ``ctxcompact ingest``) carry
    ``output_utf16`` already; this counts it for others, or for a family.

    Scans with that method then read an output's estimate from the counts
    instead of its text: prune reads no output at all, the message estimates
    only the outputs a policy cuts or describes. A null keeps that row
    measured from its text. Outputs never change after (marks are a separate
    column; ``Transcript.with_column("output", ...)`` counts again); a column
    that no longer matches its text makes estimates wrong, which
    ``verify_output_units`` (or ``prune(..., verify=True)``) detects.
    """
    table, _ = _as_table(data)
    field = counted_field(method)
    values = count_output_units(table, method, check_threads(threads))
    if field.name in table.column_names:
        table = table.drop_columns([field.name])
    return Transcript(table.append_column(field, values))


def with_tool_targets(data: Any, *, threads: int | None = None) -> Transcript:
    """The transcript with each tool call's supersession target worked out
    once (``tool_target``, in Rust on the thread pool): what supersession
    compares, read instead of parsing every call's input. Tables made by
    this library carry it already; this adds it to others. A null keeps that
    row worked out from its input; a column that no longer matches the
    inputs (``tool`` or ``input`` edited without ``Transcript.with_column``)
    supersedes the wrong outputs, which ``verify_output_units`` detects.

    The column is made dictionary encoded (``TARGETS_DICTIONARY``, as the
    tables the library makes hold it): a prune then gives each distinct
    target a number once and tests a call by its key, reading no string."""
    table, _ = _as_table(data)
    values = encode_targets(tool_targets(table, check_threads(threads)))
    if TOOL_TARGET in table.column_names:
        table = table.drop_columns([TOOL_TARGET])
    return Transcript(table.append_column(TARGETS_DICTIONARY, values))


def _wrong_row(taken: pa.Table, rows: Any, i: int, column: str, why: str) -> TranscriptError:
    """A checked column's value at ``rows[i]`` (``taken``'s row ``i``) that
    its text contradicts: names the row, session and message."""
    return TranscriptError(f"{column} of row {rows[i]} {why}", row=rows[i], column=column,
                           session_id=str(taken.column("session_id")[i].as_py()),
                           message_id=str(taken.column("message_id")[i].as_py()))  # fmt: skip


def verify_output_units(
    data: Any, *, sample: int = 1000, seed: int = 0, exact_sample: int | None = None
) -> None:
    """Re-count every counted column the scans read (``output_utf16``,
    ``output_units_<family>``) at ``sample`` random rows (every row when the
    table is smaller) against the text, and work out ``tool_target`` there
    again from ``tool`` and ``input``; ``TranscriptError`` naming the first
    row, session and message that disagree. Nothing to check without one.

    The exact counts (``output_tokens_<family>``, ``input_tokens_<family>``,
    ``Transcript.count``) are counted again at ``exact_sample`` random rows
    (``sample`` when None) where the text still has the hash it was counted
    with: a count that disagrees there would be read, and is an error
    naming its column and row. A row whose text changed since is not (its
    count is never read)."""
    import random

    table, _ = _as_table(data)
    counted = counted_columns(table.schema)
    targets = TOOL_TARGET in table.column_names
    exact = exact_columns(table.schema)
    if not (counted or targets or exact) or table.num_rows == 0:
        return
    n = table.num_rows
    if exact:
        _verify_exact(table, exact, exact_sample if exact_sample is not None else sample, seed)
    rows = sorted(random.Random(seed).sample(range(n), min(sample, n)))
    if targets:
        for name in ("tool", "input"):
            if name not in table.column_names:
                raise MissingColumnError(
                    f"missing column {name!r}: {TOOL_TARGET} is checked against it", column=name
                )
        taken = table.select(["session_id", "message_id", "tool", "input", TOOL_TARGET])
        taken = taken.take(rows)
        fresh = tool_targets(taken).to_pylist()
        for i, (want, got) in enumerate(zip(fresh, taken[TOOL_TARGET].to_pylist(), strict=True)):
            if got is not None and got != want:
                raise _wrong_row(taken, rows, i, TOOL_TARGET,
                                 f"is {got!r}, but its tool and input give {want!r}: the column "
                                 "is stale (work it out again with with_tool_targets)")  # fmt: skip
    if not counted:
        return
    taken = table.select(["session_id", "message_id", "output", *counted]).take(rows)
    for name, method in counted.items():
        units = "UTF-16 units long" if name == OUTPUT_UNITS else f"units of the {method} table"
        fresh = count_output_units(taken, method).to_pylist()
        stored = taken.column(name).to_pylist()
        for i, (want, got) in enumerate(zip(fresh, stored, strict=True)):
            if got is not None and want is not None and got != want:
                raise TranscriptError(
                    f"{name} of row {rows[i]} is {got}, but its output is {want} {units}: "
                    "the column is stale (recount it with with_output_units)",
                    row=rows[i], column=name,
                    session_id=str(taken.column("session_id")[i].as_py()),
                    message_id=str(taken.column("message_id")[i].as_py()),
                )  # fmt: skip


def _verify_exact(
    table: pa.Table, exact: dict[str, tuple[str, str, str]], sample: int, seed: int
) -> None:
    """``verify_output_units`` of the exact count columns ``exact``
    (``exact_columns``): ``sample`` random rows of each, recounted where
    the text is the one counted (its hash holds)."""
    import random

    n = table.num_rows
    rows = sorted(random.Random(seed).sample(range(n), max(0, min(sample, n))))
    for name, (family, text, hashes) in exact.items():
        if text not in table.column_names:
            raise MissingColumnError(
                f"missing column {text!r}: {name} is checked against it", column=text
            )
        taken = table.select(["session_id", "message_id", text, name, hashes])
        taken = taken.take(pa.array(rows, pa.int64()))
        now = pa.chunked_array(_core.text_hashes(taken.column(text), None), type=pa.int64())
        held = pc.fill_null(pc.equal(pc.fill_null(now, 0), taken.column(hashes)), False)
        fresh = count_output_units(taken.select([text]).rename_columns(["output"]),
                                   f"{family}-exact").to_pylist()  # fmt: skip
        stored = taken.column(name).to_pylist()
        for i, (want, got, ok) in enumerate(zip(fresh, stored, held.to_pylist(), strict=True)):
            if ok and got is not None and got != want:
                why = (f"is {got}, but its {text} is {want} {family} tokens: the column is "
                       "wrong (count it again with Transcript.count)")  # fmt: skip
                raise _wrong_row(taken, rows, i, name, why)


def prune(
    data: Any, config: Any = None, *, threads: int | None = None, verify: bool = False
) -> PruneResult:
    """Select old completed tool outputs to prune, by a policy (OpenCode's
    backward scan unless told otherwise; docs/policies.md).

    ``data``: a ``Transcript``, any Arrow table of the part-row schema, or a
    ``Session``. ``config``: a ``CompactionConfig`` (its ``policy`` with the
    ``prune_*`` fields applied, and ``estimate_method``), a ``Policy``, a
    preset name (``"swe-agent"``), a policy file or dict, or ``None`` for
    OpenCode's rule. With ``output_utf16`` (``with_output_units``) the
    outputs' lengths are read from it, with ``tool_target``
    (``with_tool_targets``) supersession's targets; ``verify`` re-counts a
    sample of both first.
    """
    table, _session = _as_table(data)
    if verify:
        verify_output_units(table)
    rows, ids, totals, pruned, counts = _core.prune(
        table, _prune_options(config), threads=check_threads(threads)
    )
    rows = pa.array(rows)
    sessions = pa.table(
        {
            "session_id": pa.array(ids),
            "total": pa.array(totals),
            "pruned": pa.array(pruned),
            "parts": pa.array(counts),
        }
    )
    return PruneResult(
        rows=rows,
        sessions=sessions,
        total=int(pc.sum(sessions["total"]).as_py() or 0),
        pruned=int(pc.sum(sessions["pruned"]).as_py() or 0),
        table=table,
    )


@overload
def mark_pruned(data: Session, result: PruneResult, now_ms: int | None = None) -> Session: ...
@overload
def mark_pruned(data: Any, result: PruneResult, now_ms: int | None = None) -> Transcript: ...
def mark_pruned(data: Any, result: PruneResult, now_ms: int | None = None) -> Any:
    """Set ``compacted_at`` (``state.time.compacted``) of the parts ``prune`` selected.

    A ``Session`` is updated in place and returned; a transcript is immutable
    Arrow, so a new ``Transcript`` is returned whose only changed column is
    ``compacted_at``. Outputs are never touched.
    """
    from ctxcompact.models import Session

    if not isinstance(result, PruneResult):
        raise InputTypeError(
            f"mark_pruned takes the PruneResult of prune(), got {type(result).__name__}"
        )
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    if now <= 0:
        # 0 would read as "not compacted" (OpenCode tests the timestamp's truthiness).
        raise ConfigError(f"now_ms must be a positive millisecond timestamp, got {now_ms}")
    if isinstance(data, Session):
        wanted = set(result.part_ids)
        for message in data.messages:
            for part in message.parts:
                if part.id in wanted:
                    part.mark_compacted(now)
        return data
    transcript = Transcript.from_arrow(data)
    table = transcript.to_arrow()
    if result.table_rows is not None and result.table_rows != table.num_rows:
        raise ConfigError(
            f"this PruneResult was computed on {result.table_rows} rows; the transcript has "
            f"{table.num_rows}"
        )
    column = (
        table.column("compacted_at")
        if "compacted_at" in table.column_names
        else pa.nulls(table.num_rows, pa.int64())
    )
    marked = pa.chunked_array(_core.mark_rows(column, result.rows, now))
    return transcript.with_column("compacted_at", marked)


def pivot_mask(data: Any, *, threads: int | None = None) -> pa.BooleanArray:
    """Per row: does later model input include it (it is at or after its session's
    pivot, or in a pinned message)?"""
    table, _ = _as_table(data)
    mask = _core.pivot(table, threads=check_threads(threads))
    result: pa.BooleanArray = pa.array(mask)
    return result


@overload
def filter_pivot(data: Session, *, threads: int | None = None) -> Session: ...
@overload
def filter_pivot(data: Any, *, threads: int | None = None) -> Transcript: ...
def filter_pivot(data: Any, *, threads: int | None = None) -> Any:
    """The history later model calls see: each session from its latest completed pivot on.

    A pivot is a user message with a compaction part whose summary (an
    assistant message with ``summary`` set, finished, without error, whose
    parent is that user message) exists. Sessions without one are kept whole.
    System messages (the agent's instructions) and messages holding a pinned
    part stay, in order, ahead of the pivot.
    A ``Session`` gives a new ``Session``; anything else a ``Transcript``.
    """
    from ctxcompact.models import Session

    if isinstance(data, Session):
        # A live session is filtered on every model call: the core reads
        # what the rule needs off the session's own objects (no table).
        shown = _core.session_pivot(data.messages)
        if shown is not None:
            start, before = shown
            messages = data.messages
            return data.model_copy(update={"messages": [messages[i] for i in before]
                                           + messages[start:]})  # fmt: skip
    table, session = _as_table(data)
    if session is None:
        ranges = _core.pivot_ranges(table, threads=check_threads(threads))
        starts, lengths = (pa.array(a).to_pylist() for a in ranges)
        # Zero-copy: slices of the input, one per run of kept rows.
        pieces = [table.slice(start, length) for start, length in zip(starts, lengths)]
        return Transcript(pa.concat_tables(pieces) if pieces else table.slice(0, 0))
    # The rows follow the session's messages in order (an empty message is one
    # row): keep the messages whose first row the core keeps.
    mask = _core.pivot(table, threads=check_threads(threads))
    kept, row = [], 0
    for message in session.messages:
        if mask[row]:
            kept.append(message)
        row += max(1, len(message.parts))
    return session.model_copy(update={"messages": kept})


@dataclass(frozen=True)
class MessageEstimates:
    """Estimated model-input tokens per message (placeholders applied) and per session."""

    messages: pa.Table
    sessions: pa.Table

    @property
    def total(self) -> int:
        return int(pc.sum(self.sessions["tokens"]).as_py() or 0)


def estimate_messages(
    data: Any, config: Any = None, *, threads: int | None = None
) -> MessageEstimates:
    """Per stored message, the estimated size of what the model is sent for it.

    One definition with ``estimate_chat_messages(to_model_messages(...))``
    (rust/src/messages.rs): each chat message it becomes costs the overhead
    (an assistant message with N tool calls is N + 1 chat messages), content
    is estimated as sent (texts joined), a tool call costs its name and its
    compact-JSON arguments, a result its output or placeholder. A
    text-protocol step's tool part (SWE-agent, mini-swe-agent) costs its
    result only, sent as a user message: its command is in the text. A message
    with nothing to send costs 0. ``config`` fields read: ``estimate_method``,
    ``message_overhead`` (default 4), and the rendering options of its
    ``policy`` (placeholder, clear_inputs, truncate_output); ``config`` may
    also be a ``Policy``.
    """
    table, _ = _as_table(data)
    policy, config = _resolve(config, "estimate_messages")
    rows, tokens, _session_index = _core.estimate_messages(
        table,
        method=str(_opt(config, "estimate_method")),
        overhead=int(_opt(config, "message_overhead")),
        **policy.render_options(),
        threads=check_threads(threads),
    )
    rows, tokens = pa.array(rows), pa.array(tokens)
    messages = pa.table(
        {
            "session_id": _take(table, "session_id", rows),
            "message_id": _take(table, "message_id", rows),
            "tokens": tokens,
        }
    )
    per_session = messages.group_by("session_id", use_threads=False).aggregate(
        [("tokens", "sum"), ("message_id", "count")]
    )
    per_session = pa.table(
        {
            "session_id": per_session["session_id"],
            "tokens": per_session["tokens_sum"],
            "messages": per_session["message_id_count"],
        }
    )
    return MessageEstimates(messages=messages, sessions=per_session)


@dataclass(frozen=True)
class Compaction:
    """What one native pass over a batch of whole sessions found (per session,
    in table order): the raw material of ``compact_batch``'s report."""

    session_ids: list[str]
    parts: list[int]
    total: list[int]
    pruned: list[int]
    pruned_parts: list[int]
    tokens_before: list[int]
    tokens_after_prune: list[int]
    tokens_after: list[int]
    visible_parts: list[int]
    #: Rows of the pruned parts; the visible rows as ``(start, length)`` runs.
    rows: pa.Array
    visible: list[tuple[int, int]]
    #: The ``compacted_at`` column with the prune marks (when ``now_ms`` was given).
    marked: pa.ChunkedArray | None


#: The per-session counts ``_core.compact_batch`` returns after the sessions'
#: first rows, in its order.
_PASS_COUNTS = (
    "parts", "total", "pruned", "pruned_parts", "tokens_after_prune", "tokens_after",
    "visible_parts", "tokens_before",
)  # fmt: skip


def compact_pass(
    table: pa.Table, config: Any, *, now_ms: int | None = None, threads: int | None = None
) -> Compaction:
    """Prune, mark, pivot and estimate ``table`` in one native call (one view
    of the columns, one ``PartTable``), with ``config``'s prune and estimate
    options. The same numbers as ``prune`` + ``mark_pruned`` +
    ``filter_pivot`` + ``estimate_messages`` (tests/batch checks it)."""
    columns, rows, (starts, lengths), marked = _core.compact_batch(
        table, _prune_options(config), now_ms=now_ms, threads=check_threads(threads)
    )
    first, *counts = (pa.array(c).to_pylist() for c in columns)
    ids = _take(table, "session_id", pa.array(first, pa.uint64())).to_pylist()
    return Compaction(
        session_ids=[str(i) for i in ids],
        **dict(zip(_PASS_COUNTS, counts, strict=True)),
        rows=pa.array(rows),
        visible=list(zip(pa.array(starts).to_pylist(), pa.array(lengths).to_pylist())),
        marked=None if marked is None else pa.chunked_array(marked),
    )
