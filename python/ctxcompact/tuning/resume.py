"""Summaries resumable in the core (issue 38, part 3): the sessions where a
summary fires, replayed by the core in parallel between summaries.

The core (``_core.replay_resume``) walks every such session up to the call
where the live loop would summarize, and stops it there with its state.
Here each stopped session is brought to that call in the live lifecycle
(``tuning.walk.LiveRun``: the run's messages so far in its store, with the
marks the core's masks made), which makes the call: the summary (the
offline digest, or a model through the summarizer) and the row, exactly as
the live walk makes them. The core then resumes every stopped session
together, each from the session its store holds (the run's messages so far,
each compaction marker, summary and continue message; those before the
newest marker not sent but read by the policy's prune, as the live loop
reads them) followed by the run's messages from the call on, until the
next summary or the end.

Retention is scored in the core too (rust/src/retention, as ``_core.replay``
scores it): its state (the facts stated so far, what the previous prompt
showed) is carried from each segment to the next (the ``carried`` handle),
and the summary's call is scored when the core resumes after it, against
what the stored session then sends (the summary's text among it). Here the
summary's row takes those scores, and its cache prefix is counted against
the prompt of the call before it, which the core returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import ctxcompact._core as _core
from ctxcompact.config import CompactionConfig
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import MessageWithParts, Session
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.parts import filter_pivot
from ctxcompact.transcript import sessions_to_table
from ctxcompact.tuning.retention import RunRetention
from ctxcompact.tuning.walk import LiveRun, common_prefix, replayed_messages


@dataclass
class _Run:
    """One session between summaries: the live run (its store holds the
    run's messages up to ``stored``) and the segment the core walks next."""

    live: LiveRun
    #: The run's messages as replayed (``replayed_messages``).
    messages: list[MessageWithParts]
    #: The segment: the ``head`` messages the store holds at the summary's
    #: call (``hidden``: those it does not send), then the run's messages
    #: from ``at`` on.
    segment: list[MessageWithParts] = field(default_factory=list)
    head: int = 0
    hidden: list[bool] = field(default_factory=list)
    at: int = 0
    stored: int = 0
    #: The core's state at the segment's start (``replay_resume``).
    first_call: int = 0
    baseline: int = 0
    last_time: int | None = None
    stalled: bool = False
    #: The parts the core's masks cleared in the segment before its stop.
    marks: list[str] = field(default_factory=list)


def resume_summaries(sessions: list[Session], config: CompactionConfig, limits: Limits, *,
                     summarizer: Summarizer | None, system: str | None, core: dict[str, Any],
                     facts: Callable[[pa.Table], Any]) -> list[dict[str, Any]]:  # fmt: skip
    """The per-call rows (``tuning.replay``'s ``CALL_SCHEMA`` as dicts) of
    ``sessions``, each one's calls in order: equal to ``replay_session``'s.
    ``core``: ``_core.replay``'s options (view, mask, system_tokens,
    threshold, available, usable, threads); ``facts``: the message facts of
    a table (``tuning.engine.message_facts``)."""
    runs = []
    for session in sessions:
        live = LiveRun(session, config, limits, summarizer=summarizer, system=system)
        messages = replayed_messages(session)
        runs.append(_Run(live, messages, segment=messages))
    active, carried = runs, None
    while active:
        active, carried = _round(active, system, core, facts, carried)
    return [row for run in runs for row in run.live.rows]


def _round(runs: list[_Run], system: str | None, core: dict[str, Any],
           read_facts: Callable[[pa.Table], Any],
           carried: Any) -> tuple[list[_Run], Any]:  # fmt: skip
    """One core pass over ``runs``' segments; each stopped run is brought
    through its summary's call and given its next segment. The runs
    stopped, and the retention the core carries to their next segments."""
    table = sessions_to_table([Session(info=r.live.session.info, messages=r.segment)
                               for r in runs], threads=core.get("threads"))  # fmt: skip
    facts = read_facts(table)
    (ids, calls, rows, prompt, cached, out, base_prompt, base_cached, over, _changed, since,
     offsets, cleared, stop_ids, stop_calls, stop_rows, stop_baselines, stop_times,
     stop_previous, removed, kept, lost, shown, head_removed, head_kept, head_lost,
     head_shown, carried) = _core.replay_resume(
        table, core["view"], core["mask"], facts.created, facts.output, facts.call,
        [r.head for r in runs], [r.hidden for r in runs], [r.first_call for r in runs],
        [r.baseline for r in runs], [r.last_time for r in runs], [r.stalled for r in runs],
        system_tokens=core["system_tokens"], threshold=core["threshold"],
        available=core["available"], usable=core["usable"], threads=core.get("threads"),
        system=system, carried=carried,
    )  # fmt: skip
    # Each summary's call (the row its live run made at the previous stop),
    # scored by the core now that it resumed after it.
    for run, scores in zip(runs, zip(head_removed.to_pylist(), head_kept.to_pylist(),
                                     head_lost.to_pylist(), head_shown.to_pylist(),
                                     strict=True), strict=True):  # fmt: skip
        if run.head:
            _retention(run.live.rows[run.first_call], *scores)
    message_ids = table.column("message_id").take(rows).to_pylist()
    columns = zip(ids.to_pylist(), calls.to_pylist(), message_ids, prompt.to_pylist(),
                  cached.to_pylist(), out.to_pylist(), base_prompt.to_pylist(),
                  base_cached.to_pylist(), over.to_pylist(), since.to_pylist(),
                  removed.to_pylist(), kept.to_pylist(), lost.to_pylist(), shown.to_pylist(),
                  strict=True)  # fmt: skip
    by_id = {r.live.session.id: r for r in runs}
    for sid, c, mid, p, k, o, bp, bk, ov, dt, rm, kp, ls, sh in columns:
        live = by_id[sid].live
        assert c == len(live.rows), (c, len(live.rows))
        live.rows.append({
            "session_id": sid, "call": c, "message_id": mid,
            "prompt_tokens": p, "cached_tokens": k, "written_tokens": p - k, "output_tokens": o,
            "compacted": False, "reason": None,
            "summary_input_tokens": 0, "summary_output_tokens": 0,
            "baseline_prompt_tokens": bp, "baseline_cached_tokens": bk,
            "removed_facts": rm, "kept_facts": kp, "lost": ls, "retention": sh,
            "over_window": ov, "since_previous_s": dt,
        })  # fmt: skip
    # The parts each run's masks cleared, for its store's copies.
    part_ids = table.column("part_id").to_pylist()
    offsets_, cleared_ = offsets.to_pylist(), cleared.to_pylist()
    marks: dict[str, list[str]] = {}
    for i, sid in enumerate(ids.to_pylist()):
        marks.setdefault(sid, []).extend(
            part_ids[r] for r in cleared_[offsets_[i] : offsets_[i + 1]])  # fmt: skip
    # Each run's first message among the table's rows.
    starts = facts.starts
    first: dict[str, int] = {}
    base = 0
    for run in runs:
        first[run.live.session.id] = base
        base += len(run.segment)
    row_of = {row: i for i, row in enumerate(starts)}
    stopped = []
    for sid, call, row, baseline, last, previous in zip(
        stop_ids.to_pylist(), stop_calls.to_pylist(), stop_rows.to_pylist(),
        stop_baselines.to_pylist(), stop_times.to_pylist(), stop_previous.to_pylist(),
        strict=True,
    ):  # fmt: skip
        if call < 0:  # no reader writes such a run
            raise AssertionError(f"session {sid}: its own compaction in a resumed segment")
        run = by_id[sid]
        run.marks = marks.get(sid, [])
        run.baseline, run.last_time = baseline, last
        _summary_call(run, row_of[row] - first[sid], call, json.loads(previous))
        stopped.append(run)
    return stopped, carried


def _retention(row: dict[str, Any], removed: int, kept: int, lost: list[str],
               shown: float) -> None:  # fmt: skip
    row.update(removed_facts=removed, kept_facts=kept, lost=lost, retention=shown)


def _summary_call(run: _Run, at: int, call: int, previous: list[dict[str, Any]]) -> None:
    """The call segment message ``at`` makes, where the core stopped (the
    live loop summarizes), made by the live run; then the next segment.
    ``previous``: the prompt of the run's call before (the cache prefix).
    The row's retention is the core's, when it resumes after the call."""
    live = run.live
    g = run.at + at - run.head  # the message among the run's
    for m in run.messages[run.stored : g]:
        live.store.append_message(live.sid, m)
    run.stored = g
    if run.marks:  # the store's copies, as the core's masks marked them before the stop
        live.store.mark_parts(live.sid, dict.fromkeys(run.marks, 1))
    live.baseline, live.last_time = run.baseline, run.last_time
    live.baseline_previous = live.rows[-1]["baseline_prompt_tokens"] if live.rows else 0
    assert call == len(live.rows), (call, len(live.rows))
    # Nothing for the walk's retention to score (the core scores the call).
    live.previous, live.pending, live.facts = [], [], RunRetention()
    row = live.call(run.messages[g])
    sent = live.previous
    row["cached_tokens"] = live.tokens(sent[: common_prefix(previous, sent)])
    row["written_tokens"] = row["prompt_tokens"] - row["cached_tokens"]
    stored = live.store.load(live.sid)
    visible = {m.id for m in filter_pivot(stored).messages}
    run.hidden = [m.id not in visible for m in stored.messages]
    run.segment = [*stored.messages, *run.messages[g:]]
    run.head, run.at, run.first_call = len(stored.messages), g, call
    run.baseline, run.last_time = live.baseline, live.last_time
    run.stalled = live.compactor.stalled(live.sid)


__all__ = ["resume_summaries"]
