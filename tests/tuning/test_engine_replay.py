"""Replay in the engine (issue 38, part 3, first step) against the live walk.

``replay()`` sends the table to the core (``tuning.engine``), which walks
every session call by call and leaves the sessions a summary needs to
``replay_session``, the live lifecycle walked message by message. That walk
stays the oracle: the engine's per-call table must equal it call for call,
every column, on every corpus in ../shared/data and on generated runs. No
drift of the old walk was found, so none is excused here: a difference is a
bug of the engine.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.models import MessageWithParts
from ctxcompact.policy import Policy
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.transcript import Transcript
from ctxcompact.tuning import walk as live_walk
from ctxcompact.tuning.replay import CALL_SCHEMA, check_config, replay, replay_session
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CORPORA = {
    "swe-agent": DATA / "transcripts" / "swe-agent",
    "mini-swe-agent": DATA / "transcripts" / "mini-swe-agent",
    "openhands": DATA / "transcripts" / "openhands",
    "tau-bench": DATA / "transcripts" / "tau-bench",
    "claude-code": DATA / "formats" / "claude-code",
}
PRESETS = ["opencode", "swe-agent", "anthropic-clear-tool-uses", "aggressive", "cache-aware"]
#: Masks happen, summaries rarely; and summaries fire (the fallback).
MASKS = {"context": 32_000, "output": 4_000}
SUMMARIES = {"context": 12_000, "output": 2_000}
#: Sessions per corpus in the unit test (the old walk is slow: the whole
#: corpora are compared by the slow test below).
SESSIONS = 8


@cache
def corpus(name: str, sessions: int | None = SESSIONS) -> pa.Table:
    table = formats.read_sessions(CORPORA[name], on_error="skip").table
    if sessions is not None:
        ids = pc.unique(table.column("session_id")).to_pylist()[:sessions]
        table = table.filter(pc.is_in(table.column("session_id"), pa.array(ids)))
    # kept for the process (the cache above keeps the table, so its id is never reused)
    KEPT[id(table)] = WalkInputs(table)
    return table


class WalkInputs:
    """What the walk reads of a table, the same for every policy: its sessions,
    and each message as the model reads it alone (``LiveRun.alone``: the run's
    session and the message, nothing of the policy), rendered once and handed
    to each walk as a copy. The whole corpora are walked for 16 policies and
    windows each: rendering these again for each took 40% of the walk's CPU
    (tau-bench's first 40 sessions, the 16 cases: 84 s, 50 s with them kept)."""

    def __init__(self, table: pa.Table) -> None:
        self.sessions = Transcript(table).to_sessions()
        self.alone: dict[tuple[str, str], list[dict[str, Any]]] = {}
        inputs = self

        class Run(live_walk.LiveRun):
            def alone(self, message: MessageWithParts) -> list[dict[str, Any]]:
                key = (self.session.id, message.id)
                if key not in inputs.alone:
                    inputs.alone[key] = super().alone(message)
                return copy.deepcopy(inputs.alone[key])

        self.run = Run


#: The corpora's walk inputs, by the id of the table (``corpus``).
KEPT: dict[int, WalkInputs] = {}


def walked(table: pa.Table, policy: Any, limits: dict[str, int], mask_first: bool,
           system: str | None = None) -> pa.Table:  # fmt: skip
    """Today's replay: every session through the live lifecycle
    (``replay_session``), a corpus's inputs kept across calls (``WalkInputs``)."""
    config = check_config({"mask_first": mask_first}, "replay").with_policy(Policy.load(policy))
    window = check_window(Limits.coerce(limits), config)
    inputs = KEPT.get(id(table)) or WalkInputs(table)
    with mock.patch.object(live_walk, "LiveRun", inputs.run):
        rows = [row for session in inputs.sessions
                for row in replay_session(session, config, window, system=system)]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=CALL_SCHEMA)


