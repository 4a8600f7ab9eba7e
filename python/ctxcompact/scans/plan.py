"""A policy's whole plan in one native call (``_core.plan``, rust/src/plan.rs).

Per part: its message, whether later model calls see it (and why not), its
fate (kept, cleared, cut) and its tokens; per session: the prune's outcome
and its totals; and, when a shape is asked, the model input itself. The core
runs prune, mark, pivot, the per-model-message estimates and the render over
one view of the columns, sessions in parallel; this module names the
columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

import ctxcompact._core as _core
from ctxcompact.errors import ConfigError
from ctxcompact.scans.estimate import check_threads
from ctxcompact.scans.parts import _as_table, _prune_options, _take

#: The fates a part's output can have, by the core's codes (``view::Fate``).
FATES = ("kept", "cleared", "cut")
#: Why a part is not in the model input, by the core's codes after 0 (shown).
HIDDEN = ("before_pivot",)


@dataclass(frozen=True)
class Plan:
    """What a policy does to every session of a table (``plan``).

    ``parts``: one row per part row of the input, in its order:
    ``session_id``, ``message_id``, ``message`` (the message's index in its
    session; null for the row of a session without messages), ``visible``,
    ``hidden`` (null when visible, else why not: ``"before_pivot"``),
    ``fate`` (``"kept"``, ``"cleared"``: a placeholder is sent, ``"cut"``:
    ``truncate_output`` sends its head and tail), ``pruned`` (cleared by this
    plan's prune, not before it) and ``tokens`` (the estimate of the model
    messages the part is sent as: a message's own at its first part, a
    call's result at its tool part; a session's parts add up to
    ``estimate_messages`` of the marked session, hidden messages included).

    ``sessions``: one row per session: ``session_id``, ``first_row``,
    ``parts``, ``total`` / ``pruned`` / ``pruned_parts`` (the prune's),
    ``tokens`` (every message) and ``visible_tokens`` (what the next call
    is sent, before any system prompt of the runtime's own).

    ``model_input`` (with a ``shape``): the visible messages as the model
    receives them after the prune, in that shape; ``output="json"``: per
    session the JSON array of its model messages (bytes; in the Anthropic
    shape a system message stays ``{"role": "system", ...}`` for the caller
    to lift, as ``to_model_messages`` does); ``output="arrow"``: a table of
    one row per model message (``session_id``, ``index`` in its session's
    input, ``message``: its stored message's index, ``role``: null for a
    Responses item that has none, ``json``).
    """

    parts: pa.Table
    sessions: pa.Table
    model_input: list[bytes] | pa.Table | None

    def messages(self, session: int) -> list[dict[str, Any]]:
        """The model messages of the ``session``-th session, parsed."""
        model = self.model_input
        if model is None:
            raise ConfigError("this plan has no model input: pass shape=... to plan()")
        if isinstance(model, list):
            parsed: list[dict[str, Any]] = json.loads(model[session])
            return parsed
        ids = self.sessions.column("session_id")
        rows = model.filter(pc.equal(model.column("session_id"), ids[session]))
        return [json.loads(text) for text in rows.column("json").to_pylist()]


def plan(
    data: Any,
    policy: Any = None,
    *,
    method: str | None = None,
    shape: Literal["chat", "anthropic", "responses"] | None = None,
    output: Literal["json", "arrow"] = "json",
    threads: int | None = None,
) -> Plan:
    """Prune, mark, pivot, count and (with ``shape``) render every session
    of ``data`` in one native call; nothing in ``data`` is changed.

    ``data``: a ``Transcript``, an Arrow table of the part-row schema or a
    ``Session``. ``policy``: what ``prune`` takes (a ``CompactionConfig``, a
    ``Policy``, a preset name, a policy file or dict; OpenCode's rule when
    None); its render options decide placeholders and cuts, and the
    estimate method is the config's unless ``method`` names one (any
    method, or ``<family>-exact``; counted columns are read when present, as
    by the other scans). ``shape``: ``"chat"``, ``"anthropic"`` or
    ``"responses"`` (``to_model_messages``' shapes). See ``Plan``.
    """
    if shape is not None and not isinstance(shape, str):
        # its value is the core's to check (shapes::Shape::parse)
        raise ConfigError(f"shape must be a string, got {type(shape).__name__}", column="shape")
    if output not in ("json", "arrow"):
        raise ConfigError(f"unknown output {output!r}; expected json or arrow", column="output")
    table, _ = _as_table(data)
    options = _prune_options(policy)
    if method is not None:
        options["method"] = str(method)
    parts, sessions, model = _core.plan(
        table, options, shape=shape, output=output, threads=check_threads(threads)
    )
    message, hidden, fate, pruned, tokens = (pa.array(c) for c in parts)
    first, rows, total, cut, pruned_parts, tokens_sum, visible_sum = (pa.array(c) for c in sessions)
    visible = pc.equal(hidden, 0)
    none = pa.scalar(None, pa.int8())
    hidden_codes = pc.if_else(visible, none, pc.subtract(hidden.cast(pa.int8()), 1)).cast(pa.int8())
    ids = _take(table, "session_id", first)
    per_session = pa.table(
        {
            "session_id": ids,
            "first_row": first,
            "parts": rows,
            "total": total,
            "pruned": cut,
            "pruned_parts": pruned_parts,
            "tokens": tokens_sum,
            "visible_tokens": visible_sum,
        }
    )
    part_table = pa.table(
        {
            "session_id": table.column("session_id"),
            "message_id": table.column("message_id"),
            "message": message,
            "visible": visible,
            "hidden": pa.DictionaryArray.from_arrays(hidden_codes, pa.array(HIDDEN)),
            "fate": pa.DictionaryArray.from_arrays(fate.cast(pa.int8()), pa.array(FATES)),
            "pruned": pruned,
            "tokens": tokens,
        }
    )
    model_input: list[bytes] | pa.Table | None = None
    if isinstance(model, tuple):
        index, at, stored, role, text = (pa.array(c) for c in model)
        names = per_session.column("session_id")
        model_input = pa.table(
            {"session_id": names.take(index), "index": at, "message": stored,
             "role": role, "json": text}
        )  # fmt: skip
    elif model is not None:
        model_input = list(model)
    return Plan(parts=part_table, sessions=per_session, model_input=model_input)
