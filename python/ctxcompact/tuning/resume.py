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

The calls the core makes are scored for retention here, as
``tuning.engine`` scores them: the state (the facts stated so far, what the
previous prompt showed) carries across each summary, one ``RunRetention``
per run, the one the live call uses.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import ctxcompact._core as _core
from ctxcompact.config import CompactionConfig
from ctxcompact.live.summary import Summarizer
from ctxcompact.models import MessageWithParts, Session, UserMessage
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.parts import filter_pivot
from ctxcompact.scans.view import to_model_messages
from ctxcompact.transcript import sessions_to_table
from ctxcompact.tuning.retention import content_text, score_compaction
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
    #: from ``at`` on (copies: the scoring marks them).
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
        runs.append(_Run(live, messages, segment=[_copy(m) for m in messages]))
    active = runs
    while active:
        active = _round(active, config, system, core, facts)
    return [row for run in runs for row in run.live.rows]


def _copy(message: MessageWithParts) -> MessageWithParts:
    return message.model_copy(deep=True)


def _round(runs: list[_Run], config: CompactionConfig, system: str | None,
           core: dict[str, Any], read_facts: Callable[[pa.Table], Any]) -> list[_Run]:  # fmt: skip
    """One core pass over ``runs``' segments; each stopped run is brought
    through its summary's call and given its next segment. The runs stopped."""
    table = sessions_to_table([Session(info=r.live.session.info, messages=r.segment)
                               for r in runs], threads=core.get("threads"))  # fmt: skip
    facts = read_facts(table)
    (ids, calls, rows, prompt, cached, out, base_prompt, base_cached, over, changed, since,
     offsets, cleared, stop_ids, stop_calls, stop_rows, stop_baselines,
     stop_times) = _core.replay_resume(
        table, core["view"], core["mask"], facts.created, facts.output, facts.call,
        [r.head for r in runs], [r.hidden for r in runs], [r.first_call for r in runs],
        [r.baseline for r in runs], [r.last_time for r in runs], [r.stalled for r in runs],
        system_tokens=core["system_tokens"], threshold=core["threshold"],
        available=core["available"], usable=core["usable"], threads=core.get("threads"),
    )  # fmt: skip
    columns = {
        "ids": ids.to_pylist(), "calls": calls.to_pylist(), "rows": rows.to_pylist(),
        "prompt": prompt.to_pylist(), "cached": cached.to_pylist(), "out": out.to_pylist(),
        "base_prompt": base_prompt.to_pylist(), "base_cached": base_cached.to_pylist(),
        "over": over.to_pylist(), "changed": changed.to_pylist(), "since": since.to_pylist(),
        "offsets": offsets.to_pylist(), "cleared": cleared.to_pylist(),
    }  # fmt: skip
    part_ids = table.column("part_id").to_pylist()
    stops = {
        sid: (call, row, baseline, last)
        for sid, call, row, baseline, last in zip(
            stop_ids.to_pylist(), stop_calls.to_pylist(), stop_rows.to_pylist(),
            stop_baselines.to_pylist(), stop_times.to_pylist(), strict=True,
        )
    }  # fmt: skip
    # Each run's calls (contiguous, in table order) and first message.
    spans: dict[str, list[int]] = {}
    for i, sid in enumerate(columns["ids"]):
        spans.setdefault(sid, []).append(i)
    stopped = []
    base = 0
    for run in runs:
        sid = run.live.session.id
        stop = stops.get(sid)
        if stop is not None and stop[0] < 0:  # no reader writes such a run
            raise AssertionError(f"session {sid}: its own compaction in a resumed segment")
        at = _score(run, spans.get(sid, []), columns, facts.starts, base, part_ids, config,
                    system, stop)  # fmt: skip
        base += len(run.segment)
        if stop is not None:
            _summary_call(run, at, stop)
            stopped.append(run)
    return stopped


