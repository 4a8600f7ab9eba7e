"""The as-sent baseline (issue 39, part 2): each run's baseline replayed under
the policy its own agent ran, instead of its stored history sent whole.

A run's stored history is what its agent kept, not what it sent: SWE-agent's
default history processor sends the last 5 observations only, so replaying
the history whole overstates what such a run sent (and what compaction could
save). ``as_sent="auto"`` picks, per run that records its usage, the
candidate whose replayed prompt total is nearest the recorded one: no
processing (``none``), the last N observations (``last-N``, N = 1..10:
SWE-agent's ``last_n_observations``) and every preset; a run that records
nothing stays ``none`` (and says so). ``as_sent=POLICY`` forces one for every
run: ``none``, ``last-N``, ``own`` or anything ``Policy.load`` reads.

``own`` is the run's own compactions as it recorded them: the history sent
whole, except that a call after a Claude Code ``compact_boundary`` event is
sent only what follows the boundary (the summary Claude Code wrote and
after), as Claude Code sends it. ``auto`` tries it, after the others, for a
run that has such a boundary.

A candidate is replayed without summaries (the run's own are left out, as
every replay leaves them) and acting when its ``acts`` says; one that acts
only as a summary runs (``aggressive``) acts at every call here, since no
summary runs. Its calls are the replay's calls one for one (the same walk),
so each call's baseline prompt and cached tokens become the candidate's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionError, ConfigError
from ctxcompact.policy import PRESETS, Policy
from ctxcompact.scans.overflow import Limits

#: The label of the run's own compactions (Claude Code's ``compact_boundary``).
OWN = "own"

#: The N of the ``last-N`` candidates ``auto`` tries.
KEEP = range(1, 11)

_LAST = re.compile(r"last[-_](\d+)")


def last_n(n: int) -> Policy:
    """SWE-agent's ``last_n_observations`` with ``n``: the ``swe-agent``
    preset keeping the ``n`` newest observations."""
    return Policy.load({"preset": "swe-agent", "keep_recent": n})


def candidates() -> dict[str, Policy | None]:
    """What ``auto`` tries, in order (the first wins a tie): ``none``, every
    preset, then ``last-N`` for N in ``KEEP`` unless a preset is that policy
    (``last-5`` is ``swe-agent``)."""
    out: dict[str, Policy | None] = {"none": None, **PRESETS}
    for n in KEEP:
        policy = last_n(n)
        if policy not in out.values():
            out[f"last-{n}"] = policy
    return out


@dataclass(frozen=True)
class AsSent:
    """A parsed ``as_sent``: ``auto``, or one policy (``None``: sent whole)."""

    auto: bool
    label: str = "none"
    policy: Policy | None = None


def parse_as_sent(spec: Any, option: str = "as_sent") -> AsSent | SentBaseline | None:
    """``spec`` as an ``AsSent`` (``None``: no as-sent baseline, the history
    sent whole as before); a ``ConfigError`` naming ``option`` for one that
    does not parse."""
    if spec is None or isinstance(spec, (AsSent, SentBaseline)):
        return spec
    if isinstance(spec, Policy):
        return AsSent(False, spec.describe(), spec)
    if isinstance(spec, str):
        text = spec.strip()
        if text == "auto":
            return AsSent(True, "auto")
        if text == "none":
            return AsSent(False, "none", None)
        if text == OWN:
            return AsSent(False, OWN, None)
        if (m := _LAST.fullmatch(text)) is not None:
            n = int(m.group(1))
            if n < 1:
                raise ConfigError(f"{option}: {text!r}: N of last-N is at least 1",
                                  column=option)  # fmt: skip
            return AsSent(False, text, last_n(n))
    elif not isinstance(spec, Mapping):
        raise ConfigError(f"{option}: takes 'auto', 'none', 'own', 'last-N', a preset, a policy "
                          f"file, JSON or a Policy, got {type(spec).__name__}",
                          column=option)  # fmt: skip
    try:
        policy = Policy.load(spec)
    except ConfigError as e:
        raise ConfigError(
            f"{option}: {e} (or 'auto', 'none', 'own', 'last-N')", column=option
        ) from None
    return AsSent(False, policy.describe() if not isinstance(spec, str) else spec.strip(), policy)


def _replayed(table: pa.Table, policy: Policy, config: CompactionConfig, limits: Limits,
              system: str | None, schema: pa.Schema, facts: Any) -> pa.Table:  # fmt: skip
    """The calls of ``table`` under ``policy`` as sent: no summary, the policy
    acting when it acts (at every call if only a summary would make it)."""
    from ctxcompact.tuning.engine import engine_calls

    if policy.acts == "summary":
        policy = policy.model_copy(update={"acts": "call"})
    cfg = config.with_policy(policy).model_copy(
        update={"auto": False, "mask_first": False, "prune": True}
    )
    return engine_calls(table, cfg, limits, summarizer=None, system=system, schema=schema,
                        facts=facts, retention=False)  # fmt: skip


def _segments(table: pa.Table, facts: Any) -> tuple[pa.Table, dict[str, str]]:
    """``table`` with each session cut at its Claude Code ``compact_boundary``
    events (``formats.source.claude_code_compact_boundary``): the boundary and
    what follows are a session of their own (``<id>#own<k>``), so a call after
    it is sent only that. Also each new session's run."""
    from ctxcompact.formats.source import claude_code_compact_boundary
    from ctxcompact.tuning.engine import plain_strings

    sid = plain_strings(table.column("session_id")).to_pylist()
    cuts = [start for start, info in zip(facts.starts, facts.infos, strict=True)
            if info is not None and claude_code_compact_boundary(info.get("source"))]  # fmt: skip
    runs: dict[str, str] = {}
    if not cuts:
        return table, runs
    out: list[str] = []
    at, k, previous = 0, 0, None
    for row, s in enumerate(sid):
        if s != previous:
            k, previous = 0, s
        while at < len(cuts) and cuts[at] <= row:
            k += cuts[at] == row and sid[cuts[at]] == s
            at += 1
        name = f"{s}#own{k}" if k else s
        runs[name] = s
        out.append(name)
    index = table.schema.get_field_index("session_id")
    return table.set_column(index, pa.field("session_id", pa.string()),
                            pa.array(out, pa.string())), runs  # fmt: skip


def _boundaries(table: pa.Table) -> bool:
    """Whether any message of ``table`` is a Claude Code ``compact_boundary``
    (a cheap look at the JSON text before the parsed check in ``_segments``)."""
    if "message_json" not in table.column_names:
        return False
    return bool(
        pc.any(pc.match_substring(table.column("message_json"), "compact_boundary")).as_py()
    )


def _own_replayed(table: pa.Table, config: CompactionConfig, limits: Limits,
                  system: str | None, schema: pa.Schema, facts: Any) -> pa.Table:  # fmt: skip
    """The calls of ``table`` as the runs sent them, history whole but cut at
    their own compactions (``_segments``): one for one the replay's calls,
    each run's numbered on across its pieces."""
    from ctxcompact.tuning.engine import engine_calls, message_facts

    cut, runs = _segments(table, facts)
    plain = config.model_copy(update={"auto": False, "mask_first": False, "prune": False})
    calls = engine_calls(cut, plain, limits, summarizer=None, system=system, schema=schema,
                         facts=message_facts(cut) if runs else facts,
                         retention=False)  # fmt: skip
    if not runs:
        return calls
    names = calls["session_id"].to_pylist()
    number = calls["call"].to_pylist()

    def piece(name: str) -> int:
        return int(name.rpartition("#own")[2]) if name != runs[name] else 0

    order = sorted(range(len(names)), key=lambda i: (runs[names[i]], piece(names[i]), number[i]))
    calls = calls.take(pa.array(order, pa.int64()))
    names = [runs[n] for n in calls["session_id"].to_pylist()]
    numbered: list[int] = []
    seen: Counter[str] = Counter()
    for n in names:
        numbered.append(seen[n])
        seen[n] += 1
    for name, values, kind in (("session_id", names, pa.string()), ("call", numbered, None)):
        i = calls.schema.get_field_index(name)
        field = calls.schema.field(i)
        calls = calls.set_column(i, field, pa.array(values, kind or field.type))
    return calls


def _totals(calls: pa.Table, column: str) -> dict[str, int]:
    grouped = calls.group_by("session_id", use_threads=False).aggregate([(column, "sum")])
    return dict(zip(grouped["session_id"].to_pylist(), grouped[f"{column}_sum"].to_pylist(),
                    strict=True))  # fmt: skip


@dataclass(frozen=True)
class SentBaseline:
    """Each run's as-sent choice, made once (``choose_baseline``), and the
    baseline it gives every call of the runs not sent whole: what a replay
    of any policy over those runs takes as its baseline (``apply``), so a
    grid's points and a search's candidates share one choice per run.
    ``choices``: per run, as ``as_sent_baseline`` reports them; ``tokens``:
    per (session, call), the baseline's prompt and cached tokens;
    ``method``: the estimate method they were counted with."""

    choices: tuple[dict[str, Any], ...]
    tokens: Mapping[tuple[str, int], tuple[int, int]]
    method: str

    def counted(self, config: CompactionConfig) -> CompactionConfig:
        """``config`` counting as the baseline was counted (a replay's
        prompts and its baseline in one count); a method set otherwise
        (``--method``, the config's) is a ``ConfigError`` naming ``as_sent``."""
        if config.estimate_method == self.method:
            return config
        if config.sources().get("estimate_method", "default") != "default":
            raise ConfigError(f"as_sent: the baseline was counted with {self.method}, the "
                              f"config sets estimate_method {config.estimate_method}: "
                              "choose it under this config", column="as_sent")  # fmt: skip
        return config.model_copy(update={"estimate_method": self.method})

    def apply(self, calls: pa.Table) -> tuple[pa.Table, list[dict[str, Any]]]:
        """``calls`` (``CALL_SCHEMA``) with each call's baseline the as-sent
        one, and the choices of the runs in ``calls``. A run the choice was
        not made for, or whose calls are not the ones it was made over, is a
        ``CompactionError`` (the walk is the same: its calls are one for one)."""
        by_id = {c["session_id"]: c for c in self.choices}
        sessions = calls["session_id"].to_pylist()
        every = Counter(sessions)
        if missing := [s for s in every if s not in by_id]:
            raise CompactionError(f"as-sent baseline: no choice was made for session "
                                  f"{missing[0]!r} ({len(missing)} such run(s))",
                                  session_id=str(missing[0]),
                                  column="as_sent")  # fmt: skip
        swapped = Counter(s for s, _ in self.tokens)
        want = {s: every[s] for s in every if by_id[s]["as_sent"] != "none"}
        have = {s: swapped[s] for s in want}
        if want != have:  # the same walk: its calls are the replay's one for one
            raise CompactionError(f"as-sent replay: the calls differ from the replay's "
                                  f"({have} against {want})")  # fmt: skip
        base_prompt: list[int] = []
        base_cached: list[int] = []
        for s, c, p, k in zip(sessions, calls["call"].to_pylist(),
                              calls["baseline_prompt_tokens"].to_pylist(),
                              calls["baseline_cached_tokens"].to_pylist(),
                              strict=True):  # fmt: skip
            p, k = self.tokens.get((s, c), (p, k))
            base_prompt.append(p)
            base_cached.append(k)
        for name, values in (("baseline_prompt_tokens", base_prompt),
                             ("baseline_cached_tokens", base_cached)):  # fmt: skip
            i = calls.schema.get_field_index(name)
            calls = calls.set_column(i, calls.schema.field(i), pa.array(values, pa.int64()))
        return calls, [by_id[s] for s in every]


def _fitted(table: pa.Table, got: pa.Table, facts: Any, prompt: str,
            cached: str) -> dict[str, tuple[float, int]]:  # fmt: skip
    """Per run with recorded calls, ``got``'s ``prompt`` column calibrated to
    the run's recorded usage (``tuning.calibrated``): the median per-call
    error after the fit, and the calibrated total (what ``replay(...,
    calibrate=True)`` would report for that candidate). A fit with an
    intercept matches any candidate's total to the recorded one, so the
    error per call, not the total, tells the candidates apart."""
    from ctxcompact.tuning.calibrated import calibrate_calls

    for name, source in (("baseline_prompt_tokens", prompt), ("baseline_cached_tokens", cached)):
        i = got.schema.get_field_index(name)
        got = got.set_column(i, got.schema.field(i), got[source])
    out, fits = calibrate_calls(table, got, facts, None)
    totals = _totals(out, "baseline_prompt_tokens")
    return {s: (f["residual_p95"], totals[s]) for s, f in fits.items()
            if f["residual_p95"] is not None}  # fmt: skip


def choose_baseline(
    table: pa.Table,
    calls: pa.Table,
    recorded: list[dict[str, Any]],
    as_sent: AsSent,
    config: CompactionConfig,
    limits: Limits,
    system: str | None,
    calibrated: bool = False,
) -> SentBaseline:
    """Each run of ``calls`` (a replay of ``table``, ``CALL_SCHEMA``): the
    policy it was sent with and the baseline of its calls under it. Per run:
    ``session_id``, ``as_sent`` (the label), ``as_sent_reason`` (``auto``:
    nearest the recorded prompt total; ``auto, nothing recorded``; ``given``),
    ``as_sent_prompt_tokens`` and ``recorded_prompt_tokens``. ``calibrated``:
    ``auto`` picks, for a run with per-call records, the candidate whose
    calls fit the recorded ones best once calibrated (the least median
    per-call error, ``_fitted``), and reports its calibrated total (reason
    ``auto, calibrated``)."""
    from ctxcompact.tuning.engine import message_facts, plain_strings

    sent_whole = _totals(calls, "baseline_prompt_tokens")
    ids = list(sent_whole)
    by_id = {r["session_id"]: r.get("recorded_prompt_tokens") for r in recorded}
    tried = candidates() if as_sent.auto else {as_sent.label: as_sent.policy}
    replayed_ids = [s for s in ids if by_id.get(s) is not None] if as_sent.auto else ids
    if as_sent.auto and replayed_ids and _boundaries(table):
        tried[OWN] = None  # last: a tie goes to the others
    totals: dict[str, dict[str, int]] = {"none": sent_whole}
    per_call: dict[str, pa.Table] = {}
    errors: dict[str, dict[str, tuple[float, int]]] = {}
    if replayed_ids:
        sid = plain_strings(table.column("session_id"))
        subset = table.filter(pc.is_in(sid, pa.array(replayed_ids, pa.string())))
        facts = message_facts(subset)
        for label, policy in tried.items():
            if policy is None:
                continue
            got = _replayed(subset, policy, config, limits, system, calls.schema, facts)
            per_call[label] = got
            totals[label] = _totals(got, "prompt_tokens")
        if OWN in tried:
            got = _own_replayed(subset, config, limits, system, calls.schema, facts)
            per_call[OWN] = got
            totals[OWN] = _totals(got, "prompt_tokens")
        if calibrated and as_sent.auto:
            whole = calls.filter(pc.is_in(calls["session_id"], pa.array(replayed_ids, pa.string())))
            errors["none"] = _fitted(subset, whole, facts, "baseline_prompt_tokens",
                                     "baseline_cached_tokens")  # fmt: skip
            for label, got in per_call.items():
                errors[label] = _fitted(subset, got, facts, "prompt_tokens", "cached_tokens")
    choices: list[dict[str, Any]] = []
    chosen: dict[str, str] = {}
    for s in ids:
        recorded_prompt = by_id.get(s)
        if not as_sent.auto:
            label, reason = as_sent.label, "given"
        elif recorded_prompt is None:
            label, reason = "none", "auto, nothing recorded"
        elif any(s in e for e in errors.values()):
            label = min((name for name in tried if s in errors.get(name, {})),
                        key=lambda name: errors[name][s][0])  # fmt: skip
            reason = "auto, calibrated"
        else:
            label = min((name for name in tried if s in totals.get(name, {})),
                        key=lambda name: abs(totals[name][s] - recorded_prompt))  # fmt: skip
            reason = "auto"
        chosen[s] = label
        prompt = totals[label][s] if label in totals else sent_whole[s]
        if reason == "auto, calibrated":
            prompt = errors[label][s][1]
        choices.append({"session_id": s, "as_sent": label, "as_sent_reason": reason,
                        "as_sent_prompt_tokens": prompt,
                        "recorded_prompt_tokens": recorded_prompt})  # fmt: skip
    # Each call's baseline: the chosen replay's prompt and cached tokens.
    tokens: dict[tuple[str, int], tuple[int, int]] = {}
    for label, got in per_call.items():
        for s, c, p, k in zip(got["session_id"].to_pylist(), got["call"].to_pylist(),
                              got["prompt_tokens"].to_pylist(), got["cached_tokens"].to_pylist(),
                              strict=True):  # fmt: skip
            if chosen.get(s) == label:
                tokens[(s, c)] = (p, k)
    return SentBaseline(tuple(choices), tokens, config.estimate_method)


def as_sent_baseline(
    table: pa.Table,
    calls: pa.Table,
    recorded: list[dict[str, Any]],
    as_sent: AsSent | SentBaseline,
    config: CompactionConfig,
    limits: Limits,
    system: str | None,
    calibrated: bool = False,
) -> tuple[pa.Table, list[dict[str, Any]]]:
    """``calls`` (``CALL_SCHEMA``) with each run's baseline replayed under
    its as-sent policy, and per run what was chosen and why
    (``choose_baseline``); a ``SentBaseline`` already chosen is applied as it is."""
    if not isinstance(as_sent, SentBaseline):
        as_sent = choose_baseline(table, calls, recorded, as_sent, config, limits, system,
                                  calibrated)  # fmt: skip
    return as_sent.apply(calls)


__all__ = [
    "KEEP",
    "OWN",
    "AsSent",
    "SentBaseline",
    "as_sent_baseline",
    "candidates",
    "choose_baseline",
    "last_n",
    "parse_as_sent",
]
