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
run: ``none``, ``last-N``, or anything ``Policy.load`` reads.

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
        if (m := _LAST.fullmatch(text)) is not None:
            n = int(m.group(1))
            if n < 1:
                raise ConfigError(f"{option}: {text!r}: N of last-N is at least 1",
                                  column=option)  # fmt: skip
            return AsSent(False, text, last_n(n))
    elif not isinstance(spec, Mapping):
        raise ConfigError(f"{option}: takes 'auto', 'none', 'last-N', a preset, a policy file, "
                          f"JSON or a Policy, got {type(spec).__name__}",
                          column=option)  # fmt: skip
    try:
        policy = Policy.load(spec)
    except ConfigError as e:
        raise ConfigError(f"{option}: {e} (or 'auto', 'none', 'last-N')", column=option) from None
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


def choose_baseline(
    table: pa.Table,
    calls: pa.Table,
    recorded: list[dict[str, Any]],
    as_sent: AsSent,
    config: CompactionConfig,
    limits: Limits,
    system: str | None,
) -> SentBaseline:
    """Each run of ``calls`` (a replay of ``table``, ``CALL_SCHEMA``): the
    policy it was sent with and the baseline of its calls under it. Per run:
    ``session_id``, ``as_sent`` (the label), ``as_sent_reason`` (``auto``:
    nearest the recorded prompt total; ``auto, nothing recorded``; ``given``),
    ``as_sent_prompt_tokens`` and ``recorded_prompt_tokens``."""
    from ctxcompact.tuning.engine import message_facts, plain_strings

    sent_whole = _totals(calls, "baseline_prompt_tokens")
    ids = list(sent_whole)
    by_id = {r["session_id"]: r.get("recorded_prompt_tokens") for r in recorded}
    tried = candidates() if as_sent.auto else {as_sent.label: as_sent.policy}
    replayed_ids = [s for s in ids if by_id.get(s) is not None] if as_sent.auto else ids
    totals: dict[str, dict[str, int]] = {"none": sent_whole}
    per_call: dict[str, pa.Table] = {}
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
    choices: list[dict[str, Any]] = []
    chosen: dict[str, str] = {}
    for s in ids:
        recorded_prompt = by_id.get(s)
        if not as_sent.auto:
            label, reason = as_sent.label, "given"
        elif recorded_prompt is None:
            label, reason = "none", "auto, nothing recorded"
        else:
            label = min((name for name in tried if s in totals.get(name, {})),
                        key=lambda name: abs(totals[name][s] - recorded_prompt))  # fmt: skip
            reason = "auto"
        chosen[s] = label
        prompt = totals[label][s] if label in totals else sent_whole[s]
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
) -> tuple[pa.Table, list[dict[str, Any]]]:
    """``calls`` (``CALL_SCHEMA``) with each run's baseline replayed under
    its as-sent policy, and per run what was chosen and why
    (``choose_baseline``); a ``SentBaseline`` already chosen is applied as it is."""
    if not isinstance(as_sent, SentBaseline):
        as_sent = choose_baseline(table, calls, recorded, as_sent, config, limits, system)
    return as_sent.apply(calls)


__all__ = [
    "KEEP",
    "AsSent",
    "SentBaseline",
    "as_sent_baseline",
    "candidates",
    "choose_baseline",
    "last_n",
    "parse_as_sent",
]