def assert_same(got: pa.Table, want: pa.Table) -> None:
    assert got.num_rows == want.num_rows
    for a, b in zip(got.to_pylist(), want.to_pylist(), strict=True):
        assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert got.equals(want)


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("mask_first", [False, True])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", list(CORPORA))
def test_the_engine_equals_the_live_walk_on_every_corpus(name: str, preset: str,
                                                         mask_first: bool) -> None:  # fmt: skip
    table = corpus(name)
    for limits in (MASKS, SUMMARIES):
        got = replay(table, preset, limits=limits, config={"mask_first": mask_first}).calls
        assert_same(got, walked(table, preset, limits, mask_first))


#: The whole corpora's cases: each preset under both windows, ``mask_first``
#: alternating so that every pair of values of two of the three (preset,
#: window, mask_first) is walked on every session (pairwise: 8 cases a corpus
#: instead of the 16 of the full cross, which the test above walks on each
#: corpus's first sessions).
WHOLE = [
    pytest.param(preset, (n + w) % 2 == 1, limits, id=f"{preset}-{(n + w) % 2 == 1}-{name}")
    for n, preset in enumerate(PRESETS[:4])
    for w, (name, limits) in enumerate((("masks", MASKS), ("summaries", SUMMARIES)))
]


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize(("preset", "mask_first", "limits"), WHOLE)
@pytest.mark.parametrize("name", list(CORPORA))
def test_the_engine_equals_the_live_walk_on_the_whole_corpora(
    name: str, preset: str, mask_first: bool, limits: dict[str, int]
) -> None:
    """Every session of every corpus (the test above takes the first few):
    one case per corpus and ``WHOLE`` case, so xdist spreads the walk
    (tau-bench's 200 sessions take ~20 s of CPU a case) over the cores; each
    test process reads a corpus once."""
    table = corpus(name, None)
    got = replay(table, preset, limits=limits, config={"mask_first": mask_first}).calls
    assert_same(got, walked(table, preset, limits, mask_first))