def _score(run: _Run, span: list[int], c: dict[str, list[Any]], starts: list[int], base: int,
           part_ids: list[Any], config: CompactionConfig, system: str | None,
           stop: tuple[int, int, int, int | None] | None) -> int:  # fmt: skip
    """The rows of the core's calls ``span`` of ``run``'s segment, scored as
    the live walk scores them (``tuning.walk.LiveRun.call``), and the
    segment's messages marked as the core's masks marked them. Leaves the
    run's previous prompt and the messages since as the walk has them before
    the next call. Returns the segment index of the message that makes the
    stop's call (-1: no stop)."""
    live, segment = run.live, run.segment
    info = live.session.info
    parts = {p.id: p for m in segment for p in m.parts}
    last = run.head  # the segment's first message not yet appended
    previous = live.previous
    marks: list[str] = []
    ats = [bisect.bisect_left(starts, c["rows"][i]) - base for i in span]
    for n, i in enumerate(span):
        at = ats[n]
        appended = _append(live, segment[last:at])
        for r in c["cleared"][c["offsets"][i] : c["offsets"][i + 1]]:
            part = parts.get(part_ids[r])
            if part is not None:
                part.mark_compacted(1)
                marks.append(part_ids[r])
        changed = c["changed"][i]
        following = c["changed"][span[n + 1]] if n + 1 < len(span) else stop is not None
        removed: Any = None
        if changed or following:
            shown = filter_pivot(Session(info=info, messages=segment[:at]))
            sent = to_model_messages(shown, system=system, policy=config.policy)
            if changed:
                before = previous + appended
                if common_prefix(before, sent) < len(before):
                    removed = score_compaction(before, sent, task=live.task)
                live.facts.resend(before, sent)
            previous = sent
        else:
            previous = []
        last = at
        assert c["calls"][i] == len(live.rows), (c["calls"][i], len(live.rows))
        live.rows.append({
            "session_id": live.session.id,
            "call": c["calls"][i],
            "message_id": segment[at].id,
            "prompt_tokens": c["prompt"][i],
            "cached_tokens": c["cached"][i],
            "written_tokens": c["prompt"][i] - c["cached"][i],
            "output_tokens": c["out"][i],
            "compacted": False,
            "reason": None,
            "summary_input_tokens": 0,
            "summary_output_tokens": 0,
            "baseline_prompt_tokens": c["base_prompt"][i],
            "baseline_cached_tokens": c["base_cached"][i],
            "removed_facts": len(removed.removed) if removed else 0,
            "kept_facts": removed.kept if removed else 0,
            "lost": [f.label() for f in removed.lost] if removed else [],
            "retention": live.facts.score,
            "over_window": c["over"][i],
            "since_previous_s": c["since"][i],
        })  # fmt: skip
    if stop is None:
        return -1
    at = bisect.bisect_left(starts, stop[1]) - base
    live.previous = previous
    live.pending = _append(live, segment[last:at])
    run.baseline, run.last_time = stop[2], stop[3]
    run.marks = marks
    return at


def _append(live: LiveRun, messages: list[MessageWithParts]) -> list[dict[str, Any]]:
    """``messages`` appended to the run's retention as the walk appends them
    (each alone); the chat messages they are."""
    appended: list[dict[str, Any]] = []
    for m in messages:
        alone = live.alone(m)
        if live.task is None and isinstance(m.info, UserMessage):
            live.task = next((content_text(x) for x in alone if x.get("role") == "user"), None)
        appended += alone
    live.facts.append(appended)
    return appended


def _summary_call(run: _Run, at: int, stop: tuple[int, int, int, int | None]) -> None:
    """The call segment message ``at`` makes, where the core stopped (the
    live loop summarizes), made by the live run; then the next segment."""
    live = run.live
    g = run.at + at - run.head  # the message among the run's
    for m in run.messages[run.stored : g]:
        live.store.append_message(live.sid, m)
    run.stored = g
    if run.marks:  # the store's copies, as the core's masks marked them before the stop
        live.store.mark_parts(live.sid, dict.fromkeys(run.marks, 1))
    live.baseline, live.last_time = stop[2], stop[3]
    live.baseline_previous = live.rows[-1]["baseline_prompt_tokens"] if live.rows else 0
    assert stop[0] == len(live.rows), (stop[0], len(live.rows))
    live.call(run.messages[g])
    stored = live.store.load(live.sid)
    visible = {m.id for m in filter_pivot(stored).messages}
    run.hidden = [m.id not in visible for m in stored.messages]
    run.segment = [*stored.messages, *(_copy(m) for m in run.messages[g:])]
    run.head, run.at, run.first_call = len(stored.messages), g, stop[0]
    run.baseline, run.last_time = live.baseline, live.last_time
    run.stalled = live.compactor.stalled(live.sid)


__all__ = ["resume_summaries"]