def test_the_whole_corpora_cases_cover_every_pair() -> None:
    cases = [(preset, mask_first, id(limits)) for preset, mask_first, limits in
             (p.values for p in WHOLE)]  # fmt: skip
    values = (PRESETS[:4], [False, True], [id(MASKS), id(SUMMARIES)])
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert {(c[i], c[j]) for c in cases} == {(a, b) for a in values[i] for b in values[j]}


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
def test_the_corpora_exercise_masks_summaries_and_retention() -> None:
    """The contexts above do what they are there for."""
    swe = corpus("swe-agent")
    masked = replay(swe, "swe-agent", limits=MASKS, config={"mask_first": True}).calls
    assert pc.sum(masked["removed_facts"]).as_py() > 0
    assert pc.sum(masked["compacted"]).as_py() == 0
    summarized = replay(swe, "opencode", limits=SUMMARIES).calls
    assert pc.sum(summarized["compacted"]).as_py() > 0


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
def test_a_system_prompt_and_the_render_options() -> None:
    """The system message, thinking kept for the newest steps, cut outputs,
    cleared inputs and described placeholders: each changes which prefix is
    cached and which calls are scored."""
    table = corpus("openhands")
    policy = {"preset": "aggressive", "keep_thinking": 2, "truncate_output": 300,
              "clear_inputs": True, "placeholder": "describe"}  # fmt: skip
    for mask_first in (False, True):
        got = replay(table, policy, limits=MASKS, config={"mask_first": mask_first},
                     system="You are a careful agent.").calls  # fmt: skip
        assert_same(got, walked(table, policy, MASKS, mask_first, "You are a careful agent."))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    preset=st.sampled_from(PRESETS),
    mask_first=st.booleans(),
    context=st.sampled_from([6_000, 16_000, 64_000]),
    render=st.sampled_from([{}, {"keep_thinking": 1}, {"keep_thinking": 3, "clear_inputs": True},
                            {"truncate_output": 200}, {"placeholder": "describe"}]),
)  # fmt: skip
def test_the_engine_equals_the_live_walk_on_generated_runs(
    seed: int, preset: str, mask_first: bool, context: int, render: dict[str, Any]
) -> None:
    table = generate_table(2, 40, seed=seed, mean_output_chars=2_000)
    policy = {"preset": preset, **render}
    limits = {"context": context, "output": context // 8}
    got = replay(table, policy, limits=limits, config={"mask_first": mask_first}).calls
    assert_same(got, walked(table, policy, limits, mask_first))


def test_the_messages_a_call_masks_are_scored_as_they_were_appended() -> None:
    """A call whose mask clears an output of a message appended since the
    previous call: the live walk compares with that message as appended
    (uncleared), so the output is among the facts removed."""
    table = generate_table(3, 60, seed=288, mean_output_chars=2_000)
    limits = {"context": 6_000, "output": 750}
    got = replay(table, "swe-agent", limits=limits, config={"mask_first": True}).calls
    want = walked(table, "swe-agent", limits, True)
    assert_same(got, want)
    assert pc.sum(want["removed_facts"]).as_py() > 0


def no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live walk of whole sessions fails the test: the engine resumes
    summaries in the core (``tuning.resume``)."""
    import ctxcompact.tuning.engine as engine

    def walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a session was walked whole")

    monkeypatch.setattr(engine, "replay_session", walk)


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("mask_first", [False, True])
@pytest.mark.parametrize("name", list(CORPORA))
def test_summaries_are_resumed_in_the_core_as_the_walk_makes_them(
        name: str, mask_first: bool, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """No session where a summary fires is walked whole, and its calls are
    the walk's, call for call (summaries, their cache prefix, the retention
    across them)."""
    table = corpus(name)
    want = {p: walked(table, p, SUMMARIES, mask_first) for p in ("opencode", "swe-agent")}
    no_walk(monkeypatch)
    for preset in ("opencode", "swe-agent"):
        got = replay(table, preset, limits=SUMMARIES, config={"mask_first": mask_first}).calls
        assert_same(got, want[preset])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# cache-aware counts the calls of the whole stored session, before the summary too
@example(seed=945, preset="cache-aware", mask_first=False, context=9_000, render={})
@given(
    seed=st.integers(0, 10_000),
    preset=st.sampled_from(PRESETS),
    mask_first=st.booleans(),
    context=st.sampled_from([4_000, 6_000, 9_000]),
    render=st.sampled_from([{}, {"keep_thinking": 2, "clear_inputs": True},
                            {"truncate_output": 200, "placeholder": "describe"}]),
)  # fmt: skip
def test_runs_that_summarize_again_and_again_resume_as_the_walk(
    seed: int, preset: str, mask_first: bool, context: int, render: dict[str, Any]
) -> None:
    """Small windows: several summaries a session (the stalled guard too),
    each resumed in the core, equal to the walk call for call."""
    table = generate_table(3, 60, seed=seed, mean_output_chars=2_500)
    policy = {"preset": preset, **render}
    limits = {"context": context, "output": context // 8}
    want = walked(table, policy, limits, mask_first, "Be brief.")
    got = replay(table, policy, limits=limits, config={"mask_first": mask_first},
                 system="Be brief.").calls  # fmt: skip
    assert_same(got, want)


def test_model_summaries_resume_as_the_walk_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary written by a model (the summarizer's client) resumes in the
    core too: its tokens in and out, and the calls after it, as the walk's."""
    from ctxcompact.clients.base import SummaryRequest, SummaryResponse
    from ctxcompact.config import CompactionConfig
    from ctxcompact.live.summary import Summarizer
    from ctxcompact.tuning.replay import replay_session

    class Client:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            return SummaryResponse("## Session Summary\n" + "notes " * 80, "stop")

    table = generate_table(2, 50, seed=11, mean_output_chars=2_500)
    limits = {"context": 8_000, "output": 1_000}
    config = check_config({}, "replay").with_policy(Policy.load("opencode"))
    summarizer = Summarizer(Client(), config)
    window = check_window(Limits.coerce(limits), config)
    want = pa.Table.from_pylist([row for s in Transcript(table).to_sessions()
                                 for row in replay_session(s, config, window,
                                                           summarizer=summarizer)],
                                schema=CALL_SCHEMA)  # fmt: skip
    no_walk(monkeypatch)
    got = replay(table, "opencode", limits=limits, config=CompactionConfig(),
                 summarizer=summarizer).calls  # fmt: skip
    assert pc.sum(want["summary_input_tokens"]).as_py() > 0
    assert_same(got, want)


def test_model_summaries_that_keep_facts_resume_as_the_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Several model summaries a session, each keeping some of what it
    replaced (the first lines of the history it read, a system prompt
    before): the retention the core scores across them (the summary's text
    keeps facts, the facts stated before carry on) is the walk's, float for
    float."""
    from ctxcompact.clients.base import SummaryRequest, SummaryResponse
    from ctxcompact.config import CompactionConfig
    from ctxcompact.live.summary import Summarizer
    from ctxcompact.tuning.replay import replay_session

    class Client:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            lines = [line for m in request.messages[:-1]
                     for line in str(m.get("content") or "").splitlines()[:2]]  # fmt: skip
            return SummaryResponse("## Session Summary\n" + "\n".join(lines[::2][:40]), "stop")

    table = generate_table(3, 200, seed=5, mean_output_chars=2_500)
    limits = {"context": 6_000, "output": 750}
    config = check_config({"mask_first": True}, "replay").with_policy(Policy.load("swe-agent"))
    summarizer = Summarizer(Client(), config)
    window = check_window(Limits.coerce(limits), config)
    want = pa.Table.from_pylist([row for s in Transcript(table).to_sessions()
                                 for row in replay_session(s, config, window,
                                                           summarizer=summarizer,
                                                           system="Be brief.")],
                                schema=CALL_SCHEMA)  # fmt: skip
    no_walk(monkeypatch)
    got = replay(table, "swe-agent", limits=limits, config=CompactionConfig(mask_first=True),
                 summarizer=summarizer, system="Be brief.").calls  # fmt: skip
    summaries = pc.sum(pc.greater(want["summary_input_tokens"], 0)).as_py()
    assert summaries >= 2 * 3  # several a session
    summarized = want.filter(pc.greater(want["summary_input_tokens"], 0))
    assert pc.sum(summarized["kept_facts"]).as_py() > 0  # the summaries keep facts
    assert pc.min(want["retention"]).as_py() < 1.0
    assert_same(got, want)


def test_resuming_without_the_retention_carried_is_refused() -> None:
    """``replay_resume``'s carried retention: a session resumed after a
    summary without it, or something else in its place, is a typed error
    naming the session or the argument, not a retention scored from nothing."""
    import ctxcompact._core as _core
    from ctxcompact.errors import InvalidUsageError
    from ctxcompact.tuning.engine import message_facts

    table = generate_table(1, 12, seed=3)
    sid = table.column("session_id")[0].as_py()
    facts = message_facts(table)
    view = Policy.load("opencode").scan_options(method="opencode", overhead=4)
    options = {"system_tokens": 0, "threshold": None, "available": 0, "usable": None}
    state = ([0], [[]], [0], [0], [None], [False])
    first = _core.replay_resume(table, view, None, facts.created, facts.output, facts.call,
                                *state, **options)  # fmt: skip
    assert first[-1] is not None  # the handle of the next call
    resumed = ([3], [[False] * 3], [1], [100], [None], [False])
    with pytest.raises(InvalidUsageError, match=f'session "{sid}".*without the retention'):
        _core.replay_resume(table, view, None, facts.created, facts.output, facts.call,
                            *resumed, **options)  # fmt: skip
    with pytest.raises(InvalidUsageError, match="carried is a dict"):
        _core.replay_resume(table, view, None, facts.created, facts.output, facts.call,
                            *state, **options, carried={})  # fmt: skip
